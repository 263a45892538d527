// SPDX-License-Identifier: BSD-3-Clause
// The logdir store and every JSON API route (viewer/server/http-api.md), in process: a store on
// a temporary logdir holding copies of $KINETOSCOPE_REAL_TRACES/traces runs, a broken file and a
// trace with memory events written by kinetoscope itself; answers are compared with the
// golden numbers of torch-tb-profiler and with the analysis engine run directly on the files.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/diff_view.hpp"
#include "analysis/distributed_view.hpp"
#include "analysis/loader.hpp"
#include "analysis/memory_view.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/report.hpp"
#include "analysis/rules.hpp"
#include "kinetoscope/trace_data.hpp"
#include "kinetoscope/writer/chrome_trace.hpp"
#include "kinetoscope/tensorboard/tfevents.hpp"
#include "../module_fixture.hpp"
#include "../run_command.hpp"
#include "../small_events_trace.hpp"
#include "dist_job_writer.hpp"
#include "server/api.hpp"
#include "server/row_fields.hpp"
#include "server/store.hpp"
#include "../real_traces.hpp"

namespace fs = std::filesystem;
namespace an = kinetoscope::analysis;
using kinetoscope::server::api;
using kinetoscope::server::api_request;
using kinetoscope::server::api_response;
using kinetoscope::server::store;
using kinetoscope::server::store_options;
using json = nlohmann::json;

