// SPDX-License-Identifier: BSD-3-Clause
// build_events() and key_averages(): docs/profiler-rules.md#hidden-names, #event-tree,
// #key-averages.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kinetoscope/key_averages.hpp"

using namespace kinetoscope;

namespace {

constexpr std::int64_t base_ns = 1'700'000'000'000'000'000;  // window start (Unix ns)
constexpr std::int64_t us = 1000;

/// Builds a trace_data from µs offsets relative to the window start.
struct trace_builder {
  trace_data d;
  trace_builder() {
    d.start_ns = base_ns;
    d.intern("");
  }
  cpu_event& op(std::string_view name, std::int64_t start_us, std::int64_t end_us, std::int64_t tid = 1,
                cpu_category cat = cpu_category::cpu_op) {
    cpu_event e;
    e.name = d.intern(name);
    e.start_ns = base_ns + start_us * us;
    e.end_ns = base_ns + end_us * us;
    e.tid = e.end_tid = tid;
    e.category = cat;
    e.external_id = static_cast<std::int64_t>(d.events.size()) + 1;
    d.events.push_back(e);
    return d.events.back();
  }
  cpu_event& annotation(std::string_view name, std::int64_t start_us, std::int64_t end_us, std::int64_t tid = 1) {
    return op(name, start_us, end_us, tid, cpu_category::user_annotation);
  }
  void shapes(cpu_event& e, std::vector<std::vector<std::int64_t>> dims) {
    e.first_input = static_cast<std::uint32_t>(d.inputs.size());
    e.input_count = static_cast<std::uint32_t>(dims.size());
    for (auto& v : dims) {
      op_input in;
      in.type = v.empty() ? "Scalar" : "float";
      in.dims = std::move(v);
      d.inputs.push_back(std::move(in));
    }
  }
  void memory(std::int64_t t_ns_rel, std::int64_t bytes, std::int64_t tid = 1,
              device_type dev = device_type::cpu) {
    memory_event m;
    m.time_ns = base_ns + t_ns_rel;
    m.bytes = bytes;
    m.tid = tid;
    m.device = dev;
    m.device_id = dev == device_type::cpu ? -1 : 0;
    d.memory.push_back(m);
  }
  void kernel(std::string_view name, std::int64_t start_us, std::int64_t end_us, std::int64_t external_id,
              gpu_kind kind = gpu_kind::kernel) {
    gpu_activity g;
    g.kind = kind;
    g.name = d.intern(name);
    g.start_ns = base_ns + start_us * us;
    g.end_ns = base_ns + end_us * us;
    g.external_id = external_id;
    g.stream = 7;
    d.gpu.push_back(g);
  }
  void runtime(std::string_view name, std::int64_t start_us, std::int64_t end_us, std::int64_t external_id,
               std::int64_t tid = 1) {
    runtime_call r;
    r.name = d.intern(name);
    r.start_ns = base_ns + start_us * us;
    r.end_ns = base_ns + end_us * us;
    r.tid = tid;
    r.external_id = external_id;
    d.runtime.push_back(r);
  }
};

/// Index of the nth event named `name` in the list, or -1.
int index_of(const event_list& list, std::string_view name, int nth = 0) {
  for (std::size_t i = 0; i < list.size(); ++i)
    if (list[i].name == name && nth-- == 0) return static_cast<int>(i);
  return -1;
}

const function_event& get(const event_list& list, std::string_view name, int nth = 0) {
  const int i = index_of(list, name, nth);
  REQUIRE_MESSAGE(i >= 0, "no event " << name);
  return list[static_cast<std::size_t>(i)];
}

std::vector<std::string> names(const event_list& list) {
  std::vector<std::string> out;
  for (const auto& e : list) out.push_back(e.name);
  return out;
}

std::vector<std::string> keys(const averages& avg) {
  std::vector<std::string> out;
  for (const auto& r : avg) out.push_back(r.key);
  return out;
}

}  // namespace

