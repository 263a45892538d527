// SPDX-License-Identifier: BSD-3-Clause
// End to end: run samples/cuda (built with nvcc when the toolkit is present). Without a usable
// GPU it must stop with kinetoscope's one warning, the CUDA error and status 2, writing
// nothing; with one, its trace must hold the kernels, copies, memsets and their ac2g flows.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "../run_command.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using kinetoscope::test::run_command;

bool has_device() {
  // The same question the sample asks, answered without CUDA: is there a driver at all?
  return fs::exists("/proc/driver/nvidia/version");
}

}  // namespace

TEST_CASE("e2e: the CUDA sample records GPU work, or says clearly why it cannot") {
  const char* bin = std::getenv("KINETOSCOPE_CUDA_SAMPLE_BIN");
  REQUIRE(bin != nullptr);
  const fs::path logdir = fs::temp_directory_path() / ("kinetoscope_cuda_" + std::to_string(::getpid()));
  fs::remove_all(logdir);
  const kinetoscope::test::command_result r = run_command(std::string(bin) + " " + logdir.string());

  if (!has_device()) {
    CHECK(r.status == 2);
    CHECK(r.output.find("[kinetoscope] warning: activity cuda: no NVIDIA driver (libcuda.so.1 not "
                        "found); recording CPU activity only\n") != std::string::npos);
    CHECK(r.output.find("cuda_sample: no CUDA device (") != std::string::npos);
    CHECK(r.output.find("); nothing to profile on the GPU\n") != std::string::npos);
    CHECK_FALSE(fs::exists(logdir));
    return;
  }

  REQUIRE_MESSAGE(r.status == 0, r.output);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(logdir)) files.push_back(e.path());
  REQUIRE(files.size() == 1);
  std::ifstream in(files[0]);
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str());
  std::map<std::string, int> by_category;
  std::map<std::int64_t, std::int64_t> op_of_external;  // External id of cpu_op -> itself
  std::set<std::int64_t> flow_starts, flow_ends;
  int kernels_with_op = 0;
  for (const json& e : j["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    ++by_category[cat];
    if (cat == "ac2g") (e["ph"] == "s" ? flow_starts : flow_ends).insert(e["id"].get<std::int64_t>());
    if (cat == "kernel" && e["args"].contains("External id")) ++kernels_with_op;
  }
  // 3 active steps: 3 kernels, 2 memsets, 1 HtoD + 2 DtoH copies each.
  CHECK(by_category["kernel"] == 9);
  CHECK(by_category["gpu_memset"] == 6);
  CHECK(by_category["gpu_memcpy"] == 9);
  CHECK(kernels_with_op == 9);
  CHECK(by_category["cuda_runtime"] > 0);
  CHECK(flow_starts == flow_ends);
  CHECK(flow_starts.size() >= 24);
  CHECK(j["deviceProperties"].size() >= 1);
  fs::remove_all(logdir);
}
