// SPDX-License-Identifier: BSD-3-Clause
// Kernel view (docs/plugin-rules.md#kernel-view).

#include "analysis/kernel_view.hpp"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "kinetoscope/formats/py_number.hpp"

namespace kinetoscope::analysis {

using formats::py_round;

namespace {

const kernel_args* args_of(const trace_model& m, const event& e) {
  if (e.extra == no_index || e.extra >= m.kernels.size()) return nullptr;
  return &m.kernels[e.extra];
}

std::string dims_text(const kernel_args* a, bool grid) {
  if (a == nullptr || !(grid ? a->has_grid : a->has_block)) return "None";
  const std::int64_t* v = grid ? a->grid : a->block;
  return "[" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ", " + std::to_string(v[2]) + "]";
}

// str(value or '0') of an integer arg.
std::string int_or_zero(bool present, std::int64_t v) { return present && v != 0 ? std::to_string(v) : "0"; }

// Kernels of a subtree in the plugin's get_operator_and_kernels order: children first, then the
// node's own runtimes (kernels only).
void collect_kernels(const op_trees& t, std::uint32_t n, std::vector<std::uint32_t>& out) {
  for (auto c : t.nodes[n].children) collect_kernels(t, c, out);
  for (auto r : t.nodes[n].runtimes)
    for (auto d : t.runtimes[r].devices)
      if (t.devices[d].type == event_type::kernel) out.push_back(d);
}

}  // namespace

kernel_metric_columns kernel_view_metric_columns(const trace_model& model) {
  kernel_metric_columns c;
  for (const auto& e : model.events) {
    if (e.type != event_type::kernel) continue;
    const kernel_args* a = args_of(model, e);
    if (a == nullptr || a->device < 0) continue;
    if (a->has_blocks_per_sm && a->blocks_per_sm > 0.0) c.blocks_per_sm = true;
    if (a->has_occupancy && a->occupancy >= 0.0) c.occupancy = true;
  }
  return c;
}

bool kernel_view_present(const trace_model& model, const op_trees& trees) {
  (void)model;
  return trees.has_kernel;
}

std::vector<kernel_row> kernels_by_name(const trace_model& model, const op_trees& trees) {
  struct acc {
    std::int64_t count = 0;
    double sum = 0, max = -std::numeric_limits<double>::infinity(), min = std::numeric_limits<double>::infinity();
    double bps = 0, occ = 0;
    std::string_view name;
  };
  std::vector<acc> accs;
  std::unordered_map<std::uint32_t, std::size_t> index;
  for (const auto& e : model.events) {
    if (e.type != event_type::kernel) continue;
    auto [it, inserted] = index.emplace(e.name, accs.size());
    if (inserted) {
      accs.emplace_back();
      accs.back().name = model.str(e.name);
    }
    acc& a = accs[it->second];
    const kernel_args* k = args_of(model, e);
    a.count += 1;
    a.sum += e.dur;
    a.max = std::max(a.max, e.dur);
    a.min = std::min(a.min, e.dur);
    if (k != nullptr && k->has_blocks_per_sm) a.bps += k->blocks_per_sm * e.dur;
    if (k != nullptr && k->has_occupancy) a.occ += k->occupancy * e.dur;
  }
  std::vector<kernel_row> rows;
  rows.reserve(accs.size());
  for (const auto& a : accs) {
    kernel_row r;
    r.name = std::string(a.name);
    r.tensor_cores_used = trees.uses_tensor_cores(a.name);
    r.calls = a.count;
    r.total_raw_us = a.sum;
    r.total_us = py_round(a.sum);
    r.mean_us = py_round(a.sum / static_cast<double>(a.count));
    r.max_us = py_round(a.max);
    r.min_us = py_round(a.min);
    r.blocks_per_sm = py_round(a.sum != 0 ? a.bps / a.sum : 0.0, 2);
    r.occupancy_pct = py_round(a.sum != 0 ? a.occ / a.sum : 0.0, 2);
    rows.push_back(std::move(r));
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const kernel_row& a, const kernel_row& b) { return a.total_raw_us > b.total_raw_us; });
  return rows;
}