TEST_CASE("key_averages: nesting and self times") {
  trace_builder b;
  b.op("parent", 0, 100);
  b.op("child_a", 10, 30);
  b.op("grandchild", 12, 17);
  b.op("child_b", 40, 70);
  b.op("other_thread", 20, 25, 2);  // same time, different thread: no link
  const event_list list = build_events(b.d);
  REQUIRE(list.size() == 5);
  CHECK(names(list) == std::vector<std::string>{"parent", "child_a", "grandchild", "other_thread", "child_b"});

  const auto& parent = get(list, "parent");
  CHECK(parent.start_ns == 0);
  CHECK(parent.end_ns == 100 * us);
  CHECK(parent.thread == 1);
  CHECK(parent.id == 1);
  CHECK(parent.cpu_time_total_ns == 100 * us);
  CHECK(parent.self_cpu_time_total_ns == 50 * us);
  CHECK(parent.cpu_parent == -1);
  CHECK(parent.cpu_children == std::vector<std::int32_t>{index_of(list, "child_a"), index_of(list, "child_b")});

  const auto& a = get(list, "child_a");
  CHECK(a.cpu_parent == index_of(list, "parent"));
  CHECK(a.cpu_time_total_ns == 20 * us);
  CHECK(a.self_cpu_time_total_ns == 15 * us);
  CHECK(get(list, "grandchild").cpu_parent == index_of(list, "child_a"));
  CHECK(get(list, "grandchild").self_cpu_time_total_ns == 5 * us);
  CHECK(get(list, "child_b").self_cpu_time_total_ns == 30 * us);
  CHECK(get(list, "child_b").cpu_parent == index_of(list, "parent"));
  CHECK(get(list, "other_thread").cpu_parent == -1);
  CHECK(get(list, "other_thread").self_cpu_time_total_ns == 5 * us);
  CHECK_FALSE(parent.on_device);
  CHECK_FALSE(parent.is_async);
  CHECK(parent.device_time_total_ns == 0);

  const averages avg = key_averages(list);
  REQUIRE(avg.size() == 5);
  const event_avg* p = avg.find("parent");
  REQUIRE(p != nullptr);
  CHECK(p->count == 1);
  CHECK(p->self_cpu_time_total_ns == 50 * us);
  CHECK_FALSE(p->has_cpu_parent);
  CHECK(avg.find("child_a")->has_cpu_parent);
  CHECK(avg.find("nothing") == nullptr);
}

TEST_CASE("key_averages: partially overlapping events get no link") {
  trace_builder b;
  b.op("outer", 0, 100);
  b.op("first", 10, 50);
  b.op("overlapping", 40, 80);  // starts inside `first`, ends after it: child of `outer`
  b.op("at_end", 80, 80);       // zero length at `overlapping`'s end: not its child
  b.op("zero_start", 10, 10);   // zero length at `first`'s start: its child
  const event_list list = build_events(b.d);
  const auto& first = get(list, "first");
  const auto& overlapping = get(list, "overlapping");
  CHECK(overlapping.cpu_parent == index_of(list, "outer"));
  CHECK(get(list, "at_end").cpu_parent == index_of(list, "outer"));
  CHECK(get(list, "zero_start").cpu_parent == index_of(list, "first"));
  CHECK(first.cpu_children == std::vector<std::int32_t>{index_of(list, "zero_start")});
  CHECK(first.self_cpu_time_total_ns == 40 * us);
  CHECK(overlapping.self_cpu_time_total_ns == 40 * us);
  // outer: 100 - 40 - 40 - 0: overlapping children can make self time smaller than real
  CHECK(get(list, "outer").self_cpu_time_total_ns == 20 * us);

  trace_builder two;
  two.op("a", 0, 50);
  two.op("b", 40, 80);
  const event_list l2 = build_events(two.d);
  CHECK(get(l2, "a").cpu_parent == -1);
  CHECK(get(l2, "b").cpu_parent == -1);
  CHECK(get(l2, "a").cpu_children.empty());
  CHECK(get(l2, "a").self_cpu_time_total_ns == 50 * us);
  CHECK(get(l2, "b").self_cpu_time_total_ns == 40 * us);
}

