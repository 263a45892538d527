// SPDX-License-Identifier: BSD-3-Clause
// The cuda activity end to end: kernels, copies both ways, memsets, a stream sync and GPU
// allocations, inside record_function ranges and record_op operators, recorded by
// kinetoscope::profile with CUPTI and written by tensorboard_trace_handler.
// Usage: cuda_sample [logdir]   (default log/cuda)
// Without a usable GPU it prints why (kinetoscope's one warning and the CUDA error) and exits
// with status 2 before recording: there is no GPU work to show.
#include <iostream>
#include <string>
#include <vector>

#include <kinetoscope/kinetoscope.hpp>
#include <kinetoscope/writer/trace_handler.hpp>

#include "cuda_kernels.hpp"

namespace {

constexpr std::size_t elements = std::size_t{1} << 20;
constexpr int steps = 6;

bool run_step(int step, std::vector<float>& host, std::string& error) {
  using kinetoscope::arg;
  KINETOSCOPE_RANGE("train_step");
  cuda_sample::gpu_work work(elements);  // cudaMalloc x3 / cudaFree x3: GPU [memory] events
  {
    kinetoscope::record_op op("aten::copy_", {arg::tensor({1 << 20})});
    if (!work.upload(host.data(), error)) return false;
  }
  {
    KINETOSCOPE_RANGE("forward");
    kinetoscope::record_op zero("aten::zero_", {arg::tensor({1 << 20})});
    if (!work.clear_output(error)) return false;
  }
  {
    KINETOSCOPE_RANGE("forward");
    kinetoscope::record_op mul("aten::mul", {arg::tensor({1 << 20}), arg::scalar(std::int64_t{2})});
    if (!work.scale_and_add(1.0f + 0.5f * static_cast<float>(step), error)) return false;
  }
  {
    kinetoscope::record_op sum("aten::sum", {arg::tensor({1 << 20})});
    if (!work.reduce(error)) return false;
  }
  {
    KINETOSCOPE_RANGE("synchronize");
    if (!work.synchronize(error)) return false;
  }
  float total = 0;
  kinetoscope::record_op copy("aten::copy_", {arg::tensor({1 << 20})});
  if (!work.download(host.data(), &total, error)) return false;
  std::cout << "step " << step << ": sum " << total << '\n';
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string logdir = argc > 1 ? argv[1] : "log/cuda";
  kinetoscope::profile prof({
      .activities = {kinetoscope::activity::cpu, kinetoscope::activity::cuda},
      .schedule = kinetoscope::schedule({.wait = 1, .warmup = 1, .active = 3}),
      .on_trace_ready = kinetoscope::tensorboard_trace_handler(logdir, "cuda_sample"),
      .record_shapes = true,
      .profile_memory = true});

  std::string error;
  const int devices = cuda_sample::device_count(error);
  if (devices <= 0 || !prof.cuda_active()) {
    std::cerr << "cuda_sample: no CUDA device ("
              << (devices < 0 ? error : devices == 0 ? "the driver reports none" : "CUPTI unavailable, see above")
              << "); nothing to profile on the GPU\n";
    return 2;
  }

  std::vector<float> host(elements, 1.0f);
  prof.start();
  for (int step = 0; step < steps; ++step) {
    if (!run_step(step, host, error)) {
      std::cerr << "cuda_sample: " << error << '\n';
      return 1;
    }
    prof.step();
  }
  prof.stop();
  std::cout << prof.key_averages().table({.sort_by = "cuda_time_total", .row_limit = 12})
            << "traces written to " << logdir << '\n';
  return 0;
}
