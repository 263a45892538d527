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
  std::uint64_t full_bytes = 0;  ///< profile::heap_bytes() of the full profile
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

/// The summary as JSON text (for the index).
std::string summary_to_json(const file_summary& s);
/// Reads a summary written by summary_to_json(); throws std::runtime_error when the text is
/// not one (the index is then treated as corrupt). `generation` is left 0.
file_summary summary_from_json(std::string_view text);

}  // namespace kinetoscope::server
