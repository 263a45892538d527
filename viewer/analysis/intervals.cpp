// SPDX-License-Identifier: BSD-3-Clause
#include "analysis/intervals.hpp"

#include <algorithm>

namespace kinetoscope::analysis {

interval_list merge_intervals(interval_list ranges) {
  std::erase_if(ranges, [](const interval& r) { return !(r.start < r.end); });
  std::stable_sort(ranges.begin(), ranges.end(),
                   [](const interval& x, const interval& y) { return x.start < y.start; });
  interval_list out;
  out.reserve(ranges.size());
  for (const interval& r : ranges) {
    if (!out.empty() && r.start <= out.back().end) {
      out.back().end = std::max(out.back().end, r.end);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

interval_list union_intervals(const interval_list& a, const interval_list& b) {
  interval_list out;
  out.reserve(a.size() + b.size());
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < a.size() || j < b.size()) {
    const interval& next = (j == b.size() || (i < a.size() && a[i].start <= b[j].start)) ? a[i++] : b[j++];
    if (!out.empty() && next.start <= out.back().end) {
      out.back().end = std::max(out.back().end, next.end);
    } else {
      out.push_back(next);
    }
  }
  return out;
}

interval_list intersect_intervals(const interval_list& a, const interval_list& b) {
  interval_list out;
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < a.size() && j < b.size()) {
    const double lo = std::max(a[i].start, b[j].start);
    const double hi = std::min(a[i].end, b[j].end);
    if (lo < hi) out.push_back({lo, hi});
    // Advance whichever ends first (both when they end together).
    if (a[i].end < b[j].end) {
      ++i;
    } else if (b[j].end < a[i].end) {
      ++j;
    } else {
      ++i;
      ++j;
    }
  }
  return out;
}

interval_list subtract_intervals(const interval_list& a, const interval_list& b) {
  interval_list out;
  std::size_t j = 0;
  for (const interval& r : a) {
    double cur = r.start;
    // Skip subtrahend ranges that end before (or at) the current point.
    while (j < b.size() && b[j].end <= cur) ++j;
    std::size_t k = j;
    while (k < b.size() && b[k].start < r.end) {
      if (b[k].start > cur) out.push_back({cur, b[k].start});
      cur = std::max(cur, b[k].end);
      if (cur >= r.end) break;
      ++k;
    }
    if (cur < r.end) out.push_back({cur, r.end});
  }
  return out;
}

interval_list clip_intervals(const interval_list& a, double lo, double hi) {
  interval_list out;
  if (!(lo < hi)) return out;
  auto it = std::upper_bound(a.begin(), a.end(), lo,
                             [](double v, const interval& r) { return v < r.end; });
  for (; it != a.end() && it->start < hi; ++it) {
    const double s = std::max(it->start, lo);
    const double e = std::min(it->end, hi);
    if (s < e) out.push_back({s, e});
  }
  return out;
}

double total_length(const interval_list& a) noexcept {
  double sum = 0;
  for (const interval& r : a) sum += r.end - r.start;
  return sum;
}

double overlap_length(const interval_list& a, double lo, double hi) noexcept {
  double sum = 0;
  if (!(lo < hi)) return sum;
  auto it = std::upper_bound(a.begin(), a.end(), lo,
                             [](double v, const interval& r) { return v < r.end; });
  for (; it != a.end() && it->start < hi; ++it) {
    const double s = std::max(it->start, lo);
    const double e = std::min(it->end, hi);
    if (s < e) sum += e - s;
  }
  return sum;
}

bool is_normalised(const interval_list& a) noexcept {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!(a[i].start < a[i].end)) return false;
    if (i > 0 && !(a[i].start > a[i - 1].end)) return false;
  }
  return true;
}

}  // namespace kinetoscope::analysis
