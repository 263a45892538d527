// SPDX-License-Identifier: BSD-3-Clause
#include "activity_convert.hpp"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <cxxabi.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>

namespace kinetoscope::detail {
namespace {

constexpr std::array<std::string_view, 11> copy_kinds = {
    "Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
constexpr std::array<std::string_view, 8> memory_kinds = {
    "Unknown", "Pageable", "Pinned", "Device", "Array", "Managed", "Device Static", "Managed Static"};

template <std::size_t N>
std::string_view kind_text(const std::array<std::string_view, N>& table, unsigned kind) {
  return kind < N ? table[kind] : table[0];
}

/// "cudaMemcpyAsync_ptsz" -> "cudaMemcpyAsync": the per-thread default stream variants enqueue
/// exactly like their base call.
std::string_view strip_stream_suffix(std::string_view name) {
  for (const std::string_view suffix : {std::string_view("_ptsz"), std::string_view("_ptds")}) {
    if (name.ends_with(suffix)) return name.substr(0, name.size() - suffix.size());
  }
  return name;
}

/// Stable sort by time. CUPTI's buffers are mostly in order already (per stream), so check
/// first; otherwise sort (time, index) keys and gather once: moving the 136-byte records in
/// the sort itself cost three quarters of the conversion.
template <class T, class Time>
void sort_by_time(std::vector<T>& v, Time time) {
  const auto earlier = [&](const T& a, const T& b) { return time(a) < time(b); };
  if (std::is_sorted(v.begin(), v.end(), earlier)) return;
  std::vector<std::pair<std::int64_t, std::size_t>> keys(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) keys[i] = {time(v[i]), i};
  std::sort(keys.begin(), keys.end());  // index breaks ties: stable
  std::vector<T> sorted;
  sorted.reserve(v.size());
  for (const auto& k : keys) sorted.push_back(std::move(v[k.second]));
  v.swap(sorted);
}

bool is_device_memory(CUpti_ActivityMemoryKind kind) {
  return kind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE || kind == CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
}

}  // namespace

std::string_view strip_version_suffix(std::string_view name) {
  const std::size_t at = name.rfind("_v");
  if (at == std::string_view::npos || at + 2 == name.size()) return name;
  const std::string_view digits = name.substr(at + 2);
  const bool all_digits =
      std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  return all_digits ? name.substr(0, at) : name;
}

bool keep_runtime_call(std::uint32_t cbid) {
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventCreate_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventCreateWithFlags_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020:
      return false;
    default:
      return true;
  }
}

std::span<const std::uint32_t> kept_driver_calls() {
  static constexpr std::array<std::uint32_t, 11> calls = {
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree,
      CUPTI_DRIVER_TRACE_CBID_cuMemCreate,         CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
      CUPTI_DRIVER_TRACE_CBID_cuMemMap,            CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
      CUPTI_DRIVER_TRACE_CBID_cuMemSetAccess};
  return calls;
}

bool keep_driver_call(std::uint32_t cbid) {
  const auto calls = kept_driver_calls();
  return std::find(calls.begin(), calls.end(), cbid) != calls.end();
}

bool enqueues_or_waits(std::string_view name, bool driver) {
  const std::string_view base = strip_stream_suffix(name);
  if (driver) return base == "cuLaunchKernel" || base == "cuLaunchKernelEx";
  if (base.starts_with("cudaMemcpy") || base.starts_with("cudaMemset")) return true;
  // __cudaLaunchKernel is how CUDA 13's nvcc-generated code launches a kernel (<<<...>>>).
  static constexpr std::array<std::string_view, 9> calls = {
      "cudaLaunchKernel",      "cudaLaunchKernelExC",         "__cudaLaunchKernel",
      "cudaLaunchCooperativeKernel", "cudaLaunchCooperativeKernelMultiDevice",
      "cudaGraphLaunch",       "cudaStreamSynchronize",       "cudaDeviceSynchronize",
      "cudaStreamWaitEvent"};
  return std::find(calls.begin(), calls.end(), base) != calls.end();
}

std::string memcpy_name(std::uint8_t copy_kind, std::uint8_t src_kind, std::uint8_t dst_kind) {
  std::string s = "Memcpy ";
  s += kind_text(copy_kinds, copy_kind);
  s += " (";
  s += kind_text(memory_kinds, src_kind);
  s += " -> ";
  s += kind_text(memory_kinds, dst_kind);
  s += ')';
  return s;
}

std::string memset_name(std::uint16_t memory_kind) {
  std::string s = "Memset (";
  s += kind_text(memory_kinds, memory_kind);
  s += ')';
  return s;
}

std::string kernel_name(const char* mangled) {
  if (mangled == nullptr) return "Kernel";
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), &std::free);
  std::string name = status == 0 && demangled ? demangled.get() : mangled;
  if (name == "kernel") name = "Kernel";
  return name;
}

