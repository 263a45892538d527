// SPDX-License-Identifier: BSD-3-Clause
/// @file bench_job.cpp
/// A distributed job of many ranks (issue 16): gen_dist_job's writer makes N ranks of M MB each
/// (default 256 x 50 MB) with injected stragglers; then, each in its own child process:
///
/// 1. cold: a store with an empty cache folder (every trace parsed and indexed, two loader
///    threads, --max_memory 1 GB) until the Distributed view of the job is answered (the plugin's
///    four panels and the Ranks section, asked at once as the page does). Goals: <= 60 s,
///    RSS <= 2 GB.
/// 2. warm: the same with the indexes present (and the span's Distributed bodies that the cold
///    run's requests wrote beside them). Goals: <= 2 s, RSS <= 2 GB.
///
/// Both print whether the stragglers reported are exactly the injected ones.
///
/// Usage: bench_job [--quick] [--ranks N] [--mb N] [--no-keep] [--keep-cache] [--warm-only]
///   --quick: 16 ranks x 5 MB. The job stays in $TMPDIR/kinetoscope_bench_job_<N>x<M> for the next
///   run unless --no-keep; --keep-cache keeps its indexes too, and --warm-only then measures the
///   warm start alone (for profiling it).

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_process.hpp"
#include "dist_job_writer.hpp"
#include "analysis/huge_pages.hpp"
#include "server/api.hpp"
#include "server/store.hpp"

