// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file cnn/nn.hpp
/// torch.nn for the sample: functional ops that build the autograd graph (each takes a sequence
/// number, records its aten op with it and creates the matching backward node), the modules
/// (Conv2d, BatchNorm2d, Linear, CrossEntropyLoss) and the model. Every module call is a
/// kinetoscope::module_scope (path, class, own parameter count), as PyTorch records nn.Module
/// forward calls, so traces get the Module view and print_model_profile() the model tree.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <kinetoscope/module_scope.hpp>

#include "autograd.hpp"
#include "ops.hpp"
#include "tensor.hpp"

namespace cnn::nn {

using autograd::parameter;
using autograd::variable;

// ---- torch.nn.functional (with autograd) ----

/// aten::conv2d; backward node ConvolutionBackward0.
variable conv2d(const variable& input, const variable& weight, const variable& bias,
                const aten::conv_params& params);
/// aten::batch_norm (training); backward node NativeBatchNormBackward0.
variable batch_norm(const variable& input, const tensor& running_mean, const tensor& running_var,
                    const variable& weight, const variable& bias, double momentum, double eps);
/// aten::relu; backward node ReluBackward0.
variable relu(const variable& input);
/// aten::max_pool2d; backward node MaxPool2DWithIndicesBackward0.
variable max_pool2d(const variable& input, std::int64_t kernel_size, std::int64_t stride);
/// aten::flatten (a view); backward node ViewBackward0.
variable flatten(const variable& input, std::int64_t start_dim);
/// aten::t; backward node TBackward0.
variable t(const variable& input);
/// aten::addmm; backward node AddmmBackward0.
variable addmm(const variable& bias, const variable& mat1, const variable& mat2);
/// aten::linear = aten::t + aten::addmm (a composite op: it has no node of its own).
variable linear(const variable& input, const variable& weight, const variable& bias);
/// aten::log_softmax over dim 1; backward node LogSoftmaxBackward0.
variable log_softmax(const variable& input);
/// aten::nll_loss_nd (mean); backward node NllLossBackward0.
variable nll_loss(const variable& input, const long_tensor& target);
/// aten::cross_entropy_loss = log_softmax + nll_loss (composite).
variable cross_entropy(const variable& input, const long_tensor& target);

// ---- Modules ----

/// torch.nn.Conv2d with square kernels, stride 1; PyTorch's default init
/// (uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias).
class conv2d_layer {
 public:
  conv2d_layer(const std::string& name, std::int64_t in_channels, std::int64_t out_channels,
               std::int64_t kernel_size, std::int64_t padding, std::mt19937& rng);
  variable operator()(const variable& x) const {
    kinetoscope::module_scope scope(name, "Conv2d", weight.data().numel() + bias.data().numel());
    return conv2d(x, weight.var(), bias.var(), params);
  }

  parameter weight;
  parameter bias;
  aten::conv_params params;
  std::string name;  ///< path in the model ("conv1")
};

/// torch.nn.BatchNorm2d in training mode (weight 1, bias 0, running mean 0, running var 1).
class batch_norm2d_layer {
 public:
  batch_norm2d_layer(const std::string& name, std::int64_t channels);
  variable operator()(const variable& x) const {
    kinetoscope::module_scope scope(name, "BatchNorm2d", weight.data().numel() + bias.data().numel());
    return batch_norm(x, running_mean, running_var, weight.var(), bias.var(), momentum, eps);
  }

  parameter weight;
  parameter bias;
  tensor running_mean;
  tensor running_var;
  double momentum = 0.1;
  double eps = 1e-5;
  std::string name;
};

/// torch.nn.Linear with PyTorch's default init.
class linear_layer {
 public:
  linear_layer(const std::string& name, std::int64_t in_features, std::int64_t out_features,
               std::mt19937& rng);
  variable operator()(const variable& x) const {
    kinetoscope::module_scope scope(name, "Linear", weight.data().numel() + bias.data().numel());
    return linear(x, weight.var(), bias.var());
  }

  parameter weight;
  parameter bias;
  std::string name;
};

/// torch.nn.CrossEntropyLoss (mean reduction): the training loop's criterion, a module of its
/// own outside the model, as in PyTorch scripts.
struct cross_entropy_loss {
  variable operator()(const variable& input, const long_tensor& target) const {
    kinetoscope::module_scope scope("criterion", "CrossEntropyLoss");
    return cross_entropy(input, target);
  }
};

/// The model, for 3x32x32 images:
///   conv(3->8, 3x3, pad 1) -> bn -> relu -> maxpool 2 -> conv(8->16, 3x3, pad 1) -> bn -> relu
///   -> maxpool 2 -> flatten -> linear(16*8*8 -> classes)
class small_cnn {
 public:
  explicit small_cnn(std::uint32_t seed, std::int64_t num_classes = 10);
  /// Logits [N, classes] for images [N, 3, 32, 32], with the graph for backward.
  variable forward(const tensor& images) const;
  std::vector<parameter*> parameters();

 private:
  std::mt19937 rng_;  // initialises the layers below (declared first on purpose)
  conv2d_layer conv1_;
  batch_norm2d_layer bn1_;
  conv2d_layer conv2_;
  batch_norm2d_layer bn2_;
  linear_layer fc_;
};

}  // namespace cnn::nn
