// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// Runs one of our programs (a sample, the kinetoscope CLI) the way a user's shell would, for the
/// tests that check its output and exit status.

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace kinetoscope::test {

struct command_result {
  int status = -1;     ///< the exit status; -1 when the command did not exit (a signal)
  std::string output;  ///< stdout and stderr, interleaved as the program wrote them
};

/// Runs `command` through /bin/sh with stderr merged into stdout (`2>&1` is appended).
inline command_result run_command(const std::string& command) {
  command_result r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 65536> buf{};
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) r.output.append(buf.data(), n);
  const int status = ::pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace kinetoscope::test
