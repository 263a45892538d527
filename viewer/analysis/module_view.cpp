// SPDX-License-Identifier: BSD-3-Clause
#include "analysis/module_view.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

namespace kinetoscope::analysis {

namespace {

/// A node of the module hierarchy (the plugin's `Module`): equal when name, id and children are.
struct hier_module {
  std::string name;  ///< full event name ("nn.Module: Linear_0") or Lightning dotted name
  std::int64_t id = 0;
  std::vector<hier_module> children;

  friend bool operator==(const hier_module&, const hier_module&) = default;
};

/// An insertion-ordered map from int64 keys (Python dict semantics: overwriting keeps the
/// position). `std::nullopt` keys model Python's `None`.
template <class V>
class ordered_map {
 public:
  using key = std::optional<std::int64_t>;
  V& operator[](const key& k) {
    auto [it, inserted] = index_.try_emplace(k, entries_.size());
    if (inserted) entries_.emplace_back(k, V{});
    return entries_[it->second].second;
  }
  /// Inserts (k, v) unless k is present (Python's setdefault).
  void set_default(const key& k, V v) {
    auto [it, inserted] = index_.try_emplace(k, entries_.size());
    if (inserted) entries_.emplace_back(k, std::move(v));
  }
  const V* find(const key& k) const {
    auto it = index_.find(k);
    return it == index_.end() ? nullptr : &entries_[it->second].second;
  }
  const std::vector<std::pair<key, V>>& entries() const { return entries_; }

 private:
  struct key_hash {
    std::size_t operator()(const key& k) const noexcept {
      return k ? std::hash<std::int64_t>{}(*k) : 0x9e3779b97f4a7c15ULL;
    }
  };
  std::vector<std::pair<key, V>> entries_;
  std::unordered_map<key, std::size_t, key_hash> index_;
};

using py_id = std::optional<std::int64_t>;

py_id as_py_id(std::int64_t v) { return v < 0 ? std::nullopt : py_id(v); }

/// docs/plugin-rules.md#module-view: the nn.Module hierarchy from python_function / module events.
std::vector<hier_module> python_hierarchy(const trace_model& model) {
  struct py_event {
    std::int64_t python_id;
    py_id parent_id;
    std::int64_t module_id;
    std::uint32_t name;
    bool is_module;
  };
  std::vector<py_event> events;
  for (const event& e : model.events) {
    if (e.type != event_type::python_function && e.type != event_type::module) continue;
    if (e.extra == no_index || e.extra >= model.python.size()) continue;
    const python_args& a = model.python[e.extra];
    events.push_back({a.python_id, as_py_id(a.parent_id), a.module_id, e.name, e.type == event_type::module});
  }
  std::unordered_map<std::int64_t, std::size_t> id_to_event;  // later events with the same id win
  for (std::size_t i = 0; i < events.size(); ++i) id_to_event[events[i].python_id] = i;

  // Python function topology.
  ordered_map<std::vector<std::int64_t>> children;
  for (const py_event& e : events) {
    children.set_default(e.python_id, {});
    children[e.parent_id].push_back(e.python_id);
  }
  // Module topology: walk up from every leaf, keeping module events only.
  ordered_map<py_id> module_parent;  // module python id -> parent module python id (None = root)
  std::set<std::pair<std::int64_t, std::size_t>> seen;
  constexpr std::size_t no_module = static_cast<std::size_t>(-1);
  for (const auto& [leaf, kids] : children.entries()) {
    if (!kids.empty() || !leaf) continue;
    auto it = id_to_event.find(*leaf);
    if (it == id_to_event.end()) continue;
    std::size_t e = it->second;
    std::size_t current_module = no_module;
    for (;;) {
      const py_event& ev = events[e];
      if (ev.is_module) {
        if (current_module != no_module) module_parent[events[current_module].python_id] = ev.python_id;
        current_module = e;
        module_parent.set_default(ev.python_id, std::nullopt);
      }
      if (!seen.emplace(ev.python_id, current_module).second) break;
      if (!ev.parent_id) break;
      auto p = id_to_event.find(*ev.parent_id);
      if (p == id_to_event.end()) break;
      e = p->second;
    }
  }
  ordered_map<std::vector<std::int64_t>> module_children;
  for (const auto& [child, parent] : module_parent.entries()) {
    module_children.set_default(child, {});
    module_children.set_default(parent, {});
    module_children[parent].push_back(*child);
  }
  // Build one tree per root (recursion depth = module nesting depth).
  const auto build = [&](const auto& self, std::int64_t id, int depth) -> hier_module {
    const py_event& ev = events[id_to_event.at(id)];
    hier_module m{std::string(model.str(ev.name)), ev.module_id, {}};
    if (depth > 1000) return m;  // a cyclic parent chain; real traces never nest this deep
    if (const auto* kids = module_children.find(id)) {
      for (const std::int64_t c : *kids) m.children.push_back(self(self, c, depth + 1));
    }
    return m;
  };
  std::vector<hier_module> roots;
  for (const auto& [id, parent] : module_parent.entries()) {
    if (parent || !id) continue;
    hier_module m = build(build, *id, 0);
    if (std::find(roots.begin(), roots.end(), m) == roots.end()) roots.push_back(std::move(m));
  }
  return roots;
}

/// plugin-rules.md#module-view, Lightning: a dotted name `a.b.c` is a child of `a.b` when that name
/// exists.
std::vector<hier_module> lightning_hierarchy(const op_trees& trees) {
  std::vector<std::string> names;
  std::unordered_map<std::string, std::size_t> index;
  for (const op_node& n : trees.nodes) {
    if (n.kind != node_kind::pl_module) continue;
    if (index.try_emplace(std::string(n.name), names.size()).second) names.emplace_back(n.name);
  }
  std::vector<std::vector<std::size_t>> kids(names.size());
  std::vector<char> has_parent(names.size(), 0);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::size_t dot = names[i].rfind('.');
    if (dot == std::string::npos) continue;
    const auto p = index.find(names[i].substr(0, dot));
    if (p == index.end()) continue;
    kids[p->second].push_back(i);
    has_parent[i] = 1;
  }
  const auto build = [&](const auto& self, std::size_t i, int depth) -> hier_module {
    hier_module m{names[i], 0, {}};
    if (depth > 1000) return m;
    for (const std::size_t c : kids[i]) m.children.push_back(self(self, c, depth + 1));
    return m;
  };
  std::vector<hier_module> roots;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (!has_parent[i]) roots.push_back(build(build, i, 0));
  }
  return roots;
}

