// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file stacks.hpp
/// with_stack at collection time: the stack entries of a window are kept by External id, then
/// symbolized and attached to their events as interned frame strings (trace_data::frames).

#include <cstdint>
#include <functional>
#include <string_view>
#include <string>
#include <unordered_map>
#include <vector>

#include "kinetoscope/detail/recorder.hpp"
#include "kinetoscope/trace_data.hpp"

namespace kinetoscope::detail {

/// Collects the stack entries drained from the thread queues, then attaches them to events.
class stack_joiner {
 public:
  /// Keeps the return addresses of one stack entry.
  void add(const stack_entry* e);
  bool empty() const noexcept { return by_id_.empty(); }

  /// Gives every event of `out` whose External id has a stack its frames: symbolized (each
  /// distinct address once per process), kinetoscope's own innermost frames and the outermost
  /// process/thread entry frames dropped, interned in `out.strings`. Events with identical
  /// address sequences share one range of `out.frames`. `intern` returns the string id of a
  /// text in `out.strings`, adding it when new.
  void attach(trace_data& out, const std::function<std::uint32_t(std::string_view)>& intern) const;

 private:
  struct range {
    std::uint32_t first = 0;
    std::uint32_t count = 0;
  };
  std::vector<std::uint64_t> addresses_;
  std::unordered_map<std::int64_t, range> by_id_;
};

}  // namespace kinetoscope::detail
