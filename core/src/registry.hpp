// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// The collector's side of the per-thread queues (see detail/recorder.hpp for the writer's side).

#include <cstdint>
#include <functional>
#include <string>

#include "kinetoscope/detail/recorder.hpp"

namespace kinetoscope::detail {

/// Called for every complete entry not yet consumed: (buffer's thread id, thread name, entry).
using entry_visitor = std::function<void(std::int64_t tid, const char* thread_name,
                                         const entry_header* entry)>;

/// Reads every committed entry of every thread queue once, then releases consumed chunks and
/// the queues of exited threads. Only one collector runs at a time (internally locked).
void drain_all(const entry_visitor& visit);

}  // namespace kinetoscope::detail
