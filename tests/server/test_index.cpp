// SPDX-License-Identifier: BSD-3-Clause
// The persisted index (server/trace_index.hpp), the resident summaries and the memory-bounded
// store (server/store.hpp): a second start answers from indexes exactly what a parse answers;
// a changed trace, a truncated, foreign-version or corrupt index is detected and rebuilt; a
// store whose budget holds no full profile answers every request, from four threads at once;
// `kinetoscope index` under `xargs -P` fills the cache a server then reads.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "analysis/loader.hpp"
#include "server/api.hpp"
#include "server/store.hpp"
#include "server/summary.hpp"
#include "server/timeline.hpp"
#include "server/trace_index.hpp"

#include "dist_job_writer.hpp"
#include "../real_traces.hpp"
#include "../scratch_dir.hpp"

namespace fs = std::filesystem;
namespace an = kinetoscope::analysis;
namespace ks = kinetoscope::server;
using json = nlohmann::json;

namespace {

constexpr auto load_timeout = std::chrono::seconds(300);

fs::path traces_dir() {
  const char* s = kinetoscope::test::real_traces();
  REQUIRE_MESSAGE(s != nullptr, "KINETOSCOPE_REAL_TRACES not set (meson test sets it)");
  return fs::path(s) / "traces";
}

/// Each test's folder: <tmp>/kinetoscope_test_index_<tag>_<pid> (tests/scratch_dir.hpp).
struct scratch : kinetoscope::test::scratch {
  explicit scratch(const std::string& tag) : kinetoscope::test::scratch("index_" + tag) {}
};

void copy_runs(const fs::path& logdir, std::initializer_list<const char*> runs) {
  for (const char* run : runs) {
    fs::create_directories(logdir / run);
    for (const auto& e : fs::directory_iterator(traces_dir() / run))
      if (e.path().filename().string().find(".pt.trace.json") != std::string::npos)
        fs::copy_file(e.path(), logdir / run / e.path().filename());
  }
}

std::unique_ptr<ks::store> started(const fs::path& logdir, const std::string& cache, std::uint64_t max_memory = 0,
                                   double demand_pin_seconds = 0) {
  ks::store_options o;
  o.demand_pin_seconds = demand_pin_seconds;  // 0: the budget alone decides what stays
  o.logdir = logdir.string();
  o.reload_interval_s = 0;
  o.cache_dir = cache;
  o.max_memory = max_memory;
  o.loader_threads = 2;  // as the server on a multi-core machine: loads interleave
  auto s = std::make_unique<ks::store>(o);
  s->start();
  REQUIRE(s->wait_idle(load_timeout));
  return s;
}

using query_t = std::vector<std::pair<std::string, std::string>>;

/// GET through the API; a 503 (a full profile being loaded) is asked again, as the page does.
ks::api_response get(ks::store& s, const std::string& route, const query_t& query) {
  ks::api_request r{route, query};
  for (int i = 0;; ++i) {
    ks::api_response a = ks::api(s).handle(r);
    if (a.status != 503 || i > 600) return a;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

/// The body, with the fields that measure this process's own load time removed.
std::string comparable(const std::string& route, const ks::api_response& r) {
  if (route != "diagnostics" || r.status != 200) return std::to_string(r.status) + " " + r.body;
  json j = json::parse(r.body);
  j.erase("load_seconds");
  return "200 " + j.dump();
}

/// Every loaded file as (run, worker, span).
std::vector<query_t> profiles(ks::store& s) {
  std::vector<query_t> out;
  for (const auto& f : s.files())
    if (f.state == ks::file_state::loaded) out.push_back({{"run", f.run}, {"worker", f.worker}, {"span", f.span}});
  return out;
}

/// Requests over every loaded profile: the views' defaults (answered from summaries) and
/// requests only a full profile answers (other units, memory ranges, the timeline, call stacks,
/// Diff), plus the Distributed routes of each run.
std::vector<std::pair<std::string, query_t>> requests(ks::store& s) {
  std::vector<std::pair<std::string, query_t>> out;
  const auto add = [&](const std::string& route, query_t q, query_t extra = {}) {
    q.insert(q.end(), extra.begin(), extra.end());
    out.emplace_back(route, std::move(q));
  };
  for (const query_t& p : profiles(s)) {
    for (const char* route : {"overview", "operation", "operation/table", "kernel", "kernel/table", "kernel/tc_pie",
                              "memory", "memory_events", "memory_curve", "module", "recommendations", "diagnostics",
                              "timeline/tracks", "tree"})
      add(route, p);
    add("operation/table", p, {{"group_by", "OperationAndInputShape"}});
    add("kernel/table", p, {{"group_by", "OperationAndKernel"}});
    add("memory_curve", p, {{"time_metric", "us"}, {"memory_metric", "KB"}});
    add("memory", p, {{"start_ts", "0"}, {"end_ts", "1e18"}, {"memory_metric", "B"}});
    add("timeline", p, {{"start", "-1e18"}, {"end", "1e18"}, {"px", "800"}});
    add("timeline/event", p, {{"id", "3"}});
    add("timeline/search", p, {{"q", "aten"}});
    add("operation/stack", p, {{"op_name", "aten::add"}});
    add("diffnode", p, {{"exp_run", p[0].second}, {"exp_worker", p[1].second}, {"exp_span", p[2].second}});
  }
  for (const std::string& run : s.runs())
    for (const char* which : {"gpuinfo", "overlap", "waittime", "commops"})
      add(std::string("distributed/") + which, {{"run", run}, {"span", s.run_files(run).front().span}});
  return out;
}

std::map<std::string, std::string> answers(ks::store& s, const std::vector<std::pair<std::string, query_t>>& reqs) {
  std::map<std::string, std::string> out;
  for (const auto& [route, q] : reqs) {
    std::string key = route;
    for (const auto& [k, v] : q) key += "&" + k + "=" + v;
    out[key] = comparable(route, get(s, route, q));
  }
  return out;
}

std::map<std::string, std::string> index_notes(ks::store& s) {
  std::map<std::string, std::string> out;
  for (const auto& f : s.files()) out[f.path] = f.index;
  return out;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_bytes(const fs::path& p, const std::string& b) { std::ofstream(p, std::ios::binary | std::ios::trunc) << b; }

/// Where section `kind` lies in the index bytes `b` (header: section count at 40, path length
/// at 44, path at 48, then the table: kind, crc, offset, size per section), and its CRC's place.
struct section_at {
  std::size_t offset = 0, size = 0, crc_at = 0;
};
section_at find_section(const std::string& b, std::uint32_t kind) {
  std::uint32_t sections = 0, path_bytes = 0;
  std::memcpy(&sections, b.data() + 40, 4);
  std::memcpy(&path_bytes, b.data() + 44, 4);
  for (std::uint32_t i = 0; i < sections; ++i) {
    const std::size_t at = 48 + path_bytes + std::size_t{i} * 24;
    std::uint32_t k = 0;
    std::uint64_t off = 0, size = 0;
    std::memcpy(&k, b.data() + at, 4);
    std::memcpy(&off, b.data() + at + 8, 8);
    std::memcpy(&size, b.data() + at + 16, 8);
    if (k == kind) return {static_cast<std::size_t>(off), static_cast<std::size_t>(size), at + 4};
  }
  FAIL("no section " << kind);
  return {};
}
/// Sets the CRC of section `s` in `b` to its bytes' (so that the reader gets past it).
void fix_crc(std::string& b, const section_at& s) {
  const auto crc = static_cast<std::uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(b.data() + s.offset), s.size));
  std::memcpy(b.data() + s.crc_at, &crc, 4);
}
/// Section kinds of trace_index.cpp: the string offsets, the timeline's lanes and their slices.
constexpr std::uint32_t string_offsets_kind = 2, events_kind = 4, tl_lanes_kind = 14, tl_lane_events_kind = 15;

/// The full-range timeline window of the store's first profile at `px` columns, with the query
/// that names that profile (run, worker, span first).
std::pair<query_t, ks::api_response> first_window(ks::store& s, const char* px) {
  query_t q = profiles(s).at(0);
  query_t w = q;
  w.insert(w.end(), {{"start", "-1e18"}, {"end", "1e18"}, {"px", px}});
  return {q, get(s, "timeline", w)};
}

/// The one index file of a cache folder.
fs::path only_index(const fs::path& cache) {
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(cache))
    if (e.path().extension() == ".ksidx") found.push_back(e.path());
  REQUIRE(found.size() == 1);
  return found.front();
}

}  // namespace

