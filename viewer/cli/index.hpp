// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file index.hpp
/// `kinetoscope index [--cache_dir DIR] [--force] PATH...`: builds the persisted index of each
/// trace file (server/trace_index.hpp) without a server, so the parsing runs where the traces
/// are, one process per file under `xargs -P`, a Slurm array job or a Kubernetes indexed Job
/// (README "Many ranks"). A folder stands for every trace file below it.
#include <iosfwd>
#include <string>
#include <vector>

namespace kinetoscope::cli {

std::string index_usage();
/// Exit status: 0 when every file has a valid index, 1 when some failed, 2 on a usage error.
int run_index(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace kinetoscope::cli
