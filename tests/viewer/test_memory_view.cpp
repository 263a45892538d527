// SPDX-License-Identifier: BSD-3-Clause
// Memory view (spec viewer-analysis §9). There are no golden memory values from the plugin, so
// these tests write traces with kinetoscope's own writer (hand-built trace_data), load them back
// through the loader, build the op tree and check numbers derived by hand in the comments.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "analysis/loader.hpp"
#include "analysis/memory_view.hpp"
#include "analysis/op_tree.hpp"
#include "kinetoscope/memory.hpp"
#include "kinetoscope/profiler.hpp"
#include "kinetoscope/record_function.hpp"
#include "kinetoscope/trace_data.hpp"
#include "kinetoscope/writer/chrome_trace.hpp"

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
