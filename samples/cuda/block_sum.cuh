// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file block_sum.cuh
/// The reduction both CUDA samples launch (under their own kernel names): every block of 256
/// threads sums its elements in shared memory, then adds the block's sum to `*total`.

namespace cuda_samples {

__device__ inline void block_sum_into(const float* in, float* total, int n) {
  __shared__ float partial[256];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  partial[threadIdx.x] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(total, partial[0]);
}

}  // namespace cuda_samples
