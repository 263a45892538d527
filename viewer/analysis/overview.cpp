// SPDX-License-Identifier: BSD-3-Clause
#include "analysis/overview.hpp"

#include "analysis/sorting.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <queue>
#include <unordered_set>

#include "kinetoscope/formats/py_number.hpp"

namespace kinetoscope::analysis {

using formats::py_round;
using formats::py_float_repr;
namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

std::size_t idx(step_role r) noexcept { return static_cast<std::size_t>(r); }

bool starts_with(std::string_view s, std::string_view p) noexcept { return s.substr(0, p.size()) == p; }

/// Whether the event takes part in the plugin's event list at all (its create_event returned an
/// event): recognised categories only, python_function dropped in Lightning traces.
bool is_used_event(const trace_model& model, const event& e) noexcept {
  switch (e.type) {
    case event_type::trace:
    case event_type::op:
    case event_type::user_annotation:
    case event_type::python:
    case event_type::runtime:
    case event_type::kernel:
    case event_type::memcpy:
    case event_type::memset:
      return true;
    case event_type::python_function:
    case event_type::module:
      return !model.lightning;
    case event_type::driver:
    case event_type::memory:
    case event_type::other:
      return false;
  }
  return false;
}

/// Lightning `[pl][…]` operators become PL events in the plugin, not operators.
bool is_lightning_op(const trace_model& model, const event& e, std::string_view name) noexcept {
  return model.lightning && e.type == event_type::op &&
         (starts_with(name, "[pl][profile]") || starts_with(name, "[pl][module]"));
}

/// `ProfilerStep#12` → "12" (the plugin's str(int(...))); the raw text when it is no integer.
std::string step_name_of(std::string_view name) {
  const std::string_view text = name.substr(name.find('#') + 1);
  std::int64_t n = 0;
  std::string_view digits = text;
  while (!digits.empty() && (digits.front() == ' ' || digits.front() == '\t')) digits.remove_prefix(1);
  while (!digits.empty() && (digits.back() == ' ' || digits.back() == '\t')) digits.remove_suffix(1);
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec == std::errc() && ptr == digits.data() + digits.size() && !digits.empty()) return std::to_string(n);
  return std::string(text);
}

/// The step event test shared by role ranges and host steps.
bool is_step_event(const event& e, std::string_view name, const overview_options& options) noexcept {
  if (e.type != event_type::op && e.type != event_type::user_annotation) return false;
  if (e.gpu_annotation && !options.gpu_annotations_as_host) return false;
  return is_profiler_step_name(name);
}

}  // namespace

std::string_view step_role_title(step_role role) noexcept {
  switch (role) {
    case step_role::kernel: return "Kernel";
    case step_role::memcpy: return "Memcpy";
    case step_role::memset: return "Memset";
    case step_role::communication: return "Communication";
    case step_role::runtime: return "Runtime";
    case step_role::dataloader: return "DataLoader";
    case step_role::cpu_exec: return "CPU Exec";
    case step_role::other: return "Other";
  }
  return "";
}

double step_row::value(step_role role) const noexcept {
  return const_cast<step_row*>(this)->value(role);
}

double& step_row::value(step_role role) noexcept {
  switch (role) {
    case step_role::kernel: return kernel;
    case step_role::memcpy: return memcpy;
    case step_role::memset: return memset;
    case step_role::communication: return communication;
    case step_role::runtime: return runtime;
    case step_role::dataloader: return dataloader;
    case step_role::cpu_exec: return cpu_exec;
    case step_role::other: return other;
  }
  return other;
}