TEST_CASE("index: a second start reads every summary from the index and answers every request as a parse does") {
  scratch dir("parity");
  const fs::path logdir = dir.path / "logs";
  const std::string cache = (dir.path / "cache").string();
  copy_runs(logdir, {"resnet50_v100", "two_ranks", "cpu_only", "nccl_ddp", "amd_mi250"});

  auto plain = started(logdir, "");
  const auto reqs = requests(*plain);
  REQUIRE(reqs.size() > 100);
  const auto expected = answers(*plain, reqs);
  std::size_t ok = 0;
  for (const auto& [k, v] : expected) ok += v.starts_with("200 ") ? 1 : 0;
  CHECK(ok > 80);  // most requests are real answers, not errors
  for (const auto& [path, note] : index_notes(*plain)) CHECK(note == "off");
  plain.reset();

  {
    auto first = started(logdir, cache);
    for (const auto& [path, note] : index_notes(*first)) CHECK_MESSAGE(note == "written", path);
    CHECK(answers(*first, reqs) == expected);
  }

  auto second = started(logdir, cache);
  const auto notes = index_notes(*second);
  CHECK(notes.size() == 7);
  for (const auto& [path, note] : notes) CHECK_MESSAGE(note == "read", path);
  // Nothing was parsed, nothing is resident: the views' defaults come from the summaries.
  CHECK(second->resident_bytes() == 0);
  for (const query_t& p : profiles(*second))
    for (const char* route : {"overview", "operation", "kernel/table", "memory_curve", "recommendations"})
      CHECK(get(*second, route, p).status == 200);
  CHECK(second->full_loads() == 0);
  for (const auto& f : second->files()) CHECK_FALSE(f.resident);
  // The rest loads full profiles from the indexes, and every answer is the parse's.
  const auto got = answers(*second, reqs);
  CHECK(second->full_loads() == 7);
  CHECK(second->timeline_reads() == 7);  // each timeline from its index's columns, none laid out
  for (const auto& [k, v] : expected) {
    INFO(k);
    CHECK(got.at(k) == v);
  }
}

