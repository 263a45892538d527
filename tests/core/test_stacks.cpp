// SPDX-License-Identifier: BSD-3-Clause
// with_stack: capture, symbolization, the backward stack rule, group_by_stack_n, the Source
// Location column and export_stacks (docs/profiler-rules.md#options, #event-tree, #key-averages,
// #table, #export-stacks).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kinetoscope/kinetoscope.hpp"
#include "symbolizer.hpp"
#include "test_support.hpp"

using namespace kinetoscope;
using test_support::find_named;

// Functions outside namespace kinetoscope (whose innermost frames are dropped as the
// profiler's own), never inlined, each doing work after its call so no call is a tail call.
namespace stack_test {
int line_range = 0;
int line_call_1 = 0;
int line_call_2 = 0;
int line_op = 0;
int line_start = 0;
volatile int sink = 0;

[[gnu::noinline]] void level_1() {
  line_range = __LINE__; KINETOSCOPE_RANGE("deep");
  sink = sink + 1;
}
[[gnu::noinline]] void level_2() {
  line_call_1 = __LINE__; level_1();
  sink = sink + 1;
}
[[gnu::noinline]] void level_3() {
  line_call_2 = __LINE__; level_2();
  sink = sink + 1;
}
[[gnu::noinline]] int recurse(int n) {
  if (n == 0) {
    KINETOSCOPE_RANGE("bottom");
    return sink;
  }
  const int r = recurse(n - 1);
  sink = sink + 1;
  return r + 1;
}
[[gnu::noinline]] void dynamic_op(const std::string& name) {
  line_op = __LINE__; record_op op(name);
  sink = sink + 1;
}
[[gnu::noinline]] void start(profile& prof) {
  line_start = __LINE__; prof.start();
  sink = sink + 1;
}
[[gnu::noinline]] void call_site_a() { record_op op("aten::mm"); sink = sink + 1; }
[[gnu::noinline]] void call_site_b() { record_op op("aten::mm"); sink = sink + 1; }
}  // namespace stack_test

namespace {

std::vector<std::string> frames_of(const trace_data& d, const cpu_event& e) {
  std::vector<std::string> out;
  for (std::uint32_t i = 0; i < e.frame_count; ++i) out.push_back(d.strings[d.frames[e.first_frame + i]]);
  return out;
}

/// "<path ending in this file>(<line>): <function>"
bool is_frame(const std::string& frame, int line, std::string_view function) {
  const std::string tail = "tests/core/test_stacks.cpp(" + std::to_string(line) + "): " + std::string(function);
  return frame.ends_with(tail);
}

const cpu_event& only(const trace_data& d, std::string_view name) {
  const cpu_event* e = find_named(d, name);
  REQUIRE(e != nullptr);
  return *e;
}

}  // namespace

TEST_CASE("stacks: frames innermost first with file and line, own frames skipped") {
  profile prof({.with_stack = true});
  prof.start();
  stack_test::level_3();
  prof.stop();
  const trace_data& d = prof.last_trace();
  const std::vector<std::string> f = frames_of(d, only(d, "deep"));
  REQUIRE(f.size() >= 4);
  CHECK(is_frame(f[0], stack_test::line_range, "stack_test::level_1"));
  CHECK(is_frame(f[1], stack_test::line_call_1, "stack_test::level_2"));
  CHECK(is_frame(f[2], stack_test::line_call_2, "stack_test::level_3"));
  CHECK(f[3].find("DOCTEST_ANON_FUNC") != std::string::npos);  // this test case's function
  for (const std::string& frame : f) CHECK(frame.find("kinetoscope::") == std::string::npos);
  // The process entry frames (_start, __libc_start_main) are dropped from the outer end.
  CHECK(f.back().find("_start") == std::string::npos);
  CHECK(d.with_stack);
}

