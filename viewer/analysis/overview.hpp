// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file overview.hpp
/// The Overview of torch-tb-profiler 0.4.3 (docs/plugin-rules.md#overview): role ranges, steps and
/// their extension to the GPU work they launched, tail-step dropping, the breakdown by priority
/// and its average, the GPU summary (plugin-rules.md#gpu-summary), and the GPU counters the Trace
/// view adds (#gpu-counters).
///
/// Pipeline of compute_overview():
///
///     trace_model ──► role_ranges        ──────────────────────────────┐
///          │   └──► host steps        ─► extend_steps        ─► drop   │
///          │                                 ▲      tail               ▼
///     op_trees (runtimes + device nodes) ────┘          └────► breakdown        ─► rows, average
///          └──────────────────────────────────────────────────► GPU summary
///     (sections of docs/plugin-rules.md: #role-ranges, #steps, #step-extension, #tail-steps,
///     #step-time-breakdown, #gpu-summary)
///
/// All times are µs doubles as in the file; step values are the raw sums (the plugin shows them
/// unrounded); the `*_pct` fields of the GPU rows are Python-rounded as the plugin displays them.

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/intervals.hpp"
#include "analysis/model.hpp"
#include "analysis/op_tree.hpp"

namespace kinetoscope::analysis {

/// Choices where the plugin's behaviour is a quirk (plugin-rules.md#quirks). The defaults reproduce
/// the plugin's numbers; `improved()` gives the fixed forms.
struct overview_options {
  /// Q5: false = only the 5 NCCL + 5 Gloo collective names of the plugin are communication;
  /// true = every host op of a communication backend (is_collective_name: `nccl:`, `gloo:`,
  /// `mpi:`, … with any name: all_to_all, _all_gather_base, send/recv, …) is, and so are NCCL's
  /// kernels that no such op launched (docs/kinetoscope-rules.md#k4).
  bool all_collectives = false;
  /// Q4: true = `gpu_user_annotation` ranges (GPU timeline) count like host annotations: CPU
  /// Exec role, and a GPU-side `ProfilerStep#N` annotation is a step (the plugin); false = they
  /// are ignored for roles and steps.
  bool gpu_annotations_as_host = true;
  /// Q17: drop incomplete tail steps (plugin-rules.md#tail-steps; the plugin always does). The
  /// dropped steps are reported in overview_result::notes either way.
  bool drop_tail_steps = true;
  /// docs/kinetoscope-rules.md#k3: the GPU summary's tensor-core share over every kernel of the
  /// GPU (tc_ratio_per_gpu_all_kernels); false = over the kernels attributed to operators (the
  /// plugin, plugin-rules.md#gpu-summary).
  bool tc_over_all_kernels = false;
  /// docs/kinetoscope-rules.md#k2: `cuda_driver` calls (cuLaunchKernel) take the Runtime role
  /// like runtime calls; false = they are no event of the breakdown (the plugin).
  bool driver_as_runtime = false;

  /// kinetoscope's rules (docs/kinetoscope-rules.md); analysis::rules() hands them out.
  static overview_options improved() {
    overview_options o;
    o.all_collectives = true;
    o.gpu_annotations_as_host = false;
    o.tc_over_all_kernels = true;
    o.driver_as_runtime = true;
    return o;
  }
};

/// Breakdown roles in priority order (plugin-rules.md#role-ranges); `total` is the step duration.
enum class step_role : std::uint8_t {
  kernel, memcpy, memset, communication, runtime, dataloader, cpu_exec, other,
};
inline constexpr std::size_t step_role_count = 8;
/// Column title as the plugin shows it: "Kernel", "Memcpy", "Memset", "Communication",
/// "Runtime", "DataLoader", "CPU Exec", "Other".
std::string_view step_role_title(step_role role) noexcept;

/// One row of the step table (or the average row). Values are µs, unrounded.
struct step_row {
  std::string name;        ///< "12" for ProfilerStep#12; "0" for the synthetic step; "Average"
  double kernel = 0;
  double memcpy = 0;
  double memset = 0;
  double communication = 0;
  double runtime = 0;
  double dataloader = 0;
  double cpu_exec = 0;
  double other = 0;
  double total = 0;
  double start = 0;        ///< the (extended) step range [start, end); 0 for the average row
  double end = 0;
  std::int64_t device_nodes = 0;  ///< device nodes launched inside the host step (#step-extension cnt_i)

