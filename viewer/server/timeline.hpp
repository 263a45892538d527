// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file timeline.hpp
/// The trace timeline served by windows (http-api.md "Trace timeline"): built once per loaded
/// trace, it lays every duration event into tracks (CPU threads, GPU streams, others) and lanes
/// (nesting depth; overlapping GPU slices get extra lanes, nothing is dropped), then answers a
/// window [start, end] at `px` columns with at most ~20 000 slices, merging slices shorter than
/// a pixel. The browser never holds the whole trace.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/model.hpp"

namespace kinetoscope::server {

class timeline {
 public:
  /// Indexes `model` (which must outlive this object). O(n log n) in the events.
  explicit timeline(const analysis::trace_model& model);
  ~timeline();
  timeline(const timeline&) = delete;
  timeline& operator=(const timeline&) = delete;

  /// `/api/timeline/tracks` JSON.
  std::string tracks_json() const;
  /// `/api/timeline` JSON for [start_us, end_us] relative to t0 at `px` columns; `tracks`
  /// empty = all tracks, else only those ids. At most `max_slices` slices.
  std::string window_json(double start_us, double end_us, int px, const std::vector<int>& tracks = {},
                          std::size_t max_slices = 20000) const;
  /// `/api/timeline/event` JSON; nullopt for an unknown id.
  std::optional<std::string> event_json(std::uint32_t id) const;
  /// `/api/timeline/search` JSON.
  std::string search_json(std::string_view query, std::size_t limit) const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kinetoscope::server
