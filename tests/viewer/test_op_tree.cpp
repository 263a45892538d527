// SPDX-License-Identifier: BSD-3-Clause
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <unordered_map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "analysis/id_map.hpp"
#include "analysis/loader.hpp"
#include "analysis/op_tree.hpp"
#include "op_tree_test_builder.hpp"
#include "../small_events_trace.hpp"

using namespace kinetoscope::analysis;
using kinetoscope::analysis::testing::model_builder;

namespace {

std::vector<std::uint32_t> find_all(const op_trees& t, std::string_view name) {
  std::vector<std::uint32_t> out;
  for (std::uint32_t i = 0; i < t.nodes.size(); ++i)
    if (t.nodes[i].name == name) out.push_back(i);
  return out;
}

std::uint32_t find(const op_trees& t, std::string_view name) {
  auto all = find_all(t, name);
  REQUIRE(all.size() == 1);
  return all[0];
}

std::vector<std::string> child_names(const op_trees& t, std::uint32_t n) {
  std::vector<std::string> out;
  for (auto c : t.nodes[n].children) out.emplace_back(t.nodes[c].name);
  return out;
}

std::vector<std::string> operator_names(const op_trees& t) {
  std::vector<std::string> out;
  for (auto n : t.operators) out.emplace_back(t.nodes[n].name);
  return out;
}

}  // namespace

TEST_CASE("op_tree: name rules and tensor-core helpers") {
  CHECK(is_tc_kernel("volta_h884gemm_64x64_nn"));
  CHECK(is_tc_kernel("sm80_xmma_gemm_f16f16_f16f32"));
  CHECK_FALSE(is_tc_kernel("ampere_sgemm_128x64_nn"));
  CHECK_FALSE(is_tc_kernel("void at::native::vectorized_elementwise_kernel"));
  CHECK(is_tc_eligible_op("aten::addmm"));
  CHECK(is_tc_eligible_op("aten::cudnn_convolution_backward"));
  CHECK_FALSE(is_tc_eligible_op("aten::addmm_foo"));  // exact names only
  CHECK_FALSE(is_tc_eligible_op("AddmmBackward0"));
  CHECK(is_profiler_step_name("ProfilerStep#12"));
  CHECK(is_data_loader_name("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"));
  CHECK_FALSE(is_data_loader_name("enumerate(DataLoader)#_SingleProcessDataLoaderIter.foo"));
  CHECK(is_data_loader_name("enumerate(DataPipe)#Mapper"));
  CHECK(is_plugin_comm_name("nccl:all_reduce"));
  CHECK_FALSE(is_plugin_comm_name("nccl:all_to_all"));

  CHECK(classify_host_event(event_type::op, "aten::mm", false) == node_kind::op);
  CHECK(classify_host_event(event_type::user_annotation, "ProfilerStep#3", false) == node_kind::profiler_step);
  CHECK(classify_host_event(event_type::user_annotation, "my_range", false) == std::nullopt);
  CHECK(classify_host_event(event_type::user_annotation, "nccl:all_reduce", false) == node_kind::op);
  CHECK(classify_host_event(event_type::python, "Optimizer.step#SGD.step", false) == node_kind::optimizer);
  CHECK(classify_host_event(event_type::op, "[pl][module]torch.nn.Linear: layer", true) == node_kind::pl_module);
  CHECK(classify_host_event(event_type::op, "[pl][module]torch.nn.Linear: layer", false) == node_kind::op);
  CHECK(classify_host_event(event_type::module, "nn.Module: Linear_0", true) == std::nullopt);
  CHECK(classify_host_event(event_type::runtime, "cudaLaunchKernel", false) == std::nullopt);
}

TEST_CASE("op_tree: stack walk nesting rules") {
  model_builder b;
  b.host("parent", 0, 10)
      .host("child_a", 2, 3)
      .host("child_at_end", 5, 5)     // ends exactly at the parent's end: child
      .host("sibling_at_end", 10, 2)  // starts exactly at the parent's end: not a child
      .host("zero", 12, 0);           // zero-length node right after: sibling of sibling_at_end
  auto m = b.build();
  auto t = build_op_tree(m);
  REQUIRE(t.threads.size() == 1);
  const auto root = t.threads[0].root;
  CHECK(t.nodes[root].kind == node_kind::root);
  CHECK(t.nodes[root].name == "CallTreeRoot");
  CHECK(child_names(t, root) == std::vector<std::string>{"parent", "sibling_at_end", "zero"});
  CHECK(child_names(t, find(t, "parent")) == std::vector<std::string>{"child_a", "child_at_end"});
  // Root interval = [first child start, last child end].
  CHECK(t.nodes[root].start == 0);
  CHECK(t.nodes[root].end == 12);
  CHECK(t.nodes[root].host_total == 12);
  CHECK(t.nodes[root].host_self == doctest::Approx(0));  // 12 - 10 - 2 - 0
  CHECK(plugin_type_name(t.nodes[root]) == "Python");
  CHECK(plugin_type_name(t.nodes[find(t, "parent")]) == "Operator");
  CHECK(t.nodes[find(t, "parent")].host_self == doctest::Approx(2));  // 10 - 3 - 5
}

