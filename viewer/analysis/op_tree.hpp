// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file op_tree.hpp
/// The operator tree of one trace file, built exactly as torch-tb-profiler 0.4.3 built it
/// (docs/plugin-rules.md#operator-tree): host nodes per thread nested by time, CUDA runtimes
/// attached to the host node with the same external id, device nodes (kernel/memcpy/memset)
/// attached to their runtime by correlation id, per-node host/device/tensor-core totals, backward
/// regrouping under nn.Modules, the "main" and "first" tree, and the list of "operators".
///
/// Storage is flat: nodes, runtimes and device nodes live in vectors of `op_trees` and refer
/// to each other by index (`std::uint32_t`, `no_index` = none). Names are `std::string_view`s
/// into the trace_model's string table or into strings owned by the op_trees, so **the
/// trace_model must outlive the op_trees** (moving either one is fine; copying op_trees is not
/// allowed).

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <iterator>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/model.hpp"

namespace kinetoscope::analysis {

// ---------------------------------------------------------------------------------------------
// Name rules (plugin-rules.md#event-categories, #tensor-cores)

/// Kind of a host node (the plugin's node classes, plugin-rules.md#operator-tree).
enum class node_kind : std::uint8_t {
  root,           ///< synthetic `CallTreeRoot` of a thread (type python, interval spans its children)
  op,             ///< plain OperatorNode (cpu_op, python, or a recognised user annotation that is no step/loader/optimizer)
  profiler_step,  ///< name starts with `ProfilerStep#` (OPERATOR or USER_ANNOTATION)
  data_loader,    ///< `enumerate(DataLoader)#…​.__next__` or `enumerate(DataPipe)#…`
  optimizer,      ///< name starts with `Optimizer.step` (OPERATOR, USER_ANNOTATION or PYTHON)
  module,         ///< python_function with a "Python module id" (nn.Module forward)
  pl_module,      ///< Lightning `[pl][module]` op (prefix removed from the name)
  pl_profile,     ///< Lightning `[pl][profile]` op (only in op_trees::lightning_threads)
  backward,       ///< synthetic `<module>.backward` node made by the backward regrouping (#backward-regrouping)
};

/// The node kind the plugin gives to a host event of type `type` named `name`, or nullopt when
/// the event makes no tree node (unrecognised user annotations, runtimes, kernels, ...).
/// `lightning` = the trace is a Lightning trace (trace_model::lightning).
std::optional<node_kind> classify_host_event(event_type type, std::string_view name, bool lightning);

/// `ProfilerStep#…` (any type).
bool is_profiler_step_name(std::string_view name);
/// DataLoader range name (plugin-rules.md#event-categories): `enumerate(DataLoader)#…​.__next__` or
/// `enumerate(DataPipe)#…`.
bool is_data_loader_name(std::string_view name);
/// Exactly one of the 5 NCCL + 5 Gloo collectives the plugin recognises
/// (plugin-rules.md#event-categories, quirk Q5 compat form).
bool is_plugin_comm_name(std::string_view name);
/// Prefix of a backward root: `autograd::engine::evaluate_function:`.
inline constexpr std::string_view backward_root_prefix = "autograd::engine::evaluate_function:";

/// Kernel uses tensor cores: the name **contains** one of the plugin's patterns
/// (plugin-rules.md#tensor-cores).
bool is_tc_kernel(std::string_view kernel_name);
/// Operator is on the plugin's tensor-core allow-list (exact name, plugin-rules.md#tensor-cores).
bool is_tc_eligible_op(std::string_view op_name);
/// docs/kinetoscope-rules.md#k3: the plugin's list, its backward names with PyTorch 2.x's `0`
/// suffix, and the tensor-core operators added since (`aten::_scaled_mm`, the attention kernels).
bool is_modern_tc_eligible_op(std::string_view op_name);
/// docs/kinetoscope-rules.md#k4: a communication op of any backend PyTorch writes:
/// `nccl:`, `gloo:`, `mpi:`, `ucc:`, `xccl:`, `hccl:` followed by a name.
bool is_collective_name(std::string_view name);
/// docs/kinetoscope-rules.md#k4: a kernel of NCCL/RCCL (`ncclKernel_*`, `ncclDevKernel_*`).
bool is_collective_kernel_name(std::string_view kernel_name);
/// The Kernel view's operator name of kernels that reach no operator under kinetoscope's rules.
inline constexpr std::string_view no_operator_name = "(no operator)";

// ---------------------------------------------------------------------------------------------
// Nodes

/// A list of `std::uint32_t` indices in 8 bytes (a `std::vector` takes 24). Empty: all zero. One
/// item: held inline (word 0 = 1, word 1 = the item), no allocation. More: a pointer to one heap
/// block {size, capacity, items...} (malloc's 16-byte alignment keeps its low word from being
/// 1). Every tree node has two of them (children, runtimes), each runtime one (devices); most
/// hold zero or one item (one kernel per launch, one launch per operator), so on traces of
/// millions of events this saves 32 bytes per node and a heap block per single-item list.
/// Enough of std::vector's interface for the tree code: iterators are plain pointers, valid
/// until the list changes.
class index_list {
 public:
  using value_type = std::uint32_t;
  using iterator = std::uint32_t*;
  using const_iterator = const std::uint32_t*;

