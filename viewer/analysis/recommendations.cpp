// SPDX-License-Identifier: BSD-3-Clause
#include "analysis/recommendations.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string_view>

#include "analysis/intervals.hpp"
#include "kinetoscope/formats/py_number.hpp"

namespace kinetoscope::analysis {

using formats::py_round;
namespace {

/// Builds the plain and the HTML form of one message together.
class message {
 public:
  message& text(std::string_view s) {
    text_ += s;
    html_ += escape(s);
    return *this;
  }
  message& link(std::string_view label, std::string_view url) {
    text_ += label;
    html_ += "<a href=\"";
    html_ += escape(url);
    html_ += "\" target=\"_blank\">";
    html_ += escape(label);
    html_ += "</a>";
    return *this;
  }
  /// The view state that shows the finding (the view alone unless said).
  message& target(recommendation_target t) {
    target_ = std::move(t);
    return *this;
  }
  recommendation done(recommendation_kind kind, int rule) {
    recommendation r;
    r.target = std::move(target_);
    r.kind = kind;
    r.rule = rule;
    r.extra = rule == 0;
    r.text = std::move(text_);
    r.html = std::move(html_);
    return r;
  }

 private:
  static std::string escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        default: out += c;
      }
    }
    return out;
  }
  std::string text_;
  std::string html_;
  recommendation_target target_;
};

using target_kind = recommendation_target::kind_type;

recommendation_target view_target(std::string view) {
  recommendation_target t;
  t.view = std::move(view);
  return t;
}

recommendation_target trace_target(double start, double end, std::int64_t device) {
  recommendation_target t;
  t.kind = target_kind::trace;
  t.view = "Trace";
  t.start_us = start;
  t.end_us = end;
  t.device = device;
  return t;
}

recommendation_target kernel_target(std::string_view kernel) {
  recommendation_target t;
  t.kind = target_kind::kernel;
  t.view = "Kernel";
  t.kernel = std::string(kernel);
  return t;
}

std::string format_int(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", x);
  return buf;
}

std::string format_ms(double us) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f ms", us / 1000.0);
  return buf;
}

