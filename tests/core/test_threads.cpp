// SPDX-License-Identifier: BSD-3-Clause
#include <doctest/doctest.h>

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kinetoscope/kinetoscope.hpp"
#include "test_support.hpp"

using namespace kinetoscope;

TEST_CASE("threads: 64 threads x 20000 nested ranges are all recorded, exactly") {
  constexpr int n_threads = 64;
  constexpr int n_outer = 10000;  // each outer range holds one inner range: 20000 per thread
  profile prof;
  prof.start();
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < n_threads; ++t) {
    threads.emplace_back([&, t] {
      set_thread_name("worker_" + std::to_string(t));
      ready.fetch_add(1);
      while (ready.load() < n_threads) std::this_thread::yield();
      for (int i = 0; i < n_outer; ++i) {
        KINETOSCOPE_RANGE("outer");
        KINETOSCOPE_RANGE("inner");
      }
    });
  }
  for (auto& th : threads) th.join();  // threads exit before stop(): their queues must survive
  prof.stop();

  const trace_data& d = prof.last_trace();
  REQUIRE(d.events.size() == std::size_t(n_threads) * n_outer * 2);
  std::map<std::int64_t, std::pair<int, int>> per_thread;  // tid -> (outer, inner)
  std::set<std::int64_t> ids;
  std::size_t reversed = 0;
  for (const auto& e : d.events) {
    auto& c = per_thread[e.tid];
    (d.strings[e.name] == "outer" ? c.first : c.second) += 1;
    ids.insert(e.external_id);
    if (e.start_ns > e.end_ns) ++reversed;
  }
  CHECK(reversed == 0);
  CHECK(per_thread.size() == n_threads);
  for (const auto& [tid, c] : per_thread) {
    CHECK(c.first == n_outer);
    CHECK(c.second == n_outer);
  }
  CHECK(ids.size() == d.events.size());  // External ids are unique process-wide

  // every thread is named as it asked
  std::set<std::string> names;
  for (const auto& t : d.threads) names.insert(t.name);
  for (int t = 0; t < n_threads; ++t) CHECK(names.count("worker_" + std::to_string(t)) == 1);
}

TEST_CASE("threads: events are sorted by start, parents before children") {
  profile prof;
  prof.start();
  std::thread t([] {
    for (int i = 0; i < 1000; ++i) {
      KINETOSCOPE_RANGE("p");
      KINETOSCOPE_RANGE("c");
    }
  });
  for (int i = 0; i < 1000; ++i) KINETOSCOPE_RANGE("m");
  t.join();
  prof.stop();
  const trace_data& d = prof.last_trace();
  REQUIRE(d.events.size() == 3000);
  std::size_t out_of_order = 0;
  for (std::size_t i = 1; i < d.events.size(); ++i) {
    const auto& a = d.events[i - 1];
    const auto& b = d.events[i];
    if (!(a.start_ns < b.start_ns || (a.start_ns == b.start_ns && a.end_ns >= b.end_ns))) ++out_of_order;
  }
  CHECK(out_of_order == 0);
}

TEST_CASE("threads: a window only holds its own events; queues are reused across windows") {
  profile prof({.schedule = schedule({.wait = 0, .warmup = 1, .active = 1})});
  std::vector<std::size_t> counts;
  prof.start();
  for (int step = 0; step < 6; ++step) {
    for (int i = 0; i <= step; ++i) KINETOSCOPE_RANGE("work");
    prof.step();
    if (prof.current_action() == profiler_action::warmup && step > 0)
      counts.push_back(test_support::count_named(prof.last_trace(), "work"));
  }
  prof.stop();
  // windows are steps 1, 3, 5 with 2, 4, 6 ranges; stop() during the warm-up of step 6 keeps
  // the last completed window
  CHECK(counts == std::vector<std::size_t>{2, 4, 6});
  CHECK(test_support::count_named(prof.last_trace(), "work") == 6);
}
