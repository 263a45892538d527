// SPDX-License-Identifier: BSD-3-Clause
/// @file timeline.cpp
/// The windowed trace timeline (design in timeline.hpp).

#include "timeline.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "analysis/op_tree.hpp"
#include "analysis/overview.hpp"
#include "analysis/sorting.hpp"
#include "kinetoscope/formats/json_text.hpp"
#include "nlohmann/json.hpp"
#include "server/json_int.hpp"

namespace kinetoscope::server {

namespace {

using analysis::event;
using analysis::event_type;
using analysis::no_index;

// ---------------------------------------------------------------------------------------------
// A small JSON writer: appends to one string, shortest round-trip numbers, the shared escaper.

class json_writer {
 public:
  std::string out;

  void raw(std::string_view s) { out.append(s); }
  void ch(char c) { out.push_back(c); }

  /// `"s"`: the project's one JSON string escaper (kinetoscope/formats/json_text.hpp).
  void str(std::string_view s) { formats::append_json_string(out, s); }

  /// Shortest round-trip form; non-finite numbers as null.
  void num(double v) {
    if (!std::isfinite(v)) {
      out.append("null");
      return;
    }
    if (v == 0) v = 0;  // no "-0"
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
  }

  void integer(std::int64_t v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
  }

  /// `"key":`
  void key(std::string_view k) {
    str(k);
    out.push_back(':');
  }
};

enum class track_kind : std::uint8_t { cpu, gpu, other };

track_kind kind_of(const event& e) {
  switch (e.type) {
    case event_type::op:
    case event_type::python:
    case event_type::python_function:
    case event_type::module:
    case event_type::runtime:
    case event_type::driver:
      return track_kind::cpu;
    case event_type::user_annotation:
      return e.gpu_annotation ? track_kind::gpu : track_kind::cpu;
    case event_type::kernel:
    case event_type::memcpy:
    case event_type::memset:
      return track_kind::gpu;
    default:
      return track_kind::other;
  }
}

bool is_gpu_work(event_type t) {
  return t == event_type::kernel || t == event_type::memcpy || t == event_type::memset;
}

std::string_view category_name(const event& e) {
  switch (e.type) {
    case event_type::trace: return "Trace";
    case event_type::op: return "cpu_op";
    case event_type::user_annotation: return e.gpu_annotation ? "gpu_user_annotation" : "user_annotation";
    case event_type::python: return "python";
    case event_type::python_function: return "python_function";
    case event_type::module: return "python_function";
    case event_type::runtime: return "cuda_runtime";
    case event_type::driver: return "cuda_driver";
    case event_type::kernel: return "kernel";
    case event_type::memcpy: return "gpu_memcpy";
    case event_type::memset: return "gpu_memset";
    case event_type::memory: return "[memory]";
    case event_type::other: return "other";
  }
  return "other";
}

double end_of(const event& e) { return e.dur > 0 ? e.ts + e.dur : e.ts; }

constexpr double huge_us = 1e15;

double clamp_time(double v, double nan_value) {
  if (std::isnan(v)) return nan_value;
  return std::clamp(v, -huge_us, huge_us);
}

/// Read access to the raw slices of a lane as merge items: its event indices in ts order (the
/// slices of a lane do not overlap, so their ends are in order too). Times are read from the
/// events (not copied: 4 bytes a slice instead of 20, the timeline's share of a loaded trace).
struct raw_view {
  const std::uint32_t* ev;
  std::size_t n;
  const std::vector<event>& evs;
  std::size_t size() const { return n; }
  double ts(std::size_t i) const { return evs[ev[i]].ts; }
  double end(std::size_t i) const { return end_of(evs[ev[i]]); }
  double maxdur(std::size_t i) const { return end(i) - ts(i); }
  std::uint32_t count(std::size_t) const { return 1; }
  std::uint32_t longest(std::size_t i) const { return ev[i]; }
};

/// Read access to the pre-merged items of one level of detail.
struct level_view {
  const timeline_item* items;
  std::size_t n;
  std::size_t size() const { return n; }
  double ts(std::size_t i) const { return items[i].ts; }
  double end(std::size_t i) const { return items[i].end; }
  double maxdur(std::size_t i) const { return items[i].maxdur; }
  std::uint32_t count(std::size_t i) const { return items[i].count; }
  std::uint32_t longest(std::size_t i) const { return items[i].longest; }
};

/// One merged or plain item produced by merging.
using item = timeline_item;

/// The first item of `v` ending at or after `t` (items' ends are in order).
template <class View>
std::size_t first_ending_at_or_after(const View& v, double t) {
  std::size_t lo = 0, n = v.size();
  while (n > 0) {
    const std::size_t half = n / 2;
    if (v.end(lo + half) < t) {
      lo += half + 1;
      n -= half + 1;
    } else {
      n = half;
    }
  }
  return lo;
}

/// Merges items [first, ...) of `v` while their ts <= `stop` at width `m`, calling `emit(item)`
/// for each output; emit returns false to stop early. Returns false when stopped early.
template <class View, class Emit>
bool merge_items(const View& v, std::size_t first, double stop, double m, Emit&& emit) {
  const std::size_t n = v.size();
  std::size_t i = first;
  while (i < n && v.ts(i) <= stop) {
    item it{v.ts(i), v.end(i), v.maxdur(i), v.count(i), v.longest(i)};
    ++i;
    if (it.maxdur < m) {
      while (i < n && v.ts(i) <= stop && v.maxdur(i) < m && v.ts(i) - it.end < m) {
        if (v.maxdur(i) > it.maxdur) {
          it.maxdur = v.maxdur(i);
          it.longest = v.longest(i);
        }
        it.count += v.count(i);
        it.end = std::max(it.end, v.end(i));
        ++i;
      }
    }
    if (!emit(it)) return false;
  }
  return true;
}

/// The items of `v` merged at `threshold`, into `out` (cleared first).
template <class View>
void build_level(const View& v, double threshold, std::vector<item>& out) {
  out.clear();
  merge_items(v, 0, std::numeric_limits<double>::infinity(), threshold, [&](const item& it) {
    out.push_back(it);
    return true;
  });
}

std::string lower_ascii(std::string_view s) {
  std::string r(s);
  for (char& c : r) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return r;
}

bool contains_ci(std::string_view hay, std::string_view needle_lower) {
  if (needle_lower.size() > hay.size()) return false;
  const auto it = std::search(hay.begin(), hay.end(), needle_lower.begin(), needle_lower.end(), [](char a, char b) {
    if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
    return a == b;
  });
  return it != hay.end();
}

}  // namespace

// -----------------------------------------------------------------------------------------------

struct timeline::impl {
  struct track_info {
    std::string name;
    std::string group;  ///< the process or device the track belongs to ("python (pid 25738)", "GPU 0")
    track_kind kind = track_kind::other;
    std::int64_t pid = 0, tid = 0;
    bool pid_is_string = false, tid_is_string = false;
    std::uint32_t rows = 0;
    std::uint64_t events = 0;
    std::uint32_t first_lane = 0;
  };

  const analysis::trace_model& model;
  double t0 = 0;
  double duration = 0;
  std::vector<track_info> tracks;
  /// The lanes, their slices, levels and items, and the counters' points (the persisted form;
  /// `cols.meta` is written once the rest is built).
  timeline_columns cols;
  /// The per-event index, read by the event queries (event_json, search_json, track_of, row_of)
  /// through events_indexed(). A timeline built for its columns only (timeline::use::columns)
  /// drops it once laid out (8 bytes an event) and makes it again from the columns if asked.
  mutable std::vector<std::uint32_t> ev_track;  ///< per event: track id or no_index
  mutable std::vector<std::uint32_t> ev_row;
  mutable std::vector<std::uint32_t> name_count;  ///< per string id: timeline events with that name
  mutable std::once_flag events_once;
  /// The per-event index, made from the columns when it was dropped (thread-safe).
  const impl& events_indexed() const {
    std::call_once(events_once, [this] {
      if (ev_track.size() == model.events.size()) return;
      ev_track.assign(model.events.size(), no_index);
      ev_row.assign(model.events.size(), no_index);
      name_count.assign(model.strings.size(), 0);
      for (const timeline_lane& l : cols.lanes) {
        for (std::uint64_t k = l.ev_begin; k < l.ev_begin + l.ev_count; ++k) {
          const std::uint32_t id = cols.lane_events[k];
          ev_track[id] = l.track;
          ev_row[id] = l.row;
          if (model.events[id].name < name_count.size()) ++name_count[model.events[id].name];
        }
      }
    });
    return *this;
  }
  std::string tracks_cache;
  /// The counters sent by window (counters_json): SM efficiency per GPU, memory per device.
  /// Points [begin, begin + count) of cols.counter_ts (relative µs, ascending) / counter_values.
  struct series {
    std::string name;
    std::string unit;  // "fraction" or "bytes"
    double max = 0;
    std::uint64_t begin = 0, count = 0;
  };
  std::vector<series> windowed;

