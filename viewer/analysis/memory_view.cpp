// SPDX-License-Identifier: BSD-3-Clause
#include "analysis/memory_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <unordered_map>

#include "analysis/py_round.hpp"

namespace kinetoscope::analysis {

namespace {

/// One [memory] record of a known device (§9.1).
struct record {
  double ts = 0;
  std::int64_t tid = 0;
  std::uint32_t device = 0;  ///< index into the device-name table
  bool has_addr = false;
  std::uint64_t addr = 0;
  std::int64_t bytes = 0;
  double total_allocated = 0;
  double total_reserved = 0;
  // Set by the attribution walk (§9.2) and copied to frees afterwards.
  std::string_view op_name;
  std::string_view parent_op_name;

  bool is_allocation() const noexcept { return bytes > 0; }
};

constexpr std::size_t metric_count = 3;  // size increase, allocation size, allocation count
using metrics = std::array<std::int64_t, metric_count>;

/// Python's `op_name_or_unknown` plus the `aten::empty` context rule of §9.4.
std::string operator_text(const record& r) {
  std::string name = r.op_name.empty() ? std::string("<unknown>") : std::string(r.op_name);
  if (name.rfind("aten::empty", 0) == 0 && !r.parent_op_name.empty()) {
    return std::string(r.parent_op_name) + " (" + name + ")";
  }
  return name;
}

/// Builds the records and the device-name table; counts skipped records.
std::vector<record> collect_records(const trace_model& model, std::vector<std::string>& device_names,
                                    memory_counts& counts) {
  std::vector<record> out;
  std::map<std::pair<std::int64_t, std::int64_t>, std::uint32_t> device_index;
  for (const event& e : model.events) {
    if (e.type != event_type::memory || e.extra == no_index || e.extra >= model.memory.size()) continue;
    const memory_args& m = model.memory[e.extra];
    if (m.device_type != 0 && m.device_type != 1) {
      ++counts.unknown_device_records;
      continue;
    }
    const auto key = std::pair(m.device_type, m.device_type == 0 ? std::int64_t{0} : m.device_id);
    auto [it, inserted] = device_index.try_emplace(key, static_cast<std::uint32_t>(device_names.size()));
    if (inserted) device_names.push_back(m.device_type == 0 ? std::string("CPU") : "GPU" + std::to_string(m.device_id));
    record r;
    r.ts = e.ts;
    r.tid = e.tid;
    r.device = it->second;
    r.has_addr = m.has_addr;
    r.addr = m.addr;
    r.bytes = m.bytes;
    r.total_allocated = m.total_allocated;
    r.total_reserved = m.total_reserved;
    out.push_back(r);
    ++counts.records;
    if (!m.has_addr) ++counts.records_without_addr;
  }
  // model.events is stable-sorted by ts already; keep it robust for hand-built models.
  std::stable_sort(out.begin(), out.end(), [](const record& a, const record& b) { return a.ts < b.ts; });
  return out;
}

/// §9.2: the plugin's cursor walk over one thread's tree. Every node entered is marked
/// processed (the root too); a record lands on the node the walk stops in, and only operator
/// nodes keep it.
void attribute_thread(const op_trees& trees, std::uint32_t root, std::vector<record>& records,
                      const std::vector<std::size_t>& indices, std::vector<std::vector<std::size_t>>& node_records,
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
      const std::vector<std::uint32_t>& children = trees.nodes[current].children;
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
      node_records[current].push_back(indices[k]);
      ++counts.attributed_records;
      if (r.is_allocation()) {
        r.op_name = trees.nodes[current].name;
        if (!stack.empty()) r.parent_op_name = trees.nodes[stack.back().first].name;
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
  const std::vector<std::vector<std::size_t>>& node_records;
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
        m[0] += r.bytes;
        if (r.bytes > 0) {
          m[1] += r.bytes;
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
        for (std::size_t j = 0; j < metric_count; ++j) total[d][j] += child[d][j];
      }
    }
    if (is_op && !total.empty()) {
      for (std::size_t d = 0; d < device_count; ++d) {
        const metrics s = self.empty() ? metrics{} : self[d];
        const metrics& t = total[d];
        if (s == metrics{} && t == metrics{}) continue;
        std::array<std::int64_t, 6>& row = by_name[d][std::string(node.name)];
        for (std::size_t j = 0; j < metric_count; ++j) {
          row[j] += s[j];
          row[j + metric_count] += t[j];
        }
      }
    }
    return total;
  }
};

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
  std::vector<std::string> device_names;
  std::vector<record> records = collect_records(model, device_names, result.counts);
  result.present = !records.empty() || result.counts.unknown_device_records > 0;
  result.first_ts = profiler_start_ts(model);
  const double lo = range ? range->first : -std::numeric_limits<double>::infinity();
  const double hi = range ? range->second : std::numeric_limits<double>::infinity();
  const std::size_t device_count = device_names.size();

