// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file kernel_view.hpp
/// The Kernel view of torch-tb-profiler 0.4.3 (docs/plugin-rules.md#kernel-view): kernels grouped
/// by name over all kernel events (plugin-rules.md#kernel-view), and grouped by properties +
/// launching operator over the kernels in the tree (plugin-rules.md#kernel-view). The global
/// tensor-core ratio (#kernel-view) is tc_kernel_ratio() in op_tree.hpp; the eligible-op kernel
/// ratio is eligible_op_kernel_ratio() there.

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/op_tree.hpp"

namespace kinetoscope::analysis {

/// Which optional metric columns the plugin shows (plugin-rules.md#kernel-view): a kernel with args
/// "device" and "blocks per SM" > 0 exists / a kernel with args "device" and occupancy ≥ 0 exists.
struct kernel_metric_columns {
  bool blocks_per_sm = false;
  bool occupancy = false;
};
kernel_metric_columns kernel_view_metric_columns(const trace_model& model);

/// Whether the plugin shows the Kernel view: some kernel is not a communication kernel
/// (plugin-rules.md#kernel-view).
bool kernel_view_present(const trace_model& model, const op_trees& trees);

/// plugin-rules.md#kernel-view row (golden keys of `kernels.by_name[]`). Durations round()ed as the
/// plugin shows them.
struct kernel_row {
  std::string name;
  bool tensor_cores_used = false;
  std::int64_t calls = 0;
  double total_us = 0;        ///< round(Σ dur)
  double mean_us = 0;         ///< round(mean dur)
  double max_us = 0;          ///< round(max dur)
  double min_us = 0;          ///< round(min dur)
  double blocks_per_sm = 0;   ///< round(duration-weighted mean, 2), missing as 0; shown if columns.blocks_per_sm
  double occupancy_pct = 0;   ///< same with "est. achieved occupancy %"; shown if columns.occupancy
  double total_raw_us = 0;    ///< unrounded Σ dur (pie value, sort key)
};

/// plugin-rules.md#kernel-view row (golden keys of `kernels.by_name_and_operator[]`).
struct kernel_op_row {
  std::string name;
  std::string operator_name;         ///< launching op, "CallTreeRoot" for root runtimes, "N/A" if none
  std::string grid;                  ///< Python list text "[98, 8, 1]", or "None"
  std::string block;                 ///< same
  std::string registers_per_thread;  ///< string as the plugin sends it ("0" when absent or 0)
  std::string shared_memory;         ///< same
  bool tensor_cores_used = false;
  bool op_tc_eligible = false;       ///< allow-list eligibility of the launching op at attribution time
  std::int64_t calls = 0;
  double total_us = 0;               ///< raw Σ dur (not rounded)
  double mean_us = 0;                ///< round(total / calls)
  double max_us = 0;                 ///< raw
  double min_us = 0;                 ///< raw
  double blocks_per_sm = 0;          ///< round(Σ v·dur / Σ dur, 2), missing as 0
  double occupancy_pct = 0;          ///< same with occupancy
};

/// plugin-rules.md#kernel-view over ALL kernel events, sorted by unrounded total descending
/// (stable, ties in first-seen order; the plugin's pandas order for ties is unspecified).
std::vector<kernel_row> kernels_by_name(const trace_model& model, const op_trees& trees);

/// plugin-rules.md#kernel-view over the kernels of every tree's runtimes (root zero-id and stale
/// runtimes included), sorted by raw total descending (stable).
std::vector<kernel_op_row> kernels_by_name_and_operator(const trace_model& model, const op_trees& trees);

}  // namespace kinetoscope::analysis
