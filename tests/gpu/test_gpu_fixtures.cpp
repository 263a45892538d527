// SPDX-License-Identifier: BSD-3-Clause
// What the GPU check brought back from an NVIDIA H200 (tests/data/gpu/README.md), kept as tests
// that need no GPU:
//   - kinetoscope's own CUPTI traces pass every check of gpu_trace_check, and each check
//     rejects an altered copy of them (so none of them passes by construction);
//   - real PyTorch 2.11 traces (ResNet-18 with AMP and every profiler option, a gloo DDP pair)
//     give the numbers below in `kinetoscope analyze --json`, with the plugin's rules and with
//     kinetoscope's default rules (formerly --improved). Each number was checked once by hand against the trace (see the comments):
//     kernel sums per step from the merged kernel intervals, step bounds from ProfilerStep#N
//     and the GPU work they launched, operator device time from the External ids.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../run_command.hpp"
#include "analysis/loader.hpp"
#include "server/timeline.hpp"
#include "trace_check.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
namespace gc = kinetoscope::gpu_check;

namespace {

fs::path data_dir() {
  const char* d = std::getenv("KINETOSCOPE_TEST_DATA");
  REQUIRE(d != nullptr);
  return fs::path(d) / "gpu";
}

struct run_data {
  json truth;
  std::vector<json> traces;
};

run_data load_run(const fs::path& dir) {
  run_data r;
  if (fs::exists(dir / "truth.json")) r.truth = gc::read_json((dir / "truth.json").string());
  for (const std::string& f : gc::trace_files(dir.string())) r.traces.push_back(gc::read_json(f));
  return r;
}

std::map<std::string, gc::check_line> by_name(const std::vector<gc::check_line>& lines) {
  std::map<std::string, gc::check_line> m;
  for (const auto& l : lines) m[l.name] = l;
  return m;
}

/// The verdict of one check on window 1 after `alter` changed that window's trace.
template <class Alter>
gc::check_line altered(const std::string& check, Alter alter) {
  run_data r = load_run(data_dir() / "kinetoscope-h200" / "cuda_stress_small");
  alter(r.traces.at(0));
  return by_name(gc::check_run(r.truth, r.traces))["window 1 " + check];
}

/// Index in traceEvents of the first event with this category whose name contains `part`.
std::size_t find_event(const json& trace, const std::string& cat, const std::string& part) {
  const json& ev = trace["traceEvents"];
  for (std::size_t i = 0; i < ev.size(); ++i)
    if (ev[i].value("cat", "") == cat && ev[i].value("name", "").find(part) != std::string::npos) return i;
  FAIL("no " << cat << " event named *" << part << "*");
  return 0;
}

json analyze(const std::string& args) {
  const char* bin = std::getenv("KINETOSCOPE_BIN");
  REQUIRE(bin != nullptr);
  const kinetoscope::test::command_result r = kinetoscope::test::run_command(std::string(bin) + " analyze --json " + args);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  return json::parse(r.output);
}

double device_self_sum(const json& doc) {
  double sum = 0;
  for (const json& o : doc["operators"]["by_name"]) sum += o["device_self_us"].get<double>();
  return sum;
}

const json* op_row(const json& doc, const std::string& name) {
  for (const json& o : doc["operators"]["by_name"])
    if (o["name"] == name) return &o;
  return nullptr;
}

std::vector<std::string> step_names(const json& doc) {
  std::vector<std::string> names;
  for (const json& s : doc["overview"]["steps"]) names.push_back(s["name"].get<std::string>());
  return names;
}

std::string quoted(const fs::path& p) {
  std::string q = "'";  // appended, not '+'-ed: GCC 12 warns (-Wrestrict) about "'" + string
  q += p.string();
  q += '\'';
  return q;
}

}  // namespace

