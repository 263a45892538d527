// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file cupti_loader.hpp
/// libcupti and the CUDA driver (libcuda.so.1), loaded at run time with dlopen.
///
/// Why not link them: a program built on a machine with the toolkit must still start where
/// there is no driver or no toolkit (a CPU-only box, a container without the NVIDIA runtime)
/// and record its CPU profile; a linked libcuda.so.1 would stop it in the dynamic loader. We
/// need a dozen functions of each library, resolved once; the prototypes come from the
/// toolkit's headers, so a signature mismatch is a compile error.

#include <cuda.h>
#include <cupti.h>

#include <string>

namespace kinetoscope::detail {

/// The CUPTI functions the backend calls.
struct cupti_api {
  decltype(&::cuptiGetResultString) get_result_string = nullptr;
  decltype(&::cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&::cuptiActivityRegisterTimestampCallback) register_timestamp_callback = nullptr;
  decltype(&::cuptiActivityEnable) enable = nullptr;
  decltype(&::cuptiActivityDisable) disable = nullptr;
  decltype(&::cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&::cuptiActivityGetNextRecord) get_next_record = nullptr;
  decltype(&::cuptiActivityGetNumDroppedRecords) get_num_dropped_records = nullptr;
  decltype(&::cuptiSubscribe) subscribe = nullptr;
  decltype(&::cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&::cuptiEnableDomain) enable_domain = nullptr;
  decltype(&::cuptiEnableCallback) enable_callback = nullptr;
  decltype(&::cuptiGetCallbackName) get_callback_name = nullptr;

  /// "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES" for a result code.
  std::string error_text(CUptiResult r) const;
};

/// The driver functions: device properties and synchronisation.
struct cuda_driver_api {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDeviceGetCount) device_get_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetName) device_get_name = nullptr;
  decltype(&::cuDeviceTotalMem) device_total_mem = nullptr;  // cuDeviceTotalMem_v2
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuDevicePrimaryCtxGetState) primary_ctx_get_state = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) primary_ctx_release = nullptr;  // _v2
  decltype(&::cuCtxPushCurrent) ctx_push_current = nullptr;             // _v2
  decltype(&::cuCtxPopCurrent) ctx_pop_current = nullptr;               // _v2
  decltype(&::cuCtxSynchronize) ctx_synchronize = nullptr;

  /// "CUDA_ERROR_NO_DEVICE" for a result code.
  std::string error_text(CUresult r) const;
};

/// Loads libcupti from `library` (a soname searched the usual way, or a path). nullptr and
/// `why` filled when the library or one of its functions is missing. Libraries stay loaded.
const cupti_api* load_cupti(const char* library, std::string& why);

/// Loads the driver from `library` and initialises it (cuInit). nullptr and `why` when the
/// library is missing ("no NVIDIA driver (libcuda.so.1 not found)") or cuInit fails.
const cuda_driver_api* load_cuda_driver(const char* library, std::string& why);

/// The soname, then the toolkit's own copy (the directory meson found it in).
const cupti_api* load_default_cupti(std::string& why);

}  // namespace kinetoscope::detail
