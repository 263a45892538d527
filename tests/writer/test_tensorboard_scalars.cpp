// SPDX-License-Identifier: BSD-3-Clause
// Per-step TensorBoard scalars: compute_step_scalars against the viewer's Overview and hand
// values, the scalars trace handler over a scheduled profile, `kinetoscope scalars` on the
// result, and a corrupted event file.

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/loader.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/overview.hpp"
#include "kinetoscope/kinetoscope.hpp"
#include "kinetoscope/writer/chrome_trace.hpp"
#include "kinetoscope/tensorboard/scalars.hpp"
#include "kinetoscope/tensorboard/tfevents.hpp"
#include "kinetoscope/writer/trace_handler.hpp"
#include "writer_test_util.hpp"

#include "../run_command.hpp"

namespace fs = std::filesystem;
using namespace kinetoscope;
using writer_test::at_us;
using writer_test::temp_dir;

namespace {

constexpr const char* dataloader_name = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__";

/// Two steps: ProfilerStep#1 [100, 200) µs and ProfilerStep#2 [200, 350) µs with a DataLoader
/// range, operators on two threads and CPU + GPU0 memory records.
trace_data two_step_trace() {
  trace_data d;
  d.start_ns = at_us(50);
  d.end_ns = at_us(400);
  d.pid = 77;
  d.process_name = "test";
  d.threads = {{1, "main"}, {2, "worker"}};
  d.strings = {""};
  d.profile_memory = true;
  const auto add = [&d](const char* name, cpu_category cat, double s, double e, std::int64_t tid) {
    cpu_event ev;
    ev.name = d.intern(name);
    ev.category = cat;
    ev.start_ns = at_us(s);
    ev.end_ns = at_us(e);
    ev.tid = tid;
    ev.end_tid = tid;
    ev.external_id = static_cast<std::int64_t>(d.events.size()) + 1;
    d.events.push_back(ev);
  };
  const auto ua = cpu_category::user_annotation;
  const auto op = cpu_category::cpu_op;
  add("ProfilerStep#1", ua, 100, 200, 1);
  add(dataloader_name, ua, 100, 110, 1);
  add("aten::mm", op, 120, 150, 1);
  add("aten::add", op, 150, 170, 1);
  add("ProfilerStep#2", ua, 200, 350, 1);
  add(dataloader_name, ua, 200, 230, 1);
  add("aten::mm", op, 240, 300, 1);
  add("aten::relu", op, 250, 260, 1);
  add("aten::sum", op, 310, 320, 2);

  const auto mem = [&d](double t, std::uint64_t addr, std::int64_t bytes, std::int64_t total,
                        device_type dev, std::int16_t id) {
    memory_event m;
    m.time_ns = at_us(t);
    m.tid = 1;
    m.addr = addr;
    m.bytes = bytes;
    m.total_allocated = total;
    m.total_reserved = dev == device_type::cpu ? 0 : total;
    m.device = dev;
    m.device_id = id;
    d.memory.push_back(m);
  };
  const auto cpu = device_type::cpu;
  mem(125, 0x1000, 1000, 1000, cpu, -1);
  mem(160, 0x2000, 500, 1500, cpu, -1);
  mem(165, 0x1000, -1000, 500, cpu, -1);
  mem(245, 0x3000, 4000, 4500, cpu, -1);
  mem(255, 0x9000, 2048, 2048, device_type::cuda, 0);
  mem(290, 0x3000, -4000, 500, cpu, -1);
  return d;
}

analysis::overview_result overview_of(const std::string& json_text) {
  analysis::load_result r = analysis::load_trace_buffer(json_text, "t");
  REQUIRE(r.ok());
  const analysis::op_trees trees = analysis::build_op_tree(*r.model);
  return analysis::compute_overview(*r.model, trees);
}

std::int64_t peak(const step_scalars& s, const std::string& device) {
  for (const auto& [d, b] : s.peak_allocated_bytes)
    if (d == device) return b;
  FAIL("no peak for " << device);
  return -1;
}

std::vector<fs::path> files_matching(const fs::path& dir, const std::string& part) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(part) != std::string::npos) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

using run_result = kinetoscope::test::command_result;

