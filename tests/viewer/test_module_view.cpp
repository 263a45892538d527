// SPDX-License-Identifier: BSD-3-Clause
// Module view and Lightning view (docs/plugin-rules.md#module-view) on hand-written Kineto JSON
// traces (python_function module events, fwdbwd flows, runtimes and kernels), loaded by the loader,
// and on a trace with module scopes written by kinetoscope's writer.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../module_fixture.hpp"
#include "analysis/loader.hpp"
#include "analysis/module_view.hpp"
#include "analysis/op_tree.hpp"
#include "kinetoscope/writer/chrome_trace.hpp"

using namespace kinetoscope::analysis;
using json = nlohmann::json;

namespace {

class json_trace {
 public:
  json_trace& op(std::string_view name, double ts, double dur, std::int64_t tid, std::int64_t ext,
                 std::string_view cat = "cpu_op") {
    events_.push_back({{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", 1}, {"tid", tid}, {"ts", ts},
                       {"dur", dur}, {"args", {{"External id", ext}}}});
    return *this;
  }
  /// A python_function event; module_id < 0 = a plain function, else an nn.Module forward.
  json_trace& py(std::string_view name, double ts, double dur, std::int64_t id, std::int64_t parent,
                 std::int64_t module_id = -1) {
    json args = {{"Python id", id}, {"Python parent id", parent < 0 ? json() : json(parent)}};
    if (module_id >= 0) args["Python module id"] = module_id;
    events_.push_back({{"ph", "X"}, {"cat", "python_function"}, {"name", name}, {"pid", 1}, {"tid", 1},
                       {"ts", ts}, {"dur", dur}, {"args", args}});
    return *this;
  }
  /// cudaLaunchKernel [ts, ts+dur) on thread 1 launching a kernel [k_ts, k_ts+k_dur).
  json_trace& launch(double ts, double dur, std::int64_t ext, std::int64_t corr, double k_ts, double k_dur) {
    events_.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"pid", 1}, {"tid", 1},
                       {"ts", ts}, {"dur", dur}, {"args", {{"External id", ext}, {"correlation", corr}}}});
    events_.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "some_kernel"}, {"pid", 0}, {"tid", 7},
                       {"ts", k_ts}, {"dur", k_dur},
                       {"args", {{"External id", ext}, {"correlation", corr}, {"device", 0}, {"stream", 7}}}});
    return *this;
  }
  json_trace& flow(std::int64_t id, double fwd_ts, std::int64_t fwd_tid, double bwd_ts, std::int64_t bwd_tid) {
    events_.push_back({{"ph", "s"}, {"id", id}, {"pid", 1}, {"tid", fwd_tid}, {"ts", fwd_ts}, {"cat", "fwdbwd"},
                       {"name", "fwdbwd"}});
    events_.push_back({{"ph", "f"}, {"id", id}, {"pid", 1}, {"tid", bwd_tid}, {"ts", bwd_ts}, {"cat", "fwdbwd"},
                       {"name", "fwdbwd"}, {"bp", "e"}});
    return *this;
  }
  trace_model load(bool lightning = false) const {
    json doc = {{"schemaVersion", 1}, {"traceEvents", events_}};
    if (lightning) doc["Framework"] = "pytorch-lightning";
    load_result r = load_trace_buffer(doc.dump(), "module_test.pt.trace.json");
    REQUIRE_MESSAGE(r.ok(), (r.error ? r.error->message() : std::string()));
    return std::move(*r.model);
  }

 private:
  json events_ = json::array();
};