std::string gpu_summary_row::memory_text() const {
  if (memory_bytes <= 0) return {};
  const double gb = py_round(static_cast<double>(memory_bytes) / 1024.0 / 1024.0 / 1024.0, 2);
  // Python str() of a float with at most two decimals: shortest repr ("31.74", "32.0").
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", gb);
  std::string s = buf;
  while (s.size() > 1 && s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();
  return s + " GB";
}

bool overview_result::shows(step_role role) const noexcept {
  switch (role) {
    case step_role::kernel:
    case step_role::memcpy:
    case step_role::memset:
    case step_role::runtime:
      return uses_gpu;
    case step_role::communication:
      return has_communication;
    case step_role::dataloader:
    case step_role::cpu_exec:
    case step_role::other:
      return true;
  }
  return false;
}

bool is_communication_name(std::string_view name, const overview_options& options) {
  if (options.all_collectives) return is_collective_name(name);
  return is_plugin_comm_name(name);
}

// ---------------------------------------------------------------------------------------------
// docs/plugin-rules.md#role-ranges

role_ranges compute_role_ranges(const trace_model& model, const overview_options& options) {
  role_ranges out;

  // External ids of the communication ops (the plugin's communication_data keys).
  std::unordered_set<std::int64_t> comm_ids;
  for (const event& e : model.events) {
    if (e.type != event_type::op && e.type != event_type::user_annotation && e.type != event_type::python) continue;
    if (e.external_id == 0) continue;
    if (e.gpu_annotation && !options.gpu_annotations_as_host) continue;
    if (is_communication_name(model.str(e.name), options)) comm_ids.insert(e.external_id);
  }

  interval_merger raw[step_role_count];
  double host_min = inf, host_max = -inf, global_min = inf, global_max = -inf;
  for (const event& e : model.events) {
    const bool driver = options.driver_as_runtime && e.type == event_type::driver;
    if (!driver && !is_used_event(model, e)) continue;
    const std::string_view name = model.str(e.name);
    if (is_lightning_op(model, e, name)) {
      global_min = std::min(global_min, e.ts);
      global_max = std::max(global_max, e.end());
      continue;
    }
    if (e.gpu_annotation && !options.gpu_annotations_as_host) continue;
    const interval r{e.ts, e.end()};
    bool step = false;
    switch (e.type) {
      case event_type::kernel:
        raw[idx(comm_ids.count(e.external_id) != 0 || (options.all_collectives && is_collective_kernel_name(name))
                    ? step_role::communication
                    : step_role::kernel)]
            .add(r);
        break;
      case event_type::memcpy: raw[idx(step_role::memcpy)].add(r); break;
      case event_type::memset: raw[idx(step_role::memset)].add(r); break;
      case event_type::runtime:
      case event_type::driver:  // only with driver_as_runtime (filtered above)
        raw[idx(step_role::runtime)].add(r);
        break;
      case event_type::op:
      case event_type::user_annotation:
      case event_type::python:
        if (e.type != event_type::python && is_data_loader_name(name)) {
          raw[idx(step_role::dataloader)].add(r);
        } else if (is_step_event(e, name, options)) {
          step = true;
        } else if (is_communication_name(name, options)) {
          raw[idx(step_role::communication)].add(r);
        } else {
          raw[idx(step_role::cpu_exec)].add(r);
        }
        break;
      default:
        break;
    }
    if (e.type == event_type::op || e.type == event_type::python || step) {
      host_min = std::min(host_min, e.ts);
      host_max = std::max(host_max, e.end());
    }
    global_min = std::min(global_min, e.ts);
    global_max = std::max(global_max, e.end());
  }
  for (std::size_t i = 0; i < step_role_count; ++i) out.ranges[i] = raw[i].take();
  out.has_host = host_min <= host_max;
  if (out.has_host) {
    out.host_min = host_min;
    out.host_max = host_max;
  }
  out.has_global = global_min <= global_max;
  if (out.has_global) {
    out.global_min = global_min;
    out.global_max = global_max;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// plugin-rules.md#steps

std::vector<host_step> host_steps(const trace_model& model, const role_ranges& roles,
                                  const overview_options& options, bool* synthetic) {
  std::vector<host_step> steps;
  for (const event& e : model.events) {
    if (!is_used_event(model, e)) continue;
    const std::string_view name = model.str(e.name);
    if (is_data_loader_name(name)) continue;  // the plugin tests DataLoader names first
    if (is_step_event(e, name, options)) steps.push_back({step_name_of(name), e.ts, e.end()});
  }
  if (synthetic != nullptr) *synthetic = steps.empty();
  if (steps.empty() && roles.has_host) steps.push_back({"0", roles.host_min, roles.host_max});
  return steps;
}

// ---------------------------------------------------------------------------------------------
// plugin-rules.md#step-extension, #tail-steps

extended_steps extend_steps(const std::vector<interval>& host, std::vector<const launch*> launches,
                            const std::vector<std::pair<std::uint32_t, interval>>& all_devices) {
  extended_steps out;
  out.steps = host;
  out.device_count.assign(host.size(), 0);
  // (Launches made from the op tree's runtimes come in time order already.)
  stable_sort_by_key_if_needed(launches.begin(), launches.end(), [](const launch* l) { return l->start; });

  std::vector<double> dmin(host.size(), inf);
  std::vector<double> dmax(host.size(), -inf);
  // Device ids matched by some step: a bit per id (a hash set cost a heap node, about 40
  // bytes, per device node: 0.1 GB at 2.6 million kernels).
  std::uint32_t max_id = 0;
  for (const auto& [id, range] : all_devices) max_id = std::max(max_id, id);
  std::vector<bool> matched(all_devices.empty() ? 0 : std::size_t{max_id} + 1, false);
  bool any_matched = false;
  std::size_t i = 0;
  std::size_t k = 0;
  while (i < host.size() && k < launches.size()) {
    const launch& rt = *launches[k];
    if (rt.start < host[i].start) {
      ++k;  // starts before this step (or straddles its start): skipped for good
    } else if (rt.end <= host[i].end) {
      for (const std::uint32_t d : rt.devices) {
        const auto& [id, range] = all_devices[d];
        dmin[i] = std::min(dmin[i], range.start);
        dmax[i] = std::max(dmax[i], range.end);
        matched[id] = true;
        any_matched = true;
        ++out.device_count[i];
      }
      ++k;
    } else if (rt.start < host[i].end) {
      ++k;  // starts inside, ends after: skipped
    } else {
      ++i;  // starts at or after this step's end: next step
    }
  }
  if (!any_matched) return out;
  out.matched = true;

  double prev = host[0].start;
  if (out.device_count[0] > 0 || dmin[0] != inf) {
    for (const auto& [id, r] : all_devices) {
      if (!matched[id] && r.end < dmin[0]) prev = std::max(prev, r.end);
    }
  }
  for (std::size_t s = 0; s < host.size(); ++s) {
    const double start = std::max(prev, host[s].start);
    double end = host[s].end;
    if (dmin[s] == inf) {
      end = std::max(end, start);
    } else {
      end = std::max(end, dmax[s]);
      if (end < start) end = start;
    }
    out.steps[s] = {start, end};
    prev = end;
  }
  return out;
}

std::size_t steps_to_keep(const std::vector<std::int64_t>& device_count) {
  const std::size_t n = device_count.size();
  if (n < 2) return n;
  std::size_t last = n;
  for (std::size_t i = n; i-- > 0;) {
    if (device_count[i] > 0) {
      last = i;
      break;
    }
  }
  if (last == n) return n;  // no step launched anything: keep all
  std::size_t keep = last + 1;
  if (last > 0 && static_cast<double>(device_count[last - 1]) * 0.8 > static_cast<double>(device_count[last])) {
    keep = last;
  }
  return keep;
}

// ---------------------------------------------------------------------------------------------
// plugin-rules.md#step-time-breakdown

std::vector<step_row> breakdown(const role_ranges& roles, const std::vector<interval>& steps) {
  // The plugin's walk (overall_parser.create_from_range): the first role is taken unclipped and
  // the free slots start as the merged steps; ⚠ whenever the free slots become empty, the next
  // role is again taken unclipped and the slots are reset to the merged steps. The
  // "disjoint parts" of docs/plugin-rules.md#step-time-breakdown hold unless some role covers every
  // step completely.
  interval_list parts[step_role_count];
  interval_list slots;
  const interval_list merged_steps = merge_intervals(steps);
  for (std::size_t r = 0; r < step_role_count - 1; ++r) {
    if (!slots.empty()) {
      parts[r] = intersect_intervals(slots, roles.ranges[r]);
    } else {
      parts[r] = roles.ranges[r];
      slots = merged_steps;
    }
    slots = subtract_intervals(slots, parts[r]);
  }
  parts[idx(step_role::other)] = std::move(slots);

  std::vector<step_row> rows;
  rows.reserve(steps.size());
  for (const interval& s : steps) {
    step_row row;
    row.start = s.start;
    row.end = s.end;
    for (std::size_t r = 0; r < step_role_count; ++r) {
      row.value(static_cast<step_role>(r)) = overlap_length(parts[r], s.start, s.end);
    }
    row.total = s.end - s.start;
    rows.push_back(std::move(row));
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// plugin-rules.md#gpu-summary helpers

namespace {

using kernel_sample = valued_interval;

/// The plugin's merge_ranges_with_value: `emit(start, end, value)` for each segment, in time
/// order. The plugin sorts all endpoints by (time, START before END), stably (so equal ones
/// keep the samples' order), and sweeps them. Samples come in start order from the time-sorted
/// events; then the same endpoint order comes from the starts as they are and a min-heap of
/// pending ends keyed (time, sample): the same additions in the same order, without the
/// endpoint table and its sort (on a 10 GB trace 2.5 million kernels: 120 MB of endpoints and a
/// sort buffer, held beside the timeline at the index's memory peak). Input out of start order,
/// with an end before its start or a NaN time takes the plugin's way.
/// `src`: size() samples, src[i] a kernel_sample (a vector of them, or kernel_samples).
template <class Samples, class Emit>
void merge_with_value_each(const Samples& src, Emit emit) {
  if (src.empty()) return;
  bool last_value_set = false;
  double last_time = 0, last_value = 0;
  const auto visit = [&](double time, bool start, double value) {
    if (!last_value_set) {  // (the first endpoint's value, whatever its kind: as the plugin)
      last_time = time;
      last_value = value;
      last_value_set = true;
      return;
    }
    if (time > last_time && last_value > 0.0) emit(last_time, time, std::min(last_value, 1.0));
    last_time = time;
    if (start) last_value += value;
    else last_value -= value;
  };
  bool in_order = true;
  double last_start = 0;
  for (std::size_t i = 0; i < src.size() && in_order; ++i) {
    const kernel_sample k = src[i];
    in_order = k.start <= k.end && (i == 0 || last_start <= k.start);
    last_start = k.start;
  }
  if (in_order) {
    struct pending {
      double end;
      std::size_t sample;
      double value;
      bool operator>(const pending& o) const noexcept {
        return end > o.end || (end == o.end && sample > o.sample);
      }
    };
    std::priority_queue<pending, std::vector<pending>, std::greater<>> ends;
    std::size_t i = 0;
    kernel_sample next{};
    if (i < src.size()) next = src[i];
    while (i < src.size() || !ends.empty()) {
      if (i < src.size() && (ends.empty() || next.start <= ends.top().end)) {
        visit(next.start, true, next.value);
        ends.push({next.end, i, next.value});
        if (++i < src.size()) next = src[i];
      } else {
        const pending k = ends.top();
        ends.pop();
        visit(k.end, false, k.value);
      }
    }
    return;
  }
  struct endpoint {
    double time;
    int type;  // 0 start, 1 end
    double value;
  };
  std::vector<endpoint> eps;
  eps.reserve(src.size() * 2);
  for (std::size_t i = 0; i < src.size(); ++i) {
    const kernel_sample k = src[i];
    eps.push_back({k.start, 0, k.value});
    eps.push_back({k.end, 1, k.value});
  }
  std::stable_sort(eps.begin(), eps.end(), [](const endpoint& a, const endpoint& b) {
    return a.time < b.time || (a.time == b.time && a.type < b.type);
  });
  for (const endpoint& ep : eps) visit(ep.time, ep.type == 0, ep.value);
}

/// Kernel events read as samples: [ts, end) and one of their args.
struct kernel_samples {
  const trace_model* model = nullptr;
  double kernel_args::*value = nullptr;
  std::vector<std::uint32_t> events;  ///< indices into model->events
  std::size_t size() const noexcept { return events.size(); }
  bool empty() const noexcept { return events.empty(); }
  kernel_sample operator[](std::size_t i) const noexcept {
    const event& e = model->events[events[i]];
    return {e.ts, e.end(), model->kernels[e.extra].*value};
  }
};

/// Per-GPU kernel data as the plugin's GPUMetricsParser collects it (the samples as event
/// indices: 4 bytes a kernel, not 24).
struct gpu_kernels {
  interval_list ranges;      // merged (see collect_gpu_kernels)
  kernel_samples blocks;     // blocks per SM > 0
  kernel_samples occupancy;  // occupancy ≥ 0
};

/// `occupancy` false: leave gpu_kernels::occupancy empty (the counters do not read it).
std::map<std::int64_t, gpu_kernels> collect_gpu_kernels(const trace_model& model, bool occupancy = true) {
  std::map<std::int64_t, gpu_kernels> gpus;
  // The ranges merged as they come (events are in time order: a list of merged ranges, not one
  // range per kernel, 40 MB on a 10 GB trace).
  std::map<std::int64_t, interval_merger> ranges;
  for (std::uint32_t i = 0; i < model.events.size(); ++i) {
    const event& e = model.events[i];
    if (e.type != event_type::kernel || e.extra == no_index || e.extra >= model.kernels.size()) continue;
    const kernel_args& k = model.kernels[e.extra];
    if (k.device < 0) continue;
    auto [it, added] = gpus.try_emplace(k.device);
    gpu_kernels& g = it->second;
    if (added) {
      g.blocks = {&model, &kernel_args::blocks_per_sm, {}};
      g.occupancy = {&model, &kernel_args::occupancy, {}};
    }
    ranges[k.device].add({e.ts, e.end()});
    if (k.has_blocks_per_sm && k.blocks_per_sm > 0.0) g.blocks.events.push_back(i);
    if (occupancy && k.has_occupancy && k.occupancy >= 0.0) g.occupancy.events.push_back(i);
  }
  for (auto& [id, g] : gpus) g.ranges = ranges[id].take();
  return gpus;
}

/// [g0, g1) of plugin-rules.md#gpu-counters: the last "PyTorch Profiler (0)" Trace event, else the
/// global extent.
std::pair<double, double> timeline_range(const trace_model& model) {
  double lo = inf, hi = -inf;
  bool found = false;
  double g_lo = inf, g_hi = -inf;
  for (const event& e : model.events) {
    if (!is_used_event(model, e)) continue;
    g_lo = std::min(g_lo, e.ts);
    g_hi = std::max(g_hi, e.end());
    if (e.type == event_type::trace && model.str(e.name) == "PyTorch Profiler (0)") {
      lo = e.ts;
      hi = e.end();
      found = true;
    }
  }
  if (found) return {lo, hi};
  if (g_lo > g_hi) return {0, 0};
  return {g_lo, g_hi};
}

}  // namespace

std::vector<valued_interval> merge_ranges_with_value(const std::vector<valued_interval>& samples) {
  std::vector<valued_interval> out;
  merge_with_value_each(samples, [&](double start, double end, double value) { out.push_back({start, end, value}); });
  return out;
}

std::vector<valued_interval> sm_efficiency_segments(const trace_model& model, std::int64_t gpu) {
  const auto gpus = collect_gpu_kernels(model);
  const auto it = gpus.find(gpu);
  if (it == gpus.end()) return {};
  std::vector<valued_interval> out;
  merge_with_value_each(it->second.blocks, [&](double start, double end, double value) { out.push_back({start, end, value}); });
  return out;
}

// ---------------------------------------------------------------------------------------------
// compute_overview

overview_result compute_overview(const trace_model& model, const op_trees& trees,
                                 const overview_options& options) {
  overview_result out;
  const role_ranges roles = compute_role_ranges(model, options);
  out.uses_gpu = !roles[step_role::runtime].empty() || !roles[step_role::kernel].empty() ||
                 !roles[step_role::memcpy].empty() || !roles[step_role::memset].empty();
  out.has_communication = !roles[step_role::communication].empty();
  out.has_kernel = !roles[step_role::kernel].empty();

  std::vector<host_step> hs = host_steps(model, roles, options, &out.synthetic_step);
  if (out.synthetic_step) {
    out.notes.push_back(hs.empty() ? "No ProfilerStep# and no host operator: no step to show."
                                   : "No ProfilerStep# events: the whole host range is shown as step \"0\".");
  }

  // plugin-rules.md#step-extension: every real runtime with the device nodes it launched. (In
  // a block: on a big trace these tables are 0.2 GB, gone before the GPU summary's.)
  extended_steps ext;
  {
    std::vector<launch> launches;
    launches.reserve(trees.runtimes.size());
    for (const runtime_node& rt : trees.runtimes) {
      if (rt.stale_dummy) continue;
      launches.push_back({rt.start, rt.end, std::span<const std::uint32_t>(rt.devices.begin(), rt.devices.size())});
    }
    std::vector<const launch*> launch_ptrs;
    launch_ptrs.reserve(launches.size());
    for (const launch& l : launches) launch_ptrs.push_back(&l);
    std::vector<std::pair<std::uint32_t, interval>> all_devices;
    all_devices.reserve(trees.devices.size());
    for (std::uint32_t d = 0; d < trees.devices.size(); ++d) {
      all_devices.push_back({d, {trees.devices[d].start, trees.devices[d].end}});
    }
    std::vector<interval> host_ranges;
    host_ranges.reserve(hs.size());
    for (const host_step& s : hs) host_ranges.push_back({s.start, s.end});
    ext = extend_steps(host_ranges, std::move(launch_ptrs), all_devices);
  }
  out.steps_extended = ext.matched;

  // plugin-rules.md#tail-steps
  std::size_t keep = hs.size();
  if (ext.matched) keep = steps_to_keep(ext.device_count);
  if (keep < hs.size()) {
    for (std::size_t i = keep; i < hs.size(); ++i) out.dropped_steps.push_back(hs[i].name);
    std::string note = "Removed the last " + std::to_string(hs.size() - keep) +
                       " step(s) from the overview (";
    for (std::size_t i = 0; i < out.dropped_steps.size(); ++i) {
      note += (i ? ", " : "") + out.dropped_steps[i];
    }
    note += "): they launched too few GPU operations, so the profiler probably missed part of their GPU work.";
    if (options.drop_tail_steps) {
      out.notes.push_back(std::move(note));
      hs.resize(keep);
      ext.steps.resize(keep);
      ext.device_count.resize(keep);
    } else {
      out.dropped_steps.clear();
    }
  }

  // plugin-rules.md#step-time-breakdown
  out.steps = breakdown(roles, ext.steps);
  for (std::size_t i = 0; i < out.steps.size(); ++i) {
    out.steps[i].name = hs[i].name;
    out.steps[i].device_nodes = ext.device_count[i];
  }
  out.average.name = "Average";
  if (!out.steps.empty()) {
    for (const step_row& row : out.steps) {
      for (std::size_t r = 0; r < step_role_count; ++r) {
        out.average.value(static_cast<step_role>(r)) += row.value(static_cast<step_role>(r));
      }
      out.average.total += row.total;
    }
    const double n = static_cast<double>(out.steps.size());
    for (std::size_t r = 0; r < step_role_count; ++r) out.average.value(static_cast<step_role>(r)) /= n;
    out.average.total /= n;
    out.steps_start = out.steps.front().start;
    out.steps_end = out.steps.back().end;
  }

  // plugin-rules.md#gpu-summary
  const auto gpus = collect_gpu_kernels(model);
  for (const auto& [id, g] : gpus) out.gpu_ids.insert(id);
  if (gpus.empty()) return out;
  const gpu_tc_ratio tc = options.tc_over_all_kernels ? tc_ratio_per_gpu_all_kernels(model, trees, out.gpu_ids)
                                                       : tc_ratio_per_gpu(model, trees, out.gpu_ids);
  const double t0 = out.steps_start;
  const double t1 = out.steps_end;
  const double total = t1 - t0;
  for (const auto& [id, g] : gpus) {
    gpu_summary_row row;
    row.id = static_cast<int>(id);
    if (id >= 0 && static_cast<std::size_t>(id) < model.devices.size() && model.devices[id].present) {
      const device_info& dev = model.devices[id];
      if (dev.has_name) row.name = dev.name;
      if (dev.has_total_global_mem) row.memory_bytes = dev.total_global_mem;
      if (dev.has_compute_major && dev.has_compute_minor) {
        row.compute_capability = std::to_string(dev.compute_major) + "." + std::to_string(dev.compute_minor);
      }
    }
    // GPU utilization: busy time within the steps range / steps time.
    row.utilization = total > 0 ? overlap_length(g.ranges, t0, t1) / total : 0.0;
    row.utilization_pct = py_round(row.utilization * 100, 2);
    // Est. SM efficiency.
    double weighted = 0;
    bool any = false;
    merge_with_value_each(g.blocks, [&](double start, double end, double value) {
      const double lo = std::max(start, t0);
      const double hi = std::min(end, t1);
      if (lo < hi) {
        weighted += value * (hi - lo);
        any = true;
      }
    });
    if (any && total > 0) {
      row.sm_efficiency = weighted / total;
      row.sm_efficiency_pct = py_round(*row.sm_efficiency * 100, 2);
    }
    // Est. achieved occupancy: duration-weighted over the clipped kernels.
    double occ_sum = 0, occ_time = 0;
    for (std::size_t i = 0; i < g.occupancy.size(); ++i) {
      const kernel_sample k = g.occupancy[i];
      const double lo = std::max(k.start, t0);
      const double hi = std::min(k.end, t1);
      if (lo < hi) {
        occ_sum += k.value * (hi - lo);
        occ_time += hi - lo;
      }
    }
    if (occ_time > 0) {
      row.achieved_occupancy = occ_sum / occ_time;
      row.achieved_occupancy_pct = py_round(*row.achieved_occupancy, 2);
    }
    // Kernel time using tensor cores.
    if (tc.has_kernel) {
      const auto it = tc.ratio.find(id);
      row.tensor_cores = it == tc.ratio.end() ? 0.0 : it->second;
      row.tensor_cores_pct = py_round(*row.tensor_cores * 100, 2);
    }
    out.gpus.push_back(std::move(row));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Display forms

std::vector<gpu_summary_item> gpu_summary_items(const overview_result& overview) {
  std::vector<gpu_summary_item> items;
  const auto pct = [](double v) { return py_float_repr(v) + " %"; };
  for (std::size_t i = 0; i < overview.gpus.size(); ++i) {
    const gpu_summary_row& g = overview.gpus[i];
    if (i > 0) items.push_back({"<hr/>", ""});
    items.push_back({"GPU " + std::to_string(g.id) + ":", ""});
    if (!g.name.empty()) items.push_back({"Name", g.name});
    if (g.memory_bytes > 0) items.push_back({"Memory", g.memory_text()});
    if (!g.compute_capability.empty()) items.push_back({"Compute Capability", g.compute_capability});
    items.push_back({"GPU Utilization", pct(g.utilization_pct)});
    if (g.sm_efficiency_pct) items.push_back({"Est. SM Efficiency", pct(*g.sm_efficiency_pct)});
    if (g.achieved_occupancy_pct) items.push_back({"Est. Achieved Occupancy", pct(*g.achieved_occupancy_pct)});
    if (g.tensor_cores_pct) items.push_back({"Kernel Time using Tensor Cores", pct(*g.tensor_cores_pct)});
  }
  return items;
}

std::string gpu_summary_tooltip(const overview_result& overview) {
  if (overview.gpus.empty()) return {};
  bool sm = false, occ = false, tc = false;
  for (const gpu_summary_row& g : overview.gpus) {
    sm = sm || g.sm_efficiency_pct.has_value();
    occ = occ || g.achieved_occupancy_pct.has_value();
    tc = tc || g.tensor_cores_pct.has_value();
  }
  std::string t = "The GPU usage metrics:\n\n"
                  "GPU Utilization: the share of the steps' time during which at least one kernel runs on the "
                  "GPU (memory copies and sets do not count). A kernel that uses only part of the GPU still "
                  "counts as busy time.\n";
  if (sm) {
    t += "\nEst. SM Efficiency: an estimate of how many of the GPU's streaming multiprocessors are busy. For "
         "each moment, the blocks per SM of the running kernels are added and capped at 1; the result is "
         "averaged over the whole steps' time, so idle time counts as 0.\n";
  }
  if (occ) {
    t += "\nEst. Achieved Occupancy: the kernels' estimated achieved occupancy (active warps per SM relative "
         "to the maximum, as the profiler estimated it), averaged over the kernels in the steps weighted by "
         "their duration.\n";
  }
  if (tc) {
    t += "\nKernel Time using Tensor Cores: the share of the operators' kernel time spent in kernels known to "
         "use Tensor Cores.\n";
  }
  return t;
}

std::vector<performance_item> performance_breakdown(const overview_result& overview) {
  std::vector<performance_item> items;
  const double total = overview.average.total;
  items.push_back({"Average Step Time", py_round(total), 100});
  for (std::size_t r = 0; r < step_role_count; ++r) {
    const auto role = static_cast<step_role>(r);
    if (!overview.shows(role)) continue;
    const double v = overview.average.value(role);
    items.push_back({std::string(step_role_title(role)), py_round(v), total != 0 ? py_round(100 * v / total, 2) : 0.0});
  }
  return items;
}

// ---------------------------------------------------------------------------------------------
// plugin-rules.md#gpu-counters

std::string gpu_counter_name(std::int64_t gpu, gpu_counter counter) {
  return "GPU " + std::to_string(gpu) +
         (counter == gpu_counter::utilization ? " Utilization" : " Est. SM Efficiency");
}

std::string_view gpu_counter_arg(gpu_counter counter) noexcept {
  return counter == gpu_counter::utilization ? "GPU Utilization" : "Est. SM Efficiency";
}

namespace {

/// gpu_utilization_counters, the SM-efficiency points into the result (`sm` null) or to `sm`.
std::vector<counter_point> counters(const trace_model& model, sm_efficiency_sink* sm) {
  std::vector<counter_point> out;
  const auto gpus = collect_gpu_kernels(model, /*occupancy=*/false);
  if (gpus.empty()) return out;
  // (Plain variables, not a structured binding: the lambdas below use g0, and clang before 16
  // cannot capture a binding.)
  const std::pair<double, double> range_ends = timeline_range(model);
  const double g0 = range_ends.first, g1 = range_ends.second;
  const double range = g1 - g0;
  // Bucket size: smallest power of ten (µs) giving at most 100 buckets.
  double bucket = 1;
  while (range / bucket > 100) bucket *= 10;
  const auto buckets = static_cast<std::size_t>(range / bucket);

  // The points counted first (the SM-efficiency series has two per segment: 10 million on a
  // 10 GB trace), so that they are written once, not copied as the table doubles.
  std::size_t sm_points = 0;
  if (buckets > 0) {
    for (const auto& [gpu, g] : gpus) {
      std::size_t segments = 0;
      merge_with_value_each(g.blocks, [&](double, double, double) { ++segments; });
      sm_points += segments > 0 ? 2 + 2 * segments : 0;
    }
  }
  const std::size_t utilization_points = buckets > 0 ? gpus.size() * (buckets + 3) : 0;
  out.reserve(utilization_points + (sm == nullptr ? sm_points : 0));
  if (sm != nullptr) sm->reserve(sm_points);
  const auto add_sm = [&](std::int64_t gpu, double ts, double value) {
    if (sm != nullptr) sm->point(gpu, ts, value);
    else out.push_back({gpu, gpu_counter::sm_efficiency, ts, value});
  };
  // All utilization series first, then all SM-efficiency series (the plugin's order).
  for (const auto& [gpu, g] : gpus) {
    if (buckets == 0) continue;  // the plugin crashes on a range shorter than 1 µs
    std::vector<interval> bucket_ranges(buckets);
    for (std::size_t i = 0; i < buckets; ++i) {
      bucket_ranges[i] = {g0 + static_cast<double>(i) * bucket,
                          i + 1 < buckets ? g0 + static_cast<double>(i + 1) * bucket : g1};
    }
    std::vector<double> busy(buckets, 0.0);
    // Two-pointer walk over merged kernel ranges and buckets (the plugin's order of additions).
    std::size_t ri = 0, bi = 0;
    while (ri < g.ranges.size() && bi < buckets) {
      const interval& r = g.ranges[ri];
      const interval& b = bucket_ranges[bi];
      if (b.end <= r.start) {
        ++bi;
      } else if (b.start >= r.end) {
        ++ri;
      } else {
        busy[bi] += std::min(r.end, b.end) - std::max(r.start, b.start);
        if (b.end < r.end) {
          ++bi;
        } else {
          ++ri;
        }
      }
    }
    // Baseline 1 then 0 at the first bucket start, so the counter's axis maximum is 1.
    out.push_back({gpu, gpu_counter::utilization, bucket_ranges[0].start, 1});
    out.push_back({gpu, gpu_counter::utilization, bucket_ranges[0].start, 0});
    for (std::size_t i = 0; i < buckets; ++i) {
      const double len = bucket_ranges[i].end - bucket_ranges[i].start;
      out.push_back({gpu, gpu_counter::utilization, bucket_ranges[i].start, len > 0 ? busy[i] / len : 0.0});
    }
    out.push_back({gpu, gpu_counter::utilization, bucket_ranges.back().end, 0});
  }
  for (const auto& [gpu, g] : gpus) {
    if (buckets == 0) continue;
    bool first = true;
    merge_with_value_each(g.blocks, [&, gpu = gpu](double start, double end, double value) {
      if (first) {
        add_sm(gpu, g0, 1);
        add_sm(gpu, g0, 0);
        first = false;
      }
      add_sm(gpu, start, value);
      add_sm(gpu, end, 0);
    });
  }
  return out;
}

}  // namespace

std::vector<counter_point> gpu_utilization_counters(const trace_model& model) { return counters(model, nullptr); }

std::vector<counter_point> gpu_utilization_counters(const trace_model& model, sm_efficiency_sink& sm) {
  return counters(model, &sm);
}

}  // namespace kinetoscope::analysis