  // Flow indexes, built on the first event_json call.
  mutable std::once_flag flows_once;
  mutable std::vector<std::pair<std::int64_t, std::uint32_t>> corr_runtime, corr_gpu, ext_runtime;
  mutable std::vector<std::uint32_t> fwdbwd_by_place;  ///< fwdbwd indices sorted by (pid, tid, ts)
  mutable std::vector<std::uint32_t> fwdbwd_by_id;     ///< sorted by (id, is_start)

  impl(const analysis::trace_model& m, timeline::use u) : model(m) {
    build();
    write_meta();
    if (u == timeline::use::columns) {
      std::vector<std::uint32_t>().swap(ev_track);
      std::vector<std::uint32_t>().swap(ev_row);
      std::vector<std::uint32_t>().swap(name_count);
    }
  }
  impl(const analysis::trace_model& m, timeline_columns c) : model(m), cols(std::move(c)) { restore(); }

  raw_view lane_slices(const timeline_lane& l) const {
    return {cols.lane_events.data() + l.ev_begin, static_cast<std::size_t>(l.ev_count), model.events};
  }
  level_view items_of(const timeline_level& lv) const {
    return {cols.items.data() + lv.item_begin, static_cast<std::size_t>(lv.item_count)};
  }

  void build();
  void write_meta();
  void restore();
  void layout_track(std::uint32_t t, std::vector<std::uint32_t>& members);
  void write_tracks_json();
  /// The windowed series' columns (SM efficiency, memory); returns the utilization series.
  std::vector<analysis::counter_point> build_counters();
  void build_flow_indexes() const;
  std::uint32_t bound_event(const analysis::flow_event& f) const;

  void write_slice_ref(json_writer& w, std::uint32_t id) const;
  std::vector<std::uint32_t> selected_tracks(const std::vector<int>& track_ids) const;
  std::string summary(double start, double end, const std::vector<int>& track_ids) const;
  std::string window(double start, double end, int px, const std::vector<int>& track_ids, std::size_t max_slices,
                     bool use_levels) const;
};

void timeline::impl::build() {
  const auto& evs = model.events;
  ev_track.assign(evs.size(), no_index);
  ev_row.assign(evs.size(), no_index);
  name_count.assign(model.strings.size(), 0);
  if (!evs.empty()) {
    t0 = evs.front().ts;
    double last = t0;
    for (const auto& e : evs) last = std::max(last, end_of(e));
    duration = last - t0;
  }

  // Group events by (kind, pid, tid).
  struct key_hash {
    std::size_t operator()(const std::tuple<int, std::int64_t, std::int64_t>& k) const noexcept {
      const auto a = static_cast<std::uint64_t>(std::get<1>(k)) * 0x9E3779B97F4A7C15ull;
      const auto b = static_cast<std::uint64_t>(std::get<2>(k)) * 0xC2B2AE3D27D4EB4Full;
      return static_cast<std::size_t>(a ^ (b >> 1) ^ static_cast<std::uint64_t>(std::get<0>(k)));
    }
  };
  std::unordered_map<std::tuple<int, std::int64_t, std::int64_t>, std::uint32_t, key_hash> index;
  std::vector<track_info> provisional;
  std::vector<std::vector<std::uint32_t>> members;
  std::vector<char> has_step;
  std::vector<signed char> step_name(model.strings.size(), -1);
  for (std::uint32_t i = 0; i < evs.size(); ++i) {
    const event& e = evs[i];
    if (e.type == event_type::memory) continue;
    if (e.name < name_count.size()) ++name_count[e.name];
    const track_kind k = kind_of(e);
    const auto key = std::make_tuple(static_cast<int>(k), e.pid, e.tid);
    auto [it, inserted] = index.try_emplace(key, static_cast<std::uint32_t>(provisional.size()));
    if (inserted) {
      track_info t;
      t.kind = k;
      t.pid = e.pid;
      t.tid = e.tid;
      t.pid_is_string = e.pid_is_string;
      t.tid_is_string = e.tid_is_string;
      provisional.push_back(std::move(t));
      members.emplace_back();
      has_step.push_back(0);
    }
    members[it->second].push_back(i);
    if (k == track_kind::cpu && !has_step[it->second] && e.name < step_name.size()) {
      signed char& s = step_name[e.name];
      if (s < 0) s = analysis::is_profiler_step_name(model.str(e.name)) ? 1 : 0;
      if (s == 1) has_step[it->second] = 1;
    }
  }

  // Names and sort indexes from the metadata events (the last one of each kind wins).
  struct process_meta {
    std::string name, labels;
    std::int64_t sort = 0;
    bool has_sort = false;
  };
  struct thread_meta {
    std::string name;
    std::int64_t sort = 0;
    bool has_sort = false;
  };
  std::map<std::int64_t, process_meta> processes;
  std::map<std::pair<std::int64_t, std::int64_t>, thread_meta> threads;
  const auto trimmed = [&](std::uint32_t sid) {
    std::string_view v = sid < model.strings.size() ? model.str(sid) : std::string_view{};
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return std::string(v);
  };
  for (const auto& tm : model.track_metas) {
    switch (tm.kind) {
      case analysis::meta_kind::process_name: processes[tm.pid].name = trimmed(tm.text); break;
      case analysis::meta_kind::process_labels: processes[tm.pid].labels = trimmed(tm.text); break;
      case analysis::meta_kind::process_sort_index:
        processes[tm.pid].sort = tm.sort_index;
        processes[tm.pid].has_sort = true;
        break;
      case analysis::meta_kind::thread_name: threads[{tm.pid, tm.tid}].name = trimmed(tm.text); break;
      case analysis::meta_kind::thread_sort_index:
        threads[{tm.pid, tm.tid}].sort = tm.sort_index;
        threads[{tm.pid, tm.tid}].has_sort = true;
        break;
    }
  }
  const auto psort = [&](std::int64_t pid) {
    const auto it = processes.find(pid);
    return it != processes.end() && it->second.has_sort ? it->second.sort : pid;
  };
  const auto tsort = [&](std::int64_t pid, std::int64_t tid) {
    const auto it = threads.find({pid, tid});
    return it != threads.end() && it->second.has_sort ? it->second.sort : tid;
  };

  // Display order.
  std::vector<std::uint32_t> order(provisional.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    const auto& x = provisional[a];
    const auto& y = provisional[b];
    if (x.kind != y.kind) return x.kind < y.kind;
    if (x.kind == track_kind::cpu && has_step[a] != has_step[b]) return has_step[a] > has_step[b];
    if (x.kind != track_kind::gpu) {
      const std::int64_t px = psort(x.pid), py = psort(y.pid);
      if (px != py) return px < py;
    }
    if (x.pid != y.pid) return x.pid < y.pid;
    const std::int64_t tx = tsort(x.pid, x.tid), ty = tsort(y.pid, y.tid);
    if (tx != ty) return tx < ty;
    return x.tid < y.tid;
  });

  tracks.reserve(order.size());
  std::size_t laid_out = 0;
  for (const auto& m : members) laid_out += m.size();
  cols.lane_events.reserve(laid_out);
  for (std::uint32_t t = 0; t < order.size(); ++t) {
    track_info info = std::move(provisional[order[t]]);
    const std::string pid_text = info.pid_is_string ? std::string(model.id_text(info.pid, true)) : std::to_string(info.pid);
    const std::string tid_text = info.tid_is_string ? std::string(model.id_text(info.tid, true)) : std::to_string(info.tid);
    const auto pit = processes.find(info.pid);
    const process_meta* pm = pit != processes.end() ? &pit->second : nullptr;
    const auto tit = threads.find({info.pid, info.tid});
    const std::string thread_name = tit != threads.end() ? tit->second.name : std::string();
    switch (info.kind) {
      case track_kind::cpu:
        // "thread 4961 (dataloader)": the writer's own text when it names the thread id already.
        if (thread_name.empty()) info.name = "thread " + tid_text;
        else if (thread_name.find(tid_text) != std::string::npos) info.name = thread_name;
        else info.name = "thread " + tid_text + " (" + thread_name + ")";
        info.group = (pm != nullptr && !pm->name.empty() ? pm->name : std::string("process")) + " (pid " + pid_text + ")";
        if (pm != nullptr && !pm->labels.empty() && pm->labels != "CPU") info.group += " · " + pm->labels;
        break;
      case track_kind::gpu: {
        info.name = "GPU " + pid_text + " stream " + tid_text;
        if (!thread_name.empty() && thread_name != "stream " + tid_text) info.name += " (" + thread_name + ")";
        info.group = "GPU " + pid_text;
        if (pm != nullptr && !pm->labels.empty() && pm->labels != info.group) info.group += " · " + pm->labels;
        const auto dev = static_cast<std::size_t>(info.pid);
        if (!info.pid_is_string && info.pid >= 0 && dev < model.devices.size() && model.devices[dev].has_name)
          info.group += " · " + model.devices[dev].name;
        break;
      }
      case track_kind::other:
        info.name = thread_name.empty() ? pid_text + " " + tid_text : thread_name;
        info.group = pm != nullptr && !pm->name.empty() ? pm->name : pid_text;
        break;
    }
    tracks.push_back(std::move(info));
    layout_track(t, members[order[t]]);
    std::vector<std::uint32_t>().swap(members[order[t]]);
  }
  // (A big table keeps its spare capacity, never touched: see trace_model::spare_kept_bytes. A
  // shrink would copy it, 140 MB on a 10 GB trace, beside the op tree at the load's peak.)
  if (cols.items.capacity() * sizeof(timeline_item) < analysis::trace_model::spare_kept_bytes) cols.items.shrink_to_fit();
  write_tracks_json();
}

