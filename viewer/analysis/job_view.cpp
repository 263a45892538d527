// SPDX-License-Identifier: BSD-3-Clause
#include "analysis/job_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <unordered_map>

#include "analysis/intervals.hpp"
#include "analysis/op_tree.hpp"

namespace kinetoscope::analysis {

namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

const collective_args* collective_of(const trace_model& m, const event& e) {
  std::uint32_t index = no_index;
  if ((e.type == event_type::op || e.type == event_type::user_annotation || e.type == event_type::python) &&
      e.extra < m.ops.size())
    index = m.ops[e.extra].collective;
  else if (e.type == event_type::kernel && e.extra < m.kernels.size())
    index = m.kernels[e.extra].collective;
  return index < m.collectives.size() ? &m.collectives[index] : nullptr;
}

rank_collective make_collective(const trace_model& m, const collective_args& a, rank_summary& out) {
  rank_collective c;
  c.group = out.intern(m.str(a.group_name));
  c.group_desc = out.intern(m.str(a.group_desc));
  c.name = out.intern(m.str(a.name));
  c.seq = a.seq;
  c.group_size = a.group_size;
  c.bytes = std::max(a.in_nelems, a.out_nelems) * collective_dtype_bytes(m.str(a.dtype));
  if (c.bytes < 0) c.bytes = 0;
  return c;
}

/// The median of `v` (reordered); NaN when empty.
double median(std::vector<double>& v) {
  if (v.empty()) return nan;
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lo + hi) / 2;
}

std::string ms(double us) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f ms", us / 1000);
  return b;
}

}  // namespace

std::int64_t collective_dtype_bytes(std::string_view d) noexcept {
  // c10::ScalarType names as c10d writes them (toString of the tensor's scalar type).
  if (d == "Float" || d == "Int" || d == "UInt32" || d == "ComplexHalf") return 4;
  if (d == "Double" || d == "Long" || d == "UInt64" || d == "ComplexFloat") return 8;
  if (d == "Half" || d == "BFloat16" || d == "Short" || d == "UInt16") return 2;
  if (d == "Byte" || d == "Char" || d == "Bool" || starts_with(d, "Float8")) return 1;
  if (d == "ComplexDouble") return 16;
  return 0;
}

std::string_view job_metric_name(job_metric m) noexcept {
  switch (m) {
    case job_metric::step_time: return "step_time";
    case job_metric::compute: return "compute";
    case job_metric::communication: return "communication";
    case job_metric::overlap: return "overlap";
    case job_metric::wait: return "wait";
    case job_metric::data_loading: return "data_loading";
  }
  return "";
}

