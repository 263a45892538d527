// SPDX-License-Identifier: BSD-3-Clause
// with_stack: capture on the recording thread (push_stack) and the join at collection time.
#define UNW_LOCAL_ONLY
#include "stacks.hpp"

#include <libunwind.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "symbolizer.hpp"

namespace kinetoscope::detail {

// Why libunwind's unw_backtrace: it walks .eh_frame unwind tables, which every Debian binary
// has, at ~10 ns per frame after its per-thread cache warms. A frame-pointer walk is faster but
// returns garbage or a single frame for code built without -fno-omit-frame-pointer (GCC's
// default at -O2), and glibc's backtrace() costs more per frame (see ARCHITECTURE.md).
[[gnu::noinline]] void push_stack(thread_buffer* b, std::int64_t id) noexcept {
  // The first address lies in this function itself; it is dropped with the other kinetoscope
  // frames at symbolization, and the result is cut to max_stack_depth frames.
  constexpr std::size_t slots = max_stack_depth + stack_capture_slack;
  std::byte* p = b->reserve(sizeof(stack_entry) + 8 * slots);
  auto* addrs = reinterpret_cast<void**>(p + sizeof(stack_entry));
  static_assert(sizeof(void*) == 8, "stack entries store 64-bit addresses");
  const int n = unw_backtrace(addrs, static_cast<int>(slots));
  const std::size_t count = n > 0 ? static_cast<std::size_t>(n) : 0;
  const std::size_t size = sizeof(stack_entry) + 8 * count;
  auto* e = reinterpret_cast<stack_entry*>(p);
  e->h = entry_header{entry_type::stack, 0, 0, 0, static_cast<std::uint32_t>(size)};
  e->external_id = id;
  e->count = count;
  b->commit(size);
}

void stack_joiner::add(const stack_entry* e) {
  const auto first = static_cast<std::uint32_t>(addresses_.size());
  const auto* a = reinterpret_cast<const std::byte*>(e + 1);
  for (std::uint64_t i = 0; i < e->count; ++i) {
    std::uint64_t pc = 0;
    std::memcpy(&pc, a + 8 * i, 8);
    addresses_.push_back(pc);
  }
  by_id_[e->external_id] = range{first, static_cast<std::uint32_t>(e->count)};
}

void stack_joiner::attach(trace_data& out,
                          const std::function<std::uint32_t(std::string_view)>& intern) const {
  if (by_id_.empty()) return;
  symbolizer& sym = symbolizer::instance();
  // Identical address sequences (the same call site reached the same way) share frames.
  std::unordered_map<std::string_view, range> by_sequence;
  std::vector<const source_frame*> frames;
  for (cpu_event& ev : out.events) {
    const auto it = by_id_.find(ev.external_id);
    if (it == by_id_.end() || it->second.count == 0) continue;
    const std::string_view key(reinterpret_cast<const char*>(addresses_.data() + it->second.first),
                               8 * std::size_t{it->second.count});
    auto [seq, inserted] = by_sequence.try_emplace(key);
    if (inserted) {
      frames.clear();
      for (std::uint32_t i = 0; i < it->second.count; ++i)
        for (const source_frame& f : sym.frames(addresses_[it->second.first + i])) frames.push_back(&f);
      std::size_t begin = 0, end = frames.size();
      while (begin < end && frames[begin]->own) ++begin;
      while (end > begin && frames[end - 1]->entry) --end;
      end = std::min(end, begin + max_stack_depth);
      seq->second.first = static_cast<std::uint32_t>(out.frames.size());
      seq->second.count = static_cast<std::uint32_t>(end - begin);
      for (std::size_t i = begin; i < end; ++i) out.frames.push_back(intern(frames[i]->text));
    }
    ev.first_frame = seq->second.first;
    ev.frame_count = seq->second.count;
  }
}

}  // namespace kinetoscope::detail
