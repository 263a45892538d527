// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file loader.hpp
/// Loads one `.pt.trace.json[.gz]` file (any era, docs/trace-format.md#generations, or the legacy
/// bare array of docs/plugin-rules.md#memory-view) into a trace_model (model.hpp), following
/// #discovery, #event-categories.
///
/// * gzip is detected by its magic bytes (1f 8b), not by the file name; concatenated members
///   are accepted.
/// * Parsing uses simdjson On-Demand over windows of the `traceEvents` array (a few MB each), so
///   the peak memory is the decompressed text plus the model; the text is freed before return.
///   Texts of 16 MB and more are read (or inflated) on a second thread while the first parses
///   what has arrived. Measured (bench_loader, 2-core VM): ~750 MB/s on plain text, 1 GB in
///   about 1.4 s with peak RSS about 1.26x the text; gzip is bound by zlib (~370 MB/s of text).
///   Plain texts of 64 MB and more are split between two readers on machines with 2 hardware
///   threads or more (load_options::split_min_bytes).
/// * Events are stable-sorted by ts; strings are interned (trace_model::intern).
/// * Bad events degrade per event: wrong types, missing fields and out-of-range numbers become
///   defaults and are counted in `diagnostics.warnings` (the first messages are kept, with the
///   event index). Invalid UTF-8, raw control characters inside strings and bare `N/A` tokens
///   are repaired (one warning each) and the text parsed again, as the plugin's fallbacks do.
/// * Broken JSON (truncated file, syntax error), a wrong top-level shape, an unreadable file or
///   a corrupt gzip stream give a load_error instead; nothing is thrown out of these functions.
///
/// **Example**:
/// @code
/// auto r = kinetoscope::analysis::load_trace("run/worker0.1.pt.trace.json.gz");
/// if (!r.model) { std::cerr << r.error->message() << "\n"; return 1; }
/// const trace_model& m = *r.model;
/// @endcode

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "analysis/model.hpp"

namespace kinetoscope::analysis {

/// Why a file could not be loaded at all.
struct load_error {
  std::string file;                ///< the path (or the name given to load_trace_buffer)
  std::uint64_t byte_offset = 0;   ///< offset in the (decompressed) JSON text, or in the gzip
                                   ///< stream for gzip errors; 0 when not meaningful
  std::int64_t event_index = -1;   ///< index in traceEvents of the event being read, -1 = none
  std::string reason;              ///< e.g. "truncated gzip stream", "JSON syntax error: ..."
  /// The errno when opening or reading the file failed (EMFILE, EACCES, ...), else 0: callers
  /// retry transient ones (EMFILE, ENFILE, EAGAIN, ENOMEM, EINTR).
  int sys_errno = 0;
  /// "<file>: <reason> (at byte N, event #K)".
  std::string message() const;
};

/// Exactly one of `model` and `error` is set.
struct load_result {
  std::optional<trace_model> model;
  std::optional<load_error> error;
  bool ok() const noexcept { return model.has_value(); }
};

/// The default limit on a trace's JSON text (load_options::max_text_bytes): 16 GiB.
inline constexpr std::uint64_t default_max_text_bytes = std::uint64_t{16} << 30;

/// load_options::split_min_bytes's default: 64 MiB on machines with 2 hardware threads or more,
/// else 0 (never split). Measured with bench_loader on the 2-core VM the goals are measured on:
/// 1 GB in 0.81 s against 1.15 s (about 100 MB more peak RSS); `kinetoscope index` of 10 GB in
/// 18.7-19.4 s against 24.4-26.4 s; 1.5x faster on a 16-core host.
std::uint64_t default_split_min_bytes() noexcept;

/// Tuning knobs (tests use them to exercise both parse paths).
struct load_options {
  /// Size of the traceEvents windows handed to simdjson; 0 parses the whole text as one document
  /// (needs about 4 extra bytes of index per JSON token, and is limited to 4 GB). Any text the
  /// windows cannot handle (unusual layout, a syntax error) is parsed as one document anyway,
  /// which also gives the exact error position.
  std::size_t window_bytes = std::size_t{4} << 20;
  /// The largest JSON text accepted: a plain file's size, or a gzip file's size once inflated
  /// (counted while inflating, so a small file that inflates 1000x is refused when the count
  /// passes the limit, before that text is held). Refused files get the error "trace text larger
  /// than the limit of N bytes (--max_file_size)". The whole-text parse path needs about the
  /// text's size again in memory; the streamed one (big, well-formed files) a few MB.
  std::uint64_t max_text_bytes = default_max_text_bytes;
  /// When set, the load stores here how many bytes of the file (or buffer; compressed bytes for
  /// gzip) the parser has finished, so another thread can show progress during one big load.
  /// Updated once per chunk of the streamed path (4 windows of text, 16 MB by default), from 0 at
  /// the start; texts too small to stream (or a whole-text fallback) leave it at 0 until the end.
  /// The caller owns it; it is not set to the total at the end (the result says that).
  std::atomic<std::uint64_t>* progress_bytes = nullptr;
  /// Plain (not gzip) texts of at least this many bytes, read through the streamed path, are
  /// parsed by two readers at once: one reads the middle part of traceEvents while the other
  /// reads the rest, and the two models are merged into exactly the one a single reader gives
  /// (same string ids, same order, same warnings). 0 = never. Files whose layout does not allow
  /// it (a bare array, traceEvents starting after the middle, no event separator near the
  /// chosen points, a cut that falls inside a string) are read by one reader.
  std::uint64_t split_min_bytes = default_split_min_bytes();
};

/// Parses a size as the --max_file_size flags take it: a whole number of bytes with an optional
/// binary suffix K, M, G or T (KiB, MiB, ...; case-insensitive, a trailing "B"/"iB" allowed), e.g.
/// "16G", "512MiB", "1000000". nullopt when malformed or above 2^63.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);

/// Reads and parses the file at `path`. Never throws.
load_result load_trace(const std::string& path, const load_options& options = {});

/// Parses `bytes` (gzip or JSON text); `name` is used in messages. Never throws.
load_result load_trace_buffer(std::string_view bytes, const std::string& name,
                              const load_options& options = {});

/// Up to `max_bytes` of the decompressed text at the start of `path` (gunzipped when it starts
/// with the gzip magic); nullopt when the file cannot be read or its gzip header is invalid.
/// Used by discovery to sniff files whose names do not follow the trace pattern.
std::optional<std::string> read_text_head(const std::string& path, std::size_t max_bytes);

}  // namespace kinetoscope::analysis
