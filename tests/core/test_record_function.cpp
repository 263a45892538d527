// SPDX-License-Identifier: BSD-3-Clause
#include <doctest/doctest.h>

#include <string>
#include <thread>

#include "disabled_instrumented.hpp"
#include "kinetoscope/kinetoscope.hpp"
#include "test_support.hpp"

using namespace kinetoscope;
using test_support::count_named;
using test_support::find_named;

namespace {
void busy_ns(std::int64_t ns) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < end) {
  }
}
}  // namespace

TEST_CASE("record_function: nothing is recorded without a running profile") {
  { KINETOSCOPE_RANGE("before"); }
  profile prof;
  { KINETOSCOPE_RANGE("still before"); }
  prof.start();
  { KINETOSCOPE_RANGE("inside"); }
  prof.stop();
  { KINETOSCOPE_RANGE("after"); }
  const trace_data& d = prof.last_trace();
  CHECK(count_named(d, "before") == 0);
  CHECK(count_named(d, "still before") == 0);
  CHECK(count_named(d, "inside") == 1);
  CHECK(count_named(d, "after") == 0);
}

TEST_CASE("KINETOSCOPE_DISABLE: instrumentation built with it records nothing, beside code built without") {
  profile prof({.with_modules = true});
  prof.start();
  long ids = -1;
  {
    KINETOSCOPE_RANGE("enabled_outer");
    ids = kinetoscope_test::run_disabled_instrumentation(5);
  }
  { record_op op("enabled_op"); }
  prof.stop();
  const trace_data& d = prof.last_trace();
  CHECK(ids == 0);
  CHECK(count_named(d, "enabled_outer") == 1);
  CHECK(count_named(d, "enabled_op") == 1);
  for (const char* name : {"disabled_static", "disabled_dynamic", "disabled_op"}) {
    INFO(name);
    CHECK(count_named(d, name) == 0);
  }
  CHECK(d.modules.empty());
}

TEST_CASE("record_function: ranges nest with ordered, contained times and distinct ids") {
  profile prof;
  prof.start();
  {
    record_function outer("outer");
    busy_ns(20000);
    {
      KINETOSCOPE_RANGE("inner_a");
      busy_ns(30000);
    }
    {
      std::string dynamic = "inner_b_" + std::to_string(7);
      record_function inner(dynamic);
      busy_ns(30000);
    }
    busy_ns(20000);
  }
  prof.stop();
  const trace_data& d = prof.last_trace();
  REQUIRE(d.events.size() == 3);
  CHECK(test_support::names_in_order(d) == std::vector<std::string>{"outer", "inner_a", "inner_b_7"});
  const auto& o = d.events[0];
  const auto& a = d.events[1];
  const auto& b = d.events[2];
  CHECK(o.category == cpu_category::user_annotation);
  CHECK(o.start_ns <= a.start_ns);
  CHECK(a.end_ns <= b.start_ns);
  CHECK(b.end_ns <= o.end_ns);
  CHECK(a.end_ns - a.start_ns >= 30000);
  CHECK(o.end_ns - o.start_ns >= 100000);
  CHECK(o.start_ns >= d.start_ns);
  CHECK(o.end_ns <= d.end_ns);
  CHECK(o.external_id > 0);
  CHECK(a.external_id != o.external_id);
  CHECK(b.external_id != a.external_id);
  CHECK(o.tid == current_thread_id());
  CHECK(o.end_tid == o.tid);
}

TEST_CASE("record_function: times are Unix-epoch nanoseconds") {
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  profile prof;
  prof.start();
  { KINETOSCOPE_RANGE("x"); busy_ns(1000000); }
  prof.stop();
  const auto& e = prof.last_trace().events.at(0);
  CHECK(e.start_ns > now_ns - 1000000000LL);        // within a second of the wall clock
  CHECK(e.start_ns < now_ns + 5000000000LL);
  const std::int64_t dur = e.end_ns - e.start_ns;
  CHECK(dur >= 1000000);                            // at least the 1 ms busy wait
  CHECK(dur < 200000000);
}

TEST_CASE("record_function: long dynamic names are kept whole; end() is idempotent") {
  const std::string long_name(300, 'n');
  profile prof;
  prof.start();
  {
    record_function r(long_name);
    r.end();
    r.end();
  }
  prof.stop();
  const trace_data& d = prof.last_trace();
  REQUIRE(d.events.size() == 1);
  CHECK(d.strings[d.events[0].name] == long_name);
}

TEST_CASE("record_function: a range ended on another thread is async") {
  profile prof;
  prof.start();
  const std::int64_t main_tid = current_thread_id();
  std::int64_t other_tid = 0;
  {
    record_function r("future_range");
    std::thread t([&] {
      other_tid = current_thread_id();
      r.end();
    });
    t.join();
  }
  prof.stop();
  const cpu_event* e = find_named(prof.last_trace(), "future_range");
  REQUIRE(e != nullptr);
  CHECK(e->tid == main_tid);
  CHECK(e->end_tid == other_tid);
  CHECK(e->end_tid != e->tid);
}