/// Runs `kinetoscope scalars <args>` (stderr merged).
run_result run_cli(const std::string& args) {
  const char* bin = std::getenv("KINETOSCOPE_BIN");
  REQUIRE(bin != nullptr);
  return kinetoscope::test::run_command(std::string(bin) + " scalars " + args);
}

/// Ops per recorded step in run_profile(): train_step, aten::mm (with a nested aten::add).
constexpr std::int64_t ops_per_step = 3;

/// A scheduled profile (wait 0, warmup 1, active 2, repeat 2) of 7 steps with the scalars
/// handler writing into `dir`. Each step allocates 1024·(i+1) bytes and frees them.
/// Returns the CPU total allocated before the loop.
std::int64_t run_profile(const fs::path& dir) {
  const std::int64_t base = total_allocated();
  profile prof({.schedule = schedule({.wait = 0, .warmup = 1, .active = 2, .repeat = 2}),
                .on_trace_ready = tensorboard_trace_handler_with_scalars(dir.string(), "w"),
                .profile_memory = true});
  prof.start();
  std::vector<char> block(1);
  for (int i = 0; i < 7; ++i) {
    {
      record_function dl(dataloader_name);
    }
    {
      record_op train("train_step");
      record_op mm("aten::mm");
      report_alloc(block.data(), 1024 * (i + 1));
      record_op add("aten::add");
      report_free(block.data(), 1024 * (i + 1));
    }
    prof.step();
  }
  prof.stop();
  return base;
}

}  // namespace

TEST_CASE("tensorboard: compute_step_scalars equals the Overview and hand values") {
  const trace_data d = two_step_trace();
  const std::vector<step_scalars> steps = compute_step_scalars(d);
  REQUIRE(steps.size() == 2);

  const analysis::overview_result ov = overview_of(chrome_trace_string(d));
  REQUIRE(ov.steps.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    const step_scalars& s = steps[i];
    const analysis::step_row& row = ov.steps[i];
    CHECK(std::to_string(s.step) == row.name);
    CHECK(s.step_time_ms == row.total / 1000.0);
    CHECK(s.kernel_ms == row.kernel / 1000.0);
    CHECK(s.memcpy_ms == row.memcpy / 1000.0);
    CHECK(s.memset_ms == row.memset / 1000.0);
    CHECK(s.communication_ms == row.communication / 1000.0);
    CHECK(s.runtime_ms == row.runtime / 1000.0);
    CHECK(s.dataloader_ms == row.dataloader / 1000.0);
    CHECK(s.cpu_exec_ms == row.cpu_exec / 1000.0);
    CHECK(s.other_ms == row.other / 1000.0);
    CHECK(s.kernels == 0);
  }
  // Hand-computed values.
  CHECK(steps[0].step == 1);
  CHECK(steps[1].step == 2);
  CHECK(steps[0].step_time_ms == doctest::Approx(0.100).epsilon(1e-9));
  CHECK(steps[1].step_time_ms == doctest::Approx(0.150).epsilon(1e-9));
  CHECK(steps[0].dataloader_ms == doctest::Approx(0.010).epsilon(1e-9));
  CHECK(steps[1].dataloader_ms == doctest::Approx(0.030).epsilon(1e-9));
  CHECK(steps[0].cpu_exec_ms == doctest::Approx(0.050).epsilon(1e-9));  // mm + add
  CHECK(steps[1].cpu_exec_ms == doctest::Approx(0.070).epsilon(1e-9));  // mm + sum
  CHECK(steps[0].operators == 2);
  CHECK(steps[1].operators == 3);
  CHECK(peak(steps[0], "CPU") == 1500);
  CHECK(peak(steps[1], "CPU") == 4500);
  CHECK(peak(steps[0], "GPU0") == 0);
  CHECK(peak(steps[1], "GPU0") == 2048);
  CHECK(steps[0].end_ns == at_us(200));

  // Tags as documented.
  const std::vector<scalar_value> tags = steps[1].to_scalar_values();
  std::map<std::string, float> by_tag;
  for (const scalar_value& v : tags) by_tag[v.tag] = v.value;
  CHECK(tags.size() == 13);
  CHECK(by_tag.at("Profiler/step_time_ms") == static_cast<float>(steps[1].step_time_ms));
  CHECK(by_tag.at("Profiler/breakdown/dataloader_ms") == static_cast<float>(steps[1].dataloader_ms));
  CHECK(by_tag.count("Profiler/breakdown/kernel_ms") == 1);
  CHECK(by_tag.count("Profiler/breakdown/other_ms") == 1);
  CHECK(by_tag.at("Profiler/memory/peak_allocated_bytes/CPU") == 4500.0f);
  CHECK(by_tag.at("Profiler/memory/peak_allocated_bytes/GPU0") == 2048.0f);
  CHECK(by_tag.at("Profiler/operators") == 3.0f);
  CHECK(by_tag.at("Profiler/kernels") == 0.0f);
}

