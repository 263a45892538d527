// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// Turns the entries of the thread queues into one window's trace_data.

#include <cstdint>

#include "clock.hpp"
#include "kinetoscope/trace_data.hpp"

namespace kinetoscope::detail {

struct window_bounds {
  std::uint64_t start_tick = 0;
  std::uint64_t end_tick = 0;
};

/// Drains every thread queue and returns the events that began and ended inside `window`
/// (Kineto drops events outside the capture window), converted to Unix ns, names interned,
/// inputs and call stacks (symbolized, stacks.hpp) attached by External id, FLOPs computed when
/// `with_flops`, events sorted by (start ascending, end descending), memory events by time.
trace_data collect_window(const window_bounds& window, const tick_converter& clock, bool with_flops);

/// Appends `from` to `into` (acc_events), remapping names and inputs.
void append_window(trace_data& into, const trace_data& from);

}  // namespace kinetoscope::detail
