// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file tensorboard/scalars.hpp
/// Per-step scalars for TensorBoard's Scalars tab (docs/tensorboard-files.md#step-scalars): each
/// recorded `ProfilerStep#N` of a window becomes one event record at step N whose values are
/// the Overview numbers the viewer shows for that step.
///
/// Tags (all values are float32 in the event file):
///
/// | tag                                        | value                                          |
/// |--------------------------------------------|------------------------------------------------|
/// | `Profiler/step_time_ms`                    | the step's duration (the viewer's "Total"), ms |
/// | `Profiler/breakdown/kernel_ms`             | Kernel time of the step, ms                    |
/// | `Profiler/breakdown/memcpy_ms`             | Memcpy, ms                                     |
/// | `Profiler/breakdown/memset_ms`             | Memset, ms                                     |
/// | `Profiler/breakdown/communication_ms`      | Communication, ms                              |
/// | `Profiler/breakdown/runtime_ms`            | Runtime, ms                                    |
/// | `Profiler/breakdown/dataloader_ms`         | DataLoader, ms                                 |
/// | `Profiler/breakdown/cpu_exec_ms`           | CPU Exec, ms                                   |
/// | `Profiler/breakdown/other_ms`              | Other, ms                                      |
/// | `Profiler/memory/peak_allocated_bytes/<D>` | peak allocated bytes of device D during the    |
/// |                                            | step (D = "CPU", "GPU0", ...); only devices    |
/// |                                            | with [memory] records in the window            |
/// | `Profiler/operators`                       | cpu_op events starting inside the step         |
/// | `Profiler/kernels`                         | GPU kernels launched inside the step           |
///
/// The record's step is N of `ProfilerStep#N`; its wall_time is the end of the host step.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kinetoscope/profiler.hpp"
#include "kinetoscope/trace_data.hpp"
#include "kinetoscope/tensorboard/tfevents.hpp"

namespace kinetoscope {

/// Tag prefix shared by every scalar written here.
inline constexpr const char* scalars_tag_prefix = "Profiler/";

/// The scalars of one recorded step.
struct step_scalars {
  std::int64_t step = 0;          ///< N of ProfilerStep#N
  std::int64_t start_ns = 0;      ///< host step range (trace_data clock)
  std::int64_t end_ns = 0;
  /// The viewer's Overview row of this step (torch-tb-profiler's numbers), in ms.
  double step_time_ms = 0;
  double kernel_ms = 0;
  double memcpy_ms = 0;
  double memset_ms = 0;
  double communication_ms = 0;
  double runtime_ms = 0;
  double dataloader_ms = 0;
  double cpu_exec_ms = 0;
  double other_ms = 0;
  /// (device, bytes): max "Total Allocated" of the device over the step, counting the level
  /// held when the step began (the last record before it); devices in first-record order.
  std::vector<std::pair<std::string, std::int64_t>> peak_allocated_bytes;
  std::int64_t operators = 0;     ///< cpu_op events (any thread) starting in [start, end)
  std::int64_t kernels = 0;       ///< kernels whose launching runtime call starts in the step
                                  ///< (kernels without one: whose start is in the step)

  /// The values under the documented tags, in the order of the table above.
  std::vector<scalar_value> to_scalar_values() const;
};

/**
 * The scalars of every `ProfilerStep#N` of `data`, in time order (empty when the window has no
 * ProfilerStep#, e.g. a profile without schedule). The breakdown is computed by the analysis
 * engine on the window serialised as the `.pt.trace.json` the writer produces, so the values
 * equal the viewer's Overview for that file (tail steps the Overview hides are still listed).
 * Throws std::runtime_error when the serialised window cannot be analysed.
 *
 * **Example**: `for (auto& s : kinetoscope::compute_step_scalars(prof.last_trace())) ...`
 */
std::vector<step_scalars> compute_step_scalars(const trace_data& data);

/**
 * Wraps any on_trace_ready callback: first calls `fn` (writes the trace), then appends one
 * event record per step of the window (compute_step_scalars) to an event file in `dir`. One
 * event_file_writer per returned callback (shared by its copies), created on the first window.
 * A scalar failure throws std::runtime_error after `fn` has run; when `fn` throws, the scalars
 * are still attempted and `fn`'s exception is rethrown (its message extended with the scalar
 * error, if any). An empty `fn` only writes scalars. `dir` "" means the current directory.
 *
 * **Example**: `.on_trace_ready = kinetoscope::with_tensorboard_scalars("log/run", my_handler)`
 */
trace_ready_fn with_tensorboard_scalars(std::string dir, trace_ready_fn fn);

/**
 * tensorboard_trace_handler(dir, worker_name, use_gzip) plus the window's step scalars in an
 * event file of the same directory, so TensorBoard's Scalars tab and the PyTorch Profiler tab
 * show the same run.
 *
 * **Example**:
 * `.on_trace_ready = kinetoscope::tensorboard_trace_handler_with_scalars("log/cnn")`
 */
trace_ready_fn tensorboard_trace_handler_with_scalars(std::string dir, std::string worker_name = "",
                                                      bool use_gzip = false);

}  // namespace kinetoscope