TEST_CASE("key_averages: self CPU is not clamped") {
  trace_builder b;
  b.op("parent", 0, 100);
  b.op("c1", 0, 60);
  b.op("c2", 40, 100);  // overlaps c1: both are children of parent
  const event_list list = build_events(b.d);
  CHECK(get(list, "c1").cpu_parent == index_of(list, "parent"));
  CHECK(get(list, "c2").cpu_parent == index_of(list, "parent"));
  CHECK(get(list, "parent").self_cpu_time_total_ns == -20 * us);

  trace_builder same;
  same.op("p", 0, 10);
  same.op("x", 0, 10);
  same.op("y", 0, 10);
  const event_list l2 = build_events(same.d);
  // identical intervals nest in list order: y in x in p
  CHECK(get(l2, "x").cpu_parent == index_of(l2, "p"));
  CHECK(get(l2, "y").cpu_parent == index_of(l2, "x"));
  CHECK(get(l2, "p").self_cpu_time_total_ns == 0);
  CHECK(get(l2, "y").self_cpu_time_total_ns == 10 * us);
}

TEST_CASE("key_averages: redundant duplicates are removed") {
  trace_builder b;
  b.op("aten::linear", 0, 100);  // id 1
  b.op("aten::linear", 5, 95);   // id 2: the only child, same name -> removed
  b.op("aten::t", 10, 20);       // id 3
  b.op("aten::addmm", 30, 80);   // id 4
  b.kernel("outer_kernel", 200, 205, 1);
  b.kernel("inner_kernel", 210, 217, 2);
  b.kernel("gemm", 220, 240, 4);
  const event_list list = build_events(b.d);
  REQUIRE(index_of(list, "aten::linear", 1) == -1);
  const auto& linear = get(list, "aten::linear");
  CHECK(linear.id == 1);
  CHECK(linear.cpu_time_total_ns == 100 * us);
  CHECK(linear.cpu_children == std::vector<std::int32_t>{index_of(list, "aten::t"), index_of(list, "aten::addmm")});
  CHECK(get(list, "aten::t").cpu_parent == index_of(list, "aten::linear"));
  CHECK(get(list, "aten::addmm").cpu_parent == index_of(list, "aten::linear"));
  CHECK(linear.self_cpu_time_total_ns == 40 * us);  // 100 - 10 - 50
  // the removed child's kernels replace the parent's own
  CHECK(linear.self_device_time_total_ns == 7 * us);
  CHECK(linear.device_time_total_ns == 27 * us);
  CHECK(get(list, "aten::addmm").self_device_time_total_ns == 20 * us);

  SUBCASE("chains collapse, siblings stay") {
    trace_builder c;
    c.op("f", 0, 100);
    c.op("f", 10, 90);
    c.op("f", 20, 80);
    c.op("leaf", 30, 40);
    c.op("g", 200, 300);
    c.op("g", 210, 220);  // two children named like the parent: kept
    c.op("g", 230, 240);
    const event_list l = build_events(c.d);
    CHECK(names(l) == std::vector<std::string>{"f", "leaf", "g", "g", "g"});
    CHECK(get(l, "f").cpu_children == std::vector<std::int32_t>{index_of(l, "leaf")});
    CHECK(get(l, "leaf").cpu_parent == 0);
    CHECK(get(l, "f").self_cpu_time_total_ns == 90 * us);
    CHECK(get(l, "g").self_cpu_time_total_ns == 80 * us);
    CHECK(get(l, "g", 1).cpu_parent == index_of(l, "g"));
    const averages avg = key_averages(l);
    CHECK(avg.find("f")->count == 1);
    CHECK(avg.find("g")->count == 3);
  }
}

