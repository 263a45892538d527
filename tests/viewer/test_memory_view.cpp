// SPDX-License-Identifier: BSD-3-Clause
// Memory view (docs/plugin-rules.md#memory-view). There are no golden memory values from the
// plugin, so these tests write traces with kinetoscope's own writer (hand-built trace_data), load
// them back through the loader, build the op tree and check numbers derived by hand in the
// comments.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/loader.hpp"
#include "analysis/memory_view.hpp"
#include "analysis/op_tree.hpp"
#include "kinetoscope/memory.hpp"
#include "kinetoscope/profiler.hpp"
#include "kinetoscope/record_function.hpp"
#include "kinetoscope/trace_data.hpp"
#include "kinetoscope/writer/chrome_trace.hpp"
#include "../real_traces.hpp"

using namespace kinetoscope::analysis;

namespace {

constexpr std::int64_t tid = 4242;
constexpr double t0 = 1000;  // every time below is µs after the base time; the trace starts at t0

/// Hand-built trace_data whose times are written as exact µs (base_time_ns() + µs·1000).
class trace_builder {
 public:
  trace_builder() { d_.pid = 77; }
  trace_builder& op(std::string_view name, double start_us, double end_us,
                    kinetoscope::cpu_category cat = kinetoscope::cpu_category::cpu_op) {
    kinetoscope::cpu_event e;
    e.start_ns = ns(start_us);
    e.end_ns = ns(end_us);
    e.tid = tid;
    e.end_tid = tid;
    e.name = d_.intern(name);
    e.category = cat;
    e.external_id = ++ext_;
    d_.events.push_back(e);
    return *this;
  }
  trace_builder& mem(double t_us, std::uint64_t addr, std::int64_t bytes, std::int64_t total_allocated,
                     std::int64_t total_reserved = 0, int device_type = 0, int device_id = -1) {
    kinetoscope::memory_event m;
    m.time_ns = ns(t_us);
    m.tid = tid;
    m.addr = addr;
    m.bytes = bytes;
    m.total_allocated = total_allocated;
    m.total_reserved = total_reserved;
    m.device = static_cast<kinetoscope::device_type>(device_type);
    m.device_id = static_cast<std::int16_t>(device_id);
    d_.memory.push_back(m);
    return *this;
  }
  /// Writes, loads and returns the model (events must be added in start order).
  trace_model load() {
    d_.profile_memory = true;
    const std::string text = kinetoscope::chrome_trace_string(d_);
    load_result r = load_trace_buffer(text, "memory_test.pt.trace.json");
    REQUIRE_MESSAGE(r.ok(), (r.error ? r.error->message() : std::string()));
    return std::move(*r.model);
  }

 private:
  static std::int64_t ns(double us) { return kinetoscope::base_time_ns() + static_cast<std::int64_t>(us * 1000); }
  kinetoscope::trace_data d_;
  std::int64_t ext_ = 0;
};

/// The main scenario (times relative to t0):
///   ProfilerStep#1 [0,100)
///     aten::linear [10,60)            ─ alloc C 512 @55
///       aten::empty [12,14)           ─ alloc A 1024 @12.5
///       aten::addmm [20,50)           ─ GPU0 alloc G 1 MiB @21, alloc B 4096 @25, free A @30
///     aten::relu [70,80)              ─ free B @75
///     aten::zeros [82,88)             (no record inside: never entered by the attribution walk)
///       aten::empty [83,84)
///     aten::empty [96,97)
///   step-level records (unattributed): GPU1 alloc 128 @5, GPU0 free G @65, alloc D 256 @90,
///   unpaired free of 0x5000 (64 bytes) @95; a Device Type 19 record @15 (unknown device).
trace_model main_trace() {
  trace_builder b;
  b.op("ProfilerStep#1", t0, t0 + 100, kinetoscope::cpu_category::user_annotation)
      .op("aten::linear", t0 + 10, t0 + 60)
      .op("aten::empty", t0 + 12, t0 + 14)
      .op("aten::addmm", t0 + 20, t0 + 50)
      .op("aten::relu", t0 + 70, t0 + 80)
      .op("aten::zeros", t0 + 82, t0 + 88)
      .op("aten::empty", t0 + 83, t0 + 84)
      .op("aten::empty", t0 + 96, t0 + 97);
  b.mem(t0 + 5, 0x7000, 128, 128, 2048, 1, 1)
      .mem(t0 + 12.5, 0x1000, 1024, 1024)
      .mem(t0 + 15, 0x8000, 32, 32, 0, 19, 0)
      .mem(t0 + 21, 0x9000, 1 << 20, 1 << 20, 2 << 20, 1, 0)
      .mem(t0 + 25, 0x2000, 4096, 5120)
      .mem(t0 + 30, 0x1000, -1024, 4096)
      .mem(t0 + 55, 0x3000, 512, 4608)
      .mem(t0 + 65, 0x9000, -(1 << 20), 0, 2 << 20, 1, 0)
      .mem(t0 + 75, 0x2000, -4096, 512)
      .mem(t0 + 90, 0x4000, 256, 768)
      .mem(t0 + 95, 0x5000, -64, 704);
  return b.load();
}

using point = std::array<double, 3>;

void check_event(const memory_event_row& r, std::string_view op, std::int64_t size, std::optional<double> alloc,
                 std::optional<double> release, std::optional<double> duration) {
  CAPTURE(op);
  CHECK(r.op_name == op);
  CHECK(r.size_bytes == size);
  CHECK(r.allocation_time_us == alloc);
  CHECK(r.release_time_us == release);
  CHECK(r.duration_us == duration);
}

void check_stat(const memory_stat_row& r, std::string_view name, std::int64_t calls, std::int64_t inc,
                std::int64_t self_inc, std::int64_t count, std::int64_t self_count, std::int64_t size,
                std::int64_t self_size) {
  CAPTURE(name);
  CHECK(r.name == name);
  CHECK(r.calls == calls);
  CHECK(r.size_increase_bytes == inc);
  CHECK(r.self_size_increase_bytes == self_inc);
  CHECK(r.allocation_count == count);
  CHECK(r.self_allocation_count == self_count);
  CHECK(r.allocation_size_bytes == size);
  CHECK(r.self_allocation_size_bytes == self_size);
}

}  // namespace

