// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file diff_view.hpp
/// The Diff view of torch-tb-profiler 0.4.3 (docs/plugin-rules.md#diff-view): two operator trees
/// (a baseline and an experimental run) aligned on their DataLoader / Module / Backward /
/// Optimizer / ProfilerStep nodes, per diff node durations and operator aggregates, and the
/// derived chart and table the UI showed (plugin-rules.md#diff-view).
///
///     baseline tree ─┐                        ┌─ diff_node "0" (top-level sequences)
///                    ├─ align         ───────►├── "0-0" CompositeNodes | CompositeNodes
///     experimental ──┘                        ├── "0-1" enumerate(DataLoader)#… | same
///                                             └── …           (recursing into matched nodes)
///     (alignment: docs/plugin-rules.md#diff-view)
///
/// **Example**:
/// @code
/// diff_node root = compute_diff(base_trees, exp_trees);
/// for (const diff_bar& b : diff_bars(root)) std::cout << b.label << " " << b.delta << "\n";
/// for (const diff_table_row& r : diff_table(root)) std::cout << r.name << " " << r.host_duration.delta << "\n";
/// @endcode

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/op_tree.hpp"

namespace kinetoscope::analysis {

/// Which tree of each side is compared (quirk Q9).
struct diff_options {
  /// false (default, Q9 fixed): the main thread's tree (op_trees::main_thread; the first tree
  /// when there is none). true: "the first tree" (plugin-rules.md#main-tree), as the plugin did.
  bool use_first_tree = false;
};

/// Operator aggregate by name (plugin-rules.md#operator-view) over the operators inside one side.
/// Unrounded µs.
struct diff_op_stats {
  std::string name;
  std::int64_t calls = 0;
  double host_duration = 0;         ///< Σ host total
  double device_duration = 0;       ///< Σ device total
  double self_host_duration = 0;    ///< Σ host self
  double self_device_duration = 0;  ///< Σ device self
};

/// One side of a diff node (plugin-rules.md#diff-view).
struct diff_side {
  /// The node's name, "CompositeNodes" for a list of ≥ 2 nodes, "Blank" for an empty one.
  std::string name;
  double duration = 0;              ///< host duration (end − start), Σ for composites, 0 for Blank
  double device_duration = 0;       ///< device total (Σ)
  double total_duration = 0;        ///< Σ per node (device total if non-zero else host duration)
  /// Operators (plugin-rules.md#operators) inside the side's subtrees aggregated by name, in
  /// first-seen post-order (children before their parent).
  std::vector<diff_op_stats> aggs;
  std::vector<std::uint32_t> nodes; ///< the side's op_trees node indices (1 = single node)
  bool blank() const noexcept { return nodes.empty(); }
  bool composite() const noexcept { return nodes.size() > 1; }
};

/// A node of the diff tree.
struct diff_node {
  std::string path;                 ///< "0" for the root, "<parent>-<index>" below
  diff_side baseline;
  diff_side experimental;
  std::vector<diff_node> children;
};

/// Aligns the trees of two trace files (plugin-rules.md#diff-view) and fills every diff node
/// (#diff-view).
diff_node compute_diff(const op_trees& baseline, const op_trees& experimental, const diff_options& options = {});

/// The node at `path` ("0", "0-3", "0-3-1"), or nullptr (the plugin's 404).
const diff_node* find_diff_node(const diff_node& root, std::string_view path);

/// One bar of the UI's charts for a child of the selected node (plugin-rules.md#diff-view).
struct diff_bar {
  std::string label;                ///< display label (prefix rules of plugin-rules.md#diff-view)
  std::string path;                 ///< the child's path (clicking drills down)
  double baseline = 0;              ///< baseline total_duration
  double experimental = 0;          ///< experimental total_duration
  double baseline_trend = 0;        ///< running Σ of `baseline` over the shown bars
  double experimental_trend = 0;    ///< running Σ of `experimental`
  double delta = 0;                 ///< experimental − baseline
  double delta_trend = 0;           ///< running Σ of `delta`
};
/// Bars for the children of `node`, skipping children whose baseline name is "CompositeNodes"
/// or starts with "aten::".
std::vector<diff_bar> diff_bars(const diff_node& node);
/// The UI's label: `enumerate(DataLoader)`, `enumerate(DataPipe)` and `nn.Module: ` prefixes
/// cut, `Optimizer.zero_grad*` → `Optimizer.zero_grad`, `Optimizer.step*` → `Optimizer.step`.
std::string diff_label(std::string_view name);

/// One compared quantity.
struct diff_metric {
  double baseline = 0;
  double experimental = 0;
  double delta = 0;                 ///< experimental − baseline
  /// (experimental − baseline) / baseline · 100, unrounded (the UI shows 2 decimals); nullopt
  /// when baseline is 0 (the plugin printed "Infinity%" or "N/A", quirk Q15: show "new").
  std::optional<double> delta_pct;
};
/// One row of the operator table of the selected node (plugin-rules.md#diff-view).
struct diff_table_row {
  std::string name;
  diff_metric calls;
  diff_metric host_duration;
  diff_metric self_host_duration;
  diff_metric device_duration;
  diff_metric self_device_duration;
};
/// Baseline and experimental aggregates of `node` joined by operator name: baseline order,
/// then operators only in the experimental run; a missing side counts 0.
std::vector<diff_table_row> diff_table(const diff_node& node);

}  // namespace kinetoscope::analysis
