// SPDX-License-Identifier: BSD-3-Clause
#include "cli/analyze.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string_view>

#include "analysis/diff_view.hpp"
#include "analysis/discovery.hpp"
#include "analysis/distributed_view.hpp"
#include "analysis/kernel_view.hpp"
#include "analysis/loader.hpp"
#include "analysis/memory_view.hpp"
#include "analysis/module_view.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/operator_view.hpp"
#include "analysis/overview.hpp"
#include "analysis/recommendations.hpp"
#include "analysis/report.hpp"
#include "analysis/rules.hpp"
#include "server/payloads.hpp"
#include "server/row_fields.hpp"
#include "server/index_cache.hpp"
#include "server/trace_index.hpp"

namespace kinetoscope::cli {
namespace {

namespace fs = std::filesystem;
namespace an = kinetoscope::analysis;
namespace fields = kinetoscope::server::fields;
using ojson = nlohmann::ordered_json;

const char* const views[] = {"overview", "operators", "operators_by_shape", "kernels", "kernels_by_operator",
                             "memory", "modules", "distributed", "diff", "diagnostics"};

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
      if (std::find(std::begin(views), std::end(views), a.view) == std::end(views))
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

// ---- choosing the file ---------------------------------------------------------------------

struct chosen {
  std::string path;
  std::string run;
  std::string worker;
  std::string span;
  std::vector<an::trace_file> run_files;  // every file of the run (all workers, spans)
};

std::string list_choices(const std::vector<an::trace_file>& files) {
  std::string s;
  for (const auto& f : files) s += "\n  run '" + f.run + "' worker '" + f.worker + "' span '" + f.span + "'";
  return s;
}

chosen choose(const analyze_args& a) {
  std::error_code ec;
  const fs::path p(a.path);
  if (!fs::exists(p, ec)) throw std::runtime_error(a.path + ": no such file or directory");
  if (fs::is_regular_file(p, ec)) {
    chosen c;
    c.path = a.path;
    c.run = p.parent_path().filename().string();
    c.worker = p.filename().string();
    c.span = "default";
    return c;
  }
  std::vector<an::trace_file> files = an::discover(a.path);
  if (files.empty()) throw std::runtime_error(a.path + ": no trace files found (*.pt.trace.json[.gz])");
  // Runs under PATH: the folder itself when it is a run, else it must hold exactly one run.
  std::vector<std::string> runs;
  for (const auto& f : files)
    if (std::find(runs.begin(), runs.end(), f.run) == runs.end()) runs.push_back(f.run);
  if (runs.size() > 1)
    throw std::runtime_error(a.path + " holds several runs; give one run folder:" + list_choices(files));
  std::vector<an::trace_file> selected;
  for (const auto& f : files)
    if ((a.worker.empty() || f.worker == a.worker) && (a.span.empty() || f.span == a.span)) selected.push_back(f);
  if (selected.empty())
    throw std::runtime_error("no trace matches worker '" + a.worker + "' span '" + a.span + "'; available:" +
                             list_choices(files));
  chosen c;
  c.path = selected.front().path;
  c.run = selected.front().run;
  c.worker = selected.front().worker;
  c.span = selected.front().span;
  c.run_files = files;
  return c;
}

// ---- JSON ----------------------------------------------------------------------------------

// The rows' fields come from server/row_fields.hpp, the table the HTTP API uses too.

ojson step_json(const an::step_row& s, bool with_name) { return fields::cli_object(s, nullptr, with_name); }

ojson overview_json(const an::overview_result& ov, const std::vector<an::recommendation>& recs) {
  ojson j;
  j["steps"] = ojson::array();
  for (const auto& s : ov.steps) j["steps"].push_back(step_json(s, true));
  j["average"] = step_json(ov.average, false);
  j["gpus"] = ojson::array();
  for (const auto& g : ov.gpus) {
    ojson r;
    r["id"] = g.id;
    r["name"] = g.name;
    r["memory_bytes"] = g.memory_bytes;
    r["compute_capability"] = g.compute_capability;
    r["utilization_pct"] = g.utilization_pct;
    r["sm_efficiency_pct"] = g.sm_efficiency_pct ? ojson(*g.sm_efficiency_pct) : ojson(nullptr);
    r["achieved_occupancy_pct"] = g.achieved_occupancy_pct ? ojson(*g.achieved_occupancy_pct) : ojson(nullptr);
    r["tensor_cores_pct"] = g.tensor_cores_pct ? ojson(*g.tensor_cores_pct) : ojson(nullptr);
    j["gpus"].push_back(r);
  }
  j["recommendations"] = ojson::array();
  j["extra_recommendations"] = ojson::array();
  for (const auto& r : recs) (r.extra ? j["extra_recommendations"] : j["recommendations"]).push_back(r.text);
  j["notes"] = ov.notes;
  return j;
}

ojson operator_json(const an::operator_row& r, bool with_shape) {
  return fields::cli_object(r, fields::operator_fields{with_shape, true, false});
}

ojson memory_json(const an::memory_result& m) {
  ojson j;
  j["devices"] = ojson::array();
  for (const auto& d : m.devices) {
    ojson r;
    r["device"] = d.device;
    r["peak_allocated_bytes"] = d.peak_allocated_bytes;
    r["peak_reserved_bytes"] = d.peak_reserved_bytes;
    r["curve"] = ojson::array();
    for (const auto& p : d.curve) r["curve"].push_back({p[0], p[1], p[2]});
    r["stats"] = ojson::array();
    for (const auto& s : d.stats) r["stats"].push_back(fields::cli_object(s));
    j["devices"].push_back(r);
  }
  return j;
}

ojson module_json(const an::module_row& m) {
  ojson j = fields::cli_object(m);
  j["children"] = ojson::array();
  for (const auto& c : m.children) j["children"].push_back(module_json(c));
  return j;
}

ojson distributed_json(const an::distributed_result& d) {
  ojson j;
  j["available"] = d.available;
  j["reason"] = d.reason;
  j["workers"] = ojson::array();
  for (const auto& w : d.workers) {
    ojson r;
    r["worker"] = w.worker;
    r["overlap"] = {{"computation_us", w.overlap_all.computation},
                    {"overlap_us", w.overlap_all.overlap},
                    {"communication_us", w.overlap_all.communication},
                    {"other_us", w.overlap_all.other}};
    r["wait"] = {{"data_transfer_us", w.wait_all.transfer}, {"synchronizing_us", w.wait_all.synchronizing}};
    r["comm_ops"] = ojson::array();
    for (const auto& op : w.comm_ops) r["comm_ops"].push_back(fields::cli_object(op));
    j["workers"].push_back(r);
  }
  return j;
}

ojson diff_metric_json(const an::diff_metric& m) {
  return {{"baseline", m.baseline},
          {"experimental", m.experimental},
          {"delta", m.delta},
          {"delta_pct", m.delta_pct ? ojson(*m.delta_pct) : ojson(nullptr)}};
}

ojson diff_json(const an::diff_node& root) {
  ojson rows = ojson::array();
  for (const auto& r : an::diff_table(root))
    rows.push_back({{"name", r.name},
                    {"calls", diff_metric_json(r.calls)},
                    {"host_duration_us", diff_metric_json(r.host_duration)},
                    {"self_host_duration_us", diff_metric_json(r.self_host_duration)},
                    {"device_duration_us", diff_metric_json(r.device_duration)},
                    {"self_device_duration_us", diff_metric_json(r.self_device_duration)}});
  return rows;
}

/// The model of `path`: from its persisted index in `cache_dir` when one is valid (the
/// server's or `kinetoscope index`'s; the same model a parse gives), else parsed.
an::load_result load_model(const std::string& path, const an::load_options& load, const std::string& cache_dir) {
  if (!cache_dir.empty()) {
    if (const auto key = server::index_key_of(path)) {
      server::trace_index idx;
      an::trace_model m;
      const std::string file = server::index_file_path(cache_dir, key->path);
      if (idx.open(file, *key) == server::index_status::ok && idx.read_model(m)) {
        server::mark_used(file);  // the cache's least-recently-used order (index_cache.hpp)
        an::load_result r;
        r.model = std::move(m);
        return r;
      }
    }
  }
  return an::load_trace(path, load);
}

an::trace_model load_or_throw(const std::string& path, const an::load_options& load, const std::string& cache_dir) {
  an::load_result r = load_model(path, load, cache_dir);
  if (!r.ok()) throw std::runtime_error(r.error ? r.error->message() : path + ": cannot load");
  return std::move(*r.model);
}

/// The distributed view of the chosen span: every worker of the run that has it (one is
/// enough, as in the viewer and torch-tb-profiler: the view exists when they all communicate).
/// `model` and `trees` are those of the chosen file (c.path), not loaded again.
an::distributed_result distributed_of(const chosen& c, const an::trace_model& model, const an::op_trees& trees,
                                      const an::analysis_rules& rules, const an::load_options& load,
                                      const std::string& cache_dir) {
  const an::op_tree_options& tree_options = rules.tree;
  const an::overview_options& overview_options = rules.overview;
  std::vector<an::trace_file> files;
  for (const auto& f : c.run_files)
    if (f.span == c.span) files.push_back(f);
  if (files.empty()) {
    an::distributed_result none;
    none.reason = "the run has no worker for span " + c.span;
    return none;
  }
  std::vector<an::trace_model> models;
  models.reserve(files.size());
  for (const auto& f : files) models.push_back(f.path == c.path ? an::trace_model{} : load_or_throw(f.path, load, cache_dir));
  // One op tree at a time: the view needs only each worker's steps and used devices.
  std::vector<an::distributed_worker_input> in;
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (files[i].path == c.path) {
      in.push_back({files[i].worker, &model, trees.used_devices,
                    an::distributed_steps(an::compute_overview(model, trees, overview_options))});
      continue;
    }
    const an::op_trees worker_trees = an::build_op_tree(models[i], tree_options);
    in.push_back({files[i].worker, &models[i], worker_trees.used_devices,
                  an::distributed_steps(an::compute_overview(models[i], worker_trees, overview_options))});
  }
  return an::compute_distributed(in, rules.distributed);
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
    const chosen c = choose(a);
    const auto t0 = std::chrono::steady_clock::now();
    const an::load_options load{.max_text_bytes = a.max_text_bytes};
    an::load_result loaded = load_model(c.path, load, a.cache_dir);
    if (!loaded.ok()) {
      err << "kinetoscope analyze: " << (loaded.error ? loaded.error->message() : c.path + ": cannot load") << '\n';
      return 1;
    }
    const an::trace_model& model = *loaded.model;
    const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    const an::analysis_rules rules = an::rules(a.rules);
    const an::op_trees trees = an::build_op_tree(model, rules.tree);
    const bool want_all = a.view.empty();
    auto wants = [&](std::string_view v) { return want_all || a.view == v; };

