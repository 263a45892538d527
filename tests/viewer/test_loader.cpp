// SPDX-License-Identifier: BSD-3-Clause
// Loader tests: every real trace (tests/data/real) against counts computed independently with
// nlohmann, a trace from our own writer, and bad inputs (each must give a clear error or load with
// counted warnings, never crash).
#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/loader.hpp"
#include "analysis/loader_stats.hpp"
#include "analysis/op_tree.hpp"
#include "real_trace_files.hpp"
#include "kinetoscope/trace_data.hpp"
#include "kinetoscope/writer/chrome_trace.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace kinetoscope::analysis;

using kinetoscope_test::gunzip_file;
using kinetoscope_test::real_dir;
using kinetoscope_test::real_traces;

std::string gzip_bytes(const std::string& text) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, static_cast<uLong>(text.size())) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

/// The plugin's category table (docs/plugin-rules.md#event-categories), written out again for the
/// test.
event_type expected_type(const json& ev, bool legacy) {
  if (!ev.contains("cat")) return legacy ? event_type::op : event_type::other;
  std::string c = ev["cat"].get<std::string>();
  std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (c == "trace") return event_type::trace;
  if (c == "cpu_op" || c == "operator") return event_type::op;
  if (c == "user_annotation" || c == "gpu_user_annotation") return event_type::user_annotation;
  if (c == "python") return event_type::python;
  if (c == "python_function") {
    const bool module = ev.contains("args") && ev["args"].contains("Python module id");
    return module ? event_type::module : event_type::python_function;
  }
  if (c == "runtime" || c == "cuda_runtime" || c == "mtia_runtime" || c == "glow_runtime" || c == "xpu_runtime" ||
      c == "privateuse1_runtime") {
    return event_type::runtime;
  }
  if (c == "cuda_driver") return event_type::driver;
  if (c == "kernel") return event_type::kernel;
  if (c == "memcpy" || c == "gpu_memcpy") return event_type::memcpy;
  if (c == "memset" || c == "gpu_memset") return event_type::memset;
  return event_type::other;
}

struct expected {
  std::vector<std::pair<double, std::string>> events;  // (ts, name), stable-sorted by ts
  std::map<event_type, std::size_t> per_type;
  std::map<std::string, std::uint64_t> by_category;
  std::size_t memory = 0, fwdbwd = 0;
  std::vector<std::string> device_names;
  std::int64_t rank = -1;
  bool legacy = false;
};

expected compute_expected(const std::string& text) {
  const json doc = json::parse(text);
  expected x;
  x.legacy = doc.is_array();
  const json& events = x.legacy ? doc : doc.at("traceEvents");
  for (const json& ev : events) {
    const std::string ph = ev.value("ph", "");
    ++x.by_category[ev.contains("cat") ? ev["cat"].get<std::string>() : "<" + ph + ">"];
    const std::string name = ev.value("name", "");
    if (ph == "X") {
      const event_type t = expected_type(ev, x.legacy);
      ++x.per_type[t];
      x.events.emplace_back(ev.value("ts", 0.0), name);
    } else if (ph == "i" && name == "[memory]") {
      ++x.memory;
      ++x.per_type[event_type::memory];
      x.events.emplace_back(ev.value("ts", 0.0), name);
    } else if ((ph == "s" || ph == "f") && ev.value("cat", "") == "fwdbwd") {
      ++x.fwdbwd;
    }
  }
  std::stable_sort(x.events.begin(), x.events.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (!x.legacy && doc.contains("deviceProperties")) {
    for (const json& d : doc["deviceProperties"]) x.device_names.push_back(d.value("name", ""));
  }
  if (!x.legacy && doc.contains("distributedInfo")) x.rank = doc["distributedInfo"].value("rank", -1);
  return x;
}

void check_same_model(const trace_model& a, const trace_model& b) {
  REQUIRE(a.events.size() == b.events.size());
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    const event& x = a.events[i];
    const event& y = b.events[i];
    const bool same = x.ts == y.ts && x.dur == y.dur && x.pid == y.pid && x.tid == y.tid &&
                      x.external_id == y.external_id && x.correlation == y.correlation &&
                      a.str(x.name) == b.str(y.name) && x.type == y.type && x.extra == y.extra &&
                      x.pid_is_string == y.pid_is_string && x.tid_is_string == y.tid_is_string;
    mismatches += same ? 0 : 1;
  }
  CHECK(mismatches == 0);
  REQUIRE(a.ops.size() == b.ops.size());
  std::size_t op_mismatches = 0;
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    const op_args& x = a.ops[i];
    const op_args& y = b.ops[i];
    const bool same = a.str(x.input_dims) == b.str(y.input_dims) && a.str(x.input_types) == b.str(y.input_types) &&
                      a.str(x.call_stack) == b.str(y.call_stack) && x.sequence_nr == y.sequence_nr &&
                      x.fwd_thread_id == y.fwd_thread_id && x.collective == y.collective;
    op_mismatches += same ? 0 : 1;
  }
  CHECK(op_mismatches == 0);
  REQUIRE(a.collectives.size() == b.collectives.size());
  std::size_t coll_mismatches = 0;
  for (std::size_t i = 0; i < a.collectives.size(); ++i) {
    const collective_args& x = a.collectives[i];
    const collective_args& y = b.collectives[i];
    const bool same = a.str(x.name) == b.str(y.name) && a.str(x.dtype) == b.str(y.dtype) &&
                      a.str(x.group_name) == b.str(y.group_name) && a.str(x.group_desc) == b.str(y.group_desc) &&
                      a.str(x.group_ranks) == b.str(y.group_ranks) && x.group_size == y.group_size &&
                      x.in_nelems == y.in_nelems && x.out_nelems == y.out_nelems && x.seq == y.seq;
    coll_mismatches += same ? 0 : 1;
  }
  CHECK(coll_mismatches == 0);
  REQUIRE(a.kernels.size() == b.kernels.size());
  for (std::size_t i = 0; i < a.kernels.size(); ++i) CHECK(a.kernels[i].collective == b.kernels[i].collective);
  CHECK(a.memory.size() == b.memory.size());
  CHECK(a.python.size() == b.python.size());
  CHECK(a.fwdbwd.size() == b.fwdbwd.size());
  CHECK(a.strings.size() == b.strings.size());
  CHECK(a.diagnostics.events_by_category == b.diagnostics.events_by_category);
  CHECK(a.diagnostics.warnings == b.diagnostics.warnings);
}

trace_model load_ok(std::string_view text, const load_options& o = {}) {
  load_result r = load_trace_buffer(text, "test.json", o);
  if (!r.ok()) FAIL(r.error->message());
  return std::move(*r.model);
}

load_error load_fails(std::string_view text, const load_options& o = {}) {
  load_result r = load_trace_buffer(text, "bad.json", o);
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.error.has_value());
  CHECK_FALSE(r.error->reason.empty());
  return *r.error;
}

std::uint64_t warnings(const trace_model& m, const std::string& kind) {
  auto it = m.diagnostics.warnings.find(kind);
  return it == m.diagnostics.warnings.end() ? 0 : it->second;
}

