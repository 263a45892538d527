// SPDX-License-Identifier: BSD-3-Clause
// The two rule sets of the views (viewer/analysis/rules.hpp): kinetoscope's
// (docs/kinetoscope-rules.md, the default) and torch-tb-profiler's (docs/plugin-rules.md). Each
// rule is checked on a small hand-built trace under both sets, with the numbers worked out by
// hand in the comments: the plugin's set must keep the old behaviour, kinetoscope's must give
// the documented one. The committed PyTorch 2.11 / H200 traces (tests/data/gpu) then check the
// evidence the rules page cites.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "analysis/distributed_view.hpp"
#include "analysis/kernel_view.hpp"
#include "analysis/loader.hpp"
#include "analysis/memory_view.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/operator_view.hpp"
#include "analysis/overview.hpp"
#include "analysis/recommendations.hpp"
#include "analysis/report.hpp"
#include "analysis/rules.hpp"
#include "analysis/tensor_cores.hpp"

using namespace kinetoscope::analysis;

namespace {

constexpr double nan_value = std::numeric_limits<double>::quiet_NaN();
constexpr rule_set both_sets[] = {rule_set::plugin, rule_set::kinetoscope};

/// Builds a trace_model by hand, the way the loader fills it (host events on pid 100, thread
/// `tid`; GPU events on pid = device, stream 7).
struct model_builder {
  trace_model m;

  event& add(event_type type, std::string_view name, double ts, double dur, std::int64_t pid, std::int64_t tid,
             std::int64_t ext, std::int64_t corr) {
    event e;
    e.type = type;
    e.name = m.intern(name);
    e.ts = ts;
    e.dur = dur;
    e.pid = pid;
    e.tid = tid;
    e.external_id = ext;
    e.correlation = corr;
    // As Kineto writes them: operators, annotations and runtime/driver calls carry an
    // "External id" (maybe 0).
    e.has_external_id = type == event_type::op || type == event_type::user_annotation ||
                        type == event_type::runtime || type == event_type::driver;
    if (type == event_type::op || type == event_type::user_annotation || type == event_type::python) {
      e.extra = static_cast<std::uint32_t>(m.ops.size());
      m.ops.push_back({});
    }
    m.events.push_back(e);
    return m.events.back();
  }
  model_builder& op(std::string_view name, double ts, double dur, std::int64_t ext = 0, std::int64_t tid = 1) {
    add(event_type::op, name, ts, dur, 100, tid, ext, 0);
    return *this;
  }
  /// A `gpu_user_annotation` (Kineto >= 2.3 copies each ProfilerStep#N onto the GPU timeline).
  model_builder& gpu_annotation(std::string_view name, double ts, double dur, std::int64_t ext = 0) {
    add(event_type::user_annotation, name, ts, dur, 0, 7, ext, 0).gpu_annotation = true;
    return *this;
  }
  model_builder& runtime(double ts, double dur, std::int64_t ext, std::int64_t corr, std::int64_t tid = 1,
                         std::string_view name = "cudaLaunchKernel") {
    add(event_type::runtime, name, ts, dur, 100, tid, ext, corr);
    return *this;
  }
  /// A `cuda_driver` launch (cuLaunchKernel: cuBLAS in PyTorch 2.x, Triton).
  model_builder& driver(double ts, double dur, std::int64_t ext, std::int64_t corr, std::int64_t tid = 1) {
    add(event_type::driver, "cuLaunchKernel", ts, dur, 100, tid, ext, corr);
    return *this;
  }
  model_builder& kernel(std::string_view name, double ts, double dur, std::int64_t ext, std::int64_t corr,
                        std::int64_t device = 0) {
    event& e = add(event_type::kernel, name, ts, dur, device, 7, ext, corr);
    kernel_args k;
    k.device = device;
    e.extra = static_cast<std::uint32_t>(m.kernels.size());
    m.kernels.push_back(k);
    return *this;
  }
  /// A `[memory]` instant; `total` NaN = no "Total Allocated" in the record.
  model_builder& memory(double ts, std::int64_t device_type, std::int64_t device_id, std::uint64_t addr,
                        std::int64_t bytes, double total = nan_value, double reserved = nan_value,
                        std::int64_t tid = 1) {
    event& e = add(event_type::memory, "[memory]", ts, 0, 100, tid, 0, 0);
    memory_args a;
    a.device_type = device_type;
    a.device_id = device_id;
    a.addr = addr;
    a.has_addr = true;
    a.bytes = bytes;
    a.total_allocated = total;
    a.total_reserved = reserved;
    e.extra = static_cast<std::uint32_t>(m.memory.size());
    m.memory.push_back(a);
    return *this;
  }
  model_builder& gpu(std::int64_t mem, std::int64_t major, std::int64_t minor) {
    device_info d;
    d.present = true;
    d.name = "GPU";
    d.has_name = true;
    d.total_global_mem = mem;
    d.has_total_global_mem = true;
    d.compute_major = major;
    d.has_compute_major = true;
    d.compute_minor = minor;
    d.has_compute_minor = true;
    m.devices.push_back(d);
    return *this;
  }
  trace_model done() {
    std::stable_sort(m.events.begin(), m.events.end(), [](const event& a, const event& b) { return a.ts < b.ts; });
    return std::move(m);
  }
};

/// The views of one model under one rule set, as every entry point computes them.
struct views {
  analysis_rules rules;
  op_trees trees;
  overview_result overview;
  views(const trace_model& m, rule_set s) : rules(kinetoscope::analysis::rules(s)) {
    trees = build_op_tree(m, rules.tree);
    overview = compute_overview(m, trees, rules.overview);
  }
};

const kernel_op_row* find_row(const std::vector<kernel_op_row>& rows, std::string_view kernel) {
  for (const kernel_op_row& r : rows)
    if (r.name == kernel) return &r;
  return nullptr;
}
const kernel_row* find_row(const std::vector<kernel_row>& rows, std::string_view kernel) {
  for (const kernel_row& r : rows)
    if (r.name == kernel) return &r;
  return nullptr;
}
const op_node* find_node(const op_trees& t, std::string_view name) {
  for (const op_node& n : t.nodes)
    if (n.name == name) return &n;
  return nullptr;
}

double total_of(const std::vector<kernel_op_row>& rows) {
  double s = 0;
  for (const kernel_op_row& r : rows) s += r.total_us;
  return s;
}
double raw_total_of(const std::vector<kernel_row>& rows) {
  double s = 0;
  for (const kernel_row& r : rows) s += r.total_raw_us;
  return s;
}
std::size_t count_operator(const std::vector<kernel_op_row>& rows, std::string_view op) {
  return static_cast<std::size_t>(
      std::count_if(rows.begin(), rows.end(), [&](const kernel_op_row& r) { return r.operator_name == op; }));
}

// Kernel names of the tensor-core cases (docs/kinetoscope-rules.md#k3).
constexpr std::string_view nvjet = "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN";  // cuBLASLt sm90: TC, the plugin misses it
constexpr std::string_view ffma_gemm =  // an FP32 SIMT GEMM the plugin's "xmma_gemm" substring counts
    "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas";
constexpr std::string_view h884 = "volta_h884gemm_64x64_ldg8_nn";  // both agree: TC
constexpr std::string_view sgemm = "volta_sgemm_128x64_nn";        // both agree: no TC

}  // namespace

// ---------------------------------------------------------------------------------------------
// The rule sets themselves

TEST_CASE("rules: names parse back and nothing else parses") {
  CHECK(rule_set_name(rule_set::kinetoscope) == "kinetoscope");
  CHECK(rule_set_name(rule_set::plugin) == "plugin");
  for (rule_set s : both_sets) CHECK(parse_rule_set(rule_set_name(s)) == s);
  for (const char* bad : {"", "Plugin", "PLUGIN", "plugin ", " kinetoscope", "kinetoscope\n", "torch-tb-profiler",
                          "improved", "plugins", "kineto"})
    CHECK_MESSAGE(!parse_rule_set(bad).has_value(), "'", bad, "'");
  CHECK(rules().set == rule_set::kinetoscope);  // the default everywhere
}