TEST_CASE("GPU fixtures: kinetoscope's CUPTI traces from an H200 pass every check") {
  const run_data r = load_run(data_dir() / "kinetoscope-h200" / "cuda_stress_small");
  REQUIRE(r.traces.size() == 3);
  CHECK(r.truth["gpu"] == "NVIDIA H200");
  const auto lines = gc::check_run(r.truth, r.traces);
  CHECK(lines.size() == 1 + 3 * 6);  // windows, then counts/external/flows/timing/window/device each
  for (const auto& l : lines) CHECK_MESSAGE(l.pass, l.name << ": " << l.detail);
  const auto m = by_name(lines);
  for (const char* w : {"window 1 ", "window 2 ", "window 3 "}) {
    CHECK(m.at(std::string(w) + "counts").detail ==
          "96 stress kernels + 16 cuBLAS kernels (8 GEMMs), memcpy HtoD/DtoH/DtoD 4/4/4, 8 memsets, 0 lost");
    CHECK(m.at(std::string(w) + "external").detail == "132 of 132 GPU records carry the External id of their op");
    CHECK(m.at(std::string(w) + "flows").detail ==
          "112 of 112 kernels with a matched ac2g flow to their launch; copies/memsets 20 of 20; 0 flow starts "
          "without an end");
  }
}

TEST_CASE("GPU fixtures: each CUPTI check rejects a trace altered against it") {
  SUBCASE("a lost kernel") {
    const auto l = altered("counts", [](json& t) { t["traceEvents"].erase(find_event(t, "kernel", "stress_fill")); });
    CHECK_FALSE(l.pass);
    CHECK(l.detail.starts_with("stress_fill 19 of 20; "));
  }
  SUBCASE("a duplicated kernel") {
    const auto l = altered("counts", [](json& t) {
      const json k = t["traceEvents"][find_event(t, "kernel", "stress_tiny")];
      t["traceEvents"].push_back(k);
    });
    CHECK_FALSE(l.pass);
    CHECK(l.detail.find("1 duplicated correlation ids") != std::string::npos);
  }
  SUBCASE("a lost memcpy") {
    const auto l = altered("counts", [](json& t) { t["traceEvents"].erase(find_event(t, "gpu_memcpy", "DtoD")); });
    CHECK_FALSE(l.pass);
    CHECK(l.detail.starts_with("memcpy DtoD 3 of 4; "));
  }
  SUBCASE("a kernel without its External id") {
    const auto l = altered("external", [](json& t) {
      t["traceEvents"][find_event(t, "kernel", "stress_axpy")]["args"].erase("External id");
    });
    CHECK_FALSE(l.pass);
    CHECK(l.detail == "131 of 132 GPU records carry the External id of their op");
  }
  SUBCASE("a kernel attributed to the wrong op") {
    const auto l = altered("external", [](json& t) {
      const json mm_id = t["traceEvents"][find_event(t, "cpu_op", "aten::mm")]["args"]["External id"];
      t["traceEvents"][find_event(t, "kernel", "stress_reduce")]["args"]["External id"] = mm_id;
    });
    CHECK_FALSE(l.pass);
    CHECK(l.detail.find(", 1 in the wrong op (first: cuda_stress::stress_reduce(") != std::string::npos);
  }
  SUBCASE("a kernel without its flow end") {
    const auto l = altered("flows", [](json& t) {
      const json corr = t["traceEvents"][find_event(t, "kernel", "stress_fill")]["args"]["correlation"];
      json& ev = t["traceEvents"];
      for (std::size_t i = 0; i < ev.size(); ++i)
        if (ev[i].value("cat", "") == "ac2g" && ev[i]["ph"] == "f" && ev[i]["id"] == corr) {
          ev.erase(i);
          break;
        }
    });
    CHECK_FALSE(l.pass);
    CHECK(l.detail.starts_with("111 of 112 kernels"));
    CHECK(l.detail.ends_with("; 1 flow starts without an end"));
  }
  SUBCASE("a timed kernel 10 % longer than CUDA events said") {
    const auto l = altered("timing", [](json& t) {
      json& k = t["traceEvents"][find_event(t, "kernel", "stress_timed")];
      k["dur"] = k["dur"].get<double>() * 1.1;
    });
    CHECK_FALSE(l.pass);
  }
  SUBCASE("a copy after the window's last step") {
    const auto l = altered("window", [](json& t) {
      json& c = t["traceEvents"][find_event(t, "gpu_memcpy", "HtoD")];
      c["ts"] = c["ts"].get<double>() + 1e6;
    });
    CHECK_FALSE(l.pass);
    CHECK(l.detail.starts_with("131 of 132 GPU records inside the window's steps (worst "));
  }
  SUBCASE("another GPU's name") {
    const auto l = altered("device", [](json& t) { t["deviceProperties"][0]["name"] = "NVIDIA H100 80GB HBM3"; });
    CHECK_FALSE(l.pass);
  }
  SUBCASE("a lost window") {
    run_data r = load_run(data_dir() / "kinetoscope-h200" / "cuda_stress_small");
    r.traces.pop_back();
    CHECK_FALSE(by_name(gc::check_run(r.truth, r.traces))["windows"].pass);
  }
}

