// SPDX-License-Identifier: BSD-3-Clause
/// @file bench_server.cpp
/// The viewer server's store and JSON API on a big trace made by gen_big_trace (ResNet-50 steps
/// replicated, default about 1 GB): time until the store has loaded it (load + op tree + every
/// view + timeline index, all at load time) and the process RSS, then for every view route the
/// first and the repeated request (ms; the repeat is served from the body cache) and the body
/// size. Goal (issue #4): every view request <= 50 ms on a loaded 1 GB trace, first included.
/// Prints figures only.
///
/// Then the same load on a trace of many small CPU events (gen_big_trace --small: ~2.4 M
/// short nested cpu_ops in 300 MB), the shape where the server's resident size is largest
/// against the file: the RSS after load, its ratio to the file size (goal: <= 1x the file) and
/// where the bytes go (model, op tree, timeline index, memory index). Each trace is measured in
/// its own child process, so neither sees the other's freed heap.
///
/// Usage: bench_server [--quick] [--mb N] [--small-mb N] [--no-keep]
///   --quick: 100 MB and 30 MB; --mb N: N MB (also $KINETOSCOPE_BENCH_MB); --small-mb N: the
///   small-events trace's size (default 300); --no-keep: delete the files.

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/huge_pages.hpp"
#include "server/api.hpp"
#include "server/store.hpp"
#include "server/timeline.hpp"

#include "bench_process.hpp"
#include "big_trace_file.hpp"

namespace {

using kinetoscope::bench::in_child;
using kinetoscope::bench::max_rss_mb;
using kinetoscope::bench::rss_mb;

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using kinetoscope::server::api;
using kinetoscope::server::api_request;
using kinetoscope::server::api_response;

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}


/// A logdir in $TMPDIR holding `trace` as big/worker0.pt.trace.json (a symlink).
fs::path make_logdir(const std::string& trace, const char* tag) {
  const char* tmp = std::getenv("TMPDIR");
  const fs::path logdir = fs::path(tmp != nullptr ? tmp : "/tmp") /
                          (std::string("kinetoscope_bench_server_") + tag + std::to_string(::getpid()));
  fs::remove_all(logdir);
  fs::create_directories(logdir / "big");
  fs::create_symlink(trace, logdir / "big" / "worker0.pt.trace.json");
  return logdir;
}

/// Starts `s` and waits (10 minutes at most) for the one trace of its logdir: the wall time in
/// ms, or a negative value when the trace did not load (the reason printed). A timeout sets
/// `status` to 1.
double start_and_load(kinetoscope::server::store& s, int& status) {
  const auto t0 = clock_type::now();
  s.start();
  if (!s.wait_idle(std::chrono::minutes(10))) {
    std::fprintf(stderr, "bench_server: the store did not finish loading in 10 minutes\n");
    status = 1;
  }
  const double load_ms = ms_since(t0);
  const auto files = s.files();
  if (files.empty() || files.front().state != kinetoscope::server::file_state::loaded) {
    std::fprintf(stderr, "bench_server: the trace did not load: %s\n", files.empty() ? "no file" : files.front().error.c_str());
    return -1;
  }
  return load_ms;
}

