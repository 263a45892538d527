// SPDX-License-Identifier: BSD-3-Clause
// Tests of the Overview (docs/plugin-rules.md#overview), the GPU counters (#gpu-counters), the
// recommendations (plugin-rules.md#recommendations) and py_round (#number-formatting): hand-built
// traces with worked examples from the plugin's own tests, then every golden file of
// $KINETOSCOPE_REAL_TRACES/expected against torch-tb-profiler's numbers.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/loader.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/overview.hpp"
#include "analysis/recommendations.hpp"
#include "kinetoscope/formats/py_number.hpp"
#include "../real_traces.hpp"

using namespace kinetoscope::analysis;
using kinetoscope::formats::py_float_repr;
using kinetoscope::formats::py_round;

namespace {

/// Builds a trace_model by hand, the way the loader fills it.
struct model_builder {
  trace_model m;

  event& add(event_type type, std::string_view name, double ts, double dur, std::int64_t pid = 1,
             std::int64_t tid = 1, std::int64_t external_id = 0, std::int64_t correlation = 0) {
    event e;
    e.type = type;
    e.name = m.intern(name);
    e.ts = ts;
    e.dur = dur;
    e.pid = pid;
    e.tid = tid;
    e.external_id = external_id;
    e.correlation = correlation;
    if (type == event_type::op || type == event_type::user_annotation || type == event_type::python) {
      e.extra = static_cast<std::uint32_t>(m.ops.size());
      m.ops.push_back({});
    }
    m.events.push_back(e);
    return m.events.back();
  }
  void op(std::string_view name, double ts, double dur, std::int64_t ext = 0) {
    add(event_type::op, name, ts, dur, 1, 1, ext);
  }
  void runtime(double ts, double dur, std::int64_t ext, std::int64_t corr) {
    add(event_type::runtime, "cudaLaunchKernel", ts, dur, 1, 1, ext, corr);
  }
  void kernel(std::string_view name, double ts, double dur, std::int64_t ext, std::int64_t corr,
              std::int64_t device = 0, double blocks_per_sm = -1, double occupancy = -1) {
    event& e = add(event_type::kernel, name, ts, dur, device, 7, ext, corr);
    kernel_args k;
    k.device = device;
    if (blocks_per_sm >= 0) {
      k.blocks_per_sm = blocks_per_sm;
      k.has_blocks_per_sm = true;
    }
    if (occupancy >= 0) {
      k.occupancy = occupancy;
      k.has_occupancy = true;
    }
    e.extra = static_cast<std::uint32_t>(m.kernels.size());
    m.kernels.push_back(k);
  }
  void device_op(event_type type, double ts, double dur, std::int64_t ext, std::int64_t corr) {
    add(type, type == event_type::memcpy ? "Memcpy HtoD" : "Memset", ts, dur, 0, 7, ext, corr);
  }
  void memory(double ts, std::int64_t device_type, std::int64_t device_id, double total_allocated) {
    event& e = add(event_type::memory, "[memory]", ts, 0);
    memory_args a;
    a.device_type = device_type;
    a.device_id = device_id;
    a.total_allocated = total_allocated;
    e.extra = static_cast<std::uint32_t>(m.memory.size());
    m.memory.push_back(a);
  }
  void gpu(std::string_view name, std::int64_t mem, std::int64_t major, std::int64_t minor) {
    device_info d;
    d.present = true;
    d.name = name;
    d.has_name = true;
    d.total_global_mem = mem;
    d.has_total_global_mem = true;
    d.compute_major = major;
    d.has_compute_major = true;
    d.compute_minor = minor;
    d.has_compute_minor = true;
    m.devices.push_back(d);
  }
  trace_model done() {
    std::stable_sort(m.events.begin(), m.events.end(), [](const event& a, const event& b) { return a.ts < b.ts; });
    return std::move(m);
  }
};

bool close_time(double actual, double expected) {
  return std::abs(actual - expected) <= std::max(1.0, 0.001 * std::abs(expected));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// py_round

TEST_CASE("overview: py_round is Python 3 round on binary doubles") {
  CHECK(py_round(2.5) == 2.0);
  CHECK(py_round(3.5) == 4.0);
  CHECK(py_round(-2.5) == -2.0);
  CHECK(py_round(0.5) == 0.0);
  CHECK(py_round(1.5) == 2.0);
  CHECK(py_round(177591.6) == 177592.0);
  CHECK(py_round(2.675, 2) == 2.67);      // 2.675 is 2.67499999… in binary
  CHECK(py_round(0.125, 2) == 0.12);      // exact tie → even
  CHECK(py_round(0.375, 2) == 0.38);      // exact tie → even
  CHECK(py_round(55.5149, 2) == 55.51);
  CHECK(py_round(1.005, 2) == 1.0);       // 1.00499999…
  CHECK(py_round(0.285, 2) == 0.28);      // 0.284999…
  CHECK(py_round(100.0 * 0.5551234, 2) == 55.51);
  CHECK(py_round(7.0, 2) == 7.0);
  CHECK(std::isnan(py_round(std::nan(""), 2)));
  CHECK(format_1f(33.35) == "33.4");      // 33.35000000000000142…
  CHECK(format_1f(0.25) == "0.2");        // exact tie → even
  CHECK(format_1f(85.14999) == "85.1");
  CHECK(py_float_repr(0.0) == "0.0");
  CHECK(py_float_repr(55.51) == "55.51");
  CHECK(py_float_repr(100.0) == "100.0");
  CHECK(py_float_repr(-0.5) == "-0.5");
  CHECK(py_float_repr(0.1 + 0.2) == "0.30000000000000004");
  CHECK(py_float_repr(9.5367431640625e-07) == "9.5367431640625e-07");
  CHECK(py_float_repr(1e16) == "1e+16");
  CHECK(py_float_repr(123456789.0) == "123456789.0");
}

// ---------------------------------------------------------------------------------------------
// Step extension (plugin-rules.md#step-extension)

TEST_CASE("overview: extend_steps reproduces the plugin's worked example") {
  // Host steps [100,300) and [350,500); kernel [150,240) launched before profiling; step 1
  // launches a memcpy [280,380); step 2 a kernel [410,610).
  const std::vector<interval> host = {{100, 300}, {350, 500}};
  const std::uint32_t d0[] = {0}, d1[] = {1}, d2[] = {2};  // indexes into `all`
  launch before{40, 50, d0};
  launch l1{200, 210, d1};
  launch l2{400, 405, d2};
  const std::vector<std::pair<std::uint32_t, interval>> all = {{0, {150, 240}}, {1, {280, 380}}, {2, {410, 610}}};
  const extended_steps ext = extend_steps(host, {&l2, &before, &l1}, all);
  REQUIRE(ext.matched);
  REQUIRE(ext.steps.size() == 2);
  CHECK(ext.steps[0] == interval{240, 380});
  CHECK(ext.steps[1] == interval{380, 610});
  CHECK(ext.device_count == std::vector<std::int64_t>{1, 1});
}

TEST_CASE("overview: extend_steps skips straddling runtimes and keeps steps without device work") {
  const std::vector<interval> host = {{100, 200}, {200, 300}};
  const std::uint32_t d0[] = {0}, d1[] = {1};
  launch straddle{190, 210, d0};  // starts inside step 1, ends after it
  const extended_steps none = extend_steps(host, {&straddle}, {{0, {400, 450}}});
  CHECK_FALSE(none.matched);
  CHECK(none.steps == host);

  launch inside{120, 130, d1};
  const extended_steps ext = extend_steps(host, {&inside, &straddle}, {{0, {400, 450}}, {1, {140, 260}}});
  REQUIRE(ext.matched);
  CHECK(ext.steps[0] == interval{100, 260});
  CHECK(ext.steps[1] == interval{260, 300});  // no device work: start pushed, end kept
  CHECK(ext.device_count == std::vector<std::int64_t>{1, 0});
}

TEST_CASE("overview: step extension end to end through the operator tree") {
  model_builder b;
  b.op("ProfilerStep#1", 100, 200);
  b.op("ProfilerStep#2", 350, 150);
  b.op("aten::copy_", 110, 100, 11);
  b.runtime(120, 10, 11, 501);
  b.device_op(event_type::memcpy, 280, 100, 11, 501);
  b.op("aten::relu", 360, 100, 12);
  b.runtime(370, 10, 12, 502);
  b.kernel("relu_kernel", 410, 200, 12, 502);
  b.kernel("early_kernel", 150, 90, 0, 499);  // launched before profiling: no runtime
  const trace_model m = b.done();
  const op_trees trees = build_op_tree(m);
  const overview_result ov = compute_overview(m, trees);
  REQUIRE(ov.steps.size() == 2);
  CHECK(ov.steps_extended);
  CHECK(ov.steps[0].name == "1");
  CHECK(ov.steps[1].name == "2");
  CHECK(ov.steps[0].start == 240);
  CHECK(ov.steps[0].end == 380);
  CHECK(ov.steps[1].start == 380);
  CHECK(ov.steps[1].end == 610);
  CHECK(ov.steps[0].total == 140);
  CHECK(ov.steps[1].total == 230);
  CHECK(ov.steps_start == 240);
  CHECK(ov.steps_end == 610);
  CHECK(ov.steps[1].kernel == 200);
  CHECK(ov.steps[0].memcpy == 100);
  // Roles add up to the step duration.
  for (const step_row& s : ov.steps) {
    double sum = 0;
    for (std::size_t r = 0; r < step_role_count; ++r) sum += s.value(static_cast<step_role>(r));
    CHECK(sum == doctest::Approx(s.total));
  }
}

// ---------------------------------------------------------------------------------------------
// Tail steps (plugin-rules.md#tail-steps)

TEST_CASE("overview: steps_to_keep drops incomplete tail steps") {
  CHECK(steps_to_keep({}) == 0);
  CHECK(steps_to_keep({5}) == 1);
  CHECK(steps_to_keep({10, 10, 0}) == 2);   // last step launched nothing
  CHECK(steps_to_keep({10, 5}) == 1);       // 0.8·10 > 5: the last one is incomplete
  CHECK(steps_to_keep({10, 8}) == 2);       // 0.8·10 = 8 is not > 8
  CHECK(steps_to_keep({10, 9, 0, 0}) == 2);
  CHECK(steps_to_keep({10, 2, 0}) == 1);
  CHECK(steps_to_keep({0, 0, 0}) == 3);     // nothing matched anywhere: keep all
  CHECK(steps_to_keep({0, 3}) == 2);        // L = 1, 0.8·0 > 3 is false
}

TEST_CASE("overview: a tail step with too few kernels is removed and noted") {
  model_builder b;
  for (int s = 0; s < 3; ++s) {
    const double t0 = 1000.0 * s;
    b.op("ProfilerStep#" + std::to_string(7 + s), t0, 900);
    const int kernels = s < 2 ? 10 : 3;  // step 9 launched far fewer kernels
    for (int k = 0; k < kernels; ++k) {
      const std::int64_t ext = 100 * (s + 1) + k;
      b.op("aten::add", t0 + 10 + 50 * k, 40, ext);
      b.runtime(t0 + 12 + 50 * k, 5, ext, ext);
      b.kernel("add_kernel", t0 + 20 + 50 * k, 10, ext, ext);
    }
  }
  const trace_model m = b.done();
  const op_trees trees = build_op_tree(m);
  const overview_result ov = compute_overview(m, trees);
  REQUIRE(ov.steps.size() == 2);
  CHECK(ov.steps[0].name == "7");
  CHECK(ov.steps[1].name == "8");
  CHECK(ov.dropped_steps == std::vector<std::string>{"9"});
  REQUIRE_FALSE(ov.notes.empty());
  CHECK(ov.notes.back().find("Removed the last 1 step") != std::string::npos);
  CHECK(ov.steps_end == ov.steps[1].end);

  overview_options keep;
  keep.drop_tail_steps = false;
  CHECK(compute_overview(m, trees, keep).steps.size() == 3);
}

// ---------------------------------------------------------------------------------------------
// Breakdown (plugin-rules.md#step-time-breakdown)

TEST_CASE("overview: the plugin's breakdown check value") {
  // One step [50,450), DataLoader [100,280), op [200,260) inside it, a backward op [340,410),
  // runtimes [360,380), [390,400), [405,410), memcpy [405,415), memset [420,425), kernel [430,445).
  model_builder b;
  b.op("ProfilerStep#1", 50, 400);
  b.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 100, 180);
  b.op("aten::stack", 200, 60);
  b.op("autograd::engine::evaluate_function: AddBackward0", 340, 70, 21);
  b.runtime(360, 20, 21, 601);
  b.runtime(390, 10, 21, 602);
  b.runtime(405, 5, 21, 603);
  b.device_op(event_type::memcpy, 405, 10, 21, 601);
  b.device_op(event_type::memset, 420, 5, 21, 602);
  b.kernel("add_kernel", 430, 15, 21, 603);
  const trace_model m = b.done();
  const op_trees trees = build_op_tree(m);
  const overview_result ov = compute_overview(m, trees);
  REQUIRE(ov.steps.size() == 1);
  const step_row& s = ov.steps[0];
  CHECK(s.name == "1");
  CHECK(s.total == 400);
  CHECK(s.kernel == 15);
  CHECK(s.memcpy == 10);
  CHECK(s.memset == 5);
  CHECK(s.communication == 0);
  CHECK(s.runtime == 30);
  CHECK(s.dataloader == 180);
  CHECK(s.cpu_exec == 35);
  CHECK(s.other == 125);
  CHECK(ov.average.total == 400);
  CHECK(ov.average.other == 125);
  CHECK(ov.uses_gpu);
  CHECK_FALSE(ov.has_communication);
  CHECK(ov.shows(step_role::kernel));
  CHECK_FALSE(ov.shows(step_role::communication));
  CHECK(ov.shows(step_role::other));
}

TEST_CASE("overview: breakdown resets the free slots once a role covered every step") {
  // The plugin's create_from_range: when Kernel covers the whole step, Memcpy is taken unclipped.
  role_ranges roles;
  roles.ranges[static_cast<std::size_t>(step_role::kernel)] = {{0, 100}};
  roles.ranges[static_cast<std::size_t>(step_role::memcpy)] = {{50, 60}};
  roles.ranges[static_cast<std::size_t>(step_role::cpu_exec)] = {{0, 100}};
  const std::vector<step_row> rows = breakdown(roles, {{0, 100}});
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].kernel == 100);
  CHECK(rows[0].memcpy == 10);   // double counted, as the plugin did
  CHECK(rows[0].cpu_exec == 90);
  CHECK(rows[0].other == 0);
}

