// SPDX-License-Identifier: BSD-3-Clause
// The two rule sets (docs/kinetoscope-rules.md, docs/plugin-rules.md).

#include "analysis/rules.hpp"

namespace kinetoscope::analysis {

std::string_view rule_set_name(rule_set s) noexcept {
  return s == rule_set::plugin ? "plugin" : "kinetoscope";
}

std::optional<rule_set> parse_rule_set(std::string_view text) noexcept {
  if (text == "kinetoscope") return rule_set::kinetoscope;
  if (text == "plugin") return rule_set::plugin;
  return std::nullopt;
}

analysis_rules rules(rule_set s) {
  analysis_rules r;
  r.set = s;
  if (s == rule_set::plugin) return r;  // every option's default is the plugin's behaviour
  // K1: steps and the breakdown from host events only.
  r.overview = overview_options::improved();
  r.distributed = distributed_options::improved();
  // K2: every kernel has its launcher.
  r.tree.time_containment_fallback = true;
  r.tree.driver_as_runtime = true;
  r.tree.keep_unresolved_backward = true;
  r.tree.idless_runtimes_to_first_idless_node = false;
  r.tree.no_operator_label = true;
  // K3, K4, K5.
  r.tree.modern_tensor_cores = true;
  r.tree.all_collectives = true;
  r.tree.rebuild_memory_totals = true;
  // K6.
  r.recommendations.plugin_memory_rule = false;
  r.recommendations.launch_overhead_needs_idle_gpu = true;
  return r;
}

}  // namespace kinetoscope::analysis
