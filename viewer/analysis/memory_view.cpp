// SPDX-License-Identifier: BSD-3-Clause
#include "analysis/memory_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <span>
#include <stdexcept>
#include <unordered_map>

#include "analysis/sorting.hpp"
#include "kinetoscope/formats/py_number.hpp"

namespace kinetoscope::analysis {

using formats::py_round;

namespace {

/// One [memory] record of a known device (docs/plugin-rules.md#memory-view). 56 bytes: one per
/// [memory] event (3.7 million on a 10 GB trace), built by compute_memory() and again by
/// build_memory_index(), so the operator is a tree node index, not its name.
struct record {
  double ts = 0;
  std::uint64_t addr = 0;
  std::int64_t bytes = 0;
  double total_allocated = 0;
  double total_reserved = 0;
  std::uint32_t device = 0;  ///< index into the device-name table
  // Set by the attribution walk (plugin-rules.md#memory-view) and copied to frees afterwards:
  // the operator node the allocation landed in, and its parent; no_index = none.
  std::uint32_t op = no_index;
  std::uint32_t parent_op = no_index;
  bool has_addr = false;

  bool is_allocation() const noexcept { return bytes > 0; }
};

constexpr std::size_t metric_count = 3;  // size increase, allocation size, allocation count
using metrics = std::array<std::int64_t, metric_count>;

/// Sizes are kept within ±2^53 bytes (8 PiB, beyond any device; the loader saturates larger
/// values with a warning, this covers hand-built models), and sums saturate at the int64 limits,
/// so no input can overflow them.
constexpr std::int64_t max_bytes = std::int64_t{1} << 53;

std::int64_t clamp_bytes(std::int64_t b) noexcept { return std::clamp(b, -max_bytes, max_bytes); }

/// "Total Allocated"/"Total Reserved" as whole bytes (not NaN: callers skip NaN records).
std::int64_t bytes_of(double v) noexcept {
  return std::llround(std::clamp(v, -static_cast<double>(max_bytes), static_cast<double>(max_bytes)));
}

void sat_add(std::int64_t& a, std::int64_t b) noexcept {
  if (__builtin_add_overflow(a, b, &a)) a = b > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
}

/// Python's `op_name_or_unknown` plus the `aten::empty` context rule of
/// plugin-rules.md#memory-view.
std::string operator_text(const op_trees& trees, const record& r) {
  const auto name_of = [&](std::uint32_t n) { return n == no_index ? std::string_view() : trees.nodes[n].name; };
  const std::string_view op = name_of(r.op), parent = name_of(r.parent_op);
  std::string name = op.empty() ? std::string("<unknown>") : std::string(op);
  if (name.rfind("aten::empty", 0) == 0 && !parent.empty()) return std::string(parent) + " (" + name + ")";
  return name;
}

/// Builds the records (time order) and the device-name table; counts skipped records. `tids`:
/// each record's thread (the attribution walk groups by it; records do not keep it).
std::vector<record> collect_records(const trace_model& model, std::vector<std::string>& device_names,
                                    memory_counts& counts, std::vector<std::int64_t>& tids) {
  // The events that make records, in time order (model.events is stable-sorted by ts already;
  // hand-built models may not be).
  std::vector<std::uint32_t> chosen;
  for (std::uint32_t i = 0; i < model.events.size(); ++i) {
    const event& e = model.events[i];
    if (e.type != event_type::memory || e.extra == no_index || e.extra >= model.memory.size()) continue;
    const memory_args& m = model.memory[e.extra];
    if (m.device_type != 0 && m.device_type != 1) {
      ++counts.unknown_device_records;
      continue;
    }
    chosen.push_back(i);
  }
  stable_sort_by_key_if_needed(chosen.begin(), chosen.end(), [&](std::uint32_t i) { return model.events[i].ts; });
  std::vector<record> out;
  out.reserve(chosen.size());
  tids.reserve(chosen.size());
  std::map<std::pair<std::int64_t, std::int64_t>, std::uint32_t> device_index;
  for (const std::uint32_t i : chosen) {
    const event& e = model.events[i];
    const memory_args& m = model.memory[e.extra];
    const auto key = std::pair(m.device_type, m.device_type == 0 ? std::int64_t{0} : m.device_id);
    auto [it, inserted] = device_index.try_emplace(key, static_cast<std::uint32_t>(device_names.size()));
    if (inserted) device_names.push_back(m.device_type == 0 ? std::string("CPU") : "GPU" + std::to_string(m.device_id));
    record r;
    r.ts = e.ts;
    r.device = it->second;
    r.has_addr = m.has_addr;
    r.addr = m.addr;
    r.bytes = clamp_bytes(m.bytes);
    r.total_allocated = m.total_allocated;
    r.total_reserved = m.total_reserved;
    out.push_back(r);
    tids.push_back(e.tid);
    ++counts.records;
    if (!m.has_addr) ++counts.records_without_addr;
  }
  return out;
}

/// Record indices per operator node, in time order, as two flat arrays (offsets per node, then
/// the indices): collected as (node, record) pairs during the walk, then grouped by node with
/// one stable counting pass. A vector per node cost 24 bytes for every node of the tree (about
/// 0.34 GB on a 10 GB trace, nearly all of them empty), in compute_memory and again in
/// build_memory_index.
class node_record_lists {
 public:
  void add(std::uint32_t node, std::size_t record) { pairs_.push_back({node, static_cast<std::uint32_t>(record)}); }
  /// Groups the pairs; `nodes`: the tree's node count.
  void finish(std::size_t nodes) {
    offsets_.assign(nodes + 1, 0);
    for (const auto& [node, record] : pairs_) ++offsets_[node + 1];
    for (std::size_t i = 1; i <= nodes; ++i) offsets_[i] += offsets_[i - 1];
    items_.resize(pairs_.size());
    for (const auto& [node, record] : pairs_) items_[offsets_[node]++] = record;  // offsets_[n]: end of n
    for (std::size_t i = nodes; i > 0; --i) offsets_[i] = offsets_[i - 1];
    offsets_[0] = 0;
    pairs_ = {};
  }
  std::span<const std::uint32_t> operator[](std::uint32_t node) const {
    return {items_.data() + offsets_[node], offsets_[node + 1] - offsets_[node]};
  }