TEST_CASE("GPU fixtures: cuda_sample on an H200, checked without a truth file") {
  const run_data r = load_run(data_dir() / "kinetoscope-h200" / "cuda_sample");
  const auto m = by_name(gc::check_run(nullptr, r.traces));
  for (const auto& [name, l] : m) CHECK_MESSAGE(l.pass, name << ": " << l.detail);
  CHECK(m.at("window 1 counts").detail == "9 kernels, 6 memsets, 9 copies, 0 duplicated correlation ids");
  CHECK(m.at("window 1 device").detail == "deviceProperties[0].name \"NVIDIA H200\"");

  // Every GPU record of our own traces belongs to an operator, under either rule set: 2326.405 us
  // of kernels, copies and memsets (summed from the trace), rounded per operator.
  const fs::path trace = gc::trace_files((data_dir() / "kinetoscope-h200" / "cuda_sample").string()).at(0);
  for (const char* mode : {"--plugin_rules ", ""}) {
    const json doc = analyze(mode + quoted(trace));
    CHECK(device_self_sum(doc) == doctest::Approx(2326.4).epsilon(0.001));
    CHECK(step_names(doc) == std::vector<std::string>{"2", "3", "4"});
    CHECK(doc["overview"]["gpus"][0]["name"] == "NVIDIA H200");
    CHECK(doc["overview"]["gpus"][0]["compute_capability"] == "9.0");
  }
}

