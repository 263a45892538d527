// SPDX-License-Identifier: BSD-3-Clause
// module_scope: recorded only under with_modules, nesting per thread, instance numbering,
// window rules, and invisibility to key_averages.
#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include "kinetoscope/kinetoscope.hpp"
#include "test_support.hpp"

using namespace kinetoscope;

namespace {

/// The module calls of `d` whose class name is `type`, in recorded (start) order.
std::vector<module_event> calls_of(const trace_data& d, std::string_view type) {
  std::vector<module_event> out;
  for (const module_event& m : d.modules)
    if (d.strings[m.type] == type) out.push_back(m);
  return out;
}

/// One forward pass of a small model: root (""), two Linear instances and a ReLU.
void forward_pass(const std::string& prefix) {
  module_scope root("", "ScopeNet");
  { module_scope fc1(prefix + "fc1", "ScopeLinear", 40); KINETOSCOPE_RANGE("fc1 work"); }
  { module_scope act("act", "ScopeReLU"); }
  { module_scope fc2(prefix + "fc2", "ScopeLinear", 18); }
}

}  // namespace

TEST_CASE("module_scope: recorded only while a profile with with_modules records") {
  { module_scope before("", "NotRecordedA"); }
  profile plain;
  plain.start();
  { module_scope m("", "NotRecordedB"); KINETOSCOPE_RANGE("plain range"); }
  plain.stop();
  CHECK(plain.last_trace().modules.empty());
  CHECK(test_support::count_named(plain.last_trace(), "plain range") == 1);
  CHECK_FALSE(plain.last_trace().with_modules);

  profile prof({.with_modules = true});
  prof.start();
  module_scope m("", "RecordedC");
  CHECK(m.id() > 0);
  prof.stop();
  // Began inside the window but ended after it: dropped, as Kineto drops open ranges.
  CHECK(prof.last_trace().modules.empty());
  CHECK(prof.last_trace().with_modules);
}

TEST_CASE("module_scope: nesting, ids, instance numbers and params over two passes") {
  profile prof({.with_modules = true});
  prof.start();
  forward_pass("");
  forward_pass("");
  prof.stop();
  const trace_data& d = prof.last_trace();
  REQUIRE(d.modules.size() == 8);

  const auto roots = calls_of(d, "ScopeNet");
  const auto linears = calls_of(d, "ScopeLinear");
  const auto relus = calls_of(d, "ScopeReLU");
  REQUIRE(roots.size() == 2);
  REQUIRE(linears.size() == 4);
  REQUIRE(relus.size() == 2);

  // Top-level calls have no parent; every child points at the root call of its pass.
  CHECK(roots[0].parent_call_id == 0);
  CHECK(roots[1].parent_call_id == 0);
  CHECK(linears[0].parent_call_id == roots[0].call_id);
  CHECK(relus[0].parent_call_id == roots[0].call_id);
  CHECK(linears[1].parent_call_id == roots[0].call_id);
  CHECK(linears[2].parent_call_id == roots[1].call_id);
  CHECK(relus[1].parent_call_id == roots[1].call_id);
  CHECK(linears[3].parent_call_id == roots[1].call_id);

  // Calls are distinct, instances are shared: fc1 is Linear_0, fc2 Linear_1 in both passes.
  CHECK(roots[0].call_id != roots[1].call_id);
  CHECK(d.strings[linears[0].path] == "fc1");
  CHECK(d.strings[linears[1].path] == "fc2");
  CHECK(linears[0].instance == 0);
  CHECK(linears[1].instance == 1);
  CHECK(linears[2].instance == 0);
  CHECK(linears[3].instance == 1);
  CHECK(linears[0].module_id == linears[2].module_id);
  CHECK(linears[1].module_id == linears[3].module_id);
  CHECK(linears[0].module_id != linears[1].module_id);
  CHECK(roots[0].module_id == roots[1].module_id);
  CHECK(roots[0].instance == 0);
  CHECK(linears[0].params == 40);
  CHECK(linears[1].params == 18);
  CHECK(relus[0].params == 0);

  // Children lie inside their parent, in call order; modules sorted by start.
  CHECK(roots[0].start_ns <= linears[0].start_ns);
  CHECK(linears[0].end_ns <= relus[0].start_ns);
  CHECK(relus[0].end_ns <= linears[1].start_ns);
  CHECK(linears[1].end_ns <= roots[0].end_ns);
  CHECK(roots[0].end_ns <= roots[1].start_ns);
  for (std::size_t i = 1; i < d.modules.size(); ++i) CHECK(d.modules[i - 1].start_ns <= d.modules[i].start_ns);
  for (const module_event& m : d.modules) CHECK(m.tid == roots[0].tid);

  // Module scopes are no table rows (PyTorch's tables skip python_function events).
  const averages rows = prof.key_averages();
  CHECK(rows.find("fc1 work") != nullptr);
  CHECK(rows.find("ScopeLinear") == nullptr);
  CHECK(rows.find("nn.Module: ScopeLinear_0") == nullptr);
  CHECK(rows.size() == 1);
}

TEST_CASE("module_scope: instance numbers and module ids are stable across windows") {
  std::int64_t first_id = 0;
  for (int window = 0; window < 2; ++window) {
    profile prof({.with_modules = true});
    prof.start();
    { module_scope a("enc", "StableBlock", 7); }
    { module_scope b("dec", "StableBlock", 9); }
    prof.stop();
    const auto blocks = calls_of(prof.last_trace(), "StableBlock");
    REQUIRE(blocks.size() == 2);
    CHECK(blocks[0].instance == 0);
    CHECK(blocks[1].instance == 1);
    if (window == 0) first_id = blocks[0].module_id;
    CHECK(blocks[0].module_id == first_id);
    CHECK(blocks[1].module_id == first_id + 1);
  }
}

TEST_CASE("module_scope: a parent outside the window leaves its children top-level") {
  profile prof({.with_modules = true});
  module_scope outer_before("", "EarlyOuter");  // begins before start(): never recorded
  prof.start();
  { module_scope inner("inner", "EarlyInner"); }
  module_scope open_late("", "LateOuter");      // still open at stop(): dropped
  { module_scope child("child", "LateChild"); }
  prof.stop();
  const trace_data& d = prof.last_trace();
  REQUIRE(d.modules.size() == 2);
  CHECK(d.strings[d.modules[0].type] == "EarlyInner");
  CHECK(d.modules[0].parent_call_id == 0);
  CHECK(d.strings[d.modules[1].type] == "LateChild");
  CHECK(d.modules[1].parent_call_id == 0);  // its parent call is not in the window
}

TEST_CASE("module_scope: each thread has its own nesting") {
  profile prof({.with_modules = true});
  prof.start();
  {
    module_scope main_root("", "ThreadMain");
    std::thread worker([] { module_scope w("worker", "ThreadWorker", 3); });
    worker.join();
  }
  prof.stop();
  const trace_data& d = prof.last_trace();
  const auto main_calls = calls_of(d, "ThreadMain");
  const auto worker_calls = calls_of(d, "ThreadWorker");
  REQUIRE(main_calls.size() == 1);
  REQUIRE(worker_calls.size() == 1);
  CHECK(worker_calls[0].parent_call_id == 0);  // not the main thread's open scope
  CHECK(worker_calls[0].tid != main_calls[0].tid);
  CHECK(worker_calls[0].params == 3);
}