/// The many-small-events trace: load time, RSS against the file size, and the byte breakdown.
int run_small_events(double mb, bool keep) {
  std::printf("\nbench_server: store on a %.0f MB trace of many small CPU events\n", mb);
  const std::string trace = bench::ensure_small_events_trace(mb);
  const fs::path logdir = make_logdir(trace, "small_");
  const double rss_before = rss_mb();
  kinetoscope::server::store_options options;
  options.logdir = logdir.string();
  options.reload_interval_s = 0;
  options.follow_outside_symlinks = true;
  int status = 0;
  {
    kinetoscope::server::store s(options);
    const double load_ms = start_and_load(s, status);
    if (load_ms < 0) {
      fs::remove_all(logdir);
      return 1;
    }
    const auto files = s.files();
    const auto full = s.find(files.front().run, files.front().worker, files.front().span);
    const auto& p = *full;
    const double file_mb = static_cast<double>(files.front().size) / 1e6;
    const double rss = rss_mb() - rss_before;
    std::printf("  file            %.1f MB, %zu events (%.0f bytes per event)\n", file_mb, p.model.events.size(),
                static_cast<double>(files.front().size) / static_cast<double>(std::max<std::size_t>(p.model.events.size(), 1)));
    std::printf("  store load      %.0f ms\n", load_ms);
    std::printf("  RSS             %.0f MB after load (+%.0f MB over the empty process), peak %.0f MB\n", rss_mb(), rss,
                max_rss_mb());
    std::printf("  RSS / file      %.2fx (goal <= 1x the file)\n", rss / file_mb);
    const double per = 1e6 / static_cast<double>(std::max<std::size_t>(p.model.events.size(), 1));
    const auto line = [&](const char* what, std::size_t bytes) {
      std::printf("    %-14s %7.1f MB  %6.1f bytes/event\n", what, static_cast<double>(bytes) / 1e6,
                  static_cast<double>(bytes) / 1e6 * per);
    };
    std::printf("  heap by table (accounted, capacities):\n");
    line("model", p.model.heap_bytes());
    line("timeline", p.timeline ? p.timeline->stats().memory_bytes : 0);
    line("memory index", p.memory_index.memory_bytes());
    line("kept in all", p.heap_bytes());
    // Not kept after the load: rebuilt on demand (call stacks, Diff), then cached within a budget.
    const auto t0 = std::chrono::steady_clock::now();
    const auto trees = s.trees(full);
    const double tree_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    line("op tree", trees->heap_bytes());
    std::printf("  op tree on demand %.0f ms (call stacks, Diff; not kept after the load)\n", tree_ms);
  }
  fs::remove_all(logdir);
  if (!keep) fs::remove(trace);
  return status;
}

/// The ResNet-shaped trace: store load, RSS, then every view route.
int run_resnet(double mb, bool keep);

}  // namespace

int main(int argc, char** argv) {
  kinetoscope::analysis::configure_heap(argv);  // as the kinetoscope command does
  std::printf("heap: %s\n", kinetoscope::analysis::heap_description().c_str());
  const bench::big_trace_args args = bench::parse_big_trace_args(argc, argv);
  double mb = args.quick ? 100 : 1000;
  double small_mb = args.quick ? 30 : 300;
  if (const char* env = std::getenv("KINETOSCOPE_BENCH_MB")) mb = std::strtod(env, nullptr);
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--mb") == 0) mb = std::strtod(argv[i + 1], nullptr);
    if (std::strcmp(argv[i], "--small-mb") == 0) small_mb = std::strtod(argv[i + 1], nullptr);
  }
  if (!(mb >= 1) || !(small_mb >= 1)) {
    std::fprintf(stderr, "bench_server: --mb and --small-mb want a size >= 1\n");
    return 2;
  }
  const int a = in_child("bench_server", [&] { return run_resnet(mb, args.keep); });
  const int b = in_child("bench_server", [&] { return run_small_events(small_mb, args.keep); });
  return a != 0 ? a : b;
}

