// SPDX-License-Identifier: BSD-3-Clause
/// @file store.cpp
/// The logdir store: a scanner thread (discovery every reload interval), loader threads (one
/// file each at a time: load, op tree, report, timeline, summary, index), the on-demand thread
/// (full profiles requests need again), and the caches the API shares.
///
/// Locking: `mutex_` guards the file table, the queue and the flags; it is held only to copy
/// or swap small things, never while discovering, loading or computing. The caches have their
/// own mutexes, so a slow computation of one view never blocks requests for another.
#include "server/store.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "analysis/discovery.hpp"
#include "analysis/kernel_view.hpp"
#include "analysis/loader.hpp"
#include "kinetoscope/tensorboard/tfevents.hpp"
#include "nlohmann/json.hpp"
#include "server/api.hpp"
#include "server/timeline.hpp"
#include "server/trace_index.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace kinetoscope::server {
namespace {

namespace fs = std::filesystem;
namespace an = kinetoscope::analysis;
using clock_type = std::chrono::steady_clock;

/// Budget of the serialized-body cache.
constexpr std::size_t body_cache_budget = std::size_t{64} << 20;
/// Files larger than this load alone (no other load beside them): their JSON text, model and
/// op tree at once are the store's peak, and two would double it.
constexpr std::uint64_t parallel_load_max_bytes = std::uint64_t{512} << 20;
/// Diff trees kept.
constexpr std::size_t diff_cache_entries = 8;
/// Profiles' views under the other rule set kept by store::views() (each holds its op trees).
constexpr std::size_t views_cache_entries = 2;
/// A load that failed for a transient reason is tried again after this pause, this many times;
/// then the next scan tries it again.
constexpr auto retry_delay = std::chrono::milliseconds(500);
constexpr int max_quick_retries = 10;
/// Event-file bytes read per scan, over all runs (the rest is read at the next scans).
constexpr std::uint64_t scalars_bytes_per_scan = std::uint64_t{256} << 20;
/// Points kept per scalar tag and file; beyond, every other point is dropped (evenly thinned).
constexpr std::size_t scalars_points_per_tag = 20000;

/// Whether a file name is a TensorBoard event file (as find_event_files decides).
bool is_event_file_name(const std::string& name) {
  const std::string empty = ".profile-empty";
  return name.find("tfevents") != std::string::npos &&
         !(name.size() >= empty.size() && name.compare(name.size() - empty.size(), empty.size(), empty) == 0);
}

void replace_all(std::string& s, const std::string& what, const std::string& with) {
  if (what.empty()) return;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + with.size()))
    s.replace(at, what.size(), with);
}

/// A process-wide counter: every load and every distributed view gets a distinct generation.
std::uint64_t next_generation() {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

std::uint64_t warning_count(const an::trace_model& m) {
  std::uint64_t n = 0;
  for (const auto& [kind, count] : m.diagnostics.warnings) n += count;
  return n;
}

}  // namespace

std::string_view file_state_name(file_state s) noexcept {
  switch (s) {
    case file_state::queued: return "queued";
    case file_state::loading: return "loading";
    case file_state::loaded: return "loaded";
    case file_state::failed: return "failed";
    case file_state::skipped: return "skipped";
  }
  return "unknown";
}

double load_progress::percent() const {
  return bytes_total ? 100.0 * static_cast<double>(bytes_loaded) / static_cast<double>(bytes_total) : 100.0;
}

profile::~profile() = default;

double profile::timeline_t0() const noexcept {
  return timeline ? timeline->t0() : indexed_timeline ? indexed_timeline->t0 : 0.0;
}

std::size_t profile::heap_bytes() const noexcept {
  return model.heap_bytes() + memory_index.memory_bytes() + (timeline ? timeline->stats().memory_bytes : 0) +
         (kept_trees_ ? kept_trees_->heap_bytes() : 0);
}

/// The full profile of one loaded file: resident (in the store's LRU), in use by requests (the
/// weak pointer), or being loaded on demand.
struct full_slot {
  std::mutex m;
  std::condition_variable cv;
  std::weak_ptr<const profile> weak;
  bool loading = false;
  /// Requests waiting for the load, and the loaded profile held for them until the last one took
  /// it (a budget smaller than the profile evicts it as soon as it is loaded).
  std::size_t waiters = 0;
  std::shared_ptr<const profile> handoff;
  /// During an on-demand load: the profile once its timeline is built, while its other views
  /// are still being computed (acquire with timeline_only). Reset when the load ends.
  std::shared_ptr<const profile> early;
  std::string error;  ///< the last on-demand load failed (for store_options::demand_retry_seconds)
  clock_type::time_point error_at{};  ///< when it failed
  /// The trace as it was when the summary was made (a full profile must come from the same).
  std::uint64_t source_size = 0;
  std::int64_t source_mtime_ns = 0;
};

/// One discovered file.
struct file_entry {
  an::trace_file file;
  std::string rel;                         ///< path relative to the logdir
  file_state state = file_state::queued;
  std::string error;
  std::uint64_t warnings = 0;
  std::optional<double> load_seconds;
  std::shared_ptr<const file_summary> summary;  ///< last successful load (kept while reloading)
  std::shared_ptr<full_slot> slot;         ///< its full profile (new per load)
  std::string index;                       ///< file_status::index
  std::uint64_t token = 0;                 ///< bumped when the file changes: stale loads are dropped
  bool transient = false;                  ///< failed for a passing reason (EMFILE...): retried
  int retries = 0;                         ///< transient failures in a row
};

/// Errors that say "not now" rather than "never": out of descriptors or memory, interrupted.
bool transient_errno(int e) { return e == EMFILE || e == ENFILE || e == EAGAIN || e == ENOMEM || e == EINTR; }

struct store::impl {
  store_options options;

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;  ///< queue / state changes, stop
  std::map<std::string, file_entry> files_;  ///< by absolute path as walked
  std::vector<std::string> order_;           ///< discovery order of files_ keys
  std::deque<std::pair<std::string, std::uint64_t>> queue_;  ///< (path, token)
  std::size_t loading_ = 0;
  std::atomic<bool> demand_loading_{false};  ///< the on-demand thread is loading (release_free_memory)
  /// The loads in flight (stable addresses: their progress counters are written without mutex_).
  struct flight {
    std::string path;  ///< absolute, as files_ keys it
    bool big = false;  ///< loads alone (see parallel_load_max_bytes)
    std::atomic<std::uint64_t> bytes{0};  ///< analysis::load_options::progress_bytes
  };
  std::list<flight> flights_;
  bool first_scan_done_ = false;
  bool stop_ = false;
  bool started_ = false;
  std::uint64_t token_counter_ = 0;
  std::vector<std::string> notes_;  ///< the last scan's discovery notes
  /// Transient load failures waiting to be queued again: (when, path, token).
  std::vector<std::tuple<clock_type::time_point, std::string, std::uint64_t>> retry_;

  std::mutex scan_mutex_;  ///< one scan at a time

  // TensorBoard scalars per run: read by scan() (scan_mutex_ held), bodies swapped under scalars_mutex_.
  struct scalar_file {
    kinetoscope::event_file_cursor cursor;
    kinetoscope::event_file_contents contents;
    std::string error;  ///< the file could not be read (kept until it can)
  };
  struct run_scalars {
    std::string dir;
    std::map<std::string, scalar_file> files;  ///< by file name
  };
  std::map<std::string, run_scalars> scalar_runs_;  ///< scan thread only
  mutable std::mutex scalars_mutex_;
  std::map<std::string, std::shared_ptr<const std::string>> scalar_bodies_;
  std::thread scanner_;
  std::vector<std::thread> loaders_;

  // Caches (own locks).
  /// Per-(run, span) slots of one kind of result, each slot with its own `compute` mutex.
  template <class Slot>
  struct per_span {
    std::mutex mutex;
    std::map<std::string, std::shared_ptr<Slot>> slots;

