// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file summary.hpp
/// The small, resident part of a loaded trace file: what the server answers from without the
/// trace's model (the full `profile`, store.hpp), and what the persisted index (trace_index.hpp)
/// keeps besides the model's columns.
///
///     profile (full: model, report, timeline, ...)  ── evictable, reloaded from the index
///        └─► file_summary: the bodies of the views' default requests, the view flags, the
///            diagnostics, the worker's part of the Distributed view, its rank summary
///            (job view)                                                ── resident, persisted
///
/// The bodies are the exact bytes /api would answer for the requests the web app makes by
/// default (api.hpp canonical_requests()); any other request (another unit, a memory range,
/// a call stack, the timeline) needs the full profile.

#include <cstdint>
#include <map>
#include <string>

#include "analysis/distributed_view.hpp"
#include "analysis/job_view.hpp"
#include "analysis/model.hpp"

namespace kinetoscope::server {

struct file_summary {
  std::uint64_t generation = 0;  ///< unique per load of the file's content (cache keys)
  std::uint64_t file_bytes = 0;
  double load_seconds = 0;       ///< parse + views when the trace was loaded from JSON
  bool from_index = false;       ///< this summary was read from a persisted index
  /// profile::heap_bytes() of the full profile as the server holds it; 0 when the summary was
  /// made by `kinetoscope index`, whose profile lacks the parts only a server builds (the memory
  /// range index, the timeline's columns once written).
  std::uint64_t full_bytes = 0;
  std::uint64_t warnings = 0;    ///< Σ diagnostics.warnings
  analysis::load_diagnostics diagnostics;
  bool kernel_view = false, memory_view = false, module_view = false;
  std::string timeline_error;    ///< why the timeline could not be built (empty: it can)
  /// Body per canonical request key (api.hpp request_key()). The overview's is made for one
  /// worker; the server sets the span's worker count when it serves it.
  std::map<std::string, std::string> bodies;
  analysis::distributed_worker_part distributed;
  /// The job view's summary of this rank (summarize_rank of the overview) and its rank
  /// (distributedInfo.rank; -1 when the trace has none).
  analysis::rank_summary rank;
  std::int64_t rank_id = -1;

  /// Approximate heap bytes (what a resident summary costs).
  std::size_t bytes() const noexcept;
};

/// The Distributed view's default bodies of one span (the four plugin panels and the Ranks
/// section), computed together once per set of member files and persisted next to their
/// indexes: a warm start serves them without the job view or the panels' JSON.
struct span_bodies {
  bool available = false;                     ///< the span has the Distributed view
  std::map<std::string, std::string> bodies;  ///< "gpuinfo", "overlap", "waittime", "commops", "ranks"
  bool from_cache = false;                    ///< read from the cache folder
};

/// The summary as bytes (the index's summary section), little-endian:
///
///     "KSSUMM01", u64 n + n bytes of JSON (the small, irregular fields: diagnostics, view
///     flags, devices, overlap bars, rank id), u64 n + n strings (u64 length + bytes: the string
///     table), u64 n + n bodies (key, text), the communication records as packed (u64 n + n
///     names, u64 n + n step names, u64 n + n records: u32 name, u32 step or 0xffffffff, i64
///     external id, f64 start, end, i64 bytes, u32 first range, u32 range count; u64 n + n
///     (f64, f64) ranges), u64 n + n rank steps (u32 name, six f64), u64 n + n rank texts, u64 n +
///     n rank collectives (u32 group, description, name: ids into the rank texts; i64 seq, group
///     size, bytes, f64 launch, start, end, u8 on device, i32 step).
///
/// Strings are ids into the table. The per-record parts are most of a rank's summary (a
/// collective per NCCL call): records read without a JSON parser make a warm start of hundreds
/// of ranks a matter of the disk.
std::string summary_to_bytes(const file_summary& s);
/// Reads a summary written by summary_to_bytes(); throws std::runtime_error when the bytes are
/// not one (a count larger than the bytes, an id, enum or step out of range, a time not finite,
/// bytes left over: the index is then treated as corrupt). `generation` is left 0.
file_summary summary_from_bytes(std::string_view bytes);

/// span_bodies as bytes (the summary section of a span's cache file, store::span_panels()):
/// "KSSPAN01", u8 available, u64 n + n (u64 length + key, u64 length + body).
std::string span_bodies_to_bytes(const span_bodies& b);
/// Reads what span_bodies_to_bytes() wrote; throws std::runtime_error when the bytes are not
/// that (the cache file is then computed and written again).
span_bodies span_bodies_from_bytes(std::string_view bytes);

}  // namespace kinetoscope::server