TEST_CASE("op_tree: equal starts put the longer node first, intersecting nodes are dropped") {
  model_builder b;
  b.host("short", 0, 4).host("long", 0, 10).host("crossing", 8, 5).host("inner", 9, 0.5).host("after", 11, 1);
  auto m = b.build();
  auto t = build_op_tree(m);
  const auto root = t.threads[0].root;
  CHECK(child_names(t, root) == std::vector<std::string>{"long", "after"});
  // "crossing" [8,13) starts inside "long" and ends after it: dropped; "inner" then nests in "long".
  CHECK(child_names(t, find(t, "long")) == std::vector<std::string>{"short", "inner"});
  CHECK(t.stats.nodes_dropped_intersecting == 1);
  CHECK(t.nodes[find(t, "crossing")].parent == no_index);
  CHECK(operator_names(t) == std::vector<std::string>{"short", "inner", "long", "after"});
}

TEST_CASE("op_tree: a node the root does not contain is dropped, the root is never popped") {
  // The loader refuses such times; a hand-built model still reaches the builder with them.
  model_builder b;
  b.host("a", 0, 4).host("b", 10, 2).host("far", 1e19, 1).host("very far", 1e308, 0);
  auto m = b.build();
  auto t = build_op_tree(m);
  REQUIRE(t.threads.size() == 1);
  const auto root = t.threads[0].root;
  CHECK(child_names(t, root) == std::vector<std::string>{"a", "b"});
  CHECK(t.stats.nodes_dropped_intersecting == 2);
  CHECK(t.nodes[find(t, "far")].parent == no_index);
  CHECK(t.nodes[find(t, "very far")].parent == no_index);
  CHECK(t.nodes[root].start == 0);
  CHECK(t.nodes[root].end == 12);
}

TEST_CASE("op_tree: runtimes attach by external id, device nodes by correlation") {
  model_builder b;
  b.host("aten::add", 0, 20, 1, 5)
      .runtime(2, 3, 1, 5, 100)
      .kernel("k_after", 30, 4, 100, 5)
      .kernel("k_second", 40, 6, 100, 5)  // one runtime, two kernels
      .kernel("k_parked", 1, 2, 200, 6)   // kernel seen before its runtime
      .runtime(6, 1, 1, 6, 200)
      .host("aten::mul", 5, 5, 1, 6)
      .runtime(15, 1, 1, 77, 300)         // external id of no host node: dropped
      .kernel("k_dropped", 50, 1, 300, 77);
  auto m = b.build();
  auto t = build_op_tree(m);
  const auto add = find(t, "aten::add");
  const auto mul = find(t, "aten::mul");
  REQUIRE(t.nodes[add].runtimes.size() == 1);
  CHECK(t.runtimes[t.nodes[add].runtimes[0]].devices.size() == 2);
  CHECK(t.nodes[add].device_self == doctest::Approx(10));
  CHECK(t.nodes[add].device_total == doctest::Approx(12));  // + child aten::mul's 2
  CHECK(t.nodes[mul].device_self == doctest::Approx(2));
  // host self subtracts the runtime durations: 20 - 5 (child) - 3 (runtime)
  CHECK(t.nodes[add].host_self == doctest::Approx(12));
  CHECK(t.nodes[mul].host_self == doctest::Approx(4));
  CHECK(t.stats.runtimes_matched == 2);
  CHECK(t.stats.runtimes_dropped == 1);
  for (const auto& d : t.devices) {
    if (d.name == "k_dropped") {
      CHECK(d.owner == no_index);
      CHECK(d.op_name.empty());
    } else {
      CHECK(d.op_name == (d.name == "k_parked" ? "aten::mul" : "aten::add"));
    }
  }
  CHECK(t.stats.kernels == 4);
  CHECK(t.stats.kernels_attributed == 3);
  CHECK(t.has_kernel);
  CHECK(t.used_devices == std::set<std::int64_t>{0});
}

