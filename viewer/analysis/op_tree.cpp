// SPDX-License-Identifier: BSD-3-Clause
// Operator tree (docs/plugin-rules.md#operator-tree), written from those rules; the order of
// every floating-point sum follows the plugin's so that the numbers are bit-identical.

#include "analysis/op_tree.hpp"

#include "analysis/id_map.hpp"
#include "analysis/sorting.hpp"
#include "analysis/tensor_cores.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace kinetoscope::analysis {

namespace {

constexpr std::array<std::string_view, 18> tc_kernel_patterns = {
    "h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816", "dgrad_1x1_stride_2x2",
    "first_layer_wgrad_kernel", "conv1x1", "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm",
    "xmma_sparse_conv", "xmma_warp_specialized_implicit_gemm", "xmma_gemm", "xmma_sparse_gemm",
    "c1688"};

constexpr std::array<std::string_view, 45> tc_op_allow_list = {
    "aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_tbc",
    "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
    "aten::convolution", "aten::cudnn_convolution", "aten::cudnn_convolution_transpose",
    "aten::prelu", "aten::addmm", "aten::addmv", "aten::addr", "aten::matmul", "aten::mm",
    "aten::mv", "aten::linear", "aten::addbmm", "aten::baddbmm", "aten::bmm",
    "aten::chain_matmul", "aten::linalg_multi_dot", "aten::_thnn_fused_lstm_cell",
    "aten::_thnn_fused_gru_cell", "aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell",
    "aten::rnn_relu_cell", "CudnnConvolutionBackward", "BmmBackward0",
    "aten::cudnn_convolution_transpose_backward", "CudnnConvolutionTransposeBackward",
    "MmBackward", "aten::cudnn_convolution_backward_weight", "aten::addmm_", "AddmvBackward",
    "MvBackward", "aten::cudnn_convolution_transpose_backward_weight",
    "aten::cudnn_convolution_transpose_backward_input", "AddmmBackward",
    "aten::cudnn_convolution_backward_input", "AddbmmBackward", "aten::cudnn_convolution_backward"};

constexpr std::string_view root_name = "CallTreeRoot";
constexpr std::string_view accumulate_grad_root =
    "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad";
constexpr std::string_view pl_profile_prefix = "[pl][profile]";
constexpr std::string_view pl_module_prefix = "[pl][module]";

// The plugin's root interval: (-sys.maxsize - 1, sys.maxsize) as Python floats compare.
constexpr double root_start = static_cast<double>(std::numeric_limits<std::int64_t>::min());
constexpr double root_end = static_cast<double>(std::numeric_limits<std::int64_t>::max());

bool is_operator_type_node(const op_node& n) {
  // The plugin's `node.type == EventTypes.OPERATOR`: cpu_op events that are not ProfilerStep#
  // (type ProfilerStep) nor Lightning events (pl_module / pl_profile types).
  return n.type == event_type::op && n.kind != node_kind::profiler_step && n.kind != node_kind::pl_module &&
         n.kind != node_kind::pl_profile && n.kind != node_kind::root && n.kind != node_kind::backward;
}

bool by_start_then_longer(double s1, double e1, double s2, double e2) {
  if (s1 != s2) return s1 < s2;
  return e1 > e2;
}

class builder {
 public:
  builder(const trace_model& m, const op_tree_options& o, op_trees& t) : m_(m), opt_(o), t_(t) {}

  void run();

 private:
  struct thread_lists {
    std::int64_t tid = 0;
    std::vector<std::uint32_t> nodes;
  };

  std::uint32_t new_node(op_node n) {
    t_.nodes.push_back(std::move(n));
    return static_cast<std::uint32_t>(t_.nodes.size() - 1);
  }
  thread_lists& list_for(std::vector<thread_lists>& lists, std::unordered_map<std::int64_t, std::size_t>& index,
                         std::int64_t tid) {
    auto [it, inserted] = index.emplace(tid, lists.size());
    if (inserted) lists.push_back(thread_lists{tid, {}});
    return lists[it->second];
  }

  void pass1();
  void attach_by_external_id();
  std::span<const std::uint32_t> group_runtimes(std::uint32_t g) const {
    return {group_items_.data() + group_offsets_[g], group_offsets_[g + 1] - group_offsets_[g]};
  }
  std::uint32_t build_thread(const thread_lists& list, bool with_runtimes);
  void remove_dup_nodes(std::uint32_t n);
  void fill_stats(std::uint32_t n);
  void fill_runtime(std::uint32_t rt, std::uint32_t owner);
  void fill_backward_stats(std::uint32_t n);
  std::uint32_t deepest_containing(std::uint32_t root, double ts) const;
  void apply_fallback(std::uint32_t root, std::int64_t tid);
  void set_main_tid_fallback();
  void regroup_backward();
  void build_backward_module(std::uint32_t node, std::uint32_t parent,
                             const std::unordered_map<double, std::vector<std::uint32_t>>& fwd_to_group,
                             std::vector<std::uint32_t>& result);
  void insert_backward_modules(std::uint32_t root, std::vector<std::uint32_t>& modules);
  void collect_operators(std::uint32_t n);
  void make_message();

  const trace_model& m_;
  const op_tree_options& opt_;
  op_trees& t_;