mono_time_base monotonic_time_base(const window_bounds& cpu_window, const tick_converter& cpu) {
  const std::int64_t offset = cpu.unix_minus_mono_ns;
  const std::int64_t start_unix = cpu.to_unix_ns(cpu_window.start_tick);
  const auto start_mono = static_cast<std::uint64_t>(start_unix - offset);
  // Referenced at the window start, so the double in to_unix_ns only holds small deltas (exact).
  return {window_bounds{start_mono, static_cast<std::uint64_t>(cpu.to_unix_ns(cpu_window.end_tick) - offset)},
          tick_converter{start_mono, start_unix, 1.0, offset}};
}

activity_converter::activity_converter(trace_data& out, const std::vector<occupancy_device>& devices,
                                       const window_bounds& window, const tick_converter& clock,
                                       callback_name_fn names)
    : out_(out), devices_(devices), window_(window), clock_(clock), names_(std::move(names)) {
  if (out_.strings.empty()) out_.strings.emplace_back();
  for (std::size_t i = 0; i < out_.strings.size(); ++i)
    names_by_text_.try_emplace(out_.strings[i], static_cast<std::uint32_t>(i));
}

std::uint32_t activity_converter::intern(std::string_view s) {
  const auto [it, inserted] =
      names_by_text_.try_emplace(std::string(s), static_cast<std::uint32_t>(out_.strings.size()));
  if (inserted) out_.strings.emplace_back(s);
  return it->second;
}

bool activity_converter::inside(std::uint64_t start, std::uint64_t end) const noexcept {
  return start >= window_.start_tick && end <= window_.end_tick && start <= end;
}

void activity_converter::add(const CUpti_Activity* record) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      add_kernel(*reinterpret_cast<const CUpti_ActivityKernel10*>(record));
      return;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      add_memcpy(*reinterpret_cast<const CUpti_ActivityMemcpy6*>(record));
      return;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      add_memset(*reinterpret_cast<const CUpti_ActivityMemset4*>(record));
      return;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      add_api(*reinterpret_cast<const CUpti_ActivityAPI*>(record), false);
      return;
    case CUPTI_ACTIVITY_KIND_DRIVER:
      add_api(*reinterpret_cast<const CUpti_ActivityAPI*>(record), true);
      return;
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      add_memory(*reinterpret_cast<const CUpti_ActivityMemory4*>(record));
      return;
    default:
      ++unknown_;
      return;
  }
}

gpu_activity* activity_converter::begin_gpu(gpu_kind kind, std::uint64_t start, std::uint64_t end,
                                           std::uint32_t device, std::uint32_t context,
                                           std::uint32_t stream, std::uint32_t correlation) {
  if (!inside(start, end)) {
    ++outside_window_;
    return nullptr;
  }
  gpu_activity& g = out_.gpu.emplace_back();
  g.kind = kind;
  g.start_ns = clock_.to_unix_ns(start);
  g.end_ns = clock_.to_unix_ns(end);
  g.device = static_cast<std::int32_t>(device);
  g.context = context;
  g.stream = stream;
  g.correlation = correlation;
  return &g;
}

void activity_converter::add_kernel(const CUpti_ActivityKernel10& k) {
  gpu_activity* out = begin_gpu(gpu_kind::kernel, k.start, k.end, k.deviceId, k.contextId,
                                k.streamId, k.correlationId);
  if (out == nullptr) return;
  gpu_activity& g = *out;
  const auto [name, unseen] = kernel_names_.try_emplace(k.name, 0);
  if (unseen) name->second = intern(kernel_name(k.name));
  g.name = name->second;
  g.grid[0] = k.gridX;
  g.grid[1] = k.gridY;
  g.grid[2] = k.gridZ;
  g.block[0] = k.blockX;
  g.block[1] = k.blockY;
  g.block[2] = k.blockZ;
  g.registers_per_thread = k.registersPerThread;
  g.shared_memory = k.staticSharedMemory + k.dynamicSharedMemory;
  if (k.deviceId < devices_.size() && devices_[k.deviceId].props.num_sms > 0) {
    const occupancy_device& d = devices_[k.deviceId];
    const std::int64_t blocks = std::int64_t{k.gridX} * k.gridY * k.gridZ;
    const std::int64_t threads = std::int64_t{k.blockX} * k.blockY * k.blockZ;
    g.blocks_per_sm = static_cast<double>(blocks) / d.props.num_sms;
    g.warps_per_sm = g.blocks_per_sm * static_cast<double>(threads) / 32.0;
    const occupancy_launch launch{k.registersPerThread, k.staticSharedMemory,
                                  k.dynamicSharedMemory, static_cast<std::int32_t>(threads)};
    g.occupancy_pct = estimated_occupancy_pct(d, launch, g.blocks_per_sm);
  }
}

void activity_converter::add_memcpy(const CUpti_ActivityMemcpy6& m) {
  gpu_activity* g = begin_gpu(gpu_kind::memcpy, m.start, m.end, m.deviceId, m.contextId,
                              m.streamId, m.correlationId);
  if (g == nullptr) return;
  g->name = intern(memcpy_name(m.copyKind, m.srcKind, m.dstKind));
  g->bytes = static_cast<std::int64_t>(m.bytes);
}

