// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file detail/recorder.hpp
/// The inline fast path of the recorder. Not API: everything here lives in kinetoscope::detail
/// and never appears in a public signature.
///
/// Each thread owns a chunked byte queue (single producer: the thread; single consumer: the
/// collector running in profile::stop()/step()). A closed range costs two rdtsc reads and one
/// append of a 40-byte entry into a warm thread-local chunk; names of the macro form are stored as
/// pointers to static strings and interned only at collection time.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace kinetoscope::detail {

/// Ticks of the hot-path clock: the TSC on x86-64 (about 10 ns to read), converted to Unix ns
/// once per window by clock.cpp; CLOCK_MONOTONIC ns elsewhere.
inline std::uint64_t now_ticks() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000ull + std::uint64_t(ts.tv_nsec);
#endif
}

/// Flags read on every record_function: bit 0 = CPU ranges on, bit 1 = record_shapes,
/// bit 2 = profile_memory, bit 3 = with_flops, bit 4 = with_stack, bit 5 = with_modules
/// (module_scope). One relaxed load decides the disabled path; the same loaded value decides
/// the (rare) stack capture.
enum : std::uint32_t {
  flag_cpu = 1u,
  flag_shapes = 2u,
  flag_memory = 4u,
  flag_flops = 8u,
  flag_stack = 16u,
  flag_modules = 32u,
};
extern std::atomic<std::uint32_t> g_flags;

/// Entry types in a thread queue.
enum class entry_type : std::uint8_t { range = 1, inputs = 2, memory = 3, stack = 4, module = 5 };

/// Header shared by every entry; `size` is the entry size in bytes, a multiple of 8.
struct entry_header {
  entry_type type;
  std::uint8_t category;  // cpu_category for ranges
  std::uint8_t flags;     // range_flag_*
  std::uint8_t reserved;
  std::uint32_t size;
};

enum : std::uint8_t {
  range_flag_dynamic_name = 1,  // name bytes follow the fixed part
  range_flag_sequence = 2,      // sequence_nr and fwd_thread_id follow
  range_flag_async = 4,         // begin_tid follows (range ended on another thread)
};

/// Fixed part of a range entry (40 bytes).
struct range_entry {
  entry_header h;
  std::uint64_t start;
  std::uint64_t end;
  const char* static_name;  // nullptr when range_flag_dynamic_name
  std::int64_t external_id;
};

struct memory_entry {
  entry_header h;
  std::uint64_t tick;
  std::uint64_t addr;
  std::int64_t bytes;
  std::int64_t total_allocated;
  std::int64_t total_reserved;
  std::int8_t device_type;
  std::int8_t pad0;
  std::int16_t device_id;
  std::int32_t pad1;
};

/// Fixed part of a stack entry (with_stack): `count` return addresses (uint64) follow, innermost
/// first, the first one being push_stack's own caller frame. Pushed when a range begins, joined to
/// the range by External id at collection, like operator inputs.
struct stack_entry {
  entry_header h;
  std::int64_t external_id;
  std::uint64_t count;
};

/// Most frames a range's stack keeps (deeper stacks keep their innermost frames).
constexpr std::size_t max_stack_depth = 64;
/// Return addresses captured beyond max_stack_depth: the profiler's own innermost frames
/// (push_stack, and record_function's constructors when not inlined) are dropped at
/// symbolization, so the user still gets max_stack_depth frames.
constexpr std::size_t stack_capture_slack = 8;

/// A block of queue memory. Written by its thread, read by the collector up to `committed`.
struct chunk {
  std::atomic<chunk*> next{nullptr};
  std::atomic<std::uint32_t> committed{0};  // bytes of complete entries
  std::uint32_t capacity = 0;               // bytes of data
  std::byte* data() noexcept { return reinterpret_cast<std::byte*>(this + 1); }
};

/// Per-thread state. The fields above `registry_fields` are touched on the hot path only by the
/// owning thread.
struct thread_buffer {
  std::byte* cursor = nullptr;  // next free byte in tail
  std::byte* limit = nullptr;   // end of tail's data
  chunk* tail = nullptr;
  std::int64_t next_id = 0;     // block of External ids reserved for this thread
  std::int64_t id_end = 0;
  std::int64_t current_external_id = 0;  // innermost open op (correlates CUDA API calls)

  // registry_fields: owned by the collector / registry
  chunk* head = nullptr;        // oldest chunk not yet released by the collector
  std::uint32_t head_read = 0;  // bytes of head already consumed
  std::int64_t tid = 0;
  std::atomic<bool> retired{false};
  thread_buffer* next_in_registry = nullptr;
  char name[32] = {};

  /// Makes room for `bytes` (rare path: a new chunk from the pool).
  void grow(std::size_t bytes);
  std::int64_t take_id_block();

  std::int64_t next_external_id() noexcept {
    if (next_id == id_end) [[unlikely]] return take_id_block();
    return next_id++;
  }

  /// Space for one entry of `bytes` (multiple of 8).
  std::byte* reserve(std::size_t bytes) {
    if (static_cast<std::size_t>(limit - cursor) < bytes) [[unlikely]] grow(bytes);
    return cursor;
  }
  /// Publishes the entry written at reserve()'s pointer.
  void commit(std::size_t bytes) noexcept {
    cursor += bytes;
    tail->committed.store(static_cast<std::uint32_t>(cursor - tail->data()),
                          std::memory_order_release);
  }
};

thread_buffer* register_thread();
extern thread_local thread_buffer* t_buffer;

inline thread_buffer* buffer() {
  thread_buffer* b = t_buffer;
  if (b == nullptr) [[unlikely]] b = register_thread();
  return b;
}

constexpr std::size_t align8(std::size_t n) noexcept { return (n + 7u) & ~std::size_t(7u); }

/// Appends a closed range with a static name (the fast path of KINETOSCOPE_RANGE).
inline void push_static_range(thread_buffer* b, std::uint8_t category, const char* name,
                              std::uint64_t start, std::uint64_t end, std::int64_t id) {
  auto* e = reinterpret_cast<range_entry*>(b->reserve(sizeof(range_entry)));
  e->h = entry_header{entry_type::range, category, 0, 0, sizeof(range_entry)};
  e->start = start;
  e->end = end;
  e->static_name = name;
  e->external_id = id;
  b->commit(sizeof(range_entry));
}

/// Slower, general form: dynamic name, autograd links, async end.
void push_range(thread_buffer* b, std::uint8_t category, const char* static_name,
                const char* dyn_name, std::size_t dyn_len, std::uint64_t start, std::uint64_t end,
                std::int64_t id, std::int64_t sequence_nr, std::int64_t fwd_thread_id,
                std::int64_t begin_tid);

/// Captures the calling thread's return addresses (libunwind, no symbolization) and appends a
/// stack entry for range `id`. Out of line and only called when flag_stack is set, so ranges
/// without with_stack pay one test of an already loaded flag word.
void push_stack(thread_buffer* b, std::int64_t id) noexcept;

}  // namespace kinetoscope::detail
