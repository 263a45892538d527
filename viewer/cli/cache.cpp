// SPDX-License-Identifier: BSD-3-Clause
/// @file cache.cpp
/// `kinetoscope cache`: see cache.hpp.
#include "cli/cache.hpp"

#include <ctime>
#include <optional>
#include <ostream>

#include "analysis/loader.hpp"
#include "nlohmann/json.hpp"
#include "server/index_cache.hpp"
#include "server/trace_index.hpp"

namespace kinetoscope::cli {

namespace {

std::string local_time(std::int64_t ns) {
  const std::time_t t = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

nlohmann::ordered_json entry_json(const server::cache_entry& e) {
  return {{"file", e.file}, {"bytes", e.bytes}, {"used_ns", e.used_ns}, {"source", e.source}, {"state", e.state}};
}

}  // namespace

std::string cache_usage() {
  return "usage: kinetoscope cache [list|prune|clear] [--cache_dir DIR] [--cache_max SIZE] [--json]\n"
         "  The folder of persisted indexes that `kinetoscope --logdir` and `kinetoscope index`\n"
         "  write (default: $XDG_CACHE_HOME/kinetoscope, else ~/.cache/kinetoscope).\n"
         "  list    (default) each index, most recently used first: size, last use, state\n"
         "          (current, stale: the trace changed or is gone, version: another format)\n"
         "          and the trace it indexes; then the total against the budget\n"
         "  prune   evict the least recently used indexes until the folder fits the budget\n"
         "  clear   remove every index (and temporaries whose writer is gone)\n"
         "  --cache_max SIZE  the budget (default $KINETOSCOPE_CACHE_MAX, else 5G or a tenth of\n"
         "                    the disk; 0: no limit)\n"
         "  --json            print the listing or what was removed as JSON\n";
}

int run_cache(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string action = "list", cache_dir;
  std::optional<std::uint64_t> cache_max;
  bool json = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const auto value = [&](const char* flag) -> std::optional<std::string> {
      const std::string f(flag);
      if (a.starts_with(f + "=")) return a.substr(f.size() + 1);
      if (a == f && i + 1 < args.size()) return args[++i];
      return std::nullopt;
    };
    if (a == "--help" || a == "-h") {
      out << cache_usage();
      return 0;
    }
    if (a == "list" || a == "prune" || a == "clear") {
      action = a;
    } else if (a == "--json") {
      json = true;
    } else if (auto v = value("--cache_dir")) {
      if (v->empty()) {
        err << "kinetoscope cache: --cache_dir is empty\n";
        return 2;
      }
      cache_dir = *v;
    } else if (auto m = value("--cache_max")) {
      cache_max = analysis::parse_byte_size(*m);
      if (!cache_max) {
        err << "kinetoscope cache: bad --cache_max '" << *m << "'\n";
        return 2;
      }
    } else {
      err << "kinetoscope cache: unknown argument '" << a << "'\n" << cache_usage();
      return 2;
    }
  }
  if (cache_dir.empty()) cache_dir = server::default_cache_dir();
  if (cache_dir.empty()) {
    err << "kinetoscope cache: no cache folder: set --cache_dir, XDG_CACHE_HOME or HOME\n";
    return 2;
  }
  std::string why;
  const std::uint64_t budget = cache_max ? *cache_max : server::default_cache_max(cache_dir, &why);
  if (cache_max) why = "--cache_max";
  const std::string limit = budget == 0 ? "no limit" : server::human_bytes(budget) + " (" + why + ")";

  if (action == "list") {
    const std::vector<server::cache_entry> entries = server::list_cache(cache_dir);
    std::uint64_t total = 0;
    for (const auto& e : entries) total += e.bytes;
    if (json) {
      nlohmann::ordered_json doc = {{"cache_dir", cache_dir}, {"bytes", total}, {"budget_bytes", budget},
                                    {"indexes", nlohmann::ordered_json::array()}};
      for (const auto& e : entries) doc["indexes"].push_back(entry_json(e));
      out << doc.dump(1) << '\n';
      return 0;
    }
    out << cache_dir << ": " << entries.size() << " index(es), " << server::human_bytes(total) << " of " << limit << '\n';
    for (const auto& e : entries) {
      out << "  " << server::human_bytes(e.bytes) << "  " << local_time(e.used_ns) << "  " << e.state << "  "
          << (e.source.empty() ? e.file : e.source) << '\n';
    }
    return 0;
  }
  const server::prune_outcome p = action == "clear" ? server::clear_cache(cache_dir) : server::prune_cache(cache_dir, budget);
  if (json) {
    nlohmann::ordered_json doc = {{"cache_dir", cache_dir},         {"bytes_before", p.bytes_before},
                                  {"bytes_after", p.bytes_after},   {"budget_bytes", action == "clear" ? 0 : budget},
                                  {"temporaries_removed", p.temporaries_removed}, {"removed", nlohmann::ordered_json::array()}};
    for (const auto& e : p.removed) doc["removed"].push_back(entry_json(e));
    out << doc.dump(1) << '\n';
    return 0;
  }
  for (const auto& e : p.removed)
    out << "removed " << e.file << " (" << server::human_bytes(e.bytes) << ", " << (e.source.empty() ? "?" : e.source) << ")\n";
  out << cache_dir << ": " << server::human_bytes(p.bytes_before) << " -> " << server::human_bytes(p.bytes_after) << " ("
      << p.removed.size() << " index(es), " << p.temporaries_removed << " temporaries of writers that died removed"
      << (action == "prune" ? "; budget " + limit : std::string()) << ")\n";
  return 0;
}

}  // namespace kinetoscope::cli