TEST_CASE("rules: the plugin's set is every option's default, kinetoscope's turns each rule on") {
  const analysis_rules p = rules(rule_set::plugin);
  const analysis_rules k = rules(rule_set::kinetoscope);
  CHECK(p.set == rule_set::plugin);
  CHECK(k.set == rule_set::kinetoscope);
  const op_tree_options def_tree;
  const overview_options def_ov;
  const distributed_options def_dist;
  const recommendation_options def_rec;

  // The plugin: the defaults, which reproduce its numbers.
  CHECK(p.tree.time_containment_fallback == def_tree.time_containment_fallback);
  CHECK(p.tree.driver_as_runtime == def_tree.driver_as_runtime);
  CHECK(p.tree.keep_unresolved_backward == def_tree.keep_unresolved_backward);
  CHECK(p.tree.idless_runtimes_to_first_idless_node == def_tree.idless_runtimes_to_first_idless_node);
  CHECK(p.tree.modern_tensor_cores == def_tree.modern_tensor_cores);
  CHECK(p.tree.all_collectives == def_tree.all_collectives);
  CHECK(p.tree.no_operator_label == def_tree.no_operator_label);
  CHECK(p.tree.rebuild_memory_totals == def_tree.rebuild_memory_totals);
  CHECK(p.overview.all_collectives == def_ov.all_collectives);
  CHECK(p.overview.gpu_annotations_as_host == def_ov.gpu_annotations_as_host);
  CHECK(p.overview.tc_over_all_kernels == def_ov.tc_over_all_kernels);
  CHECK(p.overview.driver_as_runtime == def_ov.driver_as_runtime);
  CHECK(p.distributed.all_collectives == def_dist.all_collectives);
  CHECK(p.distributed.gpu_annotations_as_host == def_dist.gpu_annotations_as_host);
  CHECK(p.distributed.outside_steps_label == def_dist.outside_steps_label);
  CHECK(p.recommendations.plugin_memory_rule == def_rec.plugin_memory_rule);
  CHECK(p.recommendations.launch_overhead_needs_idle_gpu == def_rec.launch_overhead_needs_idle_gpu);
  // ... and those defaults are the plugin's behaviour.
  CHECK_FALSE(p.tree.modern_tensor_cores);
  CHECK_FALSE(p.tree.all_collectives);
  CHECK_FALSE(p.tree.no_operator_label);
  CHECK_FALSE(p.tree.rebuild_memory_totals);
  CHECK_FALSE(p.tree.driver_as_runtime);
  CHECK(p.tree.idless_runtimes_to_first_idless_node);
  CHECK_FALSE(p.overview.all_collectives);
  CHECK(p.overview.gpu_annotations_as_host);
  CHECK_FALSE(p.overview.tc_over_all_kernels);
  CHECK_FALSE(p.overview.driver_as_runtime);
  CHECK(p.distributed.outside_steps_label.empty());
  CHECK(p.recommendations.plugin_memory_rule);
  CHECK_FALSE(p.recommendations.launch_overhead_needs_idle_gpu);

  // Kinetoscope's: K1 to K6.
  CHECK(k.tree.time_containment_fallback);
  CHECK(k.tree.driver_as_runtime);
  CHECK(k.tree.keep_unresolved_backward);
  CHECK_FALSE(k.tree.idless_runtimes_to_first_idless_node);
  CHECK(k.tree.no_operator_label);
  CHECK(k.tree.modern_tensor_cores);
  CHECK(k.tree.all_collectives);
  CHECK(k.tree.rebuild_memory_totals);
  CHECK(k.overview.all_collectives);
  CHECK_FALSE(k.overview.gpu_annotations_as_host);
  CHECK(k.overview.tc_over_all_kernels);
  CHECK(k.overview.driver_as_runtime);
  CHECK(k.distributed.all_collectives);
  CHECK_FALSE(k.distributed.gpu_annotations_as_host);
  CHECK(k.distributed.outside_steps_label == "outside steps");
  CHECK_FALSE(k.recommendations.plugin_memory_rule);
  CHECK(k.recommendations.launch_overhead_needs_idle_gpu);
  CHECK(k.recommendations.busy_gpu_utilization == 0.5);

  // report() hands the set's overview and recommendation options on, every view requested.
  for (rule_set s : both_sets) {
    const analysis_rules r = rules(s);
    const report_options o = r.report();
    CHECK(o.overview.all_collectives == r.overview.all_collectives);
    CHECK(o.overview.gpu_annotations_as_host == r.overview.gpu_annotations_as_host);
    CHECK(o.overview.tc_over_all_kernels == r.overview.tc_over_all_kernels);
    CHECK(o.overview.driver_as_runtime == r.overview.driver_as_runtime);
    CHECK(o.recommendations.plugin_memory_rule == r.recommendations.plugin_memory_rule);
    CHECK(o.recommendations.launch_overhead_needs_idle_gpu == r.recommendations.launch_overhead_needs_idle_gpu);
    CHECK(o.with_overview);
    CHECK(o.with_operators);
    CHECK(o.with_kernels);
    CHECK(o.with_memory);
    CHECK(o.with_modules);
  }
  // The trees remember the options they were built with (the views that read them follow).
  const trace_model empty;
  for (rule_set s : both_sets) {
    const op_trees t = build_op_tree(empty, rules(s).tree);
    CHECK(t.options.modern_tensor_cores == (s == rule_set::kinetoscope));
    CHECK(t.options.no_operator_label == (s == rule_set::kinetoscope));
    CHECK(t.options.rebuild_memory_totals == (s == rule_set::kinetoscope));
    CHECK(t.options.all_collectives == (s == rule_set::kinetoscope));
  }
}

// ---------------------------------------------------------------------------------------------
// K1 Steps come from the host

TEST_CASE("rules K1: a gpu_user_annotation ProfilerStep is a step for the plugin only") {
  // Host step 1 [1000,2000) with aten::add [1100,1300); Kineto's GPU copy of a step "2" at
  // [2500,2600) and a GPU annotation "my_range" [1500,1900) (CPU Exec for the plugin, Q4). No
  // GPU work, so no step extension and no tail dropping.
  model_builder b;
  b.op("ProfilerStep#1", 1000, 1000).op("aten::add", 1100, 200, 1);
  b.gpu_annotation("ProfilerStep#2", 2500, 100);
  b.gpu_annotation("my_range", 1500, 400);
  const trace_model m = b.done();

  const views plugin(m, rule_set::plugin);
  REQUIRE(plugin.overview.steps.size() == 2);
  CHECK(plugin.overview.steps[0].name == "1");
  CHECK(plugin.overview.steps[1].name == "2");
  CHECK(plugin.overview.steps[0].total == 1000);
  CHECK(plugin.overview.steps[1].total == 100);
  CHECK(plugin.overview.steps[0].cpu_exec == 600);  // aten::add 200 + my_range 400
  CHECK(plugin.overview.average.total == 550);      // (1000 + 100) / 2

  const views ours(m, rule_set::kinetoscope);
  REQUIRE(ours.overview.steps.size() == 1);
  CHECK(ours.overview.steps[0].name == "1");
  CHECK(ours.overview.steps[0].start == 1000);
  CHECK(ours.overview.steps[0].end == 2000);
  CHECK(ours.overview.steps[0].cpu_exec == 200);  // aten::add only
  CHECK(ours.overview.steps[0].other == 800);
  CHECK(ours.overview.average.total == 1000);
}

// ---------------------------------------------------------------------------------------------
// K2 Every kernel has its launcher

TEST_CASE("rules K2: cuda_driver launches link their kernels, widen the step and take the Runtime role") {
  // Step [1000,2000); aten::mm [1100,1300) ext 5 launches through cuLaunchKernel [1150,1170)
  // (a cuda_driver event, correlation 50) a kernel [1900,2300) that outlives the step.
  model_builder b;
  b.op("ProfilerStep#1", 1000, 1000).op("aten::mm", 1100, 200, 5).driver(1150, 20, 5, 50);
  b.kernel("gemm_kernel", 1900, 400, 5, 50);
  const trace_model m = b.done();

  // The plugin drops the category: the kernel has no launcher (a stale kernel on the root), the
  // step stays the host's, the driver call is CPU Exec time of aten::mm.
  const views plugin(m, rule_set::plugin);
  REQUIRE(plugin.overview.steps.size() == 1);
  const step_row& p = plugin.overview.steps[0];
  CHECK(p.start == 1000);
  CHECK(p.end == 2000);
  CHECK(p.kernel == 100);  // [1900,2000) inside the step
  CHECK(p.runtime == 0);
  CHECK(p.cpu_exec == 200);
  CHECK(p.other == 700);
  CHECK(p.total == 1000);
  CHECK(plugin.trees.stats.stale_kernels == 1);
  const auto plugin_rows = kernels_by_name_and_operator(m, plugin.trees);
  REQUIRE(plugin_rows.size() == 1);
  CHECK(plugin_rows[0].operator_name == "CallTreeRoot");
  const op_node* mm = find_node(plugin.trees, "aten::mm");
  REQUIRE(mm != nullptr);
  CHECK(mm->device_total == 0);

  // Kinetoscope: the driver call is a runtime of aten::mm; the step ends with its kernel.
  const views ours(m, rule_set::kinetoscope);
  REQUIRE(ours.overview.steps.size() == 1);
  const step_row& k = ours.overview.steps[0];
  CHECK(k.start == 1000);
  CHECK(k.end == 2300);
  CHECK(k.kernel == 400);
  CHECK(k.runtime == 20);
  CHECK(k.cpu_exec == 180);  // aten::mm less its launch
  CHECK(k.other == 700);     // 1300 − 400 − 20 − 180
  CHECK(k.total == 1300);
  CHECK(ours.overview.steps_extended);
  CHECK(ours.trees.stats.stale_kernels == 0);
  const auto our_rows = kernels_by_name_and_operator(m, ours.trees);
  REQUIRE(our_rows.size() == 1);
  CHECK(our_rows[0].operator_name == "aten::mm");
  const op_node* our_mm = find_node(ours.trees, "aten::mm");
  REQUIRE(our_mm != nullptr);
  CHECK(our_mm->device_total == 400);
}

