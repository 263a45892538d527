// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file timeline.hpp
/// The trace timeline served by windows (http-api.md "Trace timeline"): built once per loaded
/// trace, it lays every duration event into tracks (CPU threads, GPU streams, others) and lanes
/// (nesting depth; overlapping GPU slices get extra lanes, nothing is dropped), then answers a
/// window [start, end] at `px` columns with at most ~20 000 slices, merging slices shorter than
/// a pixel. The browser never holds the whole trace.
///
/// **Tracks.** Every event except `[memory]` instants belongs to exactly one track:
/// * `cpu`: host events (op, user_annotation, python, python_function, module, runtime,
///   driver), one track per (pid, tid), named by the trace's `thread_name` metadata ("thread
///   4961 (dataloader)"; a name without the tid becomes "thread <tid> (<name>)"), else
///   "thread <tid>"; group "<process_name> (pid <pid>)" ("process (pid <pid>)" without one), plus
///   " · <process_labels>" unless the labels are the default "CPU".
///   The thread holding a `ProfilerStep#` event comes first, then the others by process sort
///   index (default pid), pid, thread sort index (default tid), tid.
/// * `gpu`: kernel, memcpy, memset and gpu_user_annotation events, one track per (device = pid,
///   stream = tid), named "GPU <device> stream <stream>" (plus " (<thread_name>)" when the trace
///   names the stream otherwise), group "GPU <device>" (plus " · <process_labels>" unless they are
///   "GPU <device>", plus " · <deviceProperties name>"),
///   ordered by device, thread sort index, stream.
/// * `other`: every other event (the "PyTorch Profiler (0)" Trace span, unknown categories), one
///   track per (pid, tid), named by its thread_name, else "<pid> <tid>" (string pids/tids by their
///   text); group: the process_name, else the pid text.
/// Metadata names are trimmed of surrounding blanks; the last metadata event of a kind wins.
/// Track ids are the positions in that display order.
///
/// **Lanes (rows).** Inside a track, slices are taken in (ts asc, dur desc, event index) order and
/// each goes to the lowest free lane at or below its nesting depth (one more than the lane of the
/// innermost still-open slice): properly nested host events get row = depth; a slice that
/// partially overlaps its parent, or kernels overlapping on one stream, move to the next lane
/// whose last slice has ended. No two slices of a lane overlap (touching is allowed), none is
/// dropped. On GPU tracks gpu_user_annotation slices are laid out first, in rows 0..A-1, and the
/// device work below them. A negative or NaN `dur` counts as 0.
///
/// **Counters.** `counters` of tracks_json are the "GPU <g> Utilization" series of
/// analysis::gpu_utilization_counters (one per GPU, points [t relative to t0, value in 0..1]; at
/// most ~100 buckets, sent whole). The series that grow with the trace are listed by tracks_json
/// under `windowed_counters` (name, unit "fraction"/"bytes", max, number of points) and served
/// per window by counters_json: "GPU <g> Est. SM Efficiency" (two points per kernel run, in time
/// order) and, from the [memory] instants, "GPU <id> Memory Allocated" / "GPU <id> Memory
/// Reserved" (Total Allocated / Total Reserved, CUDA devices) and "CPU Memory Allocated". A
/// window sends the point in force at its start, then per pixel column the first, lowest,
/// highest and last point (time order), then the first point after it: at most 4 px + 2 points
/// a series, and the step line drawn from them has the extremes of every column.
///
/// **Windows.** Each lane keeps its slices in ts order as event indices (times read from the model),
/// and precomputed levels of detail: the same lane merged at thresholds 0.25, 1, 4, 16, ... µs
/// (a level is kept when it halves the item count of the previous kept one). A window with merge
/// width m = (end - start) / px scans, per lane, the coarsest level whose threshold is <= m from
/// a binary search on the ends: merging is monotone in m, so the answer is the same as merging
/// the raw slices (except that a pre-merged block crossing a window edge is sent whole). Merging:
/// consecutive slices shorter than m with a gap < m form one block (id -1, count = members, name
/// of the longest member, ts/dur of their union); slices >= m, and small slices with no small
/// neighbour, are sent as they are (real ts/dur, count 1, id = event index). When more than
/// `max_slices` result, m doubles until they fit; `truncated` is true only when they still do not
/// fit with m beyond 4x the window width (then the first `max_slices` in output order are sent).
/// Slices are output ordered by track (display order), row, ts. A slice is in the window when
/// end >= start and ts <= end (times relative to t0).
///
/// **Area selection (summary_json).** The slices of the chosen tracks with end >= start and
/// ts <= end (the window rule), each counted with its duration clipped to [start, end]. A slice's
/// parent is the innermost slice of its track, in the layout order, that is still open at its
/// start and ends at or after its end (on GPU tracks annotations and device work nest
/// separately); self = clipped duration minus the union of its children's clipped durations.
/// `rows` group the slices by name (count, total, self, avg = total / count, min, max of the
/// clipped durations, percent = total / range * 100), total desc then name, at most 1000 (`names`
/// says how many there were). `gpus`: per device of the chosen GPU tracks, busy = the union of
/// its kernels, memcpys and memsets inside the range, idle = range - busy. `flame`: the calling
/// tree merged by name path across the chosen tracks (columns parent/name/total/self/count,
/// parents before children), at most 20 000 nodes in creation order (`truncated` otherwise).
///
/// **Hostile input (the caller contract: everything is clamped, nothing throws).** NaN start is
/// treated as 0 and NaN end as the trace duration; ±inf and huge values are clamped to ±1e15 µs;
/// start > end gives an empty window (echoed as given after clamping); px is clamped to
/// [1, 10000]; max_slices 0 is treated as 1. Unknown track ids in `tracks` are ignored and
/// duplicates count once. search: the limit is clamped to [0, 1000]; an empty query matches
/// nothing. Strings are escaped for JSON; invalid UTF-8 becomes U+FFFD.
///
/// **Persisted form.** What the constructor computes (the tracks, the lanes' slices, the levels
/// of detail, the windowed counters and the tracks answer) is held as flat columns of fixed-size
/// records (`timeline_columns`), so that the persisted index (trace_index.hpp) writes them byte
/// for byte and a reopened trace gets its timeline back with a few reads instead of laying out
/// every event again (1 GB trace: 0.33 s of layout against ~20 ms of reading). The constructor
/// from columns checks every index, range and order it relies on against the model and throws
/// std::invalid_argument on the first that does not hold: it never trusts them.
///
/// Precondition: event ts and dur are finite (the loader guarantees it; JSON has no NaN).
///
/// All const members are safe to call from several threads at once.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/model.hpp"