 private:
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs_;
  std::vector<std::uint32_t> offsets_;
  std::vector<std::uint32_t> items_;
};

/// plugin-rules.md#memory-view: the plugin's cursor walk over one thread's tree. Every node entered
/// is marked processed (the root too); a record lands on the node the walk stops in, and only
/// operator nodes keep it.
void attribute_thread(const op_trees& trees, std::uint32_t root, std::vector<record>& records,
                      const std::vector<std::size_t>& indices, node_record_lists& node_records,
                      std::vector<char>& processed, memory_counts& counts) {
  std::vector<std::pair<std::uint32_t, std::size_t>> stack;  // (parent node, child index being visited)
  std::uint32_t current = root;
  std::size_t child_index = 0;
  const bool root_usable = root != no_index && !trees.nodes[root].children.empty();
  if (!root_usable) current = no_index;
  if (current != no_index) processed[current] = 1;

  std::size_t k = 0;
  while (k < indices.size()) {
    record& r = records[indices[k]];
    if (current == no_index) {
      ++k;  // no node can contain it any more
      continue;
    }
    const op_node& cur = trees.nodes[current];
    if (r.ts < cur.start) {
      ++k;
      continue;
    }
    if (r.ts >= cur.end) {
      if (!stack.empty()) {
        current = stack.back().first;
        child_index = stack.back().second + 1;
        stack.pop_back();
      } else {
        current = no_index;
      }
      continue;
    }
    for (;;) {
      const index_list& children = trees.nodes[current].children;
      if (child_index >= children.size()) break;
      const op_node& child = trees.nodes[children[child_index]];
      if (r.ts < child.start) break;
      if (r.ts >= child.end) {
        ++child_index;
        continue;
      }
      processed[children[child_index]] = 1;
      stack.emplace_back(current, child_index);
      current = children[child_index];
      child_index = 0;
    }
    if (trees.is_operator(current)) {
      node_records.add(current, indices[k]);
      ++counts.attributed_records;
      if (r.is_allocation()) {
        r.op = current;
        if (!stack.empty()) r.parent_op = stack.back().first;
      }
    }
    ++k;
  }
}

/// A Python dict keyed by address whose entries keep their position when overwritten and move
/// to the end when deleted and re-inserted (what the plugin's `alloc`/`free` dicts do).
class address_slots {
 public:
  /// Sets addr → value; returns true when it replaced a live entry.
  bool set(std::uint64_t addr, std::size_t value) {
    auto [it, inserted] = index_.try_emplace(addr, slots_.size());
    if (inserted) {
      slots_.push_back(value);
      return false;
    }
    slots_[it->second] = value;
    return true;
  }
  std::optional<std::size_t> take(std::uint64_t addr) {
    auto it = index_.find(addr);
    if (it == index_.end()) return std::nullopt;
    const std::size_t v = slots_[it->second];
    slots_[it->second] = dead;
    index_.erase(it);
    return v;
  }
  bool contains(std::uint64_t addr) const { return index_.count(addr) != 0; }
  template <class F>
  void for_each(F&& f) const {
    for (const std::size_t v : slots_) {
      if (v != dead) f(v);
    }
  }

 private:
  static constexpr std::size_t dead = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> slots_;
  std::unordered_map<std::uint64_t, std::size_t> index_;
};

struct stats_walk {
  const op_trees& trees;
  const std::vector<record>& records;
  const node_record_lists& node_records;
  const std::vector<char>& processed;
  std::size_t device_count;
  double lo;
  double hi;
  /// device -> op name -> 6 metrics (self increase, self alloc size, self alloc count, then totals)
  std::vector<std::map<std::string, std::array<std::int64_t, 6>>> by_name;
  std::map<std::string, std::int64_t> calls;