TEST_CASE("rules K2: kernels without an operator are \"(no operator)\", each once, unreached ones included") {
  // Thread 1: step [1000,2000), aten::add [1100,1200) ext 1 launching add_kernel (10 µs).
  //  - a runtime with External id 0 [1500,1510) launches root_kernel (20 µs): it hangs under the
  //    thread's root;
  //  - stale_kernel (80 µs) has no runtime at all: a stale kernel on the step thread's root;
  //  - a runtime with id 98 [2100,2110), an id no operator has, outside every host node:
  //    dropped by both, so outside_kernel (60 µs) is in no tree.
  model_builder b;
  b.op("ProfilerStep#1", 1000, 1000).op("aten::add", 1100, 100, 1).runtime(1110, 10, 1, 11);
  b.kernel("add_kernel", 1300, 10, 1, 11);
  b.runtime(1500, 10, 0, 12).kernel("root_kernel", 1600, 20, 0, 12);
  b.kernel("stale_kernel", 1800, 80, 0, 14);
  b.runtime(2100, 10, 98, 15).kernel("outside_kernel", 2150, 60, 98, 15);
  const trace_model m = b.done();

  const op_trees plugin = build_op_tree(m, rules(rule_set::plugin).tree);
  const auto p = kernels_by_name_and_operator(m, plugin);
  REQUIRE(p.size() == 3);  // outside_kernel left out
  CHECK(find_row(p, "outside_kernel") == nullptr);
  REQUIRE(find_row(p, "add_kernel") != nullptr);
  CHECK(find_row(p, "add_kernel")->operator_name == "aten::add");
  REQUIRE(find_row(p, "root_kernel") != nullptr);
  CHECK(find_row(p, "root_kernel")->operator_name == "CallTreeRoot");
  REQUIRE(find_row(p, "stale_kernel") != nullptr);
  CHECK(find_row(p, "stale_kernel")->operator_name == "CallTreeRoot");
  CHECK(count_operator(p, no_operator_name) == 0);
  CHECK(total_of(p) == 110);  // 10 + 20 + 80
  CHECK(raw_total_of(kernels_by_name(m, plugin)) == 170);

  const op_trees ours = build_op_tree(m, rules(rule_set::kinetoscope).tree);
  const auto k = kernels_by_name_and_operator(m, ours);
  REQUIRE(k.size() == 4);
  REQUIRE(find_row(k, "add_kernel") != nullptr);
  CHECK(find_row(k, "add_kernel")->operator_name == "aten::add");
  for (const std::string name : {"root_kernel", "outside_kernel", "stale_kernel"}) {
    INFO(name);
    const kernel_op_row* r = find_row(k, name);
    REQUIRE(r != nullptr);
    CHECK(r->operator_name == "(no operator)");
    CHECK(r->calls == 1);
  }
  CHECK(find_row(k, "outside_kernel")->total_us == 60);
  CHECK(count_operator(k, "CallTreeRoot") == 0);
  CHECK(count_operator(k, no_operator_name) == 3);
  CHECK(total_of(k) == 170);  // every kernel once: the by-name table's total
  CHECK(total_of(k) == raw_total_of(kernels_by_name(m, ours)));
}

TEST_CASE("rules K2: stale kernels on two step threads are listed once under kinetoscope's rules") {
  // Two threads have ProfilerStep# nodes: the stale kernel (no runtime) reaches the root of each
  // (the plugin's Q10); the kinetoscope table lists every kernel event once.
  model_builder b;
  b.op("ProfilerStep#1", 1000, 1000, 0, 1).op("ProfilerStep#1", 1000, 1000, 0, 2);
  b.op("aten::add", 1100, 100, 1, 1).runtime(1110, 10, 1, 11, 1).kernel("add_kernel", 1300, 10, 1, 11);
  b.kernel("stale_kernel", 1800, 80, 0, 14);
  const trace_model m = b.done();

  const op_trees ours = build_op_tree(m, rules(rule_set::kinetoscope).tree);
  const auto k = kernels_by_name_and_operator(m, ours);
  REQUIRE(find_row(k, "stale_kernel") != nullptr);
  CHECK(find_row(k, "stale_kernel")->calls == 1);
  CHECK(find_row(k, "stale_kernel")->total_us == 80);
  CHECK(total_of(k) == 90);
  CHECK(total_of(k) == raw_total_of(kernels_by_name(m, ours)));

  // The plugin's table walks each root: the stale kernel is counted on both.
  const op_trees plugin = build_op_tree(m, rules(rule_set::plugin).tree);
  const auto p = kernels_by_name_and_operator(m, plugin);
  REQUIRE(find_row(p, "stale_kernel") != nullptr);
  CHECK(find_row(p, "stale_kernel")->operator_name == "CallTreeRoot");
  CHECK(count_operator(p, no_operator_name) == 0);
  CHECK(find_row(p, "stale_kernel")->calls == 2);  // Q10: once per step thread's root
  CHECK(total_of(p) == 170);                        // 10 + 2 · 80
}

TEST_CASE("rules K2: runtimes without any External id go to the root, not to the first idless node (Q22)") {
  // A module node (python_function, no External id) spans the step; a graph launch without any
  // External id [1400,1410) launches graph_kernel. The plugin files it under the module (Q22);
  // kinetoscope hangs it under the thread's root, "(no operator)" in the Kernel view.
  model_builder b;
  b.op("ProfilerStep#1", 1000, 1000);
  {
    event& e = b.add(event_type::module, "nn.Module: Net_0", 1050, 900, 100, 1, 0, 0);
    python_args pa;
    pa.module_id = 1;
    e.extra = static_cast<std::uint32_t>(b.m.python.size());
    b.m.python.push_back(pa);
  }
  b.add(event_type::runtime, "cudaGraphLaunch", 1400, 10, 100, 1, 0, 15).has_external_id = false;
  b.kernel("graph_kernel", 1420, 30, 0, 15);
  const trace_model m = b.done();

  const auto p = kernels_by_name_and_operator(m, build_op_tree(m, rules(rule_set::plugin).tree));
  REQUIRE(p.size() == 1);
  CHECK(p[0].operator_name == "nn.Module: Net_0");
  const auto k = kernels_by_name_and_operator(m, build_op_tree(m, rules(rule_set::kinetoscope).tree));
  REQUIRE(k.size() == 1);
  CHECK(k[0].operator_name == "(no operator)");
  CHECK(k[0].total_us == 30);
}

// ---------------------------------------------------------------------------------------------
// K3 Tensor cores

