// SPDX-License-Identifier: BSD-3-Clause
#include "server/analysis_document.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <stdexcept>

#include "analysis/diff_view.hpp"
#include "analysis/distributed_view.hpp"
#include "analysis/kernel_view.hpp"
#include "analysis/memory_view.hpp"
#include "analysis/module_view.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/operator_view.hpp"
#include "analysis/overview.hpp"
#include "analysis/recommendations.hpp"
#include "analysis/report.hpp"
#include "server/index_cache.hpp"
#include "server/payloads.hpp"
#include "server/row_fields.hpp"
#include "server/trace_index.hpp"

namespace kinetoscope::server {
namespace {

namespace fs = std::filesystem;
namespace an = kinetoscope::analysis;
using ojson = nlohmann::ordered_json;

// ---- choosing the file ---------------------------------------------------------------------

std::string list_choices(const std::vector<an::trace_file>& files) {
  std::string s;
  for (const auto& f : files) s += "\n  run '" + f.run + "' worker '" + f.worker + "' span '" + f.span + "'";
  return s;
}


// ---- JSON ----------------------------------------------------------------------------------

// The rows' fields come from server/row_fields.hpp, the table the HTTP API uses too.

ojson step_json(const an::step_row& s, bool with_name) { return fields::cli_object(s, nullptr, with_name); }

ojson gpu_json(const an::gpu_summary_row& g) {
  ojson r;
  r["id"] = g.id;
  r["name"] = g.name;
  r["memory_bytes"] = g.memory_bytes;
  r["compute_capability"] = g.compute_capability;
  r["utilization_pct"] = g.utilization_pct;
  r["sm_efficiency_pct"] = g.sm_efficiency_pct ? ojson(*g.sm_efficiency_pct) : ojson(nullptr);
  r["achieved_occupancy_pct"] = g.achieved_occupancy_pct ? ojson(*g.achieved_occupancy_pct) : ojson(nullptr);
  r["tensor_cores_pct"] = g.tensor_cores_pct ? ojson(*g.tensor_cores_pct) : ojson(nullptr);
  return r;
}

ojson overview_json(const an::overview_result& ov, const std::vector<an::recommendation>& recs) {
  ojson j;
  j["steps"] = ojson::array();
  for (const auto& s : ov.steps) j["steps"].push_back(step_json(s, true));
  j["average"] = step_json(ov.average, false);
  j["gpus"] = ojson::array();
  for (const auto& g : ov.gpus) j["gpus"].push_back(gpu_json(g));
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

ojson diff_row_json(const an::diff_table_row& r) {
  return {{"name", r.name},
          {"calls", diff_metric_json(r.calls)},
          {"host_duration_us", diff_metric_json(r.host_duration)},
          {"self_host_duration_us", diff_metric_json(r.self_host_duration)},
          {"device_duration_us", diff_metric_json(r.device_duration)},
          {"self_device_duration_us", diff_metric_json(r.self_device_duration)}};
}

ojson diff_json(const an::diff_node& root) {
  ojson rows = ojson::array();
  for (const auto& r : an::diff_table(root)) rows.push_back(diff_row_json(r));
  return rows;
}

an::trace_model load_or_throw(const std::string& path, const an::load_options& load, const std::string& cache_dir) {
  an::load_result r = load_model(path, load, cache_dir);
  if (!r.ok()) throw std::runtime_error(r.error ? r.error->message() : path + ": cannot load");
  return std::move(*r.model);
}

/// The distributed view of the chosen span: every worker of the run that has it (one is
/// enough, as in the viewer and torch-tb-profiler: the view exists when they all communicate).
/// `model` and `trees` are those of the chosen file (c.path), not loaded again.
an::distributed_result distributed_of(const chosen_trace& c, const an::trace_model& model, const an::op_trees& trees,
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

}  // namespace

chosen_trace choose_trace(const std::string& path, const std::string& worker, const std::string& span) {
  std::error_code ec;
  const fs::path p(path);
  if (!fs::exists(p, ec)) throw std::runtime_error(path + ": no such file or directory");
  if (fs::is_regular_file(p, ec)) {
    chosen_trace c;
    c.path = path;
    c.run = p.parent_path().filename().string();
    c.worker = p.filename().string();
    c.span = "default";
    return c;
  }
  std::vector<an::trace_file> files = an::discover(path);
  if (files.empty()) throw std::runtime_error(path + ": no trace files found (*.pt.trace.json[.gz])");
  // Runs under PATH: the folder itself when it is a run, else it must hold exactly one run.
  std::vector<std::string> runs;
  for (const auto& f : files)
    if (std::find(runs.begin(), runs.end(), f.run) == runs.end()) runs.push_back(f.run);
  if (runs.size() > 1)
    throw std::runtime_error(path + " holds several runs; give one run folder:" + list_choices(files));
  std::vector<an::trace_file> selected;
  for (const auto& f : files)
    if ((worker.empty() || f.worker == worker) && (span.empty() || f.span == span)) selected.push_back(f);
  if (selected.empty())
    throw std::runtime_error("no trace matches worker '" + worker + "' span '" + span + "'; available:" +
                             list_choices(files));
  chosen_trace c;
  c.path = selected.front().path;
  c.run = selected.front().run;
  c.worker = selected.front().worker;
  c.span = selected.front().span;
  c.run_files = files;
  return c;
}

an::load_result load_model(const std::string& path, const an::load_options& load, const std::string& cache_dir) {
  if (!cache_dir.empty()) {
    if (const auto key = index_key_of(path)) {
      trace_index idx;
      an::trace_model m;
      const std::string file = index_file_path(cache_dir, key->path);
      if (idx.open(file, *key) == index_status::ok && idx.read_model(m)) {
        mark_used(file);  // the cache's least-recently-used order (index_cache.hpp)
        an::load_result r;
        r.model = std::move(m);
        return r;
      }
    }
  }
  return an::load_trace(path, load);
}


ojson analysis_document(const chosen_trace& c, const an::trace_model& model, double load_seconds,
                        const document_options& o) {
  const an::analysis_rules rules = an::rules(o.rules);
  const an::op_trees trees = an::build_op_tree(model, rules.tree);
  const bool want_all = o.view.empty();
  auto wants = [&](std::string_view v) { return want_all || o.view == v; };

  ojson doc;
  doc["file"] = c.path;
  doc["run"] = c.run;
  doc["rules"] = std::string(an::rule_set_name(o.rules));
  doc["worker"] = c.worker;
  doc["span"] = c.span;
  // Every requested single-trace view at once (two threads); same numbers as one by one.
  an::report_options report_options = rules.report();
  report_options.with_overview = wants("overview");
  report_options.with_operators = wants("operators") || wants("operators_by_shape");
  report_options.with_kernels = wants("kernels") || wants("kernels_by_operator");
  report_options.with_memory = wants("memory");
  report_options.with_modules = wants("modules");
  if (o.memory_range) {
    const double origin = an::profiler_start_ts(model);
    report_options.memory_range = std::pair{origin + o.memory_range->first, origin + o.memory_range->second};
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
  if (!c.run_files.empty() && (want_all || o.view == "distributed"))
    doc["distributed"] = distributed_json(distributed_of(c, model, trees, rules, o.load, o.cache_dir));
  if (!o.diff_path.empty() && (want_all || o.view == "diff")) {
    const an::trace_model other = load_or_throw(o.diff_path, o.load, o.cache_dir);
    // The baseline's trees are the ones built above (diff_rows would build them again).
    const an::op_trees other_trees = an::build_op_tree(other, rules.tree);
    doc["diff"] = {{"baseline", c.path}, {"experimental", o.diff_path},
                   {"rows", diff_json(an::compute_diff(trees, other_trees))}};
  }
  if (wants("diagnostics")) {
    std::error_code ec;
    const auto bytes = static_cast<std::uint64_t>(fs::file_size(c.path, ec));
    doc["diagnostics"] = payloads::diagnostics(model, trees.stats, load_seconds, ec ? 0 : bytes);
  }
  return doc;
}

ojson diff_rows(const an::trace_model& baseline, const an::trace_model& experimental, an::rule_set rule_set) {
  const an::analysis_rules rules = an::rules(rule_set);
  return diff_json(an::compute_diff(an::build_op_tree(baseline, rules.tree), an::build_op_tree(experimental, rules.tree)));
}

ojson row_template(std::string_view table) {
  if (table == "steps") return step_json(an::step_row{}, true);
  if (table == "gpus") return gpu_json(an::gpu_summary_row{});
  if (table == "operators_by_name") return operator_json(an::operator_row{}, false);
  if (table == "operators_by_name_and_input_shape") return operator_json(an::operator_row{}, true);
  if (table == "kernels_by_name") return fields::cli_object(an::kernel_row{}, fields::kernel_fields{});
  if (table == "kernels_by_name_and_operator") return fields::cli_object(an::kernel_op_row{}, fields::kernel_fields{});
  if (table == "memory_stats") return fields::cli_object(an::memory_stat_row{});
  if (table == "modules") return fields::cli_object(an::module_row{});
  if (table == "distributed_comm_ops") return fields::cli_object(an::comm_op_row{});
  if (table == "diff") return diff_row_json(an::diff_table_row{});
  return ojson::object();
}

}  // namespace kinetoscope::server