const event* find_event(const trace_model& m, std::string_view name) {
  for (const event& e : m.events) {
    if (m.str(e.name) == name) return &e;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("loader: every real trace loads with independently computed counts") {
  const auto files = real_traces();
  REQUIRE(files.size() >= 12);
  for (const std::string& path : files) {
    CAPTURE(path);
    const std::string text = kinetoscope_test::read_trace_text(path);
    const expected x = compute_expected(text);
    load_result r = load_trace(path);
    if (!r.ok()) FAIL(r.error->message());
    const trace_model& m = *r.model;
    CHECK(m.legacy_array == x.legacy);
    CHECK(m.diagnostics.warnings.empty());
    CHECK(m.diagnostics.events_by_category == x.by_category);
    CHECK(m.memory.size() == x.memory);
    CHECK(m.fwdbwd.size() == x.fwdbwd);
    std::map<event_type, std::size_t> per_type;
    for (const event& e : m.events) ++per_type[e.type];
    CHECK(per_type == x.per_type);
    // Op/annotation/python events with some op arg have one op_args entry each; events without
    // any have none (extra = no_index) instead of an entry of defaults.
    std::size_t with_args = 0, defaults = 0;
    std::vector<char> used(m.ops.size(), 0);
    for (const event& e : m.events) {
      if (e.type != event_type::op && e.type != event_type::user_annotation && e.type != event_type::python) continue;
      if (e.extra == no_index) continue;
      ++with_args;
      REQUIRE(e.extra < m.ops.size());
      used[e.extra] = 1;
      const op_args& a = m.ops[e.extra];
      if (a.input_dims == 0 && a.input_types == 0 && a.call_stack == 0 && a.sequence_nr == -1 && a.fwd_thread_id == -1 &&
          a.collective == no_index)
        ++defaults;
    }
    CHECK(with_args == m.ops.size());
    CHECK(std::count(used.begin(), used.end(), 1) == static_cast<std::ptrdiff_t>(m.ops.size()));
    CHECK(defaults == 0);
    CHECK(m.ops.size() <= per_type[event_type::op] + per_type[event_type::user_annotation] + per_type[event_type::python]);
    CHECK(m.kernels.size() == per_type[event_type::kernel]);
    // Stable sort by ts: the same (ts, name) sequence as a stable sort of the file's events.
    REQUIRE(m.events.size() == x.events.size());
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < m.events.size(); ++i) {
      if (m.events[i].ts != x.events[i].first || m.str(m.events[i].name) != x.events[i].second) ++mismatches;
    }
    CHECK(mismatches == 0);
    REQUIRE(m.devices.size() == x.device_names.size());
    for (std::size_t i = 0; i < m.devices.size(); ++i) CHECK(m.devices[i].name == x.device_names[i]);
    CHECK((m.distributed ? m.distributed->rank : -1) == x.rank);
    // The windowed parser (tiny windows: many boundaries) and the whole-document parser agree.
    load_result whole = load_trace(path, {.window_bytes = 0});
    load_result tiny = load_trace(path, {.window_bytes = 700});
    REQUIRE(whole.ok());
    REQUIRE(tiny.ok());
    check_same_model(m, *whole.model);
    check_same_model(m, *tiny.model);
  }
}

TEST_CASE("loader: resnet50_v100 (era A: string tids, stream N, lower-case external id)") {
  const std::string path = real_dir() + "/traces/resnet50_v100/worker0.1623143089861.pt.trace.json.gz";
  load_result r = load_trace(path);
  REQUIRE(r.ok());
  const trace_model& m = *r.model;
  CHECK(m.schema_version == 1);
  REQUIRE(m.devices.size() == 4);
  CHECK(m.devices[0].name == "Tesla V100-DGXS-32GB");
  CHECK(m.devices[0].total_global_mem == 34084028416);
  CHECK(m.devices[0].compute_major == 7);
  CHECK(m.devices[0].num_sms == 80);
  CHECK_FALSE(m.distributed.has_value());
  const event* zeros = find_event(m, "aten::zeros");
  REQUIRE(zeros != nullptr);
  CHECK(zeros->type == event_type::op);
  CHECK(zeros->tid == 25738);
  CHECK_FALSE(zeros->tid_is_string);
  CHECK(zeros->pid == 25738);
  CHECK(zeros->external_id == 1);
  REQUIRE(zeros->extra != no_index);
  CHECK(m.str(m.ops[zeros->extra].input_dims) == "[[],[],[],[],[]]");
  CHECK(m.str(m.ops[zeros->extra].input_types) == R"J(["GenericList","Int","","","Bool"])J");
  CHECK(m.str(m.ops[zeros->extra].call_stack).starts_with("/home/yangu/anaconda3/"));
  std::size_t kernels = 0, on_stream7 = 0, with_ext = 0;
  for (const event& e : m.events) {
    if (e.type != event_type::kernel) continue;
    ++kernels;
    on_stream7 += e.tid == 7 ? 1 : 0;
    with_ext += e.external_id != 0 ? 1 : 0;
    CHECK_FALSE(e.tid_is_string);
    CHECK(m.kernels[e.extra].device == e.pid);
    CHECK(m.kernels[e.extra].has_grid);
  }
  CHECK(kernels == 8772);
  CHECK(on_stream7 == kernels);
  CHECK(with_ext > 0);
  const event* span = find_event(m, "PyTorch Profiler (0)");
  REQUIRE(span != nullptr);
  CHECK(span->type == event_type::trace);
  CHECK(span->pid_is_string);
  CHECK(m.id_text(span->pid, span->pid_is_string) == "Traces");
  CHECK(m.id_text(span->tid, span->tid_is_string) == "PyTorch Profiler");
  // [memory] instants (era A: no cat, Bytes only)
  REQUIRE(!m.memory.empty());
  CHECK(m.memory[0].device_type >= 0);
  CHECK(std::isnan(m.memory[0].total_allocated));
  CHECK_FALSE(m.record_window_end_dropped);
}

TEST_CASE("loader: legacy bare array, two_ranks, amd_mi250, triton") {
  const std::string t = real_dir() + "/traces/";
  // Recorded for this project (tests/data/real/README.md): the repository's own copy.
  const char* data = std::getenv("KINETOSCOPE_TEST_DATA");
  REQUIRE(data != nullptr);
  load_result legacy = load_trace(std::string(data) + "/real/traces/legacy_torch113_cpu/cpu0.1795343028113.pt.trace.json.gz");
  REQUIRE(legacy.ok());
  CHECK(legacy.model->legacy_array);
  REQUIRE(!legacy.model->events.empty());
  for (const event& e : legacy.model->events) {
    CHECK(e.type == event_type::op);
    CHECK(e.pid_is_string);
  }
  CHECK(legacy.model->id_text(legacy.model->events[0].pid, true) == "CPU functions");

  for (int rank = 0; rank < 2; ++rank) {
    load_result r = load_trace(t + "two_ranks/rank" + std::to_string(rank) + ".pt.trace.json.gz");
    REQUIRE(r.ok());
    REQUIRE(r.model->distributed.has_value());
    CHECK(r.model->distributed->rank == rank);
    CHECK(r.model->distributed->backend == "nccl");
    CHECK(r.model->distributed->world_size == 128);
  }

  load_result amd = load_trace(t + "amd_mi250/mi250_minitoy_train.pt.trace.json.gz");
  REQUIRE(amd.ok());
  REQUIRE(amd.model->devices.size() == 4);
  CHECK(amd.model->devices[0].name == "AMD Radeon Graphics");
  for (const kernel_args& k : amd.model->kernels) CHECK(k.stream == 0);  // ROCm writes "0x0"

  load_result triton = load_trace(t + "triton/triton_example.pt.trace.json.gz");
  REQUIRE(triton.ok());
  std::size_t drivers = 0;
  for (const event& e : triton.model->events) drivers += e.type == event_type::driver ? 1 : 0;
  CHECK(drivers == 1);
  const event* launch = find_event(*triton.model, "cuLaunchKernel");
  REQUIRE(launch != nullptr);
  CHECK(launch->correlation != 0);
}

TEST_CASE("loader: a trace written by our own writer") {
  using namespace kinetoscope;
  trace_data d;
  d.pid = 4242;
  d.process_name = "python3";
  d.strings = {""};
  d.start_ns = base_time_ns() + 1'000'000'000;
  d.end_ns = d.start_ns + 50'000'000;
  d.threads = {{4242, "python3"}, {4250, "pt_autograd_0"}};
  d.record_shapes = true;
  d.profile_memory = true;
  d.cuda_enabled = true;
  d.distributed = distributed_info{"gloo", 3, 8};
  device_properties dev;
  dev.name = "NVIDIA A100-SXM4-80GB";
  dev.total_global_mem = 84974239744;
  dev.compute_major = 8;
  dev.num_sms = 108;
  d.devices.push_back(dev);
  const std::uint32_t step = d.intern("ProfilerStep#7");
  const std::uint32_t mm = d.intern("aten::mm");
  const std::uint32_t launch = d.intern("cudaLaunchKernel");
  const std::uint32_t kern = d.intern("ampere_sgemm_32x32_sliced1x4_tn");
  const std::int64_t t0 = d.start_ns + 1000;
  d.events.push_back({t0, t0 + 40'000'000, 4242, 4242, step, cpu_category::user_annotation, 1, -1, 0, 0, 0, 0});
  op_input a{{32, 128}, {128, 1}, "float", "", {}};
  op_input b{{128, 64}, {64, 1}, "float", "", {}};
  d.inputs = {a, b};
  d.events.push_back({t0 + 1000, t0 + 9000, 4242, 4242, mm, cpu_category::cpu_op, 2, 17, 0, 0, 2, 0});
  runtime_call rc;
  rc.start_ns = t0 + 2000;
  rc.end_ns = t0 + 5000;
  rc.tid = 4242;
  rc.name = launch;
  rc.cbid = 211;
  rc.correlation = 99;
  rc.external_id = 2;
  rc.flow = true;
  d.runtime.push_back(rc);
  gpu_activity k;
  k.start_ns = t0 + 6000;
  k.end_ns = t0 + 16000;
  k.name = kern;
  k.stream = 7;
  k.correlation = 99;
  k.external_id = 2;
  k.grid[0] = 4;
  k.grid[1] = k.grid[2] = 1;
  k.block[0] = 128;
  k.block[1] = k.block[2] = 1;
  k.blocks_per_sm = 0.037037;
  k.occupancy_pct = 12;
  d.gpu.push_back(k);
  memory_event me;
  me.time_ns = t0 + 1500;
  me.tid = 4242;
  me.addr = 139926520725504ull;
  me.bytes = 32768;
  me.total_allocated = 32768;
  me.total_reserved = 2097152;
  me.device = device_type::cuda;
  me.device_id = 0;
  d.memory.push_back(me);

  const std::string text = chrome_trace_string(d);
  const expected x = compute_expected(text);
  const trace_model m = load_ok(text);
  CHECK(m.diagnostics.warnings.empty());
  CHECK(m.diagnostics.events_by_category == x.by_category);
  CHECK(m.base_time_ns == base_time_ns());
  REQUIRE(m.distributed.has_value());
  CHECK(m.distributed->backend == "gloo");
  CHECK(m.distributed->rank == 3);
  CHECK(m.distributed->world_size == 8);
  REQUIRE(!m.devices.empty());
  CHECK(m.devices[0].name == "NVIDIA A100-SXM4-80GB");
  const event* s = find_event(m, "ProfilerStep#7");
  REQUIRE(s != nullptr);
  CHECK(s->type == event_type::user_annotation);
  CHECK(s->ts == doctest::Approx(1'000'001.0));
  const event* op = find_event(m, "aten::mm");
  REQUIRE(op != nullptr);
  CHECK(op->type == event_type::op);
  CHECK(op->external_id == 2);
  CHECK(op->dur == doctest::Approx(8.0));
  CHECK(m.str(m.ops[op->extra].input_dims) == "[[32,128],[128,64]]");
  CHECK(m.ops[op->extra].sequence_nr == 17);
  const event* rt = find_event(m, "cudaLaunchKernel");
  const event* kv = find_event(m, "ampere_sgemm_32x32_sliced1x4_tn");
  REQUIRE(rt != nullptr);
  REQUIRE(kv != nullptr);
  CHECK(rt->type == event_type::runtime);
  CHECK(kv->type == event_type::kernel);
  CHECK(rt->correlation == 99);
  CHECK(kv->correlation == 99);
  CHECK(kv->external_id == 2);
  CHECK(kv->tid == 7);
  const kernel_args& ka = m.kernels[kv->extra];
  CHECK(ka.grid[0] == 4);
  CHECK(ka.block[0] == 128);
  CHECK(ka.occupancy == doctest::Approx(12));
  REQUIRE(m.memory.size() == 1);
  CHECK(m.memory[0].device_type == 1);
  CHECK(m.memory[0].device_id == 0);
  CHECK(m.memory[0].addr == 139926520725504ull);
  CHECK(m.memory[0].bytes == 32768);
  CHECK(m.memory[0].total_reserved == doctest::Approx(2097152));
}

TEST_CASE("loader: truncated, corrupt and empty inputs give clear errors") {
  const std::string text =
      gunzip_file(real_dir() + "/traces/resnet50_v100/worker0.1623143089861.pt.trace.json.gz");
  SUBCASE("truncated JSON (half a real trace)") {
    const std::string half = text.substr(0, text.size() / 2);
    for (std::size_t window : {std::size_t{0}, std::size_t{4} << 20, std::size_t{10000}}) {
      CAPTURE(window);
      const load_error e = load_fails(half, {.window_bytes = window});
      CHECK(e.reason.find("truncated") != std::string::npos);
      CHECK(e.byte_offset == half.size());
      CHECK(e.message().find("bad.json: ") == 0);
    }
    CHECK(load_fails(half).event_index > 15000);  // windowed: events read before the cut
  }
  SUBCASE("truncated gzip") {
    const std::string gz = gzip_bytes(text);
    const load_error e = load_fails(std::string_view(gz).substr(0, gz.size() / 2));
    CHECK(e.reason.find("truncated gzip stream") != std::string::npos);
  }
  SUBCASE("broken gzip header") {
    const load_error e = load_fails(std::string("\x1f\x8b\x07\x00garbage-garbage-garbage", 27));
    CHECK(e.reason.find("corrupt gzip") != std::string::npos);
  }
  SUBCASE("corrupt gzip data") {
    std::string gz = gzip_bytes(text);
    for (std::size_t i = 100; i < 400; ++i) gz[i] = static_cast<char>(gz[i] ^ 0x5a);
    const load_error e = load_fails(gz);
    CHECK(e.reason.find("gzip") != std::string::npos);
  }
  SUBCASE("empty and whitespace-only") {
    CHECK(load_fails("").reason == "empty file");
    CHECK(load_fails(gzip_bytes("")).reason.find("empty") != std::string::npos);
    CHECK(load_fails("  \n\t ").reason.find("empty") != std::string::npos);
  }
  SUBCASE("not JSON") {
    CHECK_FALSE(load_fails("hello, world").reason.empty());
    CHECK_FALSE(load_fails("\x89PNG\r\n\x1a\n....").reason.empty());
    CHECK_FALSE(load_fails(R"J({"traceEvents": [{"ph": "X",, }]})J").reason.empty());
    CHECK_FALSE(load_fails(R"J({"traceEvents": []} trailing)J").reason.empty());
    CHECK(load_fails(R"J({"traceEvents": []} trailing)J", {.window_bytes = 0}).reason.find("JSON") != std::string::npos);
  }
  SUBCASE("wrong shapes") {
    CHECK(load_fails("42").reason.find("is a number") != std::string::npos);
    CHECK(load_fails(R"("text")").reason.find("is a string") != std::string::npos);
    CHECK(load_fails(R"J({"traceEvents": 5})J").reason.find("not an array") != std::string::npos);
    CHECK(load_fails(R"J({"traceEvents": {"a": 1}})J").reason.find("not an array") != std::string::npos);
    CHECK(load_fails(R"J({"schemaVersion": 1})J").reason.find("no \"traceEvents\"") != std::string::npos);
  }
  SUBCASE("missing file and directory") {
    load_result r = load_trace("/nonexistent/dir/x.pt.trace.json");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error->reason.find("cannot open") != std::string::npos);
    load_result d = load_trace(real_dir());
    REQUIRE_FALSE(d.ok());
    CHECK(d.error->reason.find("directory") != std::string::npos);
  }
  SUBCASE("syntax error in the middle reports its place") {
    std::string broken = text;
    const std::size_t at = broken.find("\"ph\": \"X\"", broken.size() / 2);
    REQUIRE(at != std::string::npos);
    broken[at + 4] = '@';  // "ph"@ "X"
    for (std::size_t window : {std::size_t{0}, std::size_t{4} << 20}) {
      const load_error e = load_fails(broken, {.window_bytes = window});
      CHECK(e.byte_offset > at - 200);
      CHECK(e.byte_offset < at + 200);
      CHECK(e.event_index > 0);
    }
  }
}

