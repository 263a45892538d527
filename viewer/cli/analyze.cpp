// SPDX-License-Identifier: BSD-3-Clause
#include "cli/analyze.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string_view>

#include "analysis/loader.hpp"
#include "analysis/rules.hpp"
#include "server/analysis_document.hpp"
#include "server/trace_index.hpp"

namespace kinetoscope::cli {
namespace {

namespace an = kinetoscope::analysis;
using ojson = nlohmann::ordered_json;

struct analyze_args {
  std::string path;
  std::string worker;
  std::string span;
  std::string view;  // "" = all (json) / overview+operators+kernels (tables)
  std::optional<std::pair<double, double>> memory_range;  // --memory-range, µs from the trace start
  std::string diff_path;  // --diff: the experimental trace compared with PATH (the baseline)
  bool json = false;
  bool csv = false;
  an::rule_set rules = an::rule_set::kinetoscope;  // --plugin_rules: torch-tb-profiler's numbers
  bool improved = false;  // --improved (kinetoscope's rules before they were the default)
  std::uint64_t max_text_bytes = an::default_max_text_bytes;  // --max_file_size
  std::string cache_dir = server::default_cache_dir();      // --cache_dir; "" = --no_cache
};

struct usage_error {
  std::string message;
};

analyze_args parse(const std::vector<std::string>& args) {
  analyze_args a;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw usage_error{"option " + w + " needs a value"};
      return args[++i];
    };
    if (w == "--worker") {
      a.worker = value();
    } else if (w == "--span") {
      a.span = value();
    } else if (w == "--view") {
      a.view = value();
      if (std::find(std::begin(server::document_views), std::end(server::document_views), a.view) ==
          std::end(server::document_views))
        throw usage_error{"unknown view '" + a.view + "'"};
    } else if (w == "--json") {
      a.json = true;
    } else if (w == "--csv") {
      a.csv = true;
    } else if (w == "--memory-range") {
      const std::string v = value();
      const auto comma = v.find(',');
      char* end1 = nullptr;
      char* end2 = nullptr;
      const std::string first = v.substr(0, comma);
      const std::string second = comma == std::string::npos ? "" : v.substr(comma + 1);
      const double lo = std::strtod(first.c_str(), &end1);
      const double hi = std::strtod(second.c_str(), &end2);
      if (comma == std::string::npos || end1 == first.c_str() || *end1 != '\0' || end2 == second.c_str() ||
          *end2 != '\0' || !(lo <= hi))
        throw usage_error{"--memory-range wants START_US,END_US with START_US <= END_US (got '" + v + "')"};
      a.memory_range = std::pair{lo, hi};
    } else if (w == "--diff") {
      a.diff_path = value();
    } else if (w == "--plugin_rules") {
      a.rules = an::rule_set::plugin;
    } else if (w == "--improved") {
      // Kinetoscope's rules were `--improved` before they became the default: accepted so that
      // scripts keep working; it cannot be combined with --plugin_rules.
      a.improved = true;
    } else if (w == "--cache_dir") {
      a.cache_dir = value();
      if (a.cache_dir.empty()) throw usage_error{"--cache_dir wants a folder"};
    } else if (w == "--no_cache") {
      a.cache_dir.clear();
    } else if (w == "--max_file_size") {
      const std::string v = value();
      const auto size = an::parse_byte_size(v);
      if (!size || *size == 0)
        throw usage_error{"--max_file_size wants a size in bytes, optionally with K, M, G or T (got '" + v + "')"};
      a.max_text_bytes = *size;
    } else if (!w.empty() && w[0] == '-') {
      throw usage_error{"unknown option " + w};
    } else if (a.path.empty()) {
      a.path = w;
    } else {
      throw usage_error{"more than one PATH given (" + a.path + ", " + w + ")"};
    }
  }
  if (a.path.empty()) throw usage_error{"PATH is required"};
  if (a.json && a.csv) throw usage_error{"--json and --csv exclude each other"};
  if (a.csv && a.view.empty()) a.view = "operators";
  if (a.view == "diff" && a.diff_path.empty()) throw usage_error{"--view diff needs --diff PATH2"};
  if (a.improved && a.rules == an::rule_set::plugin)
    throw usage_error{"--improved (kinetoscope's rules, the default) contradicts --plugin_rules"};
  return a;
}

