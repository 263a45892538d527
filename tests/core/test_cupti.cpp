// SPDX-License-Identifier: BSD-3-Clause
// The CUPTI backend without a GPU: CUPTI's own record structs (CUDA 13 cupti_activity.h) ->
// trace_data, correlation and External ids, the window, buffers walked by the real libcupti,
// the buffer pool, and the path a user takes on a machine without a driver. Then converted
// records go through the writer and the viewer's analysis engine.
#include <dlfcn.h>
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/kernel_view.hpp"
#include "analysis/loader.hpp"
#include "analysis/op_tree.hpp"
#include "clock.hpp"
#include "cuda_backend.hpp"
#include "cupti/activity_convert.hpp"
#include "cupti/buffer_pool.hpp"
#include "cupti/cupti_loader.hpp"
#include "kinetoscope/kinetoscope.hpp"
#include "kinetoscope/writer/chrome_trace.hpp"
#include "test_support.hpp"

using namespace kinetoscope;
using namespace kinetoscope::detail;

namespace {

constexpr std::int64_t t0_ns = 1'700'000'000'000'000'000;  // Unix ns of tick 1000

/// Ticks are ns here: tick t is t0_ns + (t - 1000).
tick_converter test_clock() { return tick_converter{1000, t0_ns, 1.0}; }
window_bounds test_window() { return window_bounds{1000, 100000}; }

std::vector<occupancy_device> h100_table() {
  occupancy_device d;
  d.props = {0, "NVIDIA H100 80GB HBM3", 85029158912, 9, 0, 1024, 2048, 65536, 32, 49152, 132,
             65536, 232448, 233472};
  d.reserved_shared_mem_per_block = 1024;
  return {d};
}

/// CUPTI's names, from the real library (works without a driver).
const cupti_api& cupti() {
  static const cupti_api* api = [] {
    std::string why;
    const cupti_api* a = load_default_cupti(why);
    if (a == nullptr) FAIL("libcupti could not be loaded: " << why);
    return a;
  }();
  return *api;
}

callback_name_fn cupti_names() {
  return [](bool driver, std::uint32_t cbid) -> const char* {
    const char* name = nullptr;
    const auto domain = driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
    return cupti().get_callback_name(domain, cbid, &name) == CUPTI_SUCCESS ? name : nullptr;
  };
}

CUpti_ActivityKernel10 kernel(const char* name, std::uint64_t start, std::uint64_t end,
                              std::uint32_t correlation) {
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = name;
  k.start = start;
  k.end = end;
  k.deviceId = 0;
  k.contextId = 1;
  k.streamId = 7;
  k.correlationId = correlation;
  k.gridX = 264;
  k.gridY = 1;
  k.gridZ = 1;
  k.blockX = 128;
  k.blockY = 2;
  k.blockZ = 1;
  k.registersPerThread = 32;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 2048;
  return k;
}

CUpti_ActivityAPI api(CUpti_ActivityKind kind, std::uint32_t cbid, std::uint64_t start,
                      std::uint64_t end, std::uint32_t correlation) {
  CUpti_ActivityAPI a;
  std::memset(&a, 0, sizeof a);
  a.kind = kind;
  a.cbid = cbid;
  a.start = start;
  a.end = end;
  a.processId = 4242;
  a.threadId = 31337;
  a.correlationId = correlation;
  return a;
}

CUpti_ActivityMemcpy6 memcpy_record(std::uint64_t start, std::uint64_t end, std::uint32_t correlation) {
  CUpti_ActivityMemcpy6 m;
  std::memset(&m, 0, sizeof m);
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = 4000;
  m.start = start;
  m.end = end;
  m.deviceId = 0;
  m.contextId = 1;
  m.streamId = 7;
  m.correlationId = correlation;
  return m;
}

CUpti_ActivityMemory4 memory_record(CUpti_ActivityMemoryOperationType op, std::uint64_t tick,
                                    std::uint64_t addr, std::uint64_t bytes, std::uint32_t correlation) {
  CUpti_ActivityMemory4 m;
  std::memset(&m, 0, sizeof m);
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = op;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.correlationId = correlation;
  m.address = addr;
  m.bytes = bytes;
  m.timestamp = tick;
  m.deviceId = 0;
  return m;
}

/// Records laid out as CUPTI lays them out in an activity buffer.
struct record_buffer {
  alignas(8) std::uint8_t bytes[4096] = {};
  std::size_t used = 0;
  template <class Record>
  void put(const Record& r) {
    REQUIRE(used + sizeof r <= sizeof bytes);
    std::memcpy(bytes + used, &r, sizeof r);
    used += sizeof r;
  }
};

}  // namespace