TEST_CASE("memory_view: devices, counts, curve and peaks of a hand-made trace") {
  const trace_model model = main_trace();
  const op_trees trees = build_op_tree(model);
  const memory_result m = compute_memory(model, trees);

  CHECK(m.present);
  CHECK(m.first_ts == t0);
  CHECK(profiler_start_ts(model) == t0);
  REQUIRE(m.devices.size() == 3);
  CHECK(m.devices[0].device == "CPU");
  CHECK(m.devices[1].device == "GPU0");
  CHECK(m.devices[2].device == "GPU1");
  CHECK(m.default_device == "GPU0");
  CHECK(m.device("GPU7") == nullptr);
  CHECK(m.counts.records == 10);
  CHECK(m.counts.unknown_device_records == 1);
  CHECK(m.counts.records_without_addr == 0);
  CHECK(m.counts.attributed_records == 6);  // @12.5 @21 @25 @30 @55 @75

  const memory_device& cpu = *m.device("CPU");
  const std::vector<point> cpu_curve = {
      {12.5, 1024, 0}, {25, 1024, 0}, {25, 5120, 0}, {30, 5120, 0}, {30, 4096, 0},
      {55, 4096, 0},   {55, 4608, 0}, {75, 4608, 0}, {75, 512, 0},  {90, 512, 0},
      {90, 768, 0},    {95, 768, 0},  {95, 704, 0},
  };
  CHECK(cpu.curve == cpu_curve);
  CHECK(cpu.peak_allocated_bytes == 5120);
  CHECK(cpu.peak_reserved_bytes == 0);
  CHECK(cpu.peak_time_us == 25.0);
  CHECK_FALSE(cpu.capacity_bytes.has_value());

  const memory_device& gpu0 = *m.device("GPU0");
  const std::vector<point> gpu0_curve = {{21, 1 << 20, 2 << 20}, {65, 1 << 20, 2 << 20}, {65, 0, 2 << 20}};
  CHECK(gpu0.curve == gpu0_curve);
  CHECK(gpu0.peak_allocated_bytes == (1 << 20));
  CHECK(gpu0.peak_reserved_bytes == (2 << 20));
  CHECK(gpu0.peak_time_us == 21.0);

  const memory_device& gpu1 = *m.device("GPU1");
  CHECK(gpu1.curve == std::vector<point>{{5, 128, 2048}});
  CHECK(gpu1.peak_allocated_bytes == 128);
  CHECK(gpu1.stats.empty());  // its only record is outside every operator

  CHECK(memory_peak_text(cpu.peak_allocated_bytes, memory_size_unit::kb) == "Peak Memory Usage: 5.0KB");
  CHECK(memory_peak_text(gpu0.peak_allocated_bytes, memory_size_unit::mb) == "Peak Memory Usage: 1.0MB");
}

TEST_CASE("memory_view: allocation/free pairs table") {
  const trace_model model = main_trace();
  const op_trees trees = build_op_tree(model);
  const memory_result m = compute_memory(model, trees);

  const auto& cpu = m.device("CPU")->events;
  REQUIRE(cpu.size() == 5);
  // Paired rows in free order: A (freed @30, allocated in aten::empty under aten::linear), B.
  check_event(cpu[0], "aten::linear (aten::empty)", 1024, 12.5, 30.0, 17.5);
  check_event(cpu[1], "aten::addmm", 4096, 25.0, 75.0, 50.0);
  // Unfreed allocations in allocation order, then the unpaired free.
  check_event(cpu[2], "aten::linear", 512, 55.0, std::nullopt, std::nullopt);
  check_event(cpu[3], "<unknown>", 256, 90.0, std::nullopt, std::nullopt);
  check_event(cpu[4], "<unknown>", 64, std::nullopt, 95.0, std::nullopt);

  const auto& gpu0 = m.device("GPU0")->events;
  REQUIRE(gpu0.size() == 1);
  check_event(gpu0[0], "aten::addmm", 1 << 20, 21.0, 65.0, 44.0);
  const auto& gpu1 = m.device("GPU1")->events;
  REQUIRE(gpu1.size() == 1);
  check_event(gpu1[0], "<unknown>", 128, 5.0, std::nullopt, std::nullopt);
  CHECK(m.counts.replaced_allocations == 0);
  CHECK(m.counts.repeated_frees == 0);
}

