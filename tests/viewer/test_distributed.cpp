// SPDX-License-Identifier: BSD-3-Clause
// Distributed view (docs/plugin-rules.md#distributed-view). Real traces (two_ranks, nccl_ddp) are
// checked against the numbers torch-tb-profiler showed for them and against values re-derived
// here from the raw JSON events; a hand-written two-worker trace covers
// kernel ranges, real-time alignment, steps and the cases where the view does not exist.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "analysis/distributed_view.hpp"
#include "analysis/loader.hpp"
#include "real_trace_files.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/overview.hpp"

using namespace kinetoscope::analysis;
using json = nlohmann::json;

namespace {

using kinetoscope_test::gunzip_file;
using kinetoscope_test::real_dir;

/// One worker loaded through the real pipeline (loader → op tree → overview).
struct worker {
  std::string name;
  trace_model model;
  op_trees trees;
  overview_result overview;
  json raw;  ///< the same file parsed independently

  worker(std::string n, const std::string& text) : name(std::move(n)) {
    load_result r = load_trace_buffer(text, name);
    REQUIRE_MESSAGE(r.ok(), (r.error ? r.error->message() : std::string()));
    model = std::move(*r.model);
    trees = build_op_tree(model);
    overview = compute_overview(model, trees);
    raw = json::parse(text);
  }
  distributed_worker_input input() const { return {name, &model, trees.used_devices, distributed_steps(overview)}; }
};

// ---- independent re-derivation from the raw JSON -------------------------------------------

using range = std::pair<double, double>;

std::vector<range> merged(std::vector<range> v) {
  std::sort(v.begin(), v.end());
  std::vector<range> out;
  for (const range& r : v) {
    if (r.second <= r.first) continue;
    if (!out.empty() && r.first <= out.back().second) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

double length(const std::vector<range>& v) {
  double s = 0;
  for (const range& r : merged(v)) s += r.second - r.first;
  return s;
}

double clipped_length(const std::vector<range>& v, double lo, double hi) {
  std::vector<range> c;
  for (const range& r : merged(v)) c.push_back({std::max(r.first, lo), std::min(r.second, hi)});
  return length(c);
}

std::vector<range> intersection(const std::vector<range>& a, const std::vector<range>& b) {
  std::vector<range> out;
  for (const range& x : merged(a)) {
    for (const range& y : merged(b)) {
      const double lo = std::max(x.first, y.first);
      const double hi = std::min(x.second, y.second);
      if (lo < hi) out.push_back({lo, hi});
    }
  }
  return out;
}

const std::set<std::string> plugin_comm = {"nccl:broadcast", "nccl:reduce", "nccl:all_reduce", "nccl:all_gather",
                                           "nccl:reduce_scatter"};

struct raw_record {
  std::string name;
  double start = 0;
  double end = 0;
  std::vector<range> ranges;
  std::int64_t bytes = 0;
};

std::vector<json> x_events_by_ts(const json& raw) {
  std::vector<json> ev;
  for (const json& e : raw["traceEvents"]) {
    if (e.value("ph", "") == "X") ev.push_back(e);
  }
  std::stable_sort(ev.begin(), ev.end(),
                   [](const json& a, const json& b) { return a["ts"].get<double>() < b["ts"].get<double>(); });
  return ev;
}

bool is_host_cat(const std::string& cat) {
  return cat == "cpu_op" || cat == "user_annotation" || cat == "gpu_user_annotation" || cat == "python";
}

/// Communication records straight from the JSON (keyed by External id, the later one wins).
std::vector<raw_record> raw_records(const json& raw) {
  static const std::map<std::string, std::int64_t> type_bytes = {{"long int", 8}, {"float", 4}, {"int", 4},
                                                                  {"c10::Half", 2}, {"c10::BFloat16", 2},
                                                                  {"unsigned char", 1}};
  std::map<std::int64_t, raw_record> by_id;
  std::vector<std::int64_t> order;
  const std::vector<json> ev = x_events_by_ts(raw);
  for (const json& e : ev) {
    if (!is_host_cat(e["cat"]) || plugin_comm.count(e["name"]) == 0) continue;
    const std::int64_t id = e["args"]["External id"];
    raw_record r;
    r.name = e["name"];
    r.start = e["ts"];
    r.end = r.start + e["dur"].get<double>();
    r.ranges.push_back({r.start, r.end});
    if (e["args"].contains("Input Dims")) {
      const json& dims = e["args"]["Input Dims"];
      const json& types = e["args"]["Input type"];
      for (std::size_t i = 0; i < dims.size(); ++i) {
        std::int64_t n = 1;
        for (const json& d : dims[i]) n *= d.get<std::int64_t>();
        const auto t = type_bytes.find(types[i].get<std::string>());
        r.bytes += n * (t == type_bytes.end() ? 0 : t->second);
      }
    }
    if (by_id.count(id) == 0) order.push_back(id);
    by_id[id] = r;
  }
  for (const json& e : ev) {
    if (e["cat"] != "kernel" || !e["args"].contains("External id")) continue;
    auto it = by_id.find(e["args"]["External id"].get<std::int64_t>());
    if (it != by_id.end()) it->second.ranges.push_back({e["ts"], e["ts"].get<double>() + e["dur"].get<double>()});
  }
  std::vector<raw_record> out;
  for (const std::int64_t id : order) out.push_back(by_id[id]);
  std::stable_sort(out.begin(), out.end(), [](const raw_record& a, const raw_record& b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  });
  return out;
}

/// Kernel and communication role ranges (plugin-rules.md#role-ranges priorities 1 and 4) from the
/// JSON.
void raw_roles(const json& raw, std::vector<range>& kernels, std::vector<range>& comm) {
  std::set<std::int64_t> comm_ids;
  const std::vector<json> ev = x_events_by_ts(raw);
  for (const json& e : ev) {
    if (is_host_cat(e["cat"]) && plugin_comm.count(e["name"]) != 0) {
      comm_ids.insert(e["args"]["External id"].get<std::int64_t>());
      comm.push_back({e["ts"], e["ts"].get<double>() + e["dur"].get<double>()});
    }
  }
  for (const json& e : ev) {
    if (e["cat"] != "kernel") continue;
    const range r{e["ts"], e["ts"].get<double>() + e["dur"].get<double>()};
    const bool is_comm = e["args"].contains("External id") && comm_ids.count(e["args"]["External id"]) != 0;
    (is_comm ? comm : kernels).push_back(r);
  }
}

/// Checks one worker's panels against the raw-derived values. `real` = the raw real ranges.
void check_worker(const distributed_worker_result& w, const worker& in, const std::vector<raw_record>& recs,
                  const std::vector<std::vector<range>>& real) {
  CAPTURE(w.worker);
  REQUIRE(w.records.size() == recs.size());
  for (std::size_t i = 0; i < recs.size(); ++i) {
    CHECK(w.records[i].name == recs[i].name);
    CHECK(w.records[i].start == recs[i].start);
    CHECK(w.records[i].bytes == recs[i].bytes);
    REQUIRE(w.records[i].ranges.size() == recs[i].ranges.size());
  }
  // Op table: calls, bytes, latency = union of the op's ranges, transfer = union of real ranges.
  std::vector<std::string> names;
  for (const raw_record& r : recs) {
    if (std::find(names.begin(), names.end(), r.name) == names.end()) names.push_back(r.name);
  }
  REQUIRE(w.comm_ops.size() == names.size());
  for (std::size_t k = 0; k < names.size(); ++k) {
    std::int64_t calls = 0;
    std::int64_t bytes = 0;
    std::vector<range> lat;
    std::vector<range> tr;
    for (std::size_t i = 0; i < recs.size(); ++i) {
      if (recs[i].name != names[k]) continue;
      ++calls;
      bytes += recs[i].bytes;
      lat.insert(lat.end(), recs[i].ranges.begin(), recs[i].ranges.end());
      tr.insert(tr.end(), real[i].begin(), real[i].end());
    }
    const comm_op_row& row = w.comm_ops[k];
    CHECK(row.name == names[k]);
    CHECK(row.calls == calls);
    CHECK(row.total_size_bytes == bytes);
    CHECK(row.total_latency_us == doctest::Approx(length(lat)).epsilon(1e-12));
    CHECK(row.data_transfer_us == doctest::Approx(length(tr)).epsilon(1e-12));
    CHECK(row.avg_latency_us == std::llround(length(lat) / static_cast<double>(calls)));
  }
  // Overlap per step from the raw role ranges and the worker's kept steps.
  std::vector<range> kernels;
  std::vector<range> comm;
  raw_roles(in.raw, kernels, comm);
  const std::vector<range> both = intersection(kernels, comm);
  const auto steps = distributed_steps(in.overview);
  REQUIRE(w.overlap.size() == steps.size());
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const double c = clipped_length(kernels, steps[s].start, steps[s].end);
    const double m = clipped_length(comm, steps[s].start, steps[s].end);
    const double o = clipped_length(both, steps[s].start, steps[s].end);
    CHECK(w.overlap[s].first == steps[s].name);
    CHECK(w.overlap[s].second.computation == doctest::Approx(c - o));
    CHECK(w.overlap[s].second.overlap == doctest::Approx(o));
    CHECK(w.overlap[s].second.communication == doctest::Approx(m - o));
    CHECK(w.overlap[s].second.other == doctest::Approx(steps[s].end - steps[s].start + o - c - m));
  }
  // Wait bars per step key (records assigned to the step containing them).
  std::map<std::string, std::pair<std::vector<range>, std::vector<range>>> per_step;
  for (std::size_t i = 0; i < recs.size(); ++i) {
    std::string key = "<none>";
    for (const auto& st : steps) {
      if (recs[i].start >= st.start && recs[i].end <= st.end) key = st.name;
    }
    per_step[key].first.insert(per_step[key].first.end(), recs[i].ranges.begin(), recs[i].ranges.end());
    per_step[key].second.insert(per_step[key].second.end(), real[i].begin(), real[i].end());
  }
  REQUIRE(w.wait.size() == per_step.size());
  for (const auto& [key, bar] : w.wait) {
    const auto& lists = per_step.at(key ? *key : std::string("<none>"));
    CHECK(bar.transfer == doctest::Approx(length(lists.second)));
    CHECK(bar.synchronizing == doctest::Approx(length(lists.first) - length(lists.second)));
  }
}

}  // namespace

TEST_CASE("distributed: two_ranks matches the plugin and the raw events") {
  const std::string dir = real_dir() + "/traces/two_ranks/";
  const worker w0("node_0", gunzip_file(dir + "rank0.pt.trace.json.gz"));
  const worker w1("node_1", gunzip_file(dir + "rank1.pt.trace.json.gz"));
  // Inputs in reverse order: the result is sorted by worker name.
  const distributed_result d = compute_distributed({w1.input(), w0.input()});
  REQUIRE_MESSAGE(d.available, d.reason);
  REQUIRE(d.workers.size() == 2);
  CHECK(d.workers[0].worker == "node_0");
  CHECK(d.workers[1].worker == "node_1");
  CHECK(d.device_info.empty());  // no deviceProperties in these traces

  // torch-tb-profiler's numbers for these two ranks (plugin-rules.md#distributed-view).
  const auto& o0 = d.workers[0].overlap;
  const auto& o1 = d.workers[1].overlap;
  REQUIRE(o0.size() == 2);
  REQUIRE(o1.size() == 2);
  CHECK(o0[0].first == "551");
  CHECK(o0[0].second.computation == 278511);
  CHECK(o0[0].second.overlap == 0);
  CHECK(o0[0].second.communication == 218);
  CHECK(o0[0].second.other == 328583);
  CHECK(o1[0].second.computation == 269790);
  CHECK(o1[0].second.overlap == 94);
  CHECK(o1[0].second.communication == 112);
  CHECK(o1[0].second.other == 337908);
  CHECK(d.workers[0].wait_all.transfer == 185);
  CHECK(d.workers[0].wait_all.synchronizing == 7);
  REQUIRE(d.workers[0].comm_ops.size() == 1);
  const comm_op_row& op = d.workers[0].comm_ops[0];
  CHECK(op.name == "nccl:all_reduce");
  CHECK(op.calls == 4);
  CHECK(op.total_size_bytes == 314195708);
  CHECK(op.avg_size_bytes == 78548927);  // round(314195708 / 4) = round(78548927.0)
  CHECK(op.total_latency_us == 385);
  CHECK(op.avg_latency_us == 96);        // round(96.25)
  CHECK(op.data_transfer_us == 370);
  CHECK(op.avg_data_transfer_us == 92);  // round(92.5): ties to even

  // The same numbers re-derived from the raw JSON.
  const std::vector<raw_record> r0 = raw_records(w0.raw);
  const std::vector<raw_record> r1 = raw_records(w1.raw);
  REQUIRE(r0.size() == r1.size());
  REQUIRE(r0.size() == 4);
  std::vector<std::vector<range>> real0(r0.size());
  std::vector<std::vector<range>> real1(r1.size());
  for (std::size_t i = 0; i < r0.size(); ++i) {
    REQUIRE(r0[i].ranges.size() == r1[i].ranges.size());
    for (std::size_t j = 0; j < r0[i].ranges.size(); ++j) {
      const double m = std::min(r0[i].ranges[j].second - r0[i].ranges[j].first,
                                r1[i].ranges[j].second - r1[i].ranges[j].first);
      real0[i].push_back({r0[i].ranges[j].second - m, r0[i].ranges[j].second});
      real1[i].push_back({r1[i].ranges[j].second - m, r1[i].ranges[j].second});
    }
  }
  check_worker(d.workers[0], w0, r0, real0);
  check_worker(d.workers[1], w1, r1, real1);

  // "all" bars: per-worker mean over steps, truncated.
  for (const auto& w : d.workers) {
    double c = 0;
    double other = 0;
    for (const auto& [name, bar] : w.overlap) {
      c += bar.computation;
      other += bar.other;
    }
    CHECK(w.overlap_all.computation == std::trunc(c / 2));
    CHECK(w.overlap_all.other == std::trunc(other / 2));
  }

  // Every nccl:* op (quirk Q5 fixed): all_to_all and _all_gather_base join, 10 records each.
  distributed_options all;
  all.all_collectives = true;
  const distributed_result d2 = compute_distributed({w0.input(), w1.input()}, all);
  REQUIRE(d2.available);
  CHECK(d2.workers[0].records.size() == 10);
  CHECK(d2.workers[0].comm_ops.size() == 3);
}

TEST_CASE("distributed: nccl_ddp alone (GPU-side annotations overwrite host records)") {
  const worker w("nccl_data",
                 gunzip_file(real_dir() + "/traces/nccl_ddp/nccl_data.pt.trace.json.gz"));
  const distributed_result d = compute_distributed({w.input()});
  REQUIRE_MESSAGE(d.available, d.reason);
  REQUIRE(d.workers.size() == 1);
  const std::vector<raw_record> recs = raw_records(w.raw);
  // One record per external id: the gpu_user_annotation twin (same id, later ts) wins.
  std::size_t host = 0;
  for (const json& e : w.raw["traceEvents"]) {
    if (e.value("cat", "") == "user_annotation" && plugin_comm.count(e.value("name", "")) != 0) ++host;
  }
  CHECK(recs.size() == host);
  CHECK(recs.size() == 21);
  std::vector<std::vector<range>> real;  // a single worker: real ranges are its own ranges
  for (const raw_record& r : recs) real.push_back(r.ranges);
  check_worker(d.workers[0], w, recs, real);
  for (const auto& row : d.workers[0].comm_ops) CHECK(row.data_transfer_us == row.total_latency_us);
  for (const auto& [step, bar] : d.workers[0].wait) CHECK(bar.synchronizing == 0);

  // Device information: "nccl_data" has no _<digits> suffix → node = worker, Process 0.
  REQUIRE(d.device_info.size() == 1);
  CHECK(d.device_info[0].node == "nccl_data");
  REQUIRE(d.device_info[0].processes.size() == 1);
  CHECK(d.device_info[0].processes[0].process == "Process 0");
  REQUIRE(d.device_info[0].processes[0].gpus.size() == 1);
  const distributed_gpu& g = d.device_info[0].processes[0].gpus[0];
  CHECK(g.device == "GPU0");
  CHECK(g.name == "NVIDIA A100-PG509-200");
  CHECK(g.memory == "39.39 GB");
  CHECK(g.memory_raw == 42297524224);
  CHECK(g.compute_capability == "8.0");

  // Without GPU-side annotations the host annotations make the records.
  const distributed_result host_only = compute_distributed({w.input()}, distributed_options::improved());
  REQUIRE(host_only.available);
  std::vector<range> host_ranges;
  for (const json& e : w.raw["traceEvents"]) {
    if (e.value("cat", "") == "user_annotation" && plugin_comm.count(e.value("name", "")) != 0)
      host_ranges.push_back({e["ts"], e["ts"].get<double>() + e["dur"].get<double>()});
  }
  std::sort(host_ranges.begin(), host_ranges.end());
  const auto& hr = host_only.workers[0].records;
  REQUIRE(hr.size() == host_ranges.size());
  for (std::size_t i = 0; i < hr.size(); ++i) {
    CHECK(hr[i].start == host_ranges[i].first);
    CHECK(hr[i].end == host_ranges[i].second);
  }
}

namespace {

json x(std::string_view cat, std::string_view name, double ts, double dur, std::int64_t ext, std::int64_t pid = 1,
       std::int64_t tid = 1) {
  return {{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", pid}, {"tid", tid}, {"ts", ts}, {"dur", dur},
          {"args", {{"External id", ext}}}};
}

/// A worker with one step [0, 1000) and two all_reduce ops whose NCCL kernels (same External
/// id) run on the GPU; `k` shifts and stretches the kernels per worker.
std::string synthetic(double k_len0, double k_len1, bool add_gloo = false, bool extra_op = false) {
  json ev = json::array();
  ev.push_back(x("user_annotation", "ProfilerStep#7", 0, 1000, 1));
  ev.push_back(x("cpu_op", "aten::mm", 10, 100, 2));
  ev.push_back(x("user_annotation", "nccl:all_reduce", 200, 10, 3));
  ev.back()["args"]["Input Dims"] = json::array({json::array({2, 3}), json::array({4})});
  ev.back()["args"]["Input type"] = json::array({"c10::Half", "long int"});
  ev.push_back(x("user_annotation", "nccl:all_reduce", 400, 10, 4));
  ev.push_back(x("kernel", "ncclKernel_AllReduce", 500, k_len0, 3, 0, 7));
  ev.back()["args"]["device"] = 0;
  ev.push_back(x("kernel", "ncclKernel_AllReduce", 700, k_len1, 4, 0, 7));
  ev.back()["args"]["device"] = 0;
  ev.push_back(x("kernel", "gemm", 20, 50, 2, 0, 7));
  ev.back()["args"]["device"] = 0;
  if (add_gloo) ev.push_back(x("cpu_op", "gloo:broadcast", 600, 5, 9));
  if (extra_op) ev.push_back(x("user_annotation", "nccl:broadcast", 1200, 5, 10));
  return json{{"traceEvents", ev}}.dump();
}

}  // namespace

TEST_CASE("distributed: kernel ranges, real data-transfer time and step assignment") {
  const worker a("host_0", synthetic(100, 40));
  const worker b("host_1", synthetic(60, 80, false, true));
  // b has a third record (outside every step): counts differ, so no view.
  const distributed_result mismatch = compute_distributed({a.input(), b.input()});
  CHECK_FALSE(mismatch.available);
  CHECK(mismatch.reason.find("different numbers") != std::string::npos);

  const worker c("host_1", synthetic(60, 80));
  const distributed_result d = compute_distributed({a.input(), c.input()});
  REQUIRE_MESSAGE(d.available, d.reason);
  const auto& ra = d.workers[0].records;
  REQUIRE(ra.size() == 2);
  // Ranges: the host op interval first, then its kernel.
  REQUIRE(ra[0].ranges.size() == 2);
  CHECK(ra[0].ranges[0] == interval{200, 210});
  CHECK(ra[0].ranges[1] == interval{500, 600});
  CHECK(ra[0].step == std::optional<std::string>("7"));
  CHECK(ra[0].bytes == 2 * 3 * 2 + 4 * 8);
  // Real ranges: per range index the shortest length over workers, ending at each range end.
  // op 0: host 10 vs 10 → [200,210); kernel 100 vs 60 → a: [540,600), c: [500,560).
  CHECK(ra[0].real_ranges[0] == interval{200, 210});
  CHECK(ra[0].real_ranges[1] == interval{540, 600});
  CHECK(d.workers[1].records[0].real_ranges[1] == interval{500, 560});
  // op 1: kernel 40 vs 80 → a keeps [700,740); c gets [740,780).
  CHECK(ra[1].real_ranges[1] == interval{700, 740});
  CHECK(d.workers[1].records[1].real_ranges[1] == interval{740, 780});

  // Op table of a: latency = 10 + 100 + 10 + 40 = 160; transfer = 10 + 60 + 10 + 40 = 120.
  REQUIRE(d.workers[0].comm_ops.size() == 1);
  CHECK(d.workers[0].comm_ops[0].total_latency_us == 160);
  CHECK(d.workers[0].comm_ops[0].data_transfer_us == 120);
  CHECK(d.workers[0].comm_ops[0].avg_latency_us == 80);
  CHECK(d.workers[0].comm_ops[0].total_size_bytes == 44);
  CHECK(d.workers[0].comm_ops[0].avg_size_bytes == 22);
  // Worker c: latency 10 + 60 + 10 + 80 = 160, transfer 10 + 60 + 10 + 40 = 120.
  CHECK(d.workers[1].comm_ops[0].total_latency_us == 160);
  CHECK(d.workers[1].comm_ops[0].data_transfer_us == 120);
  REQUIRE(d.workers[0].wait.size() == 1);
  CHECK(d.workers[0].wait[0].first == std::optional<std::string>("7"));
  CHECK(d.workers[0].wait[0].second.transfer == 120);
  CHECK(d.workers[0].wait[0].second.synchronizing == 40);

  // Overlap of a in step 7 [0, 1000) (no runtime: the step keeps its host range): computation =
  // gemm 50, communication = 20 (host annotations) + 100 + 40 (NCCL kernels) = 160, no overlap.
  REQUIRE(d.workers[0].overlap.size() == 1);
  const overlap_bar& bar = d.workers[0].overlap[0].second;
  CHECK(bar.computation == 50);
  CHECK(bar.overlap == 0);
  CHECK(bar.communication == 160);
  CHECK(bar.other == 1000 - 50 - 160);
  CHECK(d.workers[0].overlap_all.communication == 160);

  // Both NCCL and Gloo ops: the records are discarded, so the view does not exist.
  const worker g("host_2", synthetic(100, 40, true));
  CHECK(communication_records(g.model, distributed_steps(g.overview)).empty());
  CHECK_FALSE(compute_distributed({g.input()}).available);

  // Device information: host_0 / host_1 → node "host", processes "Process 0", "Process 1",
  // skipped here because the traces have no deviceProperties.
  CHECK(d.device_info.empty());
}

TEST_CASE("distributed: name helpers") {
  CHECK(split_worker_name("host_1") == std::pair<std::string, std::string>("host", "1"));
  CHECK(split_worker_name("a_1_2") == std::pair<std::string, std::string>("a_1", "2"));
  CHECK(split_worker_name("node_12x") == std::pair<std::string, std::string>("node", "12"));
  CHECK_FALSE(split_worker_name("worker0").has_value());
  CHECK_FALSE(split_worker_name("nccl_data").has_value());
  CHECK(comm_type_bytes("long int") == 8);
  CHECK(comm_type_bytes("c10::BFloat16") == 2);
  CHECK(comm_type_bytes("unsigned char") == 1);
  CHECK(comm_type_bytes("double") == 0);
}
