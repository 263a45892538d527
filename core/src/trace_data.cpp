// SPDX-License-Identifier: BSD-3-Clause
#include "kinetoscope/trace_data.hpp"

#include <ctime>

namespace kinetoscope {

std::uint32_t trace_data::intern(std::string_view s) {
  if (strings.empty()) strings.emplace_back();
  for (std::size_t i = 0; i < strings.size(); ++i)
    if (strings[i] == s) return static_cast<std::uint32_t>(i);
  strings.emplace_back(s);
  return static_cast<std::uint32_t>(strings.size() - 1);
}

std::int64_t base_time_ns() {
  // Kineto: Unix time floored to a multiple of 7 889 238 s ("three months" of 2 629 746 s), so
  // relative µs values keep ns precision in a double and every rank of a job shares the base.
  static const std::int64_t base = [] {
    constexpr std::int64_t period_s = 7889238;
    const std::int64_t now_s = static_cast<std::int64_t>(std::time(nullptr));
    return (now_s / period_s) * period_s * 1000000000LL;
  }();
  return base;
}

}  // namespace kinetoscope