TEST_CASE("cupti: names, filters and flows as Kineto writes them") {
  CHECK(strip_version_suffix("cudaLaunchKernel_v7000") == "cudaLaunchKernel");
  CHECK(strip_version_suffix("cudaMemcpyAsync_ptsz_v7000") == "cudaMemcpyAsync_ptsz");
  CHECK(strip_version_suffix("cuLaunchKernel") == "cuLaunchKernel");
  CHECK(strip_version_suffix("cudaFoo_vx") == "cudaFoo_vx");
  CHECK(strip_version_suffix("cudaFoo_v") == "cudaFoo_v");

  CHECK(memcpy_name(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
                    CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) == "Memcpy HtoD (Pageable -> Device)");
  CHECK(memcpy_name(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                    CUPTI_ACTIVITY_MEMORY_KIND_PINNED) == "Memcpy DtoH (Device -> Pinned)");
  CHECK(memcpy_name(CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC,
                    CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC) ==
        "Memcpy PtoP (Device Static -> Managed Static)");
  CHECK(memcpy_name(200, 200, 3) == "Memcpy Unknown (Unknown -> Device)");
  CHECK(memset_name(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) == "Memset (Device)");
  CHECK(memset_name(0) == "Memset (Unknown)");

  CHECK(kernel_name("_Z6kernelPfi") == "kernel(float*, int)");
  CHECK(kernel_name("_ZN2at6native29vectorized_elementwise_kernelILi4EEEvi") ==
        "void at::native::vectorized_elementwise_kernel<4>(int)");
  CHECK(kernel_name("ampere_sgemm_32x32_sliced1x4_tn") == "ampere_sgemm_32x32_sliced1x4_tn");
  CHECK(kernel_name("kernel") == "Kernel");
  CHECK(kernel_name(nullptr) == "Kernel");

  // Noisy runtime calls Kineto never records; everything else is kept.
  for (const std::uint32_t cbid : {10u, 16u, 17u, 133u, 134u, 136u}) CHECK_FALSE(keep_runtime_call(cbid));
  for (const std::uint32_t cbid : {211u, 31u, 41u, 131u, 135u, 20u, 317u}) CHECK(keep_runtime_call(cbid));
  // Driver calls: only launches and virtual memory management.
  CHECK(keep_driver_call(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  CHECK(keep_driver_call(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx));
  CHECK(keep_driver_call(CUPTI_DRIVER_TRACE_CBID_cuMemMap));
  CHECK_FALSE(keep_driver_call(CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent));
  CHECK_FALSE(keep_driver_call(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2));
  CHECK(kept_driver_calls().size() == 11);

  for (const char* n : {"cudaLaunchKernel", "cudaLaunchKernel_ptsz", "cudaLaunchKernelExC",
                        "__cudaLaunchKernel", "cudaGraphLaunch", "cudaMemcpy", "cudaMemcpyAsync",
                        "cudaMemcpy2DToArray", "cudaMemsetAsync", "cudaStreamSynchronize",
                        "cudaDeviceSynchronize", "cudaStreamWaitEvent", "cudaLaunchCooperativeKernel"})
    CHECK_MESSAGE(enqueues_or_waits(n, false), n);
  for (const char* n : {"cudaStreamIsCapturing", "cudaEventRecord", "cudaMalloc", "cudaFree",
                        "cudaFuncSetAttribute", "cudaEventQuery"})
    CHECK_MESSAGE(!enqueues_or_waits(n, false), n);
  CHECK(enqueues_or_waits("cuLaunchKernel", true));
  CHECK(enqueues_or_waits("cuLaunchKernelEx", true));
  CHECK_FALSE(enqueues_or_waits("cuMemMap", true));

  // The real CUPTI 13 names behind the cbids of docs/trace-format.md#cuda_runtime.
  const callback_name_fn names = cupti_names();
  CHECK(std::string(names(false, 211)) == "cudaLaunchKernel_v7000");
  CHECK(std::string(names(false, 131)) == "cudaStreamSynchronize_v3020");
  CHECK(std::string(names(true, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)) == "cuLaunchKernel");
  CHECK(names(false, 99999) == nullptr);
}

TEST_CASE("cupti: each record type converts with exact field values") {
  trace_data d;
  const auto devices = h100_table();
  activity_converter c(d, devices, test_window(), test_clock(), cupti_names());

  const CUpti_ActivityKernel10 k = kernel("_Z6kernelPfi", 5000, 7500, 11);
  c.add(reinterpret_cast<const CUpti_Activity*>(&k));
  const CUpti_ActivityMemcpy6 m = memcpy_record(8000, 10000, 12);
  c.add(reinterpret_cast<const CUpti_Activity*>(&m));
  CUpti_ActivityMemset4 s;
  std::memset(&s, 0, sizeof s);
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.bytes = 1 << 20;
  s.start = 10500;
  s.end = 10500;  // zero duration: the writer omits the bandwidth
  s.deviceId = 0;
  s.contextId = 1;
  s.streamId = 9;
  s.correlationId = 13;
  s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  c.add(reinterpret_cast<const CUpti_Activity*>(&s));
  const CUpti_ActivityAPI launch = api(CUPTI_ACTIVITY_KIND_RUNTIME, 211, 4000, 4800, 11);
  c.add(reinterpret_cast<const CUpti_Activity*>(&launch));
  const CUpti_ActivityAPI capturing = api(CUPTI_ACTIVITY_KIND_RUNTIME, 317, 3000, 3100, 10);
  c.add(reinterpret_cast<const CUpti_Activity*>(&capturing));
  const CUpti_ActivityAPI get_device = api(CUPTI_ACTIVITY_KIND_RUNTIME, 17, 3200, 3300, 14);
  c.add(reinterpret_cast<const CUpti_Activity*>(&get_device));
  const CUpti_ActivityAPI cu_launch =
      api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 4100, 4700, 15);
  c.add(reinterpret_cast<const CUpti_Activity*>(&cu_launch));
  const CUpti_ActivityAPI cu_ctx =
      api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, 4150, 4160, 16);
  c.add(reinterpret_cast<const CUpti_Activity*>(&cu_ctx));
  CUpti_ActivityAPI unknown = api(CUPTI_ACTIVITY_KIND_RUNTIME, 99999, 4200, 4300, 17);
  c.add(reinterpret_cast<const CUpti_Activity*>(&unknown));
  CUpti_ActivityAPI other_kind = api(CUPTI_ACTIVITY_KIND_NAME, 0, 0, 0, 0);
  c.add(reinterpret_cast<const CUpti_Activity*>(&other_kind));
  std::map<int, std::int64_t> totals;
  c.finish({}, totals);

  CHECK(c.unknown_records() == 1);
  CHECK(c.outside_window() == 0);
  REQUIRE(d.gpu.size() == 3);
  const gpu_activity& g = d.gpu[0];
  CHECK(g.kind == gpu_kind::kernel);
  CHECK(d.str(g.name) == "kernel(float*, int)");
  CHECK(g.start_ns == t0_ns + 4000);
  CHECK(g.end_ns == t0_ns + 6500);
  CHECK(g.device == 0);
  CHECK(g.context == 1);
  CHECK(g.stream == 7);
  CHECK(g.correlation == 11);
  CHECK(g.external_id == 0);
  CHECK(g.grid[0] == 264);
  CHECK(g.grid[1] == 1);
  CHECK(g.block[0] == 128);
  CHECK(g.block[1] == 2);
  CHECK(g.registers_per_thread == 32);
  CHECK(g.shared_memory == 3072);
  CHECK(g.blocks_per_sm == 2.0);    // 264 blocks / 132 SMs
  CHECK(g.warps_per_sm == 16.0);    // 2 * 256 threads / 32
  CHECK(g.occupancy_pct == 25);     // 8 resident allowed, 2 wanted: 2 * 256 / 2048

  const gpu_activity& cp = d.gpu[1];
  CHECK(cp.kind == gpu_kind::memcpy);
  CHECK(d.str(cp.name) == "Memcpy HtoD (Pageable -> Device)");
  CHECK(cp.bytes == 4000);
  CHECK(cp.start_ns == t0_ns + 7000);
  CHECK(cp.end_ns == t0_ns + 9000);
  CHECK(cp.correlation == 12);
  const gpu_activity& ms = d.gpu[2];
  CHECK(ms.kind == gpu_kind::memset);
  CHECK(d.str(ms.name) == "Memset (Device)");
  CHECK(ms.bytes == 1048576);
  CHECK(ms.stream == 9);

  // cudaGetDevice and cuCtxGetCurrent are filtered; the rest sorted by start.
  REQUIRE(d.runtime.size() == 4);
  CHECK(d.str(d.runtime[0].name) == "cudaStreamIsCapturing");
  CHECK_FALSE(d.runtime[0].flow);
  CHECK(d.runtime[0].cbid == 317);
  CHECK(d.str(d.runtime[1].name) == "cudaLaunchKernel");
  CHECK(d.runtime[1].start_ns == t0_ns + 3000);
  CHECK(d.runtime[1].end_ns == t0_ns + 3800);
  CHECK(d.runtime[1].tid == 31337);  // no callback entry: CUPTI's thread id
  CHECK(d.runtime[1].correlation == 11);
  CHECK(d.runtime[1].flow);
  CHECK_FALSE(d.runtime[1].driver);
  CHECK(d.str(d.runtime[2].name) == "cuLaunchKernel");
  CHECK(d.runtime[2].driver);
  CHECK(d.runtime[2].flow);
  CHECK(d.str(d.runtime[3].name) == "INVALID");
}

