// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Helpers shared by the core tests.
#include <algorithm>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kinetoscope/profiler.hpp"
#include "kinetoscope/trace_data.hpp"

namespace test_support {

/// Captures profiler log messages for the lifetime of the object.
struct log_capture {
  std::mutex mutex;
  std::vector<std::string> messages;
  kinetoscope::log_fn previous;
  log_capture() {
    previous = kinetoscope::set_log_handler([this](kinetoscope::log_level, std::string_view m) {
      std::lock_guard lock(mutex);
      messages.emplace_back(m);
    });
  }
  ~log_capture() { kinetoscope::set_log_handler(previous); }
  bool contains(std::string_view text) {
    std::lock_guard lock(mutex);
    return std::any_of(messages.begin(), messages.end(),
                       [&](const std::string& m) { return m.find(text) != std::string::npos; });
  }
};

inline std::size_t count_named(const kinetoscope::trace_data& d, std::string_view name) {
  return static_cast<std::size_t>(std::count_if(d.events.begin(), d.events.end(), [&](const auto& e) {
    return d.strings[e.name] == name;
  }));
}

inline const kinetoscope::cpu_event* find_named(const kinetoscope::trace_data& d, std::string_view name) {
  for (const auto& e : d.events)
    if (d.strings[e.name] == name) return &e;
  return nullptr;
}

inline std::vector<std::string> names_in_order(const kinetoscope::trace_data& d) {
  std::vector<std::string> out;
  for (const auto& e : d.events) out.push_back(d.strings[e.name]);
  return out;
}

}  // namespace test_support
