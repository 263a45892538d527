// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file row_fields.hpp
/// One field table per view row type, shared by the two outputs that list the rows' fields:
/// `kinetoscope analyze --json` (viewer/cli/analyze.cpp: snake_case keys with units, raw
/// values; its text tables and CSV are cut from that JSON) and the HTTP API
/// (payloads.cpp: torch-tb-profiler's keys or column titles and value forms). Each
/// `for_each_field(row, ..., visitor)` calls `visitor(const field&, ojson value)` once per
/// field, in output order, with the raw value; `cli_value()` and `api_value()` turn it into
/// each output's form from the field's kind. Adding a column is one line here.
///
/// Where the outputs differ on purpose the table says so: a field with an empty `cli` or `api`
/// name belongs to one output only (the API's call stacks, the plugin's "Op is Tensor Cores
/// eligible"); the plugin lists an operator's device times before its host times and a kernel's
/// Tensor Cores flag second, the CLI (whose CSV column order users script against) after them,
/// so those groups are visited at the position each output wants.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "analysis/distributed_view.hpp"
#include "analysis/kernel_view.hpp"
#include "analysis/memory_view.hpp"
#include "analysis/module_view.hpp"
#include "analysis/operator_view.hpp"
#include "analysis/overview.hpp"
#include "server/payloads.hpp"

