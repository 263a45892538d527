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

/// Loads `library` once per name: `fill` resolves the functions and returns "" or why the
/// library is unusable; `not_found(dlerror text)` is the reason when dlopen fails.
template <class Api, class NotFound, class Fill>
const Api* load_once(const char* library, std::string& why, NotFound not_found, Fill fill) {
  static std::map<std::string, std::unique_ptr<Api>> loaded;
  std::lock_guard lock(g_mutex);
  if (auto it = loaded.find(library); it != loaded.end()) return it->second.get();
  void* lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    why = not_found(dl_error());
    return nullptr;
  }
  auto api = std::make_unique<Api>();
  if (std::string problem = fill(lib, *api); !problem.empty()) {
    why = std::move(problem);
    return nullptr;
  }
  return loaded.emplace(library, std::move(api)).first->second.get();
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
  const auto not_found = [&](const std::string& error) {
    return std::string("CUPTI not found (") + library + ": " + error + ")";
  };
  return load_once<cupti_api>(library, why, not_found, [&](void* lib, cupti_api& api) {
    std::string missing;
    resolve(lib, "cuptiGetResultString", api.get_result_string, missing);
    resolve(lib, "cuptiActivityRegisterCallbacks", api.register_callbacks, missing);
    resolve(lib, "cuptiActivityRegisterTimestampCallback", api.register_timestamp_callback, missing);
    resolve(lib, "cuptiActivityEnable", api.enable, missing);
    resolve(lib, "cuptiActivityDisable", api.disable, missing);
    resolve(lib, "cuptiActivityFlushAll", api.flush_all, missing);
    resolve(lib, "cuptiActivityGetNextRecord", api.get_next_record, missing);
    resolve(lib, "cuptiActivityGetNumDroppedRecords", api.get_num_dropped_records, missing);
    resolve(lib, "cuptiSubscribe", api.subscribe, missing);
    resolve(lib, "cuptiUnsubscribe", api.unsubscribe, missing);
    resolve(lib, "cuptiEnableDomain", api.enable_domain, missing);
    resolve(lib, "cuptiEnableCallback", api.enable_callback, missing);
    resolve(lib, "cuptiGetCallbackName", api.get_callback_name, missing);
    if (missing.empty()) return std::string();
    return std::string(library) + " has no " + missing + " (CUPTI older than the CUDA 13 headers?)";
  });
}

const cuda_driver_api* load_cuda_driver(const char* library, std::string& why) {
  // dlerror's text would only repeat the name: the message stays one short sentence.
  const auto not_found = [&](const std::string&) {
    return std::string("no NVIDIA driver (") + library + " not found)";
  };
  const cuda_driver_api* api = load_once<cuda_driver_api>(library, why, not_found, [&](void* lib, cuda_driver_api& d) {
    std::string missing;
    resolve(lib, "cuInit", d.init, missing);
    resolve(lib, "cuDeviceGetCount", d.device_get_count, missing);
    resolve(lib, "cuDeviceGet", d.device_get, missing);
    resolve(lib, "cuDeviceGetName", d.device_get_name, missing);
    resolve(lib, "cuDeviceTotalMem_v2", d.device_total_mem, missing);
    resolve(lib, "cuDeviceGetAttribute", d.device_get_attribute, missing);
    resolve(lib, "cuGetErrorName", d.get_error_name, missing);
    resolve(lib, "cuDevicePrimaryCtxGetState", d.primary_ctx_get_state, missing);
    resolve(lib, "cuDevicePrimaryCtxRetain", d.primary_ctx_retain, missing);
    resolve(lib, "cuDevicePrimaryCtxRelease_v2", d.primary_ctx_release, missing);
    resolve(lib, "cuCtxPushCurrent_v2", d.ctx_push_current, missing);
    resolve(lib, "cuCtxPopCurrent_v2", d.ctx_pop_current, missing);
    resolve(lib, "cuCtxSynchronize", d.ctx_synchronize, missing);
    if (!missing.empty())
      return std::string("the NVIDIA driver (") + library + ") has no " + missing + " (driver too old)";
    if (const CUresult r = d.init(0); r != CUDA_SUCCESS)
      return "the NVIDIA driver did not initialise (cuInit: " + d.error_text(r) + ")";
    return std::string();
  });
  return api;
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
