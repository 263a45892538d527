// SPDX-License-Identifier: BSD-3-Clause
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kinetoscope/kinetoscope.hpp"
#include "test_support.hpp"

using namespace kinetoscope;
using test_support::count_named;

namespace {
struct window_log {
  std::vector<std::int64_t> step_nums;                 // prof.step_num() inside the callback
  std::vector<std::vector<std::string>> step_markers;  // ProfilerStep#N names of each window
};

trace_ready_fn recorder(window_log& log) {
  return [&log](profile& p) {
    log.step_nums.push_back(p.step_num());
    std::vector<std::string> markers;
    for (const auto& e : p.last_trace().events) {
      const std::string& n = p.last_trace().strings[e.name];
      if (n.rfind("ProfilerStep#", 0) == 0) markers.push_back(n);
    }
    log.step_markers.push_back(markers);
  };
}

void run_loop(profile& prof, int iterations) {
  prof.start();
  for (int i = 0; i < iterations; ++i) {
    { KINETOSCOPE_RANGE("train_step"); }
    prof.step();
  }
  prof.stop();
}
}  // namespace

TEST_CASE("profile: callback timing, step_num and ProfilerStep markers (torch.profiler's step rules)") {
  SUBCASE("wait=1 warmup=1 active=2, 8 iterations: callbacks at step_num 4 and 8") {
    window_log log;
    profile prof({.schedule = schedule({.wait = 1, .warmup = 1, .active = 2}), .on_trace_ready = recorder(log)});
    run_loop(prof, 8);
    CHECK(log.step_nums == std::vector<std::int64_t>{4, 8});
    REQUIRE(log.step_markers.size() == 2);
    CHECK(log.step_markers[0] == std::vector<std::string>{"ProfilerStep#2", "ProfilerStep#3"});
    CHECK(log.step_markers[1] == std::vector<std::string>{"ProfilerStep#6", "ProfilerStep#7"});
  }
  SUBCASE("wait=1 warmup=1 active=3, 3 iterations: partial window delivered at stop()") {
    window_log log;
    profile prof({.schedule = schedule({.wait = 1, .warmup = 1, .active = 3}), .on_trace_ready = recorder(log)});
    run_loop(prof, 3);
    CHECK(log.step_nums == std::vector<std::int64_t>{3});
    REQUIRE(log.step_markers.size() == 1);
    // steps 2 and 3 record; step 3 is the (empty) step open when stop() was called
    CHECK(log.step_markers[0] == std::vector<std::string>{"ProfilerStep#2", "ProfilerStep#3"});
  }
  SUBCASE("wait=0 warmup=3 active=2, 2 iterations: never called") {
    window_log log;
    profile prof({.schedule = schedule({.wait = 0, .warmup = 3, .active = 2}), .on_trace_ready = recorder(log)});
    run_loop(prof, 2);
    CHECK(log.step_nums.empty());
    CHECK_THROWS_AS((void)prof.last_trace(), std::logic_error);
  }
  SUBCASE("repeat=2: exactly two windows, then idle") {
    window_log log;
    profile prof({.schedule = schedule({.wait = 1, .warmup = 1, .active = 3, .repeat = 2}),
                  .on_trace_ready = recorder(log)});
    run_loop(prof, 12);
    CHECK(log.step_nums == std::vector<std::int64_t>{5, 10});
    CHECK(log.step_markers[1] ==
          std::vector<std::string>{"ProfilerStep#7", "ProfilerStep#8", "ProfilerStep#9"});
  }
  SUBCASE("no schedule: one callback at stop, no step markers") {
    window_log log;
    profile prof({.on_trace_ready = recorder(log)});
    run_loop(prof, 5);
    CHECK(log.step_nums == std::vector<std::int64_t>{5});
    CHECK(log.step_markers[0].empty());
    CHECK(count_named(prof.last_trace(), "train_step") == 5);
  }
}

TEST_CASE("profile: a recorded window holds exactly the ranges of its recorded steps") {
  profile prof({.schedule = schedule({.wait = 1, .warmup = 1, .active = 2})});
  prof.start();
  for (int i = 0; i < 4; ++i) {
    record_function r("iteration_" + std::to_string(i));
    r.end();
    prof.step();
  }
  prof.stop();
  const trace_data& d = prof.last_trace();
  CHECK(count_named(d, "iteration_0") == 0);  // wait
  CHECK(count_named(d, "iteration_1") == 0);  // warmup
  CHECK(count_named(d, "iteration_2") == 1);
  CHECK(count_named(d, "iteration_3") == 1);
  const cpu_event* step2 = test_support::find_named(d, "ProfilerStep#2");
  const cpu_event* it2 = test_support::find_named(d, "iteration_2");
  REQUIRE(step2 != nullptr);
  REQUIRE(it2 != nullptr);
  CHECK(step2->category == cpu_category::user_annotation);
  CHECK(step2->start_ns <= it2->start_ns);
  CHECK(it2->end_ns <= step2->end_ns);
}

