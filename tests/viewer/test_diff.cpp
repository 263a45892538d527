// SPDX-License-Identifier: BSD-3-Clause
// Diff view (docs/plugin-rules.md#diff-view): alignment and per-node numbers on a hand-written pair
// of traces, the real diff_base/diff_test pair checked against per-op sums taken from the raw
// JSON, the plugin's observed structure for the ResNet sample's two spans, and self-diffs.
#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "analysis/diff_view.hpp"
#include "analysis/loader.hpp"
#include "real_trace_files.hpp"
#include "analysis/op_tree.hpp"

using namespace kinetoscope::analysis;
using json = nlohmann::json;

namespace {

using kinetoscope_test::gunzip_file;
using kinetoscope_test::real_dir;

struct loaded {
  trace_model model;
  op_trees trees;
  explicit loaded(const std::string& text) {
    load_result r = load_trace_buffer(text, "diff_test");
    REQUIRE_MESSAGE(r.ok(), (r.error ? r.error->message() : std::string()));
    model = std::move(*r.model);
    trees = build_op_tree(model);
  }
};

class json_trace {
 public:
  json_trace& op(std::string_view name, double ts, double dur, std::string_view cat = "cpu_op") {
    events_.push_back({{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", 1}, {"tid", 1}, {"ts", ts},
                       {"dur", dur}, {"args", {{"External id", ++ext_}}}});
    return *this;
  }
  json_trace& module(std::string_view name, double ts, double dur, std::int64_t module_id) {
    ++py_;
    events_.push_back({{"ph", "X"}, {"cat", "python_function"}, {"name", name}, {"pid", 1}, {"tid", 1}, {"ts", ts},
                       {"dur", dur}, {"args", {{"Python id", py_}, {"Python parent id", nullptr},
                                               {"Python module id", module_id}}}});
    return *this;
  }
  /// A runtime on thread 1 with the External id of the last op, launching a kernel.
  json_trace& launch(double ts, double dur, double k_ts, double k_dur) {
    ++corr_;
    events_.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"pid", 1}, {"tid", 1},
                       {"ts", ts}, {"dur", dur}, {"args", {{"External id", ext_}, {"correlation", corr_}}}});
    events_.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "k"}, {"pid", 0}, {"tid", 7}, {"ts", k_ts},
                       {"dur", k_dur}, {"args", {{"External id", ext_}, {"correlation", corr_}, {"device", 0}}}});
    return *this;
  }
  std::string text() const { return json{{"traceEvents", events_}}.dump(); }

 private:
  json events_ = json::array();
  std::int64_t ext_ = 0;
  std::int64_t py_ = 0;
  std::int64_t corr_ = 0;
};

constexpr std::string_view dl = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__";
constexpr std::string_view dl_mp = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__";
constexpr std::string_view opt = "Optimizer.step#SGD.step";

std::string baseline_text() {
  json_trace t;
  t.op("ProfilerStep#1", 0, 1000, "user_annotation")
      .op(dl, 10, 90, "user_annotation")
      .module("nn.Module: Net_0", 100, 300, 100)
      .module("nn.Module: Linear_0", 110, 90, 101)
      .op("aten::linear", 120, 70)
      .launch(130, 10, 300, 40)
      .op("aten::addmm", 145, 40)
      .op("aten::relu", 250, 50)
      .op(opt, 500, 200, "user_annotation")
      .op("aten::add_", 550, 50)
      .op("ProfilerStep#2", 1000, 1000, "user_annotation")
      .op(dl, 1010, 90, "user_annotation")
      .module("nn.Module: Net_0", 1100, 300, 100)
      .op("aten::conv2d", 1150, 100)
      .op(opt, 1500, 150, "user_annotation")
      .op("aten::add_", 1550, 30);
  return t.text();
}