TEST_CASE("loader: both parse paths agree on trailing NULs, trailing text and truncation") {
  const std::string ev = R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1})J";
  const std::string evs = ev + ", " + ev + ", " + ev + ", " + ev;
  const std::string object = R"J({"traceEvents": [)J" + evs + "]}";
  const std::string legacy = "[" + evs + "]";
  const std::size_t windows[] = {0, std::size_t{4} << 20, 64};
  SUBCASE("NUL bytes after the value are ignored with one warning") {
    for (const std::string& text : {object + std::string(1, '\0'), object + std::string(3, '\0') + "\n",
                                    object + "\n" + std::string(1, '\0'), legacy + std::string(2, '\0')}) {
      for (std::size_t window : windows) {
        CAPTURE(window);
        const trace_model m = load_ok(text, {.window_bytes = window});
        CHECK(m.events.size() == 4);
        CHECK(warnings(m, "NUL bytes after the JSON value ignored") == 1);
        CHECK(m.diagnostics.messages.back() == "top level: NUL bytes after the JSON value ignored");
      }
    }
    for (std::size_t window : windows) {  // no NUL, no warning
      CHECK(load_ok(object + "\n", {.window_bytes = window}).diagnostics.warnings.empty());
    }
  }
  SUBCASE("text after the value is named as such, at its first byte") {
    const struct {
      std::string text;
      std::uint64_t offset;
    } cases[] = {{object + " trailing", object.size() + 1}, {object + "}", object.size()},
                 {legacy + " x", legacy.size() + 1}, {object + std::string(1, '\0') + "x", object.size() + 1}};
    for (const auto& c : cases) {
      for (std::size_t window : windows) {
        CAPTURE(c.text.substr(c.text.size() - 3));
        CAPTURE(window);
        const load_error e = load_fails(c.text, {.window_bytes = window});
        CHECK(e.reason == "unexpected text after the JSON value");
        CHECK(e.byte_offset == c.offset);
        CHECK(e.event_index == -1);
      }
    }
  }
  SUBCASE("truncation names the first event not read whole") {
    const std::string unclosed = "unexpected end of JSON: unclosed array or object (truncated file?)";
    const std::string in_string = "unexpected end of text inside a string (truncated file?)";
    const struct {
      std::string text;
      std::string reason;
      std::int64_t event;
    } cases[] = {{R"J({"traceEvents": [)J" + evs, unclosed, 4},
                 {R"J({"traceEvents": [)J" + evs + R"J(, {"ph": "X", "na)J", in_string, 4},
                 {R"J({"traceEvents": [)J" + ev + R"J(, {"ph": "X", "args": {"a": [1, )J", unclosed, 1},
                 {R"J({"traceEvents": [)J" + evs + R"J(], "x": )J", unclosed, -1},
                 {R"J({"traceEvents": [)J", unclosed, 0},
                 {"[" + evs + R"J(, {"ph")J", unclosed, 4}};
    for (const auto& c : cases) {
      for (std::size_t window : windows) {
        CAPTURE(c.text);
        CAPTURE(window);
        const load_error e = load_fails(c.text, {.window_bytes = window});
        CHECK(e.reason == c.reason);
        CHECK(e.byte_offset == c.text.size());
        CHECK(e.event_index == c.event);
      }
    }
  }
}

