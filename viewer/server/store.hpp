// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file store.hpp
/// The logdir as the server sees it: discovery (analysis/discovery.hpp) repeated every
/// reload interval, trace files loaded in the background (new and changed files reloaded,
/// removed ones dropped), each loaded profile kept with its views computed once.
///
/// Memory: what a profile keeps is bounded by its trace's JSON size. The op trees (~170 bytes
/// per event, the largest structure) are built during the load for the views; they stay with
/// the profile only when model + timeline + trees fit in the JSON text's bytes (GPU traces with
/// long args: ~0.5x). Otherwise (many small CPU events, ~137 bytes of JSON each) they are
/// dropped, and the few requests that need them again (operator call stacks, Diff, the Module
/// view's operator tree, a memory range the index cannot answer) rebuild them through store::trees(), which keeps the most
/// recently used ones within store_options::tree_cache_bytes.
/// A file that fails to load keeps its error for the UI and never stops the others.
/// Thread-safe: every public member may be called from any thread.
///
/// Loaded profiles are handed out as `std::shared_ptr<const profile>`: a reload or a removal
/// replaces the store's pointer, never the object, so a request that holds one keeps reading
/// consistent data until it lets go.
///
/// **Example**:
/// @code
/// kinetoscope::server::store s({.logdir = "/logs", .reload_interval_s = 30});
/// s.start();
/// s.wait_idle(std::chrono::seconds(60));
/// for (const auto& run : s.runs())
///   for (const auto& p : s.run_profiles(run)) std::cout << run << " " << p->report.overview.steps.size() << "\n";
/// @endcode

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/diff_view.hpp"
#include "analysis/distributed_view.hpp"
#include "analysis/job_view.hpp"
#include "analysis/kernel_view.hpp"
#include "analysis/model.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/operator_view.hpp"
#include "analysis/report.hpp"
#include "analysis/rules.hpp"
#include "server/index_cache.hpp"
#include "server/summary.hpp"