std::string experimental_text() {
  json_trace t;
  t.op("ProfilerStep#1", 0, 1000, "user_annotation")
      .op(dl, 10, 70, "user_annotation")
      .module("nn.Module: Net_0", 100, 350, 100)
      .module("nn.Module: Linear_0", 110, 140, 101)
      .op("aten::linear", 120, 120)
      .op("aten::relu", 260, 20)
      .op("aten::relu", 290, 10)
      .op(opt, 500, 100, "user_annotation")
      .op("aten::add_", 510, 30)
      .op("aten::mul_", 545, 5)
      .op("ProfilerStep#2", 1000, 1000, "user_annotation")
      .op(dl_mp, 1010, 40, "user_annotation")
      .module("nn.Module: Net_0", 1100, 200, 100)
      .op("aten::conv2d", 1120, 100)
      .op(opt, 1400, 100, "user_annotation")
      .op("aten::add_", 1410, 30);
  return t.text();
}

void check_side(const diff_side& s, std::string_view name, double duration, double device, double total) {
  CAPTURE(name);
  CHECK(s.name == name);
  CHECK(s.duration == duration);
  CHECK(s.device_duration == device);
  CHECK(s.total_duration == total);
}

void check_agg(const diff_op_stats& a, std::string_view name, std::int64_t calls, double host, double device,
               double self_host, double self_device) {
  CAPTURE(name);
  CHECK(a.name == name);
  CHECK(a.calls == calls);
  CHECK(a.host_duration == host);
  CHECK(a.device_duration == device);
  CHECK(a.self_host_duration == self_host);
  CHECK(a.self_device_duration == self_device);
}

/// Every node of a self-diff has equal sides and zero deltas.
void check_self_diff(const diff_node& n, std::size_t& count) {
  ++count;
  CAPTURE(n.path);
  CHECK(n.baseline.name == n.experimental.name);
  CHECK(n.baseline.duration == n.experimental.duration);
  CHECK(n.baseline.device_duration == n.experimental.device_duration);
  CHECK(n.baseline.total_duration == n.experimental.total_duration);
  CHECK(n.baseline.aggs.size() == n.experimental.aggs.size());
  for (const diff_table_row& r : diff_table(n)) {
    for (const diff_metric* m : {&r.calls, &r.host_duration, &r.self_host_duration, &r.device_duration,
                                 &r.self_device_duration}) {
      CHECK(m->delta == 0);
      if (m->baseline != 0) CHECK(m->delta_pct == 0.0);
      if (m->baseline == 0) CHECK_FALSE(m->delta_pct.has_value());
    }
  }
  for (const diff_bar& b : diff_bars(n)) CHECK(b.delta == 0);
  for (std::size_t i = 0; i < n.children.size(); ++i) {
    CHECK(n.children[i].path == n.path + "-" + std::to_string(i));
    check_self_diff(n.children[i], count);
  }
}

}  // namespace

