// SPDX-License-Identifier: BSD-3-Clause
#include "cupti_loader.hpp"

#include <dlfcn.h>

#include <map>
#include <memory>
#include <mutex>

namespace kinetoscope::detail {
namespace {

/// Resolves one symbol into a typed pointer; false (and `missing` named) when absent.
template <class Fn>
bool resolve(void* lib, const char* symbol, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
  if (fn == nullptr && missing.empty()) missing = symbol;
  return fn != nullptr;
}

std::string dl_error() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown error";
}

std::mutex g_mutex;

template <class Api>
std::map<std::string, std::unique_ptr<Api>>& cache() {
  static std::map<std::string, std::unique_ptr<Api>> loaded;
  return loaded;
}

}  // namespace

std::string cupti_api::error_text(CUptiResult r) const {
  const char* text = nullptr;
  if (get_result_string != nullptr && get_result_string(r, &text) == CUPTI_SUCCESS && text != nullptr)
    return text;
  return "CUPTI error " + std::to_string(static_cast<int>(r));
}

std::string cuda_driver_api::error_text(CUresult r) const {
  const char* text = nullptr;
  if (get_error_name != nullptr && get_error_name(r, &text) == CUDA_SUCCESS && text != nullptr)
    return text;
  return "CUDA error " + std::to_string(static_cast<int>(r));
}

const cupti_api* load_cupti(const char* library, std::string& why) {
  std::lock_guard lock(g_mutex);
  auto& loaded = cache<cupti_api>();
  if (auto it = loaded.find(library); it != loaded.end()) return it->second.get();
  void* lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    why = std::string("CUPTI not found (") + library + ": " + dl_error() + ")";
    return nullptr;
  }
  auto api = std::make_unique<cupti_api>();
  std::string missing;
  resolve(lib, "cuptiGetResultString", api->get_result_string, missing);
  resolve(lib, "cuptiActivityRegisterCallbacks", api->register_callbacks, missing);
  resolve(lib, "cuptiActivityRegisterTimestampCallback", api->register_timestamp_callback, missing);
  resolve(lib, "cuptiActivityEnable", api->enable, missing);
  resolve(lib, "cuptiActivityDisable", api->disable, missing);
  resolve(lib, "cuptiActivityFlushAll", api->flush_all, missing);
  resolve(lib, "cuptiActivityGetNextRecord", api->get_next_record, missing);
  resolve(lib, "cuptiActivityGetNumDroppedRecords", api->get_num_dropped_records, missing);
  resolve(lib, "cuptiSubscribe", api->subscribe, missing);
  resolve(lib, "cuptiUnsubscribe", api->unsubscribe, missing);
  resolve(lib, "cuptiEnableDomain", api->enable_domain, missing);
  resolve(lib, "cuptiEnableCallback", api->enable_callback, missing);
  resolve(lib, "cuptiGetCallbackName", api->get_callback_name, missing);
  if (!missing.empty()) {
    why = std::string(library) + " has no " + missing + " (CUPTI older than the CUDA 13 headers?)";
    return nullptr;
  }
  return loaded.emplace(library, std::move(api)).first->second.get();
}

const cuda_driver_api* load_cuda_driver(const char* library, std::string& why) {
  std::lock_guard lock(g_mutex);
  auto& loaded = cache<cuda_driver_api>();
  if (auto it = loaded.find(library); it != loaded.end()) return it->second.get();
  void* lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    why = std::string("no NVIDIA driver (") + library + " not found)";
    return nullptr;
  }
  auto api = std::make_unique<cuda_driver_api>();
  std::string missing;
  resolve(lib, "cuInit", api->init, missing);
  resolve(lib, "cuDeviceGetCount", api->device_get_count, missing);
  resolve(lib, "cuDeviceGet", api->device_get, missing);
  resolve(lib, "cuDeviceGetName", api->device_get_name, missing);
  resolve(lib, "cuDeviceTotalMem_v2", api->device_total_mem, missing);
  resolve(lib, "cuDeviceGetAttribute", api->device_get_attribute, missing);
  resolve(lib, "cuGetErrorName", api->get_error_name, missing);
  resolve(lib, "cuDevicePrimaryCtxGetState", api->primary_ctx_get_state, missing);
  resolve(lib, "cuDevicePrimaryCtxRetain", api->primary_ctx_retain, missing);
  resolve(lib, "cuDevicePrimaryCtxRelease_v2", api->primary_ctx_release, missing);
  resolve(lib, "cuCtxPushCurrent_v2", api->ctx_push_current, missing);
  resolve(lib, "cuCtxPopCurrent_v2", api->ctx_pop_current, missing);
  resolve(lib, "cuCtxSynchronize", api->ctx_synchronize, missing);
  if (!missing.empty()) {
    why = std::string("the NVIDIA driver (") + library + ") has no " + missing + " (driver too old)";
    return nullptr;
  }
  if (const CUresult r = api->init(0); r != CUDA_SUCCESS) {
    why = "the NVIDIA driver did not initialise (cuInit: " + api->error_text(r) + ")";
    return nullptr;
  }
  return loaded.emplace(library, std::move(api)).first->second.get();
}

const cupti_api* load_default_cupti(std::string& why) {
  if (const cupti_api* api = load_cupti("libcupti.so.13", why)) return api;
  std::string second;
  if (const cupti_api* api = load_cupti(KINETOSCOPE_CUPTI_LIBDIR "/libcupti.so.13", second)) {
    why.clear();
    return api;
  }
  why = second;
  return nullptr;
}

}  // namespace kinetoscope::detail
