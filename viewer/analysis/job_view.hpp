// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file job_view.hpp
/// The job view of a distributed run with many ranks: per-rank step figures, collectives matched
/// across ranks, and stragglers. Unlike the Distributed view (distributed_view.hpp, the plugin's
/// panels, which need every worker's model at once), it works in two stages so that hundreds of
/// ranks stay cheap:
///
///     per file, at load:  trace_model + overview ─► summarize_rank() ─► rank_summary (small)
///     per span, on use:   rank_summaries of every rank ─► analyze_job() ─► job_result
///
/// A rank_summary holds per step the step time, GPU compute (non-communication kernels),
/// communication (collective kernels), their overlap and data-loading time, and the list of the
/// rank's collectives (process group, Seq, name, bytes, host launch, kernel start and end). The
/// server keeps it in each file's summary and persists it in the index (server/summary.hpp), so a
/// job is analysed without reloading its traces.
///
/// analyze_job() matches the collectives of all ranks by (process group, Seq) — or, for traces
/// without Seq, by their order within (process group, collective name) — and derives each rank's
/// arrival (its kernel's start, else its host launch), the arrival skew and the last arriver, the
/// time each rank waited for the last one, and stragglers: (rank, step) cells whose compute or
/// data-loading time, or whose late arrival at collectives not explained by the previous
/// collective of its process group (one NCCL stream per communicator),
/// exceeds the median over the ranks by more than a robust threshold (median absolute deviation,
/// with floors relative to the step time), so that ordinary noise never reports anything.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/model.hpp"
#include "analysis/overview.hpp"

namespace kinetoscope::analysis {

/// One kept step of a rank (the Overview's steps), times in µs.
struct rank_step {
  std::string name;            ///< "12" for ProfilerStep#12
  double start = 0;            ///< the Overview's (extended) step range
  double end = 0;
  double compute = 0;          ///< length of ∪ non-communication kernels inside the step
  double communication = 0;    ///< length of ∪ collective kernels inside the step
  double overlap = 0;          ///< length of compute ∩ communication
  double data_loading = 0;     ///< length of ∪ data-loader ops inside the step
  friend bool operator==(const rank_step&, const rank_step&) = default;
};

/// One collective as one rank saw it. Its texts are ids into rank_summary::strings (a rank has
/// thousands of collectives and a handful of distinct names).
struct rank_collective {
  std::uint32_t group = 0;     ///< "Process Group Name" ("0"); "" when absent
  std::uint32_t group_desc = 0;  ///< "Process Group Description" ("default_pg")
  std::uint32_t name = 0;      ///< "Collective name" ("allreduce")
  std::int64_t seq = -1;       ///< "Seq"; -1 when the trace has none
  std::int64_t group_size = -1;
  std::int64_t bytes = 0;      ///< max(In, Out msg nelems) × element size of dtype (0 when unknown)
  double launch = 0;           ///< host: the record_param_comms op's start (the kernel's start without one)
  double start = 0;            ///< the collective kernel's start (the host op's without a kernel)
  double end = 0;              ///< the collective kernel's end (the host op's without a kernel)
  bool on_device = false;      ///< start/end come from a kernel
  std::int32_t step = -1;      ///< index into rank_summary::steps of the step holding `launch`; -1 = none
  friend bool operator==(const rank_collective&, const rank_collective&) = default;
};

/// What the job view keeps of one rank's trace.
struct rank_summary {
  std::vector<rank_step> steps;
  std::vector<rank_collective> collectives;  ///< in launch order
  /// The collectives' group names, descriptions and names, each once.
  std::vector<std::string> strings;

