// SPDX-License-Identifier: BSD-3-Clause
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kinetoscope/schedule.hpp"
#include "test_support.hpp"

using kinetoscope::profiler_action;

namespace {
std::string sequence(const kinetoscope::schedule_fn& f, int steps) {
  std::string out;
  for (int i = 0; i < steps; ++i) {
    if (i) out += ' ';
    out += kinetoscope::to_string(f(i));
  }
  return out;
}
}  // namespace

TEST_CASE("schedule: PyTorch 1.13 verified sequence (wait=1 warmup=1 active=2 repeat=2 skip_first=1)") {
  auto f = kinetoscope::schedule({.wait = 1, .warmup = 1, .active = 2, .repeat = 2, .skip_first = 1});
  CHECK(sequence(f, 14) ==
        "NONE NONE WARMUP RECORD RECORD_AND_SAVE NONE WARMUP RECORD RECORD_AND_SAVE NONE NONE NONE "
        "NONE NONE");
}

TEST_CASE("schedule: repeat 0 cycles forever") {
  auto f = kinetoscope::schedule({.wait = 1, .warmup = 1, .active = 2});
  CHECK(sequence(f, 8) == "NONE WARMUP RECORD RECORD_AND_SAVE NONE WARMUP RECORD RECORD_AND_SAVE");
  CHECK(f(1000) == profiler_action::none);        // 1000 % 4 == 0
  CHECK(f(1003) == profiler_action::record_and_save);
}

TEST_CASE("schedule: active=1 makes every recorded step a save step") {
  auto f = kinetoscope::schedule({.wait = 0, .warmup = 1, .active = 1, .repeat = 3});
  CHECK(sequence(f, 7) == "WARMUP RECORD_AND_SAVE WARMUP RECORD_AND_SAVE WARMUP RECORD_AND_SAVE NONE");
}

TEST_CASE("schedule: skip_first_wait drops the first wait only") {
  auto f = kinetoscope::schedule({.wait = 2, .warmup = 1, .active = 1, .repeat = 2, .skip_first_wait = true});
  CHECK(sequence(f, 7) == "WARMUP RECORD_AND_SAVE NONE NONE WARMUP RECORD_AND_SAVE NONE");
}

TEST_CASE("schedule: Accelerate docs example never reaches a save within 8 steps") {
  auto f = kinetoscope::schedule({.wait = 5, .warmup = 1, .active = 3, .repeat = 2, .skip_first = 10});
  for (int i = 0; i < 16; ++i) CHECK(f(i) != profiler_action::record);
  CHECK(f(15) == profiler_action::warmup);
  CHECK(f(16) == profiler_action::record);
  CHECK(f(18) == profiler_action::record_and_save);
  CHECK(f(27) == profiler_action::record_and_save);
  CHECK(f(28) == profiler_action::none);
}

TEST_CASE("schedule: invalid arguments are rejected with a clear message") {
  const kinetoscope::schedule_args bad[] = {
      {.wait = -1}, {.warmup = -1}, {.active = 0}, {.repeat = -1}, {.skip_first = -2}};
  for (const auto& a : bad) {
    try {
      (void)kinetoscope::schedule(a);
      FAIL("expected std::invalid_argument");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("Invalid profiler schedule arguments") != std::string::npos);
    }
  }
}

TEST_CASE("schedule: warmup=0 warns once at construction") {
  test_support::log_capture logs;
  (void)kinetoscope::schedule({.wait = 1, .warmup = 0, .active = 2});
  REQUIRE(logs.messages.size() == 1);
  CHECK(logs.messages[0].find("won't be using warmup") != std::string::npos);
}