struct module_stats {
  std::int64_t occurrences = 0;
  std::int64_t operators = 0;
  double host = 0;
  double self_host = 0;
  double device = 0;
  double self_device = 0;
};

using stats_key = std::pair<std::string, std::int64_t>;

/// plugin-rules.md#module-view: sums over the module (or PL module) nodes reachable through step,
/// module, plain operator, optimizer, PL-module and data-loader nodes, thread by thread in tree
/// order.
std::map<stats_key, module_stats> aggregate_modules(const trace_model& model, const op_trees& trees, node_kind wanted) {
  std::map<stats_key, module_stats> out;
  const auto walk = [&](const auto& self, std::uint32_t i) -> void {
    const op_node& n = trees.nodes[i];
    switch (n.kind) {
      case node_kind::profiler_step:
      case node_kind::module:
      case node_kind::op:
      case node_kind::optimizer:
      case node_kind::pl_module:
      case node_kind::data_loader:
        break;
      default:
        return;
    }
    if (n.kind == wanted) {
      const std::int64_t id = wanted == node_kind::module ? module_id_of(model, n) : 0;
      module_stats& s = out[{std::string(n.name), id}];
      s.occurrences += 1;
      for (const std::uint32_t c : n.children) s.operators += trees.is_operator(c) ? 1 : 0;
      s.self_host += n.host_self;
      s.host += n.end - n.start;
      s.self_device += n.device_self;
      s.device += n.device_total;
    }
    for (const std::uint32_t c : n.children) self(self, c);
  };
  for (const thread_tree& t : trees.threads) {
    if (t.root == no_index) continue;
    for (const std::uint32_t c : trees.nodes[t.root].children) walk(walk, c);
  }
  return out;
}

std::string display_name(std::string name) {
  static constexpr std::string_view prefix = "nn.Module: ";
  for (std::size_t pos = name.find(prefix); pos != std::string::npos; pos = name.find(prefix, pos)) {
    name.erase(pos, prefix.size());
  }
  return name;
}

std::uint64_t count_modules(const hier_module& m) {
  std::uint64_t n = 1;
  for (const hier_module& c : m.children) n += count_modules(c);
  return n;
}

std::vector<module_row> make_rows(const std::vector<hier_module>& modules,
                                  const std::map<stats_key, module_stats>& stats, std::uint64_t& missing) {
  std::vector<module_row> rows;
  for (const hier_module& m : modules) {
    const auto it = stats.find({m.name, m.id});
    if (it == stats.end()) {
      missing += count_modules(m);
      continue;
    }
    const module_stats& s = it->second;
    module_row r;
    r.name = display_name(m.name);
    r.id = m.id;
    r.occurrences = s.occurrences;
    r.operators = s.operators;
    r.host_duration = s.host;
    r.self_host_duration = s.self_host;
    r.device_duration = s.device;
    r.self_device_duration = s.self_device;
    const double occ = static_cast<double>(s.occurrences);
    r.avg_duration = s.device / occ > 0 ? s.device / occ : s.host / occ;
    r.children = make_rows(m.children, stats, missing);
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace

module_view_result compute_module_view(const trace_model& model, const op_trees& trees) {
  module_view_result result;
  std::vector<hier_module> hierarchy;
  std::map<stats_key, module_stats> stats;
  if (model.lightning) {
    stats = aggregate_modules(model, trees, node_kind::pl_module);
    if (!stats.empty()) hierarchy = lightning_hierarchy(trees);
    if (!hierarchy.empty()) result.kind = module_view_kind::lightning;
  }
  if (result.kind == module_view_kind::none) {
    stats = aggregate_modules(model, trees, node_kind::module);
    if (!stats.empty()) hierarchy = python_hierarchy(model);
    if (!hierarchy.empty()) result.kind = module_view_kind::module;
  }
  if (result.kind == module_view_kind::none) return result;
  result.rows = make_rows(hierarchy, stats, result.missing_modules);
  std::stable_sort(result.rows.begin(), result.rows.end(),
                   [](const module_row& a, const module_row& b) { return a.name < b.name; });
  return result;
}

}  // namespace kinetoscope::analysis
