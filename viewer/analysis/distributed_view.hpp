// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file distributed_view.hpp
/// The Distributed view of torch-tb-profiler 0.4.3 (docs/plugin-rules.md#distributed-view):
/// communication records per worker, the cross-worker "real" data-transfer time, and the four
/// panels (Device Information, Computation/Communication Overview, Synchronizing/Communication
/// Overview, Communication Operations Stats) for the workers of one span.
///
///     per worker: trace_model ─► comm records         ─► step assignment (kept overview steps)
///                      └──────► role ranges        ─────► overlap bars per step
///     all workers: records matched by index ─► real ranges         ─► wait bars, op stats
///     (docs/plugin-rules.md#distributed-view; role ranges: #role-ranges)
///
/// **Example**:
/// @code
/// std::vector<distributed_worker_input> in;
/// for (auto& w : workers)   // same span of every worker
///   in.push_back({w.name, &w.model, w.trees.used_devices, distributed_steps(w.overview)});
/// distributed_result d = compute_distributed(in);
/// if (d.available) for (auto& w : d.workers) print(w.comm_ops);
/// @endcode

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "analysis/intervals.hpp"
#include "analysis/model.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/overview.hpp"

namespace kinetoscope::analysis {

/// Quirk switches (plugin-rules.md#quirks). Defaults reproduce the plugin.
struct distributed_options {
  /// Q5: false = only the 5 NCCL + 5 Gloo collective names of the plugin are communication
  /// ops; true = every `nccl:*` / `gloo:*` host op.
  bool all_collectives = false;
  /// Q4: true = `gpu_user_annotation` events named like a collective make records (they share
  /// the host annotation's external id, so the GPU-side one overwrites it) and count in the
  /// role ranges exactly like host annotations (the plugin); false = they are ignored.
  bool gpu_annotations_as_host = true;
  /// docs/kinetoscope-rules.md#k4: the step name given to collectives outside every kept step;
  /// empty = none, which the panels show as "null" (the plugin).
  std::string outside_steps_label;

  /// kinetoscope's rules (docs/kinetoscope-rules.md); analysis::rules() hands them out.
  static distributed_options improved() { return {true, false, "outside steps"}; }
};

/// One kept step of a worker's Overview (after plugin-rules.md#step-extension extension and
/// #tail-steps tail dropping).
struct distributed_step {
  std::string name;
  double start = 0;
  double end = 0;
};
/// The kept steps of an Overview, in order.
std::vector<distributed_step> distributed_steps(const overview_result& overview);

/// One worker of the span. The pointers must stay valid during compute_distributed().
struct distributed_worker_input {
  std::string worker;                  ///< worker name from the file name ("node_0", "host_1")
  const trace_model* model = nullptr;
  std::set<std::int64_t> used_devices; ///< op_trees::used_devices of build_op_tree(*model)
  std::vector<distributed_step> steps; ///< distributed_steps(compute_overview(...))
};

/// One communication op instance (plugin-rules.md#distributed-view).
struct comm_record {
  std::string name;                    ///< "nccl:all_reduce", …
  std::int64_t external_id = 0;
  double start = 0;                    ///< the host (or GPU-annotation) op interval
  double end = 0;
  /// [op interval] + the intervals of the kernels with the same external id, sorted by
  /// (start, −end) (quirk Q6: the op interval is the first "kernel range").
  std::vector<interval> ranges;
  std::vector<interval> real_ranges;   ///< #distributed-view, one per range (same order)
  std::optional<std::string> step;     ///< name of the kept step containing [start, end]; nullopt = none
  std::int64_t bytes = 0;              ///< Σ over inputs Π shape · bytes(type)
};

/// Computation/Communication Overview bar, µs: [C−O, O, M−O, other].
struct overlap_bar {
  double computation = 0;    ///< computation not overlapped (C − O)
  double overlap = 0;        ///< O
  double communication = 0;  ///< communication not overlapped (M − O)
  double other = 0;          ///< step duration + O − C − M
};

/// Synchronizing/Communication Overview bar, µs: [transfer, total − transfer].
struct wait_bar {
  double transfer = 0;       ///< "Data Transfer Time" = len(∪ real ranges)
  double synchronizing = 0;  ///< "Synchronizing Time" = len(∪ ranges) − transfer
};

/// One row of the Communication Operations Stats table.
struct comm_op_row {
  std::string name;
  std::int64_t calls = 0;
  std::int64_t total_size_bytes = 0;
  std::int64_t avg_size_bytes = 0;     ///< round(total / calls) (Python rounding)
  double total_latency_us = 0;         ///< len(∪ ranges of the op's records), raw
  std::int64_t avg_latency_us = 0;     ///< round(total latency / calls)
  double data_transfer_us = 0;         ///< len(∪ real ranges), raw
  std::int64_t avg_data_transfer_us = 0;
};

/// Everything the view shows for one worker.
struct distributed_worker_result {
  std::string worker;
  /// Sorted by (start, −end), with their real ranges; empty when combine_distributed() was told
  /// not to keep them.
  std::vector<comm_record> records;
  /// Per kept step, in step order: (step name, bar).
  std::vector<std::pair<std::string, overlap_bar>> overlap;
  /// "all": per-component Σ over steps / number of steps, truncated toward zero.
  overlap_bar overlap_all;
  /// Per step key in first-seen order of the records (nullopt = records outside every step).
  std::vector<std::pair<std::optional<std::string>, wait_bar>> wait;
  /// "all": per-component Σ over step keys / number of keys, truncated toward zero.
  wait_bar wait_all;
  /// Rows in first-seen order of the op names over the sorted records.
  std::vector<comm_op_row> comm_ops;
};

/// One GPU of the Device Information panel.
struct distributed_gpu {
  std::string device;                       ///< "GPU<id>"
  std::optional<std::string> name;
  std::optional<std::string> memory;        ///< "<round(bytes/2^30, 2)> GB", e.g. "31.74 GB"
  std::optional<std::int64_t> memory_raw;
  std::optional<std::string> compute_capability;  ///< "major.minor"
};
struct distributed_process {
  std::string process;                      ///< "Process <id>"
  std::vector<distributed_gpu> gpus;        ///< used devices with properties, ascending id
};
struct distributed_node {
  std::string node;
  std::vector<distributed_process> processes;  ///< sorted by `process` as strings
};

/// The Distributed view of one span.
struct distributed_result {
  /// Whether the view exists (plugin-rules.md#distributed-view). When false, `reason` says why and
  /// the panels are empty (device information is still filled).
  bool available = false;
  std::string reason;
  std::vector<distributed_worker_result> workers;  ///< sorted by worker name
  /// Device Information (workers sorted by name; those without deviceProperties skipped);
  /// empty = the plugin's null.
  std::vector<distributed_node> device_info;
};

/// Computes the view from every worker of one span: prepare_distributed_worker() for each,
/// then combine_distributed().
distributed_result compute_distributed(const std::vector<distributed_worker_input>& workers,
                                       const distributed_options& options = {});

/// What one worker contributes to the view, computed from its trace alone (at load time, so
/// the view of hundreds of workers is combined from these without any of their models).
/// One worker's communication records packed to stay resident (the server keeps every
/// worker's part; a rank of a big job has one record per collective): names and step names
/// once each, fixed-size records, the ranges in one vector. Real ranges are not kept (they
/// are made across workers by combine_distributed()).
struct packed_comm_records {
  static constexpr std::uint32_t no_step = 0xffffffffu;
  struct record {
    std::uint32_t name = 0;          ///< index into names
    std::uint32_t step = no_step;    ///< index into steps; no_step = outside every kept step
    std::int64_t external_id = 0;
    double start = 0;
    double end = 0;
    std::int64_t bytes = 0;
    std::uint32_t first_range = 0;   ///< index into ranges
    std::uint32_t range_count = 0;
    friend bool operator==(const record&, const record&) = default;
  };
  std::vector<std::string> names;
  std::vector<std::string> steps;
  std::vector<record> records;       ///< in the order of comm_record lists (sorted by (start, −end))
  std::vector<interval> ranges;

