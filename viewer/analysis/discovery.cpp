// SPDX-License-Identifier: BSD-3-Clause
#include "analysis/discovery.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "analysis/loader.hpp"

namespace kinetoscope::analysis {

namespace {

namespace fs = std::filesystem;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/// What stat() says about a path (following symlinks).
struct file_stat {
  bool ok = false;
  bool is_dir = false;
  bool is_file = false;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::uint64_t dev = 0, ino = 0;
};

file_stat stat_path(const std::string& path) {
  struct stat sb {};
  file_stat st;
  if (::stat(path.c_str(), &sb) != 0) return st;
  st.ok = true;
  st.is_dir = S_ISDIR(sb.st_mode);
  st.is_file = S_ISREG(sb.st_mode);
  st.size = static_cast<std::uint64_t>(sb.st_size);
  st.mtime_ns = static_cast<std::int64_t>(sb.st_mtim.tv_sec) * 1000000000 + sb.st_mtim.tv_nsec;
  st.dev = static_cast<std::uint64_t>(sb.st_dev);
  st.ino = static_cast<std::uint64_t>(sb.st_ino);
  return st;
}

/// sniff_trace() results by path, valid while size and mtime are unchanged (the server calls
/// discover() every few seconds; each sniff reads and maybe gunzips 64 KB).
struct sniff_cache {
  std::mutex mutex;
  std::unordered_map<std::string, std::tuple<std::uint64_t, std::int64_t, bool>> entries;
};

sniff_cache& cache() {
  static sniff_cache c;
  return c;
}

bool sniff_cached(const std::string& path, const file_stat& st) {
  {
    std::lock_guard<std::mutex> lock(cache().mutex);
    auto it = cache().entries.find(path);
    if (it != cache().entries.end() && std::get<0>(it->second) == st.size && std::get<1>(it->second) == st.mtime_ns) {
      return std::get<2>(it->second);
    }
  }
  const bool is_trace = sniff_trace(path);
  std::lock_guard<std::mutex> lock(cache().mutex);
  if (cache().entries.size() > 100000) cache().entries.clear();
  cache().entries[path] = {st.size, st.mtime_ns, is_trace};
  return is_trace;
}

/// The entry for one file (span not numbered yet), or nullopt when it is not a trace.
std::optional<trace_file> make_entry(const std::string& path, const std::string& name, const std::string& run,
                                     const file_stat& st) {
  if (!st.is_file || ends_with(name, ".tmp")) return std::nullopt;
  trace_file f;
  if (auto parts = parse_trace_name(name)) {
    f.worker = parts->worker;
    f.raw_span = parts->raw_span;
  } else if ((ends_with(name, ".json") || ends_with(name, ".json.gz")) && sniff_cached(path, st)) {
    f.worker = name.substr(0, name.size() - (ends_with(name, ".gz") ? 8 : 5));
  } else {
    return std::nullopt;
  }
  f.path = path;
  f.run = run;
  f.span = f.raw_span.empty() ? "default" : "";
  f.size = st.size;
  f.mtime_ns = st.mtime_ns;
  return f;
}

/// The logdir made absolute, normalised, without a trailing '/'.
std::string normal_root(const std::string& logdir) {
  std::error_code ec;
  const fs::path root = fs::absolute(logdir, ec);
  if (ec) return {};
  std::string s = root.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::string root_name_of(const std::string& root) {
  std::string name = fs::path(root).filename().string();
  return name.empty() ? root : name;
}

/// Whether `p` equals `root` or lies below it (both canonical, absolute).
bool is_within(const std::string& p, const std::string& root) {
  if (root == "/") return true;
  return p == root || (p.size() > root.size() && p.compare(0, root.size(), root) == 0 && p[root.size()] == '/');
}

struct walker {
  std::string root;  ///< absolute logdir, no trailing '/'
  std::string root_name;
  std::string canonical_root;  ///< root with every symlink resolved
  discover_options options;
  std::chrono::steady_clock::time_point deadline;
  std::size_t entries = 0;
  bool stopped = false;
  bool depth_noted = false;
  std::size_t notes_dropped = 0;
  /// (dev, inode) of the directories on the current path: a symlink back to one of them is a
  /// loop. (A directory reachable by two routes is listed under both, as os.walk does.)
  std::set<std::pair<std::uint64_t, std::uint64_t>> ancestors;
  discover_result out;

  std::string rel(const std::string& path) const {
    return path.size() > root.size() ? path.substr(root.size() + 1) : std::string(".");
  }

  void note(std::string text) {
    if (out.notes.size() < 100) out.notes.push_back(std::move(text));
    else ++notes_dropped;
  }

  /// Whether the symlink at `path` leads outside the logdir (true also when it cannot be resolved).
  bool leads_outside(const std::string& path) const {
    std::error_code ec;
    const fs::path target = fs::canonical(path, ec);
    return ec || !is_within(target.string(), canonical_root);
  }

  void walk(const std::string& dir, const std::string& run, int depth) {
    const file_stat st = stat_path(dir);
    if (!st.ok || !st.is_dir) return;
    if (depth > options.max_depth) {
      if (!depth_noted) note(rel(dir) + ": deeper than " + std::to_string(options.max_depth) + " levels below the logdir, not searched");
      depth_noted = true;
      return;
    }
    const std::pair<std::uint64_t, std::uint64_t> id{st.dev, st.ino};
    if (!ancestors.insert(id).second) return;  // symlink loop
    list_dir(dir, run, depth);
    ancestors.erase(id);
  }

  /// Counts one entry against the bounds; false once the walk must stop.
  bool budget() {
    if (stopped) return false;
    if (++entries > options.max_entries) {
      stopped = true;
      note("stopped after " + std::to_string(options.max_entries) + " directory entries; files beyond them are not listed");
    } else if ((entries & 63) == 1 && std::chrono::steady_clock::now() > deadline) {
      stopped = true;
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%.1f", static_cast<double>(options.max_time.count()) / 1000.0);
      note(std::string("stopped after ") + seconds + " s of searching; files beyond are not listed");
    }
    return !stopped;
  }

  void unlisted(const std::string& dir, const std::error_code& ec) {
    out.unlisted_dirs.push_back(dir);
    out.unlisted_errors.push_back(ec.value());
    note(rel(dir) + ": cannot be listed (" + ec.message() + ")");
  }

  void list_dir(const std::string& dir, const std::string& run, int depth) {
    std::error_code ec;
    fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
    if (ec) return unlisted(dir, ec);
    std::vector<std::string> names;
    for (; it != fs::directory_iterator(); it.increment(ec)) {
      if (ec) return unlisted(dir, ec);
      if (!budget()) return;
      names.push_back(it->path().filename().string());
    }
    std::sort(names.begin(), names.end());
    std::vector<std::string> subdirs;
    for (const std::string& name : names) {
      const std::string path = dir + "/" + name;
      struct stat lsb {};
      if (::lstat(path.c_str(), &lsb) != 0) continue;
      if (S_ISLNK(lsb.st_mode) && !options.follow_outside_symlinks && leads_outside(path)) {
        const file_stat target = stat_path(path);  // (only its kind: nothing is read)
        if (target.ok && target.is_dir) {
          note(rel(path) + ": a directory symlink leading outside the logdir, not followed (--follow_symlinks)");
        } else if (auto parts = parse_trace_name(name); parts && !ends_with(name, ".tmp")) {
          trace_file f;
          f.path = path;
          f.run = run;
          f.worker = parts->worker;
          f.raw_span = parts->raw_span;
          f.span = f.raw_span.empty() ? "default" : "";
          f.mtime_ns = static_cast<std::int64_t>(lsb.st_mtim.tv_sec) * 1000000000 + lsb.st_mtim.tv_nsec;
          f.skipped = "a symlink leading outside the logdir, not followed (--follow_symlinks)";
          out.files.push_back(std::move(f));
        } else if (ends_with(name, ".json") || ends_with(name, ".json.gz")) {
          note(rel(path) + ": a symlink leading outside the logdir, not read (--follow_symlinks)");
        }
        continue;
      }
      const file_stat fst = stat_path(path);
      if (!fst.ok) continue;
      if (fst.is_dir) {
        subdirs.push_back(name);
        continue;
      }
      if (auto f = make_entry(path, name, run, fst)) out.files.push_back(std::move(*f));
    }
    for (const std::string& sub : subdirs) {
      if (stopped) return;
      walk(dir + "/" + sub, run == root_name && dir == root ? sub : run + "/" + sub, depth + 1);
    }
  }
};

}  // namespace

std::optional<trace_name> parse_trace_name(std::string_view basename) {
  trace_name out;
  std::string_view stem;
  if (ends_with(basename, ".pt.trace.json")) {
    stem = basename.substr(0, basename.size() - 14);
  } else if (ends_with(basename, ".pt.trace.json.gz")) {
    stem = basename.substr(0, basename.size() - 17);
    out.gzip_suffix = true;
  } else {
    return std::nullopt;
  }
  // (.*?)(\.\d+)? : the shortest worker whose remainder is empty or one ".digits" group, i.e.
  // the last dotted all-digit component is the span.
  const std::size_t dot = stem.rfind('.');
  if (dot != std::string_view::npos && all_digits(stem.substr(dot + 1))) {
    out.worker = std::string(stem.substr(0, dot));
    out.raw_span = std::string(stem.substr(dot + 1));
  } else {
    out.worker = std::string(stem);
  }
  return out;
}

bool sniff_trace(const std::string& path) {
  const std::optional<std::string> head = read_text_head(path, 64 * 1024);
  if (!head) return false;
  std::string_view s = *head;
  if (s.substr(0, 3) == "\xEF\xBB\xBF") s.remove_prefix(3);
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  if (s.empty()) return false;
  if (s.front() == '{') return s.find("\"traceEvents\"") != std::string_view::npos;
  if (s.front() != '[') return false;
  s.remove_prefix(1);
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  if (s.empty() || s.front() != '{') return false;
  s.remove_prefix(1);
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s.substr(0, 6) == "\"name\"" || s.substr(0, 4) == "\"ph\"";
}

std::vector<trace_file> discover(const std::string& logdir) {
  discover_options o;
  o.follow_outside_symlinks = true;
  return discover_logdir(logdir, o).files;
}

discover_result discover_logdir(const std::string& logdir, const discover_options& options) {
  try {
    const std::string root_str = normal_root(logdir);
    if (root_str.empty()) return {};
    walker w;
    w.root = root_str;
    w.root_name = root_name_of(root_str);
    w.options = options;
    w.deadline = std::chrono::steady_clock::now() + options.max_time;
    std::error_code ec;
    w.canonical_root = fs::canonical(root_str, ec).string();
    if (ec) w.canonical_root = root_str;
    w.walk(root_str, w.root_name, 0);
    if (w.notes_dropped > 0) w.out.notes.push_back("... and " + std::to_string(w.notes_dropped) + " more");
    w.out.complete = !w.stopped;
    std::vector<trace_file>& found = w.out.files;

    // Span numbering per (run, worker): raw spans sorted as strings -> "1", "2", ...
    std::map<std::pair<std::string, std::string>, std::vector<std::string>> spans;
    for (const trace_file& f : found) {
      if (!f.raw_span.empty()) spans[{f.run, f.worker}].push_back(f.raw_span);
    }
    for (auto& [key, list] : spans) {
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
    }
    for (trace_file& f : found) {
      if (f.raw_span.empty()) {
        f.span = "default";
        continue;
      }
      const auto& list = spans[{f.run, f.worker}];
      const auto pos = std::lower_bound(list.begin(), list.end(), f.raw_span) - list.begin();
      f.span = std::to_string(pos + 1);
    }
    std::stable_sort(found.begin(), found.end(), [](const trace_file& a, const trace_file& b) {
      return std::tie(a.run, a.worker, a.raw_span) < std::tie(b.run, b.worker, b.raw_span);
    });
    return std::move(w.out);
  } catch (const std::exception&) {
    discover_result r;
    r.complete = false;
    return r;
  }
}

std::optional<trace_file> classify(const std::string& path, const std::string& logdir) {
  try {
    const std::string root = normal_root(logdir);
    const std::string file = normal_root(path);
    if (root.empty() || file.empty()) return std::nullopt;
    const fs::path parent = fs::path(file).parent_path();
    std::string run;
    if (parent.string() == root) {
      run = root_name_of(root);
    } else {
      const fs::path rel = parent.lexically_relative(root);
      if (rel.empty() || *rel.begin() == "..") return std::nullopt;  // not under the logdir
      run = rel.string();
    }
    return make_entry(file, fs::path(file).filename().string(), run, stat_path(file));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace kinetoscope::analysis
