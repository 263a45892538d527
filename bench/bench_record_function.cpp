// SPDX-License-Identifier: BSD-3-Clause
// Per-range recording overhead (issue goal: <= 25 ns with the profiler on, <= 1 ns off).
// Prints figures; it is a benchmark, not a test. Run: meson test -C build --suite bench -v
// or build/bench/bench_record_function directly. Best of several rounds, as the machine is shared.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "kinetoscope/kinetoscope.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Keeps the loop from being optimised away.
inline void sink(int i) { asm volatile("" : : "r"(i) : "memory"); }

template <class Body>
double best_ns_per_iteration(int rounds, int iterations, Body body, bool with_profile,
                             double* collect_ns_per_event = nullptr,
                             const kinetoscope::profile_options& options = {}) {
  double best = 1e30;
  double best_collect = 1e30;
  for (int r = 0; r < rounds; ++r) {
    kinetoscope::profile prof(options);
    if (with_profile) prof.start();
    const auto t0 = clock_type::now();
    for (int i = 0; i < iterations; ++i) body(i);
    const double s = seconds_since(t0);
    const auto t1 = clock_type::now();
    if (with_profile) prof.stop();
    const double collect = seconds_since(t1);
    best = std::min(best, s * 1e9 / iterations);
    best_collect = std::min(best_collect, collect * 1e9 / iterations);
  }
  if (collect_ns_per_event != nullptr) *collect_ns_per_event = best_collect;
  return best;
}

/// with_stack at a given call depth: recurses `depth` frames, then times ranges there. Prints
/// the per-range cost, the collection cost per event (symbolization cached after the first
/// round) and the number of frames one range actually records.
[[gnu::noinline]] int stack_bench_at_depth(int depth, int iterations, int rounds, double no_stack_ns) {
  if (depth > 0) {
    const int frames = stack_bench_at_depth(depth - 1, iterations, rounds, no_stack_ns);
    sink(depth);  // not a tail call: every level stays a frame
    return frames;
  }
  double collect = 0;
  const double ns = best_ns_per_iteration(rounds, iterations, [](int i) {
    KINETOSCOPE_RANGE("stacked");
    sink(i);
  }, true, &collect, {.with_stack = true});
  kinetoscope::profile prof({.with_stack = true});
  prof.start();
  { KINETOSCOPE_RANGE("stacked"); }
  prof.stop();
  const int frames = static_cast<int>(prof.last_trace().events.at(0).frame_count);
  std::printf("  with_stack, %2d frames deep                 : %6.2f ns/range (+%.2f ns), "
              "collection %.2f ns/event\n",
              frames, ns, ns - no_stack_ns, collect);
  return frames;
}

/// The first stop() of a process with stacks: libdw reads /proc/self/maps and the debug
/// information of every module a frame falls in. Later windows reuse the cache.
void symbolizer_startup() {
  kinetoscope::profile prof({.with_stack = true});
  prof.start();
  { KINETOSCOPE_RANGE("first"); }
  const auto t0 = clock_type::now();
  prof.stop();
  std::printf("  with_stack, first stop() of the process    : %6.2f ms (symbolizer start-up)\n",
              seconds_since(t0) * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::max(1000, std::atoi(argv[1])) : 2000000;
  const int rounds = 5;
  std::printf("bench_record_function: %d ranges per round, best of %d rounds\n", iterations, rounds);

  const double off = best_ns_per_iteration(rounds, iterations * 10, [](int i) {
    KINETOSCOPE_RANGE("off");
    sink(i);
  }, false);
  std::printf("  KINETOSCOPE_RANGE, no profile running      : %6.2f ns/range (goal <= 1 ns)\n", off);

  const double baseline = best_ns_per_iteration(rounds, iterations, [](int i) { sink(i); }, true);
  double collect = 0;
  const double on = best_ns_per_iteration(rounds, iterations, [](int i) {
    KINETOSCOPE_RANGE("on");
    sink(i);
  }, true, &collect);
  std::printf("  KINETOSCOPE_RANGE, profile recording       : %6.2f ns/range (goal <= 25 ns; loop %.2f ns)\n",
              on, baseline);
  std::printf("  collection at stop()                       : %6.2f ns/event\n", collect);

  const double nested = best_ns_per_iteration(rounds, iterations / 2, [](int i) {
    KINETOSCOPE_RANGE("outer");
    KINETOSCOPE_RANGE("inner");
    sink(i);
  }, true);
  std::printf("  two nested ranges, profile recording       : %6.2f ns/range\n", nested / 2);

  const std::string dyn = "dynamic_name_of_a_range";
  const double dynamic = best_ns_per_iteration(rounds, iterations, [&](int i) {
    kinetoscope::record_function r(dyn);
    sink(i);
  }, true);
  std::printf("  record_function(std::string), recording    : %6.2f ns/range\n", dynamic);

  const double op = best_ns_per_iteration(rounds, iterations, [](int i) {
    kinetoscope::record_op o("aten::mm");
    sink(i);
  }, true);
  std::printf("  record_op (no shapes), recording           : %6.2f ns/op\n", op);

  double shapes = 0;
  {
    double best = 1e30;
    for (int r = 0; r < rounds; ++r) {
      kinetoscope::profile prof({.record_shapes = true});
      prof.start();
      const int n = iterations / 4;
      const auto t0 = clock_type::now();
      for (int i = 0; i < n; ++i) {
        kinetoscope::record_op o("aten::mm", {kinetoscope::arg::tensor({64, 128}),
                                             kinetoscope::arg::tensor({128, 256})});
        sink(i);
      }
      best = std::min(best, seconds_since(t0) * 1e9 / n);
      prof.stop();
    }
    shapes = best;
  }
  std::printf("  record_op with 2 tensor inputs, shapes on  : %6.2f ns/op\n", shapes);

  // with_stack: up to 72 return addresses (576 bytes) per range, so fewer ranges per round.
  symbolizer_startup();
  for (const int depth : {0, 10, 30, 60}) stack_bench_at_depth(depth, iterations / 20, rounds, on);
  return 0;
}