TEST_CASE("overview: no ProfilerStep gives one step over the host range; averages over steps") {
  model_builder b;
  b.op("aten::mm", 10, 30);
  b.add(event_type::python, "train.py(12): step", 5, 60);
  b.add(event_type::user_annotation, "my_range", 0, 200);  // annotations are CPU Exec, not host range
  const trace_model m = b.done();
  const op_trees trees = build_op_tree(m);
  const overview_result ov = compute_overview(m, trees);
  REQUIRE(ov.steps.size() == 1);
  CHECK(ov.synthetic_step);
  CHECK(ov.steps[0].name == "0");
  CHECK(ov.steps[0].start == 5);
  CHECK(ov.steps[0].end == 65);
  CHECK(ov.steps[0].cpu_exec == 60);
  CHECK_FALSE(ov.uses_gpu);
  CHECK_FALSE(ov.shows(step_role::kernel));
  CHECK(ov.gpus.empty());
}

TEST_CASE("overview: communication ops and their kernels; all_collectives option") {
  model_builder b;
  b.op("ProfilerStep#3", 0, 1000);
  b.op("nccl:all_reduce", 100, 50, 31);
  b.runtime(110, 10, 31, 701);
  b.kernel("ncclKernel_AllReduce", 200, 300, 31, 701);
  b.op("nccl:all_to_all", 600, 50, 32);  // not one of the plugin's 5 names
  b.runtime(610, 10, 32, 702);
  b.kernel("ncclKernel_AllToAll", 700, 100, 32, 702);
  const trace_model m = b.done();
  const op_trees trees = build_op_tree(m);
  const overview_result compat = compute_overview(m, trees);
  REQUIRE(compat.steps.size() == 1);
  CHECK(compat.has_communication);
  // Communication = op [100,150) (its runtime inside it too: priority 4 beats Runtime) + kernel [200,500).
  CHECK(compat.steps[0].communication == 350);
  CHECK(compat.steps[0].kernel == 100);         // the all_to_all kernel counts as computation
  CHECK(compat.steps[0].runtime == 10);         // the all_to_all launch
  CHECK(compat.steps[0].cpu_exec == 40);        // the all_to_all op minus its launch
  CHECK(compat.steps[0].other == 500);
  const overview_result better = compute_overview(m, trees, overview_options::improved());
  CHECK(better.steps[0].kernel == 0);
  CHECK(better.steps[0].communication == 500);
  CHECK(better.steps[0].runtime == 0);
  CHECK(better.steps[0].cpu_exec == 0);
}

