// SPDX-License-Identifier: BSD-3-Clause
/// @file bench_cupti_convert.cpp
/// What a window's GPU records cost at stop(): activity buffers filled like CUPTI fills them
/// (a runtime call and its kernel, alternately, 2 MiB buffers) walked by the real
/// cuptiActivityGetNextRecord and converted by activity_converter, then the correlation join.
/// Needs no GPU (libcupti walks buffers without a driver). Best of 5 rounds.
///
/// Usage: bench_cupti_convert [records_in_millions=1]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cupti/activity_convert.hpp"
#include "cupti/cupti_loader.hpp"

namespace {

using namespace kinetoscope;
using namespace kinetoscope::detail;

constexpr std::size_t buffer_bytes = std::size_t{2} << 20;

/// Mangled names as real kernels have them; CUPTI hands the same pointer for every launch of
/// one function.
const char* const kernel_names[] = {
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_",
    "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_7MeanOpsIffEEjfLi4EEEEEvT1_",
    "ampere_sgemm_128x64_tn",
    "_Z6kernelPfi",
};

struct buffers {
  std::vector<std::unique_ptr<std::uint8_t[]>> data;
  std::vector<std::size_t> used;
  std::size_t records = 0;
};

buffers fill(std::size_t pairs) {
  buffers b;
  std::uint32_t correlation = 1;
  std::uint64_t tick = 2000;
  while (pairs > 0) {
    b.data.push_back(std::make_unique<std::uint8_t[]>(buffer_bytes));
    std::uint8_t* p = b.data.back().get();
    std::size_t used = 0;
    while (pairs > 0 && used + sizeof(CUpti_ActivityAPI) + sizeof(CUpti_ActivityKernel10) <= buffer_bytes) {
      CUpti_ActivityAPI a;
      std::memset(&a, 0, sizeof a);
      a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
      a.cbid = 211;
      a.start = tick;
      a.end = tick + 3000;
      a.threadId = 1234;
      a.correlationId = correlation;
      std::memcpy(p + used, &a, sizeof a);
      used += sizeof a;
      CUpti_ActivityKernel10 k;
      std::memset(&k, 0, sizeof k);
      k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
      k.name = kernel_names[correlation % 4];
      k.start = tick + 4000;
      k.end = tick + 9000;
      k.streamId = 7;
      k.contextId = 1;
      k.correlationId = correlation;
      k.gridX = 1024;
      k.gridY = k.gridZ = 1;
      k.blockX = 256;
      k.blockY = k.blockZ = 1;
      k.registersPerThread = 32;
      std::memcpy(p + used, &k, sizeof k);
      used += sizeof k;
      ++correlation;
      tick += 10000;
      --pairs;
      b.records += 2;
    }
    b.used.push_back(used);
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  const double millions = argc > 1 ? std::atof(argv[1]) : 1.0;
  std::string why;
  const cupti_api* cupti = load_default_cupti(why);
  if (cupti == nullptr) {
    std::fprintf(stderr, "bench_cupti_convert: %s\n", why.c_str());
    return 1;
  }
  const buffers b = fill(static_cast<std::size_t>(millions * 500000));
  occupancy_device dev;
  dev.props = {0, "NVIDIA H100 80GB HBM3", 85029158912, 9, 0, 1024, 2048, 65536, 32, 49152, 132,
               65536, 232448, 233472};
  dev.reserved_shared_mem_per_block = 1024;
  const std::vector<occupancy_device> devices{dev};
  caller_table callers;
  for (std::uint32_t c = 1; c <= b.records / 2; ++c) callers.emplace(c, api_caller{c, 1234});
  const callback_name_fn names = [cupti](bool driver, std::uint32_t cbid) -> const char* {
    const char* name = nullptr;
    const auto domain = driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
    return cupti->get_callback_name(domain, cbid, &name) == CUPTI_SUCCESS ? name : nullptr;
  };

  // In time order (one stream), and buffers in reverse order (records from several streams
  // arrive out of order: the converter must sort).
  for (const bool reversed : {false, true}) {
    double best = 1e30;
    std::size_t gpu = 0;
    for (int round = 0; round < 5; ++round) {
      trace_data d;
      const auto t0 = std::chrono::steady_clock::now();
      activity_converter conv(d, devices, window_bounds{0, ~std::uint64_t{0}},
                              tick_converter{0, 1'700'000'000'000'000'000, 1.0}, names);
      for (std::size_t n = 0; n < b.data.size(); ++n) {
        const std::size_t i = reversed ? b.data.size() - 1 - n : n;
        CUptiResult error = CUPTI_SUCCESS;
        parse_buffer(b.data[i].get(), b.used[i], cupti->get_next_record, conv, &error);
      }
      std::map<int, std::int64_t> totals;
      conv.finish(callers, totals);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::min(best, s);
      gpu = d.gpu.size();
    }
    std::printf("cupti convert, %s: %zu records (%zu kernels, %zu buffers of 2 MiB): %.3f s, %.1f ns/record\n",
                reversed ? "buffers out of order" : "in time order", b.records, gpu, b.data.size(), best,
                best * 1e9 / static_cast<double>(b.records));
  }
  return 0;
}