namespace {

using kinetoscope::bench::in_child;
using kinetoscope::bench::max_rss_mb;
using kinetoscope::bench::rss_mb;

namespace fs = std::filesystem;
namespace ks = kinetoscope::server;
namespace kb = kinetoscope::bench;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

/// (rank, step index, cause) of each injected straggler within the job's steps.
using finding = std::tuple<int, int, std::string>;

kb::dist_job_options job_options(int ranks, double mb) {
  kb::dist_job_options o;
  o.ranks = ranks;
  o.steps = 0;
  o.mb_per_rank = mb;
  // As gen_dist_job: three ranks, three causes, periodic steps.
  o.slow_compute = {ranks / 3, {}, 0.4};
  o.slow_loader = {(2 * ranks) / 3, {}, 15'000};
  o.slow_comm = {ranks - 1, {}, 5'000};
  for (int s = 2; s < 100000; s += 7) o.slow_compute.steps.insert(s);
  for (int s = 4; s < 100000; s += 9) o.slow_loader.steps.insert(s);
  for (int s = 5; s < 100000; s += 11) o.slow_comm.steps.insert(s);
  return o;
}

std::set<finding> injected(const kb::dist_job_options& o, int steps) {
  std::set<finding> out;
  const auto add = [&](const kb::dist_straggler& s, const char* cause) {
    for (int step : s.steps)
      if (step < steps) out.emplace(s.rank, step, cause);
  };
  add(o.slow_compute, "compute");
  add(o.slow_loader, "data loading");
  add(o.slow_comm, "communication");
  return out;
}

ks::api_response get(ks::store& s, const std::string& route, std::vector<std::pair<std::string, std::string>> q) {
  for (;;) {
    ks::api_response r = ks::api(s).handle({route, q});
    if (r.status != 503) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

/// Starts a store on the job and answers the Distributed view; prints the figures.
int serve_job(const fs::path& logdir, const fs::path& cache, const char* label, double goal_s,
              const std::set<finding>& expected) {
  ks::store_options o;
  o.logdir = logdir.string();
  o.reload_interval_s = 0;
  o.cache_dir = cache.string();
  o.loader_threads = 2;
  o.max_memory = std::uint64_t{1} << 30;
  const auto t0 = clock_type::now();
  ks::store s(o);
  s.start();
  if (!s.wait_idle(std::chrono::minutes(30))) return 1;
  const double loaded_s = seconds_since(t0);
  std::size_t read = 0, failed = 0;
  for (const auto& f : s.files()) {
    read += f.index == "read" ? 1 : 0;
    failed += f.state == ks::file_state::failed ? 1 : 0;
  }
  const auto views = get(s, "views", {{"run", "job"}});
  int bad = views.status == 200 && views.body.find("Distributed") != std::string::npos ? 0 : 1;
  const auto spans = nlohmann::json::parse(get(s, "spans", {{"run", "job"}, {"worker", "All"}}).body);
  const std::string span = spans.empty() ? "" : spans.at(0).get<std::string>();
  // As the page asks: the four panels and the Ranks section at once (the server answers on
  // several threads).
  const std::vector<std::string> routes = {"distributed/gpuinfo", "distributed/overlap", "distributed/waittime",
                                           "distributed/commops", "distributed/ranks"};
  std::vector<ks::api_response> answers(routes.size());
  {
    std::vector<std::thread> asks;
    for (std::size_t i = 0; i < routes.size(); ++i)
      asks.emplace_back([&, i] { answers[i] = get(s, routes[i], {{"run", "job"}, {"span", span}}); });
    for (std::thread& t : asks) t.join();
  }
  const double ready_s = seconds_since(t0);
  for (std::size_t i = 0; i + 1 < routes.size(); ++i) bad += answers[i].status == 200 ? 0 : 1;
  const ks::api_response& ranks = answers.back();
  bad += ranks.status == 200 ? 0 : 1;
  if (ranks.status != 200) std::fprintf(stderr, "bench_job: /distributed/ranks answered %u: %.300s\n", ranks.status, ranks.body.c_str());
  std::set<finding> reported;
  const nlohmann::json body = ranks.status == 200 ? nlohmann::json::parse(ranks.body) : nlohmann::json::object();
  if (body.contains("stragglers"))
    for (const auto& st : body.at("stragglers"))
      reported.emplace(st.at("rank").get<int>(), st.at("step_index").get<int>(), st.at("cause").get<std::string>());
  std::printf("  %-5s files loaded in %.1f s (%zu from indexes, %zu failed); Distributed view ready in %.1f s   goal <= %.0f s\n",
              label, loaded_s, read, failed, ready_s, goal_s);
  std::printf("        the span's Distributed bodies %s\n",
              s.span_cache_reads() > 0 ? "read from the cache folder" : "computed (and written to the cache folder)");
  std::printf("        RSS %.0f MB now, peak %.0f MB                                  goal <= 2048 MB\n", rss_mb(),
              max_rss_mb());
  std::printf("        stragglers: %zu reported, %zu injected, %s\n", reported.size(), expected.size(),
              reported == expected ? "exactly the injected ones" : "DIFFERENT from the injected ones");
  const auto list = [](const std::set<finding>& a, const std::set<finding>& b) {
    std::string out;
    for (const finding& f : a)
      if (b.count(f) == 0)
        out += " rank " + std::to_string(std::get<0>(f)) + " step " + std::to_string(std::get<1>(f)) + " " + std::get<2>(f) + ";";
    return out;
  };
  if (reported != expected)
    std::printf("        missing:%s\n        extra:%s\n", list(expected, reported).c_str(), list(reported, expected).c_str());
  return bad == 0 && failed == 0 && reported == expected ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  kinetoscope::analysis::configure_heap(argv);  // as the kinetoscope command does
  std::printf("heap: %s\n", kinetoscope::analysis::heap_description().c_str());
  int ranks = 256;
  double mb = 50;
  bool keep = true;
  bool keep_cache = false;
  bool warm_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      ranks = 16;
      mb = 5;
    } else if (a == "--ranks" && i + 1 < argc) {
      ranks = std::atoi(argv[++i]);
    } else if (a == "--mb" && i + 1 < argc) {
      mb = std::atof(argv[++i]);
    } else if (a == "--no-keep") {
      keep = false;
    } else if (a == "--keep-cache") {
      keep_cache = true;
    } else if (a == "--warm-only") {
      warm_only = true;
    } else {
      std::fprintf(stderr, "usage: bench_job [--quick] [--ranks N] [--mb N] [--no-keep] [--keep-cache] [--warm-only]\n");
      return 2;
    }
  }
  const char* tmp = std::getenv("TMPDIR");
  const fs::path root = fs::path(tmp != nullptr ? tmp : "/tmp") /
                        ("kinetoscope_bench_job_" + std::to_string(ranks) + "x" + std::to_string(static_cast<int>(mb)));
  const fs::path logdir = root / "logs";
  const fs::path cache = root / "cache";
  const kb::dist_job_options o = job_options(ranks, mb);
  std::printf("bench_job: %d ranks x %.0f MB\n", ranks, mb);
  int steps = 0;
  const fs::path stamp = root / "steps";
  if (std::ifstream in(stamp); in && (in >> steps) && steps > 0 && fs::exists(logdir / "job")) {
    std::printf("  job             reused %s (%d steps)\n", logdir.c_str(), steps);
  } else {
    fs::remove_all(root);
    const auto t0 = clock_type::now();
    const kb::dist_job_report rep = kb::write_dist_job(logdir / "job", o);
    steps = rep.steps;
    std::ofstream(stamp) << steps;
    std::printf("  job             written in %.1f s: %d steps, %.0f MB, %llu collectives per rank\n", seconds_since(t0),
                steps, static_cast<double>(rep.bytes) / 1e6, static_cast<unsigned long long>(rep.collectives_per_rank));
  }
  const std::set<finding> expected = injected(o, steps);
  int rc = 0;
  if (!warm_only) {
    fs::remove_all(cache);
    rc |= in_child("bench_job", [&] { return serve_job(logdir, cache, "cold", 60, expected); });
  }
  rc |= in_child("bench_job", [&] { return serve_job(logdir, cache, "warm", 2, expected); });
  if (!keep_cache) fs::remove_all(cache);
  if (!keep) fs::remove_all(root);
  return rc;
}