TEST_CASE("memory_view: statistics table, self vs total, and the plugin's call counting") {
  const trace_model model = main_trace();
  const op_trees trees = build_op_tree(model);
  const memory_result m = compute_memory(model, trees);

  const auto& cpu = m.device("CPU")->stats;
  REQUIRE(cpu.size() == 4);  // sorted by name; aten::zeros has no memory and no row
  check_stat(cpu[0], "aten::addmm", 1, 3072, 3072, 1, 1, 4096, 4096);
  // aten::empty: 3 nodes, but the one inside aten::zeros is never counted (the walk does not
  // descend into a node that contained no record of its thread).
  check_stat(cpu[1], "aten::empty", 2, 1024, 1024, 1, 1, 1024, 1024);
  // aten::linear: self 512; total = 512 + 1024 (empty) + 3072 (addmm: +4096 −1024).
  check_stat(cpu[2], "aten::linear", 1, 4608, 512, 3, 1, 5632, 512);
  check_stat(cpu[3], "aten::relu", 1, -4096, -4096, 0, 0, 0, 0);

  const auto& gpu0 = m.device("GPU0")->stats;
  REQUIRE(gpu0.size() == 2);
  check_stat(gpu0[0], "aten::addmm", 1, 1 << 20, 1 << 20, 1, 1, 1 << 20, 1 << 20);
  check_stat(gpu0[1], "aten::linear", 1, 1 << 20, 0, 1, 0, 1 << 20, 0);
}

TEST_CASE("memory_view: range selection filters both tables, not the curve") {
  const trace_model model = main_trace();
  const op_trees trees = build_op_tree(model);
  const memory_result all = compute_memory(model, trees);
  const memory_result m = compute_memory(model, trees, std::pair{t0 + 20, t0 + 60});

  CHECK(m.device("CPU")->curve == all.device("CPU")->curve);
  CHECK(m.device("CPU")->peak_allocated_bytes == 5120);

  // Records @21 @25 @30 @55 are inside [20, 60] (bounds inclusive).
  const auto& cpu = m.device("CPU")->events;
  REQUIRE(cpu.size() == 3);
  check_event(cpu[0], "aten::addmm", 4096, 25.0, std::nullopt, std::nullopt);
  check_event(cpu[1], "aten::linear", 512, 55.0, std::nullopt, std::nullopt);
  // The free of A lost its allocation (outside the range) but kept the copied op name.
  check_event(cpu[2], "aten::linear (aten::empty)", 1024, std::nullopt, 30.0, std::nullopt);
  const auto& gpu0 = m.device("GPU0")->events;
  REQUIRE(gpu0.size() == 1);
  check_event(gpu0[0], "aten::addmm", 1 << 20, 21.0, std::nullopt, std::nullopt);
  REQUIRE(m.device("GPU1") != nullptr);
  CHECK(m.device("GPU1")->events.empty());

  // aten::empty [12,14) ends before 20 and aten::relu starts after 60: not visited.
  const auto& stats = m.device("CPU")->stats;
  REQUIRE(stats.size() == 2);
  check_stat(stats[0], "aten::addmm", 1, 3072, 3072, 1, 1, 4096, 4096);
  check_stat(stats[1], "aten::linear", 1, 3584, 512, 2, 1, 4608, 512);

  // Inclusive bounds: a range ending exactly at a record keeps it.
  const memory_result edge = compute_memory(model, trees, std::pair{t0 + 75, t0 + 75});
  REQUIRE(edge.device("CPU")->events.size() == 1);
  check_event(edge.device("CPU")->events[0], "aten::addmm", 4096, std::nullopt, 75.0, std::nullopt);
  REQUIRE(edge.device("CPU")->stats.size() == 1);
  check_stat(edge.device("CPU")->stats[0], "aten::relu", 1, -4096, -4096, 0, 0, 0, 0);
}

TEST_CASE("memory_view: a reused address replaces an unfreed allocation in place (Q16)") {
  trace_builder b;
  b.op("aten::a", t0, t0 + 10).op("aten::b", t0 + 20, t0 + 30).op("aten::c", t0 + 40, t0 + 50);
  b.mem(t0 + 1, 0x10, 100, 100)    // X in aten::a, never freed, then replaced
      .mem(t0 + 2, 0x20, 200, 300)  // Y in aten::a, never freed
      .mem(t0 + 21, 0x10, 50, 350)  // X' in aten::b: same address as the open X
      .mem(t0 + 41, 0x10, -50, 300) // frees X'
      .mem(t0 + 42, 0x30, -8, 292)  // unpaired
      .mem(t0 + 43, 0x30, -8, 284); // unpaired again: replaces the earlier one
  const trace_model model = b.load();
  const op_trees trees = build_op_tree(model);
  const memory_result m = compute_memory(model, trees);
  CHECK(m.counts.replaced_allocations == 1);
  CHECK(m.counts.repeated_frees == 1);
  const auto& ev = m.device("CPU")->events;
  REQUIRE(ev.size() == 3);
  check_event(ev[0], "aten::b", 50, 21.0, 41.0, 20.0);
  check_event(ev[1], "aten::a", 200, 2.0, std::nullopt, std::nullopt);
  // Frees only copy the op of an open allocation: none here.
  check_event(ev[2], "<unknown>", 8, std::nullopt, 43.0, std::nullopt);
  // Statistics do not care about pairing: aten::c self increase is the free of X' and the two
  // unpaired frees.
  const auto& stats = m.device("CPU")->stats;
  REQUIRE(stats.size() == 3);
  check_stat(stats[2], "aten::c", 1, -66, -66, 0, 0, 0, 0);
}