TEST_CASE("cupti: correlation gives calls and GPU work the External id of the enclosing op") {
  trace_data d;
  const auto devices = h100_table();
  activity_converter c(d, devices, test_window(), test_clock(), cupti_names());
  const CUpti_ActivityAPI in_op = api(CUPTI_ACTIVITY_KIND_RUNTIME, 211, 2000, 2500, 21);
  const CUpti_ActivityAPI outside = api(CUPTI_ACTIVITY_KIND_RUNTIME, 211, 3000, 3500, 22);
  const CUpti_ActivityKernel10 k1 = kernel("kernel", 2600, 2700, 21);
  const CUpti_ActivityKernel10 k2 = kernel("kernel", 3600, 3700, 22);
  const CUpti_ActivityMemcpy6 orphan = memcpy_record(3800, 3900, 23);  // call not recorded
  c.add_api(in_op, false);
  c.add_api(outside, false);
  c.add_kernel(k1);
  c.add_kernel(k2);
  c.add_memcpy(orphan);
  caller_table callers;
  callers[21] = api_caller{42, 5001};
  callers[22] = api_caller{0, 5002};  // the call was made outside any range
  callers[23] = api_caller{43, 5001};
  std::map<int, std::int64_t> totals;
  c.finish(callers, totals);

  REQUIRE(d.runtime.size() == 2);
  CHECK(d.runtime[0].external_id == 42);
  CHECK(d.runtime[0].tid == 5001);
  CHECK(d.runtime[1].external_id == 0);
  CHECK(d.runtime[1].tid == 5002);
  REQUIRE(d.gpu.size() == 3);
  CHECK(d.str(d.gpu[0].name) == "Kernel");
  CHECK(d.gpu[0].external_id == 42);
  CHECK(d.gpu[1].external_id == 0);
  CHECK(d.gpu[2].external_id == 43);
}

