// SPDX-License-Identifier: BSD-3-Clause
// `kinetoscope analyze` end to end: the real binary on real traces.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "../run_command.hpp"
#include "../real_traces.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using run_result = kinetoscope::test::command_result;

/// Runs `kinetoscope <args>` (stderr merged).
run_result run(const std::string& args) {
  const char* bin = std::getenv("KINETOSCOPE_BIN");
  REQUIRE(bin != nullptr);
  return kinetoscope::test::run_command(std::string(bin) + " " + args);
}

std::string real_dir() {
  const char* s = kinetoscope::test::real_traces();
  REQUIRE_MESSAGE(s != nullptr, "KINETOSCOPE_REAL_TRACES not set (meson test sets it)");
  return s;
}

bool close_us(double a, double b) { return std::fabs(a - b) <= std::max(1.0, 0.001 * std::fabs(b)); }

}  // namespace

TEST_CASE("cli: --json on resnet50_v100 matches torch-tb-profiler's overview and tables") {
  const std::string run_dir = real_dir() + "/traces/resnet50_v100";
  const run_result r = run("analyze " + run_dir + " --span 1 --json");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const json got = json::parse(r.output);
  const json want = json::parse(std::ifstream(real_dir() +
      "/expected/resnet50_v100/worker0.1623143089861.pt.trace.json.gz.expected.json"));
  CHECK(got["worker"] == "worker0");
  CHECK(got["span"] == "1");
  for (const char* key : {"total", "kernel", "memcpy", "memset", "runtime", "dataloader", "cpu_exec", "other"}) {
    CAPTURE(key);
    CHECK(close_us(got["overview"]["average"][key].get<double>(), want["overview"]["average"][key].get<double>()));
  }
  REQUIRE(got["overview"]["steps"].size() == want["overview"]["steps"].size());
  for (std::size_t i = 0; i < want["overview"]["steps"].size(); ++i)
    CHECK(got["overview"]["steps"][i]["name"] == want["overview"]["steps"][i]["name"]);
  REQUIRE(got["overview"]["gpus"].size() == 1);
  CHECK(got["overview"]["gpus"][0]["name"] == "Tesla V100-DGXS-32GB");
  CHECK(std::fabs(got["overview"]["gpus"][0]["utilization_pct"].get<double>() -
                  want["overview"]["gpus"][0]["utilization_pct"].get<double>()) <= 0.01);
  CHECK(got["overview"]["recommendations"].size() == want["overview"]["recommendations"].size());
  CHECK(got["operators"]["by_name"].size() == want["operators"]["by_name"].size());
  CHECK(got["kernels"]["by_name"].size() == want["kernels"]["by_name"].size());
  CHECK(got["diagnostics"]["events_by_category"]["Kernel"].get<int>() > 0);
  CHECK(got.contains("memory"));
}

TEST_CASE("cli: tables, csv and views") {
  const std::string file = real_dir() + "/traces/two_ranks/rank0.pt.trace.json.gz";
  const run_result tables = run("analyze " + file);
  REQUIRE_MESSAGE(tables.status == 0, tables.output);
  CHECK(tables.output.find("Step time breakdown (us)") != std::string::npos);
  CHECK(tables.output.find("Operators (top 20") != std::string::npos);

  const run_result csv = run("analyze " + file + " --csv --view kernels");
  REQUIRE_MESSAGE(csv.status == 0, csv.output);
  CHECK(csv.output.rfind("name,calls,total_us,mean_us,max_us,min_us,blocks_per_sm,occupancy_pct,tensor_cores_used\n", 0) == 0);
  const json j = json::parse(run("analyze " + file + " --json --view kernels").output);
  std::size_t lines = 0;
  for (char c : csv.output) lines += c == '\n';
  CHECK(lines == j["kernels"]["by_name"].size() + 1);
  CHECK_FALSE(j.contains("overview"));
}

TEST_CASE("cli: the distributed view of a one-worker run, as the server and the plugin") {
  // cpu_only: one rank of a Gloo job, 10 gloo:all_reduce calls.
  const run_result r = run("analyze " + real_dir() + "/traces/cpu_only --view distributed --json");
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const json d = json::parse(r.output)["distributed"];
  CHECK(d["available"] == true);
  REQUIRE(d["workers"].size() == 1);
  REQUIRE(d["workers"][0]["comm_ops"].size() == 1);
  const json& op = d["workers"][0]["comm_ops"][0];
  CHECK(op["name"] == "gloo:all_reduce");
  CHECK(op["calls"] == 10);
  CHECK(op["data_transfer_us"] == op["total_latency_us"]);  // alone, a rank waits for nobody
  CHECK(d["workers"][0]["wait"]["synchronizing_us"] == 0);
  // No communication op: no view, and the reason says so.
  const run_result none = run("analyze " + real_dir() + "/traces/resnet50_v100 --span 1 --view distributed --json");
  REQUIRE_MESSAGE(none.status == 0, none.output);
  const json n = json::parse(none.output)["distributed"];
  CHECK(n["available"] == false);
  CHECK(n["reason"].get<std::string>().find("no communication") != std::string::npos);
}

TEST_CASE("cli: errors are clear and exit non-zero") {
  const run_result missing = run("analyze /nonexistent/trace.json");
  CHECK(missing.status == 1);
  CHECK(missing.output.find("no such file or directory") != std::string::npos);

  const run_result bad_option = run("analyze x --frobnicate");
  CHECK(bad_option.status == 2);
  CHECK(bad_option.output.find("unknown option --frobnicate") != std::string::npos);

  const run_result bad_view = run("analyze x --view nope");
  CHECK(bad_view.status == 2);

  const fs::path tmp = fs::temp_directory_path() / ("ks_cli_" + std::to_string(::getpid()) + ".pt.trace.json");
  std::ofstream(tmp) << "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"a\", \"cat\": \"cpu_op\", \"ts\": 1";
  const run_result truncated = run("analyze " + tmp.string());
  CHECK(truncated.status == 1);
  CHECK(truncated.output.find(tmp.string()) != std::string::npos);
  fs::remove(tmp);

  const run_result no_worker = run("analyze " + real_dir() + "/traces/resnet50_v100 --worker nobody");
  CHECK(no_worker.status == 1);
  CHECK(no_worker.output.find("worker0") != std::string::npos);  // lists what is available
}

