// SPDX-License-Identifier: BSD-3-Clause
// Functional ops with autograd, the modules and the model. The pattern of every differentiable
// op mirrors PyTorch's autograd kernels (VariableType): take the next sequence number, run and
// record the aten op with it, create the backward node holding the saved tensors and the edges
// to the inputs' nodes.
#include "nn.hpp"

#include <cmath>
#include <utility>

#include <kinetoscope/record_function.hpp>

namespace cnn::nn {
namespace {

using autograd::forward_links;
using autograd::make_node;
using autograd::next_sequence_nr;
using grads = std::vector<tensor>;

/// A tensor of `sizes` filled from uniform(-bound, bound), as nn.init does for PyTorch's default
/// Conv2d/Linear initialisation (kaiming_uniform with a = sqrt(5) gives bound 1/sqrt(fan_in)).
tensor uniform(std::initializer_list<std::int64_t> sizes, double bound, std::mt19937& rng) {
  tensor t = tensor::allocate(sizes);
  std::uniform_real_distribution<float> dist(static_cast<float>(-bound), static_cast<float>(bound));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data()[i] = dist(rng);
  return t;
}

tensor filled(std::initializer_list<std::int64_t> sizes, float value) {
  tensor t = tensor::allocate(sizes);
  std::fill_n(t.data(), t.numel(), value);
  return t;
}

}  // namespace

// ---- functional ----

variable conv2d(const variable& input, const variable& weight, const variable& bias,
                const aten::conv_params& params) {
  const std::int64_t seq = next_sequence_nr();
  tensor out = aten::conv2d(input.data, weight.data, bias.data, params, forward_links(seq));
  const bool need_input_grad = input.grad_fn != nullptr;  // false for the images
  auto fn = make_node(CNN_AUTOGRAD_NODE(ConvolutionBackward0), seq,
                      {input.grad_fn, weight.grad_fn, bias.grad_fn},
                      [input = input.data, weight = weight.data, params,
                       need_input_grad](const tensor& grad) {
                        aten::conv_grads g = aten::convolution_backward(grad, input, weight,
                                                                        params, need_input_grad);
                        return grads{std::move(g.grad_input), std::move(g.grad_weight),
                                     std::move(g.grad_bias)};
                      });
  return {std::move(out), std::move(fn)};
}

variable batch_norm(const variable& input, const tensor& running_mean, const tensor& running_var,
                    const variable& weight, const variable& bias, double momentum, double eps) {
  const std::int64_t seq = next_sequence_nr();
  aten::batch_norm_result r = aten::batch_norm(input.data, weight.data, bias.data, running_mean,
                                               running_var, momentum, eps, forward_links(seq));
  auto fn = make_node(CNN_AUTOGRAD_NODE(NativeBatchNormBackward0), seq,
                      {input.grad_fn, weight.grad_fn, bias.grad_fn},
                      [input = input.data, weight = weight.data, running_mean, running_var,
                       save_mean = r.save_mean, save_invstd = r.save_invstd,
                       eps](const tensor& grad) {
                        aten::batch_norm_grads g = aten::native_batch_norm_backward(
                            grad, input, weight, running_mean, running_var, save_mean,
                            save_invstd, eps);
                        return grads{std::move(g.grad_input), std::move(g.grad_weight),
                                     std::move(g.grad_bias)};
                      });
  return {std::move(r.output), std::move(fn)};
}

variable relu(const variable& input) {
  const std::int64_t seq = next_sequence_nr();
  tensor out = aten::relu(input.data, forward_links(seq));
  auto fn = make_node(CNN_AUTOGRAD_NODE(ReluBackward0), seq, {input.grad_fn},
                      [result = out](const tensor& grad) {
                        return grads{aten::threshold_backward(grad, result)};
                      });
  return {std::move(out), std::move(fn)};
}

variable max_pool2d(const variable& input, std::int64_t kernel_size, std::int64_t stride) {
  const std::int64_t seq = next_sequence_nr();
  aten::max_pool_result r = aten::max_pool2d(input.data, kernel_size, stride, forward_links(seq));
  auto fn = make_node(CNN_AUTOGRAD_NODE(MaxPool2DWithIndicesBackward0), seq, {input.grad_fn},
                      [self = input.data, indices = r.indices, kernel_size,
                       stride](const tensor& grad) {
                        return grads{aten::max_pool2d_with_indices_backward(
                            grad, self, kernel_size, stride, indices)};
                      });
  return {std::move(r.output), std::move(fn)};
}

variable flatten(const variable& input, std::int64_t start_dim) {
  const std::int64_t seq = next_sequence_nr();
  tensor out = aten::flatten(input.data, start_dim, forward_links(seq));
  const auto in_sizes = input.data.sizes();
  auto fn = make_node(CNN_AUTOGRAD_NODE(ViewBackward0), seq, {input.grad_fn},
                      [sizes = std::vector<std::int64_t>(in_sizes.begin(), in_sizes.end())](
                          const tensor& grad) { return grads{aten::reshape(grad, sizes)}; });
  return {std::move(out), std::move(fn)};
}

variable t(const variable& input) {
  const std::int64_t seq = next_sequence_nr();
  tensor out = aten::t(input.data, forward_links(seq));
  auto fn = make_node(CNN_AUTOGRAD_NODE(TBackward0), seq, {input.grad_fn},
                      [](const tensor& grad) { return grads{aten::t(grad)}; });
  return {std::move(out), std::move(fn)};
}

variable addmm(const variable& bias, const variable& mat1, const variable& mat2) {
  const std::int64_t seq = next_sequence_nr();
  tensor out = aten::addmm(bias.data, mat1.data, mat2.data, forward_links(seq));
  const bool need_mat1_grad = mat1.grad_fn != nullptr;
  auto fn = make_node(CNN_AUTOGRAD_NODE(AddmmBackward0), seq,
                      {bias.grad_fn, mat1.grad_fn, mat2.grad_fn},
                      [mat1 = mat1.data, mat2 = mat2.data, need_mat1_grad](const tensor& grad) {
                        // d mat1 = grad · mat2ᵀ, d mat2 = mat1ᵀ · grad, d bias = sum over rows
                        tensor grad_mat1 =
                            need_mat1_grad ? aten::mm(grad, aten::t(mat2)) : tensor{};
                        tensor grad_mat2 = aten::mm(aten::t(mat1), grad);
                        return grads{aten::sum_dim0(grad), std::move(grad_mat1),
                                     std::move(grad_mat2)};
                      });
  return {std::move(out), std::move(fn)};
}

variable linear(const variable& input, const variable& weight, const variable& bias) {
  kinetoscope::record_op op("aten::linear",
                            {arg_of(input.data), arg_of(weight.data), arg_of(bias.data)});
  return addmm(bias, input, t(weight));
}

variable log_softmax(const variable& input) {
  const std::int64_t seq = next_sequence_nr();
  tensor out = aten::log_softmax(input.data, forward_links(seq));
  auto fn = make_node(CNN_AUTOGRAD_NODE(LogSoftmaxBackward0), seq, {input.grad_fn},
                      [output = out](const tensor& grad) {
                        return grads{aten::log_softmax_backward(grad, output)};
                      });
  return {std::move(out), std::move(fn)};
}

variable nll_loss(const variable& input, const long_tensor& target) {
  const std::int64_t seq = next_sequence_nr();
  aten::nll_loss_result r = aten::nll_loss(input.data, target, forward_links(seq));
  auto fn = make_node(CNN_AUTOGRAD_NODE(NllLossBackward0), seq, {input.grad_fn},
                      [self = input.data, target, total_weight = r.total_weight](
                          const tensor& grad) {
                        return grads{aten::nll_loss_backward(grad, self, target, total_weight)};
                      });
  return {std::move(r.output), std::move(fn)};
}

variable cross_entropy(const variable& input, const long_tensor& target) {
  using kinetoscope::arg;
  kinetoscope::record_op op("aten::cross_entropy_loss",
                            {arg_of(input.data), arg_of(target), arg::none() /* weight */,
                             int_arg(1) /* mean */, int_arg(-100) /* ignore_index */,
                             arg::scalar(0.0) /* label_smoothing */});
  return nll_loss(log_softmax(input), target);
}

// ---- modules ----

conv2d_layer::conv2d_layer(const std::string& name, std::int64_t in_channels,
                           std::int64_t out_channels, std::int64_t kernel_size,
                           std::int64_t padding, std::mt19937& rng)
    : weight(name + ".weight",
             uniform({out_channels, in_channels, kernel_size, kernel_size},
                     1.0 / std::sqrt(double(in_channels * kernel_size * kernel_size)), rng)),
      bias(name + ".bias",
           uniform({out_channels}, 1.0 / std::sqrt(double(in_channels * kernel_size * kernel_size)),
                   rng)),
      params{.stride = 1, .padding = padding, .dilation = 1, .groups = 1},
      name(name) {}

batch_norm2d_layer::batch_norm2d_layer(const std::string& name, std::int64_t channels)
    : weight(name + ".weight", filled({channels}, 1.0f)),
      bias(name + ".bias", filled({channels}, 0.0f)),
      running_mean(filled({channels}, 0.0f)),
      running_var(filled({channels}, 1.0f)),
      name(name) {}

linear_layer::linear_layer(const std::string& name, std::int64_t in_features,
                           std::int64_t out_features, std::mt19937& rng)
    : weight(name + ".weight",
             uniform({out_features, in_features}, 1.0 / std::sqrt(double(in_features)), rng)),
      bias(name + ".bias", uniform({out_features}, 1.0 / std::sqrt(double(in_features)), rng)),
      name(name) {}

small_cnn::small_cnn(std::uint32_t seed, std::int64_t num_classes)
    : rng_(seed),
      conv1_("conv1", 3, 8, 3, 1, rng_),
      bn1_("bn1", 8),
      conv2_("conv2", 8, 16, 3, 1, rng_),
      bn2_("bn2", 16),
      fc_("fc", 16 * 8 * 8, num_classes, rng_) {}

variable small_cnn::forward(const tensor& images) const {
  kinetoscope::module_scope scope("", "SmallCNN");  // the model itself: no parameters of its own
  variable x{images, nullptr};  // input data needs no gradient
  x = max_pool2d(relu(bn1_(conv1_(x))), 2, 2);
  x = max_pool2d(relu(bn2_(conv2_(x))), 2, 2);
  return fc_(flatten(x, 1));
}

std::vector<parameter*> small_cnn::parameters() {
  return {&conv1_.weight, &conv1_.bias, &bn1_.weight, &bn1_.bias, &conv2_.weight,
          &conv2_.bias,   &bn2_.weight, &bn2_.bias,   &fc_.weight, &fc_.bias};
}

}  // namespace cnn::nn