TEST_CASE("loader: malformed JSON gets one verdict on every parse path") {
  // The whole text, 4 MiB windows, 64-byte windows, 64-byte windows split between two readers:
  // an error with the same reason and byte offset, or the same model (docs/trace-format.md,
  // "File structure").
  const load_options paths[] = {{.window_bytes = 0}, {.window_bytes = std::size_t{4} << 20},
                                {.window_bytes = 64, .split_min_bytes = 0}, {.window_bytes = 64, .split_min_bytes = 1}};
  const std::string ev = R"J({"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1})J";
  const std::string evs = ev + ", " + ev + ", " + ev;
  SUBCASE("errors") {
    const struct {
      std::string text;
      std::string reason;
    } cases[] = {
        // The fuzz finding (tests/fuzz/corpus/loader/dup_trace_events_missing_value.json).
        {R"J({"traceEvents":[],"traceEvents":}})J", ""},
        {R"J({"traceEvents": [)J" + evs + R"J(], "traceEvents": [)J" + ev + "]}",
         "the top-level key \"traceEvents\" appears twice"},
        {R"J({"traceEvents": [)J" + evs + R"J(], "x": })J", ""},                   // a missing value
        {R"J({"x": , "traceEvents": [)J" + evs + "]}", ""},                          // before the events
        {R"J({"traceEvents": [)J" + ev + R"J(, {"ph": "X", "name": })J" + "]}", ""},  // inside an event
        {R"J({"traceEvents": [)J" + evs + "]]}", ""},                                // unbalanced
        {R"J({"traceEvents": [)J" + evs + "]}}", "unexpected text after the JSON value"},
        {R"J({"traceEvents": [)J" + evs + "]} []", "unexpected text after the JSON value"},
    };
    for (const auto& c : cases) {
      CAPTURE(c.text);
      const load_error whole = load_fails(c.text, paths[0]);
      if (!c.reason.empty()) CHECK(whole.reason == c.reason);
      for (const load_options& o : paths) {
        CAPTURE(o.window_bytes);
        CAPTURE(o.split_min_bytes);
        const load_error e = load_fails(c.text, o);
        CHECK(e.reason == whole.reason);
        CHECK(e.byte_offset == whole.byte_offset);
      }
    }
  }
  SUBCASE("another top-level key twice: the last value wins, on every path") {
    const std::string text = R"J({"deviceProperties": [{"id": 0, "name": "first"}], "traceEvents": [)J" + evs +
                             R"J(], "deviceProperties": [{"id": 0, "name": "second"}, {"id": 1, "name": "x"}]})J";
    for (const load_options& o : paths) {
      CAPTURE(o.window_bytes);
      const trace_model m = load_ok(text, o);
      CHECK(m.events.size() == 3);
      REQUIRE(m.devices.size() == 2);
      CHECK(m.devices[0].name == "second");
    }
  }
}

