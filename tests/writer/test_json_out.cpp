// SPDX-License-Identifier: BSD-3-Clause
// json_out: escaping and sanitising, ns -> µs formatting, numbers, buffering, the validator.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "json_out.hpp"

using kinetoscope::detail::format_time_us;
using kinetoscope::detail::is_valid_json;
using kinetoscope::detail::json_out;
using kinetoscope::detail::quote_json;
using kinetoscope::detail::string_mode;
using kinetoscope::detail::string_sink;

namespace {

/// Records every write() so tests can see how the buffer was flushed.
class recording_sink final : public kinetoscope::byte_sink {
 public:
  void write(const char* data, std::size_t size) override {
    text.append(data, size);
    writes.push_back(size);
  }
  void finish() override { ++finishes; }
  std::string text;
  std::vector<std::size_t> writes;
  int finishes = 0;
};

const std::string fffd = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

std::string number_text(void (*emit)(json_out&)) {
  string_sink sink;
  json_out out(sink);
  emit(out);
  out.finish();
  return sink.text();
}

}  // namespace

TEST_CASE("json_out: quotes and backslashes are escaped") {
  CHECK(quote_json("plain text") == "\"plain text\"");
  CHECK(quote_json("") == "\"\"");
  CHECK(quote_json("a\"b") == R"("a\"b")");
  CHECK(quote_json("a\\b") == R"("a\\b")");
  CHECK(quote_json("/slash/") == "\"/slash/\"");
}

TEST_CASE("json_out: control characters are escaped") {
  CHECK(quote_json("a\nb") == R"("a\nb")");
  CHECK(quote_json("a\tb") == R"("a\tb")");
  CHECK(quote_json("a\rb") == R"("a\rb")");
  CHECK(quote_json("\b\f") == R"("\b\f")");
  CHECK(quote_json("\x01") == R"("\u0001")");
  CHECK(quote_json("\x1f") == R"("\u001f")");
  CHECK(quote_json("\x7f") == R"("\u007f")");
  CHECK(quote_json(std::string_view("a\0b", 3)) == R"("a\u0000b")");
}

TEST_CASE("json_out: name mode turns backslashes into slashes and deletes newlines") {
  CHECK(quote_json("C:\\work\\train.py", string_mode::name) == "\"C:/work/train.py\"");
  CHECK(quote_json("two\nlines\r\n", string_mode::name) == "\"twolines\"");
  CHECK(quote_json("tab\there\"", string_mode::name) == R"("tab\there\"")");
}

TEST_CASE("json_out: valid UTF-8 passes unchanged") {
  const std::string text = "\xC2\xB5s \xE2\x82\xAC \xF0\x9F\x98\x80 \xEF\xBF\xBF \xF4\x8F\xBF\xBF";
  CHECK(quote_json(text) == "\"" + text + "\"");
}

TEST_CASE("json_out: invalid UTF-8 becomes U+FFFD") {
  CHECK(quote_json("a\xFF"
                   "b") == "\"a" + fffd + "b\"");
  CHECK(quote_json("\x80") == "\"" + fffd + "\"");                        // stray continuation
  CHECK(quote_json("\xC0\xAF") == "\"" + fffd + fffd + "\"");             // overlong '/'
  CHECK(quote_json("\xE2\x82") == "\"" + fffd + "\"");                    // truncated at the end
  CHECK(quote_json("\xE2\x82x") == "\"" + fffd + "x\"");                  // truncated sequence
  CHECK(quote_json("\xED\xA0\x80") == "\"" + fffd + fffd + fffd + "\"");  // UTF-16 surrogate
  CHECK(quote_json("\xF4\x90\x80\x80") == "\"" + fffd + fffd + fffd + fffd + "\"");  // > U+10FFFF
  CHECK(quote_json("\xF0\x9F\x98") == "\"" + fffd + "\"");
  CHECK(quote_json("\xF5\x80") == "\"" + fffd + fffd + "\"");
}