TEST_CASE("record_op: cpu_op category, inputs only with record_shapes, links kept") {
  SUBCASE("without record_shapes the inputs are not stored") {
    profile prof;
    prof.start();
    { record_op op("aten::mm", {arg::tensor({64, 128}), arg::tensor({128, 256})}); }
    prof.stop();
    const trace_data& d = prof.last_trace();
    REQUIRE(d.events.size() == 1);
    CHECK(d.events[0].category == cpu_category::cpu_op);
    CHECK(d.events[0].input_count == 0);
    CHECK(d.inputs.empty());
  }
  SUBCASE("with record_shapes every input is stored with dims, strides, type and value") {
    profile prof({.record_shapes = true});
    prof.start();
    {
      record_op op("aten::conv2d",
                   {arg::tensor({2, 3, 16, 16}), arg::tensor({8, 3, 3, 3}), arg::none(),
                    arg::int_list({1, 1}), arg::int_list({0, 0}), arg::int_list({1, 1}),
                    arg::scalar(std::int64_t{1})},
                   op_links{.sequence_nr = 42});
      record_op inner(std::string("aten::add"), {arg::tensor({4}, "long int"), arg::scalar(0.5),
                                                 arg::boolean(false)});
    }
    prof.stop();
    const trace_data& d = prof.last_trace();
    REQUIRE(d.events.size() == 2);
    const cpu_event& conv = d.events[0];
    CHECK(d.strings[conv.name] == "aten::conv2d");
    CHECK(conv.sequence_nr == 42);
    CHECK(conv.fwd_thread_id == 0);
    REQUIRE(conv.input_count == 7);
    const op_input* in = &d.inputs[conv.first_input];
    CHECK(in[0].dims == std::vector<std::int64_t>{2, 3, 16, 16});
    CHECK(in[0].strides == std::vector<std::int64_t>{768, 256, 16, 1});
    CHECK(in[0].type == "float");
    CHECK(in[0].concrete.empty());
    CHECK(in[2].type.empty());
    CHECK(in[2].dims.empty());
    CHECK(in[3].type == "ScalarList");
    CHECK(in[3].concrete == "[1, 1]");
    CHECK(in[3].values == std::vector<std::int64_t>{1, 1});
    CHECK(in[6].type == "Scalar");
    CHECK(in[6].concrete == "1");
    CHECK(conv.flops == 0);  // with_flops off
    const cpu_event& add = d.events[1];
    REQUIRE(add.input_count == 3);
    CHECK(d.inputs[add.first_input].type == "long int");
    CHECK(d.inputs[add.first_input + 1].concrete == "0.5");
    CHECK(d.inputs[add.first_input + 2].concrete == "False");
    CHECK(add.sequence_nr == -1);
  }
}

TEST_CASE("record_op: with_flops computes PyTorch's FLOPs at collection") {
  profile prof({.with_flops = true});
  prof.start();
  {
    record_op mm("aten::mm", {arg::tensor({64, 128}), arg::tensor({128, 256})});
  }
  {
    record_op conv("aten::conv2d", {arg::tensor({2, 3, 16, 16}), arg::tensor({8, 3, 3, 3}), arg::none(),
                                    arg::int_list({1, 1}), arg::int_list({0, 0}), arg::int_list({1, 1}),
                                    arg::scalar(std::int64_t{1})});
  }
  { record_op mul("aten::mul", {arg::tensor({64, 256}), arg::tensor({64, 256})}); }
  { record_op linear("aten::linear", {arg::tensor({64, 256}), arg::tensor({10, 256})}); }
  prof.stop();
  const trace_data& d = prof.last_trace();
  CHECK(d.record_shapes);  // with_flops implies record_shapes
  CHECK(find_named(d, "aten::mm")->flops == 4194304);
  CHECK(find_named(d, "aten::conv2d")->flops == 169344);
  CHECK(find_named(d, "aten::mul")->flops == 16384);
  CHECK(find_named(d, "aten::linear")->flops == 0);
}

TEST_CASE("record_function: the External id of the innermost open range is tracked per thread") {
  profile prof;
  prof.start();
  detail::thread_buffer* b = detail::buffer();
  const std::int64_t before = b->current_external_id;
  {
    record_function outer("outer");
    CHECK(b->current_external_id == outer.id());
    {
      record_op op("aten::relu");
      CHECK(b->current_external_id == op.id());
    }
    CHECK(b->current_external_id == outer.id());
  }
  CHECK(b->current_external_id == before);
  prof.stop();
}
