// SPDX-License-Identifier: BSD-3-Clause
/// @file deepspeed_flops.cpp
/// deepspeed_count(): the DeepSpeed flops profiler's counting rules
/// (docs/profiler-rules.md#counting) applied to aten-named operators and their recorded inputs.
/// DeepSpeed patches the Python functions (F.linear, F.conv2d, torch.addmm, ...) and counts each
/// call; the aten op of the same name is what our traces hold, with inputs in the aten schema's
/// order. The module profile counts only the outermost counted op of a nest (aten::linear, not its
/// addmm), because DeepSpeed's patched Python function does not see the C++ ops it calls.

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "kinetoscope/module_profile.hpp"
#include "op_input_kind.hpp"

namespace kinetoscope {
namespace {

using u64 = std::uint64_t;
using detail::is_tensor;
using detail::product;

/// Input `i` when it exists and is a tensor, else nullptr.
const op_input* tensor_at(const op_input* in, std::size_t count, std::size_t i) {
  return i < count && is_tensor(in[i]) ? &in[i] : nullptr;
}

/// An int-list (or single int) argument expanded to `n` spatial values; `fallback` when absent.
std::vector<std::int64_t> spatial(const op_input* in, std::size_t count, std::size_t i,
                                  std::size_t n, std::int64_t fallback) {
  std::vector<std::int64_t> v(n, fallback);
  if (i >= count || in[i].values.empty()) return v;
  const std::vector<std::int64_t>& given = in[i].values;
  for (std::size_t k = 0; k < n; ++k) v[k] = given.size() == 1 ? given[0] : (k < given.size() ? given[k] : fallback);
  return v;
}

/// Output spatial sizes of a normal convolution: (in + 2·pad − (dil·(k−1)+1)) // stride + 1.
/// DeepSpeed uses the same formula for transposed convolutions (then only to validate).
std::vector<std::int64_t> conv_output(const std::vector<std::int64_t>& input_dims,
                                      const std::vector<std::int64_t>& kernel,
                                      const std::vector<std::int64_t>& stride,
                                      const std::vector<std::int64_t>& padding,
                                      const std::vector<std::int64_t>& dilation) {
  std::vector<std::int64_t> out;
  for (std::size_t k = 0; k < input_dims.size(); ++k) {
    const std::int64_t s = stride[k] == 0 ? 1 : stride[k];
    const std::int64_t num = input_dims[k] + 2 * padding[k] - (dilation[k] * (kernel[k] - 1) + 1);
    // Python's floor division.
    const std::int64_t size = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
    out.push_back(size > 0 ? size : 0);  // malformed shapes count 0, not a wrapped product
  }
  return out;
}

/// conv1d/2d/3d(input, weight, bias, stride, padding, dilation, groups) and
/// conv_transpose1d/2d/3d(input, weight, bias, stride, padding, output_padding, groups,
/// dilation). MACs = Π kernel · C_in · (C_out / groups) · N · Π spatial, where spatial is the
/// output for a convolution and the input for a transposed one; flops = 2·MACs + bias term.
op_count conv_count(const op_input* in, std::size_t count, bool transposed) {
  op_count r{0, 0, true};
  const op_input* input = tensor_at(in, count, 0);
  const op_input* weight = tensor_at(in, count, 1);
  if (input == nullptr || weight == nullptr || input->dims.size() < 3 ||
      weight->dims.size() != input->dims.size())
    return r;
  const std::size_t n = input->dims.size() - 2;
  const std::vector<std::int64_t> input_dims(input->dims.begin() + 2, input->dims.end());
  const std::vector<std::int64_t> kernel(weight->dims.begin() + 2, weight->dims.end());
  constexpr std::size_t groups_at = 6;  // in both schemas
  const std::vector<std::int64_t> dilation = spatial(in, count, transposed ? 7 : 5, n, 1);
  std::vector<std::int64_t> padding = spatial(in, count, 4, n, 0);
  if (!transposed && count > 4 && in[4].values.empty() &&
      in[4].concrete.find("same") != std::string::npos) {
    // padding='same' (a string argument, recognised by its printed value): dil·(k−1) // 2.
    for (std::size_t k = 0; k < n; ++k) padding[k] = dilation[k] * (kernel[k] - 1) / 2;
  }
  const std::vector<std::int64_t> stride = spatial(in, count, 3, n, 1);
  const std::int64_t groups_value =
      groups_at < count && !in[groups_at].values.empty() ? in[groups_at].values[0] : 1;
  const u64 groups = groups_value > 0 ? static_cast<u64>(groups_value) : 1;
  const u64 out_channels = static_cast<u64>(transposed ? weight->dims[1] : weight->dims[0]);
  const std::vector<std::int64_t> out = conv_output(input_dims, kernel, stride, padding, dilation);
  const u64 active = static_cast<u64>(input->dims[0]) * product(transposed ? input_dims : out);
  r.macs = product(kernel) * static_cast<u64>(input->dims[1]) * (out_channels / groups) * active;
  r.flops = 2 * r.macs;
  if (tensor_at(in, count, 2) != nullptr) r.flops += out_channels * active;
  return r;
}

/// mul / add: Π of the broadcast shape of the two operands (a scalar has no shape).
u64 elementwise_flops(const op_input* in, std::size_t count) {
  const op_input* a = tensor_at(in, count, 0);
  const op_input* b = tensor_at(in, count, 1);
  if (a == nullptr && b == nullptr) return 1;
  if (a == nullptr || b == nullptr) return product((a != nullptr ? a : b)->dims);
  const std::vector<std::int64_t>& x = a->dims;
  const std::vector<std::int64_t>& y = b->dims;
  const std::size_t n = std::max(x.size(), y.size());
  u64 flops = 1;
  for (std::size_t k = 0; k < n; ++k) {  // right-aligned, as broadcasting aligns shapes
    const std::int64_t dx = k < x.size() ? x[x.size() - 1 - k] : 1;
    const std::int64_t dy = k < y.size() ? y[y.size() - 1 - k] : 1;
    flops *= static_cast<u64>(dx == 1 ? dy : dx);
  }
  return flops;
}

/// Π a.shape · b.shape[-1] (matmul, mm, bmm and the product part of addmm / baddbmm).
u64 matmul_macs(const op_input* a, const op_input* b) {
  if (a == nullptr || b == nullptr || b->dims.empty()) return 0;
  return product(a->dims) * static_cast<u64>(b->dims.back());
}

/// numel(input 0) times `factor`; 0 when input 0 is not a tensor.
op_count per_element(const op_input* in, std::size_t count, u64 factor) {
  const op_input* input = tensor_at(in, count, 0);
  return {input != nullptr ? product(input->dims) * factor : 0, 0, true};
}

bool one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

op_count deepspeed_count(std::string_view op, const op_input* in, std::size_t count) {
  if (in == nullptr) count = 0;
  if (op == "aten::linear") {
    const op_input* input = tensor_at(in, count, 0);
    const op_input* weight = tensor_at(in, count, 1);
    if (input == nullptr || weight == nullptr || weight->dims.empty()) return {0, 0, true};
    const u64 macs = product(input->dims) * static_cast<u64>(weight->dims[0]);
    return {2 * macs, macs, true};
  }
  if (one_of(op, {"aten::conv1d", "aten::conv2d", "aten::conv3d"})) return conv_count(in, count, false);
  if (one_of(op, {"aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d"}))
    return conv_count(in, count, true);
  if (one_of(op, {"aten::relu", "aten::relu_", "aten::prelu", "aten::elu", "aten::elu_",
                  "aten::leaky_relu", "aten::leaky_relu_", "aten::relu6", "aten::hardtanh",
                  "aten::hardtanh_", "aten::silu", "aten::silu_", "aten::gelu", "aten::softmax",
                  "aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d", "aten::max_pool1d",
                  "aten::max_pool2d", "aten::max_pool3d", "aten::adaptive_avg_pool1d",
                  "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d",
                  "aten::adaptive_max_pool1d", "aten::adaptive_max_pool2d",
                  "aten::adaptive_max_pool3d"}))
    return per_element(in, count, 1);
  if (op == "aten::batch_norm") {
    // (input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled)
    const bool affine = tensor_at(in, count, 1) != nullptr;
    const bool training = count > 5 && !in[5].values.empty() && in[5].values[0] != 0;
    return per_element(in, count, training ? (affine ? 5 : 4) : (affine ? 2 : 1));
  }
  if (one_of(op, {"aten::layer_norm", "aten::group_norm", "aten::instance_norm"})) {
    // weight: input 2 of layer_norm / group_norm, input 1 of instance_norm.
    const bool affine = tensor_at(in, count, op == "aten::instance_norm" ? 1 : 2) != nullptr;
    return per_element(in, count, affine ? 5 : 4);
  }
  if (op.starts_with("aten::upsample_")) {
    // (input, output_size, ...): Π output_size; scale-factor forms are not counted (0).
    if (count > 1 && !in[1].values.empty()) return {product(in[1].values), 0, true};
    return {0, 0, true};
  }
  if (one_of(op, {"aten::embedding", "aten::dropout", "aten::feature_dropout"})) return {0, 0, true};
  if (one_of(op, {"aten::matmul", "aten::mm", "aten::bmm"})) {
    const u64 macs = matmul_macs(tensor_at(in, count, 0), tensor_at(in, count, 1));
    return {2 * macs, macs, true};
  }
  if (one_of(op, {"aten::addmm", "aten::baddbmm"})) {
    const op_input* bias = tensor_at(in, count, 0);
    const u64 macs = matmul_macs(tensor_at(in, count, 1), tensor_at(in, count, 2));
    return {2 * macs + (bias != nullptr ? product(bias->dims) : 0), macs, true};
  }
  if (one_of(op, {"aten::mul", "aten::add"})) return {elementwise_flops(in, count), 0, true};
  if (op == "aten::scaled_dot_product_attention") {
    const op_input* q = tensor_at(in, count, 0);
    const op_input* k = tensor_at(in, count, 1);
    const op_input* v = tensor_at(in, count, 2);
    if (q == nullptr || k == nullptr || v == nullptr || q->dims.empty() || k->dims.size() < 2 ||
        v->dims.empty())
      return {0, 0, true};
    const u64 sk = static_cast<u64>(k->dims[k->dims.size() - 2]);
    const std::vector<std::int64_t> q_rows(q->dims.begin(), q->dims.end() - 1);
    const u64 macs = product(q->dims) * sk + product(q_rows) * sk * static_cast<u64>(v->dims.back());
    return {2 * macs, macs, true};
  }
  return {};
}

}  // namespace kinetoscope
