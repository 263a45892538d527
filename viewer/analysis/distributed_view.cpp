// SPDX-License-Identifier: BSD-3-Clause
#include "analysis/distributed_view.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>

#include "kinetoscope/formats/py_number.hpp"

namespace kinetoscope::analysis {

using formats::py_round;
using formats::py_float_repr;

namespace {

// ---- a minimal JSON reader for the minified "Input Dims" / "Input type" texts ----------------

struct json_value {
  enum class kind : std::uint8_t { null, number, string, list, other } type = kind::null;
  double number = 0;
  bool integral = false;
  std::int64_t integer = 0;
  std::string text;
  std::vector<json_value> items;
};

class json_reader {
 public:
  explicit json_reader(std::string_view s) : s_(s) {}
  std::optional<json_value> parse() {
    auto v = value(0);
    skip_ws();
    if (!v || pos_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  std::optional<json_value> value(int depth) {
    if (depth > 64) return std::nullopt;
    skip_ws();
    if (pos_ >= s_.size()) return std::nullopt;
    json_value v;
    const char c = s_[pos_];
    if (c == '[') {
      ++pos_;
      v.type = json_value::kind::list;
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return v;
      }
      for (;;) {
        auto item = value(depth + 1);
        if (!item) return std::nullopt;
        v.items.push_back(std::move(*item));
        skip_ws();
        if (pos_ >= s_.size()) return std::nullopt;
        if (s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (s_[pos_] == ']') {
          ++pos_;
          return v;
        }
        return std::nullopt;
      }
    }
    if (c == '"') {
      ++pos_;
      v.type = json_value::kind::string;
      while (pos_ < s_.size() && s_[pos_] != '"') {
        if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) {
          v.text.push_back(s_[pos_ + 1]);  // type names never hold escapes that matter here
          pos_ += 2;
          continue;
        }
        v.text.push_back(s_[pos_++]);
      }
      if (pos_ >= s_.size()) return std::nullopt;
      ++pos_;
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      const std::size_t start = pos_;
      while (pos_ < s_.size() && (std::string_view("+-.eE0123456789").find(s_[pos_]) != std::string_view::npos)) ++pos_;
      const std::string_view num = s_.substr(start, pos_ - start);
      v.type = json_value::kind::number;
      const auto r = std::from_chars(num.data(), num.data() + num.size(), v.integer);
      v.integral = r.ec == std::errc() && r.ptr == num.data() + num.size();
      v.number = v.integral ? static_cast<double>(v.integer) : std::strtod(std::string(num).c_str(), nullptr);
      return v;
    }
    // true / false / null / anything else: skip the word
    const std::size_t start = pos_;
    while (pos_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (pos_ == start) return std::nullopt;
    v.type = s_.substr(start, pos_ - start) == "null" ? json_value::kind::null : json_value::kind::other;
    return v;
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

/// Σ over inputs Π shape · bytes(type), as the plugin's analyze_communication_nodes. Inputs
/// whose shape is not a list of integers (which made the plugin raise) count 0.
std::int64_t record_bytes(const trace_model& model, const event& e) {
  if (e.extra == no_index || e.extra >= model.ops.size()) return 0;
  const op_args& a = model.ops[e.extra];
  if (a.input_dims == 0) return 0;
  const auto dims = json_reader(model.str(a.input_dims)).parse();
  if (!dims || dims->type != json_value::kind::list || dims->items.empty()) return 0;
  std::optional<json_value> types;
  if (a.input_types != 0) types = json_reader(model.str(a.input_types)).parse();
  std::int64_t total = 0;
  for (std::size_t i = 0; i < dims->items.size(); ++i) {
    std::int64_t per = 0;
    if (types && types->type == json_value::kind::list && i < types->items.size() &&
        types->items[i].type == json_value::kind::string) {
      per = comm_type_bytes(types->items[i].text);
    }
    const json_value& shape = dims->items[i];
    if (shape.type != json_value::kind::list) continue;
    std::int64_t size = 1;
    bool ok = true;
    for (const json_value& d : shape.items) {
      if (d.type != json_value::kind::number || !d.integral) {
        ok = false;
        break;
      }
      size *= d.integer;
    }
    if (ok) total += size * per;
  }
  return total;
}

bool by_start_then_longer(const interval& a, const interval& b) {
  return a.start != b.start ? a.start < b.start : a.end > b.end;
}

std::vector<distributed_node> device_information(
    const std::vector<std::pair<std::string, const distributed_worker_part*>>& workers) {
  std::vector<const std::pair<std::string, const distributed_worker_part*>*> sorted;
  for (const auto& w : workers) sorted.push_back(&w);
  std::stable_sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  std::vector<distributed_node> nodes;
  int index = 0;
  for (const auto* named : sorted) {
    const distributed_worker_part* w = named->second;
    if (w == nullptr || w->devices.empty()) continue;
    std::string node;
    std::string process;
    if (auto split = split_worker_name(named->first)) {
      node = std::move(split->first);
      process = std::move(split->second);
    } else {
      node = named->first;
      process = std::to_string(index++);
    }
    auto it = std::find_if(nodes.begin(), nodes.end(), [&](const distributed_node& n) { return n.node == node; });
    if (it == nodes.end()) it = nodes.insert(nodes.end(), distributed_node{node, {}});
    distributed_process proc{"Process " + process, {}};
    for (const std::int64_t id : w->used_devices) {
      if (id < 0 || static_cast<std::size_t>(id) >= w->devices.size()) continue;
      const device_info& d = w->devices[static_cast<std::size_t>(id)];
      if (!d.present) continue;
      distributed_gpu g;
      g.device = "GPU" + std::to_string(id);
      if (d.has_name) g.name = d.name;
      if (d.has_total_global_mem) {
        g.memory = py_float_repr(py_round(static_cast<double>(d.total_global_mem) / 1024 / 1024 / 1024, 2)) + " GB";
        g.memory_raw = d.total_global_mem;
      }
      if (d.has_compute_major && d.has_compute_minor) {
        g.compute_capability = std::to_string(d.compute_major) + "." + std::to_string(d.compute_minor);
      }
      proc.gpus.push_back(std::move(g));
    }
    // A repeated (node, process) replaces the earlier entry, as the plugin's dict assignment.
    auto p = std::find_if(it->processes.begin(), it->processes.end(),
                          [&](const distributed_process& x) { return x.process == proc.process; });
    if (p != it->processes.end()) {
      *p = std::move(proc);
    } else {
      it->processes.push_back(std::move(proc));
    }
  }
  for (distributed_node& n : nodes) {
    std::stable_sort(n.processes.begin(), n.processes.end(),
                     [](const distributed_process& a, const distributed_process& b) { return a.process < b.process; });
  }
  return nodes;
}

overview_options to_overview_options(const distributed_options& o) {
  overview_options v;
  v.all_collectives = o.all_collectives;
  v.gpu_annotations_as_host = o.gpu_annotations_as_host;
  return v;
}

/// Per-step computation/communication overlap of one worker (the plugin's comm_overlap_costs).
void overlap_bars(const role_ranges& roles, const std::vector<distributed_step>& steps,
                  distributed_worker_result& out) {
  const interval_list& kernel = roles[step_role::kernel];
  const interval_list& comm = roles[step_role::communication];
  const interval_list& compute = kernel.empty() ? roles[step_role::cpu_exec] : kernel;
  const interval_list both = intersect_intervals(compute, comm);
  overlap_bar sum;
  for (const distributed_step& s : steps) {
    const double overlap = overlap_length(both, s.start, s.end);
    const double computation = overlap_length(compute, s.start, s.end);
    const double communication = overlap_length(comm, s.start, s.end);
    const double other = (s.end - s.start) + overlap - computation - communication;
    const overlap_bar bar{computation - overlap, overlap, communication - overlap, other};
    sum.computation += bar.computation;
    sum.overlap += bar.overlap;
    sum.communication += bar.communication;
    sum.other += bar.other;
    out.overlap.emplace_back(s.name, bar);
  }
  const double n = static_cast<double>(std::max<std::size_t>(1, steps.size()));
  out.overlap_all = {std::trunc(sum.computation / n), std::trunc(sum.overlap / n), std::trunc(sum.communication / n),
                     std::trunc(sum.other / n)};
}

/// The plugin's analyze_communication_nodes: wait bars per step key and the op table, from one
/// worker's records and the shortest length over the workers of each (record, range):
/// `shortest[first[i] + j]` for range j of record i. Each real range is that length aligned to the
/// range's end (#distributed-view); it is made here, so the records are read, never copied.
void communication_stats(const packed_comm_records& p, const std::vector<std::size_t>& first,
                         const std::vector<double>& shortest, distributed_worker_result& out) {
  struct step_acc {
    std::uint32_t step = 0;
    interval_list ranges;
    interval_list real;
  };
  struct op_acc {
    std::uint32_t name = 0;
    std::int64_t calls = 0;
    std::int64_t bytes = 0;
    interval_list ranges;
    interval_list real;
  };
  // Keys in first-seen order; the packed ids index the slots (steps.size() is no_step's).
  constexpr std::size_t unseen = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> step_slot(p.steps.size() + 1, unseen);
  std::vector<std::size_t> op_slot(p.names.size(), unseen);
  std::vector<step_acc> per_step;
  std::vector<op_acc> per_op;
  for (std::size_t i = 0; i < p.records.size(); ++i) {
    const packed_comm_records::record& r = p.records[i];
    const std::size_t step_id = r.step == packed_comm_records::no_step ? p.steps.size() : r.step;
    if (step_slot[step_id] == unseen) {
      step_slot[step_id] = per_step.size();
      per_step.push_back({r.step, {}, {}});
    }
    if (op_slot[r.name] == unseen) {
      op_slot[r.name] = per_op.size();
      per_op.push_back({r.name, 0, 0, {}, {}});
    }
    step_acc& st = per_step[step_slot[step_id]];
    op_acc& acc = per_op[op_slot[r.name]];
    acc.calls += 1;
    acc.bytes += r.bytes;
    for (std::uint32_t j = 0; j < r.range_count; ++j) {
      const interval& k = p.ranges[r.first_range + j];
      const interval real{k.end - shortest[first[i] + j], k.end};
      st.ranges.push_back(k);
      st.real.push_back(real);
      acc.ranges.push_back(k);
      acc.real.push_back(real);
    }
  }
  wait_bar sum;
  for (step_acc& st : per_step) {
    const double total = total_length(merge_intervals(std::move(st.ranges)));
    const double transfer = total_length(merge_intervals(std::move(st.real)));
    const wait_bar bar{transfer, total - transfer};
    sum.transfer += bar.transfer;
    sum.synchronizing += bar.synchronizing;
    out.wait.emplace_back(st.step == packed_comm_records::no_step ? std::nullopt : std::optional<std::string>(p.steps[st.step]),
                          bar);
  }
  const double n = static_cast<double>(std::max<std::size_t>(1, per_step.size()));
  out.wait_all = {std::trunc(sum.transfer / n), std::trunc(sum.synchronizing / n)};
  for (op_acc& acc : per_op) {
    comm_op_row row;
    row.name = p.names[acc.name];
    row.calls = acc.calls;
    const double calls = static_cast<double>(acc.calls);
    row.total_size_bytes = acc.bytes;
    row.avg_size_bytes = static_cast<std::int64_t>(py_round(static_cast<double>(acc.bytes) / calls));
    row.total_latency_us = total_length(merge_intervals(std::move(acc.ranges)));
    row.avg_latency_us = static_cast<std::int64_t>(py_round(row.total_latency_us / calls));
    row.data_transfer_us = total_length(merge_intervals(std::move(acc.real)));
    row.avg_data_transfer_us = static_cast<std::int64_t>(py_round(row.data_transfer_us / calls));
    out.comm_ops.push_back(std::move(row));
  }
}

}  // namespace

std::size_t packed_comm_records::heap_bytes() const noexcept {
  std::size_t n = records.capacity() * sizeof(record) + ranges.capacity() * sizeof(interval);
  for (const auto* list : {&names, &steps})
    for (const std::string& t : *list) n += sizeof(std::string) + t.capacity();
  return n;
}

packed_comm_records packed_comm_records::pack(const std::vector<comm_record>& list) {
  packed_comm_records p;
  std::unordered_map<std::string, std::uint32_t> name_ids, step_ids;
  const auto id = [](std::unordered_map<std::string, std::uint32_t>& ids, std::vector<std::string>& out,
                     const std::string& s) {
    auto [it, inserted] = ids.try_emplace(s, static_cast<std::uint32_t>(out.size()));
    if (inserted) out.push_back(s);
    return it->second;
  };
  p.records.reserve(list.size());
  for (const comm_record& c : list) {
    record r;
    r.name = id(name_ids, p.names, c.name);
    r.step = c.step ? id(step_ids, p.steps, *c.step) : no_step;
    r.external_id = c.external_id;
    r.start = c.start;
    r.end = c.end;
    r.bytes = c.bytes;
    r.first_range = static_cast<std::uint32_t>(p.ranges.size());
    r.range_count = static_cast<std::uint32_t>(c.ranges.size());
    p.ranges.insert(p.ranges.end(), c.ranges.begin(), c.ranges.end());
    p.records.push_back(r);
  }
  return p;
}

std::vector<comm_record> packed_comm_records::unpack() const {
  std::vector<comm_record> out;
  out.reserve(records.size());
  for (const record& r : records) {
    comm_record c;
    c.name = names[r.name];
    c.external_id = r.external_id;
    c.start = r.start;
    c.end = r.end;
    c.ranges.assign(ranges.begin() + r.first_range, ranges.begin() + r.first_range + r.range_count);
    if (r.step != no_step) c.step = steps[r.step];
    c.bytes = r.bytes;
    out.push_back(std::move(c));
  }
  return out;
}

std::int64_t comm_type_bytes(std::string_view type) noexcept {
  if (type == "long int") return 8;
  if (type == "float" || type == "int") return 4;
  if (type == "c10::Half" || type == "c10::BFloat16") return 2;
  if (type == "unsigned char") return 1;
  return 0;
}

std::optional<std::pair<std::string, std::string>> split_worker_name(std::string_view worker) {
  // Greedy (.*) takes the last "_<digit>" position; \d+ then takes every following digit.
  for (std::size_t i = worker.size(); i-- > 0;) {
    if (worker[i] != '_' || i + 1 >= worker.size() || !std::isdigit(static_cast<unsigned char>(worker[i + 1]))) {
      continue;
    }
    std::size_t j = i + 1;
    while (j < worker.size() && std::isdigit(static_cast<unsigned char>(worker[j]))) ++j;
    return std::pair(std::string(worker.substr(0, i)), std::string(worker.substr(i + 1, j - i - 1)));
  }
  return std::nullopt;
}

std::vector<distributed_step> distributed_steps(const overview_result& overview) {
  std::vector<distributed_step> out;
  out.reserve(overview.steps.size());
  for (const step_row& s : overview.steps) out.push_back({s.name, s.start, s.end});
  return out;
}

std::vector<comm_record> communication_records(const trace_model& model, const std::vector<distributed_step>& steps,
                                               const distributed_options& options) {
  const overview_options ov = to_overview_options(options);
  // Keyed by external id; a later op with the same id overwrites the record in place.
  std::vector<comm_record> records;
  std::unordered_map<std::int64_t, std::size_t> by_id;
  bool nccl = false;
  bool gloo = false;
  for (const event& e : model.events) {
    if (e.type != event_type::op && e.type != event_type::user_annotation && e.type != event_type::python) continue;
    if (e.gpu_annotation && !options.gpu_annotations_as_host) continue;
    const std::string_view name = model.str(e.name);
    if (!is_communication_name(name, ov)) continue;
    if (name.rfind("nccl:", 0) == 0) nccl = true;
    if (name.rfind("gloo:", 0) == 0) gloo = true;
    comm_record r;
    r.name = std::string(name);
    r.external_id = e.external_id;
    r.start = e.ts;
    r.end = e.ts + e.dur;
    r.ranges.push_back({r.start, r.end});
    r.bytes = record_bytes(model, e);
    auto [it, inserted] = by_id.try_emplace(e.external_id, records.size());
    if (inserted) {
      records.push_back(std::move(r));
    } else {
      records[it->second] = std::move(r);
    }
  }
  if (nccl && gloo) return {};
  if (nccl) {
    for (const event& e : model.events) {
      if (e.type != event_type::kernel || e.external_id == 0) continue;
      const auto it = by_id.find(e.external_id);
      if (it != by_id.end()) records[it->second].ranges.push_back({e.ts, e.ts + e.dur});
    }
  }
  for (comm_record& r : records) std::stable_sort(r.ranges.begin(), r.ranges.end(), by_start_then_longer);
  std::stable_sort(records.begin(), records.end(), [](const comm_record& a, const comm_record& b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  });
  // Step assignment: walk records and steps together (generate_communication_nodes).
  std::size_t index = 0;
  for (comm_record& r : records) {
    while (index < steps.size()) {
      if (r.start >= steps[index].start && r.end <= steps[index].end) {
        r.step = steps[index].name;
        break;
      }
      if (r.start >= steps[index].end) {
        ++index;
        continue;
      }
      break;  // starts before the step's end but is not contained: no step
    }
    if (index >= steps.size()) break;
  }
  if (!options.outside_steps_label.empty())
    for (comm_record& r : records)
      if (!r.step) r.step = options.outside_steps_label;
  return records;
}

distributed_worker_part prepare_distributed_worker(const distributed_worker_input& w,
                                                   const distributed_options& options) {
  distributed_worker_part part;
  if (w.model == nullptr) return part;
  part.devices = w.model->devices;
  part.used_devices = w.used_devices;
  // The records first: a worker without any (most single traces) is answered without the
  // role ranges.
  const std::vector<comm_record> records = communication_records(*w.model, w.steps, options);
  if (records.empty()) return part;
  const role_ranges roles = compute_role_ranges(*w.model, to_overview_options(options));
  if (roles[step_role::communication].empty()) return part;
  part.records = packed_comm_records::pack(records);
  distributed_worker_result r;
  overlap_bars(roles, w.steps, r);
  part.overlap = std::move(r.overlap);
  part.overlap_all = r.overlap_all;
  return part;
}

distributed_result compute_distributed(const std::vector<distributed_worker_input>& workers,
                                       const distributed_options& options) {
  std::vector<distributed_worker_part> parts;
  parts.reserve(workers.size());
  for (const auto& w : workers) parts.push_back(prepare_distributed_worker(w, options));
  std::vector<std::pair<std::string, const distributed_worker_part*>> named;
  for (std::size_t i = 0; i < workers.size(); ++i) named.emplace_back(workers[i].worker, &parts[i]);
  return combine_distributed(named);
}

distributed_result combine_distributed(
    const std::vector<std::pair<std::string, const distributed_worker_part*>>& workers, bool keep_records) {
  distributed_result result;
  result.device_info = device_information(workers);
  if (workers.empty()) {
    result.reason = "no worker";
    return result;
  }
  std::vector<const std::pair<std::string, const distributed_worker_part*>*> sorted;
  for (const auto& w : workers) sorted.push_back(&w);
  std::stable_sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });

  std::vector<distributed_worker_result> out;
  std::vector<const distributed_worker_part*> parts;
  for (const auto* w : sorted) {
    distributed_worker_result r;
    r.worker = w->first;
    if (w->second == nullptr) {
      result.reason = "worker " + w->first + " has no trace";
      return result;
    }
    const distributed_worker_part& part = *w->second;
    if (part.records.empty()) {
      result.reason = "worker " + w->first + " has no communication";
      return result;
    }
    if (!parts.empty() && part.records.size() != parts.front()->records.size()) {
      result.reason = "workers have different numbers of communication ops";
      return result;
    }
    r.overlap = part.overlap;
    r.overlap_all = part.overlap_all;
    out.push_back(std::move(r));
    parts.push_back(&part);
  }
  // docs/plugin-rules.md#distributed-view real ranges: per record index and range index, the
  // shortest range over workers, aligned to each worker's range end.
  const packed_comm_records& front = parts.front()->records;
  std::vector<std::size_t> first(front.size());
  std::size_t n_ranges_total = 0;
  for (std::size_t i = 0; i < front.size(); ++i) {
    first[i] = n_ranges_total;
    n_ranges_total += front.records[i].range_count;
  }
  std::vector<double> shortest(n_ranges_total, std::numeric_limits<double>::infinity());
  for (const distributed_worker_part* part : parts) {
    const packed_comm_records& p = part->records;
    for (std::size_t i = 0; i < front.size(); ++i) {
      const packed_comm_records::record& r = p.records[i];
      if (r.range_count != front.records[i].range_count) {
        result.reason = "workers have different numbers of communication kernels";
        return result;
      }
      for (std::uint32_t j = 0; j < r.range_count; ++j)
        shortest[first[i] + j] = std::min(shortest[first[i] + j], p.ranges[r.first_range + j].length());
    }
  }
  for (std::size_t w = 0; w < out.size(); ++w) {
    communication_stats(parts[w]->records, first, shortest, out[w]);
    if (!keep_records) continue;
    out[w].records = parts[w]->records.unpack();
    for (std::size_t i = 0; i < out[w].records.size(); ++i) {
      comm_record& r = out[w].records[i];
      for (std::size_t j = 0; j < r.ranges.size(); ++j)
        r.real_ranges.push_back({r.ranges[j].end - shortest[first[i] + j], r.ranges[j].end});
    }
  }
  result.workers = std::move(out);
  result.available = true;
  return result;
}

}  // namespace kinetoscope::analysis
