// SPDX-License-Identifier: BSD-3-Clause
// The real PyTorch traces under $KINETOSCOPE_REAL_TRACES/traces decompress and parse, and our own
// output passes the same structural checks that consumers apply to them.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "kinetoscope/writer/chrome_trace.hpp"
#include "writer_test_util.hpp"
#include "../real_traces.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path traces_dir() {
  const char* real = kinetoscope::test::real_traces();
  REQUIRE_MESSAGE(real != nullptr, "KINETOSCOPE_REAL_TRACES not set (meson test sets it)");
  return fs::path(real) / "traces";
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<fs::path> trace_files() {
  std::vector<fs::path> out;
  const fs::path dir = traces_dir();
  REQUIRE_MESSAGE(fs::is_directory(dir), (dir.string() + " missing"));
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && (ends_with(name, ".json") || ends_with(name, ".json.gz"))) {
      out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string load(const fs::path& p) {
  const std::string raw = writer_test::read_file(p);
  return ends_with(p.filename().string(), ".gz") ? writer_test::gunzip(raw) : raw;
}

/// The checks HTA (docs/trace-format.md#consumer-requirements) and the TensorBoard plugin
/// (#consumer-requirements) rely on, for one X event.
void check_x_event(const json& e) {
  CAPTURE(e.dump());
  CHECK(e.contains("name"));
  CHECK(e["cat"].is_string());
  CHECK(e["ts"].is_number());
  CHECK(e["dur"].is_number());
  CHECK(e.contains("pid"));
  CHECK(e.contains("tid"));
}

}  // namespace

TEST_CASE("real traces: every file decompresses and parses") {
  const auto files = trace_files();
  REQUIRE_MESSAGE(files.size() >= 12, "traces under " << traces_dir());
  std::set<std::string> runs;
  for (const fs::path& p : files) {
    CAPTURE(p.string());
    runs.insert(p.parent_path().filename().string());
    const json doc = json::parse(load(p));
    if (p.parent_path().filename() == "legacy_torch113_cpu") {
      // The autograd profiler without Kineto writes a bare array (trace-format.md#legacy-array).
      REQUIRE(doc.is_array());
      CHECK(doc.size() > 0);
      CHECK(doc[0]["pid"] == "CPU functions");
      continue;
    }
    REQUIRE(doc.is_object());
    REQUIRE(doc.contains("traceEvents"));
    const json& events = doc["traceEvents"];
    REQUIRE(events.is_array());
    CHECK(events.size() > 0);
    std::size_t x_events = 0;
    for (const json& e : events) {
      CHECK(e.contains("ph"));
      if (e.value("ph", "") == "X") ++x_events;
    }
    CHECK(x_events > 0);
  }
  // The runs the README lists are all there.
  for (const char* run :
       {"amd_mi250", "cpu_only", "cuda_sync_simple_add", "diff_base", "diff_test",
        "legacy_torch113_cpu", "nccl_ddp", "resnet50_v100", "triton", "two_ranks",
        "h100_bert_small", "h100_qwen15_05b", "mi300x_bert_small", "mi300x_resnet_actckpt",
        "mi300x_sglang_capture", "mi300x_torch_compile", "rtx2080ti_param_linear",
        "vllm_graph_execution"}) {
    CHECK(runs.count(run) == 1);
  }
}

TEST_CASE("real traces: the era-D/E files have the rank the way HTA reads it") {
  // Cross-check of our "rank": <n> choice against files PyTorch wrote.
  for (const fs::path& p : trace_files()) {
    if (p.parent_path().filename() != "nccl_ddp") continue;
    const std::string text = load(p);
    CHECK(std::regex_search(text, std::regex("\"rank\":\\s+(\\d+)")));
  }
}

TEST_CASE("real traces: our output passes the same structural checks") {
  auto d = writer_test::example_trace();
  // Grow it a bit so that several buffer flushes happen.
  for (int i = 0; i < 5000; ++i) {
    auto e = d.events[3];
    e.external_id = 100 + i;
    d.events.push_back(e);
  }
  const std::string text =
      kinetoscope::chrome_trace_string(d, {.trace_name = "synthetic.pt.trace.json"});
  const json doc = json::parse(text);
  REQUIRE(doc.is_object());
  REQUIRE(doc["traceEvents"].is_array());
  std::size_t x_events = 0;
  for (const json& e : doc["traceEvents"]) {
    CHECK(e.contains("name"));
    if (e.value("ph", "") != "X") continue;
    ++x_events;
    check_x_event(e);
  }
  CHECK(x_events == d.events.size() + d.runtime.size() + d.gpu.size() + 3 + 1);
}

TEST_CASE("real traces: the era-E files and ours share the top-level layout") {
  // In the newest real files and in ours: schemaVersion, deviceProperties, traceEvents, traceName.
  const std::string ours = kinetoscope::chrome_trace_string(writer_test::example_trace());
  const json doc = json::parse(ours);
  for (const fs::path& p : trace_files()) {
    if (p.parent_path().filename() != "triton") continue;
    const json real = json::parse(load(p));
    for (const char* key : {"schemaVersion", "deviceProperties", "traceEvents", "traceName",
                            "displayTimeUnit", "baseTimeNanoseconds"}) {
      CAPTURE(key);
      CHECK(real.contains(key));
      CHECK(doc.contains(key));
      CHECK(real[key].type() == doc[key].type());
    }
    CHECK(real["displayTimeUnit"] == doc["displayTimeUnit"]);
    // Every kernel in the real file has the args we write for kernels.
    for (const json& e : real["traceEvents"]) {
      if (e.value("cat", "") != "kernel") continue;
      for (const char* arg : {"queued", "device", "context", "stream", "correlation",
                              "registers per thread", "shared memory", "blocks per SM",
                              "warps per SM", "grid", "block", "est. achieved occupancy %"}) {
        CAPTURE(arg);
        CHECK(e["args"].contains(arg));
      }
    }
  }
}