TEST_CASE("profile: misuse is reported, ignored, and loses nothing") {
  test_support::log_capture logs;
  SUBCASE("step and stop without start") {
    profile prof;
    prof.step();
    prof.stop();
    CHECK(logs.contains("step() called before start()"));
    CHECK(logs.contains("stop() called while not running"));
    CHECK_FALSE(prof.running());
  }
  SUBCASE("start twice keeps the running window") {
    profile prof;
    prof.start();
    { KINETOSCOPE_RANGE("first"); }
    prof.start();
    { KINETOSCOPE_RANGE("second"); }
    prof.stop();
    CHECK(logs.contains("start() called while already running"));
    CHECK(count_named(prof.last_trace(), "first") == 1);
    CHECK(count_named(prof.last_trace(), "second") == 1);
  }
  SUBCASE("a second profile cannot start while one records") {
    profile a;
    profile b;
    a.start();
    b.start();
    CHECK(logs.contains("another profile is already recording"));
    CHECK_FALSE(b.running());
    a.stop();
    b.start();
    CHECK(b.running());
    b.stop();
  }
  SUBCASE("a throwing on_trace_ready: reported, window kept, later windows still delivered") {
    int calls = 0;
    profile prof({.schedule = schedule({.wait = 0, .warmup = 1, .active = 1}),
                  .on_trace_ready = [&](profile&) {
                    ++calls;
                    if (calls == 1) throw std::runtime_error("disk full");
                  }});
    prof.start();
    for (int i = 0; i < 4; ++i) {
      { KINETOSCOPE_RANGE("work"); }
      prof.step();
    }
    prof.stop();
    CHECK(calls == 2);
    CHECK(logs.contains("on_trace_ready failed: disk full"));
    CHECK(count_named(prof.last_trace(), "work") == 1);
  }
  SUBCASE("key_averages before any window") {
    profile prof;
    CHECK_THROWS_WITH_AS((void)prof.last_trace(), doctest::Contains("didn't finish running"), std::logic_error);
  }
  SUBCASE("cuda requested where it cannot record: one message, CPU continues") {
    profile prof({.activities = {activity::cpu, activity::cuda}});
    if (!cuda_available()) {
      REQUIRE(logs.messages.size() == 1);
      CHECK(logs.messages[0].starts_with("activity cuda: "));
      CHECK(logs.messages[0].ends_with("; recording CPU activity only"));
    }
    CHECK(prof.cuda_active() == cuda_available());
    prof.start();
    { KINETOSCOPE_RANGE("cpu_still_works"); }
    prof.stop();
    CHECK(count_named(prof.last_trace(), "cpu_still_works") == 1);
  }
}

TEST_CASE("profile: activities without cpu record no ranges") {
  test_support::log_capture logs;  // silence the cuda message
  profile prof({.activities = {activity::cuda}});
  prof.start();
  { KINETOSCOPE_RANGE("invisible"); }
  prof.stop();
  CHECK(prof.last_trace().events.empty());
}

TEST_CASE("profile: RAII stop and destructor") {
  int calls = 0;
  {
    profile prof({.on_trace_ready = [&](profile&) { ++calls; }});
    prof.start();
    KINETOSCOPE_RANGE("x");
  }
  CHECK(calls == 1);
  profile again;  // the global slot was released by the destructor
  again.start();
  CHECK(again.running());
  again.stop();
}

TEST_CASE("profile: options echoed, metadata and distributed info carried") {
  profile prof({.record_shapes = true, .profile_memory = true, .with_flops = true,
                .distributed = distributed_info{"nccl", 3, 8}});
  prof.add_metadata("run", "say \"hi\"");
  prof.add_metadata_json("config", "{\"lr\": 0.1}");
  prof.start();
  prof.stop();
  const trace_data& d = prof.last_trace();
  CHECK(d.record_shapes);
  CHECK(d.profile_memory);
  CHECK(d.with_flops);
  CHECK_FALSE(d.with_stack);
  REQUIRE(d.distributed.has_value());
  CHECK(d.distributed->rank == 3);
  CHECK(d.distributed->world_size == 8);
  REQUIRE(d.metadata.size() == 2);
  CHECK(d.metadata[0] == std::pair<std::string, std::string>{"run", "\"say \\\"hi\\\"\""});
  CHECK(d.metadata[1].second == "{\"lr\": 0.1}");
  CHECK(d.pid > 0);
  CHECK_FALSE(d.process_name.empty());
  CHECK(d.end_ns >= d.start_ns);
}

TEST_CASE("profile: acc_events keeps every window for events()") {
  profile prof({.schedule = schedule({.wait = 0, .warmup = 1, .active = 1}), .acc_events = true});
  prof.start();
  for (int i = 0; i < 4; ++i) {
    { KINETOSCOPE_RANGE("work"); }
    prof.step();
  }
  prof.stop();
  CHECK(count_named(prof.last_trace(), "work") == 1);
  std::size_t n = 0;
  for (const auto& e : prof.events())
    if (e.name == "work") ++n;
  CHECK(n == 2);
}
