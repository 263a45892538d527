// SPDX-License-Identifier: BSD-3-Clause
// module_scope's recording path (begin/end), and the process-wide numbering of module instances
// applied at collection (finish_modules).
#include "kinetoscope/module_scope.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>

#include "entry_text.hpp"
#include "module_entry.hpp"

namespace kinetoscope {
namespace {

/// Call ids ("Python id") come from one process-wide counter: module calls are coarse, so an
/// uncontended atomic increment is cheap next to them, and ids stay unique across threads.
std::atomic<std::int64_t> g_next_call_id{1};

/// The innermost recorded scope open on this thread (its call id), 0 = none.
thread_local std::int64_t t_current_call = 0;

}  // namespace

void module_scope::begin(const char* static_path, std::string_view dynamic_path,
                         const char* type, std::int64_t params) {
  detail::thread_buffer* b = detail::buffer();
  static_path_ = static_path;
  dyn_path_ = nullptr;
  dyn_len_ = 0;
  if (static_path == nullptr) {
    dyn_len_ = static_cast<std::uint32_t>(std::min<std::size_t>(dynamic_path.size(), 1u << 20));
    dyn_path_ = new char[dyn_len_ + 1];
    std::memcpy(dyn_path_, dynamic_path.data(), dyn_len_);
  }
  type_ = type;
  params_ = params;
  call_id_ = g_next_call_id.fetch_add(1, std::memory_order_relaxed);
  parent_id_ = t_current_call;
  t_current_call = call_id_;
  buffer_ = b;
  start_ = detail::now_ticks();
}

void module_scope::end() noexcept {
  const std::uint64_t t = detail::now_ticks();
  buffer_ = nullptr;
  t_current_call = parent_id_;
  std::size_t size = sizeof(detail::module_entry);
  if (dyn_path_ != nullptr) size += detail::entry_text_size(dyn_len_);
  // The thread that began the scope ends it (the type is neither movable nor copyable).
  detail::thread_buffer* here = detail::buffer();
  std::byte* p = here->reserve(size);
  auto* e = reinterpret_cast<detail::module_entry*>(p);
  e->h = detail::entry_header{detail::entry_type::module, 0, 0, 0, static_cast<std::uint32_t>(size)};
  e->start = start_;
  e->end = t;
  e->path = dyn_path_ != nullptr ? nullptr : static_path_;
  e->type = type_;
  e->params = params_;
  e->call_id = call_id_;
  e->parent_id = parent_id_;
  if (dyn_path_ != nullptr) {
    detail::put_entry_text(p + sizeof(detail::module_entry), dyn_path_, dyn_len_);
    delete[] dyn_path_;
    dyn_path_ = nullptr;
  }
  here->commit(size);
}

namespace detail {
namespace {

/// Module instances seen by this process: (type, path) -> (module id, instance number).
class instance_registry {
 public:
  std::pair<std::int64_t, std::int32_t> lookup(const std::string& type, const std::string& path) {
    std::lock_guard lock(mutex_);
    auto [it, inserted] = ids_.try_emplace({type, path}, 0, 0);
    if (inserted) {
      it->second.first = static_cast<std::int64_t>(ids_.size());
      it->second.second = per_type_[type]++;
    }
    return it->second;
  }

 private:
  std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::pair<std::int64_t, std::int32_t>> ids_;
  std::map<std::string, std::int32_t> per_type_;
};

instance_registry& registry() {
  static instance_registry* r = new instance_registry();  // never destroyed: see recorder.cpp
  return *r;
}

}  // namespace

void finish_modules(trace_data& data) {
  std::sort(data.modules.begin(), data.modules.end(),
            [](const module_event& a, const module_event& b) {
              if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
              if (a.end_ns != b.end_ns) return a.end_ns > b.end_ns;
              return a.call_id < b.call_id;
            });
  std::unordered_set<std::int64_t> calls;
  for (const module_event& m : data.modules) calls.insert(m.call_id);
  for (module_event& m : data.modules) {
    if (m.parent_call_id != 0 && !calls.contains(m.parent_call_id)) m.parent_call_id = 0;
    // In start order, so instance numbers follow the order in which instances first ran.
    const auto [id, k] = registry().lookup(data.strings[m.type], data.strings[m.path]);
    m.module_id = id;
    m.instance = k;
  }
}

}  // namespace detail
}  // namespace kinetoscope