TEST_CASE("op_tree: duplicate collapse keeps the inner node's children and runtimes") {
  model_builder b;
  b.host("aten::add", 0, 20, 1, 1)
      .host("aten::add", 1, 18, 1, 2)
      .host("aten::empty", 2, 1, 1, 3)
      .runtime(4, 1, 1, 1, 10)  // outer's runtime: discarded by the collapse (Q7)
      .runtime(5, 1, 1, 2, 11)
      .kernel("k_outer", 30, 7, 10)
      .kernel("k_inner", 40, 3, 11);
  auto m = b.build();
  auto t = build_op_tree(m);
  const auto root = t.threads[0].root;
  REQUIRE(child_names(t, root) == std::vector<std::string>{"aten::add"});
  const auto add = t.nodes[root].children[0];
  CHECK(t.nodes[add].start == 0);  // the outer interval stays
  CHECK(child_names(t, add) == std::vector<std::string>{"aten::empty"});
  CHECK(t.nodes[add].device_self == doctest::Approx(3));
  CHECK(t.nodes[add].device_total == doctest::Approx(3));
  CHECK(operator_names(t) == std::vector<std::string>{"aten::empty", "aten::add"});
  // Nodes of different types are not collapsed.
  model_builder c;
  c.host("same", 0, 10, 1, 0, event_type::python).host("same", 1, 5);
  auto m2 = c.build();
  auto t2 = build_op_tree(m2);
  CHECK(find_all(t2, "same").size() == 2);
  CHECK(child_names(t2, t2.nodes[t2.threads[0].root].children[0]) == std::vector<std::string>{"same"});
}

TEST_CASE("op_tree: zero-id runtimes hang under the thread root") {
  model_builder b;
  b.host("aten::mm", 0, 10, 1, 3).runtime(20, 2, 1, 0, 50).kernel("k", 30, 5, 50);
  auto m = b.build();
  auto t = build_op_tree(m);
  const auto root = t.threads[0].root;
  CHECK(t.nodes[root].runtimes.size() == 1);
  CHECK(t.nodes[root].device_total == doctest::Approx(5));
  CHECK(t.nodes[root].device_self == doctest::Approx(5));
  CHECK(t.devices[0].op_name == "CallTreeRoot");
  CHECK(t.stats.runtimes_zero_id == 1);
  CHECK(t.stats.kernels_attributed == 0);
}

TEST_CASE("op_tree: runtimes without an External id go to the first node without one (plugin quirk Q22)") {
  // A graph launch inside nn.Module: Model_0 with no cpu_op around it (vLLM's decode), then
  // a runtime with an explicit id 0.
  model_builder b;
  b.host("aten::mm", 0, 10, 1, 3)
      .module("nn.Module: Model_0", 20, 50, 1, 1)
      .idless_runtime(30, 2, 1, 60)
      .kernel("graph_kernel", 40, 6, 60)
      .runtime(80, 2, 1, 0, 61)
      .kernel("k0", 85, 3, 61);
  auto m = b.build();
  SUBCASE("the plugin's rule: the module takes it") {
    auto t = build_op_tree(m);
    const auto mods = find_all(t, "nn.Module: Model_0");
    REQUIRE(mods.size() == 1);
    CHECK(t.nodes[mods[0]].runtimes.size() == 1);
    CHECK(t.nodes[mods[0]].device_self == doctest::Approx(6));
    CHECK(t.devices[0].op_name == "nn.Module: Model_0");
    CHECK(t.devices[1].op_name == "CallTreeRoot");  // id 0: the root, as before
    CHECK(t.stats.runtimes_zero_id == 1);
  }
  SUBCASE("off: it hangs under the root like id 0") {
    op_tree_options o;
    o.idless_runtimes_to_first_idless_node = false;
    auto t = build_op_tree(m, o);
    CHECK(t.nodes[t.threads[0].root].runtimes.size() == 2);
    CHECK(t.devices[0].op_name == "CallTreeRoot");
    CHECK(t.stats.runtimes_zero_id == 2);
  }
  SUBCASE("no node without an id: the plugin drops it") {
    model_builder c;
    c.host("aten::mm", 0, 10, 1, 3).idless_runtime(30, 2, 1, 60).kernel("graph_kernel", 40, 6, 60);
    auto m2 = c.build();
    auto t = build_op_tree(m2);
    CHECK(t.nodes[t.threads[0].root].runtimes.empty());
    CHECK(t.stats.runtimes_dropped == 1);
    CHECK(t.devices[0].op_name.empty());
  }
}