TEST_CASE("memory_view: no memory events, and records on a thread without a tree") {
  trace_builder b;
  b.op("aten::a", t0, t0 + 10);
  const trace_model empty = b.load();
  const op_trees trees = build_op_tree(empty);
  const memory_result m = compute_memory(empty, trees);
  CHECK_FALSE(m.present);
  CHECK(m.devices.empty());
  CHECK(m.default_device == "CPU");
  // No index is built for a trace without memory records (it held ~33 bytes per tree node).
  const memory_index none = build_memory_index(empty, trees);
  CHECK_FALSE(none.present());
  CHECK(none.memory_bytes() < 1024);
  const memory_result ranged = compute_memory_range(none, empty, trees, {t0, t0 + 5});
  CHECK_FALSE(ranged.present);
  CHECK(ranged.devices.empty());

  // A model whose memory tid has no host events: curve and table rows, no statistics.
  trace_model model = empty;
  event e;
  e.ts = t0 + 5;
  e.tid = 999;
  e.type = event_type::memory;
  e.name = model.intern("[memory]");
  memory_args a;
  a.device_type = 0;
  a.has_addr = true;
  a.addr = 0x40;
  a.bytes = 16;
  a.total_allocated = 16;
  a.total_reserved = 0;
  e.extra = static_cast<std::uint32_t>(model.memory.size());
  model.memory.push_back(a);
  model.events.push_back(e);
  const op_trees trees2 = build_op_tree(model);
  const memory_result m2 = compute_memory(model, trees2);
  REQUIRE(m2.devices.size() == 1);
  CHECK(m2.devices[0].curve == std::vector<point>{{5, 16, 0}});
  CHECK(m2.devices[0].stats.empty());
  REQUIRE(m2.devices[0].events.size() == 1);
  check_event(m2.devices[0].events[0], "<unknown>", 16, 5.0, std::nullopt, std::nullopt);
  CHECK(m2.counts.attributed_records == 0);

  // Records without an address (PyTorch < 1.10) feed only the statistics; NaN totals are
  // kept out of the curve.
  model.memory[0].has_addr = false;
  const memory_result m3 = compute_memory(model, trees2);
  CHECK(m3.counts.records_without_addr == 1);
  CHECK(m3.devices.empty());
  model.memory[0].has_addr = true;
  model.memory[0].total_reserved = std::numeric_limits<double>::quiet_NaN();
  const memory_result m4 = compute_memory(model, trees2);
  REQUIRE(m4.devices.size() == 1);
  CHECK(m4.devices[0].curve.empty());
  CHECK(m4.devices[0].events.size() == 1);
}

TEST_CASE("memory_view: a trace recorded by kinetoscope::profile with the tracking allocator") {
  kinetoscope::profile prof({.activities = {kinetoscope::activity::cpu}, .profile_memory = true});
  prof.start();
  {
    kinetoscope::record_op outer("test::outer");
    void* a = kinetoscope::tracked_malloc(1000);
    {
      kinetoscope::record_op inner("test::inner");
      void* b = kinetoscope::tracked_malloc(3000);
      kinetoscope::tracked_free(b, 3000);
    }
    kinetoscope::tracked_free(a, 1000);
  }
  prof.stop();
  const std::string text = kinetoscope::chrome_trace_string(prof.last_trace());
  load_result r = load_trace_buffer(text, "recorded.pt.trace.json");
  REQUIRE(r.ok());
  const trace_model& model = *r.model;
  const op_trees trees = build_op_tree(model);
  const memory_result m = compute_memory(model, trees);

  REQUIRE(m.devices.size() == 1);
  const memory_device& cpu = m.devices[0];
  CHECK(cpu.device == "CPU");
  CHECK(m.counts.records == 4);
  CHECK(m.counts.attributed_records == 4);
  // Totals are process-wide running totals: take the level before the first allocation.
  REQUIRE(cpu.curve.size() == 7);  // 4 points + 3 inserted step points
  const double before = cpu.curve[0][1] - 1000;
  CHECK(cpu.curve[2][1] == before + 4000);
  CHECK(cpu.curve[6][1] == before);
  CHECK(cpu.peak_allocated_bytes == static_cast<std::int64_t>(before) + 4000);
  CHECK(cpu.peak_time_us == cpu.curve[2][0]);

  REQUIRE(cpu.events.size() == 2);  // inner's block is freed first
  CHECK(cpu.events[0].op_name == "test::inner");
  CHECK(cpu.events[0].size_bytes == 3000);
  CHECK(cpu.events[1].op_name == "test::outer");
  CHECK(cpu.events[1].size_bytes == 1000);
  CHECK(*cpu.events[1].duration_us > *cpu.events[0].duration_us);

  REQUIRE(cpu.stats.size() == 2);
  check_stat(cpu.stats[0], "test::inner", 1, 0, 0, 1, 1, 3000, 3000);
  check_stat(cpu.stats[1], "test::outer", 1, 0, 0, 2, 1, 4000, 1000);
}