  double value(step_role role) const noexcept;
  double& value(step_role role) noexcept;
};

/// One GPU of the GPU summary (plugin-rules.md#gpu-summary), ascending id.
struct gpu_summary_row {
  int id = 0;
  std::string name;                   ///< deviceProperties[id].name; empty when absent
  std::int64_t memory_bytes = 0;      ///< deviceProperties[id].totalGlobalMem; 0 when absent
  std::string compute_capability;     ///< "major.minor"; empty when absent
  double utilization_pct = 0;         ///< round(100·u, 2), always shown
  std::optional<double> sm_efficiency_pct;       ///< round(100·x, 2); nullopt = not shown
  std::optional<double> achieved_occupancy_pct;  ///< round(x, 2); nullopt = not shown
  std::optional<double> tensor_cores_pct;        ///< round(100·x, 2); nullopt = not shown

  // Unrounded values (fractions 0..1 except occupancy, which is a percentage already).
  double utilization = 0;
  std::optional<double> sm_efficiency;
  std::optional<double> achieved_occupancy;
  std::optional<double> tensor_cores;

  /// "31.74 GB" as the plugin shows memory (round(bytes/2^30, 2)); empty when absent.
  std::string memory_text() const;
};

/// The Overview of one trace file.
struct overview_result {
  std::vector<step_row> steps;        ///< kept steps, in time order
  step_row average;                   ///< name "Average"; Σ over steps / #steps (total included)
  std::vector<gpu_summary_row> gpus;  ///< GPU summary; empty when no kernel has args "device"
  bool uses_gpu = false;              ///< runtime, kernel, memcpy or memset events exist
  bool has_communication = false;     ///< the Communication role has any range (column shown)
  bool has_kernel = false;            ///< the Kernel role (non-communication kernels) has any range
  /// Things the plugin did silently and the UI should say (dropped tail steps, …).
  std::vector<std::string> notes;
  double steps_start = 0;             ///< first kept step's start (GPU metrics range)
  double steps_end = 0;               ///< last kept step's end
  std::vector<std::string> dropped_steps;  ///< names of the tail steps removed (#tail-steps)
  bool synthetic_step = false;        ///< no ProfilerStep#: one step "0" over the host range
  bool steps_extended = false;        ///< #step-extension matched device nodes (steps follow the GPU work)
  std::set<std::int64_t> gpu_ids;     ///< distinct args "device" of kernel events