TEST_CASE("rules K3: the tensor-core operator lists") {
  // The plugin's names keep their verdict in both lists.
  for (const char* name : {"aten::mm", "aten::addmm", "aten::conv2d", "aten::cudnn_convolution", "MmBackward",
                           "BmmBackward0", "AddmmBackward", "CudnnConvolutionBackward"}) {
    INFO(name);
    CHECK(is_tc_eligible_op(name));
    CHECK(is_modern_tc_eligible_op(name));
  }
  // PyTorch 2.x's "0" suffix, and the operators added since: kinetoscope's list only.
  for (const char* name : {"MmBackward0", "AddmmBackward0", "AddbmmBackward0", "CudnnConvolutionBackward0",
                           "ConvolutionBackward0", "LinearBackward0", "ScaledMmBackward0",
                           "ScaledDotProductFlashAttentionBackward0", "aten::_scaled_mm", "aten::_grouped_mm",
                           "aten::_flash_attention_forward", "aten::_flash_attention_backward",
                           "aten::_efficient_attention_forward", "aten::_efficient_attention_backward",
                           "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
                           "aten::_scaled_dot_product_cudnn_attention", "aten::convolution_backward", "aten::einsum"}) {
    INFO(name);
    CHECK_FALSE(is_tc_eligible_op(name));
    CHECK(is_modern_tc_eligible_op(name));
  }
  // Neither: other operators and backward nodes, and the suffix alone does not make a name.
  for (const char* name : {"aten::relu", "aten::add", "ReluBackward0", "AddBackward0", "Backward0", "aten::mm0",
                           "MmBackward0x", "mmbackward0", "aten::scaled_mm", "", "CudnnConvolutionBackwardX0"}) {
    INFO(name);
    CHECK_FALSE(is_tc_eligible_op(name));
    CHECK_FALSE(is_modern_tc_eligible_op(name));
  }
}

TEST_CASE("rules K3: the kernel classifier of each set, in every view that reads it") {
  // The four kernels' verdicts: nvjet (TC, plugin misses it), the ffma GEMM (no TC, plugin counts
  // it), h884 (TC in both), sgemm (neither).
  REQUIRE(kernel_uses_tensor_cores(nvjet));
  REQUIRE_FALSE(is_tc_kernel(nvjet));
  REQUIRE_FALSE(kernel_uses_tensor_cores(ffma_gemm));
  REQUIRE(is_tc_kernel(ffma_gemm));
  REQUIRE(kernel_uses_tensor_cores(h884));
  REQUIRE(is_tc_kernel(h884));
  REQUIRE_FALSE(kernel_uses_tensor_cores(sgemm));
  REQUIRE_FALSE(is_tc_kernel(sgemm));

  // Step [1000,3000); aten::mm launches nvjet 100 µs, aten::addmm the ffma GEMM 200 µs,
  // aten::bmm h884 300 µs, aten::relu sgemm 400 µs (all attributed, one GPU).
  model_builder b;
  b.gpu(80LL << 30, 9, 0);
  b.op("ProfilerStep#1", 1000, 2000);
  b.op("aten::mm", 1010, 20, 1).runtime(1011, 5, 1, 11).kernel(nvjet, 1100, 100, 1, 11);
  b.op("aten::addmm", 1040, 20, 2).runtime(1041, 5, 2, 12).kernel(ffma_gemm, 1200, 200, 2, 12);
  b.op("aten::bmm", 1070, 20, 3).runtime(1071, 5, 3, 13).kernel(h884, 1400, 300, 3, 13);
  b.op("aten::relu", 1100, 20, 4).runtime(1101, 5, 4, 14).kernel(sgemm, 1700, 400, 4, 14);
  const trace_model m = b.done();

  for (rule_set s : both_sets) {
    INFO(rule_set_name(s));
    const bool ours = s == rule_set::kinetoscope;
    const views v(m, s);
    // The trees' device nodes and classifier.
    for (const device_node& d : v.trees.devices) {
      INFO(d.name);
      CHECK(d.tc_kernel == (ours ? kernel_uses_tensor_cores(d.name) : is_tc_kernel(d.name)));
      CHECK(d.tc_kernel == v.trees.uses_tensor_cores(d.name));
    }
    CHECK(v.trees.uses_tensor_cores(nvjet) == ours);
    CHECK(v.trees.uses_tensor_cores(ffma_gemm) == !ours);
    // Kernel view: the Tensor Cores Used column and the pie.
    const auto rows = kernels_by_name(m, v.trees);
    REQUIRE(rows.size() == 4);
    CHECK(find_row(rows, nvjet)->tensor_cores_used == ours);
    CHECK(find_row(rows, ffma_gemm)->tensor_cores_used == !ours);
    CHECK(find_row(rows, h884)->tensor_cores_used);
    CHECK_FALSE(find_row(rows, sgemm)->tensor_cores_used);
    const auto op_rows = kernels_by_name_and_operator(m, v.trees);
    CHECK(find_row(op_rows, nvjet)->tensor_cores_used == ours);
    CHECK(find_row(op_rows, ffma_gemm)->tensor_cores_used == !ours);
    // Pie: ours (100 + 300) / 1000, the plugin's (200 + 300) / 1000.
    CHECK(tc_kernel_ratio(m, v.trees) == doctest::Approx(ours ? 0.4 : 0.5));
    CHECK(tc_kernel_ratio(m) == doctest::Approx(0.5));  // the plugin's classifier, whatever the trees
    // GPU summary: every kernel here is attributed, so both ratios are the pie's.
    REQUIRE(v.overview.gpus.size() == 1);
    REQUIRE(v.overview.gpus[0].tensor_cores_pct.has_value());
    CHECK(*v.overview.gpus[0].tensor_cores_pct == (ours ? 40.0 : 50.0));
    // Operator view: device time on tensor cores follows the classifier.
    const op_node* mm = find_node(v.trees, "aten::mm");
    const op_node* addmm = find_node(v.trees, "aten::addmm");
    REQUIRE(mm != nullptr);
    REQUIRE(addmm != nullptr);
    CHECK(mm->tc_total == (ours ? 100 : 0));
    CHECK(addmm->tc_total == (ours ? 0 : 200));
  }
}

TEST_CASE("rules K3: the GPU summary's tensor-core share is over every kernel of the GPU under kinetoscope's rules") {
  // Step [1000,2000); aten::mm launches h884 (TC in both) [1300,1400); a stale kernel (no
  // runtime) relu_kernel [1500,1800) reaches no operator. The plugin counts attributed kernels
  // only: 100 / 100; kinetoscope every kernel: 100 / 400, which is the Kernel view's pie.
  model_builder b;
  b.gpu(16LL << 30, 7, 0);
  b.op("ProfilerStep#1", 1000, 1000).op("aten::mm", 1100, 100, 1).runtime(1110, 10, 1, 11);
  b.kernel(h884, 1300, 100, 1, 11);
  b.kernel("relu_kernel", 1500, 300, 0, 99);
  const trace_model m = b.done();

  const views plugin(m, rule_set::plugin);
  REQUIRE(plugin.overview.gpus.size() == 1);
  REQUIRE(plugin.overview.gpus[0].tensor_cores_pct.has_value());
  CHECK(*plugin.overview.gpus[0].tensor_cores_pct == 100.0);
  CHECK(tc_kernel_ratio(m, plugin.trees) == doctest::Approx(0.25));  // the two views disagree

  const views ours(m, rule_set::kinetoscope);
  REQUIRE(ours.overview.gpus.size() == 1);
  REQUIRE(ours.overview.gpus[0].tensor_cores_pct.has_value());
  CHECK(*ours.overview.gpus[0].tensor_cores_pct == 25.0);
  CHECK(*ours.overview.gpus[0].tensor_cores == doctest::Approx(tc_kernel_ratio(m, ours.trees)));

  // The per-GPU ratio itself, with a second GPU that runs no TC kernel and a third id without
  // kernels.
  model_builder two;
  two.op("ProfilerStep#1", 1000, 1000).op("aten::mm", 1100, 100, 1).runtime(1110, 10, 1, 11);
  two.kernel(h884, 1300, 100, 1, 11, 0);
  two.kernel("relu_kernel", 1500, 300, 0, 99, 0);
  two.kernel("relu_kernel", 1500, 50, 0, 98, 1);
  const trace_model tm = two.done();
  const op_trees tt = build_op_tree(tm, rules(rule_set::kinetoscope).tree);
  const gpu_tc_ratio r = tc_ratio_per_gpu_all_kernels(tm, tt, {0, 1, 2});
  CHECK(r.has_kernel);
  REQUIRE(r.ratio.size() == 3);
  CHECK(r.ratio.at(0) == doctest::Approx(0.25));
  CHECK(r.ratio.at(1) == 0.0);
  CHECK(r.ratio.at(2) == 0.0);
  // No kernel with a device: nothing to show.
  model_builder none;
  none.op("aten::mm", 1100, 100, 1);
  const trace_model nm = none.done();
  CHECK_FALSE(tc_ratio_per_gpu_all_kernels(nm, build_op_tree(nm, rules().tree), {0}).has_kernel);
}