TEST_CASE("key_averages: ProfilerStep#N rows aggregate as ProfilerStep*") {
  trace_builder b;
  b.annotation("ProfilerStep#3", 0, 100);
  b.op("aten::add", 10, 20);
  b.annotation("ProfilerStep#4", 100, 250);
  b.op("aten::add", 110, 130);
  b.annotation("ProfilerStep", 300, 301);  // no '#': keeps its name
  const event_list list = build_events(b.d);
  CHECK(list[0].name == "ProfilerStep#3");
  CHECK(list[0].key == "ProfilerStep*");
  CHECK(list[0].is_user_annotation);
  CHECK(list[2].name == "ProfilerStep#4");
  CHECK(list[2].key == "ProfilerStep*");
  const averages avg = key_averages(list);
  CHECK(keys(avg) == std::vector<std::string>{"ProfilerStep*", "aten::add", "ProfilerStep"});
  const event_avg* step = avg.find("ProfilerStep*");
  REQUIRE(step != nullptr);
  CHECK(step->count == 2);
  CHECK(step->cpu_time_total_ns == 250 * us);
  CHECK(step->self_cpu_time_total_ns == 220 * us);
  CHECK(step->is_user_annotation);
  CHECK(step->cpu_time_avg_ns() == doctest::Approx(125.0 * us));
  CHECK(avg.find("aten::add")->count == 2);
  CHECK(avg.find("aten::add")->cpu_time_total_ns == 30 * us);
}

TEST_CASE("key_averages: rows in first-seen order, key includes device and annotation flags") {
  trace_builder b;
  b.op("b", 0, 10);
  b.op("a", 20, 30);
  b.op("b", 40, 45);
  b.annotation("a", 50, 60);  // same name, user annotation: its own row
  b.op("c", 70, 80);
  b.kernel("b", 90, 95, 0);   // same name, on the device: its own row
  const averages avg = key_averages(build_events(b.d));
  REQUIRE(avg.size() == 5);
  CHECK(keys(avg) == std::vector<std::string>{"b", "a", "a", "c", "b"});
  CHECK(avg[0].count == 2);
  CHECK(avg[0].cpu_time_total_ns == 15 * us);
  CHECK_FALSE(avg[1].is_user_annotation);
  CHECK(avg[2].is_user_annotation);
  CHECK(avg[4].on_device);
  CHECK(avg[4].cpu_time_total_ns == 0);
  CHECK(avg[4].device_time_total_ns == 5 * us);
  CHECK(avg.find("b") == &avg[0]);

  const event_avg total = avg.total_average();
  CHECK(total.key == "Total");
  CHECK(total.count == 6);
  CHECK(total.cpu_time_total_ns == 45 * us);
  CHECK(total.self_cpu_time_total_ns == 45 * us);
  CHECK(total.device_time_total_ns == 5 * us);
  CHECK(total.self_device_time_total_ns == 5 * us);
}

TEST_CASE("key_averages: grouping by input shape") {
  trace_builder b;
  b.d.record_shapes = true;
  b.shapes(b.op("aten::mm", 0, 10), {{2, 3}, {3, 4}});
  b.shapes(b.op("aten::mm", 20, 40), {{5, 6}, {6, 7}});
  b.shapes(b.op("aten::mm", 50, 53), {{2, 3}, {3, 4}});
  b.shapes(b.op("aten::add", 60, 61), {{2}, {}});
  const event_list list = build_events(b.d);
  CHECK(list[1].input_shapes == std::vector<std::vector<std::int64_t>>{{5, 6}, {6, 7}});
  CHECK(list[3].input_shapes == std::vector<std::vector<std::int64_t>>{{2}, {}});

  const averages plain = key_averages(list);
  REQUIRE(plain.size() == 2);
  CHECK(plain[0].count == 3);
  CHECK(plain[0].input_shapes.empty());  // cleared unless grouping by shape

  const averages by_shape = key_averages(list, true);
  REQUIRE(by_shape.size() == 3);
  CHECK(keys(by_shape) == std::vector<std::string>{"aten::mm", "aten::mm", "aten::add"});
  CHECK(by_shape[0].count == 2);
  CHECK(by_shape[0].cpu_time_total_ns == 13 * us);
  CHECK(by_shape[0].input_shapes == std::vector<std::vector<std::int64_t>>{{2, 3}, {3, 4}});
  CHECK(by_shape[1].count == 1);
  CHECK(by_shape[1].input_shapes == std::vector<std::vector<std::int64_t>>{{5, 6}, {6, 7}});
  CHECK(by_shape[2].input_shapes == std::vector<std::vector<std::int64_t>>{{2}, {}});

  b.d.record_shapes = false;  // shapes are only reported with record_shapes
  const event_list without = build_events(b.d);
  CHECK(without[0].input_shapes.empty());
  CHECK(key_averages(without, true).size() == 2);
}

