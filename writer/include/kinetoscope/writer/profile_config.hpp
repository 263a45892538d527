// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file writer/profile_config.hpp
/// Profile options from a JSON file or environment variables, in the manner of HuggingFace
/// Accelerate's `ProfileKwargs` (docs/profiler-rules.md#accelerate-options): a program built once
/// with `profile_options_from_env()` is profiled, or not, and with which options, without
/// recompiling.
///
/// JSON (every key optional; unknown keys are an error, as a dataclass rejects unknown kwargs):
/// @code{.json}
/// {"activities": ["cpu", "cuda"],
///  "schedule_option": {"wait": 1, "warmup": 1, "active": 3, "repeat": 2, "skip_first": 0},
///  "record_shapes": true, "profile_memory": true, "with_stack": false, "with_flops": true,
///  "with_modules": false, "output_trace_dir": "log/run", "use_gzip": false, "worker_name": ""}
/// @endcode
/// `output_trace_dir` installs `tensorboard_trace_handler(dir, worker_name, use_gzip)`: every
/// window is written as `<worker>.<ms>.pt.trace.json` under it, which `kinetoscope --logdir`
/// reads. (Accelerate writes one `profile_<rank>.json` at exit instead; with a schedule that
/// keeps only the last window, so we use the TensorBoard naming.)
///
/// Environment (each overrides the same key of the file named by KINETOSCOPE_CONFIG):
/// | variable                     | value                                                    |
/// |------------------------------|----------------------------------------------------------|
/// | KINETOSCOPE_PROFILE          | 1/0 (true/false, yes/no, on/off): profile or not          |
/// | KINETOSCOPE_CONFIG           | path of a JSON file as above                              |
/// | KINETOSCOPE_ACTIVITIES       | `cpu,cuda`                                                |
/// | KINETOSCOPE_SCHEDULE         | `wait=1,warmup=1,active=3,repeat=2` or a JSON object      |
/// | KINETOSCOPE_OUTPUT_DIR       | directory for `tensorboard_trace_handler`                 |
/// | KINETOSCOPE_RECORD_SHAPES, KINETOSCOPE_PROFILE_MEMORY, KINETOSCOPE_WITH_STACK,           |
/// | KINETOSCOPE_WITH_FLOPS, KINETOSCOPE_WITH_MODULES, KINETOSCOPE_USE_GZIP | booleans       |
/// | KINETOSCOPE_WORKER_NAME      | worker name used in file names                            |

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kinetoscope/profiler.hpp"
#include "kinetoscope/schedule.hpp"

namespace kinetoscope {

/// A configuration that cannot be used. what() names the source (file path or variable), the
/// key and the reason, e.g. `profile.json: "with_stack" must be true or false, not "yes"`.
class config_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The settings of one configuration; unset members leave the program's defaults alone.
struct profile_config {
  std::optional<bool> enabled{};  ///< KINETOSCOPE_PROFILE; the JSON file has no such key
  std::optional<std::vector<activity>> activities{};
  std::optional<schedule_args> schedule{};
  std::optional<bool> record_shapes{};
  std::optional<bool> profile_memory{};
  std::optional<bool> with_stack{};
  std::optional<bool> with_flops{};
  std::optional<bool> with_modules{};
  std::optional<std::string> output_trace_dir{};
  std::optional<bool> use_gzip{};
  std::optional<std::string> worker_name{};

  /// Whether any option is set (enabled aside).
  bool any_option() const noexcept;
};

/// Parses JSON text; `source` names it in error messages. Throws config_error.
profile_config parse_profile_config(std::string_view json_text, std::string_view source = "config");
/// Reads and parses a JSON file. Throws config_error (unreadable file, syntax, keys, types).
profile_config read_profile_config_file(const std::string& path);

/// Reads the KINETOSCOPE_* variables through `lookup` (nullptr result = unset): the file named by
/// KINETOSCOPE_CONFIG first, then every other variable over it. Throws config_error.
profile_config profile_config_from_env(const std::function<const char*(const char*)>& lookup);
/// The same with the process environment (std::getenv).
profile_config profile_config_from_env();

/// Overrides the members of `options` that `config` sets. The schedule is built with
/// kinetoscope::schedule() (invalid arguments become config_error); output_trace_dir installs
/// tensorboard_trace_handler; worker_name also goes to options.worker_name.
void apply_profile_config(const profile_config& config, profile_options& options);

/**
 * The options to profile with, or nullopt when the environment does not ask for profiling:
 * profiling is on when KINETOSCOPE_PROFILE is true, or when it is unset and KINETOSCOPE_CONFIG or
 * any option variable is set. `defaults` are the program's own options; the configuration
 * overrides them. Throws config_error for a bad configuration (better than silently profiling
 * with options the user did not ask for).
 *
 * **Example** (profiled only when run as `KINETOSCOPE_OUTPUT_DIR=log/run ./train`):
 * @code
 * std::optional<kinetoscope::profile> prof;
 * if (auto opts = kinetoscope::profile_options_from_env({.record_shapes = true})) {
 *   prof.emplace(std::move(*opts));
 *   prof->start();
 * }
 * for (...) { train_step(); if (prof) prof->step(); }
 * @endcode
 */
std::optional<profile_options> profile_options_from_env(profile_options defaults = {});
/// The same through `lookup` (for tests and embedding programs with their own settings).
std::optional<profile_options> profile_options_from_env(
    profile_options defaults, const std::function<const char*(const char*)>& lookup);

}  // namespace kinetoscope