void timeline::impl::layout_track(std::uint32_t t, std::vector<std::uint32_t>& ids) {
  const auto& evs = model.events;
  track_info& info = tracks[t];
  info.events = ids.size();
  info.first_lane = static_cast<std::uint32_t>(cols.lanes.size());
  // (ts asc, dur desc, index): ids are already in ts order; fix the ties.
  const auto by_start = [&](std::uint32_t a, std::uint32_t b) {
    const event& x = evs[a];
    const event& y = evs[b];
    if (x.ts != y.ts) return x.ts < y.ts;
    const double dx = end_of(x) - x.ts, dy = end_of(y) - y.ts;
    if (dx != dy) return dx > dy;
    return a < b;
  };
  // The ids come in event order, which is ts order (the loader sorts the events): only the runs
  // of equal ts need sorting, not the whole track (a full sort of every track was a fifth of
  // the timeline's time on a 10 GB trace). A track out of ts order, or with a NaN ts (as the
  // other sorts, see in_key_order), is sorted whole; by_start is a total order on finite
  // times, so both give the same sequence.
  if (!analysis::in_key_order(ids.begin(), ids.end(), [&](std::uint32_t i) { return evs[i].ts; })) {
    std::sort(ids.begin(), ids.end(), by_start);
  } else {
    for (std::size_t i = 0; i < ids.size();) {
      std::size_t j = i + 1;
      while (j < ids.size() && evs[ids[j]].ts == evs[ids[i]].ts) ++j;
      if (j - i > 1) std::sort(ids.begin() + static_cast<std::ptrdiff_t>(i), ids.begin() + static_cast<std::ptrdiff_t>(j), by_start);
      i = j;
    }
  }
  // GPU annotations first (their own rows at the top).
  std::size_t split = 0;
  if (info.kind == track_kind::gpu) {
    const auto mid = std::stable_partition(ids.begin(), ids.end(),
                                           [&](std::uint32_t i) { return evs[i].type == event_type::user_annotation; });
    split = static_cast<std::size_t>(mid - ids.begin());
  }
  std::uint32_t rows = 0;
  const auto assign = [&](std::size_t from, std::size_t to, std::uint32_t base) {
    std::vector<double> lane_end;                         // last end per lane (relative to base)
    std::vector<std::pair<double, std::uint32_t>> open;  // (end, lane) of open slices
    for (std::size_t k = from; k < to; ++k) {
      const event& e = evs[ids[k]];
      const double ts = e.ts, end = end_of(e);
      while (!open.empty() && open.back().first <= ts) open.pop_back();
      std::uint32_t lane_no = open.empty() ? 0 : open.back().second + 1;
      while (lane_no < lane_end.size() && lane_end[lane_no] > ts) ++lane_no;
      if (lane_no >= lane_end.size()) lane_end.resize(lane_no + 1, -std::numeric_limits<double>::infinity());
      lane_end[lane_no] = end;
      open.emplace_back(end, lane_no);
      ev_track[ids[k]] = t;
      ev_row[ids[k]] = base + lane_no;
    }
    return static_cast<std::uint32_t>(lane_end.size());
  };
  const std::uint32_t annotation_rows = assign(0, split, 0);
  rows = annotation_rows + assign(split, ids.size(), annotation_rows);
  info.rows = rows;
  // The track's lanes take the next ids.size() places of lane_events, row after row (a counting
  // sort by row). Filling them in ts order keeps each lane in ts order (the annotation part and
  // the work part are each in ts order and use disjoint rows).
  const std::size_t base = cols.lane_events.size();
  cols.lane_events.resize(base + ids.size());
  std::vector<std::uint64_t> next(rows + 1, 0);
  for (const std::uint32_t i : ids) ++next[ev_row[i] + 1];
  for (std::uint32_t r = 0; r < rows; ++r) next[r + 1] += next[r];
  for (std::uint32_t r = 0; r < rows; ++r) {
    timeline_lane l;
    l.track = t;
    l.row = r;
    l.ev_begin = base + next[r];
    l.ev_count = next[r + 1] - next[r];
    cols.lanes.push_back(l);
  }
  for (const std::uint32_t i : ids) cols.lane_events[base + next[ev_row[i]]++] = i;
  // Levels of detail: each built from the previous kept one (into `merged`, then appended).
  std::vector<item> merged;
  for (std::uint32_t r = 0; r < rows; ++r) {
    timeline_lane& l = cols.lanes[info.first_lane + r];
    std::size_t prev = static_cast<std::size_t>(l.ev_count);
    l.level_begin = static_cast<std::uint32_t>(cols.levels.size());
    if (prev < 64) continue;
    const raw_view raw = lane_slices(l);
    const double span = raw.end(prev - 1) - raw.ts(0);
    for (double threshold = 0.25; threshold <= span && prev > 16; threshold *= 4) {
      if (l.level_count == 0) build_level(raw, threshold, merged);
      else build_level(items_of(cols.levels.back()), threshold, merged);
      if (merged.size() * 2 <= prev) {
        prev = merged.size();
        cols.levels.push_back({threshold, cols.items.size(), merged.size()});
        cols.items.insert(cols.items.end(), merged.begin(), merged.end());
        ++l.level_count;
      }
    }
  }
}

void timeline::impl::write_tracks_json() {
  json_writer w;
  w.raw("{\"t0\":");
  w.num(t0);
  w.raw(",\"duration\":");
  w.num(duration);
  w.raw(",\"tracks\":[");
  for (std::size_t t = 0; t < tracks.size(); ++t) {
    const auto& info = tracks[t];
    if (t != 0) w.ch(',');
    w.raw("{\"id\":");
    w.integer(static_cast<std::int64_t>(t));
    w.raw(",\"name\":");
    w.str(info.name);
    w.raw(",\"group\":");
    w.str(info.group);
    w.raw(",\"kind\":");
    w.str(info.kind == track_kind::cpu ? "cpu" : info.kind == track_kind::gpu ? "gpu" : "other");
    w.raw(",\"pid\":");
    if (info.pid_is_string) w.str(model.id_text(info.pid, true)); else w.integer(info.pid);
    w.raw(",\"tid\":");
    if (info.tid_is_string) w.str(model.id_text(info.tid, true)); else w.integer(info.tid);
    w.raw(",\"rows\":");
    w.integer(info.rows);
    w.raw(",\"events\":");
    w.integer(static_cast<std::int64_t>(info.events));
    w.ch('}');
  }
  w.raw("],\"counters\":[");
  const auto points = build_counters();
  bool first_series = true;
  for (std::size_t i = 0; i < points.size();) {
    std::size_t j = i;
    if (points[i].counter != analysis::gpu_counter::utilization) {  // the SM-efficiency series: not sent
      ++i;
      continue;
    }
    while (j < points.size() && points[j].gpu == points[i].gpu && points[j].counter == points[i].counter) ++j;
    if (!first_series) w.ch(',');
    first_series = false;
    w.raw("{\"name\":");
    w.str(analysis::gpu_counter_name(points[i].gpu, points[i].counter));
    w.raw(",\"points\":[");
    for (std::size_t k = i; k < j; ++k) {
      if (k != i) w.ch(',');
      w.ch('[');
      w.num(points[k].ts - t0);
      w.ch(',');
      w.num(points[k].value);
      w.ch(']');
    }
    w.raw("]}");
    i = j;
  }
  w.raw("],\"windowed_counters\":[");
  for (std::size_t k = 0; k < windowed.size(); ++k) {
    if (k != 0) w.ch(',');
    w.raw("{\"name\":");
    w.str(windowed[k].name);
    w.raw(",\"unit\":");
    w.str(windowed[k].unit);
    w.raw(",\"max\":");
    w.num(windowed[k].max);
    w.raw(",\"points\":");
    w.integer(static_cast<std::int64_t>(windowed[k].count));
    w.ch('}');
  }
  w.raw("]}");
  tracks_cache = std::move(w.out);
}

