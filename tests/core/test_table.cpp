// SPDX-License-Identifier: BSD-3-Clause
// averages::table(): docs/profiler-rules.md#table. Expected texts are fixed strings: the one of
// "table: verified PyTorch 1.13 output" is the table PyTorch 1.13 printed, copied verbatim; the
// others follow PyTorch's _build_table format strings ("{: >W}" + two spaces per cell).
#include <doctest/doctest.h>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kinetoscope/key_averages.hpp"

using namespace kinetoscope;

namespace {

constexpr std::int64_t us = 1000;

/// Builds one event_avg row; times in µs.
struct row {
  event_avg e;
  row(std::string key, std::int64_t count, std::int64_t self_cpu_us, std::int64_t cpu_us) {
    e.key = std::move(key);
    e.count = count;
    e.self_cpu_time_total_ns = self_cpu_us * us;
    e.cpu_time_total_ns = cpu_us * us;
  }
  row& device(std::int64_t self_us, std::int64_t total_us) {
    e.self_device_time_total_ns = self_us * us;
    e.device_time_total_ns = total_us * us;
    return *this;
  }
  row& cpu_mem(std::int64_t total, std::int64_t self) {
    e.cpu_memory_usage = total;
    e.self_cpu_memory_usage = self;
    return *this;
  }
  row& device_mem(std::int64_t total, std::int64_t self) {
    e.device_memory_usage = total;
    e.self_device_memory_usage = self;
    return *this;
  }
  row& flops(std::int64_t v) {
    e.flops = v;
    return *this;
  }
  row& shapes(std::vector<std::vector<std::int64_t>> s) {
    e.input_shapes = std::move(s);
    return *this;
  }
  row& stack(std::vector<std::string> s) {
    e.stack = std::move(s);
    return *this;
  }
  row& on_device() {
    e.on_device = true;
    return *this;
  }
  row& annotation() {
    e.is_user_annotation = true;
    return *this;
  }
  row& async() {
    e.is_async = true;
    return *this;
  }
  row& child() {
    e.has_cpu_parent = true;
    return *this;
  }
  operator event_avg() const { return e; }  // NOLINT(google-explicit-constructor)
};

averages make(std::vector<event_avg> rows, bool profile_memory = false, bool with_flops = false) {
  return averages(std::move(rows), profile_memory, with_flops);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

/// The Name cells of the data rows (between the second and the third separator).
std::vector<std::string> printed_names(const std::string& text) {
  std::vector<std::string> out;
  int separators = 0;
  for (const std::string& line : lines_of(text)) {
    if (line.starts_with("---")) {
      ++separators;
      continue;
    }
    if (separators != 2) continue;
    const std::size_t begin = line.find_first_not_of(' ');
    out.push_back(line.substr(begin, line.find("  ", begin) - begin));
  }
  return out;
}

/// forward (top level), aten::relu (2 calls, a child), async_io (async): Σ self CPU = 1.5 ms.
averages small_cpu_rows() {
  return make({row("forward", 1, 500, 1500), row("aten::relu", 2, 1000, 1000).child(),
               row("async_io", 1, 0, 250).async()});
}

// ---- the verified PyTorch 1.13 table of profiler-rules.md#table ----

constexpr std::int64_t base_ns = 1'700'000'000'000'000'000;

struct spec_trace {
  trace_data d;
  spec_trace() {
    d.start_ns = base_ns;
    d.intern("");
    d.record_shapes = d.profile_memory = d.with_flops = true;
  }
  void op(std::string_view name, std::int64_t start_us, std::int64_t end_us,
          std::vector<std::vector<std::int64_t>> inputs = {}, cpu_category cat = cpu_category::cpu_op) {
    cpu_event e;
    e.name = d.intern(name);
    e.start_ns = base_ns + start_us * us;
    e.end_ns = base_ns + end_us * us;
    e.tid = e.end_tid = 1;
    e.category = cat;
    e.external_id = static_cast<std::int64_t>(d.events.size()) + 1;
    e.first_input = static_cast<std::uint32_t>(d.inputs.size());
    e.input_count = static_cast<std::uint32_t>(inputs.size());
    for (auto& dims : inputs) {
      op_input in;
      in.type = "float";
      in.dims = std::move(dims);
      d.inputs.push_back(std::move(in));
    }
    e.flops = compute_flops(name, d.inputs.data() + e.first_input, e.input_count);
    d.events.push_back(e);
  }
  void conv2d(std::int64_t start_us, std::int64_t end_us) {
    op("aten::conv2d", start_us, end_us, {{2, 3, 16, 16}, {8, 3, 3, 3}, {}, {}, {}, {}, {}});
    cpu_event& e = d.events.back();
    op_input* in = d.inputs.data() + e.first_input;
    in[2].type.clear();  // bias None
    for (int i : {3, 4, 5}) in[i].type = "ScalarList";
    in[3].values = {1, 1};
    in[4].values = {0, 0};
    in[5].values = {1, 1};
    in[6].type = "Scalar";
    in[6].values = {1};
    e.flops = compute_flops("aten::conv2d", in, e.input_count);
  }
  void memory(std::int64_t t_us, std::int64_t bytes, std::int64_t tid = 1) {
    memory_event m;
    m.time_ns = base_ns + t_us * us;
    m.bytes = bytes;
    m.tid = tid;
    d.memory.push_back(m);
  }
};

/// Events whose key_averages() reproduces the rows of that verified PyTorch output: 12 rows in
/// all, the 7 hidden ones (one with a 60-character name, so Name is 55 wide) sorted after
/// aten::addmm by CPU total. Σ self CPU = Σ top-level totals = 5293 + 1027 + 1348 + 59 = 7727 us.
trace_data spec_events() {
  spec_trace t;
  const std::vector<std::vector<std::int64_t>> mm_in = {{64, 128}, {128, 256}};
  t.op("my_block", 0, 5293, {}, cpu_category::user_annotation);  // self 5293 - 4946 = 347
  t.op("aten::mm", 10, 1037, mm_in);
  t.memory(500, 65536);
  t.op("aten::mul", 1100, 2922, {{64, 256}, {64, 256}});  // self 1822 - 37 = 1785
  t.op("aten::empty", 1200, 1237);
  t.memory(2000, 65536);
  t.op("aten::mm", 3000, 4027, mm_in);  // self 1027 - 4 = 1023
  t.op("aten::resize_", 3100, 3104);
  t.memory(3500, 65536);
  t.op("aten::addmm", 4050, 4858, {{256}, {64, 128}, {128, 256}});  // self 808 - 101 = 707
  t.op("aten::copy_", 4100, 4201);
  t.memory(4500, 65536);
  t.op("aten::zeros", 4900, 5162);
  t.memory(5000, 13576);
  t.memory(5293, -66560, 2);  // my_block frees 65 Kb at its last ns, on another thread
  t.op("aten::mm", 5400, 6427, mm_in);
  t.memory(6000, 98304);
  t.conv2d(6500, 7848);  // self 1348 - 700 - 637 = 11
  t.op("aten::convolution", 6505, 7205);
  t.memory(6600, 12544);
  t.op("aten::add_", 7210, 7847);
  t.op("aten::_an_operator_with_a_rather_long_name_that_widens_names", 7900, 7959);
  return std::move(t.d);
}

}  // namespace

TEST_CASE("table: empty list") {
  CHECK(averages().table() == "");
  CHECK(averages({}, true, true).table({.header = "H", .top_level_events_only = true}) == "");
}

TEST_CASE("table: small CPU-only table") {
  const std::string expected =
      "--------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "          Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls  \n"
      "--------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "       forward        33.33%     500.000us       100.00%       1.500ms       1.500ms             1  \n"
      "    aten::relu        66.67%       1.000ms        66.67%       1.000ms     500.000us             2  \n"
      "      async_io         0.00%       0.000us             0     250.000us     250.000us             1  \n"
      "--------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "Self CPU time total: 1.500ms\n";
  CHECK(small_cpu_rows().table() == expected);
  // profile_memory / with_flops without data: the memory columns follow the flag, FLOPs need a
  // positive value
  const std::string with_flags = make(small_cpu_rows().rows(), false, true).table();
  CHECK(with_flags == expected);
  CHECK(make(small_cpu_rows().rows(), true, false).table().find("Self CPU Mem") != std::string::npos);
}

TEST_CASE("table: verified PyTorch 1.13 output") {
  const averages avg = key_averages(build_events(spec_events()));
  REQUIRE(avg.size() == 12);
  const std::string expected =
      "-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "                                                   Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg       CPU Mem  Self CPU Mem    # of Calls  Total KFLOPs  \n"
      "-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "                                               my_block         4.49%     347.000us        68.50%       5.293ms       5.293ms     204.26 Kb     -65.00 Kb             1            --  \n"
      "                                               aten::mm        39.82%       3.077ms        39.87%       3.081ms       1.027ms     224.00 Kb     224.00 Kb             3     12582.912  \n"
      "                                              aten::mul        23.10%       1.785ms        23.58%       1.822ms       1.822ms      64.00 Kb      64.00 Kb             1        16.384  \n"
      "                                           aten::conv2d         0.14%      11.000us        17.45%       1.348ms       1.348ms      12.25 Kb           0 b             1       169.344  \n"
      "                                            aten::addmm         9.15%     707.000us        10.46%     808.000us     808.000us      64.00 Kb      64.00 Kb             1      4194.304  \n"
      "-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "Self CPU time total: 7.727ms\n";
  const std::string text = avg.table({.sort_by = "cpu_time_total", .row_limit = 5});
  const auto got = lines_of(text);
  const auto want = lines_of(expected);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("line " << i);
    CHECK(got[i] == want[i]);
  }
  CHECK(text == expected);