TEST_CASE("rules K3: recommendation 6 reads each set's eligible operators") {
  // MmBackward0 (PyTorch 2.x's name) launches an FP32 sgemm (no TC in either classifier) on a
  // tensor-core GPU: only kinetoscope's list makes it eligible, so only it recommends AMP.
  model_builder b;
  b.gpu(16LL << 30, 8, 0);
  b.op("ProfilerStep#1", 1000, 1000);
  b.op("MmBackward0", 1100, 100, 1).runtime(1110, 10, 1, 11).kernel(sgemm, 1300, 300, 1, 11);
  b.op("aten::relu", 1210, 50, 2).runtime(1220, 10, 2, 12).kernel("relu_kernel", 1600, 100, 2, 12);
  const trace_model m = b.done();
  for (rule_set s : both_sets) {
    INFO(rule_set_name(s));
    const bool ours = s == rule_set::kinetoscope;
    const views v(m, s);
    const op_node* n = find_node(v.trees, "MmBackward0");
    REQUIRE(n != nullptr);
    CHECK(n->tc_eligible == ours);
    CHECK(eligible_op_kernel_ratio(v.trees) == doctest::Approx(ours ? 0.75 : 0.0));
    const auto recs = compute_recommendations(m, v.trees, v.overview, v.rules.recommendations);
    const auto amp = std::find_if(recs.begin(), recs.end(), [](const recommendation& r) { return r.rule == 6; });
    if (ours) {
      REQUIRE(amp != recs.end());
      CHECK(amp->text.rfind("Kernels with 75% time are launched by Tensor Cores eligible operators.", 0) == 0);
    } else {
      CHECK(amp == recs.end());
    }
    // The Operator view's column.
    const auto ops = aggregate_operators_by_name(m, v.trees);
    const auto it = std::find_if(ops.begin(), ops.end(), [](const operator_group& g) { return g.name == "MmBackward0"; });
    REQUIRE(it != ops.end());
    CHECK(it->tc_eligible == ours);
  }
}

// ---------------------------------------------------------------------------------------------
// K4 Communication

TEST_CASE("rules K4: collective names of every backend") {
  for (const char* name : {"nccl:all_reduce", "nccl:all_to_all", "nccl:_all_gather_base", "nccl:send", "gloo:barrier",
                           "gloo:all_reduce", "mpi:allreduce", "ucc:alltoall", "xccl:broadcast", "hccl:recv", "nccl:x"}) {
    INFO(name);
    CHECK(is_collective_name(name));
  }
  for (const char* name : {"", "nccl:", "gloo:", "mpi:", "nccl", "NCCL:all_reduce", "Gloo:barrier", "foo:nccl:all_reduce",
                           " nccl:all_reduce", "record_param_comms", "ncclKernel_AllReduce", "c10d::allreduce_",
                           "nccl_all_reduce"}) {
    INFO(name);
    CHECK_FALSE(is_collective_name(name));
  }
  // The plugin's ten names are collectives for both.
  for (const char* name : {"nccl:broadcast", "nccl:reduce", "nccl:all_reduce", "nccl:all_gather", "nccl:reduce_scatter",
                           "gloo:broadcast", "gloo:reduce", "gloo:all_reduce", "gloo:all_gather", "gloo:reduce_scatter"}) {
    INFO(name);
    CHECK(is_plugin_comm_name(name));
    CHECK(is_collective_name(name));
  }
  CHECK_FALSE(is_plugin_comm_name("nccl:all_to_all"));
  CHECK_FALSE(is_plugin_comm_name("gloo:barrier"));

  for (const char* name : {"ncclKernel_AllReduce_RING_LL_Sum_float", "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)",
                           "void ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
                           "void ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                           "rcclKernel_AllReduce"}) {
    INFO(name);
    CHECK(is_collective_kernel_name(name));
  }
  for (const char* name : {"", "my_ncclKernel", "nccl", "NCCLKernel_AllReduce", "void at::native::nccl_kernel()",
                           "ampere_sgemm_128x64_nn"}) {
    INFO(name);
    CHECK_FALSE(is_collective_kernel_name(name));
  }
}

TEST_CASE("rules K4: every collective and NCCL's kernels are communication in the Overview") {
  // Step [1000,2000):
  //   nccl:all_to_all [1100,1150) ext 1, its launch [1110,1120), ncclDevKernel_SendRecv [1200,1400)
  //   an NCCL kernel no host op launched (no runtime) [1500,1600)
  //   gloo:barrier [1700,1750) ext 2 (no kernel)
  //   aten::add [1800,1850) ext 3, its launch [1810,1815), add_kernel [1860,1880)
  model_builder b;
  b.op("ProfilerStep#1", 1000, 1000);
  b.op("nccl:all_to_all", 1100, 50, 1).runtime(1110, 10, 1, 11).kernel("ncclDevKernel_SendRecv", 1200, 200, 1, 11);
  b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1500, 100, 0, 12);
  b.op("gloo:barrier", 1700, 50, 2);
  b.op("aten::add", 1800, 50, 3).runtime(1810, 5, 3, 13).kernel("add_kernel", 1860, 20, 3, 13);
  const trace_model m = b.done();

  const views plugin(m, rule_set::plugin);
  REQUIRE(plugin.overview.steps.size() == 1);
  const step_row& p = plugin.overview.steps[0];
  CHECK(p.total == 1000);
  CHECK(p.kernel == 320);        // 200 + 100 + 20: the plugin knows none of these names
  CHECK(p.communication == 0);
  CHECK(p.runtime == 15);
  CHECK(p.cpu_exec == 135);      // all_to_all 50 − 10, barrier 50, add 50 − 5
  CHECK(p.other == 530);
  CHECK_FALSE(plugin.overview.has_communication);

  const views ours(m, rule_set::kinetoscope);
  REQUIRE(ours.overview.steps.size() == 1);
  const step_row& k = ours.overview.steps[0];
  CHECK(k.total == 1000);
  CHECK(k.kernel == 20);
  CHECK(k.communication == 400);  // all_to_all op 50 (its launch inside) + 200 + 100 + barrier 50
  CHECK(k.runtime == 5);
  CHECK(k.cpu_exec == 45);
  CHECK(k.other == 530);
  CHECK(ours.overview.has_communication);
  CHECK(ours.overview.shows(step_role::communication));

  // Only the host op's kernel is excluded from the Kernel view's "has kernel" test; the orphan
  // NCCL kernel and add_kernel still make the view.
  CHECK(plugin.trees.has_kernel);
  CHECK(ours.trees.has_kernel);
}

TEST_CASE("rules K4: a trace whose only kernels are launched by a newer collective has no Kernel view under kinetoscope's rules") {
  model_builder b;
  b.op("ProfilerStep#1", 1000, 1000);
  b.op("nccl:all_to_all", 1100, 50, 1).runtime(1110, 10, 1, 11).kernel("ncclDevKernel_SendRecv", 1200, 200, 1, 11);
  b.op("nccl:_allgather_base", 1300, 50, 2).runtime(1310, 10, 2, 12).kernel("ncclDevKernel_AllGather_RING_LL", 1400, 100, 2, 12);
  const trace_model m = b.done();
  const op_trees plugin = build_op_tree(m, rules(rule_set::plugin).tree);
  CHECK(plugin.has_kernel);  // the plugin knows neither name: computation kernels
  CHECK(kernel_view_present(m, plugin));
  const op_trees ours = build_op_tree(m, rules(rule_set::kinetoscope).tree);
  CHECK_FALSE(ours.has_kernel);
  CHECK_FALSE(kernel_view_present(m, ours));
  CHECK(ours.has_any_kernel);
  // The same trace with the plugin's nccl:all_reduce: no Kernel view under either set.
  model_builder c;
  c.op("ProfilerStep#1", 1000, 1000);
  c.op("nccl:all_reduce", 1100, 50, 1).runtime(1110, 10, 1, 11).kernel("ncclDevKernel_AllReduce", 1200, 200, 1, 11);
  const trace_model cm = c.done();
  for (rule_set s : both_sets) CHECK_FALSE(build_op_tree(cm, rules(s).tree).has_kernel);
}