namespace kinetoscope::server {

class timeline;

struct store_options {
  std::string logdir;
  /// Seconds between rescans of the logdir (tensorboard's --reload_interval); <= 0: scan once.
  double reload_interval_s = 30;
  /// Follow symlinks (to files or directories) whose target lies outside the logdir (off: such
  /// files are listed as "skipped", such directories are not entered, both noted; nothing
  /// outside is read, and the targets are never shown).
  bool follow_outside_symlinks = false;
  /// The largest JSON text of a trace (after gunzip) to load (analysis::load_options).
  std::uint64_t max_text_bytes = std::uint64_t{16} << 30;
  /// Heap bytes of op trees rebuilt on demand (store::trees()) kept for the next request, most
  /// recently used first; a tree larger than this is used by its requests and then dropped.
  std::uint64_t tree_cache_bytes = std::uint64_t{256} << 20;
  /// Where persisted indexes are read and written (trace_index.hpp); empty: none (every start
  /// parses every trace). `kinetoscope --logdir` passes default_cache_dir() unless --no_cache.
  std::string cache_dir;
  /// The size budget of cache_dir's indexes (index_cache.hpp): after each index it writes, the
  /// store evicts the least recently used ones of the folder until they fit, never those of
  /// the traces it holds. 0: no limit. `kinetoscope --logdir` passes --cache_max, else
  /// default_cache_max().
  std::uint64_t cache_max = 0;
  /// Traces smaller than this get no index (index_cache.hpp: parsing them is as fast);
  /// /api/status notes "skipped". Default: index_min_trace_bytes() (1 MiB, or
  /// $KINETOSCOPE_INDEX_MIN_SIZE).
  std::uint64_t index_min_bytes = index_min_trace_bytes();
  /// The memory budget: the resident summaries (file_summary::bytes(), they always stay) plus
  /// the full profiles kept loaded (profile::heap_bytes()), least recently used evicted first
  /// once the two exceed it; 0: no limit. A profile in use by a request stays alive until the
  /// request lets go, whatever the budget.
  std::uint64_t max_memory = 0;
  /// A full profile loaded on demand stays loaded this long whatever the budget, so the request
  /// that waited for it (answered 503, asking again) gets it instead of starting another load.
  /// One pin at a time: the next on-demand load ends it.
  double demand_pin_seconds = 30;
  /// A full profile that failed to load on demand answers that error for this long; the next
  /// request after it starts another load.
  double demand_retry_seconds = 5;
  /// The rule set of the views (analysis/rules.hpp): kinetoscope's unless `--plugin_rules`.
  /// Requests may ask for the other one (`rules=`, store::views()). The persisted indexes hold
  /// the views of one rule set: each rule set has index files of its own (index_file_path).
  analysis::rule_set rules = analysis::rule_set::kinetoscope;
  /// For tests: called on the on-demand thread once a loading profile's timeline has been
  /// handed to timeline-only requests (store::acquire), before its other views are computed.
  std::function<void()> on_early_timeline;
  /// Files loaded at once at start and rescans (each its own thread); a file over 512 MB still
  /// loads alone. `kinetoscope --logdir` uses the number of cores, at most 4.
  unsigned loader_threads = 1;
  /// A summary keeps a default request's body up to this size (larger ones are served from the
  /// full profile).
  std::size_t max_summary_body_bytes = std::size_t{1} << 20;
};

/// Load progress over every file discovered so far.
struct load_progress {
  std::size_t files_total = 0, files_loaded = 0, files_failed = 0;
  std::uint64_t bytes_total = 0;
  /// Bytes of files finished (loaded or failed) plus the part of the file being loaded that the
  /// parser has finished (analysis::load_options::progress_bytes: it moves per 16 MB chunk).
  std::uint64_t bytes_loaded = 0;
  std::string current_file;  ///< the file being loaded (relative to the logdir), or empty
  bool loading = true;     ///< first scan not finished, or files queued/loading
  double percent() const;  ///< bytes_loaded / bytes_total * 100 (100 when nothing to load)
};

/// A run as discovered, whether or not its files have loaded yet.
struct run_info {
  std::string name;
  std::size_t files_loaded = 0;   ///< files with a loaded profile
  std::size_t files_pending = 0;  ///< files queued or loading
  std::size_t files_failed = 0;
  std::int64_t newest_mtime_ns = 0;  ///< the newest modification time of its trace files
};

/// Load state of one discovered file.
enum class file_state : std::uint8_t { queued, loading, loaded, failed, skipped };
/// "queued", "loading", "loaded", "failed", "skipped".
std::string_view file_state_name(file_state s) noexcept;

/// What the views read of a profile that depends on the rule set (analysis/rules.hpp): every
/// view computed from the op trees of one rule set. A profile holds its store's rule set's;
/// store::views() computes another rule set's on demand (`rules=` on a request).
struct profile_views {
  analysis::rule_set rules = analysis::rule_set::kinetoscope;  ///< the rule set these follow
  /// What the server reads of the op trees after the load, whether or not the trees themselves
  /// are kept (store::trees()).
  analysis::attribution_stats tree_stats;
  std::set<std::int64_t> used_devices;
  analysis::full_report report;  ///< every single-trace view
  double tc_kernel_ratio = 0;    ///< analysis::tc_kernel_ratio(model, trees)
  double eligible_op_kernel_ratio = 0;
  bool kernel_view = false;      ///< analysis::kernel_view_present()
  analysis::kernel_metric_columns kernel_columns;  ///< analysis::kernel_view_metric_columns(model)
};

/// The views of a profile under a rule set other than its store's, with the op trees they were
/// computed from (the routes that read trees: operator stacks, the operator tree, memory ranges).
struct alternate_views : profile_views {
  std::shared_ptr<const analysis::op_trees> trees;
  std::uint64_t generation = 0;  ///< the profile's
};

/// One loaded trace file with everything the views need, computed at load time.
struct profile : profile_views {
  profile() = default;
  ~profile();
  profile(const profile&) = delete;
  profile& operator=(const profile&) = delete;

  std::string path;              ///< relative to the logdir
  std::uint64_t file_bytes = 0;
  double load_seconds = 0;       ///< load + op tree + report + timeline
  std::uint64_t generation = 0;  ///< unique per load (cache keys)
  analysis::trace_model model;
  /// The Memory view's range-independent part: ranged /api/memory(_events) requests.
  analysis::memory_index memory_index;
  /// The windowed timeline (nullptr when building it failed: `timeline_error` says why).
  std::unique_ptr<server::timeline> timeline;
  std::string timeline_error;
  bool timeline_from_index = false;  ///< the timeline's columns came from the persisted index
  /// Built by `kinetoscope index` (build_profile with `serving` false): only the summary reads
  /// it, and the parts only requests read are left out (see build_profile).
  bool index_only = false;
  /// What the summary reads of the timeline (its t0 and /api/timeline/tracks), kept when the
  /// timeline itself went to the index writer, which frees it once its sections are written
  /// (index_only); `timeline` stays null then.
  struct timeline_facts {
    double t0 = 0;
    std::string tracks_json;
  };
  std::optional<timeline_facts> indexed_timeline;
  /// timeline->t0(), or indexed_timeline's; 0 without either.
  double timeline_t0() const noexcept;

  /// Heap bytes the profile holds (model, memory index, timeline, and the op trees when kept):
  /// what the server keeps per loaded trace, for benchmarks and tests.
  std::size_t heap_bytes() const noexcept;
  /// Whether the op trees were kept at load (they fit in the trace's JSON size, see above).
  bool keeps_trees() const noexcept { return kept_trees_ != nullptr; }

