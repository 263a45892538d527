// SPDX-License-Identifier: BSD-3-Clause
/// @file bench_timeline.cpp
/// The windowed trace timeline (viewer/server/timeline.hpp) on the big traces of gen_big_trace
/// (ResNet-50 steps replicated, shared with bench_loader / bench_analyze in $TMPDIR): time and
/// RSS of building the index, then the median time of window requests (JSON included) at
/// 1920 px over the full range, 10 %, 1 % and 0.01 % of it, over track subsets, and of search
/// and event requests. Goal (issue #4): every window request <= 100 ms on a loaded 1 GB trace.
///
/// Usage: bench_timeline [--quick] [--no-keep]   (--quick: 100 MB instead of 1 GB;
/// KINETOSCOPE_BENCH_MB=<n> picks any size; --no-keep deletes the generated file)


#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "analysis/huge_pages.hpp"
#include "analysis/loader.hpp"
#include "server/timeline.hpp"

#include "bench_process.hpp"
#include "big_trace_file.hpp"

namespace {

namespace an = kinetoscope::analysis;
using clock_type = std::chrono::steady_clock;
using kinetoscope::bench::max_rss_mb;
using kinetoscope::bench::rss_mb;

double since_ms(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

/// Median of `runs` calls of `fn` in ms; `bytes` = size of the last answer.
double median_ms(int runs, const std::function<std::size_t()>& fn, std::size_t& bytes) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto start = clock_type::now();
    bytes = fn();
    t.push_back(since_ms(start));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// A number after `"key":` in `json` (the answers are flat enough for this), or -1.
double field(const std::string& json, const std::string& key) {
  const auto p = json.find("\"" + key + "\":");
  if (p == std::string::npos) return -1;
  return std::strtod(json.c_str() + p + key.size() + 3, nullptr);
}

std::size_t count_slices(const std::string& json) {
  const auto p = json.find("\"count\":[");
  if (p == std::string::npos) return 0;
  std::size_t n = json.compare(p + 9, 1, "]") == 0 ? 0 : 1;
  for (std::size_t i = p + 9; i < json.size() && json[i] != ']'; ++i) n += json[i] == ',' ? 1 : 0;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  kinetoscope::analysis::configure_heap(argv);  // as the kinetoscope command does
  std::printf("heap: %s\n", kinetoscope::analysis::heap_description().c_str());
  const auto [quick, keep] = bench::parse_big_trace_args(argc, argv);
  double mb = quick ? 100 : 1000;
  if (const char* env = std::getenv("KINETOSCOPE_BENCH_MB"); env != nullptr && std::atof(env) > 0) mb = std::atof(env);
  try {
    const std::string path = bench::ensure_big_trace(bench::big_trace_input(), mb, false);
    auto t = clock_type::now();
    auto loaded = an::load_trace(path);
    if (!loaded.model) {
      std::fprintf(stderr, "bench_timeline: %s\n", loaded.error->message().c_str());
      return 1;
    }
    const an::trace_model& model = *loaded.model;
    std::printf("bench_timeline: %s (%zu events), loaded in %.0f ms, RSS %.0f MB\n", path.c_str(),
                model.events.size(), since_ms(t), rss_mb());
    const double before = rss_mb();
    t = clock_type::now();
    const kinetoscope::server::timeline tl(model);
    const double build_ms = since_ms(t);
    const auto st = tl.stats();
    std::printf("  build: %.0f ms, RSS +%.0f MB (index %.0f MB; %zu tracks, %zu lanes, %zu slices, %zu level items), peak RSS %.0f MB\n",
                build_ms, rss_mb() - before, static_cast<double>(st.memory_bytes) / 1e6, st.tracks, st.lanes,
                st.slices, st.level_items, max_rss_mb());
    std::size_t bytes = 0;
    const double tracks_ms = median_ms(7, [&] { return tl.tracks_json().size(); }, bytes);
    const std::string tracks = tl.tracks_json();
    const double duration = field(tracks, "duration");
    std::printf("  tracks_json: %.2f ms (%zu bytes), duration %.0f us\n", tracks_ms, bytes, duration);

    struct window_case {
      const char* label;
      double from, width;  // fractions of the duration
      std::vector<int> tracks;
    };
    const std::vector<window_case> cases = {
        {"full range", 0, 1, {}},          {"10 %", 0.45, 0.1, {}},    {"1 %", 0.45, 0.01, {}},
        {"0.01 %", 0.45, 0.0001, {}},      {"full, track 0", 0, 1, {0}}, {"10 %, tracks 0-1", 0.45, 0.1, {0, 1}},
    };
    for (const auto& c : cases) {
      const double a = duration * c.from, b = a + duration * c.width;
      std::string last;
      const double ms = median_ms(7, [&] {
        last = tl.window_json(a, b, 1920, c.tracks);
        return last.size();
      }, bytes);
      std::printf("  window %-18s 1920 px: %7.2f ms median of 7, %6zu slices, %8zu bytes, merge_us %.3g%s\n", c.label, ms,
                  count_slices(last), bytes, field(last, "merge_us"),
                  last.find("\"truncated\":true") != std::string::npos ? " (truncated)" : "");
    }
    {
      std::string last;
      const double ms = median_ms(3, [&] {
        last = tl.window_json(0, duration, 1920, {}, 20000, false);
        return last.size();
      }, bytes);
      std::printf("  window full range without levels of detail: %.2f ms median of 3, %zu slices\n", ms, count_slices(last));
    }
    for (const char* q : {"conv", "cudaLaunchKernel", "no such name"}) {
      std::string last;
      const double ms = median_ms(5, [&] {
        last = tl.search_json(q, 200);
        return last.size();
      }, bytes);
      std::printf("  search %-18s %7.2f ms median of 5, total %.0f\n", q, ms, field(last, "total"));
    }
    t = clock_type::now();
    const auto first = tl.event_json(static_cast<std::uint32_t>(model.events.size() / 2));
    std::printf("  event_json: first call (builds the flow indexes) %.1f ms", since_ms(t));
    const double ev_ms = median_ms(7, [&] {
      std::size_t n = 0;
      for (std::uint32_t i = 0; i < 100; ++i) n += tl.event_json(static_cast<std::uint32_t>(model.events.size() / 3 + i * 97))->size();
      return n;
    }, bytes);
    std::printf(", then %.3f ms per event (%zu bytes first answer)\n", ev_ms / 100, first ? first->size() : 0);
    std::printf("  peak RSS %.0f MB\n", max_rss_mb());
    if (!keep) std::filesystem::remove(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_timeline: %s\n", e.what());
    return 1;
  }
  return 0;
}
