// SPDX-License-Identifier: BSD-3-Clause
/// @file profile_export.cpp
/// export_chrome_trace(profile, path): torch.profiler's prof.export_chrome_trace(path), in the
/// writer library because core does not write JSON (docs/profiler-rules.md#export-chrome-trace).

#include "kinetoscope/profiler.hpp"
#include "kinetoscope/writer/chrome_trace.hpp"

namespace kinetoscope {

void export_chrome_trace(const profile& prof, const std::string& path) {
  // gzip iff the path ends in ".gz"; atomic (temporary file + rename); throws on failure.
  write_chrome_trace_file(prof.last_trace(), path);
}

}  // namespace kinetoscope
