// SPDX-License-Identifier: BSD-3-Clause
// compute_flops(): docs/profiler-rules.md#flops (numbers verified on PyTorch 1.13).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kinetoscope/key_averages.hpp"

using namespace kinetoscope;

namespace {

op_input tensor(std::vector<std::int64_t> dims, std::string dtype = "float") {
  op_input in;
  in.strides.resize(dims.size());
  std::int64_t stride = 1;
  for (std::size_t i = dims.size(); i-- > 0;) {
    in.strides[i] = stride;
    stride *= dims[i];
  }
  in.dims = std::move(dims);
  in.type = std::move(dtype);
  return in;
}

op_input scalar(std::int64_t v) {
  op_input in;
  in.type = "Scalar";
  in.concrete = std::to_string(v);
  in.values = {v};
  return in;
}

op_input int_list(std::vector<std::int64_t> v) {
  op_input in;
  in.type = "ScalarList";
  in.concrete = "[";
  for (std::size_t i = 0; i < v.size(); ++i) in.concrete += (i ? ", " : "") + std::to_string(v[i]);
  in.concrete += "]";
  in.values = std::move(v);
  return in;
}

op_input none() { return {}; }

std::int64_t flops(std::string_view name, const std::vector<op_input>& in) {
  return compute_flops(name, in.data(), in.size());
}

/// aten::conv2d(input, weight, bias, stride, padding, dilation, groups)
std::vector<op_input> conv2d(std::vector<std::int64_t> input, std::vector<std::int64_t> weight,
                             std::vector<std::int64_t> stride, std::vector<std::int64_t> padding,
                             std::vector<std::int64_t> dilation, std::int64_t groups) {
  return {tensor(std::move(input)), tensor(std::move(weight)), none(), int_list(std::move(stride)),
          int_list(std::move(padding)), int_list(std::move(dilation)), scalar(groups)};
}

}  // namespace

