// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// Conversion of hot-path ticks (TSC) to Unix-epoch nanoseconds.
///
/// Why: reading the TSC costs ~10 ns here, clock_gettime ~23 ns (measured on our 2-core x86-64 dev
/// machine), and a range reads the clock twice. Like Kineto's ApproximateClock, ticks are converted
/// in post-processing: the TSC rate is measured between a process-wide anchor (taken at the first
/// profile start) and each window's end against CLOCK_MONOTONIC, then shifted onto
/// CLOCK_REALTIME. Invariant TSC is assumed on x86-64 (every CPU of the last decade).

#include <cstdint>

namespace kinetoscope::detail {

struct tick_converter {
  std::uint64_t ref_tick = 0;   // a tick taken together with ref_unix_ns
  std::int64_t ref_unix_ns = 0;
  double ns_per_tick = 1.0;
  /// CLOCK_REALTIME minus CLOCK_MONOTONIC when calibrated: maps monotonic ns (CUPTI's record
  /// clock, see cupti_backend.cpp) onto the same Unix ns as the ticks.
  std::int64_t unix_minus_mono_ns = 0;

  std::int64_t to_unix_ns(std::uint64_t tick) const noexcept {
    const double delta = static_cast<double>(static_cast<std::int64_t>(tick - ref_tick));
    return ref_unix_ns + static_cast<std::int64_t>(delta * ns_per_tick);
  }
};

/// Takes the process-wide anchor if not taken yet (called at profile start).
void clock_anchor() noexcept;
/// A converter valid around now; measures at least 2 ms of tick rate (spins once if the first
/// window is shorter than that).
tick_converter clock_calibrate() noexcept;
/// Unix-epoch ns now (CLOCK_REALTIME).
std::int64_t unix_now_ns() noexcept;

}  // namespace kinetoscope::detail
