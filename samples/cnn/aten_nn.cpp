// SPDX-License-Identifier: BSD-3-Clause
// Convolution, batch normalisation, ReLU and max pooling: forward and backward kernels on NCHW
// float tensors, recorded with the op names and schema-ordered inputs of PyTorch's CPU path
// (the "slow" convolution, i.e. a build without mkldnn).
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "ops.hpp"

namespace cnn::aten {
namespace {

using kinetoscope::arg;
using kinetoscope::record_op;

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(what);
}

std::int64_t conv_out_size(std::int64_t in, std::int64_t kernel, const conv_params& p) {
  return (in + 2 * p.padding - p.dilation * (kernel - 1) - 1) / p.stride + 1;
}

/// The output positions `o` in [lo, hi) whose input position `o * stride + offset` is inside
/// [0, in): the part of an output row a kernel tap touches without reading padding.
struct tap_range {
  std::int64_t lo = 0;
  std::int64_t hi = 0;
  std::int64_t count() const { return hi > lo ? hi - lo : 0; }
};
tap_range valid_outputs(std::int64_t out, std::int64_t in, std::int64_t offset,
                        std::int64_t stride) {
  tap_range r;
  r.lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  r.hi = in - 1 - offset < 0 ? 0 : std::min(out, (in - 1 - offset) / stride + 1);
  return r;
}

/// Geometry shared by the convolution kernels.
struct conv_geometry {
  std::int64_t n, c_in, h, w;       // input
  std::int64_t c_out, kh, kw;       // weight
  std::int64_t h_out, w_out;        // output
  conv_geometry(const tensor& input, const tensor& weight, const conv_params& p)
      : n(input.size(0)), c_in(input.size(1)), h(input.size(2)), w(input.size(3)),
        c_out(weight.size(0)), kh(weight.size(2)), kw(weight.size(3)),
        h_out(conv_out_size(h, kh, p)), w_out(conv_out_size(w, kw, p)) {}
};

void check_conv(const tensor& input, const tensor& weight, const conv_params& p) {
  require(input.dim() == 4 && weight.dim() == 4 && input.is_contiguous() &&
              weight.is_contiguous(),
          "conv2d: expected contiguous 4-D input and weight");
  require(p.groups == 1 && weight.size(1) == input.size(1), "conv2d: only groups = 1");
  require(p.stride > 0 && p.dilation > 0 && p.padding >= 0, "conv2d: bad parameters");
}

/// Calls f(flat index) for every element of channel `c` of a contiguous NCHW tensor.
template <class F>
void for_channel(const tensor& x, std::int64_t c, F&& f) {
  const std::int64_t n = x.size(0), channels = x.size(1), plane = x.size(2) * x.size(3);
  for (std::int64_t b = 0; b < n; ++b) {
    const std::int64_t base = (b * channels + c) * plane;
    for (std::int64_t i = 0; i < plane; ++i) f(base + i);
  }
}

}  // namespace

// ---- Convolution ----

tensor conv2d(const tensor& input, const tensor& weight, const tensor& bias, const conv_params& p,
              op_links links) {
  const arg stride = arg::int_list({p.stride, p.stride});
  const arg padding = arg::int_list({p.padding, p.padding});
  const arg dilation = arg::int_list({p.dilation, p.dilation});
  const arg groups = int_arg(p.groups);
  // aten::conv2d is what torch.nn.Conv2d calls; its FLOPs are counted
  // (docs/profiler-rules.md#flops).
  record_op conv2d_op("aten::conv2d", {arg_of(input), arg_of(weight), arg_of(bias), stride,
                                       padding, dilation, groups},
                      links);
  record_op convolution("aten::convolution",
                        {arg_of(input), arg_of(weight), arg_of(bias), stride, padding, dilation,
                         arg::boolean(false) /* transposed */, arg::int_list({0, 0}), groups});
  record_op convolution_impl(
      "aten::_convolution",
      {arg_of(input), arg_of(weight), arg_of(bias), stride, padding, dilation,
       arg::boolean(false), arg::int_list({0, 0}), groups, arg::boolean(false) /* benchmark */,
       arg::boolean(false) /* deterministic */, arg::boolean(true) /* cudnn_enabled */,
       arg::boolean(true) /* allow_tf32 */});
  check_conv(input, weight, p);
  const conv_geometry g(input, weight, p);
  record_op slow("aten::_slow_conv2d_forward",
                 {arg_of(input), arg_of(weight), arg::int_list({g.kh, g.kw}), arg_of(bias),
                  stride, padding});
  tensor output = empty({g.n, g.c_out, g.h_out, g.w_out});

  const std::int64_t in_plane = g.h * g.w, out_plane = g.h_out * g.w_out;
  for (std::int64_t b = 0; b < g.n; ++b) {
    for (std::int64_t co = 0; co < g.c_out; ++co) {
      float* out = output.data() + (b * g.c_out + co) * out_plane;
      std::fill_n(out, out_plane, bias.defined() ? bias.data()[co] : 0.0f);
      for (std::int64_t ci = 0; ci < g.c_in; ++ci) {
        const float* in = input.data() + (b * g.c_in + ci) * in_plane;
        const float* wt = weight.data() + (co * g.c_in + ci) * g.kh * g.kw;
        for (std::int64_t y = 0; y < g.kh; ++y) {
          const std::int64_t row_offset = y * p.dilation - p.padding;
          const tap_range rows = valid_outputs(g.h_out, g.h, row_offset, p.stride);
          for (std::int64_t x = 0; x < g.kw; ++x) {
            const std::int64_t col_offset = x * p.dilation - p.padding;
            const tap_range cols = valid_outputs(g.w_out, g.w, col_offset, p.stride);
            if (cols.count() == 0) continue;  // this tap only ever reads padding
            const float tap = wt[y * g.kw + x];
            for (std::int64_t oh = rows.lo; oh < rows.hi; ++oh) {
              const float* src =
                  in + (oh * p.stride + row_offset) * g.w + cols.lo * p.stride + col_offset;
              float* dst = out + oh * g.w_out + cols.lo;
              for (std::int64_t j = 0; j < cols.count(); ++j) dst[j] += tap * src[j * p.stride];
            }
          }
        }
      }
    }
  }
  return output;
}