TEST_CASE("loader: texts over max_text_bytes are refused, gzip counted while it inflates") {
  const std::string small = R"J({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]})J";
  SUBCASE("plain text: the limit is inclusive") {
    for (std::size_t window : {std::size_t{0}, std::size_t{4} << 20}) {
      CHECK(load_ok(small, {.window_bytes = window, .max_text_bytes = small.size()}).events.size() == 1);
      const load_error e = load_fails(small, {.window_bytes = window, .max_text_bytes = small.size() - 1});
      CHECK(e.reason == "trace text larger than the limit of " + std::to_string(small.size() - 1) +
                            " bytes (--max_file_size)");
      CHECK(e.message() == "bad.json: " + e.reason);
    }
  }
  SUBCASE("a gzip bomb: 40 MB of text from a small file") {
    // Valid JSON, so the streamed path would take it whole; the limit stops it at 1 MiB.
    std::string text = R"J({"traceEvents": [)J" + std::string(std::size_t{40} << 20, ' ') + small.substr(17);
    const std::string gz = gzip_bytes(text);
    REQUIRE(gz.size() < text.size() / 500);
    const std::string expected = "trace text larger than the limit of 1048576 bytes (--max_file_size)";
    for (std::size_t window : {std::size_t{0}, std::size_t{4} << 20}) {
      CAPTURE(window);
      CHECK(load_fails(gz, {.window_bytes = window, .max_text_bytes = std::uint64_t{1} << 20}).reason == expected);
      const trace_model m = load_ok(gz, {.window_bytes = window});  // the default (16 GiB) takes it
      CHECK(m.events.size() == 1);
      CHECK(m.diagnostics.text_bytes == text.size());  // inflated bytes, whichever path parsed them
    }
    const fs::path file = fs::temp_directory_path() / ("ks_bomb_" + std::to_string(::getpid()) + ".pt.trace.json.gz");
    std::ofstream(file, std::ios::binary) << gz;
    for (std::size_t window : {std::size_t{0}, std::size_t{4} << 20}) {
      const load_result r = load_trace(file.string(), {.window_bytes = window, .max_text_bytes = std::uint64_t{1} << 20});
      REQUIRE_FALSE(r.ok());
      CHECK(r.error->reason == expected);
    }
    const fs::path plain = fs::temp_directory_path() / ("ks_big_" + std::to_string(::getpid()) + ".pt.trace.json");
    std::ofstream(plain, std::ios::binary) << text;
    for (std::size_t window : {std::size_t{0}, std::size_t{4} << 20}) {
      const load_result r = load_trace(plain.string(), {.window_bytes = window, .max_text_bytes = std::uint64_t{1} << 20});
      REQUIRE_FALSE(r.ok());
      CHECK(r.error->reason == expected);
      const load_result whole = load_trace(plain.string(), {.window_bytes = window});
      REQUIRE(whole.ok());
      CHECK(whole.model->diagnostics.text_bytes == text.size());
    }
    fs::remove(file);
    fs::remove(plain);
  }
  SUBCASE("sizes as the flags take them") {
    CHECK(parse_byte_size("1000") == 1000u);
    CHECK(parse_byte_size("16G") == std::uint64_t{16} << 30);
    CHECK(parse_byte_size("16g") == std::uint64_t{16} << 30);
    CHECK(parse_byte_size("512MiB") == std::uint64_t{512} << 20);
    CHECK(parse_byte_size("2KB") == 2048u);
    CHECK(parse_byte_size("3T") == std::uint64_t{3} << 40);
    CHECK(parse_byte_size("7B") == 7u);
    CHECK(parse_byte_size("8388608T") == std::uint64_t{1} << 63);
    CHECK_FALSE(parse_byte_size("8388609T").has_value());
    CHECK_FALSE(parse_byte_size("").has_value());
    CHECK_FALSE(parse_byte_size("G").has_value());
    CHECK_FALSE(parse_byte_size("-1").has_value());
    CHECK_FALSE(parse_byte_size("1.5G").has_value());
    CHECK_FALSE(parse_byte_size("12 G").has_value());
    CHECK_FALSE(parse_byte_size("1P").has_value());
  }
}