TEST_CASE("json_out: random byte strings always give valid JSON that round-trips") {
  std::mt19937 rng(12345);
  // Pieces: ASCII, escapes, valid multi-byte sequences, and garbage bytes.
  const std::vector<std::string> valid_pieces = {
      "a",  "Z",    " ",    "\"",       "\\",           "\n",
      "\t", "\x01", "\x7f", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
      "/",  "{",    "}"};
  for (int round = 0; round < 300; ++round) {
    std::string valid;
    const int n = static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) valid += valid_pieces[rng() % valid_pieces.size()];
    const std::string quoted = quote_json(valid);
    CHECK(is_valid_json(quoted));
    CHECK(nlohmann::json::parse(quoted).get<std::string>() == valid);

    std::string garbage;
    const int m = static_cast<int>(rng() % 40);
    for (int k = 0; k < m; ++k) garbage += static_cast<char>(rng() % 256);
    const std::string g = quote_json(garbage);
    CHECK(is_valid_json(g));
    CHECK(nlohmann::json::accept(g));
    const std::string gname = quote_json(garbage, string_mode::name);
    CHECK(nlohmann::json::accept(gname));
    CHECK(gname.find('\n') == std::string::npos);
  }
}

TEST_CASE("json_out: nanoseconds are written as microseconds with exactly three decimals") {
  CHECK(format_time_us(1234567) == "1234.567");
  CHECK(format_time_us(5000) == "5.000");
  CHECK(format_time_us(7) == "0.007");
  CHECK(format_time_us(0) == "0.000");
  CHECK(format_time_us(999) == "0.999");
  CHECK(format_time_us(1000) == "1.000");
  CHECK(format_time_us(-1) == "0.000");
  CHECK(format_time_us(-123456789) == "0.000");
  CHECK(format_time_us(86400000000000) == "86400000000.000");
  CHECK(format_time_us(std::numeric_limits<std::int64_t>::max()) == "9223372036854775.807");
}

TEST_CASE("json_out: integers") {
  CHECK(number_text([](json_out& o) { o.int64(0); }) == "0");
  CHECK(number_text([](json_out& o) { o.int64(-42); }) == "-42");
  CHECK(number_text([](json_out& o) { o.int64(std::numeric_limits<std::int64_t>::min()); }) ==
        "-9223372036854775808");
  CHECK(number_text([](json_out& o) { o.int64(std::numeric_limits<std::int64_t>::max()); }) ==
        "9223372036854775807");
  CHECK(number_text([](json_out& o) { o.uint64(std::numeric_limits<std::uint64_t>::max()); }) ==
        "18446744073709551615");
}

TEST_CASE("json_out: floats are shortest round-trip and always finite") {
  CHECK(number_text([](json_out& o) { o.float64(0.5); }) == "0.5");
  CHECK(number_text([](json_out& o) { o.float64(0.0); }) == "0");
  CHECK(number_text([](json_out& o) { o.float64(2.0); }) == "2");
  CHECK(number_text([](json_out& o) { o.float64(16384.0 / 15000.0); }) == "1.0922666666666667");
  CHECK(number_text([](json_out& o) { o.float64(std::nan("")); }) == "0");
  CHECK(number_text([](json_out& o) { o.float64(std::numeric_limits<double>::infinity()); }) ==
        "0");
  CHECK(number_text([](json_out& o) { o.float64(-std::numeric_limits<double>::infinity()); }) ==
        "0");
  const double values[] = {1e300,
                           -2.5e-300,
                           0.1,
                           1.0 / 3.0,
                           0.074074,
                           123456789.125,
                           std::numeric_limits<double>::denorm_min()};
  for (const double v : values) {
    string_sink sink;
    json_out out(sink);
    out.float64(v);
    out.finish();
    CHECK(is_valid_json(sink.text()));
    CHECK(nlohmann::json::parse(sink.text()).get<double>() == v);
  }
}