TEST_CASE("cupti: monotonic record times land on the CPU events' Unix time line") {
  // A CPU converter: tick 1000 is Unix 1.7e18 ns, 0.5 ns per tick, Unix - monotonic = 1.6e18.
  const tick_converter cpu{1000, 1700000000000000000, 0.5, 1600000000000000000};
  const window_bounds window{1000, 3000};  // Unix [1.7e18, 1.7e18 + 1000 ns]
  const mono_time_base base = monotonic_time_base(window, cpu);
  CHECK(base.window.start_tick == 100000000000000000ull);
  CHECK(base.window.end_tick == 100000000000001000ull);
  CHECK(base.clock.to_unix_ns(100000000000000250ull) == 1700000000000000250);
  CHECK(base.clock.to_unix_ns(base.window.end_tick) == cpu.to_unix_ns(window.end_tick));

  // The real calibration: a CPU tick and a monotonic read taken together agree within 50 us.
  clock_anchor();
  const tick_converter real = clock_calibrate();
  timespec ts{};
  const std::uint64_t tick = now_ticks();
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const std::int64_t mono = std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  const mono_time_base now = monotonic_time_base({tick, tick}, real);
  CHECK(std::llabs(now.clock.to_unix_ns(static_cast<std::uint64_t>(mono)) - real.to_unix_ns(tick)) < 50000);
}