/// Doubles travel in the meta JSON as their bit patterns: exact, and NaN-proof.
std::uint64_t bits_of(double v) { return std::bit_cast<std::uint64_t>(v); }
double double_of(const nlohmann::json& j) { return std::bit_cast<double>(json_int<std::uint64_t>(j)); }

void timeline::impl::write_meta() {
  nlohmann::json j;
  j["t0"] = bits_of(t0);
  j["duration"] = bits_of(duration);
  auto& tr = j["tracks"] = nlohmann::json::array();
  for (const track_info& t : tracks)
    tr.push_back({t.name, t.group, static_cast<int>(t.kind), t.pid, t.tid, t.pid_is_string, t.tid_is_string, t.rows,
                  t.events, t.first_lane});
  auto& se = j["series"] = nlohmann::json::array();
  for (const series& w : windowed) se.push_back({w.name, w.unit, bits_of(w.max), w.begin, w.count});
  j["tracks_json"] = tracks_cache;
  cols.meta = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void timeline::impl::restore() {
  const auto bad = [](const std::string& why) { throw std::invalid_argument("timeline columns: " + why); };
  const auto& evs = model.events;
  try {
    const nlohmann::json j = nlohmann::json::parse(cols.meta);
    t0 = double_of(j.at("t0"));
    duration = double_of(j.at("duration"));
    for (const auto& t : j.at("tracks")) {
      track_info info;
      info.name = t.at(0).get<std::string>();
      info.group = t.at(1).get<std::string>();
      const int kind = json_int<int>(t.at(2));
      if (kind < 0 || kind > static_cast<int>(track_kind::other)) bad("a track kind out of range");
      info.kind = static_cast<track_kind>(kind);
      info.pid = json_int<std::int64_t>(t.at(3));
      info.tid = json_int<std::int64_t>(t.at(4));
      info.pid_is_string = t.at(5).get<bool>();
      info.tid_is_string = t.at(6).get<bool>();
      info.rows = json_int<std::uint32_t>(t.at(7));
      info.events = json_int<std::uint64_t>(t.at(8));
      info.first_lane = json_int<std::uint32_t>(t.at(9));
      tracks.push_back(std::move(info));
    }
    for (const auto& w : j.at("series")) {
      series s;
      s.name = w.at(0).get<std::string>();
      s.unit = w.at(1).get<std::string>();
      s.max = double_of(w.at(2));
      s.begin = json_int<std::uint64_t>(w.at(3));
      s.count = json_int<std::uint64_t>(w.at(4));
      windowed.push_back(std::move(s));
    }
    tracks_cache = j.at("tracks_json").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    bad(std::string("meta: ") + e.what());
  } catch (const std::runtime_error& e) {  // json_int: a float or an out-of-range integer
    bad(std::string("meta: ") + e.what());
  }
  if (!nlohmann::json::accept(tracks_cache)) bad("the tracks answer is not JSON");
  if (!std::isfinite(t0) || !std::isfinite(duration)) bad("t0 or the duration is not finite");

  // Tracks own consecutive lanes, all of them, each lane naming its track and row.
  std::uint64_t lane_no = 0;
  for (std::uint32_t t = 0; t < tracks.size(); ++t) {
    const track_info& info = tracks[t];
    if (info.first_lane != lane_no || info.rows > cols.lanes.size() - lane_no) bad("a track's lanes out of range");
    std::uint64_t events = 0;
    for (std::uint32_t r = 0; r < info.rows; ++r) {
      const timeline_lane& l = cols.lanes[info.first_lane + r];
      if (l.track != t || l.row != r) bad("a lane of another track");
      events += l.ev_count;
    }
    if (events != info.events) bad("a track's event count");
    lane_no += info.rows;
  }
  if (lane_no != cols.lanes.size()) bad("lanes of no track");

  // Every slice once, in one lane, in order (no overlap: the ends are in order, which the
  // windows' binary search needs); levels and items inside their columns.
  ev_track.assign(evs.size(), no_index);
  ev_row.assign(evs.size(), no_index);
  name_count.assign(model.strings.size(), 0);
  const std::uint64_t n_events = cols.lane_events.size(), n_levels = cols.levels.size(), n_items = cols.items.size();
  for (const timeline_lane& l : cols.lanes) {
    if (l.ev_count > n_events || l.ev_begin > n_events - l.ev_count) bad("a lane's slices out of range");
    if (l.level_count > n_levels || l.level_begin > n_levels - l.level_count) bad("a lane's levels out of range");
    double last_end = -std::numeric_limits<double>::infinity();
    for (std::uint64_t k = l.ev_begin; k < l.ev_begin + l.ev_count; ++k) {
      const std::uint32_t id = cols.lane_events[k];
      if (id >= evs.size() || ev_track[id] != no_index || evs[id].type == event_type::memory)
        bad("a slice out of range or laid out twice");
      if (evs[id].ts < last_end) bad("overlapping slices in a lane");
      last_end = end_of(evs[id]);
      ev_track[id] = l.track;
      ev_row[id] = l.row;
      if (evs[id].name < name_count.size()) ++name_count[evs[id].name];
    }
    for (std::uint32_t k = 0; k < l.level_count; ++k) {
      const timeline_level& lv = cols.levels[l.level_begin + k];
      if (lv.item_count > n_items || lv.item_begin > n_items - lv.item_count) bad("a level's items out of range");
    }
  }
  for (const timeline_item& it : cols.items)
    if (it.longest >= evs.size() || it.count == 0) bad("an item out of range");
  if (cols.counter_ts.size() != cols.counter_values.size()) bad("counter columns of different lengths");
  for (const series& w : windowed) {
    if (w.count > cols.counter_ts.size() || w.begin > cols.counter_ts.size() - w.count) bad("a series out of range");
    for (std::uint64_t k = w.begin + 1; k < w.begin + w.count; ++k)
      if (!(cols.counter_ts[k - 1] <= cols.counter_ts[k])) bad("a series out of order");
  }
}

std::vector<analysis::counter_point> timeline::impl::build_counters() {
  // Each series is appended to the columns as it comes, then put in time order (stably) when it
  // is not already: SM efficiency in GPU order, then memory per device. The columns are sized
  // first (10 million SM-efficiency points on a 10 GB trace: written once, straight from the
  // analysis, not copied as they double nor held in a second table beside them).
  // Memory: "Total Allocated" / "Total Reserved" of the [memory] instants, per device: (device
  // type, device) -> (allocated, reserved) points.
  using device_key = std::pair<std::int64_t, std::int64_t>;
  const auto memory_key = [](const analysis::memory_args& a) -> device_key {
    return {a.device_type, a.device_type == 0 ? 0 : a.device_id};
  };
  const auto memory_arg = [&](const event& e) -> const analysis::memory_args* {
    if (e.type != event_type::memory || e.extra >= model.memory.size()) return nullptr;
    const auto& a = model.memory[e.extra];
    return a.device_type == 0 || a.device_type == 1 ? &a : nullptr;
  };
  // The point an instant gives the allocated or the reserved series (reserved: CUDA only).
  const auto memory_value = [](const analysis::memory_args& a, bool reserved) -> std::optional<double> {
    const double v = reserved ? a.total_reserved : a.total_allocated;
    if (!std::isfinite(v) || (reserved && a.device_type != 1)) return std::nullopt;
    return v;
  };
  std::map<device_key, std::pair<std::size_t, std::size_t>> mem;
  for (const auto& e : model.events) {
    const auto* a = memory_arg(e);
    if (a == nullptr) continue;
    auto& slot = mem[memory_key(*a)];
    if (memory_value(*a, false)) ++slot.first;
    if (memory_value(*a, true)) ++slot.second;
  }
  std::size_t memory_points = 0;
  for (const auto& [dev, n] : mem) memory_points += n.first + n.second;

  const auto add = [&](std::string name, std::string unit, std::size_t begin) {
    const std::size_t end = cols.counter_ts.size();
    const auto ts = cols.counter_ts.begin() + static_cast<std::ptrdiff_t>(begin);
    const auto te = cols.counter_ts.begin() + static_cast<std::ptrdiff_t>(end);
    if (!analysis::in_key_order(ts, te, [](double t) { return t; })) {
      std::vector<std::pair<double, double>> pts;
      pts.reserve(end - begin);
      for (std::size_t i = begin; i < end; ++i) pts.emplace_back(cols.counter_ts[i], cols.counter_values[i]);
      std::stable_sort(pts.begin(), pts.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      for (std::size_t i = begin; i < end; ++i) {
        cols.counter_ts[i] = pts[i - begin].first;
        cols.counter_values[i] = pts[i - begin].second;
      }
    }
    series s;
    s.name = std::move(name);
    s.unit = std::move(unit);
    s.begin = begin;
    s.count = end - begin;
    for (std::size_t i = begin; i < end; ++i) s.max = std::max(s.max, cols.counter_values[i]);
    windowed.push_back(std::move(s));
  };

  // SM efficiency: one series per GPU, its points as the analysis gives them (the plugin's
  // list puts the (g0, 1), (g0, 0) pair first; a segment's end and the next one's start at the
  // same time keep their order).
  struct sm_columns final : analysis::sm_efficiency_sink {
    impl& t;
    std::size_t more;  // the memory series' points, reserved with these
    const decltype(add)& close;
    bool open = false;
    std::int64_t gpu = 0;
    std::size_t begin = 0;
    sm_columns(impl& tl, std::size_t memory, const decltype(add)& c) : t(tl), more(memory), close(c) {}
    void reserve(std::size_t points) override {
      t.cols.counter_ts.reserve(t.cols.counter_ts.size() + points + more);
      t.cols.counter_values.reserve(t.cols.counter_values.size() + points + more);
    }
    void point(std::int64_t g, double ts, double value) override {
      if (!open || g != gpu) {
        finish();
        open = true;
        gpu = g;
        begin = t.cols.counter_ts.size();
      }
      t.cols.counter_ts.push_back(ts - t.t0);
      t.cols.counter_values.push_back(value);
    }
    void finish() {
      if (open) close(analysis::gpu_counter_name(gpu, analysis::gpu_counter::sm_efficiency), "fraction", begin);
      open = false;
    }
  } sm(*this, memory_points, add);
  std::vector<analysis::counter_point> utilization = analysis::gpu_utilization_counters(model, sm);
  sm.finish();
  cols.counter_ts.reserve(cols.counter_ts.size() + memory_points);  // (done when there were no SM points)
  cols.counter_values.reserve(cols.counter_values.size() + memory_points);
  for (const auto& [dev, n] : mem) {
    const std::string device = dev.first == 0 ? std::string("CPU") : "GPU " + std::to_string(dev.second);
    for (const bool reserved : {false, true}) {
      if ((reserved ? n.second : n.first) == 0) continue;
      const std::size_t begin = cols.counter_ts.size();
      for (const auto& e : model.events) {
        const auto* a = memory_arg(e);
        if (a == nullptr || memory_key(*a) != dev) continue;
        const std::optional<double> v = memory_value(*a, reserved);
        if (!v) continue;
        cols.counter_ts.push_back(e.ts - t0);
        cols.counter_values.push_back(*v);
      }
      add(device + (reserved ? " Memory Reserved" : " Memory Allocated"), "bytes", begin);
    }
  }
  return utilization;
}

std::string timeline::impl::window(double start, double end, int px, const std::vector<int>& track_ids,
                                   std::size_t max_slices, bool use_levels) const {
  start = clamp_time(start, 0);
  end = clamp_time(end, duration);
  px = std::clamp(px, 1, 10000);
  max_slices = std::max<std::size_t>(max_slices, 1);

  // Lanes to scan, in output order.
  const std::vector<std::uint32_t> sel = selected_tracks(track_ids);

  // Slices in relative time: the lanes hold absolute ts.
  const double abs_start = t0 + start, abs_end = t0 + end;
  std::vector<std::uint32_t> o_track, o_row, o_count, o_event;
  std::vector<double> o_ts, o_dur;
  std::vector<char> o_merged;
  double m = (end - start) / px;
  bool truncated = false;
  const double width = std::max(end - start, 1e-3);
  const bool empty = !(start <= end);
  while (!empty) {
    o_track.clear(); o_row.clear(); o_count.clear(); o_event.clear(); o_ts.clear(); o_dur.clear(); o_merged.clear();
    const bool last_try = m > 4 * width;
    bool overflow = false;
    const auto emit = [&](const timeline_lane& l, const item& it) {
      if (o_track.size() >= max_slices) {
        overflow = true;
        return false;
      }
      o_track.push_back(l.track);
      o_row.push_back(l.row);
      o_ts.push_back(it.ts - t0);
      o_dur.push_back(it.end - it.ts);
      o_count.push_back(it.count);
      o_event.push_back(it.longest);
      o_merged.push_back(it.count > 1 ? 1 : 0);
      return true;
    };
    for (const std::uint32_t t : sel) {
      const auto& info = tracks[t];
      for (std::uint32_t r = 0; r < info.rows && !overflow; ++r) {
        const timeline_lane& l = cols.lanes[info.first_lane + r];
        const timeline_level* lv = nullptr;
        if (use_levels) {
          for (std::uint32_t k = 0; k < l.level_count; ++k) {
            const timeline_level& cand = cols.levels[l.level_begin + k];
            if (cand.threshold <= m) lv = &cand;
          }
        }
        const auto run = [&](const auto& view) {
          merge_items(view, first_ending_at_or_after(view, abs_start), abs_end, m,
                      [&](const item& it) { return emit(l, it); });
        };
        if (lv != nullptr) run(items_of(*lv)); else run(lane_slices(l));
      }
      if (overflow) break;
    }
    if (!overflow) break;
    if (last_try) {
      truncated = true;
      break;
    }
    m = m > 0 ? m * 2 : width / 1e6;
  }

  // Serialise.
  json_writer w;
  w.out.reserve(64 + o_track.size() * 48);
  std::unordered_map<std::uint32_t, std::uint32_t> name_index;
  std::vector<std::uint32_t> names;
  std::vector<std::uint32_t> o_name(o_track.size());
  for (std::size_t i = 0; i < o_track.size(); ++i) {
    const std::uint32_t sid = model.events[o_event[i]].name;
    auto [it, inserted] = name_index.try_emplace(sid, static_cast<std::uint32_t>(names.size()));
    if (inserted) names.push_back(sid);
    o_name[i] = it->second;
  }
  w.raw("{\"start\":");
  w.num(start);
  w.raw(",\"end\":");
  w.num(end);
  w.raw(",\"px\":");
  w.integer(px);
  w.raw(",\"merge_us\":");
  w.num(empty ? 0.0 : m);
  w.raw(",\"truncated\":");
  w.raw(truncated ? "true" : "false");
  w.raw(",\"names\":[");
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i != 0) w.ch(',');
    w.str(model.str(names[i]));
  }
  const auto column_u = [&](std::string_view key, const std::vector<std::uint32_t>& v) {
    w.key(key);
    w.ch('[');
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i != 0) w.ch(',');
      w.integer(v[i]);
    }
    w.ch(']');
  };
  const auto column_d = [&](std::string_view key, const std::vector<double>& v) {
    w.key(key);
    w.ch('[');
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i != 0) w.ch(',');
      w.num(v[i]);
    }
    w.ch(']');
  };
  w.raw("],\"slices\":{");
  column_u("track", o_track);
  w.ch(',');
  column_u("row", o_row);
  w.ch(',');
  column_d("ts", o_ts);
  w.ch(',');
  column_d("dur", o_dur);
  w.ch(',');
  column_u("name", o_name);
  w.raw(",\"id\":[");
  for (std::size_t i = 0; i < o_event.size(); ++i) {
    if (i != 0) w.ch(',');
    w.integer(o_merged[i] ? -1 : static_cast<std::int64_t>(o_event[i]));
  }
  w.raw("],");
  column_u("count", o_count);
  w.raw("}}");
  return std::move(w.out);
}