namespace {

int run_resnet(double mb, bool keep) {
  std::printf("bench_server: store + JSON API on a %.0f MB trace\n", mb);
  const std::string trace = bench::ensure_big_trace(bench::big_trace_input(), mb, false);
  const fs::path logdir = make_logdir(trace, "");

  const double rss_before = rss_mb();
  kinetoscope::server::store_options options;
  options.logdir = logdir.string();
  options.reload_interval_s = 0;
  options.follow_outside_symlinks = true;  // the trace lives in $TMPDIR, linked in
  int status = 0;
  {
    kinetoscope::server::store s(options);
    const double load_ms = start_and_load(s, status);
    if (load_ms < 0) {
      fs::remove_all(logdir);
      return 1;
    }
    const auto files = s.files();
    std::printf("  file            %.1f MB, %zu events\n", static_cast<double>(files.front().size) / 1e6,
                s.find(files.front().run, files.front().worker, files.front().span)->model.events.size());
    std::printf("  store load      %.0f ms (load + op tree + views + timeline, in the background)\n", load_ms);
    std::printf("  RSS             %.0f MB after load (%.0f MB before), peak %.0f MB\n", rss_mb(), rss_before,
                max_rss_mb());

    const api a(s);
    using query = std::vector<std::pair<std::string, std::string>>;
    const query q = {{"run", "big"}, {"worker", "worker0"}, {"span", "default"}};
    auto with = [](query base, std::vector<std::pair<std::string, std::string>> extra) {
      for (auto& e : extra) base.push_back(std::move(e));
      return base;
    };
    double duration = 0;
    {
      api_request r{"timeline/tracks", q};
      const api_response tracks = a.handle(r);
      if (tracks.status == 200) duration = nlohmann::json::parse(tracks.body).value("duration", 0.0);
    }
    double first_ts = 0;
    {
      api_request r{"memory_curve", q};
      const api_response curve = a.handle(r);
      if (curve.status == 200) first_ts = nlohmann::json::parse(curve.body)["metadata"].value("first_ts", 0.0);
    }
    const std::string range_start = std::to_string(first_ts + duration * 0.25);
    const std::string range_end = std::to_string(first_ts + duration * 0.75);
    const std::string full = std::to_string(duration);
    const std::string zoom_start = std::to_string(duration * 0.5);
    const std::string zoom_end = std::to_string(duration * 0.5 + 10000);
    const std::vector<std::pair<std::string, query>> routes = {
        {"runs", {}},
        {"status", {}},
        {"views", {{"run", "big"}}},
        {"overview", q},
        {"operation", with(q, {{"group_by", "Operation"}})},
        {"operation/table", with(q, {{"group_by", "Operation"}})},
        {"operation/table", with(q, {{"group_by", "OperationAndInputShape"}})},
        {"kernel", with(q, {{"group_by", "Kernel"}})},
        {"kernel/table", with(q, {{"group_by", "Kernel"}})},
        {"kernel/table", with(q, {{"group_by", "KernelNameAndOpName"}})},
        {"kernel/tc_pie", q},
        {"memory", with(q, {{"memory_metric", "KB"}})},
        {"memory", with(q, {{"start_ts", range_start}, {"end_ts", range_end}})},
        {"memory_curve", with(q, {{"time_metric", "ms"}, {"memory_metric", "MB"}})},
        {"memory_events", with(q, {{"time_metric", "ms"}, {"memory_metric", "KB"}})},
        {"module", q},
        {"recommendations", q},
        {"diagnostics", q},
        {"diffnode", with(q, {{"exp_run", "big"}, {"exp_worker", "worker0"}, {"exp_span", "default"}})},
        {"timeline/tracks", q},
        {"timeline", with(q, {{"start", "0"}, {"end", full}, {"px", "2000"}})},
        {"timeline", with(q, {{"start", zoom_start}, {"end", zoom_end}, {"px", "2000"}})},
        {"timeline/search", with(q, {{"q", "conv"}, {"limit", "200"}})},
        {"timeline/event", with(q, {{"id", "12345"}})},
    };
    std::printf("\n  %-18s %-34s %9s %9s %10s %6s\n", "route", "query", "first ms", "again ms", "bytes", "status");
    double worst_first = 0;
    for (const auto& [route, params] : routes) {
      std::string shown;
      for (const auto& [k, v] : params)
        if (k != "run" && k != "worker" && k != "span") shown += k + "=" + v.substr(0, 12) + " ";
      api_request r{route, params};
      auto t = clock_type::now();
      const api_response first = a.handle(r);
      const double first_ms = ms_since(t);
      t = clock_type::now();
      const api_response again = a.handle(r);
      const double again_ms = ms_since(t);
      if (route != "runs" && route != "status" && route != "views") worst_first = std::max(worst_first, first_ms);
      std::printf("  %-18s %-34s %9.2f %9.3f %10zu %6u\n", route.c_str(), shown.substr(0, 34).c_str(), first_ms,
                  again_ms, first.body.size(), again.status);
    }
    std::printf("\n  slowest first view request: %.1f ms (goal <= 50 ms)\n", worst_first);
  }
  fs::remove_all(logdir);
  if (!keep) fs::remove(trace);
  return status;
}

}  // namespace
