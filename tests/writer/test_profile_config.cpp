// SPDX-License-Identifier: BSD-3-Clause
// Profile options from JSON and KINETOSCOPE_* variables
// (docs/profiler-rules.md#accelerate-options): parsing, strict errors, precedence of the
// environment over the file, and a profile run configured this way that writes its windows where
// the configuration says.

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kinetoscope/kinetoscope.hpp"
#include "kinetoscope/writer/profile_config.hpp"
#include "writer_test_util.hpp"

namespace fs = std::filesystem;
using writer_test::temp_dir;

namespace {

/// A fake environment for profile_config_from_env(lookup).
struct fake_env {
  std::map<std::string, std::string> vars;
  std::function<const char*(const char*)> lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const kinetoscope::config_error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<kinetoscope::profiler_action> actions(const kinetoscope::schedule_fn& s, int steps) {
  std::vector<kinetoscope::profiler_action> out;
  for (int i = 0; i < steps; ++i) out.push_back(s(i));
  return out;
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

}  // namespace

TEST_CASE("config: every ProfileKwargs key of a JSON file") {
  const auto c = kinetoscope::parse_profile_config(R"({
      "activities": ["cpu", "CUDA"],
      "schedule_option": {"wait": 1, "warmup": 2, "active": 3, "repeat": 4, "skip_first": 5},
      "record_shapes": true, "profile_memory": false, "with_stack": true, "with_flops": true,
      "with_modules": false, "output_trace_dir": "log/run", "use_gzip": true,
      "worker_name": "w0"})");
  REQUIRE(c.activities);
  CHECK(*c.activities == std::vector{kinetoscope::activity::cpu, kinetoscope::activity::cuda});
  REQUIRE(c.schedule);
  CHECK(c.schedule->wait == 1);
  CHECK(c.schedule->warmup == 2);
  CHECK(c.schedule->active == 3);
  CHECK(c.schedule->repeat == 4);
  CHECK(c.schedule->skip_first == 5);
  CHECK(c.record_shapes == true);
  CHECK(c.profile_memory == false);
  CHECK(c.with_stack == true);
  CHECK(c.with_flops == true);
  CHECK(c.with_modules == false);
  CHECK(c.output_trace_dir == "log/run");
  CHECK(c.use_gzip == true);
  CHECK(c.worker_name == "w0");
  CHECK(c.any_option());
  CHECK_FALSE(c.enabled.has_value());
}

TEST_CASE("config: null and absent keys leave the program's defaults") {
  const auto c = kinetoscope::parse_profile_config(R"({"activities": null, "output_trace_dir": null})");
  CHECK_FALSE(c.any_option());
  kinetoscope::profile_options options{.record_shapes = true, .worker_name = "mine"};
  kinetoscope::apply_profile_config(c, options);
  CHECK(options.record_shapes);
  CHECK(options.worker_name == "mine");
  CHECK_FALSE(options.on_trace_ready);
  CHECK_FALSE(options.schedule);
}

TEST_CASE("config: bad input names the source, the key and the reason") {
  using kinetoscope::parse_profile_config;
  CHECK(error_of([] { parse_profile_config(R"({"with_stak": true})", "p.json"); }) ==
        "p.json: unknown key \"with_stak\" (valid: activities, schedule_option, record_shapes, "
        "profile_memory, with_stack, with_flops, with_modules, output_trace_dir, use_gzip, worker_name)");
  CHECK(error_of([] { parse_profile_config(R"({"with_stack": "yes"})", "p.json"); }) ==
        "p.json: \"with_stack\" must be true or false, not \"yes\"");
  CHECK(error_of([] { parse_profile_config(R"({"activities": ["cpu", "tpu"]})", "p.json"); }) ==
        "p.json: Invalid profiler activity: \"tpu\" (valid: cpu, cuda)");
  CHECK(error_of([] { parse_profile_config(R"({"activities": ["xpu"]})", "p.json"); }) ==
        "p.json: profiler activity \"xpu\" is not supported by kinetoscope (cpu, cuda)");
  CHECK(error_of([] { parse_profile_config(R"({"activities": []})", "p.json"); }) ==
        "p.json: \"activities\" is empty: no valid profiler activities found");
  CHECK(error_of([] { parse_profile_config(R"({"activities": "cpu"})", "p.json"); }) ==
        "p.json: \"activities\" must be a list of strings such as [\"cpu\", \"cuda\"]");
  CHECK(error_of([] { parse_profile_config(R"({"schedule_option": {"wait": 1.5}})", "p.json"); }) ==
        "p.json: schedule \"wait\" must be an integer, not 1.5");
  CHECK(error_of([] { parse_profile_config(R"({"schedule_option": {"wiat": 1}})", "p.json"); }) ==
        "p.json: unknown schedule argument \"wiat\" (valid: wait, warmup, active, repeat, "
        "skip_first, skip_first_wait)");
  CHECK(error_of([] { parse_profile_config(R"({"output_trace_dir": 3})", "p.json"); }) ==
        "p.json: \"output_trace_dir\" must be a string, not 3");
  CHECK(error_of([] { parse_profile_config(R"([1, 2])", "p.json"); }) ==
        "p.json: the configuration must be a JSON object");
  const std::string syntax = error_of([] { parse_profile_config(R"({"with_stack": tru})", "p.json"); });
  CHECK(syntax.rfind("p.json: not valid JSON: ", 0) == 0);
  CHECK(syntax.find("line 1") != std::string::npos);
}

TEST_CASE("config: schedule arguments PyTorch rejects are an error, not a silent default") {
  const auto c = kinetoscope::parse_profile_config(R"({"schedule_option": {"active": 0}})");
  kinetoscope::profile_options options;
  const std::string message = error_of([&] { kinetoscope::apply_profile_config(c, options); });
  CHECK(message.rfind("schedule: Invalid profiler schedule arguments", 0) == 0);
  CHECK_FALSE(options.schedule);
}

TEST_CASE("config: the schedule built from a file is torch.profiler.schedule's") {
  const auto c = kinetoscope::parse_profile_config(
      R"({"schedule_option": {"wait": 1, "warmup": 1, "active": 2, "repeat": 2, "skip_first": 1}})");
  kinetoscope::profile_options options;
  kinetoscope::apply_profile_config(c, options);
  REQUIRE(options.schedule);
  CHECK(actions(options.schedule, 14) == actions(kinetoscope::schedule({.wait = 1, .warmup = 1, .active = 2,
                                                                        .repeat = 2, .skip_first = 1}),
                                                 14));
}

TEST_CASE("config: environment variables, and their precedence over KINETOSCOPE_CONFIG") {
  temp_dir dir;
  const fs::path file = dir.path() / "profile.json";
  write_file(file, R"({"record_shapes": true, "with_flops": true, "activities": ["cpu", "cuda"],
                       "output_trace_dir": "from-file"})");
  fake_env env;
  env.vars = {{"KINETOSCOPE_CONFIG", file.string()},
              {"KINETOSCOPE_ACTIVITIES", " cpu "},
              {"KINETOSCOPE_WITH_FLOPS", "off"},
              {"KINETOSCOPE_PROFILE_MEMORY", "Yes"},
              {"KINETOSCOPE_SCHEDULE", "wait=2, warmup=1,active=3"},
              {"KINETOSCOPE_OUTPUT_DIR", "from-env"}};
  const auto c = kinetoscope::profile_config_from_env(env.lookup());
  CHECK(c.record_shapes == true);                                      // file
  CHECK(*c.activities == std::vector{kinetoscope::activity::cpu});     // env over file
  CHECK(c.with_flops == false);                                        // env over file
  CHECK(c.profile_memory == true);                                     // env only
  REQUIRE(c.schedule);
  CHECK(c.schedule->wait == 2);
  CHECK(c.schedule->warmup == 1);
  CHECK(c.schedule->active == 3);
  CHECK(c.schedule->repeat == 0);
  CHECK(c.output_trace_dir == "from-env");
  CHECK_FALSE(c.with_stack.has_value());