    static std::string key(std::string_view run, std::string_view span) {
      return std::string(run) + '\n' + std::string(span);
    }
    /// The slot of (run, span), made when there is none.
    std::shared_ptr<Slot> of(std::string_view run, std::string_view span) {
      std::lock_guard lock(mutex);
      auto& s = slots[key(run, span)];
      if (!s) s = std::make_shared<Slot>();
      return s;
    }
    /// Forgets the slot of (run, span) (a caller holding it keeps it alive).
    void drop(std::string_view run, std::string_view span) {
      std::lock_guard lock(mutex);
      slots.erase(key(run, span));
    }
  };
  struct distributed_slot {
    std::mutex compute;  ///< one computation per (run, span) at a time
    std::shared_ptr<const distributed_entry> entry;
  };
  mutable per_span<distributed_slot> dist_;
  struct job_slot {
    std::mutex compute;                   ///< one computation per (run, span) at a time
    std::vector<std::uint64_t> inputs;    ///< generations of the input profiles
    std::shared_ptr<const an::job_result> result;
  };
  mutable per_span<job_slot> jobs_;
  struct span_slot {
    std::mutex compute;
    std::vector<std::uint64_t> inputs;  ///< the member summaries' generations
    std::shared_ptr<const span_bodies> bodies;
  };
  mutable per_span<span_slot> spans_;
  std::atomic<std::uint64_t> span_cache_reads_{0};

  struct diff_slot {
    std::uint64_t a = 0, b = 0;
    std::shared_ptr<const an::diff_node> root;
  };
  mutable std::mutex diff_mutex_;
  mutable std::list<diff_slot> diffs_;  ///< most recent first
  /// store::views(): one computation at a time (it uses both cores), the last few kept.
  mutable std::mutex views_build_mutex_;
  mutable std::mutex views_mutex_;
  mutable std::list<std::shared_ptr<const alternate_views>> views_;  ///< most recent first

  /// Op trees rebuilt by store::trees(), most recent first, within options.tree_cache_bytes.
  /// An entry whose profile is gone (reloaded, removed) is dropped at the next insertion.
  struct tree_slot {
    std::weak_ptr<const profile> owner;
    std::shared_ptr<const an::op_trees> trees;
    std::size_t bytes = 0;
  };
  mutable std::mutex tree_mutex_;
  mutable std::list<tree_slot> tree_cache_;
  mutable std::atomic<std::uint64_t> trees_built_{0};

  // Full profiles: the resident ones (most recently used first) and the on-demand loads.
  // Lock order: mutex_ before a slot's mutex; demand_mutex_ and lru_mutex_ are taken alone.
  mutable std::mutex lru_mutex_;
  /// A profile loaded on demand is pinned for store_options::demand_pin_seconds: the request
  /// that waited for it (and answered 503 meanwhile) finds it when it asks again, even when the
  /// budget is smaller than the profile; otherwise every retry would load it anew. One pin at a
  /// time: the next on-demand load ends the earlier pin, so the budget is exceeded by at most
  /// the profile loaded last (a user clicking through four 1 GB traces' timelines within 30 s
  /// held all four, 1.8 GB against a 557 MB budget).
  struct lru_entry {
    std::shared_ptr<const profile> p;
    clock_type::time_point pinned_until{};
  };
  mutable std::list<lru_entry> lru_;
  mutable std::uint64_t lru_bytes_ = 0;
  /// max_memory less the summaries when a profile last joined the LRU (under lru_mutex_).
  mutable std::uint64_t profile_budget_ = options.max_memory;
  mutable std::atomic<std::uint64_t> full_loads_{0};
  mutable std::atomic<std::uint64_t> timeline_reads_{0};
  struct demand_job {
    std::string path, rel;
    std::shared_ptr<const file_summary> summary;
    std::shared_ptr<full_slot> slot;
  };
  mutable std::mutex demand_mutex_;
  mutable std::condition_variable demand_cv_;
  mutable std::deque<demand_job> demand_;
  bool demand_stop_ = false;
  std::thread demand_thread_;

  mutable std::mutex body_mutex_;
  mutable std::list<std::pair<std::string, std::string>> bodies_;  ///< most recent first
  mutable std::unordered_map<std::string, std::list<std::pair<std::string, std::string>>::iterator> body_index_;
  mutable std::size_t body_bytes_ = 0;

  explicit impl(store_options o) : options(std::move(o)) {}

  bool idle_locked() const { return first_scan_done_ && queue_.empty() && retry_.empty() && loading_ == 0; }

  std::string relative(const std::string& path) const {
    std::error_code ec;
    const fs::path rel = fs::path(path).lexically_relative(fs::absolute(options.logdir, ec));
    const std::string s = rel.generic_string();
    return s.empty() || s.starts_with("..") ? path : s;
  }

  void scan() {
    std::lock_guard scan_lock(scan_mutex_);
    an::discover_options dopt;
    dopt.follow_outside_symlinks = options.follow_outside_symlinks;
    an::discover_result walked = an::discover_logdir(options.logdir, dopt);  // no store lock held
    std::vector<an::trace_file>& found = walked.files;
    refresh_scalars(found);

    std::lock_guard lock(mutex_);
    notes_ = std::move(walked.notes);
    std::set<std::string> seen;
    order_.clear();
    for (std::size_t i = 0; i < found.size(); ++i) {
      an::trace_file& f = found[i];
      const std::string reason = f.skipped;
      seen.insert(f.path);
      order_.push_back(f.path);
      auto it = files_.find(f.path);
      if (it == files_.end()) {
        file_entry e;
        e.rel = relative(f.path);
        e.file = f;
        it = files_.emplace(f.path, std::move(e)).first;
        enqueue_or_skip(it->second, reason);
        continue;
      }
      file_entry& e = it->second;
      const bool changed = e.file.size != f.size || e.file.mtime_ns != f.mtime_ns;
      const bool was_skipped = e.state == file_state::skipped;
      const bool retry = e.state == file_state::failed && e.transient;
      e.file = f;  // names may change too (span numbering follows new files)
      if (!reason.empty()) {
        if (!was_skipped) {
          ++e.token;
          e.summary.reset();
          e.slot.reset();
          e.state = file_state::skipped;
          e.error = reason;
        }
      } else if (changed || was_skipped || retry) {
        enqueue_or_skip(e, reason);
      }
    }
    // Entries not seen are dropped only when the walk could have seen them: not when it was cut
    // short, nor below a directory whose listing failed (out of descriptors, say).
    const auto kept = [&](const std::string& path) {
      if (!walked.complete) return true;
      for (const std::string& dir : walked.unlisted_dirs)
        if (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/') return true;
      return false;
    };
    for (auto it = files_.begin(); it != files_.end();) {
      if (seen.count(it->first) == 0 && !kept(it->first)) {
        it = files_.erase(it);  // queued token goes stale
      } else {
        if (seen.count(it->first) == 0) order_.push_back(it->first);
        ++it;
      }
    }
    first_scan_done_ = true;
    changed_.notify_all();
  }

  /// Reads what is new in the event files of every run (scanner thread, no store lock).
  void refresh_scalars(const std::vector<an::trace_file>& found) {
    std::map<std::string, std::string> dirs;  // run -> its directory
    for (const auto& f : found)
      if (f.skipped.empty()) dirs.emplace(f.run, fs::path(f.path).parent_path().string());
    for (auto it = scalar_runs_.begin(); it != scalar_runs_.end();) {
      if (dirs.count(it->first) == 0 || dirs[it->first] != it->second.dir) it = scalar_runs_.erase(it);
      else ++it;
    }
    std::uint64_t budget = scalars_bytes_per_scan;
    std::map<std::string, std::shared_ptr<const std::string>> bodies;
    for (const auto& [run, dir] : dirs) {
      run_scalars& rs = scalar_runs_[run];
      rs.dir = dir;
      std::set<std::string> names;
      std::error_code ec;
      for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
           !ec && it != fs::directory_iterator(); it.increment(ec)) {
        std::error_code ec2;
        const std::string name = it->path().filename().string();
        if (is_event_file_name(name) && it->is_regular_file(ec2)) names.insert(name);
      }
      if (ec) {  // not listed now (out of descriptors?): keep what was read
        for (const auto& [name, f] : rs.files) names.insert(name);
      }
      for (auto f = rs.files.begin(); f != rs.files.end();) {
        if (names.count(f->first) == 0) f = rs.files.erase(f);
        else ++f;
      }
      for (const std::string& name : names) {
        scalar_file& f = rs.files[name];
        if (budget == 0) continue;
        try {
          const std::uint64_t n = kinetoscope::read_event_file_from(dir + "/" + name, f.cursor, budget, f.contents);
          budget -= std::min(budget, n);
          f.error.clear();
          for (auto& [tag, points] : f.contents.scalars) {
            while (points.size() > scalars_points_per_tag) {  // thin evenly: keep every other point
              std::size_t k = 0;
              for (std::size_t i = 0; i < points.size(); i += 2) points[k++] = points[i];
              points.resize(k);
            }
          }
        } catch (const std::exception& e) {
          f.error = e.what();
        }
      }
      bodies[run] = std::make_shared<const std::string>(scalars_json(rs));
    }
    std::lock_guard lock(scalars_mutex_);
    scalar_bodies_ = std::move(bodies);
  }

