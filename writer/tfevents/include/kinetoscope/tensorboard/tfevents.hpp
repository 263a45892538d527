// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file tensorboard/tfevents.hpp
/// TensorBoard event files ("tfevents"): a scalar writer and a reader
/// (docs/tensorboard-files.md). Records are TFRecord-framed serialized `Event` protos.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace kinetoscope {

/**
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78). `crc` is a previous result to
 * continue from (0 to start), so crc32c(b, nb, crc32c(a, na)) == crc32c(a+b).
 *
 * **Example**: `kinetoscope::crc32c("123456789", 9) == 0xE3069283`
 */
std::uint32_t crc32c(const void* data, std::size_t n, std::uint32_t crc = 0);

/**
 * The masked CRC-32C stored in TFRecord framing:
 * `((crc >> 15) | (crc << 17)) + 0xA282EAD8`.
 *
 * **Example**: `std::uint32_t m = kinetoscope::masked_crc32c(payload.data(), payload.size());`
 */
std::uint32_t masked_crc32c(const void* data, std::size_t n);

/**
 * One named scalar of a step. Tags group in the TensorBoard UI by '/'.
 *
 * **Example**: `kinetoscope::scalar_value{"profiler/step_time_ms", 12.5f}`
 */
struct scalar_value {
  std::string tag;
  float value = 0.0f;
};

/// Sentinel for "use the current time" in event_file_writer::add_scalars.
inline constexpr double wall_time_now = std::numeric_limits<double>::quiet_NaN();

/**
 * Appends scalar summaries to a new TensorBoard event file.
 *
 * The constructor creates `dir` (and parents) and the file
 * `events.out.tfevents.<10-digit unix s>.<hostname>.<pid>.<n><suffix>` (`n` = per-process
 * counter from 0) and writes the `file_version: "brain.Event:2"` record. Each record is
 * written with one write call; add_scalars() flushes, so a killed process leaves whole
 * records plus at most a truncated last record. Errors throw std::runtime_error
 * ("tfevents: <path>: <reason>"). Not thread-safe: use one writer per process and run.
 * Values are written in the legacy `simple_value` form (docs/tensorboard-files.md#step-scalars, 1).
 *
 * **Example**:
 * @code
 * kinetoscope::event_file_writer w("log/run1");
 * w.add_scalars(7, {{"profiler/step_time_ms", 123.5f}});
 * @endcode
 */
class event_file_writer {
 public:
  explicit event_file_writer(const std::string& dir, std::string suffix = "");
  event_file_writer(const event_file_writer&) = delete;
  event_file_writer& operator=(const event_file_writer&) = delete;
  ~event_file_writer();

  /// One `Event{wall_time, step, summary{value...}}` record, then flush. `wall_time` in
  /// seconds since the Unix epoch; NaN (the default) = now. Empty `values` writes nothing.
  void add_scalars(std::int64_t step, const std::vector<scalar_value>& values,
                   double wall_time = wall_time_now);
  /// Makes written records visible to readers. Records are written unbuffered with one
  /// write(2) each, so this is a no-op kept for API symmetry (it does not fsync).
  void flush();
  /// Full path of the event file.
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& payload);
  std::string path_;
  int fd_ = -1;
};

/// Encodes one TFRecord record around `payload`: length, masked length CRC, payload,
/// masked payload CRC (tensorboard-files.md#record-framing). **Example**: `auto rec =
/// tfrecord_frame(event_bytes);`
std::string tfrecord_frame(const std::string& payload);

/// Serialized `Event{wall_time, file_version}` payload (no framing).
/// **Example**: `tfrecord_frame(encode_file_version_event(1760500000.25))`
std::string encode_file_version_event(double wall_time,
                                      const std::string& version = "brain.Event:2");

/// Serialized `Event{wall_time, step, summary{value{tag, simple_value}...}}` payload.
/// **Example**: `encode_scalars_event(1760500001.25, 7, {{"Profiler/step_time_ms", 123.5f}})`
std::string encode_scalars_event(double wall_time, std::int64_t step,
                                 const std::vector<scalar_value>& values);

/// One point of a scalar series.
struct scalar_point {
  std::int64_t step = 0;
  double wall_time = 0.0;
  float value = 0.0f;
};

/// What read_event_file found.
struct event_file_contents {
  /// tag -> points in file order (both legacy simple_value and tensor-form scalars).
  std::map<std::string, std::vector<scalar_point>> scalars;
  std::uint64_t records = 0;                  ///< records with valid CRCs that parsed
  std::uint64_t skipped_other_summaries = 0;  ///< summary values that are not scalars
  std::uint64_t corrupt_records = 0;          ///< bad payload CRC or unparsable payload
  bool truncated_tail = false;                ///< file ends inside a record (still written)
  std::vector<std::string> errors;            ///< "offset N: reason" messages
  std::string file_version;                   ///< e.g. "brain.Event:2" when present
};

/**
 * Reads a whole event file. A bad length CRC stops reading (error with offset); a bad
 * payload CRC or unparsable payload skips that record (counted, reported, reading goes on);
 * a file ending inside a record sets truncated_tail without an error. Throws
 * std::runtime_error only when the file cannot be opened/read.
 *
 * **Example**:
 * @code
 * auto c = kinetoscope::read_event_file(w.path());
 * for (auto& p : c.scalars["profiler/step_time_ms"]) use(p.step, p.value);
 * @endcode
 */
event_file_contents read_event_file(const std::string& path);

/// Where an incremental read of a growing event file stands (read_event_file_from()).
struct event_file_cursor {
  std::uint64_t offset = 0;            ///< the first byte not consumed (a record boundary)
  std::set<std::string> scalar_tags;   ///< tensor-form tags announced so far
  bool stopped = false;                ///< a bad length CRC was met: nothing after it is read
  std::uint64_t need = 0;              ///< bytes of the record at `offset`, when it did not fit
};

/**
 * Reads the complete records after `cursor.offset` into `out` (merged with what it holds) and
 * advances the cursor; an incomplete last record is left for the next call. Reads at most about
 * `max_bytes` (in chunks of 16 MB; a record bigger than that is read whole), so a huge file is
 * taken in steps. A file shorter than the cursor (rewritten) is read again from the start.
 * Returns the bytes read. Throws std::runtime_error when the file cannot be opened or read.
 */
std::uint64_t read_event_file_from(const std::string& path, event_file_cursor& cursor, std::uint64_t max_bytes,
                                   event_file_contents& out);

/**
 * Event files under `logdir` (recursive; regular files whose basename contains "tfevents",
 * excluding names ending in ".profile-empty"); sorted by directory, then by name within a
 * directory. `logdir` may also be a single file. Missing logdir -> empty.
 *
 * **Example**: `for (auto& f : kinetoscope::find_event_files("log")) read_event_file(f);`
 */
std::vector<std::string> find_event_files(const std::string& logdir);

}  // namespace kinetoscope