TEST_CASE("stacks: depth is capped at 64 frames, the innermost ones") {
  profile prof({.with_stack = true});
  prof.start();
  stack_test::recurse(100);
  prof.stop();
  const trace_data& d = prof.last_trace();
  const std::vector<std::string> f = frames_of(d, only(d, "bottom"));
  CHECK(f.size() == detail::max_stack_depth);
  for (const std::string& frame : f) CHECK(frame.ends_with("): stack_test::recurse"));
}

TEST_CASE("stacks: ops with dynamic names and ProfilerStep markers start at the user's call") {
  profile prof({.schedule = schedule({.wait = 0, .warmup = 0, .active = 2}), .with_stack = true});
  stack_test::start(prof);
  stack_test::dynamic_op(std::string("dyn::") + "op");
  prof.step();
  prof.stop();
  const trace_data& d = prof.last_trace();
  const std::vector<std::string> op = frames_of(d, only(d, "dyn::op"));
  REQUIRE(!op.empty());
  CHECK(is_frame(op[0], stack_test::line_op, "stack_test::dynamic_op"));
  const std::vector<std::string> step = frames_of(d, only(d, "ProfilerStep#0"));
  REQUIRE(!step.empty());
  CHECK(is_frame(step[0], stack_test::line_start, "stack_test::start"));
}

TEST_CASE("stacks: without with_stack no stack is captured") {
  profile prof;
  prof.start();
  stack_test::level_3();
  prof.stop();
  const trace_data& d = prof.last_trace();
  CHECK(only(d, "deep").frame_count == 0);
  CHECK(d.frames.empty());
  CHECK_FALSE(d.with_stack);
}

TEST_CASE("stacks: identical stacks share frames; windows accumulate them (acc_events)") {
  profile prof({.schedule = schedule({.wait = 0, .warmup = 0, .active = 1, .repeat = 2}),
                .with_stack = true, .acc_events = true});
  prof.start();
  for (int i = 0; i < 3; ++i) stack_test::level_3();
  prof.step();
  stack_test::level_3();
  prof.step();
  prof.stop();
  const trace_data& d = prof.last_trace();
  std::vector<const cpu_event*> deep;
  for (const cpu_event& e : d.events)
    if (d.strings[e.name] == "deep") deep.push_back(&e);
  REQUIRE(deep.size() == 1);  // the last window only
  const event_list all = prof.events();
  std::vector<std::vector<std::string>> stacks;
  for (const function_event& e : all)
    if (e.name == "deep") stacks.push_back(e.stack);
  REQUIRE(stacks.size() == 4);
  CHECK(stacks[0] == stacks[1]);  // same call line in the loop
  REQUIRE(stacks[3].size() == stacks[0].size());
  CHECK(std::equal(stacks[3].begin(), stacks[3].begin() + 3, stacks[0].begin()));  // up to level_3
  CHECK(stacks[3][3] != stacks[0][3]);  // called from another line of this test
  CHECK(is_frame(stacks[3][0], stack_test::line_range, "stack_test::level_1"));
}

TEST_CASE("stacks: events with the same stack share one range of trace_data::frames") {
  profile prof({.with_stack = true});
  prof.start();
  // A volatile count: an unrolled loop would make three call sites with three return addresses.
  volatile int calls = 3;
  for (int i = 0; i < calls; ++i) stack_test::level_3();
  stack_test::level_2();
  prof.stop();
  const trace_data& d = prof.last_trace();
  std::vector<const cpu_event*> deep;
  for (const cpu_event& e : d.events)
    if (d.strings[e.name] == "deep") deep.push_back(&e);
  REQUIRE(deep.size() == 4);
  CHECK(deep[1]->first_frame == deep[0]->first_frame);
  CHECK(deep[2]->first_frame == deep[0]->first_frame);
  CHECK(deep[1]->frame_count == deep[0]->frame_count);
  CHECK(deep[3]->first_frame != deep[0]->first_frame);
  CHECK(deep[3]->frame_count == deep[0]->frame_count - 1);  // no level_3 frame
  CHECK(d.frames.size() == std::size_t{deep[0]->frame_count} + deep[3]->frame_count);
}