TEST_CASE("memory_view: LTTB down-sampling of the curve") {
  // 7 points to 5: inner points split in bins of 2, 2, 1. Bin 0 picks (2,10) (largest triangle
  // with (0,0) and the next bin's mean (3.5,0)); bin 1 picks (3,0) (area 12.5 vs 10 against
  // (2,10) and (5,5)); bin 2 picks (5,5). Reserved (third value) rides along.
  const std::vector<point> curve = {{0, 0, 0},   {1, 0, 100},  {2, 10, 200}, {3, 0, 300},
                                    {4, 0, 400}, {5, 5, 500},  {6, 0, 600}};
  const std::vector<point> expected = {{0, 0, 0}, {2, 10, 200}, {3, 0, 300}, {5, 5, 500}, {6, 0, 600}};
  CHECK(downsample_memory_curve(curve, 5) == expected);
  CHECK(downsample_memory_curve(curve, 7) == curve);
  CHECK(downsample_memory_curve(curve, 100) == curve);
  // The default limit is 10 240 points.
  std::vector<point> big;
  for (int i = 0; i < 20000; ++i) big.push_back({double(i), double(i % 7), 0});
  const auto small = downsample_memory_curve(big);
  REQUIRE(small.size() == 10240);
  CHECK(small.front() == big.front());
  CHECK(small.back() == big.back());
}

TEST_CASE("memory_view: units and display rounding") {
  CHECK(parse_time_unit("ms") == memory_time_unit::ms);
  CHECK(parse_time_unit("microsecond") == memory_time_unit::us);
  CHECK(parse_time_unit("") == memory_time_unit::s);
  CHECK_FALSE(parse_time_unit("hours").has_value());
  CHECK(parse_memory_unit("K") == memory_size_unit::kb);
  CHECK(parse_memory_unit("GB") == memory_size_unit::gb);
  CHECK(parse_memory_unit("") == memory_size_unit::b);
  CHECK_FALSE(parse_memory_unit("TB").has_value());
  CHECK(memory_factor(memory_size_unit::mb) == 1.0 / 1048576);
  CHECK(time_factor(memory_time_unit::ms) == 0.001);
  CHECK(unit_name(memory_size_unit::kb) == "KB");
  CHECK(memory_display_round(0) == 0);
  CHECK(memory_display_round(1.234) == 1.23);
  CHECK(memory_display_round(2.675) == 2.67);           // binary 2.67499…
  CHECK(memory_display_round(0.0009765625) == 0.001);   // 1 KB in MB
  CHECK(memory_display_round(-0.004) == -0.004);
  CHECK(memory_display_round(0.0123) == 0.01);
}

// ---------------------------------------------------------------------------------------------
// memory_index / compute_memory_range: the indexed ranged result must equal compute_memory(range)
// field for field (the server answers ranged requests from the index).

namespace {

void check_same(const memory_result& fast, const memory_result& ref, const memory_parts& parts = {}) {
  CHECK(fast.present == ref.present);
  CHECK(fast.first_ts == ref.first_ts);
  CHECK(fast.default_device == ref.default_device);
  CHECK(fast.counts.records == ref.counts.records);
  CHECK(fast.counts.records_without_addr == ref.counts.records_without_addr);
  CHECK(fast.counts.unknown_device_records == ref.counts.unknown_device_records);
  CHECK(fast.counts.attributed_records == ref.counts.attributed_records);
  if (parts.events) {
    CHECK(fast.counts.replaced_allocations == ref.counts.replaced_allocations);
    CHECK(fast.counts.repeated_frees == ref.counts.repeated_frees);
  }
  REQUIRE(fast.devices.size() == ref.devices.size());
  for (std::size_t d = 0; d < ref.devices.size(); ++d) {
    const memory_device& a = fast.devices[d];
    const memory_device& b = ref.devices[d];
    CAPTURE(b.device);
    CHECK(a.device == b.device);
    CHECK(a.peak_allocated_bytes == b.peak_allocated_bytes);
    CHECK(a.peak_reserved_bytes == b.peak_reserved_bytes);
    CHECK(a.peak_time_us == b.peak_time_us);
    CHECK(a.capacity_bytes == b.capacity_bytes);
    if (parts.curve) {
      CHECK(a.curve == b.curve);
    } else {
      CHECK(a.curve.empty());
    }
    if (parts.stats) {
      REQUIRE(a.stats.size() == b.stats.size());
      for (std::size_t i = 0; i < b.stats.size(); ++i) {
        const memory_stat_row& x = a.stats[i];
        const memory_stat_row& y = b.stats[i];
        CAPTURE(i);
        CHECK(x.name == y.name);
        CHECK(x.calls == y.calls);
        CHECK(x.size_increase_bytes == y.size_increase_bytes);
        CHECK(x.self_size_increase_bytes == y.self_size_increase_bytes);
        CHECK(x.allocation_count == y.allocation_count);
        CHECK(x.self_allocation_count == y.self_allocation_count);
        CHECK(x.allocation_size_bytes == y.allocation_size_bytes);
        CHECK(x.self_allocation_size_bytes == y.self_allocation_size_bytes);
      }
    } else {
      CHECK(a.stats.empty());
    }
    if (parts.events) {
      REQUIRE(a.events.size() == b.events.size());
      for (std::size_t i = 0; i < b.events.size(); ++i) {
        const memory_event_row& x = a.events[i];
        const memory_event_row& y = b.events[i];
        CAPTURE(i);
        CHECK(x.op_name == y.op_name);
        CHECK(x.size_bytes == y.size_bytes);
        CHECK(x.allocation_time_us == y.allocation_time_us);
        CHECK(x.release_time_us == y.release_time_us);
        CHECK(x.duration_us == y.duration_us);
      }
    } else {
      CHECK(a.events.empty());
    }
  }
}

/// Deterministic pseudo-random numbers (splitmix64), so a failure reproduces.
struct rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1p-53; }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