 private:
  friend class store;
  std::shared_ptr<const analysis::op_trees> kept_trees_;  ///< set at load when they fit
  mutable std::mutex trees_mutex_;  ///< one on-demand build of the trees at a time
  mutable std::weak_ptr<const analysis::op_trees> trees_;  ///< while some request or the cache holds them
};

/// A file as /api/status lists it.
struct file_status {
  std::string run, worker, span;
  std::string path;  ///< relative to the logdir
  std::uint64_t size = 0;
  file_state state = file_state::queued;
  std::string error;  ///< failed / skipped: why
  std::uint64_t warnings = 0;
  std::optional<double> load_seconds;
  /// The loaded file's summary (loaded files; also a changed file's previous load while it
  /// reloads). The full profile is store::find() / store::acquire().
  std::shared_ptr<const file_summary> summary;
  /// The persisted index: "read", "written", "off" (no cache folder), or why it was not used
  /// or not written ("rebuilt (stale): ...", "not written: ...").
  std::string index;
  bool resident = false;  ///< its full profile is loaded now
};

/// What store::acquire() gives.
struct full_result {
  std::shared_ptr<const server::profile> full;  ///< the full profile, when loaded
  bool loading = false;  ///< not yet: it is being loaded (ask again)
  std::string error;     ///< loading it failed
  std::string path;      ///< the file (relative to the logdir)
};

/// The Distributed view of one (run, span), with the summaries it was computed from.
struct distributed_entry {
  std::vector<std::shared_ptr<const file_summary>> summaries;  ///< the inputs
  analysis::distributed_result result;
  std::uint64_t generation = 0;  ///< changes when any input profile changes (cache keys)
};

/// What index_trace() did.
struct index_outcome {
  bool ok = false;
  bool up_to_date = false;  ///< a valid index was there already (nothing written)
  std::string index_file;
  std::string error;        ///< when !ok
  std::string note;         ///< why an existing index was rebuilt ("stale: ..."), or why none was
                            ///< written ("skipped: ...", small trace)
  bool skipped = false;     ///< a trace under index_min_bytes: no index, not an error
  prune_outcome pruned;     ///< what the budget evicted after the write
  double seconds = 0;
};
/// Builds the persisted index of one trace file into `cache_dir` exactly as the server does at
/// a load (parse, every view, summary, model columns), unless a valid one is there and `force`
/// is false. For `kinetoscope index`, which runs it one process per file.
/// Traces under `index_min_bytes` are skipped (index_outcome::skipped); after a write, the folder
/// is pruned to `cache_max` (0: no limit), never touching the files in `keep` nor the new one.
index_outcome index_trace(const std::string& path, const std::string& cache_dir, std::uint64_t max_text_bytes,
                          bool force, std::uint64_t cache_max = 0,
                          std::uint64_t index_min_bytes = index_min_trace_bytes(),
                          const std::vector<std::string>& keep = {},
                          analysis::rule_set rules = analysis::rule_set::kinetoscope);

class store {
 public:
  explicit store(store_options options);
  ~store();  ///< stops the background threads
  store(const store&) = delete;
  store& operator=(const store&) = delete;

  /// Starts the first scan and background loading; returns at once.
  void start();
  /// Blocks until no file is queued or loading (tests, `--load_fast` style CLIs); false on timeout.
  bool wait_idle(std::chrono::milliseconds timeout) const;
  /// Rescans the logdir now, in the caller's thread (also done every reload interval); new
  /// and changed files are queued before it returns, so a following wait_idle() sees them.
  void rescan();

  const store_options& options() const noexcept;
  load_progress progress() const;