  std::vector<thread_lists> host_lists_;
  std::unordered_map<std::int64_t, std::size_t> host_index_;
  std::vector<thread_lists> pl_lists_;
  std::unordered_map<std::int64_t, std::size_t> pl_index_;
  std::unordered_map<std::int64_t, std::vector<std::uint32_t>> zero_runtimes_;  // tid -> runtimes
  std::vector<std::uint32_t> idless_runtimes_;  // no External id at all (quirk Q22), event order
  std::unordered_map<std::int64_t, std::vector<std::uint32_t>> unmatched_;      // tid -> runtimes for fallback
  std::vector<std::uint32_t> stale_kernels_;
  // The runtimes by external id, as the plugin's dict of lists (insertion order kept): the ids
  // number groups in first-seen order, the groups list their runtimes in event order (flat,
  // offsets + items, once pass1 has seen them all); a group taken by a node is gone for the
  // nodes after it.
  id_map external_groups_;                     // external id -> group
  std::vector<std::int64_t> group_ids_;        // group -> external id
  std::vector<std::uint32_t> runtime_group_;   // runtime -> group (pass1 only)
  std::vector<std::uint32_t> group_offsets_;   // group g: group_items_[offsets[g], offsets[g + 1])
  std::vector<std::uint32_t> group_items_;
  std::vector<char> group_taken_;
  std::optional<std::int64_t> main_tid_;
  std::unordered_set<std::int64_t> comm_external_ids_;
  bool suspect_ids_ = false;  // fallback mode: runtime ids look like correlation ids
};

void builder::pass1() {
  id_map corr_to_runtime;  // the last runtime seen with each correlation id
  std::unordered_map<std::int64_t, std::vector<std::uint32_t>> corr_to_device;
  std::vector<std::int64_t> corr_order;  // first-parking order (dict insertion order)

  // Size the tables once (op_node is large: growing t_.nodes by doubling would move it a lot).
  {
    std::size_t devices = 0, runtimes = 0, hosts = 0;
    for (const event& e : m_.events) {
      switch (e.type) {
        case event_type::kernel:
        case event_type::memcpy:
        case event_type::memset: ++devices; break;
        case event_type::runtime: ++runtimes; break;
        case event_type::driver: runtimes += opt_.driver_as_runtime; break;
        case event_type::op:
        case event_type::user_annotation:
        case event_type::python:
        case event_type::module: ++hosts; break;
        default: break;
      }
    }
    t_.devices.reserve(devices);
    t_.runtimes.reserve(runtimes + 1);  // + the stale kernels' dummy runtime
    t_.nodes.reserve(hosts + 64);       // + roots and backward nodes (grows if more)
    corr_to_runtime = id_map(runtimes);
    external_groups_ = id_map(runtimes);
    runtime_group_.reserve(runtimes);
  }
  // Name rules evaluated once per distinct string id, not once per event.
  enum : std::uint8_t { known = 1, tc_kernel = 2, comm = 4, tc_allow = 8, dp = 16, ddp = 32 };
  std::vector<std::uint8_t> name_flags(m_.strings.size(), 0);
  auto flags_of = [&](std::uint32_t id) {
    std::uint8_t& f = name_flags[id];
    if (f == 0) {
      const std::string_view name = m_.str(id);
      f = known;
      if (opt_.modern_tensor_cores ? kernel_uses_tensor_cores(name) : is_tc_kernel(name)) f |= tc_kernel;
      if (opt_.all_collectives ? is_collective_name(name) : is_plugin_comm_name(name)) f |= comm;
      if (opt_.modern_tensor_cores ? is_modern_tc_eligible_op(name) : is_tc_eligible_op(name)) f |= tc_allow;
      if (name == "DataParallel.forward") f |= dp;
      if (name == "DistributedDataParallel.forward") f |= ddp;
    }
    return f;
  };
  // classify_host_event per (name, host type): 0 = not yet, 1 = no node, 2 + kind otherwise.
  std::vector<std::uint8_t> kind_cache(m_.strings.size() * 4, 0);
  auto host_slot = [](event_type t) -> std::size_t {
    switch (t) {
      case event_type::op: return 0;
      case event_type::user_annotation: return 1;
      case event_type::python: return 2;
      default: return 3;
    }
  };

  for (std::uint32_t i = 0; i < m_.events.size(); ++i) {
    const event& e = m_.events[i];
    switch (e.type) {
      case event_type::kernel:
      case event_type::memcpy:
      case event_type::memset: {
        t_.used_devices.insert(e.pid);
        if (e.type == event_type::kernel) {
          t_.has_any_kernel = true;
          ++t_.stats.kernels;
        } else {
          t_.has_memcpy_or_memset = true;
        }
        device_node d;
        d.event = i;
        d.type = e.type;
        d.name = m_.str(e.name);
        d.start = e.ts;
        d.end = e.ts + e.dur;
        d.tc_kernel = (flags_of(e.name) & tc_kernel) != 0;
        t_.devices.push_back(d);
        auto idx = static_cast<std::uint32_t>(t_.devices.size() - 1);
        if (const std::uint32_t* rt = corr_to_runtime.find(e.correlation)) {
          t_.runtimes[*rt].devices.push_back(idx);
          t_.devices[idx].runtime = *rt;
        } else {
          auto [pit, inserted] = corr_to_device.try_emplace(e.correlation);
          if (inserted) corr_order.push_back(e.correlation);
          pit->second.push_back(idx);
        }
        break;
      }
      case event_type::driver:
        if (!opt_.driver_as_runtime) break;
        [[fallthrough]];
      case event_type::runtime: {
        t_.has_runtime = true;
        ++t_.stats.runtimes;
        runtime_node rt;
        rt.event = i;
        rt.start = e.ts;
        rt.end = e.ts + e.dur;
        rt.tid = e.tid;
        rt.external_id = e.external_id;
        rt.correlation = e.correlation;
        auto idx = static_cast<std::uint32_t>(t_.runtimes.size());
        if (auto it = corr_to_device.find(e.correlation); it != corr_to_device.end()) {
          rt.devices = std::move(it->second);
          corr_to_device.erase(it);
          // The plugin sorts the parked device nodes by (start, -end) when creating the runtime.
          stable_sort_if_needed(rt.devices.begin(), rt.devices.end(), [&](std::uint32_t a, std::uint32_t b) {
            return by_start_then_longer(t_.devices[a].start, t_.devices[a].end, t_.devices[b].start,
                                        t_.devices[b].end);
          });
          for (auto d : rt.devices) t_.devices[d].runtime = idx;
        }
        if (e.external_id != 0 && e.external_id == e.correlation) ++t_.stats.runtimes_id_equals_correlation;
        t_.runtimes.push_back(std::move(rt));
        *corr_to_runtime.try_emplace(e.correlation, idx).first = idx;
        const auto [group, new_group] =
            external_groups_.try_emplace(e.external_id, static_cast<std::uint32_t>(group_ids_.size()));
        if (new_group) group_ids_.push_back(e.external_id);
        runtime_group_.push_back(*group);
        if (e.external_id == 0 && !e.has_external_id && opt_.idless_runtimes_to_first_idless_node) {
          idless_runtimes_.push_back(idx);  // attach_by_external_id() decides
        } else if (e.external_id == 0) {
          zero_runtimes_[e.tid].push_back(idx);
          ++t_.stats.runtimes_zero_id;
        }
        break;
      }
      case event_type::op:
      case event_type::user_annotation:
      case event_type::python:
      case event_type::module: {
        std::string_view name = m_.str(e.name);
        std::uint8_t& cached_kind = kind_cache[std::size_t{e.name} * 4 + host_slot(e.type)];
        if (cached_kind == 0) {
          auto k = classify_host_event(e.type, name, m_.lightning);
          cached_kind = k ? static_cast<std::uint8_t>(2 + static_cast<std::uint8_t>(*k)) : 1;
        }
        const std::uint8_t flags = flags_of(e.name);
        if ((e.type == event_type::op || e.type == event_type::python || e.type == event_type::user_annotation) &&
            (flags & comm) != 0)
          comm_external_ids_.insert(e.external_id);
        if ((flags & dp) != 0) t_.uses_dp = true;
        if ((flags & ddp) != 0) t_.uses_ddp = true;
        if (cached_kind == 1) break;
        const std::optional<node_kind> kind = static_cast<node_kind>(cached_kind - 2);
        op_node n;
        n.kind = *kind;
        n.type = e.type;
        n.name = name;
        n.name_id = e.name;
        n.event = i;
        n.start = e.ts;
        n.end = e.ts + e.dur;
        n.tid = e.tid;
        if (n.kind == node_kind::pl_profile) {
          n.name = name.substr(pl_profile_prefix.size());
          n.name_id = no_index;
        } else if (n.kind == node_kind::pl_module) {
          // "[pl][module]<type>: <name>"; without ": " the plugin's slicing keeps odd parts.
          std::string_view rest = name.substr(pl_module_prefix.size());
          auto sep = rest.find(": ");
          if (sep == std::string_view::npos) {
            n.name = rest.size() > 1 ? rest.substr(1) : std::string_view{};
          } else {
            n.name = rest.substr(sep + 2);
          }
          n.name_id = no_index;
        }
        n.tc_eligible_allow_list = n.name_id != no_index ? (flags_of(n.name_id) & tc_allow) != 0
                                                         : opt_.modern_tensor_cores ? is_modern_tc_eligible_op(n.name)
                                                                                    : is_tc_eligible_op(n.name);
        n.tc_eligible = n.tc_eligible_allow_list;
        std::uint32_t idx = new_node(std::move(n));
        if (t_.nodes[idx].kind == node_kind::pl_profile)
          list_for(pl_lists_, pl_index_, e.tid).nodes.push_back(idx);
        else
          list_for(host_lists_, host_index_, e.tid).nodes.push_back(idx);
        break;
      }
      default:
        break;
    }
  }

  // The groups' runtime lists (runtimes were numbered in event order).
  group_offsets_.assign(group_ids_.size() + 1, 0);
  for (const std::uint32_t g : runtime_group_) ++group_offsets_[g + 1];
  for (std::size_t g = 1; g < group_offsets_.size(); ++g) group_offsets_[g] += group_offsets_[g - 1];
  group_items_.resize(runtime_group_.size());
  {
    std::vector<std::uint32_t> fill(group_offsets_.begin(), group_offsets_.end() - 1);
    for (std::uint32_t rt = 0; rt < runtime_group_.size(); ++rt) group_items_[fill[runtime_group_[rt]]++] = rt;
  }
  runtime_group_ = {};
  group_taken_.assign(group_ids_.size(), 0);

  for (std::int64_t corr : corr_order) {
    auto it = corr_to_device.find(corr);
    if (it == corr_to_device.end()) continue;
    for (auto d : it->second) {
      if (t_.devices[d].type == event_type::kernel) {
        stale_kernels_.push_back(d);
        ++t_.stats.stale_kernels;
      } else {
        ++t_.stats.stale_dropped;
      }
    }
  }

  for (const auto& d : t_.devices) {
    if (d.type == event_type::kernel && !comm_external_ids_.count(m_.events[d.event].external_id) &&
        !(opt_.all_collectives && is_collective_kernel_name(d.name))) {  // K4: NCCL's kernels by name
      t_.has_kernel = true;
      break;
    }
  }
}

void builder::attach_by_external_id() {
  if (opt_.time_containment_fallback) {
    std::uint64_t nonzero = t_.stats.runtimes - t_.stats.runtimes_zero_id;
    suspect_ids_ = nonzero > 0 && 2 * t_.stats.runtimes_id_equals_correlation > nonzero;
  }
  for (const auto& list : host_lists_) {
    for (std::uint32_t n : list.nodes) {
      op_node& node = t_.nodes[n];
      // (The plugin drops module nodes' external id; nodes without an event have none.)
      const std::int64_t external_id =
          node.event == no_index || node.kind == node_kind::module ? 0 : m_.events[node.event].external_id;
      if (external_id == 0) continue;  // absent id (quirk Q21: normalised, never matches)
      const std::uint32_t* group = external_groups_.find(external_id);
      if (group == nullptr || group_taken_[*group] != 0) continue;
      group_taken_[*group] = 1;
      std::vector<std::uint32_t> taken;
      for (const std::uint32_t rt : group_runtimes(*group)) {
        const runtime_node& r = t_.runtimes[rt];
        if (suspect_ids_ && r.external_id == r.correlation)
          unmatched_[r.tid].push_back(rt);
        else
          taken.push_back(rt);
      }
      t_.stats.runtimes_matched += taken.size();
      node.runtimes.insert(node.runtimes.end(), taken.begin(), taken.end());
    }
  }
  // Quirk Q22: the plugin keys runtimes by their External id as read (None when absent); the
  // first host node that has none either (module nodes never do) takes every such runtime,
  // and without such a node they are dropped like runtimes whose id matched no node.
  if (!idless_runtimes_.empty()) {
    op_node* taker = nullptr;
    for (const auto& list : host_lists_) {
      for (std::uint32_t n : list.nodes) {
        op_node& node = t_.nodes[n];
        if (node.event != no_index && (node.kind == node_kind::module || !m_.events[node.event].has_external_id)) {
          taker = &node;
          break;
        }
      }
      if (taker != nullptr) break;
    }
    if (taker != nullptr) {
      taker->runtimes.insert(taker->runtimes.end(), idless_runtimes_.begin(), idless_runtimes_.end());
      t_.stats.runtimes_matched += idless_runtimes_.size();
    } else {
      for (const std::uint32_t rt : idless_runtimes_) {
        ++t_.stats.runtimes_dropped;
        unmatched_[t_.runtimes[rt].tid].push_back(rt);
      }
    }
    idless_runtimes_ = {};
  }
  for (std::uint32_t g = 0; g < group_ids_.size(); ++g) {
    if (group_ids_[g] == 0 || group_taken_[g] != 0) continue;
    for (const std::uint32_t rt : group_runtimes(g)) {
      ++t_.stats.runtimes_dropped;
      unmatched_[t_.runtimes[rt].tid].push_back(rt);
    }
  }
  // Not needed past this point: freed before the trees are built.
  external_groups_ = id_map();
  group_ids_ = {};
  group_offsets_ = {};
  group_items_ = {};
  group_taken_ = {};
}

void builder::remove_dup_nodes(std::uint32_t n) {
  for (;;) {
    op_node& node = t_.nodes[n];
    if (node.children.size() != 1) break;
    const op_node& child = t_.nodes[node.children[0]];
    if (!(node.name == child.name && is_operator_type_node(node) && is_operator_type_node(child))) break;
    index_list children = child.children;
    index_list runtimes = child.runtimes;  // the outer node's runtimes are discarded (Q7)
    node.children = std::move(children);
    node.runtimes = std::move(runtimes);
    for (auto c : node.children) t_.nodes[c].parent = n;
  }
  for (std::size_t i = 0; i < t_.nodes[n].children.size(); ++i) remove_dup_nodes(t_.nodes[n].children[i]);
}

void builder::fill_runtime(std::uint32_t rt, std::uint32_t owner) {
  runtime_node& r = t_.runtimes[rt];
  for (auto d : r.devices) {
    device_node& dev = t_.devices[d];
    if (owner != no_index) {
      dev.owner = owner;
      dev.op_name = t_.nodes[owner].name;
      dev.op_tc_eligible = t_.nodes[owner].tc_eligible;
    }
    double dur = dev.end - dev.start;
    r.device_duration += dur;
    r.tc_duration += dev.tc_kernel ? dur : 0.0;
  }
}

void builder::fill_stats(std::uint32_t n) {
  {
    op_node& node = t_.nodes[n];
    stable_sort_if_needed(node.children.begin(), node.children.end(), [&](std::uint32_t a, std::uint32_t b) {
      return by_start_then_longer(t_.nodes[a].start, t_.nodes[a].end, t_.nodes[b].start, t_.nodes[b].end);
    });
    // The plugin's key: (start, -end) when both are truthy, else (maxsize, -maxsize - 1).
    auto key = [&](std::uint32_t r) {
      const runtime_node& rt = t_.runtimes[r];
      if (!rt.stale_dummy && rt.start != 0 && rt.end != 0) return std::pair<double, double>(rt.start, rt.end);
      return std::pair<double, double>(root_end, root_end);
    };
    stable_sort_if_needed(node.runtimes.begin(), node.runtimes.end(), [&](std::uint32_t a, std::uint32_t b) {
      auto ka = key(a);
      auto kb = key(b);
      return by_start_then_longer(ka.first, ka.second, kb.first, kb.second);
    });
  }
  // The recursion neither adds nodes nor touches n's children list: index it in place.
  for (std::size_t i = 0; i < t_.nodes[n].children.size(); ++i) {
    const std::uint32_t c = t_.nodes[n].children[i];
    if (t_.nodes[c].kind == node_kind::backward)
      fill_backward_stats(c);
    else
      fill_stats(c);
  }
  for (auto rt : t_.nodes[n].runtimes) fill_runtime(rt, n);

  op_node& node = t_.nodes[n];
  const bool operator_type = is_operator_type_node(node);
  node.host_total = node.end - node.start;
  node.host_self = node.end - node.start;
  for (auto c : node.children) {
    const op_node& child = t_.nodes[c];
    node.device_total += child.device_total;
    node.host_self -= (child.end - child.start);
    node.tc_total += child.tc_total;
    if (operator_type && !node.tc_eligible && child.tc_eligible) node.tc_eligible = true;
  }
  for (auto r : node.runtimes) {
    const runtime_node& rt = t_.runtimes[r];
    if (!rt.stale_dummy) node.host_self -= (rt.end - rt.start);
    node.device_total += rt.device_duration;
    node.device_self += rt.device_duration;
    node.tc_self += rt.tc_duration;
    node.tc_total += rt.tc_duration;
    if (operator_type && !node.tc_eligible && rt.tc_duration > 0) node.tc_eligible = true;
  }
  if (node.kind == node_kind::module || node.kind == node_kind::pl_module) {
    double extra = 0;
    for (auto c : node.children)
      if (t_.is_operator(c)) extra += t_.nodes[c].device_total;
    node.device_self += extra;
  }
}

void builder::fill_backward_stats(std::uint32_t n) {
  op_node& node = t_.nodes[n];
  stable_sort_if_needed(node.children.begin(), node.children.end(), [&](std::uint32_t a, std::uint32_t b) {
    return by_start_then_longer(t_.nodes[a].start, t_.nodes[a].end, t_.nodes[b].start, t_.nodes[b].end);
  });
  if (node.children.empty()) return;
  node.start = t_.nodes[node.children.front()].start;
  node.end = t_.nodes[node.children.back()].end;
  node.host_total = node.end - node.start;
  node.host_self = node.end - node.start;
  node.device_total = 0;
  node.tc_total = 0;
  for (auto c : node.children) {
    const op_node& child = t_.nodes[c];
    node.device_total += child.device_total;
    node.host_self -= (child.end - child.start);
    node.tc_total += child.tc_total;
    if (!node.tc_eligible && child.tc_eligible) node.tc_eligible = true;
  }
}

std::uint32_t builder::deepest_containing(std::uint32_t root, double ts) const {
  std::uint32_t cur = root;
  for (;;) {
    const auto& ch = t_.nodes[cur].children;
    // Last child starting at or before ts (children are sorted by start).
    auto it = std::upper_bound(ch.begin(), ch.end(), ts,
                               [&](double v, std::uint32_t c) { return v < t_.nodes[c].start; });
    // Siblings are disjoint (the stack walk only adds a sibling after the previous one ended).
    std::uint32_t next = no_index;
    if (it != ch.begin() && ts < t_.nodes[*(it - 1)].end) next = *(it - 1);
    if (next == no_index) return cur;
    cur = next;
  }
}

void builder::apply_fallback(std::uint32_t root, std::int64_t tid) {
  auto it = unmatched_.find(tid);
  if (it == unmatched_.end()) return;
  for (auto rt : it->second) {
    runtime_node& r = t_.runtimes[rt];
    std::uint32_t owner = deepest_containing(root, r.start);
    // A step is no launcher (docs/kinetoscope-rules.md#k2): a runtime that only a step contains
    // stays unattached, and the Kernel view lists its kernels under "(no operator)".
    if (owner == root || t_.nodes[owner].kind == node_kind::profiler_step) continue;
    std::uint64_t kernels = 0;
    for (auto d : r.devices) kernels += t_.devices[d].type == event_type::kernel;
    if (t_.is_operator(owner)) t_.stats.kernels_by_fallback += kernels;
    if (opt_.time_containment_fallback) {
      r.by_fallback = true;
      t_.nodes[owner].runtimes.push_back(rt);
      ++t_.stats.runtimes_by_fallback;
      t_.fallback_used = true;
    }
  }
}

std::uint32_t builder::build_thread(const thread_lists& list, bool with_runtimes) {
  std::vector<std::uint32_t> nodes = list.nodes;
  stable_sort_if_needed(nodes.begin(), nodes.end(), [&](std::uint32_t a, std::uint32_t b) {
    return by_start_then_longer(t_.nodes[a].start, t_.nodes[a].end, t_.nodes[b].start, t_.nodes[b].end);
  });
  bool has_step = false;
  for (auto n : nodes) has_step = has_step || is_profiler_step_name(t_.nodes[n].name);

  op_node root;
  root.kind = node_kind::root;
  root.type = event_type::python;
  root.name = root_name;
  root.start = root_start;
  root.end = root_end;
  root.tid = list.tid;
  if (with_runtimes) {
    if (auto it = zero_runtimes_.find(list.tid); it != zero_runtimes_.end()) root.runtimes = it->second;
    if (has_step) {
      main_tid_ = list.tid;  // the plugin keeps the last thread that has step nodes
      if (!stale_kernels_.empty()) {
        runtime_node dummy;
        dummy.stale_dummy = true;
        dummy.devices = stale_kernels_;
        t_.runtimes.push_back(std::move(dummy));
        auto d = static_cast<std::uint32_t>(t_.runtimes.size() - 1);
        for (auto k : stale_kernels_) t_.devices[k].runtime = d;
        fill_runtime(d, no_index);  // processed once on creation, once more by the root (Q10)
        root.runtimes.push_back(d);
      }
    }
  }
  std::uint32_t root_idx = new_node(std::move(root));

  std::vector<std::uint32_t> stack{root_idx};
  for (auto n : nodes) {
    for (;;) {
      std::uint32_t top = stack.back();
      if (t_.nodes[n].start < t_.nodes[top].end) {
        if (t_.nodes[n].end <= t_.nodes[top].end) {
          t_.nodes[top].children.push_back(n);
          t_.nodes[n].parent = top;
          stack.push_back(n);
        } else {
          ++t_.stats.nodes_dropped_intersecting;
        }
        break;
      }
      // The root is never popped: a node it does not contain (a time outside its range, which
      // the loader already refuses, or NaN from a hand-built model) is dropped instead.
      if (stack.size() == 1) {
        ++t_.stats.nodes_dropped_intersecting;
        break;
      }
      stack.pop_back();
    }
  }
  remove_dup_nodes(root_idx);
  if (with_runtimes) apply_fallback(root_idx, list.tid);
  fill_stats(root_idx);
  op_node& r = t_.nodes[root_idx];
  if (!r.children.empty()) {
    r.start = t_.nodes[r.children.front()].start;
    r.end = t_.nodes[r.children.back()].end;
  }
  // The plugin's root host numbers were computed over (-2^63, 2^63); give the span instead.
  r.host_total = r.end - r.start;
  r.host_self = r.host_total;
  for (auto c : r.children) r.host_self -= t_.nodes[c].end - t_.nodes[c].start;
  for (auto rt : r.runtimes)
    if (!t_.runtimes[rt].stale_dummy) r.host_self -= t_.runtimes[rt].end - t_.runtimes[rt].start;
  return root_idx;
}

void builder::set_main_tid_fallback() {
  if (main_tid_ || t_.threads.empty()) return;
  if (t_.threads.size() == 1) {
    main_tid_ = t_.threads[0].tid;
    return;
  }
  std::optional<std::int64_t> backward_tid;
  for (const auto& th : t_.threads) {
    for (auto c : t_.nodes[th.root].children) {
      if (t_.nodes[c].name.starts_with(backward_root_prefix)) {
        backward_tid = t_.nodes[c].tid;
        break;
      }
    }
    if (backward_tid) break;
  }
  std::optional<double> best;
  for (const auto& th : t_.threads) {
    if (backward_tid && th.tid == *backward_tid) continue;
    const op_node& r = t_.nodes[th.root];
    double len = r.end - r.start;
    if (!best || len > *best) {
      best = len;
      main_tid_ = th.tid;
    }
  }
}

void builder::build_backward_module(std::uint32_t node, std::uint32_t parent,
                                    const std::unordered_map<double, std::vector<std::uint32_t>>& fwd_to_group,
                                    std::vector<std::uint32_t>& result) {
  if (t_.nodes[node].kind == node_kind::module) {
    op_node b;
    b.kind = node_kind::backward;
    b.type = event_type::other;
    b.name = t_.own(std::string(t_.nodes[node].name) + ".backward");
    b.start = t_.nodes[node].start;
    b.end = t_.nodes[node].end;
    b.tid = t_.nodes[node].tid;
    b.host_total = b.end - b.start;  // without children it keeps the module's interval
    std::uint32_t idx = new_node(std::move(b));
    if (parent == no_index) {
      result.push_back(idx);
    } else {
      t_.nodes[parent].children.push_back(idx);
      t_.nodes[idx].parent = parent;
    }
    parent = idx;
  }
  const index_list children = t_.nodes[node].children;
  for (auto c : children) {
    if (parent != no_index && t_.is_operator(c)) {
      if (auto it = fwd_to_group.find(t_.nodes[c].start); it != fwd_to_group.end()) {
        for (auto g : it->second) {
          t_.nodes[parent].children.push_back(g);
          t_.nodes[g].parent = parent;
        }
      }
    }
    build_backward_module(c, parent, fwd_to_group, result);
  }
  if (t_.nodes[node].kind == node_kind::module && parent != no_index && !t_.nodes[parent].children.empty()) {
    fill_backward_stats(parent);
    t_.nodes[parent].tid = t_.nodes[t_.nodes[parent].children.front()].tid;
  }
}

void builder::insert_backward_modules(std::uint32_t root, std::vector<std::uint32_t>& modules) {
  std::stable_sort(modules.begin(), modules.end(), [&](std::uint32_t a, std::uint32_t b) {
    return by_start_then_longer(t_.nodes[a].start, t_.nodes[a].end, t_.nodes[b].start, t_.nodes[b].end);
  });
  std::vector<std::pair<std::uint32_t, std::size_t>> stack;
  std::size_t module_index = 0;
  std::size_t child_index = 0;
  std::uint32_t current = root;
  while (module_index < modules.size()) {
    std::uint32_t mod = modules[module_index];
    const double ms = t_.nodes[mod].start;
    const double me = t_.nodes[mod].end;
    if (current == no_index || me < t_.nodes[current].start) {
      ++module_index;  // dropped (stale module)
      continue;
    }
    if (ms > t_.nodes[current].end) {
      if (!stack.empty()) {
        std::tie(current, child_index) = stack.back();
        stack.pop_back();
        ++child_index;
      } else {
        current = no_index;
      }
      continue;
    }
    while (child_index < t_.nodes[current].children.size()) {
      const op_node& child = t_.nodes[t_.nodes[current].children[child_index]];
      if (me < child.start) break;
      if (ms >= child.end) {
        ++child_index;
      } else {
        stack.emplace_back(current, child_index);
        current = t_.nodes[current].children[child_index];
        child_index = 0;
      }
    }
    auto& ch = t_.nodes[current].children;
    ch.insert(ch.begin() + static_cast<std::ptrdiff_t>(child_index), mod);
    t_.nodes[mod].parent = current;
    ++child_index;
    ++module_index;
  }
}

void builder::regroup_backward() {
  // Flow map: ts(s) -> ts(f) for ids with both ends, in first-'s' order.
  std::vector<std::int64_t> s_order;
  std::unordered_map<std::int64_t, double> fwd;
  std::unordered_map<std::int64_t, double> bwd;
  for (const auto& f : m_.fwdbwd) {
    if (f.is_start) {
      if (fwd.emplace(f.id, f.ts).second)
        s_order.push_back(f.id);
      else
        fwd[f.id] = f.ts;
    } else {
      bwd[f.id] = f.ts;
    }
  }
  std::vector<std::pair<double, double>> flows;  // ordered, unique keys (dict semantics)
  std::unordered_map<double, std::size_t> flow_index;
  for (auto id : s_order) {
    auto b = bwd.find(id);
    if (b == bwd.end()) continue;
    double key = fwd[id];
    if (auto it = flow_index.find(key); it != flow_index.end())
      flows[it->second].second = b->second;
    else {
      flow_index.emplace(key, flows.size());
      flows.emplace_back(key, b->second);
    }
  }
  if (flows.empty()) return;
  set_main_tid_fallback();

  // Collect modules and backward roots (descending only through steps).
  std::vector<std::uint32_t> modules;
  std::vector<std::uint32_t> parent_order;
  std::unordered_map<std::uint32_t, std::vector<std::uint32_t>> backward_by_parent;
  auto traverse = [&](auto&& self, std::uint32_t parent, std::uint32_t n) -> void {
    const op_node& node = t_.nodes[n];
    if (node.kind == node_kind::module) {
      modules.push_back(n);
    } else if (node.kind == node_kind::profiler_step) {
      for (auto c : node.children) self(self, n, c);
    } else if (node.name.starts_with(backward_root_prefix)) {
      auto [it, inserted] = backward_by_parent.try_emplace(parent);
      if (inserted) parent_order.push_back(parent);
      it->second.push_back(n);
    }
  };
  for (const auto& th : t_.threads)
    for (auto c : t_.nodes[th.root].children) traverse(traverse, th.root, c);
  if (modules.empty()) return;
  std::vector<std::uint32_t> backward_nodes;
  std::unordered_map<std::uint32_t, std::uint32_t> removed_from;  // backward root -> its parent
  for (auto p : parent_order) {
    const auto& removed = backward_by_parent[p];
    std::unordered_set<std::uint32_t> rm(removed.begin(), removed.end());
    auto& ch = t_.nodes[p].children;
    ch.erase(std::remove_if(ch.begin(), ch.end(), [&](std::uint32_t c) { return rm.count(c) > 0; }), ch.end());
    backward_nodes.insert(backward_nodes.end(), removed.begin(), removed.end());
    for (auto b : removed) removed_from.emplace(b, p);
  }
  if (backward_nodes.empty()) return;

  // child start -> parent, over everything below the backward roots (first seen wins).
  std::unordered_map<double, std::uint32_t> ts_to_parent;
  auto walk = [&](auto&& self, std::uint32_t n) -> void {
    for (auto c : t_.nodes[n].children) {
      ts_to_parent.try_emplace(t_.nodes[c].start, n);
      self(self, c);
    }
  };
  for (auto b : backward_nodes) walk(walk, b);

  // Groups: an AccumulateGrad root joins the preceding group.
  std::unordered_map<std::uint32_t, std::vector<std::uint32_t>> groups;  // head -> members
  std::uint32_t last_head = no_index;
  for (auto b : backward_nodes) {
    if (t_.nodes[b].name == accumulate_grad_root) {
      if (last_head == no_index) {
        ++t_.stats.backward_groups_lost;  // the plugin aborts the file here (Q20): skip it
        continue;
      }
      groups[last_head].push_back(b);
    } else {
      groups[b] = {b};
      last_head = b;
    }
  }

  std::unordered_map<double, std::vector<std::uint32_t>> fwd_to_group;
  for (const auto& [fwd_ts, bwd_ts] : flows) {
    auto it = ts_to_parent.find(bwd_ts);
    std::uint32_t parent = it == ts_to_parent.end() ? no_index : it->second;
    std::size_t guard = 0;
    while (parent != no_index && !t_.nodes[parent].name.starts_with(backward_root_prefix) &&
           guard++ < t_.nodes.size()) {
      auto up = ts_to_parent.find(t_.nodes[parent].start);
      parent = up == ts_to_parent.end() ? no_index : up->second;
    }
    if (parent == no_index) continue;
    auto g = groups.find(parent);
    if (g == groups.end()) continue;  // the plugin raises KeyError and aborts the file (Q20): ignore
    fwd_to_group[fwd_ts] = std::move(g->second);
    groups.erase(g);
  }
  if (!opt_.keep_unresolved_backward) t_.stats.backward_groups_lost += groups.size();

  std::vector<std::uint32_t> backward_modules;
  for (auto b : backward_nodes) t_.nodes[b].parent = no_index;  // placed ones get a backward node
  for (auto mod : modules) build_backward_module(mod, no_index, fwd_to_group, backward_modules);
  if (opt_.keep_unresolved_backward) {
    // Groups no flow resolved, and resolved groups whose forward op lies outside every module
    // (the loss of `F.cross_entropy(model(x), y)`): back under the parent they were taken
    // from, in time order (children are sorted by start).
    for (auto b : backward_nodes) {
      if (t_.nodes[b].parent != no_index) continue;
      const std::uint32_t p = removed_from.at(b);
      auto& ch = t_.nodes[p].children;
      const auto at = std::lower_bound(ch.begin(), ch.end(), b, [&](std::uint32_t x, std::uint32_t y) {
        return t_.nodes[x].start < t_.nodes[y].start;
      });
      ch.insert(at, b);
      t_.nodes[b].parent = p;
    }
  }
  for (const auto& th : t_.threads) {
    if (main_tid_ && th.tid == *main_tid_) {
      insert_backward_modules(th.root, backward_modules);
      break;
    }
  }
  std::erase_if(t_.threads, [&](const thread_tree& th) { return t_.nodes[th.root].children.empty(); });
}

void builder::collect_operators(std::uint32_t n) {
  // Post-order, as the plugin's get_operator_and_kernels (iterative to bound the stack).
  std::vector<std::pair<std::uint32_t, std::size_t>> stack{{n, 0}};
  while (!stack.empty()) {
    auto& [node, i] = stack.back();
    const auto& ch = t_.nodes[node].children;
    if (i < ch.size()) {
      std::uint32_t c = ch[i++];
      stack.emplace_back(c, 0);
      continue;
    }
    std::uint32_t done = node;
    stack.pop_back();
    if (t_.is_operator(done)) t_.operators.push_back(done);
  }
}

void builder::make_message() {
  auto& s = t_.stats;
  std::unordered_set<std::uint32_t> seen;
  std::uint64_t attributed_by_id = 0;
  for (const auto& th : t_.threads) {
    std::vector<std::uint32_t> stack{th.root};
    while (!stack.empty()) {
      std::uint32_t n = stack.back();
      stack.pop_back();
      const op_node& node = t_.nodes[n];
      for (auto c : node.children) stack.push_back(c);
      for (auto r : node.runtimes) {
        for (auto d : t_.runtimes[r].devices) {
          if (t_.devices[d].type != event_type::kernel || !seen.insert(d).second) continue;
          ++s.kernels_in_tree;
          if (!t_.is_operator(n)) continue;
          ++s.kernels_attributed;
          if (!t_.runtimes[r].by_fallback) ++attributed_by_id;
        }
      }
    }
  }
  // Silent when (nearly) every kernel is attributed by id, as the plugin would show them.
  if (s.kernels == 0 || attributed_by_id * 10 >= s.kernels * 9) return;
  std::string why;
  if (s.runtimes > s.runtimes_zero_id && s.runtimes_id_equals_correlation * 2 > s.runtimes - s.runtimes_zero_id)
    why = "ids do not match (runtime External id equals its correlation)";
  else if (s.stale_kernels * 2 > s.kernels)
    why = "launches not found (no runtime event for the kernels' correlation ids)";
  else
    why = "ids do not match";
  s.message = std::to_string(attributed_by_id) + " of " + std::to_string(s.kernels) +
              " kernels could be attributed to an operator: " + why + "; time-containment fallback " +
              (t_.fallback_used ? "attributed " : "attributes ") + std::to_string(s.kernels_by_fallback);
}

void builder::run() {
  t_.options = opt_;
  pass1();
  attach_by_external_id();
  for (const auto& list : host_lists_) t_.threads.push_back(thread_tree{list.tid, build_thread(list, true)});
  for (const auto& list : pl_lists_) t_.lightning_threads.push_back(thread_tree{list.tid, build_thread(list, false)});
  if (opt_.backward_regrouping && !t_.threads.empty()) regroup_backward();
  set_main_tid_fallback();
  if (main_tid_) {
    for (std::size_t i = 0; i < t_.threads.size(); ++i)
      if (t_.threads[i].tid == *main_tid_) t_.main_thread = i;
  }
  for (const auto& th : t_.threads) collect_operators(th.root);
  make_message();
}

}  // namespace

