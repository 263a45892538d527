// SPDX-License-Identifier: BSD-3-Clause
#include "log.hpp"

#include <cstdio>
#include <mutex>
#include <string>

namespace kinetoscope {
namespace {
std::mutex g_log_mutex;
log_fn g_log_handler;  // empty: default stderr printer

void default_log(log_level level, std::string_view message) {
  const char* tag = level == log_level::error ? "error" : level == log_level::warning ? "warning" : "info";
  std::fprintf(stderr, "[kinetoscope] %s: %.*s\n", tag, static_cast<int>(message.size()), message.data());
}
}  // namespace

log_fn set_log_handler(log_fn handler) {
  std::lock_guard lock(g_log_mutex);
  log_fn previous = std::move(g_log_handler);
  g_log_handler = std::move(handler);
  return previous;
}

namespace detail {
void log(log_level level, std::string_view message) {
  log_fn handler;
  {
    std::lock_guard lock(g_log_mutex);
    handler = g_log_handler;
  }
  if (!handler) {
    default_log(level, message);
    return;
  }
  try {
    handler(level, message);
  } catch (...) {
    default_log(level, message);  // a throwing handler must not take the program down
  }
}
}  // namespace detail
}  // namespace kinetoscope