TEST_CASE("GPU fixtures: PyTorch 2.11 ResNet-18 (AMP, DataLoader, every profiler option) on an H200") {
  const fs::path trace = gc::trace_files((data_dir() / "pytorch-2.11-h200" / "resnet18").string()).at(0);
  const json plugin = analyze("--plugin_rules " + quoted(trace));
  const json improved = analyze(quoted(trace));  // kinetoscope's rules, the default

  for (const json* doc : {&plugin, &improved}) {
    // 518 kernels, 3264.336 us (sum of the trace's kernel durations); the table rounds each
    // kernel name's total to whole us.
    int calls = 0;
    double total = 0;
    for (const json& k : (*doc)["kernels"]["by_name"]) {
      calls += k["calls"].get<int>();
      total += k["total_us"].get<double>();
    }
    CHECK(calls == 518);
    CHECK(total == doctest::Approx(3264.3).epsilon(0.002));
    const json& gpu = (*doc)["overview"]["gpus"][0];
    CHECK(gpu["name"] == "NVIDIA H200");
    CHECK(gpu["memory_bytes"] == 150109880320);
    CHECK(gpu["utilization_pct"] == doctest::Approx(5.87));
    // [memory] events of the caching allocator: the GPU peak is 345.2 MiB allocated.
    bool gpu_memory = false;
    for (const json& d : (*doc)["memory"]["devices"]) {
      if (d["device"] != "GPU0") continue;
      gpu_memory = true;
      CHECK(d["peak_allocated_bytes"] == 361936384);
      CHECK(d["peak_reserved_bytes"] == 373293056);
    }
    CHECK(gpu_memory);
    REQUIRE((*doc)["modules"].size() == 1);
    CHECK((*doc)["modules"][0]["name"] == "ResNet_0");
    CHECK((*doc)["modules"][0]["occurrences"] == 2);
  }

  // Steps. Kineto writes ProfilerStep#N twice: on the host (user_annotation) and projected on
  // the GPU stream (gpu_user_annotation). The plugin takes both for steps; the GPU copy of #2
  // starts inside the host #2 and ends up an empty step, and the GPU copy of #3, last, is
  // dropped as a tail step. --improved ignores GPU annotations: the two host steps.
  CHECK(step_names(plugin) == std::vector<std::string>{"2", "2", "3"});
  CHECK(plugin["overview"]["steps"][1]["total"] == 0.0);
  CHECK(plugin["overview"]["notes"].size() == 1);
  CHECK(step_names(improved) == std::vector<std::string>{"2", "3"});
  CHECK(improved["overview"]["notes"].empty());
  // Host ProfilerStep#2 / #3 last 29434.638 / 25983.751 us; the merged kernel, memcpy and memset
  // intervals inside them cover 1628.673 / 1630.103, 121.472 / 120.96 and 40.188 / 39.972 us.
  const double total[] = {29434.638, 25983.751}, kernel[] = {1628.673, 1630.103}, memcpy[] = {121.472, 120.96},
               memset[] = {40.188, 39.972};
  for (int i = 0; i < 2; ++i) {
    const json& s = improved["overview"]["steps"][i];
    CHECK(s["total"].get<double>() == doctest::Approx(total[i]).epsilon(1e-7));
    CHECK(s["kernel"].get<double>() == doctest::Approx(kernel[i]).epsilon(1e-6));
    CHECK(s["memcpy"].get<double>() == doctest::Approx(memcpy[i]).epsilon(1e-4));
    CHECK(s["memset"].get<double>() == doctest::Approx(memset[i]).epsilon(1e-4));
    const json& p = plugin["overview"]["steps"][i == 0 ? 0 : 2];
    CHECK(p["total"].get<double>() == doctest::Approx(total[i]).epsilon(1e-7));
    CHECK(p["kernel"].get<double>() == doctest::Approx(kernel[i]).epsilon(1e-6));
  }

  // Operators' device time. Of the 3586.929 us of GPU work, the plugin's rules give operators
  // 3558 us: six kernels cuBLAS launched with cuLaunchKernel (cuda_driver, 18.6 us) belong to
  // no operator, and the loss's backward (F.cross_entropy outside every module: its backward
  // group never lands under a module) is dropped with nll_loss_backward's 2.94 us and
  // _log_softmax_backward_data's 3.33 us. --improved keeps both: all of it, 3589 us after
  // rounding each operator.
  CHECK(device_self_sum(plugin) == 3558.0);
  CHECK(op_row(plugin, "aten::nll_loss_backward") == nullptr);
  CHECK(device_self_sum(improved) == 3589.0);
  REQUIRE(op_row(improved, "aten::nll_loss_backward") != nullptr);
  CHECK((*op_row(improved, "aten::nll_loss_backward"))["device_self_us"] == 3.0);
  CHECK((*op_row(improved, "aten::_log_softmax_backward_data"))["device_self_us"] == 3.0);
  CHECK((*op_row(improved, "aten::convolution_backward"))["device_self_us"] ==
        (*op_row(plugin, "aten::convolution_backward"))["device_self_us"]);
}