  // all 12 rows: the hidden ones follow, the 60-character name cut to 52 + "..."
  const std::string all = avg.table({.sort_by = "cpu_time_total", .row_limit = -1});
  CHECK(printed_names(all) ==
        std::vector<std::string>{"my_block", "aten::mm", "aten::mul", "aten::conv2d", "aten::addmm",
                                 "aten::convolution", "aten::add_", "aten::zeros", "aten::copy_",
                                 "aten::_an_operator_with_a_rather_long_name_that_wide...", "aten::empty",
                                 "aten::resize_"});
  CHECK(all.ends_with("Self CPU time total: 7.727ms\n"));
}

TEST_CASE("table: header and top_level_events_only") {
  // Name width 23 with the memory columns: the '=' lines are 135 long, as in PyTorch 1.13's
  // verified "MY HEADER" output.
  const averages avg = make({row("ProfilerStep*", 2, 120, 2000).cpu_mem(4096, 0).annotation(),
                             row("aten::empty_strided", 4, 80, 80).cpu_mem(4096, 4096).child(),
                             row("aten::mm", 1, 1800, 1800).child(),
                             row("optimizer", 1, 300, 300).cpu_mem(-512, -512).annotation()},
                            true);
  const std::string rule(135, '=');
  const std::string expected =
      rule + "\n"
      "MY HEADER\n" +
      rule + "\n"
      "This report only display top-level ops statistics\n"
      "-----------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "                   Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg       CPU Mem  Self CPU Mem    # of Calls  \n"
      "-----------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "          ProfilerStep*         5.22%     120.000us        86.96%       2.000ms       1.000ms       4.00 Kb           0 b             2  \n"
      "              optimizer        13.04%     300.000us        13.04%     300.000us     300.000us        -512 b        -512 b             1  \n"
      "-----------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "Self CPU time total: 2.300ms\n";
  CHECK(avg.table({.header = "MY HEADER", .top_level_events_only = true}) == expected);

  // header alone: one rule; top level alone: one rule and the notice
  const auto header_only = lines_of(avg.table({.header = "MY HEADER"}));
  REQUIRE(header_only.size() == 2 + 3 + 4 + 2);
  CHECK(header_only[0] == rule);
  CHECK(header_only[1] == "MY HEADER");
  CHECK(header_only[2].starts_with("-----------------------  "));
  const auto top_only = lines_of(avg.table({.top_level_events_only = true}));
  CHECK(top_only[0] == rule);
  CHECK(top_only[1] == "This report only display top-level ops statistics");
  // row_limit counts printed rows only
  CHECK(printed_names(avg.table({.row_limit = 1, .top_level_events_only = true})) ==
        std::vector<std::string>{"ProfilerStep*"});
  CHECK(printed_names(avg.table({.row_limit = 2, .top_level_events_only = true})) ==
        std::vector<std::string>{"ProfilerStep*", "optimizer"});
}