namespace kinetoscope::server {

/// Sizes of a built timeline (benchmarks, diagnostics).
struct timeline_stats {
  std::size_t tracks = 0;
  std::size_t lanes = 0;
  std::size_t slices = 0;        ///< events laid out (all but [memory] instants)
  std::size_t level_items = 0;   ///< items in all levels of detail together
  std::size_t memory_bytes = 0;  ///< approximate heap held by the index
};

/// One lane (a row of a track): its slices are lane_events[ev_begin, ev_begin + ev_count) (event
/// indices in ts order), its levels of detail levels[level_begin, level_begin + level_count)
/// (finest first). 32 bytes, no padding (written byte for byte).
struct timeline_lane {
  std::uint32_t track = 0, row = 0;
  std::uint64_t ev_begin = 0, ev_count = 0;
  std::uint32_t level_begin = 0, level_count = 0;
};
/// One level of detail of a lane: items[item_begin, item_begin + item_count) merged at
/// `threshold` µs.
struct timeline_level {
  double threshold = 0;
  std::uint64_t item_begin = 0, item_count = 0;
};
/// One merged item: the union [ts, end] (absolute µs) of `count` slices, the longest of which
/// lasts `maxdur` and is event `longest`.
struct timeline_item {
  double ts = 0, end = 0, maxdur = 0;
  std::uint32_t count = 0, longest = 0;
};
static_assert(sizeof(timeline_lane) == 32 && sizeof(timeline_level) == 24 && sizeof(timeline_item) == 32,
              "persisted byte for byte: no padding");

/// A built timeline as flat columns (see "Persisted form"). `meta` is a small JSON object: t0,
/// duration, the tracks (names, groups, kinds, ids, rows, first lanes), the windowed counter
/// series (name, unit, max, first point, points) and the tracks answer; the points of all
/// series lie in counter_ts / counter_values, series after series.
struct timeline_columns {
  std::string meta;
  std::vector<timeline_lane> lanes;
  std::vector<std::uint32_t> lane_events;
  std::vector<timeline_level> levels;
  std::vector<timeline_item> items;
  std::vector<double> counter_ts, counter_values;
};

class timeline {
 public:
  /// `serve`: for the Trace view's requests. `columns`: for columns(), t0() and tracks_json()
  /// only (`kinetoscope index` writes them and frees the timeline): the per-event index the
  /// event queries read (8 bytes an event, 130 MB on a 10 GB trace) is dropped once the lanes
  /// are laid out, and made again from the columns if a query comes after all.
  enum class use { serve, columns };
  /// Indexes `model` (which must outlive this object). O(n log n) in the events.
  explicit timeline(const analysis::trace_model& model, use u = use::serve);
  /// The timeline of `model` from the columns a timeline of that model wrote (`columns()`), in
  /// linear time. Throws std::invalid_argument when they do not fit the model (see "Persisted
  /// form").
  timeline(const analysis::trace_model& model, timeline_columns columns);
  ~timeline();
  timeline(const timeline&) = delete;
  timeline& operator=(const timeline&) = delete;