  static std::string scalars_json(const run_scalars& rs) {
    nlohmann::ordered_json tags = nlohmann::ordered_json::object();
    nlohmann::ordered_json errors = nlohmann::ordered_json::array();
    std::uint64_t skipped = 0, corrupt = 0;
    std::map<std::string, nlohmann::ordered_json> series;
    for (const auto& [name, f] : rs.files) {
      for (const auto& [tag, points] : f.contents.scalars) {
        nlohmann::ordered_json& list = series[tag];
        if (list.is_null()) list = nlohmann::ordered_json::array();
        for (const auto& pt : points) list.push_back({pt.step, static_cast<double>(pt.value), pt.wall_time});
      }
      for (const auto& e : f.contents.errors) errors.push_back(name + ": " + e);
      if (!f.error.empty()) errors.push_back(name + ": " + f.error);
      skipped += f.contents.skipped_other_summaries;
      corrupt += f.contents.corrupt_records;
    }
    for (auto& [tag, list] : series) tags[tag] = std::move(list);
    return nlohmann::ordered_json({{"tags", std::move(tags)},
                                   {"files", rs.files.size()},
                                   {"errors", std::move(errors)},
                                   {"skipped_other_summaries", skipped},
                                   {"corrupt_records", corrupt},
                                   {"loading", false}})
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  void enqueue_or_skip(file_entry& e, const std::string& reason) {
    e.token = ++token_counter_;
    if (!reason.empty()) {
      e.state = file_state::skipped;
      e.error = reason;
      e.summary.reset();
      e.slot.reset();
      return;
    }
    e.state = file_state::queued;
    e.error.clear();
    e.transient = false;
    e.retries = 0;
    queue_.emplace_back(e.file.path, e.token);
    changed_.notify_all();
  }

  void scanner_loop() {
    scan();
    if (options.reload_interval_s <= 0) return;
    const auto interval = std::chrono::duration_cast<clock_type::duration>(
        std::chrono::duration<double>(options.reload_interval_s));
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        if (changed_.wait_for(lock, interval, [&] { return stop_; })) return;
      }
      scan();
    }
  }

  void loader_loop() {
    for (;;) {
      std::string path;
      std::uint64_t token = 0;
      std::string rel;
      std::uint64_t bytes = 0;
      flight* mine = nullptr;
      {
        std::unique_lock lock(mutex_);
        for (;;) {
          if (stop_) return;
          // Transient failures whose pause is over go back to the queue.
          const auto now = clock_type::now();
          for (auto r = retry_.begin(); r != retry_.end();) {
            if (std::get<0>(*r) <= now) {
              queue_.emplace_back(std::get<1>(*r), std::get<2>(*r));
              r = retry_.erase(r);
            } else {
              ++r;
            }
          }
          if (!queue_.empty()) break;
          if (retry_.empty()) {
            changed_.wait(lock);
          } else {
            auto next = std::get<0>(retry_.front());
            for (const auto& r : retry_) next = std::min(next, std::get<0>(r));
            changed_.wait_until(lock, next);
          }
        }
        std::tie(path, token) = queue_.front();
        auto it = files_.find(path);
        if (it == files_.end() || it->second.token != token) {
          queue_.pop_front();
          changed_.notify_all();  // a stale entry may have been the last one
          continue;
        }
        // Loads run in parallel (store_options::loader_threads), except a big file: it waits
        // until it can load alone, and nothing starts beside it (two would double the peak).
        const bool big = it->second.file.size > parallel_load_max_bytes;
        const bool big_in_flight = std::any_of(flights_.begin(), flights_.end(), [](const flight& f) { return f.big; });
        if (big_in_flight || (big && loading_ > 0)) {
          changed_.wait(lock);
          continue;
        }
        queue_.pop_front();
        it->second.state = file_state::loading;
        rel = it->second.rel;
        bytes = it->second.file.size;
        ++loading_;
        mine = &flights_.emplace_back();
        mine->path = path;
        mine->big = big;
      }
      std::shared_ptr<const file_summary> summary;
      std::shared_ptr<const profile> full;
      std::string index_note = options.cache_dir.empty() ? "off" : "";
      std::string error;
      int error_number = 0;
      const auto t0 = clock_type::now();
      std::optional<index_key> key;
      try {
        key = index_key_of(path);
        const std::optional<std::string> small =
            key && !options.cache_dir.empty() ? small_trace_note(key->size, options.index_min_bytes) : std::nullopt;
        if (small) index_note = *small;
        if (key && !options.cache_dir.empty() && !small) summary = read_index_summary(*key, index_note);
        if (!summary) {
          const std::string why = index_note;
          std::unique_ptr<index_writer> writer;
          if (key && !options.cache_dir.empty() && !small) {
            try {
              writer = std::make_unique<index_writer>(index_file(key->path), *key);
            } catch (const std::exception& e) {
              index_note = std::string("not written: ") + e.what();
            }
          }
          auto p = load_profile(options.rules, path, rel, bytes, options.max_text_bytes, &mine->bytes, error, error_number,
                                writer.get());
          if (p) {
            p->load_seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
            auto sum = std::make_shared<file_summary>(make_summary(*p, options.max_summary_body_bytes));
            if (writer) {
              try {
                writer->finish(summary_to_bytes(*sum));
                index_note = why.empty() ? "written" : "rebuilt (" + why + ")";
                index_note += keep_cache_budget(index_file(key->path));
              } catch (const std::exception& e) {
                index_note = std::string("not written: ") + e.what();
              }
              writer.reset();
            }
            if (key) {
              // /api/status shows the note: no absolute path in it.
              replace_all(index_note, key->path, rel);
              replace_all(index_note, options.cache_dir, "<cache_dir>");
            }
            summary = std::move(sum);
            full = std::move(p);
          }
        }
      } catch (const std::exception& e) {
        error = rel + ": " + e.what();
      } catch (...) {
        error = rel + ": unknown error";
      }
      const double seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
      auto slot = std::make_shared<full_slot>();
      if (key) {
        slot->source_size = key->size;
        slot->source_mtime_ns = key->mtime_ns;
      }
      if (full) {
        slot->weak = full;
        keep_resident(full);
        full.reset();
      }
      std::unique_lock lock(mutex_);
      --loading_;
      flights_.remove_if([&](const flight& f) { return &f == mine; });
      auto it = files_.find(path);
      if (it != files_.end() && it->second.token == token) {
        file_entry& e = it->second;
        e.load_seconds = seconds;
        if (summary) {
          e.state = file_state::loaded;
          e.error.clear();
          e.warnings = summary->warnings;
          e.summary = std::move(summary);
          e.slot = std::move(slot);
          e.index = std::move(index_note);
          e.transient = false;
          e.retries = 0;
        } else if (transient_errno(error_number) && e.retries < max_quick_retries) {
          // Not the file's fault: try again shortly (the previous load, if any, stays shown).
          e.state = file_state::queued;
          e.error = "will retry: " + error;
          ++e.retries;
          retry_.emplace_back(clock_type::now() + retry_delay, path, token);
        } else if (transient_errno(error_number)) {
          e.state = file_state::failed;  // retried again at the next scan
          e.error = error + " (will retry at the next scan)";
          e.transient = true;
          e.retries = 0;
        } else {
          e.state = file_state::failed;
          e.error = error;
          e.warnings = 0;
          e.summary.reset();
          e.slot.reset();
        }
      }
      changed_.notify_all();
      lock.unlock();
      release_free_memory();  // after the last load of a burst
    }
  }

  /// Gives the pages of freed heap (the load's JSON text, op trees) back to the system: glibc
  /// keeps freed memory below the top of the heap otherwise, and the resident size would stay
  /// at the load's peak.
  static void trim_heap() {
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
  }

  /// trim_heap(), unless another load is running or queued: that one reuses the freed pages
  /// (the resident size stays at the loads' peak until the burst ends, then drops), and the
  /// kernel does not have to hand out and zero fresh pages for every file. Measured on a cold
  /// start of 32 rank traces: zeroing fresh pages was 15 % of the time with a trim per load.
  void release_free_memory() const {
    if (demand_loading_.load(std::memory_order_relaxed)) return;
    {
      std::lock_guard lock(mutex_);
      if (loading_ > 0 || !queue_.empty()) return;
    }
    trim_heap();
  }

  /// Called by build_profile with the profile once its timeline is in place (see build_profile).
  using timeline_ready_fn = std::function<void(const std::shared_ptr<const profile>&)>;

  /// `writer` (optional): the index being written; its model sections are written while the
  /// views are computed (index_writer::start), the caller finishes it with the summary.
  /// `generation`: 0 for a new one. `timeline_ready`: see build_profile.
  static std::shared_ptr<profile> load_profile(
      an::rule_set rules, const std::string& path, const std::string& rel, std::uint64_t bytes, std::uint64_t max_text_bytes,
      std::atomic<std::uint64_t>* progress, std::string& error, int& error_number, index_writer* writer = nullptr,
      std::uint64_t generation = 0,
      const timeline_ready_fn& timeline_ready = {}, bool serving = true) {
    an::load_result r = an::load_trace(path, {.max_text_bytes = max_text_bytes, .progress_bytes = progress});
    if (!r.ok()) {
      // Named by the path relative to the logdir: /api/status shows it.
      if (r.error) {
        an::load_error e = *r.error;
        e.file = rel;
        error = e.message();
      } else {
        error = rel + ": cannot load";
      }
      error_number = r.error ? r.error->sys_errno : 0;
      return nullptr;
    }
    return build_profile(rules, std::move(*r.model), rel, bytes, generation != 0 ? generation : next_generation(), writer,
                         timeline_ready, std::nullopt, serving);
  }

  /// Every view of `model` (the load's analysis part, also run on a model read from an index).
  /// (`writer`: see load_profile.) `timeline_ready` (optional) is called, from the timeline's
  /// thread, with the profile once its model and timeline are in place, while the op tree and
  /// the views are still being computed: see store::acquire's timeline_only. `persisted_timeline`: the timeline's columns read from an
  /// index (used when they fit the model). `serving` false (`kinetoscope index`: the profile
  /// only feeds the index and its summary) leaves out what only requests read, at the load's
  /// memory peak on big traces: the flow tables of the Trace view's clicks and the memory
  /// view's range index (neither is persisted), and the timeline, which goes to `writer` (see
  /// index_writer::start) with its t0 and tracks kept in `indexed_timeline`.
  static std::shared_ptr<profile> build_profile(
      an::rule_set rules, an::trace_model model, const std::string& rel, std::uint64_t bytes, std::uint64_t generation,
      index_writer* writer = nullptr,
      const timeline_ready_fn& timeline_ready = {},
      std::optional<timeline_columns> persisted_timeline = std::nullopt, bool serving = true) {
    auto p = std::make_shared<profile>();
    p->path = rel;
    p->file_bytes = bytes;
    p->generation = generation;
    p->model = std::move(model);
    p->index_only = !serving;
    p->rules = rules;
    const an::analysis_rules options = an::rules(rules);
    // Two sides that only read the model: the timeline (then the early handoff to the Trace
    // view's requests, then the index's model and timeline sections, written by the writer's
    // own thread, then the flow tables) on a thread of its own, the op tree and the views on
    // this one. 1 GB trace: the timeline's 0.3-0.45 s off the load's path.
    const auto timeline_side = [&p, writer, &timeline_ready, &persisted_timeline, serving] {
      // From the index's columns when they are given and fit the model, else laid out.
      if (persisted_timeline) {
        try {
          p->timeline = std::make_unique<timeline>(p->model, std::move(*persisted_timeline));
          p->timeline_from_index = true;
        } catch (const std::invalid_argument&) {
          // Not trusted: laid out again below.
        }
        persisted_timeline.reset();
      }
      try {
        if (!p->timeline)
          p->timeline = std::make_unique<timeline>(p->model, serving ? timeline::use::serve : timeline::use::columns);
      } catch (const std::exception& e) {
        p->timeline_error = e.what();
      }
      if (writer != nullptr && !serving) {
        // Nothing here serves the timeline: the writer takes it and frees it once its sections
        // are written (the report waits for that, below).
        if (p->timeline) p->indexed_timeline = profile::timeline_facts{p->timeline->t0(), p->timeline->tracks_json()};
        writer->start(p->model, std::unique_ptr<const timeline>(std::move(p->timeline)));
      } else if (writer != nullptr) {
        writer->start(p->model, p->timeline.get());
      }
      if (timeline_ready) timeline_ready(p);
      // The flow tables of the first click on a slice (event_json waits for them if it comes
      // first): after the first window, not before it.
      if (p->timeline && serving) {
        try {
          p->timeline->prepare_flows();
        } catch (const std::exception&) {
          // event_json() builds them on its first call, or reports the same failure there.
        }
      }
    };
    struct join_side {  // the side reads p and the writer reads p->model: both end before p can go
      std::thread t;
      index_writer* w;
      ~join_side() {
        if (t.joinable()) t.join();
        if (w != nullptr) w->wait();
      }
    } side{{}, writer};
    try {
      side.t = std::thread([&timeline_side] {
        try {
          timeline_side();
        } catch (...) {
          // (timeline_ready and the writer's start do not throw; a bad_alloc inside the
          // timeline is timeline_error.)
        }
      });
    } catch (const std::system_error&) {
      timeline_side();  // no thread to be had: one after the other
    }
    auto trees = std::make_shared<const an::op_trees>(an::build_op_tree(p->model, options.tree));
    if (!serving && writer != nullptr) {
      // The report's working memory and the timeline are the largest passing sets after the
      // model and the trees: not both at once (10 GB trace: a 4.7 GB peak becomes 4.3 GB, in
      // about the same time: the op tree usually ends first, and the report then has both
      // cores).
      if (side.t.joinable()) side.t.join();
      writer->wait_timeline_freed();
    }
    p->tree_stats = trees->stats;
    p->used_devices = trees->used_devices;
    // The kernel view's flags on a thread of their own, beside the report (all only read the
    // model and the trees; 0.35 s on a 10 GB trace). (The Operator view's pies come with the
    // report's operator tables, from the same groups.)
    std::exception_ptr views_error;
    const auto other_views = [&p, &trees, &views_error] {
      try {
        p->eligible_op_kernel_ratio = an::eligible_op_kernel_ratio(*trees);
        p->kernel_view = an::kernel_view_present(p->model, *trees);
        p->tc_kernel_ratio = an::tc_kernel_ratio(p->model, *trees);
        p->kernel_columns = an::kernel_view_metric_columns(p->model);
      } catch (...) {
        views_error = std::current_exception();
      }
    };
    struct join_views {  // joined however the report ends
      std::thread t;
      ~join_views() {
        if (t.joinable()) t.join();
      }
    } views;
    try {
      views.t = std::thread(other_views);
    } catch (const std::system_error&) {
      other_views();  // no thread to be had
    }
    p->report = an::compute_report(p->model, *trees, options.report());
    if (views.t.joinable()) views.t.join();
    if (views_error) std::rethrow_exception(views_error);
    // (The memory view's range index answers ranged requests: a profile that serves none does
    // without it, and without its working memory, 0.85 GB on a 10 GB trace.)
    if (serving) p->memory_index = an::build_memory_index(p->model, *trees);
    if (side.t.joinable()) side.t.join();  // p->timeline is read below (heap_bytes)
    // Keep the trees only while the profile stays within its trace's JSON size (see store.hpp).
    if (serving && p->heap_bytes() + trees->heap_bytes() <= p->model.diagnostics.text_bytes)
      p->kept_trees_ = std::move(trees);
    return p;
  }

  /// The resident part of a freshly loaded profile.
  static file_summary make_summary(const profile& p, std::size_t max_body_bytes) {
    file_summary s;
    s.generation = p.generation;
    s.file_bytes = p.file_bytes;
    s.load_seconds = p.load_seconds;
    s.full_bytes = p.index_only ? 0 : p.heap_bytes();
    s.warnings = warning_count(p.model);
    s.diagnostics = p.model.diagnostics;
    s.kernel_view = p.kernel_view;
    s.memory_view = p.report.memory.present;
    s.module_view = p.report.modules.kind != an::module_view_kind::none;
    s.timeline_error = p.timeline || p.indexed_timeline ? std::string()
                       : p.timeline_error.empty()         ? "no timeline"
                                                          : p.timeline_error;
    s.bodies = canonical_bodies(p, max_body_bytes);
    s.distributed = an::prepare_distributed_worker(
        {std::string(), &p.model, p.used_devices, an::distributed_steps(p.report.overview)}, an::rules(p.rules).distributed);
    s.rank = an::summarize_rank(p.model, p.report.overview, an::rules(p.rules).overview.all_collectives);
    s.rank_id = p.model.distributed ? p.model.distributed->rank : -1;
    return s;
  }

  /// The index file of the trace `absolute_path` for this store's rule set.
  std::string index_file(const std::string& absolute_path) const {
    return index_file_path(options.cache_dir, absolute_path, rules_variant(options.rules));
  }

  /// After an index was written to `written`: the folder pruned to the budget, never touching
  /// the indexes of the traces this store holds. Returns the note's addition ("" when nothing
  /// was evicted).
  std::string keep_cache_budget(const std::string& written) {
    if (options.cache_max == 0) return {};
    std::vector<std::string> keep{written};
    {
      std::lock_guard lock(mutex_);
      for (const auto& [path, entry] : files_) keep.push_back(index_file(path));
    }
    const prune_outcome p = prune_cache(options.cache_dir, options.cache_max, keep);
    if (p.removed.empty()) return {};
    std::uint64_t freed = 0;
    for (const cache_entry& e : p.removed) freed += e.bytes;
    return "; " + std::to_string(p.removed.size()) + " least recently used index(es) of " + human_bytes(freed) +
           " evicted to keep the cache under " + human_bytes(options.cache_max);
  }

  /// The summary of a valid index of `key` (nullptr otherwise: `note` says why, empty when
  /// there was none).
  std::shared_ptr<const file_summary> read_index_summary(const index_key& key, std::string& note) const {
    trace_index idx;
    const index_status st = idx.open(index_file(key.path), key);
    if (st == index_status::missing) return nullptr;
    if (st != index_status::ok) {
      note = std::string(index_status_name(st)) + ": " + idx.error();
      return nullptr;
    }
    try {
      auto sum = std::make_shared<file_summary>(summary_from_bytes(idx.summary_bytes()));
      sum->generation = next_generation();
      note = "read";
      mark_used(index_file(key.path));
      return sum;
    } catch (const std::exception& e) {
      note = std::string("corrupt: ") + e.what();
      return nullptr;
    }
  }

  /// The full profile of a loaded file, from its index when valid, else from the trace; in the
  /// caller's thread (the on-demand thread). Null with `error` set when it fails, or when the
  /// file is no longer the one the summary was made from.
  /// (`timeline_ready`: see build_profile.)
  std::shared_ptr<const profile> load_full(
      const std::string& path, const std::string& rel, const full_slot& slot, const file_summary& sum,
      std::string& error, const timeline_ready_fn& timeline_ready) const {
    const std::optional<index_key> key = index_key_of(path);
    if (!key || key->size != slot.source_size || key->mtime_ns != slot.source_mtime_ns) {
      error = rel + ": the file changed since it was loaded (it is being loaded again)";
      return nullptr;
    }
    const auto t0 = clock_type::now();
    std::shared_ptr<profile> p;
    if (!options.cache_dir.empty()) {
      const std::string file = index_file(key->path);
      // The timeline's columns on a second thread while this one reads the model's (1 GB
      // trace: 60 ms beside 140 ms); none, or corrupt ones, and the timeline is laid out again.
      const auto read_timeline = [&file, &key] {
        std::optional<timeline_columns> c(std::in_place);
        trace_index t;
        if (t.open(file, *key) != index_status::ok || !t.read_timeline(*c)) c.reset();
        return c;
      };
      std::future<std::optional<timeline_columns>> columns;
      try {
        columns = std::async(std::launch::async, read_timeline);
      } catch (const std::system_error&) {
        columns = std::async(std::launch::deferred, read_timeline);  // no thread to be had
      }
      trace_index idx;
      an::trace_model model;
      const bool model_ok = idx.open(file, *key) == index_status::ok && idx.read_model(model);
      if (model_ok) mark_used(file);
      std::optional<timeline_columns> tl = columns.get();
      if (model_ok)
        p = build_profile(options.rules, std::move(model), rel, key->size, sum.generation, nullptr, timeline_ready, std::move(tl));
    }
    if (!p) {
      int error_number = 0;
      p = load_profile(options.rules, path, rel, key->size, options.max_text_bytes, nullptr, error, error_number, nullptr,
                       sum.generation, timeline_ready);
      if (!p) return nullptr;
    }
    p->load_seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    full_loads_.fetch_add(1, std::memory_order_relaxed);
    if (p->timeline_from_index) timeline_reads_.fetch_add(1, std::memory_order_relaxed);
    return p;
  }

  /// Puts `p` first in the LRU of resident full profiles (pinned for `pin`) and evicts from the
  /// tail beyond options.max_memory, skipping pinned profiles (a profile in use stays alive
  /// through its users' pointers anyway).
  /// Σ file_summary::bytes() of the loaded files (they always stay, and count in the budget).
  std::uint64_t summary_bytes() const {
    std::lock_guard lock(mutex_);
    std::uint64_t n = 0;
    for (const auto& [path, e] : files_)
      if (e.summary) n += e.summary->bytes();
    return n;
  }

  void keep_resident(const std::shared_ptr<const profile>& p, clock_type::duration pin = {}) const {
    std::vector<std::shared_ptr<const profile>> dropped;  // released after the lock
    // The budget holds the summaries first; the full profiles get what is left. Summaries change
    // only with loads, and each load brings a profile new to the LRU: only then are they summed
    // again (a request's recency bump, the hot path, uses the last sum).
    bool known = false;
    {
      std::lock_guard lock(lru_mutex_);
      known = std::any_of(lru_.begin(), lru_.end(), [&](const lru_entry& e) { return e.p == p; });
    }
    const std::uint64_t summaries = !known && options.max_memory > 0 ? summary_bytes() : 0;
    {
      std::lock_guard lock(lru_mutex_);
      if (!known) profile_budget_ = options.max_memory > summaries ? options.max_memory - summaries : 0;
      const std::uint64_t budget = profile_budget_;
      const auto now = clock_type::now();
      const auto until = pin > clock_type::duration::zero() ? now + pin : clock_type::time_point{};
      if (until != clock_type::time_point{})
        for (lru_entry& e : lru_) e.pinned_until = {};  // one pin at a time (see lru_entry)
      bool found = false;
      for (auto it = lru_.begin(); it != lru_.end(); ++it)
        if (it->p == p) {
          it->pinned_until = std::max(it->pinned_until, until);
          lru_.splice(lru_.begin(), lru_, it);
          found = true;
          break;
        }
      if (!found) {
        lru_.push_front({p, until});
        lru_bytes_ += p->heap_bytes();
      }
      auto it = lru_.end();
      while (options.max_memory > 0 && lru_bytes_ > budget && it != lru_.begin()) {
        --it;
        if (it->pinned_until > now) continue;
        lru_bytes_ -= it->p->heap_bytes();
        dropped.push_back(std::move(it->p));
        it = lru_.erase(it);
      }
    }
    if (!dropped.empty()) {
      dropped.clear();
      release_free_memory();
    }
  }

  /// The on-demand thread: loads the full profiles requests wait for, one at a time.
  void demand_loop() {
    for (;;) {
      demand_job job;
      {
        std::unique_lock lock(demand_mutex_);
        demand_cv_.wait(lock, [&] { return demand_stop_ || !demand_.empty(); });
        if (demand_stop_) return;
        job = std::move(demand_.front());
        demand_.pop_front();
      }
      std::string error;
      std::shared_ptr<const profile> p;
      demand_loading_.store(true, std::memory_order_relaxed);
      try {
        p = load_full(job.path, job.rel, *job.slot, *job.summary, error,
                      [&](const std::shared_ptr<const profile>& early) {
                        {
                          std::lock_guard lock(job.slot->m);
                          job.slot->early = early;
                        }
                        job.slot->cv.notify_all();
                        if (options.on_early_timeline) options.on_early_timeline();
                      });
      } catch (const std::exception& e) {
        error = job.rel + ": " + e.what();
      }
      if (p)
        keep_resident(p, std::chrono::duration_cast<clock_type::duration>(
                             std::chrono::duration<double>(std::max(0.0, options.demand_pin_seconds))));
      {
        std::lock_guard lock(job.slot->m);
        job.slot->weak = p;
        if (job.slot->waiters > 0) job.slot->handoff = p;
        job.slot->early.reset();
        job.slot->loading = false;
        job.slot->error = p ? std::string() : error.empty() ? job.rel + ": cannot load" : error;
        job.slot->error_at = clock_type::now();
      }
      job.slot->cv.notify_all();
      p.reset();
      demand_loading_.store(false, std::memory_order_relaxed);
      release_free_memory();
    }
  }

  file_status status_of(const file_entry& e) const {
    file_status s;
    s.run = e.file.run;
    s.worker = e.file.worker;
    s.span = e.file.span;
    s.path = e.rel;
    s.size = e.file.size;
    s.state = e.state;
    s.error = e.error;
    s.warnings = e.warnings;
    s.load_seconds = e.load_seconds;
    s.summary = e.summary;
    s.index = e.index;
    if (e.slot) {
      std::lock_guard lock(e.slot->m);
      s.resident = !e.slot->weak.expired();
    }
    return s;
  }
};

