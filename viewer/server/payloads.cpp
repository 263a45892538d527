// SPDX-License-Identifier: BSD-3-Clause
/// @file payloads.cpp
/// JSON bodies of the API in torch-tb-profiler's shapes (spec viewer-http.md §3).
#include "server/payloads.hpp"

#include <cmath>
#include <map>
#include <set>

#include "analysis/kernel_view.hpp"
#include "analysis/module_view.hpp"
#include "analysis/operator_view.hpp"
#include "analysis/overview.hpp"
#include "kinetoscope/formats/py_number.hpp"

namespace kinetoscope::server::payloads {
namespace {

namespace an = kinetoscope::analysis;

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

const char* yes_no(bool b) { return b ? "Yes" : "No"; }

constexpr const char* tc_eligible_tooltip =
    "Whether this operator is eligible to use Tensor Cores.";
constexpr const char* tc_self_tooltip =
    "Time of self-kernels with Tensor Cores / Time of self-kernels.";
constexpr const char* tc_total_tooltip =
    "Time of kernels with Tensor Cores / Time of kernels (the operator and its children).";
constexpr const char* kernel_tc_tooltip = "Whether this kernel uses Tensor Cores.";
constexpr const char* blocks_tooltip =
    "Blocks Per SM = blocks of this kernel / SM number of this GPU; below 1 the GPU's SMs are not all used. "
    "Mean weighted by the kernel's duration.";
constexpr const char* occupancy_tooltip =
    "Est. Achieved Occupancy: the ratio of active warps on an SM to the maximum number of active warps "
    "supported by the SM, estimated from the launch configuration. Mean weighted by the kernel's duration.";
constexpr const char* op_tc_tooltip = "Whether the operator launching this kernel is eligible to use Tensor Cores.";

ojson operator_row_json(const an::operator_row& r, bool by_shape, bool device_columns, bool stack) {
  ojson j;
  j["name"] = r.name;
  if (by_shape) j["input_shape"] = r.input_shape;
  j["calls"] = r.calls;
  if (device_columns) {
    j["device_self_duration"] = json_number(r.device_self_us);
    j["device_total_duration"] = json_number(r.device_total_us);
  }
  j["host_self_duration"] = json_number(r.host_self_us);
  j["host_total_duration"] = json_number(r.host_total_us);
  if (device_columns) {
    j["tc_eligible"] = yes_no(r.tc_eligible);
    j["tc_self_ratio"] = r.tc_self_pct;
    j["tc_total_ratio"] = r.tc_total_pct;
  }
  if (stack) j["call_stack"] = r.call_stack;
  else j["has_call_stack"] = r.has_call_stack;
  return j;
}

ojson operator_metadata(bool device_columns) {
  ojson m;
  m["sort"] = device_columns ? "device_self_duration" : "host_self_duration";
  m["tooltips"] = {{"tc_eligible", tc_eligible_tooltip},
                   {"tc_self_ratio", tc_self_tooltip},
                   {"tc_total_ratio", tc_total_tooltip}};
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

ojson module_row_json(const an::module_row& m) {
  ojson j;
  j["name"] = m.name;
  j["id"] = m.id;
  j["occurences"] = m.occurrences;
  j["operators"] = m.operators;
  j["host_duration"] = json_number(m.host_duration);
  j["self_host_duration"] = json_number(m.self_host_duration);
  j["device_duration"] = json_number(m.device_duration);
  j["self_device_duration"] = json_number(m.self_device_duration);
  j["avg_duration"] = m.avg_duration;
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
ojson recommendation_numbers(const an::recommendation& r, const profile& p) {
  const an::overview_result& ov = p.report.overview;
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
      n["devices"] = p.trees.used_devices.size();
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
      n["tensor_core_kernel_ratio"] = p.tc_kernel_ratio;
      n["eligible_op_kernel_ratio"] = p.eligible_op_kernel_ratio;
      break;
    case an::recommendation_kind::memory_limit:
      for (const auto& d : p.report.memory.devices)
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
      n["kernels"] = p.trees.stats.kernels;
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

ojson overview(const profile& p, std::size_t workers) {
  const an::overview_result& ov = p.report.overview;
  std::vector<an::step_role> roles;
  for (std::size_t i = 0; i < an::step_role_count; ++i) {
    const auto role = static_cast<an::step_role>(i);
    if (ov.shows(role)) roles.push_back(role);
  }
  ojson j;
  ojson columns = ojson::array({column("string", "Step")});
  for (an::step_role role : roles) {
    columns.push_back(column("number", an::step_role_title(role)));
    columns.push_back({{"type", "string"}, {"role", "tooltip"}, {"p", {{"html", "true"}}}});
  }
  ojson rows = ojson::array();
  for (const an::step_row& s : ov.steps) {
    ojson row = ojson::array({s.name});
    for (an::step_role role : roles) {
      row.push_back(json_number(s.value(role)));
      row.push_back(step_tooltip(s.name, an::step_role_title(role), s.value(role), s.total));
    }
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

  std::vector<an::recommendation> plugin_rules;
  for (const auto& r : p.report.recommendations)
    if (!r.extra) plugin_rules.push_back(r);
  j["recommendations"] = an::recommendations_html(plugin_rules);
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

ojson operation_pies(const profile& p) {
  ojson j;
  j["device_total_time"] = pie_json("Device Total Time (us)", p.pies.device_total);
  j["device_self_time"] = pie_json("Device Self Time (us)", p.pies.device_self);
  j["host_total_time"] = pie_json("Host Total Time (us)", p.pies.host_total);
  j["host_self_time"] = pie_json("Host Self Time (us)", p.pies.host_self);
  return j;
}

ojson operation_table(const profile& p, bool by_shape) {
  const bool dev = p.report.device_columns;
  ojson data = ojson::array();
  for (const auto& r : by_shape ? p.report.operators_by_shape : p.report.operators_by_name)
    data.push_back(operator_row_json(r, by_shape, dev, false));
  return {{"metadata", operator_metadata(dev)}, {"data", std::move(data)}};
}

std::optional<ojson> operation_stack(const profile& p, std::string_view op_name,
                                     std::optional<std::string_view> input_shape) {
  const bool dev = p.report.device_columns;
  const std::vector<an::operator_row> rows = an::operator_stack_rows(p.model, p.trees, op_name, input_shape, dev);
  if (rows.empty()) return std::nullopt;
  ojson data = ojson::array();
  for (const auto& r : rows) data.push_back(operator_row_json(r, input_shape.has_value(), dev, true));
  return ojson{{"metadata", operator_metadata(dev)}, {"data", std::move(data)}};
}

ojson kernel_pie(const profile& p) {
  if (!p.kernel_view) return nullptr;
  ojson rows = ojson::array();
  for (const auto& k : p.report.kernels_by_name) rows.push_back({k.name, json_number(k.total_raw_us)});
  return {{"total", {{"columns", ojson::array({column("string", "name"), column("number", "value")})},
                     {"rows", std::move(rows)}}}};
}

ojson kernel_tc_pie(const profile& p) {
  if (!p.kernel_view) return nullptr;
  const double r = p.tc_kernel_ratio;
  return {{"total", {{"columns", ojson::array({column("string", "name"), column("number", "value")})},
                     {"rows", ojson::array({ojson::array({"Using Tensor Cores", r}),
                                            ojson::array({"Not Using Tensor Cores", 1.0 - r})})}}}};
}

ojson kernel_table(const profile& p, bool by_operator) {
  if (!p.kernel_view) return nullptr;
  const an::kernel_metric_columns& metrics = p.kernel_columns;
  ojson columns = ojson::array();
  ojson rows = ojson::array();
  auto tail_columns = [&] {
    for (const char* c : {"Calls", "Total Duration (us)", "Mean Duration (us)", "Max Duration (us)",
                          "Min Duration (us)"})
      columns.push_back(column("number", c));
    if (metrics.blocks_per_sm) columns.push_back(column("number", "Mean Blocks Per SM", blocks_tooltip));
    if (metrics.occupancy)
      columns.push_back(column("number", "Mean Est. Achieved Occupancy (%)", occupancy_tooltip));
  };
  if (!by_operator) {
    columns.push_back(column("string", "Name"));
    columns.push_back(column("string", "Tensor Cores Used", kernel_tc_tooltip));
    tail_columns();
    for (const auto& k : p.report.kernels_by_name) {
      ojson row = ojson::array({k.name, yes_no(k.tensor_cores_used), k.calls, json_number(k.total_us),
                                json_number(k.mean_us), json_number(k.max_us), json_number(k.min_us)});
      if (metrics.blocks_per_sm) row.push_back(k.blocks_per_sm);
      if (metrics.occupancy) row.push_back(k.occupancy_pct);
      rows.push_back(std::move(row));
    }
  } else {
    columns.push_back(column("string", "Name"));
    columns.push_back(column("string", "Operator"));
    columns.push_back(column("string", "Grid"));
    columns.push_back(column("string", "Block"));
    columns.push_back(column("number", "Register Per Thread"));
    columns.push_back(column("number", "Shared Memory"));
    columns.push_back(column("string", "Kernel Uses Tensor Cores", kernel_tc_tooltip));
    columns.push_back(column("string", "Op is Tensor Cores eligible", op_tc_tooltip));
    tail_columns();
    for (const auto& k : p.report.kernels_by_operator) {
      ojson row = ojson::array({k.name, k.operator_name, k.grid, k.block, k.registers_per_thread, k.shared_memory,
                                yes_no(k.tensor_cores_used), yes_no(k.op_tc_eligible), k.calls,
                                json_number(k.total_us), json_number(k.mean_us), json_number(k.max_us),
                                json_number(k.min_us)});
      if (metrics.blocks_per_sm) row.push_back(k.blocks_per_sm);
      if (metrics.occupancy) row.push_back(k.occupancy_pct);
      rows.push_back(std::move(row));
    }
  }
  return {{"metadata", {{"sort", "Total Duration (us)"}}},
          {"data", {{"columns", std::move(columns)}, {"rows", std::move(rows)}}}};
}

ojson memory_stats(const an::memory_result& m, an::memory_size_unit unit) {
  const std::string u(an::unit_name(unit));
  const double mf = an::memory_factor(unit);
  ojson j;
  j["metadata"] = {{"title", "Memory View"},
                   {"default_device", m.default_device},
                   {"search", "Operator Name"},
                   {"sort", "Self Size Increase (" + u + ")"}};
  j["columns"] = ojson::array(
      {memory_column("Operator Name", "string", ""),
       memory_column("Calls", "number", "# of calls of the operator."),
       memory_column("Size Increase (" + u + ")", "number",
                     "The memory increase size include all children operators."),
       memory_column("Self Size Increase (" + u + ")", "number",
                     "The memory increase size associated with the operator itself."),
       memory_column("Allocation Count", "number", "The allocation count including all children operators."),
       memory_column("Self Allocation Count", "number", "The allocation count belonging to the operator itself."),
       memory_column("Allocation Size (" + u + ")", "number",
                     "The allocation size including all children operators."),
       memory_column("Self Allocation Size (" + u + ")", "number",
                     "The allocation size belonging to the operator itself.")});
  ojson rows = ojson::object();
  if (m.present)
    for (const auto& d : m.devices) {
      ojson list = ojson::array();
      auto size = [&](std::int64_t b) { return an::memory_display_round(static_cast<double>(b) * mf); };
      for (const auto& s : d.stats)
        list.push_back({s.name, s.calls, size(s.size_increase_bytes), size(s.self_size_increase_bytes),
                        s.allocation_count, s.self_allocation_count, size(s.allocation_size_bytes),
                        size(s.self_allocation_size_bytes)});
      rows[d.device] = std::move(list);
    }
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
  j["metadata"] = {{"default_device", m.default_device},
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
  j["metadata"] = {{"title", "Memory Events"}, {"default_device", m.default_device}};
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
      ojson list = ojson::array();
      for (const auto& e : d.events)
        list.push_back({e.op_name, an::memory_display_round(static_cast<double>(e.size_bytes) * mf),
                        time(e.allocation_time_us), time(e.release_time_us), time(e.duration_us)});
      rows[d.device] = std::move(list);
    }
  j["rows"] = std::move(rows);
  return j;
}

ojson module_view(const profile& p) {
  const an::module_view_result& v = p.report.modules;
  if (v.kind == an::module_view_kind::none) return nullptr;
  ojson columns = ojson::array();
  const std::pair<const char*, const char*> cols[] = {
      {"Module Name", "name"},           {"Occurences", "occurences"},
      {"Operators", "operators"},        {"Host Total Time", "host_duration"},
      {"Host Self Time", "self_host_duration"}, {"Device Total Time", "device_duration"},
      {"Device Self Time", "self_device_duration"}};
  for (const auto& [title, key] : cols)
    columns.push_back({{"name", title}, {"type", std::string_view(key) == "name" ? "string" : "number"}, {"key", key}});
  ojson data = ojson::array();
  for (const auto& r : v.rows) data.push_back(module_row_json(r));
  return {{"columns", std::move(columns)}, {"data", std::move(data)}};
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

ojson distributed_overlap(const an::distributed_result& d) {
  if (!d.available) return nullptr;
  ojson data = ojson::object();
  ojson all = ojson::object();
  for (const auto& w : d.workers)
    all[w.worker] = {json_number(w.overlap_all.computation), json_number(w.overlap_all.overlap),
                     json_number(w.overlap_all.communication), json_number(w.overlap_all.other)};
  data["all"] = std::move(all);
  for (const auto& w : d.workers)
    for (const auto& [step, bar] : w.overlap)
      data[step][w.worker] = {bar.computation, bar.overlap, bar.communication, bar.other};
  return {{"metadata",
           {{"title", "Computation/Communication Overview"},
            {"legends", {"Computation", "Overlapping", "Communication", "Other"}},
            {"units", "us"}}},
          {"data", std::move(data)}};
}

ojson distributed_waittime(const an::distributed_result& d) {
  if (!d.available) return nullptr;
  ojson data = ojson::object();
  ojson all = ojson::object();
  for (const auto& w : d.workers)
    all[w.worker] = {json_number(w.wait_all.transfer), json_number(w.wait_all.synchronizing)};
  data["all"] = std::move(all);
  for (const auto& w : d.workers)
    for (const auto& [step, bar] : w.wait)
      data[step ? *step : std::string("null")][w.worker] = {bar.transfer, bar.synchronizing};
  return {{"metadata",
           {{"title", "Synchronizing/Communication Overview"},
            {"legends", {"Data Transfer Time", "Synchronizing Time"}},
            {"units", "us"}}},
          {"data", std::move(data)}};
}

ojson distributed_commops(const an::distributed_result& d) {
  if (!d.available) return nullptr;
  ojson columns = ojson::array({column("string", "Name"), column("number", "Calls"),
                                column("number", "Total Size (bytes)"), column("number", "Avg Size (bytes)"),
                                column("number", "Total Latency (us)"), column("number", "Avg Latency (us)"),
                                column("number", "Data Transfer Time (us)"),
                                column("number", "Avg Data Transfer Time (us)")});
  ojson data = ojson::object();
  for (const auto& w : d.workers) {
    ojson rows = ojson::array();
    for (const auto& op : w.comm_ops)
      rows.push_back({op.name, op.calls, op.total_size_bytes, op.avg_size_bytes, op.total_latency_us,
                      op.avg_latency_us, op.data_transfer_us, op.avg_data_transfer_us});
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

ojson recommendations(const profile& p) {
  ojson out = ojson::array();
  for (const auto& r : p.report.recommendations)
    out.push_back({{"title", recommendation_title(r.kind)},
                   {"rule", r.rule},
                   {"extra", r.extra},
                   {"text", r.text},
                   {"html", r.html},
                   {"numbers", recommendation_numbers(r, p)}});
  return out;
}

ojson diagnostics(const profile& p) { return diagnostics(p.model, p.trees, p.load_seconds, p.file_bytes); }

ojson diagnostics(const an::trace_model& model, const an::op_trees& trees, double load_seconds,
                  std::uint64_t file_bytes) {
  const an::attribution_stats& st = trees.stats;
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

}  // namespace kinetoscope::server::payloads