namespace {

constexpr auto load_timeout = std::chrono::seconds(300);

fs::path real_dir() {
  const char* s = kinetoscope::test::real_traces();
  REQUIRE_MESSAGE(s != nullptr, "KINETOSCOPE_REAL_TRACES not set (meson test sets it)");
  return fs::path(s);
}
fs::path traces_dir() { return real_dir() / "traces"; }

/// A fresh temporary directory, removed at scope exit.
struct temp_dir {
  fs::path path;
  explicit temp_dir(const std::string& tag) {
    path = fs::temp_directory_path() / ("kinetoscope_test_api_" + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void copy_run(const std::string& run, const fs::path& logdir) {
  fs::create_directories(logdir / run);
  for (const auto& e : fs::directory_iterator(traces_dir() / run))
    if (e.path().filename().string().find(".pt.trace.json") != std::string::npos)
      fs::copy_file(e.path(), logdir / run / e.path().filename(), fs::copy_options::overwrite_existing);
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A trace of one thread's operators and memory events written by the core library, times in µs
/// after the base time.
struct memory_trace_builder {
  kinetoscope::trace_data d;
  std::int64_t base = kinetoscope::base_time_ns();
  decltype(kinetoscope::cpu_event::tid) tid;
  std::int64_t ext = 0;
  memory_trace_builder(decltype(kinetoscope::trace_data::pid) pid, decltype(kinetoscope::cpu_event::tid) thread)
      : tid(thread) {
    d.pid = pid;
    d.profile_memory = true;
  }
  std::int64_t ns(double us) const { return base + static_cast<std::int64_t>(us * 1000); }
  void op(std::string_view name, double s, double e, kinetoscope::cpu_category cat) {
    kinetoscope::cpu_event ev;
    ev.start_ns = ns(s);
    ev.end_ns = ns(e);
    ev.tid = tid;
    ev.end_tid = tid;
    ev.name = d.intern(name);
    ev.category = cat;
    ev.external_id = ++ext;
    d.events.push_back(ev);
  }
  void mem(double t, std::uint64_t addr, std::int64_t bytes, std::int64_t total, kinetoscope::device_type dev,
           std::int16_t id) {
    kinetoscope::memory_event m;
    m.time_ns = ns(t);
    m.tid = tid;
    m.addr = addr;
    m.bytes = bytes;
    m.total_allocated = total;
    m.total_reserved = 4096;
    m.device = dev;
    m.device_id = id;
    d.memory.push_back(m);
  }
};

/// A trace with memory events, written by the core library (times in µs after the base time).
std::string memory_trace_text() {
  memory_trace_builder b(77, 4242);
  const auto cpu = kinetoscope::device_type::cpu;
  b.op("ProfilerStep#1", 1000, 1100, kinetoscope::cpu_category::user_annotation);
  b.op("aten::linear", 1010, 1060, kinetoscope::cpu_category::cpu_op);
  b.op("aten::empty", 1012, 1014, kinetoscope::cpu_category::cpu_op);
  b.mem(1012.5, 0x1000, 1024, 1024, cpu, -1);   // aten::empty allocates 1 KB
  b.mem(1030, 0x2000, 2048, 3072, cpu, -1);     // aten::linear allocates 2 KB
  b.mem(1070, 0x1000, -1024, 2048, cpu, -1);    // freed outside any operator
  return kinetoscope::chrome_trace_string(b.d);
}

/// A trace with a CPU allocation in aten::empty (12.5 µs after the start) and a GPU0 allocation in
/// aten::zeros (55 µs), written by the core library: a range can hold one device's records only.
std::string two_device_memory_trace_text() {
  memory_trace_builder b(78, 4243);
  b.op("ProfilerStep#1", 1000, 1100, kinetoscope::cpu_category::user_annotation);
  b.op("aten::empty", 1010, 1015, kinetoscope::cpu_category::cpu_op);
  b.op("aten::zeros", 1050, 1060, kinetoscope::cpu_category::cpu_op);
  b.mem(1012.5, 0x1000, 1024, 1024, kinetoscope::device_type::cpu, -1);
  b.mem(1055, 0x7000, 4096, 4096, kinetoscope::device_type::cuda, 0);
  return kinetoscope::chrome_trace_string(b.d);
}

/// A store on `logdir`, started, its first scan and loads done.
std::unique_ptr<store> loaded_store(const fs::path& logdir, double reload_interval_s = 0,
                                    bool follow_outside_symlinks = false) {
  store_options o;
  o.logdir = logdir.string();
  o.reload_interval_s = reload_interval_s;
  o.follow_outside_symlinks = follow_outside_symlinks;
  auto s = std::make_unique<store>(o);
  s->start();
  REQUIRE(s->wait_idle(load_timeout));
  return s;
}

/// The test logdir, loaded once for every test case of this file.
struct fixture {
  temp_dir dir{"main"};
  std::unique_ptr<store> s;

  fixture() {
    for (const char* run : {"resnet50_v100", "two_ranks", "cpu_only", "diff_base", "diff_test"})
      copy_run(run, dir.path);
    // A truncated gzip stream in its own run.
    fs::create_directories(dir.path / "broken");
    const std::string gz = read_file(traces_dir() / "cpu_only" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz");
    std::ofstream(dir.path / "broken" / "bad.pt.trace.json.gz", std::ios::binary) << gz.substr(0, gz.size() / 2);
    fs::create_directories(dir.path / "memrun");
    std::ofstream(dir.path / "memrun" / "mem.pt.trace.json", std::ios::binary) << memory_trace_text();
    {
      kinetoscope::event_file_writer w((dir.path / "cpu_only").string());
      w.add_scalars(1, {{"loss", 2.5f}, {"lr", 0.125f}}, 1700000000.5);
      w.add_scalars(2, {{"loss", 1.5f}}, 1700000001.5);
    }
    {
      // An event file whose last record has a corrupted payload (its data CRC no longer matches).
      std::string path;
      {
        kinetoscope::event_file_writer w((dir.path / "diff_test").string());
        w.add_scalars(1, {{"loss", 3.5f}}, 1700000002.5);
        w.add_scalars(2, {{"loss", 0.5f}}, 1700000003.5);
        path = w.path();
      }
      std::string bytes = read_file(path);
      bytes[bytes.size() - 6] = static_cast<char>(bytes[bytes.size() - 6] ^ 0x5a);
      std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    }
    s = loaded_store(dir.path);
  }
};

fixture& shared_fixture() {
  static fixture f;
  return f;
}

api_response get(store& s, const std::string& route, std::vector<std::pair<std::string, std::string>> query = {}) {
  api_request r;
  r.route = route;
  r.query = std::move(query);
  return api(s).handle(r);
}

/// GET that must answer 200; the parsed body.
json get_json(store& s, const std::string& route, std::vector<std::pair<std::string, std::string>> query = {}) {
  const api_response r = get(s, route, query);
  INFO("route " << route << ": " << r.body.substr(0, 300));
  REQUIRE(r.status == 200);
  CHECK(r.content_type == "application/json; charset=utf-8");
  return json::parse(r.body);
}

using query_t = std::vector<std::pair<std::string, std::string>>;
query_t profile_query(const std::string& run, const std::string& worker, const std::string& span) {
  return {{"run", run}, {"worker", worker}, {"span", span}};
}
query_t with(query_t q, const std::string& k, const std::string& v) {
  q.emplace_back(k, v);
  return q;
}

/// The analysis engine run directly on a trace file (plugin parity defaults, as the store).
struct direct {
  an::trace_model model;
  an::op_trees trees;
  an::full_report report;
  explicit direct(const fs::path& p) {
    an::load_result r = an::load_trace(p.string());
    REQUIRE(r.ok());
    model = std::move(*r.model);
    // The server's views follow kinetoscope's rules by default (docs/kinetoscope-rules.md).
    trees = an::build_op_tree(model, an::rules().tree);
    report = an::compute_report(model, trees, an::rules().report());
  }
};

const fs::path resnet_span1 = "resnet50_v100/worker0.1623143089861.pt.trace.json.gz";

}  // namespace

TEST_CASE("api: /runs, /status and /errors after the first load") {
  store& s = *shared_fixture().s;
  const json runs = get_json(s, "runs");
  CHECK(runs["runs"] == json({"cpu_only", "diff_base", "diff_test", "memrun", "resnet50_v100", "two_ranks"}));
  CHECK(runs["loading"] == false);
  CHECK(runs["progress"]["percent"] == 100.0);
  CHECK(runs["progress"]["files_total"] == 9);
  CHECK(runs["progress"]["files_loaded"] == 8);
  CHECK(runs["progress"]["files_failed"] == 1);
  CHECK(runs["progress"]["bytes_loaded"] == runs["progress"]["bytes_total"]);

  const json status = get_json(s, "status");
  CHECK(status["logdir"] == shared_fixture().dir.path.filename().string());  // its name, not its path
  REQUIRE(status["files"].size() == 9);
  int loaded = 0;
  for (const auto& f : status["files"]) {
    if (f["run"] == "broken") {
      CHECK(f["state"] == "failed");
      CHECK(f["path"] == "broken/bad.pt.trace.json.gz");
      REQUIRE(f["error"].is_string());
      CHECK(f["error"].get<std::string>().find("bad.pt.trace.json.gz") != std::string::npos);
      CHECK(f["load_seconds"].is_number());
    } else {
      CHECK(f["state"] == "loaded");
      CHECK(f["error"].is_null());
      CHECK(f["size"].get<std::uint64_t>() == fs::file_size(shared_fixture().dir.path / f["path"].get<std::string>()));
      ++loaded;
    }
  }
  CHECK(loaded == 8);

  const json errors = get_json(s, "errors", {{"run", "broken"}});
  REQUIRE(errors.size() == 1);
  CHECK(errors[0]["path"] == "broken/bad.pt.trace.json.gz");
  CHECK(errors[0]["error"].get<std::string>().find("gzip") != std::string::npos);
  CHECK(get_json(s, "errors", {{"run", "diff_base"}}) == json::array());
  CHECK(get(s, "errors", {{"run", "nope"}}).status == 404);
  // A run whose only file failed is not listed and has no views.
  CHECK(get(s, "views", {{"run", "broken"}}).status == 404);
}

TEST_CASE("api: /views, /workers, /spans as the plugin") {
  store& s = *shared_fixture().s;
  const direct resnet(traces_dir() / resnet_span1);
  json expected_views = {"Overview", "Operator", "Kernel", "Trace"};
  if (resnet.report.memory.present) expected_views.push_back("Memory");
  if (resnet.report.modules.kind != an::module_view_kind::none) expected_views.push_back("Module");
  CHECK(get_json(s, "views", {{"run", "resnet50_v100"}}) == expected_views);

  const json cpu_views = get_json(s, "views", {{"run", "cpu_only"}});
  CHECK(std::find(cpu_views.begin(), cpu_views.end(), "Kernel") == cpu_views.end());
  CHECK(cpu_views[0] == "Overview");
  const json two = get_json(s, "views", {{"run", "two_ranks"}});
  CHECK(std::find(two.begin(), two.end(), "Distributed") != two.end());
  const json mem = get_json(s, "views", {{"run", "memrun"}});
  CHECK(std::find(mem.begin(), mem.end(), "Memory") != mem.end());

  CHECK(get_json(s, "workers", {{"run", "resnet50_v100"}, {"view", "Overview"}}) == json({"worker0"}));
  CHECK(get_json(s, "workers", {{"run", "two_ranks"}, {"view", "Overview"}}) == json({"rank0", "rank1"}));
  CHECK(get_json(s, "workers", {{"run", "two_ranks"}, {"view", "Distributed"}}) == json({"All"}));
  CHECK(get_json(s, "workers", {{"run", "cpu_only"}, {"view", "Kernel"}}) == json::array());
  CHECK(get(s, "workers", {{"run", "cpu_only"}, {"view", "Bogus"}}).status == 400);

  CHECK(get_json(s, "spans", {{"run", "resnet50_v100"}, {"worker", "worker0"}}) == json({"1", "2"}));
  CHECK(get_json(s, "spans", {{"run", "two_ranks"}, {"worker", "All"}}) == json({"default"}));
  CHECK(get_json(s, "spans", {{"run", "two_ranks"}, {"worker", "rank1"}}) == json({"default"}));
  CHECK(get(s, "spans", {{"run", "two_ranks"}, {"worker", "rank7"}}).status == 404);
}

TEST_CASE("api: /overview of resnet50_v100 span 1 has torch-tb-profiler's golden numbers") {
  store& s = *shared_fixture().s;
  std::ifstream in(real_dir() / "expected" / "resnet50_v100" / "worker0.1623143089861.pt.trace.json.gz.expected.json");
  REQUIRE(in.good());
  const json golden = json::parse(in)["overview"];
  const json ov = get_json(s, "overview", profile_query("resnet50_v100", "worker0", "1"));

  // Execution summary: the golden average, rounded.
  REQUIRE(ov["performance"].size() == 1);
  const json& root = ov["performance"][0];
  CHECK(root["name"] == "Average Step Time");
  CHECK(root["value"] == golden["average"]["total"]);
  CHECK(root["value"] == 177592);
  CHECK(root["extra"] == 100);
  const std::vector<std::pair<std::string, std::string>> roles = {
      {"Kernel", "kernel"}, {"Memcpy", "memcpy"}, {"Memset", "memset"}, {"Runtime", "runtime"},
      {"DataLoader", "dataloader"}, {"CPU Exec", "cpu_exec"}, {"Other", "other"}};
  REQUIRE(root["children"].size() == roles.size());
  for (std::size_t i = 0; i < roles.size(); ++i) {
    CHECK(root["children"][i]["name"] == roles[i].first);
    CHECK(root["children"][i]["value"] == golden["average"][roles[i].second]);
  }
  CHECK(root["children"][0]["extra"] == 55.51);

  // Step rows: the golden steps, each value with its tooltip.
  const json& steps = ov["steps"];
  REQUIRE(steps["columns"].size() == 1 + 2 * roles.size());
  CHECK(steps["columns"][0] == json({{"type", "string"}, {"name", "Step"}}));
  CHECK(steps["columns"][1]["name"] == "Kernel");
  CHECK(steps["columns"][2]["role"] == "tooltip");
  REQUIRE(steps["rows"].size() == 6);
  REQUIRE(golden["steps"].size() == 6);
  for (std::size_t r = 0; r < 6; ++r) {
    const json& row = steps["rows"][r];
    CHECK(row[0] == golden["steps"][r]["name"]);
    for (std::size_t i = 0; i < roles.size(); ++i) CHECK(row[1 + 2 * i] == golden["steps"][r][roles[i].second]);
  }
  CHECK(steps["rows"][0][2] ==
        "<div class=\"visualization-tooltip\" style=\"white-space: nowrap;\">Step 5<br>Total: 187948us<br>"
        "<b>Kernel: 98598us</b><br>Percentage: 52.46%</div>");

  // GPU summary and environment.
  REQUIRE(ov.contains("gpu_metrics"));
  CHECK(ov["gpu_metrics"]["title"] == "GPU Summary");
  bool found = false;
  for (const auto& item : ov["gpu_metrics"]["data"])
    if (item["title"] == "GPU Utilization") {
      CHECK(item["value"] == "55.51 %");
      found = true;
    }
  CHECK(found);
  const json environments = json::parse(
      R"js([{"title": "Number of Worker(s)", "value": "1"}, {"title": "Device Type", "value": "GPU"}])js");
  CHECK(ov["environments"] == environments);
  CHECK(ov["recommendations"].get<std::string>().starts_with("<ul><li>"));
  CHECK(ov["recommendations"].get<std::string>().find("DataLoader") != std::string::npos);

  // Repeated: the same body (served from the cache).
  CHECK(get(s, "overview", profile_query("resnet50_v100", "worker0", "1")).body ==
        get(s, "overview", profile_query("resnet50_v100", "worker0", "1")).body);
  // CPU-only: no device columns, no GPU summary.
  const json cpu = get_json(s, "overview", profile_query("cpu_only", "rank-34.Jul_15_10_52_41", "1"));
  CHECK_FALSE(cpu.contains("gpu_metrics"));
  CHECK(cpu["environments"][1]["value"] == "CPU");
}

TEST_CASE("api: operator and kernel tables equal the analysis engine's rows") {
  store& s = *shared_fixture().s;
  const direct d(traces_dir() / resnet_span1);
  const auto q = profile_query("resnet50_v100", "worker0", "1");

  for (bool by_shape : {false, true}) {
    const json t = get_json(s, "operation/table", with(q, "group_by", by_shape ? "OperationAndInputShape" : "Operation"));
    CHECK(t["metadata"]["sort"] == "device_self_duration");
    const auto& rows = by_shape ? d.report.operators_by_shape : d.report.operators_by_name;
    REQUIRE(t["data"].size() == rows.size());
    REQUIRE(!rows.empty());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const json& r = t["data"][i];
      CHECK(r["name"] == rows[i].name);
      if (by_shape) CHECK(r["input_shape"] == rows[i].input_shape);
      else CHECK_FALSE(r.contains("input_shape"));
      CHECK(r["calls"] == rows[i].calls);
      CHECK(r["device_self_duration"].get<double>() == rows[i].device_self_us);
      CHECK(r["device_total_duration"].get<double>() == rows[i].device_total_us);
      CHECK(r["host_self_duration"].get<double>() == rows[i].host_self_us);
      CHECK(r["host_total_duration"].get<double>() == rows[i].host_total_us);
      CHECK(r["tc_eligible"] == (rows[i].tc_eligible ? "Yes" : "No"));
      CHECK(r["has_call_stack"] == rows[i].has_call_stack);
    }
  }

  const json kt = get_json(s, "kernel/table", q);
  CHECK(kt["metadata"]["sort"] == "Total Duration (us)");
  REQUIRE(kt["data"]["rows"].size() == d.report.kernels_by_name.size());
  CHECK(kt["data"]["columns"][0]["name"] == "Name");
  for (std::size_t i = 0; i < d.report.kernels_by_name.size(); ++i) {
    const json& r = kt["data"]["rows"][i];
    const an::kernel_row& k = d.report.kernels_by_name[i];
    CHECK(r[0] == k.name);
    CHECK(r[1] == (k.tensor_cores_used ? "Yes" : "No"));
    CHECK(r[2] == k.calls);
    CHECK(r[3].get<double>() == k.total_us);
    CHECK(r[4].get<double>() == k.mean_us);
    CHECK(r[5].get<double>() == k.max_us);
    CHECK(r[6].get<double>() == k.min_us);
  }
  const json kop = get_json(s, "kernel/table", with(q, "group_by", "KernelNameAndOpName"));
  REQUIRE(kop["data"]["rows"].size() == d.report.kernels_by_operator.size());
  CHECK(kop["data"]["columns"][1]["name"] == "Operator");
  for (std::size_t i = 0; i < d.report.kernels_by_operator.size(); ++i) {
    const json& r = kop["data"]["rows"][i];
    const an::kernel_op_row& k = d.report.kernels_by_operator[i];
    CHECK(r[0] == k.name);
    CHECK(r[1] == k.operator_name);
    CHECK(r[2] == k.grid);
    CHECK(r[3] == k.block);
    CHECK(r[8] == k.calls);
    CHECK(r[9].get<double>() == k.total_us);
  }

  // Pies: the kernel pie's rows are the kernels' raw totals; the operator pies are non-null.
  const json kp = get_json(s, "kernel", q);
  REQUIRE(kp["total"]["rows"].size() == d.report.kernels_by_name.size());
  CHECK(kp["total"]["rows"][0][1].get<double>() == d.report.kernels_by_name[0].total_raw_us);
  const json tc = get_json(s, "kernel/tc_pie", q);
  CHECK(tc["total"]["rows"][0][0] == "Using Tensor Cores");
  CHECK(tc["total"]["rows"][0][1].get<double>() + tc["total"]["rows"][1][1].get<double>() == doctest::Approx(1.0));
  const json pies = get_json(s, "operation", with(q, "group_by", "Operation"));
  for (const char* k : {"device_total_time", "device_self_time", "host_total_time", "host_self_time"}) {
    INFO(k);
    REQUIRE(pies[k].is_object());
    CHECK(pies[k]["rows"].size() > 0);
  }
  CHECK(pies["host_self_time"]["title"] == "Host Self Time (us)");

  // An unknown operator key: 404, not 500.
  CHECK(get(s, "operation/stack", with(q, "op_name", "no::such_op")).status == 404);

  // CPU-only: kernel routes answer null, the operator table has no device columns.
  const auto cq = profile_query("cpu_only", "rank-34.Jul_15_10_52_41", "1");
  for (const char* route : {"kernel", "kernel/table", "kernel/tc_pie"}) CHECK(get_json(s, route, cq).is_null());
  const json ct = get_json(s, "operation/table", cq);
  CHECK(ct["metadata"]["sort"] == "host_self_duration");
  REQUIRE(!ct["data"].empty());
  CHECK_FALSE(ct["data"][0].contains("device_self_duration"));
}

namespace {

/// torch-tb-profiler's golden numbers of a real trace (tests/data/real/README.md).
json golden_of(const fs::path& trace_rel) {
  std::ifstream in(real_dir() / "expected" / (trace_rel.string() + ".expected.json"));
  REQUIRE(in.good());
  return json::parse(in);
}

/// Whether `v` is within the plugin's rounding of the golden `g` (max(1 µs, 0.1 %)).
bool near_golden(double v, double g) { return std::abs(v - g) <= std::max(1.0, 0.001 * std::abs(g)); }

}  // namespace

TEST_CASE("api: /operation?group_by=OperationAndInputShape answers the by-shape pies of the plugin") {
  store& s = *shared_fixture().s;
  const json golden = golden_of(resnet_span1)["operators"];
  const auto q = profile_query("resnet50_v100", "worker0", "1");
  const json by_name = get_json(s, "operation", with(q, "group_by", "Operation"));
  const json by_shape = get_json(s, "operation", with(q, "group_by", "OperationAndInputShape"));
  CHECK(get_json(s, "operation", q) == by_name);  // no group_by: by name, as the plugin

  const std::pair<const char*, const char*> pies[] = {{"device_total_time", "device_total_us"},
                                                      {"device_self_time", "device_self_us"},
                                                      {"host_total_time", "host_total_us"},
                                                      {"host_self_time", "host_self_us"}};
  for (const auto& [pie, key] : pies) {
    INFO(pie);
    REQUIRE(by_shape[pie].is_object());
    CHECK(by_shape[pie]["title"] == by_name[pie]["title"]);
    const json& rows = by_shape[pie]["rows"];
    // One slice per (name, input shape) group with time: more than by name on this trace.
    CHECK(rows.size() > by_name[pie]["rows"].size());
    // Slices sorted by value, descending; labelled with the bare operator name.
    std::map<std::string, std::vector<double>> slices, expected;
    std::map<std::string, std::size_t> groups;  // golden groups of each name, timed or not
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (i > 0) CHECK(rows[i][1].get<double>() <= rows[i - 1][1].get<double>());
      slices[rows[i][0].get<std::string>()].push_back(rows[i][1].get<double>());
    }
    for (const auto& g : golden["by_name_and_input_shape"]) {
      ++groups[g["name"].get<std::string>()];
      if (g[key].get<double>() >= 1) expected[g["name"].get<std::string>()].push_back(g[key].get<double>());
    }
    // Each golden group with at least 1 µs (the golden values are rounded) is a slice of its
    // name with its value; the other slices of that name are below 1 µs.
    for (auto& [name, values] : expected) {
      INFO(name);
      std::vector<double>& got = slices[name];
      std::sort(values.rbegin(), values.rend());
      std::sort(got.rbegin(), got.rend());
      REQUIRE(got.size() >= values.size());
      CHECK(got.size() <= groups[name]);
      for (std::size_t i = 0; i < values.size(); ++i) CHECK(near_golden(got[i], values[i]));
      for (std::size_t i = values.size(); i < got.size(); ++i) CHECK(got[i] < 1.0);
    }
    for (const auto& [name, got] : slices) {
      INFO(name);
      CHECK(groups.count(name) == 1);
      if (expected.count(name) == 0)
        for (double v : got) CHECK(v < 1.0);
    }
  }
}

TEST_CASE("api: /operation/table and /operation/stack carry the Tensor Cores fields without kernels") {
  store& s = *shared_fixture().s;
  const fs::path trace = "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz";
  const json golden = golden_of(trace)["operators"];
  const auto cq = profile_query("cpu_only", "rank-34.Jul_15_10_52_41", "1");
  for (bool by_shape : {false, true}) {
    INFO("by_shape " << by_shape);
    const json t = get_json(s, "operation/table", with(cq, "group_by", by_shape ? "OperationAndInputShape" : "Operation"));
    CHECK(t["metadata"]["sort"] == "host_self_duration");
    CHECK(t["metadata"]["tooltips"].size() == 3);
    const json& want = golden[by_shape ? "by_name_and_input_shape" : "by_name"];
    REQUIRE(t["data"].size() == want.size());
    for (const auto& r : t["data"]) {
      INFO(r.dump());
      CHECK_FALSE(r.contains("device_self_duration"));
      CHECK_FALSE(r.contains("device_total_duration"));
      const auto g = std::find_if(want.begin(), want.end(), [&](const json& w) {
        return w["name"] == r["name"] && (!by_shape || w["input_shape"] == r["input_shape"]);
      });
      REQUIRE(g != want.end());
      CHECK(r["tc_eligible"] == ((*g)["tc_eligible"].get<bool>() ? "Yes" : "No"));
      CHECK(r["tc_self_ratio"].get<double>() == (*g)["tc_self_pct"].get<double>());
      CHECK(r["tc_total_ratio"].get<double>() == (*g)["tc_total_pct"].get<double>());
    }
  }
  // The call-stack rows have the same fields (the stacks of the first operator that has one).
  const json t = get_json(s, "operation/table", cq);
  for (const auto& r : t["data"]) {
    if (!r["has_call_stack"].get<bool>()) continue;
    const json st = get_json(s, "operation/stack", with(cq, "op_name", r["name"].get<std::string>()));
    REQUIRE(!st["data"].empty());
    for (const char* k : {"tc_eligible", "tc_self_ratio", "tc_total_ratio"}) CHECK(st["data"][0].contains(k));
    break;
  }
}

TEST_CASE("api: distributed routes on two_ranks equal compute_distributed") {
  store& s = *shared_fixture().s;
  const direct r0(traces_dir() / "two_ranks" / "rank0.pt.trace.json.gz");
  const direct r1(traces_dir() / "two_ranks" / "rank1.pt.trace.json.gz");
  std::vector<an::distributed_worker_input> in = {
      {"rank0", &r0.model, r0.trees.used_devices, an::distributed_steps(r0.report.overview)},
      {"rank1", &r1.model, r1.trees.used_devices, an::distributed_steps(r1.report.overview)}};
  const an::distributed_result d = an::compute_distributed(in, an::rules().distributed);
  REQUIRE(d.available);
  const query_t q = {{"run", "two_ranks"}, {"worker", "All"}, {"span", "default"}};

  const json overlap = get_json(s, "distributed/overlap", q);
  CHECK(overlap["metadata"]["legends"] == json({"Computation", "Overlapping", "Communication", "Other"}));
  for (const auto& w : d.workers) {
    const json& all = overlap["data"]["all"][w.worker];
    REQUIRE(all.size() == 4);
    CHECK(all[0].get<double>() == w.overlap_all.computation);
    CHECK(all[1].get<double>() == w.overlap_all.overlap);
    CHECK(all[2].get<double>() == w.overlap_all.communication);
    CHECK(all[3].get<double>() == w.overlap_all.other);
    for (const auto& [step, bar] : w.overlap) CHECK(overlap["data"][step][w.worker][0].get<double>() == bar.computation);
  }
  const json wait = get_json(s, "distributed/waittime", q);
  for (const auto& w : d.workers) {
    CHECK(wait["data"]["all"][w.worker][0].get<double>() == w.wait_all.transfer);
    CHECK(wait["data"]["all"][w.worker][1].get<double>() == w.wait_all.synchronizing);
  }
  const json ops = get_json(s, "distributed/commops", q);
  for (const auto& w : d.workers) {
    const json& rows = ops["data"][w.worker]["rows"];
    REQUIRE(rows.size() == w.comm_ops.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      CHECK(rows[i][0] == w.comm_ops[i].name);
      CHECK(rows[i][1] == w.comm_ops[i].calls);
      CHECK(rows[i][2] == w.comm_ops[i].total_size_bytes);
      CHECK(rows[i][4].get<double>() == w.comm_ops[i].total_latency_us);
    }
  }
  CHECK(ops["data"][d.workers[0].worker]["columns"].size() == 8);
  const json gpu = get_json(s, "distributed/gpuinfo", q);
  if (d.device_info.empty()) CHECK(gpu.is_null());
  else CHECK(gpu["data"].size() == d.device_info.size());

  // A run without communication: the view is absent, answered with null (not an error).
  CHECK(get_json(s, "distributed/overlap", {{"run", "resnet50_v100"}, {"span", "1"}}).is_null());
  CHECK(get(s, "distributed/overlap", {{"run", "two_ranks"}, {"span", "9"}}).status == 404);
  CHECK(get(s, "distributed/overlap", {{"run", "two_ranks"}}).status == 400);
  CHECK(get(s, "distributed/bogus", q).status == 404);
}

TEST_CASE("api: one worker with communication has the Distributed view, as the plugin") {
  store& s = *shared_fixture().s;
  // rank0 of two_ranks alone (NCCL), and cuda_sync_simple_add (distributedInfo but no
  // communication op).
  temp_dir dir("one_rank");
  fs::create_directories(dir.path / "one_rank");
  fs::copy_file(traces_dir() / "two_ranks" / "rank0.pt.trace.json.gz", dir.path / "one_rank" / "rank0.pt.trace.json.gz");
  copy_run("cuda_sync_simple_add", dir.path);
  auto one = loaded_store(dir.path);

  const json views = get_json(*one, "views", {{"run", "one_rank"}});
  CHECK(std::find(views.begin(), views.end(), "Distributed") != views.end());
  CHECK(get_json(*one, "workers", {{"run", "one_rank"}, {"view", "Distributed"}}) == json({"All"}));
  CHECK(get_json(*one, "spans", {{"run", "one_rank"}, {"worker", "All"}}) == json({"default"}));
  for (const auto& [st, run] : {std::pair<store*, std::string>{one.get(), "cuda_sync_simple_add"}, {&s, "resnet50_v100"}}) {
    INFO(run);
    const json v = get_json(*st, "views", {{"run", run}});
    CHECK(std::find(v.begin(), v.end(), "Distributed") == v.end());
    CHECK(get_json(*st, "workers", {{"run", run}, {"view", "Distributed"}}) == json::array());
    CHECK(get_json(*st, "spans", {{"run", run}, {"worker", "All"}}) == json::array());
  }
  // cpu_only, one rank of a Gloo job with 10 gloo:all_reduce annotations: the plugin's view too.
  const json cpu_views = get_json(s, "views", {{"run", "cpu_only"}});
  CHECK(std::find(cpu_views.begin(), cpu_views.end(), "Distributed") != cpu_views.end());
  const json cpu_ops = get_json(s, "distributed/commops", {{"run", "cpu_only"}, {"span", "1"}});
  REQUIRE(cpu_ops["data"].size() == 1);
  const json& cpu_rows = cpu_ops["data"].begin().value()["rows"];
  REQUIRE(cpu_rows.size() == 1);
  CHECK(cpu_rows[0][0] == "gloo:all_reduce");
  CHECK(cpu_rows[0][1] == 10);
  CHECK(cpu_rows[0][6].get<double>() == cpu_rows[0][4].get<double>());

  const query_t q1 = {{"run", "one_rank"}, {"span", "default"}};
  const query_t q2 = {{"run", "two_ranks"}, {"span", "default"}};
  // Computation/communication overlap reads one worker's own trace: rank0's bars are those of
  // the two-rank run.
  const json overlap1 = get_json(*one, "distributed/overlap", q1);
  const json overlap2 = get_json(s, "distributed/overlap", q2);
  REQUIRE(overlap1["data"].is_object());
  CHECK(overlap1["data"].size() == overlap2["data"].size());
  for (const auto& [step, workers] : overlap1["data"].items()) {
    INFO(step);
    CHECK(workers.size() == 1);
    CHECK(workers["rank0"] == overlap2["data"][step]["rank0"]);
  }
  // Alone, a rank waits for nobody: all its communication time is data transfer.
  const json wait = get_json(*one, "distributed/waittime", q1);
  REQUIRE(wait["data"]["all"].contains("rank0"));
  CHECK(wait["data"]["all"]["rank0"][0].get<double>() > 0);
  for (const auto& [step, workers] : wait["data"].items()) CHECK(workers["rank0"][1].get<double>() == 0);
  const json ops1 = get_json(*one, "distributed/commops", q1);
  const json ops2 = get_json(s, "distributed/commops", q2);
  const json& rows1 = ops1["data"]["rank0"]["rows"];
  const json& rows2 = ops2["data"]["rank0"]["rows"];
  REQUIRE(rows1.size() == rows2.size());
  REQUIRE(!rows1.empty());
  for (std::size_t i = 0; i < rows1.size(); ++i) {
    INFO(rows1[i].dump());
    CHECK(rows1[i][0] == rows2[i][0]);                      // name
    CHECK(rows1[i][1] == rows2[i][1]);                      // calls
    CHECK(rows1[i][2] == rows2[i][2]);                      // total size
    CHECK(rows1[i][4] == rows2[i][4]);                      // total latency
    CHECK(rows1[i][6].get<double>() == rows1[i][4].get<double>());  // transfer = latency
  }
  const json gpu1 = get_json(*one, "distributed/gpuinfo", q1);
  const json gpu2 = get_json(s, "distributed/gpuinfo", q2);
  CHECK(gpu1.is_null() == gpu2.is_null());
  // No communication: no view, answered with null.
  const std::string sync_span = get_json(*one, "spans", {{"run", "cuda_sync_simple_add"}, {"worker", "benchmark_result_493459"}})[0];
  CHECK(get_json(*one, "distributed/overlap", {{"run", "cuda_sync_simple_add"}, {"span", sync_span}}).is_null());
}

TEST_CASE("api: memory bodies list the devices with rows and default to one of them, as the plugin") {
  store& s = *shared_fixture().s;
  // resnet50_v100's [memory] events have no address: no curve, no events, only statistics. The
  // plugin's curve and events bodies then default to "CPU".
  const direct resnet(traces_dir() / resnet_span1);
  REQUIRE(resnet.report.memory.present);
  const auto rq = profile_query("resnet50_v100", "worker0", "1");
  const json rcurve = get_json(s, "memory_curve", rq);
  CHECK(rcurve["metadata"]["devices"] == json::array());
  CHECK(rcurve["metadata"]["default_device"] == "CPU");
  const json revents = get_json(s, "memory_events", rq);
  CHECK(revents["rows"] == json::object());
  CHECK(revents["metadata"]["default_device"] == "CPU");
  const json rstats = get_json(s, "memory", rq);
  REQUIRE(rstats["rows"].contains("GPU0"));
  CHECK(rstats["metadata"]["default_device"] == "GPU0");
  for (const auto& [device, rows] : rstats["rows"].items()) CHECK(!rows.empty());

  temp_dir dir("two_devices");
  fs::create_directories(dir.path / "mem2");
  std::ofstream(dir.path / "mem2" / "mem2.pt.trace.json", std::ios::binary) << two_device_memory_trace_text();
  auto st = loaded_store(dir.path);
  const auto q = profile_query("mem2", "mem2", "default");
  const json all = get_json(*st, "memory", q);
  CHECK(all["rows"].size() == 2);
  CHECK(all["metadata"]["default_device"] == "GPU0");
  const double first_ts = get_json(*st, "memory_curve", q)["metadata"]["first_ts"].get<double>();
  auto range = [&](double lo, double hi) {
    return with(with(q, "start_ts", std::to_string(first_ts + lo)), "end_ts", std::to_string(first_ts + hi));
  };
  // [5, 20] µs holds the CPU allocation only: GPU0 is left out, and the default is CPU.
  for (const char* route : {"memory", "memory_events"}) {
    INFO(route);
    const json cpu = get_json(*st, route, range(5, 20));
    CHECK(cpu["rows"].size() == 1);
    CHECK(cpu["rows"]["CPU"].size() == 1);
    CHECK(cpu["metadata"]["default_device"] == "CPU");
    const json gpu = get_json(*st, route, range(40, 70));
    CHECK(gpu["rows"].size() == 1);
    REQUIRE(gpu["rows"].contains("GPU0"));
    CHECK(gpu["rows"]["GPU0"][0][0] == "aten::zeros");
    CHECK(gpu["metadata"]["default_device"] == "GPU0");
    const json none = get_json(*st, route, range(80, 90));
    CHECK(none["rows"] == json::object());
    CHECK(none["metadata"]["default_device"] == "CPU");
  }
}

TEST_CASE("api: /diffnode of diff_base vs diff_test equals compute_diff") {
  store& s = *shared_fixture().s;
  const direct base(traces_dir() / "diff_base" / "base.pt.trace.json.gz");
  const direct test(traces_dir() / "diff_test" / "test.pt.trace.json.gz");
  const an::diff_node root = an::compute_diff(base.trees, test.trees);
  const query_t q = {{"run", "diff_base"}, {"worker", "base"}, {"span", "default"},
                     {"exp_run", "diff_test"}, {"exp_worker", "test"}, {"exp_span", "default"}};
  const json j = get_json(s, "diffnode", q);
  CHECK(j["path"] == "0");
  CHECK(j["left"]["name"] == root.baseline.name);
  CHECK(j["left"]["duration"].get<double>() == root.baseline.duration);
  CHECK(j["right"]["total_duration"].get<double>() == root.experimental.total_duration);
  REQUIRE(j["left"]["aggs"].size() == root.baseline.aggs.size());
  if (!root.baseline.aggs.empty()) {
    CHECK(j["left"]["aggs"][0]["name"] == root.baseline.aggs[0].name);
    CHECK(j["left"]["aggs"][0]["calls"] == root.baseline.aggs[0].calls);
  }
  REQUIRE(j["children"].size() == root.children.size());
  for (std::size_t i = 0; i < root.children.size(); ++i) {
    CHECK(j["children"][i]["path"] == root.children[i].path);
    CHECK(j["children"][i]["left"]["name"] == root.children[i].baseline.name);
    CHECK_FALSE(j["children"][i].contains("children"));
  }
  // Drill down into the first child (when the trees have comparable children).
  if (!root.children.empty()) {
    const json child = get_json(s, "diffnode", with(q, "path", root.children[0].path));
    CHECK(child["path"] == root.children[0].path);
    CHECK(child["children"].size() == root.children[0].children.size());
  }
  CHECK(get(s, "diffnode", with(q, "path", "0-999")).status == 404);

  // The two spans of resnet50_v100 (the plugin's example): top-level children to drill into.
  const direct span1(traces_dir() / resnet_span1);
  const direct span2(traces_dir() / "resnet50_v100" / "worker0.1623143566756.pt.trace.json.gz");
  const an::diff_node rroot = an::compute_diff(span1.trees, span2.trees);
  REQUIRE(rroot.children.size() > 1);
  const query_t rq = {{"run", "resnet50_v100"}, {"worker", "worker0"}, {"span", "1"},
                      {"exp_run", "resnet50_v100"}, {"exp_worker", "worker0"}, {"exp_span", "2"}};
  const json rj = get_json(s, "diffnode", rq);
  CHECK(rj["left"]["name"] == "CompositeNodes");
  CHECK(rj["left"]["duration"].get<double>() == rroot.baseline.duration);
  CHECK(rj["right"]["device_duration"].get<double>() == rroot.experimental.device_duration);
  REQUIRE(rj["children"].size() == rroot.children.size());
  const an::diff_node& second = rroot.children[1];
  CHECK(rj["children"][1]["path"] == "0-1");
  CHECK(rj["children"][1]["left"]["total_duration"].get<double>() == second.baseline.total_duration);
  const json drill = get_json(s, "diffnode", with(rq, "path", "0-1"));
  CHECK(drill["path"] == "0-1");
  CHECK(drill["left"]["name"] == second.baseline.name);
  CHECK(drill["children"].size() == second.children.size());
  CHECK(get(s, "diffnode", with(q, "path", "0-x")).status == 400);
  query_t missing(q.begin(), q.end() - 1);
  const api_response r = get(s, "diffnode", missing);
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"] == "Must specify exp_span in request url");
}

TEST_CASE("api: memory routes, empty without memory data and real numbers with it") {
  store& s = *shared_fixture().s;
  // Without memory events: the documented empty payloads.
  const auto cq = profile_query("cpu_only", "rank-34.Jul_15_10_52_41", "1");
  const direct cpu(traces_dir() / "cpu_only" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz");
  if (!cpu.report.memory.present) {
    CHECK(get_json(s, "memory", cq)["rows"] == json::object());
    CHECK(get_json(s, "memory_events", cq)["rows"] == json::object());
    CHECK(get_json(s, "memory_curve", cq)["rows"] == json::object());
  }

  // The kinetoscope-written trace.
  const auto mq = profile_query("memrun", "mem", "default");
  const json stats = get_json(s, "memory", mq);
  CHECK(stats["metadata"]["default_device"] == "CPU");
  CHECK(stats["metadata"]["sort"] == "Self Size Increase (KB)");
  REQUIRE(stats["rows"].contains("CPU"));
  std::map<std::string, json> by_name;
  for (const auto& r : stats["rows"]["CPU"]) by_name[r[0].get<std::string>()] = r;
  REQUIRE(by_name.count("aten::empty") == 1);
  REQUIRE(by_name.count("aten::linear") == 1);
  // aten::empty: 1 call, +1 KB self; aten::linear: +3 KB with its child, +2 KB self.
  CHECK(by_name["aten::empty"] == json({"aten::empty", 1, 1.0, 1.0, 1, 1, 1.0, 1.0}));
  CHECK(by_name["aten::linear"] == json({"aten::linear", 1, 3.0, 2.0, 2, 1, 3.0, 2.0}));

  const json curve = get_json(s, "memory_curve", mq);
  CHECK(curve["metadata"]["devices"] == json({"CPU"}));
  CHECK(curve["metadata"]["peaks"]["CPU"] == "Peak Memory Usage: 0.0MB");
  CHECK(curve["metadata"]["time_metric"] == "ms");
  const json curve_kb = get_json(s, "memory_curve", with(mq, "memory_metric", "KB"));
  CHECK(curve_kb["metadata"]["peaks"]["CPU"] == "Peak Memory Usage: 3.0KB");
  REQUIRE(curve_kb["rows"]["CPU"].size() == 5);  // 3 records in the step shape
  CHECK(curve_kb["rows"]["CPU"][0][1] == 1.0);
  CHECK(curve_kb["rows"]["CPU"][0][2] == 4.0);

  const json events = get_json(s, "memory_events", with(mq, "time_metric", "us"));
  REQUIRE(events["rows"]["CPU"].size() == 2);
  // The 1 KB block: allocated at 12.5 µs (after the trace start), freed at 70 µs.
  const json& paired = events["rows"]["CPU"][0];
  CHECK(paired[0] == "aten::linear (aten::empty)");
  CHECK(paired[1] == 1.0);
  CHECK(paired[2] == 12.5);
  CHECK(paired[3] == 70.0);
  CHECK(paired[4] == 57.5);
  CHECK(events["rows"]["CPU"][1][3].is_null());  // the 2 KB block is never freed

  // A range [first_ts + 20, first_ts + 40] µs keeps only the 2 KB allocation of aten::linear.
  const double first_ts = curve["metadata"]["first_ts"].get<double>();
  const query_t ranged = with(with(mq, "start_ts", std::to_string(first_ts + 20)), "end_ts",
                              std::to_string(first_ts + 40));
  const json rstats = get_json(s, "memory", ranged);
  REQUIRE(rstats["rows"]["CPU"].size() == 1);
  CHECK(rstats["rows"]["CPU"][0] == json({"aten::linear", 1, 2.0, 2.0, 1, 1, 2.0, 2.0}));
  CHECK(get_json(s, "memory_events", ranged)["rows"]["CPU"].size() == 1);

  CHECK(get(s, "memory", with(mq, "start_ts", "abc")).status == 400);
  CHECK(get(s, "memory", with(mq, "end_ts", "1e999")).status == 400);
  CHECK(get(s, "memory", with(with(mq, "start_ts", "10"), "end_ts", "5")).status == 400);
  CHECK(get(s, "memory_curve", with(mq, "memory_metric", "PB")).status == 400);
  CHECK(get(s, "memory_events", with(mq, "time_metric", "days")).status == 400);
}

TEST_CASE("api: module, recommendations, diagnostics, scalars") {
  store& s = *shared_fixture().s;
  const auto q = profile_query("resnet50_v100", "worker0", "1");
  const direct d(traces_dir() / resnet_span1);
  const json module = get_json(s, "module", q);
  if (d.report.modules.kind == an::module_view_kind::none) CHECK(module.is_null());
  else CHECK(module["data"].size() == d.report.modules.rows.size());

  const json recs = get_json(s, "recommendations", q);
  REQUIRE(recs.size() == d.report.recommendations.size());
  bool data_loader = false;
  for (std::size_t i = 0; i < recs.size(); ++i) {
    CHECK(recs[i]["text"] == d.report.recommendations[i].text);
    CHECK(recs[i]["html"] == d.report.recommendations[i].html);
    CHECK(recs[i]["numbers"].is_object());
    if (d.report.recommendations[i].kind == an::recommendation_kind::data_loader) {
      data_loader = true;
      CHECK(recs[i]["numbers"]["avg_step_us"] == 177592);
      CHECK(recs[i]["numbers"]["avg_dataloader_us"] == 59262);
      CHECK(recs[i]["numbers"]["dataloader_pct"] == 33.37);
    }
  }
  CHECK(data_loader);

  const json diag = get_json(s, "diagnostics", q);
  CHECK(diag["events_by_category"] == json(d.model.diagnostics.events_by_category));
  CHECK(diag["attribution"]["kernels"] == d.trees.stats.kernels);
  CHECK(diag["file_bytes"] == fs::file_size(traces_dir() / resnet_span1));
  CHECK(diag["load_seconds"].get<double>() > 0);

  const json sc = get_json(s, "scalars", {{"run", "cpu_only"}});
  CHECK(sc["files"] == 1);
  CHECK(sc["errors"] == json::array());
  CHECK(sc["tags"]["loss"] == json::parse("[[1, 2.5, 1700000000.5], [2, 1.5, 1700000001.5]]"));
  CHECK(sc["tags"]["lr"] == json::parse("[[1, 0.125, 1700000000.5]]"));
  CHECK(sc["corrupt_records"] == 0);
  CHECK(sc["skipped_other_summaries"] == 0);
  // A corrupt record is reported and skipped; the rest of the file is still shown.
  const json bad = get_json(s, "scalars", {{"run", "diff_test"}});
  CHECK(bad["files"] == 1);
  CHECK(bad["corrupt_records"] == 1);
  REQUIRE(bad["errors"].size() == 1);
  CHECK(bad["errors"][0].get<std::string>().find("events.out.tfevents.") == 0);
  CHECK(bad["tags"]["loss"] == json::parse("[[1, 3.5, 1700000002.5]]"));
  const json no_scalars = json::parse(
      R"({"tags": {}, "files": 0, "errors": [], "skipped_other_summaries": 0, "corrupt_records": 0, "loading": false})");
  CHECK(get_json(s, "scalars", {{"run", "two_ranks"}}) == no_scalars);
}

namespace {

/// Every node of a /tree body, depth first, with its depth.
void tree_nodes(const json& n, int depth, std::vector<std::pair<const json*, int>>& out) {
  out.emplace_back(&n, depth);
  for (const auto& c : n["children"]) tree_nodes(c, depth + 1, out);
}

}  // namespace

TEST_CASE("api: /tree answers the operator tree of the Module view's timeline, as the plugin") {
  // The module fixture (two passes of TinyNet; times known, see tests/module_fixture.hpp).
  temp_dir dir("tree");
  fs::create_directories(dir.path / "tiny");
  std::ofstream(dir.path / "tiny" / "tiny.pt.trace.json", std::ios::binary)
      << kinetoscope::chrome_trace_string(module_fixture::tiny_net_trace());
  auto st = loaded_store(dir.path);
  const json tree = get_json(*st, "tree", profile_query("tiny", "tiny", "default"));
  CHECK(tree["name"] == "CallTreeRoot");
  CHECK(tree["type"] == "Python");
  std::vector<std::pair<const json*, int>> nodes;
  tree_nodes(tree, 0, nodes);
  // The main thread: the root, 2 steps, and per pass TinyNet, its 3 sub-modules, 5 operators
  // inside them and aten::mul after them (aten::mm runs on thread 2, a later tree).
  CHECK(nodes.size() == 1 + 2 + 2 * 10);
  int depth = 0;
  std::map<std::string, int> types;
  for (const auto& [n, d] : nodes) {
    depth = std::max(depth, d);
    ++types[(*n)["type"].get<std::string>()];
    CHECK((*n)["name"] != "aten::mm");
    CHECK((*n)["tid"] == tree["tid"]);
  }
  CHECK(depth == 5);  // root > step > TinyNet > fc1 > aten::linear > aten::addmm
  CHECK(types == std::map<std::string, int>{{"Python", 1}, {"ProfilerStep", 2}, {"Module", 8}, {"Operator", 12}});
  REQUIRE(tree["children"].size() == 2);
  const json& step3 = tree["children"][0];
  CHECK(step3["name"] == "ProfilerStep#3");
  CHECK(step3["end_time"].get<double>() - step3["start_time"].get<double>() == 155);
  REQUIRE(step3["children"].size() == 2);
  const json& net = step3["children"][0];
  CHECK(net["type"] == "Module");
  CHECK(net["end_time"].get<double>() - net["start_time"].get<double>() == 100);
  CHECK(net["start_time"].get<double>() - step3["start_time"].get<double>() == 5);
  CHECK(step3["children"][1]["name"] == "aten::mul");
  CHECK(tree["start_time"] == step3["start_time"]);
  CHECK(tree["end_time"] == tree["children"][1]["end_time"]);

  // resnet50_v100: the first tree holds every forward aten::conv2d call the plugin counted,
  // children inside their parents, and no runtime or kernel.
  store& s = *shared_fixture().s;
  const json rtree = get_json(s, "tree", profile_query("resnet50_v100", "worker0", "1"));
  CHECK(rtree["name"] == "CallTreeRoot");
  nodes.clear();
  tree_nodes(rtree, 0, nodes);
  std::int64_t conv = 0;
  for (const auto& [n, d] : nodes) {
    const std::string type = (*n)["type"].get<std::string>();
    CHECK((type == "Python" || type == "ProfilerStep" || type == "Operator" || type == "user_annotation" ||
           type == "Module" || type == "backward"));
    if ((*n)["name"] == "aten::conv2d") ++conv;
    for (const auto& c : (*n)["children"]) {
      CHECK(c["start_time"].get<double>() >= (*n)["start_time"].get<double>() - 1);
      CHECK(c["end_time"].get<double>() <= (*n)["end_time"].get<double>() + 1);
    }
  }
  std::int64_t golden_conv = -1;
  const json golden = golden_of(resnet_span1);
  for (const auto& r : golden["operators"]["by_name"])
    if (r["name"] == "aten::conv2d") golden_conv = r["calls"].get<std::int64_t>();
  CHECK(golden_conv > 0);
  CHECK(conv == golden_conv);
  CHECK(get(s, "tree", profile_query("resnet50_v100", "worker0", "9")).status == 404);
}

TEST_CASE("api: timeline routes reach the profile's timeline") {
  store& s = *shared_fixture().s;
  const auto q = profile_query("resnet50_v100", "worker0", "1");
  const json tracks = get_json(s, "timeline/tracks", q);
  REQUIRE(tracks["tracks"].is_array());
  CHECK(!tracks["tracks"].empty());
  const double duration = tracks["duration"].get<double>();
  CHECK(duration > 0);
  const json w = get_json(s, "timeline", with(with(with(q, "start", "0"), "end", std::to_string(duration)), "px", "800"));
  REQUIRE(w["slices"]["ts"].is_array());
  CHECK(!w["slices"]["ts"].empty());
  const std::int64_t id = [&] {
    for (const auto& v : w["slices"]["id"])
      if (v.get<std::int64_t>() >= 0) return v.get<std::int64_t>();
    return std::int64_t{-1};
  }();
  REQUIRE(id >= 0);
  const json ev = get_json(s, "timeline/event", with(q, "id", std::to_string(id)));
  CHECK(ev["id"] == id);
  CHECK(get(s, "timeline/event", with(q, "id", "4000000000")).status == 404);
  const json found = get_json(s, "timeline/search", with(with(q, "q", "ProfilerStep"), "limit", "3"));
  CHECK(found["results"].size() == 3);
  CHECK(found["total"].get<int>() >= 6);
  CHECK(get(s, "timeline", with(with(with(q, "start", "0"), "end", "10"), "px", "0")).status == 400);
  CHECK(get(s, "timeline", with(with(with(q, "start", "x"), "end", "10"), "px", "10")).status == 400);
  CHECK(get(s, "timeline", with(with(q, "start", "0"), "px", "10")).status == 400);
  CHECK(get(s, "timeline", with(with(with(with(q, "start", "0"), "end", "10"), "px", "10"), "tracks", "0,a")).status ==
        400);
  // Area summary and windowed counters (numbers pinned in test_timeline.cpp).
  int main_thread = -1, stream = -1;
  for (const auto& t : tracks["tracks"]) {
    if (t["name"] == "thread 25738 (python)") main_thread = t["id"].get<int>();
    if (t["name"] == "GPU 0 stream 7") stream = t["id"].get<int>();
  }
  REQUIRE(main_thread >= 0);
  REQUIRE(stream >= 0);
  const json sum = get_json(s, "timeline/summary",
                            with(with(with(q, "start", "450000"), "end", "451500"), "tracks",
                                 std::to_string(main_thread) + "," + std::to_string(stream)));
  CHECK(sum["slices"] == 71);
  REQUIRE(sum["gpus"].size() == 1);
  CHECK(sum["gpus"][0]["busy"].get<double>() == doctest::Approx(991));
  CHECK(get(s, "timeline/summary", with(q, "start", "0")).status == 400);
  CHECK(get(s, "timeline/summary", with(with(with(q, "start", "0"), "end", "1"), "tracks", "x")).status == 400);
  const json counters = get_json(s, "timeline/counters", with(with(with(q, "start", "0"), "end", std::to_string(duration)), "px", "50"));
  REQUIRE(counters["counters"].size() == 1);
  CHECK(counters["counters"][0]["name"] == "GPU 0 Est. SM Efficiency");
  CHECK(counters["counters"][0]["points"].size() <= 4 * 50 + 2);
  CHECK(get(s, "timeline/counters", with(with(q, "start", "0"), "end", "1")).status == 400);
  const json sub = get_json(s, "timeline/event", with(with(q, "id", std::to_string(id)), "subtree", "1"));
  CHECK(sub["id"] == id);
  CHECK(sub.contains("flows_truncated"));
}

TEST_CASE("api: validation answers 400 and 404 with JSON errors") {
  store& s = *shared_fixture().s;
  auto error_of = [&](const std::string& route, query_t q) {
    const api_response r = get(s, route, std::move(q));
    return std::pair{r.status, json::parse(r.body)["error"].get<std::string>()};
  };
  CHECK(error_of("overview", {}) == std::pair{400u, std::string("Must specify run in request url")});
  CHECK(error_of("overview", {{"run", "resnet50_v100"}, {"worker", "worker0"}}) ==
        std::pair{400u, std::string("Must specify span in request url")});
  CHECK(error_of("views", {}).first == 400);
  CHECK(error_of("views", {{"run", "nope"}}).first == 404);
  CHECK(error_of("overview", profile_query("nope", "worker0", "1")).first == 404);
  CHECK(error_of("overview", profile_query("resnet50_v100", "worker0", "3")).first == 404);
  CHECK(error_of("overview", profile_query("resnet50_v100", "worker9", "1")).first == 404);
  CHECK(error_of("no/such/route", {}).first == 404);
  CHECK(error_of("overview", {{"run", std::string(2000, 'a')}}).first == 400);
  CHECK(error_of("operation/stack", profile_query("resnet50_v100", "worker0", "1")) ==
        std::pair{400u, std::string("Must specify op_name in request url")});
  // Unknown parameters are ignored.
  CHECK(get(s, "overview", with(profile_query("resnet50_v100", "worker0", "1"), "x", "y")).status == 200);
}

TEST_CASE("api: concurrent handle() calls from 4 threads give identical bodies") {
  store& s = *shared_fixture().s;
  const auto q = profile_query("two_ranks", "rank0", "default");
  const std::vector<std::pair<std::string, query_t>> requests = {
      {"overview", q},
      {"operation/table", with(q, "group_by", "OperationAndInputShape")},
      {"kernel/table", q},
      {"distributed/overlap", {{"run", "two_ranks"}, {"span", "default"}}},
      {"recommendations", q},
      {"timeline/tracks", q},
      {"runs", {}},
      {"diffnode", {{"run", "two_ranks"}, {"worker", "rank0"}, {"span", "default"},
                    {"exp_run", "two_ranks"}, {"exp_worker", "rank1"}, {"exp_span", "default"}}},
  };
  std::vector<std::vector<std::string>> bodies(4);
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round)
        for (std::size_t i = 0; i < requests.size(); ++i) {
          const api_response r = get(s, requests[i].first, requests[i].second);
          std::string b = std::to_string(r.status) + r.body;
          if (round == 0) bodies[t].push_back(std::move(b));
          else if (bodies[t][i] != b) ++mismatches[t];
        }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) CHECK(mismatches[t] == 0);
  for (int t = 1; t < 4; ++t) CHECK(bodies[t] == bodies[0]);
  REQUIRE(bodies[0].size() == requests.size());
  for (const auto& b : bodies[0]) CHECK(b.starts_with("200"));
}

TEST_CASE("store: rescan picks up new, changed and removed files; symlinks out of the logdir are skipped") {
  temp_dir dir("rescan");
  temp_dir outside("outside");
  copy_run("cpu_only", dir.path);
  const auto owned = loaded_store(dir.path);
  store& s = *owned;
  CHECK(get_json(s, "runs")["runs"] == json({"cpu_only"}));

  // New run.
  copy_run("diff_base", dir.path);
  s.rescan();
  REQUIRE(s.wait_idle(load_timeout));
  CHECK(get_json(s, "runs")["runs"] == json({"cpu_only", "diff_base"}));

  // Changed file: diff_test's content under diff_base's name is reloaded.
  const auto q = profile_query("diff_base", "base", "default");
  const std::string before = get_json(s, "overview", q).dump();
  const auto old_profile = s.find("diff_base", "base", "default");
  fs::copy_file(traces_dir() / "diff_test" / "test.pt.trace.json.gz", dir.path / "diff_base" / "base.pt.trace.json.gz",
                fs::copy_options::overwrite_existing);
  s.rescan();
  REQUIRE(s.wait_idle(load_timeout));
  const auto new_profile = s.find("diff_base", "base", "default");
  REQUIRE(new_profile);
  CHECK(new_profile != old_profile);
  CHECK(new_profile->generation != old_profile->generation);
  CHECK(new_profile->file_bytes == fs::file_size(traces_dir() / "diff_test" / "test.pt.trace.json.gz"));
  const std::string after = get_json(s, "overview", q).dump();
  CHECK(after != before);
  // The old profile stays valid for whoever still holds it.
  CHECK(old_profile->file_bytes == fs::file_size(traces_dir() / "diff_base" / "base.pt.trace.json.gz"));

  // Removed file: the run is gone.
  fs::remove_all(dir.path / "diff_base");
  s.rescan();
  REQUIRE(s.wait_idle(load_timeout));
  CHECK(get_json(s, "runs")["runs"] == json({"cpu_only"}));
  CHECK(get(s, "overview", q).status == 404);

  // A symlink to a trace outside the logdir: listed as skipped, never loaded.
  copy_run("diff_test", outside.path);
  fs::create_directories(dir.path / "linked");
  fs::create_symlink(outside.path / "diff_test" / "test.pt.trace.json.gz", dir.path / "linked" / "test.pt.trace.json.gz");
  s.rescan();
  REQUIRE(s.wait_idle(load_timeout));
  bool skipped = false;
  const json status = get_json(s, "status");
  for (const auto& f : status["files"])
    if (f["run"] == "linked") {
      CHECK(f["state"] == "skipped");
      CHECK(f["error"].get<std::string>().find("outside the logdir") != std::string::npos);
      skipped = true;
    }
  CHECK(skipped);
  CHECK(get_json(s, "runs")["runs"] == json({"cpu_only"}));
  CHECK(get_json(s, "runs")["progress"]["files_total"] == 1);

  // With follow_outside_symlinks the same file loads.
  const auto following = loaded_store(dir.path, 0, true);
  store& follow = *following;
  CHECK(get_json(follow, "runs")["runs"] == json({"cpu_only", "linked"}));
}

/// A small valid trace (one operator), written by the test itself.
void write_small_trace(const fs::path& p, const std::string& op = "aten::mm") {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << R"J({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": ")J" << op
                   << R"J(", "pid": 1, "tid": 1, "ts": 10, "dur": 5}]})J";
}

