// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// The folder of real third-party traces (`traces/`) and torch-tb-profiler's numbers for them
/// (`expected/`): ../shared beside the checkout by default, or $KINETOSCOPE_REAL_TRACES (meson
/// test sets the variable from the real_traces option). Those files are never part of the
/// repository (tests/data/real/README.md); a test that needs them fails, naming the folder and
/// the variable, when they are not there.

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace kinetoscope::test {

/// $KINETOSCOPE_REAL_TRACES, checked: it holds traces/ and expected/. Fails the calling test
/// otherwise.
inline const char* real_traces() {
  static const std::string dir = [] {
    const char* s = std::getenv("KINETOSCOPE_REAL_TRACES");
    return std::string(s != nullptr ? s : "");
  }();
  REQUIRE_MESSAGE(!dir.empty(),
                  "KINETOSCOPE_REAL_TRACES is not set: it names the folder with the real third-party traces "
                  "(traces/, expected/), ../shared beside the checkout; meson test sets it");
  REQUIRE_MESSAGE((std::filesystem::is_directory(std::filesystem::path(dir) / "traces") &&
                   std::filesystem::is_directory(std::filesystem::path(dir) / "expected")),
                  "the real third-party traces are missing: " << dir << " has no traces/ and expected/. "
                  "They live in ../shared beside the checkout (CI lays it there); point "
                  "KINETOSCOPE_REAL_TRACES (or meson's -Dreal_traces=) at a copy");
  return dir.c_str();
}

}  // namespace kinetoscope::test