std::vector<kernel_op_row> kernels_by_name_and_operator(const trace_model& model, const op_trees& trees) {
  std::vector<std::uint32_t> kernels;
  for (const auto& th : trees.threads) collect_kernels(trees, th.root, kernels);
  const bool no_operator = trees.options.no_operator_label;
  if (no_operator) {
    // docs/kinetoscope-rules.md#k2: each kernel once (the plugin counts the stale kernels of the
    // main root twice, Q10), and the kernels no tree reaches as well.
    std::vector<bool> seen(trees.devices.size(), false);
    std::vector<std::uint32_t> once;
    once.reserve(kernels.size());
    for (auto d : kernels)
      if (!seen[d]) {
        seen[d] = true;
        once.push_back(d);
      }
    for (std::uint32_t d = 0; d < trees.devices.size(); ++d)
      if (!seen[d] && trees.devices[d].type == event_type::kernel) once.push_back(d);
    kernels = std::move(once);
  }

  struct acc {
    kernel_op_row row;
    double bps = 0, occ = 0;
  };
  std::vector<acc> accs;
  std::unordered_map<std::string, std::size_t> index;
  for (auto d : kernels) {
    const device_node& k = trees.devices[d];
    const event& e = model.events[k.event];
    const kernel_args* a = args_of(model, e);
    const double dur = k.end - k.start;
    std::string op;
    if (no_operator && (k.owner == no_index || trees.nodes[k.owner].kind == node_kind::root ||
                        trees.nodes[k.owner].kind == node_kind::profiler_step))
      op = std::string(no_operator_name);
    else
      op = k.op_name.empty() ? std::string("N/A") : std::string(k.op_name);
    std::string grid = dims_text(a, true);
    std::string block = dims_text(a, false);
    std::string regs = int_or_zero(a != nullptr && a->has_registers, a != nullptr ? a->registers_per_thread : 0);
    std::string shm = int_or_zero(a != nullptr && a->has_shared_memory, a != nullptr ? a->shared_memory : 0);
    std::string key;
    key.reserve(k.name.size() + op.size() + 64);
    key.append(k.name).append("###").append(op).append("###").append(grid).append("###").append(block);
    key.append("###").append(regs).append("###").append(shm);
    auto [it, inserted] = index.emplace(std::move(key), accs.size());
    if (inserted) {
      acc n;
      n.row.name = std::string(k.name);
      n.row.operator_name = op;
      n.row.grid = std::move(grid);
      n.row.block = std::move(block);
      n.row.registers_per_thread = std::move(regs);
      n.row.shared_memory = std::move(shm);
      n.row.tensor_cores_used = k.tc_kernel;
      n.row.op_tc_eligible = k.op_tc_eligible;
      n.row.min_us = std::numeric_limits<double>::max();
      n.row.max_us = 0;
      accs.push_back(std::move(n));
    }
    acc& x = accs[it->second];
    x.row.calls += 1;
    x.row.total_us += dur;
    x.row.min_us = std::min(x.row.min_us, dur);
    x.row.max_us = std::max(x.row.max_us, dur);
    x.bps += (a != nullptr && a->has_blocks_per_sm ? a->blocks_per_sm : 0.0) * dur;
    x.occ += (a != nullptr && a->has_occupancy ? a->occupancy : 0.0) * dur;
  }
  std::vector<kernel_op_row> rows;
  rows.reserve(accs.size());
  for (auto& x : accs) {
    kernel_op_row r = std::move(x.row);
    r.mean_us = py_round(r.total_us / static_cast<double>(r.calls));
    r.blocks_per_sm = py_round(r.total_us > 0 ? x.bps / r.total_us : 0.0, 2);
    r.occupancy_pct = py_round(r.total_us > 0 ? x.occ / r.total_us : 0.0, 2);
    rows.push_back(std::move(r));
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const kernel_op_row& a, const kernel_op_row& b) { return a.total_us > b.total_us; });
  return rows;
}

}  // namespace kinetoscope::analysis