TEST_CASE("store: symlinks leaving the logdir are not followed, files or directories; no target is shown") {
  temp_dir dir("symlinks");
  temp_dir outside("symlinks_outside");
  write_small_trace(dir.path / "run" / "a.pt.trace.json");
  write_small_trace(outside.path / "secret" / "x.pt.trace.json", "aten::secret");
  write_small_trace(outside.path / "shadow.pt.trace.json", "aten::shadow");
  write_small_trace(outside.path / "other.json", "aten::other");
  fs::create_directory_symlink(outside.path / "secret", dir.path / "linkdir");
  fs::create_directory_symlink("/", dir.path / "root");
  fs::create_symlink(outside.path / "shadow.pt.trace.json", dir.path / "run" / "evil.pt.trace.json");
  fs::create_symlink(outside.path / "other.json", dir.path / "run" / "other.json");
  fs::create_directory_symlink(dir.path / "run", dir.path / "inside");  // stays inside: followed
  const auto owned = loaded_store(dir.path);
  store& s = *owned;
  CHECK(get_json(s, "runs")["runs"] == json({"inside", "run"}));
  const api_response r = get(s, "status");
  REQUIRE(r.status == 200);
  CHECK(r.body.find(outside.path.string()) == std::string::npos);
  CHECK(r.body.find(dir.path.string()) == std::string::npos);
  const json status = json::parse(r.body);
  CHECK(status["logdir"] == dir.path.filename().string());
  CHECK(status["notes"] == json({"linkdir: a directory symlink leading outside the logdir, not followed (--follow_symlinks)",
                                 "root: a directory symlink leading outside the logdir, not followed (--follow_symlinks)",
                                 "inside/other.json: a symlink leading outside the logdir, not read (--follow_symlinks)",
                                 "run/other.json: a symlink leading outside the logdir, not read (--follow_symlinks)"}));
  std::vector<std::string> states;
  for (const auto& f : status["files"])
    states.push_back(f["path"].get<std::string>() + " " + f["state"].get<std::string>() + " " +
                     (f["error"].is_null() ? "-" : f["error"].get<std::string>()));
  const std::string not_followed = "skipped a symlink leading outside the logdir, not followed (--follow_symlinks)";
  CHECK(states == std::vector<std::string>{"inside/a.pt.trace.json loaded -", "inside/evil.pt.trace.json " + not_followed,
                                           "run/a.pt.trace.json loaded -", "run/evil.pt.trace.json " + not_followed});

  // --follow_symlinks: files and directories outside are read (the link to / is bounded).
  fs::remove(dir.path / "root");
  const auto following = loaded_store(dir.path, 0, true);
  store& follow = *following;
  CHECK(get_json(follow, "runs")["runs"] == json({"inside", "linkdir", "run"}));
  CHECK(get_json(follow, "status")["notes"] == json::array());
}

