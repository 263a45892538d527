// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file key_averages.hpp
/// PyTorch's table model: FunctionEvent (events()), FunctionEventAvg (key_averages()) and the
/// text table (docs/profiler-rules.md).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kinetoscope/trace_data.hpp"

namespace kinetoscope {

/// One event as the tables see it (PyTorch's FunctionEvent). Times are ns; the table prints µs.
struct function_event {
  std::int64_t id = 0;                ///< External id
  std::string name;                   ///< as recorded (ProfilerStep#3)
  std::string key;                    ///< grouping name (ProfilerStep* for every step)
  std::int64_t thread = 0;
  std::int64_t start_ns = 0;          ///< relative to the window start
  std::int64_t end_ns = 0;
  bool on_device = false;             ///< kernel / memcpy / memset / gpu annotation
  bool is_async = false;
  bool is_user_annotation = false;
  std::vector<std::vector<std::int64_t>> input_shapes;  ///< empty unless record_shapes
  std::vector<std::string> stack;     ///< innermost first (with_stack)
  std::int64_t flops = 0;
  std::int64_t cpu_memory_usage = 0;        ///< bytes, includes children
  std::int64_t self_cpu_memory_usage = 0;
  std::int64_t device_memory_usage = 0;
  std::int64_t self_device_memory_usage = 0;
  std::int64_t cpu_time_total_ns = 0;
  std::int64_t self_cpu_time_total_ns = 0;
  std::int64_t device_time_total_ns = 0;
  std::int64_t self_device_time_total_ns = 0;
  std::int32_t cpu_parent = -1;       ///< index into the event list, -1 = top level
  std::vector<std::int32_t> cpu_children;
};

/// One row of key_averages() (PyTorch's FunctionEventAvg): sums over the grouped events.
struct event_avg {
  std::string key;
  std::int64_t count = 0;
  bool on_device = false;
  bool is_async = false;
  bool is_user_annotation = false;
  bool has_cpu_parent = false;        ///< the first event of the group had a CPU parent
  std::vector<std::vector<std::int64_t>> input_shapes;  ///< only with group_by_input_shape
  std::vector<std::string> stack;     ///< first group_by_stack_n entries
  std::int64_t flops = 0;
  std::int64_t cpu_memory_usage = 0;
  std::int64_t self_cpu_memory_usage = 0;
  std::int64_t device_memory_usage = 0;
  std::int64_t self_device_memory_usage = 0;
  std::int64_t cpu_time_total_ns = 0;
  std::int64_t self_cpu_time_total_ns = 0;
  std::int64_t device_time_total_ns = 0;
  std::int64_t self_device_time_total_ns = 0;

  double cpu_time_avg_ns() const { return count ? double(cpu_time_total_ns) / double(count) : 0.0; }
  double device_time_avg_ns() const { return count ? double(device_time_total_ns) / double(count) : 0.0; }
};

/// Options of table(); the defaults are PyTorch's.
struct table_options {
  std::string sort_by{};              ///< "" keeps first-seen order; else e.g. "self_cpu_time_total"
  int row_limit = 100;                ///< < 0: no limit
  int max_src_column_width = 75;
  int max_name_column_width = 55;
  int max_shapes_column_width = 80;
  std::string header{};               ///< printed above the table between '=' lines
  bool top_level_events_only = false;
  std::string time_unit{};            ///< "", "s", "ms" or "us"
  bool modern_memory_units = false;   ///< "MB" instead of the classic "Mb"
};

/// The raw event list of a window (PyTorch's prof.events()).
class event_list {
 public:
  event_list() = default;
  explicit event_list(std::vector<function_event> events, bool profile_memory = false,
                      bool with_flops = false)
      : events_(std::move(events)), profile_memory_(profile_memory), with_flops_(with_flops) {}

  const std::vector<function_event>& events() const { return events_; }
  std::size_t size() const { return events_.size(); }
  const function_event& operator[](std::size_t i) const { return events_[i]; }
  auto begin() const { return events_.begin(); }
  auto end() const { return events_.end(); }
  bool profile_memory() const { return profile_memory_; }
  bool with_flops() const { return with_flops_; }

 private:
  std::vector<function_event> events_;
  bool profile_memory_ = false;
  bool with_flops_ = false;
};

/// The grouped rows (PyTorch's key_averages() result).
class averages {
 public:
  averages() = default;
  averages(std::vector<event_avg> rows, bool profile_memory, bool with_flops)
      : rows_(std::move(rows)), profile_memory_(profile_memory), with_flops_(with_flops) {}

  const std::vector<event_avg>& rows() const { return rows_; }
  std::size_t size() const { return rows_.size(); }
  const event_avg& operator[](std::size_t i) const { return rows_[i]; }
  auto begin() const { return rows_.begin(); }
  auto end() const { return rows_.end(); }
  /// The row whose key is `key` (first match), or nullptr.
  const event_avg* find(std::string_view key) const;
  /// Every event summed into one row named "Total".
  event_avg total_average() const;

  /**
   * The text table PyTorch's key_averages().table() prints (profiler-rules.md#table): same
   * columns, widths, units and footers. Throws std::invalid_argument for an unknown sort_by.
   *
   * **Example**: `prof.key_averages().table({.sort_by = "self_cpu_time_total", .row_limit = 15})`
   */
  std::string table(const table_options& opts = {}) const;

 private:
  std::vector<event_avg> rows_;
  bool profile_memory_ = false;
  bool with_flops_ = false;
};

/// Builds the event list of a window: CPU tree (profiler-rules.md#event-tree), times (#times),
/// memory attribution (#memory-attribution), device events, filtered names
/// (profiler-rules.md#hidden-names), ProfilerStep* keys. One event per op/annotation, CUDA runtime
/// call (host side), GPU activity (on_device; thread = its stream) and stand-alone "[memory]"
/// event, in PyTorch's order: stably sorted by (start ascending, end descending).
event_list build_events(const trace_data& data);

/// Groups events as PyTorch's key_averages (profiler-rules.md#key-averages).
averages key_averages(const event_list& events, bool group_by_input_shape = false,
                      int group_by_stack_n = 0);

/**
 * The flame-graph input export_stacks writes (profiler-rules.md#export-stacks, Brendan Gregg's
 * folded format): for every raw event with a stack and an integer metric value in µs > 0, one line
 * `outermost;...;innermost <value>\n`; space, ';', tab and newline inside a frame become '_'.
 * Identical stacks are not merged (flamegraph.pl, speedscope and inferno merge them).
 * `metric`: "self_cpu_time_total", or "self_cuda_time_total" / "self_xpu_time_total" /
 * "self_privateuse1_time_total" (self device time). Throws std::invalid_argument naming the
 * valid metrics for any other.
 *
 * **Example**: `std::ofstream("stacks.txt") << kinetoscope::folded_stacks(prof.events());`
 */
std::string folded_stacks(const event_list& events, std::string_view metric = "self_cpu_time_total");

/// The FLOPs estimate PyTorch's with_flops computes for one op (profiler-rules.md#flops); 0 when
/// not counted.
std::int64_t compute_flops(std::string_view op_name, const op_input* inputs, std::size_t count);

}  // namespace kinetoscope
