// SPDX-License-Identifier: BSD-3-Clause
/// @file flops.cpp
/// compute_flops(): the FLOPs estimate of PyTorch's `with_flops` (docs/profiler-rules.md#flops,
/// torch/csrc/profiler/util.cpp saveExtraArgs + computeFlops). Only the exact names aten::conv2d,
/// aten::mm, aten::addmm, aten::bmm, aten::baddbmm, aten::mul and aten::add are counted; every
/// malformed input set yields 0. Arithmetic is unsigned 64-bit, left to right, like PyTorch's.

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "kinetoscope/key_averages.hpp"
#include "op_input_kind.hpp"

namespace kinetoscope {
namespace {

using u64 = std::uint64_t;
using detail::is_tensor;
using detail::product;

/// An int list (conv2d's stride/padding/dilation): PyTorch's IValue::isIntList().
bool is_int_list(const op_input& in) {
  return in.type == "ScalarList" || in.type == "GenericList";
}

/// PyTorch's validateInput(): at least `min_size` inputs and the listed ones are tensors.
bool validate(const op_input* inputs, std::size_t count, std::size_t min_size,
              std::initializer_list<std::size_t> tensors) {
  if (inputs == nullptr || count < min_size) return false;
  for (std::size_t i : tensors)
    if (!is_tensor(inputs[i])) return false;
  return true;
}

u64 conv2d_flops(const op_input* in, std::size_t count) {
  // inputs: 0 input, 1 weight, 2 bias, 3 stride, 4 padding, 5 dilation, 6 groups
  if (!validate(in, count, 7, {0, 1})) return 0;
  const auto& input = in[0].dims;
  const auto& weight = in[1].dims;
  if (weight.size() != 4 || input.size() != 4) return 0;
  const op_input& stride_in = in[3];
  const op_input& padding_in = in[4];
  const op_input& dilation_in = in[5];
  const op_input& groups_in = in[6];
  if (!is_int_list(padding_in) || !is_int_list(stride_in) || !is_int_list(dilation_in)) return 0;
  if (groups_in.values.empty()) return 0;  // groups not an integer
  const u64 groups = static_cast<u64>(groups_in.values[0]);
  if (groups == 0) return 0;
  const auto& padding = padding_in.values;
  const auto& stride = stride_in.values;
  const auto& dilation = dilation_in.values;
  if (padding.size() != 2 || dilation.size() != 2) return 0;
  if (stride.size() != 2 || static_cast<u64>(stride[0]) * static_cast<u64>(stride[1]) == 0) return 0;

  const u64 minibatch = static_cast<u64>(input[0]);
  const u64 in_channels = static_cast<u64>(input[1]);
  const u64 input_h = static_cast<u64>(input[2]);
  const u64 input_w = static_cast<u64>(input[3]);
  const u64 out_channels = static_cast<u64>(weight[0]);
  const u64 kernel_h = static_cast<u64>(weight[2]);
  const u64 kernel_w = static_cast<u64>(weight[3]);
  const u64 output_h = (input_h + 2 * static_cast<u64>(padding[0]) -
                        static_cast<u64>(dilation[0]) * (kernel_h - 1) - 1) /
                           static_cast<u64>(stride[0]) +
                       1;
  const u64 output_w = (input_w + 2 * static_cast<u64>(padding[1]) -
                        static_cast<u64>(dilation[1]) * (kernel_w - 1) - 1) /
                           static_cast<u64>(stride[1]) +
                       1;
  return u64{2} * minibatch * output_h * output_w * kernel_h * kernel_w * in_channels *
         out_channels / groups;
}

/// mm / addmm: 2 · Π mat1 / K · Π mat2.
u64 gemm_flops(const op_input& mat1, const op_input& mat2) {
  if (mat1.dims.empty()) return 0;
  const std::int64_t overlap = mat1.dims.back();
  if (overlap == 0) return 0;
  u64 flops = product(mat1.dims);
  flops /= static_cast<u64>(overlap);
  for (std::int64_t d : mat2.dims) flops *= static_cast<u64>(d);
  return flops * 2;
}

/// bmm / baddbmm: 2 · Π mat1 / K / B · Π mat2.
u64 batched_gemm_flops(const op_input& mat1, const op_input& mat2) {
  if (mat1.dims.empty()) return 0;
  const std::int64_t batch = mat1.dims.front();
  if (batch == 0) return 0;
  const std::int64_t overlap = mat1.dims.back();
  if (overlap == 0) return 0;
  u64 flops = product(mat1.dims);
  flops /= static_cast<u64>(overlap);
  flops /= static_cast<u64>(batch);
  for (std::int64_t d : mat2.dims) flops *= static_cast<u64>(d);
  return flops * 2;
}

}  // namespace

std::int64_t compute_flops(std::string_view op_name, const op_input* inputs, std::size_t count) {
  u64 flops = 0;
  if (op_name == "aten::conv2d") {
    flops = conv2d_flops(inputs, count);
  } else if (op_name == "aten::mm") {
    if (validate(inputs, count, 2, {0, 1})) flops = gemm_flops(inputs[0], inputs[1]);
  } else if (op_name == "aten::addmm") {
    if (validate(inputs, count, 3, {0, 1, 2})) flops = gemm_flops(inputs[1], inputs[2]);
  } else if (op_name == "aten::bmm") {
    if (validate(inputs, count, 2, {0, 1})) flops = batched_gemm_flops(inputs[0], inputs[1]);
  } else if (op_name == "aten::baddbmm") {
    if (validate(inputs, count, 3, {0, 1, 2})) flops = batched_gemm_flops(inputs[1], inputs[2]);
  } else if (op_name == "aten::mul" || op_name == "aten::add") {
    if (validate(inputs, count, 1, {0})) flops = product(inputs[0].dims);
  }
  return static_cast<std::int64_t>(flops);
}

}  // namespace kinetoscope