  index_list() noexcept = default;
  index_list(std::initializer_list<std::uint32_t> items) { assign(items.begin(), items.end()); }
  index_list(const std::vector<std::uint32_t>& items) { assign(items.data(), items.data() + items.size()); }  // NOLINT
  index_list(const index_list& o) { assign(o.begin(), o.end()); }
  index_list(index_list&& o) noexcept : w_{o.w_[0], o.w_[1]} { o.w_[0] = o.w_[1] = 0; }
  index_list& operator=(const index_list& o) {
    if (this != &o) {
      index_list copy(o);
      swap(copy);
    }
    return *this;
  }
  index_list& operator=(index_list&& o) noexcept {
    index_list tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  index_list& operator=(const std::vector<std::uint32_t>& items) {
    index_list copy(items);
    swap(copy);
    return *this;
  }
  ~index_list() { std::free(heap()); }
  void swap(index_list& o) noexcept {
    std::swap(w_[0], o.w_[0]);
    std::swap(w_[1], o.w_[1]);
  }

  std::size_t size() const noexcept { return inline_one() ? 1 : (heap() == nullptr ? 0 : heap()[0]); }
  bool empty() const noexcept { return size() == 0; }
  std::uint32_t* begin() noexcept { return inline_one() ? &w_[1] : (heap() == nullptr ? nullptr : heap() + 2); }
  std::uint32_t* end() noexcept { return begin() + size(); }
  const std::uint32_t* begin() const noexcept { return const_cast<index_list*>(this)->begin(); }
  const std::uint32_t* end() const noexcept { return begin() + size(); }
  std::uint32_t& operator[](std::size_t i) noexcept { return begin()[i]; }
  std::uint32_t operator[](std::size_t i) const noexcept { return begin()[i]; }
  std::uint32_t front() const noexcept { return begin()[0]; }
  std::uint32_t back() const noexcept { return begin()[size() - 1]; }
  void clear() noexcept {
    if (inline_one()) w_[0] = w_[1] = 0;
    else if (heap() != nullptr) heap()[0] = 0;
  }
  void push_back(std::uint32_t v) { insert(end(), v); }
  /// Inserts `v` before `pos`; returns an iterator to it.
  std::uint32_t* insert(const std::uint32_t* pos, std::uint32_t v) {
    const std::uint32_t one[1] = {v};
    const std::size_t at = static_cast<std::size_t>(pos - begin());
    insert(pos, one, one + 1);
    return begin() + at;
  }
  /// Inserts [first, last) (not from this list) before `pos`.
  template <class It>
  void insert(const std::uint32_t* pos, It first, It last) {
    const std::size_t at = static_cast<std::size_t>(pos - begin());
    const auto n = static_cast<std::size_t>(std::distance(first, last));
    if (n == 0) return;
    const std::size_t old = size();
    if (old == 0 && n == 1 && heap() == nullptr) {  // inline (a heap block, even empty, is kept)
      w_[0] = 1;
      w_[1] = static_cast<std::uint32_t>(*first);
      return;
    }
    std::uint32_t* b = grow(old + n);
    std::copy_backward(b + at, b + old, b + old + n);
    std::copy(first, last, b + at);
    heap()[0] = static_cast<std::uint32_t>(old + n);
  }
  /// Removes [first, last); returns `first`.
  std::uint32_t* erase(const std::uint32_t* first, const std::uint32_t* last) {
    std::uint32_t* b = begin();
    const std::size_t from = static_cast<std::size_t>(first - b), to = static_cast<std::size_t>(last - b);
    if (from == to) return b + from;
    if (inline_one()) {  // the one item goes
      w_[0] = w_[1] = 0;
      return begin();
    }
    std::copy(b + to, b + size(), b + from);
    heap()[0] -= static_cast<std::uint32_t>(to - from);
    return b + from;
  }
  /// Heap bytes held (0 when empty or inline).
  std::size_t heap_bytes() const noexcept {
    return heap() == nullptr ? 0 : (2 + std::size_t{heap()[1]}) * sizeof(std::uint32_t);
  }
  friend bool operator==(const index_list& a, const index_list& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool inline_one() const noexcept { return w_[0] == 1; }
  std::uint32_t* heap() const noexcept {
    if (inline_one()) return nullptr;
    std::uint32_t* p = nullptr;
    std::memcpy(&p, w_, sizeof p);
    return p;
  }
  void assign(const std::uint32_t* first, const std::uint32_t* last) { insert(end(), first, last); }
  /// Makes the list a heap block with room for `n` items (capacity doubles from 2); returns
  /// its items.
  std::uint32_t* grow(std::size_t n) {
    std::uint32_t* p = heap();
    const std::size_t cap = p == nullptr ? 0 : p[1];
    if (n <= cap) return p + 2;
    if (n > 0xFFFFFFFEu) throw std::length_error("index_list too long");
    std::size_t fresh = std::max<std::size_t>(cap, 2);
    while (fresh < n) fresh *= 2;
    fresh = std::min<std::size_t>(fresh, 0xFFFFFFFEu);
    const bool was_inline = inline_one();
    const std::uint32_t item = w_[1];
    auto* q = static_cast<std::uint32_t*>(std::realloc(p, (2 + fresh) * sizeof(std::uint32_t)));
    if (q == nullptr) throw std::bad_alloc();
    if (p == nullptr) {
      q[0] = was_inline ? 1 : 0;
      if (was_inline) q[2] = item;
    }
    q[1] = static_cast<std::uint32_t>(fresh);
    std::memcpy(w_, &q, sizeof q);
    return q + 2;
  }

  alignas(std::uint32_t*) std::uint32_t w_[2] = {0, 0};
};
static_assert(sizeof(std::uint32_t*) == 8, "index_list packs a pointer into two 32-bit words");

/// A kernel, memcpy or memset event (plugin-rules.md#operator-tree "device node"). Fields ordered widest first so
/// that no padding is left: 64 bytes.
struct device_node {
  std::string_view name;
  std::string_view op_name;         ///< owner's name at attribution time ("CallTreeRoot" for the root); empty if none
  double start = 0;
  double end = 0;
  std::uint32_t event = no_index;   ///< index into trace_model::events
  /// Launching runtime (for kept stale kernels: the main root's dummy runtime); no_index when no
  /// runtime with its correlation id exists and it was not kept. A runtime does not imply a tree:
  /// see `owner`.
  std::uint32_t runtime = no_index;
  /// The host node that processed the runtime (plugin-rules.md#operator-tree): the attributed
  /// operator, a step/module/... node, or the thread root (zero-id runtimes, stale kernels).
  /// no_index = in no tree.
  std::uint32_t owner = no_index;
  event_type type = event_type::kernel;  ///< kernel, memcpy or memset
  bool tc_kernel = false;           ///< is_tc_kernel(name) (the plugin tests every device node's name)
  /// owner's tc_eligible when its runtimes were processed, i.e. before the owner's own
  /// inheritance (plugin-rules.md#operator-tree; a plugin quirk): the allow-list value for plain
  /// operators.
  bool op_tc_eligible = false;
};

/// A runtime (cudaLaunchKernel, ...) event, or the dummy runtime holding stale kernels. 72 bytes.
struct runtime_node {
  double start = 0;
  double end = 0;
  std::int64_t tid = 0;
  std::int64_t external_id = 0;
  std::int64_t correlation = 0;
  double device_duration = 0;       ///< Σ (end − start) of its device nodes (#operator-tree)
  double tc_duration = 0;           ///< Σ over its tensor-core kernels
  index_list devices;               ///< device nodes it launched (indices into op_trees::devices), in ts order
  std::uint32_t event = no_index;   ///< index into trace_model::events; no_index for the dummy stale runtime
  bool stale_dummy = false;         ///< the dummy runtime of stale kernels (#operator-tree step 3)
  /// Attached by the time-containment fallback (op_tree_options::time_containment_fallback),
  /// not by the plugin's id match.
  bool by_fallback = false;
};

/// A host node (or a thread root / backward node). One per host event, so its size is most of
/// the tree's bytes on traces of many small events: fields are ordered widest first (no
/// padding) and the two lists are index_lists, 120 bytes in all (168 with std::vectors).
struct op_node {
  std::string_view name;             ///< PL prefixes removed; `CallTreeRoot`; `<module>.backward`
  double start = 0;
  double end = 0;
  /// The event's tid; a root's: its thread's; a backward node's: its first child's (else its
  /// module's). (The pid and external id are the event's: read them there; the plugin drops a
  /// module node's external id.)
  std::int64_t tid = 0;

  // Statistics (plugin-rules.md#operator-tree); durations in µs, Python-float arithmetic in the
  // plugin's order. Root: host_total/host_self describe its final span [first child start, last
  // child end] (the plugin's own root values were meaningless). Backward nodes without children
  // keep the module's interval (host_total = its length) and zero statistics.
  double host_total = 0;
  double host_self = 0;
  double device_total = 0;
  double device_self = 0;            ///< modules: + device total of direct "operator" children
  double tc_total = 0;
  double tc_self = 0;
  // (A module's "Python module id" and a PL module's type are read from the model when needed:
  // module_id_of(), pl_module_type(); keeping them here cost 24 bytes on every node.)

  /// Indices into op_trees::nodes, sorted by (start, −end); backward nodes are inserted in
  /// place by plugin-rules.md#backward-regrouping step 7 (not re-sorted, as the plugin).
  index_list children;
  index_list runtimes;               ///< attached runtimes (indices into op_trees::runtimes), sorted by (start, −end)
  std::uint32_t name_id = no_index;  ///< string id in the model when `name` is the event's full name, else no_index
  /// Index into trace_model::events (args: trace_model::ops[extra] for op/annotation/python
  /// events, trace_model::python[extra] for modules); no_index for root/backward nodes.
  std::uint32_t event = no_index;
  /// Enclosing node; no_index for roots and dropped nodes. (A backward group reached twice by
  /// the plugin-rules.md#backward-regrouping quirk has several parents: this is the last one.)
  std::uint32_t parent = no_index;
  node_kind kind = node_kind::op;
  event_type type = event_type::op;  ///< event type (root: python; backward: other)
  bool tc_eligible = false;          ///< after inheritance (plugin-rules.md#operator-tree)
  bool tc_eligible_allow_list = false;  ///< is_tc_eligible_op(name) (the value device nodes see)
};

/// The plugin's `type` string of a node as `/tree` shows it (plugin-rules.md#main-tree): "Python"
/// (root and python events), "ProfilerStep", "Operator", "user_annotation", "Module", "backward",
/// "pl_profile", "pl_module".
std::string_view plugin_type_name(const op_node& n);

/// Module nodes: their event's "Python module id" (-1 when absent); PL module nodes: 0 (the
/// plugin keys them by name only); other nodes: -1.
std::int64_t module_id_of(const trace_model& model, const op_node& n);

/// PL module nodes: the module's type, the text before ": " in "[pl][module]<type>: <name>"
/// (without ": ", the plugin's slicing: all but the last character); "" for other nodes.
std::string_view pl_module_type(const trace_model& model, const op_node& n);

/// One thread's tree.
struct thread_tree {
  std::int64_t tid = 0;
  std::uint32_t root = no_index;     ///< index into op_trees::nodes of its CallTreeRoot
};

/// How to build the tree.
struct op_tree_options {
  /// Beyond parity (plugin-rules.md#event-categories, docs/kinetoscope-rules.md#k2): a runtime
  /// whose "External id" no host node has goes to the deepest node of its thread whose
  /// [start, end] contains the runtime start (a step is no such node: then it stays unattached);
  /// and when most runtimes' ids equal their correlation (PyTorch 2.x builds whose ids do not
  /// match), those are placed that way too instead of by id. Default off = the plugin's numbers.
  bool time_containment_fallback = false;
  /// Beyond parity: `cuda_driver` calls link their kernels like runtime calls. The plugin drops
  /// them, so kernels launched through the driver API (cuBLAS's cuLaunchKernel in PyTorch 2.x,
  /// Triton) belong to no operator there. Default off = the plugin's numbers.
  bool driver_as_runtime = false;
  /// Beyond parity: backward groups that no forward op's flow resolves (the loss's backward
  /// when the loss is computed outside every module, as with `F.cross_entropy(model(x), y)`)
  /// stay where time nesting put them. The plugin drops them from every statistic.
  bool keep_unresolved_backward = false;
  /// Run the backward regrouping of plugin-rules.md#backward-regrouping (the plugin always does
  /// when the trace has flows and module nodes). Off keeps backward ops where time nesting put
  /// them.
  bool backward_regrouping = true;
  /// Quirk Q22 (plugin-rules.md): runtimes with no "External id" at all (graph launches and
  /// syncs outside every op, as in vLLM and SGLang traces) go to the first host node that has
  /// none either, typically an `nn.Module: X_0` node, or are dropped when there is none; the
  /// Kernel view then files their kernels under that module. Off: they hang under their
  /// thread's root, as runtimes with id 0 do. Default on = the plugin's numbers.
  bool idless_runtimes_to_first_idless_node = true;
  /// docs/kinetoscope-rules.md#k3: kernels use tensor cores by kinetoscope's classifier
  /// (tensor_cores.hpp) and the modern operators are tensor-core eligible. Off = the plugin's
  /// 18 substrings and 45 operator names (plugin-rules.md#tensor-cores).
  bool modern_tensor_cores = false;
  /// docs/kinetoscope-rules.md#k4: every `<backend>:` host op (is_collective_name) is a
  /// communication op for has_kernel; off = the plugin's ten names (Q5).
  bool all_collectives = false;
  /// docs/kinetoscope-rules.md#k2: the Kernel view files kernels without an operator under
  /// "(no operator)", those no tree reaches included; off = "CallTreeRoot" and unreached ones
  /// left out (Q10).
  bool no_operator_label = false;
  /// docs/kinetoscope-rules.md#k5: the Memory view rebuilds "Total Allocated" from the running
  /// sum of "Bytes" when a device's memory events carry no totals; off = no curve (the plugin).
  bool rebuild_memory_totals = false;
};

/// Counts describing how well runtimes and kernels were attributed (for diagnostics).
struct attribution_stats {
  std::uint64_t kernels = 0;               ///< all kernel events
  std::uint64_t kernels_in_tree = 0;       ///< kernels reachable from some tree node
  std::uint64_t kernels_attributed = 0;    ///< kernels whose owner is an operator (#operators)
  std::uint64_t kernels_by_fallback = 0;   ///< kernels attributed through fallback runtimes
  std::uint64_t runtimes = 0;              ///< all runtime events
  std::uint64_t runtimes_matched = 0;      ///< runtimes attached by external id
  std::uint64_t runtimes_zero_id = 0;      ///< runtimes with external id 0 (hang under the root)
  std::uint64_t runtimes_dropped = 0;      ///< non-zero id, no host node (#operator-tree step 2)
  std::uint64_t runtimes_by_fallback = 0;  ///< attached by time containment
  std::uint64_t runtimes_id_equals_correlation = 0;  ///< runtimes whose External id == correlation
  std::uint64_t stale_kernels = 0;         ///< kernels with no runtime (kept under the main root)
  std::uint64_t stale_dropped = 0;         ///< stale device nodes dropped (memcpy/memset, or no main thread)
  std::uint64_t nodes_dropped_intersecting = 0;  ///< plugin-rules.md#operator-tree step 4
  std::uint64_t backward_groups_lost = 0;  ///< #backward-regrouping step 5 (unresolved groups)
  /// Human summary, e.g. "0 of 12000 kernels could be attributed to an operator: ids do not
  /// match (runtime External id equals its correlation); time-containment fallback attributes
  /// 11800". The first number counts attribution by id (the plugin's); "attributes" becomes
  /// "attributed" when the fallback was applied. Empty when ≥ 90 % of the kernels are
  /// attributed by id (or there are no kernels).
  std::string message;
};

/// All trees of one trace file.
class op_trees {
 public:
  op_trees() = default;
  op_trees(const op_trees&) = delete;
  op_trees& operator=(const op_trees&) = delete;
  op_trees(op_trees&&) = default;
  op_trees& operator=(op_trees&&) = default;

  std::vector<op_node> nodes;
  std::vector<runtime_node> runtimes;
  std::vector<device_node> devices;     ///< every kernel/memcpy/memset event, in ts order

  /// Thread trees in the plugin's dictionary order (thread of the earliest host node first),
  /// after plugin-rules.md#backward-regrouping step 8 (threads whose root lost every child are
  /// removed).
  std::vector<thread_tree> threads;
  /// Lightning `[pl][profile]` trees (empty unless trace_model::lightning).
  std::vector<thread_tree> lightning_threads;

  /// Index into `threads` of the main thread: the plugin's main tid (the last thread, in
  /// `threads` order, having a ProfilerStep# node), else plugin-rules.md#backward-regrouping step
  /// 2's fallback (the only thread; else the longest root interval excluding the backward thread).
  /// nullopt when there are no threads or the main thread's tree was dropped by
  /// plugin-rules.md#backward-regrouping step 8.
  std::optional<std::size_t> main_thread;
  /// Index into `threads` of "the first tree" (plugin-rules.md#main-tree: threads[0]); nullopt when
  /// none.
  std::optional<std::size_t> first_tree() const {
    return threads.empty() ? std::nullopt : std::optional<std::size_t>(0);
  }

  /// The "operators" (plugin-rules.md#operators): node indices collected from every thread tree in
  /// post-order (children before their parent, children in `children` order), thread by thread —
  /// the plugin's order, which decides e.g. the "first instance" of an operator group.
  std::vector<std::uint32_t> operators;

  bool uses_dp = false;                 ///< a `DataParallel.forward` node exists
  bool uses_ddp = false;                ///< a `DistributedDataParallel.forward` node exists
  std::set<std::int64_t> used_devices;  ///< distinct pid of kernel/memcpy/memset events
  /// The plugin's has_kernel: a kernel event whose external id is not a communication op's
  /// (the Kernel role of plugin-rules.md#role-ranges is non-empty). Decides whether the Kernel view
  /// exists.
  bool has_kernel = false;
  bool has_any_kernel = false;          ///< any kernel event at all
  bool has_memcpy_or_memset = false;    ///< any memcpy or memset event
  bool has_runtime = false;             ///< any runtime event
  bool fallback_used = false;           ///< the time-containment fallback attached runtimes
  attribution_stats stats;
  /// The options the trees were built with: the views that read the trees follow the same rule
  /// set (tensor-core classifier, "(no operator)", memory totals).
  op_tree_options options;
  /// Whether a kernel of this name uses tensor cores under `options` (kernel_uses_tensor_cores()
  /// or the plugin's is_tc_kernel()).
  bool uses_tensor_cores(std::string_view kernel_name) const;

  /// Whether node `i` is an operator in the sense of plugin-rules.md#operators.
  bool is_operator(std::uint32_t i) const;
  /// Keeps `s` alive as long as this object and returns a view of it.
  std::string_view own(std::string s);
  /// Heap bytes held (vector capacities, the nodes' lists, owned strings): benchmarks and tests
  /// watch this figure, the tree being the viewer's largest table on traces of small events.
  std::size_t heap_bytes() const noexcept;

 private:
  std::deque<std::string> owned_;
};

/// Builds every thread's tree of `model` (plugin-rules.md). `model` must outlive the result.
op_trees build_op_tree(const trace_model& model, const op_tree_options& options = {});

/// Global tensor-core kernel ratio used by the Kernel view pie and recommendation 6
/// (plugin-rules.md#kernel-view): Σ dur of TC kernels / Σ dur of all kernel events (0 if no kernel
/// time). Over ALL kernel events, in the tree or not.
double tc_kernel_ratio(const trace_model& model);
/// The same with the classifier of the trees' rule set (op_trees::uses_tensor_cores).
double tc_kernel_ratio(const trace_model& model, const op_trees& trees);

/// Eligible-op kernel ratio of recommendation 6 (plugin-rules.md#recommendations): Σ own-runtime
/// kernel time of "bottom eligible" nodes (tc eligible, no eligible descendant; any node kind,
/// every tree) / Σ own-runtime kernel time of all operators (plugin-rules.md#operators); 0 if the
/// denominator is 0. "Own-runtime kernel time" of a node = Σ (end − start) of the KERNEL device
/// nodes (not memcpy/memset) of the runtimes attached to the node itself, skipping the root's dummy
/// stale-kernel runtime.
double eligible_op_kernel_ratio(const op_trees& trees);

/// Per-GPU "Kernel Time using Tensor Cores" of the GPU summary (plugin-rules.md#gpu-summary): over
/// the kernels of the runtimes attached to operators (plugin-rules.md#operators), grouped by the
/// kernel's args "device".
struct gpu_tc_ratio {
  /// False when no kernel is attributed to any operator: then the metric is omitted.
  bool has_kernel = false;
  /// device id -> TC kernel time / kernel time on that device, for every id in `gpu_ids`
  /// (0.0 when the device has no attributed kernel time). Kernels without args "device" are
  /// skipped (the plugin crashes on them, quirk Q20).
  std::map<std::int64_t, double> ratio;
};
/// `gpu_ids` = the GPU set of the GPU summary (distinct args "device" of kernel events).
gpu_tc_ratio tc_ratio_per_gpu(const trace_model& model, const op_trees& trees,
                              const std::set<std::int64_t>& gpu_ids);
/// docs/kinetoscope-rules.md#k3: the same ratio over every kernel event of each GPU (attributed
/// or not), classified by op_trees::uses_tensor_cores; has_kernel = any kernel has a device.
gpu_tc_ratio tc_ratio_per_gpu_all_kernels(const trace_model& model, const op_trees& trees,
                                          const std::set<std::int64_t>& gpu_ids);

}  // namespace kinetoscope::analysis