// ---------------------------------------------------------------------------------------------
// GPU summary (plugin-rules.md#gpu-summary)

TEST_CASE("overview: GPU summary metrics over the steps range") {
  model_builder b;
  b.gpu("Tesla V100-DGXS-32GB", 34084028416, 7, 0);
  b.op("ProfilerStep#1", 0, 1000);
  b.op("aten::mm", 10, 20, 41);
  b.runtime(12, 5, 41, 801);
  b.kernel("volta_sgemm_128x64_nn", 100, 200, 41, 801, 0, 0.5, 40);   // [100,300)
  b.op("aten::relu", 40, 20, 42);
  b.runtime(42, 5, 42, 802);
  b.kernel("relu_kernel", 200, 200, 42, 802, 0, 2.0, 10);             // [200,400), overlaps
  b.kernel("stray_kernel", 2000, 100, 0, 0, 0, 1.0, 90);              // after the steps, no runtime
  const trace_model m = b.done();
  const op_trees trees = build_op_tree(m);
  const overview_result ov = compute_overview(m, trees);
  REQUIRE(ov.steps.size() == 1);
  CHECK(ov.steps_start == 0);
  CHECK(ov.steps_end == 1000);
  REQUIRE(ov.gpus.size() == 1);
  const gpu_summary_row& g = ov.gpus[0];
  CHECK(g.id == 0);
  CHECK(g.name == "Tesla V100-DGXS-32GB");
  CHECK(g.memory_bytes == 34084028416);
  CHECK(g.memory_text() == "31.74 GB");
  CHECK(g.compute_capability == "7.0");
  CHECK(g.utilization == doctest::Approx(0.3));    // [100,400) of [0,1000)
  CHECK(g.utilization_pct == 30.0);
  // SM efficiency: [100,200) 0.5, [200,300) min(2.5,1)=1, [300,400) 1 → 250 / 1000.
  REQUIRE(g.sm_efficiency_pct.has_value());
  CHECK(*g.sm_efficiency_pct == 25.0);
  // Occupancy weighted by clipped duration: (40·200 + 10·200) / 400.
  REQUIRE(g.achieved_occupancy_pct.has_value());
  CHECK(*g.achieved_occupancy_pct == 25.0);
  // Tensor cores: the two attributed kernels are not TC kernels.
  REQUIRE(g.tensor_cores_pct.has_value());
  CHECK(*g.tensor_cores_pct == 0.0);

  const std::vector<gpu_summary_item> items = gpu_summary_items(ov);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"GPU 0:", ""}, {"Name", "Tesla V100-DGXS-32GB"}, {"Memory", "31.74 GB"}, {"Compute Capability", "7.0"},
      {"GPU Utilization", "30.0 %"}, {"Est. SM Efficiency", "25.0 %"}, {"Est. Achieved Occupancy", "25.0 %"},
      {"Kernel Time using Tensor Cores", "0.0 %"}};
  REQUIRE(items.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CHECK(items[i].title == want[i].first);
    CHECK(items[i].value == want[i].second);
  }
  CHECK(gpu_summary_tooltip(ov).find("Est. SM Efficiency:") != std::string::npos);

  const std::vector<valued_interval> segs = sm_efficiency_segments(m, 0);
  REQUIRE(segs.size() == 4);
  CHECK(segs[0].value == 0.5);
  CHECK(segs[1].value == 1.0);
  CHECK(segs[3].start == 2000);
}

