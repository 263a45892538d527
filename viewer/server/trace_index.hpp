// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file trace_index.hpp
/// The persisted index of one trace file: what the viewer computed from it, kept in a cache
/// folder so that the next start reads it instead of parsing the JSON again.
///
/// One file per trace, `<cache_dir>/<16 hex digits of a hash of the absolute path>.ksidx`,
/// written atomically (a temporary file renamed into place), so a reader sees the old index,
/// the new one or none, never half of one. Layout (little-endian, docs in ARCHITECTURE.md):
///
///     header   magic "KSINDEX\0", format version, header bytes, source size, source mtime,
///              total file bytes, section count, source path length
///     path     the absolute path of the trace (the key; a hash collision is a miss)
///     table    per section: kind, offset, size, CRC-32
///     sections each aligned to 64 bytes: the summary (summary_to_bytes(): the per-file
///              summary the server keeps resident) and the model's columns (trace_model's vectors of
///              trivially copyable records, byte for byte; strings as offsets + one blob;
///              the rest as JSON), then the timeline's (timeline_columns: lanes, their
///              slices, levels of detail and counter points byte for byte, the rest as JSON)
///
/// Nothing in an index is trusted: a missing, short or over-long file, a foreign magic or
/// format version, a different source path, size or modification time, a section outside the
/// file, a CRC mismatch, or a record field out of range (string ids, side-table indexes, enum
/// and bool bytes) all make the index invalid, and the caller parses the trace instead (and
/// writes a fresh index). Reopening reads each column straight into its vector (one pread()
/// per column, no parsing but of the small summary and the model's few scalars); reading
/// rather than mapping means a file truncated behind our back gives a short read, not SIGBUS.
///
/// **Example**:
/// @code
/// const auto key = index_key_of("/logs/run/w.pt.trace.json");   // stat()s the trace
/// trace_index idx;
/// if (key && idx.open(index_file_path(cache, key->path), *key) == index_status::ok) {
///   file_summary summary = summary_from_bytes(idx.summary_bytes());
///   analysis::trace_model model;
///   if (idx.read_model(model)) use(model);
/// }
/// @endcode

#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/model.hpp"
#include "analysis/rules.hpp"
#include "server/timeline.hpp"

