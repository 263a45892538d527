// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// Run-time text inside a thread-queue entry (a dynamic range name, a run-time module path):
/// a u64 length, then the bytes, padded to 8. One definition for the writers (recorder.cpp,
/// module_scope.cpp) and the reader (collector.cpp).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "kinetoscope/detail/recorder.hpp"

namespace kinetoscope::detail {

/// Bytes a text of `len` bytes takes after the fixed part of an entry.
constexpr std::size_t entry_text_size(std::size_t len) noexcept { return 8 + align8(len); }

/// Writes the text at `q`, which has entry_text_size(len) bytes reserved.
inline void put_entry_text(std::byte* q, const char* text, std::size_t len) noexcept {
  const std::uint64_t n = len;
  std::memcpy(q, &n, 8);
  std::memcpy(q + 8, text, len);
}

/// The text written at `q` by put_entry_text.
inline std::string_view get_entry_text(const std::byte* q) noexcept {
  std::uint64_t n = 0;
  std::memcpy(&n, q, 8);
  return {reinterpret_cast<const char*>(q + 8), static_cast<std::size_t>(n)};
}

}  // namespace kinetoscope::detail
