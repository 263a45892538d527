// SPDX-License-Identifier: BSD-3-Clause
// The slower forms of ranges: dynamic names, operators with inputs, async ends.
#include "kinetoscope/record_function.hpp"

#include <algorithm>
#include <cstring>

#include "op_inputs.hpp"

namespace kinetoscope {

void record_function::begin_dynamic(std::string_view name, std::uint8_t category) {
  const std::uint32_t flags = detail::g_flags.load(std::memory_order_relaxed);
  if ((flags & detail::flag_cpu) == 0) return;
  const auto len = static_cast<std::uint32_t>(std::min<std::size_t>(name.size(), 1u << 20));
  char* copy = len < sizeof(inline_name_) ? inline_name_ : new char[len];
  std::memcpy(copy, name.data(), len);
  begin_active(flags, nullptr, category, copy, len);
}

void record_function::end_slow(detail::thread_buffer* b, std::uint64_t t) noexcept {
  detail::thread_buffer* here = detail::buffer();
  if (here == b) b->current_external_id = parent_id_;
  // An end on another thread goes into that thread's queue, marked async with the begin thread.
  detail::push_range(here, category_, name_, dyn_name_, dyn_len_, start_, t, id_, sequence_nr_,
                     fwd_thread_id_, b->tid);
  if (dyn_name_ != nullptr && dyn_name_ != inline_name_) delete[] dyn_name_;
  dyn_name_ = nullptr;
}

record_op::record_op(std::string_view name, std::span<const arg> inputs, op_links links,
                     dynamic_tag) {
  begin_dynamic(name, cpu_op_);
  if (buffer_ != nullptr) finish_begin(inputs, links);
}

void record_op::finish_begin(std::span<const arg> inputs, op_links links) noexcept {
  sequence_nr_ = links.sequence_nr;
  fwd_thread_id_ = links.sequence_nr >= 0 ? links.fwd_thread_id : 0;
  if ((detail::g_flags.load(std::memory_order_relaxed) & detail::flag_shapes) == 0 || inputs.empty())
    return;
  detail::push_inputs(buffer_, id_, inputs);
}

// ---- arg factories -------------------------------------------------------------------------

namespace {
void fill_contiguous_strides(arg& a) {
  std::int64_t s = 1;
  for (int i = a.ndim - 1; i >= 0; --i) {
    a.strides[i] = s;
    s *= a.sizes[i] > 0 ? a.sizes[i] : 1;
  }
}
}  // namespace

arg arg::tensor(std::initializer_list<std::int64_t> sizes, const char* dtype) {
  return tensor(std::span<const std::int64_t>(sizes.begin(), sizes.size()), dtype);
}

arg arg::tensor(std::span<const std::int64_t> sizes, const char* dtype,
                std::span<const std::int64_t> strides) {
  arg a;
  a.k = kind::tensor;
  a.dtype = dtype != nullptr ? dtype : "";
  a.ndim = static_cast<std::uint8_t>(std::min(sizes.size(), max_dims));
  std::copy_n(sizes.begin(), a.ndim, a.sizes);
  if (strides.size() >= a.ndim && !strides.empty())
    std::copy_n(strides.begin(), a.ndim, a.strides);
  else
    fill_contiguous_strides(a);
  return a;
}

arg arg::scalar(std::int64_t v) {
  arg a;
  a.k = kind::int_scalar;
  a.dtype = "Scalar";
  a.int_value = v;
  return a;
}

arg arg::scalar(double v) {
  arg a;
  a.k = kind::float_scalar;
  a.dtype = "Scalar";
  a.float_value = v;
  return a;
}

arg arg::boolean(bool v) {
  arg a;
  a.k = kind::bool_scalar;
  a.dtype = "Scalar";
  a.int_value = v ? 1 : 0;
  return a;
}

arg arg::int_list(std::initializer_list<std::int64_t> values) {
  arg a;
  a.k = kind::int_list;
  a.dtype = "ScalarList";
  a.ndim = static_cast<std::uint8_t>(std::min(values.size(), max_dims));
  std::copy_n(values.begin(), a.ndim, a.sizes);
  return a;
}

arg arg::none() { return arg{}; }

}  // namespace kinetoscope
