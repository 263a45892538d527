// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file module_view.hpp
/// The Module view and the Lightning view of torch-tb-profiler 0.4.3
/// (docs/plugin-rules.md#module-view): the nn.Module hierarchy recovered from python_function
/// events (`Python id` / `Python parent id` / `Python module id`), or for Lightning traces from the
/// dotted `[pl][module]` names, with per-module statistics summed over the module nodes of the
/// operator tree (plugin-rules.md#operator-tree, #module-view).
///
/// **Example**:
/// @code
/// auto trees = build_op_tree(model);
/// module_view_result v = compute_module_view(model, trees);
/// if (v.kind == module_view_kind::module)
///   for (const module_row& r : v.rows) std::cout << r.name << " " << r.host_duration << "\n";
/// @endcode

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/model.hpp"
#include "analysis/op_tree.hpp"

namespace kinetoscope::analysis {

/// Which view the trace gets (plugin-rules.md#module-view).
enum class module_view_kind : std::uint8_t {
  none,       ///< no module information (the plugin's `/module` answers 404)
  module,     ///< nn.Module view from python_function events
  lightning,  ///< PyTorch Lightning `[pl][module]` view (replaces the Module view)
};

/// One module of the hierarchy with the statistics of every tree node of that (name, id)
/// (plugin-rules.md#module-view). Durations are µs, unrounded sums over the nodes, in tree order.
struct module_row {
  std::string name;                  ///< event name with "nn.Module: " removed (Lightning: dotted name)
  std::int64_t id = 0;               ///< "Python module id" (0 for Lightning modules)
  std::int64_t occurrences = 0;      ///< number of module nodes (the plugin's `occurences`)
  std::int64_t operators = 0;        ///< Σ over nodes of direct children that are operators (#operators)
  double host_duration = 0;          ///< Σ (end − start)
  double self_host_duration = 0;     ///< Σ host self (plugin-rules.md#operator-tree)
  double device_duration = 0;        ///< Σ device total
  double self_device_duration = 0;   ///< Σ device self (own runtimes + direct operator children)
  double avg_duration = 0;           ///< device_duration / occurrences if > 0, else host_duration / occurrences
  std::vector<module_row> children;  ///< sub-modules in hierarchy order
};

/// The Module (or Lightning) view of one trace file.
struct module_view_result {
  module_view_kind kind = module_view_kind::none;
  /// Top-level modules sorted by name (stable; equal names keep hierarchy order). Each distinct
  /// module tree appears once (equal trees of repeated calls are de-duplicated).
  std::vector<module_row> rows;
  /// Modules of the hierarchy that have no node in the operator tree: skipped with their
  /// sub-modules (the plugin aborted the whole view with a KeyError, quirk Q20).
  std::uint64_t missing_modules = 0;
};

/// Computes the view. `trees` must be built from `model`.
module_view_result compute_module_view(const trace_model& model, const op_trees& trees);

}  // namespace kinetoscope::analysis