TEST_CASE("table: device columns and Self CUDA time total") {
  // The device-side my_block row (a GPU user annotation) has self device time but is left out
  // of the "Self CUDA time total"; CUDA Mem columns appear because a row has self device memory.
  const averages avg = make({row("my_block", 1, 100, 400).device(0, 50).annotation(),
                             row("aten::mm", 2, 300, 300).device(30, 30).device_mem(2048, 2048).child(),
                             row("gemm_kernel", 2, 0, 0).device(30, 30).on_device(),
                             row("my_block", 1, 0, 0).device(45, 45).on_device().annotation()},
                            true);
  const std::string expected =
      "---------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "           Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg     Self CUDA   Self CUDA %    CUDA total  CUDA time avg       CPU Mem  Self CPU Mem      CUDA Mem  Self CUDA Mem    # of Calls  \n"
      "---------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "       my_block        25.00%     100.000us       100.00%     400.000us     400.000us       0.000us         0.00%      50.000us      50.000us           0 b           0 b           0 b           0 b             1  \n"
      "       aten::mm        75.00%     300.000us        75.00%     300.000us     150.000us      30.000us       100.00%      30.000us      15.000us           0 b           0 b       2.00 Kb       2.00 Kb             2  \n"
      "    gemm_kernel         0.00%       0.000us         0.00%       0.000us       0.000us      30.000us       100.00%      30.000us      15.000us           0 b           0 b           0 b           0 b             2  \n"
      "       my_block         0.00%       0.000us         0.00%       0.000us       0.000us      45.000us       150.00%      45.000us      45.000us           0 b           0 b           0 b           0 b             1  \n"
      "---------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "Self CPU time total: 400.000us\n"
      "Self CUDA time total: 30.000us\n";
  CHECK(avg.table() == expected);

  // without profile_memory: no memory columns at all; device time only on an annotation row
  // still shows the device columns, with a NaN share since the total is 0
  const std::string only_annotation =
      make({row("a", 1, 10, 10), row("my_block", 1, 0, 0).device(5, 5).on_device().annotation()}).table();
  const auto l = lines_of(only_annotation);
  CHECK(l[1].find("Self CUDA %") != std::string::npos);
  CHECK(l[1].find("CPU Mem") == std::string::npos);
  CHECK(l[4] ==
        "    my_block         0.00%       0.000us         0.00%       0.000us       0.000us       5.000us           NaN "
        "      5.000us       5.000us             1  ");
  CHECK(l.back() == "Self CUDA time total: 0.000us");
}