namespace kinetoscope::server {

/// Bumped whenever the layout, the model's records or what the summary holds (the views'
/// numbers) change: an index written by another version is rebuilt, never read. 5: op_args
/// and kernel_args reordered (32 and 112 bytes, were 40 and 152), every record's padding
/// written as zeros. 6: event::has_external_id (an absent id told from 0: quirk Q22). 7: the
/// views follow kinetoscope's rules by default (docs/kinetoscope-rules.md); the plugin's rules
/// have index files of their own (index_file_path's variant).
inline constexpr std::uint32_t index_format_version = 7;

/// What identifies the trace an index was made from.
struct index_key {
  std::string path;           ///< absolute, lexically normal
  std::uint64_t size = 0;     ///< bytes on disk
  std::int64_t mtime_ns = 0;  ///< modification time, ns since the epoch
};

/// The key of the trace at `path` as it is on disk now (nullopt: it cannot be stat()ed).
std::optional<index_key> index_key_of(const std::string& path);

/// `$XDG_CACHE_HOME/kinetoscope` when that variable holds an absolute path, else
/// `$HOME/.cache/kinetoscope`; empty when neither is set (no cache).
std::string default_cache_dir();

/// FNV-1a, 64 bits, of `bytes`, continuing from `h`: the names and keys of cache files (not a
/// security boundary: the header holds what was hashed).
inline constexpr std::uint64_t fnv1a_basis = 0xcbf29ce484222325ull;
std::uint64_t fnv1a(std::string_view bytes, std::uint64_t h = fnv1a_basis) noexcept;

/// Where the index of the trace `absolute_path` lies in `cache_dir`. `variant`: the views' rule
/// set when it is not the default one (rules_variant()): the index of each rule set is a file of
/// its own, so switching `--plugin_rules` on and off rebuilds nothing twice.
std::string index_file_path(const std::string& cache_dir, const std::string& absolute_path,
                            std::string_view variant = {});
/// "" for kinetoscope's rules (the default's file name, unchanged), else the rule set's name.
std::string_view rules_variant(analysis::rule_set rules) noexcept;

enum class index_status : std::uint8_t {
  ok,
  missing,     ///< no index file
  unreadable,  ///< the index exists but cannot be opened or mapped
  foreign,     ///< not an index (magic) or the index of another path
  version,     ///< written by another format version
  stale,       ///< the trace changed since (size or modification time)
  truncated,   ///< shorter (or longer) than its header says
  corrupt,     ///< a section outside the file, a checksum or a record out of range
};
/// The key an index file's header names (a trace's absolute path, or "span:..." for a span's
/// cache file) and its format version, read without checking the rest (`kinetoscope cache
/// list`); nullopt when the file is no index or its header is cut or inconsistent.
struct index_header_info {
  std::string source;
  std::uint32_t version = 0;
  std::uint64_t source_size = 0;
  std::int64_t source_mtime_ns = 0;
};
std::optional<index_header_info> read_index_header(const std::string& file);

/// "ok", "missing", "unreadable", "foreign", "version", "stale", "truncated", "corrupt".
std::string_view index_status_name(index_status s) noexcept;

/// Writes the index of `model` (and of its timeline `tl`, when not null) with `summary` into
/// `file` (creating its folder): a temporary file in the same folder, then rename(). Throws
/// std::runtime_error on failure (the old index, if any, is left as it was).
void write_index(const std::string& file, const index_key& key, std::string_view summary,
                 const analysis::trace_model& model, const timeline* tl = nullptr);

/// write_index() in two steps, so that the model's sections (most of the bytes: 1.9 GB for a
/// 10 GB trace) are written while the views are computed, and the summary, made from those
/// views, last. In the file the summary section comes after the model's (the reader goes by
/// the table, which the header holds and which is written at the end).
class index_writer {
 public:
  /// How the bytes reach the file. `page_cache`: ordinary writes (a process that may read the
  /// index soon, the server, finds it in memory). `direct`: the sections go through a second
  /// descriptor opened with O_DIRECT, in aligned blocks from one 8 MiB buffer, straight to the
  /// device (`kinetoscope index`: the index is read later, by another process). On a 10 GB
  /// trace that spares the kernel 2.2 GB of fresh page-cache pages and their copy while the
  /// views are computed. Where the file system refuses O_DIRECT (at open or at the first
  /// write) the writer goes on with ordinary writes; the file's bytes are the same either way.
  enum class io { page_cache, direct };
  /// Creates the temporary file beside `file` (and its folder). Throws std::runtime_error.
  index_writer(std::string file, index_key key, io mode = io::page_cache);
  /// Waits for a write in flight; removes the temporary file unless finish() succeeded.
  ~index_writer();
  index_writer(const index_writer&) = delete;
  index_writer& operator=(const index_writer&) = delete;

  /// Writes the timeline's sections (empty ones when `tl` is null) now (this thread). Optional:
  /// write_model() writes them when this was not called first. Once it returns, the caller no
  /// longer needs `tl` alive (`kinetoscope index` frees it then). Throws std::runtime_error.
  void write_timeline(const timeline* tl);
  /// Writes the model's sections, and those of its timeline `tl` (empty ones when null) unless
  /// write_timeline() wrote them, now (this thread). Throws std::runtime_error.
  void write_model(const analysis::trace_model& model, const timeline* tl = nullptr);
  /// write_model() on a thread of its own: `model` and `tl` must stay alive and unchanged until
  /// finish() or the destructor.
  void start(const analysis::trace_model& model, const timeline* tl = nullptr);
  /// As start(), taking the timeline: it is freed as soon as its sections are written, before
  /// the model's (`kinetoscope index`, whose profile never serves it: on a 10 GB trace that
  /// returns 0.4 GB while the views are computed). `model` must stay alive and unchanged until
  /// finish() or the destructor.
  void start(const analysis::trace_model& model, std::unique_ptr<const timeline> tl);
  /// After start() with a timeline: waits until that timeline is freed (its sections written,
  /// or their write failed, which finish() reports).
  void wait_timeline_freed() noexcept {
    if (timeline_freed_future_.valid()) timeline_freed_future_.wait();
  }
  /// Waits for start()'s write to end (its error, if any, is kept for finish()).
  void wait() noexcept {
    if (writing_.valid()) writing_.wait();
  }
  /// Whether the bytes written so far went through O_DIRECT (io::direct, accepted by the file
  /// system); for tests and the benchmark.
  bool wrote_direct() const noexcept { return out_.direct(); }
  /// Waits for the model's sections (write_model() or start() first), appends `summary`,
  /// writes the header and renames the file into place. Throws std::runtime_error (also the
  /// model write's error); the temporary file is then removed by the destructor.
  void finish(std::string_view summary);