// ---- CSV and tables ------------------------------------------------------------------------

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string number_text(const ojson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_float()) {
    const double d = v.get<double>();
    char buf[64];
    if (std::floor(d) == d && std::fabs(d) < 1e15)
      std::snprintf(buf, sizeof(buf), "%.0f", d);
    else
      std::snprintf(buf, sizeof(buf), "%.2f", d);
    return buf;
  }
  return v.dump();
}

/// Rows of objects → CSV with the first row's keys (nested arrays are skipped).
void write_csv(const ojson& rows, std::ostream& out) {
  if (!rows.is_array() || rows.empty()) return;
  std::vector<std::string> keys;
  for (const auto& [k, v] : rows.front().items())
    if (!v.is_array() && !v.is_object()) keys.push_back(k);
  for (std::size_t i = 0; i < keys.size(); ++i) out << (i ? "," : "") << csv_cell(keys[i]);
  out << '\n';
  for (const auto& r : rows) {
    for (std::size_t i = 0; i < keys.size(); ++i)
      out << (i ? "," : "") << csv_cell(r.contains(keys[i]) ? number_text(r[keys[i]]) : "");
    out << '\n';
  }
}

/// A fixed-width text table of the given columns.
void write_table(const std::string& title, const ojson& rows, const std::vector<std::string>& columns,
                 std::size_t limit, std::ostream& out) {
  out << title << '\n';
  if (!rows.is_array() || rows.empty()) {
    out << "  (none)\n\n";
    return;
  }
  constexpr std::size_t max_width = 60;
  std::vector<std::size_t> width(columns.size());
  std::vector<std::vector<std::string>> cells;
  for (std::size_t c = 0; c < columns.size(); ++c) width[c] = columns[c].size();
  for (std::size_t r = 0; r < rows.size() && r < limit; ++r) {
    std::vector<std::string> line;
    for (std::size_t c = 0; c < columns.size(); ++c) {
      std::string s = rows[r].contains(columns[c]) ? number_text(rows[r][columns[c]]) : "";
      if (s.size() > max_width) s = s.substr(0, max_width - 3) + "...";
      width[c] = std::max(width[c], s.size());
      line.push_back(std::move(s));
    }
    cells.push_back(std::move(line));
  }
  auto emit = [&](const std::vector<std::string>& line) {
    for (std::size_t c = 0; c < line.size(); ++c) {
      const std::string& s = line[c];
      const std::size_t pad = width[c] - s.size();
      if (c == 0) out << "  " << s << std::string(pad, ' ');
      else out << "  " << std::string(pad, ' ') << s;
    }
    out << '\n';
  };
  emit(columns);
  std::vector<std::string> dashes;
  for (std::size_t w : width) dashes.emplace_back(w, '-');
  emit(dashes);
  for (const auto& line : cells) emit(line);
  if (rows.size() > limit) out << "  ... " << rows.size() - limit << " more rows (use --json or --csv)\n";
  out << '\n';
}

}  // namespace

std::string analyze_usage() {
  return "usage: kinetoscope analyze PATH [--worker W] [--span S] [--view V] [--json | --csv] [--diff PATH2]\n"
         "                          [--plugin_rules] [--max_file_size SIZE]\n"
         "  PATH      a .pt.trace.json[.gz] file, or a run folder (one worker/span is chosen)\n"
         "  --worker  worker name (file name before the timestamp); default: the first\n"
         "  --span    span number (\"1\", \"2\", ... in time order, or \"default\"); default: the first\n"
         "  --view    overview | operators | operators_by_shape | kernels | kernels_by_operator |\n"
         "            memory | modules | distributed | diff | diagnostics\n"
         "            (default: all for --json; overview, operators, kernels for tables)\n"
         "  --memory-range START_US,END_US\n"
         "            restrict the memory events and statistics to that time range (µs from the\n"
         "            trace start, as the curve's times); the curve and peaks stay whole\n"
         "  --diff    compare PATH (baseline) with PATH2 (experimental), as the plugin's Diff view\n"
         "  --json    one JSON object with every view (keys as torch-tb-profiler's numbers)\n"
         "  --csv     the chosen view's table as CSV (default view: operators)\n"
         "  --cache_dir DIR  read the trace's model from the index the server or `kinetoscope\n"
         "            index` left there when it is valid, instead of parsing (default:\n"
         "            $XDG_CACHE_HOME/kinetoscope, else ~/.cache/kinetoscope); never written\n"
         "  --no_cache  always parse\n"
         "  --max_file_size SIZE\n"
         "            refuse traces whose JSON text (after gunzip) is larger (default 16G;\n"
         "            K, M, G, T suffixes are powers of 1024)\n"
         "  --plugin_rules  torch-tb-profiler 0.4.3's numbers exactly (docs/plugin-rules.md);\n"
         "            default: kinetoscope's rules (docs/kinetoscope-rules.md: host steps only,\n"
         "            every kernel attributed, modern tensor cores, every collective, ...)\n"
         "  --improved  accepted for old scripts: kinetoscope's rules are the default\n";
}

