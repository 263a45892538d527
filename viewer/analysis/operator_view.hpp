// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file operator_view.hpp
/// The Operator view of torch-tb-profiler 0.4.3 (docs/plugin-rules.md#operator-view): operators
/// (#operators) aggregated by name, by name + input shape, and by call stack, plus the four pies.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/op_tree.hpp"

namespace kinetoscope::analysis {

/// Unrounded sums of one group (Python-float arithmetic, operators in the plugin's order).
struct operator_group {
  std::string name;
  std::string input_shape;          ///< Python list text, e.g. "[[32, 3], []]"; "[]" when absent
  std::optional<std::string> call_stack;  ///< stack groups only: the raw ";"-separated string (nullopt = None)
  std::int64_t calls = 0;
  double host_self = 0;
  double host_total = 0;
  double device_self = 0;
  double device_total = 0;
  double tc_self = 0;
  double tc_total = 0;
  bool tc_eligible = false;         ///< of the first instance seen in the group
  bool has_call_stack = false;      ///< some instance of the group has a non-empty call stack
  std::vector<std::string> call_stacks;  ///< distinct non-empty call stacks, first-seen order
};

/// One table row, rounded as the plugin's tables are (plugin-rules.md#operator-view,
/// #number-formatting; formats/py_number.hpp): durations round() (ties to even), ratios round(100·x, 2).
struct operator_row {
  std::string name;
  std::string input_shape;          ///< empty for the by-name table
  std::int64_t calls = 0;
  double host_self_us = 0;
  double host_total_us = 0;
  double device_self_us = 0;        ///< the plugin shows device columns only if operator_view_has_device_columns()
  double device_total_us = 0;
  bool tc_eligible = false;
  double tc_self_pct = 0;           ///< round(100·tc_self/device_self, 2); 0 when device_self ≤ 0
  double tc_total_pct = 0;          ///< round(100·tc_total/device_total, 2); 0 when device_total ≤ 0
  bool has_call_stack = false;
  std::vector<std::string> call_stacks;  ///< distinct non-empty call stacks of the group
  std::string call_stack;           ///< stack drill-down rows only: this row's stack
};

/// Whether the plugin shows the device columns: the trace has a non-communication kernel or a
/// memcpy/memset (plugin-rules.md#operator-view, #kernel-view). When false, rows are ordered by
/// host self instead.
bool operator_view_has_device_columns(const trace_model& model, const op_trees& trees);

/// Python `str()` of an "Input Dims" JSON text (minified or not): `[[32, 3], [], 1.5, None]`.
/// Empty text gives "[]".
std::string python_list_text(std::string_view json);

/// Raw groups by name, in first-seen order of the operator list.
std::vector<operator_group> aggregate_operators_by_name(const trace_model& model, const op_trees& trees);
/// Raw groups by (name, input-shape text), in first-seen order.
std::vector<operator_group> aggregate_operators_by_name_and_input_shape(const trace_model& model,
                                                                        const op_trees& trees);

/// Rows by name, ordered as the plugin: unrounded device self descending when
/// `device_columns`, else unrounded host self descending (stable for ties, first-seen order).
std::vector<operator_row> operators_by_name(const trace_model& model, const op_trees& trees,
                                            bool device_columns = true);
/// Rows by name + input shape, same ordering rule.
std::vector<operator_row> operators_by_name_and_input_shape(const trace_model& model, const op_trees& trees,
                                                            bool device_columns = true);
/// Call-stack drill-down (`/operation/stack`): groups (name[, shape], stack) with a non-empty
/// stack for `name` (and `input_shape` when given), same fields, `call_stack` set, same order.
std::vector<operator_row> operator_stack_rows(const trace_model& model, const op_trees& trees,
                                              std::string_view name,
                                              std::optional<std::string_view> input_shape,
                                              bool device_columns = true);

/// One pie: `[name, value]` rows with value > 0, descending (stable); empty = the plugin's null.
using operator_pie = std::vector<std::pair<std::string, double>>;
struct operator_pies {
  operator_pie device_total;  ///< "Device Total Time (us)" (filled whenever device time > 0, as the plugin)
  operator_pie device_self;   ///< "Device Self Time (us)"
  operator_pie host_total;    ///< "Host Total Time (us)"
  operator_pie host_self;     ///< "Host Self Time (us)"
};
/// The four pies over the by-name groups (raw sums). `device_columns` is ignored (kept for
/// symmetry with the tables).
operator_pies operator_pies_by_name(const trace_model& model, const op_trees& trees, bool device_columns = true);
/// The four pies over the (name, input shape) groups, as torch-tb-profiler's
/// `operation_pie_by_name_input` (run_generator.py): one slice per group, labelled with the
/// bare operator name, so a name with several input shapes has several slices of that label.
operator_pies operator_pies_by_name_and_input_shape(const trace_model& model, const op_trees& trees);

/// A table and its pies from one aggregation: exactly operators_by_name(...) and
/// operator_pies_by_name(...) (or the by-shape pair), at the cost of one of them. The
/// aggregation is most of either's time (10 GB trace: 0.5-1 s per grouping).
struct operator_table {
  std::vector<operator_row> rows;
  operator_pies pies;
};
operator_table operator_table_by_name(const trace_model& model, const op_trees& trees, bool device_columns = true);
operator_table operator_table_by_name_and_input_shape(const trace_model& model, const op_trees& trees,
                                                      bool device_columns = true);

}  // namespace kinetoscope::analysis
