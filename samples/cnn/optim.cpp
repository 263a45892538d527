// SPDX-License-Identifier: BSD-3-Clause
#include "optim.hpp"

#include <kinetoscope/record_function.hpp>

#include "ops.hpp"

namespace cnn::optim {

sgd::sgd(std::vector<autograd::parameter*> params, sgd_options options)
    : params_(std::move(params)), options_(options), momentum_buffers_(params_.size()) {}

void sgd::zero_grad() {
  KINETOSCOPE_RANGE("Optimizer.zero_grad#SGD.zero_grad");
  for (autograd::parameter* p : params_) p->set_grad({});
}

void sgd::step() {
  KINETOSCOPE_RANGE("Optimizer.step#SGD.step");
  for (std::size_t i = 0; i < params_.size(); ++i) {
    autograd::parameter& p = *params_[i];
    if (!p.grad().defined()) continue;
    tensor d_p = p.grad();
    if (options_.weight_decay != 0.0) d_p = aten::add(d_p, p.data(), options_.weight_decay);
    if (options_.momentum != 0.0) {
      tensor& buf = momentum_buffers_[i];
      if (!buf.defined()) {
        buf = aten::detach(aten::clone(d_p));
      } else {
        aten::mul_(buf, options_.momentum);
        aten::add_(buf, d_p, 1.0);  // 1 - dampening, dampening = 0
      }
      d_p = buf;
    }
    aten::add_(p.data(), d_p, -options_.lr);
  }
}

}  // namespace cnn::optim