TEST_CASE("tensorboard: a window without ProfilerStep# has no step scalars") {
  trace_data d = two_step_trace();
  std::erase_if(d.events, [&](const cpu_event& e) { return d.str(e.name).starts_with("ProfilerStep#"); });
  CHECK(compute_step_scalars(d).empty());
}

TEST_CASE("tensorboard: the scalars handler writes traces and the recorded steps' scalars; "
          "kinetoscope scalars reads them back, also from a corrupted file") {
  temp_dir tmp;
  const fs::path dir = tmp.path() / "run";
  const std::int64_t base = run_profile(dir);

  const std::vector<fs::path> traces = files_matching(dir, ".pt.trace.json");
  const std::vector<fs::path> events = files_matching(dir, "tfevents");
  REQUIRE(traces.size() == 2);
  REQUIRE(events.size() == 1);

  // Expected numbers: the Overview of each written trace file.
  std::map<std::int64_t, analysis::step_row> expected_rows;
  for (const fs::path& t : traces) {
    std::ifstream in(t, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const analysis::step_row& row : overview_of(text).steps) expected_rows[std::stoll(row.name)] = row;
  }
  REQUIRE(expected_rows.size() == 4);
  CHECK(expected_rows.count(1) == 1);
  CHECK(expected_rows.count(2) == 1);
  CHECK(expected_rows.count(4) == 1);
  CHECK(expected_rows.count(5) == 1);

  const event_file_contents c = read_event_file(events[0].string());
  CHECK(c.corrupt_records == 0);
  CHECK(c.errors.empty());
  CHECK(c.records == 5);  // file_version + 4 steps
  const auto series = [&](const std::string& tag) -> const std::vector<scalar_point>& {
    const auto it = c.scalars.find(tag);
    REQUIRE(it != c.scalars.end());
    return it->second;
  };
  const std::vector<scalar_point>& step_time = series("Profiler/step_time_ms");
  REQUIRE(step_time.size() == 4);
  const std::vector<std::int64_t> recorded = {1, 2, 4, 5};
  for (std::size_t i = 0; i < 4; ++i) {
    const std::int64_t n = recorded[i];
    const analysis::step_row& row = expected_rows.at(n);
    CHECK(step_time[i].step == n);
    CHECK(step_time[i].value == static_cast<float>(row.total / 1000.0));
    CHECK(series("Profiler/breakdown/dataloader_ms")[i].value == static_cast<float>(row.dataloader / 1000.0));
    CHECK(series("Profiler/breakdown/cpu_exec_ms")[i].value == static_cast<float>(row.cpu_exec / 1000.0));
    CHECK(series("Profiler/breakdown/other_ms")[i].value == static_cast<float>(row.other / 1000.0));
    CHECK(series("Profiler/breakdown/kernel_ms")[i].value == 0.0f);
    CHECK(series("Profiler/operators")[i].value == static_cast<float>(ops_per_step));
    CHECK(series("Profiler/kernels")[i].value == 0.0f);
    CHECK(series("Profiler/memory/peak_allocated_bytes/CPU")[i].value ==
          static_cast<float>(base + 1024 * (n + 1)));
    CHECK(step_time[i].wall_time > 1.6e9);
  }

  // kinetoscope scalars DIR --json gives the same series.
  {
    const run_result r = run_cli(dir.string() + " --json");
    REQUIRE(r.status == 0);
    const nlohmann::json j = nlohmann::json::parse(r.output);
    CHECK(j["errors"].empty());
    CHECK(j["corrupt_records"] == 0);
    CHECK(j["skipped_other_summaries"] == 0);
    REQUIRE(j["runs"].contains("."));
    const nlohmann::json& run = j["runs"]["."];
    CHECK(run.size() == c.scalars.size());
    for (const auto& [tag, points] : c.scalars) {
      REQUIRE(run.contains(tag));
      REQUIRE(run[tag].size() == points.size());
      for (std::size_t i = 0; i < points.size(); ++i) {
        CHECK(run[tag][i][0].get<std::int64_t>() == points[i].step);
        CHECK(run[tag][i][1].get<double>() == points[i].wall_time);
        CHECK(run[tag][i][2].get<double>() == static_cast<double>(points[i].value));
      }
    }
    // From the parent logdir the run is named by its directory.
    const run_result parent = run_cli(tmp.path().string() + " --json");
    REQUIRE(parent.status == 0);
    CHECK(nlohmann::json::parse(parent.output)["runs"].contains("run"));
  }

  // A flipped payload byte in the first step record: reported, skipped, the rest still shown.
  {
    const fs::path bad_dir = tmp.path() / "bad";
    fs::create_directories(bad_dir);
    const fs::path bad = bad_dir / events[0].filename();
    fs::copy_file(events[0], bad);
    std::string bytes;
    {
      std::ifstream in(bad, std::ios::binary);
      bytes.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    }
    std::uint64_t len0 = 0;
    for (int k = 7; k >= 0; --k) len0 = (len0 << 8) | static_cast<unsigned char>(bytes[k]);
    const std::size_t second = 8 + 4 + len0 + 4;  // start of the first step record
    REQUIRE(bytes.size() > second + 12 + 8);
    bytes[second + 12 + 5] = static_cast<char>(bytes[second + 12 + 5] ^ 0x40);
    { std::ofstream(bad, std::ios::binary | std::ios::trunc) << bytes; }

    const run_result r = run_cli(bad_dir.string() + " --json");
    CHECK(r.status == 0);
    const nlohmann::json j = nlohmann::json::parse(r.output);
    CHECK(j["corrupt_records"] == 1);
    CHECK_FALSE(j["errors"].empty());
    const nlohmann::json& times = j["runs"]["."]["Profiler/step_time_ms"];
    REQUIRE(times.size() == 3);
    CHECK(times[0][0] == 2);
    CHECK(times[1][0] == 4);
    CHECK(times[2][0] == 5);
    CHECK(times[0][2].get<double>() == static_cast<double>(step_time[1].value));

    const run_result text = run_cli(bad.string());
    CHECK(text.status == 0);
    CHECK(text.output.find("corrupt") != std::string::npos);
    CHECK(text.output.find("Profiler/step_time_ms") != std::string::npos);
    CHECK(text.output.find(" 4=") != std::string::npos);
  }
}