// ---------------------------------------------------------------------------------------------

bool is_profiler_step_name(std::string_view name) { return name.starts_with("ProfilerStep#"); }

bool is_data_loader_name(std::string_view name) {
  return (name.starts_with("enumerate(DataLoader)#") && name.ends_with(".__next__")) ||
         name.starts_with("enumerate(DataPipe)#");
}

bool is_plugin_comm_name(std::string_view name) {
  static constexpr std::array<std::string_view, 10> names = {
      "nccl:broadcast", "nccl:reduce", "nccl:all_reduce", "nccl:all_gather", "nccl:reduce_scatter",
      "gloo:broadcast", "gloo:reduce", "gloo:all_reduce", "gloo:all_gather", "gloo:reduce_scatter"};
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool is_tc_kernel(std::string_view kernel_name) {
  for (auto p : tc_kernel_patterns)
    if (kernel_name.find(p) != std::string_view::npos) return true;
  return false;
}

bool is_tc_eligible_op(std::string_view op_name) {
  return std::find(tc_op_allow_list.begin(), tc_op_allow_list.end(), op_name) != tc_op_allow_list.end();
}

bool is_modern_tc_eligible_op(std::string_view op_name) {
  // Operators PyTorch added after the plugin's list whose kernels are tensor-core GEMMs or
  // attention (docs/kinetoscope-rules.md#k3).
  static constexpr std::array<std::string_view, 20> added = {
      "aten::_scaled_mm", "aten::_scaled_grouped_mm", "aten::_grouped_mm", "aten::_int_mm",
      "aten::convolution_backward", "aten::einsum", "aten::_flash_attention_forward",
      "aten::_flash_attention_backward", "aten::_efficient_attention_forward",
      "aten::_efficient_attention_backward", "aten::_scaled_dot_product_flash_attention",
      "aten::_scaled_dot_product_flash_attention_backward", "aten::_scaled_dot_product_efficient_attention",
      "aten::_scaled_dot_product_efficient_attention_backward", "aten::_scaled_dot_product_cudnn_attention",
      "aten::_scaled_dot_product_cudnn_attention_backward", "aten::scaled_dot_product_attention",
      "aten::_addmm_activation", "aten::_cudnn_rnn", "aten::_cslt_sparse_mm"};
  if (is_tc_eligible_op(op_name)) return true;
  if (std::find(added.begin(), added.end(), op_name) != added.end()) return true;
  // PyTorch >= 1.10 names autograd nodes with a numeric suffix ("MmBackward0"): the plugin's
  // backward names match without it.
  std::string_view base = op_name;
  while (!base.empty() && base.back() >= '0' && base.back() <= '9') base.remove_suffix(1);
  if (base.size() != op_name.size() && base.ends_with("Backward")) {
    static constexpr std::array<std::string_view, 6> backward = {
        "ConvolutionBackward", "ScaledDotProductFlashAttentionBackward",
        "ScaledDotProductEfficientAttentionBackward", "ScaledDotProductCudnnAttentionBackward",
        "LinearBackward", "ScaledMmBackward"};
    return is_tc_eligible_op(base) || std::find(backward.begin(), backward.end(), base) != backward.end();
  }
  return false;
}

bool is_collective_name(std::string_view name) {
  static constexpr std::array<std::string_view, 6> backends = {"nccl:", "gloo:", "mpi:", "ucc:", "xccl:", "hccl:"};
  for (std::string_view b : backends)
    if (name.size() > b.size() && name.starts_with(b)) return true;
  return false;
}

bool is_collective_kernel_name(std::string_view kernel_name) {
  return kernel_name.starts_with("ncclKernel") || kernel_name.starts_with("ncclDevKernel") ||
         kernel_name.starts_with("rcclKernel") || kernel_name.starts_with("void ncclKernel") ||
         kernel_name.starts_with("void ncclDevKernel");
}

bool op_trees::uses_tensor_cores(std::string_view kernel_name) const {
  return options.modern_tensor_cores ? kernel_uses_tensor_cores(kernel_name) : is_tc_kernel(kernel_name);
}

std::optional<node_kind> classify_host_event(event_type type, std::string_view name, bool lightning) {
  auto operator_node = [&](event_type t) -> std::optional<node_kind> {
    if (is_data_loader_name(name)) return node_kind::data_loader;
    if (name.starts_with("Optimizer.step")) return node_kind::optimizer;
    if (t == event_type::user_annotation) {
      if (is_plugin_comm_name(name)) return node_kind::op;
      return std::nullopt;
    }
    return node_kind::op;
  };
  switch (type) {
    case event_type::op:
      if (is_profiler_step_name(name)) return node_kind::profiler_step;
      if (lightning && name.starts_with(pl_profile_prefix)) return node_kind::pl_profile;
      if (lightning && name.starts_with(pl_module_prefix)) return node_kind::pl_module;
      return operator_node(type);
    case event_type::user_annotation:
      if (is_profiler_step_name(name)) return node_kind::profiler_step;
      return operator_node(type);
    case event_type::python:
      return operator_node(type);
    case event_type::module:
      if (lightning) return std::nullopt;
      return node_kind::module;
    default:
      return std::nullopt;
  }
}

std::int64_t module_id_of(const trace_model& model, const op_node& n) {
  if (n.kind == node_kind::pl_module) return 0;
  if (n.kind != node_kind::module || n.event == no_index || n.event >= model.events.size()) return -1;
  const std::uint32_t extra = model.events[n.event].extra;
  return extra != no_index && extra < model.python.size() ? model.python[extra].module_id : -1;
}

std::string_view pl_module_type(const trace_model& model, const op_node& n) {
  if (n.kind != node_kind::pl_module || n.event == no_index || n.event >= model.events.size()) return {};
  const std::string_view name = model.str(model.events[n.event].name);
  if (!name.starts_with(pl_module_prefix)) return {};
  const std::string_view rest = name.substr(pl_module_prefix.size());
  const auto sep = rest.find(": ");
  if (sep == std::string_view::npos) return rest.empty() ? rest : rest.substr(0, rest.size() - 1);
  return rest.substr(0, sep);
}

std::string_view plugin_type_name(const op_node& n) {
  switch (n.kind) {
    case node_kind::root: return "Python";
    case node_kind::profiler_step: return "ProfilerStep";
    case node_kind::module: return "Module";
    case node_kind::pl_module: return "pl_module";
    case node_kind::pl_profile: return "pl_profile";
    case node_kind::backward: return "backward";
    default: break;
  }
  switch (n.type) {
    case event_type::op: return "Operator";
    case event_type::python: return "Python";
    case event_type::user_annotation: return "user_annotation";
    default: return "Operator";
  }
}

bool op_trees::is_operator(std::uint32_t i) const {
  const op_node& n = nodes[i];
  return n.kind == node_kind::op && n.type == event_type::op && n.name != "DataParallel.forward" &&
         n.name != "DistributedDataParallel.forward" && !n.name.starts_with("Optimizer.");
}

std::string_view op_trees::own(std::string s) { return owned_.emplace_back(std::move(s)); }

std::size_t op_trees::heap_bytes() const noexcept {
  const auto cap = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  std::size_t n = cap(nodes) + cap(runtimes) + cap(devices) + cap(threads) + cap(lightning_threads) + cap(operators);
  for (const op_node& x : nodes) n += x.children.heap_bytes() + x.runtimes.heap_bytes();
  for (const runtime_node& r : runtimes) n += r.devices.heap_bytes();
  for (const std::string& o : owned_) n += sizeof o + (o.capacity() > std::string().capacity() ? o.capacity() + 1 : 0);
  return n;
}

op_trees build_op_tree(const trace_model& model, const op_tree_options& options) {
  op_trees trees;
  builder b(model, options, trees);
  b.run();
  return trees;
}

namespace {
template <class IsTc>
double tc_kernel_ratio_by(const trace_model& model, IsTc&& is_tc_name) {
  // pandas: per-name sums, then the sum of the TC names' sums over the sum of all sums.
  std::unordered_map<std::uint32_t, std::size_t> index;
  std::vector<std::pair<double, bool>> sums;
  for (const auto& e : model.events) {
    if (e.type != event_type::kernel) continue;
    auto [it, inserted] = index.emplace(e.name, sums.size());
    if (inserted) sums.emplace_back(0.0, is_tc_name(model.str(e.name)));
    sums[it->second].first += e.dur;
  }
  double total = 0;
  double tc = 0;
  for (const auto& [s, is_tc] : sums) {
    total += s;
    if (is_tc) tc += s;
  }
  return total > 0 ? tc / total : 0.0;
}
}  // namespace

double tc_kernel_ratio(const trace_model& model) {
  return tc_kernel_ratio_by(model, [](std::string_view n) { return is_tc_kernel(n); });
}

double tc_kernel_ratio(const trace_model& model, const op_trees& trees) {
  return tc_kernel_ratio_by(model, [&](std::string_view n) { return trees.uses_tensor_cores(n); });
}

namespace {
double own_kernel_time(const op_trees& t, std::uint32_t n) {
  double sum = 0;
  for (auto r : t.nodes[n].runtimes) {
    const runtime_node& rt = t.runtimes[r];
    if (t.nodes[n].kind == node_kind::root && rt.stale_dummy) continue;
    for (auto d : rt.devices)
      if (t.devices[d].type == event_type::kernel) sum += t.devices[d].end - t.devices[d].start;
  }
  return sum;
}

// Appends the bottom TC-eligible nodes below and including n; returns whether any was added.
bool bottom_eligible(const op_trees& t, std::uint32_t n, std::vector<std::uint32_t>& out) {
  std::size_t before = out.size();
  for (auto c : t.nodes[n].children) bottom_eligible(t, c, out);
  if (t.nodes[n].tc_eligible && out.size() == before) out.push_back(n);
  return out.size() > before;
}
}  // namespace

double eligible_op_kernel_ratio(const op_trees& trees) {
  std::vector<std::uint32_t> bottom;
  for (const auto& th : trees.threads) bottom_eligible(trees, th.root, bottom);
  double num = 0;
  for (auto n : bottom) num += own_kernel_time(trees, n);
  double den = 0;
  for (auto n : trees.operators) den += own_kernel_time(trees, n);
  return den > 0 ? num / den : 0.0;
}

namespace {
/// Per-GPU sums of kernel time and tensor-core kernel time, shared by both ratios below (each
/// adds its kernels in its own order, which decides the floating-point sums).
struct gpu_tc_sums {
  std::map<std::int64_t, double> tc;
  std::map<std::int64_t, double> total;

  /// Adds kernel `dev`; false when it has no args "device" (skipped: the plugin crashes, Q20).
  bool add(const trace_model& model, const device_node& dev) {
    const event& e = model.events[dev.event];
    if (e.extra == no_index || e.extra >= model.kernels.size() || model.kernels[e.extra].device < 0) return false;
    const std::int64_t id = model.kernels[e.extra].device;
    const double dur = dev.end - dev.start;
    if (dev.tc_kernel) tc[id] += dur;
    total[id] += dur;
    return true;
  }

  /// The ratio of every id of `gpu_ids` (0 without kernel time); none when !has_kernel.
  gpu_tc_ratio finish(bool has_kernel, const std::set<std::int64_t>& gpu_ids) const {
    gpu_tc_ratio result;
    result.has_kernel = has_kernel;
    if (!has_kernel) return result;
    for (auto id : gpu_ids) {
      const auto t = total.find(id);
      const auto c = tc.find(id);
      result.ratio[id] = t != total.end() && t->second > 0 ? (c != tc.end() ? c->second : 0.0) / t->second : 0.0;
    }
    return result;
  }
};
}  // namespace

gpu_tc_ratio tc_ratio_per_gpu(const trace_model& model, const op_trees& trees,
                              const std::set<std::int64_t>& gpu_ids) {
  gpu_tc_sums sums;
  bool has_kernel = false;  // any attributed kernel, with a device or not
  for (auto n : trees.operators)
    for (auto r : trees.nodes[n].runtimes)
      for (auto d : trees.runtimes[r].devices) {
        const device_node& dev = trees.devices[d];
        if (dev.type != event_type::kernel) continue;
        has_kernel = true;
        sums.add(model, dev);
      }
  return sums.finish(has_kernel, gpu_ids);
}

gpu_tc_ratio tc_ratio_per_gpu_all_kernels(const trace_model& model, const op_trees& trees,
                                          const std::set<std::int64_t>& gpu_ids) {
  gpu_tc_sums sums;
  bool has_kernel = false;  // any kernel with a device
  for (const device_node& dev : trees.devices)
    if (dev.type == event_type::kernel && sums.add(model, dev)) has_kernel = true;
  return sums.finish(has_kernel, gpu_ids);
}

}  // namespace kinetoscope::analysis