  /// `/api/timeline/tracks` JSON (built once by the constructor).
  std::string tracks_json() const;
  /// `/api/timeline` JSON for [start_us, end_us] relative to t0 at `px` columns; `tracks`
  /// empty = all tracks, else only those ids. At most `max_slices` slices.
  std::string window_json(double start_us, double end_us, int px, const std::vector<int>& tracks = {},
                          std::size_t max_slices = 20000) const;
  /// As window_json; `use_levels` = false merges the raw slices (tests compare both; slower).
  std::string window_json(double start_us, double end_us, int px, const std::vector<int>& tracks,
                          std::size_t max_slices, bool use_levels) const;
  /// `/api/timeline/event` JSON; nullopt for an unknown id. With `subtree`, `flows` also holds
  /// the flows of every slice of its track inside it (ts order; each flow names its own end in
  /// `from`; an operator's "launches" come from its runtime calls then), at most 1000 in all
  /// (`flows_truncated`).
  std::optional<std::string> event_json(std::uint32_t id, bool subtree = false) const;
  /// Builds the flow lookup tables event_json() needs (by correlation, external id, fwdbwd).
  /// event_json() builds them on first use; the server calls this after loading so the first
  /// click on a slice does not pay for it (~50 ms on a 1 GB trace). Idempotent, thread-safe.
  void prepare_flows() const;
  /// `/api/timeline/counters` JSON: the windowed counters over [start_us, end_us] at `px` columns
  /// (see "Counters" above).
  std::string counters_json(double start_us, double end_us, int px) const;
  /// `/api/timeline/summary` JSON: what the slices of `tracks` (empty = all) do inside
  /// [start_us, end_us] (relative to t0), computed from every slice (never from merged blocks).
  /// See "Area selection" above.
  std::string summary_json(double start_us, double end_us, const std::vector<int>& tracks = {}) const;
  /// `/api/timeline/search` JSON.
  std::string search_json(std::string_view query, std::size_t limit) const;

  /// The smallest event ts (absolute µs); times of the JSON answers are relative to it.
  double t0() const noexcept;
  /// Track id of event `id`, or -1 ([memory] instants, ids out of range).
  int track_of(std::uint32_t id) const;
  /// Row of event `id` inside its track, or -1.
  int row_of(std::uint32_t id) const;
  /// Sizes of the index.
  timeline_stats stats() const noexcept;
  /// The persisted form (see "Persisted form"): what the constructor from columns takes back.
  const timeline_columns& columns() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kinetoscope::server