  /// Returns the subtree totals per device (empty = all zero); plugin's traverse_node_memory.
  std::vector<metrics> visit(std::uint32_t n) {
    const op_node& node = trees.nodes[n];
    if (node.end < lo || node.start > hi) return {};
    const bool is_op = trees.is_operator(n);
    if (is_op) ++calls[std::string(node.name)];
    if (!processed[n]) return {};  // ⚠ the plugin does not descend into unvisited nodes

    std::vector<metrics> self;
    if (is_op) {
      for (const std::size_t i : node_records[n]) {
        const record& r = records[i];
        if (r.ts < lo || r.ts > hi) continue;
        if (self.empty()) self.assign(device_count, metrics{});
        metrics& m = self[r.device];
        sat_add(m[0], r.bytes);
        if (r.bytes > 0) {
          sat_add(m[1], r.bytes);
          m[2] += 1;
        }
      }
    }
    std::vector<metrics> total = self;
    for (const std::uint32_t c : node.children) {
      std::vector<metrics> child = visit(c);
      if (child.empty()) continue;
      if (total.empty()) total.assign(device_count, metrics{});
      for (std::size_t d = 0; d < device_count; ++d) {
        for (std::size_t j = 0; j < metric_count; ++j) sat_add(total[d][j], child[d][j]);
      }
    }
    if (is_op && !total.empty()) {
      for (std::size_t d = 0; d < device_count; ++d) {
        const metrics s = self.empty() ? metrics{} : self[d];
        const metrics& t = total[d];
        if (s == metrics{} && t == metrics{}) continue;
        std::array<std::int64_t, 6>& row = by_name[d][std::string(node.name)];
        for (std::size_t j = 0; j < metric_count; ++j) {
          sat_add(row[j], s[j]);
          sat_add(row[j + metric_count], t[j]);
        }
      }
    }
    return total;
  }
};

/// The range-independent first steps shared by compute_memory() and build_memory_index():
/// records (plugin-rules.md#memory-view), the attribution walk (#memory-view), and each free
/// copying the op of the open allocation at its address.
struct prepared {
  std::vector<std::string> device_names;
  std::vector<record> records;
  node_record_lists node_records;                      ///< per operator node: record indices, time order
  std::vector<char> processed;                         ///< per node: entered by the attribution walk
  memory_counts counts;
};

prepared prepare(const trace_model& model, const op_trees& trees) {
  prepared p;
  std::vector<std::int64_t> tids;
  p.records = collect_records(model, p.device_names, p.counts, tids);
  std::vector<record>& records = p.records;
  if (trees.options.rebuild_memory_totals) {
    // docs/kinetoscope-rules.md#k5: a device none of whose records has a total gets the running
    // sum of its byte changes (records are in time order).
    std::vector<char> has_total(p.device_names.size(), 0);
    for (const record& r : records)
      if (!std::isnan(r.total_allocated)) has_total[r.device] = 1;
    std::vector<std::int64_t> running(p.device_names.size(), 0);
    std::vector<char> rebuilt(p.device_names.size(), 0);
    for (record& r : records) {
      if (has_total[r.device] || !r.has_addr) continue;
      sat_add(running[r.device], r.bytes);
      r.total_allocated = static_cast<double>(running[r.device]);
      if (std::isnan(r.total_reserved)) r.total_reserved = r.total_allocated;
      rebuilt[r.device] = 1;
    }
    for (char b : rebuilt) p.counts.rebuilt_total_devices += b != 0 ? 1 : 0;
  }
  // plugin-rules.md#memory-view attribution, thread by thread.
  p.processed.assign(trees.nodes.size(), 0);
  {
    std::map<std::int64_t, std::vector<std::size_t>> by_tid;
    for (std::size_t i = 0; i < records.size(); ++i) by_tid[tids[i]].push_back(i);
    tids = {};
    std::unordered_map<std::int64_t, std::uint32_t> root_of;
    for (const thread_tree& t : trees.threads) root_of.try_emplace(t.tid, t.root);
    for (const auto& [tid, indices] : by_tid) {
      const auto it = root_of.find(tid);
      attribute_thread(trees, it == root_of.end() ? no_index : it->second, records, indices, p.node_records,
                       p.processed, p.counts);
    }
  }
  p.node_records.finish(trees.nodes.size());
  // Each free copies the op of the open allocation at its address (all records, time order).
  {
    std::unordered_map<std::uint64_t, std::size_t> open;
    for (std::size_t i = 0; i < records.size(); ++i) {
      record& r = records[i];
      if (!r.has_addr) continue;
      if (r.is_allocation()) {
        open[r.addr] = i;
      } else if (const auto it = open.find(r.addr); it != open.end()) {
        r.op = records[it->second].op;
        r.parent_op = records[it->second].parent_op;
        open.erase(it);
      }
    }
  }
  return p;
}

/// plugin-rules.md#memory-view curve and peaks (whole trace); `device_of(index)` gives the device
/// to fill.
template <class DeviceOf>
void build_curves(const std::vector<record>& records, double first_ts, DeviceOf&& device_of) {
  for (const record& r : records) {
    if (!r.has_addr || std::isnan(r.total_allocated) || std::isnan(r.total_reserved)) continue;
    memory_device& dev = device_of(r.device);
    const double t = r.ts - first_ts;
    if (!dev.curve.empty()) dev.curve.push_back({t, dev.curve.back()[1], dev.curve.back()[2]});
    dev.curve.push_back({t, r.total_allocated, r.total_reserved});
    // The plugin's peaks start at 0 and keep the max of "Total Allocated".
    const std::int64_t allocated = bytes_of(r.total_allocated);
    const std::int64_t reserved = bytes_of(r.total_reserved);
    if (!dev.peak_time_us) {
      dev.peak_time_us = t;
      dev.peak_allocated_bytes = std::max<std::int64_t>(0, allocated);
    } else if (allocated > dev.peak_allocated_bytes) {
      dev.peak_time_us = t;
      dev.peak_allocated_bytes = allocated;
    }
    dev.peak_reserved_bytes = std::max(dev.peak_reserved_bytes, reserved);
  }
}

/// totalGlobalMem of a "GPU<n>" device when the trace has it (quirk Q11 fixed).
std::optional<std::int64_t> device_capacity(const trace_model& model, const std::string& name) {
  if (name.rfind("GPU", 0) != 0) return std::nullopt;
  const auto id = std::strtoll(name.c_str() + 3, nullptr, 10);
  if (id >= 0 && static_cast<std::size_t>(id) < model.devices.size() &&
      model.devices[static_cast<std::size_t>(id)].has_total_global_mem) {
    return model.devices[static_cast<std::size_t>(id)].total_global_mem;
  }
  return std::nullopt;
}

/// The plugin's default_device: the first device (in result order) named "GPU…", else "CPU".
void set_default_device(memory_result& result) {
  for (const memory_device& d : result.devices) {
    if (d.device.rfind("GPU", 0) == 0) {
      result.default_device = d.device;
      break;
    }
  }
}

std::string python_float_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

}  // namespace

const memory_device* memory_result::device(std::string_view name) const {
  for (const memory_device& d : devices) {
    if (d.device == name) return &d;
  }
  return nullptr;
}

double profiler_start_ts(const trace_model& model) {
  double lo = std::numeric_limits<double>::infinity();
  for (const event& e : model.events) {
    switch (e.type) {
      case event_type::driver:
      case event_type::other:
        continue;
      case event_type::python_function:
      case event_type::module:
        if (model.lightning) continue;
        break;
      default:
        break;
    }
    lo = std::min(lo, e.ts);
  }
  return std::isfinite(lo) ? lo : 0.0;
}

memory_result compute_memory(const trace_model& model, const op_trees& trees,
                             std::optional<std::pair<double, double>> range) {
  memory_result result;
  prepared prep = prepare(model, trees);
  const std::vector<std::string>& device_names = prep.device_names;
  const std::vector<record>& records = prep.records;
  const node_record_lists& node_records = prep.node_records;
  const std::vector<char>& processed = prep.processed;
  result.counts = prep.counts;
  result.present = !records.empty() || result.counts.unknown_device_records > 0;
  result.first_ts = profiler_start_ts(model);
  const double lo = range ? range->first : -std::numeric_limits<double>::infinity();
  const double hi = range ? range->second : std::numeric_limits<double>::infinity();
  const std::size_t device_count = device_names.size();

  std::map<std::string, memory_device> devices;
  const auto device_of = [&](std::uint32_t d) -> memory_device& {
    memory_device& dev = devices[device_names[d]];
    dev.device = device_names[d];
    return dev;
  };

  build_curves(records, result.first_ts, device_of);

  // plugin-rules.md#memory-view events table.
  {
    address_slots alloc;
    address_slots unpaired;
    for (std::size_t i = 0; i < records.size(); ++i) {
      const record& r = records[i];
      if (!r.has_addr || r.ts < lo || r.ts > hi) continue;
      if (r.is_allocation()) {
        if (alloc.set(r.addr, i)) ++result.counts.replaced_allocations;
        continue;
      }
      if (const auto a = alloc.take(r.addr)) {
        const record& ar = records[*a];
        memory_event_row row;
        row.op_name = operator_text(trees, ar);
        row.size_bytes = -r.bytes;
        row.allocation_time_us = ar.ts - result.first_ts;
        row.release_time_us = r.ts - result.first_ts;
        row.duration_us = r.ts - ar.ts;
        device_of(ar.device).events.push_back(std::move(row));
      } else {
        if (unpaired.set(r.addr, i)) ++result.counts.repeated_frees;
      }
    }
    alloc.for_each([&](std::size_t i) {
      const record& r = records[i];
      memory_event_row row;
      row.op_name = operator_text(trees, r);
      row.size_bytes = r.bytes;
      row.allocation_time_us = r.ts - result.first_ts;
      device_of(r.device).events.push_back(std::move(row));
    });
    unpaired.for_each([&](std::size_t i) {
      const record& r = records[i];
      memory_event_row row;
      row.op_name = operator_text(trees, r);
      row.size_bytes = -r.bytes;
      row.release_time_us = r.ts - result.first_ts;
      device_of(r.device).events.push_back(std::move(row));
    });
  }

  // plugin-rules.md#memory-view statistics.
  if (device_count > 0) {
    stats_walk walk{trees, records, node_records, processed, device_count, lo, hi, {}, {}};
    walk.by_name.resize(device_count);
    for (const thread_tree& t : trees.threads) {
      if (t.root == no_index) continue;
      for (const std::uint32_t c : trees.nodes[t.root].children) walk.visit(c);
    }
    for (std::size_t d = 0; d < device_count; ++d) {
      for (const auto& [name, v] : walk.by_name[d]) {
        if (std::all_of(v.begin(), v.end(), [](std::int64_t x) { return x == 0; })) continue;
        memory_stat_row row;
        row.name = name;
        row.calls = walk.calls[name];
        row.self_size_increase_bytes = v[0];
        row.self_allocation_size_bytes = v[1];
        row.self_allocation_count = v[2];
        row.size_increase_bytes = v[3];
        row.allocation_size_bytes = v[4];
        row.allocation_count = v[5];
        device_of(static_cast<std::uint32_t>(d)).stats.push_back(std::move(row));
      }
    }
  }

  for (auto& [name, dev] : devices) {
    dev.capacity_bytes = device_capacity(model, name);
    result.devices.push_back(std::move(dev));
  }
  set_default_device(result);
  return result;
}

// ---------------------------------------------------------------------------------------------
// memory_index: the range-independent part, and the ranged tables from it.

namespace {

constexpr std::uint32_t npos32 = std::numeric_limits<std::uint32_t>::max();

/// One tree node the statistics walk can visit, in the walk's pre-order. Sub-trees are
/// contiguous: [own index, skip) (a node reached twice through the
/// plugin-rules.md#backward-regrouping quirk appears twice).
struct walk_entry {
  double start = 0;
  double end = 0;
  std::uint32_t skip = 0;       ///< index past this entry's sub-tree
  std::uint32_t name = npos32;  ///< operator name id (index into data::names); npos32 = not an operator
  /// This operator's records: [rec_begin, next entry's rec_begin) of data::node_rec_* (records
  /// are stored per entry, in entry order; a final sentinel entry closes the last range).
  std::uint32_t rec_begin = 0;
  bool processed = false;       ///< entered by the attribution walk (the walk descends only then)
};

}  // namespace

struct memory_index::data {
  /// Records with NaN times (or too many of anything for 32-bit indices): the binary searches
  /// would be wrong, so compute_memory_range() falls back to compute_memory().
  bool fallback = false;
  bool present = false;
  double first_ts = 0;
  memory_counts counts;  ///< the range-independent counts

