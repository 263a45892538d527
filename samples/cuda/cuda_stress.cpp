// SPDX-License-Identifier: BSD-3-Clause
// cuda_stress: a CUDA workload that knows its own ground truth, for checking the cuda activity
// on a real GPU (scripts/gpu-check.sh runs it; tests/gpu/gpu_trace_check compares).
//
// Two host threads, each with its own stream, launch 1 000 kernels of four kinds per step
// (stress_fill, stress_axpy, stress_reduce, stress_tiny), plus spin/timed kernels whose length
// CUDA events measure (the threads take turns for those, the GPU otherwise idle), copies HtoD/DtoH/DtoD, memsets, event and stream syncs, cudaMalloc/
// cudaFree and, when libcublas.so.13 is there, two SGEMMs; every GPU call inside a record_op,
// every step inside a record_function range. A schedule of three windows (wait 1, warmup 1,
// active 2, repeat 3) writes three traces. What was launched in each window, and the CUDA-event
// timings, go to <logdir>/truth.json.
//
// Usage: cuda_stress [LOGDIR] [--steps N] [--launches N] [--no-profile] [--launch-bench N]
//                    [--correlation callback|external]
//   --no-profile      the same workload without a profile (the overhead baseline); no traces
//   --launch-bench N  instead of the workload: host cost of N kernel launches with the
//                     profile off, with the cuda activity recording, and with a record_op each
//   --correlation external  (with --launch-bench) the A/B of how GPU work is tied to ops: no
//                     CUPTI API callback (KINETOSCOPE_CUPTI_CALLBACKS=off) and, around each
//                     launch of the record_op pass, a push/pop of CUPTI's external correlation
//                     id, as Kineto does; "callback" (default) is kinetoscope's own way
// Exit status: 0 done, 1 a CUDA call failed, 2 no usable GPU (printed why), 64 bad arguments.
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <cupti.h>
#include <dlfcn.h>

#include <kinetoscope/kinetoscope.hpp>
#include <kinetoscope/writer/trace_handler.hpp>

#include "stress_kernels.hpp"

namespace {

using kinetoscope::arg;
using kinetoscope::record_op;
using clock_type = std::chrono::steady_clock;

constexpr std::size_t elements = std::size_t{1} << 20;
constexpr int workers = 2;
constexpr int gemm_dim = 512;
constexpr int timed_per_step = 2;
constexpr long long spin_cycles = 40'000;    // ~20 µs at 2 GHz: keeps the stream busy
constexpr long long timed_cycles = 800'000;  // ~400 µs at 2 GHz

struct options {
  std::string logdir = "log/cuda_stress";
  int steps = 12;
  int launches = 1000;
  bool profile = true;
  int launch_bench = 0;
  bool external_correlation = false;
};

[[noreturn]] void usage(int status) {
  std::fprintf(status == 0 ? stdout : stderr,
               "usage: cuda_stress [LOGDIR] [--steps N] [--launches N] [--no-profile] [--launch-bench N]"
               " [--correlation callback|external]\n");
  std::exit(status);
}

int positive(const char* text) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 1 || v > 10'000'000) usage(64);
  return static_cast<int>(v);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) usage(64);
      return argv[++i];
    };
    if (a == "--steps") o.steps = positive(value());
    else if (a == "--launches") o.launches = positive(value());
    else if (a == "--no-profile") o.profile = false;
    else if (a == "--launch-bench") o.launch_bench = positive(value());
    else if (a == "--correlation") {
      const std::string v = value();
      if (v != "callback" && v != "external") usage(64);
      o.external_correlation = v == "external";
    }
    else if (a == "--help" || a == "-h") usage(0);
    else if (!a.empty() && a[0] != '-') o.logdir = a;
    else usage(64);
  }
  return o;
}

