// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// The queue entry of a module scope (entry_type::module) and the process-wide numbering of
/// module instances. Internal to the core: written by module_scope.cpp, read by collector.cpp.

#include <cstdint>

#include "kinetoscope/detail/recorder.hpp"
#include "kinetoscope/trace_data.hpp"

namespace kinetoscope::detail {

/// Fixed part of a module entry (56 bytes). With a run-time path (`path == nullptr`) the path
/// follows as an entry text (entry_text.hpp).
struct module_entry {
  entry_header h;
  std::uint64_t start;
  std::uint64_t end;
  const char* path;  // static path, or nullptr when the bytes follow
  const char* type;  // static class name
  std::int64_t params;
  std::int64_t call_id;
  std::int64_t parent_id;  // enclosing scope's call id on the thread, 0 = none
};

/// Fills module_id and instance of every module of `data` from the process-wide registry of
/// instances keyed by (type, path): ids from 1 in order of first recording, and per type an
/// instance number from 0 — so a module keeps its name "nn.Module: <type>_<k>" and its
/// "Python module id" across windows and trace files. Also sorts the modules like the events
/// (start ascending, end descending, call id) and clears parent ids whose call is not in the
/// window (its scope began before the window or ended after it).
void finish_modules(trace_data& data);

}  // namespace kinetoscope::detail