TEST_CASE("op_tree: stale kernels go to the main thread root and are counted twice there") {
  model_builder b;
  b.host("ProfilerStep#1", 0, 100, 1, 1)
      .host("aten::mm", 10, 10, 1, 2)
      .host("other_thread_op", 0, 5, 2, 3)
      .kernel("stale_kernel", 50, 4, 999)
      .memcpy(60, 3, 998);  // stale memcpy: dropped
  auto m = b.build();
  auto t = build_op_tree(m);
  REQUIRE(t.main_thread.has_value());
  CHECK(t.threads[*t.main_thread].tid == 1);
  const auto root = t.threads[*t.main_thread].root;
  REQUIRE(t.nodes[root].runtimes.size() == 1);
  const auto& dummy = t.runtimes[t.nodes[root].runtimes[0]];
  CHECK(dummy.stale_dummy);
  CHECK(dummy.device_duration == doctest::Approx(8));  // processed twice (Q10)
  CHECK(t.nodes[root].device_total == doctest::Approx(8));
  CHECK(t.stats.stale_kernels == 1);
  CHECK(t.stats.stale_dropped == 1);
  CHECK(t.devices[0].op_name == "CallTreeRoot");
  // The other thread's root has no dummy runtime.
  for (const auto& th : t.threads)
    if (th.tid == 2) CHECK(t.nodes[th.root].runtimes.empty());

  // Without any ProfilerStep# node the stale kernel is dropped.
  model_builder c;
  c.host("aten::mm", 10, 10, 1, 2).kernel("stale_kernel", 50, 4, 999);
  auto m2 = c.build();
  auto t2 = build_op_tree(m2);
  CHECK(t2.nodes[t2.threads[0].root].runtimes.empty());
  CHECK(t2.devices[0].owner == no_index);
}

TEST_CASE("op_tree: device, tensor-core totals and eligibility inheritance") {
  model_builder b;
  b.host("aten::conv2d", 0, 100, 1, 1)
      .host("aten::cudnn_convolution", 10, 50, 1, 2)
      .runtime(20, 5, 1, 2, 10)
      .runtime(30, 5, 1, 2, 11)
      .kernel("sm70_xmma_gemm_f16", 200, 10, 10)
      .kernel("plain_kernel", 220, 30, 11)
      .host("my_op", 200, 50, 1, 3)        // not on the allow-list, launches a TC kernel
      .host("aten::inner", 210, 10, 1, 4)  // child of my_op
      .runtime(211, 2, 1, 4, 12)
      .kernel("volta_h884gemm", 300, 8, 12)
      .host("python_parent", 400, 50, 1, 5, event_type::python)
      .host("aten::mm", 410, 10, 1, 6);
  auto m = b.build();
  auto t = build_op_tree(m);
  const auto conv = find(t, "aten::conv2d");
  const auto cudnn = find(t, "aten::cudnn_convolution");
  CHECK(t.nodes[cudnn].device_self == doctest::Approx(40));
  CHECK(t.nodes[cudnn].tc_self == doctest::Approx(10));
  CHECK(t.nodes[cudnn].tc_total == doctest::Approx(10));
  CHECK(t.nodes[conv].device_self == doctest::Approx(0));
  CHECK(t.nodes[conv].device_total == doctest::Approx(40));
  CHECK(t.nodes[conv].tc_total == doctest::Approx(10));
  CHECK(t.nodes[conv].tc_self == doctest::Approx(0));
  CHECK(t.nodes[conv].tc_eligible);
  // aten::inner launched a TC kernel: becomes eligible ("new eligible operator"); its kernel
  // still records the allow-list value (false) as seen at attribution time.
  const auto inner = find(t, "aten::inner");
  CHECK(t.nodes[inner].tc_eligible);
  CHECK_FALSE(t.nodes[inner].tc_eligible_allow_list);
  for (const auto& d : t.devices)
    if (d.name == "volta_h884gemm") {
      CHECK(d.tc_kernel);
      CHECK_FALSE(d.op_tc_eligible);
    }
  // my_op inherits from its child; a python node does not inherit.
  CHECK(t.nodes[find(t, "my_op")].tc_eligible);
  CHECK(t.nodes[find(t, "aten::mm")].tc_eligible);
  CHECK_FALSE(t.nodes[find(t, "python_parent")].tc_eligible);
  for (const auto& d : t.devices)
    if (d.name == "sm70_xmma_gemm_f16") CHECK(d.op_tc_eligible);  // aten::cudnn_convolution is listed

  // Global ratio over all kernels: (10 + 8) / (10 + 30 + 8).
  CHECK(tc_kernel_ratio(m) == doctest::Approx(18.0 / 48.0));
  // Bottom eligible nodes: aten::cudnn_convolution (40 own kernel time), aten::inner (8),
  // aten::mm (0); all operators own 48.
  CHECK(eligible_op_kernel_ratio(t) == doctest::Approx(1.0));
  auto per_gpu = tc_ratio_per_gpu(m, t, {0, 1});
  CHECK(per_gpu.has_kernel);
  CHECK(per_gpu.ratio.at(0) == doctest::Approx(18.0 / 48.0));
  CHECK(per_gpu.ratio.at(1) == 0.0);
}

