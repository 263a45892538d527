// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file schedule.hpp
/// torch.profiler.schedule: which steps are skipped, warmed up, recorded and saved.

#include <cstdint>
#include <functional>

namespace kinetoscope {

/// The state of one step (same values as torch.profiler.ProfilerAction).
enum class profiler_action : std::uint8_t {
  none = 0,             ///< idle
  warmup = 1,           ///< machinery prepared, nothing kept
  record = 2,           ///< events kept
  record_and_save = 3,  ///< events kept; last step of the window, on_trace_ready follows
};

const char* to_string(profiler_action a) noexcept;

/// A schedule maps a step number (>= 0) to an action.
using schedule_fn = std::function<profiler_action(std::int64_t step)>;

/// Arguments of torch.profiler.schedule(). `repeat = 0` means unlimited cycles.
struct schedule_args {
  std::int64_t wait = 0;
  std::int64_t warmup = 0;
  std::int64_t active = 1;
  std::int64_t repeat = 0;
  std::int64_t skip_first = 0;
  bool skip_first_wait = false;  ///< drop the wait phase of the first cycle only
};

/**
 * Builds PyTorch's schedule function.
 * Throws std::invalid_argument("Invalid profiler schedule arguments ...") unless wait >= 0,
 * warmup >= 0, active > 0, repeat >= 0 and skip_first >= 0. With warmup == 0 a warning is
 * printed once, as PyTorch does.
 *
 * **Example**: `schedule({.wait = 1, .warmup = 1, .active = 2, .repeat = 2, .skip_first = 1})`
 * gives, for steps 0..13: none none warmup record record_and_save none warmup record
 * record_and_save none none none none none.
 */
schedule_fn schedule(const schedule_args& args);

}  // namespace kinetoscope
