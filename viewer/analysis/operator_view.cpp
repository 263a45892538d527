// SPDX-License-Identifier: BSD-3-Clause
// Operator view (docs/plugin-rules.md#operator-view).

#include "analysis/operator_view.hpp"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <unordered_map>

#include "kinetoscope/formats/py_number.hpp"

namespace kinetoscope::analysis {

using formats::py_round;
using formats::py_float_repr;

namespace {

class py_text {
 public:
  explicit py_text(std::string_view s) : s_(s) {}
  bool convert(std::string& out) {
    skip();
    if (!value(out, 0)) return false;
    skip();
    return i_ == s_.size();
  }

 private:
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool value(std::string& out, int depth) {
    if (depth > 256 || i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '[' || c == '{') {
      const bool obj = c == '{';
      const char close = obj ? '}' : ']';
      out.push_back(c);
      ++i_;
      skip();
      if (i_ < s_.size() && s_[i_] == close) {
        ++i_;
        out.push_back(close);
        return true;
      }
      for (;;) {
        if (obj) {
          skip();
          if (!value(out, depth + 1)) return false;
          skip();
          if (i_ >= s_.size() || s_[i_] != ':') return false;
          ++i_;
          out += ": ";
          skip();
        }
        if (!value(out, depth + 1)) return false;
        skip();
        if (i_ >= s_.size()) return false;
        if (s_[i_] == ',') {
          ++i_;
          out += ", ";
          skip();
          continue;
        }
        if (s_[i_] != close) return false;
        ++i_;
        out.push_back(close);
        return true;
      }
    }
    if (c == '"') return string(out);
    if (s_.substr(i_, 4) == "true") {
      i_ += 4;
      out += "True";
      return true;
    }
    if (s_.substr(i_, 5) == "false") {
      i_ += 5;
      out += "False";
      return true;
    }
    if (s_.substr(i_, 4) == "null") {
      i_ += 4;
      out += "None";
      return true;
    }
    return number(out);
  }
  bool number(std::string& out) {
    std::size_t b = i_;
    bool is_float = false;
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == '.' || c == 'e' || c == 'E') is_float = true;
      if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'))
        break;
      ++i_;
    }
    if (i_ == b) return false;
    std::string_view tok = s_.substr(b, i_ - b);
    if (!is_float) {
      out += tok;
      return true;
    }
    std::string t(tok);
    out += py_float_repr(std::strtod(t.c_str(), nullptr));
    return true;
  }
  bool string(std::string& out) {
    ++i_;
    std::string raw;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\\' && i_ + 1 < s_.size()) {
        char e = s_[i_ + 1];
        i_ += 2;
        switch (e) {
          case 'n': raw.push_back('\n'); break;
          case 't': raw.push_back('\t'); break;
          case 'r': raw.push_back('\r'); break;
          case 'b': raw.push_back('\b'); break;
          case 'f': raw.push_back('\f'); break;
          case 'u': raw += "\\u"; break;  // kept escaped (rare in shapes/types)
          default: raw.push_back(e); break;
        }
        continue;
      }
      raw.push_back(s_[i_++]);
    }
    if (i_ >= s_.size()) return false;
    ++i_;
    const bool has_single = raw.find('\'') != std::string::npos;
    const bool has_double = raw.find('"') != std::string::npos;
    const char q = has_single && !has_double ? '"' : '\'';
    out.push_back(q);
    for (char c : raw) {
      if (c == '\\') out += "\\\\";
      else if (c == q) { out.push_back('\\'); out.push_back(c); }
      else if (c == '\n') out += "\\n";
      else if (c == '\t') out += "\\t";
      else if (c == '\r') out += "\\r";
      else out.push_back(c);
    }
    out.push_back(q);
    return true;
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

std::string shape_text(const trace_model& m, const op_node& n) {
  if (n.event == no_index) return "[]";
  const event& e = m.events[n.event];
  if (e.extra == no_index || e.extra >= m.ops.size()) return "[]";
  std::uint32_t id = m.ops[e.extra].input_dims;
  if (id == 0) return "[]";
  return python_list_text(m.str(id));
}

