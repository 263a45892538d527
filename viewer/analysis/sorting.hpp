// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file sorting.hpp
/// Stable sorts that skip input already in order: the analysis sorts many tables that the
/// loader's time order leaves sorted, and a stable sort of sorted input still costs its passes
/// and a buffer of half the range.

#include <algorithm>
#include <cmath>

namespace kinetoscope::analysis {

/// std::stable_sort, skipped when the range is already in order: the same sequence, when `less`
/// is a strict weak order.
template <class It, class Less>
void stable_sort_if_needed(It first, It last, Less less) {
  if (!std::is_sorted(first, last, less)) std::stable_sort(first, last, less);
}

/// Whether a stable sort of [first, last) by the double `key(x)` would leave it as it is: the
/// keys in order and none NaN. (A NaN key makes the comparison no strict weak order, where
/// is_sorted and stable_sort disagree: a range holding one counts as unsorted, so it is always
/// sorted, as without the skip.)
template <class It, class Key>
bool in_key_order(It first, It last, Key key) {
  return std::none_of(first, last, [&](const auto& x) { return std::isnan(key(x)); }) &&
         std::is_sorted(first, last, [&](const auto& a, const auto& b) { return key(a) < key(b); });
}

/// std::stable_sort by the double `key(x)`, skipped when in_key_order().
template <class It, class Key>
void stable_sort_by_key_if_needed(It first, It last, Key key) {
  if (!in_key_order(first, last, key))
    std::stable_sort(first, last, [&](const auto& a, const auto& b) { return key(a) < key(b); });
}

}  // namespace kinetoscope::analysis