TEST_CASE("stacks: group_by_stack_n separates call sites; Source Location shows the frames") {
  profile prof({.with_stack = true});
  prof.start();
  // One call line for all three calls, so the second frame is the same for both sites.
  for (void (*site)() : {stack_test::call_site_a, stack_test::call_site_b, stack_test::call_site_a}) site();
  prof.stop();
  const averages plain = prof.key_averages();
  REQUIRE(plain.size() == 1);
  CHECK(plain[0].count == 3);
  CHECK(plain[0].stack.empty());

  const averages by_site = prof.key_averages(false, 1);
  REQUIRE(by_site.size() == 2);
  CHECK(by_site[0].count == 2);
  CHECK(by_site[1].count == 1);
  REQUIRE(by_site[0].stack.size() == 1);
  REQUIRE(by_site[1].stack.size() == 1);
  CHECK(by_site[0].stack[0].ends_with("): stack_test::call_site_a"));
  CHECK(by_site[1].stack[0].ends_with("): stack_test::call_site_b"));

  const averages two = prof.key_averages(false, 2);
  REQUIRE(two.size() == 2);
  REQUIRE(two[0].stack.size() == 2);
  CHECK(two[0].stack[1].find("DOCTEST_ANON_FUNC") != std::string::npos);

  // Source Location: first frame on the row, the next one on its own line, then a blank line.
  const std::string table = two.table({.max_src_column_width = 300});
  std::vector<std::string> lines;
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() == 3 + 2 * 3 + 2);
  CHECK(lines[1].find("Source Location") != std::string::npos);
  std::size_t width = 0;  // longest entry over all rows + 4
  for (const event_avg& row : two)
    for (const std::string& frame : row.stack) width = std::max(width, frame.size() + 4);
  const auto cell = [&](const std::string& frame) { return frame + std::string(width - frame.size(), ' ') + "  "; };
  CHECK(lines[3].ends_with(cell(two[0].stack[0])));
  CHECK(lines[4].ends_with(cell(two[0].stack[1])));
  CHECK(lines[4].find_first_not_of(' ') == lines[4].size() - cell(two[0].stack[1]).size());
  CHECK(lines[5].find_first_not_of(' ') == std::string::npos);
  CHECK(lines[6].ends_with(cell(two[1].stack[0])));
  CHECK(lines[7].ends_with(cell(two[1].stack[1])));
}

TEST_CASE("stacks: export_stacks writes the folded stacks; errors are explicit") {
  const auto path = std::filesystem::temp_directory_path() / "kinetoscope_test_stacks.txt";
  {
    profile prof({.with_stack = true});
    prof.start();
    stack_test::level_3();
    prof.stop();
    prof.export_stacks(path.string());
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // "deep" lasts well under 1 µs of self time: only its value can be 0, and then it has no line.
    const std::string expected = folded_stacks(prof.events());
    CHECK(text == expected);
    CHECK_THROWS_WITH_AS(prof.export_stacks(path.string(), "cpu_time"),
                         doctest::Contains("valid metrics: self_cpu_time_total, self_cuda_time_total"),
                         std::invalid_argument);
    // A path below a regular file cannot be created.
    CHECK_THROWS_AS(prof.export_stacks((path / "stacks.txt").string()), std::runtime_error);
  }
  profile no_stack;
  no_stack.start();
  stack_test::level_3();
  no_stack.stop();
  CHECK_THROWS_WITH_AS(no_stack.export_stacks(path.string()),
                       "export_stacks requires a profile made with with_stack = true", std::logic_error);
  std::filesystem::remove(path);
}

// ---- symbolizer units ----------------------------------------------------------------------