std::string_view straggler_cause_name(straggler_cause c) noexcept {
  switch (c) {
    case straggler_cause::compute: return "compute";
    case straggler_cause::data_loading: return "data loading";
    case straggler_cause::communication: return "communication";
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// Per rank

std::uint32_t rank_summary::intern(std::string_view s) {
  // A rank has a handful of distinct texts: a scan beats a hash map.
  for (std::size_t i = 0; i < strings.size(); ++i)
    if (strings[i] == s) return static_cast<std::uint32_t>(i);
  strings.emplace_back(s);
  return static_cast<std::uint32_t>(strings.size() - 1);
}

rank_summary summarize_rank(const trace_model& model, const overview_result& overview, bool collectives_by_name) {
  rank_summary out;
  interval_list compute, comm, loading;
  std::unordered_map<std::int64_t, std::size_t> by_external;  // record_param_comms -> collective
  std::vector<std::pair<const event*, const collective_args*>> kernels;
  for (const event& e : model.events) {
    if (e.type == event_type::kernel) {
      const collective_args* a = collective_of(model, e);
      // Collective kernels: those carrying the metadata, and NCCL's by name in traces without it.
      if (a != nullptr || starts_with(model.str(e.name), "nccl")) {
        comm.push_back({e.ts, e.end()});
        if (a != nullptr) kernels.emplace_back(&e, a);
      } else {
        compute.push_back({e.ts, e.end()});
      }
      continue;
    }
    if (e.type != event_type::op && e.type != event_type::user_annotation && e.type != event_type::python) continue;
    if (is_data_loader_name(model.str(e.name))) loading.push_back({e.ts, e.end()});
    if (const collective_args* a = collective_of(model, e)) {
      rank_collective c = make_collective(model, *a, out);
      c.launch = c.start = e.ts;
      c.end = e.end();
      if (e.external_id != 0) by_external.emplace(e.external_id, out.collectives.size());
      out.collectives.push_back(std::move(c));
    }
  }
  // docs/kinetoscope-rules.md#k4: traces whose record_param_comms carries no collective metadata
  // (PyTorch before 2.1) still name each collective `<backend>:<name>`; those host ops are the
  // collectives then (no group, no Seq, no size: matched by order within their name), and their
  // kernels, by External id, give the device times.
  if (collectives_by_name && out.collectives.empty() && kernels.empty()) {
    static const collective_args none;
    std::unordered_map<std::int64_t, std::size_t> launched;
    for (const event& e : model.events) {
      if (e.type != event_type::op && e.type != event_type::user_annotation) continue;
      if (e.gpu_annotation) continue;
      const std::string_view name = model.str(e.name);
      if (!is_collective_name(name)) continue;
      rank_collective c = make_collective(model, none, out);
      c.name = out.intern(name.substr(name.find(':') + 1));
      c.launch = c.start = e.ts;
      c.end = e.end();
      if (e.external_id != 0) launched.emplace(e.external_id, out.collectives.size());
      out.collectives.push_back(std::move(c));
    }
    for (const event& e : model.events) {
      if (e.type != event_type::kernel || e.external_id == 0) continue;
      const auto it = launched.find(e.external_id);
      if (it == launched.end()) continue;
      rank_collective& c = out.collectives[it->second];
      if (!c.on_device) {
        c.start = e.ts;
        c.end = e.end();
        c.on_device = true;
      } else {
        c.end = std::max(c.end, e.end());
      }
    }
  }
  // The kernel a record_param_comms launched shares its External id (Kineto links launches to the
  // op that was open); a kernel without such an op is a collective of its own.
  bool kernel_only = false;
  for (const auto& [e, a] : kernels) {
    auto it = e->external_id != 0 ? by_external.find(e->external_id) : by_external.end();
    if (it != by_external.end() && !out.collectives[it->second].on_device) {
      rank_collective& c = out.collectives[it->second];
      c.start = e->ts;
      c.end = e->end();
      c.on_device = true;
      continue;
    }
    rank_collective c = make_collective(model, *a, out);
    c.launch = c.start = e->ts;
    c.end = e->end();
    c.on_device = true;
    out.collectives.push_back(std::move(c));
    kernel_only = true;
  }
  if (kernel_only)
    std::stable_sort(out.collectives.begin(), out.collectives.end(),
                     [](const rank_collective& a, const rank_collective& b) { return a.launch < b.launch; });

  compute = merge_intervals(std::move(compute));
  comm = merge_intervals(std::move(comm));
  loading = merge_intervals(std::move(loading));
  const interval_list both = intersect_intervals(compute, comm);
  for (const step_row& s : overview.steps) {
    rank_step r;
    r.name = s.name;
    r.start = s.start;
    r.end = s.end;
    r.compute = overlap_length(compute, s.start, s.end);
    r.communication = overlap_length(comm, s.start, s.end);
    r.overlap = overlap_length(both, s.start, s.end);
    r.data_loading = overlap_length(loading, s.start, s.end);
    out.steps.push_back(std::move(r));
  }
  // Steps are in time order and disjoint: the step of a launch by binary search.
  for (rank_collective& c : out.collectives) {
    auto it = std::upper_bound(out.steps.begin(), out.steps.end(), c.launch,
                               [](double t, const rank_step& s) { return t < s.start; });
    if (it == out.steps.begin()) continue;
    --it;
    if (c.launch < it->end) c.step = static_cast<std::int32_t>(it - out.steps.begin());
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Across ranks

namespace {

/// Thresholds of the straggler test. A cell is reported when it exceeds the median over the
/// ranks by more than the largest of: `mad_factor` robust standard deviations (1.4826 × MAD is
/// the standard deviation of normal noise, and one slow rank cannot move the median or the MAD),
/// `step_fraction` of the median step time (differences too small to matter for the job), and
/// `floor_us` (timer granularity and launch jitter).
constexpr double mad_factor = 6;
constexpr double step_fraction = 0.05;
constexpr double floor_us = 100;

struct robust {
  double median = 0;
  double threshold = 0;
};

/// A collective's identity across ranks: (process group, collective name, Seq or ordinal). The
/// name is 0 when matching by Seq (a Seq is unique within its group).
struct match_key {
  std::uint32_t group = 0, name = 0;
  std::int64_t seq = 0;
  friend bool operator==(const match_key&, const match_key&) = default;
};
struct match_key_hash {
  std::size_t operator()(const match_key& k) const noexcept {
    std::uint64_t h = (std::uint64_t{k.group} << 32 | k.name) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<std::uint64_t>(k.seq) + 0x7F4A7C159E3779B9ull + (h << 6) + (h >> 2);
    return static_cast<std::size_t>(h * 0xC2B2AE3D27D4EB4Full);
  }
};

robust robust_stats(std::vector<double>& values, double median_step) {
  robust r;
  r.median = median(values);
  for (double& v : values) v = std::abs(v - r.median);
  const double mad = median(values);
  r.threshold = std::max({mad_factor * 1.4826 * mad, step_fraction * median_step, floor_us});
  return r;
}

}  // namespace

job_result analyze_job(const std::vector<job_input>& inputs) {
  job_result out;
  // Ranks in rank order (unknown ranks last, by worker).
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].summary != nullptr) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const job_input& x = inputs[a];
    const job_input& y = inputs[b];
    if ((x.rank < 0) != (y.rank < 0)) return x.rank >= 0;
    if (x.rank != y.rank) return x.rank < y.rank;
    return x.worker < y.worker;
  });
  const std::size_t n = order.size();
  for (std::size_t i : order) out.ranks.push_back({inputs[i].worker, inputs[i].rank});
  if (n == 0) return out;
  const auto summary = [&](std::size_t r) -> const rank_summary& { return *inputs[order[r]].summary; };

  // Step columns: the names of the rank with the most steps; other ranks map by name.
  std::size_t widest = 0;
  for (std::size_t r = 1; r < n; ++r)
    if (summary(r).steps.size() > summary(widest).steps.size()) widest = r;
  std::unordered_map<std::string, std::uint32_t> column;
  for (const rank_step& s : summary(widest).steps) {
    if (column.emplace(s.name, static_cast<std::uint32_t>(out.steps.size())).second) out.steps.push_back(s.name);
  }
  const std::size_t cols = out.steps.size();
  for (auto& h : out.heatmaps) h.assign(n * cols, nan);
  out.step_start.assign(n * cols, nan);
  out.step_end.assign(n * cols, nan);
  std::vector<std::vector<std::int32_t>> col_of(n);  // rank step index -> column (-1 = none)
  std::size_t missing = 0;
  for (std::size_t r = 0; r < n; ++r) {
    const rank_summary& s = summary(r);
    col_of[r].assign(s.steps.size(), -1);
    std::size_t found = 0;
    for (std::size_t k = 0; k < s.steps.size(); ++k) {
      auto it = column.find(s.steps[k].name);
      if (it == column.end()) continue;
      const std::size_t c = it->second, cell = r * cols + c;
      if (!std::isnan(out.step_start[cell])) continue;  // a repeated name: keep the first
      col_of[r][k] = static_cast<std::int32_t>(c);
      ++found;
      const rank_step& st = s.steps[k];
      out.step_start[cell] = st.start;
      out.step_end[cell] = st.end;
      auto set = [&](job_metric m, double v) { out.heatmaps[static_cast<std::size_t>(m)][cell] = v; };
      set(job_metric::step_time, st.end - st.start);
      set(job_metric::compute, st.compute);
      set(job_metric::communication, st.communication);
      set(job_metric::overlap, st.overlap);
      set(job_metric::data_loading, st.data_loading);
      set(job_metric::wait, 0);
    }
    if (found < cols) ++missing;
  }
  if (missing > 0)
    out.notes.push_back(std::to_string(missing) + " rank(s) lack some of the step columns (empty cells).");

  // Match collectives: by (group, Seq) when every collective has a Seq, else by the order within
  // (group, collective name) on each rank (older PyTorch builds write no Seq).
  bool all_seq = true;
  for (std::size_t r = 0; r < n && all_seq; ++r)
    for (const rank_collective& c : summary(r).collectives)
      if (c.seq < 0) {
        all_seq = false;
        break;
      }
  out.matched_by = all_seq ? "seq" : "order";
  if (!all_seq)
    out.notes.push_back(
        "The collectives carry no Seq: they are matched by their order within each process group and collective name.");
  // The ranks' texts as one table: global[local[r][id]] is the text of rank r's id.
  std::unordered_map<std::string_view, std::uint32_t> text_ids;
  std::vector<std::string_view> texts;
  std::vector<std::vector<std::uint32_t>> local(n);
  for (std::size_t r = 0; r < n; ++r)
    for (const std::string& t : summary(r).strings) {
      const auto [it, fresh] = text_ids.emplace(t, static_cast<std::uint32_t>(texts.size()));
      if (fresh) texts.push_back(t);
      local[r].push_back(it->second);
    }
  const auto text_of = [&](std::size_t r, std::uint32_t id) -> std::uint32_t {
    return id < local[r].size() ? local[r][id] : static_cast<std::uint32_t>(texts.size());
  };
  const auto text = [&](std::uint32_t global) {
    return global < texts.size() ? std::string(texts[global]) : std::string();
  };
  std::unordered_map<match_key, std::uint32_t, match_key_hash> by_key;
  std::vector<std::uint32_t> group_of;  ///< per matched collective: its group's text id
  std::vector<match_key> key_of;        ///< per matched collective: its key
  std::vector<std::uint32_t> pos_in_group;  ///< per matched collective: its index in group_list
  // Per group (text id; texts.size() for an id out of range): its collectives in the order they
  // were first seen, and this rank's position in that list.
  std::vector<std::vector<std::uint32_t>> group_list(texts.size() + 1);
  std::vector<std::uint32_t> cursor(texts.size() + 1, 0);
  key_of.reserve(summary(0).collectives.size());
  out.collectives.reserve(summary(0).collectives.size());
  by_key.reserve(2 * summary(0).collectives.size());
  // Per rank, its arrivals in its own launch order: (collective, arrival index).
  std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> mine(n);
  std::unordered_map<match_key, std::int64_t, match_key_hash> ordinal;
  for (std::size_t r = 0; r < n; ++r) {
    ordinal.clear();
    std::fill(cursor.begin(), cursor.end(), 0);
    const rank_summary& s = summary(r);
    mine[r].reserve(s.collectives.size());
    for (const rank_collective& c : s.collectives) {
      match_key key{text_of(r, c.group), 0, c.seq};
      if (!all_seq) {
        key.name = text_of(r, c.name);
        key.seq = ordinal[{key.group, key.name, 0}]++;
      }
      const std::int64_t seq = key.seq;
      // The ranks of a process group run its collectives in the same order: the group's next
      // collective after this rank's previous match is checked first, and the hash map is the
      // fallback (it was most of the time at 256 ranks: a cache miss per collective).
      std::uint32_t ci = 0;
      bool fresh = false;
      const std::vector<std::uint32_t>& in_group = group_list[key.group];
      if (cursor[key.group] < in_group.size() && key_of[in_group[cursor[key.group]]] == key) {
        ci = in_group[cursor[key.group]];
      } else {
        const auto [it, inserted] = by_key.emplace(key, static_cast<std::uint32_t>(out.collectives.size()));
        ci = it->second;
        fresh = inserted;
        if (fresh) {
          pos_in_group.push_back(static_cast<std::uint32_t>(in_group.size()));
          group_list[key.group].push_back(ci);
        }
      }
      cursor[key.group] = pos_in_group[ci] + 1;
      if (fresh) {
        key_of.push_back(key);
        job_collective j;
        j.group = text(key.group);
        group_of.push_back(key.group);
        j.group_desc = text(text_of(r, c.group_desc));
        j.name = text(text_of(r, c.name));
        j.seq = seq;
        j.group_size = c.group_size;
        j.step = c.step >= 0 ? col_of[r][static_cast<std::size_t>(c.step)] : -1;
        if (c.group_size > 0) j.arrivals.reserve(std::min(n, static_cast<std::size_t>(c.group_size)));
        out.collectives.push_back(std::move(j));
      }
      job_collective& j = out.collectives[ci];
      j.bytes = std::max(j.bytes, c.bytes);
      const double arrival = c.on_device ? c.start : c.launch;
      if (!j.arrivals.empty() && j.arrivals.back().rank_index == r) {
        // The same (group, Seq) twice on one rank (coalesced collectives share a Seq): one
        // arrival, from the first start to the last end.
        job_arrival& a = j.arrivals.back();
        a.arrival = std::min(a.arrival, arrival);
        a.end = std::max(a.end, c.end);
        mine[r].emplace_back(ci, static_cast<std::uint32_t>(j.arrivals.size() - 1));
        continue;
      }
      mine[r].emplace_back(ci, static_cast<std::uint32_t>(j.arrivals.size()));
      j.arrivals.push_back({static_cast<std::uint32_t>(r), arrival, c.end, 0});
    }
  }
  std::vector<double> earliest(out.collectives.size());
  for (std::size_t k = 0; k < out.collectives.size(); ++k) {
    job_collective& j = out.collectives[k];
    double lo = j.arrivals[0].arrival, hi = lo;
    std::uint32_t last = j.arrivals[0].rank_index;
    for (const job_arrival& a : j.arrivals) {
      lo = std::min(lo, a.arrival);
      if (a.arrival > hi) {
        hi = a.arrival;
        last = a.rank_index;
      }
    }
    for (job_arrival& a : j.arrivals) a.wait = std::max(0.0, std::min(a.end, hi) - a.arrival);
    j.skew = hi - lo;
    j.last_rank_index = last;
    earliest[k] = lo;
    if (j.group_size > 0 && static_cast<std::int64_t>(j.arrivals.size()) < j.group_size) ++out.unmatched;
  }
  if (out.unmatched > 0)
    out.notes.push_back(std::to_string(out.unmatched) +
                        " collective(s) were found on fewer ranks than their group size (ranks missing from the span?).");

  // Wait per cell, and each cell's late arrival not explained by its communicator's stream: a
  // collective's kernel cannot start before the previous collective of its process group ends on
  // that rank (one NCCL stream per communicator), so a rank that waited for a slow peer starts its
  // next collective late through no fault of its own. Lateness counts from the later of the
  // earliest rank's arrival and that bound. (Subtracting the whole earlier wait instead hid a
  // rank that was late by itself in a step where another rank was slow in data loading.)
  std::vector<double>& wait = out.heatmaps[static_cast<std::size_t>(job_metric::wait)];
  std::vector<double> lateness(n * cols, nan);
  std::vector<double> scratch;
  // Per process group (global text id): its last collective's end on this rank; NaN = none yet.
  std::vector<double> stream_end(texts.size() + 1, nan);
  std::vector<std::uint32_t> touched;

  for (std::size_t r = 0; r < n; ++r) {
    const rank_summary& s = summary(r);
    std::size_t i = 0;
    const auto& list = mine[r];
    while (i < list.size()) {
      const rank_collective& first = s.collectives[i];
      const std::int32_t col = first.step >= 0 ? col_of[r][static_cast<std::size_t>(first.step)] : -1;
      std::size_t e = i;
      while (e < list.size() && s.collectives[e].step == first.step) ++e;
      if (col >= 0) {
        const std::size_t cell = r * cols + static_cast<std::size_t>(col);
        double waited = 0;
        scratch.clear();
        for (std::uint32_t g : touched) stream_end[g] = nan;
        touched.clear();
        for (std::size_t k = i; k < e; ++k) {
          if (k > i && list[k] == list[k - 1]) continue;  // a merged duplicate (see above)
          const auto [ci, ai] = list[k];
          const job_arrival& a = out.collectives[ci].arrivals[ai];
          const std::uint32_t group = group_of[ci];
          double bound = earliest[ci];
          if (std::isnan(stream_end[group]))
            touched.push_back(group);
          else
            bound = std::max(bound, stream_end[group]);
          scratch.push_back(std::max(0.0, a.arrival - bound));
          stream_end[group] = a.end;
          waited += a.wait;
        }
        wait[cell] = waited;
        lateness[cell] = median(scratch);
      }
      i = e;
    }
  }

  // Stragglers per step column.
  if (n < 3 && n > 1) out.notes.push_back("Stragglers are looked for from 3 ranks on (the median needs a majority).");
  std::vector<double> values;
  const auto column_values = [&](const std::vector<double>& h, std::size_t c) {
    values.clear();
    for (std::size_t r = 0; r < n; ++r)
      if (!std::isnan(h[r * cols + c])) values.push_back(h[r * cols + c]);
  };
  const auto& step_time = out.heatmaps[static_cast<std::size_t>(job_metric::step_time)];
  for (std::size_t c = 0; c < cols && n >= 3; ++c) {
    column_values(step_time, c);
    const double median_step = median(values);
    std::vector<char> flagged(n, 0);
    const auto test = [&](const std::vector<double>& h, straggler_cause cause, const char* what) {
      column_values(h, c);
      if (values.size() < 3) return;
      const robust st = robust_stats(values, median_step);
      for (std::size_t r = 0; r < n; ++r) {
        const double v = h[r * cols + c];
        if (std::isnan(v) || v - st.median <= st.threshold) continue;
        if (cause == straggler_cause::communication && flagged[r]) continue;  // explained by its own slowness
        flagged[r] = 1;
        out.stragglers.push_back({static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(c), cause, v - st.median,
                                  std::string(what) + " " + ms(v) + " vs a median of " + ms(st.median) + " over " +
                                      std::to_string(values.size()) + " ranks (threshold +" + ms(st.threshold) + ")"});
      }
    };
    test(out.heatmaps[static_cast<std::size_t>(job_metric::compute)], straggler_cause::compute, "GPU compute");
    test(out.heatmaps[static_cast<std::size_t>(job_metric::data_loading)], straggler_cause::data_loading,
         "data loading");
    test(lateness, straggler_cause::communication,
         "late arrival at the step's collectives (median over them, beyond what its earlier collectives allowed)");
  }
  std::sort(out.stragglers.begin(), out.stragglers.end(), [](const job_straggler& a, const job_straggler& b) {
    if (a.step != b.step) return a.step < b.step;
    if (a.rank_index != b.rank_index) return a.rank_index < b.rank_index;
    return a.cause < b.cause;
  });
  return out;
}

}  // namespace kinetoscope::analysis
