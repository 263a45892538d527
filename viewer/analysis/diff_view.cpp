// SPDX-License-Identifier: BSD-3-Clause
#include "analysis/diff_view.hpp"

#include <unordered_map>
#include <utility>

namespace kinetoscope::analysis {

namespace {

using node_list = std::vector<std::uint32_t>;

node_list as_list(const index_list& l) { return node_list(l.begin(), l.end()); }

/// The node kinds that anchor an alignment (the plugin's RUN_NODE_TYPES).
bool is_anchor_kind(node_kind k) noexcept {
  switch (k) {
    case node_kind::backward:
    case node_kind::data_loader:
    case node_kind::module:
    case node_kind::optimizer:
    case node_kind::profiler_step:
      return true;
    default:
      return false;
  }
}

/// Operators below (and including) each node, children first (OperatorNode.get_operator_and_kernels).
void collect_operators(const op_trees& t, std::uint32_t n, node_list& out) {
  for (const std::uint32_t c : t.nodes[n].children) collect_operators(t, c, out);
  if (t.is_operator(n)) out.push_back(n);
}

diff_side make_side(const op_trees& t, node_list nodes) {
  diff_side s;
  if (nodes.empty()) {
    s.name = "Blank";
    return s;
  }
  s.name = nodes.size() == 1 ? std::string(t.nodes[nodes.front()].name) : std::string("CompositeNodes");
  node_list ops;
  for (const std::uint32_t n : nodes) {
    const op_node& node = t.nodes[n];
    const double duration = node.end - node.start;
    s.duration += duration;
    s.device_duration += node.device_total;
    s.total_duration += node.device_total != 0 ? node.device_total : duration;
    collect_operators(t, n, ops);
  }
  std::unordered_map<std::string_view, std::size_t> index;
  for (const std::uint32_t o : ops) {
    const op_node& op = t.nodes[o];
    auto [it, inserted] = index.try_emplace(op.name, s.aggs.size());
    if (inserted) s.aggs.push_back({std::string(op.name), 0, 0, 0, 0, 0});
    diff_op_stats& a = s.aggs[it->second];
    a.calls += 1;
    a.host_duration += op.host_total;
    a.device_duration += op.device_total;
    a.self_host_duration += op.host_self;
    a.self_device_duration += op.device_self;
  }
  s.nodes = std::move(nodes);
  return s;
}

class differ {
 public:
  differ(const op_trees& l, const op_trees& r) : l_(l), r_(r) {}

  /// DiffNode.create_node + build_tree.
  diff_node create(node_list left, node_list right, std::string path) {
    diff_node d;
    d.path = std::move(path);
    d.baseline = make_side(l_, std::move(left));
    d.experimental = make_side(r_, std::move(right));
    const diff_side& a = d.baseline;
    const diff_side& b = d.experimental;
    if (a.blank() || b.blank()) return d;
    if (!a.composite() && !b.composite()) {
      compare(as_list(l_.nodes[a.nodes.front()].children), as_list(r_.nodes[b.nodes.front()].children), d);
    } else if (a.composite() && b.composite()) {
      compare(a.nodes, b.nodes, d);
    }
    return d;
  }

 private:
  /// DiffNode.compare_operator_nodes: anchors, then the stretches between them.
  void compare(const node_list& left, const node_list& right, diff_node& parent) {
    std::vector<std::pair<std::size_t, std::size_t>> anchors;
    std::size_t key_index = 0;
    for (std::size_t i = 0; i < left.size(); ++i) {
      const op_node& ln = l_.nodes[left[i]];
      if (!is_anchor_kind(ln.kind)) continue;
      for (std::size_t j = key_index; j < right.size(); ++j) {
        const op_node& rn = r_.nodes[right[j]];
        if (rn.kind == ln.kind && rn.name == ln.name) {
          anchors.emplace_back(i, j);
          key_index = j + 1;
          break;
        }
      }
    }
    if (anchors.empty()) return;
    const auto slice = [](const node_list& v, std::size_t b, std::size_t e) {
      return node_list(v.begin() + static_cast<std::ptrdiff_t>(b), v.begin() + static_cast<std::ptrdiff_t>(e));
    };
    const auto add = [&](node_list l, node_list r) {
      parent.children.push_back(
          create(std::move(l), std::move(r), parent.path + "-" + std::to_string(parent.children.size())));
    };
    std::size_t li = 0;
    std::size_t ri = 0;
    for (const auto& [l, r] : anchors) {
      if (l > li || r > ri) add(slice(left, li, l), slice(right, ri, r));
      add({left[l]}, {right[r]});
      li = l + 1;
      ri = r + 1;
    }
    if (li < left.size() || ri < right.size()) add(slice(left, li, left.size()), slice(right, ri, right.size()));
  }