TEST_CASE("symbolizer: names lose their parameter lists, paths are normalised") {
  using detail::strip_parameters;
  CHECK(strip_parameters("cnn::nn::conv2d(cnn::Tensor const&, int)") == "cnn::nn::conv2d");
  CHECK(strip_parameters("a::b::f(int) const &") == "a::b::f");
  CHECK(strip_parameters("f()::{lambda(int)#1}::operator()(int) const") == "f()::{lambda(int)#1}::operator()");
  CHECK(strip_parameters("std::vector<int, std::allocator<int> >::push_back(int&&)") ==
        "std::vector<int, std::allocator<int> >::push_back");
  CHECK(strip_parameters("main") == "main");
  CHECK(strip_parameters("(broken") == "(broken");
  CHECK(detail::function_name("_ZN3cnn2nn6conv2dERKi") == "cnn::nn::conv2d");
  CHECK(detail::function_name("main") == "main");
  CHECK(detail::display_path("/w/build/../src/a.cpp", "/w") == "src/a.cpp");
  CHECK(detail::display_path("/usr/include/c++/12/vector", "/w") == "/usr/include/c++/12/vector");
  CHECK(detail::display_path("/w2/a.cpp", "/w") == "/w2/a.cpp");
  CHECK(detail::display_path("rel/./b.cpp", "/w") == "rel/b.cpp");
  CHECK(detail::frame_text("src/a.cpp", 12, "ns::f") == "src/a.cpp(12): ns::f");
}

TEST_CASE("symbolizer: a function of this binary resolves to its name, file and line") {
  // The address just after the first instruction of level_2's call to level_1 is found by
  // capturing: level_1's range frame 1 is that return address. Resolve it directly too.
  profile prof({.with_stack = true});
  prof.start();
  stack_test::level_2();
  prof.stop();
  const trace_data& d = prof.last_trace();
  const std::vector<std::string> f = frames_of(d, only(d, "deep"));
  REQUIRE(f.size() >= 2);
  CHECK(is_frame(f[1], stack_test::line_call_1, "stack_test::level_2"));
  // An address in no module gives a hex fallback, never a crash.
  const auto& none = detail::symbolizer::instance().frames(0x10);
  REQUIRE(none.size() == 1);
  CHECK(none[0].text == "0x10");
}

// ---- build_events rules on a hand-built trace ----------------------------------------------

