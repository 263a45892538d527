// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file writer/trace_handler.hpp
/// torch.profiler.tensorboard_trace_handler.

#include <cstdint>
#include <string>

#include "kinetoscope/profiler.hpp"

namespace kinetoscope {

/**
 * Returns an on_trace_ready callback that writes each window to
 * `<dir>/<worker>.<unix_ms>.pt.trace.json[.gz]`, the names torch-tb-profiler discovers.
 * `worker_name` "" means the profile's worker_name, else "<hostname>_<pid>". The directory is
 * created when missing; the file is written under a temporary name and renamed. The 13-digit
 * millisecond stamp is bumped when a file of that name already exists, so names stay unique
 * and sort by time as strings. `dir_name` "" means the current directory.
 *
 * The callback throws std::runtime_error("Can't create directory: <dir>") when the directory
 * cannot be created, std::logic_error when the profile has no completed window, and
 * write_chrome_trace_file's std::runtime_error when the file cannot be written (a profile
 * reports an exception from on_trace_ready through its log handler).
 *
 * **Example**: `.on_trace_ready = kinetoscope::tensorboard_trace_handler("log/resnet", "", true)`
 */
trace_ready_fn tensorboard_trace_handler(std::string dir_name, std::string worker_name = "",
                                         bool use_gzip = false);

/// "<hostname>_<pid>" of the calling process (computed on each call).
std::string default_worker_name();

/// The file name the handler would use: "<worker>.<unix_ms>.pt.trace.json[.gz]", the stamp
/// zero-padded to 13 digits (negative stamps are written as 0).
std::string trace_file_name(const std::string& worker, std::int64_t unix_ms, bool use_gzip);

}  // namespace kinetoscope