conv_grads convolution_backward(const tensor& grad_output, const tensor& input,
                                const tensor& weight, const conv_params& p, bool need_input_grad) {
  const arg stride = arg::int_list({p.stride, p.stride});
  const arg padding = arg::int_list({p.padding, p.padding});
  const arg mask = arg::int_list({need_input_grad ? 1 : 0, 1, 1});  // output_mask
  record_op op("aten::convolution_backward",
               {arg_of(grad_output), arg_of(input), arg_of(weight),
                arg::int_list({weight.size(0)}) /* bias_sizes */, stride, padding,
                arg::int_list({p.dilation, p.dilation}), arg::boolean(false),
                arg::int_list({0, 0}), int_arg(p.groups), mask});
  check_conv(input, weight, p);
  const conv_geometry g(input, weight, p);
  record_op slow("aten::_slow_conv2d_backward",
                 {arg_of(grad_output), arg_of(input), arg_of(weight),
                  arg::int_list({g.kh, g.kw}), stride, padding, mask});
  conv_grads r;
  r.grad_weight = tensor::allocate(weight.sizes());
  r.grad_bias = tensor::allocate({g.c_out});
  if (need_input_grad) r.grad_input = tensor::allocate(input.sizes());

  const std::int64_t in_plane = g.h * g.w, out_plane = g.h_out * g.w_out;
  for (std::int64_t b = 0; b < g.n; ++b) {
    for (std::int64_t co = 0; co < g.c_out; ++co) {
      const float* go = grad_output.data() + (b * g.c_out + co) * out_plane;
      float bias_sum = 0.0f;
      for (std::int64_t i = 0; i < out_plane; ++i) bias_sum += go[i];
      r.grad_bias.data()[co] += bias_sum;
      for (std::int64_t ci = 0; ci < g.c_in; ++ci) {
        const float* in = input.data() + (b * g.c_in + ci) * in_plane;
        float* gi = need_input_grad ? r.grad_input.data() + (b * g.c_in + ci) * in_plane : nullptr;
        const float* wt = weight.data() + (co * g.c_in + ci) * g.kh * g.kw;
        float* gw = r.grad_weight.data() + (co * g.c_in + ci) * g.kh * g.kw;
        for (std::int64_t y = 0; y < g.kh; ++y) {
          const std::int64_t row_offset = y * p.dilation - p.padding;
          const tap_range rows = valid_outputs(g.h_out, g.h, row_offset, p.stride);
          for (std::int64_t x = 0; x < g.kw; ++x) {
            const std::int64_t col_offset = x * p.dilation - p.padding;
            const tap_range cols = valid_outputs(g.w_out, g.w, col_offset, p.stride);
            if (cols.count() == 0) continue;
            const float tap = wt[y * g.kw + x];
            float tap_grad = 0.0f;
            for (std::int64_t oh = rows.lo; oh < rows.hi; ++oh) {
              const std::int64_t in_at =
                  (oh * p.stride + row_offset) * g.w + cols.lo * p.stride + col_offset;
              const float* g_row = go + oh * g.w_out + cols.lo;
              const float* src = in + in_at;
              for (std::int64_t j = 0; j < cols.count(); ++j) tap_grad += g_row[j] * src[j * p.stride];
              if (gi != nullptr) {
                float* dst = gi + in_at;
                for (std::int64_t j = 0; j < cols.count(); ++j) dst[j * p.stride] += tap * g_row[j];
              }
            }
            gw[y * g.kw + x] += tap_grad;
          }
        }
      }
    }
  }
  return r;
}