  std::size_t size() const noexcept { return records.size(); }
  bool empty() const noexcept { return records.empty(); }
  std::size_t heap_bytes() const noexcept;
  static packed_comm_records pack(const std::vector<comm_record>& list);
  /// The records as comm_record (real_ranges empty).
  std::vector<comm_record> unpack() const;
  friend bool operator==(const packed_comm_records&, const packed_comm_records&) = default;
};

struct distributed_worker_part {
  std::vector<device_info> devices;      ///< trace_model::devices
  std::set<std::int64_t> used_devices;   ///< distributed_worker_input::used_devices
  /// Empty when the worker has no communication (then `overlap` is empty too).
  packed_comm_records records;
  std::vector<std::pair<std::string, overlap_bar>> overlap;
  overlap_bar overlap_all;
};
/// The part of one worker (its `worker` name is not needed: combine_distributed() takes it).
distributed_worker_part prepare_distributed_worker(const distributed_worker_input& worker,
                                                   const distributed_options& options = {});
/// The view from the parts of every worker of one span, with their worker names. With
/// `keep_records` false the workers' `records` stay empty (the panels need only the figures made
/// from them; the server keeps the parts, so it does not copy them).
distributed_result combine_distributed(const std::vector<std::pair<std::string, const distributed_worker_part*>>& workers,
                                       bool keep_records = true);

/// Communication records of one worker before the cross-worker steps
/// (plugin-rules.md#distributed-view): sorted, with steps assigned and bytes counted, real_ranges
/// empty. Empty when both NCCL and Gloo ops occur (the plugin discards them).
std::vector<comm_record> communication_records(const trace_model& model, const std::vector<distributed_step>& steps,
                                               const distributed_options& options = {});

/// Bytes per element the plugin knows (plugin-rules.md#distributed-view): "long int" 8, "float" 4,
/// "int" 4, "c10::Half" 2, "c10::BFloat16" 2, "unsigned char" 1, anything else 0.
std::int64_t comm_type_bytes(std::string_view type) noexcept;

/// `^(.*)_(\d+)` on a worker name: ("host", "1") for "host_1"; nullopt when it does not match.
std::optional<std::pair<std::string, std::string>> split_worker_name(std::string_view worker);

}  // namespace kinetoscope::analysis
