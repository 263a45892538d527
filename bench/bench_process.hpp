// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file bench_process.hpp
/// What the benchmarks that measure memory share: this process's resident and peak set, and
/// running a measurement in a child process (a clean heap: neither sees the other's freed pages).

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

namespace kinetoscope::bench {

/// Current resident set (VmRSS) in MB, from /proc/self/status.
inline double rss_mb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  return 0;
}

/// Peak resident set of this process in MB (getrusage).
inline double max_rss_mb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

/// Runs `fn` (returning an exit status) in a child process; its exit status. An exception in
/// the child is printed with `tool` as prefix and gives 1.
template <class F>
int in_child(const char* tool, F&& fn) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    int rc = 1;
    try {
      rc = fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", tool, e.what());
    }
    std::fflush(stdout);
    _exit(rc);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

}  // namespace kinetoscope::bench