TEST_CASE("loader: bad events load with warnings counted") {
  SUBCASE("wrong types, missing name, non-object event") {
    const trace_model m = load_ok(R"J({"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": "123.5", "dur": 4},
      {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": {"x": 1}, "ts": 10, "dur": 2},
      {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 11, "dur": 1},
      {"ph": "X", "cat": "cpu_op", "name": 17, "pid": 1, "tid": 1, "ts": 12, "dur": 1},
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 13, "dur": 1, "args": {"grid": "nope", "device": "0"}},
      5, "str", null,
      {"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 1, "ts": "soon", "dur": 1}
    ]})J");
    CHECK(m.events.size() == 6);
    const event* a = find_event(m, "a");
    REQUIRE(a != nullptr);
    CHECK(a->ts == 123.5);
    CHECK(warnings(m, "number written as a string") == 2);  // ts "123.5", kernel device "0"
    CHECK(warnings(m, "wrong type") == 4);                   // tid object, name 17, grid, ts "soon"
    CHECK(warnings(m, "missing name") == 2);
    CHECK(warnings(m, "event is not an object") == 3);
    CHECK(m.diagnostics.events_by_category.at("<not an object>") == 3);
    CHECK(m.diagnostics.messages.size() <= 20);
    CHECK(m.diagnostics.messages[0].find("event #") == 0);
  }
  SUBCASE("huge numbers") {
    const trace_model m = load_ok(R"J({"traceEvents": [
      {"ph": "X", "cat": "cuda_runtime", "name": "r", "pid": 1, "tid": 1, "ts": 1e15, "dur": 1e3,
       "args": {"External id": 18446744073709551615, "correlation": 9223372036854775808}},
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 1,
       "args": {"External id": 18446744073709551615, "correlation": 9223372036854775808, "device": 1e400}},
      {"ph": "X", "cat": "cpu_op", "name": "o", "pid": 99999999999999999999999, "tid": -5, "ts": -1e-300, "dur": 0}
    ]})J");
    REQUIRE(m.events.size() == 3);
    const event* r = find_event(m, "r");
    const event* k = find_event(m, "k");
    REQUIRE(r != nullptr);
    REQUIRE(k != nullptr);
    CHECK(r->ts == 1e15);
    CHECK(r->external_id == k->external_id);  // still matched
    CHECK(r->correlation == k->correlation);
    CHECK(r->external_id == -1);              // two's-complement bits of 2^64-1
    CHECK(warnings(m, "id beyond int64") == 4);
    CHECK(m.events[0].ts < 0);                // sorted: -1e-300 first
  }
  SUBCASE("times outside the model's range are dropped with a warning naming the event") {
    // ts and ts + dur must fit a signed 64-bit µs count, [-2^63, 2^63).
    const std::string text = R"J({"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "ok", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
      {"ph": "X", "cat": "cpu_op", "name": "e19", "pid": 1, "tid": 1, "ts": 1e19, "dur": 1},
      {"ph": "X", "cat": "cpu_op", "name": "e308", "pid": 1, "tid": 1, "ts": 1e308, "dur": 1},
      {"ph": "X", "cat": "cpu_op", "name": "digits", "pid": 1, "tid": 1, "ts": 123456789012345678901234567890, "dur": 1},
      {"ph": "X", "cat": "cpu_op", "name": "long", "pid": 1, "tid": 1, "ts": 20, "dur": 1e300},
      {"ph": "X", "cat": "cpu_op", "name": "neg", "pid": 1, "tid": 1, "ts": -1e19, "dur": 1},
      {"ph": "X", "cat": "cpu_op", "name": "string", "pid": 1, "tid": 1, "ts": "9223372036854775808", "dur": 1},
      {"ph": "X", "cat": "cpu_op", "name": "edge", "pid": 1, "tid": 1, "ts": 9223372036854774784, "dur": 0},
      {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1e19, "args": {"Bytes": 4}},
      {"ph": "s", "id": 5, "pid": 1, "tid": 1, "ts": 1e19, "cat": "fwdbwd", "name": "fwdbwd"}
    ]})J";
    for (std::size_t window : {std::size_t{0}, std::size_t{4} << 20}) {
      CAPTURE(window);
      const trace_model m = load_ok(text, {.window_bytes = window});
      REQUIRE(m.events.size() == 2);
      CHECK(m.str(m.events[0].name) == "ok");
      CHECK(m.str(m.events[1].name) == "edge");  // the largest double below 2^63
      CHECK(m.memory.empty());
      CHECK(m.fwdbwd.empty());
      CHECK(warnings(m, "time out of range, event dropped") == 8);
      CHECK(m.diagnostics.events_by_category.at("cpu_op") == 8);  // still counted as read
      const std::vector<std::string> expected_first{
          "event #1: time out of range, event dropped (ts)", "event #2: time out of range, event dropped (ts)",
          "event #3: time out of range, event dropped (ts)", "event #4: time out of range, event dropped (dur)"};
      REQUIRE(m.diagnostics.messages.size() >= 4);
      CHECK(std::vector<std::string>(m.diagnostics.messages.begin(), m.diagnostics.messages.begin() + 4) ==
            expected_first);
      const auto trees = build_op_tree(m);  // used to read past its stack here
      REQUIRE(trees.threads.size() == 1);
      CHECK(trees.nodes[trees.threads[0].root].children.size() == 2);
    }
  }
  SUBCASE("invalid UTF-8 inside a name") {
    const std::string text = "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"bad\xff\xfe name\", "
                             "\"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 1}]}";
    for (std::size_t window : {std::size_t{0}, std::size_t{4} << 20}) {
      const trace_model m = load_ok(text, {.window_bytes = window});
      REQUIRE(m.events.size() == 1);
      CHECK(m.str(m.events[0].name) == "bad?? name");
      CHECK(warnings(m, "invalid UTF-8 bytes replaced with '?'") == 1);
    }
  }
  SUBCASE("bare N/A and raw control characters") {
    const trace_model m = load_ok(R"J({"traceEvents": [
      {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 1, "dur": 0,
       "args": {"memory bandwidth (GB/s)": N/A, "bytes": 4}},
      {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2, "args": {"Bytes": N/A, "Device Type": 1}}
    ]})J");
    CHECK(m.events.size() == 2);
    CHECK(m.memory.size() == 1);
    CHECK(m.memory[0].bytes == 0);
    CHECK(m.memory[0].device_type == 1);
    const trace_model c = load_ok("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"a\tb\nc\", "
                                  "\"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 1}]}");
    REQUIRE(c.events.size() == 1);
    CHECK(c.str(c.events[0].name) == "a b c");
    CHECK(warnings(c, "raw control characters inside strings replaced with spaces") == 1);
    // N/A where the structure needs a value: the plugin's last fallback quotes it.
    const trace_model q = load_ok(R"J({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 1, "dur": 1}], "x": N/A})J");
    CHECK(q.events.size() == 1);
  }
  SUBCASE("invalid escapes are kept literally, valid ones decoded") {
    const trace_model m = load_ok(R"J({"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "C:\Users\x", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
      {"ph": "X", "cat": "cpu_op", "name": "q\"\u00e9\ud83d\ude00", "pid": 1, "tid": 1, "ts": 2, "dur": 1}
    ]})J");
    REQUIRE(m.events.size() == 2);
    CHECK(m.str(m.events[1].name) == "q\"\xc3\xa9\xf0\x9f\x98\x80");
  }
  SUBCASE("children ending after their parent, unknown categories, flows") {
    const trace_model m = load_ok(R"J({"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "parent", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
      {"ph": "X", "cat": "cpu_op", "name": "child", "pid": 1, "tid": 1, "ts": 12, "dur": 50},
      {"ph": "X", "cat": "my_own_cat", "name": "o", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
      {"ph": "X", "cat": "Memory", "name": "m", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
      {"ph": "s", "id": 5, "pid": 1, "tid": 1, "ts": 10, "cat": "fwdbwd", "name": "fwdbwd"},
      {"ph": "f", "id": 5, "pid": 1, "tid": 2, "ts": 30, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"},
      {"ph": "s", "id": 6, "pid": 1, "tid": 1, "ts": 10, "cat": "FwdBwd", "name": "fwdbwd"},
      {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_0", "pid": 1, "tid": 1, "ts": 3, "dur": 1,
       "args": {"Python id": 4, "Python parent id": null, "Python module id": 77}},
      {"ph": "X", "cat": "python_function", "name": "f.py(1): g", "pid": 1, "tid": 1, "ts": 4, "dur": 1,
       "args": {"Python id": 5, "Python parent id": 4}}
    ]})J");
    CHECK(m.events.size() == 6);
    CHECK(m.fwdbwd.size() == 2);
    CHECK(m.fwdbwd[0].is_start);
    CHECK_FALSE(m.fwdbwd[1].is_start);
    CHECK(m.diagnostics.events_by_category.at("my_own_cat") == 1);
    CHECK(find_event(m, "o")->type == event_type::other);
    CHECK(find_event(m, "m")->type == event_type::other);
    const event* mod = find_event(m, "nn.Module: Linear_0");
    REQUIRE(mod != nullptr);
    CHECK(mod->type == event_type::module);
    CHECK(m.python[mod->extra].module_id == 77);
    CHECK(m.python[mod->extra].parent_id == -1);
    const event* fn = find_event(m, "f.py(1): g");
    CHECK(fn->type == event_type::python_function);
    CHECK(m.python[fn->extra].parent_id == 4);
  }
  SUBCASE("Record Window End fix, BOM, key order, concatenated gzip members") {
    const std::string text = "\xEF\xBB\xBF" R"J({"traceName": "x", "traceEvents": [
      {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": 100},
      {"args": {"External id": 3}, "dur": 2, "ts": 200, "tid": "77", "pid": 1, "name": "z", "cat": "Operator", "ph": "X"},
      {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": 90000000}
    ], "baseTimeNanoseconds": 1759300074000000000, "distributedInfo": {"rank": 2}, "Framework": "pytorch-lightning"})J";
    const std::string half1 = text.substr(0, 100), half2 = text.substr(100);
    const std::string gz = gzip_bytes(half1) + gzip_bytes(half2);
    for (const std::string& input : {text, gz}) {
      const trace_model m = load_ok(input);
      CHECK(m.record_window_end_dropped);
      CHECK(m.base_time_ns == 1759300074000000000);
      CHECK(m.lightning);
      REQUIRE(m.distributed.has_value());
      CHECK(m.distributed->rank == 2);
      CHECK(m.distributed->world_size == -1);
      REQUIRE(m.events.size() == 1);
      CHECK(m.events[0].tid == 77);
      CHECK(m.events[0].external_id == 3);
    }
  }
}

TEST_CASE("loader: big files are parsed while they are read or inflated") {
  // >= 16 MB: the plain file is read, and the gzip inflated, on a thread (text_feed).
  const std::string text =
      gunzip_file(real_dir() + "/traces/resnet50_v100/worker0.1623143089861.pt.trace.json.gz");
  REQUIRE(text.size() > (std::size_t{32} << 20));
  const trace_model ref = load_ok(text, {.window_bytes = 0});
  const fs::path dir = fs::temp_directory_path() / ("kinetoscope-loader-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream out(dir / name, std::ios::binary);
    out << bytes;
    return (dir / name).string();
  };
  SUBCASE("plain file") {
    load_result r = load_trace(write("big.json", text));
    REQUIRE(r.ok());
    check_same_model(ref, *r.model);
    load_result small_windows = load_trace((dir / "big.json").string(), {.window_bytes = 64 << 10});
    REQUIRE(small_windows.ok());
    check_same_model(ref, *small_windows.model);
  }
  SUBCASE("truncated plain file") {
    const std::string cut = text.substr(0, text.size() - 1000);
    load_result r = load_trace(write("cut.json", cut));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error->reason.find("truncated") != std::string::npos);
    CHECK(r.error->byte_offset == cut.size());
    CHECK(r.error->event_index > 50000);
  }
  SUBCASE("concatenated gzip members (ISIZE is only the last member's)") {
    const std::size_t half = text.size() / 2;
    load_result r = load_trace(write("two.json.gz", gzip_bytes(text.substr(0, half)) + gzip_bytes(text.substr(half))));
    REQUIRE(r.ok());
    check_same_model(ref, *r.model);
  }
  SUBCASE("gzip with a bad CRC") {
    std::string gz = gzip_bytes(text);
    gz[gz.size() - 6] = static_cast<char>(gz[gz.size() - 6] ^ 1);  // CRC32 field
    load_result r = load_trace(write("crc.json.gz", gz));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error->reason.find("gzip") != std::string::npos);
  }
  fs::remove_all(dir);
}