TEST_CASE("key_averages: grouping by stack") {
  auto ev = [](std::string key, std::vector<std::string> stack, std::int64_t ns) {
    function_event e;
    e.name = e.key = std::move(key);
    e.stack = std::move(stack);
    e.cpu_time_total_ns = e.self_cpu_time_total_ns = ns;
    return e;
  };
  const event_list list({ev("aten::mm", {"a.py(1): f", "a.py(9): main"}, 10),
                         ev("aten::mm", {"a.py(2): g", "a.py(9): main"}, 20),
                         ev("aten::mm", {"a.py(1): f", "a.py(8): other"}, 30)});
  const averages no_stack = key_averages(list);
  REQUIRE(no_stack.size() == 1);
  CHECK(no_stack[0].stack.empty());
  const averages one = key_averages(list, false, 1);
  REQUIRE(one.size() == 2);
  CHECK(one[0].count == 2);
  CHECK(one[0].cpu_time_total_ns == 40);
  CHECK(one[0].stack == std::vector<std::string>{"a.py(1): f"});
  CHECK(one[1].stack == std::vector<std::string>{"a.py(2): g"});
  const averages two = key_averages(list, false, 2);
  CHECK(two.size() == 3);
  CHECK(two[2].stack == std::vector<std::string>{"a.py(1): f", "a.py(8): other"});
}

TEST_CASE("key_averages: memory attribution") {
  trace_builder b;
  b.d.profile_memory = true;
  b.op("parent", 0, 100);
  b.op("child", 10, 30);
  b.op("later", 200, 300, 2);
  b.memory(0, 1000);                            // at parent's start: inclusive
  b.memory(15 * us, 4096, 1, device_type::cuda);
  b.memory(30 * us, 500, 9);                    // at child's end, from another thread
  b.memory(100 * us, -3000);                    // at parent's end: inclusive, a free
  b.memory(150 * us, 64, 3);                    // in no event: stand-alone
  b.memory(160 * us, -32, 3, device_type::cuda);
  b.memory(250 * us, 7, 5);                     // inside `later` (thread 2) from thread 5
  const event_list list = build_events(b.d);
  CHECK(list.profile_memory());
  CHECK(names(list) == std::vector<std::string>{"parent", "child", "[memory]", "[memory]", "later"});

  const auto& parent = get(list, "parent");
  CHECK(parent.cpu_memory_usage == -1500);
  CHECK(parent.self_cpu_memory_usage == -2000);
  CHECK(parent.device_memory_usage == 4096);
  CHECK(parent.self_device_memory_usage == 0);
  const auto& child = get(list, "child");
  CHECK(child.cpu_memory_usage == 500);
  CHECK(child.self_cpu_memory_usage == 500);
  CHECK(child.device_memory_usage == 4096);
  CHECK(child.self_device_memory_usage == 4096);
  CHECK(get(list, "later").cpu_memory_usage == 7);

  const auto& m0 = get(list, "[memory]");
  CHECK(m0.key == "[memory]");
  CHECK(m0.start_ns == 150 * us);
  CHECK(m0.end_ns == 150 * us);
  CHECK(m0.thread == 3);
  CHECK(m0.cpu_memory_usage == 64);
  CHECK(m0.self_cpu_memory_usage == 64);
  CHECK(m0.cpu_time_total_ns == 0);
  CHECK(m0.cpu_parent == -1);
  CHECK(m0.id == 4);  // after the largest External id
  const auto& m1 = get(list, "[memory]", 1);
  CHECK(m1.device_memory_usage == -32);
  CHECK(m1.self_device_memory_usage == -32);
  CHECK(m1.cpu_memory_usage == 0);

  const averages avg = key_averages(list);
  const event_avg* mem = avg.find("[memory]");
  REQUIRE(mem != nullptr);
  CHECK(mem->count == 2);
  CHECK(mem->cpu_memory_usage == 64);
  CHECK(mem->device_memory_usage == -32);
  CHECK(avg.find("parent")->self_cpu_memory_usage == -2000);

  SUBCASE("negative self memory: a block frees what its children allocated") {
    trace_builder c;
    c.annotation("my_block", 0, 100);
    c.op("aten::mm", 10, 20);
    c.op("aten::mm", 30, 40);
    c.memory(15 * us, 65536);
    c.memory(35 * us, 65536);
    c.memory(90 * us, -66560);
    const averages a = key_averages(build_events(c.d));
    CHECK(a.find("my_block")->cpu_memory_usage == 64512);
    CHECK(a.find("my_block")->self_cpu_memory_usage == -66560);
    CHECK(a.find("aten::mm")->cpu_memory_usage == 131072);
    CHECK(a.find("aten::mm")->self_cpu_memory_usage == 131072);
  }
}