/// Makes this process unable to open any descriptor until destroyed (a soft limit of 0: every
/// new descriptor fails with EMFILE; the open ones stay usable).
struct no_descriptors {
  rlimit saved{};
  no_descriptors() {
    REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
    rlimit tight = saved;
    tight.rlim_cur = 0;
    REQUIRE(setrlimit(RLIMIT_NOFILE, &tight) == 0);
  }
  ~no_descriptors() { setrlimit(RLIMIT_NOFILE, &saved); }
};

TEST_CASE("store: out of descriptors, known files stay and loads are retried") {
  temp_dir dir("emfile");
  write_small_trace(dir.path / "run" / "a.pt.trace.json");
  write_small_trace(dir.path / "run" / "b.pt.trace.json");
  const auto owned = loaded_store(dir.path);
  store& s = *owned;
  REQUIRE(s.progress().files_loaded == 2);

  {  // A listing that fails drops nothing.
    std::vector<kinetoscope::server::file_status> during;
    std::vector<std::string> notes;
    {
      no_descriptors none;
      s.rescan();
      during = s.files();
      notes = s.notes();
    }
    CHECK(during.size() == 2);
    CHECK(notes == std::vector<std::string>{".: cannot be listed (Too many open files)"});
    CHECK(s.run_known("run"));
    CHECK(get_json(s, "runs")["runs"] == json({"run"}));
  }

  // A load that cannot open its file waits and retries; it is not failed for good. A big file
  // queued first keeps the loader busy while the descriptors are taken away.
  {
    std::ofstream big(dir.path / "run" / "0big.pt.trace.json");
    big << R"J({"traceEvents": [)J";
    for (int i = 0; i < 400000; ++i)
      big << (i ? "," : "") << R"J({"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": )J"
          << i * 10 << R"J(, "dur": 5})J" << '\n';
    big << "]}";
  }
  write_small_trace(dir.path / "run" / "b.pt.trace.json", "aten::changed");
  s.rescan();  // queues 0big, then b
  std::string retry_error;
  kinetoscope::server::file_state retry_state = kinetoscope::server::file_state::failed;
  {
    no_descriptors none;
    for (int i = 0; i < 2400 && retry_error.empty(); ++i) {  // up to 60 s (sanitizer builds are slow)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
      for (const auto& f : s.files())
        if (f.path == "run/b.pt.trace.json" && f.error.starts_with("will retry: ")) {
          retry_error = f.error;
          retry_state = f.state;
        }
    }
  }
  std::string states;
  for (const auto& f : s.files())
    states += f.path + " " + std::string(kinetoscope::server::file_state_name(f.state)) + " " + f.error + "; ";
  CAPTURE(states);
  CHECK(retry_error == "will retry: run/b.pt.trace.json: cannot open file: Too many open files");
  CHECK(retry_state == kinetoscope::server::file_state::queued);
  REQUIRE(s.wait_idle(load_timeout));
  const auto files = s.files();
  REQUIRE(files.size() == 3);
  for (const auto& f : files) {
    CAPTURE(f.path);
    CHECK(f.state == kinetoscope::server::file_state::loaded);
  }
  const auto b = s.find("run", "b", "default");
  REQUIRE(b);
  CHECK(b->model.str(b->model.events[0].name) == "aten::changed");
}