/// Track ids to scan: all when `track_ids` is empty, else the known ones, duplicates once.
std::vector<std::uint32_t> timeline::impl::selected_tracks(const std::vector<int>& track_ids) const {
  std::vector<std::uint32_t> sel;
  if (track_ids.empty()) {
    sel.resize(tracks.size());
    for (std::uint32_t t = 0; t < sel.size(); ++t) sel[t] = t;
  } else {
    std::vector<char> seen(tracks.size(), 0);
    for (const int t : track_ids) {
      if (t >= 0 && static_cast<std::size_t>(t) < tracks.size() && !seen[static_cast<std::size_t>(t)]) {
        seen[static_cast<std::size_t>(t)] = 1;
        sel.push_back(static_cast<std::uint32_t>(t));
      }
    }
  }
  return sel;
}

std::string timeline::impl::summary(double start, double end, const std::vector<int>& track_ids) const {
  start = clamp_time(start, 0);
  end = clamp_time(end, duration);
  const auto& evs = model.events;
  const double abs_start = t0 + start, abs_end = t0 + end;
  const bool empty = !(start <= end);
  const double range = empty ? 0.0 : end - start;

  struct name_stats {
    std::uint64_t count = 0;
    double total = 0, self = 0, min = std::numeric_limits<double>::infinity(), max = 0;
  };
  struct node {
    std::uint32_t parent, name;
    double total = 0, self = 0;
    std::uint64_t count = 0;
  };
  struct open_slice {
    double end;           // absolute end of the slice
    double clip;          // its duration inside the range
    double covered = 0;   // union of its children's clipped durations
    double covered_to;    // where that union ends so far
    std::uint32_t name, node;
  };
  std::unordered_map<std::uint32_t, name_stats> by_name;
  std::vector<node> nodes;
  std::unordered_map<std::uint64_t, std::uint32_t> node_index;  // (parent + 1) << 32 | name
  std::map<std::int64_t, std::vector<std::pair<double, double>>> gpu_busy;  // device -> clipped intervals
  std::uint64_t slices = 0;
  const auto clip_of = [&](const event& e) { return std::max(0.0, std::min(end_of(e), abs_end) - std::max(e.ts, abs_start)); };
  const auto finish = [&](const open_slice& o) {
    const double self = std::max(0.0, o.clip - o.covered);
    by_name[o.name].self += self;
    nodes[o.node].self += self;
  };

  std::vector<std::uint32_t> ids;
  std::vector<open_slice> stack;
  for (const std::uint32_t t : empty ? std::vector<std::uint32_t>{} : selected_tracks(track_ids)) {
    const auto& info = tracks[t];
    ids.clear();
    for (std::uint32_t r = 0; r < info.rows; ++r) {
      const raw_view v = lane_slices(cols.lanes[info.first_lane + r]);
      for (std::size_t i = first_ending_at_or_after(v, abs_start); i < v.size() && v.ts(i) <= abs_end; ++i)
        ids.push_back(v.ev[i]);
    }
    // The layout's order; on GPU tracks annotations and device work nest separately.
    std::sort(ids.begin(), ids.end(), [&](std::uint32_t a, std::uint32_t b) {
      const event& x = evs[a];
      const event& y = evs[b];
      const bool ax = x.type == event_type::user_annotation, ay = y.type == event_type::user_annotation;
      if (info.kind == track_kind::gpu && ax != ay) return ax;
      if (x.ts != y.ts) return x.ts < y.ts;
      const double dx = end_of(x) - x.ts, dy = end_of(y) - y.ts;
      if (dx != dy) return dx > dy;
      return a < b;
    });
    stack.clear();
    bool annotations = true;
    for (const std::uint32_t id : ids) {
      const event& e = evs[id];
      const bool is_annotation = e.type == event_type::user_annotation;
      if (info.kind == track_kind::gpu && annotations && !is_annotation) {
        for (const auto& o : stack) finish(o);
        stack.clear();
        annotations = false;
      }
      const double ts = e.ts, e_end = end_of(e), clip = clip_of(e);
      while (!stack.empty() && stack.back().end <= ts) {
        finish(stack.back());
        stack.pop_back();
      }
      // The parent: the innermost open slice containing this one.
      std::size_t p = stack.size();
      while (p > 0 && !(stack[p - 1].end > ts && stack[p - 1].end >= e_end)) --p;
      std::uint32_t parent_node = no_index;
      if (p > 0) {
        open_slice& parent = stack[p - 1];
        parent_node = parent.node;
        const double a = std::max(ts, abs_start), b = std::min(e_end, abs_end);
        if (b > parent.covered_to) {
          parent.covered += b - std::max(a, parent.covered_to);
          parent.covered_to = b;
        }
      }
      const std::uint64_t key = (static_cast<std::uint64_t>(parent_node) + 1) << 32 | e.name;
      auto [it, inserted] = node_index.try_emplace(key, static_cast<std::uint32_t>(nodes.size()));
      if (inserted) nodes.push_back(node{parent_node, e.name});
      node& n = nodes[it->second];
      n.total += clip;
      ++n.count;
      name_stats& st = by_name[e.name];
      ++st.count;
      st.total += clip;
      st.min = std::min(st.min, clip);
      st.max = std::max(st.max, clip);
      ++slices;
      stack.push_back(open_slice{e_end, clip, 0, std::max(ts, abs_start), e.name, it->second});
      if (info.kind == track_kind::gpu && is_gpu_work(e.type) && clip > 0)
        gpu_busy[info.pid].emplace_back(std::max(ts, abs_start), std::min(e_end, abs_end));
    }
    for (const auto& o : stack) finish(o);
  }

  // Rows: by total desc, then name.
  std::vector<std::pair<std::uint32_t, const name_stats*>> rows;
  rows.reserve(by_name.size());
  for (const auto& [name, st] : by_name) rows.emplace_back(name, &st);
  std::sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
    if (a.second->total != b.second->total) return a.second->total > b.second->total;
    return model.str(a.first) < model.str(b.first);
  });
  constexpr std::size_t max_rows = 1000, max_nodes = 20000;

  json_writer w;
  w.raw("{\"start\":");
  w.num(start);
  w.raw(",\"end\":");
  w.num(end);
  w.raw(",\"slices\":");
  w.integer(static_cast<std::int64_t>(slices));
  w.raw(",\"names\":");
  w.integer(static_cast<std::int64_t>(rows.size()));
  w.raw(",\"rows\":[");
  for (std::size_t i = 0; i < rows.size() && i < max_rows; ++i) {
    const name_stats& st = *rows[i].second;
    if (i != 0) w.ch(',');
    w.raw("{\"name\":");
    w.str(model.str(rows[i].first));
    w.raw(",\"count\":");
    w.integer(static_cast<std::int64_t>(st.count));
    w.raw(",\"total\":");
    w.num(st.total);
    w.raw(",\"self\":");
    w.num(st.self);
    w.raw(",\"avg\":");
    w.num(st.total / static_cast<double>(st.count));
    w.raw(",\"min\":");
    w.num(st.min);
    w.raw(",\"max\":");
    w.num(st.max);
    w.raw(",\"percent\":");
    w.num(range > 0 ? st.total / range * 100 : 0.0);
    w.ch('}');
  }
  w.raw("],\"gpus\":[");
  bool first = true;
  for (auto& [device, iv] : gpu_busy) {
    std::sort(iv.begin(), iv.end());
    double busy = 0, covered_to = -std::numeric_limits<double>::infinity();
    for (const auto& [a, b] : iv) {
      if (b > covered_to) {
        busy += b - std::max(a, covered_to);
        covered_to = b;
      }
    }
    if (!first) w.ch(',');
    first = false;
    w.raw("{\"device\":");
    w.integer(device);
    w.raw(",\"busy\":");
    w.num(busy);
    w.raw(",\"idle\":");
    w.num(range - busy);
    w.raw(",\"busy_percent\":");
    w.num(range > 0 ? busy / range * 100 : 0.0);
    w.ch('}');
  }
  // The flame graph: nodes in creation order (a parent always precedes its children).
  const std::size_t n_nodes = std::min(nodes.size(), max_nodes);
  std::unordered_map<std::uint32_t, std::uint32_t> flame_name;
  std::vector<std::uint32_t> flame_names;
  for (std::size_t i = 0; i < n_nodes; ++i) {
    auto [it, inserted] = flame_name.try_emplace(nodes[i].name, static_cast<std::uint32_t>(flame_names.size()));
    if (inserted) flame_names.push_back(nodes[i].name);
  }
  w.raw("],\"flame\":{\"truncated\":");
  w.raw(nodes.size() > max_nodes ? "true" : "false");
  w.raw(",\"names\":[");
  for (std::size_t i = 0; i < flame_names.size(); ++i) {
    if (i != 0) w.ch(',');
    w.str(model.str(flame_names[i]));
  }
  const auto column = [&](std::string_view k, auto&& value) {
    w.raw("],");
    w.key(k);
    w.ch('[');
    for (std::size_t i = 0; i < n_nodes; ++i) {
      if (i != 0) w.ch(',');
      value(nodes[i]);
    }
  };
  column("parent", [&](const node& n) { w.integer(n.parent == no_index ? -1 : static_cast<std::int64_t>(n.parent)); });
  column("name", [&](const node& n) { w.integer(flame_name[n.name]); });
  column("total", [&](const node& n) { w.num(n.total); });
  column("self", [&](const node& n) { w.num(n.self); });
  column("count", [&](const node& n) { w.integer(static_cast<std::int64_t>(n.count)); });
  w.raw("]}}");
  return std::move(w.out);
}