bool is_sync_call(std::string_view name) {
  static constexpr std::string_view names[] = {
      "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
      "hipDeviceSynchronize",  "hipStreamSynchronize",  "hipEventSynchronize",
  };
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

// --- the plugin's rules -------------------------------------------------------------------------

void rule_data_loader(const overview_result& ov, std::vector<recommendation>& out) {
  if (!(ov.average.total > 0)) return;
  const double ratio = ov.average.dataloader / ov.average.total;
  if (!(ratio > 0.05)) return;
  out.push_back(message{}
                    .text("This run has high time cost on input data loading. " + format_1f(ratio * 100) +
                          "% of the step time is in DataLoader. You could try to set num_workers on "
                          "DataLoader's construction and ")
                    .link("enable multi-processes on data loading",
                          "https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading")
                    .text(".")
                    .target(view_target("Overview"))
                    .done(recommendation_kind::data_loader, 1));
}

void rules_distributed(const trace_model& model, const op_trees& trees, const overview_result& ov,
                       std::vector<recommendation>& out) {
  if (trees.uses_dp && trees.used_devices.size() > 1) {
    out.push_back(message{}
                      .text("It is recommended to ")
                      .link("use DistributedDataParallel instead of DataParallel",
                            "https://pytorch.org/docs/stable/notes/cuda.html#cuda-nn-ddp-instead")
                      .text(" to do multi-GPU training.")
                      .target(view_target("Distributed"))
                      .done(recommendation_kind::ddp_instead_of_dp, 2));
  }
  if (trees.uses_ddp && !model.devices.empty()) {
    // "NCCL seen" = a host op named like one of the plugin's NCCL collectives
    // (docs/plugin-rules.md#event-categories).
    bool nccl = false;
    for (const event& e : model.events) {
      if (e.type != event_type::op && e.type != event_type::user_annotation && e.type != event_type::python) continue;
      const std::string_view name = model.str(e.name);
      if (name.substr(0, 5) == "nccl:" && is_plugin_comm_name(name)) {
        nccl = true;
        break;
      }
    }
    if (!nccl) {
      for (const device_info& dev : model.devices) {
        if (!dev.present || !dev.has_compute_major || !dev.has_compute_minor) continue;
        const std::string cc = std::to_string(dev.compute_major) + "." + std::to_string(dev.compute_minor);
        if (std::strtod(cc.c_str(), nullptr) >= 3.5) {
          out.push_back(message{}
                            .text("Nccl backend is currently the fastest and highly recommended backend when "
                                  "using DDP for training.")
                            .target(view_target("Distributed"))
                            .done(recommendation_kind::nccl_backend, 3));
          break;
        }
      }
    }
  }
  if (ov.average.total > 0) {
    const double ratio = ov.average.communication / ov.average.total;
    if (ratio > 0.1) {
      out.push_back(
          message{}
              .text("This run has high time cost on communication. " + format_1f(ratio * 100) +
                    "% of the step time is in communication. You could try ")
              .link("Gradient Compression", "https://pytorch.org/docs/stable/ddp_comm_hooks.html")
              .text(" or ")
              .link("Gradient Accumulation",
                    "https://towardsdatascience.com/what-is-gradient-accumulation-in-deep-learning-ec034122cfa")
              .text(" or increase the batch size. Note: Gradient accumulation will increase global effective "
                    "batch size, which may hurt model convergence and accuracy. For such case, you may want to "
                    "evaluate ")
              .link("LAMB optimizer", "https://nvidia.github.io/apex/optimizers.html#apex.optimizers.FusedLAMB")
              .text(".")
              .target(view_target("Distributed"))
              .done(recommendation_kind::communication, 4));
    }
  }
}

void rule_gpu_utilization(const overview_result& ov, std::vector<recommendation>& out) {
  std::vector<std::int64_t> low;
  for (const gpu_summary_row& g : ov.gpus) {
    if (g.utilization < 0.5) low.push_back(g.id);
  }
  if (low.empty()) return;
  const bool one = low.size() == 1;
  out.push_back(message{}
                    .text(std::string(one ? "GPU " : "GPUs ") + join_gpu_ids(low) + (one ? " has" : " have") +
                          " low utilization. You could try to increase batch size to improve. Note: Increasing "
                          "batch size may affect the speed and stability of model convergence.")
                    // Utilization is measured over the profiled steps: that window of the first GPU named.
                    .target(ov.steps.empty() ? view_target("Overview") : trace_target(ov.steps_start, ov.steps_end, low[0]))
                    .done(recommendation_kind::low_gpu_utilization, 5));
}

void rule_amp(const trace_model& model, const op_trees& trees, const overview_result& ov,
              std::vector<recommendation>& out) {
  if (model.devices.empty()) return;
  const device_info& dev0 = model.devices[0];
  if (!dev0.present || !dev0.has_compute_major || dev0.compute_major < 7) return;
  // The plugin's tc_used_ratio exists only when the Kernel role has ranges ("pure CPU run").
  if (!ov.has_kernel) return;
  if (tc_kernel_ratio(model, trees) != 0.0) return;
  const double eligible = eligible_op_kernel_ratio(trees);
  if (!(eligible > 0.0)) return;
  // The kernel that takes the most time (none uses Tensor Cores here).
  std::map<std::string_view, double> kernel_time;
  for (const device_node& dn : trees.devices)
    if (dn.type == event_type::kernel) kernel_time[dn.name] += dn.end - dn.start;
  std::string_view top;
  double top_time = -1;
  for (const auto& [name, t] : kernel_time)
    if (t > top_time) {
      top = name;
      top_time = t;
    }
  out.push_back(message{}
                    .text("Kernels with " + format_int(py_round(eligible * 100)) +
                          "% time are launched by Tensor Cores eligible operators. You could enable ")
                    .link("Automatic Mixed Precision", "https://pytorch.org/docs/stable/amp.html")
                    .text(" to speedup by using FP16.")
                    .target(top.empty() ? view_target("Kernel") : kernel_target(top))
                    .done(recommendation_kind::amp, 6));
}

/// Recommendation 7's text and target for one device.
recommendation memory_limit_message(std::int64_t id, double peak, double total) {
  return message{}
      .text("Device memory usage is at the limit of device memory capacity (" + format_1f(peak / total * 100) +
            "% of " + format_1f(total / 1024 / 1024 / 1024) + "GB on GPU" + std::to_string(id) +
            "). To get better value of your GPU or to use larger batch size for training, please refer to ")
      .link("Gradient Checkpoint", "https://pytorch.org/docs/stable/checkpoint.html")
      .text(" or ")
      .link("Automatic Mixed Precision", "https://pytorch.org/docs/stable/amp.html")
      .text(".")
      .target([&] {
        recommendation_target t;
        t.kind = target_kind::memory;
        t.view = "Memory";
        t.device = id;
        return t;
      }())
      .done(recommendation_kind::memory_limit, 7);
}

void rule_memory(const trace_model& model, const recommendation_options& opt, std::vector<recommendation>& out) {
  if (model.devices.empty()) return;
  // Peak "Total Allocated" per (Device Type, Device Id), in first-seen order.
  std::vector<std::pair<std::int64_t, std::int64_t>> order;
  std::map<std::pair<std::int64_t, std::int64_t>, double> peak;
  // docs/kinetoscope-rules.md#k5: a device whose records carry no total at all is judged by the
  // running sum of its byte changes, as the Memory view draws it (the plugin: not at all).
  std::map<std::pair<std::int64_t, std::int64_t>, std::pair<double, double>> rebuilt;  // running, peak
  for (const event& e : model.events) {
    if (e.type != event_type::memory || e.extra == no_index || e.extra >= model.memory.size()) continue;
    const memory_args& m = model.memory[e.extra];
    const auto key = std::pair(m.device_type, m.device_id);
    if (std::isnan(m.total_allocated)) {
      if (!opt.plugin_memory_rule && m.has_addr) {
        auto& [running, top] = rebuilt[key];
        running += static_cast<double>(m.bytes);
        top = std::max(top, running);
      }
      continue;
    }
    auto [it, inserted] = peak.try_emplace(key, m.total_allocated);
    if (inserted) {
      order.push_back(key);
    } else {
      it->second = std::max(it->second, m.total_allocated);
    }
  }
  for (const auto& [key, sums] : rebuilt)
    if (peak.try_emplace(key, sums.second).second) order.push_back(key);
  const auto n = static_cast<std::int64_t>(model.devices.size());
  for (const auto& key : order) {
    const auto [type, id] = key;
    std::int64_t index = id;
    if (opt.plugin_memory_rule) {
      // The plugin skips device type -1, which no trace writes, so the CPU's records (type 0, id
      // -1) meet deviceProperties[-1], the last GPU, in Python's indexing (quirk Q12). An index
      // past the list makes it fail (Q18/Q20): skipped.
      if (type == -1) continue;
      if (index < 0) index += n;
    } else if (type != 1) {
      continue;  // docs/kinetoscope-rules.md#k6: GPUs only, each against its own capacity
    }
    if (index < 0 || index >= n) continue;
    const device_info& dev = model.devices[static_cast<std::size_t>(index)];
    if (!dev.present || !dev.has_total_global_mem || dev.total_global_mem <= 0) continue;
    const double total = static_cast<double>(dev.total_global_mem);
    const double p = peak[key];
    if (!(p > total * 0.9)) continue;
    out.push_back(memory_limit_message(id, p, total));
    if (opt.plugin_memory_rule) break;  // the plugin names the first device only
  }
}

// --- extras ----------------------------------------------------------------------------------

void extra_launch_overhead(const trace_model& model, const op_trees& trees, const overview_result& ov,
                           const recommendation_options& opt, std::vector<recommendation>& out) {
  std::size_t kernels = 0;
  std::size_t short_kernels = 0;
  std::map<std::string_view, std::size_t> short_by_name;
  for (const runtime_node& rt : trees.runtimes) {
    if (rt.stale_dummy) continue;
    const double launch = rt.end - rt.start;
    for (std::uint32_t d : rt.devices) {
      const device_node& dn = trees.devices[d];
      if (dn.type != event_type::kernel) continue;
      ++kernels;
      if (dn.end - dn.start <= launch) {
        ++short_kernels;
        ++short_by_name[dn.name];
      }
    }
  }
  // docs/kinetoscope-rules.md#k6: short launches say the GPU waits for the CPU only when the GPU
  // is in fact idle much of the time.
  bool gpu_busy = false;
  if (opt.launch_overhead_needs_idle_gpu && !ov.gpus.empty()) {
    gpu_busy = true;
    for (const gpu_summary_row& g : ov.gpus) gpu_busy = gpu_busy && g.utilization >= opt.busy_gpu_utilization;
  }
  const bool many_short = !gpu_busy && kernels >= opt.min_kernels &&
                          static_cast<double>(short_kernels) >= opt.short_kernel_share * static_cast<double>(kernels);
  if (many_short) {
    std::string_view most;  // the kernel with the most short launches
    std::size_t most_n = 0;
    for (const auto& [name, n] : short_by_name)
      if (n > most_n) {
        most = name;
        most_n = n;
      }
    out.push_back(message{}
                      .text(std::to_string(short_kernels) + " of " + std::to_string(kernels) + " kernels (" +
                            format_1f(100.0 * static_cast<double>(short_kernels) / static_cast<double>(kernels)) +
                            "%) run no longer than the runtime call that launched them, so the GPU mostly waits "
                            "for the CPU to launch work. Reduce the launch overhead by fusing small operations "
                            "(e.g. ")
                      .link("torch.compile", "https://pytorch.org/docs/stable/generated/torch.compile.html")
                      .text("), capturing the step in ")
                      .link("CUDA Graphs", "https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs")
                      .text(", or increasing the batch size.")
                      .target(kernel_target(most))
                      .done(recommendation_kind::launch_overhead, 0));
  }

  const double runtime_share = ov.average.total > 0 ? ov.average.runtime / ov.average.total : 0.0;
  if (gpu_busy || !ov.uses_gpu || !(runtime_share > opt.runtime_share) || ov.steps.empty()) return;
  // Which runtime calls take the time (inside the steps).
  interval_list steps;
  for (const step_row& st : ov.steps) steps.push_back({st.start, st.end});
  steps = merge_intervals(std::move(steps));
  std::map<std::string_view, double> by_name;
  double all = 0;
  for (const event& e : model.events) {
    if (e.type != event_type::runtime) continue;
    const double t = overlap_length(steps, e.ts, e.end());
    if (t <= 0) continue;
    by_name[model.str(e.name)] += t;
    all += t;
  }
  std::vector<std::pair<std::string_view, double>> top(by_name.begin(), by_name.end());
  std::stable_sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (top.size() > 3) top.resize(3);
  std::string list;
  for (const auto& [name, t] : top) {
    if (!list.empty()) list += ", ";
    list += std::string(name) + " " + format_1f(all > 0 ? 100.0 * t / all : 0.0) + "%";
  }
  out.push_back(message{}
                    .text(format_1f(runtime_share * 100) +
                          "% of the step time is spent in CUDA runtime calls (by time: " + list +
                          "). Kernel launches point to many small operations (fuse them, or use CUDA Graphs); "
                          "allocation, stream or device set-up calls usually mean the profiled steps include "
                          "warm-up work, so profile later steps; synchronisation calls stall the CPU.")
                    .target(view_target("Overview"))
                    .done(recommendation_kind::launch_overhead, 0));
}

void extra_synchronization(const trace_model& model, const overview_result& ov, const recommendation_options& opt,
                           std::vector<recommendation>& out) {
  if (ov.steps.empty()) return;
  interval_list steps;
  double step_time = 0;
  for (const step_row& s : ov.steps) {
    steps.push_back({s.start, s.end});
    step_time += s.total;
  }
  if (!(step_time > 0)) return;
  steps = merge_intervals(std::move(steps));
  std::map<std::string_view, std::size_t> calls;
  interval_list sync;
  interval longest{0, 0};  // the longest call: where the trace shows it
  for (const event& e : model.events) {
    if (e.type != event_type::runtime) continue;
    const std::string_view name = model.str(e.name);
    if (!is_sync_call(name)) continue;
    if (overlap_length(steps, e.ts, e.end()) <= 0 && !(e.ts >= ov.steps_start && e.ts < ov.steps_end)) continue;
    ++calls[name];
    sync.push_back({e.ts, e.end()});
    if (e.end() - e.ts > longest.length()) longest = {e.ts, e.end()};
  }
  const double time = total_length(intersect_intervals(merge_intervals(std::move(sync)), steps));
  const double share = time / step_time;
  if (calls.empty() || !(share > opt.sync_share)) return;
  std::string list;
  for (const auto& [name, n] : calls) {
    if (!list.empty()) list += ", ";
    list += std::string(name) + " ×" + std::to_string(n);
  }
  out.push_back(message{}
                    .text(format_1f(share * 100) + "% of the step time is spent blocked in synchronisation calls (" +
                          list +
                          "). Each one stalls the CPU until the GPU catches up; avoid .item(), .cpu(), printing "
                          "tensors or torch.cuda.synchronize() inside the training loop, and use non_blocking "
                          "copies from pinned memory.")
                    .target(trace_target(longest.start, longest.end, -1))
                    .done(recommendation_kind::synchronization, 0));
}

void extra_idle_gpu(const trace_model& model, const overview_result& ov, const recommendation_options& opt,
                    std::vector<recommendation>& out) {
  if (ov.steps.empty() || ov.gpu_ids.empty()) return;
  std::map<std::int64_t, interval_list> busy;
  for (const event& e : model.events) {
    if (e.type != event_type::kernel && e.type != event_type::memcpy && e.type != event_type::memset) continue;
    std::int64_t dev = e.pid;
    if (e.type == event_type::kernel && e.extra != no_index && e.extra < model.kernels.size() &&
        model.kernels[e.extra].device >= 0) {
      dev = model.kernels[e.extra].device;
    }
    busy[dev].push_back({e.ts, e.end()});
  }
  for (std::int64_t gpu : ov.gpu_ids) {
    const interval_list b = merge_intervals(std::move(busy[gpu]));
    double best = 0;
    double best_at = 0;
    interval best_gap{0, 0};
    std::string best_step;
    for (const step_row& s : ov.steps) {
      for (const interval& gap : subtract_intervals({{s.start, s.end}}, clip_intervals(b, s.start, s.end))) {
        if (gap.length() > best) {
          best = gap.length();
          best_at = gap.start - s.start;
          best_gap = gap;
          best_step = s.name;
        }
      }
    }
    if (best < opt.idle_gap_us || best < opt.idle_gap_share * ov.average.total) continue;
    out.push_back(message{}
                      .text("GPU " + std::to_string(gpu) + " is idle for " + format_ms(best) +
                            " in one stretch (step " + best_step + ", " + format_ms(best_at) +
                            " after its start). Nothing runs on the GPU while the host is busy there (data "
                            "loading, Python code, synchronisation); look at that point in the trace and "
                            "overlap the host work with GPU work.")
                      .target(trace_target(best_gap.start, best_gap.end, gpu))
                      .done(recommendation_kind::idle_gpu, 0));
  }
}

}  // namespace

