// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file kinetoscope.hpp
/// Umbrella header of the recording core: torch.profiler's model for C++ programs.
///
/// Quickstart
/// ----------
/// @code
/// #include <kinetoscope/kinetoscope.hpp>
/// #include <kinetoscope/writer/trace_handler.hpp>
///
/// kinetoscope::profile prof({
///     .schedule = kinetoscope::schedule({.wait = 1, .warmup = 1, .active = 3, .repeat = 2}),
///     .on_trace_ready = kinetoscope::tensorboard_trace_handler("log/run1"),
///     .record_shapes = true, .profile_memory = true, .with_flops = true});
/// prof.start();
/// for (int step = 0; step < 12; ++step) {
///   KINETOSCOPE_RANGE("forward");                       // a user range (static name)
///   kinetoscope::record_op mm("aten::mm", {kinetoscope::arg::tensor({64, 128}),
///                                          kinetoscope::arg::tensor({128, 256})});
///   ...
///   prof.step();                                        // ProfilerStep#N, schedule
/// }
/// prof.stop();
/// std::cout << prof.key_averages().table({.sort_by = "self_cpu_time_total", .row_limit = 15});
/// @endcode
///
/// Data flow
/// ---------
///   record_function / record_op / report_alloc        (any thread, lock-free)
///            |  40-byte entries, rdtsc ticks, static-name pointers
///            v
///   per-thread chunked queues  --collect at stop()/step()-->  trace_data (Unix ns, interned)
///                                                               |            |
///                                      key_averages()/table() <-+            +-> writer/ (JSON, gzip)

#include "kinetoscope/key_averages.hpp"
#include "kinetoscope/memory.hpp"
#include "kinetoscope/module_profile.hpp"
#include "kinetoscope/module_scope.hpp"
#include "kinetoscope/profiler.hpp"
#include "kinetoscope/record_function.hpp"
#include "kinetoscope/schedule.hpp"
#include "kinetoscope/trace_data.hpp"
