// SPDX-License-Identifier: BSD-3-Clause
#include "trace_check.hpp"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

namespace kinetoscope::gpu_check {
namespace {

using nlohmann::json;

/// A host op or range with an External id.
struct host_op {
  std::string name;
  std::int64_t tid = 0;
};

struct gpu_record {
  std::string cat;  // kernel, gpu_memcpy, gpu_memset
  std::string name;
  double ts = 0, dur = 0;
  std::int64_t correlation = -1;
  std::int64_t external = 0;  // 0 = absent
};

/// What one trace holds, in the fields the checks read.
struct trace_view {
  std::map<std::int64_t, host_op> ops;  // External id -> op
  std::vector<gpu_record> gpu;
  std::set<std::int64_t> runtime_correlations;
  std::set<std::int64_t> flow_s, flow_f;
  double window_begin = INFINITY, window_end = -INFINITY;  // ProfilerStep#N ranges, µs
  std::string device_name;
};

std::int64_t int_arg(const json& args, const char* key, std::int64_t fallback) {
  const auto it = args.find(key);
  return it != args.end() && it->is_number_integer() ? it->get<std::int64_t>() : fallback;
}

trace_view view_of(const json& trace) {
  trace_view v;
  if (trace.contains("deviceProperties") && trace["deviceProperties"].is_array() &&
      !trace["deviceProperties"].empty())
    v.device_name = trace["deviceProperties"][0].value("name", "");
  for (const json& e : trace.value("traceEvents", json::array())) {
    const std::string cat = e.value("cat", "");
    const std::string ph = e.value("ph", "");
    const json args = e.value("args", json::object());
    if (cat == "ac2g") {
      if (!e.contains("id") || !e["id"].is_number_integer()) continue;
      (ph == "s" ? v.flow_s : v.flow_f).insert(e["id"].get<std::int64_t>());
      continue;
    }
    if (ph != "X") continue;
    const std::string name = e.value("name", "");
    const double ts = e.value("ts", 0.0), dur = e.value("dur", 0.0);
    if (cat == "cpu_op" || cat == "user_annotation") {
      if (const std::int64_t ext = int_arg(args, "External id", 0); ext != 0)
        v.ops[ext] = host_op{name, e.value("tid", std::int64_t{0})};
      if (name.starts_with("ProfilerStep#")) {
        v.window_begin = std::min(v.window_begin, ts);
        v.window_end = std::max(v.window_end, ts + dur);
      }
    } else if (cat == "cuda_runtime" || cat == "cuda_driver") {
      if (const std::int64_t c = int_arg(args, "correlation", -1); c >= 0) v.runtime_correlations.insert(c);
    } else if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") {
      v.gpu.push_back({cat, name, ts, dur, int_arg(args, "correlation", -1), int_arg(args, "External id", 0)});
    }
  }
  return v;
}

/// "stress_fill" for "cuda_stress::stress_fill(float*, float, int)"; "" for other kernels.
std::string stress_kind(const std::string& kernel) {
  const auto at = kernel.find("stress_");
  if (at == std::string::npos) return "";
  const auto end = kernel.find('(', at);
  return kernel.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

/// "HtoD" for "Memcpy HtoD (Pinned -> Device)".
std::string memcpy_kind(const std::string& name) {
  const auto sp = name.find(' ');
  if (sp == std::string::npos) return name;
  const auto end = name.find(' ', sp + 1);
  return name.substr(sp + 1, end == std::string::npos ? std::string::npos : end - sp - 1);
}

/// The op each cuda_stress kernel kind is launched in (cuda_stress.cpp, worker_step).
bool op_matches(const std::string& kind, const std::string& op) {
  if (kind == "stress_fill") return op == "aten::fill_";
  if (kind == "stress_axpy") return op == "aten::add_";
  if (kind == "stress_reduce") return op == "aten::sum";
  if (kind == "stress_tiny") return op == "aten::zero_";
  if (kind == "stress_spin") return op == "stress::spin";
  if (kind == "stress_timed") return op.starts_with("stress::timed_t");
  return op == "aten::mm";  // cuBLAS
}

std::string fmt(const char* format, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, a, b, c, d);
  return buf;
}

}  // namespace

