// SPDX-License-Identifier: BSD-3-Clause
// The split parse (load_options::split_min_bytes): a plain text read by two readers at once must
// give exactly the model one reader gives: every table row, every string id, the warnings and
// their messages. Checked on every real trace, on a generated trace that puts warnings, string
// pids, flows, collectives and the Record Window End rule in every part, through a file, and on
// texts whose cut points fall inside strings (those must be read by one reader instead).
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/loader.hpp"
#include "analysis/loader_stats.hpp"
#include "real_trace_files.hpp"

namespace {

namespace fs = std::filesystem;
using namespace kinetoscope::analysis;
using kinetoscope::analysis::detail::split_loads;
using kinetoscope::analysis::detail::streamed_loads;


/// Every field of every table, string ids included (not only the texts they name).
void require_identical(const trace_model& a, const trace_model& b) {
  REQUIRE(a.strings == b.strings);
  REQUIRE(a.events.size() == b.events.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    const event& x = a.events[i];
    const event& y = b.events[i];
    const bool same = x.ts == y.ts && x.dur == y.dur && x.pid == y.pid && x.tid == y.tid && x.external_id == y.external_id &&
                      x.correlation == y.correlation && x.name == y.name && x.extra == y.extra && x.type == y.type &&
                      x.gpu_annotation == y.gpu_annotation && x.pid_is_string == y.pid_is_string &&
                      x.tid_is_string == y.tid_is_string;
    if (!same && bad++ == 0) CAPTURE(i);
  }
  CHECK(bad == 0);
  REQUIRE(a.ops.size() == b.ops.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    const op_args& x = a.ops[i];
    const op_args& y = b.ops[i];
    CHECK((x.input_dims == y.input_dims && x.input_types == y.input_types && x.call_stack == y.call_stack &&
           x.sequence_nr == y.sequence_nr && x.fwd_thread_id == y.fwd_thread_id && x.collective == y.collective));
  }
  REQUIRE(a.kernels.size() == b.kernels.size());
  for (std::size_t i = 0; i < a.kernels.size(); ++i) {
    const kernel_args& x = a.kernels[i];
    const kernel_args& y = b.kernels[i];
    CHECK((x.device == y.device && x.blocks_per_sm == y.blocks_per_sm && x.occupancy == y.occupancy &&
           std::equal(x.grid, x.grid + 3, y.grid) && std::equal(x.block, x.block + 3, y.block) &&
           x.registers_per_thread == y.registers_per_thread && x.shared_memory == y.shared_memory &&
           x.stream == y.stream && x.collective == y.collective && x.has_grid == y.has_grid));
  }
  REQUIRE(a.memory.size() == b.memory.size());
  for (std::size_t i = 0; i < a.memory.size(); ++i) {
    const memory_args& x = a.memory[i];
    const memory_args& y = b.memory[i];
    CHECK((x.device_type == y.device_type && x.device_id == y.device_id && x.addr == y.addr && x.bytes == y.bytes &&
           (x.total_allocated == y.total_allocated || (x.total_allocated != x.total_allocated && y.total_allocated != y.total_allocated))));
  }
  REQUIRE(a.python.size() == b.python.size());
  for (std::size_t i = 0; i < a.python.size(); ++i) {
    CHECK((a.python[i].python_id == b.python[i].python_id && a.python[i].parent_id == b.python[i].parent_id &&
           a.python[i].module_id == b.python[i].module_id));
  }
  REQUIRE(a.collectives.size() == b.collectives.size());
  for (std::size_t i = 0; i < a.collectives.size(); ++i) {
    const collective_args& x = a.collectives[i];
    const collective_args& y = b.collectives[i];
    CHECK((x.name == y.name && x.dtype == y.dtype && x.group_name == y.group_name && x.group_desc == y.group_desc &&
           x.group_ranks == y.group_ranks && x.group_size == y.group_size && x.in_nelems == y.in_nelems &&
           x.out_nelems == y.out_nelems && x.seq == y.seq));
  }
  REQUIRE(a.fwdbwd.size() == b.fwdbwd.size());
  for (std::size_t i = 0; i < a.fwdbwd.size(); ++i) {
    const flow_event& x = a.fwdbwd[i];
    const flow_event& y = b.fwdbwd[i];
    CHECK((x.id == y.id && x.ts == y.ts && x.pid == y.pid && x.tid == y.tid && x.is_start == y.is_start));
  }
  REQUIRE(a.track_metas.size() == b.track_metas.size());
  for (std::size_t i = 0; i < a.track_metas.size(); ++i) {
    const track_meta& x = a.track_metas[i];
    const track_meta& y = b.track_metas[i];
    CHECK((x.pid == y.pid && x.tid == y.tid && x.pid_is_string == y.pid_is_string && x.tid_is_string == y.tid_is_string &&
           x.kind == y.kind && x.text == y.text && x.sort_index == y.sort_index));
  }
  REQUIRE(a.devices.size() == b.devices.size());
  for (std::size_t i = 0; i < a.devices.size(); ++i) CHECK(a.devices[i].name == b.devices[i].name);
  CHECK(a.distributed.has_value() == b.distributed.has_value());
  CHECK(a.schema_version == b.schema_version);
  CHECK(a.base_time_ns == b.base_time_ns);
  CHECK(a.record_window_end_dropped == b.record_window_end_dropped);
  CHECK(a.legacy_array == b.legacy_array);
  CHECK(a.diagnostics.events_by_category == b.diagnostics.events_by_category);
  CHECK(a.diagnostics.warnings == b.diagnostics.warnings);
  CHECK(a.diagnostics.messages == b.diagnostics.messages);
  CHECK(a.diagnostics.text_bytes == b.diagnostics.text_bytes);
}

trace_model load_ok(std::string_view text, const load_options& o) {
  load_result r = load_trace_buffer(text, "split.json", o);
  if (!r.ok()) FAIL(r.error->message());
  return std::move(*r.model);
}

/// One reader and two readers over the same text with the same windows: the same model, and
/// the second really was split (`must_split`) or really was not. `streamed`: the text can be
/// read in windows at all (else both end in the whole-text parse).
void check_split(const std::string& text, std::size_t window, bool must_split, bool streamed = true) {
  CAPTURE(window);
  const trace_model one = load_ok(text, {.window_bytes = window, .split_min_bytes = 0});
  const std::uint64_t splits = split_loads.load(), streams = streamed_loads.load();
  const trace_model two = load_ok(text, {.window_bytes = window, .split_min_bytes = 1});
  CHECK(streamed_loads.load() == streams + (streamed ? 1 : 0));
  CHECK(split_loads.load() == splits + (must_split ? 1 : 0));
  require_identical(one, two);
}

/// A trace whose every part has what the merge renumbers: new and repeated strings (names,
/// Input Dims, call stacks, collective fields), string pids and tids on events, flows and
/// metadata, kernels and ops with collectives, memory and python events, warnings with event
/// numbers, and Record Window End / Iteration Start instants. `warn_every` controls how many
/// warnings (fewer or more than the 20 messages kept).
std::string mixed_trace(int n, int warn_every, bool rwe_late) {
  std::string ev;
  std::string bad;  // a mistyped "dur" on every warn_every-th element
  const auto add = [&](const std::string& e) {
    if (!ev.empty()) ev += ",\n";
    ev += bad.empty() ? e : e.substr(0, e.size() - 1) + bad + "}";
  };
  add(R"({"ph": "M", "name": "process_name", "pid": "Spans", "tid": 0, "args": {"name": "spans"}})");
  for (int i = 0; i < n; ++i) {
    const std::string ts = std::to_string(5000 + (i * 7919) % 3000) + "." + std::to_string(i % 10);
    const std::string part = std::to_string(i * 3 / n);  // strings that first appear in a part
    bad = warn_every > 0 && (i % warn_every == 0 || i == n - 10) ? R"(, "dur": "x")" : "";  // and one in C
    switch (i % 9) {
      case 0:
        add(R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm_)" + part + R"(", "pid": 1, "tid": 2, "ts": )" + ts +
            R"(, "dur": 3, "args": {"Input Dims": [[)" + std::to_string(i % 13) + R"(, 4]], "Call stack": "f.py(1): g;)" + part +
            R"(", "Sequence number": )" + std::to_string(i) + "}}");
        break;
      case 1:
        add(R"({"ph": "X", "cat": "kernel", "name": "ncclKernel_)" + part + R"(", "pid": 0, "tid": "stream 7", "ts": )" + ts +
            R"(, "dur": 9, "args": {"grid": [1, 2, 3], "correlation": )" + std::to_string(i) +
            R"(, "Collective name": "allreduce", "Process Group Name": ")" + part + R"(", "Seq": )" + std::to_string(i) + "}}");
        break;
      case 2:
        add(R"({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 2, "ts": )" + ts +
            R"(, "dur": 2, "args": {"Collective name": "allgather", "dtype": "Float", "Process Group Ranks": "[0, )" + part +
            R"(]", "Group size": )" + (bad.empty() ? "2" : "\"2\"") + "}}");
        break;
      case 3:
        add(R"({"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 2, "ts": )" + ts +
            R"(, "args": {"Device Type": 1, "Device Id": 0, "Addr": )" + std::to_string(1000 + i) + R"(, "Bytes": )" +
            std::to_string(i % 2 == 0 ? 512 : -512) + "}}");
        break;
      case 4:
        add(R"({"ph": "X", "cat": "python_function", "name": "nn.Module: M_)" + part + R"(", "pid": 1, "tid": 2, "ts": )" + ts +
            R"(, "dur": 4, "args": {"Python id": )" + std::to_string(i) + R"(, "Python parent id": 1, "Python module id": 3}})");
        break;
      case 5:
        add(R"({"ph": "s", "cat": "fwdbwd", "id": )" + std::to_string(i) + R"(, "pid": "Traces )" + part +
            R"(", "tid": "thread )" + part + R"(", "ts": )" + ts + "}");
        break;
      case 6:
        add(R"({"ph": "X", "cat": "user_annotation", "name": "step)" + part + R"(", "pid": "Spans", "tid": "Lane )" + part +
            R"(", "ts": )" + ts + R"(, "dur": 20, "args": {"External id": 5, "Seq": )" + (bad.empty() ? "3" : "\"bad\"") + "}}");
        break;
      case 7:
        add(R"({"ph": "M", "name": "thread_name", "pid": 1, "tid": "T)" + part + R"(", "args": {"name": "thread )" + part + R"("}})");
        break;
      default:
        add(R"({"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": )" + ts +
            R"(, "dur": 1, "args": {"correlation": )" + std::to_string(i - 7) + R"(, "External id": )" + std::to_string(i) + "}}");
        break;
    }
    bad.clear();
    if (i == n / 6) add(R"({"ph": "i", "name": "Iteration Start: PyTorch Profiler", "pid": 1, "tid": 1, "ts": 100})");
    if (i == (rwe_late ? n - 3 : n / 2)) add(R"({"ph": "i", "name": "Record Window End", "pid": 1, "tid": 1, "ts": 9e10})");
  }
  return R"({"schemaVersion": 1, "deviceProperties": [{"name": "GPU},{0"}], "traceEvents": [)" "\n" + ev +
         "\n], \"baseTimeNanoseconds\": 1700000000000000000, \"traceName\": \"x\"}\n";
}

}  // namespace