TEST_CASE("diff: alignment on DataLoader / Module / Optimizer anchors") {
  const loaded base(baseline_text());
  const loaded exp(experimental_text());
  const diff_node root = compute_diff(base.trees, exp.trees);

  CHECK(root.path == "0");
  // Top level = the children of both ProfilerSteps: [DL, Net_0, Optimizer] × 2 per side.
  check_side(root.baseline, "CompositeNodes", 90 + 300 + 200 + 90 + 300 + 150, 40, 90 + 40 + 200 + 90 + 300 + 150);
  check_side(root.experimental, "CompositeNodes", 70 + 350 + 100 + 40 + 200 + 100, 0, 70 + 350 + 100 + 40 + 200 + 100);
  // Anchors: DL, Net_0, Optimizer of step 1; the step-2 DataLoaders differ (single vs
  // multi-process), so they pair up only as the stretch before the next anchor (Net_0).
  REQUIRE(root.children.size() == 6);
  check_side(root.children[0].baseline, dl, 90, 0, 90);
  check_side(root.children[0].experimental, dl, 70, 0, 70);
  check_side(root.children[1].baseline, "nn.Module: Net_0", 300, 40, 40);
  check_side(root.children[1].experimental, "nn.Module: Net_0", 350, 0, 350);
  check_side(root.children[2].baseline, opt, 200, 0, 200);
  check_side(root.children[3].baseline, dl, 90, 0, 90);
  check_side(root.children[3].experimental, dl_mp, 40, 0, 40);
  check_side(root.children[4].baseline, "nn.Module: Net_0", 300, 0, 300);
  check_side(root.children[4].experimental, "nn.Module: Net_0", 200, 0, 200);
  check_side(root.children[5].experimental, opt, 100, 0, 100);
  for (std::size_t i = 0; i < 6; ++i) CHECK(root.children[i].path == "0-" + std::to_string(i));

  // Inside Net_0 (step 1): Linear_0 anchors; the ReLUs left over pair a node with a list.
  const diff_node& net = root.children[1];
  REQUIRE(net.children.size() == 2);
  check_side(net.children[0].baseline, "nn.Module: Linear_0", 90, 40, 40);
  check_side(net.children[0].experimental, "nn.Module: Linear_0", 140, 0, 140);
  CHECK(net.children[0].children.empty());  // aten::linear vs aten::linear: no anchor
  check_side(net.children[1].baseline, "aten::relu", 50, 0, 50);
  check_side(net.children[1].experimental, "CompositeNodes", 30, 0, 30);
  CHECK(net.children[1].children.empty());  // node vs list: a leaf
  CHECK(root.children[2].children.empty());
  CHECK(find_diff_node(root, "0-1-1") == &net.children[1]);
  CHECK(find_diff_node(root, "0") == &root);
  CHECK(find_diff_node(root, "0-6") == nullptr);
  CHECK(find_diff_node(root, "1") == nullptr);
  CHECK(find_diff_node(root, "0-x") == nullptr);
  CHECK(find_diff_node(root, "0-1-1-0") == nullptr);

  // Operator aggregates, first-seen post-order (aten::addmm before its parent aten::linear).
  const auto& b = root.baseline.aggs;
  REQUIRE(b.size() == 5);
  check_agg(b[0], "aten::addmm", 1, 40, 0, 40, 0);
  check_agg(b[1], "aten::linear", 1, 70, 40, 20, 40);  // self host: 70 − 10 (launch) − 40 (addmm)
  check_agg(b[2], "aten::relu", 1, 50, 0, 50, 0);
  check_agg(b[3], "aten::add_", 2, 80, 0, 80, 0);
  check_agg(b[4], "aten::conv2d", 1, 100, 0, 100, 0);
  const auto& e = root.experimental.aggs;
  REQUIRE(e.size() == 5);
  check_agg(e[0], "aten::linear", 1, 120, 0, 120, 0);
  check_agg(e[1], "aten::relu", 2, 30, 0, 30, 0);
  check_agg(e[2], "aten::add_", 2, 60, 0, 60, 0);
  check_agg(e[3], "aten::mul_", 1, 5, 0, 5, 0);
  check_agg(e[4], "aten::conv2d", 1, 100, 0, 100, 0);

  // plugin-rules.md#diff-view table: baseline order, then experimental-only operators.
  const auto table = diff_table(root);
  REQUIRE(table.size() == 6);
  CHECK(table[0].name == "aten::addmm");
  CHECK(table[0].calls.experimental == 0);
  CHECK(table[0].self_host_duration.delta == -40);
  CHECK(table[0].self_host_duration.delta_pct == -100.0);
  CHECK(table[1].name == "aten::linear");
  CHECK(table[1].host_duration.delta == 50);
  CHECK(table[1].host_duration.delta_pct == doctest::Approx(50.0 / 70 * 100));
  CHECK(table[1].self_host_duration.delta == 100);
  CHECK(table[1].device_duration.delta == -40);
  CHECK(table[1].device_duration.delta_pct == -100.0);
  CHECK(table[2].calls.delta == 1);
  CHECK(table[2].calls.delta_pct == 100.0);
  CHECK(table[5].name == "aten::mul_");
  CHECK(table[5].calls.baseline == 0);
  CHECK(table[5].calls.experimental == 1);
  CHECK_FALSE(table[5].calls.delta_pct.has_value());  // the plugin printed "Infinity%"

  // plugin-rules.md#diff-view bars: labels, totals and running sums.
  const auto bars = diff_bars(root);
  REQUIRE(bars.size() == 6);
  CHECK(bars[0].label == "#_SingleProcessDataLoaderIter.__next__");
  CHECK(bars[1].label == "Net_0");
  CHECK(bars[2].label == "Optimizer.step");
  CHECK(bars[1].baseline == 40);
  CHECK(bars[1].experimental == 350);
  CHECK(bars[1].delta == 310);
  CHECK(bars[2].baseline_trend == 90 + 40 + 200);
  CHECK(bars[2].experimental_trend == 70 + 350 + 100);
  CHECK(bars[2].delta_trend == (70 + 350 + 100) - (90 + 40 + 200));
  CHECK(bars[3].path == "0-3");
  // Inside Net_0 the aten::relu child is not a bar.
  const auto net_bars = diff_bars(net);
  REQUIRE(net_bars.size() == 1);
  CHECK(net_bars[0].label == "Linear_0");
}