store::store(store_options options) : impl_(std::make_unique<impl>(std::move(options))) {}

store::~store() {
  {
    std::lock_guard lock(impl_->mutex_);
    impl_->stop_ = true;
  }
  impl_->changed_.notify_all();
  {
    std::lock_guard lock(impl_->demand_mutex_);
    impl_->demand_stop_ = true;
  }
  impl_->demand_cv_.notify_all();
  if (impl_->scanner_.joinable()) impl_->scanner_.join();
  for (std::thread& t : impl_->loaders_) t.join();
  if (impl_->demand_thread_.joinable()) impl_->demand_thread_.join();
}

void store::start() {
  {
    std::lock_guard lock(impl_->mutex_);
    if (impl_->started_) return;
    impl_->started_ = true;
  }
  const unsigned n = std::max(1u, impl_->options.loader_threads);
  for (unsigned i = 0; i < n; ++i) impl_->loaders_.emplace_back([this] { impl_->loader_loop(); });
  impl_->demand_thread_ = std::thread([this] { impl_->demand_loop(); });
  impl_->scanner_ = std::thread([this] { impl_->scanner_loop(); });
}

bool store::wait_idle(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mutex_);
  return impl_->changed_.wait_for(lock, timeout, [&] { return impl_->idle_locked(); });
}

