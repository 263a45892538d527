// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// A hand-built window with module scopes and known times, shared by the module profile test
// (core), the trace writer test and the module view test (viewer): two forward passes of
//
//   TinyNet ("", params 0)               pass 1 [0, 100) µs        pass 2 [200, 300) µs
//     (fc1): Linear ("fc1", 40 params)   [10, 40) = 30 µs          [210, 230) = 20 µs
//        aten::linear [2,4]x[8,4]+[8]    [12, 38)                  [212, 228)
//          aten::addmm (nested)          [14, 30)                  [214, 220)
//     (act): ReLU ("act", 0 params)      [40, 50) = 10 µs          [240, 250)
//        aten::relu [2,8]                [41, 49)                  [241, 249)
//     (fc2): Linear ("fc2", 18 params)   [50, 90) = 40 µs          [250, 290)
//        aten::linear [2,8]x[2,8]+[2]    [52, 88)                  [252, 288)
//     aten::add [2,2]+[2,2] (in TinyNet) [90, 95)                  [290, 295)
//   aten::mul after the model (no module)       [101, 102)          [301, 302)
//   aten::mm on thread 2 (backward, no module)  [60, 70)            [260, 270)
//
// inside ProfilerStep#3 [-5, 150) and ProfilerStep#4 [150, 310), times relative to t0.
// Per pass (DeepSpeed's rules): fc1 64 MACs / 128 flops, act 16 flops, fc2 32 MACs / 64 flops,
// TinyNet's own aten::add 4 flops: model 58 params, 96 MACs, 212 flops, 100 µs.

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "kinetoscope/trace_data.hpp"

namespace module_fixture {

/// Unix ns, one second after the writer's baseTimeNanoseconds: written ts are 1000000 + µs.
inline const std::int64_t t0 = kinetoscope::base_time_ns() + 1'000'000'000;
constexpr std::int64_t us = 1000;

class builder {
 public:
  builder() {
    d_.pid = 4242;
    d_.process_name = "tiny";
    d_.threads = {{1, "main"}, {2, "autograd"}};
    d_.start_ns = t0 - 10 * us;
    d_.end_ns = t0 + 320 * us;
    d_.record_shapes = true;
    d_.with_modules = true;
  }

  /// An operator on `tid` over [start, end) µs with tensor inputs of the given shapes
  /// (an empty shape list entry = a Scalar input).
  builder& op(std::string_view name, double start, double end,
              std::initializer_list<std::vector<std::int64_t>> shapes, std::int64_t tid = 1) {
    kinetoscope::cpu_event e;
    e.start_ns = t0 + static_cast<std::int64_t>(start * us);
    e.end_ns = t0 + static_cast<std::int64_t>(end * us);
    e.tid = e.end_tid = tid;
    e.name = d_.intern(name);
    e.external_id = ++next_id_;
    e.first_input = static_cast<std::uint32_t>(d_.inputs.size());
    for (const auto& dims : shapes) {
      kinetoscope::op_input in;
      in.dims = dims;
      in.type = dims.empty() ? "Scalar" : "float";
      if (dims.empty()) in.concrete.assign(1, '1');  // (not = "1": a GCC 12 -O3 -Wrestrict false positive)
      d_.inputs.push_back(in);
    }
    e.input_count = static_cast<std::uint32_t>(shapes.size());
    d_.events.push_back(e);
    return *this;
  }

  builder& step(std::string_view name, double start, double end) {
    kinetoscope::cpu_event e;
    e.start_ns = t0 + static_cast<std::int64_t>(start * us);
    e.end_ns = t0 + static_cast<std::int64_t>(end * us);
    e.tid = e.end_tid = 1;
    e.name = d_.intern(name);
    e.category = kinetoscope::cpu_category::user_annotation;
    e.external_id = ++next_id_;
    d_.events.push_back(e);
    return *this;
  }

  /// A module call on thread 1; returns its call id.
  std::int64_t module(std::string_view path, std::string_view type, std::int64_t params, double start,
                      double end, std::int64_t parent, std::int64_t module_id, std::int32_t instance) {
    kinetoscope::module_event m;
    m.start_ns = t0 + static_cast<std::int64_t>(start * us);
    m.end_ns = t0 + static_cast<std::int64_t>(end * us);
    m.tid = 1;
    m.path = d_.intern(path);
    m.type = d_.intern(type);
    m.params = params;
    m.call_id = ++next_call_;
    m.parent_call_id = parent;
    m.module_id = module_id;
    m.instance = instance;
    d_.modules.push_back(m);
    return m.call_id;
  }

  /// Sorted as the collector sorts: (start ascending, end descending).
  kinetoscope::trace_data done() {
    const auto by_time = [](const auto& a, const auto& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
    };
    std::stable_sort(d_.events.begin(), d_.events.end(), by_time);
    std::stable_sort(d_.modules.begin(), d_.modules.end(), by_time);
    return d_;
  }

 private:
  kinetoscope::trace_data d_;
  std::int64_t next_id_ = 0;
  std::int64_t next_call_ = 0;
};

/// One forward pass starting at `o` µs; fc1 lasts `fc1_us`.
inline void tiny_pass(builder& b, double o, double fc1_us) {
  const std::int64_t root = b.module("", "TinyNet", 0, o, o + 100, 0, 11, 0);
  b.module("fc1", "Linear", 40, o + 10, o + 10 + fc1_us, root, 12, 0);
  b.op("aten::linear", o + 12, o + 8 + fc1_us, {{2, 4}, {8, 4}, {8}});
  b.op("aten::addmm", o + 14, o + fc1_us, {{8}, {2, 4}, {4, 8}});
  b.module("act", "ReLU", 0, o + 40, o + 50, root, 13, 0);
  b.op("aten::relu", o + 41, o + 49, {{2, 8}});
  b.module("fc2", "Linear", 18, o + 50, o + 90, root, 14, 1);
  b.op("aten::linear", o + 52, o + 88, {{2, 8}, {2, 8}, {2}});
  b.op("aten::add", o + 90, o + 95, {{2, 2}, {2, 2}, {}});
  b.op("aten::mul", o + 101, o + 102, {{2, 2}, {2, 2}});
  b.op("aten::mm", o + 60, o + 70, {{2, 2}, {2, 2}}, 2);
}

/// The whole window described above.
inline kinetoscope::trace_data tiny_net_trace() {
  builder b;
  b.step("ProfilerStep#3", -5, 150).step("ProfilerStep#4", 150, 310);
  tiny_pass(b, 0, 30);
  tiny_pass(b, 200, 20);
  return b.done();
}

}  // namespace module_fixture