TEST_CASE("split parse: every real trace, the same model as one reader") {
  const std::vector<std::string> files = kinetoscope_test::real_traces();
  REQUIRE(files.size() >= 12);
  std::size_t split = 0;
  for (const std::string& path : files) {
    CAPTURE(path);
    const std::string text = kinetoscope_test::read_trace_text(path);
    if (text.find_first_not_of(" \t\r\n") != std::string::npos && text[text.find_first_not_of(" \t\r\n")] == '[') {
      check_split(text, 4096, false);  // a bare array is read by one reader
      continue;
    }
    // This rank's distributedInfo (its process groups) takes the first two thirds of the text:
    // traceEvents starts after the middle, so there is nothing to split.
    const bool events_late = path.find("cpu_only/rank-34") != std::string::npos;
    for (std::size_t window : {512, 2048}) check_split(text, window, !events_late);
    split += events_late ? 0 : 1;
  }
  CHECK(split == 18);  // all but the bare array and cpu_only
}

TEST_CASE("split parse: strings, tables, warnings and Record Window End renumbered across the parts") {
  for (int warn_every : {0, 7, 100}) {
    for (bool rwe_late : {false, true}) {
      CAPTURE(warn_every);
      CAPTURE(rwe_late);
      const std::string text = mixed_trace(1000, warn_every, rwe_late);
      const trace_model one = load_ok(text, {.window_bytes = 0, .split_min_bytes = 0});  // the whole-text parse
      CHECK(one.record_window_end_dropped);
      CHECK(one.fwdbwd.size() == 111);
      if (warn_every == 7) CHECK(one.diagnostics.messages.size() == 20);
      if (warn_every == 100) {  // messages from every part, numbered in the whole file
        REQUIRE(one.diagnostics.messages.size() < 20);
        const auto& msgs = one.diagnostics.messages;
        CHECK(std::count_if(msgs.begin(), msgs.end(), [](const std::string& m) { return m.starts_with("event #"); }) == 13);
        CHECK(msgs[msgs.size() - 2] == (rwe_late ? "event #992: wrong type (dur)" : "event #993: wrong type (dur)"));
      }
      for (std::size_t window : {61, 700, 5000}) check_split(text, window, true);
      const trace_model two = load_ok(text, {.window_bytes = 700, .split_min_bytes = 1});
      require_identical(one, two);
    }
  }
  SUBCASE("a file (pread on one descriptor)") {
    const std::string text = mixed_trace(3000, 11, false);
    const fs::path path = fs::temp_directory_path() / ("kinetoscope-split-" + std::to_string(::getpid()) + ".json");
    {
      std::ofstream out(path, std::ios::binary);
      out << text;
    }
    const trace_model one = load_ok(text, {.window_bytes = 997, .split_min_bytes = 0});
    const std::uint64_t splits = split_loads.load();
    std::atomic<std::uint64_t> progress{0};
    load_result r = load_trace(path.string(), {.window_bytes = 997, .progress_bytes = &progress, .split_min_bytes = 1});
    fs::remove(path);
    REQUIRE(r.ok());
    CHECK(split_loads.load() == splits + 1);
    // Both readers add their bytes to one counter; it stays at or below the file's size.
    CHECK(progress.load() > 0);
    CHECK(progress.load() <= text.size());
    require_identical(one, *r.model);
  }
  SUBCASE("below split_min_bytes, gzip, or split_min_bytes 0: one reader") {
    const std::string text = mixed_trace(900, 0, false);
    const std::uint64_t splits = split_loads.load();
    (void)load_ok(text, {.window_bytes = 61, .split_min_bytes = text.size() + 1});
    (void)load_ok(text, {.window_bytes = 61, .split_min_bytes = 0});
    CHECK(split_loads.load() == splits);
  }
}