void store::rescan() { impl_->scan(); }

std::shared_ptr<const std::string> store::scalars_body(std::string_view run) const {
  std::lock_guard lock(impl_->scalars_mutex_);
  const auto it = impl_->scalar_bodies_.find(std::string(run));
  return it == impl_->scalar_bodies_.end() ? nullptr : it->second;
}

std::vector<std::string> store::notes() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->notes_;
}

const store_options& store::options() const noexcept { return impl_->options; }

load_progress store::progress() const {
  std::lock_guard lock(impl_->mutex_);
  load_progress p;
  for (const auto& [path, e] : impl_->files_) {
    if (e.state == file_state::skipped) continue;
    ++p.files_total;
    p.bytes_total += e.file.size;
    if (e.state == file_state::loaded) {
      ++p.files_loaded;
      p.bytes_loaded += e.file.size;
    } else if (e.state == file_state::failed) {
      ++p.files_failed;
      p.bytes_loaded += e.file.size;
    } else if (e.state == file_state::loading) {
      for (const auto& f : impl_->flights_) {
        if (f.path != path) continue;
        // Short of the whole file until it is done (the views are computed after the parse).
        const std::uint64_t done = f.bytes.load(std::memory_order_relaxed);
        p.bytes_loaded += std::min(done, e.file.size > 0 ? e.file.size - 1 : 0);
        if (p.current_file.empty()) p.current_file = e.rel;
      }
    }
  }
  p.loading = !impl_->idle_locked();
  return p;
}

