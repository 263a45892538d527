// SPDX-License-Identifier: BSD-3-Clause
// Three small kernels, copies both ways, a memset and a stream sync: the GPU work the sample
// profiles.
#include <cuda_runtime.h>

#include "block_sum.cuh"
#include "cuda_kernels.hpp"

namespace cuda_sample {
namespace {

__global__ void scale(const float* in, float* out, float factor, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * factor;
}

__global__ void add_inplace(float* out, const float* in, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] += in[i];
}

__global__ void block_sum(const float* in, float* total, int n) {
  cuda_samples::block_sum_into(in, total, n);
}

constexpr int threads = 256;

bool ok(cudaError_t e, const char* what, std::string& error) {
  if (e == cudaSuccess) return true;
  error = std::string(what) + ": " + cudaGetErrorString(e);
  return false;
}

int blocks_for(std::size_t n) { return static_cast<int>((n + threads - 1) / threads); }

}  // namespace

int device_count(std::string& error) {
  int count = 0;
  if (!ok(cudaGetDeviceCount(&count), "cudaGetDeviceCount", error)) return -1;
  return count;
}

gpu_work::gpu_work(std::size_t n) : n_(n) {
  cudaMalloc(&in_, n * sizeof(float));
  cudaMalloc(&out_, n * sizeof(float));
  cudaMalloc(&sum_, sizeof(float));
  cudaStream_t s = nullptr;
  cudaStreamCreate(&s);
  stream_ = s;
}

gpu_work::~gpu_work() {
  cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  cudaFree(sum_);
  cudaFree(out_);
  cudaFree(in_);
}

bool gpu_work::upload(const float* host, std::string& error) {
  return ok(cudaMemcpy(in_, host, n_ * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy HtoD", error);
}

bool gpu_work::clear_output(std::string& error) {
  const auto s = static_cast<cudaStream_t>(stream_);
  return ok(cudaMemsetAsync(out_, 0, n_ * sizeof(float), s), "cudaMemsetAsync", error) &&
         ok(cudaMemsetAsync(sum_, 0, sizeof(float), s), "cudaMemsetAsync", error);
}

bool gpu_work::scale_and_add(float factor, std::string& error) {
  const auto s = static_cast<cudaStream_t>(stream_);
  const int n = static_cast<int>(n_);
  scale<<<blocks_for(n_), threads, 0, s>>>(in_, out_, factor, n);
  if (!ok(cudaGetLastError(), "scale<<<>>>", error)) return false;
  add_inplace<<<blocks_for(n_), threads, 0, s>>>(out_, in_, n);
  return ok(cudaGetLastError(), "add_inplace<<<>>>", error);
}

bool gpu_work::reduce(std::string& error) {
  const auto s = static_cast<cudaStream_t>(stream_);
  block_sum<<<blocks_for(n_), threads, 0, s>>>(out_, sum_, static_cast<int>(n_));
  return ok(cudaGetLastError(), "block_sum<<<>>>", error);
}

bool gpu_work::synchronize(std::string& error) {
  return ok(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize", error);
}

bool gpu_work::download(float* host, float* sum, std::string& error) {
  return ok(cudaMemcpy(host, out_, n_ * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy DtoH", error) &&
         ok(cudaMemcpy(sum, sum_, sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy DtoH", error);
}

}  // namespace cuda_sample