  /// The id of `s` in `strings` (added when new).
  std::uint32_t intern(std::string_view s);
  /// The text of an id; "" when out of range.
  std::string_view str(std::uint32_t id) const noexcept {
    return id < strings.size() ? std::string_view(strings[id]) : std::string_view();
  }
  friend bool operator==(const rank_summary&, const rank_summary&) = default;
};

/// The summary of one trace; `overview` must be compute_overview() of `model`.
/// `collectives_by_name` (kinetoscope's rules, docs/kinetoscope-rules.md#k4): a trace without any
/// collective metadata takes its `<backend>:<name>` host ops as its collectives.
rank_summary summarize_rank(const trace_model& model, const overview_result& overview,
                            bool collectives_by_name = false);

/// One rank of the job. `summary` must stay valid during analyze_job().
struct job_input {
  std::string worker;          ///< worker name ("node0_3")
  std::int64_t rank = -1;      ///< distributedInfo.rank; -1 = unknown (then ordered by worker)
  const rank_summary* summary = nullptr;
};

/// The metrics of the rank × step heatmaps.
enum class job_metric : std::uint8_t { step_time, compute, communication, overlap, wait, data_loading };
inline constexpr std::size_t job_metric_count = 6;
/// "step_time", "compute", "communication", "overlap", "wait", "data_loading".
std::string_view job_metric_name(job_metric m) noexcept;

/// One rank's arrival at a matched collective.
struct job_arrival {
  std::uint32_t rank_index = 0;  ///< index into job_result::ranks
  double arrival = 0;            ///< kernel start (host launch without a kernel)
  double end = 0;
  double wait = 0;               ///< time this rank's collective ran before the last rank arrived
};

/// A collective matched across ranks.
struct job_collective {
  std::string group;             ///< process group name
  std::string group_desc;
  std::string name;              ///< collective name
  std::int64_t seq = -1;         ///< Seq, or the order within (group, name) when matched by order
  std::int64_t bytes = 0;        ///< the largest of the ranks' sizes
  std::int64_t group_size = -1;  ///< as the ranks wrote it (-1 unknown)
  std::int32_t step = -1;        ///< the step column of the first rank's launch; -1 = none
  std::vector<job_arrival> arrivals;  ///< in rank order
  double skew = 0;               ///< max − min arrival
  std::uint32_t last_rank_index = 0;  ///< the last arriver (index into job_result::ranks)
};

/// Why a (rank, step) is slow.
enum class straggler_cause : std::uint8_t { compute, data_loading, communication };
/// "compute", "data loading", "communication".
std::string_view straggler_cause_name(straggler_cause c) noexcept;

struct job_straggler {
  std::uint32_t rank_index = 0;  ///< index into job_result::ranks
  std::uint32_t step = 0;        ///< step column
  straggler_cause cause = straggler_cause::compute;
  double excess_us = 0;          ///< the rank's figure − the median over the ranks
  std::string evidence;          ///< one sentence with the figures
};

struct job_rank {
  std::string worker;
  std::int64_t rank = -1;
};

/// The job view of one span.
struct job_result {
  std::vector<job_rank> ranks;        ///< ordered by rank (then worker)
  std::vector<std::string> steps;     ///< step columns (names), in time order
  /// heatmaps[metric][rank_index * steps.size() + step], µs; NaN where the rank lacks the step.
  std::array<std::vector<double>, job_metric_count> heatmaps;
  /// Each cell's step range (µs), same layout: what a drill-down opens. NaN where absent.
  std::vector<double> step_start, step_end;
  std::vector<job_collective> collectives;  ///< in the first rank's launch order
  std::vector<job_straggler> stragglers;    ///< by step, then rank, then cause
  /// "seq" (every collective carried Seq) or "order" (matched by order within group and name).
  std::string matched_by = "seq";
  std::size_t unmatched = 0;          ///< collectives seen by fewer ranks than their group size
  std::vector<std::string> notes;     ///< what the UI should say (order matching, missing steps)

  double value(job_metric m, std::size_t rank_index, std::size_t step) const {
    return heatmaps[static_cast<std::size_t>(m)][rank_index * steps.size() + step];
  }
};

/// The job view over every rank of one span.
job_result analyze_job(const std::vector<job_input>& ranks);

/// Bytes per element of a c10d dtype name ("Float" 4, "BFloat16" 2, "Long" 8, ...); 0 when unknown.
std::int64_t collective_dtype_bytes(std::string_view dtype) noexcept;

}  // namespace kinetoscope::analysis