TEST_CASE("index: a changed trace, a truncated, other-version, corrupt or foreign index is rebuilt, never read") {
  scratch dir("invalid");
  const fs::path logdir = dir.path / "logs";
  const fs::path cache = dir.path / "cache";
  copy_runs(logdir, {"cpu_only"});
  const std::string rel = "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz";
  const auto note_after_restart = [&] {
    auto s = started(logdir, cache.string());
    REQUIRE(s->files().size() == 1);
    return s->files().front().index;
  };
  CHECK(note_after_restart() == "written");
  const fs::path idx = only_index(cache);
  const std::string good = read_bytes(idx);
  CHECK(note_after_restart() == "read");

  SUBCASE("the trace changed (mtime)") {
    fs::last_write_time(logdir / rel, fs::last_write_time(logdir / rel) + std::chrono::seconds(5));
    CHECK(note_after_restart().starts_with("rebuilt (stale: "));
    CHECK(note_after_restart() == "read");
  }
  SUBCASE("the trace changed (size)") {
    std::ofstream(logdir / rel, std::ios::binary | std::ios::app) << '\0';
    const std::string note = note_after_restart();
    CHECK(note.starts_with("rebuilt (stale: "));
  }
  SUBCASE("truncated") {
    write_bytes(idx, good.substr(0, good.size() - 100));
    CHECK(note_after_restart().starts_with("rebuilt (truncated: "));
    CHECK(note_after_restart() == "read");
  }
  SUBCASE("cut inside the header") {
    write_bytes(idx, good.substr(0, 20));
    CHECK(note_after_restart().starts_with("rebuilt (truncated: "));
  }
  SUBCASE("another format version") {
    std::string b = good;
    std::uint32_t v = ks::index_format_version + 1;
    std::memcpy(b.data() + 8, &v, sizeof v);
    write_bytes(idx, b);
    CHECK(note_after_restart().starts_with("rebuilt (version: "));
  }
  SUBCASE("a flipped byte in the summary") {
    std::string b = good;
    const std::size_t at = b.find("KSSUMM01");  // the summary section starts with its magic
    REQUIRE(at != std::string::npos);
    b[at + 3] ^= 0x20;
    write_bytes(idx, b);
    CHECK(note_after_restart().starts_with("rebuilt (corrupt: "));
  }
  SUBCASE("not an index") {
    write_bytes(idx, std::string(good.size(), 'x'));
    CHECK(note_after_restart().starts_with("rebuilt (foreign: "));
  }
  SUBCASE("the index of another trace under this trace's name") {
    copy_runs(logdir, {"diff_base"});
    { auto s = started(logdir, cache.string()); }
    fs::path other;
    for (const auto& e : fs::directory_iterator(cache))
      if (e.path() != idx) other = e.path();
    REQUIRE(!other.empty());
    fs::copy_file(other, idx, fs::copy_options::overwrite_existing);
    auto s = started(logdir, cache.string());
    for (const auto& f : s->files())
      if (f.path == rel) CHECK(f.index.starts_with("rebuilt (foreign: "));
  }
  SUBCASE("a flipped byte in the model's columns: the summary is read, the full profile is parsed") {
    // A byte in the middle of the events column (the model's largest).
    ks::trace_index t;
    const auto key = ks::index_key_of((logdir / rel).string());
    REQUIRE(key);
    REQUIRE(t.open(idx.string(), *key) == ks::index_status::ok);
    const section_at events = find_section(good, events_kind);
    REQUIRE(events.size >= 2 * sizeof(an::event));
    std::string b = good;
    b[events.offset + events.size / 2] ^= 0x40;
    write_bytes(idx, b);
    ks::trace_index bad;
    REQUIRE(bad.open(idx.string(), *key) == ks::index_status::ok);
    an::trace_model m;
    CHECK_FALSE(bad.read_model(m));
    CHECK(bad.error().find("checksum") != std::string::npos);

    auto s = started(logdir, cache.string());
    CHECK(s->files().front().index == "read");
    const auto [q, tl] = first_window(*s, "100");
    CHECK(tl.status == 200);
    // (The window may come before the load's other views: wait for the whole profile.)
    CHECK(s->acquire(q[0].second, q[1].second, q[2].second, std::chrono::seconds(120)).full);
    CHECK(s->full_loads() == 1);
  }
  SUBCASE("damaged timeline columns: the model is read, the timeline laid out again, the same windows") {
    std::string window_before;
    {
      auto s = started(logdir, cache.string());
      const auto [q, tl] = first_window(*s, "300");
      window_before = tl.body;
      REQUIRE(s->acquire(q[0].second, q[1].second, q[2].second, std::chrono::seconds(120)).full);
      CHECK(s->timeline_reads() == 1);  // the intact index's timeline is read
    }
    std::string b = good;
    SUBCASE("a flipped byte (checksum)") {
      const section_at ev = find_section(b, tl_lane_events_kind);
      REQUIRE(ev.size >= 8);
      b[ev.offset + 1] ^= 0x10;
    }
    SUBCASE("a lane naming another track (checksum right: the timeline's own checks)") {
      const section_at lanes = find_section(b, tl_lanes_kind);
      REQUIRE(lanes.size >= sizeof(ks::timeline_lane));
      const std::uint32_t track = 999;
      std::memcpy(b.data() + lanes.offset, &track, 4);  // timeline_lane::track of lane 0
      fix_crc(b, lanes);
    }
    write_bytes(idx, b);
    auto s = started(logdir, cache.string());
    CHECK(s->files().front().index == "read");
    const auto [q, tl] = first_window(*s, "300");
    CHECK(tl.status == 200);
    CHECK(tl.body == window_before);
    CHECK(s->acquire(q[0].second, q[1].second, q[2].second, std::chrono::seconds(120)).full);
    CHECK(s->full_loads() == 1);
    CHECK(s->timeline_reads() == 0);
  }
}

