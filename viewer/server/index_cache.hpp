// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file index_cache.hpp
/// The cache folder of persisted indexes as a whole (trace_index.hpp is one index): its size
/// budget, least-recently-used eviction, temporaries left by writers that died, and the
/// listing `kinetoscope cache` prints.
///
/// * **Budget.** The `.ksidx` files of a folder may sum to at most a budget: `--cache_max`, else
///   `$KINETOSCOPE_CACHE_MAX`, else 5 GiB or a tenth of the file system that holds the folder,
///   whichever is smaller (an index is about a fifth of its trace: a few 10 GB jobs fill 5 GiB).
///   0 means no limit. After each index it writes, a process evicts the least recently used
///   indexes until the folder fits, never one it is using (the file just written, the indexes
///   of the traces its server holds). "Used" is the file's modification time: writing sets it
///   and every successful read sets it again (mark_used()).
/// * **Temporaries.** An index is written to `<name>.ksidx.tmp.<pid>.<n>` and renamed into
///   place; a writer that was killed leaves its temporary behind. Each process that writes to
///   the folder (its first index_writer there) first removes the temporaries whose writer process no longer exists and that
///   are at least a minute old (the age guards against a pid already reused by a new writer,
///   and against writers on other machines of a shared folder, whose pids mean nothing here).
/// * **Small traces.** A trace under index_min_trace_bytes is not indexed: parsing it takes
///   about as long as reading its index, and its index file would cost a cache entry for
///   nothing (ARCHITECTURE.md, "The index cache", has the measurement).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kinetoscope::server {

/// 5 GiB: the default budget on a large disk.
inline constexpr std::uint64_t default_cache_max_bytes = std::uint64_t{5} << 30;
/// Traces smaller than this (1 MiB) get no index (see the file comment);
/// $KINETOSCOPE_INDEX_MIN_SIZE overrides it (a size; 0 indexes every trace).
inline constexpr std::uint64_t default_index_min_trace_bytes = std::uint64_t{1} << 20;

/// The budget for `cache_dir` when no --cache_max is given: $KINETOSCOPE_CACHE_MAX when it is
/// a valid size (K/M/G/T suffixes; 0 = no limit), else min(5 GiB, a tenth of the file system
/// holding the folder or its nearest existing parent). `why` says which.
std::uint64_t default_cache_max(const std::string& cache_dir, std::string* why = nullptr);
/// $KINETOSCOPE_INDEX_MIN_SIZE when it is a valid size, else default_index_min_trace_bytes.
std::uint64_t index_min_trace_bytes();

/// One index file of the folder.
struct cache_entry {
  std::string file;          ///< the .ksidx file
  std::string source;        ///< the trace it indexes ("span:..." for a span's); "" if unreadable
  std::uint64_t bytes = 0;   ///< its size on disk (st_size)
  std::int64_t used_ns = 0;  ///< last write or use (mtime), ns since the epoch
  /// "current" (the trace is there, unchanged, and the format is this one's), "stale" (the
  /// trace changed or is gone), "version" (another index format), "unreadable".
  std::string state;
};

/// The folder's indexes, most recently used first (files that are not `*.ksidx` are left out).
std::vector<cache_entry> list_cache(const std::string& cache_dir);

/// What prune_cache() and clear_cache() did.
struct prune_outcome {
  std::vector<cache_entry> removed;   ///< oldest use first
  std::uint64_t bytes_before = 0;     ///< of the .ksidx files
  std::uint64_t bytes_after = 0;
  std::size_t temporaries_removed = 0;
};

/// Removes the least recently used indexes until the .ksidx files sum to at most `max_bytes`
/// (0: no limit), never a file listed in `keep` (paths as index_file_path() gives them).
/// Removes stale temporaries first. Never throws; a file that vanished meanwhile (another
/// process pruned it) counts as removed by nobody.
prune_outcome prune_cache(const std::string& cache_dir, std::uint64_t max_bytes,
                          const std::vector<std::string>& keep = {});

/// Removes every index and every stale temporary of the folder (`kinetoscope cache clear`).
/// Temporaries of live writers stay.
prune_outcome clear_cache(const std::string& cache_dir);

/// Removes the folder's temporaries (`*.ksidx.tmp.<pid>.<n>`) whose process is gone and whose
/// modification time is at least `min_age` old; returns how many.
std::size_t remove_stale_temporaries(const std::string& cache_dir,
                                     std::chrono::seconds min_age = std::chrono::seconds(60));

/// remove_stale_temporaries(cache_dir) the first time this process asks for that folder, then
/// nothing (index_writer's constructor calls it: every writer of a folder, once per process).
void remove_stale_temporaries_once(const std::string& cache_dir);

/// The note of a trace that gets no index because it is under `min_bytes` ("skipped: ..."),
/// or nullopt when it is indexed; one wording for the server's /api/status and the CLI.
std::optional<std::string> small_trace_note(std::uint64_t trace_bytes, std::uint64_t min_bytes);

/// Sets the index file's modification time to now: it was just used (read).
void mark_used(const std::string& file) noexcept;

/// "1.5 GB"-style size for listings (powers of 1024, one decimal).
std::string human_bytes(std::uint64_t bytes);

}  // namespace kinetoscope::server