void activity_converter::add_memset(const CUpti_ActivityMemset4& m) {
  gpu_activity* g = begin_gpu(gpu_kind::memset, m.start, m.end, m.deviceId, m.contextId,
                              m.streamId, m.correlationId);
  if (g == nullptr) return;
  g->name = intern(memset_name(m.memoryKind));
  g->bytes = static_cast<std::int64_t>(m.bytes);
}

std::uint32_t activity_converter::api_name(bool driver, std::uint32_t cbid) {
  const std::uint64_t key = (std::uint64_t{driver} << 32) | cbid;
  if (auto it = api_names_.find(key); it != api_names_.end()) return it->second;
  const char* full = names_ ? names_(driver, cbid) : nullptr;
  const std::uint32_t id = intern(full != nullptr ? strip_version_suffix(full) : "INVALID");
  api_names_.emplace(key, id);
  return id;
}

void activity_converter::add_api(const CUpti_ActivityAPI& a, bool driver) {
  if (driver ? !keep_driver_call(a.cbid) : !keep_runtime_call(a.cbid)) return;
  if (!inside(a.start, a.end)) {
    ++outside_window_;
    return;
  }
  runtime_call r;
  r.start_ns = clock_.to_unix_ns(a.start);
  r.end_ns = clock_.to_unix_ns(a.end);
  r.tid = a.threadId;  // replaced by the caller's OS thread id in finish() when known
  r.name = api_name(driver, a.cbid);
  r.cbid = static_cast<std::int32_t>(a.cbid);
  r.correlation = a.correlationId;
  r.driver = driver;
  r.flow = enqueues_or_waits(out_.strings[r.name], driver);
  out_.runtime.push_back(r);
}

void activity_converter::add_memory(const CUpti_ActivityMemory4& m) {
  if (!is_device_memory(m.memoryKind)) return;  // host (pinned/pageable) memory is not a GPU's
  std::int64_t bytes = static_cast<std::int64_t>(m.bytes);
  if (m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
    bytes = -bytes;
  } else if (m.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION) {
    return;
  }
  // Kept even outside the window: the running total must count it (finish() drops it then).
  memory_.push_back({m.timestamp, m.address, bytes, static_cast<std::int32_t>(m.deviceId),
                     m.correlationId});
}

void activity_converter::finish(const caller_table& callers, std::map<int, std::int64_t>& totals) {
  const auto caller = [&](std::int64_t correlation) -> const api_caller* {
    const auto it = callers.find(static_cast<std::uint32_t>(correlation));
    return it == callers.end() ? nullptr : &it->second;
  };
  for (runtime_call& r : out_.runtime) {
    if (const api_caller* c = caller(r.correlation)) {
      r.external_id = c->external_id;
      r.tid = c->tid;
    }
  }
  for (gpu_activity& g : out_.gpu) {
    if (const api_caller* c = caller(g.correlation)) g.external_id = c->external_id;
  }

  std::stable_sort(memory_.begin(), memory_.end(),
                   [](const pending_memory& a, const pending_memory& b) { return a.tick < b.tick; });
  for (const pending_memory& p : memory_) {
    std::int64_t& total = totals[p.device];
    total += p.bytes;
    if (!inside(p.tick, p.tick)) {
      ++outside_window_;
      continue;
    }
    memory_event e;
    e.time_ns = clock_.to_unix_ns(p.tick);
    const api_caller* c = caller(p.correlation);
    e.tid = c != nullptr ? c->tid : static_cast<std::int64_t>(::getpid());
    e.addr = p.addr;
    e.bytes = p.bytes;
    e.total_allocated = total;
    e.total_reserved = total;  // no caching allocator: what is allocated is what is reserved
    e.device = device_type::cuda;
    e.device_id = static_cast<std::int16_t>(p.device);
    out_.memory.push_back(e);
  }
  memory_.clear();

  sort_by_time(out_.memory, [](const memory_event& e) { return e.time_ns; });
  sort_by_time(out_.runtime, [](const runtime_call& r) { return r.start_ns; });
  sort_by_time(out_.gpu, [](const gpu_activity& g) { return g.start_ns; });
}

std::size_t parse_buffer(std::uint8_t* buffer, std::size_t valid_bytes, next_record_fn next,
                         activity_converter& converter, CUptiResult* error) {
  std::size_t count = 0;
  CUpti_Activity* record = nullptr;
  CUptiResult r = CUPTI_SUCCESS;
  while ((r = next(buffer, valid_bytes, &record)) == CUPTI_SUCCESS) {
    converter.add(record);
    ++count;
  }
  // MAX_LIMIT_REACHED is the normal end of a buffer; anything else is a damaged buffer.
  if (error != nullptr) *error = r == CUPTI_ERROR_MAX_LIMIT_REACHED ? CUPTI_SUCCESS : r;
  return count;
}

}  // namespace kinetoscope::detail
