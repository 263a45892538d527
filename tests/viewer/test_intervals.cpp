// SPDX-License-Identifier: BSD-3-Clause
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "analysis/intervals.hpp"

using namespace kinetoscope::analysis;

TEST_CASE("intervals: merge sorts, merges overlapping and touching ranges, drops empty ones") {
  const interval_list in = {{10, 20}, {0, 5}, {5, 7}, {15, 30}, {40, 40}, {50, 45}, {31, 32}, {3, 4}};
  const interval_list out = merge_intervals(in);
  CHECK(out == interval_list{{0, 7}, {10, 30}, {31, 32}});
  CHECK(is_normalised(out));
  CHECK_FALSE(is_normalised(in));
  CHECK(total_length(out) == doctest::Approx(28));
  CHECK(merge_intervals({}).empty());
  CHECK(merge_intervals({{1, 1}}).empty());
  // A contained range does not shrink the enclosing one.
  CHECK(merge_intervals({{0, 10}, {2, 3}, {4, 12}}) == interval_list{{0, 12}});
}

TEST_CASE("intervals: is_normalised rejects touching neighbours") {
  CHECK_FALSE(is_normalised({{0, 5}, {5, 6}}));
  CHECK(is_normalised({{0, 5}, {5.5, 6}}));
  CHECK(is_normalised({}));
}

TEST_CASE("intervals: union") {
  const interval_list a = {{0, 2}, {4, 6}, {10, 12}};
  const interval_list b = {{1, 4}, {7, 8}, {12, 13}, {20, 21}};
  CHECK(union_intervals(a, b) == interval_list{{0, 6}, {7, 8}, {10, 13}, {20, 21}});
  CHECK(union_intervals(a, {}) == a);
  CHECK(union_intervals({}, b) == b);
}

TEST_CASE("intervals: intersection") {
  const interval_list a = {{0, 10}, {20, 30}};
  const interval_list b = {{5, 25}, {28, 40}};
  CHECK(intersect_intervals(a, b) == interval_list{{5, 10}, {20, 25}, {28, 30}});
  CHECK(intersect_intervals(b, a) == interval_list{{5, 10}, {20, 25}, {28, 30}});
  // Touching ranges do not intersect.
  CHECK(intersect_intervals({{0, 5}}, {{5, 9}}).empty());
  CHECK(intersect_intervals(a, {}).empty());
  // Identical ends advance both lists.
  CHECK(intersect_intervals({{0, 5}, {6, 8}}, {{2, 5}, {7, 9}}) == interval_list{{2, 5}, {7, 8}});
}

TEST_CASE("intervals: difference") {
  const interval_list a = {{0, 10}, {20, 30}};
  CHECK(subtract_intervals(a, {{2, 3}, {5, 22}, {25, 26}}) ==
        interval_list{{0, 2}, {3, 5}, {22, 25}, {26, 30}});
  CHECK(subtract_intervals(a, {{-5, 40}}).empty());
  CHECK(subtract_intervals(a, {}) == a);
  CHECK(subtract_intervals(a, {{10, 20}}) == a);
  CHECK(subtract_intervals({{0, 10}}, {{0, 4}, {6, 10}}) == interval_list{{4, 6}});
  // One subtrahend range spanning two minuend ranges.
  CHECK(subtract_intervals({{0, 4}, {6, 10}, {12, 14}}, {{3, 7}}) ==
        interval_list{{0, 3}, {7, 10}, {12, 14}});
}

TEST_CASE("intervals: clip and overlap length") {
  const interval_list a = {{0, 10}, {20, 30}, {40, 50}};
  CHECK(clip_intervals(a, 5, 45) == interval_list{{5, 10}, {20, 30}, {40, 45}});
  CHECK(clip_intervals(a, 10, 20).empty());
  CHECK(clip_intervals(a, 30, 10).empty());
  CHECK(overlap_length(a, 5, 45) == doctest::Approx(20));
  CHECK(overlap_length(a, 10, 20) == 0);
  CHECK(overlap_length(a, -100, 100) == doctest::Approx(30));
}

TEST_CASE("intervals: the parts of a priority walk are disjoint and cover the whole") {
  // Walk of docs/plugin-rules.md#step-time-breakdown in miniature: the parts must add up to the
  // covered length.
  const interval_list whole = {{0, 100}};
  const interval_list r1 = merge_intervals({{10, 20}, {50, 60}});
  const interval_list r2 = merge_intervals({{15, 55}});
  interval_list free = whole;
  const interval_list p1 = intersect_intervals(free, r1);
  free = subtract_intervals(free, p1);
  const interval_list p2 = intersect_intervals(free, r2);
  free = subtract_intervals(free, p2);
  CHECK(total_length(p1) == doctest::Approx(20));
  CHECK(total_length(p2) == doctest::Approx(30));
  CHECK(total_length(free) == doctest::Approx(50));
  CHECK(intersect_intervals(p1, p2).empty());
}

TEST_CASE("intervals: interval_merger is merge_intervals, ranges in start order or not") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> start(0, 1000), len(-2, 6);
  for (int round = 0; round < 200; ++round) {
    CAPTURE(round);
    interval_list all;
    const int n = round % 50;
    for (int i = 0; i < n; ++i) {
      const double s = std::round(start(rng) * 4) / 4;  // quarter steps: equal starts and touching ends
      all.push_back({s, s + std::round(len(rng) * 4) / 4});
    }
    const interval_list expected = merge_intervals(all);
    interval_list sorted = all;
    std::stable_sort(sorted.begin(), sorted.end(), [](const interval& a, const interval& b) { return a.start < b.start; });
    for (const interval_list* input : {&sorted, &all}) {
      interval_merger m;
      for (const interval& r : *input) m.add(r);
      CHECK(m.take() == expected);
      CHECK(m.take().empty());  // left empty
    }
  }
  // A sorted run, then one range out of order that bridges two merged ones.
  interval_merger m;
  for (const interval& r : interval_list{{0, 1}, {1, 2}, {5, 6}, {8, 9}, {4, 5}, {2, 4}}) m.add(r);
  CHECK(m.take() == interval_list{{0, 6}, {8, 9}});
}
