// SPDX-License-Identifier: BSD-3-Clause
// The CUPTI backend of the cuda activity: probes the driver and CUPTI once, enables activity
// records for each window, tags every runtime/driver call with the kinetoscope op open on the
// calling thread, and converts the window's records at stop (see ARCHITECTURE.md, "CUPTI
// backend").
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../cuda_backend.hpp"
#include "../log.hpp"
#include "activity_convert.hpp"
#include "buffer_pool.hpp"
#include "cupti_loader.hpp"
#include "kinetoscope/detail/recorder.hpp"

namespace kinetoscope::detail {
namespace {

constexpr std::size_t buffer_bytes = std::size_t{2} << 20;  // 2 MiB: ~10 000 kernel records
constexpr std::size_t max_buffers = 128;                    // 256 MiB at most

/// Correlation id -> caller, appended by the API callback on the calling thread. One log per
/// thread (its mutex is uncontended except while the window is collected); logs outlive
/// their threads so that calls of a thread that ended are still attributed.
struct caller_log {
  std::mutex mutex;
  std::vector<std::pair<std::uint32_t, api_caller>> entries;
};

class caller_registry {
 public:
  caller_log& mine() {
    thread_local std::shared_ptr<caller_log> log;
    if (!log) {
      log = std::make_shared<caller_log>();
      std::lock_guard lock(mutex_);
      logs_.push_back(log);
    }
    return *log;
  }
  caller_table take_all() {
    caller_table table;
    std::lock_guard lock(mutex_);
    for (const auto& log : logs_) {
      std::lock_guard log_lock(log->mutex);
      for (const auto& [correlation, caller] : log->entries) table.emplace(correlation, caller);
      log->entries.clear();
    }
    return table;
  }

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<caller_log>> logs_;
};

/// The activity kinds of a window (MEMORY2 only with profile_memory).
constexpr CUpti_ActivityKind window_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

struct backend {
  const cuda_driver_api* driver = nullptr;
  const cupti_api* cupti = nullptr;
  std::string unavailable;
  std::vector<occupancy_device> devices;

  bool registered = false;  // buffer and timestamp callbacks (once per process)
  CUpti_SubscriberHandle subscriber = nullptr;
  std::vector<CUpti_ActivityKind> enabled;
  std::map<int, std::int64_t> allocated;  // running GPU memory totals, across windows