TEST_CASE("table: row_limit and sort_by") {
  const averages avg = make({row("a", 1, 10, 100), row("b", 1, 30, 30), row("c", 1, 30, 50),
                             row("d", 4, 5, 200).device(1, 7), row("e", 2, 0, 0).device(2, 9).on_device()});
  const std::string expected =
      "-----  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      " Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg     Self CUDA   Self CUDA %    CUDA total  CUDA time avg    # of Calls  \n"
      "-----  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "    b        40.00%      30.000us        40.00%      30.000us      30.000us       0.000us         0.00%       0.000us       0.000us             1  \n"
      "    c        40.00%      30.000us        66.67%      50.000us      50.000us       0.000us         0.00%       0.000us       0.000us             1  \n"
      "-----  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "Self CPU time total: 75.000us\n"
      "Self CUDA time total: 2.000us\n";
  // descending, stable: b and c tie on self CPU and keep their first-seen order
  CHECK(avg.table({.sort_by = "self_cpu_time_total", .row_limit = 2}) == expected);

  using names = std::vector<std::string>;
  CHECK(printed_names(avg.table()) == names{"a", "b", "c", "d", "e"});
  CHECK(printed_names(avg.table({.sort_by = "cpu_time_total"})) == names{"d", "a", "c", "b", "e"});
  CHECK(printed_names(avg.table({.sort_by = "cpu_time"})) == names{"a", "c", "d", "b", "e"});  // c and d tie (50 us)
  CHECK(printed_names(avg.table({.sort_by = "count"})) == names{"d", "e", "a", "b", "c"});
  // "cuda" and "xpu" name the device attributes
  CHECK(printed_names(avg.table({.sort_by = "cuda_time_total"})) == names{"e", "d", "a", "b", "c"});
  CHECK(printed_names(avg.table({.sort_by = "device_time_total"})) == names{"e", "d", "a", "b", "c"});
  CHECK(printed_names(avg.table({.sort_by = "self_cuda_time_total"})) == names{"e", "d", "a", "b", "c"});
  CHECK(printed_names(avg.table({.sort_by = "self_xpu_time_total"})) == names{"e", "d", "a", "b", "c"});
  CHECK(printed_names(avg.table({.sort_by = "cuda_time"})) == names{"e", "d", "a", "b", "c"});
  CHECK(printed_names(avg.table({.sort_by = "self_privateuse1_time_total"})) == names{"e", "d", "a", "b", "c"});
  const names first_seen{"a", "b", "c", "d", "e"};
  for (const char* key : {"cpu_memory_usage", "cuda_memory_usage", "self_cpu_memory_usage",
                          "self_cuda_memory_usage", "device_memory_usage", "self_device_memory_usage", "flops"})
    CHECK_MESSAGE(printed_names(avg.table({.sort_by = key})) == first_seen, key);

  CHECK(printed_names(avg.table({.row_limit = 0})).empty());
  CHECK(avg.table({.row_limit = 0}).ends_with("Self CPU time total: 75.000us\nSelf CUDA time total: 2.000us\n"));
  CHECK(printed_names(avg.table({.row_limit = -1})).size() == 5);
  CHECK(printed_names(avg.table({.row_limit = 3})) == names{"a", "b", "c"});

  CHECK_THROWS_AS((void)avg.table({.sort_by = "name"}), std::invalid_argument);
  CHECK_THROWS_AS((void)avg.table({.sort_by = "self_cpu_time"}), std::invalid_argument);
  CHECK_THROWS_AS((void)avg.table({.sort_by = "SELF_CPU_TIME_TOTAL"}), std::invalid_argument);
  try {
    (void)avg.table({.sort_by = "bogus"});
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CHECK(what.find("'bogus'") != std::string::npos);
    for (const char* key : {"cpu_time", "cuda_time", "cpu_time_total", "self_cpu_time_total",
                            "self_cuda_time_total", "self_device_time_total", "cpu_memory_usage",
                            "self_cuda_memory_usage", "count", "flops"})
      CHECK_MESSAGE(what.find(key) != std::string::npos, key);
  }
  // the list itself is not reordered
  CHECK(avg[0].key == "a");

  // stability on a list long enough for std::sort to leave insertion sort: 40 ties
  std::vector<event_avg> many;
  names order;
  for (int i = 0; i < 40; ++i) {
    order.push_back("op" + std::to_string(i));
    many.push_back(row(order.back(), 3, i % 2, 1 + i % 3));
  }
  CHECK(printed_names(make(many).table({.sort_by = "count", .row_limit = -1})) == order);
  names by_self;
  for (int i = 1; i < 40; i += 2) by_self.push_back(order[static_cast<std::size_t>(i)]);
  for (int i = 0; i < 40; i += 2) by_self.push_back(order[static_cast<std::size_t>(i)]);
  CHECK(printed_names(make(many).table({.sort_by = "self_cpu_time_total", .row_limit = -1})) == by_self);
}