TEST_CASE("index: a summary survives its bytes exactly; damaged bytes are refused, never half read") {
  scratch dir("summary");
  namespace kb = kinetoscope::bench;
  kb::dist_job_options o;
  o.ranks = 4;
  o.steps = 3;
  o.layers = 4;
  kb::write_dist_job(dir.path / "logs" / "job", o);
  fs::create_directories(dir.path / "logs" / "plain");
  fs::copy_file(traces_dir() / "resnet50_v100" / "worker0.1623143089861.pt.trace.json.gz",
                dir.path / "logs" / "plain" / "worker0.1623143089861.pt.trace.json.gz");
  const auto s = started(dir.path / "logs", "");
  std::size_t with_collectives = 0;
  std::string job_bytes;
  for (const auto& f : s->files()) {
    CAPTURE(f.path);
    REQUIRE(f.summary);
    const ks::file_summary& a = *f.summary;
    const std::string bytes = ks::summary_to_bytes(a);
    const ks::file_summary b = ks::summary_from_bytes(bytes);
    CHECK(b.from_index);
    CHECK(b.file_bytes == a.file_bytes);
    CHECK(b.full_bytes == a.full_bytes);
    CHECK(b.load_seconds == a.load_seconds);
    CHECK(b.warnings == a.warnings);
    CHECK(b.diagnostics.events_by_category == a.diagnostics.events_by_category);
    CHECK(b.diagnostics.messages == a.diagnostics.messages);
    CHECK((b.kernel_view == a.kernel_view && b.memory_view == a.memory_view && b.module_view == a.module_view));
    CHECK(b.timeline_error == a.timeline_error);
    CHECK(b.bodies == a.bodies);
    CHECK(b.rank == a.rank);
    CHECK(b.rank_id == a.rank_id);
    CHECK(b.distributed.used_devices == a.distributed.used_devices);
    CHECK(b.distributed.devices.size() == a.distributed.devices.size());
    REQUIRE(b.distributed.overlap.size() == a.distributed.overlap.size());
    for (std::size_t i = 0; i < a.distributed.overlap.size(); ++i) {
      CHECK(b.distributed.overlap[i].first == a.distributed.overlap[i].first);
      CHECK(b.distributed.overlap[i].second.other == a.distributed.overlap[i].second.other);
    }
    CHECK(b.distributed.records == a.distributed.records);
    CHECK(ks::summary_to_bytes(b) == bytes);
    if (!a.rank.collectives.empty()) {
      ++with_collectives;
      CHECK(!a.distributed.records.empty());
      job_bytes = bytes;
    }
  }
  CHECK(with_collectives == 4);
  REQUIRE(!job_bytes.empty());

  const auto refused = [](const std::string& bytes, const std::string& needle) {
    try {
      (void)ks::summary_from_bytes(bytes);
      FAIL("accepted");
    } catch (const std::runtime_error& e) {
      CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
  };
  refused("", "not a summary");
  refused("KSSUMM00" + job_bytes.substr(8), "not a summary");
  for (std::size_t cut : {std::size_t{9}, std::size_t{20}, job_bytes.size() / 3, job_bytes.size() / 2, job_bytes.size() - 1})
    refused(job_bytes.substr(0, cut), "unreadable");
  refused(job_bytes + "x", "bytes after the last record");
  // The last collective ends with its u8 on_device and its i32 step.
  std::string bad = job_bytes;
  bad[bad.size() - 5] = 2;
  refused(bad, "on_device is not a bool");
  bad = job_bytes;
  const std::int32_t far_step = 99;
  std::memcpy(bad.data() + bad.size() - 4, &far_step, 4);
  refused(bad, "step is out of range");
  bad = job_bytes;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::memcpy(bad.data() + bad.size() - 5 - 8, &nan, 8);  // its end
  refused(bad, "not finite");
  bad = job_bytes;
  const std::uint32_t far_id = 1u << 30;
  std::memcpy(bad.data() + bad.size() - 5 - 3 * 8 - 3 * 8 - 4, &far_id, 4);  // its name
  refused(bad, "text id is out of range");
}

TEST_CASE("index: a span's Distributed bodies are kept next to the indexes and read back while its files are unchanged") {
  scratch dir("span");
  namespace kb = kinetoscope::bench;
  kb::dist_job_options o;
  o.ranks = 4;
  o.steps = 4;
  o.layers = 4;
  o.slow_compute = {2, {1}, 0.6};
  const kb::dist_job_report rep = kb::write_dist_job(dir.path / "logs" / "job", o);
  const fs::path cache = dir.path / "cache";
  const std::vector<std::string> routes = {"distributed/gpuinfo", "distributed/overlap", "distributed/waittime",
                                           "distributed/commops", "distributed/ranks"};
  const auto bodies = [&](ks::store& s) {
    std::vector<std::string> out;
    for (const auto& r : routes) out.push_back(comparable(r, get(s, r, {{"run", "job"}, {"span", "1"}})));
    return out;
  };
  std::vector<std::string> first;
  {
    auto s = started(dir.path / "logs", cache.string());
    first = bodies(*s);
    CHECK(s->span_cache_reads() == 0);
    for (const auto& b : first) CHECK(b.starts_with("200 {"));
    // Equal to the job view computed here from the summaries.
    const json ranks = json::parse(first[4].substr(4));
    CHECK(ranks["stragglers"].size() == 1);
    CHECK(get(*s, "distributed/ranks", {{"run", "job"}, {"span", "1"}, {"top", "50"}}).body == first[4].substr(4));
    CHECK(get(*s, "views", {{"run", "job"}}).body.find("Distributed") != std::string::npos);
  }
  std::size_t span_files = 0;
  for (const auto& e : fs::directory_iterator(cache)) span_files += e.path().extension() == ".ksidx" ? 1 : 0;
  CHECK(span_files == rep.files.size() + 1);  // an index per trace, one for the span
  {
    auto s = started(dir.path / "logs", cache.string());
    CHECK(get(*s, "views", {{"run", "job"}}).body.find("Distributed") != std::string::npos);
    CHECK(bodies(*s) == first);
    CHECK(s->span_cache_reads() == 1);
  }
  SUBCASE("a member changed: computed again, not read") {
    const fs::path f = rep.files[1];
    fs::last_write_time(f, fs::last_write_time(f) + std::chrono::seconds(5));
    auto s = started(dir.path / "logs", cache.string());
    CHECK(bodies(*s) == first);
    CHECK(s->span_cache_reads() == 0);
  }
  SUBCASE("a damaged span file: computed again and rewritten") {
    for (const auto& e : fs::directory_iterator(cache)) {
      std::string b;
      {
        std::ifstream in(e.path(), std::ios::binary);
        b.assign(std::istreambuf_iterator<char>(in), {});
      }
      const std::size_t at = b.find("KSSPAN01");
      if (at == std::string::npos) continue;
      b[at + 2] ^= 0x20;
      std::ofstream(e.path(), std::ios::binary | std::ios::trunc) << b;
    }
    {
      auto s = started(dir.path / "logs", cache.string());
      CHECK(bodies(*s) == first);
      CHECK(s->span_cache_reads() == 0);
    }
    auto s = started(dir.path / "logs", cache.string());
    CHECK(bodies(*s) == first);
    CHECK(s->span_cache_reads() == 1);
  }
}

TEST_CASE("index: the fuzz target's seed indexes are of this format version") {
  // Seeds of an older version stop at the header check and fuzz nothing past it: rewrite them
  // (scripts/make-index-seeds.sh) when index_format_version changes.
  const char* data = std::getenv("KINETOSCOPE_TEST_DATA");
  REQUIRE(data != nullptr);
  std::size_t seeds = 0;
  for (const auto& e : fs::directory_iterator(fs::path(data).parent_path() / "fuzz" / "corpus" / "index")) {
    std::ifstream in(e.path(), std::ios::binary);
    char head[12] = {};
    in.read(head, sizeof head);
    std::uint32_t version = 0;
    std::memcpy(&version, head + 8, 4);
    CAPTURE(e.path().filename().string());
    CHECK(std::string(head, 8) == std::string("KSINDEX\0", 8));
    CHECK(version == ks::index_format_version);
    ++seeds;
  }
  CHECK(seeds >= 4);
}

TEST_CASE("index: the model read back is the model parsed; records out of range are refused") {
  scratch dir("model");
  const fs::path trace = traces_dir() / "resnet50_v100" / "worker0.1623143089861.pt.trace.json.gz";
  an::load_result r = an::load_trace(trace.string());
  REQUIRE(r.ok());
  const an::trace_model& m = *r.model;
  const auto key = ks::index_key_of(trace.string());
  REQUIRE(key);
  const std::string file = ks::index_file_path(dir.path.string(), key->path);
  ks::write_index(file, *key, R"({"x":1})", m);

  ks::trace_index t;
  REQUIRE(t.open(file, *key) == ks::index_status::ok);
  CHECK(t.summary_bytes() == R"({"x":1})");
  an::trace_model back;
  REQUIRE(t.read_model(back));
  CHECK(back.strings == m.strings);
  REQUIRE(back.events.size() == m.events.size());
  CHECK(std::memcmp(back.events.data(), m.events.data(), m.events.size() * sizeof(an::event)) == 0);
  CHECK(back.ops.size() == m.ops.size());
  CHECK(back.kernels.size() == m.kernels.size());
  CHECK(back.memory.size() == m.memory.size());
  CHECK(back.track_metas.size() == m.track_metas.size());
  CHECK(back.devices.size() == m.devices.size());
  CHECK(back.devices.at(0).name == m.devices.at(0).name);
  CHECK(back.diagnostics.warnings == m.diagnostics.warnings);
  CHECK(back.diagnostics.text_bytes == m.diagnostics.text_bytes);
  CHECK(back.schema_version == m.schema_version);
  CHECK(back.find_string("aten::conv2d") == m.find_string("aten::conv2d"));

  // A record whose string id points past the table, with its checksum made right: refused.
  an::trace_model evil = m;
  evil.events[5].name = static_cast<std::uint32_t>(evil.strings.size() + 7);
  ks::write_index(file, *key, "{}", evil);
  REQUIRE(t.open(file, *key) == ks::index_status::ok);
  CHECK_FALSE(t.read_model(back));
  CHECK(t.error().find("out of range") != std::string::npos);
  // A bool byte that is neither 0 nor 1.
  evil = m;
  reinterpret_cast<unsigned char*>(&evil.events[9])[offsetof(an::event, pid_is_string)] = 7;
  ks::write_index(file, *key, "{}", evil);
  REQUIRE(t.open(file, *key) == ks::index_status::ok);
  CHECK_FALSE(t.read_model(back));

  // A string offset past the blob in the middle of the table (found by fuzz_index: it was read
  // as a string of 2^58 bytes), with the section's checksum made right: refused.
  {
    ks::write_index(file, *key, "{}", m);
    std::string b = read_bytes(file);
    const section_at offsets = find_section(b, string_offsets_kind);
    REQUIRE(offsets.size >= 24);
    const std::uint64_t huge = std::uint64_t{1} << 58;
    std::memcpy(b.data() + offsets.offset + 8, &huge, 8);  // offsets[1]
    fix_crc(b, offsets);
    write_bytes(file, b);
    REQUIRE(t.open(file, *key) == ks::index_status::ok);
    CHECK_FALSE(t.read_model(back));
    CHECK(t.error() == "the string table is inconsistent");
  }

  // The key: another size or mtime is stale; a missing file is missing.
  ks::index_key other = *key;
  other.mtime_ns += 1;
  CHECK(t.open(file, other) == ks::index_status::stale);
  CHECK(t.open(file + ".none", *key) == ks::index_status::missing);
  CHECK(ks::index_file_path("/c", "/a/b.json") != ks::index_file_path("/c", "/a/c.json"));
}

/// Whether files in `dir` take O_DIRECT writes of whole aligned blocks (as index_writer's).
bool takes_o_direct(const fs::path& dir) {
  const fs::path f = dir / "o_direct_probe";
  const int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  void* block = nullptr;
  bool ok = ::posix_memalign(&block, 4096, 4096) == 0;
  if (ok) {
    std::memset(block, 0, 4096);
    ok = ::pwrite(fd, block, 4096, 0) == 4096;
  }
  std::free(block);
  ::close(fd);
  ::unlink(f.c_str());
  return ok;
}

TEST_CASE("index: written through O_DIRECT (kinetoscope index) or the page cache, the same bytes") {
  scratch dir("direct");
  const fs::path trace = traces_dir() / "resnet50_v100" / "worker0.1623143089861.pt.trace.json.gz";
  an::load_result r = an::load_trace(trace.string());
  REQUIRE(r.ok());
  // Events repeated (each copy later than the last) until the model is several of the
  // writer's 8 MiB staging buffers.
  an::trace_model m = std::move(*r.model);
  const std::size_t n = m.events.size();
  double span = 0;
  for (const an::event& e : m.events) span = std::max(span, e.end() - m.events.front().ts + 1);
  for (int copy = 1; m.events.size() * sizeof(an::event) < (std::size_t{20} << 20); ++copy) {
    for (std::size_t i = 0; i < n; ++i) {
      an::event e = m.events[i];
      e.ts += span * copy;
      m.events.push_back(e);
    }
  }
  const ks::timeline tl(m);
  const auto key = ks::index_key_of(trace.string());
  REQUIRE(key);
  // The scratch folder, and a tmpfs one where there is (older kernels refuse O_DIRECT there:
  // the writer then writes the ordinary way).
  std::vector<fs::path> folders = {dir.path};
  if (fs::is_directory("/dev/shm")) folders.push_back(fs::path("/dev/shm") / dir.path.filename());
  for (const fs::path& folder : folders) {
    CAPTURE(folder);
    fs::create_directories(folder);
    const std::string summary(100003, 's');  // (a summary that ends off any block boundary)
    std::string bytes[2];
    for (const auto mode : {ks::index_writer::io::page_cache, ks::index_writer::io::direct}) {
      const std::string file = (folder / (mode == ks::index_writer::io::direct ? "direct.ksidx" : "cached.ksidx")).string();
      ks::index_writer w(file, *key, mode);
      w.start(m, &tl);
      w.finish(summary);
      CHECK(w.wrote_direct() == (mode == ks::index_writer::io::direct && takes_o_direct(folder)));
      bytes[mode == ks::index_writer::io::direct ? 1 : 0] = read_bytes(file);
      ks::trace_index t;
      REQUIRE(t.open(file, *key) == ks::index_status::ok);
      CHECK(t.summary_bytes() == summary);
      an::trace_model back;
      const bool read = t.read_model(back);
      CAPTURE(t.error());
      REQUIRE(read);
      REQUIRE(back.events.size() == m.events.size());
      CHECK(std::memcmp(back.events.data(), m.events.data(), m.events.size() * sizeof(an::event)) == 0);
    }
    CHECK(bytes[0].size() > (std::size_t{20} << 20));
    CHECK(bytes[0] == bytes[1]);
    if (folder != dir.path) fs::remove_all(folder);
  }
}

TEST_CASE("index: one model always gives the same record bytes (no leftover heap bytes)") {
  // Every record type has its padding as named zero fields: two loads of one trace (their
  // tables built in different heap memory; meson's MALLOC_PERTURB_ fills fresh blocks) write
  // the same bytes. Before, the padding of events, op, kernel and memory args, flows, track
  // metadata and collectives was whatever the heap held.
  scratch dir("same_bytes");
  for (const char* rel : {"nccl_ddp/nccl_data.pt.trace.json.gz", "resnet50_v100/worker0.1623143089861.pt.trace.json.gz",
                          "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"}) {
    CAPTURE(rel);
    const fs::path trace = traces_dir() / rel;
    const auto key = ks::index_key_of(trace.string());
    REQUIRE(key);
    std::string bytes[2];
    for (int i = 0; i < 2; ++i) {
      std::vector<std::string> noise(1000, std::string(200, static_cast<char>(0x5a + i)));  // other heap contents
      an::load_result r = an::load_trace(trace.string());
      REQUIRE(r.ok());
      const std::string file = (dir.path / ("same" + std::to_string(i) + ".ksidx")).string();
      ks::write_index(file, *key, "{}", *r.model);
      bytes[i] = read_bytes(file);
    }
    CHECK(bytes[0] == bytes[1]);
    for (const std::uint32_t kind : {4u, 5u, 6u, 7u, 8u, 9u, 10u, 12u}) {  // events ... collectives
      CAPTURE(kind);
      const section_at s = find_section(bytes[0], kind);
      CHECK(bytes[0].compare(s.offset, s.size, bytes[1], s.offset, s.size) == 0);
    }
  }
  // The record sizes the format (index_format_version 5) holds.
  CHECK(sizeof(an::op_args) == 32);
  CHECK(sizeof(an::kernel_args) == 112);
}

TEST_CASE("index: an unwritable cache folder and a read-only logdir still serve") {
  scratch dir("readonly");
  const fs::path logdir = dir.path / "logs";
  copy_runs(logdir, {"cpu_only"});
  // A cache folder below a regular file cannot be created, even by root.
  write_bytes(dir.path / "plainfile", "x");
  auto s = started(logdir, (dir.path / "plainfile" / "cache").string());
  REQUIRE(s->files().size() == 1);
  const auto f = s->files().front();
  CHECK(f.state == ks::file_state::loaded);
  CHECK(f.index.starts_with("not written: "));
  CHECK(f.index.find(dir.path.string()) == std::string::npos);  // no absolute path shown
  CHECK(get(*s, "overview", {{"run", f.run}, {"worker", f.worker}, {"span", f.span}}).status == 200);

  // The logdir read-only: indexes go to the cache folder, never beside the traces.
  fs::permissions(logdir / "cpu_only", fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  auto t = started(logdir, (dir.path / "cache").string());
  CHECK(t->files().front().index == "written");
  std::size_t in_logdir = 0;
  for (const auto& e : fs::recursive_directory_iterator(logdir)) in_logdir += e.path().extension() == ".ksidx";
  CHECK(in_logdir == 0);
  fs::permissions(logdir / "cpu_only", fs::perms::owner_all, fs::perm_options::add);
}

TEST_CASE("store: a budget that holds no full profile answers every request, from four threads at once") {
  scratch dir("evict");
  const fs::path logdir = dir.path / "logs";
  copy_runs(logdir, {"two_ranks", "cpu_only", "diff_base"});
  auto plain = started(logdir, "");
  const auto reqs = requests(*plain);
  const auto expected = answers(*plain, reqs);
  plain.reset();

  for (const std::string& cache : {std::string(), (dir.path / "cache").string()}) {
    CAPTURE(cache);
    auto s = started(logdir, cache, /*max_memory=*/1);
    CHECK(s->resident_bytes() == 0);  // each load's full profile was let go at once
    std::vector<std::map<std::string, std::string>> got(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        // Each thread its own order, so that loads, evictions and uses interleave.
        auto mine = reqs;
        std::rotate(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(mine.size() * t / 4), mine.end());
        got[static_cast<std::size_t>(t)] = answers(*s, mine);
      });
    for (auto& th : threads) th.join();
    for (const auto& g : got)
      for (const auto& [k, v] : expected) {
        INFO(k);
        CHECK(g.at(k) == v);
      }
    CHECK(s->resident_bytes() == 0);
    CHECK(s->full_loads() >= 4);
  }

  // A budget of the largest profile: opening it last leaves it, and only it, resident.
  std::string largest_path;
  std::uint64_t largest = 0;
  std::uint64_t summaries = 0;
  {
    auto s = started(logdir, "", 1);
    for (const auto& f : s->files())
      if (f.summary->full_bytes > largest) {
        largest = f.summary->full_bytes;
        largest_path = f.path;
      }
    // (The budget holds the resident summaries too: the same files give the same summary bytes.)
    summaries = s->summary_bytes();
  }
  CHECK(summaries > 0);
  // (A body may hold a figure of this process, a digit more or less: 1 KB of slack, far less
  // than any other profile.)
  constexpr std::uint64_t slack = 1024;
  auto t = started(logdir, "", largest + summaries + slack);
  CHECK(t->summary_bytes() + slack / 2 > summaries);
  CHECK(t->summary_bytes() < summaries + slack / 2);
  std::vector<query_t> order;
  for (const auto& f : t->files()) {
    const query_t q = {{"run", f.run}, {"worker", f.worker}, {"span", f.span}};
    if (f.path == largest_path) order.push_back(q);
    else order.insert(order.begin(), q);
  }
  REQUIRE(order.size() == 4);
  for (query_t q : order) {
    // (The window may come before the load's other views: wait for the whole profile, so that
    // the loads end in this order.)
    CHECK(t->acquire(q[0].second, q[1].second, q[2].second, std::chrono::seconds(120)).full);
    q.insert(q.end(), {{"start", "-1e18"}, {"end", "1e18"}, {"px", "100"}});
    CHECK(get(*t, "timeline", q).status == 200);
  }
  for (const auto& f : t->files()) CHECK_MESSAGE(f.resident == (f.path == largest_path), f.path);
  CHECK(t->resident_bytes() == largest);
}

TEST_CASE("store: a profile loaded on demand stays for the request that waited, whatever the budget") {
  scratch dir("pin");
  const fs::path logdir = dir.path / "logs";
  copy_runs(logdir, {"two_ranks"});
  for (const double pin : {30.0, 0.0}) {
    CAPTURE(pin);
    auto s = started(logdir, "", /*max_memory=*/1, pin);
    const auto f = s->files().at(0);
    REQUIRE(s->resident_bytes() == 0);
    // As the API does past its wait: "loading" now; the load goes on in the background.
    ks::full_result first = s->acquire(f.run, f.worker, f.span, std::chrono::milliseconds(0));
    CHECK(first.loading);
    CHECK_FALSE(first.full);
    // Another request waits for the end of that load (and gets the profile), then lets go.
    ks::full_result waited = s->acquire(f.run, f.worker, f.span, std::chrono::seconds(120));
    CHECK(waited.full);
    waited.full.reset();
    CHECK(s->full_loads() == 1);
    ks::full_result again = s->acquire(f.run, f.worker, f.span, std::chrono::milliseconds(0));
    if (pin > 0) {
      // The asking again gets it: no second load, though it is over the 1-byte budget.
      CHECK(again.full);
      CHECK(s->full_loads() == 1);
      CHECK(s->resident_bytes() > 1);
    } else {
      // Unpinned, the budget let it go at once (asking again starts another load once the last
      // holder, maybe the on-demand thread still, lets go).
      CHECK(s->resident_bytes() == 0);
    }
  }
}

TEST_CASE("store: one pin at a time: the next on-demand load ends the last one's pin") {
  scratch dir("pins");
  const fs::path logdir = dir.path / "logs";
  copy_runs(logdir, {"two_ranks", "cpu_only"});
  auto s = started(logdir, "", /*max_memory=*/1, /*demand_pin_seconds=*/30);
  const auto files = s->files();
  REQUIRE(files.size() >= 2);
  std::vector<std::string> resident_after;  // the resident files after each on-demand load
  for (const auto& f : files) {
    ks::full_result r = s->acquire(f.run, f.worker, f.span, std::chrono::seconds(120));
    REQUIRE(r.full);
    r.full.reset();
    std::string now;
    for (const auto& g : s->files())
      if (g.resident) now += g.path + ";";
    resident_after.push_back(now);
    // Pinned: asked again, it is there without a load.
    const auto loads = s->full_loads();
    CHECK(s->acquire(f.run, f.worker, f.span, std::chrono::milliseconds(0)).full);
    CHECK(s->full_loads() == loads);
  }
  CHECK(s->full_loads() == files.size());
  // Under a 1-byte budget only the file loaded last stays: each load unpinned (and so evicted)
  // the one before it.
  for (std::size_t i = 0; i < files.size(); ++i) CHECK(resident_after[i] == files[i].path + ";");
}

TEST_CASE("store: a failed on-demand load is answered as such for demand_retry_seconds, then tried again") {
  scratch dir("retry");
  const fs::path logdir = dir.path / "logs";
  copy_runs(logdir, {"cpu_only"});
  ks::store_options o;
  o.logdir = logdir.string();
  o.reload_interval_s = 0;
  o.max_memory = 1;  // nothing stays resident: every acquire loads
  o.demand_pin_seconds = 0;
  o.demand_retry_seconds = 0.5;
  ks::store s(o);
  s.start();
  REQUIRE(s.wait_idle(load_timeout));
  const auto f = s.files().at(0);
  REQUIRE(f.state == ks::file_state::loaded);
  const fs::path file = logdir / f.path, away = dir.path / "away.json";
  // The file goes away for a moment (rename keeps its size and mtime): the load fails.
  fs::rename(file, away);
  const ks::full_result failed = s.acquire(f.run, f.worker, f.span, std::chrono::seconds(120));
  CHECK_FALSE(failed.full);
  CHECK(failed.error.find("the file changed since it was loaded") != std::string::npos);
  fs::rename(away, file);
  // At once: the same error, no new load.
  const auto loads = s.full_loads();
  const ks::full_result again = s.acquire(f.run, f.worker, f.span, std::chrono::seconds(120));
  CHECK(again.error == failed.error);
  CHECK(s.full_loads() == loads);
  // After the retry time: loaded.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const ks::full_result later = s.acquire(f.run, f.worker, f.span, std::chrono::seconds(120));
  CHECK(later.error.empty());
  CHECK(later.full);
  CHECK(s.full_loads() == loads + 1);
}

TEST_CASE("store: the Trace view's requests get a loading profile once its timeline is built") {
  scratch dir("early");
  const fs::path logdir = dir.path / "logs";
  copy_runs(logdir, {"resnet50_v100"});
  // The on-demand thread stops after handing the timeline out, until the test lets it go on.
  std::mutex m;
  std::condition_variable cv;
  bool reached = false, go_on = false;
  ks::store_options o;
  o.logdir = logdir.string();
  o.reload_interval_s = 0;
  o.max_memory = 1;
  o.demand_pin_seconds = 30;
  o.on_early_timeline = [&] {
    std::unique_lock lock(m);
    reached = true;
    cv.notify_all();
    cv.wait(lock, [&] { return go_on; });
  };
  ks::store s(o);
  s.start();
  REQUIRE(s.wait_idle(load_timeout));
  const auto f = s.files().at(0);
  const query_t q = {{"run", f.run}, {"worker", f.worker}, {"span", f.span}, {"start", "-1e18"}, {"end", "1e18"},
                     {"px", "200"}};
  auto release = [&] {
    std::lock_guard lock(m);
    go_on = true;
    cv.notify_all();
  };
  struct on_exit {  // never leave the on-demand thread blocked, also when a REQUIRE fails
    std::function<void()> f;
    ~on_exit() { f(); }
  } guard{release};
  const ks::full_result early = s.acquire(f.run, f.worker, f.span, std::chrono::seconds(120), /*timeline_only=*/true);
  REQUIRE(early.full);
  REQUIRE(early.full->timeline);
  {
    std::unique_lock lock(m);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(120), [&] { return reached; }));
  }
  // The views are not computed yet: a request for the whole profile waits (the load is not done).
  CHECK(s.full_loads() == 0);
  const ks::full_result whole = s.acquire(f.run, f.worker, f.span, std::chrono::milliseconds(0));
  CHECK(whole.loading);
  CHECK_FALSE(whole.full);
  // The Trace view's first window is answered meanwhile, as it will be from the whole profile.
  const ks::api_response window = ks::api(s).handle({"timeline", q});
  CHECK(window.status == 200);
  release();
  const ks::full_result done = s.acquire(f.run, f.worker, f.span, std::chrono::seconds(120));
  REQUIRE(done.full);
  CHECK(done.full == early.full);  // the same profile, now complete
  CHECK(s.full_loads() == 1);
  CHECK(done.full->timeline->window_json(-1e18, 1e18, 200) == window.body);
}

