// SPDX-License-Identifier: BSD-3-Clause
#include <doctest/doctest.h>

#include <vector>

#include "kinetoscope/kinetoscope.hpp"
#include "test_support.hpp"

using namespace kinetoscope;

TEST_CASE("memory: events only with profile_memory, with running totals") {
  SUBCASE("off") {
    profile prof;
    prof.start();
    void* p = tracked_malloc(100);
    tracked_free(p, 100);
    prof.stop();
    CHECK(prof.last_trace().memory.empty());
  }
  SUBCASE("on") {
    const std::int64_t base = total_allocated();
    profile prof({.profile_memory = true});
    prof.start();
    void* a = tracked_malloc(1000);
    void* b = tracked_malloc(24);
    tracked_free(a, 1000);
    report_alloc(reinterpret_cast<void*>(0x1000), 4096, device_type::cuda, 1);
    report_free(reinterpret_cast<void*>(0x1000), 4096, device_type::cuda, 1);
    report_memory_event(reinterpret_cast<void*>(0x2000), 512, 7000, 8192, device_type::cuda, 0);
    prof.stop();
    tracked_free(b, 24);
    const auto& m = prof.last_trace().memory;
    REQUIRE(m.size() == 6);
    CHECK(m[0].addr == reinterpret_cast<std::uintptr_t>(a));
    CHECK(m[0].bytes == 1000);
    CHECK(m[0].total_allocated == base + 1000);
    CHECK(m[0].device == device_type::cpu);
    CHECK(m[0].device_id == -1);
    CHECK(m[1].bytes == 24);
    CHECK(m[1].total_allocated == base + 1024);
    CHECK(m[2].bytes == -1000);
    CHECK(m[2].total_allocated == base + 24);
    CHECK(m[3].device == device_type::cuda);
    CHECK(m[3].device_id == 1);
    CHECK(m[3].bytes == 4096);
    CHECK(m[3].total_allocated == 4096);
    CHECK(m[4].bytes == -4096);
    CHECK(m[4].total_allocated == 0);
    CHECK(m[5].total_allocated == 7000);
    CHECK(m[5].total_reserved == 8192);
    CHECK(m[0].tid == current_thread_id());
    for (std::size_t i = 1; i < m.size(); ++i) CHECK(m[i - 1].time_ns <= m[i].time_ns);
    CHECK(total_allocated() == base);
  }
}

TEST_CASE("memory: tracking_allocator reports vector growth") {
  profile prof({.profile_memory = true});
  prof.start();
  {
    record_op op("aten::empty");
    std::vector<float, tracking_allocator<float>> v(256);
    v.resize(1024);
  }
  prof.stop();
  const trace_data& d = prof.last_trace();
  std::int64_t net = 0;
  std::int64_t allocated = 0;
  for (const auto& m : d.memory) {
    net += m.bytes;
    if (m.bytes > 0) allocated += m.bytes;
  }
  CHECK(net == 0);                                // everything freed
  CHECK(allocated == (256 + 1024) * 4);           // the two buffers of the vector
  const cpu_event* op = test_support::find_named(d, "aten::empty");
  REQUIRE(op != nullptr);
  for (const auto& m : d.memory) {                // all inside the op's range
    CHECK(m.time_ns >= op->start_ns);
    CHECK(m.time_ns <= op->end_ns);
  }
}

TEST_CASE("memory: attribution to ops through key_averages (CPU Mem, Self CPU Mem)") {
  profile prof({.profile_memory = true});
  prof.start();
  void* leaked = nullptr;
  {
    record_function block("my_block");
    {
      record_op mm("aten::mm");
      leaked = tracked_malloc(2048);  // allocated by the child
    }
    tracked_free(leaked, 2048);       // freed by the parent itself
  }
  prof.stop();
  const averages avg = prof.key_averages();
  const event_avg* block = avg.find("my_block");
  const event_avg* mm = avg.find("aten::mm");
  REQUIRE(block != nullptr);
  REQUIRE(mm != nullptr);
  CHECK(mm->cpu_memory_usage == 2048);
  CHECK(mm->self_cpu_memory_usage == 2048);
  CHECK(block->cpu_memory_usage == 0);            // +2048 - 2048 inside its range
  CHECK(block->self_cpu_memory_usage == -2048);   // negative self memory, as PyTorch shows
}
