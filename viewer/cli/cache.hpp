// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file cache.hpp
/// `kinetoscope cache [list|prune|clear] [--cache_dir DIR] [--cache_max SIZE] [--json]`: what
/// the index cache holds (each index's size, last use, trace and state), and pruning it to its
/// budget or emptying it (server/index_cache.hpp).
#include <iosfwd>
#include <string>
#include <vector>

namespace kinetoscope::cli {

std::string cache_usage();
/// Exit status: 0 done, 2 on a usage error or when there is no cache folder.
int run_cache(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace kinetoscope::cli
