// SPDX-License-Identifier: BSD-3-Clause
// The windowed trace timeline (viewer/server/timeline.hpp) on the real traces of
// $KINETOSCOPE_REAL_TRACES/traces and on hand-built models: layout invariants, window merging,
// flows, search, JSON shapes and hostile inputs.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/loader.hpp"
#include "analysis/model.hpp"
#include "analysis/overview.hpp"
#include "server/timeline.hpp"
#include "../real_traces.hpp"

namespace {

namespace fs = std::filesystem;
namespace an = kinetoscope::analysis;
using kinetoscope::server::timeline;
using kinetoscope::server::timeline_stats;
namespace ks = kinetoscope::server;
using nlohmann::json;

std::string traces_dir() {
  const char* real = kinetoscope::test::real_traces();
  REQUIRE_MESSAGE(real != nullptr, "KINETOSCOPE_REAL_TRACES not set (meson test sets it)");
  return std::string(real) + "/traces";
}

/// Every trace file of tests/data/real/traces (relative paths, sorted).
std::vector<std::string> all_trace_files() {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(traces_dir())) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.find(".pt.trace.json") != std::string::npos) {
      files.push_back(fs::relative(entry.path(), traces_dir()).string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

const an::trace_model& load(const std::string& rel) {
  static std::map<std::string, std::unique_ptr<an::trace_model>> cache;
  auto& slot = cache[rel];
  if (!slot) {
    auto r = an::load_trace(traces_dir() + "/" + rel);
    REQUIRE_MESSAGE(r.ok(), rel);
    slot = std::make_unique<an::trace_model>(std::move(*r.model));
  }
  return *slot;
}

const std::string resnet = "resnet50_v100/worker0.1623143089861.pt.trace.json.gz";
const std::string nccl = "nccl_ddp/nccl_data.pt.trace.json.gz";

double end_of(const an::event& e) { return e.dur > 0 ? e.ts + e.dur : e.ts; }

std::size_t timeline_events(const an::trace_model& m) {
  return static_cast<std::size_t>(std::count_if(m.events.begin(), m.events.end(),
                                                [](const an::event& e) { return e.type != an::event_type::memory; }));
}

/// Timeline events intersecting [start, end] (relative to t0), as the window defines it.
std::size_t events_in(const an::trace_model& m, double t0, double start, double end) {
  std::size_t n = 0;
  for (const auto& e : m.events) {
    if (e.type != an::event_type::memory && end_of(e) - t0 >= start && e.ts - t0 <= end) ++n;
  }
  return n;
}

std::uint64_t sum_counts(const json& w) {
  std::uint64_t n = 0;
  for (const auto& c : w["slices"]["count"]) n += c.get<std::uint64_t>();
  return n;
}

an::event make_event(an::trace_model& m, const char* name, an::event_type type, double ts, double dur,
                     std::int64_t pid, std::int64_t tid) {
  an::event e;
  e.name = m.intern(name);
  e.type = type;
  e.ts = ts;
  e.dur = dur;
  e.pid = pid;
  e.tid = tid;
  return e;
}

void sort_events(an::trace_model& m) {
  std::stable_sort(m.events.begin(), m.events.end(), [](const an::event& a, const an::event& b) { return a.ts < b.ts; });
}

}  // namespace

TEST_CASE("every event of every real trace is in exactly one lane, lanes never overlap") {
  const auto files = all_trace_files();
  REQUIRE(files.size() >= 12);
  for (const auto& rel : files) {
    CAPTURE(rel);
    const an::trace_model& m = load(rel);
    const timeline tl(m);
    const json tracks = json::parse(tl.tracks_json());
    REQUIRE(tracks.contains("t0"));
    REQUIRE(tracks.contains("duration"));
    REQUIRE(tracks.contains("counters"));
    CHECK(tracks["t0"].get<double>() == m.events.front().ts);
    std::uint64_t sum = 0;
    int last_kind = 0;
    const std::map<std::string, int> kind_rank = {{"cpu", 0}, {"gpu", 1}, {"other", 2}};
    for (std::size_t t = 0; t < tracks["tracks"].size(); ++t) {
      const auto& tr = tracks["tracks"][t];
      CHECK(tr["id"].get<std::size_t>() == t);
      for (const char* k : {"name", "kind", "pid", "tid", "rows", "events"}) CHECK(tr.contains(k));
      const int rank = kind_rank.at(tr["kind"].get<std::string>());
      CHECK(rank >= last_kind);  // cpu, then gpu, then other
      last_kind = rank;
      sum += tr["events"].get<std::uint64_t>();
      CHECK(tr["rows"].get<int>() >= 1);
    }
    CHECK(sum == timeline_events(m));
    CHECK(tl.stats().slices == timeline_events(m));

    // Per (track, row): events sorted by ts never overlap; every row is within the track's rows.
    std::map<std::pair<int, int>, std::vector<std::uint32_t>> lanes;
    std::vector<std::uint64_t> per_track(tracks["tracks"].size(), 0);
    for (std::uint32_t i = 0; i < m.events.size(); ++i) {
      const int t = tl.track_of(i);
      if (m.events[i].type == an::event_type::memory) {
        CHECK(t == -1);
        continue;
      }
      REQUIRE(t >= 0);
      REQUIRE(static_cast<std::size_t>(t) < per_track.size());
      const int row = tl.row_of(i);
      CHECK(row >= 0);
      CHECK(row < tracks["tracks"][static_cast<std::size_t>(t)]["rows"].get<int>());
      ++per_track[static_cast<std::size_t>(t)];
      lanes[{t, row}].push_back(i);
    }
    for (std::size_t t = 0; t < per_track.size(); ++t) CHECK(per_track[t] == tracks["tracks"][t]["events"].get<std::uint64_t>());
    std::size_t overlaps = 0;
    for (auto& [key, ids] : lanes) {
      std::sort(ids.begin(), ids.end(), [&](std::uint32_t a, std::uint32_t b) { return m.events[a].ts < m.events[b].ts; });
      for (std::size_t k = 1; k < ids.size(); ++k) {
        if (end_of(m.events[ids[k - 1]]) > m.events[ids[k]].ts) ++overlaps;
      }
    }
    CHECK(overlaps == 0);
  }
}

TEST_CASE("resnet50_v100: track order, main thread first, GPU tracks and counters") {
  const an::trace_model& m = load(resnet);
  const timeline tl(m);
  const json tracks = json::parse(tl.tracks_json());
  const auto& list = tracks["tracks"];
  REQUIRE(list.size() >= 3);
  // The first track holds the ProfilerStep# events.
  std::uint32_t step = an::no_index;
  for (std::uint32_t i = 0; i < m.events.size() && step == an::no_index; ++i) {
    if (m.str(m.events[i].name).starts_with("ProfilerStep#")) step = i;
  }
  REQUIRE(step != an::no_index);
  CHECK(tl.track_of(step) == 0);
  CHECK(list[0]["kind"] == "cpu");
  // Names from the trace's metadata events (thread_name "thread 25738 (python)", process_name).
  CHECK(list[0]["name"] == "thread " + std::to_string(m.events[step].tid) + " (python)");
  CHECK(list[0]["group"] == "python (pid 25738)");
  // The GPU track of the kernels: device 0, stream 7.
  bool found = false;
  for (const auto& tr : list) {
    if (tr["name"] == "GPU 0 stream 7") {
      found = true;
      CHECK(tr["kind"] == "gpu");
      CHECK(tr["group"] == "GPU 0 · Tesla V100-DGXS-32GB");
      CHECK(tr["pid"] == 0);
      CHECK(tr["tid"] == 7);
    }
  }
  CHECK(found);
  // The Trace span goes to an "other" track at the end.
  CHECK(list.back()["kind"] == "other");
  // Counters: the utilization series of GPU 0, relative times within the trace.
  REQUIRE(!tracks["counters"].empty());
  CHECK(tracks["counters"][0]["name"] == "GPU 0 Utilization");
  for (const auto& p : tracks["counters"][0]["points"]) {
    CHECK(p[1].get<double>() >= 0);
    CHECK(p[1].get<double>() <= 1);
  }
}

TEST_CASE("full-range windows: nothing at or above one pixel is merged, counts add up, levels = raw") {
  for (const auto& rel : all_trace_files()) {
    CAPTURE(rel);
    const an::trace_model& m = load(rel);
    const timeline tl(m);
    const double dur = json::parse(tl.tracks_json())["duration"].get<double>();
    const std::size_t total = timeline_events(m);
    // px 100000 is clamped to 10000 columns; no slice limit.
    const json w = json::parse(tl.window_json(0, dur, 100000, {}, 100000000));
    CHECK(w["px"] == 10000);
    CHECK(w["truncated"] == false);
    const double merge_us = w["merge_us"].get<double>();
    CHECK(merge_us == doctest::Approx(dur / 10000).epsilon(1e-12));
    CHECK(sum_counts(w) == total);
    // Every event at least merge_us long is sent unmerged, with its real ts/dur.
    std::set<std::int64_t> sent;
    const auto& s = w["slices"];
    for (std::size_t i = 0; i < s["id"].size(); ++i) {
      const std::int64_t id = s["id"][i].get<std::int64_t>();
      if (id < 0) {
        CHECK(s["count"][i].get<int>() > 1);
        continue;
      }
      CHECK(s["count"][i] == 1);
      const auto& e = m.events[static_cast<std::size_t>(id)];
      CHECK(s["ts"][i].get<double>() == e.ts - m.events.front().ts);
      CHECK(s["track"][i].get<int>() == tl.track_of(static_cast<std::uint32_t>(id)));
      CHECK(s["row"][i].get<int>() == tl.row_of(static_cast<std::uint32_t>(id)));
      CHECK(w["names"][s["name"][i].get<std::size_t>()] == std::string(m.str(e.name)));
      sent.insert(id);
    }
    std::size_t long_events = 0, long_missing = 0;
    for (std::uint32_t i = 0; i < m.events.size(); ++i) {
      const auto& e = m.events[i];
      if (e.type == an::event_type::memory || end_of(e) - e.ts < merge_us) continue;
      ++long_events;
      if (sent.count(i) == 0) ++long_missing;
    }
    CHECK(long_events > 0);
    CHECK(long_missing == 0);
    // The levels of detail give exactly the raw merge on full-range windows.
    for (const int px : {100, 1920, 10000}) {
      CAPTURE(px);
      CHECK(tl.window_json(0, dur, px, {}, 100000000, true) == tl.window_json(0, dur, px, {}, 100000000, false));
    }
  }
}

TEST_CASE("resnet50_v100: 100 px merges, stays under max_slices, and partial windows count exactly") {
  const an::trace_model& m = load(resnet);
  const timeline tl(m);
  const double t0 = m.events.front().ts;
  const double dur = json::parse(tl.tracks_json())["duration"].get<double>();
  const json w = json::parse(tl.window_json(0, dur, 100));
  for (const char* k : {"start", "end", "px", "merge_us", "truncated", "names", "slices"}) CHECK(w.contains(k));
  CHECK(w["merge_us"].get<double>() == dur / 100);
  CHECK(w["truncated"] == false);
  CHECK(w["slices"]["ts"].size() <= 20000);
  CHECK(sum_counts(w) == timeline_events(m));
  std::size_t merged = 0;
  for (const auto& c : w["slices"]["count"]) merged += c.get<int>() > 1 ? 1 : 0;
  CHECK(merged > 0);
  CHECK(w["slices"]["ts"].size() < timeline_events(m) / 10);
  for (const char* k : {"track", "row", "ts", "dur", "name", "id", "count"}) CHECK(w["slices"][k].size() == w["slices"]["ts"].size());

  // A small max_slices forces coarser merging (merge_us doubles) but no truncation.
  const std::size_t half = w["slices"]["ts"].size() / 2;
  REQUIRE(half > 10);
  const json small = json::parse(tl.window_json(0, dur, 100, {}, half));
  CHECK(small["slices"]["ts"].size() <= half);
  CHECK(small["truncated"] == false);
  CHECK(small["merge_us"].get<double>() > w["merge_us"].get<double>());
  CHECK(sum_counts(small) == timeline_events(m));

  // Partial windows (raw merging): counts are exactly the events intersecting the window.
  for (const double frac : {0.5, 0.1, 0.01, 0.0001}) {
    CAPTURE(frac);
    const double a = dur * 0.4, b = a + dur * frac;
    const json pw = json::parse(tl.window_json(a, b, 1920, {}, 100000000, false));
    CHECK(sum_counts(pw) == events_in(m, t0, a, b));
    CHECK(pw["start"].get<double>() == a);
    CHECK(pw["end"].get<double>() == b);
    // With levels a block may cross the window edge, never less than the raw answer.
    const json lw = json::parse(tl.window_json(a, b, 1920, {}, 100000000, true));
    CHECK(sum_counts(lw) >= sum_counts(pw));
  }

  // Track subsets: only the asked tracks, unknown ids ignored, duplicates once.
  const json only = json::parse(tl.window_json(0, dur, 1920, {1, 1, 9999, -4}));
  std::set<int> seen;
  for (const auto& t : only["slices"]["track"]) seen.insert(t.get<int>());
  CHECK(seen == std::set<int>{1});
  const json tracks = json::parse(tl.tracks_json());
  CHECK(sum_counts(json::parse(tl.window_json(0, dur, 1920, {1}, 100000000))) == tracks["tracks"][1]["events"].get<std::uint64_t>());
}

TEST_CASE("windows outside the trace are empty; hostile window inputs are clamped") {
  const an::trace_model& m = load(resnet);
  const timeline tl(m);
  const double dur = json::parse(tl.tracks_json())["duration"].get<double>();
  CHECK(json::parse(tl.window_json(dur + 10, dur + 1e6, 1000))["slices"]["ts"].empty());
  CHECK(json::parse(tl.window_json(-1e6, -10, 1000))["slices"]["ts"].empty());
  // start > end: empty, echoed.
  const json rev = json::parse(tl.window_json(500, 100, 1000));
  CHECK(rev["slices"]["ts"].empty());
  CHECK(rev["start"] == 500);
  CHECK(rev["end"] == 100);
  // NaN start -> 0, NaN end -> duration: the full trace.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const json n = json::parse(tl.window_json(nan, nan, 1000, {}, 100000000));
  CHECK(n["start"] == 0);
  CHECK(n["end"].get<double>() == dur);
  CHECK(sum_counts(n) == timeline_events(m));
  // ±inf are clamped to ±1e15 µs: the whole trace, merged coarsely, still valid JSON.
  const double inf = std::numeric_limits<double>::infinity();
  const json i = json::parse(tl.window_json(-inf, inf, 1000));
  CHECK(i["start"].get<double>() == -1e15);
  CHECK(i["end"].get<double>() == 1e15);
  CHECK(sum_counts(i) == timeline_events(m));
  // px 0 -> 1, negative -> 1, huge -> 10000.
  CHECK(json::parse(tl.window_json(0, dur, 0))["px"] == 1);
  CHECK(json::parse(tl.window_json(0, dur, -5))["px"] == 1);
  CHECK(json::parse(tl.window_json(0, dur, std::numeric_limits<int>::max()))["px"] == 10000);
  // A zero-width window is the slices under that instant, unmerged.
  const json point = json::parse(tl.window_json(dur / 2, dur / 2, 1000));
  CHECK(point["merge_us"] == 0);
  for (const auto& c : point["slices"]["count"]) CHECK(c == 1);
  // max_slices 0 -> 1.
  CHECK(json::parse(tl.window_json(0, dur, 1000, {}, 0))["slices"]["ts"].size() <= 1);
}

TEST_CASE("resnet50_v100: the first kernel is launched by its cudaLaunchKernel") {
  const an::trace_model& m = load(resnet);
  const timeline tl(m);
  const double t0 = m.events.front().ts;
  CHECK(t0 == 1623142623460016.0);
  // cask_cudnn::computeOffsetsKernel at ts 1623142623531625 (correlation 34441) was launched by
  // cudaLaunchKernel at 1623142623531598 (26 µs) on thread 25738.
  std::uint32_t kernel = an::no_index;
  for (std::uint32_t i = 0; i < m.events.size(); ++i) {
    if (m.events[i].type == an::event_type::kernel && m.events[i].ts == 1623142623531625.0 &&
        m.str(m.events[i].name) == "cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)") {
      kernel = i;
    }
  }
  REQUIRE(kernel != an::no_index);
  const json k = json::parse(*tl.event_json(kernel));
  for (const char* key : {"id", "name", "category", "track", "row", "ts", "dur", "args", "flows"}) CHECK(k.contains(key));
  CHECK(k["id"] == kernel);
  CHECK(k["category"] == "kernel");
  CHECK(k["ts"].get<double>() == 1623142623531625.0 - t0);
  CHECK(k["dur"] == 2);
  CHECK(k["args"]["correlation"] == 34441);
  CHECK(k["args"]["External id"] == 544);
  CHECK(k["args"]["grid"] == json::array({50, 1, 1}));
  CHECK(k["args"]["block"] == json::array({256, 1, 1}));
  CHECK(k["args"]["registers per thread"] == 38);
  CHECK(k["args"]["shared memory"] == 0);
  CHECK(k["args"]["blocks per SM"] == 0.625);
  CHECK(k["args"]["est. achieved occupancy %"] == 8);
  CHECK(k["args"]["stream"] == 7);
  CHECK(k["args"]["device"] == 0);
  CHECK(k["track"] == tl.track_of(kernel));
  REQUIRE(k["flows"].size() == 1);
  const auto& f = k["flows"][0];
  CHECK(f["relation"] == "launched by");
  CHECK(f["name"] == "cudaLaunchKernel");
  CHECK(f["ts"].get<double>() == 1623142623531598.0 - t0);
  CHECK(f["dur"] == 26);
  const auto rt = f["id"].get<std::uint32_t>();
  CHECK(m.events[rt].correlation == 34441);
  CHECK(f["track"] == tl.track_of(rt));
  CHECK(f["row"] == tl.row_of(rt));
  // And back: the runtime launches exactly this kernel.
  const json r = json::parse(*tl.event_json(rt));
  REQUIRE(r["flows"].size() == 1);
  CHECK(r["flows"][0]["id"] == kernel);
  CHECK(r["flows"][0]["relation"] == "launches");

  // An operator launches the kernels of the runtimes inside it with its external id.
  std::uint32_t op = an::no_index;
  for (std::uint32_t i = 0; i < m.events.size(); ++i) {
    const auto& e = m.events[i];
    if (e.type == an::event_type::op && e.external_id == m.events[rt].external_id && e.tid == m.events[rt].tid &&
        e.ts <= m.events[rt].ts && end_of(e) >= end_of(m.events[rt])) {
      op = i;
    }
  }
  REQUIRE(op != an::no_index);
  const json o = json::parse(*tl.event_json(op));
  bool launches_kernel = false;
  for (const auto& fl : o["flows"]) launches_kernel = launches_kernel || (fl["id"] == kernel && fl["relation"] == "launches");
  CHECK(launches_kernel);
  CHECK(o["category"] == "cpu_op");
  CHECK(o["args"].contains("Input Dims"));
  // Its subtree's flows: the same kernel, now from the runtime call inside it; every "from" lies
  // inside the operator on its track.
  const json sub = json::parse(*tl.event_json(op, true));
  CHECK(sub["flows_truncated"] == false);
  bool via_runtime = false;
  for (const auto& fl : sub["flows"]) {
    REQUIRE(fl.contains("from"));
    const auto src = fl["from"]["id"].get<std::uint32_t>();
    CHECK(tl.track_of(src) == tl.track_of(op));
    CHECK(m.events[src].ts >= m.events[op].ts);
    CHECK(end_of(m.events[src]) <= end_of(m.events[op]));
    via_runtime = via_runtime || (fl["id"] == kernel && src == rt && fl["relation"] == "launches");
  }
  CHECK(via_runtime);
  for (const auto& fl : o["flows"]) CHECK(!fl.contains("from"));

  // Unknown ids.
  CHECK(!tl.event_json(static_cast<std::uint32_t>(m.events.size())).has_value());
  CHECK(!tl.event_json(0xffffffffu).has_value());
}

TEST_CASE("nccl_ddp: fwdbwd flows link forward and backward ops") {
  const an::trace_model& m = load(nccl);
  const timeline tl(m);
  REQUIRE(!m.fwdbwd.empty());
  // Independently: the first "s" end, its partner "f", and the longest op at each end's ts.
  const auto bound = [&](const an::flow_event& f) {
    std::uint32_t best = an::no_index;
    for (std::uint32_t i = 0; i < m.events.size(); ++i) {
      const auto& e = m.events[i];
      if (e.ts == f.ts && e.pid == f.pid && e.tid == f.tid && e.type == an::event_type::op &&
          (best == an::no_index || e.dur > m.events[best].dur)) {
        best = i;
      }
    }
    return best;
  };
  const an::flow_event* s = nullptr;
  const an::flow_event* f = nullptr;
  for (const auto& fl : m.fwdbwd) {
    if (fl.is_start && s == nullptr) s = &fl;
  }
  REQUIRE(s != nullptr);
  for (const auto& fl : m.fwdbwd) {
    if (!fl.is_start && fl.id == s->id) f = &fl;
  }
  REQUIRE(f != nullptr);
  const std::uint32_t fwd = bound(*s), bwd = bound(*f);
  REQUIRE(fwd != an::no_index);
  REQUIRE(bwd != an::no_index);
  const json a = json::parse(*tl.event_json(fwd));
  bool to_bwd = false;
  for (const auto& fl : a["flows"]) to_bwd = to_bwd || (fl["id"] == bwd && fl["relation"] == "backward");
  CHECK(to_bwd);
  const json b = json::parse(*tl.event_json(bwd));
  bool to_fwd = false;
  for (const auto& fl : b["flows"]) to_fwd = to_fwd || (fl["id"] == fwd && fl["relation"] == "forward");
  CHECK(to_fwd);
  CHECK(b["args"].contains("Sequence number"));
}

TEST_CASE("search: case-insensitive substring, exact totals, ts order, limits") {
  const an::trace_model& m = load(resnet);
  const timeline tl(m);
  std::size_t expected = 0;
  for (const auto& e : m.events) {
    if (e.type == an::event_type::memory) continue;
    std::string n(m.str(e.name));
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (n.find("conv") != std::string::npos) ++expected;
  }
  CHECK(expected == 2718);  // python: ph X events of the file whose name contains "conv"
  const json r = json::parse(tl.search_json("conv", 200));
  CHECK(r["total"] == expected);
  REQUIRE(r["results"].size() == 200);
  double last = -1;
  for (const auto& x : r["results"]) {
    for (const char* k : {"id", "name", "track", "row", "ts", "dur"}) CHECK(x.contains(k));
    std::string n = x["name"];
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    CHECK(n.find("conv") != std::string::npos);
    CHECK(x["ts"].get<double>() >= last);
    last = x["ts"].get<double>();
    CHECK(x["track"] == tl.track_of(x["id"].get<std::uint32_t>()));
  }
  CHECK(json::parse(tl.search_json("CoNv", 10))["total"] == expected);
  CHECK(json::parse(tl.search_json("CoNv", 10))["results"].size() == 10);
  CHECK(json::parse(tl.search_json("conv", 100000))["results"].size() == 1000);  // limit max 1000
  CHECK(json::parse(tl.search_json("conv", 0))["results"].empty());
  CHECK(json::parse(tl.search_json("", 10))["total"] == 0);
  CHECK(json::parse(tl.search_json("no such name \"\\\x01", 10))["total"] == 0);
  CHECK(json::parse(tl.search_json("[memory]", 10))["total"] == 0);  // instants are not on the timeline
}

TEST_CASE("hand-built model: overlapping kernels, nesting, partial overlap, GPU annotations, hostile names") {
  an::trace_model m;
  using T = an::event_type;
  // CPU thread 1: step [0,100] > op [10,50] > child [20,30]; a partial overlap [40,70] (starts
  // inside op, ends after it); a second thread 2.
  m.events.push_back(make_event(m, "ProfilerStep#1", T::user_annotation, 0, 100, 7, 1));
  m.events.push_back(make_event(m, "aten::conv2d", T::op, 10, 40, 7, 1));
  m.events.push_back(make_event(m, "aten::convolution", T::op, 20, 10, 7, 1));
  m.events.push_back(make_event(m, "partial", T::op, 40, 30, 7, 1));
  m.events.push_back(make_event(m, "other thread", T::op, 5, 10, 7, 0));
  // GPU 0 stream 7: kernels [10,30] and [20,40] overlap; [40,45] fits after the first; a gpu
  // annotation [0,60] on the same stream.
  m.events.push_back(make_event(m, "k1", T::kernel, 10, 20, 0, 7));
  m.events.push_back(make_event(m, "k2", T::kernel, 20, 20, 0, 7));
  m.events.push_back(make_event(m, "k3", T::kernel, 40, 5, 0, 7));
  an::event ann = make_event(m, "gpu range", T::user_annotation, 0, 60, 0, 7);
  ann.gpu_annotation = true;
  m.events.push_back(ann);
  // A hostile name: quote, backslash, control chars, invalid UTF-8, a valid 3-byte char.
  m.events.push_back(make_event(m, "bad \"\\\x01\x1f\xff\xc3(\xe2\x82\xac", T::other, 50, 1, 9, 9));
  // A [memory] instant: not on the timeline.
  m.events.push_back(make_event(m, "[memory]", T::memory, 1, 0, 7, 1));
  sort_events(m);
  const timeline tl(m);
  const auto id_of = [&](const char* name) {
    for (std::uint32_t i = 0; i < m.events.size(); ++i) {
      if (m.str(m.events[i].name) == name) return i;
    }
    FAIL("no event " << name);
    return an::no_index;
  };
  const json tracks = json::parse(tl.tracks_json());
  REQUIRE(tracks["tracks"].size() == 4);
  CHECK(tracks["t0"] == 0);
  CHECK(tracks["duration"] == 100);
  CHECK(tracks["counters"].empty());  // no kernel has args "device"
  const auto& list = tracks["tracks"];
  CHECK(list[0]["name"] == "thread 1");  // holds ProfilerStep#, first although tid 1 > 0
  CHECK(list[0]["rows"] == 3);
  CHECK(list[1]["name"] == "thread 0");
  CHECK(list[2]["name"] == "GPU 0 stream 7");
  CHECK(list[2]["kind"] == "gpu");
  CHECK(list[2]["rows"] == 3);  // 1 annotation row + 2 kernel rows
  CHECK(list[2]["events"] == 4);
  CHECK(list[3]["kind"] == "other");
  CHECK(list[3]["name"] == "9 9");

  CHECK(tl.row_of(id_of("ProfilerStep#1")) == 0);
  CHECK(tl.row_of(id_of("aten::conv2d")) == 1);
  CHECK(tl.row_of(id_of("aten::convolution")) == 2);
  CHECK(tl.row_of(id_of("partial")) == 2);  // ends after its parent: the next lane free at 40
  CHECK(tl.row_of(id_of("gpu range")) == 0);
  CHECK(tl.row_of(id_of("k1")) == 1);
  CHECK(tl.row_of(id_of("k2")) == 2);  // overlaps k1: a second kernel lane
  CHECK(tl.row_of(id_of("k3")) == 1);
  CHECK(tl.track_of(id_of("[memory]")) == -1);

  // A window at 10 px over [0, 100]: merge_us 10; k3 (5 µs) alone stays a real slice.
  const json w = json::parse(tl.window_json(0, 100, 10));
  CHECK(w["merge_us"] == 10);
  CHECK(sum_counts(w) == 10);
  CHECK(w["names"].size() >= 1);
  // The hostile name survives as valid JSON with U+FFFD for the invalid bytes.
  const json e = json::parse(*tl.event_json(id_of("bad \"\\\x01\x1f\xff\xc3(\xe2\x82\xac")));
  CHECK(e["name"] == "bad \"\\\x01\x1f\xef\xbf\xbd\xef\xbf\xbd(\xe2\x82\xac");
  CHECK(e["category"] == "other");
  CHECK(json::parse(tl.search_json("BAD", 5))["total"] == 1);
  CHECK(json::parse(tl.search_json("conv", 5))["total"] == 2);

  // Kernel lanes merge: two tiny kernels 1 µs apart at a 10 µs pixel become one block.
  an::trace_model g;
  for (int i = 0; i < 5; ++i) g.events.push_back(make_event(g, i == 2 ? "long" : "short", T::kernel, 100 + 3 * i, i == 2 ? 2 : 1, 0, 7));
  g.events.push_back(make_event(g, "big", T::kernel, 200, 50, 0, 7));
  const timeline gt(g);
  const json gw = json::parse(gt.window_json(0, 150, 15));  // merge_us 10
  REQUIRE(gw["slices"]["ts"].size() == 2);
  CHECK(gw["slices"]["count"][0] == 5);
  CHECK(gw["slices"]["id"][0] == -1);
  CHECK(gw["names"][gw["slices"]["name"][0].get<std::size_t>()] == "long");
  CHECK(gw["slices"]["ts"][0] == 0);
  CHECK(gw["slices"]["dur"][0] == 13);
  CHECK(gw["slices"]["count"][1] == 1);
  CHECK(gw["slices"]["id"][1] == 5);
  CHECK(gw["slices"]["dur"][1] == 50);
}

TEST_CASE("truncated only when coarser merging cannot fit the slices") {
  an::trace_model m;
  for (int t = 0; t < 3; ++t) m.events.push_back(make_event(m, "long", an::event_type::op, 0, 1000, 1, t));
  sort_events(m);
  const timeline tl(m);
  const json w = json::parse(tl.window_json(400, 500, 10, {}, 2));
  CHECK(w["truncated"] == true);
  CHECK(w["slices"]["ts"].size() == 2);
  CHECK(w["slices"]["track"] == json::array({0, 1}));
  CHECK(w["slices"]["dur"] == json::array({1000, 1000}));
  CHECK(w["merge_us"].get<double>() > 400);  // doubled past 4x the window width
  const json fits = json::parse(tl.window_json(400, 500, 10, {}, 3));
  CHECK(fits["truncated"] == false);
  CHECK(fits["merge_us"] == 10);
  CHECK(fits["slices"]["ts"].size() == 3);
}

TEST_CASE("empty model") {
  const an::trace_model m;
  const timeline tl(m);
  const json t = json::parse(tl.tracks_json());
  CHECK(t["tracks"].empty());
  CHECK(t["duration"] == 0);
  CHECK(json::parse(tl.window_json(0, 100, 100))["slices"]["ts"].empty());
  CHECK(json::parse(tl.search_json("x", 10))["total"] == 0);
  CHECK(!tl.event_json(0).has_value());
}

namespace {

int track_named(const timeline& tl, const std::string& name) {
  const json list = json::parse(tl.tracks_json())["tracks"];
  for (const auto& t : list)
    if (t["name"] == name) return t["id"].get<int>();
  return -1;
}

const json* summary_row(const json& s, const std::string& name) {
  for (const auto& r : s["rows"])
    if (r["name"] == name) return &r;
  return nullptr;
}

}  // namespace

TEST_CASE("track names and groups from metadata: cpu_only, and a hand-built model") {
  {
    const an::trace_model& m = load("cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz");
    const timeline tl(m);
    const json list = json::parse(tl.tracks_json())["tracks"];
    REQUIRE(!list.empty());
    CHECK(list[0]["name"] == "thread 1074 (pt_main_thread)");
    CHECK(list[0]["group"] == "pyper:trainer:8:2 (pid 1074)");
  }
  an::trace_model m;
  m.events.push_back(make_event(m, "a", an::event_type::op, 0, 10, 100, 5));
  m.events.push_back(make_event(m, "b", an::event_type::op, 0, 10, 100, 6));
  m.events.push_back(make_event(m, "k", an::event_type::kernel, 0, 10, 0, 7));
  m.events.push_back(make_event(m, "k", an::event_type::kernel, 0, 10, 0, 8));
  const auto meta = [&](an::meta_kind kind, std::int64_t pid, std::int64_t tid, const char* text, std::int64_t sort) {
    an::track_meta tm;
    tm.kind = kind;
    tm.pid = pid;
    tm.tid = tid;
    tm.text = text ? m.intern(text) : 0;
    tm.sort_index = sort;
    m.track_metas.push_back(tm);
  };
  meta(an::meta_kind::thread_name, 100, 5, "dataloader", 0);
  meta(an::meta_kind::thread_name, 100, 6, " thread 6 (main) ", 0);
  meta(an::meta_kind::thread_sort_index, 100, 5, nullptr, 9);  // thread 5 after thread 6
  meta(an::meta_kind::process_name, 100, 0, "trainer", 0);
  meta(an::meta_kind::thread_name, 0, 7, "stream 7 ", 0);        // the default name: nothing added
  meta(an::meta_kind::thread_name, 0, 8, "nccl", 0);
  const timeline tl(m);
  const json list = json::parse(tl.tracks_json())["tracks"];
  REQUIRE(list.size() == 4);
  CHECK(list[0]["name"] == "thread 6 (main)");
  CHECK(list[1]["name"] == "thread 5 (dataloader)");
  CHECK(list[1]["group"] == "trainer (pid 100)");
  CHECK(list[2]["name"] == "GPU 0 stream 7");
  CHECK(list[2]["group"] == "GPU 0");
  CHECK(list[3]["name"] == "GPU 0 stream 8 (nccl)");
}

// The expected numbers were computed from the trace file by a separate script (not this code):
// slices of thread 25738's Operator/Runtime events and of GPU 0 stream 7's Kernel/Memset/Memcpy
// events with end >= 450000 and ts <= 451500 µs after the first event, durations clipped to the
// range; a slice's parent is the last earlier slice (ts asc, dur desc) of its track that ends
// after its start and at or after its end; self = clipped duration - union of the children's.
TEST_CASE("resnet50_v100: area selection summary of the main thread and GPU 0 stream 7, 450-451.5 ms") {
  const an::trace_model& m = load(resnet);
  const timeline tl(m);
  const int main_thread = track_named(tl, "thread 25738 (python)");
  const int stream = track_named(tl, "GPU 0 stream 7");
  REQUIRE(main_thread >= 0);
  REQUIRE(stream >= 0);
  const json s = json::parse(tl.summary_json(450000, 451500, {main_thread, stream}));
  CHECK(s["slices"] == 71);
  CHECK(s["names"] == 25);
  REQUIRE(s["rows"].size() == 25);
  CHECK(s["rows"][0]["name"] == "ProfilerStep#7");
  struct expected_row {
    const char* name;
    int count;
    double total, self, min, max;
  };
  const expected_row rows[] = {
      {"ProfilerStep#7", 1, 1500, 235, 1500, 1500},
      {"aten::batch_norm", 2, 533, 47, 264, 269},
      {"aten::cudnn_batch_norm", 2, 446, 127, 221, 225},
      {"aten::conv2d", 3, 429, 45, 59, 207},
      {"aten::cudnn_convolution", 3, 301, 157, 52, 143},
      {"cudaLaunchKernel", 9, 110, 110, 10, 14},
  };
  for (const auto& e : rows) {
    const json* r = summary_row(s, e.name);
    REQUIRE_MESSAGE(r != nullptr, e.name);
    CHECK((*r)["count"] == e.count);
    CHECK((*r)["total"].get<double>() == doctest::Approx(e.total));
    CHECK((*r)["self"].get<double>() == doctest::Approx(e.self));
    CHECK((*r)["min"].get<double>() == doctest::Approx(e.min));
    CHECK((*r)["max"].get<double>() == doctest::Approx(e.max));
    CHECK((*r)["avg"].get<double>() == doctest::Approx(e.total / e.count));
    CHECK((*r)["percent"].get<double>() == doctest::Approx(e.total / 1500 * 100));
  }
  REQUIRE(s["gpus"].size() == 1);
  CHECK(s["gpus"][0]["device"] == 0);
  CHECK(s["gpus"][0]["busy"].get<double>() == doctest::Approx(991));
  CHECK(s["gpus"][0]["idle"].get<double>() == doctest::Approx(509));
  // The flame graph: one root (the step), parents before children, totals add up.
  const json& f = s["flame"];
  CHECK(f["truncated"] == false);
  REQUIRE(!f["parent"].empty());
  double roots = 0;
  for (std::size_t i = 0; i < f["parent"].size(); ++i) {
    const int p = f["parent"][i].get<int>();
    CHECK(p < static_cast<int>(i));
    if (p < 0) roots += f["total"][i].get<double>();
  }
  // Roots: the step on the CPU, the kernels and memsets of the stream (busy 991 µs, no overlap).
  CHECK(roots == doctest::Approx(1500 + 991));
  // Only the main thread: no GPU entry.
  const json cpu = json::parse(tl.summary_json(450000, 451500, {main_thread}));
  CHECK(cpu["gpus"].empty());
  CHECK(summary_row(cpu, "cudaLaunchKernel") != nullptr);
}

TEST_CASE("area selection: clipping, partial overlap, GPU busy as a union, hostile ranges") {
  an::trace_model m;
  m.events.push_back(make_event(m, "parent", an::event_type::op, 1000, 100, 1, 1));
  m.events.push_back(make_event(m, "c1", an::event_type::op, 1010, 20, 1, 1));
  m.events.push_back(make_event(m, "c2", an::event_type::op, 1020, 30, 1, 1));  // ends after c1: parent's child
  m.events.push_back(make_event(m, "k", an::event_type::kernel, 1000, 10, 0, 7));
  m.events.push_back(make_event(m, "k", an::event_type::kernel, 1005, 15, 0, 8));
  sort_events(m);
  const timeline tl(m);
  const json s = json::parse(tl.summary_json(0, 40));
  CHECK(s["slices"] == 5);
  const json* parent = summary_row(s, "parent");
  REQUIRE(parent != nullptr);
  CHECK((*parent)["total"] == 40.0);
  CHECK((*parent)["self"] == 10.0);  // 40 - |[10,30] ∪ [20,40]|
  CHECK((*summary_row(s, "c1"))["self"] == 20.0);
  CHECK((*summary_row(s, "c2"))["total"] == 20.0);
  const json* k = summary_row(s, "k");
  CHECK((*k)["count"] == 2);
  CHECK((*k)["total"] == 25.0);
  REQUIRE(s["gpus"].size() == 1);
  CHECK(s["gpus"][0]["busy"] == 20.0);  // [0,10] ∪ [5,20]
  CHECK(s["gpus"][0]["idle"] == 20.0);
  CHECK(s["gpus"][0]["busy_percent"] == 50.0);
  // Flame: parent -> c1, parent -> c2; k at the root.
  const json& f = s["flame"];
  CHECK(f["parent"].size() == 4);
  // Hostile: reversed and NaN ranges, unknown tracks.
  CHECK(json::parse(tl.summary_json(50, 10))["slices"] == 0);
  CHECK(json::parse(tl.summary_json(std::nan(""), std::nan("")))["slices"] == 5);
  CHECK(json::parse(tl.summary_json(0, 40, {99, -1}))["slices"] == 0);
}

TEST_CASE("windowed counters: SM efficiency of resnet50_v100, memory series downsampled per column") {
  {
    const an::trace_model& m = load(resnet);
    const timeline tl(m);
    const json tracks = json::parse(tl.tracks_json());
    // The SM-efficiency series is listed (not sent whole) with all of its points.
    std::size_t sm_points = 0;
    for (const auto& p : an::gpu_utilization_counters(m))
      if (p.gpu == 0 && p.counter == an::gpu_counter::sm_efficiency) ++sm_points;
    REQUIRE(sm_points > 1000);
    REQUIRE(tracks["windowed_counters"].size() == 1);  // this trace's [memory] events carry no totals
    const json& listed = tracks["windowed_counters"][0];
    CHECK(listed["name"] == "GPU 0 Est. SM Efficiency");
    CHECK(listed["unit"] == "fraction");
    CHECK(listed["points"] == sm_points);
    const double duration = tracks["duration"].get<double>();
    const json w = json::parse(tl.counters_json(0, duration, 100));
    REQUIRE(w["counters"].size() == 1);
    const json& pts = w["counters"][0]["points"];
    CHECK(pts.size() <= 4 * 100 + 2);
    CHECK(pts.size() > 100);
    double max = 0, prev = -1e300;
    for (const auto& p : pts) {
      CHECK(p[0].get<double>() >= prev);
      prev = p[0].get<double>();
      max = std::max(max, p[1].get<double>());
    }
    CHECK(max == listed["max"].get<double>());  // the column extremes keep the peak
  }
  an::trace_model m;
  const auto mem = [&](double ts, std::int64_t type, std::int64_t id, double allocated, double reserved) {
    an::event e = make_event(m, "[memory]", an::event_type::memory, ts, 0, 0, 0);
    e.extra = static_cast<std::uint32_t>(m.memory.size());
    an::memory_args a;
    a.device_type = type;
    a.device_id = id;
    a.total_allocated = allocated;
    a.total_reserved = reserved;
    m.memory.push_back(a);
    m.events.push_back(e);
  };
  m.events.push_back(make_event(m, "op", an::event_type::op, 0, 100, 1, 1));
  const double allocated[] = {5, 9, 2, 7, 4};
  for (int i = 0; i < 5; ++i) mem(10 + 10 * i, 1, 0, allocated[i], 16);
  mem(20, 0, -1, 3, std::nan(""));
  sort_events(m);
  const timeline tl(m);
  const json tracks = json::parse(tl.tracks_json());
  REQUIRE(tracks["windowed_counters"].size() == 3);
  CHECK(tracks["windowed_counters"][0]["name"] == "CPU Memory Allocated");
  CHECK(tracks["windowed_counters"][1]["name"] == "GPU 0 Memory Allocated");
  CHECK(tracks["windowed_counters"][1]["max"] == 9.0);
  CHECK(tracks["windowed_counters"][2]["name"] == "GPU 0 Memory Reserved");
  // One column over [0, 100]: first (5), lowest (2), highest (9) in time order, last (4).
  const json one = json::parse(tl.counters_json(0, 100, 1));
  CHECK(one["counters"][1]["points"] == json::parse("[[10,5],[20,9],[30,2],[50,4]]"));
  // A window inside the series: the value in force at its start and the next point after it.
  const json mid = json::parse(tl.counters_json(25, 35, 1000));
  CHECK(mid["counters"][1]["points"] == json::parse("[[20,9],[30,2],[40,7]]"));
  // Hostile: reversed window, NaN.
  CHECK(json::parse(tl.counters_json(50, 10, 10))["counters"][1]["points"].empty());
  CHECK(json::parse(tl.counters_json(std::nan(""), std::nan(""), 0))["counters"][1]["points"].size() == 4);
}

TEST_CASE("persisted form: a timeline from its columns answers byte for byte as the built one") {
  for (const std::string& rel : all_trace_files()) {
    CAPTURE(rel);
    const an::trace_model& m = load(rel);
    const timeline built(m);
    const timeline back(m, built.columns());  // a copy of the columns, as read from an index
    CHECK(back.tracks_json() == built.tracks_json());
    CHECK(back.t0() == built.t0());
    const double d = json::parse(built.tracks_json())["duration"].get<double>();
    for (const auto& [a, b, px] : std::vector<std::tuple<double, double, int>>{
             {0, d, 1920}, {0, d, 100}, {d * 0.4, d * 0.45, 1920}, {d * 0.5, d * 0.5001, 800}, {-5, d + 5, 3}}) {
      CHECK(back.window_json(a, b, px) == built.window_json(a, b, px));
      CHECK(back.window_json(a, b, px, {0, 1}, 50) == built.window_json(a, b, px, {0, 1}, 50));
      CHECK(back.counters_json(a, b, px) == built.counters_json(a, b, px));
      CHECK(back.summary_json(a, b) == built.summary_json(a, b));
    }
    CHECK(back.search_json("a", 100) == built.search_json("a", 100));
    const timeline_stats sb = back.stats(), sa = built.stats();
    CHECK(sb.tracks == sa.tracks);
    CHECK(sb.lanes == sa.lanes);
    CHECK(sb.slices == sa.slices);
    CHECK(sb.level_items == sa.level_items);
    for (std::uint32_t id = 0; id < m.events.size(); id += 1 + static_cast<std::uint32_t>(m.events.size() / 300)) {
      CHECK(back.track_of(id) == built.track_of(id));
      CHECK(back.row_of(id) == built.row_of(id));
      CHECK(back.event_json(id, true) == built.event_json(id, true));
    }
    CHECK(back.columns().meta == built.columns().meta);
  }
}

TEST_CASE("a timeline for its columns only: the same columns, and queries answered all the same") {
  for (const std::string& rel : all_trace_files()) {
    CAPTURE(rel);
    const an::trace_model& m = load(rel);
    const timeline built(m);
    const timeline columns(m, timeline::use::columns);  // (kinetoscope index's: no per-event index)
    CHECK(columns.columns().meta == built.columns().meta);
    CHECK(columns.columns().lanes.size() == built.columns().lanes.size());
    CHECK(columns.columns().lane_events == built.columns().lane_events);
    CHECK(columns.columns().items.size() == built.columns().items.size());
    CHECK(columns.columns().counter_ts == built.columns().counter_ts);
    CHECK(columns.columns().counter_values == built.columns().counter_values);
    CHECK(columns.tracks_json() == built.tracks_json());
    CHECK(columns.stats().memory_bytes < built.stats().memory_bytes);
    // The per-event index, made again from the columns when a query comes after all.
    CHECK(columns.search_json("a", 100) == built.search_json("a", 100));
    for (std::uint32_t id = 0; id < m.events.size(); id += 1 + static_cast<std::uint32_t>(m.events.size() / 300)) {
      CHECK(columns.track_of(id) == built.track_of(id));
      CHECK(columns.row_of(id) == built.row_of(id));
      CHECK(columns.event_json(id, true) == built.event_json(id, true));
    }
  }
}

TEST_CASE("persisted form: columns that do not fit the model are refused, each check on its own") {
  const an::trace_model& m = load(resnet);
  const timeline built(m);
  const ks::timeline_columns& good = built.columns();
  REQUIRE(good.lanes.size() > 2);
  REQUIRE(!good.items.empty());
  REQUIRE(good.counter_ts.size() > 2);
  const auto refused = [&](const std::function<void(ks::timeline_columns&)>& spoil, const char* what) {
    ks::timeline_columns c = good;
    spoil(c);
    bool threw = false;
    try {
      timeline t(m, std::move(c));
    } catch (const std::invalid_argument& e) {
      threw = std::string(e.what()).find(what) != std::string::npos;
      if (!threw) MESSAGE(std::string(e.what()));
    }
    CHECK_MESSAGE(threw, std::string(what));
  };
  refused([](auto& c) { c.meta.assign(1, '{'); }, "meta");  // (not = "{": a GCC 12 -Wrestrict false positive at -O3)
  refused([](auto& c) { c.meta = "[]"; }, "meta");
  refused([](auto& c) { c.lanes.pop_back(); }, "lanes");
  refused([](auto& c) { c.lanes.push_back(c.lanes.back()); }, "lanes of no track");
  refused([](auto& c) { c.lanes[1].track += 1; }, "a lane of another track");
  refused([](auto& c) { c.lanes[0].ev_begin = c.lane_events.size(); }, "slices out of range");
  refused([](auto& c) { c.lanes[0].ev_begin = ~std::uint64_t{0} - 1; }, "slices out of range");  // begin + count wraps
  refused([](auto& c) { c.lanes[0].level_begin = 0xffffffffu; c.lanes[0].level_count = 2; }, "levels out of range");
  refused([&](auto& c) { c.lane_events[0] = static_cast<std::uint32_t>(m.events.size()); }, "laid out twice");
  refused([](auto& c) { c.lane_events[1] = c.lane_events[0]; }, "laid out twice");
  refused([](auto& c) { std::swap(c.lane_events[0], c.lane_events[1]); }, "overlapping");
  refused([](auto& c) { c.levels[0].item_begin = c.items.size(); }, "items out of range");
  refused([&](auto& c) { c.items[0].longest = static_cast<std::uint32_t>(m.events.size()); }, "an item out of range");
  refused([](auto& c) { c.counter_values.pop_back(); }, "different lengths");
  refused([](auto& c) { std::swap(c.counter_ts[0], c.counter_ts.back()); }, "out of order");
  // The meta's own fields.
  const auto with_meta = [&](const std::function<void(json&)>& edit, const char* what) {
    refused([&](auto& c) {
      json j = json::parse(c.meta);
      edit(j);
      c.meta = j.dump();
    }, what);
  };
  with_meta([](json& j) { j["tracks"][0][2] = 7; }, "kind");
  with_meta([](json& j) { j["tracks"][0][9] = 1; }, "a track's lanes");
  with_meta([](json& j) { j["tracks"][0][8] = 1; }, "event count");
  with_meta([](json& j) { j["series"][0][4] = 1ull << 40; }, "a series out of range");
  with_meta([](json& j) { j["tracks_json"] = "{\"tracks\":["; }, "not JSON");
  with_meta([](json& j) { j["t0"] = std::bit_cast<std::uint64_t>(std::numeric_limits<double>::quiet_NaN()); }, "finite");
  with_meta([](json& j) { j.erase("series"); }, "meta");
  // And the untouched copy is taken.
  CHECK_NOTHROW(timeline(m, good));
}