TEST_CASE("diff: labels") {
  CHECK(diff_label("enumerate(DataPipe)#ShardingFilter") == "#ShardingFilter");
  CHECK(diff_label("Optimizer.zero_grad#SGD.zero_grad") == "Optimizer.zero_grad");
  CHECK(diff_label("Optimizer.step#Adam.step") == "Optimizer.step");
  CHECK(diff_label("nn.Module: ResNet") == "ResNet");
  CHECK(diff_label("aten::mm") == "aten::mm");
}

TEST_CASE("diff: diff_base vs diff_test against per-op sums from the raw events") {
  const std::string base_text = gunzip_file(real_dir() + "/traces/diff_base/base.pt.trace.json.gz");
  const std::string test_text = gunzip_file(real_dir() + "/traces/diff_test/test.pt.trace.json.gz");
  const loaded base(base_text);
  const loaded test(test_text);
  const diff_node root = compute_diff(base.trees, test.trees);

  // Independent sums: cpu_op events on the thread that has the ProfilerStep events, inside a
  // step; device time = kernels whose runtime carries the op's External id.
  struct sums {
    std::map<std::string, std::int64_t> calls;
    std::map<std::string, double> host;
    std::map<std::string, double> device;
    double duration = 0;
    std::size_t top = 0;
  };
  const auto raw_sums = [](const std::string& text) {
    const json doc = json::parse(text);
    std::vector<std::pair<double, double>> steps;
    json step_tid;
    for (const json& e : doc["traceEvents"]) {
      if (e.value("ph", "") == "X" && e["name"].get<std::string>().rfind("ProfilerStep#", 0) == 0) {
        steps.push_back({e["ts"], e["ts"].get<double>() + e["dur"].get<double>()});
        step_tid = e["tid"];
      }
    }
    std::map<std::int64_t, double> kernel_by_corr;
    std::map<std::int64_t, std::vector<std::int64_t>> corr_by_ext;
    for (const json& e : doc["traceEvents"]) {
      if (e.value("cat", "") == "kernel") kernel_by_corr[e["args"]["correlation"]] += e["dur"].get<double>();
      if (e.value("cat", "") == "cuda_runtime") corr_by_ext[e["args"]["External id"]].push_back(e["args"]["correlation"]);
    }
    sums s;
    for (const json& e : doc["traceEvents"]) {
      if (e.value("cat", "") != "cpu_op" || e["tid"] != step_tid) continue;
      const double ts = e["ts"];
      const double end = ts + e["dur"].get<double>();
      bool inside = false;
      for (const auto& [lo, hi] : steps) inside = inside || (ts >= lo && end <= hi);
      if (!inside) continue;
      const std::string name = e["name"];
      s.calls[name] += 1;
      s.host[name] += e["dur"].get<double>();
      double dev = 0;
      for (const std::int64_t c : corr_by_ext[e["args"]["External id"]]) dev += kernel_by_corr[c];
      s.device[name] += dev;
      s.duration += e["dur"].get<double>();  // every op here is a direct step child (no nesting)
      ++s.top;
    }
    return s;
  };
  const sums sb = raw_sums(base_text);
  const sums st = raw_sums(test_text);
  REQUIRE(sb.top == 2);
  REQUIRE(st.top == 3);

  // [aten::empty, aten::empty] vs [aten::empty, aten::empty, All2All_Pooled_Req]: no anchor.
  CHECK(root.baseline.name == "CompositeNodes");
  CHECK(root.experimental.name == "CompositeNodes");
  CHECK(root.children.empty());
  CHECK(root.baseline.nodes.size() == sb.top);
  CHECK(root.experimental.nodes.size() == st.top);
  CHECK(root.baseline.duration == sb.duration);
  CHECK(root.experimental.duration == st.duration);
  const auto check_aggs = [](const std::vector<diff_op_stats>& aggs, const sums& s) {
    REQUIRE(aggs.size() == s.calls.size());
    for (const diff_op_stats& a : aggs) {
      CAPTURE(a.name);
      CHECK(a.calls == s.calls.at(a.name));
      CHECK(a.host_duration == s.host.at(a.name));
      CHECK(a.device_duration == s.device.at(a.name));
    }
  };
  check_aggs(root.baseline.aggs, sb);
  check_aggs(root.experimental.aggs, st);
  const auto table = diff_table(root);
  REQUIRE(table.size() == 2);
  CHECK(table[1].name == "All2All_Pooled_Req");
  CHECK(table[1].host_duration.delta == st.host.at("All2All_Pooled_Req"));

  // The plugin's "first tree" is the main thread here too (its first op is the earliest).
  diff_options first;
  first.use_first_tree = true;
  const diff_node root2 = compute_diff(base.trees, test.trees, first);
  CHECK(root2.baseline.duration == root.baseline.duration);
  CHECK(root2.experimental.aggs.size() == root.experimental.aggs.size());

  // A trace diffed with itself: every delta is 0.
  std::size_t count = 0;
  check_self_diff(compute_diff(test.trees, test.trees), count);
  CHECK(count == 1);
}

