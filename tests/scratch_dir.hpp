// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// A fresh folder under the system's temporary directory for one test, removed with it:
/// `<tmp>/kinetoscope_test_<tag>_<pid>`.

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace kinetoscope::test {

struct scratch {
  std::filesystem::path path;
  explicit scratch(const std::string& tag) {
    path = std::filesystem::temp_directory_path() / ("kinetoscope_test_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~scratch() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
};

}  // namespace kinetoscope::test