TEST_CASE("GPU fixtures: PyTorch 2.11 DDP over gloo, two ranks on an H200") {
  const fs::path dir = data_dir() / "pytorch-2.11-h200" / "ddp_gloo";
  for (const char* worker : {"rank0", "rank1"}) {
    const json doc = analyze(quoted(dir) + " --worker " + worker);
    const json& d = doc["distributed"];
    CHECK(d["available"] == true);
    REQUIRE(d["workers"].size() == 2);
    CHECK(d["workers"][0]["worker"] == "rank0");
    CHECK(d["workers"][1]["worker"] == "rank1");
    for (const json& w : d["workers"]) {
      REQUIRE(w["comm_ops"].size() == 1);
      CHECK(w["comm_ops"][0]["name"] == "gloo:all_reduce");
      CHECK(w["comm_ops"][0]["calls"] == 4);  // 2 buckets x 2 steps
    }
    int kernels = 0;
    for (const json& k : doc["kernels"]["by_name"]) kernels += k["calls"].get<int>();
    CHECK(kernels == 40);
  }

  // rank0: 3821.447 us of GPU work, 390.7 us of it in kernels cuBLAS launched through
  // cuLaunchKernel (addmm / mm). The plugin's rules leave those out (3431 us, 89.8 %);
  // --improved attributes everything (3822 after rounding), addmm 125 -> 320 us.
  const fs::path rank0 = gc::trace_files(dir.string()).at(0);
  REQUIRE(rank0.filename().string().starts_with("rank0."));
  const json plugin = analyze("--plugin_rules " + quoted(dir) + " --worker rank0");
  const json improved = analyze(quoted(dir) + " --worker rank0");
  CHECK(device_self_sum(plugin) == 3431.0);
  CHECK(device_self_sum(improved) == 3822.0);
  CHECK((*op_row(plugin, "aten::addmm"))["device_self_us"] == 125.0);
  CHECK((*op_row(improved, "aten::addmm"))["device_self_us"] == 320.0);
  // Step 2 reaches the end of the GPU work it launched (20960.45 us from its start, the host
  // range is 20618.819); step 3 starts there.
  CHECK(plugin["overview"]["steps"][0]["total"].get<double>() == doctest::Approx(20960.45).epsilon(1e-7));
  CHECK(improved["overview"]["steps"][1]["total"].get<double>() == doctest::Approx(19225.985).epsilon(1e-7));
  CHECK(improved["overview"]["steps"][0]["communication"].get<double>() > 15000);
}

TEST_CASE("GPU fixtures: what real TensorBoard read from cnn_train's event file, kinetoscope reads too") {
  // tensorboard_read.json: TensorBoard 2.x's EventAccumulator on that machine, every scalar of
  // the run as [step, wall_time, value] (scripts/gpu/tb_check.py). Its server listed the same
  // 12 tags at /data/plugin/scalars/tags.
  const fs::path dir = data_dir() / "tensorboard-h200";
  const json theirs = gc::read_json((dir / "tensorboard_read.json").string());
  const char* bin = std::getenv("KINETOSCOPE_BIN");
  REQUIRE(bin != nullptr);
  const auto r = kinetoscope::test::run_command(std::string(bin) + " scalars --json " + quoted(dir));
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const json ours = json::parse(r.output);
  REQUIRE(theirs["runs"].size() == 1);
  REQUIRE(theirs["runs"]["cnn"].size() == 12);
  CHECK(ours["runs"] == theirs["runs"]);  // same tags, steps, wall times and values, exactly
}

TEST_CASE("GPU fixtures: the timeline links kernels launched through the driver API to their launch") {
  // PyTorch 2.11's cuBLAS launches its cutlass GEMM kernels with cuLaunchKernel (cuda_driver);
  // the trace's ac2g arrows join them, and the Trace view must too, both ways, and the
  // operator (aten::addmm / aten::mm) lists them among the kernels it launches.
  const fs::path dir = data_dir() / "pytorch-2.11-h200" / "ddp_gloo";
  auto loaded = kinetoscope::analysis::load_trace(gc::trace_files(dir.string()).at(0));
  REQUIRE(loaded.ok());
  const kinetoscope::analysis::trace_model& m = *loaded.model;
  const kinetoscope::server::timeline tl(m);
  int driver_kernels = 0;
  for (std::uint32_t i = 0; i < m.events.size(); ++i) {
    const auto& e = m.events[i];
    if (e.type != kinetoscope::analysis::event_type::kernel || !m.str(e.name).starts_with("void cutlass::")) continue;
    const json ev = json::parse(*tl.event_json(i));
    REQUIRE(ev["flows"].size() == 1);
    CHECK(ev["flows"][0]["relation"] == "launched by");
    CHECK(ev["flows"][0]["name"] == "cuLaunchKernel");
    const json launch = json::parse(*tl.event_json(ev["flows"][0]["id"].get<std::uint32_t>()));
    REQUIRE(launch["flows"].size() == 1);
    CHECK(launch["flows"][0]["relation"] == "launches");
    CHECK(launch["flows"][0]["id"] == i);
    ++driver_kernels;
  }
  CHECK(driver_kernels == 6);  // the trace's six cuLaunchKernel calls
}