void timeline::impl::build_flow_indexes() const {
  const auto& evs = model.events;
  for (std::uint32_t i = 0; i < evs.size(); ++i) {
    const event& e = evs[i];
    // Driver calls launch too (cuLaunchKernel: cuBLAS in PyTorch 2.x, Triton): the file's ac2g
    // arrows link them like runtime calls, and so does the timeline.
    if (e.type == event_type::runtime || e.type == event_type::driver) {
      if (e.correlation != 0) corr_runtime.emplace_back(e.correlation, i);
      if (e.external_id != 0) ext_runtime.emplace_back(e.external_id, i);
    } else if (is_gpu_work(e.type) && e.correlation != 0) {
      corr_gpu.emplace_back(e.correlation, i);
    }
  }
  std::sort(corr_runtime.begin(), corr_runtime.end());
  std::sort(corr_gpu.begin(), corr_gpu.end());
  std::sort(ext_runtime.begin(), ext_runtime.end());
  const auto& fl = model.fwdbwd;
  fwdbwd_by_place.resize(fl.size());
  fwdbwd_by_id.resize(fl.size());
  for (std::uint32_t i = 0; i < fl.size(); ++i) fwdbwd_by_place[i] = fwdbwd_by_id[i] = i;
  std::sort(fwdbwd_by_place.begin(), fwdbwd_by_place.end(), [&](std::uint32_t a, std::uint32_t b) {
    return std::tie(fl[a].pid, fl[a].tid, fl[a].ts, a) < std::tie(fl[b].pid, fl[b].tid, fl[b].ts, b);
  });
  std::sort(fwdbwd_by_id.begin(), fwdbwd_by_id.end(), [&](std::uint32_t a, std::uint32_t b) {
    return std::tie(fl[a].id, a) < std::tie(fl[b].id, b);
  });
}

