// SPDX-License-Identifier: BSD-3-Clause
/// @file key_averages.cpp
/// build_events() (PyTorch's _parse_kineto_results + EventList._build_tree), key_averages()
/// (EventList.key_averages) and the small averages helpers (docs/profiler-rules.md#hidden-names,
/// #event-tree, #key-averages).

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "kinetoscope/key_averages.hpp"
#include "shapes_text.hpp"

namespace kinetoscope {
namespace {

/// Names PyTorch never shows in tables (profiler-rules.md#hidden-names); applied to every source
/// (ops, runtime, GPU).
bool filtered_name(std::string_view name) {
  return name == "[memory]" || name == "[OutOfMemory]" ||
         name == "profiler::_record_function_enter" ||
         name == "profiler::_record_function_enter_new" ||
         name == "profiler::_record_function_exit" || name == "aten::is_leaf" ||
         name == "aten::output_nr" || name == "aten::_version";
}

/// PyTorch's _rewrite_name(with_wildcard=True): every step aggregates into one row.
std::string key_of(std::string_view name) {
  if (name.starts_with("ProfilerStep#")) return "ProfilerStep*";
  return std::string(name);
}

/// One event under construction plus what only the builder needs.
struct node {
  function_event ev;
  bool cpu_side = false;              ///< host event (device type CPU): tree, memory
  bool is_op = false;                 ///< from trace_data::events: may own kernels
  bool deleted = false;               ///< removed as a redundant duplicate
  std::int64_t sequence_nr = -1;      ///< autograd links of ops (backward stack rule, #event-tree)
  std::int64_t fwd_thread_id = 0;
  std::vector<std::int64_t> kernels;  ///< durations (ns) of the GPU work this op launched
};

/// The memory events sorted by time with per-device prefix sums, answering "bytes allocated in
/// [start, end]" (inclusive both ends) and remembering which events some CPU event covered.
class memory_index {
 public:
  explicit memory_index(const std::vector<memory_event>& memory) : memory_(memory) {
    order_.resize(memory.size());
    std::iota(order_.begin(), order_.end(), std::size_t{0});
    std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) {
      return memory[a].time_ns < memory[b].time_ns;
    });
    times_.reserve(order_.size());
    cpu_sum_.assign(order_.size() + 1, 0);
    dev_sum_.assign(order_.size() + 1, 0);
    cover_.assign(order_.size() + 1, 0);
    for (std::size_t i = 0; i < order_.size(); ++i) {
      const memory_event& m = memory[order_[i]];
      times_.push_back(m.time_ns);
      const bool cpu = m.device == device_type::cpu;
      cpu_sum_[i + 1] = cpu_sum_[i] + (cpu ? m.bytes : 0);
      dev_sum_[i + 1] = dev_sum_[i] + (cpu ? 0 : m.bytes);
    }
  }

  /// Adds the bytes of every memory event with start <= t <= end to `ev` and marks them used.
  void attribute(std::int64_t start_ns, std::int64_t end_ns, function_event& ev) {
    const auto lo = static_cast<std::size_t>(
        std::lower_bound(times_.begin(), times_.end(), start_ns) - times_.begin());
    const auto hi = static_cast<std::size_t>(
        std::upper_bound(times_.begin(), times_.end(), end_ns) - times_.begin());
    if (lo >= hi) return;
    ev.cpu_memory_usage += cpu_sum_[hi] - cpu_sum_[lo];
    ev.device_memory_usage += dev_sum_[hi] - dev_sum_[lo];
    ++cover_[lo];
    --cover_[hi];
  }

  /// The memory events no CPU event covered, in time order.
  std::vector<const memory_event*> uncovered() const {
    std::vector<const memory_event*> out;
    std::int64_t depth = 0;
    for (std::size_t i = 0; i < order_.size(); ++i) {
      depth += cover_[i];
      if (depth == 0) out.push_back(&memory_[order_[i]]);
    }
    return out;
  }