/// Two training steps, each calling Net_0(Linear_0, ReLU_0, Dropout_0); step 1 also runs a
/// top-level Loss_0. Python ids 0 (the script) → modules; a plain function under Linear_0.
/// Thread 2 runs the backward of aten::linear (linked by a fwdbwd flow).
///
/// Per node (µs): host self = duration − children − runtimes; device = kernels below.
///   step 1: Net_0 [100,700) self 600−290−150−40 = 120, device 100+50 = 150
///           Linear_0 [150,440) → aten::linear [200,400) (runtime 10, kernel 100): self 90, dev 100
///           ReLU_0 [450,600) → aten::relu [460,560) (kernel 50): self 50, dev 50
///           Dropout_0 [610,650) → aten::dropout [615,640): self 15
///           Loss_0 [750,780) → aten::mse_loss [755,770): self 15
///   step 2: Net_0 [1100,1500) self 400−180−90−30 = 100, device 20+10 = 30
///           Linear_0 [1120,1300) → aten::linear [1150,1250) (kernel 20): self 80, dev 20
///           ReLU_0 [1310,1400) → aten::relu [1320,1380) (kernel 10): self 30, dev 10
///           Dropout_0 [1410,1440) → aten::dropout [1415,1425): self 20
json_trace two_steps() {
  json_trace t;
  t.py("train.py(1): <module>", 0, 2000, 0, -1)
      .op("ProfilerStep#1", 0, 1000, 1, 1, "user_annotation")
      .py("nn.Module: Net_0", 100, 600, 1, 0, 100)
      .py("nn.Module: Linear_0", 150, 290, 2, 1, 101)
      .py("torch/nn/functional.py(10): linear", 160, 270, 3, 2)
      .op("aten::linear", 200, 200, 1, 5)
      .launch(250, 10, 5, 1, 500, 100)
      .py("nn.Module: ReLU_0", 450, 150, 4, 1, 102)
      .op("aten::relu", 460, 100, 1, 6)
      .launch(470, 10, 6, 2, 610, 50)
      .py("nn.Module: Dropout_0", 610, 40, 5, 1, 103)
      .op("aten::dropout", 615, 25, 1, 7)
      .py("nn.Module: Loss_0", 750, 30, 6, 0, 200)
      .op("aten::mse_loss", 755, 15, 1, 8)
      .op("autograd::engine::evaluate_function: AddmmBackward0", 800, 100, 2, 9)
      .op("AddmmBackward0", 810, 80, 2, 10)
      .op("aten::mm", 820, 60, 2, 11)
      .flow(1, 200, 1, 810, 2)
      .op("ProfilerStep#2", 1000, 1000, 1, 20, "user_annotation")
      .py("nn.Module: Net_0", 1100, 400, 7, 0, 100)
      .py("nn.Module: Linear_0", 1120, 180, 8, 7, 101)
      .py("torch/nn/functional.py(10): linear", 1130, 160, 9, 8)
      .op("aten::linear", 1150, 100, 1, 21)
      .launch(1160, 10, 21, 3, 1400, 20)
      .py("nn.Module: ReLU_0", 1310, 90, 10, 7, 102)
      .op("aten::relu", 1320, 60, 1, 22)
      .launch(1330, 5, 22, 4, 1450, 10)
      .py("nn.Module: Dropout_0", 1410, 30, 11, 7, 103)
      .op("aten::dropout", 1415, 10, 1, 23);
  return t;
}

void check_row(const module_row& r, std::string_view name, std::int64_t id, std::int64_t occ, std::int64_t ops,
               double host, double self_host, double device, double self_device, double avg) {
  CAPTURE(name);
  CHECK(r.name == name);
  CHECK(r.id == id);
  CHECK(r.occurrences == occ);
  CHECK(r.operators == ops);
  CHECK(r.host_duration == host);
  CHECK(r.self_host_duration == self_host);
  CHECK(r.device_duration == device);
  CHECK(r.self_device_duration == self_device);
  CHECK(r.avg_duration == avg);
}

}  // namespace

TEST_CASE("module_view: nn.Module tree from python_function events, with backward flows") {
  const trace_model model = two_steps().load();
  const op_trees trees = build_op_tree(model);
  const module_view_result v = compute_module_view(model, trees);

  REQUIRE(v.kind == module_view_kind::module);
  CHECK(v.missing_modules == 0);
  // Top level sorted by name; the two Net_0 calls build equal trees: one row.
  REQUIRE(v.rows.size() == 2);
  check_row(v.rows[0], "Loss_0", 200, 1, 1, 30, 15, 0, 0, 30);
  const module_row& net = v.rows[1];
  check_row(net, "Net_0", 100, 2, 0, 1000, 220, 180, 0, 90);
  REQUIRE(net.children.size() == 3);  // hierarchy (first-call) order, not sorted
  check_row(net.children[0], "Linear_0", 101, 2, 2, 470, 170, 120, 120, 60);
  check_row(net.children[1], "ReLU_0", 102, 2, 2, 240, 80, 60, 60, 30);
  check_row(net.children[2], "Dropout_0", 103, 2, 2, 70, 35, 0, 0, 35);
  for (const module_row& c : net.children) CHECK(c.children.empty());
}