int run_analyze(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  analyze_args a;
  try {
    a = parse(args);
  } catch (const usage_error& e) {
    err << "kinetoscope analyze: " << e.message << "\n" << analyze_usage();
    return 2;
  }
  try {
    const server::chosen_trace c = server::choose_trace(a.path, a.worker, a.span);
    const auto t0 = std::chrono::steady_clock::now();
    const an::load_options load{.max_text_bytes = a.max_text_bytes};
    an::load_result loaded = server::load_model(c.path, load, a.cache_dir);
    if (!loaded.ok()) {
      err << "kinetoscope analyze: " << (loaded.error ? loaded.error->message() : c.path + ": cannot load") << '\n';
      return 1;
    }
    const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const bool want_all = a.view.empty();
    const ojson doc = server::analysis_document(
        c, *loaded.model, load_seconds,
        {.view = a.view, .rules = a.rules, .memory_range = a.memory_range, .diff_path = a.diff_path, .load = load,
         .cache_dir = a.cache_dir});

    if (a.json) {
      out << doc.dump(2) << '\n';
      return 0;
    }
    if (a.csv) {
      const std::map<std::string, std::pair<const char*, const char*>> table_of = {
          {"overview", {"overview", "steps"}},
          {"operators", {"operators", "by_name"}},
          {"operators_by_shape", {"operators", "by_name_and_input_shape"}},
          {"kernels", {"kernels", "by_name"}},
          {"kernels_by_operator", {"kernels", "by_name_and_operator"}},
          {"memory", {"memory", "devices"}},
          {"diff", {"diff", "rows"}},
      };
      auto it = table_of.find(a.view);
      if (it == table_of.end()) {
        err << "kinetoscope analyze: view '" << a.view << "' has no table for --csv\n";
        return 2;
      }
      if (a.view == "diff") {
        ojson rows = ojson::array();
        for (const auto& r : doc["diff"]["rows"]) {
          ojson row;
          row["name"] = r["name"];
          for (const char* k : {"calls", "host_duration_us", "self_host_duration_us", "device_duration_us",
                                "self_device_duration_us"})
            for (const char* side : {"baseline", "experimental", "delta"})
              row[std::string(k) + "_" + side] = r[k][side];
          rows.push_back(row);
        }
        write_csv(rows, out);
        return 0;
      }
      if (a.view == "memory") {
        ojson rows = ojson::array();
        for (const auto& d : doc["memory"]["devices"])
          for (auto s : d["stats"]) {
            ojson row;
            row["device"] = d["device"];
            for (const auto& [k, v] : s.items()) row[k] = v;
            rows.push_back(row);
          }
        write_csv(rows, out);
      } else {
        write_csv(doc[it->second.first][it->second.second], out);
      }
      return 0;
    }

    out << "kinetoscope analyze: " << c.path << "  (run '" << c.run << "', worker '" << c.worker << "', span '"
        << c.span << "')\n\n";
    if (doc.contains("overview")) {
      write_table("Step time breakdown (us)", doc["overview"]["steps"],
                  {"name", "kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec",
                   "other", "total"},
                  1000, out);
      ojson avg = doc["overview"]["average"];
      avg["name"] = "average";
      write_table("Average step (us)", ojson::array({avg}),
                  {"name", "kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec",
                   "other", "total"},
                  1, out);
      write_table("GPU summary", doc["overview"]["gpus"],
                  {"id", "name", "compute_capability", "utilization_pct", "sm_efficiency_pct",
                   "achieved_occupancy_pct", "tensor_cores_pct"},
                  64, out);
      out << "Recommendations\n";
      if (doc["overview"]["recommendations"].empty() && doc["overview"]["extra_recommendations"].empty())
        out << "  (none)\n";
      for (const auto& r : doc["overview"]["recommendations"]) out << "  - " << r.get<std::string>() << '\n';
      for (const auto& r : doc["overview"]["extra_recommendations"])
        out << "  - (kinetoscope) " << r.get<std::string>() << '\n';
      out << '\n';
    }
    if (doc.contains("operators")) {
      const bool by_shape = a.view == "operators_by_shape";
      write_table(by_shape ? "Operators by name and input shape" : "Operators (top 20 by device/host self time)",
                  doc["operators"][by_shape ? "by_name_and_input_shape" : "by_name"],
                  by_shape ? std::vector<std::string>{"name", "input_shape", "calls", "host_self_us", "host_total_us",
                                                      "device_self_us", "device_total_us"}
                           : std::vector<std::string>{"name", "calls", "host_self_us", "host_total_us",
                                                      "device_self_us", "device_total_us", "tc_eligible"},
                  20, out);
    }
    if (doc.contains("kernels") && (!doc["kernels"]["by_name"].empty() || !want_all)) {
      const bool by_op = a.view == "kernels_by_operator";
      write_table(by_op ? "Kernels by name and operator" : "Kernels (top 20 by total time)",
                  doc["kernels"][by_op ? "by_name_and_operator" : "by_name"],
                  by_op ? std::vector<std::string>{"name", "operator", "grid", "block", "calls", "total_us", "mean_us"}
                        : std::vector<std::string>{"name", "calls", "total_us", "mean_us", "max_us", "min_us",
                                                   "blocks_per_sm", "occupancy_pct", "tensor_cores_used"},
                  20, out);
    }
    if (doc.contains("memory") && a.view == "memory") {
      ojson rows = ojson::array();
      for (const auto& d : doc["memory"]["devices"]) {
        ojson r;
        r["device"] = d["device"];
        r["peak_allocated_bytes"] = d["peak_allocated_bytes"];
        r["peak_reserved_bytes"] = d["peak_reserved_bytes"];
        r["curve_points"] = d["curve"].size();
        rows.push_back(r);
      }
      write_table("Memory", rows, {"device", "peak_allocated_bytes", "peak_reserved_bytes", "curve_points"}, 64, out);
    }
    if (doc.contains("modules") && a.view == "modules") out << doc["modules"].dump(2) << '\n';
    if (doc.contains("distributed") && a.view == "distributed") {
      if (!doc["distributed"]["available"].get<bool>())
        out << "Distributed view: " << doc["distributed"]["reason"].get<std::string>() << '\n';
      for (const auto& w : doc["distributed"]["workers"]) {
        ojson rows = ojson::array({w["overlap"]});
        write_table("Worker " + w["worker"].get<std::string>() + ": computation/communication overlap (us)", rows,
                    {"computation_us", "overlap_us", "communication_us", "other_us"}, 1, out);
        write_table("Worker " + w["worker"].get<std::string>() + ": communication operations", w["comm_ops"],
                    {"name", "calls", "total_size_bytes", "total_latency_us", "data_transfer_us"}, 50, out);
      }
    }
    if (doc.contains("diff") && (a.view == "diff" || want_all)) {
      ojson rows = ojson::array();
      for (const auto& r : doc["diff"]["rows"])
        rows.push_back({{"name", r["name"]},
                        {"calls_base", r["calls"]["baseline"]},
                        {"calls_exp", r["calls"]["experimental"]},
                        {"host_us_base", r["host_duration_us"]["baseline"]},
                        {"host_us_exp", r["host_duration_us"]["experimental"]},
                        {"device_us_base", r["device_duration_us"]["baseline"]},
                        {"device_us_exp", r["device_duration_us"]["experimental"]}});
      write_table("Diff (baseline " + c.path + " vs " + a.diff_path + ")", rows,
                  {"name", "calls_base", "calls_exp", "host_us_base", "host_us_exp", "device_us_base",
                   "device_us_exp"},
                  40, out);
    }
    if (doc.contains("diagnostics") && a.view == "diagnostics") out << doc["diagnostics"].dump(2) << '\n';
    return 0;
  } catch (const std::exception& e) {
    err << "kinetoscope analyze: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace kinetoscope::cli
