// SPDX-License-Identifier: BSD-3-Clause
// Factories, views, matrix products, element-wise ops and the loss, recorded as PyTorch's CPU
// dispatcher records them. Inputs are listed in schema order; defaulted optional arguments
// (dtype, layout, device, ...) appear as None, as in a real trace.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "ops.hpp"

namespace cnn::aten {
namespace {

using kinetoscope::arg;
using kinetoscope::record_op;

std::size_t idx(std::int64_t i) { return static_cast<std::size_t>(i); }

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(what);
}

/// Copies any (strided) tensor of rank <= 4 into contiguous memory at `dst`.
void copy_to_contiguous(const tensor& src, float* dst) {
  std::int64_t size[max_rank] = {1, 1, 1, 1};
  std::int64_t stride[max_rank] = {0, 0, 0, 0};
  const int pad = max_rank - src.dim();  // leading size-1 dims
  for (int d = 0; d < src.dim(); ++d) {
    size[pad + d] = src.size(d);
    stride[pad + d] = src.stride(d);
  }
  const float* s = src.data();
  for (std::int64_t a = 0; a < size[0]; ++a)
    for (std::int64_t b = 0; b < size[1]; ++b)
      for (std::int64_t c = 0; c < size[2]; ++c)
        for (std::int64_t d = 0; d < size[3]; ++d)
          *dst++ = s[a * stride[0] + b * stride[1] + c * stride[2] + d * stride[3]];
}

/// c[M, N] += a[M, K] x b[K, N] for strided a and b, contiguous c.
void gemm_accumulate(const tensor& a, const tensor& b, float* c) {
  const std::int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const std::int64_t as0 = a.stride(0), as1 = a.stride(1), bs0 = b.stride(0), bs1 = b.stride(1);
  const float* pa = a.data();
  const float* pb = b.data();
  if (as1 == 1 && bs0 == 1) {
    // Rows of a and columns of b are both contiguous (x · Wᵀ in a linear layer): dot products.
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        const float* ra = pa + i * as0;
        const float* cb = pb + j * bs1;
        float acc = 0.0f;
        for (std::int64_t q = 0; q < k; ++q) acc += ra[q] * cb[q];
        c[i * n + j] += acc;
      }
    return;
  }
  // General case: for each a[i, q], add a[i, q] * (row q of b) to row i of c.
  for (std::int64_t i = 0; i < m; ++i) {
    float* rc = c + i * n;
    for (std::int64_t q = 0; q < k; ++q) {
      const float aiq = pa[i * as0 + q * as1];
      const float* rb = pb + q * bs0;
      for (std::int64_t j = 0; j < n; ++j) rc[j] += aiq * rb[j * bs1];
    }
  }
}

void check_matmul(const tensor& mat1, const tensor& mat2) {
  require(mat1.dim() == 2 && mat2.dim() == 2 && mat1.size(1) == mat2.size(0),
          "mm: expected [M, K] x [K, N]");
}

void check_same_contiguous(const tensor& self, const tensor& other) {
  require(self.is_contiguous() && other.is_contiguous() && self.numel() == other.numel(),
          "element-wise op: expected contiguous tensors of the same size");
}

}  // namespace

// ---- Factories and views ----

template <class T>
basic_tensor<T> empty(dims sizes) {
  record_op op("aten::empty", {int_list_arg(sizes), int_arg(dtype_of<T>::scalar_type),
                               int_arg(0) /* layout: strided */, arg::none() /* device */,
                               arg::boolean(false) /* pin_memory */, arg::none()});
  return basic_tensor<T>::allocate(sizes);
}
template tensor empty<float>(dims);
template long_tensor empty<std::int64_t>(dims);

tensor empty_like(const tensor& self) {
  record_op op("aten::empty_like",
               {arg_of(self), arg::none(), arg::none(), arg::none(), arg::none(), arg::none()});
  return empty(self.sizes());
}

tensor zeros(dims sizes) {
  record_op op("aten::zeros",
               {int_list_arg(sizes), arg::none(), arg::none(), arg::none(), arg::none()});
  tensor out = empty(sizes);
  record_op zero("aten::zero_", {arg_of(out)});
  std::fill_n(out.data(), out.numel(), 0.0f);
  return out;
}

tensor ones_like(const tensor& self) {
  record_op op("aten::ones_like",
               {arg_of(self), arg::none(), arg::none(), arg::none(), arg::none(), arg::none()});
  tensor out = empty_like(self);
  record_op fill("aten::fill_", {arg_of(out), int_arg(1)});
  std::fill_n(out.data(), out.numel(), 1.0f);
  return out;
}

tensor view(const tensor& self, dims size) {
  record_op op("aten::view", {arg_of(self), int_list_arg(size)});
  return self.with_sizes(size);
}

