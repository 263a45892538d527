// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file cnn/tensor.hpp
/// A deliberately tiny tensor: sizes + strides over a shared, reference-counted storage, like
/// at::Tensor. Storage comes from kinetoscope::tracking_allocator, so every allocation and every
/// free becomes a `[memory]` event while a profile with profile_memory records, exactly as
/// PyTorch's CPU allocator reports to its profiler.
///
/// Copying a tensor copies the handle, not the data (Python semantics: `y = x` aliases). Views
/// (aten::view, aten::t) share storage with their base, so they allocate nothing.

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

#include <kinetoscope/memory.hpp>
#include <kinetoscope/record_function.hpp>

namespace cnn {

/// Sizes as the ops take them: any contiguous range of int64 (`{16, 3, 32, 32}` or a span).
using dims = std::span<const std::int64_t>;

inline constexpr int max_rank = 4;

/// The dtype names PyTorch writes in "Input type", and c10::ScalarType codes for aten::empty.
template <class T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr const char* name = "float";
  static constexpr std::int64_t scalar_type = 6;  // c10::ScalarType::Float
};
template <>
struct dtype_of<std::int64_t> {
  static constexpr const char* name = "long int";
  static constexpr std::int64_t scalar_type = 4;  // c10::ScalarType::Long
};

template <class T>
class basic_tensor {
 public:
  using value_type = T;
  using storage = std::vector<T, kinetoscope::tracking_allocator<T>>;

  /// An undefined tensor (an optional bias that is absent, a gradient not computed).
  basic_tensor() = default;

  /// A new contiguous, zero-filled tensor. This is the allocator call only: operators that
  /// allocate record themselves (aten::empty, or the op whose self memory it becomes).
  static basic_tensor allocate(dims sizes) {
    basic_tensor t;
    t.set_contiguous(sizes);
    t.storage_ = std::make_shared<storage>(static_cast<std::size_t>(t.numel()));
    return t;
  }
  static basic_tensor allocate(std::initializer_list<std::int64_t> sizes) {
    return allocate(dims(sizes.begin(), sizes.size()));
  }

  bool defined() const noexcept { return storage_ != nullptr; }
  int dim() const noexcept { return rank_; }
  std::int64_t size(int d) const noexcept { return sizes_[static_cast<std::size_t>(d)]; }
  std::int64_t stride(int d) const noexcept { return strides_[static_cast<std::size_t>(d)]; }
  dims sizes() const noexcept { return {sizes_.data(), static_cast<std::size_t>(rank_)}; }
  dims strides() const noexcept { return {strides_.data(), static_cast<std::size_t>(rank_)}; }
  std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (int d = 0; d < rank_; ++d) n *= sizes_[static_cast<std::size_t>(d)];
    return n;
  }
  bool is_contiguous() const noexcept {
    std::int64_t expected = 1;
    for (int d = rank_ - 1; d >= 0; --d) {
      const auto i = static_cast<std::size_t>(d);
      if (sizes_[i] != 1 && strides_[i] != expected) return false;
      expected *= sizes_[i];
    }
    return true;
  }
  static constexpr const char* dtype_name() noexcept { return dtype_of<T>::name; }

  /// The elements. Shallow constness, like at::Tensor: a const handle still writes the data.
  T* data() const noexcept { return storage_->data(); }

  /// Same storage, new sizes (what aten::view does). Requires a contiguous tensor and the same
  /// number of elements.
  basic_tensor with_sizes(dims sizes) const {
    basic_tensor t = *this;
    t.set_contiguous(sizes);
    if (!is_contiguous() || t.numel() != numel())
      throw std::invalid_argument("view: shape is incompatible with the tensor's size");
    return t;
  }
  /// Same storage, the two dimensions of a matrix swapped (aten::t): a strided view.
  basic_tensor transposed() const {
    if (rank_ != 2) throw std::invalid_argument("t() expects a 2-D tensor");
    basic_tensor t = *this;
    std::swap(t.sizes_[0], t.sizes_[1]);
    std::swap(t.strides_[0], t.strides_[1]);
    return t;
  }

 private:
  void set_contiguous(dims sizes) {
    if (sizes.size() > static_cast<std::size_t>(max_rank))
      throw std::invalid_argument("tensor: at most 4 dimensions");
    rank_ = static_cast<int>(sizes.size());
    std::int64_t stride = 1;
    for (int d = rank_ - 1; d >= 0; --d) {
      const auto i = static_cast<std::size_t>(d);
      sizes_[i] = sizes[i];
      strides_[i] = stride;
      stride *= sizes[i];
    }
  }

  std::shared_ptr<storage> storage_;
  std::array<std::int64_t, max_rank> sizes_{};
  std::array<std::int64_t, max_rank> strides_{};
  int rank_ = 0;
};

using tensor = basic_tensor<float>;
using long_tensor = basic_tensor<std::int64_t>;

// ---- How operator inputs appear under record_shapes ("Input Dims", "Input type", ...) ----

/// A tensor input: its sizes, dtype and strides; an undefined tensor is None ("").
template <class T>
kinetoscope::arg arg_of(const basic_tensor<T>& t) {
  if (!t.defined()) return kinetoscope::arg::none();
  return kinetoscope::arg::tensor(t.sizes(), t.dtype_name(), t.strides());
}

/// An int[] argument such as `size` of aten::empty or `stride` of aten::conv2d ("ScalarList").
inline kinetoscope::arg int_list_arg(dims v) {
  using kinetoscope::arg;
  switch (v.size()) {
    case 0: return arg::int_list({});
    case 1: return arg::int_list({v[0]});
    case 2: return arg::int_list({v[0], v[1]});
    case 3: return arg::int_list({v[0], v[1], v[2]});
    case 4: return arg::int_list({v[0], v[1], v[2], v[3]});
    default: throw std::invalid_argument("int_list_arg: at most 4 values");
  }
}

/// An int argument ("Scalar"); spelled out because arg::scalar is overloaded for double.
inline kinetoscope::arg int_arg(std::int64_t v) { return kinetoscope::arg::scalar(v); }

}  // namespace cnn