namespace {

constexpr std::int64_t base_ns = 1'700'000'000'000'000'000;

struct stack_trace_builder {
  trace_data d;
  stack_trace_builder() { d.start_ns = base_ns; d.intern(""); d.with_stack = true; }
  std::size_t op(std::string_view name, std::int64_t start_us, std::int64_t end_us,
                 std::vector<std::string_view> frames, std::int64_t seq = -1, std::int64_t fwd = 0,
                 std::int64_t tid = 1) {
    cpu_event e;
    e.name = d.intern(name);
    e.start_ns = base_ns + start_us * 1000;
    e.end_ns = base_ns + end_us * 1000;
    e.tid = e.end_tid = tid;
    e.external_id = static_cast<std::int64_t>(d.events.size()) + 1;
    e.sequence_nr = seq;
    e.fwd_thread_id = fwd;
    e.first_frame = static_cast<std::uint32_t>(d.frames.size());
    e.frame_count = static_cast<std::uint32_t>(frames.size());
    for (std::string_view f : frames) d.frames.push_back(d.intern(f));
    d.events.push_back(e);
    return d.events.size() - 1;
  }
  void kernel(std::int64_t start_us, std::int64_t end_us, std::int64_t external_id) {
    gpu_activity g;
    g.name = d.intern("k");
    g.start_ns = base_ns + start_us * 1000;
    g.end_ns = base_ns + end_us * 1000;
    g.external_id = external_id;
    g.stream = 7;
    d.gpu.push_back(g);
  }
};

const function_event& named(const event_list& events, std::string_view name) {
  for (const function_event& e : events)
    if (e.name == name) return e;
  FAIL("no event " << name);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("stacks: events under a backward function take their forward op's stack") {
  stack_trace_builder b;
  b.op("aten::linear", 0, 100, {"m.cpp(5): linear", "m.cpp(20): forward", "m.cpp(40): main"}, 7, 0);
  b.op("aten::addmm", 10, 90, {"m.cpp(6): linear", "m.cpp(20): forward", "m.cpp(40): main"}, 7, 0);
  b.op("autograd::engine::evaluate_function: AddmmBackward0", 200, 300, {"e.cpp(1): engine"}, 7, 1, 2);
  b.op("AddmmBackward0", 210, 290, {"e.cpp(2): node"}, 7, 1, 2);
  b.op("aten::mm", 220, 280, {"e.cpp(3): mm"}, -1, 0, 2);
  b.op("OrphanBackward0", 400, 450, {"e.cpp(4): orphan"}, 99, 1, 2);
  b.op("aten::relu", 500, 510, {"m.cpp(30): relu", "m.cpp(40): main"});
  const event_list events = build_events(b.d);
  const std::vector<std::string> fwd = {"m.cpp(5): linear", "m.cpp(20): forward", "m.cpp(40): main"};
  CHECK(named(events, "aten::linear").stack == fwd);
  CHECK(named(events, "aten::addmm").stack ==
        std::vector<std::string>{"m.cpp(6): linear", "m.cpp(20): forward", "m.cpp(40): main"});
  CHECK(named(events, "autograd::engine::evaluate_function: AddmmBackward0").stack == fwd);
  CHECK(named(events, "AddmmBackward0").stack == fwd);
  CHECK(named(events, "aten::mm").stack == fwd);
  CHECK(named(events, "OrphanBackward0").stack.empty());
  CHECK(named(events, "aten::relu").stack == std::vector<std::string>{"m.cpp(30): relu", "m.cpp(40): main"});
}

TEST_CASE("stacks: PyTorch's autograd entry frames are filtered from stacks") {
  stack_trace_builder b;
  b.op("aten::sum", 0, 10,
       {"m.py(3): f", "/x/torch/autograd/__init__.py(199): backward", "/x/torch/tensor.py(5): backward",
        "/x/torch/autograd/__init__.py(50): _make_grads", "/x/torch/autograd/__init__.py(9): grad", "m.py(9): main"});
  const event_list events = build_events(b.d);
  CHECK(named(events, "aten::sum").stack ==
        std::vector<std::string>{"m.py(3): f", "/x/torch/autograd/__init__.py(9): grad", "m.py(9): main"});
}

TEST_CASE("stacks: folded_stacks lines for CPU and device self time") {
  stack_trace_builder b;
  // outer: 100 µs, self 100 - 40 - 2.5 = 57.5 µs -> 57; inner: 40 µs with a 30 µs kernel;
  // tiny: 0.5 µs -> int 0, no line; nostack: no frames, no line.
  b.op("outer", 0, 100, {"a.cpp(1): f", "a.cpp(9): main"});
  const std::size_t inner = b.op("inner", 10, 50, {"a.cpp(2): g x;y\tz", "a.cpp(1): f", "a.cpp(9): main"});
  b.op("nostack", 60, 62, {});
  b.d.events.push_back(b.d.events[0]);
  cpu_event& tiny = b.d.events.back();
  tiny.name = b.d.intern("tiny");
  tiny.start_ns = base_ns + 70'000;
  tiny.end_ns = base_ns + 70'500;
  tiny.external_id = 9;
  b.kernel(20, 50, b.d.events[inner].external_id);
  const event_list events = build_events(b.d);
  // A frame's own "outer" line comes first: raw events in their list order.
  CHECK(folded_stacks(events) ==
        "a.cpp(9):_main;a.cpp(1):_f 57\n"
        "a.cpp(9):_main;a.cpp(1):_f;a.cpp(2):_g_x_y_z 40\n");
  CHECK(folded_stacks(events, "self_cuda_time_total") == "a.cpp(9):_main;a.cpp(1):_f;a.cpp(2):_g_x_y_z 30\n");
  CHECK(folded_stacks(events, "self_xpu_time_total") == folded_stacks(events, "self_cuda_time_total"));
  CHECK_THROWS_AS(folded_stacks(events, "self_device_time"), std::invalid_argument);
}
