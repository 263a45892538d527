// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file profiler.hpp
/// kinetoscope::profile: torch.profiler.profile for C++ programs.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kinetoscope/key_averages.hpp"
#include "kinetoscope/schedule.hpp"
#include "kinetoscope/trace_data.hpp"

namespace kinetoscope {

/// torch.profiler.ProfilerActivity.
enum class activity : std::uint8_t { cpu = 1, cuda = 2 };

class profile;

/// Called with the profile when a window is complete (torch's on_trace_ready).
using trace_ready_fn = std::function<void(profile&)>;

/// Construction options; the defaults are torch.profiler.profile's. Every member has a default
/// member initialiser so designated initialisers stay quiet under -Wextra (GCC 12).
struct profile_options {
  /// Empty: every activity this build and machine support (cpu, plus cuda when available).
  std::vector<activity> activities{};
  /// No schedule: record from start() to stop(), no ProfilerStep#N markers.
  schedule_fn schedule{};
  trace_ready_fn on_trace_ready{};
  bool record_shapes = false;
  bool profile_memory = false;
  bool with_stack = false;     ///< native call stack of every range ("Call stack", Source Location, export_stacks)
  bool with_flops = false;     ///< implies record_shapes
  bool with_modules = false;   ///< record module_scope calls (module_scope.hpp)
  bool acc_events = false;     ///< keep earlier windows for events()/key_averages()
  /// Worker name used by tensorboard_trace_handler when it is given none ("" = host_pid).
  std::string worker_name{};
  /// Written as "distributedInfo" (HTA and the distributed view read the rank from it).
  std::optional<distributed_info> distributed{};
};

/// Severity of a message from the profiler.
enum class log_level : std::uint8_t { info, warning, error };
/// Where profiler messages go; the default prints "[kinetoscope] warning: ..." to stderr.
using log_fn = std::function<void(log_level, std::string_view)>;
/// Replaces the message handler (nullptr restores the default); returns the previous one.
log_fn set_log_handler(log_fn handler);

/**
 * A profiling session, like `torch.profiler.profile`. RAII: the destructor stops a running
 * profile. Only one profile records at a time in a process; the recorder itself is global, as
 * in PyTorch.
 *
 * Misuse never stops the profiled program: start() twice, step() or stop() without start(), a
 * throwing on_trace_ready, an unwritable trace directory are reported through the log handler,
 * the call is ignored, and what was recorded stays available.
 *
 * **Example**:
 * @code
 * kinetoscope::profile prof({.schedule = kinetoscope::schedule({.wait = 1, .warmup = 1, .active = 3}),
 *                            .on_trace_ready = kinetoscope::tensorboard_trace_handler("log/run")});
 * prof.start();
 * for (int i = 0; i < 10; ++i) { train_step(); prof.step(); }
 * prof.stop();
 * std::cout << prof.key_averages().table({.sort_by = "self_cpu_time_total", .row_limit = 15});
 * @endcode
 */
class profile {
 public:
  explicit profile(profile_options options = {});
  ~profile();
  profile(const profile&) = delete;
  profile& operator=(const profile&) = delete;

  void start();
  void stop();
  /// Ends the current step: closes ProfilerStep#k, advances step_num, applies the schedule.
  void step();

  std::int64_t step_num() const noexcept;
  profiler_action current_action() const noexcept;
  bool running() const noexcept;
  const profile_options& options() const noexcept;
  /// Whether the cuda activity records in this session (false when CUPTI is unavailable).
  bool cuda_active() const noexcept;

  /// The last completed window. Throws std::logic_error("Profiler didn't finish running") when
  /// no window has completed yet.
  const trace_data& last_trace() const;
  /// prof.events(): the raw events of the last window (all windows with acc_events).
  event_list events() const;
  /// prof.key_averages().
  averages key_averages(bool group_by_input_shape = false, int group_by_stack_n = 0) const;
  // prof.export_chrome_trace(path) is the writer's export_chrome_trace(prof, path)
  // (kinetoscope/writer/chrome_trace.hpp): core never writes JSON, so it declares nothing that
  // only the writer library defines.

  /// Writes the stacks of events() in the folded format flame-graph tools read (see
  /// folded_stacks; docs/profiler-rules.md#export-stacks), e.g. `flamegraph.pl stacks.txt >
  /// cpu.svg`. Throws std::logic_error when the profile was made without with_stack or no window
  /// has completed, std::invalid_argument for an unknown metric, std::runtime_error (path and
  /// reason) when the file cannot be written.
  void export_stacks(const std::string& path, std::string_view metric = "self_cpu_time_total") const;

  /// Adds a top-level "key": "value" (a JSON string) to the windows recorded from now on.
  void add_metadata(std::string key, std::string_view value);
  /// Adds a top-level "key": <json_text> (written verbatim; must be valid JSON).
  void add_metadata_json(std::string key, std::string json_text);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Whether the cuda activity can record on this machine (CUPTI compiled in and a GPU present).
bool cuda_available() noexcept;

}  // namespace kinetoscope