TEST_CASE("cupti: records outside the window are dropped") {
  trace_data d;
  const auto devices = h100_table();
  activity_converter c(d, devices, window_bounds{2000, 5000}, test_clock(), cupti_names());
  c.add_kernel(kernel("before", 1500, 2100, 1));   // began before the window
  c.add_kernel(kernel("inside", 2000, 5000, 2));   // exactly the window
  c.add_kernel(kernel("after", 4900, 5001, 3));    // ended after it
  c.add_api(api(CUPTI_ACTIVITY_KIND_RUNTIME, 211, 1999, 2001, 1), false);
  c.add_api(api(CUPTI_ACTIVITY_KIND_RUNTIME, 211, 2500, 2600, 2), false);
  c.add_memcpy(memcpy_record(5000, 6000, 4));
  std::map<int, std::int64_t> totals;
  c.finish({}, totals);
  CHECK(c.outside_window() == 4);
  REQUIRE(d.gpu.size() == 1);
  CHECK(d.str(d.gpu[0].name) == "inside");
  REQUIRE(d.runtime.size() == 1);
  CHECK(d.runtime[0].correlation == 2);
}

TEST_CASE("cupti: GPU allocations become [memory] events with running totals per device") {
  trace_data d;
  d.memory.push_back(memory_event{t0_ns + 500, 77, 0x1000, 64, 64, 0, device_type::cpu, -1});
  const auto devices = h100_table();
  activity_converter c(d, devices, window_bounds{2000, 9000}, test_clock(), cupti_names());
  // Out of order on purpose: CUPTI delivers per buffer, not in time order.
  c.add_memory(memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, 4000, 0x7f0000000000, 1024, 33));
  c.add_memory(memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 2000, 0x7f0000000000, 1024, 31));
  c.add_memory(memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 3000, 0x7f0000100000, 2048, 32));
  c.add_memory(memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 1900, 0x7f0000200000, 512, 30));
  CUpti_ActivityMemory4 device1 =
      memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 3500, 0x7f1000000000, 4096, 34);
  device1.deviceId = 1;
  c.add_memory(device1);
  CUpti_ActivityMemory4 pinned =
      memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 3600, 0x600000, 8192, 35);
  pinned.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;  // host memory: not a GPU's
  c.add_memory(pinned);
  caller_table callers;
  callers[31] = api_caller{5, 6001};
  callers[32] = api_caller{6, 6002};
  std::map<int, std::int64_t> totals{{0, 100000}};  // allocated in an earlier window
  c.finish(callers, totals);

  // The allocation before the window (tick 1900) is counted, not written.
  CHECK(c.outside_window() == 1);
  REQUIRE(d.memory.size() == 5);
  CHECK(d.memory[0].device == device_type::cpu);  // the CPU event stays, in time order
  const memory_event& a = d.memory[1];
  CHECK(a.time_ns == t0_ns + 1000);
  CHECK(a.device == device_type::cuda);
  CHECK(a.device_id == 0);
  CHECK(a.addr == 0x7f0000000000u);
  CHECK(a.bytes == 1024);
  CHECK(a.total_allocated == 101536);  // 100000 + 512 (before the window) + 1024
  CHECK(a.total_reserved == 101536);
  CHECK(a.tid == 6001);
  CHECK(d.memory[2].bytes == 2048);
  CHECK(d.memory[2].total_allocated == 103584);
  CHECK(d.memory[2].tid == 6002);
  CHECK(d.memory[3].device_id == 1);
  CHECK(d.memory[3].total_allocated == 4096);
  CHECK(d.memory[3].tid == static_cast<std::int64_t>(::getpid()));  // no caller known
  CHECK(d.memory[4].bytes == -1024);
  CHECK(d.memory[4].total_allocated == 102560);
  CHECK(totals[0] == 102560);
  CHECK(totals[1] == 4096);
}

