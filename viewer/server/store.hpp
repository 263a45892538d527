// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file store.hpp
/// The logdir as the server sees it: discovery (analysis/discovery.hpp) repeated every
/// reload interval, trace files loaded in the background (new and changed files reloaded,
/// removed ones dropped), each loaded profile kept with its op trees and views computed once.
/// A file that fails to load keeps its error for the UI and never stops the others.
/// Thread-safe: every public member may be called from any thread.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kinetoscope::server {

struct store_options {
  std::string logdir;
  /// Seconds between rescans of the logdir (tensorboard's --reload_interval); <= 0: scan once.
  double reload_interval_s = 30;
  /// Follow symlinks whose target lies outside the logdir (off: such files are listed as
  /// "skipped" with the reason, never read).
  bool follow_outside_symlinks = false;
};

/// Load progress over every file discovered so far.
struct load_progress {
  std::size_t files_total = 0, files_loaded = 0, files_failed = 0;
  std::uint64_t bytes_total = 0, bytes_loaded = 0;  ///< bytes of files finished (loaded or failed)
  bool loading = true;     ///< first scan not finished, or files queued/loading
  double percent() const;  ///< bytes_loaded / bytes_total * 100 (100 when nothing to load)
};

class store {
 public:
  explicit store(store_options options);
  ~store();  ///< stops the background threads
  store(const store&) = delete;
  store& operator=(const store&) = delete;

  /// Starts the first scan and background loading; returns at once.
  void start();
  /// Blocks until no file is queued or loading (tests, `--load_fast` style CLIs); false on timeout.
  bool wait_idle(std::chrono::milliseconds timeout) const;
  /// Rescans the logdir now (also done every reload interval).
  void rescan();

  const store_options& options() const noexcept;
  load_progress progress() const;

  struct impl;  ///< defined in store.cpp; api.cpp reaches the profiles through it
  impl& internals() const noexcept { return *impl_; }

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace kinetoscope::server
