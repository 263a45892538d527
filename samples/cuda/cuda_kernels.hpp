// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file cuda_kernels.hpp
/// The CUDA half of the sample, callable from plain C++: nvcc compiles only cuda_kernels.cu, so
/// the kinetoscope headers (C++20) never go through nvcc's front end.

#include <cstddef>
#include <string>

namespace cuda_sample {

/// Number of CUDA devices, or -1 with `error` set (no driver, no device).
int device_count(std::string& error);

/// Device buffers for one run; every call returns false with `error` set when CUDA fails.
class gpu_work {
 public:
  explicit gpu_work(std::size_t n);
  ~gpu_work();
  gpu_work(const gpu_work&) = delete;
  gpu_work& operator=(const gpu_work&) = delete;

  bool upload(const float* host, std::string& error);          ///< cudaMemcpy HtoD
  bool clear_output(std::string& error);                       ///< cudaMemsetAsync
  bool scale_and_add(float factor, std::string& error);        ///< two kernels on the stream
  bool reduce(std::string& error);                             ///< one reduction kernel
  bool synchronize(std::string& error);                        ///< cudaStreamSynchronize
  bool download(float* host, float* sum, std::string& error);  ///< cudaMemcpy DtoH

 private:
  std::size_t n_;
  float* in_ = nullptr;
  float* out_ = nullptr;
  float* sum_ = nullptr;
  void* stream_ = nullptr;
};

}  // namespace cuda_sample
