// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file report.hpp
/// Every single-trace view of `kinetoscope analyze` computed at once: the independent views run
/// concurrently on two threads. The views only read the trace_model and the op_trees (both are
/// taken by const reference and hold no caches), so sharing them between threads is safe.

#include <optional>
#include <utility>
#include <vector>

#include "analysis/kernel_view.hpp"
#include "analysis/memory_view.hpp"
#include "analysis/model.hpp"
#include "analysis/module_view.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/operator_view.hpp"
#include "analysis/overview.hpp"
#include "analysis/recommendations.hpp"

namespace kinetoscope::analysis {

/// What to compute and how.
struct report_options {
  overview_options overview;
  recommendation_options recommendations;
  bool with_overview = true;      ///< overview + recommendations
  bool with_operators = true;     ///< operators_by_name + operators_by_shape, and their pies
  bool with_kernels = true;       ///< kernels_by_name + kernels_by_operator
  bool with_memory = true;
  bool with_modules = true;
  /// Memory events and statistics tables restricted to [first, second] absolute µs
  /// (docs/plugin-rules.md#memory-view).
  std::optional<std::pair<double, double>> memory_range;
  /// Threads to use (1 = sequential, in the caller's thread). The work is split in two halves.
  unsigned threads = 2;
};

/// The views (members left empty / default when not requested).
struct full_report {
  overview_result overview;
  std::vector<recommendation> recommendations;
  std::vector<operator_row> operators_by_name, operators_by_shape;
  /// The Operator view's pies of the same groups (operator_pies_by_name, ..._and_input_shape).
  operator_pies pies_by_name, pies_by_shape;
  std::vector<kernel_row> kernels_by_name;
  std::vector<kernel_op_row> kernels_by_operator;
  memory_result memory;
  module_view_result modules;
  bool device_columns = false;    ///< operator_view_has_device_columns() (set with the operators)
};

/// Computes the requested views of `model` (`trees` built from it). Results equal the
/// sequential calls exactly. Exceptions of any view are rethrown in the caller's thread.
full_report compute_report(const trace_model& model, const op_trees& trees, const report_options& options = {});

}  // namespace kinetoscope::analysis
