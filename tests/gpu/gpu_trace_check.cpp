// SPDX-License-Identifier: BSD-3-Clause
// gpu_trace_check DIR: the CUPTI checks of scripts/gpu-check.sh on the traces a run of the cuda
// activity wrote to DIR (one per window), against DIR/truth.json when cuda_stress wrote one.
// Prints one "PASS|FAIL <check>: <numbers>" line per check; exit 0 when all pass, 1 when one
// fails, 2 when DIR cannot be read.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include "trace_check.hpp"

int main(int argc, char** argv) {
  if (argc != 2 || std::string(argv[1]).starts_with("-")) {
    std::fprintf(stderr, "usage: gpu_trace_check DIR   (traces of one run; DIR/truth.json if cuda_stress wrote it)\n");
    return 2;
  }
  namespace gc = kinetoscope::gpu_check;
  try {
    const std::filesystem::path dir = argv[1];
    nlohmann::json truth;
    if (std::filesystem::exists(dir / "truth.json")) truth = gc::read_json((dir / "truth.json").string());
    std::vector<nlohmann::json> traces;
    for (const std::string& f : gc::trace_files(dir.string())) traces.push_back(gc::read_json(f));
    bool all = true;
    for (const gc::check_line& l : gc::check_run(truth, traces)) {
      std::printf("%s %s: %s\n", l.pass ? "PASS" : "FAIL", l.name.c_str(), l.detail.c_str());
      all = all && l.pass;
    }
    return all ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_trace_check: %s\n", e.what());
    return 2;
  }
}