TEST_CASE("store: scalars are read by the scanner, incrementally, and answered from memory") {
  temp_dir dir("scalars");
  write_small_trace(dir.path / "run" / "a.pt.trace.json");
  kinetoscope::event_file_writer w((dir.path / "run").string());
  w.add_scalars(1, {{"loss", 2.5f}}, 1700000000.5);
  const auto owned = loaded_store(dir.path);
  store& s = *owned;
  CHECK(get_json(s, "scalars", {{"run", "run"}})["tags"]["loss"] == json::parse("[[1, 2.5, 1700000000.5]]"));

  // Appended records are read from where the last scan stopped: no point twice.
  w.add_scalars(2, {{"loss", 1.5f}}, 1700000001.5);
  w.add_scalars(3, {{"loss", 0.5f}, {"lr", 0.25f}}, 1700000002.5);
  s.rescan();
  const json sc = get_json(s, "scalars", {{"run", "run"}});
  CHECK(sc["tags"]["loss"] == json::parse("[[1, 2.5, 1700000000.5], [2, 1.5, 1700000001.5], [3, 0.5, 1700000002.5]]"));
  CHECK(sc["tags"]["lr"] == json::parse("[[3, 0.25, 1700000002.5]]"));
  CHECK(sc["files"] == 1);
  CHECK(sc["loading"] == false);

  // A request never reads the file: with it gone, the answer is what the last scan read.
  fs::remove(w.path());
  CHECK(get_json(s, "scalars", {{"run", "run"}}) == sc);
  s.rescan();  // the next scan sees it gone
  CHECK(get_json(s, "scalars", {{"run", "run"}})["files"] == 0);

  // Bounded: a tag with 50 000 points keeps at most 20 000, thinned evenly.
  {
    kinetoscope::event_file_writer many((dir.path / "run").string(), ".many");
    for (int i = 0; i < 50000; ++i) many.add_scalars(i, {{"step_time", static_cast<float>(i)}}, 1700000000.0 + i);
  }
  s.rescan();
  const json thin = get_json(s, "scalars", {{"run", "run"}})["tags"]["step_time"];
  REQUIRE(thin.size() == 12500);  // 50 000 -> 25 000 -> 12 500
  for (std::size_t i = 0; i < thin.size(); ++i) REQUIRE(thin[i][0] == static_cast<std::int64_t>(4 * i));
}