std::vector<file_status> store::files() const {
  std::lock_guard lock(impl_->mutex_);
  std::vector<file_status> out;
  out.reserve(impl_->order_.size());
  for (const auto& path : impl_->order_) {
    auto it = impl_->files_.find(path);
    if (it != impl_->files_.end()) out.push_back(impl_->status_of(it->second));
  }
  return out;
}

std::vector<std::string> store::runs() const {
  std::lock_guard lock(impl_->mutex_);
  std::set<std::string> runs;
  for (const auto& [path, e] : impl_->files_)
    if (e.summary) runs.insert(e.file.run);
  return {runs.begin(), runs.end()};
}

std::vector<run_info> store::discovered_runs() const {
  std::lock_guard lock(impl_->mutex_);
  std::map<std::string, run_info> runs;
  for (const auto& [path, e] : impl_->files_) {
    if (e.state == file_state::skipped) continue;
    run_info& r = runs[e.file.run];
    r.name = e.file.run;
    r.newest_mtime_ns = std::max(r.newest_mtime_ns, e.file.mtime_ns);
    if (e.summary) ++r.files_loaded;
    if (e.state == file_state::queued || e.state == file_state::loading) ++r.files_pending;
    else if (e.state == file_state::failed) ++r.files_failed;
  }
  std::vector<run_info> out;
  for (auto& [name, r] : runs) out.push_back(std::move(r));
  return out;
}

bool store::run_known(std::string_view run) const {
  std::lock_guard lock(impl_->mutex_);
  for (const auto& [path, e] : impl_->files_)
    if (e.file.run == run) return true;
  return false;
}

std::vector<file_status> store::run_files(std::string_view run) const {
  std::lock_guard lock(impl_->mutex_);
  std::vector<file_status> out;
  for (const auto& path : impl_->order_) {
    auto it = impl_->files_.find(path);
    if (it != impl_->files_.end() && it->second.file.run == run && it->second.summary)
      out.push_back(impl_->status_of(it->second));
  }
  return out;
}

std::shared_ptr<const file_summary> store::find_summary(std::string_view run, std::string_view worker,
                                                        std::string_view span) const {
  std::lock_guard lock(impl_->mutex_);
  for (const auto& [path, e] : impl_->files_)
    if (e.summary && e.file.run == run && e.file.worker == worker && e.file.span == span) return e.summary;
  return nullptr;
}