TEST_CASE("cupti: a buffer of records is walked by the real cuptiActivityGetNextRecord") {
  record_buffer buf;
  buf.put(kernel("_Z6kernelPfi", 5000, 7500, 11));
  buf.put(api(CUPTI_ACTIVITY_KIND_RUNTIME, 211, 4000, 4800, 11));
  buf.put(memcpy_record(8000, 10000, 12));
  buf.put(memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 3000, 0x7f0000000000, 256, 12));
  trace_data d;
  const auto devices = h100_table();
  activity_converter c(d, devices, test_window(), test_clock(), cupti_names());
  CUptiResult error = CUPTI_ERROR_UNKNOWN;
  CHECK(parse_buffer(buf.bytes, buf.used, cupti().get_next_record, c, &error) == 4);
  CHECK(error == CUPTI_SUCCESS);
  std::map<int, std::int64_t> totals;
  c.finish({}, totals);
  CHECK(d.gpu.size() == 2);
  CHECK(d.runtime.size() == 1);
  CHECK(d.memory.size() == 1);

  // A record of kind 0 (CUPTI_ACTIVITY_KIND_INVALID) stops the walk with CUPTI's error.
  record_buffer bad;
  bad.put(api(CUPTI_ACTIVITY_KIND_RUNTIME, 211, 4000, 4800, 11));
  bad.used += 64;  // zeroed bytes after it
  trace_data d2;
  activity_converter c2(d2, devices, test_window(), test_clock(), cupti_names());
  CHECK(parse_buffer(bad.bytes, bad.used, cupti().get_next_record, c2, &error) == 1);
  CHECK(error == CUPTI_ERROR_INVALID_KIND);
  CHECK(cupti().error_text(error) == "CUPTI_ERROR_INVALID_KIND");
}

TEST_CASE("cupti: buffer pool recycles, caps and queues in completion order") {
  buffer_pool pool(1024, 2);
  std::uint8_t* a = pool.acquire();
  std::uint8_t* b = pool.acquire();
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(a) % 8 == 0);
  CHECK(pool.acquire() == nullptr);  // cap reached: CUPTI drops instead
  CHECK(pool.acquire() == nullptr);
  CHECK(pool.take_refused() == 2);
  CHECK(pool.take_refused() == 0);
  pool.complete(b, 100);
  pool.complete(a, 0);  // returned unused: free again at once
  CHECK(pool.acquire() == a);
  pool.complete(a, 200);
  pool.complete(nullptr, 0);  // ignored
  const auto done = pool.take_completed();
  REQUIRE(done.size() == 2);
  CHECK(done[0].data == b);
  CHECK(done[0].valid_bytes == 100);
  CHECK(done[1].data == a);
  CHECK(done[1].valid_bytes == 200);
  CHECK(pool.take_completed().empty());
  pool.release(done[0].data);
  pool.release(done[1].data);
  CHECK(pool.allocated() == 2);
  CHECK(pool.acquire() != nullptr);
  CHECK(pool.acquire() != nullptr);
  CHECK(pool.allocated() == 2);  // reused, not grown
}