/// The ranges to compare on: whole, open on either side, empty (between records and
/// reversed), each single record time, every node boundary as either bound, and random ones.
std::vector<std::pair<double, double>> probe_ranges(const trace_model& model, const op_trees& trees,
                                                    std::size_t single_count, std::size_t random_count,
                                                    std::uint64_t seed) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  std::vector<double> times;
  for (const event& e : model.events)
    if (e.type == event_type::memory) times.push_back(e.ts);
  REQUIRE(!times.empty());
  std::vector<double> bounds = times;
  for (const op_node& n : trees.nodes) {
    bounds.push_back(n.start);
    bounds.push_back(n.end);
  }
  const double first = *std::min_element(bounds.begin(), bounds.end());
  const double last = *std::max_element(bounds.begin(), bounds.end());
  std::vector<std::pair<double, double>> out = {
      {-inf, inf}, {first, last}, {-inf, first - 1}, {last + 1, inf}, {last + 1, first - 1}};
  rng r{seed};
  for (std::size_t i = 0; i < single_count; ++i) {
    const double t = times[r.below(times.size())];
    out.emplace_back(t, t);                                  // a single record (and its neighbours at t)
    out.emplace_back(-inf, t);                               // one-sided
    out.emplace_back(t, inf);
    out.emplace_back(std::nextafter(t, inf), std::nextafter(t, inf));  // just after it: maybe empty
  }
  for (std::size_t i = 0; i < random_count; ++i) {
    double a = r.uniform(first - 10, last + 10);
    double b = r.uniform(first - 10, last + 10);
    if (a > b) std::swap(a, b);
    out.emplace_back(a, b);
    // Node and record boundaries as bounds (inclusive edges).
    double c = bounds[r.below(bounds.size())];
    double d = bounds[r.below(bounds.size())];
    if (c > d) std::swap(c, d);
    out.emplace_back(c, d);
  }
  return out;
}

/// Compares compute_memory_range() with compute_memory() on `ranges`, with every part and
/// with each part alone (the server asks for stats or events only).
void check_ranges(const trace_model& model, const op_trees& trees,
                  const std::vector<std::pair<double, double>>& ranges) {
  const memory_index index = build_memory_index(model, trees);
  CHECK(index.present() == compute_memory(model, trees).present);
  CHECK(index.memory_bytes() > 0);
  const memory_parts only_stats{false, true, false};
  const memory_parts only_events{false, false, true};
  for (const auto& range : ranges) {
    CAPTURE(range.first);
    CAPTURE(range.second);
    const memory_result ref = compute_memory(model, trees, range);
    check_same(compute_memory_range(index, model, trees, range), ref);
    check_same(compute_memory_range(index, model, trees, range, only_stats), ref, only_stats);
    check_same(compute_memory_range(index, model, trees, range, only_events), ref, only_events);
  }
}