TEST_CASE("rules K4: Distributed records, the newer collectives and those outside every step") {
  // Steps "1" [1000,2000) and "2" [2000,3000):
  //   nccl:all_reduce [1100,1200) ext 1, kernel [1250,1300)      step 1
  //   nccl:all_to_all [1300,1400) ext 2, kernel [1450,1550)      step 1, kinetoscope only
  //   nccl:all_reduce [2100,2200) ext 3                          step 2
  //   nccl:all_reduce [3100,3200) ext 4                          after the last step
  //   nccl:all_reduce [500,600)   ext 5                          before the first step
  model_builder b;
  b.op("nccl:all_reduce", 500, 100, 5);
  b.op("nccl:all_reduce", 1100, 100, 1).runtime(1110, 10, 1, 11).kernel("ncclDevKernel_AllReduce", 1250, 50, 1, 11);
  b.op("nccl:all_to_all", 1300, 100, 2).runtime(1310, 10, 2, 12).kernel("ncclDevKernel_SendRecv", 1450, 100, 2, 12);
  b.op("nccl:all_reduce", 2100, 100, 3);
  b.op("nccl:all_reduce", 3100, 100, 4);
  const trace_model m = b.done();
  const std::vector<distributed_step> steps = {{"1", 1000, 2000}, {"2", 2000, 3000}};

  const auto p = communication_records(m, steps, rules(rule_set::plugin).distributed);
  REQUIRE(p.size() == 4);
  CHECK(p[0].external_id == 5);
  CHECK_FALSE(p[0].step.has_value());
  CHECK(p[1].external_id == 1);
  CHECK(p[1].step == "1");
  REQUIRE(p[1].ranges.size() == 2);  // the op, then its kernel
  CHECK(p[1].ranges[1] == interval{1250, 1300});
  CHECK(p[2].external_id == 3);
  CHECK(p[2].step == "2");
  CHECK(p[3].external_id == 4);
  CHECK_FALSE(p[3].step.has_value());

  const auto k = communication_records(m, steps, rules(rule_set::kinetoscope).distributed);
  REQUIRE(k.size() == 5);
  std::vector<std::int64_t> ids;
  for (const comm_record& r : k) ids.push_back(r.external_id);
  CHECK(ids == std::vector<std::int64_t>{5, 1, 2, 3, 4});
  CHECK(k[0].step == "outside steps");
  CHECK(k[1].step == "1");
  CHECK(k[2].name == "nccl:all_to_all");
  CHECK(k[2].step == "1");
  REQUIRE(k[2].ranges.size() == 2);
  CHECK(k[2].ranges[1] == interval{1450, 1550});
  CHECK(k[3].step == "2");
  CHECK(k[4].step == "outside steps");

  // The panels of one worker: the plugin's wait bars are keyed by the steps and null, ours by
  // the steps and "outside steps"; the op table lists all_to_all only under ours.
  for (rule_set s : both_sets) {
    INFO(rule_set_name(s));
    const bool ours = s == rule_set::kinetoscope;
    const distributed_result d =
        compute_distributed({{"worker_0", &m, {0}, steps}}, rules(s).distributed);
    REQUIRE(d.available);
    REQUIRE(d.workers.size() == 1);
    const distributed_worker_result& w = d.workers[0];
    std::vector<std::optional<std::string>> keys;
    for (const auto& [step, bar] : w.wait) keys.push_back(step);
    if (ours) {
      CHECK(keys == std::vector<std::optional<std::string>>{"outside steps", "1", "2"});
    } else {
      CHECK(keys == std::vector<std::optional<std::string>>{std::nullopt, "1", "2"});
    }
    std::vector<std::string> ops;
    for (const comm_op_row& r : w.comm_ops) ops.push_back(r.name);
    if (ours) {
      CHECK(ops == std::vector<std::string>{"nccl:all_reduce", "nccl:all_to_all"});
    } else {
      CHECK(ops == std::vector<std::string>{"nccl:all_reduce"});
    }
    CHECK(w.comm_ops[0].calls == 4);
  }
}

TEST_CASE("rules K1/K4: the GPU copy of a collective's annotation replaces its record for the plugin only") {
  // Host nccl:all_reduce [1100,1200) ext 1 launching a kernel [1260,1290); Kineto's GPU copy of
  // the annotation [1250,1300) shares its External id, so the plugin's record (keyed by the id)
  // takes the later, GPU-side interval (Q4). Kinetoscope ignores GPU annotations.
  model_builder b;
  b.op("nccl:all_reduce", 1100, 100, 1).runtime(1110, 10, 1, 11).kernel("ncclDevKernel_AllReduce", 1260, 30, 1, 11);
  b.gpu_annotation("nccl:all_reduce", 1250, 50, 1);
  const trace_model m = b.done();
  const std::vector<distributed_step> steps = {{"1", 1000, 2000}};
  const auto p = communication_records(m, steps, rules(rule_set::plugin).distributed);
  REQUIRE(p.size() == 1);
  CHECK(p[0].start == 1250);
  CHECK(p[0].end == 1300);
  CHECK(p[0].ranges == std::vector<interval>{{1250, 1300}, {1260, 1290}});
  const auto k = communication_records(m, steps, rules(rule_set::kinetoscope).distributed);
  REQUIRE(k.size() == 1);
  CHECK(k[0].start == 1100);
  CHECK(k[0].end == 1200);
  CHECK(k[0].ranges == std::vector<interval>{{1100, 1200}, {1260, 1290}});
  CHECK(k[0].step == "1");
}

// ---------------------------------------------------------------------------------------------
// K5 Memory

TEST_CASE("rules K5: memory totals are rebuilt from the bytes when a device's records have none") {
  // CPU records without "Total Allocated": +100 @10, +50 @20, −100 @30 (frees the first), +200 @40.
  // GPU0 records with totals (kept as they are under both sets): 1000 @15, 600 @35.
  // The first event is aten::empty at 5, so curve times are relative to 5.
  model_builder b;
  b.op("aten::empty", 5, 50, 1);
  b.memory(10, 0, -1, 0x100, 100);
  b.memory(15, 1, 0, 0x900, 1000, 1000, 2048);
  b.memory(20, 0, -1, 0x200, 50);
  b.memory(30, 0, -1, 0x100, -100);
  b.memory(35, 1, 0, 0x900, -400, 600, 2048);
  b.memory(40, 0, -1, 0x300, 200);
  const trace_model m = b.done();

  using point = std::array<double, 3>;
  const std::vector<point> gpu_curve = {{10, 1000, 2048}, {30, 1000, 2048}, {30, 600, 2048}};
  for (rule_set s : both_sets) {
    INFO(rule_set_name(s));
    const bool ours = s == rule_set::kinetoscope;
    const op_trees t = build_op_tree(m, rules(s).tree);
    const memory_result r = compute_memory(m, t);
    REQUIRE(r.present);
    CHECK(r.first_ts == 5);
    const memory_device* cpu = r.device("CPU");
    const memory_device* gpu0 = r.device("GPU0");
    REQUIRE(cpu != nullptr);
    REQUIRE(gpu0 != nullptr);
    CHECK(gpu0->curve == gpu_curve);
    CHECK(gpu0->peak_allocated_bytes == 1000);
    CHECK(gpu0->peak_reserved_bytes == 2048);
    if (ours) {
      // Running sum 100, 150, 50, 250; reserved unknown, drawn equal to allocated.
      const std::vector<point> want = {{5, 100, 100},  {15, 100, 100}, {15, 150, 150}, {25, 150, 150},
                                       {25, 50, 50},   {35, 50, 50},   {35, 250, 250}};
      CHECK(cpu->curve == want);
      CHECK(cpu->peak_allocated_bytes == 250);
      CHECK(cpu->peak_reserved_bytes == 250);
      CHECK(cpu->peak_time_us == 35.0);
      CHECK(r.counts.rebuilt_total_devices == 1);
    } else {
      CHECK(cpu->curve.empty());
      CHECK(cpu->peak_allocated_bytes == 0);
      CHECK_FALSE(cpu->peak_time_us.has_value());
      CHECK(r.counts.rebuilt_total_devices == 0);
    }
    // The events table does not depend on the totals.
    CHECK(cpu->events.size() == 3);
    // The index the server keeps gives the same curve.
    const memory_index index = build_memory_index(m, t);
    const memory_result ranged = compute_memory_range(index, m, t, {-std::numeric_limits<double>::infinity(),
                                                                    std::numeric_limits<double>::infinity()});
    const memory_device* icpu = ranged.device("CPU");
    REQUIRE(icpu != nullptr);
    CHECK(icpu->curve == cpu->curve);
    CHECK(icpu->peak_allocated_bytes == cpu->peak_allocated_bytes);
    CHECK(ranged.counts.rebuilt_total_devices == r.counts.rebuilt_total_devices);
  }
}

