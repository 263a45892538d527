// SPDX-License-Identifier: BSD-3-Clause
/// @file bench_index.cpp
/// The persisted index and the memory-bounded store (issue 16), each part in its own child
/// process so that none sees another's heap:
///
/// 1. Cold index of a big trace (gen_big_trace, default 10 GB): `kinetoscope index`'s work
///    (parse, every view, summary, model columns written): wall time and peak RSS against the
///    file. Goals: <= 20 s, peak RSS <= 0.4x the file. "Cold" is the index (none exists); the
///    trace is read once beforehand, as it is right after the job that wrote it, so the figure
///    is kinetoscope's work and not the disk's (the read's own time is printed too).
/// 2. Reopen a 1 GB trace whose index exists: a store starts, reads the summary, and every
///    view's default request is answered. Goal: <= 0.3 s. Then the first timeline window (the
///    model and the timeline's columns read from the index), same goal.
/// 3. A logdir of four 1 GB traces under --max_memory of one of them: every view of every file
///    answered (each timeline opens after its load), RSS peak against the budget.
///
/// Usage: bench_index [--quick] [--cold-mb N] [--mb N] [--no-keep]
///   --quick: cold 300 MB, reopen 100 MB; --cold-mb N (default 10000); --mb N (default 1000);
///   --no-keep: delete generated traces. Prints figures next to their goals; exit 0 unless a
///   step fails (goals are reported, not asserted: timings depend on the machine).

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "analysis/huge_pages.hpp"
#include "server/api.hpp"
#include "server/store.hpp"
#include "server/trace_index.hpp"

#include "bench_process.hpp"
#include "big_trace_file.hpp"

