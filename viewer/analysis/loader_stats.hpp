// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file loader_stats.hpp
/// Internal to the loader, for tests and benchmarks: which path loads took. Not part of the
/// analysis API.

#include <atomic>
#include <cstdint>

namespace kinetoscope::analysis::detail {

/// Loads that finished through the bounded-memory streaming path (text_stream); a load that
/// gave up on it and parsed the whole text instead does not count.
inline std::atomic<std::uint64_t> streamed_loads{0};

/// Streamed loads whose text was read by two readers at once (load_options::split_min_bytes).
inline std::atomic<std::uint64_t> split_loads{0};

}  // namespace kinetoscope::analysis::detail