TEST_CASE("kinetoscope index writes the index a server writes, with less working memory") {
  // index_trace() leaves out what only requests read (the memory view's range index, the flow
  // tables) and hands the timeline to the writer, which frees it once written: the index must
  // not tell. Same model and timeline columns, same summary (but for this process's figures).
  scratch dir("cli_same");
  const fs::path logdir = dir.path / "logs";
  const fs::path served = dir.path / "served";
  const fs::path indexed = dir.path / "indexed";
  copy_runs(logdir, {"resnet50_v100", "two_ranks", "cpu_only", "nccl_ddp", "amd_mi250", "triton"});
  auto s = started(logdir, served.string());
  REQUIRE(s->files().size() >= 7);
  // The summary without what measures this process: its load time and heap, and the
  // generation (a number per load).
  const auto normalised = [](ks::file_summary x) {
    x.generation = 0;
    x.load_seconds = 0;
    x.full_bytes = 0;
    x.from_index = false;
    for (auto& [key, body] : x.bodies) body = comparable(key.substr(0, key.find('\x1d')), {200, {}, body});
    return ks::summary_to_bytes(x);
  };
  for (const auto& f : s->files()) {
    CAPTURE(f.path);
    REQUIRE(f.index == "written");
    const fs::path trace = logdir / f.path;
    const ks::index_outcome out = ks::index_trace(trace.string(), indexed.string(), std::uint64_t{1} << 34, false);
    REQUIRE_MESSAGE(out.ok, out.error);
    CHECK_FALSE(out.up_to_date);
    const auto key = ks::index_key_of(trace.string());
    REQUIRE(key);
    ks::trace_index a, b;
    REQUIRE(a.open(ks::index_file_path(served.string(), key->path), *key) == ks::index_status::ok);
    REQUIRE(b.open(out.index_file, *key) == ks::index_status::ok);
    const ks::file_summary sa = ks::summary_from_bytes(a.summary_bytes());
    const ks::file_summary sb = ks::summary_from_bytes(b.summary_bytes());
    CHECK(sa.full_bytes > 0);
    CHECK(sb.full_bytes == 0);  // not measured: that profile lacked the server's parts
    CHECK(sb.timeline_error.empty());
    CHECK(sb.bodies.size() == sa.bodies.size());
    CHECK(sb.bodies.count(ks::request_key({"timeline/tracks", {}})) == 1);
    CHECK(normalised(sb) == normalised(sa));

    // (Byte for byte where the records have no padding; empty columns have no data pointer.)
    const auto same_bytes = [](const auto& x, const auto& y) {
      return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0);
    };
    an::trace_model ma, mb;
    REQUIRE(a.read_model(ma));
    REQUIRE(b.read_model(mb));
    CHECK(mb.strings == ma.strings);
    CHECK(same_bytes(mb.events, ma.events));
    CHECK(std::equal(mb.ops.begin(), mb.ops.end(), ma.ops.begin(), ma.ops.end(),
                     [](const an::op_args& x, const an::op_args& y) {
                       return x.input_dims == y.input_dims && x.input_types == y.input_types &&
                              x.call_stack == y.call_stack && x.sequence_nr == y.sequence_nr &&
                              x.fwd_thread_id == y.fwd_thread_id && x.collective == y.collective;
                     }));
    CHECK(mb.kernels.size() == ma.kernels.size());
    CHECK(mb.memory.size() == ma.memory.size());
    ks::timeline_columns ta, tb;
    REQUIRE(a.read_timeline(ta));
    REQUIRE(b.read_timeline(tb));
    CHECK(tb.meta == ta.meta);
    CHECK(same_bytes(tb.lanes, ta.lanes));
    CHECK(same_bytes(tb.lane_events, ta.lane_events));
    CHECK(same_bytes(tb.levels, ta.levels));
    CHECK(same_bytes(tb.items, ta.items));
    CHECK(same_bytes(tb.counter_ts, ta.counter_ts));
    CHECK(same_bytes(tb.counter_values, ta.counter_values));

    // And a server reading that index answers from it.
    CHECK(ks::index_trace(trace.string(), indexed.string(), std::uint64_t{1} << 34, false).up_to_date);
  }
  auto r = started(logdir, indexed.string());
  for (const auto& f : r->files()) CHECK_MESSAGE(f.index == "read", f.path);
}

