// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file stress_kernels.hpp
/// The CUDA half of cuda_stress, callable from plain C++ (nvcc compiles only stress_kernels.cu,
/// so the kinetoscope headers never go through nvcc's front end). Every call returns false with
/// `error` set when CUDA fails.
///
/// The kernel names are the ground truth the GPU check counts by: stress_fill, stress_axpy,
/// stress_reduce, stress_tiny, stress_spin and stress_timed (namespace cuda_stress).

#include <cstddef>
#include <string>

namespace cuda_stress {

struct device_info {
  std::string name;  ///< cudaDeviceProp::name, what deviceProperties must say
  int multiprocessors = 0;
  int major = 0, minor = 0;
};

/// Device 0's properties, or false with `error` (no driver, no device).
bool query_device(device_info& info, std::string& error);
/// cudaDeviceSynchronize.
bool device_synchronize(std::string& error);

/// Optional cuBLAS, loaded at run time (libcublas.so.13): false with `why` when absent.
bool load_cublas(std::string& why);

/// One host thread's GPU work: its own stream, device buffers of n floats, a pinned host
/// buffer, two timing events and (when cuBLAS loaded) a cuBLAS handle on the stream.
class stream_work {
 public:
  stream_work(std::size_t n, std::string& error);  // error is empty on success
  ~stream_work();
  stream_work(const stream_work&) = delete;
  stream_work& operator=(const stream_work&) = delete;

  bool fill(float value, std::string& error);  ///< stress_fill over a
  bool axpy(float alpha, std::string& error);  ///< stress_axpy: b += alpha * a
  bool reduce(std::string& error);             ///< stress_reduce: block sums of b into sum
  bool tiny(std::string& error);               ///< stress_tiny: one warp, launch-bound
  /// stress_spin: one block per multiprocessor spinning `cycles` clock ticks.
  bool spin(long long cycles, std::string& error);
  /// stress_timed (like stress_spin) between two events on the stream; waits for the second
  /// event and returns the elapsed milliseconds CUDA measured. Queue a stress_spin first so
  /// the event and the kernel wait on the GPU together (the gap is then not launch latency).
  bool timed(long long cycles, float& milliseconds, std::string& error);
  bool copy_h2d(std::string& error);  ///< cudaMemcpyAsync pinned host -> a
  bool copy_d2h(std::string& error);  ///< cudaMemcpyAsync a -> pinned host
  bool copy_d2d(std::string& error);  ///< cudaMemcpyAsync a -> c
  bool memset(std::string& error);    ///< cudaMemsetAsync c
  bool event_sync(std::string& error);   ///< cudaEventRecord + cudaEventSynchronize
  bool stream_sync(std::string& error);  ///< cudaStreamSynchronize
  /// cudaMalloc + cudaFree of `bytes` (GPU memory events).
  bool alloc_free(std::size_t bytes, std::string& error);
  /// cublasSgemm on the stream, m = n = k = `dim` (dim * dim <= n of the constructor).
  bool gemm(int dim, std::string& error);
  bool has_gemm() const noexcept { return blas_ != nullptr; }

 private:
  std::size_t n_;
  float* a_ = nullptr;
  float* b_ = nullptr;
  float* c_ = nullptr;
  float* sum_ = nullptr;
  float* host_ = nullptr;  // pinned
  void* stream_ = nullptr;
  void* start_ = nullptr;
  void* stop_ = nullptr;
  void* blas_ = nullptr;
};

}  // namespace cuda_stress
