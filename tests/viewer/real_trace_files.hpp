// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file real_trace_files.hpp
/// Test helper: the real traces of tests/data/real (their folder comes from
/// $KINETOSCOPE_REAL_TRACES, which meson test sets) and their texts, for the viewer tests that
/// read them directly.

#include <doctest/doctest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>
#include "../real_traces.hpp"

namespace kinetoscope_test {

inline std::string real_dir() {
  const char* s = kinetoscope::test::real_traces();
  REQUIRE_MESSAGE(s != nullptr, "KINETOSCOPE_REAL_TRACES not set (meson test sets it)");
  return s;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string gunzip_file(const std::string& path) {
  gzFile gz = gzopen(path.c_str(), "rb");
  REQUIRE_MESSAGE(gz != nullptr, path);
  std::string out;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(gz, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  gzclose(gz);
  return out;
}

/// The JSON text of a trace file, inflated when its name ends in ".gz".
inline std::string read_trace_text(const std::string& path) {
  return path.ends_with(".gz") ? gunzip_file(path) : read_bytes(path);
}

/// Every .json / .json.gz file under real_dir()/traces, sorted.
inline std::vector<std::string> real_traces() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(real_dir() + "/traces")) {
    const std::string p = e.path().string();
    if (e.is_regular_file() && (p.ends_with(".json") || p.ends_with(".json.gz"))) files.push_back(p);
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace kinetoscope_test
