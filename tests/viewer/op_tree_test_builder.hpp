// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file op_tree_test_builder.hpp
/// Builds trace_models by hand for the op_tree / operator_view / kernel_view tests.

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "analysis/model.hpp"

namespace kinetoscope::analysis::testing {

class model_builder {
 public:
  /// A host event (cpu_op by default) on thread `tid`.
  model_builder& host(std::string_view name, double ts, double dur, std::int64_t tid = 1, std::int64_t ext = 0,
                      event_type type = event_type::op, std::string_view input_dims = {},
                      std::string_view call_stack = {}) {
    event e = base(name, ts, dur, type);
    e.tid = tid;
    e.pid = 100;
    e.external_id = ext;
    // As Kineto writes them: cpu_op and user_annotation always carry an "External id" (maybe
    // 0), python_function events never.
    e.has_external_id = type != event_type::python && type != event_type::module;
    op_args a;
    if (!input_dims.empty()) a.input_dims = m_.intern(input_dims);
    if (!call_stack.empty()) a.call_stack = m_.intern(call_stack);
    e.extra = static_cast<std::uint32_t>(m_.ops.size());
    m_.ops.push_back(a);
    m_.events.push_back(e);
    return *this;
  }
  /// A python_function event with a "Python module id" (an nn.Module forward).
  model_builder& module(std::string_view name, double ts, double dur, std::int64_t tid, std::int64_t module_id) {
    event e = base(name, ts, dur, event_type::module);
    e.tid = tid;
    e.pid = 100;
    python_args p;
    p.module_id = module_id;
    e.extra = static_cast<std::uint32_t>(m_.python.size());
    m_.python.push_back(p);
    m_.events.push_back(e);
    return *this;
  }
  model_builder& runtime(double ts, double dur, std::int64_t tid, std::int64_t ext, std::int64_t corr,
                         std::string_view name = "cudaLaunchKernel") {
    event e = base(name, ts, dur, event_type::runtime);
    e.tid = tid;
    e.pid = 100;
    e.external_id = ext;
    e.has_external_id = true;
    e.correlation = corr;
    m_.events.push_back(e);
    return *this;
  }
  /// A runtime call without any "External id" (a graph launch outside every op, vLLM).
  model_builder& idless_runtime(double ts, double dur, std::int64_t tid, std::int64_t corr,
                                std::string_view name = "hipGraphLaunch") {
    runtime(ts, dur, tid, 0, corr, name);
    m_.events.back().has_external_id = false;
    return *this;
  }
  /// A kernel on device 0, stream 7.
  model_builder& kernel(std::string_view name, double ts, double dur, std::int64_t corr, std::int64_t ext = 0,
                        kernel_args args = default_kernel_args()) {
    event e = base(name, ts, dur, event_type::kernel);
    e.pid = args.device < 0 ? 0 : args.device;
    e.tid = 7;
    e.correlation = corr;
    e.external_id = ext;
    e.extra = static_cast<std::uint32_t>(m_.kernels.size());
    m_.kernels.push_back(args);
    m_.events.push_back(e);
    return *this;
  }
  model_builder& memcpy(double ts, double dur, std::int64_t corr) {
    event e = base("Memcpy HtoD (Pageable -> Device)", ts, dur, event_type::memcpy);
    e.tid = 7;
    e.correlation = corr;
    m_.events.push_back(e);
    return *this;
  }
  model_builder& flow(std::int64_t id, double ts, bool is_start) {
    m_.fwdbwd.push_back(flow_event{id, ts, 100, 1, is_start});
    return *this;
  }
  /// The finished model, events stable-sorted by ts like the loader leaves them.
  trace_model build() {
    trace_model m = m_;
    std::stable_sort(m.events.begin(), m.events.end(), [](const event& a, const event& b) { return a.ts < b.ts; });
    return m;
  }

  static kernel_args default_kernel_args() {
    kernel_args a;
    a.device = 0;
    return a;
  }

 private:
  event base(std::string_view name, double ts, double dur, event_type type) {
    event e;
    e.name = m_.intern(name);
    e.ts = ts;
    e.dur = dur;
    e.type = type;
    return e;
  }
  trace_model m_;
};

}  // namespace kinetoscope::analysis::testing