// ---- Batch normalisation (training mode) ----

batch_norm_result batch_norm(const tensor& input, const tensor& weight, const tensor& bias,
                             const tensor& running_mean, const tensor& running_var,
                             double momentum, double eps, op_links links) {
  record_op op("aten::batch_norm",
               {arg_of(input), arg_of(weight), arg_of(bias), arg_of(running_mean),
                arg_of(running_var), arg::boolean(true) /* training */, arg::scalar(momentum),
                arg::scalar(eps), arg::boolean(false) /* cudnn_enabled */},
               links);
  record_op impl("aten::_batch_norm_impl_index",
                 {arg_of(input), arg_of(weight), arg_of(bias), arg_of(running_mean),
                  arg_of(running_var), arg::boolean(true), arg::scalar(momentum),
                  arg::scalar(eps), arg::boolean(false)});
  record_op native("aten::native_batch_norm",
                   {arg_of(input), arg_of(weight), arg_of(bias), arg_of(running_mean),
                    arg_of(running_var), arg::boolean(true), arg::scalar(momentum),
                    arg::scalar(eps)});
  require(input.dim() == 4 && input.is_contiguous(), "batch_norm: expected contiguous NCHW");
  const std::int64_t channels = input.size(1);
  const std::int64_t count = input.numel() / channels;  // N * H * W values per channel
  batch_norm_result r{empty_like(input), empty({channels}),
                      empty({channels})};
  const float* x = input.data();
  float* y = r.output.data();
  for (std::int64_t c = 0; c < channels; ++c) {
    double sum = 0.0;
    for_channel(input, c, [&](std::int64_t i) { sum += x[i]; });
    const double mean = sum / double(count);
    double sq = 0.0;
    for_channel(input, c, [&](std::int64_t i) { sq += (x[i] - mean) * (x[i] - mean); });
    const double var = sq / double(count);
    const double invstd = 1.0 / std::sqrt(var + eps);
    const auto scale = static_cast<float>(invstd * weight.data()[c]);
    const auto shift = static_cast<float>(bias.data()[c] - mean * invstd * weight.data()[c]);
    for_channel(input, c, [&](std::int64_t i) { y[i] = x[i] * scale + shift; });
    r.save_mean.data()[c] = static_cast<float>(mean);
    r.save_invstd.data()[c] = static_cast<float>(invstd);
    // Running statistics use the unbiased variance, as torch.nn.BatchNorm2d does.
    float& rm = running_mean.data()[c];
    float& rv = running_var.data()[c];
    rm = static_cast<float>((1.0 - momentum) * rm + momentum * mean);
    rv = static_cast<float>((1.0 - momentum) * rv + momentum * var * double(count) / double(count - 1));
  }
  return r;
}

batch_norm_grads native_batch_norm_backward(const tensor& grad_output, const tensor& input,
                                            const tensor& weight, const tensor& running_mean,
                                            const tensor& running_var, const tensor& save_mean,
                                            const tensor& save_invstd, double eps) {
  record_op op("aten::native_batch_norm_backward",
               {arg_of(grad_output), arg_of(input), arg_of(weight), arg_of(running_mean),
                arg_of(running_var), arg_of(save_mean), arg_of(save_invstd),
                arg::boolean(true) /* train */, arg::scalar(eps),
                arg::int_list({1, 1, 1}) /* output_mask */});
  const std::int64_t channels = input.size(1);
  const std::int64_t count = input.numel() / channels;
  batch_norm_grads r{empty_like(input), empty({channels}),
                     empty({channels})};
  const float* x = input.data();
  const float* g = grad_output.data();
  float* gx = r.grad_input.data();
  for (std::int64_t c = 0; c < channels; ++c) {
    const double mean = save_mean.data()[c], invstd = save_invstd.data()[c];
    double sum_g = 0.0, sum_g_xhat = 0.0;
    for_channel(input, c, [&](std::int64_t i) {
      sum_g += g[i];
      sum_g_xhat += g[i] * (x[i] - mean) * invstd;
    });
    r.grad_weight.data()[c] = static_cast<float>(sum_g_xhat);
    r.grad_bias.data()[c] = static_cast<float>(sum_g);
    // dx = gamma * invstd / M * (M * g - sum(g) - x_hat * sum(g * x_hat))
    const double k = weight.data()[c] * invstd / double(count);
    for_channel(input, c, [&](std::int64_t i) {
      const double x_hat = (x[i] - mean) * invstd;
      gx[i] = static_cast<float>(k * (double(count) * g[i] - sum_g - x_hat * sum_g_xhat));
    });
  }
  return r;
}

