// SPDX-License-Identifier: BSD-3-Clause
#include "analysis/report.hpp"

#include <exception>
#include <thread>

namespace kinetoscope::analysis {

full_report compute_report(const trace_model& model, const op_trees& trees, const report_options& options) {
  full_report r;
  // Two halves: each writes only its own members of `r`, and both only read `model` and
  // `trees`. The operator table (and pies) by name and shape goes with the overview: measured
  // on a 10 GB trace the halves take about 3.2 and 3.3 s beside each other (the overview and
  // recommendations alone were 1.5 s against 3.1 s for the rest). The memory view comes last:
  // its working memory and the overview's are the two largest (see ARCHITECTURE.md).
  if (options.with_operators) r.device_columns = operator_view_has_device_columns(model, trees);
  auto first_half = [&] {
    if (options.with_overview) {
      r.overview = compute_overview(model, trees, options.overview);
      r.recommendations = compute_recommendations(model, trees, r.overview, options.recommendations);
    }
    if (options.with_operators) {
      operator_table t = operator_table_by_name_and_input_shape(model, trees, r.device_columns);
      r.operators_by_shape = std::move(t.rows);
      r.pies_by_shape = std::move(t.pies);
    }
  };
  auto second_half = [&] {
    if (options.with_operators) {
      operator_table t = operator_table_by_name(model, trees, r.device_columns);
      r.operators_by_name = std::move(t.rows);
      r.pies_by_name = std::move(t.pies);
    }
    if (options.with_kernels) {
      r.kernels_by_name = kernels_by_name(model, trees);
      r.kernels_by_operator = kernels_by_name_and_operator(model, trees);
    }
    if (options.with_memory) r.memory = compute_memory(model, trees, options.memory_range);
    if (options.with_modules) r.modules = compute_module_view(model, trees);
  };
  if (options.threads < 2) {
    first_half();
    second_half();
    return r;
  }
  std::exception_ptr error;
  std::thread worker([&] {
    try {
      second_half();
    } catch (...) {
      error = std::current_exception();
    }
  });
  try {
    first_half();
  } catch (...) {
    worker.join();
    throw;
  }
  worker.join();
  if (error) std::rethrow_exception(error);
  return r;
}

}  // namespace kinetoscope::analysis
