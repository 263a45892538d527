// SPDX-License-Identifier: BSD-3-Clause
/// @file bench_writer.cpp
/// Writer throughput: a synthetic trace_data of about 1.5 M events (cpu ops with 2-3 inputs,
/// ProfilerStep annotations, runtime calls with kernels, memory events, fwd/bwd links; interned
/// names) written by write_chrome_trace to a discarding sink, to a file, and to a gzip file.
/// Best of 3 runs each. Target (what hand-written JSON output reached on our 2-core dev machine):
/// >= 700 MB/s to a discarding sink at -O2.
///
/// Usage: bench_writer [events_in_millions=1.5]

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "kinetoscope/trace_data.hpp"
#include "kinetoscope/writer/chrome_trace.hpp"

namespace {

using namespace kinetoscope;

/// Discards the bytes, counts them.
class discard_sink final : public byte_sink {
 public:
  void write(const char* data, std::size_t size) override {
    bytes_ += size;
    if (size > 0) last_ ^= static_cast<unsigned char>(data[size - 1]);  // keep the data "used"
  }
  std::uint64_t bytes() const noexcept { return bytes_; }
  unsigned last() const noexcept { return last_; }

 private:
  std::uint64_t bytes_ = 0;
  unsigned last_ = 0;
};

std::size_t event_count(const trace_data& d) {
  return d.events.size() + d.memory.size() + d.runtime.size() + d.gpu.size();
}

/// About `target` events: per op one cpu_op; every second op a runtime call + GPU activity and a
/// memory event; one ProfilerStep#N user annotation per 5000 ops; a quarter of the ops have a
/// forward sequence number, matched by a backward op on the autograd thread.
trace_data synthetic_trace(std::size_t target) {
  trace_data d;
  d.strings = {""};
  d.pid = 4242;
  d.process_name = "bench_writer";
  d.threads = {{4242, "bench_writer"}, {4250, "pt_autograd_0"}};
  d.record_shapes = true;
  d.profile_memory = true;
  d.distributed = distributed_info{"nccl", 0, 1};
  device_properties gpu0;
  gpu0.name = "NVIDIA H100 80GB HBM3";
  gpu0.num_sms = 132;
  d.devices.push_back(gpu0);

  const char* op_names[] = {
      "aten::addmm",   "aten::mm",    "aten::add",   "aten::mul",  "aten::relu",
      "aten::conv2d",  "aten::copy_", "aten::empty", "aten::view", "aten::native_layer_norm",
      "aten::softmax", "aten::linear"};
  std::vector<std::uint32_t> op_ids;
  for (const char* n : op_names) op_ids.push_back(d.intern(n));
  const std::uint32_t bwd_id = d.intern("AddmmBackward0");
  const std::uint32_t launch_id = d.intern("cudaLaunchKernel");
  const std::uint32_t memcpy_call_id = d.intern("cudaMemcpyAsync");
  std::vector<std::uint32_t> kernel_ids;
  for (int k = 0; k < 40; ++k) {
    kernel_ids.push_back(
        d.intern("void at::native::vectorized_elementwise_kernel<4, at::native::"
                 "CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, "
                 "at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)_" +
                 std::to_string(k)));
  }
  const std::uint32_t memcpy_id = d.intern("Memcpy HtoD (Pageable -> Device)");

  // A few distinct input tuples that the ops share (as a real op set would repeat shapes).
  std::vector<std::pair<std::uint32_t, std::uint32_t>> input_sets;
  for (int s = 0; s < 64; ++s) {
    const std::uint32_t first = static_cast<std::uint32_t>(d.inputs.size());
    const int n = 2 + s % 2;
    for (int k = 0; k < n; ++k) {
      op_input in;
      in.dims = {32 + s, 128 * (k + 1)};
      in.strides = {128 * (k + 1), 1};
      in.type = "float";
      d.inputs.push_back(in);
    }
    if (s % 4 == 0) {
      op_input alpha;
      alpha.type = "Scalar";
      alpha.concrete = "1";
      d.inputs.push_back(alpha);
    }
    input_sets.emplace_back(first, static_cast<std::uint32_t>(d.inputs.size()) - first);
  }

  // ops + ops/2 runtime + ops/2 gpu + ops/2 memory + ops/4 backward ~= 2.75 * ops
  const std::size_t ops = std::max<std::size_t>(target * 4 / 11, 1);
  const std::int64_t base = base_time_ns() + 1'000'000'000;
  d.start_ns = base;
  std::int64_t t = base + 1000;
  std::int64_t gpu_t = t;
  std::int64_t ext = 1;
  std::int64_t corr = 1;
  std::int64_t seq = 0;
  constexpr std::size_t ops_per_step = 5000;
  std::int64_t step_start = t;
  std::vector<cpu_event> backward;
  for (std::size_t i = 0; i < ops; ++i) {
    if (i % ops_per_step == 0) {
      if (i != 0) {
        cpu_event step;
        step.category = cpu_category::user_annotation;
        step.name = d.intern("ProfilerStep#" + std::to_string(i / ops_per_step - 1));
        step.start_ns = step_start - 100;
        step.end_ns = t + 100;
        step.tid = step.end_tid = 4242;
        step.external_id = ext++;
        d.events.push_back(step);
        d.events.insert(d.events.end(), backward.begin(), backward.end());
        backward.clear();
        t += 500;
      }
      step_start = t;
    }
    cpu_event e;
    e.name = op_ids[i % op_ids.size()];
    e.start_ns = t;
    e.end_ns = t + 1700 + static_cast<std::int64_t>(i % 7) * 13;
    e.tid = e.end_tid = 4242;
    e.external_id = ext++;
    const auto& in = input_sets[i % input_sets.size()];
    e.first_input = in.first;
    e.input_count = in.second;
    if (i % 4 == 0) {
      e.sequence_nr = seq++;
      cpu_event b;
      b.name = bwd_id;
      b.start_ns = t + 1'000'000;  // later, on the autograd thread
      b.end_ns = b.start_ns + 900;
      b.tid = b.end_tid = 4250;
      b.external_id = ext++;
      b.sequence_nr = e.sequence_nr;
      b.fwd_thread_id = 1;
      backward.push_back(b);
    }
    d.events.push_back(e);
    if (i % 2 == 0) {
      runtime_call c;
      const bool copy = i % 10 == 0;
      c.name = copy ? memcpy_call_id : launch_id;
      c.cbid = copy ? 41 : 211;
      c.start_ns = t + 300;
      c.end_ns = t + 900;
      c.tid = 4242;
      c.correlation = corr++;
      c.external_id = e.external_id;
      c.flow = true;
      d.runtime.push_back(c);
      gpu_activity g;
      g.kind = copy ? gpu_kind::memcpy : gpu_kind::kernel;
      g.name = copy ? memcpy_id : kernel_ids[i % kernel_ids.size()];
      gpu_t = std::max(gpu_t, c.end_ns + 2000);
      g.start_ns = gpu_t;
      g.end_ns = gpu_t + 1500 + static_cast<std::int64_t>(i % 11) * 100;
      gpu_t = g.end_ns + 200;
      g.stream = 7;
      g.context = 1;
      g.correlation = c.correlation;
      g.external_id = c.external_id;
      g.grid[0] = 1024;
      g.grid[1] = 1;
      g.grid[2] = 1;
      g.block[0] = 256;
      g.block[1] = 1;
      g.block[2] = 1;
      g.registers_per_thread = 32;
      g.blocks_per_sm = 1024.0 / 132.0;
      g.warps_per_sm = g.blocks_per_sm * 8;
      g.occupancy_pct = 100;
      g.bytes = copy ? 1 << 20 : 0;
      d.gpu.push_back(g);

      memory_event m;
      m.time_ns = t + 100;
      m.tid = 4242;
      m.addr = 0x7f0000000000ULL + i * 4096;
      m.bytes = (i % 4 == 0) ? 8192 : -8192;
      m.total_allocated = 1 << 30;
      m.total_reserved = 2 << 30;
      m.device = device_type::cuda;
      m.device_id = 0;
      d.memory.push_back(m);
    }
    t += 2000;
  }
  d.events.insert(d.events.end(), backward.begin(), backward.end());
  std::sort(d.events.begin(), d.events.end(), [](const cpu_event& a, const cpu_event& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  d.end_ns = std::max(t, gpu_t) + 2'000'000;
  return d;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <typename Fn>
double best_of_3(Fn&& fn) {
  double best = 1e300;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

void report(const char* what, std::size_t events, double out_mb, double in_mb, double s) {
  std::printf("%-22s %zu events, %.1f MB, %.3f s, %.0f MB/s, %.2f M events/s\n", what, events,
              out_mb, s, in_mb / s, static_cast<double>(events) / s / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  const double millions = argc > 1 ? std::atof(argv[1]) : 1.5;
  const auto target = static_cast<std::size_t>(std::max(millions, 0.001) * 1e6);

  auto t0 = std::chrono::steady_clock::now();
  const trace_data d = synthetic_trace(target);
  const std::size_t n = event_count(d);
  std::printf(
      "synthetic trace: %zu events (%zu cpu, %zu memory, %zu runtime, %zu gpu), built in %.2f s\n",
      n, d.events.size(), d.memory.size(), d.runtime.size(), d.gpu.size(), seconds_since(t0));

  // MB/s are of the uncompressed JSON in every line (the gzip line's size is the file's).
  discard_sink probe;
  write_chrome_trace(d, probe);
  const double json_mb = static_cast<double>(probe.bytes()) / 1e6;

  const double s_null = best_of_3([&] {
    discard_sink sink;
    write_chrome_trace(d, sink);
    if (sink.bytes() != probe.bytes()) std::abort();
  });
  report("writer (discard):", n, json_mb, json_mb, s_null);

  const std::string dir = "/tmp/kinetoscope_bench_writer_" + std::to_string(::getpid());
  const std::string plain = dir + "/bench.pt.trace.json";
  const std::string gz = plain + ".gz";
  const double s_file = best_of_3([&] { write_chrome_trace_file(d, plain); });
  report("writer (file):", n, static_cast<double>(std::filesystem::file_size(plain)) / 1e6, json_mb,
         s_file);
  const double s_gz = best_of_3([&] { write_chrome_trace_file(d, gz, 1); });
  report("writer (gzip level 1):", n, static_cast<double>(std::filesystem::file_size(gz)) / 1e6,
         json_mb, s_gz);

  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::printf("bytes per event: %.0f; target >= 700 MB/s to a discarding sink\n",
              static_cast<double>(probe.bytes()) / static_cast<double>(n));
  return probe.last() == 0x100 ? 1 : 0;
}
