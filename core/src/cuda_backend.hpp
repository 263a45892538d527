// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file cuda_backend.hpp
/// What profiler.cpp needs from the cuda activity. Two implementations: the CUPTI backend
/// (core/src/cupti/, built when meson finds CUPTI) and a stub (core/src/cupti/cupti_stub.cpp)
/// whose reason says the build has none. The profile state machine calls these only when the
/// cuda activity is on, so a CPU-only profile never touches CUDA.

#include <string>

#include "clock.hpp"
#include "collector.hpp"
#include "kinetoscope/trace_data.hpp"

namespace kinetoscope::detail {

/// Empty when the cuda activity can record on this machine; otherwise one sentence saying why
/// not ("no NVIDIA driver (libcuda.so.1 not found)"). Probed once per process, thread-safe.
const std::string& cuda_unavailable_reason();

/// Enables GPU activity recording for a window (profile_memory adds GPU allocations). Returns
/// false, after logging why, when CUPTI refuses; the window then records CPU activity only.
bool cuda_start(bool profile_memory);

/// Waits until every device has finished the work queued so far (PyTorch synchronises before
/// it closes a window, so the window's trailing kernels are not lost).
void cuda_synchronize();

/// Flushes and disables recording and adds the window's GPU activities, runtime/driver calls,
/// GPU [memory] events and deviceProperties to `out` (times converted by `clock`, records
/// outside `window` dropped). Warns when CUPTI dropped records.
void cuda_stop(trace_data& out, const window_bounds& window, const tick_converter& clock);

}  // namespace kinetoscope::detail