/// The slice a fwdbwd flow end binds to: the longest host op starting exactly at its ts on its
/// thread (no_index when none).
std::uint32_t timeline::impl::bound_event(const analysis::flow_event& f) const {
  const auto& evs = model.events;
  auto lo = std::lower_bound(evs.begin(), evs.end(), f.ts, [](const event& e, double ts) { return e.ts < ts; });
  std::uint32_t best = no_index;
  for (; lo != evs.end() && lo->ts == f.ts; ++lo) {
    if (lo->pid != f.pid || lo->tid != f.tid) continue;
    if (lo->type != event_type::op && lo->type != event_type::user_annotation && lo->type != event_type::python_function &&
        lo->type != event_type::module)
      continue;
    const auto i = static_cast<std::uint32_t>(lo - evs.begin());
    if (best == no_index || end_of(*lo) - lo->ts > end_of(evs[best]) - evs[best].ts) best = i;
  }
  return best;
}

void timeline::impl::write_slice_ref(json_writer& w, std::uint32_t id) const {
  const event& e = model.events[id];
  w.raw("\"id\":");
  w.integer(id);
  w.raw(",\"name\":");
  w.str(model.str(e.name));
  w.raw(",\"track\":");
  w.integer(ev_track[id] == no_index ? -1 : static_cast<std::int64_t>(ev_track[id]));
  w.raw(",\"row\":");
  w.integer(ev_row[id] == no_index ? -1 : static_cast<std::int64_t>(ev_row[id]));
  w.raw(",\"ts\":");
  w.num(e.ts - t0);
  w.raw(",\"dur\":");
  w.num(end_of(e) - e.ts);
}

}  // namespace kinetoscope::server

// -----------------------------------------------------------------------------------------------

