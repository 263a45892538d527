// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file discovery.hpp
/// Finds the trace files under a logdir and names their runs, workers and spans exactly as
/// torch-tb-profiler did (docs/plugin-rules.md#discovery,
/// docs/tensorboard-files.md#trace-file-names), plus files with other names whose content is a
/// trace (e.g. Accelerate's `profile_0.json`, HTA-style `rank0.json.gz`). Call discover() again to
/// see new runs and files (the server polls).
///
/// **Example**:
/// @code
/// for (const auto& f : kinetoscope::analysis::discover("/logs"))
///   std::cout << f.run << " " << f.worker << " span " << f.span << ": " << f.path << "\n";
/// @endcode

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kinetoscope::analysis {

/// One trace file of a logdir.
struct trace_file {
  std::string path;      ///< absolute path as walked (through directory symlinks)
  std::string run;       ///< run directory relative to the logdir ("a/b"); the logdir itself: its basename
  std::string worker;    ///< from the file name (see parse_trace_name), or the name without .json[.gz]
  std::string span;      ///< "1", "2", ... per (run, worker) in string order of raw_span; "default" without one
  std::string raw_span;  ///< the digits of the name's span group ("1623143089861"); "" when none
  std::uint64_t size = 0;      ///< bytes on disk
  std::int64_t mtime_ns = 0;   ///< modification time, ns since the Unix epoch
  /// Non-empty for a symlink that leads outside the logdir and is not followed: why it is not
  /// read (the target is neither named nor read; size and mtime are the link's own).
  std::string skipped;
};

/// How far discovery goes (discover_logdir()).
struct discover_options {
  /// Follow symlinks (to files and to directories) whose target lies outside the logdir. Off:
  /// a file symlink leading outside is listed with `skipped` set (when its name is a trace
  /// name), a directory symlink leading outside is not entered; both are noted.
  bool follow_outside_symlinks = false;
  int max_depth = 16;                    ///< directory levels below the logdir searched
  std::size_t max_entries = 1000000;     ///< directory entries looked at, in all
  std::chrono::milliseconds max_time{30000};  ///< wall time of one walk
};

/// What one walk found and what it could not do.
struct discover_result {
  std::vector<trace_file> files;  ///< as discover() returns them
  /// Human-readable notes, paths relative to the logdir: symlinks not followed, directories that
  /// could not be listed, depth or size limits reached. At most 100 (then a count).
  std::vector<std::string> notes;
  /// Directories (paths as walked, like trace_file::path) whose listing failed: files below them
  /// may exist although they are not in `files`.
  std::vector<std::string> unlisted_dirs;
  /// The errno of each unlisted directory's failure (same order).
  std::vector<int> unlisted_errors;
  /// False when a bound (entries, time) ended the walk early: `files` may lack some.
  bool complete = true;
};

/// The parts of a trace file name under the plugin's pattern
/// `^(.*?)(\.\d+)?\.pt\.trace\.json(\.gz)?$`.
struct trace_name {
  std::string worker;
  std::string raw_span;  ///< digits without the dot; "" when absent
  bool gzip_suffix = false;
};

/// Applies the plugin's pattern to a basename; nullopt when it does not match
/// (`x.pt.trace.json.tmp`, `rank0.json`, `w.12.pt.trace.json.gzip` do not).
std::optional<trace_name> parse_trace_name(std::string_view basename);

/// True when the file's content looks like a trace: after gunzip (by magic bytes) of its first
/// 64 KB, the first non-space byte is `{` and `"traceEvents"` occurs in those 64 KB, or it is
/// `[` followed by an object whose first key is "name" or "ph" (legacy bare array).
bool sniff_trace(const std::string& path);

/// Every trace file under `logdir` (recursive, following directory symlinks; a symlink back to
/// a directory on the current path is not followed, so loops end): files matching the plugin's pattern, plus `*.json` and
/// `*.json.gz` files that sniff_trace() accepts (worker = name without `.json[.gz]`, span
/// "default"). Files ending in `.tmp` (being written) and unreadable entries are skipped.
/// Sorted by (run, worker, raw_span), i.e. spans in numbering order. Empty if the logdir is
/// missing. Never throws. The command-line form: it follows symlinks wherever they lead (the
/// user named the folder), within discover_options' depth, entry and time bounds.
std::vector<trace_file> discover(const std::string& logdir);

/// discover() under `options` (the server's form: symlinks leaving the logdir are not followed
/// unless asked), with what the walk could not do. Never throws.
discover_result discover_logdir(const std::string& logdir, const discover_options& options);

/// One file on its own, as discover() would list it, except that `span` is "" when the name
/// has a span group (numbering needs the sibling files: call discover()). nullopt when the file
/// is not a trace, is a `.tmp`, or is not under `logdir`. Never throws.
std::optional<trace_file> classify(const std::string& path, const std::string& logdir);

}  // namespace kinetoscope::analysis