TEST_CASE("table: name truncation") {
  const std::string x60(60, 'x'), y52(52, 'y'), z51(51, 'z');
  const averages avg = make({row(x60, 1, 1, 1), row(y52, 1, 1, 1), row(z51, 1, 1, 1)});
  const std::string expected =
      "-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "                                                   Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls  \n"
      "-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...        33.33%       1.000us        33.33%       1.000us       1.000us             1  \n"
      "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy...        33.33%       1.000us        33.33%       1.000us       1.000us             1  \n"
      "    zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz        33.33%       1.000us        33.33%       1.000us       1.000us             1  \n"
      "-------------------------------------------------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "Self CPU time total: 3.000us\n";
  CHECK(avg.table() == expected);

  // a smaller limit: width 20, every name (>= 17 characters) cut to 17 + "..."
  const auto narrow = lines_of(avg.table({.max_name_column_width = 20}));
  CHECK(narrow[0].starts_with(std::string(20, '-') + "  ------------"));
  CHECK(narrow[3].starts_with("xxxxxxxxxxxxxxxxx...        33.33%"));
  CHECK(narrow[5].starts_with("zzzzzzzzzzzzzzzzz...        33.33%"));

  // widths count characters, not UTF-8 bytes: "µs_op" is 5 characters -> width 9
  const auto utf8 = lines_of(make({row("\xC2\xB5s_op", 1, 1, 1)}).table());
  CHECK(utf8[0].starts_with("---------  ------------"));
  CHECK(utf8[3].starts_with("    \xC2\xB5s_op       100.00%"));
}