TEST_CASE("rules K5: a device with some totals is not rebuilt") {
  // GPU1: the first record has no total, the second has one: the device has totals, so nothing
  // is rebuilt and the record without a total stays off the curve, under both sets.
  model_builder b;
  b.op("aten::empty", 5, 50, 1);
  b.memory(10, 1, 1, 0x100, 100);
  b.memory(20, 1, 1, 0x200, 50, 150, 4096);
  const trace_model m = b.done();
  for (rule_set s : both_sets) {
    INFO(rule_set_name(s));
    const memory_result r = compute_memory(m, build_op_tree(m, rules(s).tree));
    const memory_device* gpu1 = r.device("GPU1");
    REQUIRE(gpu1 != nullptr);
    CHECK(gpu1->curve == std::vector<std::array<double, 3>>{{15, 150, 4096}});
    CHECK(gpu1->peak_allocated_bytes == 150);
    CHECK(r.counts.rebuilt_total_devices == 0);
  }
}

// ---------------------------------------------------------------------------------------------
// K6 Recommendations

namespace {

/// Step [1000, 1000 + 10·n + 100): n aten::add, each launched by an 8 µs runtime; its kernel
/// lasts `kernel_us` (no longer than the launch: a "short" kernel).
trace_model launch_bound(int n, double kernel_us) {
  model_builder b;
  b.gpu(16LL << 30, 8, 0);
  b.op("ProfilerStep#1", 1000, 10.0 * n + 100);
  for (int i = 0; i < n; ++i) {
    const double t = 1010 + 10.0 * i;
    const std::int64_t id = 100 + i;
    b.op("aten::add", t, 9, id).runtime(t + 0.5, 8, id, id).kernel("add_kernel", t + 5, kernel_us, id, id);
  }
  return b.done();
}

std::size_t short_launch_items(const std::vector<recommendation>& recs, int n) {
  const std::string prefix = std::to_string(n) + " of " + std::to_string(n) + " kernels (100.0%) run no longer than";
  return static_cast<std::size_t>(std::count_if(recs.begin(), recs.end(), [&](const recommendation& r) {
    return r.kind == recommendation_kind::launch_overhead && r.text.rfind(prefix, 0) == 0;
  }));
}

}  // namespace

TEST_CASE("rules K6: short launches are a finding only when a GPU is mostly idle under kinetoscope's rules") {
  const int n = 100;
  // Busy: 8 µs kernels every 10 µs over a 1100 µs step: utilization 800 / 1100 ≈ 0.727.
  // Idle: 2 µs kernels: 200 / 1100 ≈ 0.18.
  for (const double kernel_us : {8.0, 2.0}) {
    const trace_model m = launch_bound(n, kernel_us);
    for (rule_set s : both_sets) {
      INFO(rule_set_name(s) << ", kernels of " << kernel_us << " us");
      const views v(m, s);
      REQUIRE(v.overview.gpus.size() == 1);
      CHECK(v.overview.gpus[0].utilization == doctest::Approx(kernel_us * n / (10.0 * n + 100)));
      const auto recs = compute_recommendations(m, v.trees, v.overview, v.rules.recommendations);
      const bool busy = kernel_us == 8.0;
      const bool expected = !(s == rule_set::kinetoscope && busy);
      CHECK(short_launch_items(recs, n) == (expected ? 1u : 0u));
    }
  }
  // The threshold is "every GPU at 0.5 or more": exactly 0.5 is busy.
  const trace_model m = launch_bound(n, 2.0);
  const views v(m, rule_set::kinetoscope);
  overview_result ov = v.overview;
  ov.gpus[0].utilization = 0.5;
  CHECK(short_launch_items(compute_recommendations(m, v.trees, ov, v.rules.recommendations), n) == 0);
  ov.gpus[0].utilization = 0.4999;
  CHECK(short_launch_items(compute_recommendations(m, v.trees, ov, v.rules.recommendations), n) == 1);
  // Two GPUs, one idle: the finding stands.
  gpu_summary_row idle = ov.gpus[0];
  idle.id = 1;
  idle.utilization = 0.1;
  ov.gpus[0].utilization = 0.9;
  ov.gpus.push_back(idle);
  CHECK(short_launch_items(compute_recommendations(m, v.trees, ov, v.rules.recommendations), n) == 1);
  // No GPU summary at all: nothing says the GPU is busy.
  ov.gpus.clear();
  CHECK(short_launch_items(compute_recommendations(m, v.trees, ov, v.rules.recommendations), n) == 1);
}