full_result store::acquire(std::string_view run, std::string_view worker, std::string_view span,
                           std::chrono::milliseconds wait, bool timeline_only) const {
  impl::demand_job job;
  {
    std::lock_guard lock(impl_->mutex_);
    for (const auto& [path, e] : impl_->files_)
      if (e.summary && e.slot && e.file.run == run && e.file.worker == worker && e.file.span == span) {
        job = {path, e.rel, e.summary, e.slot};
        break;
      }
  }
  full_result out;
  if (!job.slot) return out;
  out.path = job.rel;
  full_slot& slot = *job.slot;
  std::unique_lock lock(slot.m);
  if (auto p = slot.weak.lock()) {
    lock.unlock();
    impl_->keep_resident(p);
    out.full = std::move(p);
    return out;
  }
  if (timeline_only && slot.early) {
    out.full = slot.early;
    return out;
  }
  if (!slot.error.empty()) {
    // A failed load is answered as such for a while, then tried again: what failed may have
    // been passing (descriptors or memory short, the file being replaced), and a rescan
    // replaces the slot only when the file changed.
    const auto retry = std::chrono::duration_cast<clock_type::duration>(
        std::chrono::duration<double>(std::max(0.0, impl_->options.demand_retry_seconds)));
    if (clock_type::now() - slot.error_at < retry) {
      out.error = slot.error;
      return out;
    }
    slot.error.clear();
  }
  if (!slot.loading) {
    slot.loading = true;
    {
      std::lock_guard q(impl_->demand_mutex_);
      impl_->demand_.push_back(job);
    }
    impl_->demand_cv_.notify_all();
  }
  const auto done = [&] { return !slot.loading || (timeline_only && slot.early); };
  ++slot.waiters;
  if (wait == std::chrono::milliseconds::max()) slot.cv.wait(lock, done);
  else slot.cv.wait_for(lock, wait, done);
  std::shared_ptr<const profile> p = slot.handoff ? slot.handoff : slot.weak.lock();
  if (!p && timeline_only) p = slot.early;
  if (--slot.waiters == 0) slot.handoff.reset();
  if (p) {
    out.full = std::move(p);
  } else if (slot.loading) {
    out.loading = true;
  } else {
    out.error = slot.error.empty() ? job.rel + ": cannot load" : slot.error;
  }
  return out;
}

std::shared_ptr<const profile> store::find(std::string_view run, std::string_view worker,
                                           std::string_view span) const {
  return acquire(run, worker, span, std::chrono::milliseconds::max()).full;
}

std::uint64_t store::resident_bytes() const {
  std::lock_guard lock(impl_->lru_mutex_);
  return impl_->lru_bytes_;
}

std::uint64_t store::summary_bytes() const { return impl_->summary_bytes(); }

std::uint64_t store::full_loads() const noexcept { return impl_->full_loads_.load(std::memory_order_relaxed); }
std::uint64_t store::timeline_reads() const noexcept {
  return impl_->timeline_reads_.load(std::memory_order_relaxed);
}

std::optional<std::string> store::run_directory(std::string_view run) const {
  std::lock_guard lock(impl_->mutex_);
  for (const auto& [path, e] : impl_->files_)
    if (e.file.run == run) return fs::path(path).parent_path().string();
  return std::nullopt;
}

std::shared_ptr<const distributed_entry> store::distributed(std::string_view run, std::string_view span) const {
  const std::vector<file_status> files = run_files(run);
  std::vector<std::shared_ptr<const file_summary>> inputs;
  std::vector<std::string> workers;
  for (const auto& f : files)
    if (f.span == span) {
      inputs.push_back(f.summary);
      workers.push_back(f.worker);
    }
  if (inputs.empty()) return nullptr;

  const std::shared_ptr<impl::distributed_slot> slot = impl_->dist_.of(run, span);
  std::lock_guard compute(slot->compute);
  if (slot->entry && slot->entry->summaries == inputs) return slot->entry;
  auto entry = std::make_shared<distributed_entry>();
  entry->summaries = inputs;
  entry->generation = next_generation();
  // One worker is enough, as in torch-tb-profiler (loader.py): the view exists when every worker
  // of the span communicates (combine_distributed() says why not otherwise). Each worker's part
  // was computed at its load: no model is read here.
  std::vector<std::pair<std::string, const an::distributed_worker_part*>> parts;
  for (std::size_t i = 0; i < inputs.size(); ++i) parts.emplace_back(workers[i], &inputs[i]->distributed);
  entry->result = an::combine_distributed(parts, /*keep_records=*/false);
  slot->entry = entry;
  return entry;
}

std::shared_ptr<const an::job_result> store::job(std::string_view run, std::string_view span) const {
  std::vector<std::shared_ptr<const file_summary>> inputs;
  std::vector<std::string> workers;
  std::vector<std::uint64_t> generations;
  for (const auto& f : run_files(run))
    if (f.span == span) {
      inputs.push_back(f.summary);
      workers.push_back(f.worker);
      generations.push_back(f.summary->generation);
    }
  if (inputs.empty()) return nullptr;

  const std::shared_ptr<impl::job_slot> slot = impl_->jobs_.of(run, span);
  std::lock_guard compute(slot->compute);
  if (slot->result && slot->inputs == generations) return slot->result;
  std::vector<an::job_input> in;
  for (std::size_t i = 0; i < inputs.size(); ++i) in.push_back({workers[i], inputs[i]->rank_id, &inputs[i]->rank});
  slot->result = std::make_shared<const an::job_result>(an::analyze_job(in));
  slot->inputs = std::move(generations);
  return slot->result;
}

std::shared_ptr<const span_bodies> store::span_panels(std::string_view run, std::string_view span,
                                                      const std::function<span_bodies()>& compute) const {
  // The members as they are now: (absolute path, size, mtime) for the cache key, and the
  // summaries' generations for the memory.
  std::vector<std::tuple<std::string, std::uint64_t, std::int64_t>> members;
  std::vector<std::uint64_t> generations;
  {
    std::lock_guard lock(impl_->mutex_);
    for (const auto& path : impl_->order_) {
      auto it = impl_->files_.find(path);
      if (it == impl_->files_.end() || it->second.file.run != run || it->second.file.span != span ||
          !it->second.summary)
        continue;
      const file_entry& e = it->second;
      members.emplace_back(path, e.slot ? e.slot->source_size : 0, e.slot ? e.slot->source_mtime_ns : 0);
      generations.push_back(e.summary->generation);
    }
  }
  if (members.empty()) return nullptr;
  const std::shared_ptr<impl::span_slot> slot = impl_->spans_.of(run, span);
  std::lock_guard hold(slot->compute);
  if (slot->bodies && slot->inputs == generations) return slot->bodies;

  // The cache file's key: a name of its own (never a trace's path) and a hash of the members.
  std::sort(members.begin(), members.end());
  std::uint64_t h = fnv1a_basis;
  const auto raw = [](const auto& v) { return std::string_view(reinterpret_cast<const char*>(&v), sizeof v); };
  for (const auto& [path, size, mtime] : members) {
    h = fnv1a(std::string_view(path.data(), path.size() + 1), h);  // with its NUL: paths never run into each other
    h = fnv1a(raw(size), h);
    h = fnv1a(raw(mtime), h);
  }
  index_key key;
  key.path = "span:" + fs::path(std::get<0>(members.front())).parent_path().string() + "\n" + std::string(span);
  if (impl_->options.rules != an::rule_set::kinetoscope) key.path += "\nrules=" + std::string(an::rule_set_name(impl_->options.rules));
  key.size = members.size();
  key.mtime_ns = static_cast<std::int64_t>(h);
  const std::string& cache = impl_->options.cache_dir;
  const std::string file = cache.empty() ? std::string() : index_file_path(cache, key.path);
  std::shared_ptr<span_bodies> out;
  if (!file.empty()) {
    trace_index idx;
    if (idx.open(file, key) == index_status::ok) {
      try {
        out = std::make_shared<span_bodies>(span_bodies_from_bytes(idx.summary_bytes()));
        out->from_cache = true;
        mark_used(file);
        impl_->span_cache_reads_.fetch_add(1, std::memory_order_relaxed);
      } catch (const std::exception&) {
        out.reset();  // corrupt: computed and written again below
      }
    }
  }
  if (!out) {
    out = std::make_shared<span_bodies>(compute());
    // The bodies are what is served from now on: the job view and the panels' result they were
    // made from (about 130 MB at 256 ranks) are computed again only if asked for directly (a
    // Ranks request with its own `top`). The panels' JSON trees are freed by now too: give the
    // pages back.
    impl_->jobs_.drop(run, span);
    impl_->dist_.drop(run, span);
    impl_->release_free_memory();
    if (!file.empty() && out->available) {
      try {
        write_index(file, key, span_bodies_to_bytes(*out), an::trace_model{});
        impl_->keep_cache_budget(file);
      } catch (const std::exception&) {
        // (An unwritable cache folder: the bodies are still served from memory.)
      }
    }
  }
  slot->bodies = out;
  slot->inputs = std::move(generations);
  return out;
}