TEST_CASE("cupti: without the driver or CUPTI, one clear reason") {
  std::string why;
  CHECK(load_cuda_driver("libcuda-kinetoscope-test-missing.so.1", why) == nullptr);
  CHECK(why == "no NVIDIA driver (libcuda-kinetoscope-test-missing.so.1 not found)");
  why.clear();
  CHECK(load_cupti("libcupti-kinetoscope-test-missing.so", why) == nullptr);
  CHECK(why.starts_with("CUPTI not found (libcupti-kinetoscope-test-missing.so: "));
  // A library that is not CUPTI (libz has none of its functions).
  why.clear();
  CHECK(load_cupti("libz.so.1", why) == nullptr);
  CHECK(why == "libz.so.1 has no cuptiGetResultString (CUPTI older than the CUDA 13 headers?)");
}

TEST_CASE("cupti: profile on this machine, with and without a driver") {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    // The no-GPU path: the reason is the driver's absence, said once; CPU recording goes on.
    CHECK(cuda_unavailable_reason() == "no NVIDIA driver (libcuda.so.1 not found)");
    CHECK_FALSE(cuda_available());
    test_support::log_capture logs;
    {
      profile prof({.activities = {activity::cpu, activity::cuda, activity::cuda}});
      CHECK_FALSE(prof.cuda_active());
      prof.start();
      { KINETOSCOPE_RANGE("cpu_still_records"); }
      prof.stop();
      CHECK(test_support::count_named(prof.last_trace(), "cpu_still_records") == 1);
      CHECK(prof.last_trace().gpu.empty());
      CHECK(prof.last_trace().devices.empty());
      CHECK_FALSE(prof.last_trace().cuda_enabled);
    }
    REQUIRE(logs.messages.size() == 1);
    CHECK(logs.messages[0] ==
          "activity cuda: no NVIDIA driver (libcuda.so.1 not found); recording CPU activity only");
    // Default activities mean "what is available": CPU only, silently.
    profile quiet;
    CHECK_FALSE(quiet.cuda_active());
    CHECK(logs.messages.size() == 1);
  } else {
    dlclose(driver);
    // A driver is present: either it has a device and CUPTI (cuda records) or the reason says
    // which part is missing.
    CHECK(cuda_available() == cuda_unavailable_reason().empty());
  }
}