TEST_CASE("op_tree: eligible-op kernel ratio counts only bottom eligible nodes' own kernels") {
  model_builder b;
  b.host("aten::linear", 0, 100, 1, 1)
      .runtime(1, 1, 1, 1, 10)  // linear's own kernel: 20, linear is not bottom (aten::mm below)
      .kernel("k_linear", 200, 20, 10)
      .host("aten::mm", 10, 20, 1, 2)
      .runtime(11, 1, 1, 2, 11)
      .kernel("k_mm", 230, 30, 11)
      .host("aten::relu", 500, 10, 1, 3)
      .runtime(501, 1, 1, 3, 12)
      .kernel("k_relu", 600, 50, 12);
  auto m = b.build();
  auto t = build_op_tree(m);
  CHECK(eligible_op_kernel_ratio(t) == doctest::Approx(30.0 / 100.0));
  CHECK(tc_kernel_ratio(m) == 0.0);
}

TEST_CASE("op_tree: which nodes are operators") {
  model_builder b;
  b.host("ProfilerStep#1", 0, 1000, 1, 1)
      .host("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1, 10, 1, 2)
      .host("aten::copy_", 2, 2, 1, 3)
      .host("Optimizer.zero_grad#SGD.zero_grad", 20, 10, 1, 4)
      .host("Optimizer.step#SGD.step", 40, 10, 1, 5)
      .host("aten::add_", 41, 2, 1, 6)
      .host("DataParallel.forward", 60, 10, 1, 7)
      .host("nccl:all_reduce", 80, 5, 1, 8, event_type::user_annotation)
      .host("my_annotation", 90, 5, 1, 9, event_type::user_annotation)
      .host("python_call", 100, 5, 1, 10, event_type::python)
      .module("nn.Module: Linear_0", 200, 50, 1, 1)
      .host("aten::linear", 210, 10, 1, 11);
  auto m = b.build();
  auto t = build_op_tree(m);
  CHECK(operator_names(t) == std::vector<std::string>{"aten::copy_", "aten::add_", "aten::linear"});
  CHECK(t.uses_dp);
  CHECK_FALSE(t.uses_ddp);
  CHECK(find_all(t, "my_annotation").empty());  // no node for unrecognised annotations
  CHECK(t.nodes[find(t, "nccl:all_reduce")].kind == node_kind::op);
  CHECK(t.nodes[find(t, "Optimizer.step#SGD.step")].kind == node_kind::optimizer);
  CHECK(t.nodes[find(t, "nn.Module: Linear_0")].kind == node_kind::module);
  CHECK(module_id_of(m, t.nodes[find(t, "nn.Module: Linear_0")]) == 1);
  CHECK(plugin_type_name(t.nodes[find(t, "nn.Module: Linear_0")]) == "Module");
  CHECK(plugin_type_name(t.nodes[find(t, "ProfilerStep#1")]) == "ProfilerStep");
  CHECK(plugin_type_name(t.nodes[find(t, "nccl:all_reduce")]) == "user_annotation");
  CHECK(plugin_type_name(t.nodes[find(t, "python_call")]) == "Python");
}

TEST_CASE("op_tree: module device self adds its operator children's device total") {
  model_builder b;
  b.module("nn.Module: Linear_0", 0, 100, 1, 1)
      .host("aten::linear", 10, 50, 1, 2)
      .host("aten::addmm", 20, 20, 1, 3)
      .runtime(21, 1, 1, 3, 10)
      .kernel("k", 200, 7, 10)
      .host("ProfilerStep#1", 60, 30, 1, 4)  // not an operator: excluded from the module's self
      .runtime(61, 1, 1, 4, 11)
      .kernel("k2", 300, 5, 11);
  auto m = b.build();
  auto t = build_op_tree(m);
  const auto mod = find(t, "nn.Module: Linear_0");
  CHECK(t.nodes[mod].device_total == doctest::Approx(12));
  CHECK(t.nodes[mod].device_self == doctest::Approx(7));
}

TEST_CASE("op_tree: backward ops regrouped under <module>.backward on the main thread") {
  model_builder b;
  b.host("ProfilerStep#1", 0, 1000, 1, 1)
      .module("nn.Module: Linear_0", 10, 40, 1, 1)
      .host("aten::linear", 12, 30, 1, 2)
      .host("aten::mm", 15, 10, 1, 3)
      .host("autograd::engine::evaluate_function: MmBackward0", 100, 50, 2, 4)
      .host("MmBackward0", 105, 40, 2, 5)
      .host("aten::mm", 110, 20, 2, 6)
      .runtime(111, 2, 2, 6, 20)
      .kernel("k_bwd", 200, 9, 20)
      .host("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 160, 10, 2, 7)
      .host("torch::autograd::AccumulateGrad", 161, 5, 2, 8)
      .flow(1, 15, true)
      .flow(1, 105, false);
  auto m = b.build();
  auto t = build_op_tree(m);
  // The autograd thread lost all its root children and is dropped.
  REQUIRE(t.threads.size() == 1);
  CHECK(t.threads[0].tid == 1);
  const auto bwd = find(t, "nn.Module: Linear_0.backward");
  CHECK(t.nodes[bwd].kind == node_kind::backward);
  CHECK(child_names(t, bwd) == std::vector<std::string>{
                                   "autograd::engine::evaluate_function: MmBackward0",
                                   "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"});
  CHECK(t.nodes[bwd].start == 100);
  CHECK(t.nodes[bwd].end == 170);
  CHECK(t.nodes[bwd].host_self == doctest::Approx(70 - 50 - 10));
  CHECK(t.nodes[bwd].device_total == doctest::Approx(9));
  CHECK(t.nodes[bwd].tc_eligible);  // aten::mm below is eligible
  CHECK(t.nodes[bwd].tid == 2);
  CHECK(plugin_type_name(t.nodes[bwd]) == "backward");
  // Inserted under the step (the step overlaps it), after the forward module.
  const auto step = find(t, "ProfilerStep#1");
  CHECK(child_names(t, step) ==
        std::vector<std::string>{"nn.Module: Linear_0", "nn.Module: Linear_0.backward"});
  // Backward operators are still operators, now reached through the backward node.
  auto names = operator_names(t);
  CHECK(std::count(names.begin(), names.end(), "MmBackward0") == 1);
  CHECK(std::count(names.begin(), names.end(), "aten::mm") == 2);
  CHECK(std::count(names.begin(), names.end(), "torch::autograd::AccumulateGrad") == 1);
  CHECK(t.stats.backward_groups_lost == 0);

  // Without the option the backward ops stay on the autograd thread.
  op_tree_options o;
  o.backward_regrouping = false;
  auto t2 = build_op_tree(m, o);
  CHECK(t2.threads.size() == 2);
  CHECK(find_all(t2, "nn.Module: Linear_0.backward").empty());
}

TEST_CASE("op_tree: main thread and first tree") {
  model_builder b;
  b.host("early_op", 0, 5, 3, 1).host("ProfilerStep#1", 10, 100, 1, 2).host("aten::mm", 20, 5, 1, 3);
  auto m = b.build();
  auto t = build_op_tree(m);
  REQUIRE(t.threads.size() == 2);
  CHECK(t.threads[0].tid == 3);  // thread of the earliest host node first
  CHECK(t.first_tree() == std::optional<std::size_t>(0));
  CHECK(t.main_thread == std::optional<std::size_t>(1));

  // Without steps: the longest root interval.
  model_builder c;
  c.host("a", 0, 5, 3, 1).host("b", 10, 100, 1, 2);
  auto m2 = c.build();
  auto t2 = build_op_tree(m2);
  REQUIRE(t2.main_thread.has_value());
  CHECK(t2.threads[*t2.main_thread].tid == 1);
}

TEST_CASE("op_tree: time-containment fallback for runtimes whose External id is their correlation") {
  model_builder b;
  b.host("aten::add", 0, 50, 1, 1000)
      .host("aten::fill_", 10, 10, 1, 1001)
      .runtime(12, 2, 1, 5, 5)
      .runtime(30, 2, 1, 6, 6)
      .runtime(60, 2, 1, 7, 7)  // outside any op: stays unattributed
      .kernel("k1", 100, 4, 5, 5)
      .kernel("k2", 110, 6, 6, 6)
      .kernel("k3", 120, 8, 7, 7);
  auto m = b.build();
  auto parity = build_op_tree(m);
  CHECK(parity.nodes[find(parity, "aten::add")].device_total == 0);
  CHECK(parity.stats.runtimes_id_equals_correlation == 3);
  CHECK(parity.stats.kernels_attributed == 0);
  CHECK(parity.stats.kernels_by_fallback == 2);
  CHECK_FALSE(parity.fallback_used);
  CHECK(parity.stats.message ==
        "0 of 3 kernels could be attributed to an operator: ids do not match (runtime External id equals its "
        "correlation); time-containment fallback attributes 2");

  op_tree_options o;
  o.time_containment_fallback = true;
  auto t = build_op_tree(m, o);
  CHECK(t.fallback_used);
  CHECK(t.stats.runtimes_by_fallback == 2);
  CHECK(t.nodes[find(t, "aten::fill_")].device_self == doctest::Approx(4));
  CHECK(t.nodes[find(t, "aten::add")].device_self == doctest::Approx(6));
  CHECK(t.nodes[find(t, "aten::add")].device_total == doctest::Approx(10));
  CHECK(t.stats.kernels_attributed == 2);
  CHECK(t.stats.message ==
        "0 of 3 kernels could be attributed to an operator: ids do not match (runtime External id equals its "
        "correlation); time-containment fallback attributed 2");
}

TEST_CASE("op_tree: the fallback flag does not touch traces whose ids match") {
  model_builder b;
  b.host("aten::add", 0, 50, 1, 1).runtime(12, 2, 1, 1, 100).kernel("k1", 100, 4, 100, 1);
  auto m = b.build();
  op_tree_options o;
  o.time_containment_fallback = true;
  auto t = build_op_tree(m, o);
  CHECK_FALSE(t.fallback_used);
  CHECK(t.nodes[find(t, "aten::add")].device_self == doctest::Approx(4));
  CHECK(t.stats.message.empty());
}

TEST_CASE("op_tree: backward groups no flow resolves are lost (parity)") {
  model_builder b;
  b.host("ProfilerStep#1", 0, 1000, 1, 1)
      .module("nn.Module: Linear_0", 10, 40, 1, 1)
      .host("aten::mm", 15, 10, 1, 3)
      .host("autograd::engine::evaluate_function: MmBackward0", 100, 50, 2, 4)
      .host("MmBackward0", 105, 40, 2, 5)
      .host("autograd::engine::evaluate_function: AddBackward0", 200, 10, 2, 6)
      .host("AddBackward0", 201, 5, 2, 7)
      .flow(1, 15, true)
      .flow(1, 105, false)
      .flow(2, 16, true);  // no 'f' end: ignored
  auto m = b.build();
  auto t = build_op_tree(m);
  CHECK(t.stats.backward_groups_lost == 1);
  auto names = operator_names(t);
  CHECK(std::count(names.begin(), names.end(), "MmBackward0") == 1);
  CHECK(std::count(names.begin(), names.end(), "AddBackward0") == 0);
  REQUIRE(t.threads.size() == 1);
}

TEST_CASE("op_tree: Lightning profile and module events") {
  model_builder b;
  b.host("[pl][profile]run_training_epoch", 0, 100, 1, 1)
      .host("[pl][module]torch.nn.modules.linear.Linear: model.layer", 10, 20, 1, 2)
      .host("aten::linear", 12, 5, 1, 3)
      .module("nn.Module: Linear_0", 12, 6, 1, 1);  // python_function events are dropped in Lightning traces
  auto m = b.build();
  m.lightning = true;
  auto t = build_op_tree(m);
  REQUIRE(t.lightning_threads.size() == 1);
  const auto pl_root = t.lightning_threads[0].root;
  CHECK(child_names(t, pl_root) == std::vector<std::string>{"run_training_epoch"});
  REQUIRE(t.threads.size() == 1);
  const auto pl_mod = find(t, "model.layer");
  CHECK(t.nodes[pl_mod].kind == node_kind::pl_module);
  CHECK(pl_module_type(m, t.nodes[pl_mod]) == "torch.nn.modules.linear.Linear");
  CHECK(module_id_of(m, t.nodes[pl_mod]) == 0);
  CHECK(pl_module_type(m, t.nodes[find(t, "aten::linear")]).empty());
  CHECK(child_names(t, pl_mod) == std::vector<std::string>{"aten::linear"});
  CHECK(find_all(t, "nn.Module: Linear_0").empty());
  CHECK(operator_names(t) == std::vector<std::string>{"aten::linear"});
}

// ---------------------------------------------------------------------------------------------
// Memory: the viewer keeps the model and the tree of every open file, one event and one node per
// host event, so on traces of many small events their sizes decide the server's resident size.
// These guards assert on deterministic byte accounting (never RSS).

TEST_CASE("op_tree memory: node sizes") {
  CHECK(sizeof(index_list) == 8);
  CHECK(sizeof(op_node) <= 160);      // 208 with std::vector lists and padding
  CHECK(sizeof(runtime_node) <= 72);  // 96
  CHECK(sizeof(device_node) <= 64);   // 80
  CHECK(sizeof(event) == 64);
}

TEST_CASE("op_tree memory: index_list behaves like the vector it replaces") {
  index_list l;
  CHECK(l.empty());
  CHECK(l.heap_bytes() == 0);
  CHECK(l.begin() == l.end());
  l.push_back(0);
  CHECK(l.size() == 1);
  CHECK(l.heap_bytes() == 0);  // one item is held inline
  l.erase(l.begin(), l.end());
  CHECK(l.empty());
  for (std::uint32_t i = 0; i < 5; ++i) l.push_back(i * 10);  // 0 10 20 30 40
  CHECK(l.heap_bytes() > 0);
  l.insert(l.begin() + 2, 15u);                                // 0 10 15 20 30 40
  const std::vector<std::uint32_t> more{1, 2};
  l.insert(l.end(), more.begin(), more.end());                 // ... 40 1 2
  CHECK(std::vector<std::uint32_t>(l.begin(), l.end()) == std::vector<std::uint32_t>{0, 10, 15, 20, 30, 40, 1, 2});
  l.erase(std::remove_if(l.begin(), l.end(), [](std::uint32_t v) { return v < 10; }), l.end());
  CHECK(std::vector<std::uint32_t>(l.begin(), l.end()) == std::vector<std::uint32_t>{10, 15, 20, 30, 40});
  std::sort(l.begin(), l.end(), [](std::uint32_t a, std::uint32_t b) { return a > b; });
  CHECK(l.front() == 40);
  CHECK(l.back() == 10);
  index_list copy = l;
  CHECK(copy == l);
  index_list moved = std::move(copy);
  CHECK(copy.empty());  // NOLINT(bugprone-use-after-move): moved-from lists are empty
  CHECK(moved == l);
  moved = std::vector<std::uint32_t>{7};
  CHECK(moved.size() == 1);
  CHECK(moved[0] == 7);
  l.clear();
  CHECK(l.empty());
}

TEST_CASE("op_tree memory: bytes per event on a trace of many small cpu_ops") {
  const std::string text = kinetoscope::test::small_events_trace();  // ~140 bytes of JSON per event
  load_result r = load_trace_buffer(text, "small_events");
  REQUIRE(r.model);
  const trace_model& m = *r.model;
  REQUIRE(m.events.size() == 40 * 1001);
  CHECK(m.ops.empty());                         // no arg worth an op_args entry
  CHECK(m.events.capacity() == m.events.size());  // no spare capacity kept
  const op_trees trees = build_op_tree(m);
  CHECK(trees.nodes.size() >= m.events.size());
  const double per_event = static_cast<double>(m.heap_bytes() + trees.heap_bytes()) / static_cast<double>(m.events.size());
  MESSAGE("model + op tree: " << per_event << " bytes per event, JSON: "
                              << static_cast<double>(text.size()) / static_cast<double>(m.events.size()));
  // 64 (event) + 160 (node) + 4 (operators) + lists; was >= 64 + 32 (op_args) + 208 + 4 + lists.
  CHECK(per_event <= 250);
}

TEST_CASE("id_map: the op tree's id joins find what a std::unordered_map finds, past its sizing and for any ids") {
  // Ids as traces have them (consecutive, large, negative, the int64 limits) and as a crafted
  // trace might (multiples of a large power of two, which an identity hash would pile up).
  std::vector<std::int64_t> keys;
  for (std::int64_t i = 0; i < 5000; ++i) keys.push_back(i);
  for (std::int64_t i = 0; i < 5000; ++i) keys.push_back(i << 32);
  for (std::int64_t i = 1; i < 2000; ++i) keys.push_back(-i * 7919);
  keys.push_back(std::numeric_limits<std::int64_t>::min());
  keys.push_back(std::numeric_limits<std::int64_t>::max());
  std::mt19937_64 rng(7);
  for (int i = 0; i < 5000; ++i) keys.push_back(static_cast<std::int64_t>(rng()));
  std::shuffle(keys.begin(), keys.end(), rng);

  for (const std::size_t expected : {std::size_t{0}, std::size_t{100}, keys.size()}) {
    CAPTURE(expected);
    id_map m(expected);
    std::unordered_map<std::int64_t, std::uint32_t> ref;
    std::uint32_t next = 0;
    for (const std::int64_t k : keys) {
      // Every third key is written twice: the first value stays (try_emplace), unless overwritten.
      const auto [v, inserted] = m.try_emplace(k, next);
      const auto [it, ref_inserted] = ref.try_emplace(k, next);
      CHECK(inserted == ref_inserted);
      CHECK(*v == it->second);
      if (next % 3 == 0) {
        *v = next + 1000000;
        it->second = next + 1000000;
      }
      ++next;
    }
    CHECK(m.size() == ref.size());
    for (const auto& [k, v] : ref) {
      const std::uint32_t* got = m.find(k);
      REQUIRE(got != nullptr);
      CHECK(*got == v);
    }
    for (std::int64_t k = 5000; k < 5100; ++k) CHECK(m.find(k) == nullptr);
    CHECK(m.find(std::int64_t{5000} << 32) == nullptr);
  }
}