TEST_CASE("diff: a trace diffed with itself has zero deltas everywhere") {
  const loaded base(baseline_text());
  std::size_t count = 0;
  const diff_node root = compute_diff(base.trees, base.trees);
  check_self_diff(root, count);
  // Every top-level node anchors with itself: 2 steps × (DL, Net_0, Optimizer), plus Linear_0
  // inside step 1's Net_0 and the leftover aten::relu beside it.
  CHECK(root.children.size() == 6);
  CHECK(count == 1 + 6 + 2);
}

TEST_CASE("diff: ResNet-50 sample span 1 vs span 2 (the plugin's observed structure)") {
  const std::string dir = real_dir() + "/traces/resnet50_v100/";
  const loaded a(gunzip_file(dir + "worker0.1623143089861.pt.trace.json.gz"));
  const loaded b(gunzip_file(dir + "worker0.1623143566756.pt.trace.json.gz"));
  const diff_node root = compute_diff(a.trees, b.trees);
  // 24 top-level children: per step CompositeNodes, enumerate(DataLoader)#…, CompositeNodes,
  // Optimizer.step#SGD.step.
  REQUIRE(root.children.size() == 24);
  for (std::size_t i = 0; i < 24; ++i) {
    CAPTURE(i);
    const diff_side& s = root.children[i].baseline;
    switch (i % 4) {
      case 0:
      case 2:
        CHECK(s.name == "CompositeNodes");
        break;
      case 1:
        CHECK(s.name.rfind("enumerate(DataLoader)#", 0) == 0);
        CHECK(root.children[i].experimental.name == s.name);
        break;
      case 3:
        CHECK(s.name == "Optimizer.step#SGD.step");
        break;
    }
  }
  // The root's aggregates cover every operator of the top-level nodes of each side.
  double base_host = 0;
  for (const diff_op_stats& s : root.baseline.aggs) base_host += s.calls;
  std::size_t ops = 0;
  std::function<void(std::uint32_t)> count_ops = [&](std::uint32_t n) {
    if (a.trees.is_operator(n)) ++ops;
    for (const std::uint32_t c : a.trees.nodes[n].children) count_ops(c);
  };
  for (const std::uint32_t n : root.baseline.nodes) count_ops(n);
  CHECK(base_host == static_cast<double>(ops));

  std::size_t count = 0;
  check_self_diff(compute_diff(a.trees, a.trees), count);
  CHECK(count > 24);
}