namespace kinetoscope::server {

timeline::timeline(const analysis::trace_model& model, use u) : impl_(std::make_unique<impl>(model, u)) {}
timeline::timeline(const analysis::trace_model& model, timeline_columns columns)
    : impl_(std::make_unique<impl>(model, std::move(columns))) {}
timeline::~timeline() = default;

std::string timeline::tracks_json() const { return impl_->tracks_cache; }

std::string timeline::window_json(double start_us, double end_us, int px, const std::vector<int>& tracks,
                                  std::size_t max_slices) const {
  return impl_->window(start_us, end_us, px, tracks, max_slices, true);
}

std::string timeline::window_json(double start_us, double end_us, int px, const std::vector<int>& tracks,
                                  std::size_t max_slices, bool use_levels) const {
  return impl_->window(start_us, end_us, px, tracks, max_slices, use_levels);
}

std::string timeline::counters_json(double start_us, double end_us, int px) const {
  const impl& d = *impl_;
  start_us = clamp_time(start_us, 0);
  end_us = clamp_time(end_us, d.duration);
  px = std::clamp(px, 1, 10000);
  json_writer w;
  w.raw("{\"start\":");
  w.num(start_us);
  w.raw(",\"end\":");
  w.num(end_us);
  w.raw(",\"counters\":[");
  for (std::size_t k = 0; k < d.windowed.size(); ++k) {
    const auto& s = d.windowed[k];
    const std::span<const double> ts(d.cols.counter_ts.data() + s.begin, static_cast<std::size_t>(s.count));
    const std::span<const double> value(d.cols.counter_values.data() + s.begin, static_cast<std::size_t>(s.count));
    if (k != 0) w.ch(',');
    w.raw("{\"name\":");
    w.str(s.name);
    w.raw(",\"points\":[");
    bool first = true;
    const auto point = [&](std::size_t i) {
      if (!first) w.ch(',');
      first = false;
      w.ch('[');
      w.num(ts[i]);
      w.ch(',');
      w.num(value[i]);
      w.ch(']');
    };
    if (start_us <= end_us && !ts.empty()) {
      // The value in force at `start` (the last point before it), then per pixel column the
      // first, lowest, highest and last point, in time order.
      std::size_t i = static_cast<std::size_t>(std::lower_bound(ts.begin(), ts.end(), start_us) - ts.begin());
      if (i > 0) point(i - 1);
      const double width = std::max(end_us - start_us, 1e-9) / px;
      while (i < ts.size() && ts[i] <= end_us) {
        const double col_end = start_us + (std::floor((ts[i] - start_us) / width) + 1) * width;
        std::size_t j = i + 1, lo = i, hi = i;  // at least one point a column (rounding)
        while (j < ts.size() && ts[j] < col_end && ts[j] <= end_us) {
          if (value[j] < value[lo]) lo = j;
          if (value[j] > value[hi]) hi = j;
          ++j;
        }
        std::size_t picks[4] = {i, std::min(lo, hi), std::max(lo, hi), j - 1};
        std::size_t last = ts.size();
        for (const std::size_t p : picks) {
          if (p != last) point(p);
          last = p;
        }
        i = j;
      }
      if (i < ts.size()) point(i);  // the next change after the window: the line runs to it
    }
    w.raw("]}");
  }
  w.raw("]}");
  return std::move(w.out);
}

std::string timeline::summary_json(double start_us, double end_us, const std::vector<int>& tracks) const {
  return impl_->summary(start_us, end_us, tracks);
}

double timeline::t0() const noexcept { return impl_->t0; }

int timeline::track_of(std::uint32_t id) const {
  const impl& d = impl_->events_indexed();
  if (id >= d.ev_track.size() || d.ev_track[id] == no_index) return -1;
  return static_cast<int>(d.ev_track[id]);
}

int timeline::row_of(std::uint32_t id) const {
  const impl& d = impl_->events_indexed();
  if (id >= d.ev_row.size() || d.ev_row[id] == no_index) return -1;
  return static_cast<int>(d.ev_row[id]);
}

timeline_stats timeline::stats() const noexcept {
  timeline_stats s;
  s.tracks = impl_->tracks.size();
  const timeline_columns& c = impl_->cols;
  s.lanes = c.lanes.size();
  s.slices = c.lane_events.size();
  s.level_items = c.items.size();
  const auto held = [](const auto& v) {  // (the untouched spare of a big table: see build())
    const std::size_t bytes = v.capacity() * sizeof(v[0]);
    return bytes < analysis::trace_model::spare_kept_bytes ? bytes : v.size() * sizeof(v[0]);
  };
  s.memory_bytes = held(impl_->ev_track) + held(impl_->ev_row) + held(impl_->name_count) + held(c.lanes) +
                   held(c.lane_events) + held(c.levels) + held(c.items) + held(c.counter_ts) + held(c.counter_values) +
                   impl_->tracks_cache.capacity() + c.meta.capacity();
  return s;
}

const timeline_columns& timeline::columns() const noexcept { return impl_->cols; }

void timeline::prepare_flows() const {
  const impl& d = *impl_;
  std::call_once(d.flows_once, [&] { d.build_flow_indexes(); });
}

std::optional<std::string> timeline::event_json(std::uint32_t id, bool subtree) const {
  const impl& d = impl_->events_indexed();
  const auto& model = d.model;
  if (id >= model.events.size()) return std::nullopt;
  std::call_once(d.flows_once, [&] { d.build_flow_indexes(); });
  const event& e = model.events[id];
  json_writer w;
  w.ch('{');
  d.write_slice_ref(w, id);
  w.raw(",\"category\":");
  w.str(category_name(e));
  w.raw(",\"pid\":");
  if (e.pid_is_string) w.str(model.id_text(e.pid, true)); else w.integer(e.pid);
  w.raw(",\"tid\":");
  if (e.tid_is_string) w.str(model.id_text(e.tid, true)); else w.integer(e.tid);

  // args
  w.raw(",\"args\":{");
  bool first = true;
  const auto key = [&](std::string_view k) {
    if (!first) w.ch(',');
    first = false;
    w.key(k);
  };
  const auto json_text = [&](std::string_view k, std::uint32_t sid) {
    if (sid == 0 || sid >= model.strings.size()) return;
    key(k);
    const std::string_view text = model.str(sid);
    // The loader keeps these as minified JSON; embed them as values when they parse.
    if (formats::is_valid_json(text)) w.raw(text); else w.str(text);
  };
  if (e.external_id != 0) {
    key("External id");
    w.integer(e.external_id);
  }
  if (e.correlation != 0) {
    key("correlation");
    w.integer(e.correlation);
  }
  const bool host_args = e.type == event_type::op || e.type == event_type::user_annotation || e.type == event_type::python;
  if (host_args && e.extra < model.ops.size()) {
    const auto& a = model.ops[e.extra];
    json_text("Input Dims", a.input_dims);
    json_text("Input type", a.input_types);
    if (a.call_stack != 0 && a.call_stack < model.strings.size()) {
      key("Call stack");
      w.str(model.str(a.call_stack));
    }
    if (a.sequence_nr >= 0) {
      key("Sequence number");
      w.integer(a.sequence_nr);
    }
    if (a.fwd_thread_id >= 0) {
      key("Fwd thread id");
      w.integer(a.fwd_thread_id);
    }
  } else if (e.type == event_type::kernel && e.extra < model.kernels.size()) {
    const auto& k = model.kernels[e.extra];
    if (k.device >= 0) {
      key("device");
      w.integer(k.device);
    }
    if (k.stream >= 0) {
      key("stream");
      w.integer(k.stream);
    }
    const auto triple = [&](std::string_view name, const std::int64_t (&v)[3]) {
      key(name);
      w.ch('[');
      for (int i = 0; i < 3; ++i) {
        if (i != 0) w.ch(',');
        w.integer(v[i]);
      }
      w.ch(']');
    };
    if (k.has_grid) triple("grid", k.grid);
    if (k.has_block) triple("block", k.block);
    if (k.has_registers) {
      key("registers per thread");
      w.integer(k.registers_per_thread);
    }
    if (k.has_shared_memory) {
      key("shared memory");
      w.integer(k.shared_memory);
    }
    if (k.has_blocks_per_sm) {
      key("blocks per SM");
      w.num(k.blocks_per_sm);
    }
    if (k.has_occupancy) {
      key("est. achieved occupancy %");
      w.num(k.occupancy);
    }
  } else if ((e.type == event_type::python_function || e.type == event_type::module) && e.extra < model.python.size()) {
    const auto& p = model.python[e.extra];
    if (p.python_id >= 0) {
      key("Python id");
      w.integer(p.python_id);
    }
    if (p.parent_id >= 0) {
      key("Python parent id");
      w.integer(p.parent_id);
    }
    if (p.module_id >= 0) {
      key("Python module id");
      w.integer(p.module_id);
    }
  } else if (e.type == event_type::memory && e.extra < model.memory.size()) {
    const auto& mem = model.memory[e.extra];
    key("Device Type");
    w.integer(mem.device_type);
    key("Device Id");
    w.integer(mem.device_id);
    key("Bytes");
    w.integer(mem.bytes);
    key("Total Allocated");
    w.num(mem.total_allocated);
    key("Total Reserved");
    w.num(mem.total_reserved);
  }
  w.ch('}');

  // flows
  w.raw(",\"flows\":[");
  bool first_flow = true;
  std::size_t flows = 0;
  constexpr std::size_t max_flows = 1000;
  std::uint32_t from = id;  // the slice whose flows are being written (subtree: a descendant)
  const auto flow = [&](std::uint32_t other, std::string_view relation) {
    if (flows >= max_flows) return;
    ++flows;
    if (!first_flow) w.ch(',');
    first_flow = false;
    w.ch('{');
    d.write_slice_ref(w, other);
    w.raw(",\"relation\":");
    w.str(relation);
    if (subtree) {
      w.raw(",\"from\":{");
      d.write_slice_ref(w, from);
      w.ch('}');
    }
    w.ch('}');
  };
  const auto each = [](const std::vector<std::pair<std::int64_t, std::uint32_t>>& v, std::int64_t k, auto&& fn) {
    auto it = std::lower_bound(v.begin(), v.end(), std::make_pair(k, std::uint32_t{0}));
    for (; it != v.end() && it->first == k; ++it) fn(it->second);
  };
  const auto flows_of = [&](std::uint32_t src) {
    const event& e = model.events[src];
    from = src;
    if (is_gpu_work(e.type) && e.correlation != 0) {
      each(d.corr_runtime, e.correlation, [&](std::uint32_t r) { flow(r, "launched by"); });
    } else if ((e.type == event_type::runtime || e.type == event_type::driver) && e.correlation != 0) {
      each(d.corr_gpu, e.correlation, [&](std::uint32_t g) { flow(g, "launches"); });
    } else if (!subtree && (e.type == event_type::op || (e.type == event_type::user_annotation && !e.gpu_annotation)) &&
               e.external_id != 0) {
      // Kernels launched by the runtimes inside this op (same thread, same external id). In a
      // subtree the runtimes' own flows say the same.
      std::vector<std::uint32_t> gpu;
      each(d.ext_runtime, e.external_id, [&](std::uint32_t r) {
        const event& rt = model.events[r];
        if (rt.pid != e.pid || rt.tid != e.tid || rt.ts < e.ts || end_of(rt) > end_of(e) || rt.correlation == 0) return;
        each(d.corr_gpu, rt.correlation, [&](std::uint32_t g) { gpu.push_back(g); });
      });
      std::sort(gpu.begin(), gpu.end());
      for (const std::uint32_t g : gpu) flow(g, "launches");
    }
    // fwdbwd: flow ends at this slice's start on its thread that bind to it.
    if (!model.fwdbwd.empty()) {
      const auto& fl = model.fwdbwd;
      auto it = std::lower_bound(d.fwdbwd_by_place.begin(), d.fwdbwd_by_place.end(), 0u, [&](std::uint32_t a, unsigned) {
        return std::tie(fl[a].pid, fl[a].tid, fl[a].ts) < std::tie(e.pid, e.tid, e.ts);
      });
      for (; it != d.fwdbwd_by_place.end() && fl[*it].pid == e.pid && fl[*it].tid == e.tid && fl[*it].ts == e.ts; ++it) {
        const auto& mine = fl[*it];
        if (d.bound_event(mine) != src) continue;
        auto jt = std::lower_bound(d.fwdbwd_by_id.begin(), d.fwdbwd_by_id.end(), 0u,
                                   [&](std::uint32_t a, unsigned) { return fl[a].id < mine.id; });
        for (; jt != d.fwdbwd_by_id.end() && fl[*jt].id == mine.id; ++jt) {
          if (fl[*jt].is_start == mine.is_start) continue;
          const std::uint32_t other = d.bound_event(fl[*jt]);
          if (other != no_index && other != src) flow(other, mine.is_start ? "backward" : "forward");
        }
      }
    }
  };
  flows_of(id);
  if (subtree && d.ev_track[id] != no_index) {
    // Every slice of the same track inside this one, in ts order.
    const auto& info = d.tracks[d.ev_track[id]];
    const double a = e.ts, b = end_of(e);
    std::vector<std::uint32_t> inside;
    for (std::uint32_t r = 0; r < info.rows; ++r) {
      const raw_view v = d.lane_slices(d.cols.lanes[info.first_lane + r]);
      for (std::size_t i = first_ending_at_or_after(v, a); i < v.size() && v.ts(i) <= b; ++i)
        if (v.ev[i] != id && v.ts(i) >= a && v.end(i) <= b) inside.push_back(v.ev[i]);
    }
    std::sort(inside.begin(), inside.end());  // event order is ts order
    for (const std::uint32_t k : inside) {
      if (flows >= max_flows) break;
      flows_of(k);
    }
  }
  w.raw("],\"flows_truncated\":");
  w.raw(flows >= max_flows ? "true" : "false");
  w.raw("}");
  return std::move(w.out);
}

std::string timeline::search_json(std::string_view query, std::size_t limit) const {
  const impl& d = impl_->events_indexed();
  const auto& model = d.model;
  limit = std::min<std::size_t>(limit, 1000);
  std::vector<char> match;
  std::uint64_t total = 0;
  if (!query.empty()) {
    const std::string needle = lower_ascii(query);
    match.assign(d.name_count.size(), 0);
    for (std::size_t s = 0; s < d.name_count.size(); ++s) {
      if (d.name_count[s] != 0 && contains_ci(model.strings[s], needle)) {
        match[s] = 1;
        total += d.name_count[s];
      }
    }
  }
  json_writer w;
  w.raw("{\"total\":");
  w.integer(static_cast<std::int64_t>(total));
  w.raw(",\"results\":[");
  std::size_t n = 0;
  if (total != 0) {
    const auto& evs = model.events;
    for (std::uint32_t i = 0; i < evs.size() && n < limit; ++i) {
      if (d.ev_track[i] == no_index || evs[i].name >= match.size() || !match[evs[i].name]) continue;
      if (n != 0) w.ch(',');
      w.ch('{');
      d.write_slice_ref(w, i);
      w.ch('}');
      ++n;
    }
  }
  w.raw("]}");
  return std::move(w.out);
}

}  // namespace kinetoscope::server