/// What one worker launched in one step.
struct step_counts {
  std::map<std::string, long> kernels;  // by kernel name
  long h2d = 0, d2h = 0, d2d = 0, memsets = 0, gemms = 0;
  std::vector<double> timed_us;  // CUDA-event durations of stress_timed, in launch order
};

/// The launches of one worker's step (everything but the timed samples and the step's end).
bool worker_launches(int step, cuda_stress::stream_work& gpu, int launches, step_counts& c, std::string& error) {
  const arg vec = arg::tensor({static_cast<std::int64_t>(elements)});
  {
    record_op op("aten::copy_", {vec, vec});
    if (!gpu.copy_h2d(error)) return false;
    ++c.h2d;
  }
  {
    KINETOSCOPE_RANGE("launch_loop");
    for (int i = 0; i < launches; ++i) {
      switch (i % 4) {
        case 0: {
          record_op op("aten::fill_", {vec, arg::scalar(1.0)});
          if (!gpu.fill(1.0f + static_cast<float>(step), error)) return false;
          ++c.kernels["stress_fill"];
          break;
        }
        case 1: {
          record_op op("aten::add_", {vec, vec, arg::scalar(0.5)});
          if (!gpu.axpy(0.5f, error)) return false;
          ++c.kernels["stress_axpy"];
          break;
        }
        case 2: {
          record_op op("aten::sum", {vec});
          if (!gpu.reduce(error)) return false;
          ++c.kernels["stress_reduce"];
          break;
        }
        default: {
          record_op op("aten::zero_", {arg::tensor({32})});
          if (!gpu.tiny(error)) return false;
          ++c.kernels["stress_tiny"];
          break;
        }
      }
    }
  }
  {
    record_op op("aten::zero_", {vec});
    if (!gpu.memset(error) || !gpu.memset(error)) return false;
    c.memsets += 2;
  }
  {
    record_op op("aten::clone", {vec});
    if (!gpu.copy_d2d(error)) return false;
    ++c.d2d;
  }
  if (gpu.has_gemm()) {
    for (int g = 0; g < 2; ++g) {
      record_op op("aten::mm", {arg::tensor({gemm_dim, gemm_dim}), arg::tensor({gemm_dim, gemm_dim})});
      if (!gpu.gemm(gemm_dim, error)) return false;
      ++c.gemms;
    }
  }
  KINETOSCOPE_RANGE("stream_sync");
  return gpu.stream_sync(error);
}

/// stress_timed kernels measured with CUDA events, each behind a stress_spin so that the
/// events and the kernel wait on the GPU together.
bool worker_samples(int worker, cuda_stress::stream_work& gpu, step_counts& c, std::string& error) {
  const std::string timed_name = "stress::timed_t" + std::to_string(worker);
  for (int t = 0; t < timed_per_step; ++t) {
    {
      record_op op("stress::spin");
      if (!gpu.spin(spin_cycles, error)) return false;
      ++c.kernels["stress_spin"];
    }
    record_op op(timed_name);
    float ms = 0;
    if (!gpu.timed(timed_cycles, ms, error)) return false;
    ++c.kernels["stress_timed"];
    c.timed_us.push_back(static_cast<double>(ms) * 1000.0);
  }
  return true;
}

/// The end of a worker's step: copy back, event sync, an allocation, a stream sync.
bool worker_finish(cuda_stress::stream_work& gpu, step_counts& c, std::string& error) {
  const arg vec = arg::tensor({static_cast<std::int64_t>(elements)});
  {
    record_op op("aten::copy_", {vec, vec});
    if (!gpu.copy_d2h(error)) return false;
    ++c.d2h;
  }
  {
    KINETOSCOPE_RANGE("event_sync");
    if (!gpu.event_sync(error)) return false;
  }
  {
    record_op op("stress::alloc_free");
    if (!gpu.alloc_free(std::size_t{1} << 20, error)) return false;
  }
  KINETOSCOPE_RANGE("stream_sync");
  return gpu.stream_sync(error);
}