TEST_CASE("json_out: output crosses the 1 MB buffer boundary intact") {
  recording_sink sink;
  std::string expected;
  {
    json_out out(sink);
    CHECK(out.capacity() == json_out::default_capacity);
    out.raw('[');
    expected += '[';
    for (int i = 0; i < 200000; ++i) {
      if (i != 0) {
        out.raw(',');
        expected += ',';
      }
      out.lit("{\"i\":");
      out.int64(i);
      out.lit(",\"ts\":");
      out.time_us(std::int64_t{i} * 1001);
      out.lit(",\"s\":");
      out.string("q\"\xC3\xA9");
      out.raw('}');
      expected += "{\"i\":" + std::to_string(i) +
                  ",\"ts\":" + format_time_us(std::int64_t{i} * 1001) + ",\"s\":\"q\\\"\xC3\xA9\"}";
    }
    out.raw(']');
    expected += ']';
    CHECK(out.bytes_written() == expected.size());
    CHECK(sink.writes.size() >= 2);  // flushed before finish()
    out.finish();
  }
  CHECK(expected.size() > 3 * json_out::default_capacity);
  CHECK(sink.finishes == 1);
  CHECK(sink.text == expected);
  for (const std::size_t w : sink.writes) CHECK(w <= json_out::default_capacity);
  CHECK(nlohmann::json::parse(sink.text).size() == 200000);
}

TEST_CASE("json_out: pieces larger than the buffer, split escapes and UTF-8 sequences") {
  // A tiny buffer forces flushes inside strings, escapes and multi-byte sequences; the result
  // must equal the one of a big buffer byte for byte.
  std::string text;
  for (int i = 0; i < 5000; ++i) {
    text += "ab\"\\\n\x01\xE2\x82\xAC\xF0\x9F\x98\x80\xFF";
    text += static_cast<char>('a' + i % 26);
  }
  const std::string reference = quote_json(text);
  for (const std::size_t cap :
       {std::size_t{1}, std::size_t{64}, std::size_t{67}, std::size_t{1000}}) {
    recording_sink sink;
    json_out out(sink, cap);
    CHECK(out.capacity() == std::max(cap, json_out::min_capacity));
    out.string(text);
    out.raw(std::string(3 * out.capacity() + 5, ' '));  // raw piece larger than the buffer
    out.finish();
    CHECK(sink.text == reference + std::string(3 * out.capacity() + 5, ' '));
    for (const std::size_t w : sink.writes) CHECK(w <= out.capacity());
  }
  CHECK(nlohmann::json::parse(reference).is_string());
}

TEST_CASE("json_out: nothing is written before flush, finish reaches the sink once") {
  recording_sink sink;
  json_out out(sink);
  out.lit("{}");
  CHECK(sink.text.empty());
  out.flush();
  CHECK(sink.text == "{}");
  CHECK(sink.finishes == 0);
  out.finish();
  CHECK(sink.finishes == 1);
  CHECK(out.bytes_written() == 2);
}

TEST_CASE("json_out: is_valid_json accepts JSON values and rejects everything else") {
  for (const char* ok : {"1", "-0.5e+10", "\"x\"", "true", "false", "null", "[]", "{}",
                         " {\"a\": [1, 2, {\"b\": null}], \"c\": \"\\u00e9\\ud83d\\ude00\"} ",
                         "\"\xC3\xA9\"", "[\"\\/\\b\\f\\n\\r\\t\"]"}) {
    CAPTURE(ok);
    CHECK(is_valid_json(ok));
  }
  for (const char* bad :
       {"",         " ",   "{",     "[1,]",   "{\"a\" 1}", "{\"a\":1,}",  "01",
        "1.",       ".5",  "+1",    "1e",     "tru",       "nul",         "NaN",
        "Infinity", "'x'", "\"a",   "\"\t\"", "\"\\x\"",   "\"\\ud800\"", "\"\\udc00\"",
        "\"\xFF\"", "1 2", "[1] x", "{1: 2}"}) {
    CAPTURE(bad);
    CHECK_FALSE(is_valid_json(bad));
  }
  CHECK(is_valid_json(std::string(500, '[') + std::string(500, ']')));
  CHECK_FALSE(is_valid_json(std::string(100000, '[') + std::string(100000, ']')));  // depth
}