TEST_CASE("key_averages: kernels are attributed to their op by External id") {
  trace_builder b;
  b.d.cuda_enabled = true;
  b.annotation("my_block", 0, 100);  // id 1
  b.op("aten::mm", 10, 50);          // id 2
  b.op("aten::relu", 60, 70);        // id 3
  b.runtime("cudaLaunchKernel", 20, 30, 2);
  b.runtime("cudaLaunchKernel", 62, 65, 3);
  b.kernel("gemm_kernel", 40, 70, 2);
  b.kernel("relu_kernel", 80, 84, 3);
  b.kernel("relu_kernel", 85, 87, 3);
  b.kernel("Memcpy HtoD (Pageable -> Device)", 95, 97, 0, gpu_kind::memcpy);  // no op
  const event_list list = build_events(b.d);
  CHECK(names(list) == std::vector<std::string>{"my_block", "aten::mm", "cudaLaunchKernel", "gemm_kernel",
                                                "aten::relu", "cudaLaunchKernel", "relu_kernel", "relu_kernel",
                                                "Memcpy HtoD (Pageable -> Device)"});
  const auto& mm = get(list, "aten::mm");
  CHECK(mm.self_device_time_total_ns == 30 * us);
  CHECK(mm.device_time_total_ns == 30 * us);
  CHECK(mm.self_cpu_time_total_ns == 30 * us);  // 40 - the 10 us launch
  const auto& launch = get(list, "cudaLaunchKernel");
  CHECK(launch.cpu_parent == index_of(list, "aten::mm"));
  CHECK(launch.self_device_time_total_ns == 0);
  CHECK(launch.device_time_total_ns == 0);
  CHECK_FALSE(launch.is_user_annotation);
  CHECK(get(list, "aten::relu").self_device_time_total_ns == 6 * us);
  const auto& block = get(list, "my_block");
  CHECK(block.device_time_total_ns == 36 * us);
  CHECK(block.self_device_time_total_ns == 0);
  CHECK(block.self_cpu_time_total_ns == 50 * us);

  const auto& gemm = get(list, "gemm_kernel");
  CHECK(gemm.on_device);
  CHECK(gemm.id == 2);
  CHECK(gemm.start_ns == 40 * us);
  CHECK(gemm.cpu_time_total_ns == 0);
  CHECK(gemm.self_cpu_time_total_ns == 0);
  CHECK(gemm.device_time_total_ns == 30 * us);
  CHECK(gemm.self_device_time_total_ns == 30 * us);
  CHECK(gemm.cpu_parent == -1);

  const averages avg = key_averages(list);
  CHECK(keys(avg) == std::vector<std::string>{"my_block", "aten::mm", "cudaLaunchKernel", "gemm_kernel",
                                              "aten::relu", "relu_kernel", "Memcpy HtoD (Pageable -> Device)"});
  const event_avg* relu = avg.find("relu_kernel");
  CHECK(relu->on_device);
  CHECK(relu->count == 2);
  CHECK(relu->self_device_time_total_ns == 6 * us);
  CHECK(relu->device_time_avg_ns() == doctest::Approx(3.0 * us));
  CHECK(avg.find("cudaLaunchKernel")->count == 2);
  CHECK(avg.find("cudaLaunchKernel")->cpu_time_total_ns == 13 * us);
  CHECK(avg.find("Memcpy HtoD (Pageable -> Device)")->self_device_time_total_ns == 2 * us);
}