// ---------------------------------------------------------------------------------------------
// GPU counters (plugin-rules.md#gpu-counters)

TEST_CASE("overview: GPU utilization counters, a synthetic example") {
  model_builder b;
  b.add(event_type::trace, "PyTorch Profiler (0)", 900, 2200);
  b.kernel("k", 1320, 100, 0, 0, 0, 0.5);
  const trace_model m = b.done();
  const std::vector<counter_point> pts = gpu_utilization_counters(m);
  std::vector<counter_point> util, sm;
  for (const counter_point& p : pts) (p.counter == gpu_counter::utilization ? util : sm).push_back(p);
  REQUIRE(util.size() == 2 + 22 + 1);
  CHECK(util[0] == counter_point{0, gpu_counter::utilization, 900, 1});
  CHECK(util[1] == counter_point{0, gpu_counter::utilization, 900, 0});
  CHECK(util[2].ts == 900);
  CHECK(util[2 + 4].ts == 1300);
  CHECK(util[2 + 4].value == doctest::Approx(0.8));
  CHECK(util[2 + 5].ts == 1400);
  CHECK(util[2 + 5].value == doctest::Approx(0.2));
  CHECK(util[2 + 6].value == 0);
  CHECK(util[2 + 21].ts == 3000);
  CHECK(util.back() == counter_point{0, gpu_counter::utilization, 3100, 0});
  REQUIRE(sm.size() == 4);
  CHECK(sm[0] == counter_point{0, gpu_counter::sm_efficiency, 900, 1});
  CHECK(sm[1] == counter_point{0, gpu_counter::sm_efficiency, 900, 0});
  CHECK(sm[2] == counter_point{0, gpu_counter::sm_efficiency, 1320, 0.5});
  CHECK(sm[3] == counter_point{0, gpu_counter::sm_efficiency, 1420, 0});
  CHECK(gpu_counter_name(0, gpu_counter::utilization) == "GPU 0 Utilization");
  CHECK(gpu_counter_name(3, gpu_counter::sm_efficiency) == "GPU 3 Est. SM Efficiency");
  CHECK(gpu_counter_arg(gpu_counter::utilization) == "GPU Utilization");
  // The utilization series of every GPU come before any SM-efficiency series.
  CHECK(pts[util.size()].counter == gpu_counter::sm_efficiency);
}

TEST_CASE("overview: counters use the global extent without a profiler span; none without devices") {
  model_builder b;
  b.op("aten::mm", 0, 50);
  b.kernel("k", 10, 20, 0, 0, 1);
  b.kernel("k", 40, 10, 0, 0, 1);
  const trace_model m = b.done();
  const std::vector<counter_point> pts = gpu_utilization_counters(m);
  // Range [0,50): 50 buckets of 1 µs; no blocks-per-SM → no SM-efficiency series.
  REQUIRE(pts.size() == 2 + 50 + 1);
  CHECK(pts[0].gpu == 1);
  CHECK(pts[2 + 10].value == 1);
  CHECK(pts[2 + 30].value == 0);
  CHECK(pts.back().ts == 50);

  model_builder cpu;
  cpu.op("aten::mm", 0, 50);
  CHECK(gpu_utilization_counters(cpu.done()).empty());
}

