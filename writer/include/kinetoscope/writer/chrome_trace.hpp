// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file writer/chrome_trace.hpp
/// The Kineto `.pt.trace.json` writer (era E, docs/trace-format.md, checklist #writer-checklist).

#include <cstddef>
#include <cstdint>
#include <string>

#include "kinetoscope/profiler.hpp"
#include "kinetoscope/trace_data.hpp"

namespace kinetoscope {

/// Where JSON text goes. write() may be called many times; finish() once at the end.
/// Errors are reported by throwing (the exception propagates out of write_chrome_trace).
class byte_sink {
 public:
  virtual ~byte_sink() = default;
  virtual void write(const char* data, std::size_t size) = 0;
  virtual void finish() {}
};

struct chrome_trace_options {
  /// Written as "traceName" (backslashes become '/'); "" writes the output path when known.
  std::string trace_name{};
};

/**
 * Streams `data` as one Kineto JSON object into `sink` (no DOM; a 1 MB buffer flushed to the
 * sink) and calls `sink.finish()` at the end. Times are written relative to base_time_ns() as
 * microseconds with three decimals; the output is always valid UTF-8 JSON (names are
 * sanitised, invalid UTF-8 becomes U+FFFD, non-finite numbers become 0, user metadata that is
 * not valid JSON is written as a string). One event per line.
 *
 * **Example**:
 * @code
 * kinetoscope::write_chrome_trace(prof.last_trace(), my_sink, {.trace_name =
 * "run1/w.pt.trace.json"});
 * @endcode
 */
void write_chrome_trace(const trace_data& data, byte_sink& sink,
                        const chrome_trace_options& options = {});

/// The same into a string (tests, small traces).
std::string chrome_trace_string(const trace_data& data, const chrome_trace_options& options = {});

/**
 * Writes `data` to `path`: gzip when the path ends in ".gz", written to "<path>.tmp" and renamed
 * at the end, so a reader never sees half a file. Creates missing parent directories.
 * Throws std::runtime_error("cannot write trace <path>: <reason>") on failure; no partial file
 * is left behind. `gzip_level` is zlib's compression level (0..9, -1 = zlib's default; values
 * outside are clamped) and only matters for ".gz" paths; level 1 is the fastest that still
 * compresses Kineto JSON about 15x. "traceName" is `path`.
 */
void write_chrome_trace_file(const trace_data& data, const std::string& path, int gzip_level = 1);

/**
 * `prof.export_chrome_trace(path)` of torch.profiler: writes the profile's last window
 * (`prof.last_trace()`) to `path` as write_chrome_trace_file() does (gzip when the path ends in
 * ".gz", atomic). Throws std::logic_error when no window has completed, std::runtime_error
 * with the path and reason when the file cannot be written. Found by argument-dependent
 * lookup: `export_chrome_trace(prof, "trace.pt.trace.json")`.
 */
void export_chrome_trace(const profile& prof, const std::string& path);

}  // namespace kinetoscope
