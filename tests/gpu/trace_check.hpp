// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file trace_check.hpp
/// The CUPTI checks of the GPU check (scripts/gpu-check.sh): given the traces a run of the
/// cuda activity wrote (one per schedule window, in time order) and, for cuda_stress, the
/// ground truth it wrote beside them (truth.json), says per check PASS or FAIL with numbers.
///
/// Checks (each per window):
///   counts      kernels per kind, memcpy per direction and memsets equal the truth exactly;
///               no correlation id appears twice (none duplicated)
///   external    every GPU record carries the External id of a host op of the same trace, and
///               for cuda_stress that op is the one the kernel was launched in
///   flows       every GPU record has an ac2g flow pair (s on a runtime call, f on the record)
///               whose id is its correlation id, and that runtime call exists
///   timing      stress_timed durations agree with the CUDA-event timings (5 % or 2 µs)
///   window      every GPU record lies inside the window's ProfilerStep#N ranges (CPU clock)
///   device      deviceProperties names the GPU the program ran on
/// Without a truth (cuda_sample, any trace) the truth-free parts run: duplicates, external,
/// flows, window and a non-empty device name, and at least one kernel.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kinetoscope::gpu_check {

struct check_line {
  bool pass = false;
  std::string name;    ///< "window 1 counts"
  std::string detail;  ///< the numbers behind the verdict
};

/// `truth` is truth.json of cuda_stress or null; `traces` are the windows' traces in order.
std::vector<check_line> check_run(const nlohmann::json& truth, const std::vector<nlohmann::json>& traces);

/// Reads a trace (.json or .json.gz) or truth file; throws std::runtime_error with the path.
nlohmann::json read_json(const std::string& path);

/// The *.pt.trace.json[.gz] files of `dir`, sorted by name (the handler's names sort by time).
std::vector<std::string> trace_files(const std::string& dir);

}  // namespace kinetoscope::gpu_check