namespace {

using kinetoscope::bench::in_child;
using kinetoscope::bench::max_rss_mb;
using kinetoscope::bench::rss_mb;

namespace fs = std::filesystem;
namespace ks = kinetoscope::server;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

fs::path scratch(const char* tag) {
  const char* tmp = std::getenv("TMPDIR");
  const fs::path p = fs::path(tmp != nullptr ? tmp : "/tmp") /
                     (std::string("kinetoscope_bench_index_") + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

/// Runs `f` in a child process; its exit status.
ks::api_response get(ks::store& s, const std::string& route, std::vector<std::pair<std::string, std::string>> q) {
  for (;;) {
    ks::api_response r = ks::api(s).handle({route, q});
    if (r.status != 503) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

/// Every view's default request of one file (what the web app asks when each view opens).
int all_default_views(ks::store& s, const ks::file_status& f) {
  const std::vector<std::pair<std::string, std::string>> p = {{"run", f.run}, {"worker", f.worker}, {"span", f.span}};
  const auto with = [&](std::vector<std::pair<std::string, std::string>> extra) {
    auto q = p;
    q.insert(q.end(), extra.begin(), extra.end());
    return q;
  };
  int bad = 0;
  const std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> reqs = {
      {"views", {{"run", f.run}}},
      {"overview", p},
      {"operation", with({{"group_by", "Operation"}})},
      {"operation/table", with({{"group_by", "Operation"}})},
      {"kernel", with({{"group_by", "Kernel"}})},
      {"kernel/table", with({{"group_by", "Kernel"}})},
      {"kernel/tc_pie", p},
      {"memory", with({{"memory_metric", "B"}})},
      {"memory_curve", with({{"time_metric", "ms"}, {"memory_metric", "MB"}})},
      {"memory_events", with({{"time_metric", "ms"}, {"memory_metric", "B"}})},
      {"module", p},
      {"recommendations", p},
      {"timeline/tracks", p},
  };
  for (const auto& [route, q] : reqs) {
    const auto r = get(s, route, q);
    if (r.status != 200) {
      std::fprintf(stderr, "bench_index: %s answered %u: %.200s\n", route.c_str(), r.status, r.body.c_str());
      ++bad;
    }
  }
  return bad;
}

int cold_index(double mb, bool keep) {
  std::printf("\nbench_index: cold index of a %.0f MB trace (kinetoscope index's work, one process)\n", mb);
  const std::string trace = bench::ensure_big_trace(bench::big_trace_input(), mb, false);
  const fs::path cache = scratch("cold");
  {  // into the page cache (the parts before this one may have pushed some of it out)
    const auto t0 = clock_type::now();
    std::ifstream in(trace, std::ios::binary);
    std::vector<char> buf(std::size_t{16} << 20);
    std::uint64_t total = 0;
    while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0)
      total += static_cast<std::uint64_t>(in.gcount());
    std::printf("  read beforehand %.1f s (%.0f MB: the trace in the page cache)\n", seconds_since(t0),
                static_cast<double>(total) / 1e6);
  }
  const int rc = in_child("bench_index", [&] {
    const auto t0 = clock_type::now();
    const ks::index_outcome r = ks::index_trace(trace, cache.string(), std::uint64_t{64} << 30, true);
    const double s = seconds_since(t0);
    if (!r.ok) {
      std::fprintf(stderr, "bench_index: %s\n", r.error.c_str());
      return 1;
    }
    const double file_mb = static_cast<double>(fs::file_size(trace)) / 1e6;
    const double peak = max_rss_mb() * 1.048576;  // MiB -> MB, to compare with the file's MB
    std::printf("  file            %.0f MB\n", file_mb);
    std::printf("  indexed in      %.1f s                       goal <= 20 s for 10 GB (%.1f s per GB)\n", s,
                s / (file_mb / 1000));
    std::printf("  peak RSS        %.0f MB = %.2fx the file        goal <= 0.4x\n", peak, peak / file_mb);
    std::printf("  index file      %.0f MB\n", static_cast<double>(fs::file_size(r.index_file)) / 1e6);
    return 0;
  });
  fs::remove_all(cache);
  if (!keep) fs::remove(trace);
  return rc;
}

int reopen(double mb, bool keep) {
  std::printf("\nbench_index: reopen a %.0f MB trace with its index\n", mb);
  const std::string trace = bench::ensure_big_trace(bench::big_trace_input(), mb, false);
  const fs::path dir = scratch("reopen");
  fs::create_directories(dir / "logs" / "big");
  fs::create_symlink(trace, dir / "logs" / "big" / "worker0.pt.trace.json");
  ks::store_options o;
  o.logdir = (dir / "logs").string();
  o.reload_interval_s = 0;
  o.follow_outside_symlinks = true;
  o.cache_dir = (dir / "cache").string();
  int rc = in_child("bench_index", [&] {  // writes the index
    const auto t0 = clock_type::now();
    ks::store s(o);
    s.start();
    s.wait_idle(std::chrono::minutes(10));
    std::printf("  first start     %.2f s (parse + views + index written: %s)\n", seconds_since(t0),
                s.files().at(0).index.c_str());
    return s.files().at(0).index == "written" ? 0 : 1;
  });
  rc |= in_child("bench_index", [&] {
    const auto t0 = clock_type::now();
    ks::store s(o);
    s.start();
    s.wait_idle(std::chrono::minutes(10));
    const double summary_s = seconds_since(t0);
    const auto f = s.files().at(0);
    const int bad = all_default_views(s, f);
    const double views_s = seconds_since(t0);
    std::printf("  reopen          %.3f s to the summary (index %s), %.3f s to every view's default answer   goal <= 0.3 s\n",
                summary_s, f.index.c_str(), views_s);
    std::printf("  RSS             %.0f MB with the summary only (full model not loaded)\n", rss_mb());
    const auto t1 = clock_type::now();
    const auto r = get(s, "timeline", {{"run", f.run}, {"worker", f.worker}, {"span", f.span}, {"start", "-1e18"},
                                       {"end", "1e18"}, {"px", "1920"}});
    std::printf("  Trace view      %.2f s to the first window (model and timeline read from the index)   goal <= 0.3 s\n",
                seconds_since(t1));
    return bad == 0 && r.status == 200 && f.index == "read" ? 0 : 1;
  });
  fs::remove_all(dir);
  if (!keep) fs::remove(trace);
  return rc;
}

int over_budget(double mb, bool keep) {
  std::printf("\nbench_index: four %.0f MB traces under --max_memory of about one\n", mb);
  const std::string trace = bench::ensure_big_trace(bench::big_trace_input(), mb, false);
  const fs::path dir = scratch("budget");
  for (int i = 0; i < 4; ++i) {
    fs::create_directories(dir / "logs" / ("run" + std::to_string(i)));
    fs::create_symlink(trace, dir / "logs" / ("run" + std::to_string(i)) / "worker0.pt.trace.json");
  }
  const int rc = in_child("bench_index", [&] {
    ks::store_options o;
    o.logdir = (dir / "logs").string();
    o.reload_interval_s = 0;
    o.follow_outside_symlinks = true;
    o.cache_dir = (dir / "cache").string();
    // The budget: 1.2x one trace's full profile (measured by a store of one run).
    o.max_memory = static_cast<std::uint64_t>(static_cast<double>(fs::file_size(trace)) * 0.45 * 1.2);
    const auto t0 = clock_type::now();
    ks::store s(o);
    s.start();
    s.wait_idle(std::chrono::minutes(30));
    std::printf("  loaded          %.1f s, %zu files, budget %.0f MB, resident %.0f MB\n", seconds_since(t0),
                s.files().size(), static_cast<double>(o.max_memory) / 1e6,
                static_cast<double>(s.resident_bytes()) / 1e6);
    int bad = 0;
    const auto t1 = clock_type::now();
    for (const auto& f : s.files()) {
      bad += all_default_views(s, f);
      const auto r = get(s, "timeline", {{"run", f.run}, {"worker", f.worker}, {"span", f.span}, {"start", "-1e18"},
                                         {"end", "1e18"}, {"px", "1920"}});
      bad += r.status == 200 ? 0 : 1;
    }
    // (A timeline is answered once the file's timeline is built, before its other views: let
    // the last load finish before counting.)
    const auto last = s.files().back();
    bad += s.acquire(last.run, last.worker, last.span, std::chrono::minutes(30)).full ? 0 : 1;
    std::printf("  every view and every timeline of the 4 files: %.1f s, %llu full loads, %d failures\n",
                seconds_since(t1), static_cast<unsigned long long>(s.full_loads()), bad);
    std::printf("  RSS             %.0f MB now, peak %.0f MB; files together %.0f MB (%.1fx the budget)\n", rss_mb(),
                max_rss_mb(), 4 * static_cast<double>(fs::file_size(trace)) / 1e6,
                4 * static_cast<double>(fs::file_size(trace)) / static_cast<double>(o.max_memory));
    return bad == 0 ? 0 : 1;
  });
  fs::remove_all(dir);
  if (!keep) fs::remove(trace);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  kinetoscope::analysis::configure_heap(argv);  // as the kinetoscope command does
  std::printf("heap: %s\n", kinetoscope::analysis::heap_description().c_str());
  double cold_mb = 10000, mb = 1000;
  bool keep = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      cold_mb = 300;
      mb = 100;
    } else if (a == "--cold-mb" && i + 1 < argc) {
      cold_mb = std::atof(argv[++i]);
    } else if (a == "--mb" && i + 1 < argc) {
      mb = std::atof(argv[++i]);
    } else if (a == "--no-keep") {
      keep = false;
    } else {
      std::fprintf(stderr, "usage: bench_index [--quick] [--cold-mb N] [--mb N] [--no-keep]\n");
      return 2;
    }
  }
  int rc = 0;
  rc |= reopen(mb, keep);
  rc |= over_budget(mb, keep);
  rc |= cold_index(cold_mb, keep);
  return rc;
}