std::optional<std::string_view> call_stack_of(const trace_model& m, const op_node& n) {
  if (n.event == no_index) return std::nullopt;
  const event& e = m.events[n.event];
  if (e.extra == no_index || e.extra >= m.ops.size()) return std::nullopt;
  std::uint32_t id = m.ops[e.extra].call_stack;
  if (id == 0) return std::nullopt;
  return m.str(id);
}

enum class grouping { name, name_shape, name_stack, name_shape_stack };

/// Interned key of a node's name: its string id (the same text always has the same id), or
/// for names that are no whole event name the id of an equal model string, else a local id.
class name_keys {
 public:
  explicit name_keys(const trace_model& m) : m_(m) {}
  std::uint32_t of(const op_node& n) {
    if (n.name_id != no_index) return n.name_id;
    auto [it, inserted] = local_.try_emplace(n.name, 0);
    if (inserted) {
      const std::uint32_t id = m_.find_string(n.name);
      it->second = id != no_index ? id : static_cast<std::uint32_t>(m_.strings.size() + local_.size() - 1);
    }
    return it->second;
  }

 private:
  const trace_model& m_;
  std::unordered_map<std::string_view, std::uint32_t> local_;
};

/// The by-name and by-name-and-shape tables: groups are found by interned ids (name id, shape
/// text index), never by building a string key per operator. Same groups, same order and same
/// sums as the string-keyed form below.
std::vector<operator_group> aggregate_by_ids(const trace_model& m, const op_trees& t, bool by_shape) {
  std::vector<operator_group> groups;
  name_keys names(m);
  // Input-dims string id -> index of its shape text among the distinct texts (several JSON
  // texts could give one Python text; the table groups by the text).
  std::vector<std::uint32_t> shape_of_dims;
  std::vector<std::string> shapes;
  std::unordered_map<std::string, std::uint32_t> shape_index;
  if (by_shape) shape_of_dims.assign(m.strings.size(), no_index);
  auto shape_key = [&](const op_node& n) -> std::uint32_t {
    std::uint32_t dims = 0;
    if (n.event != no_index) {
      const event& e = m.events[n.event];
      if (e.extra != no_index && e.extra < m.ops.size()) dims = m.ops[e.extra].input_dims;
    }
    std::uint32_t& slot = shape_of_dims[dims];
    if (slot == no_index) {
      std::string text = dims == 0 ? std::string("[]") : python_list_text(m.str(dims));
      auto [it, inserted] = shape_index.try_emplace(std::move(text), static_cast<std::uint32_t>(shapes.size()));
      if (inserted) shapes.push_back(it->first);
      slot = it->second;
    }
    return slot;
  };
  std::vector<std::uint32_t> by_name;  // name key -> group (by-name table)
  std::unordered_map<std::uint64_t, std::uint32_t> by_name_shape;
  std::unordered_map<std::uint64_t, bool> stacks_seen;  // (group, call stack id) pairs
  for (auto i : t.operators) {
    const op_node& n = t.nodes[i];
    const std::uint32_t name = names.of(n);
    std::uint32_t shape = 0;
    std::uint32_t* slot = nullptr;
    if (by_shape) {
      shape = shape_key(n);
      auto [it, inserted] = by_name_shape.try_emplace((std::uint64_t{name} << 32) | shape, no_index);
      slot = &it->second;
    } else {
      if (name >= by_name.size()) by_name.resize(std::max<std::size_t>(name + 1, m.strings.size()), no_index);
      slot = &by_name[name];
    }
    if (*slot == no_index) {
      *slot = static_cast<std::uint32_t>(groups.size());
      operator_group grp;
      grp.name = std::string(n.name);
      if (by_shape) grp.input_shape = shapes[shape];
      grp.tc_eligible = n.tc_eligible;
      groups.push_back(std::move(grp));
    }
    const std::uint32_t gi = *slot;
    operator_group& grp = groups[gi];
    grp.calls += 1;
    grp.host_total += n.end - n.start;
    grp.device_total += n.device_total;
    grp.host_self += n.host_self;
    grp.device_self += n.device_self;
    grp.tc_self += n.tc_self;
    grp.tc_total += n.tc_total;
    if (n.event != no_index) {
      const event& e = m.events[n.event];
      if (e.extra != no_index && e.extra < m.ops.size()) {
        const std::uint32_t stack = m.ops[e.extra].call_stack;
        if (stack != 0 && !m.str(stack).empty()) {
          grp.has_call_stack = true;
          // Equal texts have equal ids, so deduplicating ids deduplicates the texts.
          if (stacks_seen.try_emplace((std::uint64_t{gi} << 32) | stack, true).second)
            grp.call_stacks.emplace_back(m.str(stack));
        }
      }
    }
  }
  return groups;
}

