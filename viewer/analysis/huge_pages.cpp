// SPDX-License-Identifier: BSD-3-Clause
/// @file huge_pages.cpp
/// See huge_pages.hpp.
#include "analysis/huge_pages.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string_view>

#if defined(__GLIBC__)
#include <gnu/libc-version.h>
#include <malloc.h>
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KINETOSCOPE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define KINETOSCOPE_SANITIZED 1
#endif
#endif

namespace kinetoscope::analysis {
namespace {

constexpr std::string_view tunable = "glibc.malloc.hugetlb";
/// Set for the re-executed process: a guard against an exec loop should the C library drop
/// GLIBC_TUNABLES from the environment.
constexpr const char* guard_variable = "KINETOSCOPE_HUGE_PAGES_REEXEC";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

/// The value GLIBC_TUNABLES gives `tunable` ("name=value" items separated by ':').
[[maybe_unused]] std::optional<std::string> tunable_value(std::string_view all) {
  while (!all.empty()) {
    const std::size_t colon = all.find(':');
    const std::string_view item = all.substr(0, colon);
    if (item.size() > tunable.size() && item.starts_with(tunable) && item[tunable.size()] == '=')
      return std::string(item.substr(tunable.size() + 1));
    if (colon == std::string_view::npos) break;
    all.remove_prefix(colon + 1);
  }
  return std::nullopt;
}

/// The kernel's THP mode: the bracketed word of /sys/kernel/mm/transparent_hugepage/enabled
/// ("always", "madvise" or "never"), empty when the file is absent or unreadable.
[[maybe_unused]] std::string thp_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(in, line)) return "";
  const std::size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  return line.substr(open + 1, close - open - 1);
}

struct decision {
  bool on = false;      ///< huge pages are in use now
  bool reexec = false;  ///< not yet, but re-executing with the tunable turns them on
  std::string why;      ///< when neither: the reason
};

decision decide() {
  decision d;
#if defined(KINETOSCOPE_SANITIZED)
  d.why = "sanitizer build: its allocator is not glibc's";
  return d;
#elif !defined(__GLIBC__)
  d.why = "not glibc";
  return d;
#else
  const std::string mode = thp_mode();
  if (mode.empty() || mode == "never") {
    d.why = mode.empty() ? "the kernel has no transparent huge pages"
                         : "transparent huge pages are off: /sys/kernel/mm/transparent_hugepage/enabled says never";
    return d;
  }
  if (const auto v = tunable_value(env("GLIBC_TUNABLES"))) {
    if (*v == "1") d.on = true;
    else d.why = "GLIBC_TUNABLES sets " + std::string(tunable) + "=" + *v;
    return d;
  }
  if (env("KINETOSCOPE_HUGE_PAGES") == "0") {
    d.why = "KINETOSCOPE_HUGE_PAGES=0";
    return d;
  }
  int major = 0, minor = 0;
  const char* version = gnu_get_libc_version();
  if (std::sscanf(version, "%d.%d", &major, &minor) != 2 || major < 2 || (major == 2 && minor < 35)) {
    d.why = std::string("glibc ") + version + " has no " + std::string(tunable) + " (2.35 and later)";
    return d;
  }
  if (!env(guard_variable).empty()) {
    d.why = "re-executed with GLIBC_TUNABLES, but the C library did not keep it";
    return d;
  }
  d.reexec = true;
  return d;
#endif
}

}  // namespace

void configure_heap(char** argv) noexcept {
  try {
    const decision d = decide();
#if defined(__GLIBC__)
    // One arena: glibc madvises huge pages only for the main arena's heap and for mmap()ed
    // chunks; the other arenas (one per thread that meets a locked arena, up to 8 per core) get
    // 4 KiB pages. Measured with two loader threads, 32 rank traces: 866 000 faults with
    // several arenas, 163 000 with one, cold start 14 -> 11 s. Small blocks come from the
    // per-thread caches (tcache) without the arena lock.
    if (d.on) mallopt(M_ARENA_MAX, 1);
#endif
    if (!d.reexec || argv == nullptr || argv[0] == nullptr) return;
    const std::string before = env("GLIBC_TUNABLES");
    const bool had = std::getenv("GLIBC_TUNABLES") != nullptr;
    const std::string value = (before.empty() ? "" : before + ":") + std::string(tunable) + "=1";
    if (::setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0 || ::setenv(guard_variable, "1", 1) != 0) return;
    // By its real path, so that the process keeps its name (ps, top); /proc/self/exe if that
    // is gone (the file was replaced since).
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
      self[n] = '\0';
      ::execv(self, argv);
    }
    ::execv("/proc/self/exe", argv);
    // The exec failed (no /proc, say): carry on as we are, with the environment as it was.
    if (had) ::setenv("GLIBC_TUNABLES", before.c_str(), 1);
    else ::unsetenv("GLIBC_TUNABLES");
    ::unsetenv(guard_variable);
  } catch (...) {
    // Out of memory before main's work began: carry on without huge pages.
  }
}

std::string heap_description() {
  const decision d = decide();
  if (d.on) return "transparent huge pages (" + std::string(tunable) + "=1, one malloc arena)";
  if (d.reexec) return "default pages (re-executing with " + std::string(tunable) + "=1 failed)";
  return "default pages (" + d.why + ")";
}

}  // namespace kinetoscope::analysis
