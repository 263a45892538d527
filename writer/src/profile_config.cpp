// SPDX-License-Identifier: BSD-3-Clause
/// @file profile_config.cpp
/// Profile options from JSON and KINETOSCOPE_* variables
/// (docs/profiler-rules.md#accelerate-options, Accelerate's ProfileKwargs). Strict by design: a
/// misspelt key or a wrong type is an error naming the source and the key, because silently
/// profiling with other options than asked wastes a whole run.

#include "kinetoscope/writer/profile_config.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "kinetoscope/writer/trace_handler.hpp"

namespace kinetoscope {
namespace {

using nlohmann::json;

[[noreturn]] void fail(std::string_view source, const std::string& message) {
  throw config_error(std::string(source) + ": " + message);
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(first, last - first + 1));
}

/// Accelerate's activity strings; "xpu", "mtia", "hpu" exist there but not in this build.
activity parse_activity(std::string_view text, std::string_view source) {
  const std::string name = lower(trim(text));
  if (name == "cpu") return activity::cpu;
  if (name == "cuda") return activity::cuda;
  if (name == "xpu" || name == "mtia" || name == "hpu")
    fail(source, "profiler activity \"" + name + "\" is not supported by kinetoscope (cpu, cuda)");
  fail(source, "Invalid profiler activity: \"" + std::string(text) + "\" (valid: cpu, cuda)");
}

std::vector<activity> activities_from_json(const json& value, std::string_view source) {
  if (!value.is_array()) fail(source, "\"activities\" must be a list of strings such as [\"cpu\", \"cuda\"]");
  std::vector<activity> out;
  for (const json& item : value) {
    if (!item.is_string()) fail(source, "\"activities\" must be a list of strings, found " + item.dump());
    out.push_back(parse_activity(item.get<std::string>(), source));
  }
  // PyTorch raises for an empty set ("No valid profiler activities found"); so do we.
  if (out.empty()) fail(source, "\"activities\" is empty: no valid profiler activities found");
  return out;
}

std::vector<activity> activities_from_text(std::string_view text, std::string_view source) {
  std::vector<activity> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = trim(text.substr(pos, comma - pos));
    if (!item.empty()) out.push_back(parse_activity(item, source));
    pos = comma + 1;
  }
  if (out.empty()) fail(source, "no valid profiler activities found (expected e.g. cpu,cuda)");
  return out;
}

std::int64_t schedule_int(const json& value, const std::string& key, std::string_view source) {
  if (!value.is_number_integer())
    fail(source, "schedule \"" + key + "\" must be an integer, not " + value.dump());
  return value.get<std::int64_t>();
}

/// The keyword arguments of torch.profiler.schedule; others are an error, as in Python.
schedule_args schedule_from_json(const json& value, std::string_view source) {
  if (!value.is_object())
    fail(source, "\"schedule_option\" must be an object such as {\"wait\": 1, \"warmup\": 1, \"active\": 3}");
  schedule_args args;
  for (const auto& [key, v] : value.items()) {
    if (key == "wait") args.wait = schedule_int(v, key, source);
    else if (key == "warmup") args.warmup = schedule_int(v, key, source);
    else if (key == "active") args.active = schedule_int(v, key, source);
    else if (key == "repeat") args.repeat = schedule_int(v, key, source);
    else if (key == "skip_first") args.skip_first = schedule_int(v, key, source);
    else if (key == "skip_first_wait") {
      if (v.is_boolean()) args.skip_first_wait = v.get<bool>();
      else if (v.is_number_integer()) args.skip_first_wait = v.get<std::int64_t>() != 0;
      else fail(source, "schedule \"skip_first_wait\" must be true, false, 0 or 1");
    } else {
      fail(source, "unknown schedule argument \"" + key +
                       "\" (valid: wait, warmup, active, repeat, skip_first, skip_first_wait)");
    }
  }
  return args;
}

/// "wait=1,warmup=1,active=3" (or a JSON object) from KINETOSCOPE_SCHEDULE.
schedule_args schedule_from_text(std::string_view text, std::string_view source) {
  const std::string t = trim(text);
  if (!t.empty() && t.front() == '{') {
    json value;
    try {
      value = json::parse(t);
    } catch (const json::exception& e) {
      fail(source, std::string("not valid JSON: ") + e.what());
    }
    return schedule_from_json(value, source);
  }
  json object = json::object();
  std::size_t pos = 0;
  while (pos <= t.size()) {
    const std::size_t comma = std::min(t.find(',', pos), t.size());
    const std::string item = trim(std::string_view(t).substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) fail(source, "expected key=value, found \"" + item + "\"");
    const std::string key = trim(std::string_view(item).substr(0, eq));
    const std::string number = trim(std::string_view(item).substr(eq + 1));
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(number.c_str(), &end, 10);
    if (number.empty() || end != number.c_str() + number.size() || errno != 0)
      fail(source, "schedule \"" + key + "\" must be an integer, not \"" + number + "\"");
    object[key] = n;
  }
  return schedule_from_json(object, source);
}

bool bool_from_json(const json& value, const std::string& key, std::string_view source) {
  if (!value.is_boolean()) fail(source, "\"" + key + "\" must be true or false, not " + value.dump());
  return value.get<bool>();
}

bool bool_from_text(std::string_view text, std::string_view source) {
  const std::string v = lower(trim(text));
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off" || v.empty()) return false;
  fail(source, "expected 1/0, true/false, yes/no or on/off, not \"" + std::string(text) + "\"");
}

std::string string_from_json(const json& value, const std::string& key, std::string_view source) {
  if (value.is_null()) return {};
  if (!value.is_string()) fail(source, "\"" + key + "\" must be a string, not " + value.dump());
  return value.get<std::string>();
}

}  // namespace