 private:
  const std::vector<memory_event>& memory_;
  std::vector<std::size_t> order_;
  std::vector<std::int64_t> times_;
  std::vector<std::int64_t> cpu_sum_;
  std::vector<std::int64_t> dev_sum_;
  std::vector<std::int64_t> cover_;
};

/// EventList._populate_cpu_children: per thread, non-async host events in (start asc, end desc)
/// order; a stack sweep links an event to the innermost open event that contains it.
void build_tree(std::vector<node>& nodes) {
  std::vector<std::int32_t> host;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].cpu_side && !nodes[i].ev.is_async) host.push_back(static_cast<std::int32_t>(i));
  // `nodes` is already in (start asc, end desc) order; a stable sort by thread keeps it per thread.
  std::stable_sort(host.begin(), host.end(),
                   [&](std::int32_t a, std::int32_t b) { return nodes[a].ev.thread < nodes[b].ev.thread; });
  std::vector<std::int32_t> open;
  std::int64_t thread = 0;
  for (std::size_t k = 0; k < host.size(); ++k) {
    function_event& ev = nodes[host[k]].ev;
    if (k == 0 || ev.thread != thread) {
      open.clear();
      thread = ev.thread;
    }
    while (!open.empty()) {
      function_event& parent = nodes[open.back()].ev;
      if (ev.start_ns >= parent.end_ns || ev.end_ns > parent.end_ns) {
        open.pop_back();  // ended before `ev`, or only partially overlaps it: not a parent
      } else {
        parent.cpu_children.push_back(host[k]);
        ev.cpu_parent = open.back();
        break;
      }
    }
    open.push_back(host[k]);
  }
}

/// EventList._remove_dup_nodes: an event that is its parent's only child and has the parent's
/// name is removed; its children move up and its kernels replace the parent's. Repeated until
/// nothing changes (each pass walks the list in order, like PyTorch's).
void remove_duplicates(std::vector<node>& nodes) {
  for (;;) {
    bool changed = false;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      node& n = nodes[i];
      if (n.deleted || n.ev.cpu_parent < 0) continue;
      node& parent = nodes[static_cast<std::size_t>(n.ev.cpu_parent)];
      if (parent.ev.key != n.ev.key || parent.ev.cpu_children.size() != 1) continue;
      parent.ev.cpu_children = n.ev.cpu_children;
      parent.kernels = n.kernels;
      for (std::int32_t c : n.ev.cpu_children) nodes[static_cast<std::size_t>(c)].ev.cpu_parent = n.ev.cpu_parent;
      n.deleted = true;
      changed = true;
    }
    if (!changed) break;
  }
}

/// PyTorch's _filter_stack_entry: Python frames of autograd's own backward entry points are
/// dropped from recorded stacks. Native frames rarely match; kept for traces built by hand.
bool filtered_stack_entry(std::string_view entry) {
  const auto has = [&](std::string_view s) { return entry.find(s) != std::string_view::npos; };
  return (has("autograd/__init__") && (has("backward") || has("_make_grads"))) ||
         (has("torch/tensor") && has("backward"));
}

std::vector<std::string> stack_of(const trace_data& data, const cpu_event& e) {
  std::vector<std::string> stack;
  if (e.frame_count == 0 || std::size_t{e.first_frame} + e.frame_count > data.frames.size()) return stack;
  stack.reserve(e.frame_count);
  for (std::uint32_t i = 0; i < e.frame_count; ++i) {
    const std::uint32_t id = data.frames[e.first_frame + i];
    if (id >= data.strings.size()) continue;
    if (!filtered_stack_entry(data.strings[id])) stack.emplace_back(data.strings[id]);
  }
  return stack;
}