TEST_CASE("module_view: distinct module ids and shapes stay distinct rows") {
  // Two Linear modules of different ids under one parent, and a second Net_0 call whose
  // sub-module set differs: both Net_0 trees are kept (the plugin de-duplicates equal trees only).
  json_trace t;
  t.py("train.py(1): <module>", 0, 1000, 0, -1)
      .py("nn.Module: Net_0", 10, 100, 1, 0, 100)
      .py("nn.Module: Linear_0", 20, 30, 2, 1, 101)
      .op("aten::linear", 25, 10, 1, 1)
      .py("nn.Module: Linear_0", 60, 30, 3, 1, 102)
      .op("aten::linear", 65, 20, 1, 2)
      .py("nn.Module: Net_0", 200, 100, 4, 0, 100)
      .py("nn.Module: Linear_0", 210, 30, 5, 4, 101)
      .op("aten::linear", 215, 10, 1, 3);
  const trace_model model = t.load();
  const op_trees trees = build_op_tree(model);
  const module_view_result v = compute_module_view(model, trees);
  REQUIRE(v.kind == module_view_kind::module);
  REQUIRE(v.rows.size() == 2);
  // Stats are keyed by (name, module id): both Net_0 rows carry the same sums.
  for (const module_row& net : v.rows) check_row(net, "Net_0", 100, 2, 0, 200, 110, 0, 0, 100);
  REQUIRE(v.rows[0].children.size() == 2);
  check_row(v.rows[0].children[0], "Linear_0", 101, 2, 2, 60, 40, 0, 0, 30);
  check_row(v.rows[0].children[1], "Linear_0", 102, 1, 1, 30, 10, 0, 0, 30);
  REQUIRE(v.rows[1].children.size() == 1);
  check_row(v.rows[1].children[0], "Linear_0", 101, 2, 2, 60, 40, 0, 0, 30);
}

TEST_CASE("module_view: no module information gives no view") {
  json_trace t;
  t.op("ProfilerStep#1", 0, 100, 1, 1, "user_annotation").op("aten::add", 10, 5, 1, 2);
  const trace_model model = t.load();
  const op_trees trees = build_op_tree(model);
  const module_view_result v = compute_module_view(model, trees);
  CHECK(v.kind == module_view_kind::none);
  CHECK(v.rows.empty());
}

TEST_CASE("module_view: Lightning view from [pl][module] names") {
  json_trace t;
  t.op("[pl][profile]run_training_batch", 0, 500, 1, 1)
      .op("[pl][module]mymodel.Net: model", 10, 300, 1, 2)
      .op("[pl][module]torch.nn.Linear: model.fc", 20, 100, 1, 3)
      .op("aten::linear", 30, 50, 1, 4)
      .op("[pl][module]torch.nn.ReLU: model.act", 150, 40, 1, 5)
      .op("[pl][module]mymodel.Net: model", 400, 50, 1, 6);
  const trace_model model = t.load(true);
  const op_trees trees = build_op_tree(model);
  const module_view_result v = compute_module_view(model, trees);
  REQUIRE(v.kind == module_view_kind::lightning);
  REQUIRE(v.rows.size() == 1);
  // model: 2 nodes, host 300 + 50, self (300 − 100 − 40) + 50.
  check_row(v.rows[0], "model", 0, 2, 0, 350, 210, 0, 0, 175);
  REQUIRE(v.rows[0].children.size() == 2);
  check_row(v.rows[0].children[0], "model.fc", 0, 1, 1, 100, 50, 0, 0, 100);
  check_row(v.rows[0].children[1], "model.act", 0, 1, 0, 40, 40, 0, 0, 40);
}

TEST_CASE("module_view: a kinetoscope trace with module scopes gives the model tree") {
  // tests/module_fixture.hpp written by the trace writer and loaded like any other file: two
  // passes of TinyNet(fc1: Linear, act: ReLU, fc2: Linear) plus an aten::add in TinyNet itself.
  const std::string text = kinetoscope::chrome_trace_string(module_fixture::tiny_net_trace());
  load_result r = load_trace_buffer(text, "tiny.pt.trace.json");
  REQUIRE(r.ok());
  const trace_model model = std::move(*r.model);
  const op_trees trees = build_op_tree(model);
  const module_view_result v = compute_module_view(model, trees);
  REQUIRE(v.kind == module_view_kind::module);
  CHECK(v.missing_modules == 0);
  REQUIRE(v.rows.size() == 1);
  // Host self of TinyNet: (100 − 30 − 10 − 40 − 5) + (100 − 20 − 10 − 40 − 5); its only direct
  // operator is aten::add (the aten::mul after it is outside, in the step).
  check_row(v.rows[0], "TinyNet_0", 11, 2, 2, 200, 40, 0, 0, 100);
  REQUIRE(v.rows[0].children.size() == 3);
  check_row(v.rows[0].children[0], "Linear_0", 12, 2, 2, 50, 8, 0, 0, 25);
  check_row(v.rows[0].children[1], "ReLU_0", 13, 2, 2, 20, 4, 0, 0, 10);
  check_row(v.rows[0].children[2], "Linear_1", 14, 2, 2, 80, 8, 0, 0, 40);
}