TEST_CASE("table: time_unit forces one unit") {
  const averages avg = small_cpu_rows();
  const std::string ms =
      "--------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "          Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls  \n"
      "--------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "       forward        33.33%       0.500ms       100.00%       1.500ms       1.500ms             1  \n"
      "    aten::relu        66.67%       1.000ms        66.67%       1.000ms       0.500ms             2  \n"
      "      async_io         0.00%       0.000ms             0       0.250ms       0.250ms             1  \n"
      "--------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "Self CPU time total: 1.500ms\n";
  CHECK(avg.table({.time_unit = "ms"}) == ms);
  const auto s = lines_of(avg.table({.time_unit = "s"}));
  CHECK(s[3] == "       forward        33.33%        0.001s       100.00%        0.002s        0.002s             1  ");
  CHECK(s.back() == "Self CPU time total: 0.002s");
  const auto u = lines_of(avg.table({.time_unit = "us"}));
  CHECK(u[3] == "       forward        33.33%     500.000us       100.00%    1500.000us    1500.000us             1  ");
  CHECK(u.back() == "Self CPU time total: 1500.000us");
  // any other value keeps the automatic units (PyTorch's override_time_unit falls through)
  CHECK(avg.table({.time_unit = "ns"}) == avg.table());
  // the device footer follows the unit too
  const std::string dev = make({row("k", 1, 0, 0).device(2500, 2500).on_device()}).table({.time_unit = "ms"});
  CHECK(dev.ends_with("Self CPU time total: 0.000ms\nSelf CUDA time total: 2.500ms\n"));
  // automatic: seconds from 1 000 000 us
  CHECK(make({row("long", 1, 1234000, 1234000)}).table().ends_with("Self CPU time total: 1.234s\n"));
}

TEST_CASE("table: memory formats") {
  const averages avg = make({row("b1023", 1, 1, 1).cpu_mem(1023, -1023), row("kb", 1, 0, 1).cpu_mem(1024, 0),
                             row("block", 1, 0, 1).cpu_mem(-66560, 1536),
                             row("mb", 1, 0, 1).cpu_mem(1572864, -1048575),
                             row("gb", 1, 0, 1).cpu_mem(3LL << 30, -(1LL << 30))},
                            true);
  const std::string expected =
      "---------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "     Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg       CPU Mem  Self CPU Mem    # of Calls  \n"
      "---------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "    b1023       100.00%       1.000us       100.00%       1.000us       1.000us        1023 b       -1023 b             1  \n"
      "       kb         0.00%       0.000us       100.00%       1.000us       1.000us       1.00 Kb           0 b             1  \n"
      "    block         0.00%       0.000us       100.00%       1.000us       1.000us     -65.00 Kb       1.50 Kb             1  \n"
      "       mb         0.00%       0.000us       100.00%       1.000us       1.000us       1.50 Mb   -1024.00 Kb             1  \n"
      "       gb         0.00%       0.000us       100.00%       1.000us       1.000us       3.00 Gb      -1.00 Gb             1  \n"
      "---------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
      "Self CPU time total: 1.000us\n";
  CHECK(avg.table() == expected);

  const auto modern = lines_of(avg.table({.modern_memory_units = true}));
  CHECK(modern[3].ends_with("        1023 B       -1023 B             1  "));
  CHECK(modern[4].ends_with("       1.00 KB           0 B             1  "));
  CHECK(modern[5].ends_with("     -65.00 KB       1.50 KB             1  "));
  CHECK(modern[6].ends_with("       1.50 MB   -1024.00 KB             1  "));
  CHECK(modern[7].ends_with("       3.00 GB      -1.00 GB             1  "));

  // CUDA Mem columns need a positive self device memory somewhere
  const std::string freed_only = make({row("x", 1, 1, 1).device_mem(-4096, -4096)}, true).table();
  CHECK(freed_only.find("CUDA Mem") == std::string::npos);
}