 private:
  /// The file's bytes in order from offset 0 (see io). Direct: staged in an aligned buffer,
  /// each full buffer written with O_DIRECT; flush() writes the last partial block through the
  /// ordinary descriptor.
  class output {
   public:
    output() = default;
    ~output();
    output(const output&) = delete;
    output& operator=(const output&) = delete;
    /// Writes through `fd`, and through a second descriptor of `path` opened with O_DIRECT when
    /// `direct` and the file system accepts it.
    void open(int fd, const std::string& path, bool direct);
    std::uint64_t offset() const noexcept { return at_ + fill_; }
    bool direct() const noexcept { return used_direct_; }
    void write(const char* data, std::uint64_t bytes);
    void zeros(std::uint64_t bytes);
    /// Every byte given so far is in the file (or this threw); later writes are ordinary ones.
    void flush();

   private:
    /// Writes the first `bytes` staged (a multiple of the block size) directly, else through
    /// the ordinary descriptor once the file system refused a direct write.
    void drain(std::size_t bytes);
    void drain_ordinary();  ///< writes everything staged through the ordinary descriptor
    void stop_direct() noexcept;  ///< closes the direct descriptor, frees the buffer
    int fd_ = -1, direct_fd_ = -1;
    std::string path_;
    char* buf_ = nullptr;
    std::uint64_t at_ = 0;   ///< file offset of buf_[0] (direct) or of the next byte
    std::size_t fill_ = 0;   ///< bytes staged in buf_
    bool used_direct_ = false;
  };

  std::string file_, tmp_;
  index_key key_;
  int fd_ = -1;
  output out_;
  std::uint64_t header_bytes_ = 0;
  std::uint64_t end_ = 0;  ///< where the sections written so far end (aligned); 0 = none yet
  struct written {
    std::uint32_t kind = 0, crc = 0;
    std::uint64_t offset = 0, size = 0;
  };
  std::vector<written> table_;  ///< the model's sections as written
  std::future<void> writing_;
  bool model_written_ = false;
  bool timeline_written_ = false;
  std::unique_ptr<const timeline> owned_timeline_;  ///< start()'s, until its sections are written
  std::promise<void> timeline_freed_;
  std::future<void> timeline_freed_future_;
  /// Runs `write` on a thread of its own (writing_), or here when no thread can be had.
  template <class Write>
  void write_async(Write write);
  /// Writes `count` sections after those already written and notes them in table_.
  void write_sections(const std::string_view* parts, const std::uint32_t* kinds, std::size_t count);
  bool done_ = false;
};

/// One opened index (its descriptor, closed by the destructor).
class trace_index {
 public:
  trace_index() = default;
  ~trace_index();
  trace_index(const trace_index&) = delete;
  trace_index& operator=(const trace_index&) = delete;

  /// Opens `file` and checks the header against `key`, the section table and the summary's
  /// checksum (the model's sections are checked by read_model()).
  index_status open(const std::string& file, const index_key& key);
  /// Why open() or read_model() failed, in words.
  const std::string& error() const noexcept { return error_; }

  /// The summary section's bytes (read and checked by open()).
  const std::string& summary_bytes() const noexcept { return summary_; }
  /// Copies the model's columns into `model` after checking their checksums and every
  /// record's fields; false (error() says why, `model` unspecified) when the index is corrupt.
  bool read_model(analysis::trace_model& model);
  /// Copies the timeline's columns into `columns` after checking their checksums (the
  /// timeline's constructor checks their fields against the model). False when the trace had
  /// no timeline (error() empty) or the sections are corrupt (error() says why).
  bool read_timeline(timeline_columns& columns);
  /// Bytes of the index file.
  std::uint64_t file_bytes() const noexcept { return size_; }

 private:
  struct section {
    std::uint32_t kind = 0;
    std::uint64_t offset = 0, size = 0;
    std::uint32_t crc = 0;
  };
  const section* find(std::uint32_t kind) const noexcept;
  bool read_at(std::uint64_t offset, void* out, std::uint64_t bytes);
  template <class T>
  bool read_column(std::uint32_t kind, std::vector<T>& out);
  bool fail(std::string why);

  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::string error_;
  std::string summary_;
  std::vector<section> sections_;
};

}  // namespace kinetoscope::server