/// A random workload on `threads` threads: nested operators (with aten::empty children), records
/// on CPU / GPU0 / GPU1 from a small address pool (pairs, re-used addresses, frees of unknown
/// addresses, zero-byte records), some outside every operator.
trace_model random_trace(std::uint64_t seed) {
  rng r{seed};
  trace_builder b;
  static const char* const names[] = {"aten::linear", "aten::addmm", "aten::empty", "aten::relu", "aten::conv2d"};
  struct pending {
    double t;
    std::uint64_t addr;
    std::int64_t bytes;
    int type;
    int id;
  };
  std::vector<pending> mem;
  std::vector<std::pair<std::uint64_t, std::int64_t>> live;  // (addr, bytes)
  double t = t0;
  for (int top = 0; top < 40; ++top) {
    const double start = t + r.uniform(0, 5);
    const double len = r.uniform(10, 60);
    b.op(names[r.below(5)], start, start + len);
    double c = start + 1;
    while (c + 3 < start + len - 1) {
      const double cl = r.uniform(1, 8);
      if (c + cl >= start + len - 1) break;
      b.op(names[r.below(5)], c, c + cl);
      if (r.below(3) == 0 && cl > 2) b.op("aten::empty", c + 0.5, c + 1.5);
      c += cl + r.uniform(0, 2);
    }
    for (int k = 0; k < 12; ++k) {
      // Record times on a 0.25 µs grid: some land exactly on node boundaries.
      const double mt = std::round(r.uniform(start - 2, start + len + 2) * 4) / 4;
      const int dev = static_cast<int>(r.below(3));
      const int type = dev == 0 ? 0 : 1;
      const int id = dev == 0 ? -1 : dev - 1;
      const std::size_t kind = r.below(10);
      if (kind < 5 || live.empty()) {
        const std::uint64_t addr = 0x1000 + 0x100 * r.below(24);
        const std::int64_t bytes = kind == 9 ? 0 : static_cast<std::int64_t>(64 * (1 + r.below(16)));
        live.emplace_back(addr, bytes);
        mem.push_back({mt, addr, bytes, type, id});
      } else if (kind < 9) {
        const std::size_t j = r.below(live.size());
        mem.push_back({mt, live[j].first, -live[j].second, type, id});
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(j));
      } else {
        mem.push_back({mt, 0x9000 + 0x10 * r.below(4), -32, type, id});  // free of an unknown address
      }
    }
    t = start + len;
  }
  std::stable_sort(mem.begin(), mem.end(), [](const pending& a, const pending& c) { return a.t < c.t; });
  std::int64_t total = 1 << 20;
  for (const pending& m : mem) {
    total += m.bytes;
    b.mem(m.t, m.addr, m.bytes, total, total + 4096, m.type, m.id);
  }
  return b.load();
}

}  // namespace

TEST_CASE("memory_view: indexed ranges equal compute_memory on the hand-made traces") {
  const trace_model model = main_trace();
  const op_trees trees = build_op_tree(model);
  check_ranges(model, trees, probe_ranges(model, trees, 40, 300, 1));

  // The range test above, through the index.
  const memory_index index = build_memory_index(model, trees);
  const memory_result m = compute_memory_range(index, model, trees, {t0 + 20, t0 + 60});
  REQUIRE(m.device("CPU") != nullptr);
  REQUIRE(m.device("CPU")->events.size() == 3);
  check_event(m.device("CPU")->events[2], "aten::linear (aten::empty)", 1024, std::nullopt, 30.0, std::nullopt);
  REQUIRE(m.device("CPU")->stats.size() == 2);
  check_stat(m.device("CPU")->stats[1], "aten::linear", 1, 3584, 512, 2, 1, 4608, 512);

  // Q16: a re-used address and repeated unpaired frees.
  trace_builder b;
  b.op("aten::a", t0, t0 + 10).op("aten::b", t0 + 20, t0 + 30).op("aten::c", t0 + 40, t0 + 50);
  b.mem(t0 + 1, 0x10, 100, 100)
      .mem(t0 + 2, 0x20, 200, 300)
      .mem(t0 + 21, 0x10, 50, 350)
      .mem(t0 + 22, 0x10, 70, 420)
      .mem(t0 + 41, 0x10, -70, 350)
      .mem(t0 + 42, 0x30, -8, 342)
      .mem(t0 + 42.5, 0x20, -200, 142)
      .mem(t0 + 43, 0x30, -8, 134);
  const trace_model q16 = b.load();
  const op_trees q16_trees = build_op_tree(q16);
  const memory_index q16_index = build_memory_index(q16, q16_trees);
  constexpr double inf = std::numeric_limits<double>::infinity();
  const memory_result all = compute_memory_range(q16_index, q16, q16_trees, {-inf, inf});
  CHECK(all.counts.replaced_allocations == 2);
  CHECK(all.counts.repeated_frees == 1);
  check_ranges(q16, q16_trees, probe_ranges(q16, q16_trees, 40, 300, 2));
}

TEST_CASE("memory_view: indexed ranges equal compute_memory on random workloads") {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    CAPTURE(seed);
    const trace_model model = random_trace(seed);
    const op_trees trees = build_op_tree(model);
    const memory_result all = compute_memory(model, trees);
    // The workload exercises what it is meant to: three devices, pairs, replacements, unpaired frees.
    CHECK(all.devices.size() == 3);
    CHECK(all.counts.replaced_allocations > 0);
    CHECK(all.counts.repeated_frees > 0);
    CHECK(all.counts.attributed_records > 0);
    CHECK(all.counts.attributed_records < all.counts.records);
    check_ranges(model, trees, probe_ranges(model, trees, 60, 150, seed));
  }
}