/// The plugin's merge_ranges_with_value as it is written (every endpoint, one stable sort by
/// (time, start before end), then the sweep): the reference for the sweep without the sort.
std::vector<valued_interval> plugin_merge_ranges_with_value(const std::vector<valued_interval>& src) {
  struct endpoint {
    double time;
    int type;
    double value;
  };
  std::vector<endpoint> eps;
  for (const valued_interval& k : src) {
    eps.push_back({k.start, 0, k.value});
    eps.push_back({k.end, 1, k.value});
  }
  std::stable_sort(eps.begin(), eps.end(),
                   [](const endpoint& a, const endpoint& b) { return a.time < b.time || (a.time == b.time && a.type < b.type); });
  std::vector<valued_interval> out;
  if (eps.empty()) return out;
  double last_time = eps[0].time, last_value = eps[0].value;
  for (std::size_t i = 1; i < eps.size(); ++i) {
    if (eps[i].time > last_time && last_value > 0.0) out.push_back({last_time, eps[i].time, std::min(last_value, 1.0)});
    last_time = eps[i].time;
    last_value += eps[i].type == 0 ? eps[i].value : -eps[i].value;
  }
  return out;
}

TEST_CASE("overview: SM-efficiency segments are the plugin's, bit for bit, for any kernels") {
  // Kernels in start order (as the events give them: the sweep with a heap of ends) and out of
  // it or ending before they start (the plugin's sort): overlapping, nested, touching, equal
  // starts and ends, zero-length, values whose sums round differently in another order.
  std::srand(12345);
  const double values[] = {0.1, 0.2, 0.3, 0.7, 1.5, 1e-9, 0.333333333333};
  for (int round = 0; round < 400; ++round) {
    CAPTURE(round);
    std::vector<valued_interval> ks;
    const int n = round % 40;
    double t = 0;
    for (int i = 0; i < n; ++i) {
      t += static_cast<double>(std::rand() % 4);  // equal starts often
      const double len = static_cast<double>(std::rand() % 6);  // zero-length too
      ks.push_back({t, t + len, values[std::rand() % 7]});
    }
    if (round % 5 == 4 && n > 2) std::swap(ks[0], ks[n - 1]);  // out of start order
    if (round % 7 == 6 && n > 1) std::swap(ks[1].start, ks[1].end);  // an end before its start
    const std::vector<valued_interval> want = plugin_merge_ranges_with_value(ks);
    const std::vector<valued_interval> got = merge_ranges_with_value(ks);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      CAPTURE(i);
      CHECK(got[i].start == want[i].start);
      CHECK(got[i].end == want[i].end);
      CHECK(got[i].value == want[i].value);  // (exact: the same additions in the same order)
    }
  }
  CHECK(merge_ranges_with_value({}).empty());
}

TEST_CASE("overview: the counters with a sink for the SM-efficiency series are the same points") {
  model_builder b;
  b.add(event_type::trace, "PyTorch Profiler (0)", 0, 300);
  b.kernel("k1", 10, 100, 0, 0, 0, 0.5);
  b.kernel("k2", 50, 100, 0, 0, 0, 0.75);
  b.kernel("k3", 60, 10, 0, 0, 2, 0.25);
  b.kernel("k4", 200, 30, 0, 0, 2, 2.0);
  const trace_model m = b.done();
  const std::vector<counter_point> all = gpu_utilization_counters(m);
  struct sink final : sm_efficiency_sink {
    std::size_t reserved = 0;
    std::vector<counter_point> points;
    void reserve(std::size_t n) override { reserved += n; }
    void point(std::int64_t gpu, double ts, double value) override {
      points.push_back({gpu, gpu_counter::sm_efficiency, ts, value});
    }
  } sm;
  const std::vector<counter_point> util = gpu_utilization_counters(m, sm);
  std::vector<counter_point> want_util, want_sm;
  for (const counter_point& p : all) (p.counter == gpu_counter::utilization ? want_util : want_sm).push_back(p);
  CHECK(util == want_util);
  CHECK(sm.points == want_sm);
  CHECK(sm.reserved == want_sm.size());
  REQUIRE(want_sm.size() == 2 + 2 * 3 + 2 + 2 * 2);  // GPU 0: three segments; GPU 2: two
  CHECK(want_sm[2] == counter_point{0, gpu_counter::sm_efficiency, 10, 0.5});
  CHECK(want_sm[4] == counter_point{0, gpu_counter::sm_efficiency, 50, 1});
}

// ---------------------------------------------------------------------------------------------
// Recommendations (plugin-rules.md#recommendations)

namespace {
overview_result overview_with(double total, double dataloader, double communication) {
  overview_result ov;
  ov.average.total = total;
  ov.average.dataloader = dataloader;
  ov.average.communication = communication;
  return ov;
}
std::vector<recommendation> plugin_only(const trace_model& m, const op_trees& t, const overview_result& ov) {
  recommendation_options o;
  o.extras = false;
  return compute_recommendations(m, t, ov, o);
}
}  // namespace

TEST_CASE("recommendations: DataLoader and communication thresholds") {
  const trace_model m;
  const op_trees t;
  CHECK(plugin_only(m, t, overview_with(1000, 50, 0)).empty());      // exactly 5 %: no
  auto r = plugin_only(m, t, overview_with(1000, 334, 0));
  REQUIRE(r.size() == 1);
  CHECK(r[0].rule == 1);
  CHECK_FALSE(r[0].extra);
  CHECK(r[0].text ==
        "This run has high time cost on input data loading. 33.4% of the step time is in DataLoader. You could "
        "try to set num_workers on DataLoader's construction and enable multi-processes on data loading.");
  CHECK(r[0].html.find("<a href=\"https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading\" "
                       "target=\"_blank\">enable multi-processes on data loading</a>") != std::string::npos);

  CHECK(plugin_only(m, t, overview_with(1000, 0, 100)).empty());     // exactly 10 %: no
  r = plugin_only(m, t, overview_with(1000, 60, 851));
  REQUIRE(r.size() == 2);
  CHECK(r[0].kind == recommendation_kind::data_loader);
  CHECK(r[1].kind == recommendation_kind::communication);
  CHECK(r[1].text.find("85.1% of the step time is in communication") != std::string::npos);
  // Q13: a real link, not a Python tuple.
  CHECK(r[1].html.find("href=\"https://pytorch.org/docs/stable/ddp_comm_hooks.html\"") != std::string::npos);
  CHECK(r[1].html.find("('") == std::string::npos);
  CHECK(recommendations_html({}) == "<ul><li>N/A</li></ul>");
  CHECK(recommendations_html(r).rfind("<ul><li>This run", 0) == 0);
}