std::string_view target_kind_name(recommendation_target::kind_type k) noexcept {
  switch (k) {
    case target_kind::view: return "view";
    case target_kind::trace: return "trace";
    case target_kind::kernel: return "kernel";
    case target_kind::memory: return "memory";
  }
  return "view";
}

std::string join_gpu_ids(const std::vector<std::int64_t>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) s += i + 1 == ids.size() ? " and " : ", ";
    s += std::to_string(ids[i]);
  }
  return s;
}

std::string format_1f(double x) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.1f", x);
  return buf;
}

std::vector<recommendation> compute_recommendations(const trace_model& model, const op_trees& trees,
                                                    const overview_result& overview,
                                                    const recommendation_options& options) {
  std::vector<recommendation> out;
  rule_data_loader(overview, out);
  rules_distributed(model, trees, overview, out);
  rule_gpu_utilization(overview, out);
  rule_amp(model, trees, overview, out);
  rule_memory(model, options, out);
  if (options.extras) {
    extra_launch_overhead(model, trees, overview, options, out);
    extra_synchronization(model, overview, options, out);
    extra_idle_gpu(model, overview, options, out);
  }
  return out;
}

std::vector<std::string> recommendations(const trace_model& model, const op_trees& trees,
                                         const overview_result& overview) {
  recommendation_options options;
  options.extras = false;
  std::vector<std::string> out;
  for (recommendation& r : compute_recommendations(model, trees, overview, options)) out.push_back(std::move(r.text));
  return out;
}

std::string recommendations_html(const std::vector<recommendation>& items) {
  if (items.empty()) return "<ul><li>N/A</li></ul>";
  std::string html = "<ul>";
  for (const recommendation& r : items) html += "<li>" + r.html + "</li>";
  html += "</ul>";
  return html;
}

}  // namespace kinetoscope::analysis