  env.vars = {{"KINETOSCOPE_SCHEDULE", R"({"active": 2, "repeat": 1})"}};
  const auto json_schedule = kinetoscope::profile_config_from_env(env.lookup());
  REQUIRE(json_schedule.schedule);
  CHECK(json_schedule.schedule->active == 2);
  CHECK(json_schedule.schedule->repeat == 1);
}

TEST_CASE("config: bad environment values name the variable") {
  fake_env env;
  env.vars = {{"KINETOSCOPE_WITH_STACK", "maybe"}};
  CHECK(error_of([&] { kinetoscope::profile_config_from_env(env.lookup()); }) ==
        "KINETOSCOPE_WITH_STACK: expected 1/0, true/false, yes/no or on/off, not \"maybe\"");
  env.vars = {{"KINETOSCOPE_SCHEDULE", "wait=x"}};
  CHECK(error_of([&] { kinetoscope::profile_config_from_env(env.lookup()); }) ==
        "KINETOSCOPE_SCHEDULE: schedule \"wait\" must be an integer, not \"x\"");
  env.vars = {{"KINETOSCOPE_SCHEDULE", "active"}};
  CHECK(error_of([&] { kinetoscope::profile_config_from_env(env.lookup()); }) ==
        "KINETOSCOPE_SCHEDULE: expected key=value, found \"active\"");
  env.vars = {{"KINETOSCOPE_ACTIVITIES", "cpu,gpu"}};
  CHECK(error_of([&] { kinetoscope::profile_config_from_env(env.lookup()); }) ==
        "KINETOSCOPE_ACTIVITIES: Invalid profiler activity: \"gpu\" (valid: cpu, cuda)");
  env.vars = {{"KINETOSCOPE_CONFIG", "/nonexistent/kinetoscope.json"}};
  CHECK(error_of([&] { kinetoscope::profile_config_from_env(env.lookup()); }) ==
        "/nonexistent/kinetoscope.json: cannot read the profiler configuration file");
}