TEST_CASE("recommendations: low GPU utilization with fixed grammar") {
  const trace_model m;
  const op_trees t;
  overview_result ov = overview_with(100, 0, 0);
  gpu_summary_row g;
  g.id = 0;
  g.utilization = 0.5;  // not < 0.5
  ov.gpus.push_back(g);
  CHECK(plugin_only(m, t, ov).empty());
  ov.gpus[0].utilization = 0.4999;
  auto r = plugin_only(m, t, ov);
  REQUIRE(r.size() == 1);
  CHECK(r[0].rule == 5);
  CHECK(r[0].text ==
        "GPU 0 has low utilization. You could try to increase batch size to improve. Note: Increasing batch size "
        "may affect the speed and stability of model convergence.");
  g.id = 1;
  g.utilization = 0.1;
  ov.gpus.push_back(g);
  g.id = 12;
  ov.gpus.push_back(g);
  r = plugin_only(m, t, ov);
  REQUIRE(r.size() == 1);
  CHECK(r[0].text.rfind("GPUs 0, 1 and 12 have low utilization.", 0) == 0);
  CHECK(join_gpu_ids({3}) == "3");
  CHECK(join_gpu_ids({0, 1}) == "0 and 1");
}

TEST_CASE("recommendations: DataParallel and DDP backend rules") {
  model_builder b;
  b.gpu("A100", 42297524224, 8, 0);
  const trace_model m = b.done();
  op_trees t;
  t.uses_dp = true;
  t.used_devices = {0};
  const overview_result ov = overview_with(100, 0, 0);
  CHECK(plugin_only(m, t, ov).empty());  // one device only
  t.used_devices = {0, 1};
  auto r = plugin_only(m, t, ov);
  REQUIRE(r.size() == 1);
  CHECK(r[0].rule == 2);
  CHECK(r[0].text == "It is recommended to use DistributedDataParallel instead of DataParallel to do multi-GPU training.");

  op_trees ddp;
  ddp.uses_ddp = true;
  r = plugin_only(m, ddp, ov);
  REQUIRE(r.size() == 1);
  CHECK(r[0].rule == 3);
  CHECK(r[0].text.find("Nccl backend is currently the fastest") == 0);

  model_builder with_nccl;
  with_nccl.gpu("A100", 42297524224, 8, 0);
  with_nccl.op("nccl:all_reduce", 0, 10, 5);
  CHECK(plugin_only(with_nccl.done(), ddp, ov).empty());

  model_builder old_gpu;
  old_gpu.gpu("K10", 1 << 30, 3, 0);  // compute capability 3.0 < 3.5
  CHECK(plugin_only(old_gpu.done(), ddp, ov).empty());
}

TEST_CASE("recommendations: AMP rule needs a tensor-core capable GPU 0 and eligible kernels") {
  for (const std::int64_t major : {7, 6}) {
    model_builder b;
    b.gpu("GPU", 16LL << 30, major, 0);
    b.op("ProfilerStep#1", 0, 1000);
    b.op("aten::mm", 10, 100, 51);
    b.runtime(20, 5, 51, 901);
    b.kernel("volta_sgemm_128x64_nn", 100, 300, 51, 901);   // eligible op, no TC kernel
    b.op("aten::relu", 200, 100, 52);
    b.runtime(210, 5, 52, 902);
    b.kernel("relu_kernel", 400, 100, 52, 902);
    const trace_model m = b.done();
    const op_trees t = build_op_tree(m);
    const overview_result ov = compute_overview(m, t);
    const auto r = plugin_only(m, t, ov);
    const auto amp = std::find_if(r.begin(), r.end(), [](const recommendation& x) { return x.rule == 6; });
    if (major == 7) {
      REQUIRE(amp != r.end());
      CHECK(amp->text ==
            "Kernels with 75% time are launched by Tensor Cores eligible operators. You could enable Automatic Mixed "
            "Precision to speedup by using FP16.");
    } else {
      CHECK(amp == r.end());
    }
  }
}

TEST_CASE("recommendations: device memory at the limit; kinetoscope's rule compares GPUs only (K6), the plugin's the CPU too (Q12)") {
  model_builder b;
  b.gpu("GPU", 16LL << 30, 8, 0);
  b.memory(10, 0, -1, 1e15);                                   // CPU: huge
  b.memory(20, 1, 0, 0.8 * static_cast<double>(16LL << 30));
  b.memory(30, 1, 0, 0.95 * static_cast<double>(16LL << 30));  // peak 95 %
  b.memory(40, 1, 7, 1e15);                                    // device id outside deviceProperties
  const trace_model m = b.done();
  const op_trees t = build_op_tree(m);
  const overview_result ov = overview_with(100, 0, 0);
  recommendation_options ours;
  ours.extras = false;
  ours.plugin_memory_rule = false;
  auto r = compute_recommendations(m, t, ov, ours);
  REQUIRE(r.size() == 1);
  CHECK(r[0].rule == 7);
  CHECK(r[0].text.rfind("Device memory usage is at the limit of device memory capacity (95.0% of 16.0GB on GPU0).", 0) == 0);
  // The plugin: the CPU's records (type 0, id -1) come first and meet deviceProperties[-1], the
  // only (so last) GPU; it names that one and stops.
  auto plugin = plugin_only(m, t, ov);
  REQUIRE(plugin.size() == 1);
  CHECK(plugin[0].text.rfind("Device memory usage is at the limit of device memory capacity (", 0) == 0);
  CHECK(plugin[0].text.find("GB on GPU-1)") != std::string::npos);

  // GPU 0 and GPU 1 both at the limit: ours names both, the plugin the first only.
  model_builder two;
  two.gpu("GPU", 16LL << 30, 8, 0);
  two.gpu("GPU", 16LL << 30, 8, 0);
  two.memory(20, 1, 1, 0.97 * static_cast<double>(16LL << 30));
  two.memory(30, 1, 0, 0.95 * static_cast<double>(16LL << 30));
  const trace_model tm = two.done();
  const op_trees tt = build_op_tree(tm);
  const auto both = compute_recommendations(tm, tt, ov, ours);
  REQUIRE(both.size() == 2);
  CHECK(both[0].text.find("on GPU1)") != std::string::npos);
  CHECK(both[1].text.find("on GPU0)") != std::string::npos);
  CHECK(plugin_only(tm, tt, ov).size() == 1);

  model_builder low;
  low.gpu("GPU", 16LL << 30, 8, 0);
  low.memory(20, 1, 0, 0.9 * static_cast<double>(16LL << 30));  // exactly 90 %: no
  const trace_model lm = low.done();
  CHECK(plugin_only(lm, build_op_tree(lm), ov).empty());
  CHECK(compute_recommendations(lm, build_op_tree(lm), ov, ours).empty());
}