std::uint64_t store::span_cache_reads() const noexcept {
  return impl_->span_cache_reads_.load(std::memory_order_relaxed);
}

std::shared_ptr<const an::op_trees> store::trees(const std::shared_ptr<const profile>& p) const {
  if (p->kept_trees_) return p->kept_trees_;
  std::lock_guard build(p->trees_mutex_);
  if (auto t = p->trees_.lock()) {
    std::lock_guard lock(impl_->tree_mutex_);
    for (auto it = impl_->tree_cache_.begin(); it != impl_->tree_cache_.end(); ++it)
      if (it->trees == t) {
        impl_->tree_cache_.splice(impl_->tree_cache_.begin(), impl_->tree_cache_, it);
        break;
      }
    return t;
  }
  auto t = std::make_shared<const an::op_trees>(an::build_op_tree(p->model, an::rules(p->rules).tree));
  impl_->trees_built_.fetch_add(1, std::memory_order_relaxed);
  p->trees_ = t;
  const std::size_t bytes = t->heap_bytes();
  std::list<impl::tree_slot> dropped;  // destroyed after the lock is released
  {
    std::lock_guard lock(impl_->tree_mutex_);
    auto& cache = impl_->tree_cache_;
    if (bytes <= impl_->options.tree_cache_bytes) cache.push_front({p, t, bytes});
    std::size_t total = 0;
    for (auto it = cache.begin(); it != cache.end();) {
      const auto next = std::next(it);
      if (it->owner.expired() || total + it->bytes > impl_->options.tree_cache_bytes)
        dropped.splice(dropped.end(), cache, it);
      else
        total += it->bytes;
      it = next;
    }
  }
  return t;
}

std::uint64_t store::trees_built() const noexcept { return impl_->trees_built_.load(std::memory_order_relaxed); }

std::shared_ptr<const alternate_views> store::views(const std::shared_ptr<const profile>& p, an::rule_set rules) const {
  const auto find = [&]() -> std::shared_ptr<const alternate_views> {
    std::lock_guard lock(impl_->views_mutex_);
    for (auto it = impl_->views_.begin(); it != impl_->views_.end(); ++it)
      if ((*it)->generation == p->generation && (*it)->rules == rules) {
        impl_->views_.splice(impl_->views_.begin(), impl_->views_, it);
        return impl_->views_.front();
      }
    return nullptr;
  };
  if (auto v = find()) return v;
  std::lock_guard build(impl_->views_build_mutex_);
  if (auto v = find()) return v;  // computed while this caller waited
  auto v = std::make_shared<alternate_views>();
  v->rules = rules;
  v->generation = p->generation;
  const an::analysis_rules options = an::rules(rules);
  auto trees = std::make_shared<const an::op_trees>(an::build_op_tree(p->model, options.tree));
  v->tree_stats = trees->stats;
  v->used_devices = trees->used_devices;
  v->eligible_op_kernel_ratio = an::eligible_op_kernel_ratio(*trees);
  v->kernel_view = an::kernel_view_present(p->model, *trees);
  v->tc_kernel_ratio = an::tc_kernel_ratio(p->model, *trees);
  v->kernel_columns = an::kernel_view_metric_columns(p->model);
  v->report = an::compute_report(p->model, *trees, options.report());
  v->trees = std::move(trees);
  std::shared_ptr<const alternate_views> out = v;
  std::list<std::shared_ptr<const alternate_views>> dropped;  // freed after the lock
  std::lock_guard lock(impl_->views_mutex_);
  impl_->views_.push_front(out);
  while (impl_->views_.size() > views_cache_entries) dropped.splice(dropped.end(), impl_->views_, std::prev(impl_->views_.end()));
  return out;
}

std::shared_ptr<const an::diff_node> store::diff(const std::shared_ptr<const profile>& baseline,
                                                 const std::shared_ptr<const profile>& experimental) const {
  {
    std::lock_guard lock(impl_->diff_mutex_);
    for (auto it = impl_->diffs_.begin(); it != impl_->diffs_.end(); ++it)
      if (it->a == baseline->generation && it->b == experimental->generation) {
        impl_->diffs_.splice(impl_->diffs_.begin(), impl_->diffs_, it);
        return impl_->diffs_.front().root;
      }
  }
  auto root = std::make_shared<const an::diff_node>(an::compute_diff(*trees(baseline), *trees(experimental)));
  std::lock_guard lock(impl_->diff_mutex_);
  impl_->diffs_.push_front({baseline->generation, experimental->generation, root});
  while (impl_->diffs_.size() > diff_cache_entries) impl_->diffs_.pop_back();
  return root;
}

std::optional<std::string> store::cached_body(const std::string& key) const {
  std::lock_guard lock(impl_->body_mutex_);
  auto it = impl_->body_index_.find(key);
  if (it == impl_->body_index_.end()) return std::nullopt;
  impl_->bodies_.splice(impl_->bodies_.begin(), impl_->bodies_, it->second);
  return it->second->second;
}

void store::cache_body(const std::string& key, const std::string& body) const {
  const std::size_t cost = key.size() + body.size();
  if (cost > body_cache_budget / 8) return;
  std::lock_guard lock(impl_->body_mutex_);
  if (impl_->body_index_.count(key) != 0) return;
  impl_->bodies_.emplace_front(key, body);
  impl_->body_index_[key] = impl_->bodies_.begin();
  impl_->body_bytes_ += cost;
  while (impl_->body_bytes_ > body_cache_budget && !impl_->bodies_.empty()) {
    auto& last = impl_->bodies_.back();
    impl_->body_bytes_ -= last.first.size() + last.second.size();
    impl_->body_index_.erase(last.first);
    impl_->bodies_.pop_back();
  }
}

index_outcome index_trace(const std::string& path, const std::string& cache_dir, std::uint64_t max_text_bytes,
                          bool force, std::uint64_t cache_max, std::uint64_t index_min_bytes,
                          const std::vector<std::string>& keep, an::rule_set rules) {
  index_outcome out;
  const auto t0 = clock_type::now();
  const std::optional<index_key> key = index_key_of(path);
  if (!key) {
    out.error = path + ": not a readable regular file";
    return out;
  }
  out.index_file = index_file_path(cache_dir, key->path, rules_variant(rules));
  if (std::optional<std::string> small = small_trace_note(key->size, index_min_bytes)) {
    out.ok = out.skipped = true;
    out.note = std::move(*small);
    return out;
  }
  if (!force) {
    trace_index idx;
    const index_status st = idx.open(out.index_file, *key);
    if (st == index_status::ok) {
      try {
        summary_from_bytes(idx.summary_bytes());
        out.ok = out.up_to_date = true;
        return out;
      } catch (const std::exception& e) {
        out.note = std::string("corrupt: ") + e.what();
      }
    } else if (st != index_status::missing) {
      out.note = std::string(index_status_name(st)) + ": " + idx.error();
    }
  }
  try {
    std::string error;
    int error_number = 0;
    const std::string name = fs::path(key->path).filename().string();
    index_writer writer(out.index_file, *key, index_writer::io::direct);
    auto p = store::impl::load_profile(rules, key->path, name, key->size, max_text_bytes, nullptr, error, error_number,
                                       &writer, 0, {}, /*serving=*/false);
    if (!p) {
      out.error = error;
      return out;
    }
    p->load_seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    const file_summary sum = store::impl::make_summary(*p, store_options{}.max_summary_body_bytes);
    writer.finish(summary_to_bytes(sum));
    out.ok = true;
    if (cache_max != 0) {
      std::vector<std::string> kept = keep;
      kept.push_back(out.index_file);
      out.pruned = prune_cache(cache_dir, cache_max, kept);
    }
  } catch (const std::exception& e) {
    out.error = path + ": " + e.what();
  }
  out.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  return out;
}

}  // namespace kinetoscope::server
