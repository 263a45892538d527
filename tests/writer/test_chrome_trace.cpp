// SPDX-License-Identifier: BSD-3-Clause
// write_chrome_trace: the era-E Kineto JSON written for a hand-built trace_data modelled on the
// example of docs/trace-format.md#writer-checklist, read back with nlohmann and checked field by
// field.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kinetoscope/writer/chrome_trace.hpp"
#include "writer_test_util.hpp"

using nlohmann::json;
using nlohmann::ordered_json;
using writer_test::at_us;
using writer_test::example_trace;

namespace {

const char* const example_path = "C:\\log\\myhost_4242.1760500000123.pt.trace.json";

struct written {
  std::string text;
  ordered_json doc;
  const ordered_json& events() const { return doc.at("traceEvents"); }
};

written write(const kinetoscope::trace_data& d, std::string trace_name = example_path) {
  written w;
  w.text = kinetoscope::chrome_trace_string(d, {.trace_name = std::move(trace_name)});
  w.doc = ordered_json::parse(w.text);
  return w;
}

std::vector<ordered_json> select(const ordered_json& events, const std::string& ph,
                                 const std::string& cat = "", const std::string& name = "") {
  std::vector<ordered_json> out;
  for (const auto& e : events) {
    if (e.value("ph", "") != ph) continue;
    if (!cat.empty() && e.value("cat", "") != cat) continue;
    if (!name.empty() && e.value("name", "") != name) continue;
    out.push_back(e);
  }
  return out;
}

ordered_json one(const ordered_json& events, const std::string& ph, const std::string& cat,
                 const std::string& name) {
  const auto found = select(events, ph, cat, name);
  REQUIRE_MESSAGE(found.size() == 1, ph << " " << cat << " " << name << ": " << found.size());
  return found.front();
}

std::vector<std::string> keys_of(const ordered_json& obj) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : obj.items()) keys.push_back(k);
  return keys;
}

/// The raw text of every value of `"key":` in the document.
std::vector<std::string> raw_values(const std::string& text, const std::string& key) {
  std::vector<std::string> out;
  const std::regex re("\"" + key + "\":\\s*([^,}\\s]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1].str());
  }
  return out;
}

}  // namespace

TEST_CASE("chrome_trace: top-level keys, their order and values") {
  const written w = write(example_trace());
  CHECK(w.text.rfind("{\n  \"schemaVersion\": 1,", 0) == 0);
  CHECK(keys_of(w.doc) == std::vector<std::string>{"schemaVersion", "deviceProperties",
                                                   "record_shapes", "profile_memory", "username",
                                                   "config", "broken", "distributedInfo",
                                                   "displayTimeUnit", "baseTimeNanoseconds",
                                                   "traceEvents", "traceName"});
  CHECK(w.doc["schemaVersion"] == 1);
  CHECK(w.doc["record_shapes"] == 1);
  CHECK(w.doc["profile_memory"] == 1);
  CHECK(w.doc["displayTimeUnit"] == "ms");
  CHECK(w.doc["baseTimeNanoseconds"].get<std::int64_t>() == kinetoscope::base_time_ns());
  CHECK(kinetoscope::base_time_ns() % (std::int64_t{7889238} * 1000000000) == 0);
  // traceName: backslashes become '/'.
  CHECK(w.doc["traceName"] == "C:/log/myhost_4242.1760500000123.pt.trace.json");

  // User metadata: verbatim JSON, invalid text as a string, a repeated key once with its last
  // value, keys the writer owns never overridden.
  CHECK(w.doc["username"] == "bob");
  CHECK(w.doc["config"] == ordered_json::parse(R"js({"lr": 0.1, "layers": [1, 2]})js"));
  CHECK(w.doc["broken"] == "{not json");
  CHECK(w.text.find("must not override") == std::string::npos);
}

TEST_CASE("chrome_trace: distributedInfo keeps the space after the colon of rank") {
  const written w = write(example_trace());
  CHECK(w.text.find("\"rank\": 0") != std::string::npos);
  CHECK(w.text.find("\"rank\":0") == std::string::npos);
  CHECK(std::regex_search(w.text, std::regex("\"rank\":\\s+(\\d+)")));  // HTA's regex
  CHECK(w.doc["distributedInfo"] ==
        ordered_json::parse(R"js({"backend": "nccl", "rank": 0, "world_size": 1})js"));

  auto d = example_trace();
  d.distributed = kinetoscope::distributed_info{"gloo", 3, 8};
  const written w3 = write(d);
  CHECK(w3.text.find("\"rank\": 3") != std::string::npos);
  CHECK(w3.doc["distributedInfo"]["backend"] == "gloo");
  CHECK(w3.doc["distributedInfo"]["world_size"] == 8);

  d.distributed.reset();
  CHECK_FALSE(write(d).doc.contains("distributedInfo"));
}

