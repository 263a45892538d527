// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file cnn/optim.hpp
/// torch.optim.SGD (momentum, weight decay), with the ranges PyTorch's Optimizer wraps around
/// its methods: "Optimizer.step#SGD.step" and "Optimizer.zero_grad#SGD.zero_grad".

#include <vector>

#include "autograd.hpp"
#include "tensor.hpp"

namespace cnn::optim {

struct sgd_options {
  double lr = 0.01;
  double momentum = 0.0;
  double weight_decay = 0.0;
};

class sgd {
 public:
  sgd(std::vector<autograd::parameter*> params, sgd_options options);

  /// zero_grad(set_to_none=True): drops the gradients (their memory is freed here).
  void zero_grad();
  /// One update, as torch.optim.SGD's single-tensor path:
  ///   d_p = grad + weight_decay * p                       aten::add
  ///   buf = clone(d_p) (first step) | buf * momentum + d_p  aten::clone | aten::mul_, aten::add_
  ///   p -= lr * buf                                       aten::add_
  void step();

 private:
  std::vector<autograd::parameter*> params_;
  sgd_options options_;
  std::vector<tensor> momentum_buffers_;
};

}  // namespace cnn::optim