  /// The last scan's notes (analysis::discover_result::notes): symlinks not followed,
  /// directories that could not be listed, limits reached; paths relative to the logdir.
  std::vector<std::string> notes() const;
  /// Every discovered file (sorted by run, worker, span order of discovery).
  std::vector<file_status> files() const;
  /// Runs with at least one loaded file, sorted.
  std::vector<std::string> runs() const;
  /// Every run with a discovered trace file that is not skipped (loaded or not), sorted by name.
  std::vector<run_info> discovered_runs() const;
  /// Whether some discovered file (any state) belongs to `run`.
  bool run_known(std::string_view run) const;
  /// Loaded files of `run` (with their names), in discovery order.
  std::vector<file_status> run_files(std::string_view run) const;
  /// The summary of the loaded file (run, worker, span), or nullptr.
  std::shared_ptr<const file_summary> find_summary(std::string_view run, std::string_view worker,
                                                   std::string_view span) const;
  /// The full profile of (run, worker, span): the resident one, else loaded (from its index
  /// when valid, else from the trace) by the store's on-demand thread while the caller waits at
  /// most `wait`. Concurrent callers share one load.
  ///
  /// `timeline_only`: the caller reads only the profile's model, timeline, timeline_error, path
  /// and generation (the Trace view's routes). Then it may get the profile as soon as its
  /// timeline is built, while the demand thread still computes its other views (those members
  /// are written meanwhile: reading them would race). On a 1 GB trace read from its index that
  /// is about a second sooner than the whole profile.
  full_result acquire(std::string_view run, std::string_view worker, std::string_view span,
                      std::chrono::milliseconds wait, bool timeline_only = false) const;
  /// acquire() waiting as long as the load takes; nullptr when the file is unknown or its load
  /// failed.
  std::shared_ptr<const profile> find(std::string_view run, std::string_view worker, std::string_view span) const;
  /// Heap bytes of the full profiles the store keeps now (within store_options::max_memory,
  /// less summary_bytes()).
  std::uint64_t resident_bytes() const;
  /// Σ file_summary::bytes() of the loaded files (the resident part of every file).
  std::uint64_t summary_bytes() const;
  /// Full profiles loaded on demand since start (after an eviction or from an index).
  std::uint64_t full_loads() const noexcept;
  /// Of those, the ones whose timeline came from the index (not laid out again).
  std::uint64_t timeline_reads() const noexcept;
  /// The /api/scalars body of `run` (the TensorBoard event files directly in its directory),
  /// read by the store's scanner thread: in steps (at most 256 MB per scan), incrementally
  /// (only bytes appended since the last scan), at most 20 000 points per tag (thinned evenly
  /// beyond). nullptr until the first read of the run finished. Never reads a file itself.
  std::shared_ptr<const std::string> scalars_body(std::string_view run) const;
  /// The directory of `run` (where its trace files lie), or nullopt for an unknown run.
  std::optional<std::string> run_directory(std::string_view run) const;

  /// The Distributed view of the loaded workers of (run, span), one or more, computed once per
  /// set of profiles and cached; nullptr when the run has no loaded file of that span.
  /// `result.available` says whether the span has the view (every worker communicates).
  std::shared_ptr<const distributed_entry> distributed(std::string_view run, std::string_view span) const;
  /// The job view (analysis::analyze_job) over the rank summaries of the loaded workers of
  /// (run, span) (file_summary::rank: no model is read), computed once per set of summaries
  /// and cached; nullptr when the run has no loaded file of that span.
  std::shared_ptr<const analysis::job_result> job(std::string_view run, std::string_view span) const;
  /// The span's Distributed bodies: remembered for the current member files, else read from
  /// the cache folder when the file there was written for exactly these members (their paths,
  /// sizes and modification times, and index_format_version), else `compute()`d and then
  /// written there (when the span has the view). nullptr when the run has no loaded file of
  /// that span. Concurrent callers for one span share one computation.
  std::shared_ptr<const span_bodies> span_panels(std::string_view run, std::string_view span,
                                                 const std::function<span_bodies()>& compute) const;
  /// Spans whose bodies span_panels() read from the cache folder since start (tests, benchmarks).
  std::uint64_t span_cache_reads() const noexcept;
  /// The op trees of a loaded profile (build_op_tree(p->model), plugin defaults): the kept ones,
  /// else those any request is using now, else the cache's, else built (in the caller's thread;
  /// about as long as the load's tree step) and cached within store_options::tree_cache_bytes.
  /// The result reads `p->model`: keep `p` alive while using it.
  std::shared_ptr<const analysis::op_trees> trees(const std::shared_ptr<const profile>& p) const;
  /// Op trees built on demand by trees() since start (tests and benchmarks).
  std::uint64_t trees_built() const noexcept;

  /// The views of a loaded profile under `rules`, a rule set other than the store's (for the
  /// store's own, the profile is its views): computed in the caller's thread (about as long as
  /// the load's tree and report steps), the last 4 kept. Concurrent callers for one profile and
  /// rule set share one computation.
  std::shared_ptr<const alternate_views> views(const std::shared_ptr<const profile>& p, analysis::rule_set rules) const;

  /// compute_diff(baseline, experimental) of two loaded profiles; the last 8 pairs are cached.
  std::shared_ptr<const analysis::diff_node> diff(const std::shared_ptr<const profile>& baseline,
                                                  const std::shared_ptr<const profile>& experimental) const;

  /// A serialized API body cached under `key` (bounded LRU, about 64 MB), or nullopt.
  std::optional<std::string> cached_body(const std::string& key) const;
  /// Stores `body` under `key` (bodies larger than an eighth of the budget are not kept).
  void cache_body(const std::string& key, const std::string& body) const;

  struct impl;  ///< defined in store.cpp
  impl& internals() const noexcept { return *impl_; }

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace kinetoscope::server