TEST_CASE("store: the destructor stops a store with a reload interval promptly") {
  temp_dir dir("stop");
  copy_run("cpu_only", dir.path);
  const auto t0 = std::chrono::steady_clock::now();
  {
    const auto s = loaded_store(dir.path, 3600);
    CHECK(s->progress().files_loaded == 1);
  }
  // Loading one tiny file and stopping takes far less than the hour of the reload interval.
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60));
}

TEST_CASE("store: op trees that fit in the trace's JSON size are kept with the profile") {
  temp_dir dir("trees");
  fs::create_directories(dir.path / "resnet50_v100");
  fs::copy_file(traces_dir() / resnet_span1, dir.path / resnet_span1);
  const direct d(traces_dir() / resnet_span1);
  const auto q = profile_query("resnet50_v100", "worker0", "1");
  const auto s = loaded_store(dir.path);
  const auto p = s->find("resnet50_v100", "worker0", "1");
  REQUIRE(p);
  CHECK(p->keeps_trees());
  CHECK(p->heap_bytes() <= p->model.diagnostics.text_bytes);
  CHECK(p->used_devices == d.trees.used_devices);
  CHECK(p->tree_stats.kernels == d.trees.stats.kernels);
  CHECK(get_json(*s, "diagnostics", q)["attribution"]["kernels"] == d.trees.stats.kernels);

  // Call stacks (the route that needs the trees) answer from the kept trees: nothing is built.
  int stacks = 0;
  for (const an::operator_row& r : d.report.operators_by_name) {
    if (!r.has_call_stack || ++stacks > 3) continue;
    const json j = get_json(*s, "operation/stack", with(q, "op_name", r.name));
    const auto rows = an::operator_stack_rows(d.model, d.trees, r.name, std::nullopt, d.report.device_columns);
    REQUIRE(j["data"].size() == rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      CHECK(j["data"][i]["name"] == rows[i].name);
      CHECK(j["data"][i]["calls"] == rows[i].calls);
      CHECK(j["data"][i]["call_stack"] == rows[i].call_stack);
      CHECK(j["data"][i]["host_self_duration"].get<double>() == rows[i].host_self_us);
    }
  }
  CHECK(stacks > 3);
  CHECK(s->trees(p) == s->trees(p));
  CHECK(s->trees(p)->nodes.size() == d.trees.nodes.size());
  CHECK(s->trees_built() == 0);
}

TEST_CASE("store: on many small events the op trees are dropped after the load, rebuilt on demand, shared and cached") {
  temp_dir dir("small");
  const std::string text = kinetoscope::test::small_events_trace();
  fs::create_directories(dir.path / "run");
  std::ofstream(dir.path / "run" / "w.pt.trace.json", std::ios::binary) << text;
  const direct d(dir.path / "run" / "w.pt.trace.json");
  const an::diff_node expected = an::compute_diff(d.trees, d.trees);
  const query_t q = {{"run", "run"}, {"worker", "w"}, {"span", "default"},
                     {"exp_run", "run"}, {"exp_worker", "w"}, {"exp_span", "default"}};

  for (const std::uint64_t budget : {std::uint64_t{256} << 20, std::uint64_t{0}}) {
    INFO("tree cache budget " << budget);
    store_options o;
    o.logdir = dir.path.string();
    o.reload_interval_s = 0;
    o.tree_cache_bytes = budget;
    store s(o);
    s.start();
    REQUIRE(s.wait_idle(load_timeout));
    const auto p = s.find("run", "w", "default");
    REQUIRE(p);
    REQUIRE(p->model.events.size() == 40 * 1001);
    REQUIRE(p->timeline);
    CHECK(p->model.diagnostics.text_bytes == text.size());
    // What the profile keeps (model ~64 bytes an event, timeline ~28) is less than the JSON
    // (~140); with the trees (~170 more) it would be twice the JSON, so they were dropped.
    CHECK_FALSE(p->keeps_trees());
    const double per_event = static_cast<double>(p->heap_bytes()) / static_cast<double>(p->model.events.size());
    const double json_per_event = static_cast<double>(text.size()) / static_cast<double>(p->model.events.size());
    MESSAGE("kept: " << per_event << " bytes per event; JSON: " << json_per_event);
    CHECK(per_event < json_per_event);
    // Every view was computed before they went: no tree is built to answer them.
    CHECK(get_json(s, "overview", profile_query("run", "w", "default"))["steps"]["rows"].size() == 40);
    CHECK(get_json(s, "operation/table", profile_query("run", "w", "default"))["data"].size() == 4);  // the four aten ops
    CHECK(s.trees_built() == 0);

    // Diff needs both sides' trees: built once (both sides are the same profile, shared).
    const json j = get_json(s, "diffnode", q);
    CHECK(j["left"]["duration"].get<double>() == expected.baseline.duration);
    CHECK(j["right"]["total_duration"].get<double>() == expected.experimental.total_duration);
    CHECK(j["children"].size() == expected.children.size());
    CHECK(s.trees_built() == 1);
    // Asked again: from the cache within the budget, rebuilt without one.
    CHECK(s.trees(p)->nodes.size() == d.trees.nodes.size());
    CHECK(s.trees_built() == (budget > 0 ? 1U : 2U));
    {
      // Whoever holds the trees shares them: no build while they are in use.
      const auto held = s.trees(p);
      const std::uint64_t built = s.trees_built();
      CHECK(s.trees(p) == held);
      CHECK(s.trees_built() == built);
    }
    // Concurrent requests all get complete trees.
    std::vector<std::thread> threads;
    std::vector<std::size_t> sizes(4, 0);
    for (std::size_t t = 0; t < sizes.size(); ++t)
      threads.emplace_back([&, t] { sizes[t] = s.trees(p)->nodes.size(); });
    for (auto& t : threads) t.join();
    for (const std::size_t n : sizes) CHECK(n == d.trees.nodes.size());
    if (budget > 0) CHECK(s.trees_built() == 1);
  }
}

// ---------------------------------------------------------------------------------------------
// One field table per row type (server/row_fields.hpp): `analyze --json` and the API list the
// same fields of each row, each in its own names.

namespace {

namespace fl = kinetoscope::server::fields;

std::set<std::string> keys_of(const json& object) {
  std::set<std::string> k;
  for (const auto& [key, value] : object.items()) k.insert(key);
  return k;
}

/// The CLI's and the API's names of a row type's fields, and the CLI names of the fields both
/// carry translated to the API's.
struct field_names {
  std::set<std::string> cli, api, shared_as_api;
};

template <typename Row, typename... Options>
field_names names_of(const Options&... options) {
  field_names n;
  std::set<std::string> cli_as_api;
  const auto on_cli = [&](const fl::field& f, const fl::ojson&) {
    if (!f.cli.empty()) n.cli.insert(std::string(f.cli));
    if (!f.cli.empty() && !f.api.empty()) cli_as_api.insert(std::string(f.api));
  };
  const auto on_api = [&](const fl::field& f, const fl::ojson&) {
    if (!f.api.empty()) n.api.insert(std::string(f.api));
  };
  if constexpr (sizeof...(Options) == 0) {
    fl::for_each_field(Row{}, on_cli);
    fl::for_each_field(Row{}, on_api);
  } else {
    fl::for_each_field(Row{}, fl::output::cli, options..., on_cli);
    fl::for_each_field(Row{}, fl::output::api, options..., on_api);
  }
  for (const std::string& a : cli_as_api)
    if (n.api.count(a) != 0) n.shared_as_api.insert(a);
  return n;
}

std::set<std::string> column_titles(const json& columns, const char* key = "name") {
  std::set<std::string> t;
  for (const auto& c : columns) t.insert(c[key].get<std::string>());
  return t;
}

bool subset(const std::set<std::string>& a, const std::set<std::string>& b) {
  return std::includes(b.begin(), b.end(), a.begin(), a.end());
}

}  // namespace

