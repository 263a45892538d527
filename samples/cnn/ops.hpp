// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file cnn/ops.hpp
/// The operators the model runs, named and nested as PyTorch's dispatcher records them on CPU.
/// Each function records its `aten::` op (and the ops it calls) with kinetoscope::record_op and
/// the inputs in schema order, so record_shapes and with_flops see what PyTorch's profiler sees:
///
///   aten::conv2d -> aten::convolution -> aten::_convolution -> aten::_slow_conv2d_forward
///   aten::batch_norm -> aten::_batch_norm_impl_index -> aten::native_batch_norm
///   aten::relu -> aten::clamp_min          aten::max_pool2d -> aten::max_pool2d_with_indices
///   aten::flatten -> aten::view            aten::t -> aten::transpose -> aten::as_strided
///   aten::log_softmax -> aten::_log_softmax
///   aten::nll_loss_nd -> aten::nll_loss -> aten::nll_loss_forward
///
/// Ops that create an autograd node take the node's `op_links` (its sequence number); the
/// autograd layer (nn.cpp) hands them over. Backward formulas (`*_backward`, mm, sum, ...) are
/// plain functions called from inside the backward nodes.
///
/// Kernels are straightforward loops over NCHW float data (groups = 1, square kernels): clear
/// rather than fast, but exact, so the loss really goes down.

#include <cstdint>
#include <initializer_list>

#include <kinetoscope/record_function.hpp>

#include "tensor.hpp"