bool profile_config::any_option() const noexcept {
  return activities || schedule || record_shapes || profile_memory || with_stack || with_flops ||
         with_modules || output_trace_dir || use_gzip || worker_name;
}

profile_config parse_profile_config(std::string_view json_text, std::string_view source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    fail(source, std::string("not valid JSON: ") + e.what());
  }
  if (!root.is_object()) fail(source, "the configuration must be a JSON object");
  profile_config c;
  for (const auto& [key, value] : root.items()) {
    // null means "the default", as None does for ProfileKwargs.
    if (value.is_null() && key != "output_trace_dir" && key != "worker_name") continue;
    if (key == "activities") c.activities = activities_from_json(value, source);
    else if (key == "schedule_option") c.schedule = schedule_from_json(value, source);
    else if (key == "record_shapes") c.record_shapes = bool_from_json(value, key, source);
    else if (key == "profile_memory") c.profile_memory = bool_from_json(value, key, source);
    else if (key == "with_stack") c.with_stack = bool_from_json(value, key, source);
    else if (key == "with_flops") c.with_flops = bool_from_json(value, key, source);
    else if (key == "with_modules") c.with_modules = bool_from_json(value, key, source);
    else if (key == "use_gzip") c.use_gzip = bool_from_json(value, key, source);
    else if (key == "output_trace_dir") {
      if (!value.is_null()) c.output_trace_dir = string_from_json(value, key, source);
    } else if (key == "worker_name") {
      if (!value.is_null()) c.worker_name = string_from_json(value, key, source);
    } else {
      fail(source, "unknown key \"" + key +
                       "\" (valid: activities, schedule_option, record_shapes, profile_memory, "
                       "with_stack, with_flops, with_modules, output_trace_dir, use_gzip, worker_name)");
    }
  }
  return c;
}

profile_config read_profile_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot read the profiler configuration file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail(path, "error while reading the profiler configuration file");
  return parse_profile_config(text.str(), path);
}

profile_config profile_config_from_env(const std::function<const char*(const char*)>& lookup) {
  const auto get = [&](const char* name) -> std::optional<std::string> {
    const char* v = lookup(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  profile_config c;
  if (auto path = get("KINETOSCOPE_CONFIG"); path && !trim(*path).empty()) {
    c = read_profile_config_file(trim(*path));
  }
  if (auto v = get("KINETOSCOPE_PROFILE")) c.enabled = bool_from_text(*v, "KINETOSCOPE_PROFILE");
  if (auto v = get("KINETOSCOPE_ACTIVITIES")) c.activities = activities_from_text(*v, "KINETOSCOPE_ACTIVITIES");
  if (auto v = get("KINETOSCOPE_SCHEDULE")) c.schedule = schedule_from_text(*v, "KINETOSCOPE_SCHEDULE");
  const std::pair<const char*, std::optional<bool> profile_config::*> flags[] = {
      {"KINETOSCOPE_RECORD_SHAPES", &profile_config::record_shapes},
      {"KINETOSCOPE_PROFILE_MEMORY", &profile_config::profile_memory},
      {"KINETOSCOPE_WITH_STACK", &profile_config::with_stack},
      {"KINETOSCOPE_WITH_FLOPS", &profile_config::with_flops},
      {"KINETOSCOPE_WITH_MODULES", &profile_config::with_modules},
      {"KINETOSCOPE_USE_GZIP", &profile_config::use_gzip},
  };
  for (const auto& [name, member] : flags) {
    if (auto v = get(name)) c.*member = bool_from_text(*v, name);
  }
  if (auto v = get("KINETOSCOPE_OUTPUT_DIR")) c.output_trace_dir = trim(*v);
  if (auto v = get("KINETOSCOPE_WORKER_NAME")) c.worker_name = trim(*v);
  return c;
}

profile_config profile_config_from_env() {
  return profile_config_from_env([](const char* name) { return std::getenv(name); });
}

void apply_profile_config(const profile_config& config, profile_options& options) {
  if (config.activities) options.activities = *config.activities;
  if (config.schedule) {
    try {
      options.schedule = schedule(*config.schedule);
    } catch (const std::invalid_argument& e) {
      throw config_error(std::string("schedule: ") + e.what());
    }
  }
  if (config.record_shapes) options.record_shapes = *config.record_shapes;
  if (config.profile_memory) options.profile_memory = *config.profile_memory;
  if (config.with_stack) options.with_stack = *config.with_stack;
  if (config.with_flops) options.with_flops = *config.with_flops;
  if (config.with_modules) options.with_modules = *config.with_modules;
  if (config.worker_name) options.worker_name = *config.worker_name;
  if (config.output_trace_dir) {
    // The worker name is resolved by the handler from the profile's worker_name at write time.
    options.on_trace_ready =
        tensorboard_trace_handler(*config.output_trace_dir, "", config.use_gzip.value_or(false));
  }
}

std::optional<profile_options> profile_options_from_env(
    profile_options defaults, const std::function<const char*(const char*)>& lookup) {
  const profile_config config = profile_config_from_env(lookup);
  const char* file = lookup("KINETOSCOPE_CONFIG");
  const bool has_file = file != nullptr && !trim(file).empty();
  const bool wanted = config.enabled.value_or(config.any_option() || has_file);
  if (!wanted) return std::nullopt;
  apply_profile_config(config, defaults);
  return defaults;
}

std::optional<profile_options> profile_options_from_env(profile_options defaults) {
  return profile_options_from_env(std::move(defaults),
                                  [](const char* name) { return std::getenv(name); });
}

}  // namespace kinetoscope