std::vector<check_line> check_run(const json& truth, const std::vector<json>& traces) {
  std::vector<check_line> out;
  auto line = [&](bool pass, std::string name, std::string detail) {
    out.push_back({pass, std::move(name), std::move(detail)});
  };
  const bool has_truth = truth.is_object();
  const json windows = has_truth ? truth.value("windows", json::array()) : json::array();
  if (has_truth && windows.size() != traces.size()) {
    line(false, "windows", std::to_string(traces.size()) + " traces for " + std::to_string(windows.size()) +
                               " windows of the schedule");
  } else if (traces.empty()) {
    line(false, "windows", "no trace");
  } else {
    line(true, "windows", std::to_string(traces.size()) + " trace(s), one per window");
  }
  const std::size_t n = has_truth ? std::min(windows.size(), traces.size()) : traces.size();
  for (std::size_t w = 0; w < n; ++w) {
    const trace_view v = view_of(traces[w]);
    const std::string prefix = "window " + std::to_string(w + 1) + " ";

    // counts, duplicates
    std::map<std::string, long> kernels, memcpys;
    long library_kernels = 0, memsets = 0, kernel_total = 0;
    std::set<std::int64_t> seen;
    long duplicates = 0;
    for (const gpu_record& g : v.gpu) {
      if (g.correlation >= 0 && !seen.insert(g.correlation).second) ++duplicates;
      if (g.cat == "kernel") {
        ++kernel_total;
        const std::string kind = stress_kind(g.name);
        if (kind.empty()) ++library_kernels;
        else ++kernels[kind];
      } else if (g.cat == "gpu_memcpy") {
        ++memcpys[memcpy_kind(g.name)];
      } else {
        ++memsets;
      }
    }
    if (has_truth) {
      const json& t = windows[w];
      std::string detail;
      bool pass = duplicates == 0;
      long expected_total = 0;
      const json want_kernels = t.value("kernels", json::object());  // items() must not outlive it
      for (const auto& [kind, count] : want_kernels.items()) {
        const long want = count.get<long>(), got = kernels.count(kind) ? kernels.at(kind) : 0;
        expected_total += want;
        if (want != got) {
          pass = false;
          detail += kind + " " + std::to_string(got) + " of " + std::to_string(want) + "; ";
        }
      }
      for (const auto& [kind, count] : kernels)
        if (!want_kernels.contains(kind)) {
          pass = false;
          detail += "unexpected " + kind + " x" + std::to_string(count) + "; ";
        }
      const long gemms = t.value("gemm", 0L);
      // A cuBLAS GEMM launches one kernel or more (split-K adds a reduction): at least one each.
      if ((gemms == 0) != (library_kernels == 0) || library_kernels < gemms) {
        pass = false;
        detail += std::to_string(library_kernels) + " cuBLAS kernels for " + std::to_string(gemms) + " GEMMs; ";
      }
      for (const char* dir : {"HtoD", "DtoH", "DtoD"}) {
        const long want = t["memcpy"].value(dir, 0L), got = memcpys.count(dir) ? memcpys.at(dir) : 0;
        if (want != got) {
          pass = false;
          detail += std::string("memcpy ") + dir + " " + std::to_string(got) + " of " + std::to_string(want) + "; ";
        }
      }
      if (memsets != t.value("memset", 0L)) {
        pass = false;
        detail += "memset " + std::to_string(memsets) + " of " + std::to_string(t.value("memset", 0L)) + "; ";
      }
      if (duplicates) detail += std::to_string(duplicates) + " duplicated correlation ids; ";
      detail += std::to_string(expected_total) + " stress kernels + " + std::to_string(library_kernels) +
                " cuBLAS kernels (" + std::to_string(gemms) + " GEMMs), memcpy HtoD/DtoH/DtoD " +
                std::to_string(memcpys["HtoD"]) + "/" + std::to_string(memcpys["DtoH"]) + "/" +
                std::to_string(memcpys["DtoD"]) + ", " + std::to_string(memsets) + " memsets, 0 lost";
      line(pass, prefix + "counts", detail);
    } else {
      line(kernel_total > 0 && duplicates == 0, prefix + "counts",
           std::to_string(kernel_total) + " kernels, " + std::to_string(memsets) + " memsets, " +
               std::to_string(v.gpu.size() - kernel_total - memsets) + " copies, " + std::to_string(duplicates) +
               " duplicated correlation ids");
    }

    // external: every GPU record inside a host op of this trace (the right one for stress kernels)
    long with_op = 0, wrong_op = 0;
    std::string first_wrong;
    for (const gpu_record& g : v.gpu) {
      const auto it = g.external != 0 ? v.ops.find(g.external) : v.ops.end();
      if (it == v.ops.end()) continue;
      ++with_op;
      if (has_truth && g.cat == "kernel" && !op_matches(stress_kind(g.name), it->second.name)) {
        if (wrong_op++ == 0) first_wrong = g.name + " in " + it->second.name;
      }
    }
    const long records = static_cast<long>(v.gpu.size());
    line(records > 0 && with_op == records && wrong_op == 0, prefix + "external",
         std::to_string(with_op) + " of " + std::to_string(records) + " GPU records carry the External id of their op" +
             (wrong_op ? ", " + std::to_string(wrong_op) + " in the wrong op (first: " + first_wrong + ")" : ""));

    // flows: every kernel (and each copy/memset whose call gets one) linked to its launch
    long kernels_linked = 0, others_linked = 0, others = 0;
    for (const gpu_record& g : v.gpu) {
      const bool linked = v.flow_s.count(g.correlation) && v.flow_f.count(g.correlation) &&
                          v.runtime_correlations.count(g.correlation);
      if (g.cat == "kernel") kernels_linked += linked;
      else {
        ++others;
        others_linked += linked;
      }
    }
    long unmatched_s = 0;
    for (std::int64_t id : v.flow_s) unmatched_s += !v.flow_f.count(id);
    line(kernel_total > 0 && kernels_linked == kernel_total && unmatched_s == 0, prefix + "flows",
         std::to_string(kernels_linked) + " of " + std::to_string(kernel_total) +
             " kernels with a matched ac2g flow to their launch; copies/memsets " + std::to_string(others_linked) +
             " of " + std::to_string(others) + "; " + std::to_string(unmatched_s) + " flow starts without an end");

    // timing: stress_timed kernels against CUDA events, per worker in launch order
    if (has_truth && windows[w].contains("timed_us")) {
      std::map<std::string, std::vector<const gpu_record*>> by_op;
      for (const gpu_record& g : v.gpu) {
        const auto it = v.ops.find(g.external);
        if (stress_kind(g.name) == "stress_timed" && it != v.ops.end()) by_op[it->second.name].push_back(&g);
      }
      bool pass = true;
      long compared = 0;
      double worst_us = 0, worst_pct = 0;
      for (const auto& [op, expected] : windows[w]["timed_us"].items()) {
        auto& got = by_op[op];
        std::sort(got.begin(), got.end(), [](auto* a, auto* b) { return a->ts < b->ts; });
        if (got.size() != expected.size()) {
          pass = false;
          continue;
        }
        for (std::size_t i = 0; i < got.size(); ++i) {
          const double want = expected[i].get<double>(), diff = std::fabs(got[i]->dur - want);
          ++compared;
          if (diff > std::max(2.0, 0.05 * want)) pass = false;
          if (diff > worst_us) {
            worst_us = diff;
            worst_pct = want > 0 ? 100.0 * diff / want : 0;
          }
        }
      }
      line(pass && compared > 0, prefix + "timing",
           std::to_string(compared) + " stress_timed kernels vs CUDA events: worst difference " +
               fmt("%.2f µs (%.2f %%), limit 5 %% or 2 µs", worst_us, worst_pct));
    }

    // window: GPU records inside the ProfilerStep ranges on the CPU clock (µs, 1 ns of rounding)
    long outside = 0;
    double worst = 0;
    for (const gpu_record& g : v.gpu) {
      const double before = v.window_begin - g.ts, after = g.ts + g.dur - v.window_end;
      if (before > 0.001 || after > 0.001) {
        ++outside;
        worst = std::max({worst, before, after});
      }
    }
    const bool have_window = v.window_begin <= v.window_end;
    line(have_window && outside == 0, prefix + "window",
         have_window ? std::to_string(records - outside) + " of " + std::to_string(records) +
                           " GPU records inside the window's steps" +
                           (outside ? fmt(" (worst %.3f µs outside)", worst) : std::string()) +
                           fmt(", window %.3f ms", (v.window_end - v.window_begin) / 1000.0)
                     : std::string("no ProfilerStep#N range"));

    // device
    const std::string want = has_truth ? truth.value("gpu", "") : "";
    line(!v.device_name.empty() && (!has_truth || v.device_name == want), prefix + "device",
         "deviceProperties[0].name \"" + v.device_name + "\"" + (has_truth ? ", the program saw \"" + want + "\"" : ""));
  }
  return out;
}

json read_json(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files as they are
  if (f == nullptr) throw std::runtime_error(path + ": cannot open");
  std::string text;
  char buf[1 << 16];
  int got = 0;
  while ((got = gzread(f, buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(got));
  const bool failed = got < 0;
  gzclose(f);
  if (failed) throw std::runtime_error(path + ": read error (truncated gzip?)");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

std::vector<std::string> trace_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(".pt.trace.json") || name.ends_with(".pt.trace.json.gz")) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace kinetoscope::gpu_check
