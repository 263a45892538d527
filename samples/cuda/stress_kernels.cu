// SPDX-License-Identifier: BSD-3-Clause
// cuda_stress's GPU work: six kernels of known names, copies in three directions, memsets,
// events, stream syncs, allocations and (optionally) cuBLAS GEMMs, each on the caller's stream.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include "block_sum.cuh"
#include "stress_kernels.hpp"

namespace cuda_stress {

__global__ void stress_fill(float* out, float value, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

__global__ void stress_axpy(const float* x, float* y, float alpha, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += alpha * x[i];
}

__global__ void stress_reduce(const float* in, float* total, int n) {
  cuda_samples::block_sum_into(in, total, n);
}

__global__ void stress_tiny(float* out) { out[threadIdx.x] = static_cast<float>(threadIdx.x); }

/// Busy-waits `cycles` SM clock ticks: a kernel whose duration does not depend on memory.
__global__ void stress_spin(long long cycles, float* sink) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  if (threadIdx.x == 0) sink[blockIdx.x] = 1.0f;
}

/// The same as stress_spin under its own name: the kernels CUDA events time.
__global__ void stress_timed(long long cycles, float* sink) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  if (threadIdx.x == 0) sink[blockIdx.x] = 2.0f;
}

namespace {

constexpr int threads = 256;

bool ok(cudaError_t e, const char* what, std::string& error) {
  if (e == cudaSuccess) return true;
  if (error.empty()) error = std::string(what) + ": " + cudaGetErrorString(e);
  return false;
}

int blocks_for(std::size_t n) { return static_cast<int>((n + threads - 1) / threads); }

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }

// The few cuBLAS entry points used, declared here so that no cuBLAS header or library is
// needed to build: status 0 is CUBLAS_STATUS_SUCCESS, operation 0 is CUBLAS_OP_N.
using cublas_create_fn = int (*)(void**);
using cublas_destroy_fn = int (*)(void*);
using cublas_set_stream_fn = int (*)(void*, cudaStream_t);
using cublas_sgemm_fn = int (*)(void*, int, int, int, int, int, const float*, const float*, int,
                                const float*, int, const float*, float*, int);
struct cublas_api {
  cublas_create_fn create = nullptr;
  cublas_destroy_fn destroy = nullptr;
  cublas_set_stream_fn set_stream = nullptr;
  cublas_sgemm_fn sgemm = nullptr;
};
cublas_api g_blas;

int sm_count() {
  int device = 0, count = 1;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
  return count;
}

}  // namespace