TEST_CASE("config: profile_options_from_env decides whether to profile") {
  fake_env env;
  CHECK_FALSE(kinetoscope::profile_options_from_env({}, env.lookup()).has_value());
  env.vars = {{"KINETOSCOPE_PROFILE", "1"}};
  const auto plain = kinetoscope::profile_options_from_env({.record_shapes = true}, env.lookup());
  REQUIRE(plain.has_value());
  CHECK(plain->record_shapes);  // the program's defaults stay
  env.vars = {{"KINETOSCOPE_WITH_STACK", "1"}};
  const auto stack = kinetoscope::profile_options_from_env({}, env.lookup());
  REQUIRE(stack.has_value());
  CHECK(stack->with_stack);
  env.vars = {{"KINETOSCOPE_WITH_STACK", "1"}, {"KINETOSCOPE_PROFILE", "0"}};
  CHECK_FALSE(kinetoscope::profile_options_from_env({}, env.lookup()).has_value());
  env.vars = {{"KINETOSCOPE_CONFIG", "  "}};
  CHECK_FALSE(kinetoscope::profile_options_from_env({}, env.lookup()).has_value());
}

TEST_CASE("config: a profile configured from the environment writes its windows to the output dir") {
  temp_dir dir;
  const fs::path out = dir.path() / "run";
  fake_env env;
  env.vars = {{"KINETOSCOPE_OUTPUT_DIR", out.string()},
              {"KINETOSCOPE_SCHEDULE", "wait=1,warmup=1,active=2,repeat=2"},
              {"KINETOSCOPE_WORKER_NAME", "worker0"},
              {"KINETOSCOPE_USE_GZIP", "true"},
              {"KINETOSCOPE_RECORD_SHAPES", "1"}};
  auto options = kinetoscope::profile_options_from_env({}, env.lookup());
  REQUIRE(options.has_value());
  CHECK(options->worker_name == "worker0");
  {
    kinetoscope::profile prof(std::move(*options));
    prof.start();
    for (int step = 0; step < 8; ++step) {
      {
        kinetoscope::record_op op("aten::mm", {kinetoscope::arg::tensor({4, 8}), kinetoscope::arg::tensor({8, 2})});
      }
      prof.step();
    }
    prof.stop();
  }
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(out)) names.push_back(entry.path().filename().string());
  REQUIRE(names.size() == 2);  // two cycles of wait 1, warmup 1, active 2
  for (const std::string& name : names) {
    CHECK(name.rfind("worker0.", 0) == 0);
    CHECK(name.size() > 17);
    CHECK(name.substr(name.size() - 17) == ".pt.trace.json.gz");
    const auto trace = nlohmann::json::parse(writer_test::gunzip(writer_test::read_file(out / name)));
    CHECK(trace["record_shapes"] == 1);
    int mm = 0;
    for (const auto& event : trace["traceEvents"]) {
      if (event.value("name", "") != "aten::mm") continue;
      ++mm;
      CHECK(event["args"]["Input Dims"] == nlohmann::json::parse("[[4, 8], [8, 2]]"));
    }
    CHECK(mm == 2);  // the two active steps of the window
  }
}