/// EventList._set_backward_stacktraces (profiler-rules.md#event-tree), run after duplicate removal:
/// an event under a backward function (an op with a forward thread id, itself included) takes the
/// stack of the first-seen forward event with the same sequence number, or an empty stack. PyTorch
/// keys by (sequence number, forward thread); trace_data has no map from the small forward-thread
/// ids to OS threads, so the key is the sequence number alone, as for the writer's fwdbwd flows.
void set_backward_stacks(std::vector<node>& nodes) {
  const auto backward_parent = [&](std::size_t i) -> std::int64_t {
    for (auto k = static_cast<std::int64_t>(i); k >= 0; k = nodes[static_cast<std::size_t>(k)].ev.cpu_parent)
      if (nodes[static_cast<std::size_t>(k)].fwd_thread_id > 0) return k;
    return -1;
  };
  std::vector<std::int64_t> parent(nodes.size(), -1);
  std::unordered_map<std::int64_t, std::size_t> forward;  // sequence number -> first forward event
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].deleted || !nodes[i].is_op) continue;
    parent[i] = backward_parent(i);
    if (parent[i] < 0 && nodes[i].sequence_nr >= 0) forward.try_emplace(nodes[i].sequence_nr, i);
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (parent[i] < 0) continue;
    const auto it = forward.find(nodes[static_cast<std::size_t>(parent[i])].sequence_nr);
    nodes[i].ev.stack = it != forward.end() ? nodes[it->second].ev.stack : std::vector<std::string>{};
  }
}

using detail::shapes_text;

/// Adds `e` into `row`; the first event of a row supplies its key and flags.
template <class E>
void accumulate(event_avg& row, const E& e, std::int64_t count, bool first) {
  if (first) {
    row.key = e.key;
    row.on_device = e.on_device;
    row.is_async = e.is_async;
    row.is_user_annotation = e.is_user_annotation;
    row.input_shapes = e.input_shapes;
    row.stack = e.stack;
    if constexpr (std::is_same_v<E, function_event>)
      row.has_cpu_parent = e.cpu_parent >= 0;
    else
      row.has_cpu_parent = e.has_cpu_parent;
  }
  row.count += count;
  row.flops += e.flops;
  row.cpu_memory_usage += e.cpu_memory_usage;
  row.self_cpu_memory_usage += e.self_cpu_memory_usage;
  row.device_memory_usage += e.device_memory_usage;
  row.self_device_memory_usage += e.self_device_memory_usage;
  row.cpu_time_total_ns += e.cpu_time_total_ns;
  row.self_cpu_time_total_ns += e.self_cpu_time_total_ns;
  row.device_time_total_ns += e.device_time_total_ns;
  row.self_device_time_total_ns += e.self_device_time_total_ns;
}

void append_part(std::string& key, std::string_view part) {
  key += std::to_string(part.size());
  key += ':';
  key += part;
}

}  // namespace

/*
 * Event order: the order of PyTorch's event list. Events are first collected in this order:
 * trace_data::events (ops and annotations, already sorted), then trace_data::runtime (CUDA
 * runtime/driver calls), then trace_data::gpu (kernels, memcpy, memset), then the stand-alone
 * "[memory]" events; the list is then stably sorted by (start ascending, end descending), so
 * device events are interleaved by their start time and ties keep the collection order.
 * Redundant duplicates (profiler-rules.md#event-tree) are then removed without reordering.
 *
 * Device times of host events are computed from the attached kernels whenever GPU activities
 * exist (there are none unless the cuda activity was on), so no separate "use_device" gate.
 */
