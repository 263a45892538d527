// SPDX-License-Identifier: BSD-3-Clause
#include "collector.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>

#include "entry_text.hpp"
#include "kinetoscope/key_averages.hpp"
#include "module_entry.hpp"
#include "op_inputs.hpp"
#include "registry.hpp"
#include "stacks.hpp"

namespace kinetoscope::detail {
namespace {

struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

class interner {
 public:
  explicit interner(std::vector<std::string>& strings) : strings_(strings) {
    if (strings_.empty()) strings_.emplace_back();
    for (std::size_t i = 0; i < strings_.size(); ++i)
      by_text_.emplace(strings_[i], static_cast<std::uint32_t>(i));
  }
  std::uint32_t text(std::string_view s) {
    auto it = by_text_.find(s);
    if (it != by_text_.end()) return it->second;
    const auto id = static_cast<std::uint32_t>(strings_.size());
    strings_.emplace_back(s);
    by_text_.emplace(strings_.back(), id);
    return id;
  }
  /// Static names are interned by pointer first: one hash of a pointer per event.
  std::uint32_t literal(const char* s) {
    auto it = by_pointer_.find(s);
    if (it != by_pointer_.end()) return it->second;
    const std::uint32_t id = text(s);
    by_pointer_.emplace(s, id);
    return id;
  }