TEST_CASE("cupti: converted records through the writer and the viewer's analysis") {
  // An operator aten::mm (External id 7) on thread 4242 launches a kernel; the launch happens
  // inside it; a DtoH copy follows outside any op.
  trace_data d;
  d.pid = 4242;
  d.process_name = "cuda_sample";
  d.start_ns = t0_ns;
  d.end_ns = t0_ns + 99000;
  d.cuda_enabled = true;
  d.threads = {{4242, "cuda_sample"}};
  const std::uint32_t mm = d.intern("aten::mm");
  d.events.push_back({t0_ns + 1000, t0_ns + 5000, 4242, 4242, mm, cpu_category::cpu_op, 7, -1, 0, 0, 0, 0});
  const auto devices = h100_table();
  activity_converter c(d, devices, test_window(), test_clock(), cupti_names());
  c.add_api(api(CUPTI_ACTIVITY_KIND_RUNTIME, 211, 3000, 3500, 51), false);   // inside aten::mm
  c.add_kernel(kernel("_Z6kernelPfi", 7000, 9000, 51));
  c.add_api(api(CUPTI_ACTIVITY_KIND_RUNTIME, 31, 10000, 14000, 52), false);  // cudaMemcpy, no op
  CUpti_ActivityMemcpy6 dtoh = memcpy_record(11000, 13000, 52);
  dtoh.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  dtoh.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  dtoh.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  c.add_memcpy(dtoh);
  caller_table callers;
  callers[51] = api_caller{7, 4242};
  callers[52] = api_caller{0, 4242};
  std::map<int, std::int64_t> totals;
  c.finish(callers, totals);
  for (const occupancy_device& dev : devices) d.devices.push_back(dev.props);

  const std::string text = chrome_trace_string(d);
  const nlohmann::json j = nlohmann::json::parse(text);
  const auto& ev = j["traceEvents"];
  const auto find = [&](const std::string& cat, const std::string& name) {
    for (const auto& e : ev)
      if (e.value("cat", "") == cat && e.value("name", "") == name) return e;
    FAIL("no " << cat << " " << name);
    return nlohmann::json();
  };
  const auto launch = find("cuda_runtime", "cudaLaunchKernel");
  const auto k = find("kernel", "kernel(float*, int)");
  CHECK(launch["args"]["External id"] == 7);
  CHECK(launch["args"]["correlation"] == 51);
  CHECK(launch["args"]["cbid"] == 211);
  CHECK(launch["tid"] == 4242);
  CHECK(k["args"]["External id"] == 7);
  CHECK(k["args"]["correlation"] == 51);
  CHECK(k["args"]["est. achieved occupancy %"] == 25);
  CHECK(k["args"]["grid"] == nlohmann::json::array({264, 1, 1}));
  CHECK(k["pid"] == 0);
  CHECK(k["tid"] == 7);
  const auto copy = find("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)");
  CHECK_FALSE(copy["args"].contains("External id"));  // launched outside any op
  CHECK(copy["args"]["memory bandwidth (GB/s)"] == 2.0);  // 4000 B in 2000 ns
  CHECK(j["deviceProperties"][0]["name"] == "NVIDIA H100 80GB HBM3");
  CHECK(j["deviceProperties"][0]["numSms"] == 132);

  // ac2g: one "s" on the runtime slice and one "f" on the GPU slice per flow call, same id.
  std::vector<nlohmann::json> starts, finishes;
  for (const auto& e : ev) {
    if (e.value("cat", "") != "ac2g") continue;
    (e["ph"] == "s" ? starts : finishes).push_back(e);
  }
  REQUIRE(starts.size() == 2);
  REQUIRE(finishes.size() == 2);
  CHECK(starts[0]["id"] == 51);
  CHECK(starts[0]["pid"] == launch["pid"]);
  CHECK(starts[0]["tid"] == launch["tid"]);
  CHECK(starts[0]["ts"] == launch["ts"]);
  CHECK_FALSE(starts[0].contains("bp"));
  CHECK(finishes[0]["id"] == 51);
  CHECK(finishes[0]["pid"] == k["pid"]);
  CHECK(finishes[0]["tid"] == k["tid"]);
  CHECK(finishes[0]["ts"] == k["ts"]);
  CHECK(finishes[0]["bp"] == "e");
  CHECK(starts[1]["id"] == 52);
  CHECK(finishes[1]["id"] == 52);

  // The viewer attributes the kernel to the operator that launched it.
  analysis::load_result r = analysis::load_trace_buffer(text, "cupti.json");
  REQUIRE(r.ok());
  const analysis::op_trees trees = analysis::build_op_tree(*r.model);
  const auto rows = analysis::kernels_by_name_and_operator(*r.model, trees);
  bool kernel_row = false;
  for (const auto& row : rows) {
    if (row.name != "kernel(float*, int)") continue;
    kernel_row = true;
    CHECK(row.operator_name == "aten::mm");
    CHECK(row.calls == 1);
    CHECK(row.total_us == 2.0);
    CHECK(row.grid == "[264, 1, 1]");
    CHECK(row.occupancy_pct == 25.0);
  }
  CHECK(kernel_row);

  // And key_averages() counts the kernel's device time under aten::mm.
  const averages avg = key_averages(build_events(d));
  bool mm_row = false;
  for (const auto& row : avg.rows()) {
    if (row.key != "aten::mm") continue;
    mm_row = true;
    CHECK(row.device_time_total_ns == 2000);
  }
  CHECK(mm_row);
}
