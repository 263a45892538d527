// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file cli/analyze.hpp
/// `kinetoscope analyze PATH [--worker W] [--span S] [--view V] [--json | --csv] [--diff PATH2]`:
/// torch-tb-profiler's numbers for one trace (or one worker/span of a run folder), printed as
/// terminal tables, one JSON object, or the CSV of one view.

#include <ostream>
#include <string>
#include <vector>

namespace kinetoscope::cli {

/// Runs the analyze sub-command on `args` (the words after "analyze"). Writes results to `out`
/// and errors to `err`; returns the process exit status (0 ok, 1 load/analysis error, 2 usage).
int run_analyze(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

/// The usage text of the analyze sub-command.
std::string analyze_usage();

}  // namespace kinetoscope::cli