  std::vector<std::uint32_t> device_order;  ///< device indices sorted by name
  std::vector<memory_device> base;          ///< per device index: name, curve, peaks, capacity

  // The records with an address (the events table's), in time order (plugin-rules.md#memory-view).
  std::vector<double> ts;
  std::vector<std::uint32_t> device;
  std::vector<std::int64_t> bytes;
  std::vector<std::uint64_t> addr;
  /// Previous / next record at the same address; npos32 = none.
  std::vector<std::uint32_t> prev;
  std::vector<std::uint32_t> next;
  std::vector<std::uint32_t> text;  ///< operator_text() id
  std::vector<std::string> texts;

  // The statistics walk (plugin-rules.md#memory-view).
  std::vector<std::string> names;  ///< operator names, sorted (the statistics table's order)
  std::vector<walk_entry> entries;  ///< + a sentinel at the end (rec_begin only)
  std::vector<double> node_rec_ts;
  std::vector<std::uint32_t> node_rec_device;
  std::vector<std::int64_t> node_rec_bytes;

  std::size_t device_count() const noexcept { return base.size(); }
  bool is_allocation(std::uint32_t i) const noexcept { return bytes[i] > 0; }
};

memory_index::memory_index() = default;
memory_index::~memory_index() = default;
memory_index::memory_index(memory_index&&) noexcept = default;
memory_index& memory_index::operator=(memory_index&&) noexcept = default;

bool memory_index::present() const noexcept { return d_ && d_->present; }

bool memory_index::reads_trees() const noexcept { return !d_ || d_->fallback; }

std::size_t memory_index::memory_bytes() const noexcept {
  if (!d_) return 0;
  const data& x = *d_;
  const auto cap = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  std::size_t n = sizeof(data) + cap(x.ts) + cap(x.device) + cap(x.bytes) + cap(x.addr) +
                  cap(x.prev) + cap(x.next) + cap(x.text) + cap(x.entries) + cap(x.node_rec_ts) +
                  cap(x.node_rec_device) + cap(x.node_rec_bytes);
  for (const memory_device& d : x.base) n += cap(d.curve);
  for (const std::string& t : x.texts) n += sizeof t + t.capacity();
  for (const std::string& t : x.names) n += sizeof t + t.capacity();
  return n;
}

memory_index build_memory_index(const trace_model& model, const op_trees& trees) {
  memory_index index;
  index.d_ = std::make_unique<memory_index::data>();
  memory_index::data& x = *index.d_;
  // Without [memory] records there is nothing to index: the walk would still cost about 33 bytes
  // per tree node (33 MB on 1 M events) for a view that is never shown. compute_memory_range()
  // answers such an index through compute_memory(), which is cheap then.
  if (std::none_of(model.events.begin(), model.events.end(), [&](const event& e) {
        return e.type == event_type::memory && e.extra != no_index && e.extra < model.memory.size();
      })) {
    x.first_ts = profiler_start_ts(model);
    x.fallback = true;
    return index;
  }
  prepared prep = prepare(model, trees);
  const std::vector<record>& records = prep.records;
  x.counts = prep.counts;
  x.present = !records.empty() || x.counts.unknown_device_records > 0;
  x.first_ts = profiler_start_ts(model);

  if (records.size() >= npos32 || trees.nodes.size() >= npos32 ||
      std::any_of(records.begin(), records.end(), [](const record& r) { return std::isnan(r.ts); })) {
    x.fallback = true;
    return index;
  }

  // Devices, curves and peaks.
  const std::size_t device_count = prep.device_names.size();
  x.base.resize(device_count);
  for (std::size_t d = 0; d < device_count; ++d) {
    x.base[d].device = prep.device_names[d];
    x.base[d].capacity_bytes = device_capacity(model, prep.device_names[d]);
    x.device_order.push_back(static_cast<std::uint32_t>(d));
  }
  std::sort(x.device_order.begin(), x.device_order.end(),
            [&](std::uint32_t a, std::uint32_t b) { return prep.device_names[a] < prep.device_names[b]; });
  build_curves(records, x.first_ts, [&](std::uint32_t d) -> memory_device& { return x.base[d]; });

  // The records with an address, their neighbours at the same address and their operator text.
  std::size_t with_addr = 0;
  for (const record& r : records) with_addr += r.has_addr ? 1 : 0;
  x.ts.reserve(with_addr);
  x.device.reserve(with_addr);
  x.bytes.reserve(with_addr);
  x.addr.reserve(with_addr);
  x.prev.reserve(with_addr);
  x.next.reserve(with_addr);
  x.text.reserve(with_addr);
  std::unordered_map<std::uint64_t, std::uint32_t> last_at;
  std::unordered_map<std::string, std::uint32_t> text_ids;
  for (const record& r : records) {
    if (!r.has_addr) continue;
    const auto i = static_cast<std::uint32_t>(x.ts.size());
    x.ts.push_back(r.ts);
    x.device.push_back(r.device);
    x.bytes.push_back(r.bytes);
    x.addr.push_back(r.addr);
    x.prev.push_back(npos32);
    x.next.push_back(npos32);
    auto [it, inserted] = last_at.try_emplace(r.addr, i);
    if (!inserted) {
      x.prev[i] = it->second;
      x.next[it->second] = i;
      it->second = i;
    }
    auto [t, new_text] = text_ids.try_emplace(operator_text(trees, r), static_cast<std::uint32_t>(x.texts.size()));
    if (new_text) x.texts.push_back(t->first);
    x.text.push_back(t->second);
  }

  // Operator names, sorted as the statistics table is.
  std::unordered_map<std::string_view, std::uint32_t> name_ids;
  {
    for (std::uint32_t i = 0; i < trees.nodes.size(); ++i)
      if (trees.is_operator(i)) name_ids.try_emplace(trees.nodes[i].name, 0);
    std::vector<std::string_view> names;
    names.reserve(name_ids.size());
    for (const auto& entry : name_ids) names.push_back(entry.first);
    std::sort(names.begin(), names.end());
    for (std::size_t k = 0; k < names.size(); ++k) name_ids[names[k]] = static_cast<std::uint32_t>(k);
    x.names.assign(names.begin(), names.end());
  }
  const auto name_id = [&](std::string_view name) { return name_ids.at(name); };

  // The statistics walk without a range, flattened: every node stats_walk::visit() reaches.
  {
    struct open_node {
      std::uint32_t node;
      std::size_t child;
      std::size_t entry;
    };
    std::vector<open_node> stack;
    const auto emit = [&](std::uint32_t node) {
      const op_node& nd = trees.nodes[node];
      walk_entry e;
      e.start = nd.start;
      e.end = nd.end;
      e.processed = prep.processed[node] != 0;
      e.rec_begin = static_cast<std::uint32_t>(x.node_rec_ts.size());
      if (trees.is_operator(node)) {
        e.name = name_id(nd.name);
        for (const std::size_t i : prep.node_records[node]) {
          x.node_rec_ts.push_back(records[i].ts);
          x.node_rec_device.push_back(records[i].device);
          x.node_rec_bytes.push_back(records[i].bytes);
        }
        if (x.node_rec_ts.size() >= npos32) throw std::length_error("memory_index: too many records");
      }
      const std::size_t at = x.entries.size();
      if (at + 1 >= npos32) throw std::length_error("memory_index: too many tree nodes");
      x.entries.push_back(e);
      if (e.processed) {
        stack.push_back({node, 0, at});
      } else {
        x.entries[at].skip = static_cast<std::uint32_t>(at + 1);
      }
    };
    try {
      for (const thread_tree& t : trees.threads) {
        if (t.root == no_index) continue;
        for (const std::uint32_t c : trees.nodes[t.root].children) {
          emit(c);
          while (!stack.empty()) {
            open_node& top = stack.back();
            const index_list& children = trees.nodes[top.node].children;
            if (top.child < children.size()) {
              emit(children[top.child++]);  // may reallocate `stack`: `top` is not used after
            } else {
              x.entries[top.entry].skip = static_cast<std::uint32_t>(x.entries.size());
              stack.pop_back();
            }
          }
        }
      }
      walk_entry sentinel;
      sentinel.rec_begin = static_cast<std::uint32_t>(x.node_rec_ts.size());
      x.entries.push_back(sentinel);
    } catch (const std::length_error&) {
      x.entries.clear();
      x.fallback = true;
    }
  }
  return index;
}

namespace {

using device_metrics = std::vector<metrics>;  // per device

/// plugin-rules.md#memory-view for [lo, hi] from the flattened walk: stats_walk::visit() without
/// recursion, maps or strings. Fills `stats[d]` (per device index) in name order.
void range_stats(const memory_index::data& x, double lo, double hi, std::vector<std::vector<memory_stat_row>>& stats) {
  const std::size_t dc = x.device_count();
  const std::size_t nc = x.names.size();
  std::vector<std::array<std::int64_t, 6>> rows(dc * nc, std::array<std::int64_t, 6>{});
  std::vector<std::int64_t> calls(nc, 0);
  struct frame {
    std::uint32_t end;
    std::uint32_t name;
  };
  std::vector<frame> stack;
  std::vector<metrics> self;   // dc per frame
  std::vector<metrics> total;  // dc per frame

  const auto close = [&] {
    const frame f = stack.back();
    const std::size_t base = (stack.size() - 1) * dc;
    if (f.name != npos32) {
      for (std::size_t d = 0; d < dc; ++d) {
        const metrics& s = self[base + d];
        const metrics& t = total[base + d];
        if (s == metrics{} && t == metrics{}) continue;
        std::array<std::int64_t, 6>& row = rows[d * nc + f.name];
        for (std::size_t j = 0; j < metric_count; ++j) {
          sat_add(row[j], s[j]);
          sat_add(row[j + metric_count], t[j]);
        }
      }
    }
    if (base >= dc) {
      for (std::size_t d = 0; d < dc; ++d)
        for (std::size_t j = 0; j < metric_count; ++j) sat_add(total[base - dc + d][j], total[base + d][j]);
    }
    stack.pop_back();
    self.resize(base);
    total.resize(base);
  };

  const std::size_t count = x.entries.size() - 1;  // without the sentinel
  for (std::size_t i = 0; i < count;) {
    while (!stack.empty() && i >= stack.back().end) close();
    const walk_entry& e = x.entries[i];
    if (e.end < lo || e.start > hi) {
      i = e.skip;
      continue;
    }
    if (e.name != npos32) ++calls[e.name];
    if (!e.processed) {
      i = e.skip;
      continue;
    }
    stack.push_back({e.skip, e.name});
    const std::size_t base = self.size();
    self.resize(base + dc, metrics{});
    const std::uint32_t rec_end = x.entries[i + 1].rec_begin;
    for (std::uint32_t k = e.rec_begin; k < rec_end; ++k) {
      const double t = x.node_rec_ts[k];
      if (t < lo || t > hi) continue;
      metrics& m = self[base + x.node_rec_device[k]];
      const std::int64_t b = x.node_rec_bytes[k];
      sat_add(m[0], b);
      if (b > 0) {
        sat_add(m[1], b);
        m[2] += 1;
      }
    }
    total.insert(total.end(), self.begin() + static_cast<std::ptrdiff_t>(base), self.end());
    ++i;
  }
  while (!stack.empty()) close();

  for (std::size_t d = 0; d < dc; ++d) {
    for (std::size_t k = 0; k < nc; ++k) {
      const std::array<std::int64_t, 6>& v = rows[d * nc + k];
      if (std::all_of(v.begin(), v.end(), [](std::int64_t y) { return y == 0; })) continue;
      memory_stat_row row;
      row.name = x.names[k];
      row.calls = calls[k];
      row.self_size_increase_bytes = v[0];
      row.self_allocation_size_bytes = v[1];
      row.self_allocation_count = v[2];
      row.size_increase_bytes = v[3];
      row.allocation_size_bytes = v[4];
      row.allocation_count = v[5];
      stats[d].push_back(std::move(row));
    }
  }
}

/// plugin-rules.md#memory-view for the records with an address [b, e) (those in range):
/// compute_memory()'s replay, decided from the same-address neighbours. Within the slice, a free
/// pairs with the previous record at its address when that is an allocation in the slice; an
/// allocation whose next record at its address is an allocation in the slice is replaced (its row
/// slot goes to that one); the last allocation of a run is unfreed when nothing follows it in the
/// slice. `events` null: only `has_events` (per device) is filled.
void range_events(const memory_index::data& x, std::uint32_t b, std::uint32_t e,
                  std::vector<std::vector<memory_event_row>>* events, std::vector<char>& has_events,
                  memory_counts& counts) {
  const auto in_slice = [&](std::uint32_t j) { return j != npos32 && j >= b && j < e; };
  std::vector<std::pair<std::uint32_t, std::uint32_t>> unfreed;  // (slot position, allocation)
  std::vector<std::uint32_t> unpaired;                            // slot -> latest unpaired free
  std::unordered_map<std::uint64_t, std::size_t> unpaired_slot;
  const double first_ts = x.first_ts;
  for (std::uint32_t i = b; i < e; ++i) {
    const std::uint32_t p = x.prev[i];
    const bool after_allocation = in_slice(p) && x.is_allocation(p);
    if (x.is_allocation(i)) {
      if (after_allocation) ++counts.replaced_allocations;
      if (in_slice(x.next[i])) continue;  // paired with a later free, or replaced
      // Unfreed: its slot opened with the first allocation of its run in the slice.
      std::uint32_t q = i;
      while (in_slice(x.prev[q]) && x.is_allocation(x.prev[q])) q = x.prev[q];
      unfreed.emplace_back(q, i);
      continue;
    }
    if (after_allocation) {
      has_events[x.device[p]] = 1;
      if (events == nullptr) continue;
      memory_event_row row;
      row.op_name = x.texts[x.text[p]];
      row.size_bytes = -x.bytes[i];
      row.allocation_time_us = x.ts[p] - first_ts;
      row.release_time_us = x.ts[i] - first_ts;
      row.duration_us = x.ts[i] - x.ts[p];
      (*events)[x.device[p]].push_back(std::move(row));
      continue;
    }
    auto [it, inserted] = unpaired_slot.try_emplace(x.addr[i], unpaired.size());
    if (inserted) {
      unpaired.push_back(i);
    } else {
      unpaired[it->second] = i;
      ++counts.repeated_frees;
    }
  }
  std::sort(unfreed.begin(), unfreed.end());
  for (const auto& [slot, i] : unfreed) {
    has_events[x.device[i]] = 1;
    if (events == nullptr) continue;
    memory_event_row row;
    row.op_name = x.texts[x.text[i]];
    row.size_bytes = x.bytes[i];
    row.allocation_time_us = x.ts[i] - first_ts;
    (*events)[x.device[i]].push_back(std::move(row));
  }
  for (const std::uint32_t i : unpaired) {
    has_events[x.device[i]] = 1;
    if (events == nullptr) continue;
    memory_event_row row;
    row.op_name = x.texts[x.text[i]];
    row.size_bytes = -x.bytes[i];
    row.release_time_us = x.ts[i] - first_ts;
    (*events)[x.device[i]].push_back(std::move(row));
  }
}

}  // namespace

memory_result compute_memory_range(const memory_index& index, const trace_model& model, const op_trees& trees,
                                   std::pair<double, double> range, memory_parts parts) {
  if (!index.d_ || index.d_->fallback) {
    memory_result m = compute_memory(model, trees, range);
    for (memory_device& d : m.devices) {
      if (!parts.curve) d.curve.clear();
      if (!parts.stats) d.stats.clear();
      if (!parts.events) d.events.clear();
    }
    if (!parts.events) m.counts.replaced_allocations = m.counts.repeated_frees = 0;
    return m;
  }
  const memory_index::data& x = *index.d_;
  const auto [lo, hi] = range;
  memory_result result;
  result.present = x.present;
  result.first_ts = x.first_ts;
  result.counts = x.counts;
  const std::size_t dc = x.device_count();

  // A device is listed when it has a curve, statistics rows or event rows: a part not asked
  // for is still computed (without rows) when a device without a curve depends on it.
  const bool every_curve =
      std::all_of(x.base.begin(), x.base.end(), [](const memory_device& d) { return !d.curve.empty(); });
  std::vector<std::vector<memory_stat_row>> stats(dc);
  if (parts.stats || !every_curve) range_stats(x, lo, hi, stats);
  std::vector<std::vector<memory_event_row>> events(dc);
  std::vector<char> has_events(dc, 0);
  if (parts.events || !every_curve) {
    // Records with an address in [lo, hi]: x.ts is sorted and has no NaN.
    const auto b = static_cast<std::uint32_t>(
        std::partition_point(x.ts.begin(), x.ts.end(), [lo = lo](double t) { return t < lo; }) - x.ts.begin());
    const auto e = static_cast<std::uint32_t>(
        std::partition_point(x.ts.begin(), x.ts.end(), [hi = hi](double t) { return !(t > hi); }) - x.ts.begin());
    memory_counts range_counts;
    range_events(x, b, std::max(b, e), parts.events ? &events : nullptr, has_events, range_counts);
    if (parts.events) {
      result.counts.replaced_allocations = range_counts.replaced_allocations;
      result.counts.repeated_frees = range_counts.repeated_frees;
    }
  }

  for (const std::uint32_t d : x.device_order) {
    const memory_device& base = x.base[d];
    if (base.curve.empty() && stats[d].empty() && !has_events[d]) continue;
    memory_device dev;
    dev.device = base.device;
    dev.peak_allocated_bytes = base.peak_allocated_bytes;
    dev.peak_reserved_bytes = base.peak_reserved_bytes;
    dev.peak_time_us = base.peak_time_us;
    dev.capacity_bytes = base.capacity_bytes;
    if (parts.curve) dev.curve = base.curve;
    if (parts.stats) dev.stats = std::move(stats[d]);
    if (parts.events) dev.events = std::move(events[d]);
    result.devices.push_back(std::move(dev));
  }
  set_default_device(result);
  return result;
}

std::vector<std::array<double, 3>> downsample_memory_curve(const std::vector<std::array<double, 3>>& curve,
                                                           std::size_t n_out) {
  const std::size_t length = curve.size();
  if (n_out >= length) return curve;
  if (n_out < 3) {
    std::vector<std::array<double, 3>> out;
    if (n_out >= 1) out.push_back(curve.front());
    if (n_out == 2) out.push_back(curve.back());
    return out;
  }
  const std::size_t bins = n_out - 2;
  const std::size_t inner = length - 2;
  const std::size_t base = inner / bins;
  const std::size_t extra = inner % bins;
  // bin i covers inner points [begin(i), begin(i + 1)), offset by 1 in `curve`.
  const auto begin = [&](std::size_t i) { return 1 + i * base + std::min(i, extra); };

  std::vector<std::array<double, 3>> out(n_out);
  out.front() = curve.front();
  out.back() = curve.back();
  for (std::size_t i = 0; i < bins; ++i) {
    double cx = 0;
    double cy = 0;
    if (i + 1 < bins) {
      const std::size_t b = begin(i + 1);
      const std::size_t e = begin(i + 2);
      for (std::size_t j = b; j < e; ++j) {
        cx += curve[j][0];
        cy += curve[j][1];
      }
      cx /= static_cast<double>(e - b);
      cy /= static_cast<double>(e - b);
    } else {
      cx = curve.back()[0];
      cy = curve.back()[1];
    }
    const std::array<double, 3>& a = out[i];
    std::size_t best = begin(i);
    double best_area = -1;
    for (std::size_t j = begin(i); j < begin(i + 1); ++j) {
      const double area = 0.5 * std::fabs((a[0] - cx) * (curve[j][1] - a[1]) - (a[0] - curve[j][0]) * (cy - a[1]));
      if (area > best_area) {
        best_area = area;
        best = j;
      }
    }
    out[i + 1] = curve[best];
  }
  return out;
}

std::optional<memory_time_unit> parse_time_unit(std::string_view t) {
  if (iequals(t, "us") || iequals(t, "micro") || iequals(t, "microsecond")) return memory_time_unit::us;
  if (iequals(t, "ms") || iequals(t, "milli") || iequals(t, "millisecond")) return memory_time_unit::ms;
  if (t.empty() || iequals(t, "s") || iequals(t, "second")) return memory_time_unit::s;
  return std::nullopt;
}

std::optional<memory_size_unit> parse_memory_unit(std::string_view t) {
  if (t.empty() || iequals(t, "B")) return memory_size_unit::b;
  if (iequals(t, "KB") || iequals(t, "K")) return memory_size_unit::kb;
  if (iequals(t, "MB") || iequals(t, "M")) return memory_size_unit::mb;
  if (iequals(t, "GB") || iequals(t, "G")) return memory_size_unit::gb;
  return std::nullopt;
}

double time_factor(memory_time_unit unit) noexcept {
  switch (unit) {
    case memory_time_unit::us: return 1.0;
    case memory_time_unit::ms: return 1e-3;
    case memory_time_unit::s: return 1e-6;
  }
  return 1.0;
}

double memory_factor(memory_size_unit unit) noexcept {
  switch (unit) {
    case memory_size_unit::b: return 1.0;
    case memory_size_unit::kb: return 1.0 / 1024;
    case memory_size_unit::mb: return 1.0 / (1024.0 * 1024);
    case memory_size_unit::gb: return 1.0 / (1024.0 * 1024 * 1024);
  }
  return 1.0;
}

std::string_view unit_name(memory_time_unit unit) noexcept {
  switch (unit) {
    case memory_time_unit::us: return "us";
    case memory_time_unit::ms: return "ms";
    case memory_time_unit::s: return "s";
  }
  return "";
}

std::string_view unit_name(memory_size_unit unit) noexcept {
  switch (unit) {
    case memory_size_unit::b: return "B";
    case memory_size_unit::kb: return "KB";
    case memory_size_unit::mb: return "MB";
    case memory_size_unit::gb: return "GB";
  }
  return "";
}

double memory_display_round(double v) {
  const double a = std::fabs(v);
  if (v == 0 || a >= 0.01) return py_round(v, 2);
  if (!std::isfinite(v)) return v;
  const int digits = static_cast<int>(std::fabs(std::floor(std::log10(a))));
  return py_round(v, digits);
}

std::string memory_peak_text(std::int64_t peak_bytes, memory_size_unit unit) {
  return "Peak Memory Usage: " + python_float_text(static_cast<double>(peak_bytes) * memory_factor(unit)) +
         std::string(unit_name(unit));
}

}  // namespace kinetoscope::analysis
