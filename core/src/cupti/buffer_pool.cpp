// SPDX-License-Identifier: BSD-3-Clause
#include "buffer_pool.hpp"

#include <utility>

namespace kinetoscope::detail {

buffer_pool::buffer_pool(std::size_t buffer_bytes, std::size_t max_buffers)
    : buffer_bytes_(buffer_bytes), max_buffers_(max_buffers) {}

std::uint8_t* buffer_pool::acquire() {
  std::lock_guard lock(mutex_);
  if (!free_.empty()) {
    std::uint8_t* b = free_.back();
    free_.pop_back();
    return b;
  }
  if (owned_.size() >= max_buffers_) {
    ++refused_;
    return nullptr;
  }
  // operator new[] aligns to __STDCPP_DEFAULT_NEW_ALIGNMENT__ (16), more than CUPTI's 8.
  owned_.push_back(std::make_unique_for_overwrite<std::uint8_t[]>(buffer_bytes_));
  return owned_.back().get();
}

void buffer_pool::complete(std::uint8_t* data, std::size_t valid_bytes) {
  if (data == nullptr) return;
  std::lock_guard lock(mutex_);
  if (valid_bytes == 0) {
    free_.push_back(data);
  } else {
    completed_.push_back({data, valid_bytes});
  }
}

std::vector<buffer_pool::filled> buffer_pool::take_completed() {
  std::lock_guard lock(mutex_);
  return std::exchange(completed_, {});
}

void buffer_pool::release(std::uint8_t* data) {
  std::lock_guard lock(mutex_);
  free_.push_back(data);
}

std::size_t buffer_pool::take_refused() {
  std::lock_guard lock(mutex_);
  return std::exchange(refused_, 0);
}

std::size_t buffer_pool::allocated() const {
  std::lock_guard lock(mutex_);
  return owned_.size();
}

}  // namespace kinetoscope::detail
