// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// The big input files of the loader/analysis benchmarks, shared by bench_loader and
// bench_analyze: generated once by gen_big_trace.cpp into $TMPDIR (default /tmp) and reused.
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

/// Defined in gen_big_trace.cpp (compiled into the benchmark with KINETOSCOPE_GEN_NO_MAIN).
std::uint64_t generate_big_trace(const std::string& input, const std::string& out_path, double size_mb, bool gzip);
/// Also there: a synthetic trace of many small CPU events (same_ts: all at one ts).
std::uint64_t generate_small_events_trace(const std::string& out_path, double size_mb, bool same_ts);

#ifndef KINETOSCOPE_REAL_TRACES_DIR
#define KINETOSCOPE_REAL_TRACES_DIR "../shared"
#endif

namespace bench {

/// Flags common to the big-trace benchmarks: --quick (100 MB only), --no-keep (delete the files).
struct big_trace_args {
  bool quick = false;
  bool keep = true;
};

inline big_trace_args parse_big_trace_args(int argc, char** argv) {
  big_trace_args a;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) a.quick = true;
    if (std::strcmp(argv[i], "--no-keep") == 0) a.keep = false;
  }
  return a;
}

/// The trace the big files replicate: resnet50_v100's first span ($KINETOSCOPE_REAL_TRACES, else
/// ../shared beside the checkout).
inline std::string big_trace_input() {
  const char* real = std::getenv("KINETOSCOPE_REAL_TRACES");
  return std::string(real != nullptr ? real : KINETOSCOPE_REAL_TRACES_DIR) +
         "/traces/resnet50_v100/worker0.1623143089861.pt.trace.json.gz";
}

/// The path of the `mb`-megabyte replica of `input` ("kinetoscope_bench_<mb>MB.pt.trace.json[.gz]"),
/// generating it first when missing or too small.
inline std::string ensure_big_trace(const std::string& input, double mb, bool gzip) {
  namespace fs = std::filesystem;
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/kinetoscope_bench_" +
                           std::to_string(static_cast<int>(mb)) + "MB.pt.trace.json" + (gzip ? ".gz" : "");
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (!ec && (gzip ? size > 1000000 : static_cast<double>(size) >= mb * 1e6)) return path;
  const auto t0 = std::chrono::steady_clock::now();
  // In a child: the generator holds the input as an nlohmann DOM, and the heap it leaves behind
  // would otherwise count in the RSS of every later (forked) measurement.
  const pid_t pid = fork();
  if (pid == 0) {
    try {
      generate_big_trace(input, path, mb, gzip);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gen_big_trace: %s\n", e.what());
      _exit(1);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("cannot generate " + path);
  std::printf("  generated %s in %.1f s\n", path.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return path;
}

/// The path of the `mb`-megabyte trace of many small CPU events
/// ("kinetoscope_bench_small_<mb>MB.pt.trace.json"), generating it first when missing.
inline std::string ensure_small_events_trace(double mb) {
  namespace fs = std::filesystem;
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/kinetoscope_bench_small_" +
                           std::to_string(static_cast<int>(mb)) + "MB.pt.trace.json";
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (!ec && static_cast<double>(size) >= mb * 1e6) return path;
  const auto t0 = std::chrono::steady_clock::now();
  generate_small_events_trace(path, mb, false);  // streamed: leaves no heap behind
  std::printf("  generated %s in %.1f s\n", path.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return path;
}

}  // namespace bench