  /// Whether the plugin shows the column of `role` (plugin-rules.md#overview-payload):
  /// Kernel/Memcpy/Memset/Runtime only when uses_gpu, Communication only when has_communication,
  /// the others always.
  bool shows(step_role role) const noexcept;
};

/// Computes the Overview. `trees` must be built from `model` (build_op_tree).
overview_result compute_overview(const trace_model& model, const op_trees& trees,
                                 const overview_options& options = {});

// ---------------------------------------------------------------------------------------------
// Display forms (plugin-rules.md#overview-payload, #gpu-summary), formatted as the plugin formatted
// them

/// One row of the GPU Summary panel: {title, value}.
struct gpu_summary_item {
  std::string title;
  std::string value;
};
/// The panel rows: per GPU (ascending id, separated by {"<hr/>", ""}): {"GPU <g>:", ""}, then
/// Name, Memory, Compute Capability (each when known), "GPU Utilization", "Est. SM Efficiency",
/// "Est. Achieved Occupancy", "Kernel Time using Tensor Cores" (each when computed), values like
/// "55.51 %" (Python str of round(·, 2)). Empty when there is no GPU.
std::vector<gpu_summary_item> gpu_summary_items(const overview_result& overview);
/// Explanation of the metrics the panel shows (plain text, one paragraph per metric).
std::string gpu_summary_tooltip(const overview_result& overview);

/// The `performance` tree of plugin-rules.md#overview-payload: the root "Average Step Time" (value
/// round(avg total), extra 100) then one child per shown column, in column order (value round(avg
/// role), extra round(100·avg role / avg total, 2), 0 when the total is 0).
struct performance_item {
  std::string name;
  double value = 0;
  double extra = 0;
};
std::vector<performance_item> performance_breakdown(const overview_result& overview);

// ---------------------------------------------------------------------------------------------
// Building blocks (exposed for tests and for the distributed view)

/// Whether `name` is a communication op name under `options` (plugin-rules.md#event-categories,
/// Q5).
bool is_communication_name(std::string_view name, const overview_options& options);

/// The merged range list of each role (plugin-rules.md#role-ranges) plus the host/global extents.
struct role_ranges {
  interval_list ranges[step_role_count];  ///< indexed by step_role; `other` stays empty
  double host_min = 0, host_max = 0;      ///< over op/python/ProfilerStep events; valid if has_host
  bool has_host = false;
  double global_min = 0, global_max = 0;  ///< over every used non-memory event; valid if has_global
  bool has_global = false;
  const interval_list& operator[](step_role r) const { return ranges[static_cast<std::size_t>(r)]; }
};
role_ranges compute_role_ranges(const trace_model& model, const overview_options& options = {});

/// A host step before extension.
struct host_step {
  std::string name;
  double start = 0;
  double end = 0;
};
/// plugin-rules.md#steps: ProfilerStep# events in time order, else one step "0" over the host range
/// (an empty list when there is no host event at all).
std::vector<host_step> host_steps(const trace_model& model, const role_ranges& roles,
                                  const overview_options& options = {}, bool* synthetic = nullptr);

/// A runtime as plugin-rules.md#step-extension sees it: its interval and the intervals of the
/// device nodes it launched.
struct launch {
  double start = 0;
  double end = 0;
  /// The device nodes it launched, in launch order, as indexes into extend_steps' `all_devices`
  /// (a view: compute_overview points it at the op tree's own lists, so the millions of
  /// launches of a big trace cost 32 bytes each and no heap block).
  std::span<const std::uint32_t> devices;
};
/// Result of plugin-rules.md#step-extension for each step.
struct extended_steps {
  std::vector<interval> steps;           ///< extended ranges (or the host ranges if none matched)
  std::vector<std::int64_t> device_count;  ///< cnt_i
  bool matched = false;                  ///< some device node was matched
};
/// plugin-rules.md#step-extension. `launches` in any order; `all_devices` = every device node (id,
/// interval) of the trace, which launch::devices index.
extended_steps extend_steps(const std::vector<interval>& host, std::vector<const launch*> launches,
                            const std::vector<std::pair<std::uint32_t, interval>>& all_devices);

/// plugin-rules.md#tail-steps: how many leading steps to keep given cnt_i (all when fewer than 2
/// steps).
std::size_t steps_to_keep(const std::vector<std::int64_t>& device_count);

/// plugin-rules.md#step-time-breakdown: cost of each role per step. `steps` are the final step
/// ranges.
std::vector<step_row> breakdown(const role_ranges& roles, const std::vector<interval>& steps);

// ---------------------------------------------------------------------------------------------
// GPU counters of the Trace view (plugin-rules.md#gpu-counters)

enum class gpu_counter : std::uint8_t { utilization, sm_efficiency };

/// One `ph:"C"` point: pid = gpu, name = gpu_counter_name(), args {gpu_counter_arg(): value}.
struct counter_point {
  std::int64_t gpu = 0;
  gpu_counter counter = gpu_counter::utilization;
  double ts = 0;       ///< µs, absolute like the trace
  double value = 0;
  friend bool operator==(const counter_point&, const counter_point&) = default;
};
/// "GPU <g> Utilization" / "GPU <g> Est. SM Efficiency".
std::string gpu_counter_name(std::int64_t gpu, gpu_counter counter);
/// "GPU Utilization" / "Est. SM Efficiency".
std::string_view gpu_counter_arg(gpu_counter counter) noexcept;

/// The counter points the Trace view inserts (plugin-rules.md#gpu-counters), in the plugin's order:
/// the utilization series of every GPU (ascending id): (g0, 1), (g0, 0), (bucket start, value)…,
/// (g1, 0); then the SM-efficiency series of every GPU that has segments: (g0, 1), (g0, 0), then
/// (segment start, value), (segment end, 0) per segment (not clipped to the steps). Empty when
/// no kernel has args "device". [g0, g1) = the "PyTorch Profiler (0)" span, else the extent of
/// all events; buckets are the smallest power of ten µs giving at most 100 of them.
std::vector<counter_point> gpu_utilization_counters(const trace_model& model);

/// Receives the SM-efficiency series of gpu_utilization_counters(model, sink) instead of the
/// result: reserve() once with the number of points, then every point of those series, in the
/// result's order. (The Trace view keeps them as columns; a 10 GB trace has 10 million, which
/// would otherwise be held twice while the columns are written.)
class sm_efficiency_sink {
 public:
  virtual ~sm_efficiency_sink() = default;
  virtual void reserve(std::size_t points) = 0;
  virtual void point(std::int64_t gpu, double ts, double value) = 0;
};
/// gpu_utilization_counters(model) with the SM-efficiency points given to `sm`: the result holds
/// the utilization series only.
std::vector<counter_point> gpu_utilization_counters(const trace_model& model, sm_efficiency_sink& sm);

/// The SM-efficiency segments of one GPU (plugin-rules.md#gpu-summary): over every elementary
/// interval between kernel start/end points, min(Σ blocks-per-SM of the running kernels, 1), kept
/// when > 0.
struct valued_interval {
  double start = 0;
  double end = 0;
  double value = 0;
};
std::vector<valued_interval> sm_efficiency_segments(const trace_model& model, std::int64_t gpu);
/// The plugin's merge_ranges_with_value over `samples` ({start, end, value} per kernel, in the
/// events' order): the segments where the summed value of the samples covering them is > 0,
/// capped at 1, in time order; the sums are made in the plugin's order (bit-identical).
std::vector<valued_interval> merge_ranges_with_value(const std::vector<valued_interval>& samples);

}  // namespace kinetoscope::analysis