tensor reshape(const tensor& self, dims shape) {
  record_op op("aten::reshape", {arg_of(self), int_list_arg(shape)});
  return view(self, shape);  // contiguous input: reshape is a view
}

tensor flatten(const tensor& self, std::int64_t start_dim, op_links links) {
  record_op op("aten::flatten", {arg_of(self), int_arg(start_dim), int_arg(-1)}, links);
  std::vector<std::int64_t> sizes(self.sizes().begin(), self.sizes().begin() + start_dim);
  std::int64_t rest = 1;
  for (int d = static_cast<int>(start_dim); d < self.dim(); ++d) rest *= self.size(d);
  sizes.push_back(rest);
  return view(self, sizes);
}

tensor t(const tensor& self, op_links links) {
  record_op op("aten::t", {arg_of(self)}, links);
  record_op transpose("aten::transpose", {arg_of(self), int_arg(0), int_arg(1)});
  tensor out = self.transposed();
  record_op as_strided("aten::as_strided", {arg_of(self), int_list_arg(out.sizes()),
                                            int_list_arg(out.strides()), arg::none()});
  return out;
}

tensor detach(const tensor& self) {
  record_op op("aten::detach", {arg_of(self)});
  record_op inner("detach", {arg_of(self)});
  return self;
}

tensor clone(const tensor& self) {
  record_op op("aten::clone", {arg_of(self), arg::none()});
  tensor out = empty_like(self);
  record_op copy("aten::copy_", {arg_of(out), arg_of(self), arg::boolean(false)});
  copy_to_contiguous(self, out.data());
  return out;
}

tensor contiguous_copy(const tensor& self) {
  tensor out;
  {
    std::vector<std::int64_t> strides(self.sizes().size());
    std::int64_t s = 1;
    for (int d = self.dim() - 1; d >= 0; --d) {
      strides[idx(d)] = s;
      s *= self.size(d);
    }
    record_op op("aten::new_empty_strided",
                 {arg_of(self), int_list_arg(self.sizes()), int_list_arg(strides), arg::none(),
                  arg::none(), arg::none(), arg::none()});
    record_op inner("aten::empty_strided", {int_list_arg(self.sizes()), int_list_arg(strides),
                                            arg::none(), arg::none(), arg::none(), arg::none()});
    out = tensor::allocate(self.sizes());
  }
  record_op copy("aten::copy_", {arg_of(out), arg_of(self), arg::boolean(false)});
  copy_to_contiguous(self, out.data());
  return out;
}

float item(const tensor& self) {
  record_op op("aten::item", {arg_of(self)});
  record_op dense("aten::_local_scalar_dense", {arg_of(self)});
  return self.data()[0];
}

// ---- Linear algebra and element-wise ----

tensor mm(const tensor& mat1, const tensor& mat2) {
  record_op op("aten::mm", {arg_of(mat1), arg_of(mat2)});
  check_matmul(mat1, mat2);
  tensor out = tensor::allocate({mat1.size(0), mat2.size(1)});  // structured kernel: self memory
  gemm_accumulate(mat1, mat2, out.data());
  return out;
}

tensor addmm(const tensor& self, const tensor& mat1, const tensor& mat2, op_links links) {
  record_op op("aten::addmm",
               {arg_of(self), arg_of(mat1), arg_of(mat2), int_arg(1) /* beta */,
                int_arg(1) /* alpha */},
               links);
  check_matmul(mat1, mat2);
  require(self.dim() == 1 && self.size(0) == mat2.size(1), "addmm: bias must be [N]");
  const std::int64_t m = mat1.size(0), n = mat2.size(1);
  tensor out = tensor::allocate({m, n});
  for (std::int64_t i = 0; i < m; ++i) std::copy_n(self.data(), n, out.data() + i * n);
  gemm_accumulate(mat1, mat2, out.data());
  return out;
}

tensor sum_dim0(const tensor& self) {
  record_op op("aten::sum",
               {arg_of(self), arg::int_list({0}), arg::boolean(false), arg::none()});
  require(self.dim() == 2 && self.is_contiguous(), "sum: expected a contiguous matrix");
  const std::int64_t m = self.size(0), n = self.size(1);
  tensor out = tensor::allocate({n});
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) out.data()[j] += self.data()[i * n + j];
  return out;
}

tensor add(const tensor& self, const tensor& other, double alpha) {
  record_op op("aten::add", {arg_of(self), arg_of(other), arg::scalar(alpha)});
  check_same_contiguous(self, other);
  tensor out = tensor::allocate(self.sizes());
  const auto a = static_cast<float>(alpha);
  for (std::int64_t i = 0; i < self.numel(); ++i)
    out.data()[i] = self.data()[i] + a * other.data()[i];
  return out;
}