TEST_CASE("recommendations: extras are flagged and fire on their thresholds") {
  model_builder b;
  b.gpu("GPU", 16LL << 30, 8, 0);
  b.op("ProfilerStep#1", 0, 100000);
  // 200 tiny kernels, each shorter than its 8 µs launch.
  for (int k = 0; k < 200; ++k) {
    const std::int64_t ext = 1000 + k;
    b.op("aten::add", 10 + 100.0 * k, 50, ext);
    b.runtime(12 + 100.0 * k, 8, ext, ext);
    b.kernel("add_kernel", 30 + 100.0 * k, 2, ext, ext);
  }
  // A 30 ms synchronisation and a long idle stretch.
  b.add(event_type::runtime, "cudaDeviceSynchronize", 30000, 30000, 1, 1, 0, 5000);
  const trace_model m = b.done();
  const op_trees t = build_op_tree(m);
  const overview_result ov = compute_overview(m, t);
  const auto all = compute_recommendations(m, t, ov);
  const auto has = [&](recommendation_kind k) {
    return std::any_of(all.begin(), all.end(), [&](const recommendation& r) { return r.kind == k && r.extra && r.rule == 0; });
  };
  CHECK(has(recommendation_kind::launch_overhead));
  CHECK(has(recommendation_kind::synchronization));
  CHECK(has(recommendation_kind::idle_gpu));
  CHECK(std::count_if(all.begin(), all.end(),
                      [](const recommendation& r) { return r.kind == recommendation_kind::launch_overhead; }) == 2);
  for (const recommendation& r : all) {
    if (r.kind == recommendation_kind::synchronization) CHECK(r.text.find("cudaDeviceSynchronize ×1") != std::string::npos);
    if (r.kind == recommendation_kind::launch_overhead) {
      // One item for the short kernels, one for the Runtime share (cudaDeviceSynchronize dominates).
      CHECK((r.text.rfind("200 of 200 kernels (100.0%)", 0) == 0 ||
             r.text.find("(by time: cudaDeviceSynchronize 94.9%, cudaLaunchKernel 5.1%)") != std::string::npos));
    }
  }
  // Each finding names the view state that shows it.
  for (const recommendation& r : all) {
    CAPTURE(r.text);
    if (r.kind == recommendation_kind::synchronization) {  // the one 30 ms call
      CHECK(r.target.kind == recommendation_target::kind_type::trace);
      CHECK(r.target.view == "Trace");
      CHECK(r.target.start_us == 30000);
      CHECK(r.target.end_us == 60000);
      CHECK(r.target.device == -1);
    }
    if (r.kind == recommendation_kind::launch_overhead && r.text.rfind("200 of 200", 0) == 0) {
      CHECK(r.target.kind == recommendation_target::kind_type::kernel);
      CHECK(r.target.view == "Kernel");
      CHECK(r.target.kernel == "add_kernel");
    } else if (r.kind == recommendation_kind::launch_overhead) {
      CHECK(r.target.kind == recommendation_target::kind_type::view);
      CHECK(r.target.view == "Overview");
    }
    if (r.kind == recommendation_kind::idle_gpu) {  // after the last kernel (19932 µs) to the step's end
      CHECK(r.target.kind == recommendation_target::kind_type::trace);
      CHECK(r.target.start_us == 19932);
      CHECK(r.target.end_us == 100000);
      CHECK(r.target.device == 0);
      CHECK(r.text.find("idle for 80.1 ms") != std::string::npos);
    }
  }
  // Plugin rules come first; recommendations() has no extras.
  bool seen_extra = false;
  for (const recommendation& r : all) {
    if (r.extra) seen_extra = true;
    else CHECK_FALSE(seen_extra);
  }
  CHECK(recommendations(m, t, ov).size() == static_cast<std::size_t>(std::count_if(
                                                 all.begin(), all.end(), [](const recommendation& r) { return !r.extra; })));
  recommendation_options strict;
  strict.sync_share = 0.5;
  strict.min_kernels = 1000;
  strict.runtime_share = 0.9;
  strict.idle_gap_us = 1e9;
  const auto none = compute_recommendations(m, t, ov, strict);
  CHECK(std::none_of(none.begin(), none.end(), [](const recommendation& r) { return r.extra; }));
}

// ---------------------------------------------------------------------------------------------
// Golden files

namespace {

const char* rule_phrases[] = {
    "input data loading", "DistributedDataParallel instead of DataParallel", "Nccl backend",
    "high time cost on communication", "low utilization", "Tensor Cores eligible", "Device memory usage",
};

std::vector<std::string> numbers_in(const std::string& text) {
  static const std::regex number(R"(\d+(\.\d+)?)");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), number); it != std::sregex_iterator(); ++it) {
    out.push_back(it->str());
  }
  return out;
}

int rule_of(const std::string& text) {
  for (int i = 0; i < 7; ++i) {
    if (text.find(rule_phrases[i]) != std::string::npos) return i + 1;
  }
  return 0;
}