TEST_CASE("tensorboard: a scalar error is reported after the trace file is written") {
  temp_dir tmp;
  const fs::path traces = tmp.path() / "traces";
  const fs::path not_a_dir = tmp.path() / "file";
  { std::ofstream(not_a_dir) << "x"; }
  std::vector<std::string> messages;
  set_log_handler([&](log_level, std::string_view m) { messages.emplace_back(m); });
  {
    profile prof({.schedule = schedule({.wait = 0, .warmup = 0, .active = 1, .repeat = 1}),
                  .on_trace_ready = with_tensorboard_scalars(
                      (not_a_dir / "sub").string(), tensorboard_trace_handler(traces.string(), "w"))});
    prof.start();
    { record_op op("aten::mm"); }
    prof.step();
    prof.stop();
  }
  set_log_handler(nullptr);
  CHECK(files_matching(traces, ".pt.trace.json").size() == 1);
  bool reported = false;
  for (const std::string& m : messages) reported = reported || m.find("step scalars") != std::string::npos;
  CHECK(reported);
}

TEST_CASE("tensorboard: kinetoscope scalars on a missing path fails") {
  const run_result r = run_cli("/nonexistent/kinetoscope-logdir --json");
  CHECK(r.status == 1);
  CHECK(nlohmann::json::parse(r.output)["errors"].size() == 1);
}
