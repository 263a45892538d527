// SPDX-License-Identifier: BSD-3-Clause
#include "analysis/model.hpp"

#include <algorithm>
#include <cstring>

namespace kinetoscope::analysis {

namespace {

inline std::uint64_t load_u64(const char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

__extension__ typedef unsigned __int128 u128;

inline std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  const u128 r = static_cast<u128>(a) * b;
  return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
}

/// A small multiply-mix string hash; four independent lanes for long strings (call stacks,
/// kernel names) so the multiplies overlap. Quality is plenty for an intern table.
std::uint64_t hash_bytes(std::string_view s) {
  constexpr std::uint64_t k0 = 0x9E3779B97F4A7C15ull;
  constexpr std::uint64_t k1 = 0xC2B2AE3D27D4EB4Full;
  constexpr std::uint64_t k2 = 0x165667B19E3779F9ull;
  constexpr std::uint64_t k3 = 0xD6E8FEB86659FD93ull;
  const char* p = s.data();
  std::size_t n = s.size();
  std::uint64_t h = k0 ^ (n * k1);
  if (n >= 32) {
    std::uint64_t a = h, b = h ^ k2, c = h ^ k3, d = h ^ k1;
    while (n >= 32) {
      a = mix(a ^ load_u64(p), k1);
      b = mix(b ^ load_u64(p + 8), k2);
      c = mix(c ^ load_u64(p + 16), k3);
      d = mix(d ^ load_u64(p + 24), k0);
      p += 32;
      n -= 32;
    }
    h = mix(a ^ mix(b, k0), mix(c, k2) ^ d);
  }
  while (n >= 8) {
    h = mix(h ^ load_u64(p), k1);
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    std::uint64_t tail = 0;
    std::memcpy(&tail, p, n);
    h = mix(h ^ tail ^ (std::uint64_t{n} << 59), k0);
  }
  return mix(h, k1);
}

}  // namespace

void trace_model::rebuild_index() {
  std::size_t size = 1024;
  while (size < (strings.size() + 1) * 2) size *= 2;
  std::vector<std::uint64_t> fresh(size, 0);
  const std::size_t mask = size - 1;
  for (std::size_t id = 0; id < strings.size(); ++id) {
    const std::uint64_t h = hash_bytes(strings[id]);
    std::size_t i = h & mask;
    while (fresh[i] != 0) i = (i + 1) & mask;
    fresh[i] = (h & 0xFFFFFFFF00000000ull) | (id + 1);
  }
  slots_ = std::move(fresh);
  indexed_ = strings.size();
}

std::uint32_t trace_model::find_string(std::string_view s) const {
  if (s.empty()) return strings.empty() ? no_index : 0;
  // Strings added to `strings` by hand (not through intern) are not indexed yet: scan them.
  for (std::size_t id = std::min(indexed_, strings.size()); id < strings.size(); ++id) {
    if (strings[id] == s) return static_cast<std::uint32_t>(id);
  }
  if (slots_.empty()) return no_index;
  const std::uint64_t h = hash_bytes(s);
  const std::uint64_t tag = h & 0xFFFFFFFF00000000ull;
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = h & mask;; i = (i + 1) & mask) {
    const std::uint64_t slot = slots_[i];
    if (slot == 0) return no_index;
    if ((slot & 0xFFFFFFFF00000000ull) == tag) {
      const std::size_t id = (slot & 0xFFFFFFFFull) - 1;
      if (strings[id] == s) return static_cast<std::uint32_t>(id);
    }
  }
}

std::uint32_t trace_model::intern(std::string_view s) {
  if (strings.empty()) strings.emplace_back();
  if (s.empty()) return 0;
  // Rebuild when the table is missing, out of date (strings pushed by hand) or half full.
  if (indexed_ != strings.size() || (strings.size() + 1) * 2 > slots_.size()) rebuild_index();
  const std::uint64_t h = hash_bytes(s);
  const std::uint64_t tag = h & 0xFFFFFFFF00000000ull;
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = h & mask;
  for (;; i = (i + 1) & mask) {
    const std::uint64_t slot = slots_[i];
    if (slot == 0) break;
    if ((slot & 0xFFFFFFFF00000000ull) == tag) {
      const std::size_t id = (slot & 0xFFFFFFFFull) - 1;
      if (strings[id] == s) return static_cast<std::uint32_t>(id);
    }
  }
  const auto id = static_cast<std::uint32_t>(strings.size());
  strings.emplace_back(s);
  slots_[i] = tag | (std::uint64_t{id} + 1);
  indexed_ = strings.size();
  return id;
}

std::size_t trace_model::heap_bytes() const noexcept {
  const auto cap = [](const auto& v) {
    const std::size_t c = v.capacity() * sizeof(v[0]);
    return c < spare_kept_bytes ? c : v.size() * sizeof(v[0]);  // (see spare_kept_bytes)
  };
  std::size_t n = cap(strings) + cap(events) + cap(ops) + cap(kernels) + cap(memory) + cap(python) + cap(collectives) + cap(fwdbwd) + cap(track_metas) +
                  cap(devices) + cap(slots_);
  // Strings longer than the small-string buffer live on the heap (capacity + the terminator).
  for (const std::string& s : strings)
    if (s.capacity() > std::string().capacity()) n += s.capacity() + 1;
  return n;
}

std::string_view trace_model::id_text(std::int64_t id, bool is_string) const {
  if (!is_string) return {};
  const std::int64_t index = string_id_base - id;
  if (index < 0 || static_cast<std::uint64_t>(index) >= strings.size()) return {};
  return strings[static_cast<std::size_t>(index)];
}

}  // namespace kinetoscope::analysis