TEST_CASE("split parse: cut points inside strings are read by one reader, with the same result") {
  // Every event's name holds "},{" and the events are separated by numbers (elements that are not
  // objects): every separator the cut search can find is inside a string, so a part does not
  // parse and the whole text is read again (windows fail there too: the whole-text parse).
  std::string ev;
  for (int i = 0; i < 2000; ++i) {
    if (i > 0) ev += ",1,";
    ev += R"({"ph": "X", "cat": "cpu_op", "name": "a},{b},{c},{d},{e},{f},{g},{h},{i},{j},{k},{l},{m},{n},{o},{p )" +
          std::to_string(i) + R"(", "pid": 1, "tid": 2, "ts": )" + std::to_string(i) + R"(, "dur": 1})";
  }
  const std::string text = R"({"traceEvents": [)" + ev + "]}";
  check_split(text, 500, false, false);
  const trace_model one = load_ok(text, {.window_bytes = 0});
  CHECK(one.events.size() == 2000);
  CHECK(one.diagnostics.warnings.at("event is not an object") == 1999);
  // The same with a trap only at the far cut (X): the keys after traceEvents hold a long list of
  // "},{" objects, longer than the tail room, so X falls among them and the part fails.
  std::string plain;
  for (int i = 0; i < 2000; ++i) {
    if (i > 0) plain += ",";
    plain += R"({"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, "ts": )" + std::to_string(i) + R"(, "dur": 1})";
  }
  std::string tail = R"("deviceProperties": [)";
  for (int i = 0; i < 3000; ++i) tail += std::string(i > 0 ? "," : "") + R"({"name": "GPU )" + std::to_string(i) + R"("})";
  tail += "]";
  check_split(R"({"traceEvents": [)" + plain + "], " + tail + "}", 500, false);
}

