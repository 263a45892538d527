// SPDX-License-Identifier: BSD-3-Clause
#pragma once
#include <string_view>

#include "kinetoscope/profiler.hpp"

namespace kinetoscope::detail {
/// Sends a message to the current log handler (thread-safe).
void log(log_level level, std::string_view message);
}  // namespace kinetoscope::detail
