// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file rules.hpp
/// The two rule sets of the views: kinetoscope's (the default everywhere: the server, `analyze`,
/// the TensorBoard scalars, the Python module; docs/kinetoscope-rules.md) and torch-tb-profiler
/// 0.4.3's (`--plugin_rules`, `rules=plugin`; docs/plugin-rules.md), which reproduces the plugin's
/// numbers exactly. Each rule is one field of the views' option structs; this is the one place
/// that sets them from a rule set, so no entry point can mix the two.
///
/// **Example**:
/// @code
/// const analysis::analysis_rules r = analysis::rules(analysis::rule_set::kinetoscope);
/// const analysis::op_trees trees = analysis::build_op_tree(model, r.tree);
/// const analysis::full_report report = analysis::compute_report(model, trees, r.report());
/// @endcode

#include <cstdint>
#include <optional>
#include <string_view>

#include "analysis/distributed_view.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/overview.hpp"
#include "analysis/recommendations.hpp"
#include "analysis/report.hpp"

namespace kinetoscope::analysis {

enum class rule_set : std::uint8_t {
  kinetoscope,  ///< docs/kinetoscope-rules.md (the default)
  plugin,       ///< torch-tb-profiler 0.4.3, docs/plugin-rules.md
};

/// "kinetoscope" or "plugin" (the `rules=` query value, the index key).
std::string_view rule_set_name(rule_set s) noexcept;
/// The inverse of rule_set_name(); nullopt for any other text.
std::optional<rule_set> parse_rule_set(std::string_view text) noexcept;

/// Every option of the views under one rule set.
struct analysis_rules {
  rule_set set = rule_set::kinetoscope;
  op_tree_options tree;
  overview_options overview;
  distributed_options distributed;
  recommendation_options recommendations;

  /// report_options with every view requested and this rule set's overview and
  /// recommendation options.
  report_options report() const {
    report_options r;
    r.overview = overview;
    r.recommendations = recommendations;
    return r;
  }
};

/// The options of rule set `s`.
analysis_rules rules(rule_set s = rule_set::kinetoscope);

}  // namespace kinetoscope::analysis