TEST_CASE("split parse: events of equal ts across the parts keep the file's order") {
  // The readers sort their parts apart and the merge puts them together: on equal ts the first
  // part's events come first, then the middle part's, then the tail's, as one stable sort of the
  // whole file gives them. Timestamps run backwards by blocks (so every part needs sorting) and
  // take five values (so every value is in every part); each name is unique, so the event order
  // is visible in the string ids.
  std::string ev;
  for (int i = 0; i < 6000; ++i) {
    if (i > 0) ev += ",\n";
    ev += R"({"ph": "X", "cat": "cpu_op", "name": "op)" + std::to_string(i) + R"(", "pid": 1, "tid": )" +
          std::to_string(1 + i % 3) + R"(, "ts": )" + std::to_string(100 - (i / 7) % 5 * 10) + R"(, "dur": 1, "args": {"External id": )" +
          std::to_string(i + 1) + "}}";
  }
  const std::string text = R"({"traceEvents": [)" + ev + "]}";
  for (std::size_t window : {600, 4096}) check_split(text, window, true);
  const trace_model one = load_ok(text, {.window_bytes = 600, .split_min_bytes = 1});
  REQUIRE(one.events.size() == 6000);
  std::size_t out_of_order = 0;
  for (std::size_t i = 1; i < one.events.size(); ++i) {
    const event& a = one.events[i - 1];
    const event& b = one.events[i];
    // Within a ts the file order, which is the order of the external ids here.
    if (a.ts > b.ts || (a.ts == b.ts && a.external_id >= b.external_id)) ++out_of_order;
  }
  CHECK(out_of_order == 0);
  CHECK(one.events.front().ts == 60);
  CHECK(one.events.front().external_id == 29);  // the first event with ts 60: i = 28
  CHECK(one.events.back().ts == 100);
  CHECK(one.events.back().external_id == 5992);  // the last with ts 100: i = 5991 (5991 / 7 % 5 == 0)
}

