// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file buffer_pool.hpp
/// The activity buffers handed to CUPTI.
///
/// CUPTI asks for a buffer from its own threads (and from ours, when a flush needs one) and
/// hands it back full. Full buffers are only queued here; they are parsed at the end of the
/// window, on the thread that stops the profile, because converting ticks to Unix ns needs
/// that window's clock calibration. Buffers are recycled, and the total is capped: past the
/// cap CUPTI gets no buffer and drops records (counted and reported), rather than the profiled
/// program running out of memory.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace kinetoscope::detail {

class buffer_pool {
 public:
  struct filled {
    std::uint8_t* data;
    std::size_t valid_bytes;
  };

  buffer_pool(std::size_t buffer_bytes, std::size_t max_buffers);

  /// A free buffer (8-byte aligned) of buffer_bytes(), or nullptr when max_buffers are in use.
  std::uint8_t* acquire();
  /// A buffer CUPTI returned with `valid_bytes` of records (0: returned unused).
  void complete(std::uint8_t* data, std::size_t valid_bytes);
  /// The completed buffers in completion order; the caller gives each back with release().
  std::vector<filled> take_completed();
  void release(std::uint8_t* data);

  std::size_t buffer_bytes() const noexcept { return buffer_bytes_; }
  /// Buffers refused since the last call (CUPTI dropped the records they would have held).
  std::size_t take_refused();
  /// Buffers allocated so far (free, with CUPTI, or queued).
  std::size_t allocated() const;

 private:
  const std::size_t buffer_bytes_;
  const std::size_t max_buffers_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<std::uint8_t[]>> owned_;
  std::vector<std::uint8_t*> free_;
  std::vector<filled> completed_;
  std::size_t refused_ = 0;
};

}  // namespace kinetoscope::detail
