// SPDX-License-Identifier: BSD-3-Clause
/// @file json_out.cpp
/// Buffer management of json_out.hpp; the escaping is formats::escape_some (json_text.hpp).

#include "json_out.hpp"

#include <algorithm>

namespace kinetoscope::detail {

json_out::json_out(byte_sink& sink, std::size_t capacity)
    : sink_(sink), cap_(std::max(capacity, min_capacity)) {
  buf_ = std::make_unique_for_overwrite<char[]>(cap_);
}

void json_out::flush() {
  if (pos_ == 0) return;
  sink_.write(buf_.get(), pos_);
  flushed_ += pos_;
  pos_ = 0;
}

void json_out::finish() {
  flush();
  sink_.finish();
}

void json_out::raw_slow(std::string_view s) {
  while (!s.empty()) {
    if (pos_ == cap_) flush();
    const std::size_t n = std::min(cap_ - pos_, s.size());
    std::memcpy(buf_.get() + pos_, s.data(), n);
    pos_ += n;
    s.remove_prefix(n);
  }
}

void json_out::string_body(std::string_view s, string_mode mode) {
  const char* src = s.data();
  const char* end = src + s.size();
  while (src < end) {
    if (cap_ - pos_ < formats::max_escape_unit) flush();
    char* d = buf_.get() + pos_;
    src = formats::escape_some(src, end, d, buf_.get() + cap_, mode);
    pos_ = static_cast<std::size_t>(d - buf_.get());
  }
}

std::string quote_json(std::string_view s, string_mode mode) {
  string_sink sink;
  json_out out(sink, json_out::min_capacity);
  out.string(s, mode);
  out.finish();
  return std::move(sink.text());
}

std::string format_time_us(std::int64_t ns) {
  string_sink sink;
  json_out out(sink, json_out::min_capacity);
  out.time_us(ns);
  out.finish();
  return std::move(sink.text());
}

}  // namespace kinetoscope::detail