void check_row(const nlohmann::json& expected, const step_row& actual, bool only_present) {
  const std::pair<const char*, double> fields[] = {
      {"kernel", actual.kernel},       {"memcpy", actual.memcpy},     {"memset", actual.memset},
      {"communication", actual.communication}, {"runtime", actual.runtime}, {"dataloader", actual.dataloader},
      {"cpu_exec", actual.cpu_exec},   {"other", actual.other},       {"total", actual.total},
  };
  for (const auto& [key, value] : fields) {
    if (!expected.contains(key)) {
      CHECK_MESSAGE(only_present, "missing key ", key);
      continue;
    }
    const double e = expected[key].get<double>();
    CAPTURE(key);
    CAPTURE(e);
    CAPTURE(value);
    CHECK(close_time(value, e));
  }
}

}  // namespace

TEST_CASE("overview: golden Overview, GPU summary and recommendations of torch-tb-profiler") {
  const char* real = kinetoscope::test::real_traces();
  REQUIRE_MESSAGE(real != nullptr, "KINETOSCOPE_REAL_TRACES not set (meson test sets it)");
  const std::filesystem::path root(real);
  REQUIRE(std::filesystem::is_directory(root / "expected"));
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root / "expected")) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.size() > 14 && name.ends_with(".expected.json")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 11);

  for (const std::filesystem::path& file : files) {
    const std::string run = file.parent_path().filename().string();
    std::string trace_name = file.filename().string();
    trace_name.resize(trace_name.size() - std::string(".expected.json").size());
    const std::filesystem::path trace = root / "traces" / run / trace_name;
    CAPTURE(run);
    CAPTURE(trace_name);
    std::ifstream in(file);
    const nlohmann::json expected = nlohmann::json::parse(in);
    const nlohmann::json& exp = expected.at("overview");

    load_result loaded = load_trace(trace.string());
    REQUIRE_MESSAGE(loaded.ok(), (loaded.error ? loaded.error->message() : std::string()));
    const trace_model& m = *loaded.model;
    const op_trees trees = build_op_tree(m);
    const overview_result ov = compute_overview(m, trees);

    // Steps.
    REQUIRE(ov.steps.size() == exp.at("steps").size());
    for (std::size_t i = 0; i < ov.steps.size(); ++i) {
      CAPTURE(i);
      CHECK(ov.steps[i].name == exp["steps"][i].at("name").get<std::string>());
      check_row(exp["steps"][i], ov.steps[i], false);
    }
    check_row(exp.at("average"), ov.average, true);
    // The average shows exactly the plugin's columns.
    CHECK(exp["average"].contains("kernel") == ov.shows(step_role::kernel));
    CHECK(exp["average"].contains("communication") == ov.shows(step_role::communication));

    // GPU summary.
    REQUIRE(ov.gpus.size() == exp.at("gpus").size());
    for (std::size_t i = 0; i < ov.gpus.size(); ++i) {
      const nlohmann::json& eg = exp["gpus"][i];
      const gpu_summary_row& g = ov.gpus[i];
      CAPTURE(g.id);
      CHECK(g.id == eg.at("id").get<int>());
      CHECK(g.name == eg.value("name", std::string()));
      CHECK(g.compute_capability == eg.value("compute_capability", std::string()));
      if (eg.contains("memory_bytes")) CHECK(g.memory_bytes == eg["memory_bytes"].get<std::int64_t>());
      CHECK(std::abs(g.utilization_pct - eg.at("utilization_pct").get<double>()) <= 0.0100001);
      const std::pair<const char*, const std::optional<double>*> optional_fields[] = {
          {"sm_efficiency_pct", &g.sm_efficiency_pct},
          {"achieved_occupancy_pct", &g.achieved_occupancy_pct},
          {"tensor_cores_pct", &g.tensor_cores_pct},
      };
      for (const auto& [key, value] : optional_fields) {
        CAPTURE(key);
        REQUIRE(eg.contains(key) == value->has_value());
        if (value->has_value()) {
          CAPTURE(**value);
          CHECK(std::abs(**value - eg[key].get<double>()) <= 0.0100001);
        }
      }
    }

    // The numbers torch-tb-profiler showed for the sample's span 1
    // (plugin-rules.md#overview-payload, #gpu-summary).
    if (trace_name == "worker0.1623143089861.pt.trace.json.gz") {
      const std::vector<performance_item> perf = performance_breakdown(ov);
      const std::vector<std::tuple<std::string, double, double>> want = {
          {"Average Step Time", 177592, 100}, {"Kernel", 98589, 55.51}, {"Memcpy", 1915, 1.08},
          {"Memset", 89, 0.05}, {"Runtime", 2908, 1.64}, {"DataLoader", 59262, 33.37},
          {"CPU Exec", 13674, 7.7}, {"Other", 1156, 0.65}};
      REQUIRE(perf.size() == want.size());
      for (std::size_t i = 0; i < want.size(); ++i) {
        CHECK(perf[i].name == std::get<0>(want[i]));
        CHECK(perf[i].value == std::get<1>(want[i]));
        CHECK(perf[i].extra == std::get<2>(want[i]));
      }
      const std::vector<gpu_summary_item> items = gpu_summary_items(ov);
      REQUIRE(items.size() == 8);
      CHECK(items[2].value == "31.74 GB");
      CHECK(items[4].value == "55.51 %");
      CHECK(items[5].value == "54.68 %");
      CHECK(items[6].value == "49.13 %");
      CHECK(items[7].value == "0.0 %");
    }

    // Recommendations: the same rules fire, with the same numbers.
    const std::vector<std::string> ours = recommendations(m, trees, ov);
    // The plugin shows "<ul><li>N/A</li></ul>" when no rule fires; its numbers file keeps the
    // "N/A" item (h100_qwen15_05b).
    nlohmann::json theirs = exp.at("recommendations");
    if (theirs == nlohmann::json::array({"N/A"})) theirs = nlohmann::json::array();
    REQUIRE(ours.size() == theirs.size());
    for (std::size_t i = 0; i < ours.size(); ++i) {
      const std::string t = theirs[i].get<std::string>();
      CAPTURE(t);
      CAPTURE(ours[i]);
      CHECK(rule_of(ours[i]) == rule_of(t));
      CHECK(rule_of(t) != 0);
      CHECK(numbers_in(ours[i]) == numbers_in(t));
    }
  }
}