TEST_CASE("memory_view: indexed ranges equal compute_memory on a recorded trace and resnet50") {
  kinetoscope::profile prof({.activities = {kinetoscope::activity::cpu}, .profile_memory = true});
  prof.start();
  {
    kinetoscope::record_op outer("test::outer");
    void* a = kinetoscope::tracked_malloc(1000);
    for (int i = 0; i < 5; ++i) {
      kinetoscope::record_op inner("test::inner");
      void* b = kinetoscope::tracked_malloc(static_cast<std::size_t>(3000 + i));
      kinetoscope::tracked_free(b, static_cast<std::size_t>(3000 + i));
    }
    kinetoscope::tracked_free(a, 1000);
  }
  prof.stop();
  load_result r = load_trace_buffer(kinetoscope::chrome_trace_string(prof.last_trace()), "recorded.pt.trace.json");
  REQUIRE(r.ok());
  const op_trees trees = build_op_tree(*r.model);
  check_ranges(*r.model, trees, probe_ranges(*r.model, trees, 20, 50, 3));

  const char* real_dir = kinetoscope::test::real_traces();
  REQUIRE_MESSAGE(real_dir != nullptr, "KINETOSCOPE_REAL_TRACES not set (meson test sets it)");
  const std::string path = std::string(real_dir) +
                           "/traces/resnet50_v100/worker0.1623143089861.pt.trace.json.gz";
  load_result real = load_trace(path);
  REQUIRE_MESSAGE(real.ok(), path);
  const op_trees real_trees = build_op_tree(*real.model);
  const memory_result all = compute_memory(*real.model, real_trees);
  REQUIRE(all.present);
  CHECK(all.counts.records > 10000);
  // Fewer random ranges here: each reference compute_memory() call walks the whole trace.
  check_ranges(*real.model, real_trees, probe_ranges(*real.model, real_trees, 6, 8, 4));
}

TEST_CASE("memory_view: extreme sizes are saturated with a warning, sums saturate, peaks follow the curve") {
  // Sizes beyond ±2^53 bytes are saturated by the loader; sums over many saturated sizes stop at
  // the int64 limits instead of overflowing.
  constexpr std::int64_t limit = std::int64_t{1} << 53;
  constexpr std::int64_t max64 = std::numeric_limits<std::int64_t>::max();
  constexpr int allocations = 1100;  // 1100 · 2^53 > 2^63
  std::string text = R"J({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::huge", "pid": 1, "tid": 1, "ts": 0, "dur": 100000},
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1,
     "args": {"Addr": 1, "Bytes": -9223372036854775808, "Total Allocated": 1e308, "Total Reserved": -1e308, "Device Type": 0}})J";
  for (int i = 0; i < allocations; ++i) {
    text += R"J(,
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": )J" + std::to_string(10 + i) +
            R"J(, "args": {"Addr": )J" + std::to_string(100 + i) +
            R"J(, "Bytes": 9223372036854775807, "Total Allocated": 5, "Total Reserved": 5, "Device Type": 0}})J";
  }
  text += "]}";
  load_result r = load_trace_buffer(text, "extreme.json");
  REQUIRE(r.ok());
  const trace_model& model = *r.model;
  CHECK(model.diagnostics.warnings.at("memory size out of range, saturated") == allocations + 3);
  REQUIRE(model.diagnostics.messages.size() >= 3);
  CHECK(model.diagnostics.messages[0] == "event #1: memory size out of range, saturated (Bytes)");
  CHECK(model.diagnostics.messages[1] == "event #1: memory size out of range, saturated (Total Allocated)");
  CHECK(model.diagnostics.messages[2] == "event #1: memory size out of range, saturated (Total Reserved)");
  REQUIRE(model.memory.size() == allocations + 1);
  CHECK(model.memory[0].bytes == -limit);
  CHECK(model.memory[0].total_allocated == static_cast<double>(limit));
  CHECK(model.memory[0].total_reserved == -static_cast<double>(limit));
  CHECK(model.memory[1].bytes == limit);

  const op_trees trees = build_op_tree(model);
  const memory_result m = compute_memory(model, trees);
  const memory_device* cpu = m.device("CPU");
  REQUIRE(cpu != nullptr);
  CHECK(m.first_ts == 0);
  CHECK(cpu->curve.front() == point{1, static_cast<double>(limit), -static_cast<double>(limit)});
  CHECK(cpu->peak_allocated_bytes == limit);  // the curve's maximum, not 0
  CHECK(cpu->peak_time_us == 1.0);
  CHECK(cpu->peak_reserved_bytes == 5);
  REQUIRE(cpu->stats.size() == 1);
  check_stat(cpu->stats[0], "aten::huge", 1, max64, max64, allocations, allocations, max64, max64);
  REQUIRE(cpu->events.size() == allocations + 1);
  CHECK(cpu->events.back().size_bytes == limit);  // the unpaired free of -2^53, negated
  check_ranges(model, trees, {{-1.0, 200000.0}, {5.0, 500.0}, {0.5, 1.5}});

  // A hand-built model that bypasses the loader: memory_view clamps by itself.
  trace_model raw = model;
  raw.memory[0].bytes = std::numeric_limits<std::int64_t>::min();
  raw.memory[0].total_allocated = 1e308;
  const memory_result rm = compute_memory(raw, trees);
  CHECK(rm.device("CPU")->peak_allocated_bytes == limit);
  CHECK(rm.device("CPU")->events.back().size_bytes == limit);
}
