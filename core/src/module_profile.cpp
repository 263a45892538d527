// SPDX-License-Identifier: BSD-3-Clause
/// @file module_profile.cpp
/// build_module_profile() (module calls -> per-instance tree, ops -> MACs/flops by DeepSpeed's
/// rules) and the DeepSpeed flops-profiler report (docs/profiler-rules.md#report).

#include "kinetoscope/module_profile.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <tuple>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kinetoscope/formats/py_number.hpp"

namespace kinetoscope {
namespace {

// ---- number formatting (DeepSpeed's helpers) -----------------------------------------------

// Python's round(x, digits) and f"{x:g}": the project's one implementation of each.
using formats::py_format_g;
using formats::py_round;

/// round(100 · part / total, 2) printed with %g; 0 when the total is 0 (DeepSpeed's guard).
std::string percent(double part, double total) {
  return py_format_g(total != 0 ? py_round(100.0 * part / total, 2) : 0.0);
}

}  // namespace

namespace {

/// The magnitude of a forced unit prefix (DeepSpeed: unknown units mean 1).
double magnitude_of(std::string_view units) {
  static constexpr std::pair<std::string_view, double> table[] = {
      {"T", 1e12}, {"G", 1e9}, {"M", 1e6}, {"K", 1e3}, {"m", 1e-3}, {"u", 1e-6}};
  for (const auto& [u, m] : table)
    if (u == units) return m;
  return 1;
}

/// The prefix DeepSpeed picks for `num`.
const char* auto_units(double num) {
  if (num >= 1e12) return "T";
  if (num >= 1e9) return "G";
  if (num >= 1e6) return "M";
  if (num >= 1e3) return "K";
  if (num >= 1 || num == 0) return "";
  if (num >= 1e-3) return "m";
  return "u";
}

}  // namespace

std::string number_to_string(double num, const char* units, int precision) {
  const char* u = units != nullptr ? units : auto_units(num);
  return py_format_g(py_round(num / magnitude_of(u), precision)) + " " + u;
}

std::string macs_to_string(double macs, const char* units, int precision) {
  return number_to_string(macs, units, precision) + "MACs";
}

std::string flops_to_string(double flops_per_second, const char* units, int precision) {
  return number_to_string(flops_per_second, units, precision) + "FLOPS";
}

std::string params_to_string(double params, const char* units, int precision) {
  // DeepSpeed: a "B" (billions) argument means G; the G of the text is written B.
  const char* u = units != nullptr && std::string_view(units) == "B" ? "G" : units;
  std::string s = number_to_string(params, u, precision);
  std::replace(s.begin(), s.end(), 'G', 'B');
  while (!s.empty() && s.back() == ' ') s.pop_back();
  while (!s.empty() && s.front() == ' ') s.erase(s.begin());
  return s;
}

std::string duration_to_string(double seconds, const char* units, int precision) {
  return number_to_string(seconds, units, precision) + "s";
}

// ---- building the tree ----------------------------------------------------------------------

namespace {

/// One module instance (type, path) with its window totals.
struct instance {
  std::string path;
  std::string type;
  std::int64_t params = 0;
  std::int64_t calls = 0;
  std::int64_t duration_ns = 0;
  std::uint64_t own_macs = 0;
  std::uint64_t own_flops = 0;
  std::size_t parent = SIZE_MAX;
  std::vector<std::size_t> children;  // in order of first call
};

/// Module instances of the window and which instance each call (by index) belongs to.
struct instance_table {
  std::vector<instance> list;
  std::vector<std::size_t> of_call;  // per data.modules index
};

instance_table collect_instances(const trace_data& data) {
  instance_table t;
  std::map<std::pair<std::string_view, std::string_view>, std::size_t> index;
  std::unordered_map<std::int64_t, std::size_t> call_to_instance;
  t.of_call.reserve(data.modules.size());
  for (const module_event& m : data.modules) {  // sorted by start: first calls come first
    const std::string_view type = data.str(m.type);
    const std::string_view path = data.str(m.path);
    auto [it, inserted] = index.try_emplace({type, path}, t.list.size());
    if (inserted) {
      instance in;
      in.type = type;
      in.path = path;
      in.params = m.params;
      const auto parent = call_to_instance.find(m.parent_call_id);
      if (m.parent_call_id != 0 && parent != call_to_instance.end()) {
        in.parent = parent->second;
        t.list[in.parent].children.push_back(t.list.size());
      }
      t.list.push_back(std::move(in));
    }
    instance& in = t.list[it->second];
    in.calls += 1;
    in.duration_ns += m.end_ns - m.start_ns;
    call_to_instance[m.call_id] = it->second;
    t.of_call.push_back(it->second);
  }
  return t;
}

/// Adds DeepSpeed's count of every op to the innermost module call open around it on its
/// thread. A per-thread stack sweep over module calls and ops in (start ↑, end ↓) order,
/// modules first on ties; an op inside a counted op is not counted again.
void attribute_ops(const trace_data& data, instance_table& t) {
  struct item {
    std::int64_t start, end, tid;
    std::size_t index;
    bool is_module;
  };
  std::vector<item> items;
  for (std::size_t i = 0; i < data.modules.size(); ++i) {
    const module_event& m = data.modules[i];
    items.push_back({m.start_ns, m.end_ns, m.tid, i, true});
  }
  for (std::size_t i = 0; i < data.events.size(); ++i) {
    const cpu_event& e = data.events[i];
    if (e.category == cpu_category::cpu_op && e.tid == e.end_tid)
      items.push_back({e.start_ns, e.end_ns, e.tid, i, false});
  }
  std::stable_sort(items.begin(), items.end(), [](const item& a, const item& b) {
    if (a.tid != b.tid) return a.tid < b.tid;
    if (a.start != b.start) return a.start < b.start;
    if (a.end != b.end) return a.end > b.end;
    return a.is_module && !b.is_module;
  });
  struct open_item {
    std::int64_t end;
    std::size_t module_instance;  // innermost module instance at this level, SIZE_MAX = none
    bool counted;                 // this op or an enclosing one was counted
  };
  std::vector<open_item> open;
  std::int64_t tid = 0;
  for (std::size_t k = 0; k < items.size(); ++k) {
    const item& it = items[k];
    if (k == 0 || it.tid != tid) {
      open.clear();
      tid = it.tid;
    }
    while (!open.empty() && (open.back().end <= it.start || open.back().end < it.end)) open.pop_back();
    const std::size_t module = open.empty() ? SIZE_MAX : open.back().module_instance;
    const bool inside_counted = !open.empty() && open.back().counted;
    if (it.is_module) {
      open.push_back({it.end, t.of_call[it.index], inside_counted});
      continue;
    }
    bool counted = inside_counted;
    if (!inside_counted && module != SIZE_MAX) {
      const cpu_event& e = data.events[it.index];
      const bool inputs_ok = std::size_t{e.first_input} + e.input_count <= data.inputs.size();
      const op_count c = deepspeed_count(data.str(e.name), inputs_ok ? data.inputs.data() + e.first_input : nullptr,
                                         inputs_ok ? e.input_count : 0);
      t.list[module].own_macs += c.macs;
      t.list[module].own_flops += c.flops;
      counted = c.counted;
    }
    open.push_back({it.end, module, counted});
  }
}

/// The attribute name of `child` under `parent` ("layer1.0.conv1" under "layer1.0" → "conv1").
std::string key_under(const instance& parent, const instance& child) {
  const std::string& p = child.path;
  if (p.empty()) return child.type;
  if (!parent.path.empty() && p.size() > parent.path.size() + 1 && p.starts_with(parent.path) &&
      p[parent.path.size()] == '.')
    return p.substr(parent.path.size() + 1);
  if (parent.path.empty()) return p;
  const std::size_t dot = p.rfind('.');
  return dot == std::string::npos ? p : p.substr(dot + 1);
}

/// The profile node of instance `i`, per pass, with its sub-modules summed in.
module_profile_node make_node(const instance_table& t, std::size_t i, double passes) {
  const instance& in = t.list[i];
  module_profile_node n;
  n.path = in.path;
  n.type = in.type;
  n.params = in.params;
  n.calls = in.calls;
  n.macs = static_cast<double>(in.own_macs) / passes;
  n.flops = static_cast<double>(in.own_flops) / passes;
  n.latency_s = static_cast<double>(in.duration_ns) / passes / 1e9;
  double children_latency = 0;
  for (std::size_t c : in.children) {
    module_profile_node child = make_node(t, c, passes);
    child.key = key_under(in, t.list[c]);
    n.params += child.params;
    n.macs += child.macs;
    n.flops += child.flops;
    children_latency += child.latency_s;
    n.children.push_back(std::move(child));
  }
  if (n.latency_s == 0) n.latency_s = children_latency;  // DeepSpeed: e.g. a ModuleList
  return n;
}

/// The first and last ProfilerStep#N of the window.
std::pair<std::int64_t, std::int64_t> step_range(const trace_data& data) {
  std::int64_t first = -1, last = -1;
  for (const cpu_event& e : data.events) {
    const std::string_view name = data.str(e.name);
    if (!name.starts_with("ProfilerStep#")) continue;
    const std::string digits(name.substr(13));
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(digits.c_str(), &end, 10);
    if (end == digits.c_str() || *end != '\0' || errno != 0) continue;
    if (first < 0 || n < first) first = n;
    last = std::max<std::int64_t>(last, n);
  }
  return {first, last};
}

}  // namespace

module_profile build_module_profile(const trace_data& data, std::string_view root_path) {
  module_profile p;
  p.has_shapes = data.record_shapes || data.with_flops;
  std::tie(p.first_step, p.last_step) = step_range(data);
  if (data.modules.empty()) {
    p.message = "no module scopes in this window: profile with with_modules = true and wrap the "
                "model's module calls in kinetoscope::module_scope";
    return p;
  }
  instance_table t = collect_instances(data);
  std::size_t root = SIZE_MAX;
  for (std::size_t i = 0; i < t.list.size() && root == SIZE_MAX; ++i) {
    const bool wanted = root_path.empty() ? t.list[i].parent == SIZE_MAX : t.list[i].path == root_path;
    if (wanted) root = i;
  }
  if (root == SIZE_MAX) {
    p.message = "no module scope with path '" + std::string(root_path) + "' in this window";
    return p;
  }
  attribute_ops(data, t);
  p.passes = t.list[root].calls;
  p.root = make_node(t, root, static_cast<double>(p.passes));
  p.ok = true;
  return p;
}

// ---- the report -----------------------------------------------------------------------------

namespace {

/// Python's '{:<70}  {:<8}'.format(label, value).
std::string summary_line(std::string_view label, std::string_view value) {
  std::string s(label);
  if (s.size() < 70) s.append(70 - s.size(), ' ');
  s += "  ";
  s += value;
  if (value.size() < 8) s.append(8 - value.size(), ' ');
  return s + "\n";
}

/// One module's profile text (DeepSpeed's flops_repr).
std::string module_repr(const module_profile_node& n, const module_profile_node& total) {
  return params_to_string(static_cast<double>(n.params)) + " = " +
         percent(static_cast<double>(n.params), static_cast<double>(total.params)) + "% Params, " +
         macs_to_string(n.macs) + " = " + percent(n.macs, total.macs) + "% MACs, " +
         duration_to_string(n.latency_s) + " = " + percent(n.latency_s, total.latency_s) +
         "% latency, " + flops_to_string(n.latency_s != 0 ? py_round(n.flops / n.latency_s, 2) : 0.0);
}

/// torch's _addindent(s, 2): every line but the first indented by two spaces.
std::string add_indent(const std::string& s) {
  std::string out;
  for (const char c : s) {
    out += c;
    if (c == '\n') out += "  ";
  }
  return out;
}

/// nn.Module.__repr__ with the profile as the extra representation.
std::string tree_repr(const module_profile_node& n, const module_profile_node& total) {
  std::string s = n.type + "(";
  const std::string extra = module_repr(n, total);
  if (n.children.empty()) return s + extra + ")";
  s += "\n  " + extra;
  for (const module_profile_node& c : n.children) s += "\n  (" + c.key + "): " + add_indent(tree_repr(c, total));
  return s + "\n)";
}

/// Per depth, per class (in first-seen order): MACs, params, latency summed over instances.
struct class_totals {
  std::string type;
  double macs = 0;
  double params = 0;
  double latency = 0;
};

void walk_depths(const module_profile_node& n, std::size_t depth, std::vector<std::vector<class_totals>>& info) {
  if (info.size() <= depth) info.resize(depth + 1);
  auto& level = info[depth];
  auto it = std::find_if(level.begin(), level.end(), [&](const class_totals& c) { return c.type == n.type; });
  if (it == level.end()) it = level.insert(level.end(), class_totals{n.type});
  it->macs += n.macs;
  it->params += static_cast<double>(n.params);
  it->latency += n.latency_s;
  for (const module_profile_node& c : n.children) walk_depths(c, depth + 1, info);
}

/// Python's repr of {class: text} for the top `k` classes by `metric` (stable, descending).
template <class Metric, class Text>
std::string top_dict(std::vector<class_totals> level, std::size_t k, Metric metric, Text text) {
  std::stable_sort(level.begin(), level.end(),
                   [&](const class_totals& a, const class_totals& b) { return metric(a) > metric(b); });
  std::string s = "{";
  for (std::size_t i = 0; i < std::min(k, level.size()); ++i) {
    if (i != 0) s += ", ";
    s += "'" + level[i].type + "': '" + text(metric(level[i])) + "'";
  }
  return s + "}";
}

std::string aggregated(const module_profile& p, const module_profile_options& o) {
  std::vector<std::vector<class_totals>> info;
  walk_depths(p.root, 0, info);
  const std::size_t levels = info.size();
  const std::size_t depth = o.module_depth < 0 ? levels - 1 : std::min<std::size_t>(static_cast<std::size_t>(o.module_depth), levels);
  const std::size_t k = o.top_modules > 0 ? static_cast<std::size_t>(o.top_modules) : 0;
  std::string s = "Top " + std::to_string(o.top_modules) +
                  " modules in terms of params, MACs or fwd latency at different model depths:\n";
  for (std::size_t d = 0; d < depth; ++d) {
    s += "depth " + std::to_string(d) + ":\n";
    s += "    params      - " +
         top_dict(info[d], k, [](const class_totals& c) { return c.params; },
                  [](double v) { return params_to_string(v); }) + "\n";
    s += "    MACs        - " +
         top_dict(info[d], k, [](const class_totals& c) { return c.macs; },
                  [](double v) { return macs_to_string(v); }) + "\n";
    s += "    fwd latency - " +
         top_dict(info[d], k, [](const class_totals& c) { return c.latency; },
                  [](double v) { return duration_to_string(v); }) + "\n";
  }
  return s;
}

std::string summary(const module_profile& p, const module_profile_options& o) {
  const module_profile_node& r = p.root;
  const std::int64_t step = o.profile_step >= 0 ? o.profile_step : std::max<std::int64_t>(p.first_step, 0);
  std::string s = "\n-------------------------- DeepSpeed Flops Profiler --------------------------\n";
  s += "Profile Summary at step " + std::to_string(step) + ":\n";
  s += "Notations:\n"
       "data parallel size (dp_size), model parallel size(mp_size),\n"
       "number of parameters (params), number of multiply-accumulate operations(MACs),\n"
       "number of floating-point operations (flops), floating-point operations per second (FLOPS),\n"
       "fwd latency (forward propagation latency), bwd latency (backward propagation latency),\n"
       "step (weights update latency), iter latency (sum of fwd, bwd and step latency)\n\n";
  const double params = static_cast<double>(r.params);
  s += summary_line("params per GPU: ", params_to_string(params));
  s += summary_line("params of model = params per GPU * mp_size: ", params_to_string(params));
  s += summary_line("fwd MACs per GPU: ", macs_to_string(r.macs));
  s += summary_line("fwd flops per GPU: ", number_to_string(r.flops));
  s += summary_line("fwd flops of model = fwd flops per GPU * mp_size: ", number_to_string(r.flops));
  s += summary_line("fwd latency: ", duration_to_string(r.latency_s));
  s += summary_line("fwd FLOPS per GPU = fwd flops per GPU / fwd latency: ",
                    flops_to_string(r.latency_s != 0 ? r.flops / r.latency_s : 0.0));
  // Not in DeepSpeed (it profiles one step): what the averages above are taken over.
  std::string passes = std::to_string(p.passes);
  if (p.first_step >= 0)
    passes += p.first_step == p.last_step ? " (step " + std::to_string(p.first_step) + ")"
                                          : " (steps " + std::to_string(p.first_step) + "-" +
                                                std::to_string(p.last_step) + ")";
  s += summary_line("fwd passes averaged (MACs, flops, latency are per pass): ", passes);
  if (!p.has_shapes)
    s += "Note: recorded without record_shapes: operator input shapes are unknown, so MACs and "
         "flops are 0.\n";
  return s;
}

}  // namespace

std::string format_module_profile(const module_profile& p, const module_profile_options& o) {
  if (!p.ok) return "module profile: " + p.message + "\n";
  std::string s = summary(p, o);
  s += "\n----------------------------- Aggregated Profile per GPU -----------------------------\n";
  s += aggregated(p, o);
  if (o.detailed) {
    s += "\n------------------------------ Detailed Profile per GPU ------------------------------\n";
    s += "Each module profile is listed after its name in the following order: \n"
         "params, percentage of total params, MACs, percentage of total MACs, fwd latency, "
         "percentage of total fwd latency, fwd FLOPS\n";
    s += "\nNote: 1. MACs and flops of a module include its sub-modules'; operators a module runs "
         "outside its sub-modules make up the difference between a parent's figures and the sum "
         "of its children's.\n"
         "2. Number of floating-point operations is a theoretical estimation, thus FLOPS computed "
         "using that could be larger than the maximum system throughput.\n"
         "3. Latency is the wall time of the module scopes, averaged per forward pass over the "
         "window.\n\n";
    s += tree_repr(p.root, p.root) + "\n";
  }
  s += std::string(78, '-') + "\n";
  return s;
}

std::string print_model_profile(const trace_data& data, const module_profile_options& options) {
  const std::string text = format_module_profile(build_module_profile(data, options.root), options);
  if (options.output_file.empty()) return text;
  const std::filesystem::path path(options.output_file);
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out << text;
  if (!out || !out.flush())
    throw std::runtime_error("cannot write module profile " + options.output_file + ": " +
                             (ec ? ec.message() : std::string(std::strerror(errno))));
  return text;
}

}  // namespace kinetoscope
