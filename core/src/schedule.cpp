// SPDX-License-Identifier: BSD-3-Clause
#include "kinetoscope/schedule.hpp"

#include <stdexcept>
#include <string>

#include "log.hpp"

namespace kinetoscope {

const char* to_string(profiler_action a) noexcept {
  switch (a) {
    case profiler_action::none: return "NONE";
    case profiler_action::warmup: return "WARMUP";
    case profiler_action::record: return "RECORD";
    case profiler_action::record_and_save: return "RECORD_AND_SAVE";
  }
  return "?";
}

schedule_fn schedule(const schedule_args& a) {
  if (a.wait < 0 || a.warmup < 0 || a.active <= 0 || a.repeat < 0 || a.skip_first < 0) {
    throw std::invalid_argument(
        "Invalid profiler schedule arguments: need wait >= 0, warmup >= 0, active > 0, "
        "repeat >= 0, skip_first >= 0 (got wait=" + std::to_string(a.wait) +
        ", warmup=" + std::to_string(a.warmup) + ", active=" + std::to_string(a.active) +
        ", repeat=" + std::to_string(a.repeat) + ", skip_first=" + std::to_string(a.skip_first) + ")");
  }
  if (a.warmup == 0)
    detail::log(log_level::warning, "Profiler won't be using warmup, this can skew profiler results");
  return [a](std::int64_t step) -> profiler_action {
    if (step < 0) throw std::invalid_argument("schedule: step must be >= 0");
    if (step < a.skip_first) return profiler_action::none;
    std::int64_t s = step - a.skip_first;
    if (a.skip_first_wait) s += a.wait;
    const std::int64_t n = a.wait + a.warmup + a.active;
    // PyTorch compares the real quotient s / n with repeat: s / n >= repeat  <=>  s >= repeat * n.
    if (a.repeat > 0 && s >= a.repeat * n) return profiler_action::none;
    const std::int64_t m = s % n;
    if (m < a.wait) return profiler_action::none;
    if (m < a.wait + a.warmup) return profiler_action::warmup;
    if (m < n - 1) return profiler_action::record;
    return profiler_action::record_and_save;
  };
}

}  // namespace kinetoscope