// ---- ReLU ----

tensor relu(const tensor& self, op_links links) {
  record_op op("aten::relu", {arg_of(self)}, links);
  record_op clamp("aten::clamp_min", {arg_of(self), int_arg(0)});  // relu is clamp_min(x, 0)
  tensor out = tensor::allocate(self.sizes());
  for (std::int64_t i = 0; i < self.numel(); ++i) out.data()[i] = std::max(self.data()[i], 0.0f);
  return out;
}

tensor threshold_backward(const tensor& grad_output, const tensor& result) {
  record_op op("aten::threshold_backward", {arg_of(grad_output), arg_of(result), int_arg(0)});
  tensor grad_input = tensor::allocate(result.sizes());
  for (std::int64_t i = 0; i < result.numel(); ++i)
    grad_input.data()[i] = result.data()[i] > 0.0f ? grad_output.data()[i] : 0.0f;
  return grad_input;
}

// ---- Max pooling ----

max_pool_result max_pool2d(const tensor& self, std::int64_t kernel_size, std::int64_t stride,
                           op_links links) {
  const arg kernel = arg::int_list({kernel_size, kernel_size});
  const arg strides = arg::int_list({stride, stride});
  record_op op("aten::max_pool2d",
               {arg_of(self), kernel, strides, arg::int_list({0, 0}), arg::int_list({1, 1}),
                arg::boolean(false) /* ceil_mode */},
               links);
  record_op with_indices("aten::max_pool2d_with_indices",
                         {arg_of(self), kernel, strides, arg::int_list({0, 0}),
                          arg::int_list({1, 1}), arg::boolean(false)});
  require(self.dim() == 4 && self.is_contiguous(), "max_pool2d: expected contiguous NCHW");
  const std::int64_t planes = self.size(0) * self.size(1), h = self.size(2), w = self.size(3);
  const std::int64_t h_out = (h - kernel_size) / stride + 1, w_out = (w - kernel_size) / stride + 1;
  const std::int64_t sizes[] = {self.size(0), self.size(1), h_out, w_out};
  max_pool_result r{tensor::allocate(dims(sizes)), long_tensor::allocate(dims(sizes))};
  for (std::int64_t pl = 0; pl < planes; ++pl) {
    const float* in = self.data() + pl * h * w;
    float* out = r.output.data() + pl * h_out * w_out;
    std::int64_t* arg_max = r.indices.data() + pl * h_out * w_out;
    for (std::int64_t oh = 0; oh < h_out; ++oh)
      for (std::int64_t ow = 0; ow < w_out; ++ow) {
        float best = -std::numeric_limits<float>::infinity();
        std::int64_t best_at = 0;
        for (std::int64_t y = oh * stride; y < oh * stride + kernel_size; ++y)
          for (std::int64_t x = ow * stride; x < ow * stride + kernel_size; ++x)
            if (in[y * w + x] > best) {
              best = in[y * w + x];
              best_at = y * w + x;
            }
        out[oh * w_out + ow] = best;
        arg_max[oh * w_out + ow] = best_at;
      }
  }
  return r;
}

tensor max_pool2d_with_indices_backward(const tensor& grad_output, const tensor& self,
                                        std::int64_t kernel_size, std::int64_t stride,
                                        const long_tensor& indices) {
  record_op op("aten::max_pool2d_with_indices_backward",
               {arg_of(grad_output), arg_of(self), arg::int_list({kernel_size, kernel_size}),
                arg::int_list({stride, stride}), arg::int_list({0, 0}), arg::int_list({1, 1}),
                arg::boolean(false), arg_of(indices)});
  tensor grad_input = zeros(self.sizes());  // the maxima's gradients are scattered into it
  const std::int64_t planes = self.size(0) * self.size(1);
  const std::int64_t in_plane = self.size(2) * self.size(3);
  const std::int64_t out_plane = grad_output.size(2) * grad_output.size(3);
  for (std::int64_t pl = 0; pl < planes; ++pl)
    for (std::int64_t i = 0; i < out_plane; ++i)
      grad_input.data()[pl * in_plane + indices.data()[pl * out_plane + i]] +=
          grad_output.data()[pl * out_plane + i];
  return grad_input;
}

}  // namespace cnn::aten