  buffer_pool pool{buffer_bytes, max_buffers};
  caller_registry callers;
  std::atomic<bool> recording{false};
  std::atomic<std::size_t> dropped{0};
};

backend& state();

std::int64_t os_tid() {
  thread_local const std::int64_t tid = static_cast<std::int64_t>(::gettid());
  return tid;
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = state().pool.acquire();
  *size = *buffer != nullptr ? state().pool.buffer_bytes() : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream, std::uint8_t* buffer,
                               std::size_t /*size*/, std::size_t valid_bytes) {
  backend& b = state();
  b.pool.complete(buffer, valid_bytes);
  std::size_t dropped = 0;
  if (b.cupti->get_num_dropped_records(context, stream, &dropped) == CUPTI_SUCCESS)
    b.dropped.fetch_add(dropped, std::memory_order_relaxed);
}

/// CUPTI stamps GPU and API records with this clock. It must return nanoseconds (cupti_activity.h:
/// CUPTI interpolates GPU timestamps onto it), so it is CLOCK_MONOTONIC, the clock the recorder's
/// ticks are calibrated against; cuda_stop() shifts it onto the Unix epoch with the window's own
/// monotonic-to-Unix offset, so CPU and GPU events share one time line.
std::uint64_t CUPTIAPI timestamp() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

/// On entry to a runtime/driver call: remember which op was open on this thread.
void CUPTIAPI on_api_call(void* /*user*/, CUpti_CallbackDomain /*domain*/, CUpti_CallbackId /*cbid*/,
                          const void* data) {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->callbackSite != CUPTI_API_ENTER) return;
  backend& b = state();
  if (!b.recording.load(std::memory_order_relaxed)) return;
  const thread_buffer* tb = t_buffer;
  const api_caller caller{tb != nullptr ? tb->current_external_id : 0,
                          tb != nullptr ? tb->tid : os_tid()};
  caller_log& log = b.callers.mine();
  std::lock_guard lock(log.mutex);
  log.entries.emplace_back(cb->correlationId, caller);
}

occupancy_device read_device(const cuda_driver_api& d, int ordinal) {
  occupancy_device out;
  device_properties& p = out.props;
  p.id = ordinal;
  CUdevice dev = 0;
  if (d.device_get(&dev, ordinal) != CUDA_SUCCESS) return out;
  char name[256] = {};
  if (d.device_get_name(name, sizeof name, dev) == CUDA_SUCCESS) p.name = name;
  std::size_t total = 0;
  if (d.device_total_mem(&total, dev) == CUDA_SUCCESS) p.total_global_mem = static_cast<std::int64_t>(total);
  const auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    return d.device_get_attribute(&v, a, dev) == CUDA_SUCCESS ? v : 0;
  };
  p.compute_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  p.compute_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  p.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  p.max_threads_per_multiprocessor = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  p.regs_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  p.warp_size = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  p.shared_mem_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  p.num_sms = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  p.regs_per_multiprocessor = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  p.shared_mem_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  p.shared_mem_per_multiprocessor = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  out.reserved_shared_mem_per_block = attr(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
  return out;
}

/// Driver first (the common failure on a machine without a GPU), then devices, then CUPTI.
void probe(backend& b) {
  b.driver = load_cuda_driver("libcuda.so.1", b.unavailable);
  if (b.driver == nullptr) return;
  int count = 0;
  if (const CUresult r = b.driver->device_get_count(&count); r != CUDA_SUCCESS || count <= 0) {
    b.unavailable = r != CUDA_SUCCESS ? "no CUDA device (cuDeviceGetCount: " + b.driver->error_text(r) + ")"
                                      : "no CUDA device (the driver reports none)";
    return;
  }
  b.cupti = load_default_cupti(b.unavailable);
  if (b.cupti == nullptr) return;
  for (int i = 0; i < count; ++i) b.devices.push_back(read_device(*b.driver, i));
}

backend& state() {
  // Never destroyed: CUPTI may call back from its own threads until the process ends.
  static backend* const b = [] {
    auto* s = new backend;
    probe(*s);
    return s;
  }();
  return *b;
}

void warn(const std::string& what) { log(log_level::warning, "activity cuda: " + what); }

/// Once per process: buffers and the clock must be registered before any kind is enabled.
bool register_once(backend& b) {
  if (b.registered) return true;
  if (const CUptiResult r = b.cupti->register_callbacks(buffer_requested, buffer_completed);
      r != CUPTI_SUCCESS) {
    warn("CUPTI refused its buffer callbacks (" + b.cupti->error_text(r) +
         "); recording CPU activity only");
    return false;
  }
  if (const CUptiResult r = b.cupti->register_timestamp_callback(timestamp); r != CUPTI_SUCCESS) {
    warn("CUPTI cannot stamp records with the profiler's clock (" + b.cupti->error_text(r) +
         "); recording CPU activity only");
    return false;
  }
  b.registered = true;
  return true;
}

/// KINETOSCOPE_CUPTI_CALLBACKS=off: no API callback at all (GPU work is then not linked to ops).
/// Only for measuring what the callback costs against CUPTI's external correlation (cuda_stress
/// --launch-bench N --correlation external, ARCHITECTURE.md "CUPTI backend"); not a user option.
bool callbacks_wanted() {
  static const bool wanted = [] {
    const char* v = std::getenv("KINETOSCOPE_CUPTI_CALLBACKS");
    return v == nullptr || std::string_view(v) != "off";
  }();
  return wanted;
}

/// External ids come from the API callback; without it the trace still has every call and
/// kernel, only not linked to ops (another CUPTI subscriber, e.g. a second profiler).
void enable_callbacks(backend& b, std::uint32_t on) {
  if (!callbacks_wanted()) return;
  if (b.subscriber == nullptr) {
    if (on == 0) return;
    if (const CUptiResult r = b.cupti->subscribe(&b.subscriber, on_api_call, nullptr); r != CUPTI_SUCCESS) {
      b.subscriber = nullptr;
      warn("no External ids on GPU work: CUPTI callbacks unavailable (" + b.cupti->error_text(r) + ")");
      return;
    }
  }
  b.cupti->enable_domain(on, b.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
  for (const std::uint32_t cbid : kept_driver_calls())
    b.cupti->enable_callback(on, b.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid);
}

void disable_kinds(backend& b) {
  for (const CUpti_ActivityKind k : b.enabled) b.cupti->disable(k);
  b.enabled.clear();
}

/// Waits for one device's primary context, if the program created it (never creates one).
void synchronize_device(const cuda_driver_api& d, int ordinal) {
  CUdevice dev = 0;
  unsigned flags = 0;
  int active = 0;
  if (d.device_get(&dev, ordinal) != CUDA_SUCCESS ||
      d.primary_ctx_get_state(dev, &flags, &active) != CUDA_SUCCESS || active == 0) {
    return;
  }
  CUcontext ctx = nullptr;
  if (d.primary_ctx_retain(&ctx, dev) != CUDA_SUCCESS) return;
  if (d.ctx_push_current(ctx) == CUDA_SUCCESS) {
    if (const CUresult r = d.ctx_synchronize(); r != CUDA_SUCCESS)
      warn("synchronising device " + std::to_string(ordinal) + " failed (" + d.error_text(r) +
           "); its last kernels may be missing");
    CUcontext popped = nullptr;
    d.ctx_pop_current(&popped);
  }
  d.primary_ctx_release(dev);
}

}  // namespace

const std::string& cuda_unavailable_reason() { return state().unavailable; }

bool cuda_start(bool profile_memory) {
  backend& b = state();
  if (!b.unavailable.empty() || !register_once(b)) return false;
  std::vector<CUpti_ActivityKind> kinds(std::begin(window_kinds), std::end(window_kinds));
  if (profile_memory) kinds.push_back(CUPTI_ACTIVITY_KIND_MEMORY2);
  for (const CUpti_ActivityKind k : kinds) {
    if (const CUptiResult r = b.cupti->enable(k); r != CUPTI_SUCCESS) {
      disable_kinds(b);
      warn("CUPTI refused to record (cuptiActivityEnable: " + b.cupti->error_text(r) +
           "); recording CPU activity only");
      return false;
    }
    b.enabled.push_back(k);
  }
  b.recording.store(true, std::memory_order_relaxed);
  enable_callbacks(b, 1);
  return true;
}

void cuda_synchronize() {
  const backend& b = state();
  if (b.driver == nullptr) return;
  for (std::size_t i = 0; i < b.devices.size(); ++i) synchronize_device(*b.driver, static_cast<int>(i));
}

void cuda_stop(trace_data& out, const window_bounds& window, const tick_converter& clock) {
  backend& b = state();
  if (b.cupti == nullptr) return;
  enable_callbacks(b, 0);
  disable_kinds(b);
  b.cupti->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  b.recording.store(false, std::memory_order_relaxed);

  // Records carry CLOCK_MONOTONIC ns (timestamp() above): the same Unix ns as the CPU events.
  const mono_time_base base = monotonic_time_base(window, clock);
  activity_converter converter(out, b.devices, base.window, base.clock, [&b](bool driver, std::uint32_t cbid) {
    const char* name = nullptr;
    const auto domain = driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
    return b.cupti->get_callback_name(domain, cbid, &name) == CUPTI_SUCCESS ? name : nullptr;
  });
  for (const buffer_pool::filled& f : b.pool.take_completed()) {
    CUptiResult error = CUPTI_SUCCESS;
    parse_buffer(f.data, f.valid_bytes, b.cupti->get_next_record, converter, &error);
    if (error != CUPTI_SUCCESS) warn("a CUPTI buffer could not be read to its end (" + b.cupti->error_text(error) + ")");
    b.pool.release(f.data);
  }
  converter.finish(b.callers.take_all(), b.allocated);
  for (const occupancy_device& d : b.devices) out.devices.push_back(d.props);

  const std::size_t dropped = b.dropped.exchange(0);
  const std::size_t refused = b.pool.take_refused();
  if (dropped != 0 || refused != 0) {
    warn(std::to_string(dropped) + " GPU activity records were dropped by CUPTI (" +
         std::to_string(refused) + " buffer requests refused at the " +
         std::to_string(max_buffers * buffer_bytes >> 20) +
         " MiB cap); the trace misses them: use a shorter window");
  }
}

}  // namespace kinetoscope::detail