/// One worker's step: every GPU call inside an operator, the step inside a range. The timed
/// samples take turns between the workers, both streams drained: a CUDA event pair measures a
/// kernel well only on an otherwise idle GPU (with another stream launching, the front end
/// delays the kernel after the start event by several µs, which CUPTI rightly leaves out).
/// Every worker passes `turns` the same number of times, failed or not.
bool worker_step(int worker, int step, cuda_stress::stream_work& gpu, int launches, std::barrier<>& turns,
                 const std::atomic<bool>& failed, step_counts& c, std::string& error) {
  KINETOSCOPE_RANGE("worker_step");
  bool ok = !failed && worker_launches(step, gpu, launches, c, error);
  for (int turn = 0; turn < workers; ++turn) {
    turns.arrive_and_wait();
    if (turn == worker && ok && !failed) ok = worker_samples(worker, gpu, c, error);
  }
  turns.arrive_and_wait();
  return ok && !failed && worker_finish(gpu, c, error);
}

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

/// CUPTI's external correlation, taken from the libcupti the backend loaded (the A/B of
/// --correlation external): a push/pop pair around each launch ties it to an id, as Kineto does.
struct external_correlation {
  decltype(&::cuptiActivityPushExternalCorrelationId) push = nullptr;
  decltype(&::cuptiActivityPopExternalCorrelationId) pop = nullptr;
  decltype(&::cuptiActivityEnable) enable = nullptr;
  decltype(&::cuptiActivityDisable) disable = nullptr;
  bool load(std::string& error) {
    void* lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) {
      error = "libcupti.so.13 is not loaded (the cuda activity is not recording)";
      return false;
    }
    push = reinterpret_cast<decltype(push)>(dlsym(lib, "cuptiActivityPushExternalCorrelationId"));
    pop = reinterpret_cast<decltype(pop)>(dlsym(lib, "cuptiActivityPopExternalCorrelationId"));
    enable = reinterpret_cast<decltype(enable)>(dlsym(lib, "cuptiActivityEnable"));
    disable = reinterpret_cast<decltype(disable)>(dlsym(lib, "cuptiActivityDisable"));
    if (push == nullptr || pop == nullptr || enable == nullptr || disable == nullptr) {
      error = "libcupti.so.13 lacks the external correlation calls";
      return false;
    }
    return true;
  }
};