namespace {

/// A trace exercising the streamed loader's chunk boundaries: escapes and "},{" inside strings,
/// long numbers, one event far bigger than a chunk, top-level keys before and after traceEvents.
std::string stream_test_trace(bool keys_after) {
  std::string ev;
  for (int i = 0; i < 300; ++i) {
    if (i > 0) ev += i % 3 == 0 ? ",\n  " : ",";
    const std::string ts = std::to_string(1000000 + (i * 7919) % 1000) + ".123456789012345";
    if (i % 17 == 5) {
      ev += R"({"ph": "X", "cat": "cpu_op", "name": "esc \"},{\" \\ \u00e9 )" + std::to_string(i) +
            R"(", "pid": 1, "tid": "stream 7", "ts": )" + ts + R"(, "dur": 1.5e1})";
    } else if (i == 150) {  // one event much bigger than a chunk
      ev += R"({"ph": "X", "cat": "cpu_op", "name": "huge", "pid": 1, "tid": 2, "ts": )" + ts +
            R"(, "dur": 3, "args": {"Call stack": ")" + std::string(20000, 'x') + R"(},{y"}})";
    } else if (i % 5 == 0) {
      ev += R"({"ph": "X", "cat": "Kernel", "name": "k)" + std::to_string(i % 4) +
            R"(", "pid": 0, "tid": 7, "ts": )" + ts +
            R"(, "dur": 2, "args": {"grid": [1, 2, 3], "correlation": 123456789012, "External id": )" +
            std::to_string(i) + "}}";
    } else {
      ev += R"({"ph": "X", "cat": "cpu_op", "name": "op)" + std::to_string(i % 9) + R"(", "pid": 1, "tid": 2, "ts": )" +
            ts + R"(, "dur": 1, "args": {"Input Dims": [[1, 2], []], "External id": )" + std::to_string(i) + "}}";
    }
  }
  const std::string before = R"("schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},)";
  const std::string after =
      R"("deviceProperties": [{"name": "A},{B", "totalGlobalMem": 1}, {"name": "C"}], "baseTimeNanoseconds": 1700000000000000000)";
  if (keys_after) return "{" + before + "\n\"traceEvents\": [\n  " + ev + "\n],\n" + after + "}\n";
  return "{" + before + after + ",\n\"traceEvents\": [" + ev + "]}";
}

void check_same_meta(const trace_model& a, const trace_model& b) {
  REQUIRE(a.devices.size() == b.devices.size());
  for (std::size_t i = 0; i < a.devices.size(); ++i) CHECK(a.devices[i].name == b.devices[i].name);
  CHECK(a.distributed.has_value() == b.distributed.has_value());
  if (a.distributed && b.distributed) CHECK(a.distributed->rank == b.distributed->rank);
  CHECK(a.base_time_ns == b.base_time_ns);
  CHECK(a.schema_version == b.schema_version);
  CHECK(a.legacy_array == b.legacy_array);
  CHECK(a.diagnostics.messages == b.diagnostics.messages);
  for (std::size_t i = 0; i < a.events.size() && i < b.events.size(); ++i) {
    CHECK(a.str(a.events[i].name) == b.str(b.events[i].name));
    CHECK(a.events[i].dur == b.events[i].dur);
    CHECK(a.events[i].tid == b.events[i].tid);
  }
}

}  // namespace

TEST_CASE("loader: streamed input with tiny chunks (boundaries inside strings, escapes, numbers)") {
  using kinetoscope::analysis::detail::streamed_loads;
  for (bool keys_after : {false, true}) {
    CAPTURE(keys_after);
    const std::string text = stream_test_trace(keys_after);
    const trace_model ref = load_ok(text, {.window_bytes = 0});
    REQUIRE(ref.events.size() == 300);
    CHECK(ref.devices.size() == 2);
    CHECK(ref.base_time_ns == 1700000000000000000);
    const std::string gz = gzip_bytes(text);
    const std::string two = gzip_bytes(text.substr(0, text.size() / 3)) + gzip_bytes(text.substr(text.size() / 3));
    for (std::size_t window : {1, 7, 16, 61, 100, 257, 1000, 4096}) {
      CAPTURE(window);
      for (const std::string* input : {&text, &gz, &two}) {
        const std::uint64_t before = streamed_loads.load();
        const trace_model m = load_ok(*input, {.window_bytes = window});
        CHECK(streamed_loads.load() == before + 1);  // streamed, not the whole-text fallback
        check_same_model(ref, m);
        check_same_meta(ref, m);
      }
    }
    // The same through a file (read on the stream's thread).
    const fs::path path = fs::temp_directory_path() / ("kinetoscope-stream-" + std::to_string(::getpid()) + ".json.gz");
    {
      std::ofstream out(path, std::ios::binary);
      out << gz;
    }
    const std::uint64_t before = streamed_loads.load();
    load_result r = load_trace(path.string(), {.window_bytes = 50});
    fs::remove(path);
    REQUIRE(r.ok());
    CHECK(streamed_loads.load() == before + 1);
    check_same_model(ref, *r.model);
    check_same_meta(ref, *r.model);
  }
  SUBCASE("legacy bare array") {
    const std::string text = R"([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 5, "dur": 1},
      {"ph": "X", "name": "b},{\"", "pid": 1, "tid": 1, "ts": 2, "dur": 1}, {"ph": "i", "name": "c", "ts": 3}])";
    const trace_model ref = load_ok(text, {.window_bytes = 0});
    for (std::size_t window : {1, 5, 33}) {
      const trace_model m = load_ok(text, {.window_bytes = window});
      check_same_model(ref, m);
      check_same_meta(ref, m);
      CHECK(m.legacy_array);
    }
  }
}