  const op_trees& l_;
  const op_trees& r_;
};

/// get_tree_operators: the children of all ProfilerStep nodes under the root, or the root's
/// children when there is none.
node_list top_level(const op_trees& t, const diff_options& options) {
  std::optional<std::size_t> which = options.use_first_tree ? t.first_tree() : t.main_thread;
  if (!which) which = t.first_tree();
  if (!which || t.threads[*which].root == no_index) return {};
  const op_node& root = t.nodes[t.threads[*which].root];
  node_list steps;
  for (const std::uint32_t c : root.children) {
    if (t.nodes[c].kind == node_kind::profiler_step) steps.push_back(c);
  }
  if (steps.empty()) return as_list(root.children);
  node_list out;
  for (const std::uint32_t s : steps) {
    const auto& kids = t.nodes[s].children;
    out.insert(out.end(), kids.begin(), kids.end());
  }
  return out;
}

diff_metric metric(double base, double exp) {
  diff_metric m;
  m.baseline = base;
  m.experimental = exp;
  m.delta = exp - base;
  if (base != 0) m.delta_pct = (exp - base) / base * 100;
  return m;
}

}  // namespace

diff_node compute_diff(const op_trees& baseline, const op_trees& experimental, const diff_options& options) {
  differ d(baseline, experimental);
  return d.create(top_level(baseline, options), top_level(experimental, options), "0");
}

const diff_node* find_diff_node(const diff_node& root, std::string_view path) {
  if (path.empty() || path.substr(0, path.find('-')) != root.path) return nullptr;
  const diff_node* node = &root;
  std::size_t pos = path.find('-');
  while (pos != std::string_view::npos) {
    const std::size_t next = path.find('-', pos + 1);
    const std::string_view part = path.substr(pos + 1, next == std::string_view::npos ? next : next - pos - 1);
    if (part.empty() || part.size() > 9) return nullptr;
    std::size_t index = 0;
    for (const char c : part) {
      if (c < '0' || c > '9') return nullptr;
      index = index * 10 + static_cast<std::size_t>(c - '0');
    }
    if (index >= node->children.size()) return nullptr;
    node = &node->children[index];
    pos = next;
  }
  return node;
}

std::string diff_label(std::string_view name) {
  const auto starts = [&](std::string_view p) { return name.substr(0, p.size()) == p; };
  if (starts("Optimizer.zero_grad")) return "Optimizer.zero_grad";
  if (starts("Optimizer.step")) return "Optimizer.step";
  for (const std::string_view p : {std::string_view("enumerate(DataLoader)"), std::string_view("enumerate(DataPipe)"),
                                   std::string_view("nn.Module: ")}) {
    if (starts(p)) return std::string(name.substr(p.size()));
  }
  return std::string(name);
}

std::vector<diff_bar> diff_bars(const diff_node& node) {
  std::vector<diff_bar> bars;
  double base_sum = 0;
  double exp_sum = 0;
  double delta_sum = 0;
  for (const diff_node& c : node.children) {
    const std::string& name = c.baseline.name;
    if (name == "CompositeNodes" || name.rfind("aten::", 0) == 0) continue;
    diff_bar b;
    b.label = diff_label(name);
    b.path = c.path;
    b.baseline = c.baseline.total_duration;
    b.experimental = c.experimental.total_duration;
    b.delta = b.experimental - b.baseline;
    base_sum += b.baseline;
    exp_sum += b.experimental;
    delta_sum += b.delta;
    b.baseline_trend = base_sum;
    b.experimental_trend = exp_sum;
    b.delta_trend = delta_sum;
    bars.push_back(std::move(b));
  }
  return bars;
}

std::vector<diff_table_row> diff_table(const diff_node& node) {
  std::vector<diff_table_row> rows;
  std::unordered_map<std::string_view, const diff_op_stats*> exp;
  for (const diff_op_stats& e : node.experimental.aggs) exp.try_emplace(e.name, &e);
  const diff_op_stats zero{};
  const auto row = [&](const std::string& name, const diff_op_stats& b, const diff_op_stats& e) {
    diff_table_row r;
    r.name = name;
    r.calls = metric(static_cast<double>(b.calls), static_cast<double>(e.calls));
    r.host_duration = metric(b.host_duration, e.host_duration);
    r.self_host_duration = metric(b.self_host_duration, e.self_host_duration);
    r.device_duration = metric(b.device_duration, e.device_duration);
    r.self_device_duration = metric(b.self_device_duration, e.self_device_duration);
    return r;
  };
  std::unordered_map<std::string_view, bool> in_base;
  for (const diff_op_stats& b : node.baseline.aggs) {
    in_base.try_emplace(b.name, true);
    const auto it = exp.find(b.name);
    rows.push_back(row(b.name, b, it == exp.end() ? zero : *it->second));
  }
  for (const diff_op_stats& e : node.experimental.aggs) {
    if (in_base.count(e.name) == 0) rows.push_back(row(e.name, zero, e));
  }
  return rows;
}

}  // namespace kinetoscope::analysis
