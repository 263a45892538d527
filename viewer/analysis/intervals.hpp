// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file intervals.hpp
/// Interval algebra on half-open ranges of doubles (µs), as torch-tb-profiler's `merge_ranges`,
/// `intersection_ranges_lists`, `subtract_ranges_lists` and `get_ranges_sum` did it
/// (`profiler/range_utils.py`; used by docs/plugin-rules.md#role-ranges, #step-time-breakdown).
///
/// A *normalised* interval list is sorted by start, every interval is non-empty
/// (`start < end`), and consecutive intervals are strictly separated (`next.start > prev.end`):
/// overlapping **and touching** ranges are merged (`[0,5)` + `[5,9)` → `[0,9)`).
/// Every function below that takes lists expects normalised lists and returns a normalised
/// list; `merge_intervals` makes any list normalised. Empty or inverted input ranges are
/// dropped by `merge_intervals` (they add no length, so lengths equal the plugin's).

#include <vector>

namespace kinetoscope::analysis {

/// A half-open range `[start, end)` in µs.
struct interval {
  double start = 0;
  double end = 0;

  double length() const noexcept { return end - start; }
  friend bool operator==(const interval&, const interval&) = default;
};

using interval_list = std::vector<interval>;

/// Sorts by start (stable) and merges overlapping or touching ranges; drops empty ranges.
interval_list merge_intervals(interval_list ranges);

/// merge_intervals() of ranges given one at a time, without holding them: while they come in
/// start order (the model's events are sorted by ts) each is merged at once, so the result is
/// all it keeps (a role of 1.3 M operator ranges that merge into a few thousand: a few KB
/// instead of 21 MB plus the sort's buffer); once one comes out of order the rest are kept and
/// merged at the end. The result is merge_intervals() of all of them, in any order.
class interval_merger {
 public:
  void add(const interval& r) {
    if (!(r.start < r.end)) return;
    if (!out_of_order_ && (merged_.empty() || r.start >= last_start_)) {
      last_start_ = r.start;
      if (!merged_.empty() && r.start <= merged_.back().end) {
        if (r.end > merged_.back().end) merged_.back().end = r.end;
      } else {
        merged_.push_back(r);
      }
      return;
    }
    out_of_order_ = true;
    rest_.push_back(r);
  }
  /// The merged ranges (the merger is left empty).
  interval_list take() {
    interval_list out = std::move(merged_);
    if (out_of_order_) {
      out.insert(out.end(), rest_.begin(), rest_.end());
      out = merge_intervals(std::move(out));
    }
    *this = interval_merger();
    return out;
  }

 private:
  interval_list merged_, rest_;
  double last_start_ = 0;
  bool out_of_order_ = false;
};

/// `a ∪ b` (both normalised).
interval_list union_intervals(const interval_list& a, const interval_list& b);

/// `a ∩ b` (both normalised).
interval_list intersect_intervals(const interval_list& a, const interval_list& b);

/// `a − b` (both normalised).
interval_list subtract_intervals(const interval_list& a, const interval_list& b);

/// `a ∩ [lo, hi)`; empty when `hi <= lo`.
interval_list clip_intervals(const interval_list& a, double lo, double hi);

/// Σ (end − start), summed in list order (as the plugin's `get_ranges_sum`).
double total_length(const interval_list& a) noexcept;

/// `total_length(clip_intervals(a, lo, hi))` without building the list.
double overlap_length(const interval_list& a, double lo, double hi) noexcept;

/// Whether the list is normalised (sorted, non-empty ranges, strictly separated).
bool is_normalised(const interval_list& a) noexcept;

}  // namespace kinetoscope::analysis