TEST_CASE("loader: collective args, the same through every path") {
  // A record_param_comms op and its NCCL kernel as PyTorch 2.x writes them (with Seq), a kernel
  // with a mistyped field, and an op whose only args are collective ones.
  const std::string args =
      R"j("Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": 9007199254740993, )j"
      R"j("Out msg nelems": 4096, "Group size": 8, "In split size": "[]", "Out split size": "[]", )j"
      R"j("Process Group Name": "3", "Process Group Description": "tp_group", "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]", "Seq": 41)j";
  const std::string text =
      R"j({"traceEvents": [)j"
      R"j({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"External id": 7, )j" +
      args + R"j(}},)j"
      R"j({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "pid": 0, "tid": 13, "ts": 20, "dur": 50, "args": {"External id": 7, "stream": 13, "correlation": 3, )j" +
      args + R"j(}},)j"
      R"j({"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 13, "ts": 80, "dur": 1, "args": {"Group size": "8", "Seq": [1]}},)j"
      R"j({"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 90, "dur": 1, "args": {"Seq": 1}},)j"
      R"j({"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 95, "dur": 1, "args": {"External id": 9}}]})j";
  const trace_model ref = load_ok(text, {.window_bytes = 0});
  REQUIRE(ref.events.size() == 5);
  REQUIRE(ref.collectives.size() == 4);
  const event& op = ref.events[0];
  REQUIRE(op.extra < ref.ops.size());
  const collective_args& a = ref.collectives[ref.ops[op.extra].collective];
  CHECK(ref.str(a.name) == "allreduce");
  CHECK(ref.str(a.dtype) == "BFloat16");
  CHECK(a.in_nelems == 9007199254740993);  // integers stay exact (2^53 + 1)
  CHECK(a.out_nelems == 4096);
  CHECK(a.group_size == 8);
  CHECK(ref.str(a.group_name) == "3");
  CHECK(ref.str(a.group_desc) == "tp_group");
  CHECK(ref.str(a.group_ranks) == "[0, 1, 2, 3, 4, 5, 6, 7]");
  CHECK(a.seq == 41);
  const collective_args& k = ref.collectives[ref.kernels[ref.events[1].extra].collective];
  CHECK(ref.str(k.name) == "allreduce");
  CHECK(k.seq == 41);
  CHECK(k.in_nelems == a.in_nelems);
  // "Group size" written as a string still reads (with a warning); a mistyped Seq is reported.
  const collective_args& k2 = ref.collectives[ref.kernels[ref.events[2].extra].collective];
  CHECK(k2.group_size == 8);
  CHECK(k2.seq == -1);
  CHECK(warnings(ref, "number written as a string") == 1);
  CHECK(warnings(ref, "wrong type") == 1);
  // An op whose only arg is a collective one keeps an op_args entry; other ops stay without one.
  CHECK(ref.events[3].extra != no_index);
  CHECK(ref.collectives[ref.ops[ref.events[3].extra].collective].seq == 1);
  CHECK(ref.events[4].extra == no_index);
  CHECK(ref.heap_bytes() >= ref.collectives.capacity() * sizeof(collective_args));
  for (std::size_t window : {1, 13, 64, 4096}) {
    CAPTURE(window);
    check_same_model(ref, load_ok(text, {.window_bytes = window}));
    check_same_model(ref, load_ok(gzip_bytes(text), {.window_bytes = window}));
  }
}

TEST_CASE("loader: errors and repairs across stream chunk boundaries") {
  const std::string text = stream_test_trace(true);
  SUBCASE("syntax error: offset and event index as in the whole-text parse") {
    std::string broken = text;
    const std::size_t at = broken.find("\"ph\": \"X\"", broken.size() * 2 / 3);
    REQUIRE(at != std::string::npos);
    broken[at + 4] = '@';
    const load_error ref = load_fails(broken, {.window_bytes = 0});
    for (std::size_t window : {7, 64, 1000}) {
      CAPTURE(window);
      const load_error e = load_fails(broken, {.window_bytes = window});
      CHECK(e.byte_offset > at - 200);
      CHECK(e.byte_offset < at + 200);
      CHECK(e.event_index > 0);
      const load_error g = load_fails(gzip_bytes(broken), {.window_bytes = window});
      CHECK(g.byte_offset == e.byte_offset);
      CHECK(g.reason == e.reason);
    }
    CHECK(ref.byte_offset > at - 200);
  }
  SUBCASE("truncated") {
    const std::string cut = text.substr(0, text.size() * 3 / 4);
    for (std::size_t window : {7, 64, 1000}) {
      CAPTURE(window);
      const load_error e = load_fails(cut, {.window_bytes = window});
      CHECK(e.reason.find("truncated") != std::string::npos);
      CHECK(e.byte_offset == cut.size());
      CHECK(e.event_index > 100);
    }
  }
  SUBCASE("invalid UTF-8 and raw control characters far from the start are repaired") {
    std::string damaged = text;
    const std::size_t at = damaged.find("\"name\": \"op3\"", damaged.size() / 2);
    REQUIRE(at != std::string::npos);
    damaged[at + 10] = '\xff';
    const std::size_t ctrl = damaged.find("\"name\": \"op5\"", damaged.size() * 3 / 4);
    REQUIRE(ctrl != std::string::npos);
    damaged[ctrl + 10] = '\t';  // a raw control character inside a string
    for (std::size_t window : {0, 16, 300}) {
      CAPTURE(window);
      const trace_model m = load_ok(damaged, {.window_bytes = window});
      CHECK(m.events.size() == 300);
      CHECK(warnings(m, "invalid UTF-8 bytes replaced with '?'") == 1);
      CHECK(warnings(m, "raw control characters inside strings replaced with spaces") == 1);
    }
  }
}

TEST_CASE("loader: model interning") {
  trace_model m;
  CHECK(m.find_string("") == 0);
  CHECK(m.find_string("a") == no_index);
  const std::uint32_t a = m.intern("a");
  CHECK(m.intern("a") == a);
  CHECK(m.find_string("a") == a);
  m.strings.push_back("pushed by hand");
  CHECK(m.find_string("pushed by hand") == m.strings.size() - 1);
  CHECK(m.intern("pushed by hand") == m.strings.size() - 1);
  for (int i = 0; i < 5000; ++i) m.intern("s" + std::to_string(i));
  for (int i = 0; i < 5000; ++i) CHECK(m.str(m.find_string("s" + std::to_string(i))) == "s" + std::to_string(i));
  const trace_model copy = m;
  CHECK(copy.find_string("s4999") == m.find_string("s4999"));
}

TEST_CASE("loader: process/thread metadata events are kept for the timeline's track names") {
  const std::string text = R"({"traceEvents": [
    {"name": "process_name", "ph": "M", "pid": 10, "tid": 0, "args": {"name": "python"}},
    {"name": "process_labels", "ph": "M", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
    {"name": "process_sort_index", "ph": "M", "pid": "Spans", "tid": 0, "args": {"sort_index": 536870912}},
    {"args": {"name": "dataloader"}, "name": "thread_name", "ph": "M", "pid": 10, "tid": "11"},
    {"name": "thread_sort_index", "ph": "M", "pid": 10, "tid": 11, "args": {"sort_index": 3}},
    {"name": "some_other_meta", "ph": "M", "pid": 10, "tid": 11, "args": {"name": "ignored"}},
    {"name": "thread_name", "ph": "M", "pid": 10, "tid": 12, "args": {}},
    {"name": "op", "ph": "X", "cat": "cpu_op", "ts": 1, "dur": 2, "pid": 10, "tid": 11, "args": {"name": "not metadata"}}
  ]})";
  const auto r = kinetoscope::analysis::load_trace_buffer(text, "meta.json");
  REQUIRE(r.ok());
  const auto& m = *r.model;
  REQUIRE(m.track_metas.size() == 5);  // the unknown kind and the name without text are dropped
  CHECK(m.track_metas[0].kind == kinetoscope::analysis::meta_kind::process_name);
  CHECK(m.track_metas[0].pid == 10);
  CHECK(m.str(m.track_metas[0].text) == "python");
  CHECK(m.str(m.track_metas[1].text) == "GPU 0");
  CHECK(m.track_metas[2].kind == kinetoscope::analysis::meta_kind::process_sort_index);
  CHECK(m.track_metas[2].pid_is_string);
  CHECK(m.id_text(m.track_metas[2].pid, true) == "Spans");
  CHECK(m.track_metas[2].sort_index == 536870912);
  CHECK(m.track_metas[3].kind == kinetoscope::analysis::meta_kind::thread_name);  // args before ph
  CHECK(m.track_metas[3].tid == 11);
  CHECK(m.str(m.track_metas[3].text) == "dataloader");
  CHECK(m.track_metas[4].kind == kinetoscope::analysis::meta_kind::thread_sort_index);
  CHECK(m.track_metas[4].sort_index == 3);
  CHECK(m.events.size() == 1);
}