TEST_CASE("split parse: a damaged tail fails the main reader, not the part: the same answer as one reader") {
  // The part reader (the middle) parses and waits for the main reader to take its rows; the
  // main reader fails on the damaged tail. It must release the part (this once hung the load)
  // and the text be read by one reader, with one reader's answer.
  const std::string text = mixed_trace(3000, 0, false);
  const std::size_t last_event = text.rfind("{\"ph\"");
  REQUIRE(last_event != std::string::npos);
  REQUIRE(last_event > text.size() * 15 / 16);
  const std::string truncated = text.substr(0, last_event + 20);  // cut inside the last event
  const std::string broken = [&] {
    std::string b = text;
    b.insert(last_event + 1, "\"ph\": ,");  // a syntax error in the last event
    return b;
  }();
  for (const std::string* t : {&truncated, &broken}) {
    const std::uint64_t splits = split_loads.load();
    load_result one = load_trace_buffer(*t, "tail.json", {.window_bytes = 700, .split_min_bytes = 0});
    load_result two = load_trace_buffer(*t, "tail.json", {.window_bytes = 700, .split_min_bytes = 1});
    CHECK(split_loads.load() == splits);  // (the split was tried and given up)
    REQUIRE(one.ok() == two.ok());
    if (!one.ok()) {
      CHECK(two.error->message() == one.error->message());
    } else {
      require_identical(*one.model, *two.model);
    }
  }
  CHECK_FALSE(load_trace_buffer(truncated, "tail.json", {.window_bytes = 700, .split_min_bytes = 1}).ok());
}
