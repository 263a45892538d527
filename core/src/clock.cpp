// SPDX-License-Identifier: BSD-3-Clause
#include "clock.hpp"

#include <ctime>
#include <mutex>

#include "kinetoscope/detail/recorder.hpp"

namespace kinetoscope::detail {
namespace {

std::int64_t clock_ns(clockid_t id) noexcept {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

struct sample {
  std::uint64_t tick;
  std::int64_t mono_ns;
};

// The tick read between two monotonic reads, from the tightest of a few tries: bounds the error
// of one sample to the duration of a clock_gettime call.
sample take_sample() noexcept {
  sample best{};
  std::int64_t best_gap = -1;
  for (int i = 0; i < 5; ++i) {
    const std::int64_t a = clock_ns(CLOCK_MONOTONIC);
    const std::uint64_t t = now_ticks();
    const std::int64_t b = clock_ns(CLOCK_MONOTONIC);
    if (best_gap < 0 || b - a < best_gap) {
      best_gap = b - a;
      best = sample{t, a + (b - a) / 2};
    }
  }
  return best;
}

std::mutex g_mutex;
bool g_anchored = false;
sample g_anchor{};

}  // namespace

std::int64_t unix_now_ns() noexcept { return clock_ns(CLOCK_REALTIME); }

void clock_anchor() noexcept {
  std::lock_guard lock(g_mutex);
  if (!g_anchored) {
    g_anchor = take_sample();
    g_anchored = true;
  }
}

tick_converter clock_calibrate() noexcept {
  clock_anchor();
  std::lock_guard lock(g_mutex);
  sample now = take_sample();
#if defined(__x86_64__) || defined(__i386__)
  constexpr std::int64_t min_span_ns = 2000000;  // 2 ms: rate error ~1e-5 from sampling jitter
  while (now.mono_ns - g_anchor.mono_ns < min_span_ns) now = take_sample();
  const double ns_per_tick = static_cast<double>(now.mono_ns - g_anchor.mono_ns) /
                             static_cast<double>(now.tick - g_anchor.tick);
#else
  const double ns_per_tick = 1.0;  // ticks are CLOCK_MONOTONIC ns
#endif
  // Shift monotonic onto the Unix epoch with the offset measured now.
  const std::int64_t mono_a = clock_ns(CLOCK_MONOTONIC);
  const std::int64_t real = clock_ns(CLOCK_REALTIME);
  const std::int64_t mono_b = clock_ns(CLOCK_MONOTONIC);
  const std::int64_t offset = real - (mono_a + (mono_b - mono_a) / 2);
  return tick_converter{now.tick, now.mono_ns + offset, ns_per_tick, offset};
}

}  // namespace kinetoscope::detail
