// SPDX-License-Identifier: BSD-3-Clause
/// @file bench_loader.cpp
/// Loader throughput and memory on big traces made by gen_big_trace (ResNet-50 steps
/// replicated): 100 MB, 300 MB and 1 GB uncompressed, plus 300 MB gzip. Each load runs in a
/// forked child, so the peak RSS (ru_maxrss) printed is that load's alone. Files are cached in
/// $TMPDIR (default /tmp) as kinetoscope_bench_<N>MB.pt.trace.json[.gz] and reused.
/// Goal (issue): <= 2 s per GB for the loader, peak RSS <= file size + model. Columns: wall
/// seconds, CPU seconds (user + system, both threads: big files are read or inflated on a
/// second thread while parsing), MB/s of JSON text, peak RSS in MB (10^6 bytes) and its ratio
/// to the text size.
///
/// Usage: bench_loader [--quick] [--no-keep]   (--quick: 100 MB only; --no-keep: delete the files)

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
#include <thread>
#include <vector>

#include "analysis/huge_pages.hpp"
#include "analysis/loader.hpp"

#include "big_trace_file.hpp"

namespace {

namespace fs = std::filesystem;
using kinetoscope::analysis::load_trace;

struct result {
  double seconds = 0;
  double cpu_seconds = 0;  ///< user + system, all threads
  std::uint64_t events = 0;
  std::uint64_t strings = 0;
  std::uint64_t model_bytes = 0;
  long max_rss_kb = 0;
  int ok = 0;
};

/// Loads `path` in a child process; returns its figures.
result measure(const std::string& path, const kinetoscope::analysis::load_options& options) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    result r;
    const auto t0 = std::chrono::steady_clock::now();
    auto loaded = load_trace(path, options);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (loaded.model) {
      r.ok = 1;
      r.events = loaded.model->events.size();
      r.strings = loaded.model->strings.size();
      r.model_bytes = loaded.model->heap_bytes();  // (untouched spare capacity not counted)
    } else {
      std::fprintf(stderr, "%s\n", loaded.error->message().c_str());
    }
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    r.max_rss_kb = ru.ru_maxrss;
    r.cpu_seconds = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                    static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
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

}  // namespace

int main(int argc, char** argv) {
  kinetoscope::analysis::configure_heap(argv);  // as the kinetoscope command does
  std::printf("heap: %s\n", kinetoscope::analysis::heap_description().c_str());
  const auto [quick, keep] = bench::parse_big_trace_args(argc, argv);
  const std::string input = bench::big_trace_input();
  struct job {
    double mb;
    bool gzip;
  };
  std::vector<job> jobs = {{100, false}};
  if (!quick) jobs = {{100, false}, {300, false}, {1000, false}, {300, true}};
  std::printf("bench_loader: load_trace on ResNet-50 steps replicated (gen_big_trace)\n");
  std::printf("(plain texts twice: split between two readers, then one reader; the default on this machine: %s)\n",
              kinetoscope::analysis::default_split_min_bytes() > 0 ? "split from 64 MiB" : "one reader (one hardware thread)");
  std::printf("hardware threads: %u\n", std::thread::hardware_concurrency());
  std::printf("%-40s %-8s %8s %7s %6s %7s %9s %9s %9s %8s\n", "file", "readers", "MB", "load s", "CPU s", "MB/s", "events",
              "model MB", "peak RSS", "RSS/text");
  std::vector<std::string> made;
  try {
    for (const job& j : jobs) {
      const std::string path = bench::ensure_big_trace(input, j.mb, j.gzip);
      made.push_back(path);
      // For gzip inputs MB/s is counted on the uncompressed text (the work done).
      const double file_mb = static_cast<double>(fs::file_size(path)) / 1e6;
      const double text_mb = j.gzip ? j.mb : file_mb;
      measure(path, {});  // warm the page cache
      for (const bool split : {true, false}) {
        if (!split && j.gzip) continue;  // gzip is always read by one reader
        const result r = measure(path, {.split_min_bytes = split ? std::uint64_t{64} << 20 : 0});
        if (r.ok == 0) {
          std::printf("%-44s load failed\n", path.c_str());
          continue;
        }
        const double rss_mb = static_cast<double>(r.max_rss_kb) / 1024.0 * 1.048576;
        std::printf("%-40s %-8s %8.1f %7.2f %6.2f %7.0f %9llu %9.1f %9.1f %8.2f\n", fs::path(path).filename().c_str(),
                    split && !j.gzip ? "two" : "one", file_mb, r.seconds, r.cpu_seconds, text_mb / r.seconds,
                    static_cast<unsigned long long>(r.events), static_cast<double>(r.model_bytes) / 1e6, rss_mb,
                    rss_mb / text_mb);
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_loader: %s\n", e.what());
    return 1;
  }
  if (!keep) {
    for (const auto& p : made) fs::remove(p);
  }
  return 0;
}
