// SPDX-License-Identifier: BSD-3-Clause
/// @file index_cache.cpp
/// The index cache folder: see index_cache.hpp.
#include "server/index_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <signal.h>
#include <system_error>

#include "analysis/loader.hpp"
#include "server/trace_index.hpp"

namespace kinetoscope::server {

namespace fs = std::filesystem;

namespace {

std::int64_t mtime_ns(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

/// The writer's pid of a temporary `<name>.ksidx.tmp.<pid>.<n>`; 0 when the name is not one.
long temporary_pid(std::string_view name) {
  const std::size_t at = name.find(".ksidx.tmp.");
  if (at == std::string_view::npos) return 0;
  std::string_view rest = name.substr(at + 11);
  const std::size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string_view::npos) return 0;
  long pid = 0;
  for (char c : rest.substr(0, dot)) {
    if (c < '0' || c > '9' || pid > 1'000'000'000) return 0;
    pid = pid * 10 + (c - '0');
  }
  for (char c : rest.substr(dot + 1))
    if (c < '0' || c > '9') return 0;
  return pid;
}

bool process_alive(long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

std::uint64_t sum_bytes(const std::vector<cache_entry>& entries) {
  std::uint64_t s = 0;
  for (const cache_entry& e : entries) s += e.bytes;
  return s;
}

std::string state_of(const index_header_info& h) {
  if (h.version != index_format_version) return "version";
  if (h.source.starts_with("span:")) return "current";  // a span's bodies: checked when read
  const std::optional<index_key> k = index_key_of(h.source);
  return k && k->size == h.source_size && k->mtime_ns == h.source_mtime_ns ? "current" : "stale";
}

std::optional<std::uint64_t> size_from_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return analysis::parse_byte_size(v);
}

}  // namespace

std::uint64_t default_cache_max(const std::string& cache_dir, std::string* why) {
  if (const auto env = size_from_env("KINETOSCOPE_CACHE_MAX")) {
    if (why != nullptr) *why = "$KINETOSCOPE_CACHE_MAX";
    return *env;
  }
  // The file system of the folder, or of its nearest existing parent (not created yet).
  fs::path p = cache_dir.empty() ? fs::path(".") : fs::path(cache_dir);
  struct statvfs vfs {};
  while (::statvfs(p.c_str(), &vfs) != 0 && p.has_parent_path() && p != p.parent_path()) p = p.parent_path();
  const std::uint64_t total = static_cast<std::uint64_t>(vfs.f_blocks) * vfs.f_frsize;
  if (total > 0 && total / 10 < default_cache_max_bytes) {
    if (why != nullptr) *why = "a tenth of the " + human_bytes(total) + " file system";
    return total / 10;
  }
  if (why != nullptr) *why = "the default";
  return default_cache_max_bytes;
}

std::uint64_t index_min_trace_bytes() {
  return size_from_env("KINETOSCOPE_INDEX_MIN_SIZE").value_or(default_index_min_trace_bytes);
}

std::vector<cache_entry> list_cache(const std::string& cache_dir) {
  std::vector<cache_entry> out;
  std::error_code ec;
  for (fs::directory_iterator it(cache_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ".ksidx") continue;
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    cache_entry e;
    e.file = p.string();
    e.bytes = static_cast<std::uint64_t>(st.st_size);
    e.used_ns = mtime_ns(st);
    if (const std::optional<index_header_info> h = read_index_header(e.file)) {
      e.source = h->source;
      e.state = state_of(*h);
    } else {
      e.state = "unreadable";
    }
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const cache_entry& a, const cache_entry& b) {
    return a.used_ns != b.used_ns ? a.used_ns > b.used_ns : a.file < b.file;
  });
  return out;
}

std::size_t remove_stale_temporaries(const std::string& cache_dir, std::chrono::seconds min_age) {
  std::size_t removed = 0;
  const std::int64_t now = now_ns();
  std::error_code ec;
  for (fs::directory_iterator it(cache_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    const long pid = temporary_pid(p.filename().string());
    if (pid <= 0) continue;
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (now - mtime_ns(st) < std::chrono::duration_cast<std::chrono::nanoseconds>(min_age).count()) continue;
    if (process_alive(pid)) continue;
    if (::unlink(p.c_str()) == 0) ++removed;
  }
  return removed;
}

void remove_stale_temporaries_once(const std::string& cache_dir) {
  static std::mutex mutex;
  static std::set<std::string> done;
  {
    std::lock_guard lock(mutex);
    if (!done.insert(cache_dir).second) return;
  }
  remove_stale_temporaries(cache_dir);
}

std::optional<std::string> small_trace_note(std::uint64_t trace_bytes, std::uint64_t min_bytes) {
  if (trace_bytes >= min_bytes) return std::nullopt;
  return "skipped: the trace is under " + human_bytes(min_bytes) + ", parsed as fast as its index would be read";
}

prune_outcome prune_cache(const std::string& cache_dir, std::uint64_t max_bytes, const std::vector<std::string>& keep) {
  prune_outcome out;
  out.temporaries_removed = remove_stale_temporaries(cache_dir);
  std::vector<cache_entry> entries = list_cache(cache_dir);
  out.bytes_before = out.bytes_after = sum_bytes(entries);
  if (max_bytes == 0) return out;
  // Oldest use first.
  for (auto it = entries.rbegin(); it != entries.rend() && out.bytes_after > max_bytes; ++it) {
    if (std::find(keep.begin(), keep.end(), it->file) != keep.end()) continue;
    if (::unlink(it->file.c_str()) != 0) {
      if (errno == ENOENT) out.bytes_after -= it->bytes;  // another process removed it
      continue;
    }
    out.bytes_after -= it->bytes;
    out.removed.push_back(*it);
  }
  return out;
}

prune_outcome clear_cache(const std::string& cache_dir) {
  prune_outcome out;
  out.temporaries_removed = remove_stale_temporaries(cache_dir, std::chrono::seconds(0));
  std::vector<cache_entry> entries = list_cache(cache_dir);
  out.bytes_before = out.bytes_after = sum_bytes(entries);
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (::unlink(it->file.c_str()) != 0 && errno != ENOENT) continue;
    out.bytes_after -= it->bytes;
    out.removed.push_back(*it);
  }
  return out;
}

void mark_used(const std::string& file) noexcept { ::utimensat(AT_FDCWD, file.c_str(), nullptr, 0); }

std::string human_bytes(std::uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace kinetoscope::server