TEST_CASE("chrome_trace: deviceProperties, array index = device id") {
  const written w = write(example_trace());
  const auto& props = w.doc["deviceProperties"];
  REQUIRE(props.size() == 2);
  CHECK(props[0] == ordered_json::parse(R"js({
      "id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 84974239744,
      "computeMajor": 8, "computeMinor": 0,
      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
      "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 108,
      "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 166912,
      "sharedMemPerMultiprocessor": 167936})js"));
  CHECK(keys_of(props[0]).front() == "id");
  CHECK(props[1]["id"] == 1);

  // Only device 2 known: entries 0 and 1 are placeholders so that index == id still holds.
  auto d = example_trace();
  d.devices.erase(d.devices.begin());
  d.devices[0].id = 2;
  const written w2 = write(d);
  REQUIRE(w2.doc["deviceProperties"].size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(w2.doc["deviceProperties"][i]["id"] == i);
  CHECK(w2.doc["deviceProperties"][0]["name"] == "");
  CHECK(w2.doc["deviceProperties"][2]["name"] == "NVIDIA A100-SXM4-80GB");
}

TEST_CASE("chrome_trace: option flags only when true") {
  auto d = example_trace();
  d.record_shapes = false;
  d.with_flops = true;
  d.with_stack = true;
  const written w = write(d);
  CHECK_FALSE(w.doc.contains("record_shapes"));
  CHECK(w.doc["profile_memory"] == 1);
  CHECK(w.doc["with_flops"] == 1);
  CHECK(w.doc["with_stack"] == 1);
  CHECK_FALSE(w.doc.contains("with_modules"));
  CHECK(w.text.find(": 0,\n  \"") == std::string::npos);  // never "flag": 0
}

TEST_CASE("chrome_trace: every ts and dur has exactly three decimals") {
  const written w = write(example_trace());
  const std::regex three("^\\d+\\.\\d{3}$");
  const auto ts = raw_values(w.text, "ts");
  const auto dur = raw_values(w.text, "dur");
  CHECK(ts.size() == w.events().size());  // every event has a ts
  CHECK(dur.size() == select(w.events(), "X").size());
  for (const auto& v : ts) {
    CAPTURE(v);
    CHECK(std::regex_match(v, three));
  }
  for (const auto& v : dur) {
    CAPTURE(v);
    CHECK(std::regex_match(v, three));
  }
  CHECK(w.text.find("\"ts\":1010.000,\"dur\":380.000") != std::string::npos);
  CHECK(w.text.find("\"ts\":1075.000,\"dur\":12.500") != std::string::npos);
}

TEST_CASE("chrome_trace: cpu_op and user_annotation events") {
  const written w = write(example_trace());
  const auto& ev = w.events();

  const auto step = one(ev, "X", "user_annotation", "ProfilerStep#3");
  CHECK(keys_of(step) ==
        std::vector<std::string>{"ph", "cat", "name", "pid", "tid", "ts", "dur", "args"});
  CHECK(step["pid"] == 4242);
  CHECK(step["tid"] == 4242);
  CHECK(step["ts"].get<double>() == 1010.0);
  CHECK(step["dur"].get<double>() == 380.0);
  CHECK(step["args"] ==
        ordered_json::parse(R"js({"External id": 10, "Record function id": 0, "Ev Idx": 0})js"));

  const auto addmm = one(ev, "X", "cpu_op", "aten::addmm");
  CHECK(addmm["args"] == ordered_json::parse(R"js({
      "External id": 14, "Record function id": 0, "Sequence number": 7, "Fwd thread id": 0,
      "Input Dims": [[64], [32, 128], [128, 64], [], []],
      "Input type": ["float", "float", "float", "Scalar", "Scalar"],
      "Input Strides": [[1], [128, 1], [1, 128], [], []],
      "Concrete Inputs": ["", "", "", "1", "1"], "Ev Idx": 4})js"));
  CHECK(keys_of(addmm["args"]).back() == "Ev Idx");

  const auto copy = one(ev, "X", "cpu_op", "aten::copy_");
  CHECK(copy["args"]["Concrete Inputs"] == ordered_json::parse(R"js(["", "", "False"])js"));
  CHECK_FALSE(copy["args"].contains("Sequence number"));
  CHECK_FALSE(copy["args"].contains("Fwd thread id"));

  const auto bwd = one(ev, "X", "cpu_op", "AddmmBackward0");
  CHECK(bwd["tid"] == 4250);
  CHECK(bwd["args"] == ordered_json::parse(R"js({
      "External id": 31, "Record function id": 0, "Sequence number": 7, "Fwd thread id": 1,
      "Ev Idx": 8})js"));
  // No inputs: no shape keys at all.
  CHECK_FALSE(bwd["args"].contains("Input Dims"));
}

TEST_CASE("chrome_trace: \"Call stack\" joins frames innermost first with ';' (with_stack)") {
  kinetoscope::trace_data d = example_trace();
  d.with_stack = true;
  const auto frame = [&d](const char* text) { d.frames.push_back(d.intern(text)); };
  for (kinetoscope::cpu_event& e : d.events) {
    const std::string_view name = d.str(e.name);
    if (name == "aten::addmm") {
      e.first_frame = static_cast<std::uint32_t>(d.frames.size());
      e.frame_count = 3;
      frame("/src/model.cpp(42): net::linear");
      frame("/src/model.cpp(17): net::forward");
      frame("train.cpp(9): main");
    } else if (name == "my_block") {
      e.first_frame = static_cast<std::uint32_t>(d.frames.size());
      e.frame_count = 1;
      frame("a \"quoted\" \\ path.cpp(1): f");
    }
  }
  const written w = write(d);
  const auto& ev = w.events();
  const auto addmm = one(ev, "X", "cpu_op", "aten::addmm");
  CHECK(addmm["args"]["Call stack"] ==
        "/src/model.cpp(42): net::linear;/src/model.cpp(17): net::forward;train.cpp(9): main");
  // After the inputs, before Ev Idx.
  const std::vector<std::string> keys = keys_of(addmm["args"]);
  REQUIRE(keys.size() >= 2);
  CHECK(keys[keys.size() - 2] == "Call stack");
  CHECK(w.text.find(R"("Concrete Inputs":["","","","1","1"],"Call stack":"/src/model.cpp(42): net::linear;)") !=
        std::string::npos);
  CHECK(one(ev, "X", "user_annotation", "my_block")["args"]["Call stack"] == "a \"quoted\" \\ path.cpp(1): f");
  // Events without frames have no "Call stack" at all (never "").
  CHECK_FALSE(one(ev, "X", "cpu_op", "aten::copy_")["args"].contains("Call stack"));
  CHECK(w.doc["with_stack"] == 1);
}

TEST_CASE("chrome_trace: [memory] instants") {
  const written w = write(example_trace());
  const auto mem = select(w.events(), "i", "cpu_instant_event", "[memory]");
  REQUIRE(mem.size() == 3);
  CHECK(keys_of(mem[0]) ==
        std::vector<std::string>{"ph", "cat", "s", "name", "pid", "tid", "ts", "args"});
  CHECK(mem[0]["s"] == "t");
  CHECK(mem[0]["ts"].get<double>() == 1050.0);
  CHECK(mem[0]["args"] == ordered_json::parse(R"js({
      "Ev Idx": 10, "Device Type": 1, "Device Id": 0, "Addr": 139872456392704, "Bytes": 8192,
      "Total Allocated": 1056768, "Total Reserved": 2097152})js"));
  CHECK(mem[2]["args"]["Bytes"] == -16384);
  CHECK(mem[2]["args"]["Device Id"] == -1);
  CHECK(mem[2]["args"]["Device Type"] == 0);
}

TEST_CASE("chrome_trace: Ev Idx is unique and 0-based over cpu events and [memory]") {
  const written w = write(example_trace());
  std::vector<int> idx;
  for (const auto& e : w.events()) {
    const std::string cat = e.value("cat", "");
    const bool pytorch = cat == "cpu_op" || cat == "user_annotation" || cat == "cpu_instant_event";
    if (e.contains("args") && e["args"].contains("Ev Idx")) {
      CHECK(pytorch);
      idx.push_back(e["args"]["Ev Idx"].get<int>());
    } else {
      CHECK_FALSE(pytorch);
    }
  }
  CHECK(idx.size() == 13);
  for (std::size_t i = 0; i < idx.size(); ++i)
    CHECK(idx[i] == static_cast<int>(i));  // output order
}

TEST_CASE("chrome_trace: runtime calls and ac2g flows") {
  const written w = write(example_trace());
  const auto& ev = w.events();

  const auto launches = select(ev, "X", "cuda_runtime", "cudaLaunchKernel");
  REQUIRE(launches.size() == 2);
  CHECK(launches[0]["args"] ==
        ordered_json::parse(R"js({"External id": 14, "cbid": 211, "correlation": 501})js"));
  // No enclosing op: no External id; not a flow call: no ac2g.
  const auto capturing = one(ev, "X", "cuda_runtime", "cudaStreamIsCapturing");
  CHECK(capturing["args"] == ordered_json::parse(R"js({"cbid": 317, "correlation": 500})js"));
  const auto driver = one(ev, "X", "cuda_driver", "cuLaunchKernel");
  CHECK(driver["args"] == ordered_json::parse(R"js({"cbid": 307, "correlation": 506})js"));

  // Every s has exactly one f with the same id, cat and name; f binds with bp "e"; s has no bp.
  const auto starts = select(ev, "s", "ac2g");
  const auto ends = select(ev, "f", "ac2g");
  CHECK(starts.size() == 6);
  CHECK(ends.size() == 6);
  std::set<std::int64_t> ids;
  for (const auto& s : starts) {
    CHECK(keys_of(s) == std::vector<std::string>{"ph", "id", "pid", "tid", "ts", "cat", "name"});
    CHECK(s["name"] == "ac2g");
    const std::int64_t id = s["id"];
    ids.insert(id);
    int matches = 0;
    for (const auto& f : ends) {
      if (f["id"] == id && f["cat"] == s["cat"] && f["name"] == s["name"]) ++matches;
    }
    CHECK(matches == 1);
    // s sits on its runtime slice: same pid/tid, ts = its start.
    bool on_slice = false;
    for (const auto& r : ev) {
      if (r.value("ph", "") == "X" && r.contains("args") &&
          r["args"].value("correlation", -1) == id &&
          (r["cat"] == "cuda_runtime" || r["cat"] == "cuda_driver")) {
        on_slice = r["pid"] == s["pid"] && r["tid"] == s["tid"] && r["ts"] == s["ts"];
      }
    }
    CHECK(on_slice);
  }
  CHECK(ids == std::set<std::int64_t>{501, 502, 503, 504, 506, 507});
  for (const auto& f : ends) {
    CHECK(keys_of(f) ==
          std::vector<std::string>{"ph", "id", "pid", "tid", "ts", "cat", "name", "bp"});
    CHECK(f["bp"] == "e");
    // f sits on its GPU slice: pid = device, tid = stream, ts = GPU start.
    bool on_slice = false;
    for (const auto& g : ev) {
      const std::string cat = g.value("cat", "");
      if ((cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") &&
          g["args"]["correlation"] == f["id"]) {
        on_slice = g["pid"] == f["pid"] && g["tid"] == f["tid"] && g["ts"] == f["ts"];
      }
    }
    CHECK(on_slice);
  }
  CHECK_FALSE(w.text.find("\"bp\":\"e\"") == std::string::npos);
}

TEST_CASE("chrome_trace: kernels, memcpy and memset") {
  const written w = write(example_trace());
  const auto& ev = w.events();
  const auto k = one(ev, "X", "kernel", "ampere_sgemm_32x32_sliced1x4_tn");
  CHECK(k["pid"] == 0);
  CHECK(k["tid"] == 7);
  CHECK(k["args"] == ordered_json::parse(R"js({
      "External id": 14, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": 501,
      "registers per thread": 86, "shared memory": 16384, "blocks per SM": 0.074074,
      "warps per SM": 0.296296, "grid": [8, 1, 1], "block": [128, 1, 1],
      "est. achieved occupancy %": 0})js"));
  CHECK(keys_of(k["args"]) == std::vector<std::string>{"External id", "queued", "device", "context",
                                                       "stream", "correlation",
                                                       "registers per thread", "shared memory",
                                                       "blocks per SM", "warps per SM", "grid",
                                                       "block", "est. achieved occupancy %"});

  // A kernel literally named "kernel" is written "Kernel"; no External id when 0.
  CHECK(select(ev, "X", "kernel", "kernel").empty());
  const auto renamed = one(ev, "X", "kernel", "Kernel");
  CHECK(renamed["pid"] == 1);
  CHECK(renamed["tid"] == 3);
  CHECK_FALSE(renamed["args"].contains("External id"));
  CHECK(renamed["args"]["est. achieved occupancy %"] == 3);

  const auto cp = one(ev, "X", "gpu_memcpy", "Memcpy HtoD (Pageable -> Device)");
  CHECK(cp["args"] == ordered_json::parse(R"js({
      "External id": 15, "device": 0, "context": 1, "stream": 7, "correlation": 502,
      "bytes": 16384, "memory bandwidth (GB/s)": 1.0922666666666667})js"));
  const auto ms = one(ev, "X", "gpu_memset", "Memset (Device)");
  CHECK(ms["dur"].get<double>() == 1.5);
  CHECK(ms["args"]["memory bandwidth (GB/s)"].get<double>() == 8192.0 / 1500.0);
  // Zero duration: the bandwidth is undefined and omitted.
  const auto cp0 = one(ev, "X", "gpu_memcpy", "Memcpy DtoH (Device -> Pageable)");
  CHECK(cp0["dur"].get<double>() == 0.0);
  CHECK_FALSE(cp0["args"].contains("memory bandwidth (GB/s)"));
  CHECK(cp0["args"]["bytes"] == 4);
}

TEST_CASE("chrome_trace: non-finite kernel figures are written as 0") {
  auto d = example_trace();
  d.gpu[0].blocks_per_sm = std::nan("");
  d.gpu[0].warps_per_sm = std::numeric_limits<double>::infinity();
  const written w = write(d);
  const auto k = one(w.events(), "X", "kernel", "ampere_sgemm_32x32_sliced1x4_tn");
  CHECK(k["args"]["blocks per SM"] == 0);
  CHECK(k["args"]["warps per SM"] == 0);
  CHECK(w.text.find("nan") == std::string::npos);
  CHECK(w.text.find("inf") == std::string::npos);
}

TEST_CASE("chrome_trace: fwdbwd flow from the forward op to the first backward node") {
  const written w = write(example_trace());
  const auto s = select(w.events(), "s", "fwdbwd");
  const auto f = select(w.events(), "f", "fwdbwd");
  REQUIRE(s.size() == 1);
  REQUIRE(f.size() == 1);
  CHECK(
      s[0] ==
      ordered_json::parse(
          R"js({"ph": "s", "id": 1, "pid": 4242, "tid": 4242, "ts": 1040.000, "cat": "fwdbwd", "name": "fwdbwd"})js"));
  // On AddmmBackward0 (it ends first), not on the evaluate_function wrapper.
  CHECK(
      f[0] ==
      ordered_json::parse(
          R"js({"ph": "f", "id": 1, "pid": 4242, "tid": 4250, "ts": 1252.000, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"})js"));
}

TEST_CASE("chrome_trace: fwdbwd keys, latest forward wins, ids in end order") {
  using namespace kinetoscope;
  trace_data d;
  d.strings = {""};
  d.pid = 1;
  const auto op = [&d](const char* name, double s, double e, std::int64_t tid, std::int64_t seq,
                       std::int64_t fwd) {
    cpu_event ev;
    ev.name = d.intern(name);
    ev.start_ns = at_us(s);
    ev.end_ns = at_us(e);
    ev.tid = tid;
    ev.sequence_nr = seq;
    ev.fwd_thread_id = fwd;
    return ev;
  };
  d.events = {op("fwd_a_old", 10, 20, 1, 5, 0), op("fwd_b", 15, 18, 1, 6, 0),
              op("fwd_a_new", 30, 40, 2, 5, 0), op("bwd_b", 50, 55, 3, 6, 1),
              op("bwd_a", 52, 60, 3, 5, 1),     op("bwd_a_again", 61, 62, 3, 5, 1),
              op("no_seq", 70, 71, 3, -1, 0),   op("bwd_missing", 72, 73, 3, 99, 1)};
  const written w = write(d);
  const auto s = select(w.events(), "s", "fwdbwd");
  const auto f = select(w.events(), "f", "fwdbwd");
  REQUIRE(s.size() == 2);
  REQUIRE(f.size() == 2);
  std::map<std::int64_t, std::pair<double, double>> by_id;  // id -> (s.ts, f.ts)
  for (const auto& e : s) by_id[e["id"].get<std::int64_t>()].first = e["ts"].get<double>();
  for (const auto& e : f) by_id[e["id"].get<std::int64_t>()].second = e["ts"].get<double>();
  // bwd_b ends first (55) -> id 1: fwd_b (15) -> bwd_b (50).
  CHECK(by_id[1] == std::pair(15.0, 50.0));
  // bwd_a ends at 60 -> id 2: the latest forward with seq 5 (fwd_a_new at 30, thread 2).
  CHECK(by_id[2] == std::pair(30.0, 52.0));
  for (const auto& e : s) {
    if (e["id"] == 2) CHECK(e["tid"] == 2);
  }
}

TEST_CASE("chrome_trace: gpu_user_annotation projects the innermost annotation per stream") {
  const written w = write(example_trace());
  const auto ann = select(w.events(), "X", "gpu_user_annotation");
  REQUIRE(ann.size() == 3);
  CHECK(ann[0] ==
        ordered_json::parse(R"js({"ph": "X", "cat": "gpu_user_annotation", "name": "my_block",
      "pid": 0, "tid": 7, "ts": 1074.999, "dur": 86.502, "args": {"External id": 11}})js"));
  CHECK(ann[1] ==
        ordered_json::parse(R"js({"ph": "X", "cat": "gpu_user_annotation", "name": "my_block",
      "pid": 1, "tid": 3, "ts": 1189.999, "dur": 5.002, "args": {"External id": 11}})js"));
  // ProfilerStep#3 only covers the work launched outside my_block (the DtoH copy).
  CHECK(ann[2] ==
        ordered_json::parse(R"js({"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#3",
      "pid": 0, "tid": 7, "ts": 1234.999, "dur": 0.002, "args": {"External id": 10}})js"));
  CHECK(w.text.find("\"ts\":1074.999,\"dur\":86.502") != std::string::npos);

  // No GPU work: no projection.
  auto d = example_trace();
  d.gpu.clear();
  CHECK(select(write(d).events(), "X", "gpu_user_annotation").empty());
}

TEST_CASE("chrome_trace: metadata for every pid and tid, stream names with a trailing space") {
  const written w = write(example_trace());
  const auto& ev = w.events();
  std::map<std::pair<std::string, std::string>, std::string> meta;  // (name, "pid/tid") -> arg
  for (const auto& e : select(ev, "M")) {
    CHECK(keys_of(e) == std::vector<std::string>{"name", "ph", "ts", "pid", "tid", "args"});
    CHECK(e["ts"].get<double>() == 1000.0);
    const std::string where = e["pid"].dump() + "/" + e["tid"].dump();
    meta[{e["name"].get<std::string>(), where}] = e["args"].begin().value().dump();
  }
  CHECK(meta[{"process_name", "4242/0"}] == "\"python3.11\"");
  CHECK(meta[{"process_labels", "4242/0"}] == "\"CPU\"");
  CHECK(meta[{"process_sort_index", "4242/0"}] == "4242");
  CHECK(meta[{"process_name", "0/0"}] == "\"python3.11\"");
  CHECK(meta[{"process_labels", "0/0"}] == "\"GPU 0\"");
  CHECK(meta[{"process_sort_index", "0/0"}] == "5000000");
  CHECK(meta[{"process_labels", "1/0"}] == "\"GPU 1\"");
  CHECK(meta[{"process_sort_index", "1/0"}] == "5000001");
  CHECK(meta[{"thread_name", "4242/4242"}] == "\"thread 4242 (python3.11)\"");
  CHECK(meta[{"thread_sort_index", "4242/4242"}] == "4242");
  CHECK(meta[{"thread_name", "4242/4250"}] == "\"thread 4250 (pt_autograd_0)\"");
  CHECK(meta[{"thread_name", "0/7"}] == "\"stream 7 \"");
  CHECK(meta[{"thread_sort_index", "0/7"}] == "7");
  CHECK(meta[{"thread_name", "1/3"}] == "\"stream 3 \"");
  CHECK(meta[{"process_sort_index", "\"Spans\"/0"}] == "536870912");

  // Every pid/tid of an activity event has a process_name and a thread_name.
  for (const auto& e : ev) {
    const std::string ph = e["ph"];
    if (ph == "M" || e["pid"].is_string()) continue;
    CAPTURE(e.dump());
    CHECK(meta.count({"process_name", e["pid"].dump() + "/0"}) == 1);
    CHECK(meta.count({"thread_name", e["pid"].dump() + "/" + e["tid"].dump()}) == 1);
  }
}

TEST_CASE("chrome_trace: a thread without thread_info is named after the process") {
  auto d = example_trace();
  d.threads.pop_back();    // 4250 loses its name
  d.memory[1].tid = 4300;  // and a tid that only a memory event uses
  const written w = write(d);
  std::set<std::string> names;
  for (const auto& e : select(w.events(), "M")) {
    if (e["name"] == "thread_name") names.insert(e["args"]["name"].get<std::string>());
  }
  CHECK(names == std::set<std::string>{"thread 4242 (python3.11)", "thread 4250 (python3.11)",
                                       "thread 4300 (python3.11)", "stream 7 ", "stream 3 "});
}

TEST_CASE("chrome_trace: span, Iteration Start and Record Window End close the events") {
  const written w = write(example_trace());
  const auto& ev = w.events();
  REQUIRE(ev.size() >= 4);
  const std::size_t n = ev.size();
  CHECK(ev[n - 4] ==
        ordered_json::parse(R"js({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)",
      "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1000.000, "dur": 400.000, "args": {"Op count": 0}})js"));
  CHECK(ev[n - 3] ==
        ordered_json::parse(R"js({"name": "process_sort_index", "ph": "M", "ts": 1000.000,
      "pid": "Spans", "tid": 0, "args": {"sort_index": 536870912}})js"));
  CHECK(ev[n - 2] ==
        ordered_json::parse(R"js({"ph": "i", "s": "g", "name": "Iteration Start: PyTorch Profiler",
      "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": 1000.000})js"));
  CHECK(ev[n - 1] == ordered_json::parse(R"js({"ph": "i", "s": "g", "name": "Record Window End",
      "pid": "", "tid": "", "ts": 1400.000})js"));
  // Metadata come after every activity event.
  bool seen_meta = false;
  for (std::size_t i = 0; i + 4 < n; ++i) {
    if (ev[i]["ph"] == "M")
      seen_meta = true;
    else
      CHECK_FALSE(seen_meta);
  }
  CHECK(seen_meta);
}

TEST_CASE("chrome_trace: consumer hard requirements (tb-plugin, HTA; trace-format.md#consumer-requirements)") {
  const written w = write(example_trace());
  int x_events = 0;
  for (const auto& e : w.events()) {
    CAPTURE(e.dump());
    REQUIRE(e.is_object());
    CHECK(e.contains("name"));
    CHECK(e.contains("ph"));
    CHECK(e.contains("pid"));
    CHECK(e.contains("tid"));
    if (e.contains("args")) CHECK_FALSE(e["args"].empty());  // never "args": {}
    const std::string ph = e["ph"];
    if (ph == "X") {
      ++x_events;
      CHECK(e["cat"].is_string());
      CHECK(e["name"].is_string());
      CHECK(e["ts"].is_number());
      CHECK(e["dur"].is_number());
      CHECK(e["dur"].get<double>() >= 0);
      CHECK(e["ts"].get<double>() >= 0);
      const std::string cat = e["cat"];
      if (cat == "cpu_op" || cat == "user_annotation") CHECK(e["tid"].is_number_integer());
      if (cat == "kernel") {
        CHECK(e["pid"] == e["args"]["device"]);
        CHECK(e["tid"] == e["args"]["stream"]);
      }
    }
    if (ph == "s" || ph == "f") {
      CHECK(e.contains("id"));
      CHECK(e.contains("ts"));
      CHECK_FALSE(e.contains("args"));
    }
    if (ph == "i" && e.value("s", "") == "g") CHECK_FALSE(e.contains("args"));
  }
  CHECK(x_events == 10 + 7 + 6 + 3 + 1);
}

TEST_CASE("chrome_trace: a trace with no events is a valid file") {
  kinetoscope::trace_data empty;
  const std::string text = kinetoscope::chrome_trace_string(empty);
  const ordered_json doc = ordered_json::parse(text);
  CHECK(doc["deviceProperties"] == ordered_json::array());
  CHECK(text.find("\"deviceProperties\": [],") != std::string::npos);
  CHECK(doc["traceName"] == "");
  CHECK_FALSE(doc.contains("distributedInfo"));
  CHECK_FALSE(doc.contains("record_shapes"));
  const auto& ev = doc["traceEvents"];
  // process metadata for the CPU pid, then the span and the two instants.
  REQUIRE(ev.size() == 7);
  CHECK(ev[0]["name"] == "process_name");
  CHECK(ev[0]["args"]["name"] == "process 0");
  CHECK(ev[6]["name"] == "Record Window End");
  CHECK(ev[6]["ts"].get<double>() == 0.0);

  kinetoscope::trace_data only_strings;
  only_strings.strings = {""};
  CHECK(ordered_json::accept(kinetoscope::chrome_trace_string(only_strings)));
}

TEST_CASE("chrome_trace: names are sanitised, bad ids and times are tolerated") {
  using namespace kinetoscope;
  trace_data d;
  d.strings = {"", "C:\\models\\net.py(12): forward\nline2", "bad\xFF\xC0utf8 \"q\" \x01"};
  d.pid = -77;  // negative OS ids are written as their absolute value
  d.process_name = "proc\\name";
  d.threads = {{-5, "we\"ird\nthread"}};
  cpu_event a;
  a.name = 1;
  a.tid = -5;
  a.start_ns = 10;  // far before baseTimeNanoseconds: clamped to 0
  a.end_ns = 5;     // negative duration: clamped to 0
  a.external_id = 1;
  cpu_event b = a;
  b.name = 2;
  cpu_event c = a;
  c.name = 999;  // not in the table
  d.events = {a, b, c};
  d.events[0].input_count = 2;  // inputs out of range: ignored
  d.events[0].first_input = 7;
  d.metadata = {{"k\"ey\n", "[1, 2"}};
  const std::string text = chrome_trace_string(d, {.trace_name = "x\\y.json"});
  const json doc = json::parse(text);
  const auto& ev = doc["traceEvents"];
  CHECK(ev[0]["name"] == "C:/models/net.py(12): forwardline2");
  CHECK(ev[0]["pid"] == 77);
  CHECK(ev[0]["tid"] == 5);
  CHECK(ev[0]["ts"].get<double>() == 0.0);
  CHECK(ev[0]["dur"].get<double>() == 0.0);
  CHECK_FALSE(ev[0]["args"].contains("Input Dims"));
  CHECK(ev[1]["name"] == "bad\xEF\xBF\xBD\xEF\xBF\xBDutf8 \"q\" \x01");
  CHECK(ev[2]["name"] == "unknown");
  CHECK(doc["traceName"] == "x/y.json");
  CHECK(doc["k\"ey\n"] == "[1, 2");
  bool named = false;
  for (const auto& e : ev) {
    if (e["name"] == "thread_name") {
      CHECK(e["args"]["name"] == "thread 5 (we\"irdthread)");
      named = true;
    }
    if (e["name"] == "process_name") CHECK(e["args"]["name"] == "proc/name");
  }
  CHECK(named);
}

TEST_CASE("chrome_trace: without a window the span covers the events") {
  auto d = example_trace();
  d.start_ns = 0;
  d.end_ns = 0;
  const written w = write(d);
  const auto span = one(w.events(), "X", "Trace", "PyTorch Profiler (0)");
  CHECK(span["ts"].get<double>() == 1010.0);  // ProfilerStep#3 starts first
  CHECK(span["dur"].get<double>() == 1390.0 - 1010.0);
}

TEST_CASE("chrome_trace: output is deterministic and identical through any sink") {
  const auto d = example_trace();
  const std::string a = kinetoscope::chrome_trace_string(d);
  const std::string b = kinetoscope::chrome_trace_string(d);
  CHECK(a == b);

  struct chunky_sink final : kinetoscope::byte_sink {
    std::string text;
    int finishes = 0;
    void write(const char* p, std::size_t n) override { text.append(p, n); }
    void finish() override { ++finishes; }
  } sink;
  kinetoscope::write_chrome_trace(d, sink);
  CHECK(sink.text == a);
  CHECK(sink.finishes == 1);
}