    ojson doc;
    doc["file"] = c.path;
    doc["run"] = c.run;
    doc["rules"] = std::string(an::rule_set_name(a.rules));
    doc["worker"] = c.worker;
    doc["span"] = c.span;
    // Every requested single-trace view at once (two threads); same numbers as one by one.
    an::report_options report_options = rules.report();
    report_options.with_overview = wants("overview");
    report_options.with_operators = wants("operators") || wants("operators_by_shape");
    report_options.with_kernels = wants("kernels") || wants("kernels_by_operator");
    report_options.with_memory = wants("memory");
    report_options.with_modules = wants("modules");
    if (a.memory_range) {
      const double origin = an::profiler_start_ts(model);
      report_options.memory_range = std::pair{origin + a.memory_range->first, origin + a.memory_range->second};
    }
    const an::full_report report = an::compute_report(model, trees, report_options);
    if (report_options.with_overview) doc["overview"] = overview_json(report.overview, report.recommendations);
    if (report_options.with_operators) {
      ojson ops;
      ops["by_name"] = ojson::array();
      for (const auto& r : report.operators_by_name) ops["by_name"].push_back(operator_json(r, false));
      ops["by_name_and_input_shape"] = ojson::array();
      for (const auto& r : report.operators_by_shape) ops["by_name_and_input_shape"].push_back(operator_json(r, true));
      doc["operators"] = ops;
    }
    if (report_options.with_kernels) {
      ojson k;
      k["by_name"] = ojson::array();
      for (const auto& r : report.kernels_by_name) k["by_name"].push_back(fields::cli_object(r, fields::kernel_fields{}));
      k["by_name_and_operator"] = ojson::array();
      for (const auto& r : report.kernels_by_operator) k["by_name_and_operator"].push_back(fields::cli_object(r, fields::kernel_fields{}));
      doc["kernels"] = k;
    }
    if (report_options.with_memory) doc["memory"] = memory_json(report.memory);
    if (report_options.with_modules) {
      doc["modules"] = ojson::array();
      for (const auto& m : report.modules.rows) doc["modules"].push_back(module_json(m));
    }
    if (!c.run_files.empty() && (want_all || a.view == "distributed"))
      doc["distributed"] = distributed_json(distributed_of(c, model, trees, rules, load, a.cache_dir));
    if (!a.diff_path.empty() && (want_all || a.view == "diff")) {
      const an::trace_model other = load_or_throw(a.diff_path, load, a.cache_dir);
      const an::op_trees other_trees = an::build_op_tree(other, rules.tree);
      doc["diff"] = {{"baseline", c.path}, {"experimental", a.diff_path},
                     {"rows", diff_json(an::compute_diff(trees, other_trees))}};
    }
    if (wants("diagnostics")) {
      std::error_code ec;
      const auto bytes = static_cast<std::uint64_t>(fs::file_size(c.path, ec));
      doc["diagnostics"] = server::payloads::diagnostics(model, trees.stats, load_seconds, ec ? 0 : bytes);
    }

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