/// Host cost of `n` launches of stress_tiny, synchronising between batches outside the clock
/// so the launch queue never fills (a full queue would time the GPU, not the launch).
double launch_ns(cuda_stress::stream_work& gpu, int n, bool with_op, std::string& error,
                 const external_correlation* ext = nullptr) {
  constexpr int batch = 256;
  double total_ns = 0;
  std::uint64_t id = 0;
  for (int done = 0; done < n;) {
    const int k = std::min(batch, n - done);
    const auto t0 = clock_type::now();
    for (int i = 0; i < k; ++i) {
      if (with_op && ext != nullptr) {
        record_op op("aten::zero_");
        ext->push(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, ++id);
        const bool ok = gpu.tiny(error);
        std::uint64_t last = 0;
        ext->pop(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
        if (!ok) return -1;
      } else if (with_op) {
        record_op op("aten::zero_");
        if (!gpu.tiny(error)) return -1;
      } else if (!gpu.tiny(error)) {
        return -1;
      }
    }
    total_ns += std::chrono::duration<double, std::nano>(clock_type::now() - t0).count();
    if (!gpu.stream_sync(error)) return -1;
    done += k;
  }
  return total_ns / n;
}

int launch_bench(int n, bool external) {
  std::string error;
  if (external) setenv("KINETOSCOPE_CUPTI_CALLBACKS", "off", 1);
  cuda_stress::stream_work gpu(elements, error);
  if (!error.empty()) {
    std::cerr << "cuda_stress: " << error << '\n';
    return 1;
  }
  if (launch_ns(gpu, 2000, false, error) < 0) {  // warm-up: module load, first launches
    std::cerr << "cuda_stress: " << error << '\n';
    return 1;
  }
  const double off = launch_ns(gpu, n, false, error);
  kinetoscope::profile prof({.activities = {kinetoscope::activity::cpu, kinetoscope::activity::cuda}});
  prof.start();
  external_correlation ext;
  if (external && (!ext.load(error) || ext.enable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) != CUPTI_SUCCESS)) {
    std::cerr << "cuda_stress: " << (error.empty() ? "cuptiActivityEnable(EXTERNAL_CORRELATION) failed" : error) << '\n';
    return 1;
  }
  const double on = launch_ns(gpu, n, false, error);
  const double on_op = launch_ns(gpu, n, true, error, external ? &ext : nullptr);
  if (external) ext.disable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  prof.stop();
  if (off < 0 || on < 0 || on_op < 0) {
    std::cerr << "cuda_stress: " << error << '\n';
    return 1;
  }
  const auto& gpu_records = prof.last_trace().gpu;
  const auto kernels = std::count_if(gpu_records.begin(), gpu_records.end(),
                                     [](const kinetoscope::gpu_activity& g) { return g.kind == kinetoscope::gpu_kind::kernel; });
  std::printf("launch cost over %d launches (%s): profile off %.0f ns, cuda activity on %.0f ns (+%.0f ns), "
              "with a record_op each %.0f ns (+%.0f ns); %ld of %d kernels recorded\n",
              n, external ? "external correlation, no API callback" : "API callback", off, on, on - off, on_op,
              on_op - off, static_cast<long>(kernels), 2 * n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const options opt = parse(argc, argv);
  cuda_stress::device_info device;
  std::string error;
  if (!cuda_stress::query_device(device, error)) {
    std::cerr << "cuda_stress: no CUDA device (" << error << "); nothing to profile on the GPU\n";
    return 2;
  }
  std::string blas_why;
  const bool blas = cuda_stress::load_cublas(blas_why);
  if (opt.launch_bench > 0) return launch_bench(opt.launch_bench, opt.external_correlation);

  const kinetoscope::schedule_fn sched = kinetoscope::schedule({.wait = 1, .warmup = 1, .active = 2, .repeat = 3});
  double trace_ready_ms = 0;  // time spent writing traces (inside step())
  std::optional<kinetoscope::profile> prof;
  if (opt.profile) {
    auto handler = kinetoscope::tensorboard_trace_handler(opt.logdir, "cuda_stress");
    prof.emplace(kinetoscope::profile_options{
        .activities = {kinetoscope::activity::cpu, kinetoscope::activity::cuda},
        .schedule = sched,
        .on_trace_ready = [handler, &trace_ready_ms](kinetoscope::profile& p) {
          const auto t0 = clock_type::now();
          handler(p);
          trace_ready_ms += ms_since(t0);
        },
        .record_shapes = true,
        .profile_memory = true});
    if (!prof->cuda_active()) {
      std::cerr << "cuda_stress: the cuda activity is not recording (see the warning above)\n";
      return 2;
    }
  }

  std::vector<std::unique_ptr<cuda_stress::stream_work>> gpus;
  for (int w = 0; w < workers; ++w) {
    gpus.push_back(std::make_unique<cuda_stress::stream_work>(elements, error));
    if (!error.empty()) {
      std::cerr << "cuda_stress: " << error << '\n';
      return 1;
    }
  }
  std::vector<std::vector<step_counts>> counts(workers, std::vector<step_counts>(opt.steps));
  std::vector<std::string> errors(workers);
  std::atomic<bool> failed{false};
  std::barrier sync(workers + 1);
  std::barrier turns(workers);

  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      for (int s = 0; s < opt.steps; ++s) {
        sync.arrive_and_wait();  // step begins
        if (!worker_step(w, s, *gpus[w], opt.launches, turns, failed, counts[w][s], errors[w])) failed = true;
        sync.arrive_and_wait();  // step ends
      }
    });
  }
  const auto t0 = clock_type::now();
  if (prof) prof->start();
  for (int s = 0; s < opt.steps; ++s) {
    sync.arrive_and_wait();
    sync.arrive_and_wait();
    if (!failed && !cuda_stress::device_synchronize(error)) failed = true;
    if (prof) prof->step();
  }
  if (prof) prof->stop();
  const double wall_ms = ms_since(t0);
  for (auto& t : threads) t.join();
  for (const std::string& e : errors)
    if (!e.empty()) error = e;
  if (failed) {
    std::cerr << "cuda_stress: " << error << '\n';
    return 1;
  }

  // Ground truth per window, from the schedule the profile used.
  nlohmann::ordered_json truth;
  truth["gpu"] = device.name;
  truth["compute_capability"] = std::to_string(device.major) + "." + std::to_string(device.minor);
  truth["workers"] = workers;
  truth["steps"] = opt.steps;
  truth["cublas"] = blas ? "loaded" : blas_why;
  long launches = 0;
  nlohmann::ordered_json windows = nlohmann::ordered_json::array();
  nlohmann::ordered_json window;
  for (int s = 0; s < opt.steps; ++s) {
    for (int w = 0; w < workers; ++w)
      for (const auto& [name, n] : counts[w][s].kernels) launches += n;
    const auto action = sched(s);
    if (action != kinetoscope::profiler_action::record && action != kinetoscope::profiler_action::record_and_save)
      continue;
    if (window.is_null()) {
      window = {{"steps", nlohmann::ordered_json::array()}, {"kernels", nlohmann::ordered_json::object()},
                {"memcpy", {{"HtoD", 0}, {"DtoH", 0}, {"DtoD", 0}}}, {"memset", 0}, {"gemm", 0},
                {"timed_us", nlohmann::ordered_json::object()}};
    }
    window["steps"].push_back(s);
    for (int w = 0; w < workers; ++w) {
      const step_counts& c = counts[w][s];
      for (const auto& [name, n] : c.kernels) window["kernels"][name] = window["kernels"].value(name, 0L) + n;
      window["memcpy"]["HtoD"] = window["memcpy"]["HtoD"].get<long>() + c.h2d;
      window["memcpy"]["DtoH"] = window["memcpy"]["DtoH"].get<long>() + c.d2h;
      window["memcpy"]["DtoD"] = window["memcpy"]["DtoD"].get<long>() + c.d2d;
      window["memset"] = window["memset"].get<long>() + c.memsets;
      window["gemm"] = window["gemm"].get<long>() + c.gemms;
      auto& timed = window["timed_us"]["stress::timed_t" + std::to_string(w)];
      for (double us : c.timed_us) timed.push_back(us);
    }
    if (action == kinetoscope::profiler_action::record_and_save) {
      windows.push_back(std::move(window));
      window = nullptr;
    }
  }
  truth["kernel_launches"] = launches;
  truth["windows"] = opt.profile ? windows : nlohmann::ordered_json::array();

  std::printf("cuda_stress on %s: %ld kernel launches by %d threads in %d steps, %.1f ms wall "
              "(profile %s%s), cuBLAS %s\n",
              device.name.c_str(), launches, workers, opt.steps, wall_ms, opt.profile ? "on" : "off",
              opt.profile ? (", " + std::to_string(static_cast<long>(trace_ready_ms)) + " ms of it writing traces").c_str()
                          : "",
              blas ? "loaded" : blas_why.c_str());
  if (opt.profile) {
    std::filesystem::create_directories(opt.logdir);
    std::ofstream(std::filesystem::path(opt.logdir) / "truth.json") << truth.dump(1) << '\n';
    std::cout << prof->key_averages().table({.sort_by = "cuda_time_total", .row_limit = 10});
  }
  return 0;
}