event_list build_events(const trace_data& data) {
  std::vector<node> nodes;
  nodes.reserve(data.events.size() + data.runtime.size() + data.gpu.size());
  memory_index memory(data.memory);
  std::int64_t max_id = 0;

  for (const cpu_event& e : data.events) {
    const std::string_view name = data.str(e.name);
    if (filtered_name(name)) continue;
    node n;
    n.cpu_side = true;
    n.is_op = true;
    function_event& ev = n.ev;
    ev.id = e.external_id;
    ev.name = std::string(name);
    ev.key = key_of(name);
    ev.thread = e.tid;
    ev.start_ns = e.start_ns - data.start_ns;
    ev.end_ns = e.end_ns - data.start_ns;
    ev.is_async = e.tid != e.end_tid;
    ev.is_user_annotation = e.category == cpu_category::user_annotation;
    if (data.record_shapes && std::size_t{e.first_input} + e.input_count <= data.inputs.size()) {
      ev.input_shapes.reserve(e.input_count);
      for (std::uint32_t i = 0; i < e.input_count; ++i)
        ev.input_shapes.push_back(data.inputs[e.first_input + i].dims);
    }
    ev.flops = e.flops;
    ev.stack = stack_of(data, e);
    n.sequence_nr = e.sequence_nr;
    n.fwd_thread_id = e.fwd_thread_id;
    memory.attribute(e.start_ns, e.end_ns, ev);
    max_id = std::max(max_id, ev.id);
    nodes.push_back(std::move(n));
  }

  for (const runtime_call& r : data.runtime) {
    const std::string_view name = data.str(r.name);
    if (filtered_name(name)) continue;
    node n;
    n.cpu_side = true;
    function_event& ev = n.ev;
    ev.id = r.external_id;
    ev.name = std::string(name);
    ev.key = key_of(name);
    ev.thread = r.tid;
    ev.start_ns = r.start_ns - data.start_ns;
    ev.end_ns = r.end_ns - data.start_ns;
    memory.attribute(r.start_ns, r.end_ns, ev);
    max_id = std::max(max_id, ev.id);
    nodes.push_back(std::move(n));
  }

  for (const gpu_activity& g : data.gpu) {
    const std::string_view name = data.str(g.name);
    if (filtered_name(name)) continue;
    node n;
    function_event& ev = n.ev;
    ev.id = g.external_id;
    ev.name = std::string(name);
    ev.key = key_of(name);
    ev.thread = g.stream;
    ev.start_ns = g.start_ns - data.start_ns;
    ev.end_ns = g.end_ns - data.start_ns;
    ev.on_device = true;
    ev.device_time_total_ns = ev.self_device_time_total_ns = ev.end_ns - ev.start_ns;
    max_id = std::max(max_id, ev.id);
    nodes.push_back(std::move(n));
  }

  // Memory events inside no host event: stand-alone zero-duration "[memory]" rows.
  for (const memory_event* m : memory.uncovered()) {
    node n;
    n.cpu_side = true;
    function_event& ev = n.ev;
    ev.id = ++max_id;
    ev.name = ev.key = "[memory]";
    ev.thread = m->tid;
    ev.start_ns = ev.end_ns = m->time_ns - data.start_ns;
    (m->device == device_type::cpu ? ev.cpu_memory_usage : ev.device_memory_usage) = m->bytes;
    nodes.push_back(std::move(n));
  }

  std::stable_sort(nodes.begin(), nodes.end(), [](const node& a, const node& b) {
    if (a.ev.start_ns != b.ev.start_ns) return a.ev.start_ns < b.ev.start_ns;
    return a.ev.end_ns > b.ev.end_ns;
  });

  build_tree(nodes);

  // Kernel attribution: a GPU activity belongs to every non-async op whose External id matches.
  std::unordered_map<std::int64_t, std::vector<std::size_t>> ops_by_id;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].is_op && !nodes[i].ev.is_async && nodes[i].ev.id != 0)
      ops_by_id[nodes[i].ev.id].push_back(i);
  for (const node& n : nodes) {
    if (!n.ev.on_device || n.ev.id == 0) continue;
    auto it = ops_by_id.find(n.ev.id);
    if (it == ops_by_id.end()) continue;
    for (std::size_t op : it->second) nodes[op].kernels.push_back(n.ev.device_time_total_ns);
  }

  remove_duplicates(nodes);
  if (!data.frames.empty()) set_backward_stacks(nodes);

  // Compact the list and renumber parent/child indices.
  std::vector<std::int32_t> new_index(nodes.size(), -1);
  std::vector<function_event> events;
  events.reserve(nodes.size());
  std::vector<std::vector<std::int64_t>> kernels;
  std::vector<bool> cpu_side;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].deleted) continue;
    new_index[i] = static_cast<std::int32_t>(events.size());
    events.push_back(std::move(nodes[i].ev));
    kernels.push_back(std::move(nodes[i].kernels));
    cpu_side.push_back(nodes[i].cpu_side);
  }
  for (function_event& ev : events) {
    if (ev.cpu_parent >= 0) ev.cpu_parent = new_index[static_cast<std::size_t>(ev.cpu_parent)];
    for (std::int32_t& c : ev.cpu_children) c = new_index[static_cast<std::size_t>(c)];
  }

  // Times and self memory (profiler-rules.md#times, #memory-attribution). Children always come
  // after their parent in the list, so a reverse walk sees every child's totals before its
  // parent's.
  for (std::size_t i = events.size(); i-- > 0;) {
    function_event& ev = events[i];
    if (!cpu_side[i]) continue;  // device events were filled when created
    ev.cpu_time_total_ns = ev.end_ns - ev.start_ns;
    std::int64_t child_cpu = 0, child_dev = 0, child_cpu_mem = 0, child_dev_mem = 0;
    for (std::int32_t c : ev.cpu_children) {
      const function_event& ch = events[static_cast<std::size_t>(c)];
      child_cpu += ch.cpu_time_total_ns;
      child_dev += ch.device_time_total_ns;
      child_cpu_mem += ch.cpu_memory_usage;
      child_dev_mem += ch.device_memory_usage;
    }
    ev.self_cpu_memory_usage = ev.cpu_memory_usage - child_cpu_mem;
    ev.self_device_memory_usage = ev.device_memory_usage - child_dev_mem;
    if (ev.is_async) continue;  // self CPU and device times stay 0
    ev.self_cpu_time_total_ns = ev.cpu_time_total_ns - child_cpu;
    std::int64_t own = 0;
    for (std::int64_t k : kernels[i]) own += k;
    ev.device_time_total_ns = own + child_dev;
    ev.self_device_time_total_ns = own;
  }

  return event_list(std::move(events), data.profile_memory, data.with_flops);
}