TEST_CASE("kinetoscope index: the README's xargs recipe fills the cache the server reads") {
  const char* bin = std::getenv("KINETOSCOPE_BIN");
  REQUIRE_MESSAGE(bin != nullptr, "KINETOSCOPE_BIN not set (meson test sets it)");
  scratch dir("xargs");
  const fs::path logdir = dir.path / "logs";
  const fs::path cache = dir.path / "cache";
  copy_runs(logdir, {"resnet50_v100", "two_ranks", "cpu_only"});
  const fs::path out = dir.path / "out.txt";
  const auto run = [&] {
    const std::string cmd = "find '" + logdir.string() + "' -name '*.pt.trace.json*' | xargs -P 2 -n 1 '" +
                            std::string(bin) + "' index --cache_dir '" + cache.string() + "' > '" + out.string() +
                            "' 2>&1";
    const int st = std::system(cmd.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  REQUIRE(run() == 0);
  std::string text = read_bytes(out);
  INFO(text);
  std::size_t indexed = 0;
  for (std::size_t at = text.find(": indexed in "); at != std::string::npos; at = text.find(": indexed in ", at + 1))
    ++indexed;
  CHECK(indexed == 5);

  auto s = started(logdir, cache.string());
  CHECK(s->files().size() == 5);
  for (const auto& f : s->files()) CHECK_MESSAGE(f.index == "read", f.path);
  CHECK(s->full_loads() == 0);

  REQUIRE(run() == 0);
  text = read_bytes(out);
  std::size_t fresh = 0;
  for (std::size_t at = text.find(": up to date"); at != std::string::npos; at = text.find(": up to date", at + 1))
    ++fresh;
  CHECK(fresh == 5);

  // analyze reads the model from the index: the same numbers as a parse.
  const auto analyze = [&](const std::string& flags) {
    const fs::path o = dir.path / "analyze.json";
    const std::string cmd = "'" + std::string(bin) + "' analyze --json " + flags + " '" +
                            (logdir / "resnet50_v100").string() + "' > '" + o.string() + "'";
    REQUIRE(std::system(cmd.c_str()) == 0);
    json j = json::parse(read_bytes(o));
    j["diagnostics"].erase("load_seconds");
    return j;
  };
  const json parsed = analyze("--no_cache");
  CHECK(parsed["overview"]["steps"].size() > 0);
  CHECK(analyze("--cache_dir '" + cache.string() + "'") == parsed);
  // The index really is what was read: with the trace's bytes replaced (same size and mtime,
  // as the key sees them) the answer stays, while a parse fails.
  for (const auto& e : fs::directory_iterator(logdir / "resnet50_v100")) {
    const auto mtime = fs::last_write_time(e.path());
    const std::string original = read_bytes(e.path());
    write_bytes(e.path(), std::string(original.size(), ' '));
    fs::last_write_time(e.path(), mtime);
  }
  CHECK(analyze("--cache_dir '" + cache.string() + "'") == parsed);
  const std::string fail = "'" + std::string(bin) + "' analyze --json --no_cache '" +
                           (logdir / "resnet50_v100").string() + "' > /dev/null 2>&1";
  CHECK(std::system(fail.c_str()) != 0);
  fs::remove_all(logdir / "resnet50_v100");

  // A file that is not a trace fails alone: its command exits 1, which xargs reports as 123.
  copy_runs(logdir, {"resnet50_v100"});
  write_bytes(logdir / "cpu_only" / "junk.pt.trace.json", "{not json");
  CHECK(run() == 123);
  CHECK(read_bytes(out).find("junk.pt.trace.json") != std::string::npos);
}
