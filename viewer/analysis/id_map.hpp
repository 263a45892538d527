// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file id_map.hpp
/// A hash map from 64-bit trace ids (correlation ids, external ids) to 32-bit indices, for the
/// joins of millions of events the op tree makes: open addressing with linear probing in one
/// flat array of 16-byte slots, sized for the expected number of keys, no erase. A
/// `std::unordered_map<std::int64_t, std::uint32_t>` spends a heap node per key (about 40 bytes
/// with its bucket) and a cache miss per step of a bucket chain; on a 10 GB trace (3.5 million
/// runtimes) the op tree's id maps took about 0.45 GB by their sizes, and a malloc per runtime.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace kinetoscope::analysis {

class id_map {
 public:
  /// The value no key can have (marks an empty slot).
  static constexpr std::uint32_t empty = std::numeric_limits<std::uint32_t>::max();

  /// Room for `expected` keys without growing (more are fine: the table doubles).
  explicit id_map(std::size_t expected = 0) { rehash(capacity_for(expected)); }

  /// The value of `key`, or nullptr.
  std::uint32_t* find(std::int64_t key) noexcept {
    for (std::size_t i = home(key);; i = next(i)) {
      slot& s = slots_[i];
      if (s.value == empty) return nullptr;
      if (s.key == key) return &s.value;
    }
  }
  /// The value of `key`, inserted as `value` when absent (`value` != empty); the bool says
  /// whether it was inserted.
  std::pair<std::uint32_t*, bool> try_emplace(std::int64_t key, std::uint32_t value) {
    if ((size_ + 1) * 8 > slots_.size() * 7) rehash(slots_.size() * 2);  // past 7/8: double
    for (std::size_t i = home(key);; i = next(i)) {
      slot& s = slots_[i];
      if (s.value == empty) {
        s.key = key;
        s.value = value;
        ++size_;
        return {&s.value, true};
      }
      if (s.key == key) return {&s.value, false};
    }
  }
  std::size_t size() const noexcept { return size_; }
  /// Heap bytes held.
  std::size_t heap_bytes() const noexcept { return slots_.capacity() * sizeof(slot); }

 private:
  struct slot {
    std::int64_t key = 0;
    std::uint32_t value = empty;
  };

  /// Keys at most 5/8 of the slots (linear probing stays short: about 1.8 slots looked at per
  /// lookup that misses).
  static std::size_t capacity_for(std::size_t keys) noexcept { return std::max<std::size_t>(16, keys / 5 * 8 + 8); }
  /// The key mixed (a per-process seed, so that a crafted trace cannot aim its ids at one slot;
  /// then a multiply and a shift-xor, which spread consecutive ids) and mapped onto the slots by
  /// a multiply-high, so the slot count need not be a power of two.
  std::size_t home(std::int64_t key) const noexcept {
    __extension__ typedef unsigned __int128 u128;
    std::uint64_t h = (static_cast<std::uint64_t>(key) ^ seed()) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    return static_cast<std::size_t>((static_cast<u128>(h) * slots_.size()) >> 64);
  }
  static std::uint64_t seed() noexcept {
    static const std::uint64_t s = [] {
      std::uint64_t v = 0x2545F4914F6CDD1Dull;
      try {
        std::random_device rd;
        v ^= (std::uint64_t{rd()} << 32) ^ rd();
      } catch (...) {
        // No entropy source: the fixed seed (ids stay spread, only less unpredictable).
      }
      return v;
    }();
    return s;
  }
  std::size_t next(std::size_t i) const noexcept { return i + 1 == slots_.size() ? 0 : i + 1; }
  void rehash(std::size_t capacity) {
    std::vector<slot> old(capacity);
    old.swap(slots_);
    size_ = 0;
    for (const slot& s : old)
      if (s.value != empty) try_emplace(s.key, s.value);
  }

  std::vector<slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace kinetoscope::analysis
