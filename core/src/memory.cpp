// SPDX-License-Identifier: BSD-3-Clause
#include "kinetoscope/memory.hpp"

#include <atomic>
#include <cstdlib>

#include "kinetoscope/detail/recorder.hpp"

namespace kinetoscope {
namespace {

constexpr int max_devices = 64;
std::atomic<std::int64_t> g_cpu_total{0};
std::atomic<std::int64_t> g_cuda_total[max_devices];

std::atomic<std::int64_t>* counter(device_type device, int device_id) noexcept {
  if (device == device_type::cpu) return &g_cpu_total;
  if (device_id < 0 || device_id >= max_devices) return nullptr;
  return &g_cuda_total[device_id];
}

void push_event(std::uintptr_t addr, std::int64_t bytes, std::int64_t total_allocated,
                std::int64_t total_reserved, device_type device, int device_id) noexcept {
  detail::thread_buffer* b = detail::buffer();
  auto* e = reinterpret_cast<detail::memory_entry*>(b->reserve(sizeof(detail::memory_entry)));
  e->h = detail::entry_header{detail::entry_type::memory, 0, 0, 0, sizeof(detail::memory_entry)};
  e->tick = detail::now_ticks();
  e->addr = addr;
  e->bytes = bytes;
  e->total_allocated = total_allocated;
  e->total_reserved = total_reserved;
  e->device_type = static_cast<std::int8_t>(device);
  e->pad0 = 0;
  e->device_id = static_cast<std::int16_t>(device == device_type::cpu ? -1 : device_id);
  e->pad1 = 0;
  b->commit(sizeof(detail::memory_entry));
}

bool memory_on() noexcept {
  constexpr std::uint32_t need = detail::flag_cpu | detail::flag_memory;
  return (detail::g_flags.load(std::memory_order_relaxed) & need) == need;
}

// Addresses travel as integers: the pointee is never read (and GCC 12 would warn that a fresh
// malloc block passed as `const void*` "may be used uninitialized").
void report(std::uintptr_t addr, std::int64_t signed_bytes, device_type device, int device_id) noexcept {
  std::atomic<std::int64_t>* c = counter(device, device_id);
  const std::int64_t total =
      c != nullptr ? c->fetch_add(signed_bytes, std::memory_order_relaxed) + signed_bytes : 0;
  if (memory_on()) push_event(addr, signed_bytes, total, 0, device, device_id);
}

}  // namespace

void report_alloc(const void* ptr, std::int64_t bytes, device_type device, int device_id) noexcept {
  report(reinterpret_cast<std::uintptr_t>(ptr), bytes < 0 ? -bytes : bytes, device, device_id);
}

void report_free(const void* ptr, std::int64_t bytes, device_type device, int device_id) noexcept {
  report(reinterpret_cast<std::uintptr_t>(ptr), bytes < 0 ? bytes : -bytes, device, device_id);
}

void report_memory_event(const void* ptr, std::int64_t bytes, std::int64_t total_allocated,
                         std::int64_t total_reserved, device_type device, int device_id) noexcept {
  if (memory_on()) push_event(reinterpret_cast<std::uintptr_t>(ptr), bytes, total_allocated, total_reserved, device, device_id);
}

std::int64_t total_allocated(device_type device, int device_id) noexcept {
  std::atomic<std::int64_t>* c = counter(device, device_id);
  return c != nullptr ? c->load(std::memory_order_relaxed) : 0;
}

void* tracked_malloc(std::size_t bytes) {
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  if (p == nullptr) throw std::bad_alloc();
  report(reinterpret_cast<std::uintptr_t>(p), static_cast<std::int64_t>(bytes), device_type::cpu, -1);
  return p;
}

void tracked_free(void* ptr, std::size_t bytes) noexcept {
  if (ptr == nullptr) return;
  report_free(ptr, static_cast<std::int64_t>(bytes));
  std::free(ptr);
}

}  // namespace kinetoscope