averages key_averages(const event_list& events, bool group_by_input_shape, int group_by_stack_n) {
  std::vector<event_avg> rows;
  std::unordered_map<std::string, std::size_t> index;
  const std::size_t stack_n = group_by_stack_n > 0 ? static_cast<std::size_t>(group_by_stack_n) : 0;
  std::string key;
  for (const function_event& e : events) {
    key.clear();
    append_part(key, e.key);
    key += e.on_device ? 'D' : 'C';
    key += e.is_user_annotation ? 'U' : 'O';
    if (group_by_input_shape) append_part(key, shapes_text(e.input_shapes));
    for (std::size_t i = 0; i < std::min(stack_n, e.stack.size()); ++i) append_part(key, e.stack[i]);
    auto [it, inserted] = index.try_emplace(key, rows.size());
    if (inserted) rows.emplace_back();
    accumulate(rows[it->second], e, 1, inserted);
  }
  for (event_avg& row : rows) {
    if (row.stack.size() > stack_n) row.stack.resize(stack_n);
    if (!group_by_input_shape) row.input_shapes.clear();
  }
  return averages(std::move(rows), events.profile_memory(), events.with_flops());
}

const event_avg* averages::find(std::string_view key) const {
  for (const event_avg& row : rows_)
    if (row.key == key) return &row;
  return nullptr;
}

event_avg averages::total_average() const {
  event_avg total;
  bool first = true;
  for (const event_avg& row : rows_) {
    accumulate(total, row, row.count, first);
    first = false;
  }
  total.key = "Total";
  return total;
}

}  // namespace kinetoscope
