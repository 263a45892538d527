// SPDX-License-Identifier: BSD-3-Clause
#include "analysis/report.hpp"

#include <exception>
#include <thread>

namespace kinetoscope::analysis {

full_report compute_report(const trace_model& model, const op_trees& trees, const report_options& options) {
  full_report r;
  // Two halves of roughly equal cost (measured on replicated ResNet-50 traces: overview +
  // recommendations ~ memory + operators + kernels + modules): each writes only
  // its own members of `r`, and both only read `model` and `trees`.
  auto first_half = [&] {
    if (options.with_overview) {
      r.overview = compute_overview(model, trees, options.overview);
      r.recommendations = compute_recommendations(model, trees, r.overview, options.recommendations);
    }
  };
  auto second_half = [&] {
    if (options.with_operators) {
      r.device_columns = operator_view_has_device_columns(model, trees);
      r.operators_by_name = operators_by_name(model, trees, r.device_columns);
      r.operators_by_shape = operators_by_name_and_input_shape(model, trees, r.device_columns);
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
