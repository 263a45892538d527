// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file cli/scalars.hpp
/// `kinetoscope scalars PATH [--json]`: the scalar series of TensorBoard event files
/// (`events.out.tfevents.*`) under a logdir, or of one event file. The run of a file is its
/// directory relative to PATH ("." for files directly in PATH or when PATH is a file). A
/// corrupt record is reported and skipped; everything else is still shown.

#include <ostream>
#include <string>
#include <vector>

namespace kinetoscope::cli {

/// Runs the scalars sub-command on `args` (the words after "scalars"). Text output: per run and
/// tag one line of `step=value` pairs; `--json`: one object
/// `{"runs": {run: {tag: [[step, wall_time, value], ...]}}, "files": [{"run", "path",
/// "records", "corrupt_records", "truncated_tail"}], "errors": [...],
/// "skipped_other_summaries": N, "corrupt_records": N}`.
/// Returns 0 when at least one event file was read, 1 when none was (missing path, no event
/// file, unreadable files), 2 on a usage error. Problems go to `err` (text) or "errors" (json).
int run_scalars(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

/// The usage text of the scalars sub-command.
std::string scalars_usage();

}  // namespace kinetoscope::cli
