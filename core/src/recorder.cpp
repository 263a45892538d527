// SPDX-License-Identifier: BSD-3-Clause
// Per-thread chunked queues, the chunk pool and the thread registry.
//
// Hot path (detail/recorder.hpp): the owning thread writes an entry at `cursor` and publishes it
// with a release store of the chunk's `committed` byte count. The collector reads entries up to
// `committed` (acquire). When a chunk is full the writer links a new one (`next`, release); the
// collector releases a chunk once it has a successor and is fully read. No lock is taken on the
// hot path; the registry mutex guards thread registration and collection only.
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "entry_text.hpp"
#include "kinetoscope/record_function.hpp"
#include "registry.hpp"

namespace kinetoscope::detail {

std::atomic<std::uint32_t> g_flags{0};
thread_local thread_buffer* t_buffer = nullptr;

namespace {

// 256 KiB chunks: ~6500 plain ranges each, so the slow path runs once per ~6500 ranges.
constexpr std::uint32_t default_chunk_bytes = 256u * 1024u;

std::mutex g_pool_mutex;
// Recycled default-size chunks (pages already faulted in). Never destroyed: a profile stopped
// from a static destructor may still release chunks, and the chunks stay reachable for LSan.
std::vector<chunk*>& g_pool = *new std::vector<chunk*>();

chunk* new_chunk(std::size_t min_bytes) {
  const std::size_t capacity = min_bytes <= default_chunk_bytes ? default_chunk_bytes : align8(min_bytes);
  if (capacity == default_chunk_bytes) {
    std::lock_guard lock(g_pool_mutex);
    if (!g_pool.empty()) {
      chunk* c = g_pool.back();
      g_pool.pop_back();
      c->next.store(nullptr, std::memory_order_relaxed);
      c->committed.store(0, std::memory_order_relaxed);
      return c;
    }
  }
  void* mem = ::operator new(sizeof(chunk) + capacity, std::align_val_t{64});
  auto* c = new (mem) chunk();
  c->capacity = static_cast<std::uint32_t>(capacity);
  // Touch every page now: first-touch page faults cost ~10x an append (measured on our dev
  // machine).
  std::memset(c->data(), 0, capacity);
  return c;
}

void release_chunk(chunk* c) {
  if (c->capacity == default_chunk_bytes) {
    std::lock_guard lock(g_pool_mutex);
    if (g_pool.size() < 256) {  // keep at most 64 MiB of warm chunks
      g_pool.push_back(c);
      return;
    }
  }
  c->~chunk();
  ::operator delete(static_cast<void*>(c), std::align_val_t{64});
}

std::mutex g_registry_mutex;
thread_buffer* g_registry = nullptr;
std::atomic<std::int64_t> g_next_external_id{1};

// Marks the thread's queue retired when the thread exits; the collector frees it once drained.
struct thread_exit_guard {
  thread_buffer* buffer = nullptr;
  ~thread_exit_guard() {
    if (buffer != nullptr) {
      t_buffer = nullptr;
      buffer->retired.store(true, std::memory_order_release);
    }
  }
};
thread_local thread_exit_guard t_exit_guard;

std::int64_t os_tid() noexcept { return static_cast<std::int64_t>(::syscall(SYS_gettid)); }

}  // namespace

std::int64_t thread_buffer::take_id_block() {
  constexpr std::int64_t block = 256;
  const std::int64_t base = g_next_external_id.fetch_add(block, std::memory_order_relaxed);
  next_id = base + 1;
  id_end = base + block;
  return base;
}

void thread_buffer::grow(std::size_t bytes) {
  chunk* c = new_chunk(bytes);
  chunk* old = tail;
  tail = c;
  cursor = c->data();
  limit = c->data() + c->capacity;
  old->next.store(c, std::memory_order_release);
}

thread_buffer* register_thread() {
  auto* b = new thread_buffer();
  b->tid = os_tid();
  pthread_getname_np(pthread_self(), b->name, sizeof(b->name));
  chunk* c = new_chunk(0);
  b->head = b->tail = c;
  b->cursor = c->data();
  b->limit = c->data() + c->capacity;
  {
    std::lock_guard lock(g_registry_mutex);
    b->next_in_registry = g_registry;
    g_registry = b;
  }
  t_buffer = b;
  t_exit_guard.buffer = b;
  return b;
}

namespace {
void drain_buffer(thread_buffer* b, const entry_visitor& visit) {
  for (;;) {
    chunk* c = b->head;
    chunk* next = c->next.load(std::memory_order_acquire);
    const std::uint32_t committed = c->committed.load(std::memory_order_acquire);
    std::uint32_t pos = b->head_read;
    while (pos < committed) {
      const auto* e = reinterpret_cast<const entry_header*>(c->data() + pos);
      if (visit) visit(b->tid, b->name, e);
      pos += e->size;
    }
    if (next == nullptr) {
      b->head_read = pos;
      return;
    }
    b->head = next;
    b->head_read = 0;
    release_chunk(c);
  }
}
}  // namespace

void drain_all(const entry_visitor& visit) {
  std::lock_guard lock(g_registry_mutex);
  thread_buffer** link = &g_registry;
  while (thread_buffer* b = *link) {
    const bool retired = b->retired.load(std::memory_order_acquire);
    drain_buffer(b, visit);
    if (retired) {  // the thread has exited and wrote its last entry before `retired`
      *link = b->next_in_registry;
      release_chunk(b->head);
      delete b;
      continue;
    }
    link = &b->next_in_registry;
  }
}

void push_range(thread_buffer* b, std::uint8_t category, const char* static_name,
                const char* dyn_name, std::size_t dyn_len, std::uint64_t start, std::uint64_t end,
                std::int64_t id, std::int64_t sequence_nr, std::int64_t fwd_thread_id,
                std::int64_t begin_tid) {
  std::uint8_t flags = 0;
  std::size_t size = sizeof(range_entry);
  if (dyn_name != nullptr) {
    flags |= range_flag_dynamic_name;
    size += entry_text_size(dyn_len);
  }
  if (sequence_nr >= 0) {
    flags |= range_flag_sequence;
    size += 16;
  }
  if (begin_tid != b->tid) {
    flags |= range_flag_async;
    size += 8;
  }
  std::byte* p = b->reserve(size);
  auto* e = reinterpret_cast<range_entry*>(p);
  e->h = entry_header{entry_type::range, category, flags, 0, static_cast<std::uint32_t>(size)};
  e->start = start;
  e->end = end;
  e->static_name = dyn_name != nullptr ? nullptr : static_name;
  e->external_id = id;
  std::byte* q = p + sizeof(range_entry);
  if (flags & range_flag_sequence) {
    std::memcpy(q, &sequence_nr, 8);
    std::memcpy(q + 8, &fwd_thread_id, 8);
    q += 16;
  }
  if (flags & range_flag_async) {
    std::memcpy(q, &begin_tid, 8);
    q += 8;
  }
  if (flags & range_flag_dynamic_name) put_entry_text(q, dyn_name, dyn_len);
  b->commit(size);
}

}  // namespace kinetoscope::detail

namespace kinetoscope {

std::int64_t current_thread_id() noexcept { return detail::buffer()->tid; }

void set_thread_name(std::string_view name) {
  detail::thread_buffer* b = detail::buffer();
  const std::size_t n = name.size() < sizeof(b->name) - 1 ? name.size() : sizeof(b->name) - 1;
  {
    // The collector may be reading the name; registration lock keeps it consistent.
    std::lock_guard lock(detail::g_registry_mutex);
    std::memcpy(b->name, name.data(), n);
    b->name[n] = '\0';
  }
  char os_name[16];  // Linux limits thread names to 15 characters
  const std::size_t m = n < 15 ? n : 15;
  std::memcpy(os_name, name.data(), m);
  os_name[m] = '\0';
  pthread_setname_np(pthread_self(), os_name);
}

}  // namespace kinetoscope