TEST_CASE("rules K6: device memory at the limit, each GPU against its own capacity") {
  // GPU0 16 GiB peaks at 50 %; GPU1 8 GiB peaks at 95 %; the CPU peaks at 15 GiB, 187.5 % of
  // GPU1's 8 GiB: the plugin compares the CPU's records (first seen) with deviceProperties[-1],
  // the last GPU (Q12), and names that one only. Kinetoscope: GPUs only, each its own capacity.
  const double gib = static_cast<double>(1LL << 30);
  model_builder b;
  b.gpu(16LL << 30, 8, 0).gpu(8LL << 30, 8, 0);
  b.memory(10, 0, -1, 0x1, 1, 15 * gib);
  b.memory(20, 1, 0, 0x2, 1, 8 * gib);
  b.memory(30, 1, 1, 0x3, 1, 0.95 * 8 * gib);
  const trace_model m = b.done();
  overview_result ov;
  ov.average.total = 100;
  for (rule_set s : both_sets) {
    INFO(rule_set_name(s));
    const views v(m, s);
    recommendation_options o = v.rules.recommendations;
    o.extras = false;
    const auto recs = compute_recommendations(m, v.trees, ov, o);
    REQUIRE(recs.size() == 1);
    CHECK(recs[0].rule == 7);
    if (s == rule_set::kinetoscope) {
      CHECK(recs[0].text.rfind("Device memory usage is at the limit of device memory capacity (95.0% of 8.0GB on GPU1).", 0) == 0);
      CHECK(recs[0].target.device == 1);
    } else {
      CHECK(recs[0].text.rfind("Device memory usage is at the limit of device memory capacity (187.5% of 8.0GB on GPU-1).", 0) == 0);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The committed PyTorch 2.11 traces from an H200 (tests/data/gpu/README.md)

namespace {

std::filesystem::path modern_traces() {
  const char* d = std::getenv("KINETOSCOPE_TEST_DATA");
  REQUIRE_MESSAGE(d != nullptr, "KINETOSCOPE_TEST_DATA not set (meson test sets it)");
  const std::filesystem::path p = std::filesystem::path(d) / "gpu" / "pytorch-2.11-h200";
  REQUIRE(std::filesystem::is_directory(p));
  return p;
}

/// The one trace file of a run folder (the first rank's for ddp_gloo).
std::filesystem::path trace_of(const std::string& run) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(modern_traces() / run))
    if (e.path().filename().string().find(".pt.trace.json") != std::string::npos) files.push_back(e.path());
  REQUIRE_FALSE(files.empty());
  std::sort(files.begin(), files.end());
  return files.front();
}

trace_model load_model(const std::filesystem::path& p) {
  load_result r = load_trace(p.string());
  REQUIRE_MESSAGE(r.ok(), p.string());
  return std::move(*r.model);
}

}  // namespace

TEST_CASE("rules on the PyTorch 2.11 traces: the Kernel view's operator table and the tensor-core shares") {
  for (const std::string run : {"resnet18", "ddp_gloo", "transformer_bf16_fp8", "compiled", "nccl_1rank"}) {
    CAPTURE(run);
    const trace_model m = load_model(trace_of(run));
    // Independently of the engine's tables: the kernel time of the trace, and that of the
    // kernels kinetoscope's classifier calls tensor-core kernels.
    double kernel_us = 0, tc_us = 0;
    for (const event& e : m.events) {
      if (e.type != event_type::kernel) continue;
      kernel_us += e.dur;
      if (kernel_uses_tensor_cores(m.str(e.name))) tc_us += e.dur;
    }
    REQUIRE(kernel_us > 0);
    for (rule_set s : both_sets) {
      CAPTURE(rule_set_name(s));
      const bool ours = s == rule_set::kinetoscope;
      const views v(m, s);
      const auto by_name = kernels_by_name(m, v.trees);
      const auto by_op = kernels_by_name_and_operator(m, v.trees);
      CHECK(raw_total_of(by_name) == doctest::Approx(kernel_us));
      if (ours) {
        CHECK(count_operator(by_op, "CallTreeRoot") == 0);
        CHECK(total_of(by_op) == doctest::Approx(kernel_us));  // every kernel once
        // One GPU: the GPU summary's share is the Kernel view's pie.
        REQUIRE(v.overview.gpus.size() == 1);
        REQUIRE(v.overview.gpus[0].tensor_cores.has_value());
        CHECK(*v.overview.gpus[0].tensor_cores == doctest::Approx(tc_us / kernel_us));
        CHECK(tc_kernel_ratio(m, v.trees) == doctest::Approx(tc_us / kernel_us));
      } else {
        CHECK(count_operator(by_op, no_operator_name) == 0);
      }
    }
  }
}

TEST_CASE("rules on the PyTorch 2.11 traces: the evidence of docs/kinetoscope-rules.md") {
  SUBCASE("K1 resnet18: the GPU copy of a step makes a third step for the plugin") {
    const trace_model m = load_model(trace_of("resnet18"));
    const views plugin(m, rule_set::plugin);
    const views ours(m, rule_set::kinetoscope);
    CHECK(plugin.overview.steps.size() == 3);
    CHECK(ours.overview.steps.size() == 2);
    // "the average step time falls from 27.7 to 18.5 ms"
    CHECK(std::round(plugin.overview.average.total / 100) == 185);
    CHECK(std::round(ours.overview.average.total / 100) == 277);
  }
  SUBCASE("K2 compiled and transformer: every kernel launched through cuLaunchKernel is stale for the plugin only") {
    for (const std::string run : {"compiled", "transformer_bf16_fp8"}) {
      CAPTURE(run);
      const trace_model m = load_model(trace_of(run));
      // Kernels whose correlation id is a cuda_driver call's and no runtime call's.
      std::set<std::int64_t> runtime_corr, driver_corr;
      for (const event& e : m.events) {
        if (e.type == event_type::runtime) runtime_corr.insert(e.correlation);
        if (e.type == event_type::driver) driver_corr.insert(e.correlation);
      }
      std::uint64_t driver_kernels = 0;
      for (const event& e : m.events)
        if (e.type == event_type::kernel && runtime_corr.count(e.correlation) == 0 && driver_corr.count(e.correlation) != 0)
          ++driver_kernels;
      REQUIRE(driver_kernels > 0);
      CHECK(build_op_tree(m, rules(rule_set::plugin).tree).stats.stale_kernels == driver_kernels);
      CHECK(build_op_tree(m, rules(rule_set::kinetoscope).tree).stats.stale_kernels == 0);
    }
  }
  SUBCASE("K3 transformer: the FP8 GEMM and FlashAttention use tensor cores for kinetoscope only") {
    const trace_model m = load_model(trace_of("transformer_bf16_fp8"));
    for (rule_set s : both_sets) {
      CAPTURE(rule_set_name(s));
      const bool ours = s == rule_set::kinetoscope;
      const views v(m, s);
      bool fp8 = false, flash_fwd = false;
      for (const kernel_row& k : kernels_by_name(m, v.trees)) {
        if (k.name.rfind("nvjet_sm90_qq", 0) == 0) {
          fp8 = true;
          CHECK(k.tensor_cores_used == ours);
        }
        if (k.name.find("pytorch_flash::flash_fwd_kernel") != std::string::npos) {
          flash_fwd = true;
          CHECK(k.tensor_cores_used == ours);
        }
        if (!ours) CHECK_FALSE(k.tensor_cores_used);  // none of the plugin's 18 substrings occurs
      }
      CHECK(fp8);
      CHECK(flash_fwd);
      REQUIRE(v.overview.gpus.size() == 1);
      REQUIRE(v.overview.gpus[0].tensor_cores_pct.has_value());
      if (ours) {
        CHECK(*v.overview.gpus[0].tensor_cores_pct > 0);
      } else {
        CHECK(*v.overview.gpus[0].tensor_cores_pct == 0.0);
      }
      const op_node* scaled_mm = find_node(v.trees, "aten::_scaled_mm");
      REQUIRE(scaled_mm != nullptr);
      CHECK(scaled_mm->tc_eligible_allow_list == ours);
    }
  }
  SUBCASE("K4 nccl_1rank: the collectives the plugin does not know") {
    const trace_model m = load_model(trace_of("nccl_1rank"));
    for (rule_set s : both_sets) {
      CAPTURE(rule_set_name(s));
      const bool ours = s == rule_set::kinetoscope;
      const views v(m, s);
      std::map<std::string, int> names;
      for (const comm_record& r : communication_records(m, distributed_steps(v.overview), v.rules.distributed)) {
        ++names[r.name];
        CHECK(r.step.has_value());  // every collective of this trace is inside a step
      }
      std::map<std::string, int> want = {{"nccl:all_reduce", 2}, {"nccl:broadcast", 2}};
      if (ours) {
        for (const char* n : {"nccl:_all_gather_base", "nccl:_reduce_scatter_base", "nccl:all_to_all", "nccl:allreduce_coalesced"})
          want[n] = 2;
      }
      CHECK(names == want);
    }
    CHECK(views(m, rule_set::kinetoscope).overview.average.communication >
          views(m, rule_set::plugin).overview.average.communication);
  }
}

TEST_CASE("rules K2: a runtime that only a step contains is no step's kernel under kinetoscope's rules") {
  // ProfilerStep#1 [1000,2000); a launch with External id 99 (no operator has it) at [1700,1710),
  // inside the step but inside no operator; its kernel [1750,1790). The time-containment
  // fallback must not make the step its launcher (found on ../shared/traces/diff_base, where a
  // CUDAFunctor_add kernel was listed under "ProfilerStep#1009").
  model_builder b;
  b.op("ProfilerStep#1", 1000, 1000, 5).op("aten::mul", 1100, 100, 1).runtime(1110, 10, 1, 11);
  b.kernel("mul_kernel", 1300, 10, 1, 11);
  b.runtime(1700, 10, 99, 13).kernel("loose_kernel", 1750, 40, 99, 13);
  // A launch carrying the step's own External id (a sync or copy issued between operators):
  // attached to the step by id.
  b.runtime(1800, 10, 5, 14).kernel("step_kernel", 1850, 30, 5, 14);
  const trace_model m = b.done();

  const op_trees plugin = build_op_tree(m, rules(rule_set::plugin).tree);
  const auto p = kernels_by_name_and_operator(m, plugin);
  CHECK(find_row(p, "loose_kernel") == nullptr);  // the plugin drops it
  REQUIRE(find_row(p, "step_kernel") != nullptr);
  CHECK(find_row(p, "step_kernel")->operator_name == "ProfilerStep#1");

  const op_trees ours = build_op_tree(m, rules(rule_set::kinetoscope).tree);
  const auto k = kernels_by_name_and_operator(m, ours);
  REQUIRE(find_row(k, "loose_kernel") != nullptr);
  CHECK(find_row(k, "loose_kernel")->operator_name == "(no operator)");
  REQUIRE(find_row(k, "step_kernel") != nullptr);
  CHECK(find_row(k, "step_kernel")->operator_name == "(no operator)");
  CHECK(find_row(k, "mul_kernel")->operator_name == "aten::mul");
  CHECK(total_of(k) == 80);  // 10 + 40 + 30: every kernel once
}

TEST_CASE("rules K4: a trace whose only kernel is NCCL's, with no host op, has no Kernel view under kinetoscope's rules") {
  model_builder b;
  b.op("ProfilerStep#1", 1000, 1000).runtime(1100, 10, 0, 21);
  b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 1200, 300, 0, 21);
  const trace_model m = b.done();
  CHECK(kernel_view_present(m, build_op_tree(m, rules(rule_set::plugin).tree)));
  CHECK_FALSE(kernel_view_present(m, build_op_tree(m, rules(rule_set::kinetoscope).tree)));
}

TEST_CASE("rules K5/K6: recommendation 7 reads the rebuilt totals under kinetoscope's rules only") {
  // GPU0 of 1000 bytes: +500 then +450 with no "Total Allocated": a rebuilt peak of 950 (95 %).
  model_builder b;
  b.gpu(1000, 9, 0);
  b.memory(10, 1, 0, 0x100, 500).memory(20, 1, 0, 0x200, 450);
  const trace_model m = b.done();
  const overview_result ov;
  for (rule_set s : both_sets) {
    INFO(rule_set_name(s));
    recommendation_options o = rules(s).recommendations;
    o.extras = false;
    const auto recs = compute_recommendations(m, build_op_tree(m, rules(s).tree), ov, o);
    if (s == rule_set::plugin) {
      CHECK(recs.empty());
    } else {
      REQUIRE(recs.size() == 1);
      CHECK(recs[0].text.rfind("Device memory usage is at the limit of device memory capacity (95.0% of 0.0GB on GPU0)", 0) == 0);
    }
  }
}