namespace {

/// Kernel launches and their summed duration, read straight from the trace's events.
std::pair<int, double> kernel_totals(const json& trace) {
  int n = 0;
  double us = 0;
  for (const json& e : trace["traceEvents"]) {
    if (e.value("cat", "") != "kernel") continue;
    ++n;
    us += e["dur"].get<double>();
  }
  return {n, us};
}

bool has_kernel_like(const json& doc, const std::string& part) {
  for (const json& k : doc["kernels"]["by_name"])
    if (k["name"].get<std::string>().find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

// The modern workloads of scripts/gpu/torch_modern.py (gpu-check part d): every kernel of the
// trace reaches the kernel table, the kernels that mark each workload are there, and with
// --improved every microsecond of GPU work belongs to an operator.
TEST_CASE("GPU fixtures: PyTorch 2.11 bf16 + FP8 + FlashAttention, torch.compile and NCCL on an H200") {
  struct fixture {
    const char* run;
    std::vector<std::string> kernels;  // name parts that must be in the kernel table
    std::vector<std::string> ops;      // operators that must be in the operator table
    std::vector<std::string> comms;    // the distributed view's communication operators
  };
  const fixture fixtures[] = {
      // cuBLASLt's FP8 GEMM (nvjet_sm90_qq...: e4m3 operands), FlashAttention forward/backward.
      {"transformer_bf16_fp8", {"nvjet_sm90_qq", "pytorch_flash::flash_fwd_kernel", "flash_bwd"},
       {"aten::_scaled_mm", "aten::_flash_attention_forward", "aten::_flash_attention_backward"}, {}},
      // Inductor's Triton kernels, launched through cuLaunchKernel (cuda_driver).
      {"compiled", {"triton_"}, {}, {}},
      // One-rank NCCL: c10d operators, and the collectives' "nccl:*" ranges in the
      // distributed view's communication table.
      {"nccl_1rank", {}, {"c10d::allreduce_", "c10d::_allgather_base_", "c10d::_reduce_scatter_base_",
                          "c10d::alltoall_base_", "c10d::broadcast_", "c10d::allreduce_coalesced_"},
       {"nccl:all_reduce", "nccl:_all_gather_base", "nccl:_reduce_scatter_base", "nccl:all_to_all",
        "nccl:broadcast", "nccl:allreduce_coalesced"}},
  };
  for (const fixture& f : fixtures) {
    CAPTURE(f.run);
    const fs::path trace = gc::trace_files((data_dir() / "pytorch-2.11-h200" / f.run).string()).at(0);
    const json events = gc::read_json(trace.string());
    const auto [launches, kernel_us] = kernel_totals(events);
    REQUIRE(launches > 0);
    // A rank is analysed through its run folder, so that the distributed view sees the job.
    const json doc = analyze(std::string() + (f.comms.empty() ? quoted(trace) : quoted(trace.parent_path()) + " --worker rank0"));
    int calls = 0;
    double total = 0;
    for (const json& k : doc["kernels"]["by_name"]) {
      calls += k["calls"].get<int>();
      total += k["total_us"].get<double>();
    }
    CHECK(calls == launches);
    // The table rounds each kernel name's total to whole us.
    CHECK(std::abs(total - kernel_us) <= 0.5 * static_cast<double>(doc["kernels"]["by_name"].size()));
    for (const std::string& k : f.kernels) CHECK_MESSAGE(has_kernel_like(doc, k), k);
    for (const std::string& o : f.ops) CHECK_MESSAGE(op_row(doc, o) != nullptr, o);
    for (const std::string& c : f.comms) {
      bool found = false;
      for (const json& w : doc["distributed"]["workers"])
        for (const json& op : w["comm_ops"]) found = found || op["name"] == c;
      CHECK_MESSAGE(found, c);
    }
    CHECK(doc["overview"]["gpus"][0]["name"] == "NVIDIA H200");
    // Every kernel, copy and memset is some operator's device self time (rounding aside).
    double gpu_work = 0;
    for (const json& e : events["traceEvents"]) {
      const std::string cat = e.value("cat", "");
      if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") gpu_work += e["dur"].get<double>();
    }
    CHECK(std::abs(device_self_sum(doc) - gpu_work) <= 0.5 * static_cast<double>(doc["operators"]["by_name"].size()));
  }
}