  // §9.2 attribution, thread by thread.
  std::vector<std::vector<std::size_t>> node_records(trees.nodes.size());
  std::vector<char> processed(trees.nodes.size(), 0);
  {
    std::map<std::int64_t, std::vector<std::size_t>> by_tid;
    for (std::size_t i = 0; i < records.size(); ++i) by_tid[records[i].tid].push_back(i);
    std::unordered_map<std::int64_t, std::uint32_t> root_of;
    for (const thread_tree& t : trees.threads) root_of.try_emplace(t.tid, t.root);
    for (const auto& [tid, indices] : by_tid) {
      const auto it = root_of.find(tid);
      attribute_thread(trees, it == root_of.end() ? no_index : it->second, records, indices, node_records,
                       processed, result.counts);
    }
  }
  // Each free copies the op of the open allocation at its address (all records, time order).
  {
    std::unordered_map<std::uint64_t, std::size_t> open;
    for (std::size_t i = 0; i < records.size(); ++i) {
      record& r = records[i];
      if (!r.has_addr) continue;
      if (r.is_allocation()) {
        open[r.addr] = i;
      } else if (const auto it = open.find(r.addr); it != open.end()) {
        r.op_name = records[it->second].op_name;
        r.parent_op_name = records[it->second].parent_op_name;
        open.erase(it);
      }
    }
  }

  std::map<std::string, memory_device> devices;
  const auto device_of = [&](std::uint32_t d) -> memory_device& {
    memory_device& dev = devices[device_names[d]];
    dev.device = device_names[d];
    return dev;
  };

  // §9.3 curve and peaks (whole trace).
  {
    for (const record& r : records) {
      if (!r.has_addr || std::isnan(r.total_allocated) || std::isnan(r.total_reserved)) continue;
      memory_device& dev = device_of(r.device);
      const double t = r.ts - result.first_ts;
      if (!dev.curve.empty()) dev.curve.push_back({t, dev.curve.back()[1], dev.curve.back()[2]});
      dev.curve.push_back({t, r.total_allocated, r.total_reserved});
      // The plugin's peaks start at 0 and keep the max of "Total Allocated".
      const auto allocated = static_cast<std::int64_t>(std::llround(r.total_allocated));
      const auto reserved = static_cast<std::int64_t>(std::llround(r.total_reserved));
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

  // §9.4 events table.
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
        row.op_name = operator_text(ar);
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
      row.op_name = operator_text(r);
      row.size_bytes = r.bytes;
      row.allocation_time_us = r.ts - result.first_ts;
      device_of(r.device).events.push_back(std::move(row));
    });
    unpaired.for_each([&](std::size_t i) {
      const record& r = records[i];
      memory_event_row row;
      row.op_name = operator_text(r);
      row.size_bytes = -r.bytes;
      row.release_time_us = r.ts - result.first_ts;
      device_of(r.device).events.push_back(std::move(row));
    });
  }

  // §9.5 statistics.
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
    if (name.rfind("GPU", 0) == 0) {
      const auto id = std::strtoll(name.c_str() + 3, nullptr, 10);
      if (id >= 0 && static_cast<std::size_t>(id) < model.devices.size() &&
          model.devices[static_cast<std::size_t>(id)].has_total_global_mem) {
        dev.capacity_bytes = model.devices[static_cast<std::size_t>(id)].total_global_mem;
      }
    }
    result.devices.push_back(std::move(dev));
  }
  for (const memory_device& d : result.devices) {
    if (d.device.rfind("GPU", 0) == 0) {
      result.default_device = d.device;
      break;
    }
  }
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