TEST_CASE("key_averages: async events") {
  trace_builder b;
  b.d.cuda_enabled = true;
  b.op("outer", 0, 100);
  b.annotation("async_range", 10, 60).end_tid = 2;  // ended on another thread
  const std::int64_t async_id = b.d.events.back().external_id;
  b.op("inside", 20, 30);
  b.kernel("k", 40, 45, async_id);
  b.memory(50 * us, 128);
  const event_list list = build_events(b.d);
  const auto& async_ev = get(list, "async_range");
  CHECK(async_ev.is_async);
  CHECK(async_ev.cpu_time_total_ns == 50 * us);
  CHECK(async_ev.self_cpu_time_total_ns == 0);
  CHECK(async_ev.device_time_total_ns == 0);  // no kernels for async events
  CHECK(async_ev.self_device_time_total_ns == 0);
  CHECK(async_ev.cpu_parent == -1);           // not part of the tree
  CHECK(async_ev.cpu_children.empty());
  CHECK(async_ev.cpu_memory_usage == 128);   // memory still counts
  CHECK(async_ev.self_cpu_memory_usage == 128);
  CHECK(get(list, "inside").cpu_parent == index_of(list, "outer"));
  CHECK(get(list, "outer").self_cpu_time_total_ns == 90 * us);
  CHECK(get(list, "outer").cpu_children == std::vector<std::int32_t>{index_of(list, "inside")});
  CHECK(get(list, "outer").cpu_memory_usage == 128);
  const averages avg = key_averages(list);
  CHECK(avg.find("async_range")->is_async);
  CHECK_FALSE(avg.find("outer")->is_async);
}

TEST_CASE("key_averages: filtered names are absent") {
  trace_builder b;
  b.d.profile_memory = true;
  b.op("aten::zeros", 0, 100);
  for (const char* n : {"[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
                        "profiler::_record_function_enter_new", "profiler::_record_function_exit", "aten::is_leaf",
                        "aten::output_nr", "aten::_version"})
    b.op(n, 10, 20);
  b.op("aten::is_leaf", 200, 300);
  b.op("aten::fill_", 30, 40);
  b.memory(250 * us, 16);  // only inside a filtered op: stand-alone
  const event_list list = build_events(b.d);
  CHECK(names(list) == std::vector<std::string>{"aten::zeros", "aten::fill_", "[memory]"});
  CHECK(get(list, "aten::zeros").self_cpu_time_total_ns == 90 * us);
  CHECK(get(list, "[memory]").cpu_memory_usage == 16);
  CHECK(keys(key_averages(list)) == std::vector<std::string>{"aten::zeros", "aten::fill_", "[memory]"});
}

TEST_CASE("key_averages: flops and flags carried from the trace") {
  trace_builder b;
  b.d.with_flops = true;
  b.op("aten::mm", 0, 10).flops = 4194304;
  b.op("aten::mm", 20, 30).flops = 100;
  const event_list list = build_events(b.d);
  CHECK(list.with_flops());
  CHECK_FALSE(list.profile_memory());
  CHECK(list[0].flops == 4194304);
  const averages avg = key_averages(list);
  CHECK(avg[0].flops == 4194304 + 100);
  CHECK(build_events(trace_data{}).size() == 0);
  CHECK(key_averages(event_list{}).size() == 0);
}