TEST_CASE("api and analyze --json carry the same fields of operator, kernel and step rows") {
  store& s = *shared_fixture().s;
  const char* bin = std::getenv("KINETOSCOPE_BIN");
  REQUIRE(bin != nullptr);
  const auto run = kinetoscope::test::run_command("(\"" + std::string(bin) + "\" analyze \"" +
                                                  (traces_dir() / resnet_span1).string() + "\" --json 2>/dev/null)");
  REQUIRE(run.status == 0);
  const json cli = json::parse(run.output);
  const auto q = profile_query("resnet50_v100", "worker0", "1");

  for (bool by_shape : {false, true}) {
    const fl::operator_fields opt{by_shape, true, false};
    const field_names n = names_of<an::operator_row>(opt);
    const json& cli_row = cli["operators"][by_shape ? "by_name_and_input_shape" : "by_name"].at(0);
    const json api_row =
        get_json(s, "operation/table", with(q, "group_by", by_shape ? "OperationAndInputShape" : "Operation"))["data"]
            .at(0);
    CHECK(keys_of(cli_row) == n.cli);
    CHECK(keys_of(api_row) == n.api);
    CHECK(subset(n.shared_as_api, keys_of(api_row)));
    CHECK(n.shared_as_api.size() == n.cli.size());  // every CLI field is in the API too
  }

  const json kt = get_json(s, "kernel/table", q);
  const std::set<std::string> kernel_titles = column_titles(kt["data"]["columns"]);
  // The API drops the optional columns no kernel has (the CLI always writes them).
  const fl::kernel_fields shown{kernel_titles.count("Mean Blocks Per SM") == 1,
                                kernel_titles.count("Mean Est. Achieved Occupancy (%)") == 1};
  const field_names kn = names_of<an::kernel_row>(shown);
  CHECK(keys_of(cli["kernels"]["by_name"].at(0)) == kn.cli);
  CHECK(kernel_titles == kn.api);
  CHECK(kn.shared_as_api == kn.api);
  const json kot = get_json(s, "kernel/table", with(q, "group_by", "KernelNameAndOpName"));
  const field_names kon = names_of<an::kernel_op_row>(shown);
  CHECK(keys_of(cli["kernels"]["by_name_and_operator"].at(0)) == kon.cli);
  CHECK(column_titles(kot["data"]["columns"]) == kon.api);
  CHECK(subset(kon.shared_as_api, kon.api));

  const json ov = get_json(s, "overview", q);
  std::set<std::string> step_cli{"name", "total"};
  for (std::string_view k : fl::step_role_keys) step_cli.insert(std::string(k));
  CHECK(keys_of(cli["overview"]["steps"].at(0)) == step_cli);
  std::set<std::string> step_api;
  for (const auto& c : ov["steps"]["columns"])
    if (c.contains("name")) step_api.insert(c["name"].get<std::string>());
  const field_names sn = names_of<an::step_row>(nullptr, true);
  CHECK(subset(step_api, sn.api));  // the API shows the roles the Overview shows
  CHECK(step_api.count("Step") == 1);

  const field_names mn = names_of<an::memory_stat_row>();
  CHECK(mn.cli.size() == mn.api.size());
  CHECK(mn.shared_as_api == mn.api);
  const field_names cn = names_of<an::comm_op_row>();
  CHECK(cn.shared_as_api == cn.api);
  const field_names modn = names_of<an::module_row>();
  CHECK(modn.shared_as_api == modn.api);
}