namespace kinetoscope::server::fields {

using ojson = nlohmann::ordered_json;

/// How a value is presented; the visitor receives it raw.
enum class field_kind : std::uint8_t {
  text,      ///< a string in both outputs
  integer,   ///< an integer in both
  number,    ///< a double, as is in both
  boolean,   ///< true/false in both
  duration,  ///< µs: the CLI writes the double, the API json_number() (integral without ".0")
  flag,      ///< the CLI writes true/false, the API "Yes"/"No"
  bytes,     ///< a size: the CLI writes bytes, the API the size in the requested unit, rounded
             ///< for display, and the unit in the column title ("Size Increase (KB)")
};

struct field {
  std::string_view cli;            ///< key in `analyze --json`; empty: not in the CLI's output
  std::string_view api;            ///< key or column title in the API; empty: not in the API
  field_kind kind = field_kind::text;
  std::string_view tooltip = {};   ///< the API column's tooltip
  std::string_view title = {};     ///< the API's column title where it differs from `api` (modules)
};

/// Which output is walking the table (the fields present and their order may differ).
enum class output : std::uint8_t { cli, api };

/// The CLI's form of a raw value: the value itself.
inline const ojson& cli_value(const field&, const ojson& raw) { return raw; }

/// The API's form of a raw value (`bytes_factor`: the requested memory unit's factor).
inline ojson api_value(const field& f, const ojson& raw, double bytes_factor = 1) {
  switch (f.kind) {
    case field_kind::duration: return payloads::json_number(raw.get<double>());
    case field_kind::flag: return raw.get<bool>() ? "Yes" : "No";
    case field_kind::bytes:
      return analysis::memory_display_round(static_cast<double>(raw.get<std::int64_t>()) * bytes_factor);
    default: return raw;
  }
}

/// The API's column type: "string" for text and flags, "number" otherwise.
inline const char* api_column_type(const field& f) {
  return f.kind == field_kind::text || f.kind == field_kind::flag ? "string" : "number";
}

// ---- overview ------------------------------------------------------------------------------

/// The CLI's key of each step role, in step_role order (the API titles them with
/// analysis::step_role_title()).
inline constexpr std::array<std::string_view, analysis::step_role_count> step_role_keys = {
    "kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec", "other"};

/// A step row: its name (the API's "Step" column), every role's time, the total (CLI only; the
/// API shows the total in each tooltip). `roles_shown`: the API lists only the roles the
/// Overview shows.
template <typename Visitor>
void for_each_field(const analysis::step_row& s, output o, const analysis::overview_result* roles_shown,
                    bool with_name, Visitor&& v) {
  if (with_name) v(field{"name", "Step", field_kind::text}, ojson(s.name));
  for (std::size_t i = 0; i < analysis::step_role_count; ++i) {
    const auto role = static_cast<analysis::step_role>(i);
    if (o == output::api && roles_shown != nullptr && !roles_shown->shows(role)) continue;
    v(field{step_role_keys[i], analysis::step_role_title(role), field_kind::duration}, ojson(s.value(role)));
  }
  if (o == output::cli) v(field{"total", {}, field_kind::number}, ojson(s.total));
}

// ---- operators -----------------------------------------------------------------------------

struct operator_fields {
  bool by_shape = false;        ///< the input-shape column (grouped by name and input shape)
  bool device_columns = true;   ///< device time columns (the API: traces with kernels, memcpy or memset only)
  bool call_stack = false;      ///< the API's call-stack rows carry the stack, tables a flag
};

inline constexpr std::string_view tc_eligible_tooltip = "Whether this operator is eligible to use Tensor Cores.";
inline constexpr std::string_view tc_self_tooltip = "Time of self-kernels with Tensor Cores / Time of self-kernels.";
inline constexpr std::string_view tc_total_tooltip =
    "Time of kernels with Tensor Cores / Time of kernels (the operator and its children).";

template <typename Visitor>
void for_each_field(const analysis::operator_row& r, output o, const operator_fields& opt, Visitor&& v) {
  using K = field_kind;
  v(field{"name", "name", K::text}, ojson(r.name));
  if (opt.by_shape) v(field{"input_shape", "input_shape", K::text}, ojson(r.input_shape));
  v(field{"calls", "calls", K::integer}, ojson(r.calls));
  const bool device = o == output::cli || opt.device_columns;
  const auto host_times = [&] {
    v(field{"host_self_us", "host_self_duration", K::duration}, ojson(r.host_self_us));
    v(field{"host_total_us", "host_total_duration", K::duration}, ojson(r.host_total_us));
  };
  const auto device_times = [&] {
    if (!device) return;
    v(field{"device_self_us", "device_self_duration", K::duration}, ojson(r.device_self_us));
    v(field{"device_total_us", "device_total_duration", K::duration}, ojson(r.device_total_us));
  };
  if (o == output::api) {
    device_times();
    host_times();
  } else {
    host_times();
    device_times();
  }
  // The Tensor Cores columns are in every row, with or without device times: the plugin's
  // operator tables always carry them (run_generator.py), "No" and 0 on a CPU-only trace.
  v(field{"tc_eligible", "tc_eligible", K::flag, tc_eligible_tooltip}, ojson(r.tc_eligible));
  v(field{"tc_self_pct", "tc_self_ratio", K::number, tc_self_tooltip}, ojson(r.tc_self_pct));
  v(field{"tc_total_pct", "tc_total_ratio", K::number, tc_total_tooltip}, ojson(r.tc_total_pct));
  if (o == output::api) {
    if (opt.call_stack) v(field{{}, "call_stack", K::text}, ojson(r.call_stack));
    else v(field{{}, "has_call_stack", K::boolean}, ojson(r.has_call_stack));
  }
}

// ---- kernels -------------------------------------------------------------------------------

/// Which optional kernel columns the API shows (the plugin drops them when no kernel has them;
/// the CLI always writes them).
struct kernel_fields {
  bool blocks_per_sm = true;
  bool occupancy = true;
};

inline constexpr std::string_view kernel_tc_tooltip = "Whether this kernel uses Tensor Cores.";
inline constexpr std::string_view blocks_tooltip =
    "Blocks Per SM = blocks of this kernel / SM number of this GPU; below 1 the GPU's SMs are not all used. "
    "Mean weighted by the kernel's duration.";
inline constexpr std::string_view occupancy_tooltip =
    "Est. Achieved Occupancy: the ratio of active warps on an SM to the maximum number of active warps "
    "supported by the SM, estimated from the launch configuration. Mean weighted by the kernel's duration.";
inline constexpr std::string_view op_tc_tooltip =
    "Whether the operator launching this kernel is eligible to use Tensor Cores.";

/// The duration and occupancy columns both kernel groupings share, in their output order.
template <typename Row, typename Visitor>
void for_each_kernel_stat(const Row& k, output o, const kernel_fields& opt, Visitor&& v) {
  using K = field_kind;
  v(field{"calls", "Calls", K::integer}, ojson(k.calls));
  v(field{"total_us", "Total Duration (us)", K::duration}, ojson(k.total_us));
  v(field{"mean_us", "Mean Duration (us)", K::duration}, ojson(k.mean_us));
  v(field{"max_us", "Max Duration (us)", K::duration}, ojson(k.max_us));
  v(field{"min_us", "Min Duration (us)", K::duration}, ojson(k.min_us));
  if (o == output::cli || opt.blocks_per_sm)
    v(field{"blocks_per_sm", "Mean Blocks Per SM", K::number, blocks_tooltip}, ojson(k.blocks_per_sm));
  if (o == output::cli || opt.occupancy)
    v(field{"occupancy_pct", "Mean Est. Achieved Occupancy (%)", K::number, occupancy_tooltip},
      ojson(k.occupancy_pct));
}

template <typename Visitor>
void for_each_field(const analysis::kernel_row& k, output o, const kernel_fields& opt, Visitor&& v) {
  const field tc{"tensor_cores_used", "Tensor Cores Used", field_kind::flag, kernel_tc_tooltip};
  v(field{"name", "Name", field_kind::text}, ojson(k.name));
  if (o == output::api) v(tc, ojson(k.tensor_cores_used));
  for_each_kernel_stat(k, o, opt, v);
  if (o == output::cli) v(tc, ojson(k.tensor_cores_used));
}

template <typename Visitor>
void for_each_field(const analysis::kernel_op_row& k, output o, const kernel_fields& opt, Visitor&& v) {
  using K = field_kind;
  const field tc{"tensor_cores_used", "Kernel Uses Tensor Cores", K::flag, kernel_tc_tooltip};
  v(field{"name", "Name", K::text}, ojson(k.name));
  v(field{"operator", "Operator", K::text}, ojson(k.operator_name));
  v(field{"grid", "Grid", K::text}, ojson(k.grid));
  v(field{"block", "Block", K::text}, ojson(k.block));
  // Numbers the plugin sends as text (its columns say "number").
  v(field{"registers_per_thread", "Register Per Thread", K::integer}, ojson(k.registers_per_thread));
  v(field{"shared_memory", "Shared Memory", K::integer}, ojson(k.shared_memory));
  if (o == output::api) {
    v(tc, ojson(k.tensor_cores_used));
    v(field{{}, "Op is Tensor Cores eligible", K::flag, op_tc_tooltip}, ojson(k.op_tc_eligible));
  }
  for_each_kernel_stat(k, o, opt, v);
  if (o == output::cli) v(tc, ojson(k.tensor_cores_used));
}

// ---- memory --------------------------------------------------------------------------------

template <typename Visitor>
void for_each_field(const analysis::memory_stat_row& s, Visitor&& v) {
  using K = field_kind;
  v(field{"name", "Operator Name", K::text, ""}, ojson(s.name));
  v(field{"calls", "Calls", K::integer, "# of calls of the operator."}, ojson(s.calls));
  v(field{"size_increase_bytes", "Size Increase", K::bytes,
          "The memory increase size include all children operators."},
    ojson(s.size_increase_bytes));
  v(field{"self_size_increase_bytes", "Self Size Increase", K::bytes,
          "The memory increase size associated with the operator itself."},
    ojson(s.self_size_increase_bytes));
  v(field{"allocation_count", "Allocation Count", K::integer,
          "The allocation count including all children operators."},
    ojson(s.allocation_count));
  v(field{"self_allocation_count", "Self Allocation Count", K::integer,
          "The allocation count belonging to the operator itself."},
    ojson(s.self_allocation_count));
  v(field{"allocation_size_bytes", "Allocation Size", K::bytes,
          "The allocation size including all children operators."},
    ojson(s.allocation_size_bytes));
  v(field{"self_allocation_size_bytes", "Self Allocation Size", K::bytes,
          "The allocation size belonging to the operator itself."},
    ojson(s.self_allocation_size_bytes));
}

/// The API's title of a memory column: sizes carry the unit ("Size Increase (KB)").
inline std::string memory_title(const field& f, std::string_view unit) {
  std::string t(f.api);
  if (f.kind == field_kind::bytes) (t += " (") += std::string(unit) + ")";
  return t;
}

// ---- modules -------------------------------------------------------------------------------

/// A module row without its children (both outputs nest them under "children").
template <typename Visitor>
void for_each_field(const analysis::module_row& m, Visitor&& v) {
  using K = field_kind;
  v(field{"name", "name", K::text, {}, "Module Name"}, ojson(m.name));
  v(field{"id", "id", K::integer}, ojson(m.id));
  // "occurences": the plugin's spelling, kept in the API.
  v(field{"occurrences", "occurences", K::integer, {}, "Occurences"}, ojson(m.occurrences));
  v(field{"operators", "operators", K::integer, {}, "Operators"}, ojson(m.operators));
  v(field{"host_duration_us", "host_duration", K::duration, {}, "Host Total Time"}, ojson(m.host_duration));
  v(field{"self_host_duration_us", "self_host_duration", K::duration, {}, "Host Self Time"},
    ojson(m.self_host_duration));
  v(field{"device_duration_us", "device_duration", K::duration, {}, "Device Total Time"}, ojson(m.device_duration));
  v(field{"self_device_duration_us", "self_device_duration", K::duration, {}, "Device Self Time"},
    ojson(m.self_device_duration));
  v(field{"avg_duration_us", "avg_duration", K::number}, ojson(m.avg_duration));
}

// ---- distributed ---------------------------------------------------------------------------

template <typename Visitor>
void for_each_field(const analysis::comm_op_row& op, Visitor&& v) {
  using K = field_kind;
  v(field{"name", "Name", K::text}, ojson(op.name));
  v(field{"calls", "Calls", K::integer}, ojson(op.calls));
  v(field{"total_size_bytes", "Total Size (bytes)", K::integer}, ojson(op.total_size_bytes));
  v(field{"avg_size_bytes", "Avg Size (bytes)", K::integer}, ojson(op.avg_size_bytes));
  v(field{"total_latency_us", "Total Latency (us)", K::number}, ojson(op.total_latency_us));
  v(field{"avg_latency_us", "Avg Latency (us)", K::integer}, ojson(op.avg_latency_us));
  v(field{"data_transfer_us", "Data Transfer Time (us)", K::number}, ojson(op.data_transfer_us));
  v(field{"avg_data_transfer_us", "Avg Data Transfer Time (us)", K::integer}, ojson(op.avg_data_transfer_us));
}

// ---- the two outputs' row objects -----------------------------------------------------------

/// A row as `analyze --json` writes it: {cli key: raw value} for the CLI's fields.
template <typename Row, typename... Options>
ojson cli_object(const Row& row, const Options&... options) {
  ojson j = ojson::object();
  const auto put = [&](const field& f, const ojson& value) {
    if (!f.cli.empty()) j[std::string(f.cli)] = cli_value(f, value);
  };
  if constexpr (sizeof...(Options) == 0) for_each_field(row, put);
  else for_each_field(row, output::cli, options..., put);
  return j;
}

}  // namespace kinetoscope::server::fields