TEST_CASE("flops: verified PyTorch 1.13 numbers") {
  CHECK(flops("aten::mm", {tensor({64, 128}), tensor({128, 256})}) == 4194304);
  CHECK(flops("aten::conv2d", conv2d({2, 3, 16, 16}, {8, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1)) == 169344);
  CHECK(flops("aten::mul", {tensor({64, 256}), tensor({64, 256})}) == 16384);
  // ResNet-18 fc: addmm(bias[1000], x[5,512], w^T[512,1000], beta, alpha)
  CHECK(flops("aten::addmm", {tensor({1000}), tensor({5, 512}), tensor({512, 1000}, "float"), scalar(1),
                              scalar(1)}) == 5120000);
}

TEST_CASE("flops: gemm family") {
  // 2 * M * K * N
  CHECK(flops("aten::mm", {tensor({3, 5}), tensor({5, 7})}) == 2 * 3 * 5 * 7);
  // addmm uses inputs 1 and 2, the bias shape is ignored
  CHECK(flops("aten::addmm", {tensor({99, 99}), tensor({3, 5}), tensor({5, 7})}) == 210);
  // bmm: 2 * B * M * K * N
  CHECK(flops("aten::bmm", {tensor({4, 3, 5}), tensor({4, 5, 7})}) == 2 * 4 * 3 * 5 * 7);
  CHECK(flops("aten::baddbmm", {tensor({4, 3, 7}), tensor({4, 3, 5}), tensor({4, 5, 7}), scalar(1), scalar(1)}) ==
        840);
  // Left-to-right integer arithmetic: mat1 product / K, then times mat2 product.
  CHECK(flops("aten::mm", {tensor({10, 3}), tensor({3, 4})}) == 240);
}

TEST_CASE("flops: element-wise ops count input 0 only") {
  CHECK(flops("aten::add", {tensor({2, 3, 4}), tensor({4}), scalar(1)}) == 24);
  CHECK(flops("aten::mul", {tensor({10}), scalar(3)}) == 10);
  // a 0-dim tensor has one element
  CHECK(flops("aten::add", {tensor({}), tensor({})}) == 1);
  CHECK(flops("aten::mul", {tensor({5, 0})}) == 0);
}

TEST_CASE("flops: conv2d stride, padding, dilation and groups") {
  // H_out = (16 + 2 - 2 - 1) / 2 + 1 = 8; 2 * 2 * 8 * 8 * 3 * 3 * 3 * 8 = 55296
  CHECK(flops("aten::conv2d", conv2d({2, 3, 16, 16}, {8, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1)) == 55296);
  // groups: weight [8, 2, 3, 3] on 4 input channels in 2 groups; H_out = W_out = 14
  // 2 * 1 * 14 * 14 * 3 * 3 * 4 * 8 / 2 = 56448
  CHECK(flops("aten::conv2d", conv2d({1, 4, 16, 16}, {8, 2, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 2)) == 56448);
  // dilation 2: H_out = (16 - 2*2 - 1) / 1 + 1 = 12, W with stride 3: (16 - 4 - 1) / 3 + 1 = 4
  // 2 * 1 * 12 * 4 * 9 * 1 * 1 = 864
  CHECK(flops("aten::conv2d", conv2d({1, 1, 16, 16}, {1, 1, 3, 3}, {1, 3}, {0, 0}, {2, 2}, 1)) == 864);
  // ResNet-18 stem: 5 x 3 x 224 x 224, 64 x 3 x 7 x 7, stride 2, padding 3 -> 112 x 112
  CHECK(flops("aten::conv2d", conv2d({5, 3, 224, 224}, {64, 3, 7, 7}, {2, 2}, {3, 3}, {1, 1}, 1)) ==
        2LL * 5 * 112 * 112 * 7 * 7 * 3 * 64);
}

TEST_CASE("flops: malformed inputs give 0") {
  const auto good = conv2d({2, 3, 16, 16}, {8, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1);
  REQUIRE(flops("aten::conv2d", good) == 169344);  // each case below breaks one thing

  SUBCASE("missing inputs") {
    CHECK(compute_flops("aten::mm", nullptr, 0) == 0);
    CHECK(flops("aten::mm", {tensor({64, 128})}) == 0);
    CHECK(flops("aten::addmm", {tensor({256}), tensor({64, 128})}) == 0);
    CHECK(flops("aten::bmm", {tensor({4, 3, 5})}) == 0);
    CHECK(flops("aten::mul", {}) == 0);
    CHECK(flops("aten::add", {}) == 0);
    auto short_conv = good;
    short_conv.pop_back();  // no groups
    CHECK(flops("aten::conv2d", short_conv) == 0);
  }
  SUBCASE("inputs that are not tensors") {
    CHECK(flops("aten::mm", {tensor({64, 128}), scalar(3)}) == 0);
    CHECK(flops("aten::mul", {scalar(2), tensor({64, 256})}) == 0);
    CHECK(flops("aten::add", {none(), tensor({4})}) == 0);
    CHECK(flops("aten::addmm", {none(), tensor({5, 512}), tensor({512, 1000})}) == 0);  // bias None
    CHECK(flops("aten::baddbmm", {scalar(0), tensor({4, 3, 5}), tensor({4, 5, 7})}) == 0);
    auto c = good;
    c[1] = int_list({8, 3, 3, 3});
    CHECK(flops("aten::conv2d", c) == 0);
  }
  SUBCASE("conv2d ranks") {
    auto c = good;
    c[0] = tensor({3, 16, 16});  // unbatched input
    CHECK(flops("aten::conv2d", c) == 0);
    c = good;
    c[1] = tensor({8, 3, 3});
    CHECK(flops("aten::conv2d", c) == 0);
  }
  SUBCASE("conv2d padding as a string") {
    auto c = good;
    c[4] = op_input{};
    c[4].type = "String";
    c[4].concrete = "same";
    CHECK(flops("aten::conv2d", c) == 0);
    c[4].type = "Scalar";
    CHECK(flops("aten::conv2d", c) == 0);
  }
  SUBCASE("conv2d list lengths") {
    auto c = good;
    c[3] = int_list({1});
    CHECK(flops("aten::conv2d", c) == 0);
    c = good;
    c[4] = int_list({0, 0, 0});
    CHECK(flops("aten::conv2d", c) == 0);
    c = good;
    c[5] = int_list({1});
    CHECK(flops("aten::conv2d", c) == 0);
  }
  SUBCASE("conv2d zero stride or groups") {
    auto c = good;
    c[3] = int_list({1, 0});
    CHECK(flops("aten::conv2d", c) == 0);
    c = good;
    c[6] = scalar(0);
    CHECK(flops("aten::conv2d", c) == 0);
    c = good;
    c[6] = none();  // groups without a value
    CHECK(flops("aten::conv2d", c) == 0);
  }
  SUBCASE("empty or zero-sized matrices") {
    CHECK(flops("aten::mm", {tensor({}), tensor({128, 256})}) == 0);
    CHECK(flops("aten::mm", {tensor({64, 0}), tensor({0, 256})}) == 0);
    CHECK(flops("aten::bmm", {tensor({0, 3, 5}), tensor({0, 5, 7})}) == 0);  // batch 0
    CHECK(flops("aten::bmm", {tensor({4, 3, 0}), tensor({4, 0, 7})}) == 0);
    CHECK(flops("aten::baddbmm", {tensor({4, 3, 7}), tensor({}), tensor({4, 5, 7})}) == 0);
  }
}

TEST_CASE("flops: only the exact op names count") {
  const std::vector<op_input> mm = {tensor({64, 128}), tensor({128, 256})};
  CHECK(flops("aten::mm", mm) == 4194304);
  CHECK(flops("aten::linear", {tensor({5, 512}), tensor({1000, 512}), tensor({1000})}) == 0);
  CHECK(flops("aten::matmul", mm) == 0);
  CHECK(flops("aten::add_", {tensor({64, 256}), tensor({64, 256})}) == 0);
  CHECK(flops("aten::mul_", {tensor({64, 256}), tensor({64, 256})}) == 0);
  CHECK(flops("aten::conv1d", conv2d({2, 3, 16, 16}, {8, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1)) == 0);
  CHECK(flops("aten::convolution", conv2d({2, 3, 16, 16}, {8, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1)) == 0);
  CHECK(flops("mm", mm) == 0);
  CHECK(flops("aten::MM", mm) == 0);
  CHECK(flops("", mm) == 0);
}
