// SPDX-License-Identifier: BSD-3-Clause
/// @file index.cpp
/// `kinetoscope index`: see index.hpp.
#include "cli/index.hpp"

#include <cstdio>
#include <filesystem>
#include <optional>
#include <ostream>

#include "analysis/discovery.hpp"
#include "analysis/loader.hpp"
#include "server/index_cache.hpp"
#include "server/store.hpp"
#include "server/trace_index.hpp"

namespace kinetoscope::cli {

std::string index_usage() {
  return "usage: kinetoscope index [--cache_dir DIR] [--cache_max SIZE] [--force] [--max_file_size SIZE]\n"
         "                        [--plugin_rules] PATH...\n"
         "  Builds the index of each trace file (a folder: every trace below it) into the cache\n"
         "  folder that `kinetoscope --logdir` reads, so that the server starts without parsing.\n"
         "  One file per process scales out: find LOGDIR -name '*.pt.trace.json*' | xargs -P 8 -n 1\n"
         "  kinetoscope index\n"
         "  --cache_dir DIR       the server's --cache_dir (default: $XDG_CACHE_HOME/kinetoscope,\n"
         "                        else ~/.cache/kinetoscope)\n"
         "  --cache_max SIZE      after each index, evict the least recently used ones of the\n"
         "                        folder until it fits in SIZE, never those written by this run\n"
         "                        (default $KINETOSCOPE_CACHE_MAX, else 5G or a tenth of its disk;\n"
         "                        0: no limit)\n"
         "  --force               rebuild even a valid index\n"
         "  --max_file_size SIZE  refuse larger JSON texts (default 16G), as the server's flag\n"
         "  --plugin_rules        the index of a server started with --plugin_rules (each rule\n"
         "                        set has index files of its own)\n"
         "  Traces under 1 MiB ($KINETOSCOPE_INDEX_MIN_SIZE) are skipped: parsing them is as\n"
         "  fast as reading an index. Prints one line per file; exit status 1 when some file\n"
         "  failed.\n";
}

int run_index(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string cache_dir;
  bool force = false;
  analysis::rule_set rules = analysis::rule_set::kinetoscope;
  std::optional<std::uint64_t> cache_max;
  std::uint64_t max_text = std::uint64_t{16} << 30;
  std::vector<std::string> paths;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string value;
    const auto take = [&](std::string_view flag) {
      if (a.size() > flag.size() && a.compare(0, flag.size(), flag) == 0 && a[flag.size()] == '=') {
        value = a.substr(flag.size() + 1);
        return true;
      }
      if (a == flag && i + 1 < args.size()) {
        value = args[++i];
        return true;
      }
      return false;
    };
    if (a == "--help" || a == "-h") {
      out << index_usage();
      return 0;
    }
    if (a == "--force") {
      force = true;
    } else if (a == "--plugin_rules") {
      rules = analysis::rule_set::plugin;
    } else if (take("--cache_dir")) {
      if (value.empty()) {
        err << "kinetoscope index: --cache_dir is empty\n";
        return 2;
      }
      cache_dir = value;
    } else if (take("--cache_max")) {
      const auto size = analysis::parse_byte_size(value);
      if (!size) {
        err << "kinetoscope index: bad --cache_max '" << value << "'\n";
        return 2;
      }
      cache_max = *size;
    } else if (take("--max_file_size")) {
      const auto size = analysis::parse_byte_size(value);
      if (!size || *size == 0) {
        err << "kinetoscope index: bad --max_file_size '" << value << "'\n";
        return 2;
      }
      max_text = *size;
    } else if (a.starts_with("--")) {
      err << "kinetoscope index: unknown or incomplete flag '" << a << "'\n" << index_usage();
      return 2;
    } else {
      paths.push_back(a);
    }
  }
  if (paths.empty()) {
    err << "kinetoscope index: no trace file given\n" << index_usage();
    return 2;
  }
  if (cache_dir.empty()) cache_dir = server::default_cache_dir();
  if (cache_dir.empty()) {
    err << "kinetoscope index: no cache folder: set --cache_dir, XDG_CACHE_HOME or HOME\n";
    return 2;
  }
  // Folders stand for the trace files below them (as the server discovers them).
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      for (const auto& f : analysis::discover_logdir(p, {}).files)
        if (f.skipped.empty()) files.push_back(f.path);
    } else {
      files.push_back(p);
    }
  }
  const std::uint64_t budget = cache_max ? *cache_max : server::default_cache_max(cache_dir);
  const std::uint64_t min_bytes = server::index_min_trace_bytes();
  int status = 0;
  std::vector<std::string> written;  // this run's indexes: never evicted by this run
  for (const std::string& f : files) {
    const server::index_outcome r = server::index_trace(f, cache_dir, max_text, force, budget, min_bytes, written, rules);
    if (!r.ok) {
      err << "kinetoscope index: " << r.error << '\n';
      status = 1;
      continue;
    }
    if (r.skipped) {
      out << f << ": " << r.note << '\n';
      continue;
    }
    written.push_back(r.index_file);
    if (r.up_to_date) {
      out << f << ": up to date (" << r.index_file << ")\n";
    } else {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.2f", r.seconds);
      out << f << ": indexed in " << secs << " s (" << r.index_file << ")"
          << (r.note.empty() ? "" : "; replaced an index that was " + r.note) << '\n';
    }
    for (const server::cache_entry& e : r.pruned.removed)
      out << "  evicted " << e.file << " (" << server::human_bytes(e.bytes) << ", "
          << (e.source.empty() ? "unreadable" : e.source) << ") to keep the cache under "
          << server::human_bytes(budget) << '\n';
  }
  return status;
}

}  // namespace kinetoscope::cli
