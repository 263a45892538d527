// SPDX-License-Identifier: BSD-3-Clause
#include "op_inputs.hpp"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>

namespace kinetoscope::detail {
namespace {

// Layout: entry_header, int64 external_id, uint64 count, then per input:
//   u8 kind, u8 ndim, u16 dtype_len, u32 pad, int64 int_value, double float_value,
//   dtype bytes (padded to 8), int64 sizes[ndim], int64 strides[ndim] (tensors only).
struct input_head {
  std::uint8_t kind;
  std::uint8_t ndim;
  std::uint16_t dtype_len;
  std::uint32_t pad;
  std::int64_t int_value;
  double float_value;
};

std::size_t input_size(const arg& a, std::size_t dtype_len) {
  std::size_t n = sizeof(input_head) + align8(dtype_len) + 8u * a.ndim;
  if (a.k == arg::kind::tensor) n += 8u * a.ndim;
  return n;
}

std::string format_double(double v) {
  // Python's repr-like shortest form ("0.5", "1e-05"); integral values keep ".0"? PyTorch prints
  // Scalars through IValue formatting, which gives "0.5" and "1." style; we use shortest round-trip.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

}  // namespace

void push_inputs(thread_buffer* b, std::int64_t external_id, std::span<const arg> inputs) noexcept {
  std::size_t size = sizeof(entry_header) + 16;
  for (const arg& a : inputs) size += input_size(a, std::strlen(a.dtype) & 0xffff);
  std::byte* p = b->reserve(size);
  auto* h = reinterpret_cast<entry_header*>(p);
  *h = entry_header{entry_type::inputs, 0, 0, 0, static_cast<std::uint32_t>(size)};
  std::byte* q = p + sizeof(entry_header);
  const std::uint64_t count = inputs.size();
  std::memcpy(q, &external_id, 8);
  std::memcpy(q + 8, &count, 8);
  q += 16;
  for (const arg& a : inputs) {
    const std::size_t dtype_len = std::strlen(a.dtype) & 0xffff;
    input_head ih{static_cast<std::uint8_t>(a.k), a.ndim, static_cast<std::uint16_t>(dtype_len), 0,
                  a.int_value, a.float_value};
    std::memcpy(q, &ih, sizeof(ih));
    q += sizeof(ih);
    std::memcpy(q, a.dtype, dtype_len);
    q += align8(dtype_len);
    std::memcpy(q, a.sizes, 8u * a.ndim);
    q += 8u * a.ndim;
    if (a.k == arg::kind::tensor) {
      std::memcpy(q, a.strides, 8u * a.ndim);
      q += 8u * a.ndim;
    }
  }
  b->commit(size);
}

std::int64_t decode_inputs(const entry_header* e, std::vector<op_input>& out) {
  const auto* p = reinterpret_cast<const std::byte*>(e) + sizeof(entry_header);
  std::int64_t external_id = 0;
  std::uint64_t count = 0;
  std::memcpy(&external_id, p, 8);
  std::memcpy(&count, p + 8, 8);
  p += 16;
  for (std::uint64_t i = 0; i < count; ++i) {
    input_head ih{};
    std::memcpy(&ih, p, sizeof(ih));
    p += sizeof(ih);
    op_input in;
    in.type.assign(reinterpret_cast<const char*>(p), ih.dtype_len);
    p += align8(ih.dtype_len);
    std::vector<std::int64_t> first(ih.ndim);
    if (ih.ndim != 0) std::memcpy(first.data(), p, 8u * ih.ndim);  // data() may be null when empty
    p += 8u * ih.ndim;
    switch (static_cast<arg::kind>(ih.kind)) {
      case arg::kind::tensor:
        in.dims = std::move(first);
        in.strides.resize(ih.ndim);
        if (ih.ndim != 0) std::memcpy(in.strides.data(), p, 8u * ih.ndim);
        p += 8u * ih.ndim;
        break;
      case arg::kind::int_scalar:
        in.values = {ih.int_value};
        in.concrete = std::to_string(ih.int_value);
        break;
      case arg::kind::float_scalar:
        in.concrete = format_double(ih.float_value);
        break;
      case arg::kind::bool_scalar:
        in.values = {ih.int_value};
        in.concrete = ih.int_value ? "True" : "False";
        break;
      case arg::kind::int_list: {
        in.values = std::move(first);
        std::string s = "[";
        for (std::size_t k = 0; k < in.values.size(); ++k) {
          if (k) s += ", ";
          s += std::to_string(in.values[k]);
        }
        in.concrete = s + "]";
        break;
      }
      case arg::kind::none:
        break;
    }
    out.push_back(std::move(in));
  }
  return external_id;
}

}  // namespace kinetoscope::detail
