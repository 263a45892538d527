// SPDX-License-Identifier: BSD-3-Clause
/// @file profile_export.cpp
/// profile::export_chrome_trace, declared in core's profiler.hpp and defined here so that the
/// core library does not depend on the writer (docs/profiler-rules.md#export-chrome-trace).

#include "kinetoscope/profiler.hpp"
#include "kinetoscope/writer/chrome_trace.hpp"

namespace kinetoscope {

void profile::export_chrome_trace(const std::string& path) const {
  // gzip iff the path ends in ".gz"; atomic (temporary file + rename); throws on failure.
  write_chrome_trace_file(last_trace(), path);
}

}  // namespace kinetoscope
