// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file memory.hpp
/// Allocation events for profile_memory: an API for any allocator, and a ready tracking
/// allocator. Each call becomes a `[memory]` instant event (Addr, Bytes, Total Allocated,
/// Total Reserved, Device Type, Device Id) while a profile with profile_memory is recording;
/// per-device running totals are kept at all times so "Total Allocated" is right from the start.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>

#include "kinetoscope/trace_data.hpp"

namespace kinetoscope {

/// Reports an allocation of `bytes` at `ptr`. Updates the device's running total.
void report_alloc(const void* ptr, std::int64_t bytes, device_type device = device_type::cpu,
                  int device_id = -1) noexcept;
/// Reports that the block at `ptr` of `bytes` was freed.
void report_free(const void* ptr, std::int64_t bytes, device_type device = device_type::cpu,
                 int device_id = -1) noexcept;
/// For allocators that keep their own totals (a caching allocator): records one event with the
/// given signed `bytes` and the allocator's totals after the call; running totals are untouched.
void report_memory_event(const void* ptr, std::int64_t bytes, std::int64_t total_allocated,
                         std::int64_t total_reserved, device_type device = device_type::cpu,
                         int device_id = -1) noexcept;
/// Bytes currently reported as allocated on a device (through report_alloc/report_free).
std::int64_t total_allocated(device_type device = device_type::cpu, int device_id = -1) noexcept;

/// malloc/free that report to the profiler.
void* tracked_malloc(std::size_t bytes);
void tracked_free(void* ptr, std::size_t bytes) noexcept;

/**
 * A std allocator that reports every allocation and free.
 *
 * **Example**: `std::vector<float, kinetoscope::tracking_allocator<float>> v(1024);`
 */
template <class T>
struct tracking_allocator {
  using value_type = T;
  tracking_allocator() noexcept = default;
  template <class U>
  tracking_allocator(const tracking_allocator<U>&) noexcept {}  // NOLINT: rebinding is implicit

  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(tracked_malloc(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { tracked_free(p, n * sizeof(T)); }

  template <class U>
  bool operator==(const tracking_allocator<U>&) const noexcept { return true; }
};

}  // namespace kinetoscope