std::vector<operator_group> aggregate(const trace_model& m, const op_trees& t, grouping g) {
  if (g == grouping::name || g == grouping::name_shape) return aggregate_by_ids(m, t, g == grouping::name_shape);
  std::vector<operator_group> groups;
  std::unordered_map<std::string, std::size_t> index;
  std::string key;
  for (auto i : t.operators) {
    const op_node& n = t.nodes[i];
    key.assign(n.name);
    std::string shape;
    if (g == grouping::name_shape || g == grouping::name_shape_stack) {
      shape = shape_text(m, n);
      key += "###";
      key += shape;
    }
    auto stack = call_stack_of(m, n);
    if (g == grouping::name_stack || g == grouping::name_shape_stack) {
      key += "###";
      key += stack ? std::string(*stack) : std::string("None");
    }
    auto [it, inserted] = index.emplace(key, groups.size());
    if (inserted) {
      operator_group grp;
      grp.name = std::string(n.name);
      grp.input_shape = shape;
      if (g == grouping::name_stack || g == grouping::name_shape_stack) {
        if (stack) grp.call_stack = std::string(*stack);
      }
      grp.tc_eligible = n.tc_eligible;
      groups.push_back(std::move(grp));
    }
    operator_group& grp = groups[it->second];
    grp.calls += 1;
    grp.host_total += n.end - n.start;
    grp.device_total += n.device_total;
    grp.host_self += n.host_self;
    grp.device_self += n.device_self;
    grp.tc_self += n.tc_self;
    grp.tc_total += n.tc_total;
    if (stack && !stack->empty()) {
      grp.has_call_stack = true;
      if (std::find(grp.call_stacks.begin(), grp.call_stacks.end(), *stack) == grp.call_stacks.end())
        grp.call_stacks.emplace_back(*stack);
    }
  }
  return groups;
}

operator_row to_row(operator_group&& g) {
  operator_row r;
  r.name = std::move(g.name);
  r.input_shape = std::move(g.input_shape);
  r.calls = g.calls;
  r.device_self_us = py_round(g.device_self);
  r.device_total_us = py_round(g.device_total);
  r.host_self_us = py_round(g.host_self);
  r.host_total_us = py_round(g.host_total);
  r.tc_eligible = g.tc_eligible;
  r.tc_self_pct = py_round(100 * (g.device_self > 0 ? g.tc_self / g.device_self : 0.0), 2);
  r.tc_total_pct = py_round(100 * (g.device_total > 0 ? g.tc_total / g.device_total : 0.0), 2);
  r.has_call_stack = g.has_call_stack;
  r.call_stacks = std::move(g.call_stacks);
  if (g.call_stack) r.call_stack = *g.call_stack;
  return r;
}

std::vector<operator_row> to_rows(std::vector<operator_group> groups, bool device_columns) {
  std::stable_sort(groups.begin(), groups.end(), [&](const operator_group& a, const operator_group& b) {
    return device_columns ? a.device_self > b.device_self : a.host_self > b.host_self;
  });
  std::vector<operator_row> rows;
  rows.reserve(groups.size());
  for (auto& g : groups) rows.push_back(to_row(std::move(g)));
  return rows;
}

}  // namespace