bool query_device(device_info& info, std::string& error) {
  int count = 0;
  if (!ok(cudaGetDeviceCount(&count), "cudaGetDeviceCount", error)) return false;
  if (count == 0) {
    error = "the driver reports no CUDA device";
    return false;
  }
  cudaDeviceProp prop{};
  if (!ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties", error)) return false;
  info.name = prop.name;
  info.multiprocessors = prop.multiProcessorCount;
  info.major = prop.major;
  info.minor = prop.minor;
  return true;
}

bool device_synchronize(std::string& error) {
  return ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize", error);
}

bool load_cublas(std::string& why) {
  void* lib = nullptr;
  for (const char* path : {"libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so.13"}) {
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
  }
  if (lib == nullptr) {
    why = "libcublas.so.13 not found";
    return false;
  }
  g_blas.create = reinterpret_cast<cublas_create_fn>(dlsym(lib, "cublasCreate_v2"));
  g_blas.destroy = reinterpret_cast<cublas_destroy_fn>(dlsym(lib, "cublasDestroy_v2"));
  g_blas.set_stream = reinterpret_cast<cublas_set_stream_fn>(dlsym(lib, "cublasSetStream_v2"));
  g_blas.sgemm = reinterpret_cast<cublas_sgemm_fn>(dlsym(lib, "cublasSgemm_v2"));
  if (!g_blas.create || !g_blas.destroy || !g_blas.set_stream || !g_blas.sgemm) {
    g_blas = {};
    why = "libcublas.so.13 lacks cublasCreate_v2/cublasSgemm_v2";
    return false;
  }
  return true;
}

stream_work::stream_work(std::size_t n, std::string& error) : n_(n) {
  const std::size_t bytes = n * sizeof(float);
  cudaStream_t s = nullptr;
  cudaEvent_t e1 = nullptr, e2 = nullptr;
  if (!(ok(cudaMalloc(&a_, bytes), "cudaMalloc", error) && ok(cudaMalloc(&b_, bytes), "cudaMalloc", error) &&
        ok(cudaMalloc(&c_, bytes), "cudaMalloc", error) &&
        ok(cudaMalloc(&sum_, 4096 * sizeof(float)), "cudaMalloc", error) &&
        ok(cudaMallocHost(&host_, bytes), "cudaMallocHost", error) &&
        ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate", error) &&
        ok(cudaEventCreate(&e1), "cudaEventCreate", error) && ok(cudaEventCreate(&e2), "cudaEventCreate", error)))
    return;
  stream_ = s;
  start_ = e1;
  stop_ = e2;
  if (g_blas.create != nullptr) {
    void* handle = nullptr;
    if (g_blas.create(&handle) == 0 && g_blas.set_stream(handle, s) == 0) {
      blas_ = handle;
    } else if (handle != nullptr) {
      g_blas.destroy(handle);
    }
  }
  ok(cudaMemsetAsync(a_, 0, bytes, s), "cudaMemsetAsync", error) &&
      ok(cudaMemsetAsync(b_, 0, bytes, s), "cudaMemsetAsync", error) &&
      ok(cudaStreamSynchronize(s), "cudaStreamSynchronize", error);
}

stream_work::~stream_work() {
  if (blas_ != nullptr) g_blas.destroy(blas_);
  if (stop_ != nullptr) cudaEventDestroy(as_event(stop_));
  if (start_ != nullptr) cudaEventDestroy(as_event(start_));
  if (stream_ != nullptr) cudaStreamDestroy(as_stream(stream_));
  cudaFreeHost(host_);
  cudaFree(sum_);
  cudaFree(c_);
  cudaFree(b_);
  cudaFree(a_);
}

bool stream_work::fill(float value, std::string& error) {
  stress_fill<<<blocks_for(n_), threads, 0, as_stream(stream_)>>>(a_, value, static_cast<int>(n_));
  return ok(cudaGetLastError(), "stress_fill<<<>>>", error);
}

bool stream_work::axpy(float alpha, std::string& error) {
  stress_axpy<<<blocks_for(n_), threads, 0, as_stream(stream_)>>>(a_, b_, alpha, static_cast<int>(n_));
  return ok(cudaGetLastError(), "stress_axpy<<<>>>", error);
}

bool stream_work::reduce(std::string& error) {
  stress_reduce<<<blocks_for(n_), threads, 0, as_stream(stream_)>>>(b_, sum_, static_cast<int>(n_));
  return ok(cudaGetLastError(), "stress_reduce<<<>>>", error);
}

bool stream_work::tiny(std::string& error) {
  stress_tiny<<<1, 32, 0, as_stream(stream_)>>>(c_);
  return ok(cudaGetLastError(), "stress_tiny<<<>>>", error);
}

bool stream_work::spin(long long cycles, std::string& error) {
  stress_spin<<<sm_count(), 32, 0, as_stream(stream_)>>>(cycles, sum_);
  return ok(cudaGetLastError(), "stress_spin<<<>>>", error);
}

bool stream_work::timed(long long cycles, float& milliseconds, std::string& error) {
  const cudaStream_t s = as_stream(stream_);
  if (!ok(cudaEventRecord(as_event(start_), s), "cudaEventRecord", error)) return false;
  stress_timed<<<sm_count(), 32, 0, s>>>(cycles, sum_);
  if (!ok(cudaGetLastError(), "stress_timed<<<>>>", error)) return false;
  return ok(cudaEventRecord(as_event(stop_), s), "cudaEventRecord", error) &&
         ok(cudaEventSynchronize(as_event(stop_)), "cudaEventSynchronize", error) &&
         ok(cudaEventElapsedTime(&milliseconds, as_event(start_), as_event(stop_)), "cudaEventElapsedTime", error);
}

bool stream_work::copy_h2d(std::string& error) {
  return ok(cudaMemcpyAsync(a_, host_, n_ * sizeof(float), cudaMemcpyHostToDevice, as_stream(stream_)),
            "cudaMemcpyAsync HtoD", error);
}

bool stream_work::copy_d2h(std::string& error) {
  return ok(cudaMemcpyAsync(host_, a_, n_ * sizeof(float), cudaMemcpyDeviceToHost, as_stream(stream_)),
            "cudaMemcpyAsync DtoH", error);
}

bool stream_work::copy_d2d(std::string& error) {
  return ok(cudaMemcpyAsync(c_, a_, n_ * sizeof(float), cudaMemcpyDeviceToDevice, as_stream(stream_)),
            "cudaMemcpyAsync DtoD", error);
}

bool stream_work::memset(std::string& error) {
  return ok(cudaMemsetAsync(c_, 0, n_ * sizeof(float), as_stream(stream_)), "cudaMemsetAsync", error);
}

bool stream_work::event_sync(std::string& error) {
  return ok(cudaEventRecord(as_event(stop_), as_stream(stream_)), "cudaEventRecord", error) &&
         ok(cudaEventSynchronize(as_event(stop_)), "cudaEventSynchronize", error);
}

bool stream_work::stream_sync(std::string& error) {
  return ok(cudaStreamSynchronize(as_stream(stream_)), "cudaStreamSynchronize", error);
}

bool stream_work::alloc_free(std::size_t bytes, std::string& error) {
  void* p = nullptr;
  return ok(cudaMalloc(&p, bytes), "cudaMalloc", error) && ok(cudaFree(p), "cudaFree", error);
}

bool stream_work::gemm(int dim, std::string& error) {
  if (blas_ == nullptr) {
    error = "cuBLAS is not loaded";
    return false;
  }
  const float alpha = 1.0f, beta = 0.0f;
  if (g_blas.sgemm(blas_, 0, 0, dim, dim, dim, &alpha, a_, dim, b_, dim, &beta, c_, dim) != 0) {
    error = "cublasSgemm_v2 failed";
    return false;
  }
  return true;
}

}  // namespace cuda_stress
