// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file activity_convert.hpp
/// CUPTI activity records (the structs of the CUDA 13 cupti_activity.h) -> trace_data.
///
/// Pure: no CUPTI call, no device. The backend feeds it the records of the completed buffers
/// and the correlation table its API callback built; tests feed it records they fill in
/// themselves. Everything Kineto decides when it writes a record is decided here: names,
/// the noisy-call filter, which calls get an ac2g flow, occupancy, External ids, the window.

#include <cupti_activity.h>

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "../clock.hpp"
#include "../collector.hpp"
#include "kinetoscope/trace_data.hpp"
#include "occupancy.hpp"

namespace kinetoscope::detail {

/// What the API callback saw when a runtime/driver call began on its thread.
struct api_caller {
  std::int64_t external_id = 0;  ///< innermost kinetoscope op/range open on the thread, 0 = none
  std::int64_t tid = 0;          ///< OS thread id
};
using caller_table = std::unordered_map<std::uint32_t, api_caller>;  // by correlation id

/// CUPTI's callback name for (domain, cbid), e.g. "cudaLaunchKernel_v7000"; nullptr if unknown.
using callback_name_fn = std::function<const char*(bool driver, std::uint32_t cbid)>;

/// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel": CUPTI's version suffix removed.
std::string_view strip_version_suffix(std::string_view name);
/// Kineto drops these runtime calls (frequent and uninteresting) and keeps only these driver
/// calls (kernel launches and the virtual memory management calls).
bool keep_runtime_call(std::uint32_t cbid);
bool keep_driver_call(std::uint32_t cbid);
/// The driver calls keep_driver_call() accepts (the backend subscribes to exactly these).
std::span<const std::uint32_t> kept_driver_calls();
/// Calls that enqueue GPU work or wait for it: they get an ac2g flow (docs/trace-format.md#flows).
bool enqueues_or_waits(std::string_view name, bool driver);
/// "Memcpy HtoD (Pageable -> Device)", "Memset (Device)"
/// (trace-format.md#gpu_memcpy-and-gpu_memset).
std::string memcpy_name(std::uint8_t copy_kind, std::uint8_t src_kind, std::uint8_t dst_kind);
std::string memset_name(std::uint16_t memory_kind);
/// Demangled kernel name; a kernel literally named "kernel" becomes "Kernel" (as Kineto).
std::string kernel_name(const char* mangled);

/// The window and converter for records stamped with CLOCK_MONOTONIC ns (the timestamp callback
/// of cupti_backend.cpp): the CPU window's tick bounds mapped onto monotonic ns, and a converter
/// that shifts monotonic ns onto the Unix epoch with `cpu`'s own offset.
struct mono_time_base {
  window_bounds window;
  tick_converter clock;
};
mono_time_base monotonic_time_base(const window_bounds& cpu_window, const tick_converter& cpu);

class activity_converter {
 public:
  /// `devices[i]` describes device id i. Records are kept when they begin and end inside
  /// `window` (in the clock of the CUPTI timestamp callback; see monotonic_time_base).
  activity_converter(trace_data& out, const std::vector<occupancy_device>& devices,
                     const window_bounds& window, const tick_converter& clock,
                     callback_name_fn names);

  /// Dispatches on record->kind; kinds this backend does not enable are counted and ignored.
  void add(const CUpti_Activity* record);
  void add_kernel(const CUpti_ActivityKernel10& k);
  void add_memcpy(const CUpti_ActivityMemcpy6& m);
  void add_memset(const CUpti_ActivityMemset4& m);
  void add_api(const CUpti_ActivityAPI& a, bool driver);
  void add_memory(const CUpti_ActivityMemory4& m);

  /// Joins every call and GPU activity to its caller by correlation (External id, thread),
  /// turns allocations into [memory] events with a running "Total Allocated" per device
  /// (`totals` carries it across windows), and sorts everything by time.
  void finish(const caller_table& callers, std::map<int, std::int64_t>& totals);

  std::size_t outside_window() const noexcept { return outside_window_; }
  std::size_t unknown_records() const noexcept { return unknown_; }

 private:
  bool inside(std::uint64_t start, std::uint64_t end) const noexcept;
  /// A new activity in out_.gpu with the fields every GPU record has, or nullptr (counted)
  /// when the record lies outside the window.
  gpu_activity* begin_gpu(gpu_kind kind, std::uint64_t start, std::uint64_t end, std::uint32_t device,
                          std::uint32_t context, std::uint32_t stream, std::uint32_t correlation);
  std::uint32_t api_name(bool driver, std::uint32_t cbid);
  std::uint32_t intern(std::string_view s);

  /// An allocation or free waiting for finish() (the running total needs time order).
  struct pending_memory {
    std::uint64_t tick;
    std::uint64_t addr;
    std::int64_t bytes;
    std::int32_t device;
    std::uint32_t correlation;
  };

  trace_data& out_;
  const std::vector<occupancy_device>& devices_;
  window_bounds window_;
  tick_converter clock_;
  callback_name_fn names_;
  std::unordered_map<std::uint64_t, std::uint32_t> api_names_;  // (driver << 32 | cbid) -> name
  std::unordered_map<std::string, std::uint32_t> names_by_text_;  // out_.strings, indexed
  /// CUPTI hands every launch of a function the same name pointer (valid while the buffers of
  /// this window are): demangle once per function, not once per launch.
  std::unordered_map<const char*, std::uint32_t> kernel_names_;
  std::vector<pending_memory> memory_;
  std::size_t outside_window_ = 0;
  std::size_t unknown_ = 0;
};

/// cuptiActivityGetNextRecord's signature: the seam through which tests walk buffers they fill.
using next_record_fn = CUptiResult (*)(std::uint8_t*, std::size_t, CUpti_Activity**);

/// Feeds every record of one completed buffer to `converter`; returns how many. `error`
/// receives CUPTI_SUCCESS at the normal end of the buffer, else the error that stopped the walk.
std::size_t parse_buffer(std::uint8_t* buffer, std::size_t valid_bytes, next_record_fn next,
                         activity_converter& converter, CUptiResult* error);

}  // namespace kinetoscope::detail
