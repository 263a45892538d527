// SPDX-License-Identifier: BSD-3-Clause
/// @file trace_handler.cpp
/// tensorboard_trace_handler (docs/profiler-rules.md#trace-handler,
/// docs/tensorboard-files.md#trace-file-names, docs/trace-format.md#file-naming).

#include "kinetoscope/writer/trace_handler.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "kinetoscope/writer/chrome_trace.hpp"

namespace kinetoscope {

std::string default_worker_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
    std::copy_n("localhost", 10, host);
  }
  return std::string(host) + "_" + std::to_string(::getpid());
}

std::string trace_file_name(const std::string& worker, std::int64_t unix_ms, bool use_gzip) {
  // Always 13 digits (zero-padded): the TensorBoard plugin orders spans by string comparison.
  std::string stamp = std::to_string(std::max<std::int64_t>(unix_ms, 0));
  if (stamp.size() < 13) stamp.insert(0, 13 - stamp.size(), '0');
  std::string name = worker + "." + stamp + ".pt.trace.json";
  if (use_gzip) name += ".gz";
  return name;
}

trace_ready_fn tensorboard_trace_handler(std::string dir_name, std::string worker_name,
                                         bool use_gzip) {
  // `resolved` caches "<hostname>_<pid>" from the first call, as torch does.
  return [dir = std::move(dir_name), worker = std::move(worker_name), use_gzip,
          resolved = std::string()](profile& prof) mutable {
    const std::filesystem::path dir_path(dir.empty() ? std::string(".") : dir);
    std::error_code ec;
    std::filesystem::create_directories(dir_path, ec);
    if (ec || !std::filesystem::is_directory(dir_path, ec)) {
      throw std::runtime_error("Can't create directory: " + dir);
    }

    std::string name = worker;
    if (name.empty()) name = prof.options().worker_name;
    if (name.empty()) {
      if (resolved.empty()) resolved = default_worker_name();
      name = resolved;
    }

    const trace_data& data = prof.last_trace();  // throws before any file is created
    std::int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
    std::filesystem::path path = dir_path / trace_file_name(name, ms, use_gzip);
    while (std::filesystem::exists(path, ec)) {
      ++ms;
      path = dir_path / trace_file_name(name, ms, use_gzip);
    }
    write_chrome_trace_file(data, path.string());
  };
}

}  // namespace kinetoscope