namespace cnn::aten {

using kinetoscope::op_links;

// ---- Factories and views (aten_basic.cpp) ----

/// aten::empty: a new (zero-filled) tensor; its memory shows as aten::empty's self memory.
template <class T = float>
basic_tensor<T> empty(dims sizes);
inline tensor empty(std::initializer_list<std::int64_t> sizes) {
  return empty<float>(dims(sizes.begin(), sizes.size()));
}
/// aten::empty_like -> aten::empty.
tensor empty_like(const tensor& self);
/// aten::zeros -> aten::empty, aten::zero_.
tensor zeros(dims sizes);
/// aten::ones_like -> aten::empty_like, aten::fill_ (the implicit gradient of backward()).
tensor ones_like(const tensor& self);
/// aten::view: same storage, new sizes.
tensor view(const tensor& self, dims size);
/// aten::reshape -> aten::view (contiguous input).
tensor reshape(const tensor& self, dims shape);
/// aten::flatten(start_dim, end_dim = -1) -> aten::view.
tensor flatten(const tensor& self, std::int64_t start_dim, op_links links);
/// aten::t -> aten::transpose -> aten::as_strided: a strided view, no copy.
tensor t(const tensor& self, op_links links = {});
/// aten::detach -> detach: the same data, cut from the graph.
tensor detach(const tensor& self);
/// aten::clone -> aten::empty_like, aten::copy_: a contiguous copy.
tensor clone(const tensor& self);
/// aten::new_empty_strided, aten::copy_: a contiguous copy (AccumulateGrad's clone_obey_contract).
tensor contiguous_copy(const tensor& self);
/// aten::item -> aten::_local_scalar_dense (loss.item()).
float item(const tensor& self);

// ---- Linear algebra and element-wise (aten_basic.cpp) ----

/// aten::mm: [M, K] x [K, N] for any strides. FLOPs 2·M·K·N.
tensor mm(const tensor& mat1, const tensor& mat2);
/// aten::addmm: self + mat1 x mat2 (self broadcast over rows). FLOPs 2·M·K·N.
tensor addmm(const tensor& self, const tensor& mat1, const tensor& mat2, op_links links);
/// aten::sum over dim 0 of a matrix ([M, N] -> [N]): the bias gradient of a linear layer.
tensor sum_dim0(const tensor& self);
/// aten::add (out of place): self + alpha * other. FLOPs numel.
tensor add(const tensor& self, const tensor& other, double alpha = 1.0);
/// aten::add_ (in place): self += alpha * other.
void add_(const tensor& self, const tensor& other, double alpha = 1.0);
/// aten::mul_ (in place): self *= other.
void mul_(const tensor& self, double other);

// ---- Loss (aten_basic.cpp) ----

/// aten::log_softmax -> aten::_log_softmax over dim 1 of [N, C].
tensor log_softmax(const tensor& self, op_links links);
/// aten::_log_softmax_backward_data.
tensor log_softmax_backward(const tensor& grad_output, const tensor& output);

struct nll_loss_result {
  tensor output;        ///< [] mean loss
  tensor total_weight;  ///< [] number of (unweighted) targets
};
/// aten::nll_loss_nd -> aten::nll_loss -> aten::nll_loss_forward (reduction mean).
nll_loss_result nll_loss(const tensor& self, const long_tensor& target, op_links links);
/// aten::nll_loss_backward.
tensor nll_loss_backward(const tensor& grad_output, const tensor& self, const long_tensor& target,
                         const tensor& total_weight);

// ---- Convolution, normalisation, activation, pooling (aten_nn.cpp) ----

struct conv_params {
  std::int64_t stride = 1;
  std::int64_t padding = 0;
  std::int64_t dilation = 1;
  std::int64_t groups = 1;  ///< only 1 is implemented
};
/// aten::conv2d -> aten::convolution -> aten::_convolution -> aten::_slow_conv2d_forward.
/// FLOPs (on aten::conv2d) 2·N·H_out·W_out·kh·kw·C_in·C_out.
tensor conv2d(const tensor& input, const tensor& weight, const tensor& bias, const conv_params& p,
              op_links links);

struct conv_grads {
  tensor grad_input;  ///< undefined unless requested
  tensor grad_weight;
  tensor grad_bias;
};
/// aten::convolution_backward; `need_input_grad` is output_mask[0].
conv_grads convolution_backward(const tensor& grad_output, const tensor& input,
                                const tensor& weight, const conv_params& p, bool need_input_grad);

struct batch_norm_result {
  tensor output;
  tensor save_mean;    ///< [C] batch mean
  tensor save_invstd;  ///< [C] 1 / sqrt(batch var + eps)
};
/// aten::batch_norm -> aten::_batch_norm_impl_index -> aten::native_batch_norm (training mode:
/// batch statistics, running statistics updated in place).
batch_norm_result batch_norm(const tensor& input, const tensor& weight, const tensor& bias,
                             const tensor& running_mean, const tensor& running_var,
                             double momentum, double eps, op_links links);

struct batch_norm_grads {
  tensor grad_input;
  tensor grad_weight;
  tensor grad_bias;
};
/// aten::native_batch_norm_backward (training mode).
batch_norm_grads native_batch_norm_backward(const tensor& grad_output, const tensor& input,
                                            const tensor& weight, const tensor& running_mean,
                                            const tensor& running_var, const tensor& save_mean,
                                            const tensor& save_invstd, double eps);

/// aten::relu -> aten::clamp_min.
tensor relu(const tensor& self, op_links links);
/// aten::threshold_backward(grad_output, self = relu's result, threshold = 0).
tensor threshold_backward(const tensor& grad_output, const tensor& result);

struct max_pool_result {
  tensor output;
  long_tensor indices;  ///< flat index of each maximum inside its input plane, as PyTorch keeps
};
/// aten::max_pool2d -> aten::max_pool2d_with_indices (no padding, dilation 1).
max_pool_result max_pool2d(const tensor& self, std::int64_t kernel_size, std::int64_t stride,
                           op_links links);
/// aten::max_pool2d_with_indices_backward.
tensor max_pool2d_with_indices_backward(const tensor& grad_output, const tensor& self,
                                        std::int64_t kernel_size, std::int64_t stride,
                                        const long_tensor& indices);

}  // namespace cnn::aten
