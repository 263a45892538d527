// SPDX-License-Identifier: BSD-3-Clause
/// @file tensorboard_scalars.cpp
/// Per-step TensorBoard scalars (docs/tensorboard-files.md#step-scalars): the viewer's Overview
/// breakdown of each ProfilerStep#N, peak memory, operator and kernel counts.

#include "kinetoscope/tensorboard/scalars.hpp"

#include <algorithm>
#include <charconv>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "analysis/loader.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/overview.hpp"
#include "analysis/rules.hpp"
#include "kinetoscope/writer/chrome_trace.hpp"
#include "kinetoscope/writer/trace_handler.hpp"

namespace kinetoscope {

namespace {

/// N of "ProfilerStep#N", or false when `name` is not a step name.
bool parse_step_name(std::string_view name, std::int64_t& step) {
  constexpr std::string_view prefix = "ProfilerStep#";
  if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) return false;
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + name.size();
  const auto [ptr, ec] = std::from_chars(first, last, step);
  return ec == std::errc() && ptr == last;
}

/// "CPU" / "GPU<id>", as the Memory view names devices.
std::string device_name(const memory_event& m) {
  return m.device == device_type::cpu ? std::string("CPU") : "GPU" + std::to_string(m.device_id);
}

struct host_step_range {
  std::int64_t step = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

/// The overview rows of `data`, keyed by row name ("12"), in time order per name.
std::map<std::string, std::deque<analysis::step_row>> overview_rows(const trace_data& data) {
  const std::string text = chrome_trace_string(data);
  analysis::load_result loaded = analysis::load_trace_buffer(text, "window");
  if (!loaded.ok()) {
    throw std::runtime_error("step scalars: cannot analyse the window: " + loaded.error->message());
  }
  const analysis::trace_model& model = *loaded.model;
  // The scalars follow the viewer's default rules (docs/kinetoscope-rules.md).
  const analysis::analysis_rules rules = analysis::rules(analysis::rule_set::kinetoscope);
  const analysis::op_trees trees = analysis::build_op_tree(model, rules.tree);
  analysis::overview_options options = rules.overview;
  options.drop_tail_steps = false;  // same values for kept steps; hidden tail steps still listed
  const analysis::overview_result overview = analysis::compute_overview(model, trees, options);
  std::map<std::string, std::deque<analysis::step_row>> rows;
  if (overview.synthetic_step) return rows;
  for (const analysis::step_row& row : overview.steps) rows[row.name].push_back(row);
  return rows;
}

constexpr double us_per_ms = 1000.0;

}  // namespace

std::vector<scalar_value> step_scalars::to_scalar_values() const {
  const std::string p = scalars_tag_prefix;
  auto f = [](double v) { return static_cast<float>(v); };
  std::vector<scalar_value> out = {
      {p + "step_time_ms", f(step_time_ms)},
      {p + "breakdown/kernel_ms", f(kernel_ms)},
      {p + "breakdown/memcpy_ms", f(memcpy_ms)},
      {p + "breakdown/memset_ms", f(memset_ms)},
      {p + "breakdown/communication_ms", f(communication_ms)},
      {p + "breakdown/runtime_ms", f(runtime_ms)},
      {p + "breakdown/dataloader_ms", f(dataloader_ms)},
      {p + "breakdown/cpu_exec_ms", f(cpu_exec_ms)},
      {p + "breakdown/other_ms", f(other_ms)},
  };
  for (const auto& [device, bytes] : peak_allocated_bytes) {
    out.push_back({p + "memory/peak_allocated_bytes/" + device, f(static_cast<double>(bytes))});
  }
  out.push_back({p + "operators", f(static_cast<double>(operators))});
  out.push_back({p + "kernels", f(static_cast<double>(kernels))});
  return out;
}

std::vector<step_scalars> compute_step_scalars(const trace_data& data) {
  std::vector<host_step_range> steps;
  for (const cpu_event& e : data.events) {
    std::int64_t n = 0;
    if (e.category == cpu_category::user_annotation && e.name < data.strings.size() &&
        parse_step_name(data.str(e.name), n)) {
      steps.push_back({n, e.start_ns, e.end_ns});
    }
  }
  std::vector<step_scalars> out;
  if (steps.empty()) return out;
  std::stable_sort(steps.begin(), steps.end(),
                   [](const host_step_range& a, const host_step_range& b) { return a.start_ns < b.start_ns; });

  std::map<std::string, std::deque<analysis::step_row>> rows = overview_rows(data);

  // Launch time of each correlation id, for kernel counting.
  std::unordered_map<std::int64_t, std::int64_t> launch_ns;
  for (const runtime_call& r : data.runtime) launch_ns.emplace(r.correlation, r.start_ns);

  // Devices with memory records, in first-record order.
  std::vector<std::string> devices;
  for (const memory_event& m : data.memory) {
    std::string d = device_name(m);
    if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(std::move(d));
  }

  for (const host_step_range& hs : steps) {
    step_scalars s;
    s.step = hs.step;
    s.start_ns = hs.start_ns;
    s.end_ns = hs.end_ns;
    auto it = rows.find(std::to_string(hs.step));
    if (it != rows.end() && !it->second.empty()) {
      const analysis::step_row row = it->second.front();
      it->second.pop_front();
      s.step_time_ms = row.total / us_per_ms;
      s.kernel_ms = row.kernel / us_per_ms;
      s.memcpy_ms = row.memcpy / us_per_ms;
      s.memset_ms = row.memset / us_per_ms;
      s.communication_ms = row.communication / us_per_ms;
      s.runtime_ms = row.runtime / us_per_ms;
      s.dataloader_ms = row.dataloader / us_per_ms;
      s.cpu_exec_ms = row.cpu_exec / us_per_ms;
      s.other_ms = row.other / us_per_ms;
    } else {
      // Not expected (every ProfilerStep# is a row); keep the host duration as the total.
      s.step_time_ms = static_cast<double>(hs.end_ns - hs.start_ns) * 1e-6;
      s.other_ms = s.step_time_ms;
    }

    auto inside = [&](std::int64_t t) { return t >= hs.start_ns && t < hs.end_ns; };
    for (const cpu_event& e : data.events) {
      if (e.category == cpu_category::cpu_op && inside(e.start_ns)) ++s.operators;
    }
    for (const gpu_activity& g : data.gpu) {
      if (g.kind != gpu_kind::kernel) continue;
      const auto l = launch_ns.find(g.correlation);
      if (inside(l != launch_ns.end() ? l->second : g.start_ns)) ++s.kernels;
    }
    for (const std::string& d : devices) {
      std::int64_t peak = 0;
      for (const memory_event& m : data.memory) {
        if (m.time_ns >= hs.end_ns) break;  // sorted by time
        if (device_name(m) != d) continue;
        if (m.time_ns < hs.start_ns) {
          peak = m.total_allocated;  // the level held when the step began (last one wins)
        } else {
          peak = std::max(peak, m.total_allocated);
        }
      }
      s.peak_allocated_bytes.emplace_back(d, peak);
    }
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

/// Shared by the copies of one callback: the lazily created event file.
struct scalars_state {
  std::string dir;
  std::mutex mutex;
  std::unique_ptr<event_file_writer> writer;

  void write(const trace_data& data) {
    const std::vector<step_scalars> steps = compute_step_scalars(data);
    if (steps.empty()) return;
    std::lock_guard<std::mutex> lock(mutex);
    if (!writer) writer = std::make_unique<event_file_writer>(dir.empty() ? std::string(".") : dir);
    for (const step_scalars& s : steps) {
      writer->add_scalars(s.step, s.to_scalar_values(), static_cast<double>(s.end_ns) * 1e-9);
    }
  }
};

}  // namespace

trace_ready_fn with_tensorboard_scalars(std::string dir, trace_ready_fn fn) {
  auto state = std::make_shared<scalars_state>();
  state->dir = std::move(dir);
  return [state, fn = std::move(fn)](profile& prof) {
    std::exception_ptr trace_error;
    if (fn) {
      try {
        fn(prof);
      } catch (...) {
        trace_error = std::current_exception();
      }
    }
    std::string scalar_error;
    try {
      state->write(prof.last_trace());
    } catch (const std::exception& e) {
      scalar_error = e.what();
    } catch (...) {
      scalar_error = "unknown error";
    }
    if (trace_error) {
      if (scalar_error.empty()) std::rethrow_exception(trace_error);
      try {
        std::rethrow_exception(trace_error);
      } catch (const std::exception& e) {
        throw std::runtime_error(std::string(e.what()) + "; step scalars: " + scalar_error);
      }
    }
    if (!scalar_error.empty()) throw std::runtime_error("step scalars: " + scalar_error);
  };
}

trace_ready_fn tensorboard_trace_handler_with_scalars(std::string dir, std::string worker_name,
                                                      bool use_gzip) {
  trace_ready_fn files = tensorboard_trace_handler(dir, std::move(worker_name), use_gzip);
  return with_tensorboard_scalars(std::move(dir), std::move(files));
}

}  // namespace kinetoscope