void add_(const tensor& self, const tensor& other, double alpha) {
  record_op op("aten::add_", {arg_of(self), arg_of(other), arg::scalar(alpha)});
  check_same_contiguous(self, other);
  const auto a = static_cast<float>(alpha);
  for (std::int64_t i = 0; i < self.numel(); ++i) self.data()[i] += a * other.data()[i];
}

void mul_(const tensor& self, double other) {
  record_op op("aten::mul_", {arg_of(self), arg::scalar(other)});
  const auto f = static_cast<float>(other);
  for (std::int64_t i = 0; i < self.numel(); ++i) self.data()[i] *= f;
}

// ---- Loss ----

tensor log_softmax(const tensor& self, op_links links) {
  record_op op("aten::log_softmax", {arg_of(self), int_arg(1), arg::none()}, links);
  record_op inner("aten::_log_softmax", {arg_of(self), int_arg(1), arg::boolean(false)});
  require(self.dim() == 2 && self.is_contiguous(), "log_softmax: expected [N, C]");
  const std::int64_t n = self.size(0), c = self.size(1);
  tensor out = tensor::allocate(self.sizes());
  for (std::int64_t i = 0; i < n; ++i) {
    const float* x = self.data() + i * c;
    float* y = out.data() + i * c;
    const float max = *std::max_element(x, x + c);
    double sum = 0.0;
    for (std::int64_t j = 0; j < c; ++j) sum += std::exp(double(x[j] - max));
    const auto log_sum = static_cast<float>(std::log(sum));
    for (std::int64_t j = 0; j < c; ++j) y[j] = x[j] - max - log_sum;
  }
  return out;
}

tensor log_softmax_backward(const tensor& grad_output, const tensor& output) {
  record_op op("aten::_log_softmax_backward_data",
               {arg_of(grad_output), arg_of(output), int_arg(1),
                int_arg(dtype_of<float>::scalar_type)});
  const std::int64_t n = output.size(0), c = output.size(1);
  tensor grad_input = tensor::allocate(output.sizes());
  // d/dx log_softmax(x)_j = g_j - softmax(x)_j * sum_k g_k
  for (std::int64_t i = 0; i < n; ++i) {
    const float* g = grad_output.data() + i * c;
    const float* y = output.data() + i * c;
    float* gx = grad_input.data() + i * c;
    float g_sum = 0.0f;
    for (std::int64_t j = 0; j < c; ++j) g_sum += g[j];
    for (std::int64_t j = 0; j < c; ++j) gx[j] = g[j] - std::exp(y[j]) * g_sum;
  }
  return grad_input;
}

nll_loss_result nll_loss(const tensor& self, const long_tensor& target, op_links links) {
  constexpr std::int64_t reduction_mean = 1, ignore_index = -100;
  record_op nd("aten::nll_loss_nd",
               {arg_of(self), arg_of(target), arg::none(), int_arg(reduction_mean),
                int_arg(ignore_index)},
               links);
  record_op loss("aten::nll_loss", {arg_of(self), arg_of(target), arg::none(),
                                    int_arg(reduction_mean), int_arg(ignore_index)});
  record_op forward("aten::nll_loss_forward", {arg_of(self), arg_of(target), arg::none(),
                                               int_arg(reduction_mean), int_arg(ignore_index)});
  require(self.dim() == 2 && target.dim() == 1 && target.size(0) == self.size(0),
          "nll_loss: expected input [N, C] and target [N]");
  const std::int64_t n = self.size(0), c = self.size(1);
  nll_loss_result r{tensor::allocate({}), tensor::allocate({})};
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t label = target.data()[i];
    require(label >= 0 && label < c, "nll_loss: target out of range");
    sum -= self.data()[i * c + label];
  }
  r.total_weight.data()[0] = static_cast<float>(n);
  r.output.data()[0] = static_cast<float>(sum / double(n));
  return r;
}

tensor nll_loss_backward(const tensor& grad_output, const tensor& self, const long_tensor& target,
                         const tensor& total_weight) {
  record_op op("aten::nll_loss_backward",
               {arg_of(grad_output), arg_of(self), arg_of(target), arg::none(), int_arg(1),
                int_arg(-100), arg_of(total_weight)});
  const std::int64_t n = self.size(0), c = self.size(1);
  tensor grad_input = tensor::allocate(self.sizes());
  {
    record_op zero("aten::zero_", {arg_of(grad_input)});
    std::fill_n(grad_input.data(), grad_input.numel(), 0.0f);
  }
  const float g = -grad_output.data()[0] / total_weight.data()[0];
  for (std::int64_t i = 0; i < n; ++i) grad_input.data()[i * c + target.data()[i]] = g;
  return grad_input;
}

}  // namespace cnn::aten
