// SPDX-License-Identifier: BSD-3-Clause
/// @file payloads.cpp
/// JSON bodies of the API in torch-tb-profiler's shapes (its `plugin.py` routes;
/// viewer/server/http-api.md).
#include "server/payloads.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/kernel_view.hpp"
#include "analysis/module_view.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/operator_view.hpp"
#include "analysis/overview.hpp"
#include "kinetoscope/formats/py_number.hpp"
#include "server/row_fields.hpp"
#include "server/timeline.hpp"

namespace kinetoscope::server::payloads {
namespace {

namespace an = kinetoscope::analysis;
namespace fields = kinetoscope::server::fields;

ojson column(std::string_view type, std::string_view name) { return {{"type", type}, {"name", name}}; }
ojson column(std::string_view type, std::string_view name, std::string_view tooltip) {
  return {{"type", type}, {"name", name}, {"tooltip", tooltip}};
}
/// The memory routes list `name` before `type`.
ojson memory_column(std::string_view name, std::string_view type, std::string_view tooltip) {
  return {{"name", name}, {"type", type}, {"tooltip", tooltip}};
}

/// A number as text the way the plugin's f-strings show it: integers without ".0".
std::string number_text(double v) {
  const ojson j = json_number(v);
  return j.is_number_integer() ? std::to_string(j.get<std::int64_t>()) : formats::py_float_repr(v);
}

/// A row object of the API: {api key: api value} for the API's fields (server/row_fields.hpp).
template <typename Row, typename... Options>
ojson api_object(const Row& row, const Options&... options) {
  ojson j = ojson::object();
  const auto put = [&](const fields::field& f, const ojson& value) {
    if (!f.api.empty()) j[std::string(f.api)] = fields::api_value(f, value);
  };
  if constexpr (sizeof...(Options) == 0) fields::for_each_field(row, put);
  else fields::for_each_field(row, fields::output::api, options..., put);
  return j;
}

/// A table row of the API: its fields' API values in order.
template <typename Row, typename Options>
ojson api_array(const Row& row, const Options& options) {
  ojson a = ojson::array();
  fields::for_each_field(row, fields::output::api, options, [&](const fields::field& f, const ojson& value) {
    if (!f.api.empty()) a.push_back(fields::api_value(f, value));
  });
  return a;
}

/// The API's columns of a row type (its fields' titles, types and tooltips).
template <typename Row, typename Options>
ojson api_columns(const Options& options) {
  ojson columns = ojson::array();
  fields::for_each_field(Row{}, fields::output::api, options, [&](const fields::field& f, const ojson&) {
    if (f.api.empty()) return;
    columns.push_back(f.tooltip.empty() ? column(fields::api_column_type(f), f.api)
                                        : column(fields::api_column_type(f), f.api, f.tooltip));
  });
  return columns;
}

ojson operator_row_json(const an::operator_row& r, bool by_shape, bool device_columns, bool stack) {
  return api_object(r, fields::operator_fields{by_shape, device_columns, stack});
}

ojson operator_metadata(bool device_columns) {
  ojson m;
  m["sort"] = device_columns ? "device_self_duration" : "host_self_duration";
  m["tooltips"] = {{"tc_eligible", fields::tc_eligible_tooltip},
                   {"tc_self_ratio", fields::tc_self_tooltip},
                   {"tc_total_ratio", fields::tc_total_tooltip}};
  return m;
}

ojson pie_json(std::string_view title, const an::operator_pie& pie) {
  if (pie.empty()) return nullptr;
  ojson rows = ojson::array();
  for (const auto& [name, value] : pie) rows.push_back({name, json_number(value)});
  return {{"title", title},
          {"columns", ojson::array({column("string", "name"), column("number", "value")})},
          {"rows", std::move(rows)}};
}

/// A memory body's default_device, from the devices that body lists (sorted by name): the
/// first named "GPU…", else "CPU" (torch-tb-profiler's run.py decides it per route this way, so
/// a trace whose records have no address says "CPU" in the curve and events bodies).
std::string memory_default_device(const ojson& rows) {
  for (const auto& [device, list] : rows.items())
    if (device.rfind("GPU", 0) == 0) return device;
  return "CPU";
}

ojson module_row_json(const an::module_row& m) {
  ojson j = api_object(m);
  j["children"] = ojson::array();
  for (const auto& c : m.children) j["children"].push_back(module_row_json(c));
  return j;
}

ojson diff_side_json(const an::diff_side& s) {
  ojson j;
  j["name"] = s.name;
  j["duration"] = json_number(s.duration);
  j["device_duration"] = json_number(s.device_duration);
  j["total_duration"] = json_number(s.total_duration);
  j["aggs"] = ojson::array();
  for (const auto& a : s.aggs)
    j["aggs"].push_back({{"name", a.name},
                         {"calls", a.calls},
                         {"host_duration", json_number(a.host_duration)},
                         {"device_duration", json_number(a.device_duration)},
                         {"self_host_duration", json_number(a.self_host_duration)},
                         {"self_device_duration", json_number(a.self_device_duration)}});
  return j;
}

std::string_view recommendation_title(an::recommendation_kind k) {
  switch (k) {
    case an::recommendation_kind::data_loader: return "Input data loading";
    case an::recommendation_kind::ddp_instead_of_dp: return "DistributedDataParallel instead of DataParallel";
    case an::recommendation_kind::nccl_backend: return "NCCL backend";
    case an::recommendation_kind::communication: return "Communication overhead";
    case an::recommendation_kind::low_gpu_utilization: return "Low GPU utilization";
    case an::recommendation_kind::amp: return "Automatic mixed precision (Tensor Cores)";
    case an::recommendation_kind::memory_limit: return "GPU memory near capacity";
    case an::recommendation_kind::launch_overhead: return "Kernel launch overhead";
    case an::recommendation_kind::synchronization: return "Blocking synchronization";
    case an::recommendation_kind::idle_gpu: return "Idle GPU time";
  }
  return "Recommendation";
}

/// The numbers a rule looked at, from the profile's views.
ojson recommendation_numbers(const an::recommendation& r, const profile& p, const profile_views& v) {
  const an::overview_result& ov = v.report.overview;
  const double avg = ov.average.total;
  auto share = [&](double v) { return avg > 0 ? formats::py_round(100.0 * v / avg, 2) : 0.0; };
  auto us = [](double v) { return json_number(formats::py_round(v)); };  // as the Overview shows times
  ojson n = ojson::object();
  switch (r.kind) {
    case an::recommendation_kind::data_loader:
      n["avg_step_us"] = us(avg);
      n["avg_dataloader_us"] = us(ov.average.dataloader);
      n["dataloader_pct"] = share(ov.average.dataloader);
      n["threshold_pct"] = 5.0;
      break;
    case an::recommendation_kind::communication:
      n["avg_step_us"] = us(avg);
      n["avg_communication_us"] = us(ov.average.communication);
      n["communication_pct"] = share(ov.average.communication);
      n["threshold_pct"] = 10.0;
      break;
    case an::recommendation_kind::ddp_instead_of_dp:
      n["devices"] = v.used_devices.size();
      break;
    case an::recommendation_kind::nccl_backend:
      n["world_size"] = p.model.distributed ? p.model.distributed->world_size : -1;
      break;
    case an::recommendation_kind::low_gpu_utilization:
    case an::recommendation_kind::idle_gpu:
      n["avg_step_us"] = us(avg);
      for (const auto& g : ov.gpus) n["gpu" + std::to_string(g.id) + "_utilization_pct"] = g.utilization_pct;
      if (r.kind == an::recommendation_kind::low_gpu_utilization) n["threshold_pct"] = 50.0;
      break;
    case an::recommendation_kind::amp:
      n["tensor_core_kernel_ratio"] = v.tc_kernel_ratio;
      n["eligible_op_kernel_ratio"] = v.eligible_op_kernel_ratio;
      break;
    case an::recommendation_kind::memory_limit:
      for (const auto& d : v.report.memory.devices)
        if (d.capacity_bytes) {
          n[d.device + "_peak_allocated_bytes"] = d.peak_allocated_bytes;
          n[d.device + "_capacity_bytes"] = *d.capacity_bytes;
        }
      n["threshold_pct"] = 90.0;
      break;
    case an::recommendation_kind::launch_overhead:
    case an::recommendation_kind::synchronization:
      n["avg_step_us"] = us(avg);
      n["avg_runtime_us"] = us(ov.average.runtime);
      n["runtime_pct"] = share(ov.average.runtime);
      n["kernels"] = v.tree_stats.kernels;
      break;
  }
  return n;
}

}  // namespace

ojson json_number(double v) {
  if (!std::isfinite(v)) return nullptr;
  constexpr double limit = 9007199254740992.0;  // 2^53
  if (v == std::trunc(v) && std::fabs(v) < limit) return static_cast<std::int64_t>(v);
  return v;
}

std::string step_tooltip(std::string_view step, std::string_view role, double value, double total) {
  const double pct = total != 0 ? formats::py_round(100.0 * value / total, 2) : 0.0;
  std::string s = "<div class=\"visualization-tooltip\" style=\"white-space: nowrap;\">Step ";
  s += step;
  s += "<br>Total: " + number_text(total) + "us<br><b>";
  s += role;
  s += ": " + number_text(value) + "us</b><br>Percentage: " + formats::py_float_repr(pct) + "%</div>";
  return s;
}

ojson overview(const profile_views& v, std::size_t workers) {
  const an::overview_result& ov = v.report.overview;
  ojson j;
  // The step fields (server/row_fields.hpp): the name, then each shown role with its tooltip.
  ojson columns = ojson::array();
  fields::for_each_field(an::step_row{}, fields::output::api, &ov, true, [&](const fields::field& f, const ojson&) {
    columns.push_back(column(fields::api_column_type(f), f.api));
    if (f.kind == fields::field_kind::duration)
      columns.push_back({{"type", "string"}, {"role", "tooltip"}, {"p", {{"html", "true"}}}});
  });
  ojson rows = ojson::array();
  for (const an::step_row& s : ov.steps) {
    ojson row = ojson::array();
    fields::for_each_field(s, fields::output::api, &ov, true, [&](const fields::field& f, const ojson& value) {
      row.push_back(fields::api_value(f, value));
      if (f.kind == fields::field_kind::duration)
        row.push_back(step_tooltip(s.name, f.api, value.get<double>(), s.total));
    });
    rows.push_back(std::move(row));
  }
  j["steps"] = {{"columns", std::move(columns)}, {"rows", std::move(rows)}};

  const std::vector<an::performance_item> perf = an::performance_breakdown(ov);
  ojson performance = ojson::array();
  if (!perf.empty()) {
    ojson root = {{"name", perf.front().name},
                  {"description", ""},
                  {"value", json_number(perf.front().value)},
                  {"extra", json_number(perf.front().extra)}};
    ojson children = ojson::array();
    for (std::size_t i = 1; i < perf.size(); ++i)
      children.push_back({{"name", perf[i].name},
                          {"description", ""},
                          {"value", json_number(perf[i].value)},
                          {"extra", perf[i].extra}});
    root["children"] = std::move(children);
    performance.push_back(std::move(root));
  }
  j["performance"] = std::move(performance);

  // The plugin's Overview lists its seven rules only; under kinetoscope's rules the Overview lists
  // what the Recommendations view lists (docs/kinetoscope-rules.md#k6).
  std::vector<an::recommendation> listed;
  for (const auto& r : v.report.recommendations)
    if (!r.extra || v.rules != an::rule_set::plugin) listed.push_back(r);
  j["recommendations"] = an::recommendations_html(listed);
  j["environments"] = ojson::array({{{"title", "Number of Worker(s)"}, {"value", std::to_string(workers)}},
                                    {{"title", "Device Type"}, {"value", ov.uses_gpu ? "GPU" : "CPU"}}});
  const std::vector<an::gpu_summary_item> items = an::gpu_summary_items(ov);
  if (!items.empty()) {
    ojson data = ojson::array();
    for (const auto& it : items) data.push_back({{"title", it.title}, {"value", it.value}});
    j["gpu_metrics"] = {{"title", "GPU Summary"}, {"data", std::move(data)}, {"tooltip", an::gpu_summary_tooltip(ov)}};
  }
  return j;
}

ojson operation_pies(const profile_views& v, bool by_shape) {
  const an::operator_pies& pies = by_shape ? v.report.pies_by_shape : v.report.pies_by_name;
  ojson j;
  j["device_total_time"] = pie_json("Device Total Time (us)", pies.device_total);
  j["device_self_time"] = pie_json("Device Self Time (us)", pies.device_self);
  j["host_total_time"] = pie_json("Host Total Time (us)", pies.host_total);
  j["host_self_time"] = pie_json("Host Self Time (us)", pies.host_self);
  return j;
}

ojson operation_table(const profile_views& v, bool by_shape) {
  const bool dev = v.report.device_columns;
  ojson data = ojson::array();
  for (const auto& r : by_shape ? v.report.operators_by_shape : v.report.operators_by_name)
    data.push_back(operator_row_json(r, by_shape, dev, false));
  return {{"metadata", operator_metadata(dev)}, {"data", std::move(data)}};
}

std::optional<ojson> operation_stack(const profile& p, const profile_views& v, const an::op_trees& trees, std::string_view op_name,
                                     std::optional<std::string_view> input_shape) {
  const bool dev = v.report.device_columns;
  const std::vector<an::operator_row> rows = an::operator_stack_rows(p.model, trees, op_name, input_shape, dev);
  if (rows.empty()) return std::nullopt;
  ojson data = ojson::array();
  for (const auto& r : rows) data.push_back(operator_row_json(r, input_shape.has_value(), dev, true));
  return ojson{{"metadata", operator_metadata(dev)}, {"data", std::move(data)}};
}

ojson kernel_pie(const profile_views& v) {
  if (!v.kernel_view) return nullptr;
  ojson rows = ojson::array();
  for (const auto& k : v.report.kernels_by_name) rows.push_back({k.name, json_number(k.total_raw_us)});
  return {{"total", {{"columns", ojson::array({column("string", "name"), column("number", "value")})},
                     {"rows", std::move(rows)}}}};
}

ojson kernel_tc_pie(const profile_views& v) {
  if (!v.kernel_view) return nullptr;
  const double r = v.tc_kernel_ratio;
  return {{"total", {{"columns", ojson::array({column("string", "name"), column("number", "value")})},
                     {"rows", ojson::array({ojson::array({"Using Tensor Cores", r}),
                                            ojson::array({"Not Using Tensor Cores", 1.0 - r})})}}}};
}

ojson kernel_table(const profile_views& v, bool by_operator) {
  if (!v.kernel_view) return nullptr;
  const fields::kernel_fields shown{v.kernel_columns.blocks_per_sm, v.kernel_columns.occupancy};
  ojson columns = by_operator ? api_columns<an::kernel_op_row>(shown) : api_columns<an::kernel_row>(shown);
  ojson rows = ojson::array();
  if (by_operator) {
    for (const auto& k : v.report.kernels_by_operator) rows.push_back(api_array(k, shown));
  } else {
    for (const auto& k : v.report.kernels_by_name) rows.push_back(api_array(k, shown));
  }
  return {{"metadata", {{"sort", "Total Duration (us)"}}},
          {"data", {{"columns", std::move(columns)}, {"rows", std::move(rows)}}}};
}

ojson memory_stats(const an::memory_result& m, an::memory_size_unit unit) {
  const std::string u(an::unit_name(unit));
  const double mf = an::memory_factor(unit);
  ojson j;
  j["metadata"] = {{"title", "Memory View"},
                   {"default_device", "CPU"},
                   {"search", "Operator Name"},
                   {"sort", "Self Size Increase (" + u + ")"}};
  ojson columns = ojson::array();
  fields::for_each_field(an::memory_stat_row{}, [&](const fields::field& f, const ojson&) {
    columns.push_back(memory_column(fields::memory_title(f, u), fields::api_column_type(f), f.tooltip));
  });
  j["columns"] = std::move(columns);
  // Only devices with rows (in the range), as the plugin lists them.
  ojson rows = ojson::object();
  if (m.present)
    for (const auto& d : m.devices) {
      if (d.stats.empty()) continue;
      ojson list = ojson::array();
      for (const auto& s : d.stats) {
        ojson row = ojson::array();
        fields::for_each_field(s, [&](const fields::field& f, const ojson& value) {
          row.push_back(fields::api_value(f, value, mf));
        });
        list.push_back(std::move(row));
      }
      rows[d.device] = std::move(list);
    }
  j["metadata"]["default_device"] = memory_default_device(rows);
  j["rows"] = std::move(rows);
  return j;
}

ojson memory_curve(const an::memory_result& m, an::memory_time_unit time_unit, an::memory_size_unit size_unit) {
  const std::string tu(an::unit_name(time_unit));
  const std::string su(an::unit_name(size_unit));
  const double tf = an::time_factor(time_unit);
  const double mf = an::memory_factor(size_unit);
  ojson devices = ojson::array();
  ojson peaks = ojson::object();
  ojson totals = ojson::object();
  ojson rows = ojson::object();
  if (m.present)
    for (const auto& d : m.devices) {
      if (d.curve.empty()) continue;
      devices.push_back(d.device);
      peaks[d.device] = an::memory_peak_text(d.peak_allocated_bytes, size_unit);
      if (d.capacity_bytes) totals[d.device] = static_cast<double>(*d.capacity_bytes) * mf;
      ojson list = ojson::array();
      for (const auto& pt : an::downsample_memory_curve(d.curve))
        list.push_back({pt[0] * tf, pt[1] * mf, pt[2] * mf});
      rows[d.device] = std::move(list);
    }
  ojson j;
  j["metadata"] = {{"default_device", memory_default_device(rows)},
                   {"devices", std::move(devices)},
                   {"peaks", std::move(peaks)},
                   {"totals", std::move(totals)},
                   {"first_ts", json_number(m.first_ts)},
                   {"time_metric", tu},
                   {"memory_metric", su},
                   {"time_factor", tf},
                   {"memory_factor", mf}};
  j["columns"] = ojson::array(
      {memory_column("Time (" + tu + ")", "number", "Time since profiler starts."),
       memory_column("Allocated (" + su + ")", "number", "Total memory in use."),
       memory_column("Reserved (" + su + ")", "number", "Total reserved memory by allocator, both used and unused.")});
  j["rows"] = std::move(rows);
  return j;
}

ojson memory_events(const an::memory_result& m, an::memory_time_unit time_unit, an::memory_size_unit size_unit) {
  const std::string tu(an::unit_name(time_unit));
  const std::string su(an::unit_name(size_unit));
  const double tf = an::time_factor(time_unit);
  const double mf = an::memory_factor(size_unit);
  ojson j;
  j["metadata"] = {{"title", "Memory Events"}, {"default_device", "CPU"}};
  j["columns"] = ojson::array({memory_column("Operator", "string", ""),
                               memory_column("Size (" + su + ")", "number", ""),
                               memory_column("Allocation Time (" + tu + ")", "number", ""),
                               memory_column("Release Time (" + tu + ")", "number", ""),
                               memory_column("Duration (" + tu + ")", "number", "")});
  auto time = [&](const std::optional<double>& t) -> ojson {
    if (!t) return nullptr;
    return an::memory_display_round(*t * tf);
  };
  ojson rows = ojson::object();
  if (m.present)
    for (const auto& d : m.devices) {
      if (d.events.empty()) continue;  // only devices with rows, as the plugin
      ojson list = ojson::array();
      for (const auto& e : d.events)
        list.push_back({e.op_name, an::memory_display_round(static_cast<double>(e.size_bytes) * mf),
                        time(e.allocation_time_us), time(e.release_time_us), time(e.duration_us)});
      rows[d.device] = std::move(list);
    }
  j["metadata"]["default_device"] = memory_default_device(rows);
  j["rows"] = std::move(rows);
  return j;
}

ojson module_view(const profile_views& views) {
  const an::module_view_result& v = views.report.modules;
  if (v.kind == an::module_view_kind::none) return nullptr;
  ojson columns = ojson::array();
  fields::for_each_field(an::module_row{}, [&](const fields::field& f, const ojson&) {
    if (!f.title.empty()) columns.push_back({{"name", f.title}, {"type", fields::api_column_type(f)}, {"key", f.api}});
  });
  ojson data = ojson::array();
  for (const auto& r : v.rows) data.push_back(module_row_json(r));
  return {{"columns", std::move(columns)}, {"data", std::move(data)}};
}

std::optional<ojson> operator_tree(const profile& p, const an::op_trees& trees) {
  const bool lightning = p.model.lightning && !trees.lightning_threads.empty();
  const std::vector<an::thread_tree>& threads = lightning ? trees.lightning_threads : trees.threads;
  if (threads.empty() || threads.front().root == an::no_index) return std::nullopt;
  // Depth-first with an explicit stack: a deeply nested trace cannot exhaust the call stack here.
  // Each entry: a node and the JSON array its object goes into.
  const auto node_json = [&](const an::op_node& n) {
    return ojson{{"name", n.name},
                 {"start_time", json_number(n.start)},
                 {"end_time", json_number(n.end)},
                 {"type", an::plugin_type_name(n)},
                 {"tid", n.tid},
                 {"children", ojson::array()}};
  };
  ojson root = node_json(trees.nodes[threads.front().root]);
  std::vector<std::pair<std::uint32_t, ojson*>> stack;
  stack.emplace_back(threads.front().root, &root);
  while (!stack.empty()) {
    const auto [index, out] = stack.back();
    stack.pop_back();
    ojson& children = (*out)["children"];
    const an::index_list& kids = trees.nodes[index].children;
    for (std::uint32_t child : kids) children.push_back(node_json(trees.nodes[child]));
    // The children array is complete and not resized again: pointers into it stay valid.
    for (std::size_t i = 0; i < children.size(); ++i) stack.emplace_back(kids[i], &children[i]);
  }
  return root;
}

ojson distributed_gpuinfo(const an::distributed_result& d) {
  if (d.device_info.empty()) return nullptr;
  ojson data = ojson::object();
  for (const auto& node : d.device_info) {
    ojson n = ojson::object();
    for (const auto& proc : node.processes) {
      ojson pr = ojson::object();
      for (const auto& g : proc.gpus) {
        ojson gj = ojson::object();
        if (g.name) gj["Name"] = *g.name;
        if (g.memory) gj["Memory"] = *g.memory;
        if (g.memory_raw) gj["Memory Raw"] = *g.memory_raw;
        if (g.compute_capability) gj["Compute Capability"] = *g.compute_capability;
        pr[g.device] = std::move(gj);
      }
      n[proc.process] = std::move(pr);
    }
    data[node.node] = std::move(n);
  }
  return {{"metadata", {{"title", "Device Information"}}}, {"data", std::move(data)}};
}

namespace {

/// Appends (key, value) to a JSON object whose keys the caller keeps unique: ordered_json's
/// operator[] finds a key by a linear scan, which made the panels of 256 workers x 1272 steps
/// take seconds.
/// (Reserve first: the members' keys are const, so a growing object copies every member.)
std::vector<std::pair<const std::string, ojson>>& members_of(ojson& object) {
  return static_cast<std::vector<std::pair<const std::string, ojson>>&>(object.get_ref<ojson::object_t&>());
}
void append_member(ojson& object, std::string key, ojson value) {
  members_of(object).emplace_back(std::move(key), std::move(value));
}

/// {"all": {worker: all}, key: {worker: bar}, ...}: keys in first-seen order over the workers.
template <class PerStep, class All>
ojson per_step_data(const an::distributed_result& d, PerStep per_step, All all_of) {
  ojson all = ojson::object();
  members_of(all).reserve(d.workers.size());
  for (const auto& w : d.workers) append_member(all, w.worker, all_of(w));
  std::vector<std::pair<std::string, ojson>> steps;
  std::unordered_map<std::string, std::size_t> index;
  for (const auto& w : d.workers)
    per_step(w, [&](std::string key, ojson bar) {
      auto [it, fresh] = index.try_emplace(key, steps.size());
      if (fresh) {
        steps.emplace_back(std::move(key), ojson::object());
        members_of(steps.back().second).reserve(d.workers.size());
      }
      ojson& row = steps[it->second].second;
      // A worker has each key once (steps are unique; a wait key is one per step).
      append_member(row, w.worker, std::move(bar));
    });
  ojson data = ojson::object();
  members_of(data).reserve(steps.size() + 1);
  append_member(data, "all", std::move(all));
  for (auto& [key, row] : steps) {
    if (key == "all") continue;  // (steps are ProfilerStep numbers: "all" is never one; keys stay unique)
    append_member(data, std::move(key), std::move(row));
  }
  return data;
}

}  // namespace

ojson distributed_overlap(const an::distributed_result& d) {
  if (!d.available) return nullptr;
  ojson data = per_step_data(
      d,
      [](const an::distributed_worker_result& w, const auto& add) {
        for (const auto& [step, bar] : w.overlap) add(step, {bar.computation, bar.overlap, bar.communication, bar.other});
      },
      [](const an::distributed_worker_result& w) -> ojson {
        return {json_number(w.overlap_all.computation), json_number(w.overlap_all.overlap),
                json_number(w.overlap_all.communication), json_number(w.overlap_all.other)};
      });
  return {{"metadata",
           {{"title", "Computation/Communication Overview"},
            {"legends", {"Computation", "Overlapping", "Communication", "Other"}},
            {"units", "us"}}},
          {"data", std::move(data)}};
}

ojson distributed_waittime(const an::distributed_result& d) {
  if (!d.available) return nullptr;
  ojson data = per_step_data(
      d,
      [](const an::distributed_worker_result& w, const auto& add) {
        for (const auto& [step, bar] : w.wait) add(step ? *step : std::string("null"), {bar.transfer, bar.synchronizing});
      },
      [](const an::distributed_worker_result& w) -> ojson {
        return {json_number(w.wait_all.transfer), json_number(w.wait_all.synchronizing)};
      });
  return {{"metadata",
           {{"title", "Synchronizing/Communication Overview"},
            {"legends", {"Data Transfer Time", "Synchronizing Time"}},
            {"units", "us"}}},
          {"data", std::move(data)}};
}

ojson distributed_commops(const an::distributed_result& d) {
  if (!d.available) return nullptr;
  ojson columns = ojson::array();
  fields::for_each_field(an::comm_op_row{}, [&](const fields::field& f, const ojson&) {
    columns.push_back(column(fields::api_column_type(f), f.api));
  });
  ojson data = ojson::object();
  for (const auto& w : d.workers) {
    ojson rows = ojson::array();
    for (const auto& op : w.comm_ops) {
      ojson row = ojson::array();
      fields::for_each_field(op, [&](const fields::field& f, const ojson& value) {
        row.push_back(fields::api_value(f, value));
      });
      rows.push_back(std::move(row));
    }
    data[w.worker] = {{"columns", columns}, {"rows", std::move(rows)}};
  }
  return {{"metadata", {{"title", "Communication Operations Stats"}}}, {"data", std::move(data)}};
}

ojson diff_node(const an::diff_node& node) {
  ojson j;
  j["left"] = diff_side_json(node.baseline);
  j["right"] = diff_side_json(node.experimental);
  j["path"] = node.path;
  ojson children = ojson::array();
  for (const auto& c : node.children)
    children.push_back({{"left", diff_side_json(c.baseline)}, {"right", diff_side_json(c.experimental)}, {"path", c.path}});
  j["children"] = std::move(children);
  return j;
}

/// The view state that shows a finding (http-api.md#recommendations): its kind, the view, what
/// the state names, and `state`, the URL-hash keys the app opens the view with.
static ojson recommendation_target_json(const an::recommendation_target& t, const profile& p) {
  ojson j{{"kind", an::target_kind_name(t.kind)}, {"view", t.view}};
  ojson state = ojson::object();
  switch (t.kind) {
    case an::recommendation_target::kind_type::view: break;
    case an::recommendation_target::kind_type::trace: {
      j["start_us"] = json_number(t.start_us);
      j["end_us"] = json_number(t.end_us);
      j["device"] = t.device >= 0 ? ojson(t.device) : ojson(nullptr);
      // The Trace view's window, relative to the timeline's t0 (the smallest event ts).
      const double origin = p.timeline_t0();
      state["t0"] = json_number(t.start_us - origin);
      state["t1"] = json_number(t.end_us - origin);
      break;
    }
    case an::recommendation_target::kind_type::kernel:
      j["kernel"] = t.kernel;
      state["kernel_search"] = t.kernel;
      break;
    case an::recommendation_target::kind_type::memory:
      j["device"] = "GPU" + std::to_string(t.device);
      state["device"] = "GPU" + std::to_string(t.device);
      break;
  }
  j["state"] = std::move(state);
  return j;
}

ojson recommendations(const profile& p, const profile_views& v) {
  ojson out = ojson::array();
  for (const auto& r : v.report.recommendations)
    out.push_back({{"title", recommendation_title(r.kind)},
                   {"rule", r.rule},
                   {"extra", r.extra},
                   {"text", r.text},
                   {"html", r.html},
                   {"numbers", recommendation_numbers(r, p, v)},
                   {"target", recommendation_target_json(r.target, p)}});
  return out;
}

ojson diagnostics(const profile& p, const profile_views& v) { return diagnostics(p.model, v.tree_stats, p.load_seconds, p.file_bytes); }

ojson diagnostics(const an::trace_model& model, const an::attribution_stats& st, double load_seconds,
                  std::uint64_t file_bytes) {
  ojson j;
  j["events_by_category"] = model.diagnostics.events_by_category;
  j["warnings"] = model.diagnostics.warnings;
  j["messages"] = model.diagnostics.messages;
  ojson a;
  a["kernels"] = st.kernels;
  a["kernels_attributed_to_operators"] = st.kernels_attributed;
  a["kernels_by_time_fallback"] = st.kernels_by_fallback;
  a["runtimes"] = st.runtimes;
  a["runtimes_matched_by_id"] = st.runtimes_matched;
  a["runtimes_zero_id"] = st.runtimes_zero_id;
  a["runtimes_dropped"] = st.runtimes_dropped;
  a["runtimes_id_equals_correlation"] = st.runtimes_id_equals_correlation;
  a["stale_kernels"] = st.stale_kernels;
  a["nodes_dropped_intersecting"] = st.nodes_dropped_intersecting;
  a["kernel_attribution_ratio"] =
      st.kernels == 0 ? 1.0 : static_cast<double>(st.kernels_attributed) / static_cast<double>(st.kernels);
  a["message"] = st.message;
  j["attribution"] = std::move(a);
  j["load_seconds"] = load_seconds;
  j["file_bytes"] = file_bytes;
  return j;
}

ojson distributed_ranks(const an::job_result& j, std::string_view span, std::size_t top) {
  const std::size_t cols = j.steps.size();
  ojson ranks = ojson::array();
  for (const an::job_rank& r : j.ranks) ranks.push_back({{"worker", r.worker}, {"rank", r.rank}});
  // One row per rank; heatmap values in whole µs (the canvas needs no more), step ranges exact
  // (they open the Trace view on that step).
  const auto rows = [&](const std::vector<double>& v, bool round) {
    ojson out = ojson::array();
    for (std::size_t r = 0; r < j.ranks.size(); ++r) {
      ojson row = ojson::array();
      for (std::size_t c = 0; c < cols; ++c) {
        const double x = v[r * cols + c];
        row.push_back(json_number(round ? std::round(x) : x));
      }
      out.push_back(std::move(row));
    }
    return out;
  };
  ojson heatmaps = ojson::object();
  ojson metrics = ojson::array();
  for (std::size_t m = 0; m < an::job_metric_count; ++m) {
    const std::string name(an::job_metric_name(static_cast<an::job_metric>(m)));
    metrics.push_back(name);
    heatmaps[name] = rows(j.heatmaps[m], true);
  }
  const auto worker_of = [&](std::uint32_t index) { return j.ranks[index].worker; };
  ojson stragglers = ojson::array();
  for (const an::job_straggler& s : j.stragglers) {
    const std::size_t cell = s.rank_index * cols + s.step;
    stragglers.push_back({{"worker", worker_of(s.rank_index)},
                          {"rank", j.ranks[s.rank_index].rank},
                          {"rank_index", s.rank_index},
                          {"step", j.steps[s.step]},
                          {"step_index", s.step},
                          {"cause", std::string(an::straggler_cause_name(s.cause))},
                          {"excess_us", json_number(s.excess_us)},
                          {"evidence", s.evidence},
                          {"start", json_number(j.step_start[cell])},
                          {"end", json_number(j.step_end[cell])}});
  }
  // Collectives by skew, largest first (ties: launch order).
  std::vector<std::size_t> order(j.collectives.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const std::size_t shown = std::min(top, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shown), order.end(),
                    [&](std::size_t a, std::size_t b) {
                      if (j.collectives[a].skew != j.collectives[b].skew) return j.collectives[a].skew > j.collectives[b].skew;
                      return a < b;
                    });
  double total_skew = 0, max_skew = 0;
  for (const an::job_collective& c : j.collectives) {
    total_skew += c.skew;
    max_skew = std::max(max_skew, c.skew);
  }
  ojson top_list = ojson::array();
  for (std::size_t k = 0; k < shown; ++k) {
    const an::job_collective& c = j.collectives[order[k]];
    ojson arrivals = ojson::array();
    double wait = 0;
    for (const an::job_arrival& a : c.arrivals) {
      arrivals.push_back({a.rank_index, json_number(a.arrival), json_number(a.wait)});
      wait += a.wait;
    }
    top_list.push_back({{"group", c.group},
                        {"group_desc", c.group_desc},
                        {"name", c.name},
                        {"seq", c.seq},
                        {"bytes", c.bytes},
                        {"step", c.step >= 0 ? ojson(j.steps[static_cast<std::size_t>(c.step)]) : ojson(nullptr)},
                        {"step_index", c.step},
                        {"ranks", c.arrivals.size()},
                        {"group_size", c.group_size},
                        {"skew_us", json_number(c.skew)},
                        {"wait_us", json_number(wait)},
                        {"last_worker", worker_of(c.last_rank_index)},
                        {"last_rank", j.ranks[c.last_rank_index].rank},
                        {"arrivals", std::move(arrivals)}});
  }
  return {{"span", std::string(span)},
          {"ranks", std::move(ranks)},
          {"steps", j.steps},
          {"metrics", std::move(metrics)},
          {"heatmaps", std::move(heatmaps)},
          {"step_start", rows(j.step_start, false)},
          {"step_end", rows(j.step_end, false)},
          {"stragglers", std::move(stragglers)},
          {"collectives",
           {{"total", j.collectives.size()},
            {"matched_by", j.matched_by},
            {"unmatched", j.unmatched},
            {"max_skew_us", json_number(max_skew)},
            {"total_skew_us", json_number(total_skew)},
            {"top", std::move(top_list)}}},
          {"notes", j.notes}};
}

}  // namespace kinetoscope::server::payloads