std::string python_list_text(std::string_view json) {
  if (json.empty()) return "[]";
  std::string out;
  py_text conv(json);
  if (!conv.convert(out)) return std::string(json);
  return out;
}

bool operator_view_has_device_columns(const trace_model& model, const op_trees& trees) {
  (void)model;
  return trees.has_kernel || trees.has_memcpy_or_memset;
}

std::vector<operator_group> aggregate_operators_by_name(const trace_model& model, const op_trees& trees) {
  return aggregate(model, trees, grouping::name);
}

std::vector<operator_group> aggregate_operators_by_name_and_input_shape(const trace_model& model,
                                                                        const op_trees& trees) {
  return aggregate(model, trees, grouping::name_shape);
}

std::vector<operator_row> operators_by_name(const trace_model& model, const op_trees& trees, bool device_columns) {
  return to_rows(aggregate(model, trees, grouping::name), device_columns);
}

std::vector<operator_row> operators_by_name_and_input_shape(const trace_model& model, const op_trees& trees,
                                                            bool device_columns) {
  return to_rows(aggregate(model, trees, grouping::name_shape), device_columns);
}

std::vector<operator_row> operator_stack_rows(const trace_model& model, const op_trees& trees, std::string_view name,
                                              std::optional<std::string_view> input_shape, bool device_columns) {
  auto groups = aggregate(model, trees, input_shape ? grouping::name_shape_stack : grouping::name_stack);
  std::vector<operator_group> picked;
  for (auto& g : groups) {
    if (g.name != name || !g.call_stack || g.call_stack->empty()) continue;
    if (input_shape && g.input_shape != *input_shape) continue;
    picked.push_back(std::move(g));
  }
  return to_rows(std::move(picked), device_columns);
}

namespace {

/// The four pies of `groups` (rows with a positive value, descending, ties in group order).
operator_pies pies_of(const std::vector<operator_group>& groups) {
  operator_pies pies;
  for (const auto& g : groups) {
    if (g.device_total > 0) pies.device_total.emplace_back(g.name, g.device_total);
    if (g.device_self > 0) pies.device_self.emplace_back(g.name, g.device_self);
    if (g.host_total > 0) pies.host_total.emplace_back(g.name, g.host_total);
    if (g.host_self > 0) pies.host_self.emplace_back(g.name, g.host_self);
  }
  auto order = [](operator_pie& p) {
    std::stable_sort(p.begin(), p.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  };
  order(pies.device_total);
  order(pies.device_self);
  order(pies.host_total);
  order(pies.host_self);
  return pies;
}

}  // namespace

operator_pies operator_pies_by_name(const trace_model& model, const op_trees& trees, bool device_columns) {
  (void)device_columns;  // the plugin fills the device pies whenever some device time is > 0
  return pies_of(aggregate(model, trees, grouping::name));
}

operator_pies operator_pies_by_name_and_input_shape(const trace_model& model, const op_trees& trees) {
  return pies_of(aggregate(model, trees, grouping::name_shape));
}

namespace {

operator_table table_and_pies(std::vector<operator_group> groups, bool device_columns) {
  operator_table t;
  t.pies = pies_of(groups);  // (before the rows take the groups' names)
  t.rows = to_rows(std::move(groups), device_columns);
  return t;
}

}  // namespace

operator_table operator_table_by_name(const trace_model& model, const op_trees& trees, bool device_columns) {
  return table_and_pies(aggregate(model, trees, grouping::name), device_columns);
}

operator_table operator_table_by_name_and_input_shape(const trace_model& model, const op_trees& trees,
                                                      bool device_columns) {
  return table_and_pies(aggregate(model, trees, grouping::name_shape), device_columns);
}

}  // namespace kinetoscope::analysis
