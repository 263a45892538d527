// SPDX-License-Identifier: BSD-3-Clause
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kinetoscope::detail {

/// str(input_shapes) in Python: "[[5, 64, 56, 56], [64, 64, 3, 3], []]" (the grouping key of
/// key_averages(group_by_input_shape) and the table's Input Shapes cell).
inline std::string shapes_text(const std::vector<std::vector<std::int64_t>>& shapes) {
  std::string s = "[";
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (i) s += ", ";
    s += '[';
    for (std::size_t j = 0; j < shapes[i].size(); ++j) {
      if (j) s += ", ";
      s += std::to_string(shapes[i][j]);
    }
    s += ']';
  }
  s += ']';
  return s;
}

}  // namespace kinetoscope::detail
