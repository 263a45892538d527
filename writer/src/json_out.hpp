// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file json_out.hpp
/// A buffered, streaming JSON text writer: the writer's only way to produce bytes.
///
/// Why hand-rolled: building a DOM (or an nlohmann::json per event) is 12-14x slower than
/// appending literal fragments and std::to_chars numbers to one buffer (measured on a 300 MB
/// Kineto trace: ~800 MB/s against ~60 MB/s). The buffer is flushed to a byte_sink whenever the
/// next piece would not fit, so memory stays constant for any trace size.
///
/// Internal to the writer library (namespace kinetoscope::detail); tests include it directly.

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "kinetoscope/formats/json_text.hpp"
#include "kinetoscope/writer/chrome_trace.hpp"

namespace kinetoscope::detail {

/// How a string is sanitised before it is escaped (the shared escaper's modes: `text`, or
/// `name` for Kineto's names and labels).
using formats::string_mode;
/// The validator of the shared JSON text helpers (kinetoscope/formats/json_text.hpp).
using formats::is_valid_json;

/// A byte_sink that appends to a std::string.
class string_sink final : public byte_sink {
 public:
  void write(const char* data, std::size_t size) override { text_.append(data, size); }
  std::string& text() noexcept { return text_; }

 private:
  std::string text_;
};

/**
 * Streams JSON text into a byte_sink through a fixed buffer (1 MB by default).
 *
 * Nothing checks the JSON grammar: the caller writes keys, commas and brackets itself with
 * raw()/lit(). What json_out guarantees is the lexical level: string() always produces a valid
 * JSON string of valid UTF-8, numbers are always valid JSON numbers (never NaN or Infinity),
 * and time_us() formats nanoseconds as microseconds with exactly three decimals using integer
 * arithmetic only.
 *
 * The destructor does not flush: call finish() after the last piece. (If an exception
 * unwinds past a json_out, the half-written document is simply abandoned.)
 *
 * **Example**:
 * @code
 * string_sink sink;
 * json_out out(sink);
 * out.lit("{\"ts\":"); out.time_us(1234567); out.lit(",\"name\":"); out.string("a\"b");
 * out.raw('}'); out.finish();   // sink.text() == R"({"ts":1234.567,"name":"a\"b"})"
 * @endcode
 */
class json_out {
 public:
  static constexpr std::size_t default_capacity = std::size_t{1} << 20;
  /// The smallest buffer accepted (every single number or escape fits in it).
  static constexpr std::size_t min_capacity = 64;

  explicit json_out(byte_sink& sink, std::size_t capacity = default_capacity);
  json_out(const json_out&) = delete;
  json_out& operator=(const json_out&) = delete;
  ~json_out() = default;

  /// Appends `s` unchanged (the caller guarantees it is valid JSON text).
  void raw(std::string_view s) {
    if (s.size() <= cap_ - pos_) [[likely]] {
      std::memcpy(buf_.get() + pos_, s.data(), s.size());
      pos_ += s.size();
    } else {
      raw_slow(s);
    }
  }
  void raw(char c) {
    if (pos_ == cap_) [[unlikely]]
      flush();
    buf_[pos_++] = c;
  }
  /// Appends a string literal unchanged (length known at compile time).
  template <std::size_t N>
  void lit(const char (&s)[N]) {
    raw(std::string_view(s, N - 1));
  }

  /// Appends `s` as a quoted JSON string (escaped, sanitised per `mode`, invalid UTF-8 bytes
  /// replaced by U+FFFD): formats::escape_some, the project's one JSON string escaper.
  void string(std::string_view s, string_mode mode = string_mode::text) {
    raw('"');
    string_body(s, mode);
    raw('"');
  }
  /// The same without the surrounding quotes (to build one string from several pieces).
  void string_body(std::string_view s, string_mode mode = string_mode::text);

  /// Decimal integer.
  void int64(std::int64_t v) {
    char* p = reserve(24);
    pos_ = static_cast<std::size_t>(std::to_chars(p, buf_.get() + cap_, v).ptr - buf_.get());
  }
  void uint64(std::uint64_t v) {
    char* p = reserve(24);
    pos_ = static_cast<std::size_t>(std::to_chars(p, buf_.get() + cap_, v).ptr - buf_.get());
  }
  /// Shortest round-trip decimal form; `0` for NaN and infinities (JSON has neither).
  void float64(double v) {
    if (!std::isfinite(v)) [[unlikely]]
      v = 0;
    char* p = reserve(32);
    pos_ = static_cast<std::size_t>(std::to_chars(p, buf_.get() + cap_, v).ptr - buf_.get());
  }
  /// Nanoseconds as microseconds with exactly three decimals ("1234.567"); negative values
  /// are clamped to "0.000". Integer arithmetic only: no rounding, no float.
  void time_us(std::int64_t ns) {
    if (ns < 0) ns = 0;
    char* p = reserve(32);
    char* e = std::to_chars(p, buf_.get() + cap_, ns / 1000).ptr;
    const auto frac = static_cast<unsigned>(ns % 1000);
    e[0] = '.';
    e[1] = static_cast<char>('0' + frac / 100);
    e[2] = static_cast<char>('0' + frac / 10 % 10);
    e[3] = static_cast<char>('0' + frac % 10);
    pos_ = static_cast<std::size_t>(e + 4 - buf_.get());
  }

  /// Hands the buffered bytes to the sink.
  void flush();
  /// flush() and then sink.finish(): the document is complete.
  void finish();
  /// Bytes produced so far (flushed and still buffered).
  std::uint64_t bytes_written() const noexcept { return flushed_ + pos_; }
  std::size_t capacity() const noexcept { return cap_; }

 private:
  /// Room for `n` bytes (n <= min_capacity) at the returned position.
  char* reserve(std::size_t n) {
    if (cap_ - pos_ < n) [[unlikely]]
      flush();
    return buf_.get() + pos_;
  }
  void raw_slow(std::string_view s);

  byte_sink& sink_;
  std::unique_ptr<char[]> buf_;
  std::size_t cap_;
  std::size_t pos_ = 0;
  std::uint64_t flushed_ = 0;
};

/// `s` as a quoted JSON string (json_out::string into a std::string).
std::string quote_json(std::string_view s, string_mode mode = string_mode::text);

/// `ns` formatted as json_out::time_us does.
std::string format_time_us(std::int64_t ns);

}  // namespace kinetoscope::detail
