// SPDX-License-Identifier: BSD-3-Clause
/// @file bench_analyze.cpp
/// Time of every stage of `kinetoscope analyze` on big traces made by gen_big_trace (ResNet-50
/// steps replicated): 100 MB, 300 MB and 1 GB. Each size runs in a forked child, so the peak RSS
/// (ru_maxrss) printed is that size's alone. Files are shared with bench_loader:
/// $TMPDIR (default /tmp)/kinetoscope_bench_<N>MB.pt.trace.json, generated when missing.
/// Stages: load, build_op_tree, then each view sequentially (overview, recommendations,
/// operators = by name + by name and input shape, kernels = by name + by operator, memory,
/// modules), then compute_report (the same views on two threads). "total" = load + tree +
/// report, what `kinetoscope analyze` spends; "seq" = load + tree + the sequential views.
/// Goal (issue): 1 GB loaded and every view computed in <= 3 s on 2 cores.
///
/// Usage: bench_analyze [--quick] [--no-keep]   (--quick: 100 MB only; --no-keep: delete the files)

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/huge_pages.hpp"
#include "analysis/kernel_view.hpp"
#include "analysis/loader.hpp"
#include "analysis/memory_view.hpp"
#include "analysis/module_view.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/operator_view.hpp"
#include "analysis/overview.hpp"
#include "analysis/recommendations.hpp"
#include "analysis/report.hpp"

#include "big_trace_file.hpp"

namespace {

namespace fs = std::filesystem;
namespace an = kinetoscope::analysis;

enum stage : int { load, tree, overview, recs, operators, kernels, memory, modules, report, stage_count };
const char* const stage_names[stage_count] = {"load", "tree", "overview", "recs", "operators",
                                              "kernels", "memory", "modules", "report"};

struct result {
  double seconds[stage_count] = {};
  std::uint64_t events = 0;
  std::uint64_t check = 0;  ///< row counts, so nothing is optimised away
  long max_rss_kb = 0;
  int ok = 0;
};

using clock_type = std::chrono::steady_clock;

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// Runs every stage on `path` in a child process; returns its figures.
result measure(const std::string& path) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    result r;
    auto t = clock_type::now();
    auto loaded = an::load_trace(path);
    r.seconds[load] = since(t);
    if (loaded.model) {
      const an::trace_model& model = *loaded.model;
      r.ok = 1;
      r.events = model.events.size();
      t = clock_type::now();
      const an::op_trees trees = an::build_op_tree(model);
      r.seconds[tree] = since(t);
      {
        t = clock_type::now();
        const an::overview_result ov = an::compute_overview(model, trees);
        r.seconds[overview] = since(t);
        t = clock_type::now();
        r.check += an::compute_recommendations(model, trees, ov).size() + ov.steps.size();
        r.seconds[recs] = since(t);
      }
      t = clock_type::now();
      {
        const bool device_columns = an::operator_view_has_device_columns(model, trees);
        r.check += an::operators_by_name(model, trees, device_columns).size();
        r.check += an::operators_by_name_and_input_shape(model, trees, device_columns).size();
      }
      r.seconds[operators] = since(t);
      t = clock_type::now();
      r.check += an::kernels_by_name(model, trees).size();
      r.check += an::kernels_by_name_and_operator(model, trees).size();
      r.seconds[kernels] = since(t);
      t = clock_type::now();
      r.check += an::compute_memory(model, trees).devices.size();
      r.seconds[memory] = since(t);
      t = clock_type::now();
      r.check += an::compute_module_view(model, trees).rows.size();
      r.seconds[modules] = since(t);
      t = clock_type::now();
      {
        const an::full_report rep = an::compute_report(model, trees);
        r.check += rep.operators_by_name.size();
      }
      r.seconds[report] = since(t);
    } else {
      std::fprintf(stderr, "%s\n", loaded.error->message().c_str());
    }
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    r.max_rss_kb = ru.ru_maxrss;
    if (write(fds[1], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  result r;
  if (read(fds[0], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) r = {};
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return r;
}

std::string size_label(double mb) {
  return mb >= 1000 ? std::to_string(static_cast<int>(mb / 1000)) + " GB"
                    : std::to_string(static_cast<int>(mb)) + " MB";
}

}  // namespace

int main(int argc, char** argv) {
  kinetoscope::analysis::configure_heap(argv);  // as the kinetoscope command does
  std::printf("heap: %s\n", kinetoscope::analysis::heap_description().c_str());
  const auto [quick, keep] = bench::parse_big_trace_args(argc, argv);
  const std::string input = bench::big_trace_input();
  std::vector<double> sizes = {100};
  if (!quick) sizes = {100, 300, 1000};
  std::printf("bench_analyze: load + op tree + every view on ResNet-50 steps replicated (gen_big_trace)\n");
  std::printf("  total = load + tree + report (views on 2 threads); seq = load + tree + views one by one\n");
  std::vector<std::string> made;
  try {
    for (const double mb : sizes) {
      const std::string path = bench::ensure_big_trace(input, mb, false);
      made.push_back(path);
      measure(path);  // warm the page cache
      const result r = measure(path);
      if (r.ok == 0) {
        std::printf("analyze %s: load failed\n", size_label(mb).c_str());
        continue;
      }
      double views = 0;
      for (int s = overview; s <= modules; ++s) views += r.seconds[s];
      const double base = r.seconds[load] + r.seconds[tree];
      std::printf("analyze %s:", size_label(mb).c_str());
      for (int s = 0; s < stage_count; ++s) std::printf(" %s %.2f s,", stage_names[s], r.seconds[s]);
      const double rss_mb = static_cast<double>(r.max_rss_kb) * 1024.0 / 1e6;
      std::printf(" seq %.2f s, total %.2f s, peak RSS %.2f GB (%llu events)\n", base + views,
                  base + r.seconds[report], rss_mb / 1000.0, static_cast<unsigned long long>(r.events));
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_analyze: %s\n", e.what());
    return 1;
  }
  if (!keep) {
    for (const auto& p : made) fs::remove(p);
  }
  return 0;
}
