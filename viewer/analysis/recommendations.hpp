// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file recommendations.hpp
/// The Overview's performance recommendations (docs/plugin-rules.md#recommendations): the seven
/// rules of torch-tb-profiler 0.4.3 in its order, with its numbers and thresholds, plus "extra"
/// rules the plugin never had (kineto issue #153 asked for idle-time and CPU–GPU
/// interaction hints). Extras are flagged (`recommendation::extra`) so parity checks can skip them.
///
/// Deliberate differences from the plugin (quirk Q13, Q12):
/// * rule 4's "Gradient Compression" link is a real URL (the plugin rendered a Python tuple);
/// * rule 5 lists GPUs grammatically: "GPU 0 has", "GPUs 0 and 1 have", "GPUs 0, 1 and 2 have"
///   (the plugin wrote "0and 1" and chose "has" by the text length);
/// * rule 7 skips the CPU (the plugin compared the CPU peak with the last GPU's memory and
///   called it "GPU-1") and skips device ids outside deviceProperties (the plugin crashed).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/model.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/overview.hpp"

namespace kinetoscope::analysis {

/// Which rule produced a recommendation.
enum class recommendation_kind : std::uint8_t {
  // The plugin's rules, in its order (plugin-rules.md#recommendations rule numbers 1–7).
  data_loader,          ///< 1: avg DataLoader / avg step > 5 %
  ddp_instead_of_dp,    ///< 2: DataParallel with more than one device
  nccl_backend,         ///< 3: DDP without NCCL on a GPU with compute capability ≥ 3.5
  communication,        ///< 4: avg Communication / avg step > 10 %
  low_gpu_utilization,  ///< 5: some GPU utilization < 50 %
  amp,                  ///< 6: no tensor-core kernel although eligible operators run kernels
  memory_limit,         ///< 7: a GPU's peak allocated memory > 90 % of its capacity
  // Extras (not in the plugin).
  launch_overhead,      ///< many kernels shorter than their launch call / large Runtime share
  synchronization,      ///< blocking synchronisation calls take a noticeable share of the steps
  idle_gpu,             ///< a long idle gap on a GPU inside the steps
};

/// Where a finding can be seen: a view of the viewer and the state of it that shows the finding.
struct recommendation_target {
  /// What the state names: `view` (the view alone), `trace` (a time window of the Trace view),
  /// `kernel` (a kernel of the Kernel view), `memory` (a device of the Memory view).
  enum class kind_type : std::uint8_t { view, trace, kernel, memory };
  kind_type kind = kind_type::view;
  /// The view: "Overview", "Trace", "Kernel", "Memory" or "Distributed".
  std::string view = "Overview";
  /// trace: the window, in the trace's timestamps (µs), that the text talks about.
  double start_us = 0, end_us = 0;
  /// trace, memory: the GPU the finding is about (-1: none in particular).
  std::int64_t device = -1;
  /// kernel: the kernel's name.
  std::string kernel;
};

/// "view", "trace", "kernel", "memory".
std::string_view target_kind_name(recommendation_target::kind_type k) noexcept;

/// One recommendation, as plain text and as the plugin-style HTML (`<a href=… target="_blank">`).
struct recommendation {
  recommendation_kind kind = recommendation_kind::data_loader;
  int rule = 0;          ///< the plugin's rule number 1–7; 0 for extras
  bool extra = false;    ///< not a plugin rule (ignore for parity)
  std::string text;      ///< plain text (links removed, their labels kept)
  std::string html;      ///< one `<li>` body (without the `<li>` tags)
  recommendation_target target;  ///< the view state that shows the finding
};

/// Thresholds of the extra rules (the plugin's thresholds are fixed and not configurable).
struct recommendation_options {
  bool extras = true;
  /// launch_overhead: at least this many kernels, and at least this share of them not longer
  /// than the runtime call that launched them ...
  std::size_t min_kernels = 100;
  double short_kernel_share = 0.5;
  /// ... or the Runtime role above this share of the average step.
  double runtime_share = 0.15;
  /// synchronization: blocking sync calls inside the steps above this share of the step time.
  double sync_share = 0.05;
  /// idle_gpu: a gap with no kernel/memcpy/memset on a GPU, inside the steps, at least this long
  /// (µs) and at least this share of the average step.
  double idle_gap_us = 1000;
  double idle_gap_share = 0.1;
  /// Recommendation 7 as the plugin gives it: the CPU's peak compared with the last GPU's
  /// capacity (Q12), the first device at the limit only. false = docs/kinetoscope-rules.md#k6:
  /// each GPU against its own capacity, every one at the limit.
  bool plugin_memory_rule = true;
  /// docs/kinetoscope-rules.md#k6: the "many short launches" claim only when some GPU's
  /// utilization is under busy_gpu_utilization.
  bool launch_overhead_needs_idle_gpu = false;
  double busy_gpu_utilization = 0.5;
};

/// All recommendations: the plugin's rules first in its order, then the extras (if enabled).
std::vector<recommendation> compute_recommendations(const trace_model& model, const op_trees& trees,
                                                    const overview_result& overview,
                                                    const recommendation_options& options = {});

/// Plain texts of the plugin's rules only (no extras), in the plugin's order.
std::vector<std::string> recommendations(const trace_model& model, const op_trees& trees,
                                         const overview_result& overview);

/// The Overview's `recommendations` HTML: `<ul><li>…</li>…</ul>`, or `<ul><li>N/A</li></ul>`.
std::string recommendations_html(const std::vector<recommendation>& items);

/// Rule 5's GPU list: "0", "0 and 1", "0, 1 and 2".
std::string join_gpu_ids(const std::vector<std::int64_t>& ids);

/// Python's `f"{x:.1f}"` (round half to even on the binary value, as glibc's printf).
std::string format_1f(double x);

}  // namespace kinetoscope::analysis