TEST_CASE("table: Input Shapes and FLOPs columns") {
  const averages avg = make({row("aten::conv2d", 2, 40, 100)
                                 .flops(2 * 18135613440LL)
                                 .shapes({{5, 64, 56, 56}, {64, 64, 3, 3}, {}, {}, {}, {}, {}}),
                             row("aten::add", 1, 60, 60).flops(999).shapes({{5, 64}, {5, 64}, {}}),
                             row("aten::relu", 1, 10, 10).shapes({{5, 64}})},
                            false, true);
  // the shapes text is hard-cut to the column width (40 here); the smallest positive FLOPs value
  // (999) picks the unit; values may overflow the 12-character column
  const std::string expected =
      "----------------  ------------  ------------  ------------  ------------  ------------  ------------  ----------------------------------------  ------------  \n"
      "            Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls                              Input Shapes   Total FLOPs  \n"
      "----------------  ------------  ------------  ------------  ------------  ------------  ------------  ----------------------------------------  ------------  \n"
      "    aten::conv2d        36.36%      40.000us        90.91%     100.000us      50.000us             2  [[5, 64, 56, 56], [64, 64, 3, 3], [], []  36271226880.000  \n"
      "       aten::add        54.55%      60.000us        54.55%      60.000us      60.000us             1                    [[5, 64], [5, 64], []]       999.000  \n"
      "      aten::relu         9.09%      10.000us         9.09%      10.000us      10.000us             1                                 [[5, 64]]            --  \n"
      "----------------  ------------  ------------  ------------  ------------  ------------  ------------  ----------------------------------------  ------------  \n"
      "Self CPU time total: 110.000us\n";
  CHECK(avg.table({.max_shapes_column_width = 40}) == expected);
  // default limit 80: width = longest shapes text (53 characters) + 4
  const auto wide = lines_of(avg.table());
  CHECK(wide[3].find("  [[5, 64, 56, 56], [64, 64, 3, 3], [], [], [], [], []]  ") != std::string::npos);
  CHECK(wide[0].find("  " + std::string(57, '-') + "  ") != std::string::npos);
  CHECK(wide[0].find(std::string(58, '-')) == std::string::npos);

  auto unit = [](std::int64_t smallest, std::int64_t other) {
    return lines_of(make({row("a", 1, 1, 1).flops(other), row("b", 1, 1, 1).flops(smallest)}, false, true).table());
  };
  CHECK(unit(1000, 5000)[1].ends_with("  Total KFLOPs  "));
  CHECK(unit(1000, 5000)[3].ends_with("       5.000  "));
  CHECK(unit(999999, 5000000)[1].ends_with("  Total KFLOPs  "));
  CHECK(unit(1000000, 5000000)[1].ends_with("  Total MFLOPs  "));
  CHECK(unit(18135613440LL, 18135613440LL)[3].ends_with("      18.136  "));
  CHECK(unit(18135613440LL, 18135613440LL)[1].ends_with("  Total GFLOPs  "));
  CHECK(unit(1000000000000000000LL, 1)[1].ends_with("  Total FLOPs  "));  // smallest is 1
  CHECK(unit(1000000000000000000LL, 1000000000000000000LL)[1].ends_with("  Total PFLOPs  "));
  CHECK(unit(1000000000000000000LL, 1000000000000000000LL)[3].ends_with("    1000.000  "));
  // with_flops but no positive value: no column; FLOPs values without with_flops: no column
  CHECK(make({row("a", 1, 1, 1)}, false, true).table().find("FLOPs") == std::string::npos);
  CHECK(make({row("a", 1, 1, 1).flops(5)}, false, false).table().find("FLOPs") == std::string::npos);
}

TEST_CASE("table: Source Location column (headers and values in the same order)") {
  // PyTorch swaps the Source Location and FLOPs values; kinetoscope keeps them under their headers
  const averages avg = make({row("aten::mm", 1, 10, 10)
                                 .flops(2000000)
                                 .stack({"model.py(12): forward", "torch/nn/modules/module.py(1194): _call_impl",
                                         "train.py(40): <module>"}),
                             row("aten::add", 1, 5, 5).stack({"model.py(13): forward"})},
                            false, true);
  const std::string expected =
      "-------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------------------------  ------------  \n"
      "         Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls  Source Location                 Total MFLOPs  \n"
      "-------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------------------------  ------------  \n"
      "     aten::mm        66.67%      10.000us        66.67%      10.000us      10.000us             1  model.py(12): forward                  2.000  \n"
      "                                                                                                   ...module.py(1194): _call_impl                \n"
      "                                                                                                   train.py(40): <module>                        \n"
      "                                                                                                                                                 \n"
      "    aten::add        33.33%       5.000us        33.33%       5.000us       5.000us             1  model.py(13): forward                     --  \n"
      "                                                                                                                                                 \n"
      "-------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------------------------  ------------  \n"
      "Self CPU time total: 15.000us\n";
  CHECK(avg.table({.max_src_column_width = 30}) == expected);
  // default limit 75: width = longest entry (44) + 4, nothing trimmed
  const auto wide = lines_of(avg.table());
  CHECK(wide[4].find("  torch/nn/modules/module.py(1194): _call_impl      ") != std::string::npos);
}