TEST_CASE("cli: events beyond 2^63 us are dropped with a warning, the other views still answer") {
  const fs::path tmp = fs::temp_directory_path() / ("ks_cli_far_" + std::to_string(::getpid()) + ".pt.trace.json");
  std::ofstream(tmp) << R"J({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
    {"ph": "X", "cat": "cpu_op", "name": "aten::far", "pid": 1, "tid": 1, "ts": 1e19, "dur": 1},
    {"ph": "X", "cat": "cpu_op", "name": "aten::farther", "pid": 1, "tid": 1, "ts": 123456789012345678901234567890, "dur": 1},
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1e308, "args": {"Bytes": 4, "Device Type": 0}}
  ]})J";
  const run_result tables = run("analyze " + tmp.string());
  CHECK(tables.status == 0);
  CHECK(tables.output.find("aten::mm") != std::string::npos);
  CHECK(tables.output.find("aten::far") == std::string::npos);
  const run_result all = run("analyze " + tmp.string() + " --json");  // every view
  REQUIRE(all.status == 0);
  const json d = json::parse(all.output)["diagnostics"];
  CHECK(d["warnings"]["time out of range, event dropped"] == 3);
  CHECK(d["messages"][0] == "event #1: time out of range, event dropped (ts)");
  fs::remove(tmp);
}

TEST_CASE("cli: --max_file_size refuses bigger traces with a clear error") {
  const fs::path tmp = fs::temp_directory_path() / ("ks_cli_size_" + std::to_string(::getpid()) + ".pt.trace.json");
  std::ofstream(tmp) << R"J({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5}]})J"
                     << std::string(2000, ' ');
  const run_result refused = run("analyze " + tmp.string() + " --max_file_size 1K");
  CHECK(refused.status == 1);
  CHECK(refused.output == "kinetoscope analyze: " + tmp.string() +
                              ": trace text larger than the limit of 1024 bytes (--max_file_size)\n");
  const run_result allowed = run("analyze " + tmp.string() + " --max_file_size 4KiB");
  CHECK(allowed.status == 0);
  CHECK(allowed.output.find("aten::mm") != std::string::npos);
  const run_result bad = run("analyze " + tmp.string() + " --max_file_size 1.5G");
  CHECK(bad.status == 2);
  CHECK(bad.output.find("--max_file_size wants a size in bytes") != std::string::npos);
  fs::remove(tmp);
}

#include "kinetoscope/writer/chrome_trace.hpp"

TEST_CASE("cli: --memory-range restricts the memory statistics, the curve stays whole") {
  kinetoscope::trace_data d;
  const std::int64_t t0 = kinetoscope::base_time_ns() + 1000000000;
  d.start_ns = t0;
  d.end_ns = t0 + 300000;
  d.pid = 7;
  d.profile_memory = true;
  const auto op = [&](const char* name, std::int64_t start_us, std::int64_t end_us, std::int64_t id) {
    kinetoscope::cpu_event e;
    e.start_ns = t0 + start_us * 1000;
    e.end_ns = t0 + end_us * 1000;
    e.tid = 7;
    e.end_tid = 7;
    e.name = d.intern(name);
    e.external_id = id;
    d.events.push_back(e);
  };
  op("aten::empty", 10, 20, 1);
  op("aten::zeros", 100, 110, 2);
  const auto mem = [&](std::int64_t at_us, std::uint64_t addr, std::int64_t bytes, std::int64_t total) {
    kinetoscope::memory_event m;
    m.time_ns = t0 + at_us * 1000;
    m.tid = 7;
    m.addr = addr;
    m.bytes = bytes;
    m.total_allocated = total;
    d.memory.push_back(m);
  };
  mem(15, 0x1000, 1024, 1024);
  mem(105, 0x2000, 2048, 3072);
  mem(200, 0x1000, -1024, 2048);
  mem(210, 0x2000, -2048, 0);
  const fs::path file = fs::temp_directory_path() / ("ks_mem_" + std::to_string(::getpid()) + ".pt.trace.json");
  kinetoscope::write_chrome_trace_file(d, file.string());

  const json all = json::parse(run("analyze " + file.string() + " --json --view memory").output);
  const json part = json::parse(run("analyze " + file.string() + " --json --view memory --memory-range 0,50").output);
  fs::remove(file);
  REQUIRE(all["memory"]["devices"].size() == 1);
  const json& cpu_all = all["memory"]["devices"][0];
  const json& cpu_part = part["memory"]["devices"][0];
  CHECK(cpu_all["device"] == "CPU");
  CHECK(cpu_all["peak_allocated_bytes"] == 3072);
  CHECK(cpu_part["curve"] == cpu_all["curve"]);
  std::set<std::string> names_all;
  std::set<std::string> names_part;
  for (const auto& s : cpu_all["stats"]) names_all.insert(s["name"].get<std::string>());
  for (const auto& s : cpu_part["stats"]) names_part.insert(s["name"].get<std::string>());
  CHECK(names_all == std::set<std::string>{"aten::empty", "aten::zeros"});
  CHECK(names_part == std::set<std::string>{"aten::empty"});
  CHECK(run("analyze " + file.string() + " --memory-range 5").status == 2);
}