 private:
  std::vector<std::string>& strings_;
  std::unordered_map<std::string, std::uint32_t, string_hash, std::equal_to<>> by_text_;
  std::unordered_map<const char*, std::uint32_t> by_pointer_;
};

std::string read_process_name() {
  std::ifstream in("/proc/self/comm");
  std::string name;
  if (in) std::getline(in, name);
  return name.empty() ? "kinetoscope" : name;
}

// Sorts by (start ascending, end descending, External id): parents before their children. The
// sort moves 24-byte keys and gathers once; sorting the 88-byte events directly cost 3x more.
void sort_events(std::vector<cpu_event>& events) {
  struct key {
    std::int64_t start;
    std::int64_t end;
    std::int64_t id;
    std::size_t index;
  };
  std::vector<key> keys(events.size());
  for (std::size_t i = 0; i < events.size(); ++i)
    keys[i] = key{events[i].start_ns, events[i].end_ns, events[i].external_id, i};
  std::sort(keys.begin(), keys.end(), [](const key& a, const key& b) {
    if (a.start != b.start) return a.start < b.start;
    if (a.end != b.end) return a.end > b.end;
    return a.id < b.id;
  });
  std::vector<cpu_event> sorted;
  sorted.reserve(events.size());
  for (const key& k : keys) sorted.push_back(events[k.index]);
  events.swap(sorted);
}

struct pending_inputs {
  std::uint32_t first = 0;
  std::uint32_t count = 0;
};

}  // namespace

trace_data collect_window(const window_bounds& window, const tick_converter& clock, bool with_flops) {
  trace_data out;
  interner names(out.strings);
  std::unordered_map<std::int64_t, pending_inputs> inputs_by_id;
  stack_joiner stacks;
  std::map<std::int64_t, std::string> thread_names;
  const auto inside = [&](std::uint64_t a, std::uint64_t b) {
    return a >= window.start_tick && b <= window.end_tick && a <= b;
  };
  // Entries arrive thread by thread: remember each thread's name once, not per event.
  std::int64_t last_tid = -1;
  const auto note_thread = [&](std::int64_t tid, const char* thread_name) {
    if (tid == last_tid) return;
    last_tid = tid;
    thread_names.try_emplace(tid, thread_name);
  };

  drain_all([&](std::int64_t tid, const char* thread_name, const entry_header* h) {
    switch (h->type) {
      case entry_type::range: {
        const auto* e = reinterpret_cast<const range_entry*>(h);
        if (!inside(e->start, e->end)) return;
        cpu_event ev;
        ev.start_ns = clock.to_unix_ns(e->start);
        ev.end_ns = clock.to_unix_ns(e->end);
        ev.tid = tid;
        ev.end_tid = tid;
        ev.category = static_cast<cpu_category>(h->category);
        ev.external_id = e->external_id;
        const auto* q = reinterpret_cast<const std::byte*>(e + 1);
        if (h->flags & range_flag_sequence) {
          std::memcpy(&ev.sequence_nr, q, 8);
          std::memcpy(&ev.fwd_thread_id, q + 8, 8);
          q += 16;
        }
        if (h->flags & range_flag_async) {
          std::memcpy(&ev.tid, q, 8);  // recorded on the ending thread; began on this one
          q += 8;
        }
        if (h->flags & range_flag_dynamic_name) {
          ev.name = names.text(get_entry_text(q));
        } else {
          ev.name = names.literal(e->static_name);
        }
        out.events.push_back(ev);
        note_thread(tid, thread_name);
        break;
      }
      case entry_type::inputs: {
        const auto first = static_cast<std::uint32_t>(out.inputs.size());
        const std::int64_t id = decode_inputs(h, out.inputs);
        inputs_by_id[id] = pending_inputs{first, static_cast<std::uint32_t>(out.inputs.size() - first)};
        break;
      }
      case entry_type::stack:
        stacks.add(reinterpret_cast<const stack_entry*>(h));
        break;
      case entry_type::memory: {
        const auto* e = reinterpret_cast<const memory_entry*>(h);
        if (!inside(e->tick, e->tick)) return;
        memory_event m;
        m.time_ns = clock.to_unix_ns(e->tick);
        m.tid = tid;
        m.addr = e->addr;
        m.bytes = e->bytes;
        m.total_allocated = e->total_allocated;
        m.total_reserved = e->total_reserved;
        m.device = static_cast<device_type>(e->device_type);
        m.device_id = e->device_id;
        out.memory.push_back(m);
        note_thread(tid, thread_name);
        break;
      }
      case entry_type::module: {
        const auto* e = reinterpret_cast<const module_entry*>(h);
        if (!inside(e->start, e->end)) return;
        module_event m;
        m.start_ns = clock.to_unix_ns(e->start);
        m.end_ns = clock.to_unix_ns(e->end);
        m.tid = tid;
        m.path = e->path != nullptr ? names.literal(e->path)
                                    : names.text(get_entry_text(reinterpret_cast<const std::byte*>(e + 1)));
        m.type = names.literal(e->type);
        m.params = e->params;
        m.call_id = e->call_id;
        m.parent_call_id = e->parent_id;
        out.modules.push_back(m);
        note_thread(tid, thread_name);
        break;
      }
    }
  });

  for (cpu_event& ev : out.events) {
    if (inputs_by_id.empty()) break;
    auto it = inputs_by_id.find(ev.external_id);
    if (it != inputs_by_id.end()) {
      ev.first_input = it->second.first;
      ev.input_count = it->second.count;
    }
    if (with_flops && ev.input_count > 0)
      ev.flops = compute_flops(out.strings[ev.name], out.inputs.data() + ev.first_input, ev.input_count);
  }
  stacks.attach(out, [&](std::string_view text) { return names.text(text); });
  sort_events(out.events);
  finish_modules(out);
  std::stable_sort(out.memory.begin(), out.memory.end(),
                   [](const memory_event& a, const memory_event& b) { return a.time_ns < b.time_ns; });

  out.start_ns = clock.to_unix_ns(window.start_tick);
  out.end_ns = clock.to_unix_ns(window.end_tick);
  out.pid = static_cast<std::int64_t>(::getpid());
  out.process_name = read_process_name();
  for (const auto& [tid, name] : thread_names)
    out.threads.push_back(thread_info{tid, name.empty() ? out.process_name : name});
  return out;
}

void append_window(trace_data& into, const trace_data& from) {
  if (into.strings.empty()) into.strings.emplace_back();
  interner names(into.strings);
  const auto input_base = static_cast<std::uint32_t>(into.inputs.size());
  into.inputs.insert(into.inputs.end(), from.inputs.begin(), from.inputs.end());
  const auto frame_base = static_cast<std::uint32_t>(into.frames.size());
  for (const std::uint32_t f : from.frames) into.frames.push_back(names.text(from.strings[f]));
  for (cpu_event ev : from.events) {
    ev.name = names.text(from.strings[ev.name]);
    ev.first_input += input_base;
    ev.first_frame += frame_base;
    into.events.push_back(ev);
  }
  into.memory.insert(into.memory.end(), from.memory.begin(), from.memory.end());
  for (module_event m : from.modules) {
    m.path = names.text(from.strings[m.path]);
    m.type = names.text(from.strings[m.type]);
    into.modules.push_back(m);
  }
  for (gpu_activity g : from.gpu) {
    g.name = names.text(from.strings[g.name]);
    into.gpu.push_back(g);
  }
  for (runtime_call r : from.runtime) {
    r.name = names.text(from.strings[r.name]);
    into.runtime.push_back(r);
  }
  for (const thread_info& t : from.threads) {
    const bool known = std::any_of(into.threads.begin(), into.threads.end(),
                                   [&](const thread_info& x) { return x.tid == t.tid; });
    if (!known) into.threads.push_back(t);
  }
  if (into.start_ns == 0 || from.start_ns < into.start_ns) into.start_ns = from.start_ns;
  into.end_ns = std::max(into.end_ns, from.end_ns);
  into.pid = from.pid;
  into.process_name = from.process_name;
  into.devices = from.devices;
  into.record_shapes = from.record_shapes;
  into.profile_memory = from.profile_memory;
  into.with_stack = from.with_stack;
  into.with_flops = from.with_flops;
  into.with_modules = from.with_modules;
  into.cuda_enabled = from.cuda_enabled;
  into.distributed = from.distributed;
  into.metadata = from.metadata;
}

}  // namespace kinetoscope::detail