TEST_CASE("store: progress moves in bytes during one big load, names the file; /runs lists runs as discovered") {
  temp_dir dir("progress");
  const fs::path big = dir.path / "big" / "big.pt.trace.json";
  fs::create_directories(big.parent_path());
  {
    std::ofstream out(big);
    out << R"J({"traceEvents": [)J";
    for (int i = 0; i < 500000; ++i)
      out << (i ? "," : "") << R"J({"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": )J"
          << i * 10 << R"J(, "dur": 5})J" << '\n';
    out << "]}";
  }
  const std::uint64_t total = fs::file_size(big);
  REQUIRE(total > (std::uint64_t{40} << 20));  // more than two 16 MB chunks of the streamed path

  store_options o;
  o.logdir = dir.path.string();
  o.reload_interval_s = 0;
  store s(o);
  std::atomic<bool> done{false};
  std::vector<kinetoscope::server::load_progress> samples;
  bool listed_loading = false;  // the run was discovered (pending, nothing loaded) before its load ended
  std::thread sampler([&] {
    while (!done.load()) {
      samples.push_back(s.progress());
      for (const auto& r : s.discovered_runs())
        if (r.name == "big" && r.files_pending == 1 && r.files_loaded == 0 && s.runs().empty()) listed_loading = true;
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  s.start();
  const bool idle = s.wait_idle(load_timeout);
  done = true;
  sampler.join();
  REQUIRE(idle);

  // One check over all samples (thousands of them): counts of the samples breaking each rule.
  std::set<std::uint64_t> partial;
  std::size_t over_total = 0, over_loaded = 0, partial_wrong_total = 0;
  for (const auto& p : samples) {
    over_total += p.bytes_total > total;
    over_loaded += p.bytes_loaded > p.bytes_total;
    if (p.current_file == "big/big.pt.trace.json" && p.bytes_loaded > 0 && p.bytes_loaded < total) {
      partial_wrong_total += p.bytes_total != total;
      partial.insert(p.bytes_loaded);
    }
  }
  CAPTURE(samples.size());
  CHECK(over_total == 0);
  CHECK(over_loaded == 0);
  CHECK(partial_wrong_total == 0);
  CHECK(!partial.empty());
  CHECK(listed_loading);
  const auto end = s.progress();
  CHECK(end.bytes_loaded == total);
  CHECK(end.current_file.empty());
  CHECK_FALSE(end.loading);
  const json runs = get_json(s, "runs");
  CHECK(runs["progress"]["current_file"].is_null());
  CHECK(runs["latest"] == "big");

  // A newer run: /runs names it the latest (newest trace file mtime); an older failed one is
  // listed as discovered, with its state, but not among the loaded runs.
  write_small_trace(dir.path / "newer" / "a.pt.trace.json");
  fs::create_directories(dir.path / "broken");
  std::ofstream(dir.path / "broken" / "b.pt.trace.json") << "{\"traceEvents\": [";
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(big, now - std::chrono::hours(2));
  fs::last_write_time(dir.path / "broken" / "b.pt.trace.json", now - std::chrono::hours(3));
  fs::last_write_time(dir.path / "newer" / "a.pt.trace.json", now - std::chrono::hours(1));
  s.rescan();
  REQUIRE(s.wait_idle(load_timeout));
  const json after = get_json(s, "runs");
  CHECK(after["runs"] == json({"big", "newer"}));
  CHECK(after["latest"] == "newer");
  REQUIRE(after["discovered"].size() == 3);
  CHECK(after["discovered"][0]["run"] == "big");
  CHECK(after["discovered"][0]["state"] == "loaded");
  CHECK(after["discovered"][1]["run"] == "broken");
  CHECK(after["discovered"][1]["state"] == "failed");
  CHECK(after["discovered"][1]["files_failed"] == 1);
  CHECK(after["discovered"][2]["run"] == "newer");
  CHECK(after["discovered"][2]["files_loaded"] == 1);
  CHECK(after["discovered"][2]["files_pending"] == 0);
  CHECK(after["discovered"][2]["mtime"].get<double>() > after["discovered"][0]["mtime"].get<double>());
}

TEST_CASE("api: /recommendations name the view state that shows each finding (resnet50_v100 span 1)") {
  store& s = *shared_fixture().s;
  const auto q = profile_query("resnet50_v100", "worker0", "1");
  const direct d(traces_dir() / resnet_span1);
  const json recs = get_json(s, "recommendations", q);
  const double origin = get_json(s, "timeline/tracks", q)["t0"].get<double>();
  REQUIRE(recs.size() == d.report.recommendations.size());
  std::set<std::string> kinds;
  bool idle = false;
  for (std::size_t i = 0; i < recs.size(); ++i) {
    const json& t = recs[i]["target"];
    const an::recommendation& r = d.report.recommendations[i];
    CAPTURE(r.text);
    REQUIRE(t.is_object());
    kinds.insert(t["kind"].get<std::string>());
    CHECK(t["kind"] == an::target_kind_name(r.target.kind));
    CHECK(t["view"] == r.target.view);
    CHECK(t["state"].is_object());
    if (r.kind == an::recommendation_kind::data_loader) CHECK(t == json::parse(R"({"kind": "view", "view": "Overview", "state": {}})"));
    if (r.kind != an::recommendation_kind::idle_gpu) continue;
    idle = true;
    // The window is the idle stretch the text talks about: no GPU 0 work overlaps it, GPU work
    // (or the step's edge) touches both ends, and its length is the text's.
    REQUIRE(t["kind"] == "trace");
    CHECK(t["view"] == "Trace");
    CHECK(t["device"] == 0);
    const double start = t["start_us"].get<double>(), end = t["end_us"].get<double>();
    // Step 5 (ProfilerStep#5) starts at 1623142623460172; GPU 0's first work after it at ...529248.
    CHECK(start == 1623142623460172.0);
    CHECK(end == 1623142623529248.0);
    CHECK(r.text.starts_with("GPU 0 is idle for 69.1 ms in one stretch (step 5, 0.0 ms after its start)."));
    CHECK(t["state"]["t0"].get<double>() == doctest::Approx(start - origin).epsilon(1e-12));
    CHECK(t["state"]["t1"].get<double>() == doctest::Approx(end - origin).epsilon(1e-12));
    bool touches_start = false, touches_end = false;
    for (const an::event& e : d.model.events) {
      if (e.type != an::event_type::kernel && e.type != an::event_type::memcpy && e.type != an::event_type::memset) continue;
      CHECK_FALSE((e.ts < end && e.end() > start));
      if (e.end() == start) touches_start = true;
      if (e.ts == end) touches_end = true;
    }
    bool step_edge_start = false, step_edge_end = false;
    for (const auto& st : d.report.overview.steps) {
      if (st.start == start) step_edge_start = true;
      if (st.end == end) step_edge_end = true;
    }
    CHECK((touches_start || step_edge_start));
    CHECK((touches_end || step_edge_end));
    char ms[32];
    std::snprintf(ms, sizeof ms, "idle for %.1f ms", (end - start) / 1000.0);
    CHECK(r.text.find(ms) != std::string::npos);
  }
  CHECK(idle);
  CHECK(kinds.count("trace") == 1);
}

TEST_CASE("api: /distributed/ranks on a generated 8-rank job equals analyze_job over the profiles' summaries") {
  temp_dir dir("job");
  namespace kb = kinetoscope::bench;
  kb::dist_job_options o;
  o.ranks = 8;
  o.steps = 6;
  o.layers = 6;
  o.slow_compute = {3, {2}, 0.6};
  const kb::dist_job_report rep = kb::write_dist_job(dir.path / "job", o);
  const auto s = loaded_store(dir.path);
  // The store's job view is computed once per set of profiles.
  const auto job = s->job("job", "1");
  REQUIRE(job);
  CHECK(s->job("job", "1") == job);
  CHECK(s->job("job", "9") == nullptr);
  // The rank summaries computed here from each full profile equal those the store keeps.
  std::vector<an::rank_summary> ranks;
  for (std::size_t i = 0; i < rep.workers.size(); ++i) {
    const auto p = s->find("job", rep.workers[i], "1");
    REQUIRE(p);
    ranks.push_back(an::summarize_rank(p->model, p->report.overview));
    CHECK(ranks.back().steps.size() == 6);
    const auto sum = s->find_summary("job", rep.workers[i], "1");
    REQUIRE(sum);
    CHECK(sum->rank == ranks.back());
    CHECK(sum->rank_id == static_cast<std::int64_t>(i));
  }
  std::vector<an::job_input> in;
  for (std::size_t i = 0; i < rep.workers.size(); ++i)
    in.push_back({rep.workers[i], static_cast<std::int64_t>(i), &ranks[i]});
  const an::job_result direct_job = an::analyze_job(in);
  REQUIRE(job->stragglers.size() == 1);
  CHECK(direct_job.stragglers.size() == 1);

  const query_t q = {{"run", "job"}, {"span", "1"}, {"top", "5"}};
  const json body = get_json(*s, "distributed/ranks", q);
  CHECK(body["span"] == "1");
  REQUIRE(body["ranks"].size() == 8);
  CHECK(body["ranks"][3] == json({{"worker", "node0_3"}, {"rank", 3}}));
  CHECK(body["steps"].size() == 6);
  CHECK(body["metrics"] == json({"step_time", "compute", "communication", "overlap", "wait", "data_loading"}));
  for (std::size_t m = 0; m < an::job_metric_count; ++m) {
    const json& rows = body["heatmaps"][std::string(an::job_metric_name(static_cast<an::job_metric>(m)))];
    REQUIRE(rows.size() == 8);
    for (std::size_t r = 0; r < 8; ++r)
      for (std::size_t c = 0; c < 6; ++c) CHECK(rows[r][c].get<double>() == std::round(job->heatmaps[m][r * 6 + c]));
  }
  CHECK(body["step_start"][2][4].get<double>() == job->step_start[2 * 6 + 4]);
  CHECK(body["step_end"][2][4].get<double>() == job->step_end[2 * 6 + 4]);
  const json& st = body["stragglers"];
  REQUIRE(st.size() == 1);
  CHECK(st[0]["worker"] == "node0_3");
  CHECK(st[0]["rank"] == 3);
  CHECK(st[0]["step_index"] == 2);
  CHECK(st[0]["step"] == body["steps"][2]);
  CHECK(st[0]["cause"] == "compute");
  CHECK(st[0]["start"].get<double>() == job->step_start[3 * 6 + 2]);
  const json& colls = body["collectives"];
  CHECK(colls["total"] == job->collectives.size());
  CHECK(colls["matched_by"] == "seq");
  CHECK(colls["unmatched"] == 0);
  REQUIRE(colls["top"].size() == 5);
  double max_skew = 0;
  for (const an::job_collective& c : job->collectives) max_skew = std::max(max_skew, c.skew);
  CHECK(colls["top"][0]["skew_us"].get<double>() == max_skew);
  CHECK(colls["max_skew_us"].get<double>() == max_skew);
  for (std::size_t i = 1; i < 5; ++i) CHECK(colls["top"][i]["skew_us"].get<double>() <= colls["top"][i - 1]["skew_us"].get<double>());
  CHECK(colls["top"][0]["arrivals"].size() == colls["top"][0]["ranks"].get<std::size_t>());
  // Validation.
  CHECK(get(*s, "distributed/ranks", {{"run", "job"}}).status == 400);
  CHECK(get(*s, "distributed/ranks", {{"run", "job"}, {"span", "9"}}).status == 404);
  CHECK(get(*s, "distributed/ranks", {{"run", "job"}, {"span", "1"}, {"top", "x"}}).status == 400);
  CHECK(get_json(*s, "distributed/ranks", {{"run", "job"}, {"span", "1"}, {"top", "0"}})["collectives"]["top"].empty());
}

// ---------------------------------------------------------------------------------------------
// The two rule sets on the API (docs/kinetoscope-rules.md, analysis/rules.hpp): `rules=` on any
// analysis route, the store's set by default.

#include "server/payloads.hpp"

namespace {

/// The analysis engine run directly on a trace file under rule set `set`, with the views the
/// store computes for a profile (store::views()).
struct direct_rules {
  an::trace_model model;
  an::op_trees trees;
  kinetoscope::server::profile_views views;
  direct_rules(const fs::path& p, an::rule_set set) {
    an::load_result r = an::load_trace(p.string());
    REQUIRE(r.ok());
    model = std::move(*r.model);
    const an::analysis_rules rules = an::rules(set);
    trees = an::build_op_tree(model, rules.tree);
    views.rules = set;
    views.tree_stats = trees.stats;
    views.used_devices = trees.used_devices;
    views.report = an::compute_report(model, trees, rules.report());
    views.tc_kernel_ratio = an::tc_kernel_ratio(model, trees);
    views.eligible_op_kernel_ratio = an::eligible_op_kernel_ratio(trees);
    views.kernel_view = an::kernel_view_present(model, trees);
    views.kernel_columns = an::kernel_view_metric_columns(model);
  }
};

/// A payload as the API writes it (api.cpp's dump()).
std::string body_of(const kinetoscope::server::payloads::ojson& j) {
  return j.dump(-1, ' ', false, kinetoscope::server::payloads::ojson::error_handler_t::replace);
}

/// The operator names of /kernel/table?group_by=KernelNameAndOpName, and the sum of its raw
/// totals.
std::pair<std::set<std::string>, double> kernel_operators(const json& table) {
  std::set<std::string> ops;
  double total = 0;
  for (const json& r : table["data"]["rows"]) {
    ops.insert(r[1].get<std::string>());
    total += r[9].get<double>();
  }
  return {ops, total};
}

}  // namespace

TEST_CASE("api: rules= must be kinetoscope or plugin; /status names the store's rule set") {
  store& s = *shared_fixture().s;
  CHECK(get_json(s, "status")["rules"] == "kinetoscope");
  const query_t q = profile_query("resnet50_v100", "worker0", "1");
  for (const std::string bad : {"", "bogus", "Plugin", "KINETOSCOPE", "plugin ", "improved", "torch-tb-profiler"}) {
    INFO("rules='" << bad << "'");
    for (const std::string route : {"overview", "operation/table", "kernel/table", "kernel/tc_pie", "memory", "module",
                                    "recommendations"}) {
      INFO(route);
      const api_response r = get(s, route, with(q, "rules", bad));
      CHECK(r.status == 400);
      CHECK(json::parse(r.body)["error"].get<std::string>().find("rules must be kinetoscope or plugin") == 0);
    }
    CHECK(get(s, "distributed/overlap", {{"run", "two_ranks"}, {"worker", "All"}, {"span", "default"}, {"rules", bad}}).status == 400);
    CHECK(get(s, "views", {{"run", "two_ranks"}, {"rules", bad}}).status == 400);
  }
  // Both valid values are accepted everywhere, status included.
  for (const char* good : {"plugin", "kinetoscope"}) {
    CHECK(get(s, "overview", with(q, "rules", good)).status == 200);
    CHECK(get_json(s, "status", {{"rules", good}})["rules"] == "kinetoscope");  // the store's, whatever is asked
  }
}

TEST_CASE("api: /overview with rules=plugin equals the plugin's views computed directly; the default is kinetoscope's") {
  store& s = *shared_fixture().s;
  const query_t q = profile_query("two_ranks", "rank0", "default");
  const std::string before = get(s, "overview", q).body;
  const api_response plugin = get(s, "overview", with(q, "rules", "plugin"));
  REQUIRE(plugin.status == 200);
  const api_response ours = get(s, "overview", with(q, "rules", "kinetoscope"));
  REQUIRE(ours.status == 200);
  // Default and rules=kinetoscope: the same body, which is kinetoscope's.
  CHECK(ours.body == before);
  const fs::path trace = traces_dir() / "two_ranks" / "rank0.pt.trace.json.gz";
  const direct_rules p(trace, an::rule_set::plugin);
  const direct_rules k(trace, an::rule_set::kinetoscope);
  // Two workers in the span.
  CHECK(plugin.body == body_of(kinetoscope::server::payloads::overview(p.views, 2)));
  CHECK(ours.body == body_of(kinetoscope::server::payloads::overview(k.views, 2)));
  // The two rule sets disagree on this trace (its NCCL kernels: K4), so rules= was not ignored.
  CHECK(plugin.body != ours.body);
  const json pj = json::parse(plugin.body);
  const json kj = json::parse(ours.body);
  CHECK(pj["performance"][0]["children"] != kj["performance"][0]["children"]);
  // Asking for the plugin's rules left the default body as it was (separate caches).
  CHECK(get(s, "overview", q).body == before);

  // The same on a one-worker run, for the operator and kernel tables too.
  const query_t rq = profile_query("resnet50_v100", "worker0", "1");
  const direct_rules rp(traces_dir() / resnet_span1, an::rule_set::plugin);
  CHECK(get(s, "overview", with(rq, "rules", "plugin")).body == body_of(kinetoscope::server::payloads::overview(rp.views, 1)));
  CHECK(get(s, "operation/table", with(rq, "rules", "plugin")).body ==
        body_of(kinetoscope::server::payloads::operation_table(rp.views, false)));
  CHECK(get(s, "kernel/table", with(rq, "rules", "plugin")).body ==
        body_of(kinetoscope::server::payloads::kernel_table(rp.views, false)));
  CHECK(get(s, "kernel/tc_pie", with(rq, "rules", "plugin")).body ==
        body_of(kinetoscope::server::payloads::kernel_tc_pie(rp.views)));
  for (const std::string route : {"overview", "operation/table", "kernel/table", "kernel/tc_pie", "recommendations"}) {
    INFO(route);
    CHECK(get(s, route, with(rq, "rules", "kinetoscope")).body == get(s, route, rq).body);
  }
}

TEST_CASE("api: the kernel table lists kernels without an operator as \"(no operator)\" under kinetoscope's rules only") {
  store& s = *shared_fixture().s;
  // diff_base has kernels launched outside every operator (zero-id runtimes and stale kernels).
  const query_t q = with(profile_query("diff_base", "base", "default"), "group_by", "KernelNameAndOpName");
  const fs::path trace = traces_dir() / "diff_base" / "base.pt.trace.json.gz";
  const direct_rules k(trace, an::rule_set::kinetoscope);
  const direct_rules p(trace, an::rule_set::plugin);
  double by_name = 0;
  for (const an::kernel_row& r : k.views.report.kernels_by_name) by_name += r.total_raw_us;

  const json def = get_json(s, "kernel/table", q);
  CHECK(def == get_json(s, "kernel/table", with(q, "rules", "kinetoscope")));
  const auto [ours, ours_total] = kernel_operators(def);
  CHECK(ours.count("(no operator)") == 1);
  CHECK(ours.count("CallTreeRoot") == 0);
  CHECK(ours_total == doctest::Approx(by_name));  // every kernel once
  CHECK(def.dump() == json::parse(body_of(kinetoscope::server::payloads::kernel_table(k.views, true))).dump());

  const json plugin = get_json(s, "kernel/table", with(q, "rules", "plugin"));
  const auto [theirs, theirs_total] = kernel_operators(plugin);
  CHECK(theirs.count("(no operator)") == 0);
  CHECK(theirs.count("CallTreeRoot") == 1);
  CHECK(plugin.dump() == json::parse(body_of(kinetoscope::server::payloads::kernel_table(p.views, true))).dump());
  // The plugin leaves out the kernels no tree reaches (runtimes whose id no operator has).
  CHECK(theirs_total < ours_total);
}

TEST_CASE("api: distributed routes with rules=plugin equal compute_distributed under the plugin's rules") {
  store& s = *shared_fixture().s;
  const query_t q = {{"run", "two_ranks"}, {"worker", "All"}, {"span", "default"}};
  const direct_rules p0(traces_dir() / "two_ranks" / "rank0.pt.trace.json.gz", an::rule_set::plugin);
  const direct_rules p1(traces_dir() / "two_ranks" / "rank1.pt.trace.json.gz", an::rule_set::plugin);
  const std::vector<an::distributed_worker_input> in = {
      {"rank0", &p0.model, p0.views.used_devices, an::distributed_steps(p0.views.report.overview)},
      {"rank1", &p1.model, p1.views.used_devices, an::distributed_steps(p1.views.report.overview)}};
  const an::distributed_result d = an::compute_distributed(in, an::rules(an::rule_set::plugin).distributed);
  REQUIRE(d.available);
  namespace pl = kinetoscope::server::payloads;
  CHECK(get(s, "distributed/overlap", with(q, "rules", "plugin")).body == body_of(pl::distributed_overlap(d)));
  CHECK(get(s, "distributed/waittime", with(q, "rules", "plugin")).body == body_of(pl::distributed_waittime(d)));
  CHECK(get(s, "distributed/commops", with(q, "rules", "plugin")).body == body_of(pl::distributed_commops(d)));
  CHECK(get(s, "distributed/gpuinfo", with(q, "rules", "plugin")).body == body_of(pl::distributed_gpuinfo(d)));
  // The default and rules=kinetoscope: kinetoscope's numbers, which differ from the plugin's here.
  for (const char* panel : {"overlap", "waittime", "commops"}) {
    INFO(panel);
    const std::string route = std::string("distributed/") + panel;
    CHECK(get(s, route, with(q, "rules", "kinetoscope")).body == get(s, route, q).body);
  }
  CHECK(get(s, "distributed/overlap", q).body != get(s, "distributed/overlap", with(q, "rules", "plugin")).body);
}

TEST_CASE("api: a store under the plugin's rules answers them by default and kinetoscope's on request") {
  temp_dir dir("plugin_rules");
  copy_run("diff_base", dir.path);
  store_options o;
  o.logdir = dir.path.string();
  o.rules = an::rule_set::plugin;
  store s(o);
  s.start();
  REQUIRE(s.wait_idle(load_timeout));
  CHECK(get_json(s, "status")["rules"] == "plugin");
  const query_t q = with(profile_query("diff_base", "base", "default"), "group_by", "KernelNameAndOpName");
  const json def = get_json(s, "kernel/table", q);
  CHECK(def == get_json(s, "kernel/table", with(q, "rules", "plugin")));
  CHECK(kernel_operators(def).first.count("CallTreeRoot") == 1);
  CHECK(kernel_operators(def).first.count("(no operator)") == 0);
  const json ours = get_json(s, "kernel/table", with(q, "rules", "kinetoscope"));
  CHECK(kernel_operators(ours).first.count("(no operator)") == 1);
  CHECK(kernel_operators(ours).first.count("CallTreeRoot") == 0);
  // Each equals the shared store's answer for the same rule set.
  store& shared = *shared_fixture().s;
  CHECK(ours == get_json(shared, "kernel/table", q));
  CHECK(def == get_json(shared, "kernel/table", with(q, "rules", "plugin")));
  const query_t oq = profile_query("diff_base", "base", "default");
  CHECK(get(s, "overview", oq).body == get(shared, "overview", with(oq, "rules", "plugin")).body);
  CHECK(get(s, "overview", with(oq, "rules", "kinetoscope")).body == get(shared, "overview", oq).body);
}
