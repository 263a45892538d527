// SPDX-License-Identifier: BSD-3-Clause
/// @file trace_index.cpp
/// The persisted index (trace_index.hpp): writing, checking and reading back.
#include "server/trace_index.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <stdexcept>
#include <system_error>
#include <type_traits>

#include "nlohmann/json.hpp"
#include "server/device_json.hpp"
#include "server/index_cache.hpp"
#include "zlib.h"

namespace kinetoscope::server {
namespace {

namespace fs = std::filesystem;
namespace an = kinetoscope::analysis;

constexpr char magic[8] = {'K', 'S', 'I', 'N', 'D', 'E', 'X', '\0'};
constexpr std::uint64_t alignment = 64;
/// Bounds that no real index reaches; past them the header is corrupt, not big.
constexpr std::uint32_t max_sections = 64;
constexpr std::uint32_t max_path_bytes = 1 << 16;
constexpr std::uint64_t max_summary_bytes = std::uint64_t{1} << 30;

/// Section kinds. New kinds get new numbers; a reader ignores none (the version says what is there).
enum : std::uint32_t {
  s_summary = 1,
  s_string_offsets = 2,  ///< strings.size() + 1 uint64 offsets into the blob
  s_string_blob = 3,
  s_events = 4,
  s_ops = 5,
  s_kernels = 6,
  s_memory = 7,
  s_python = 8,
  s_fwdbwd = 9,
  s_track_metas = 10,
  s_model_misc = 11,  ///< JSON: devices, distributed, flags, diagnostics
  s_collectives = 12,
  // The timeline (timeline_columns; all empty when the trace has none).
  s_tl_meta = 13,
  s_tl_lanes = 14,
  s_tl_lane_events = 15,
  s_tl_levels = 16,
  s_tl_items = 17,
  s_tl_counter_ts = 18,
  s_tl_counter_values = 19,
};

#pragma pack(push, 1)
struct file_header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t header_bytes;  ///< this struct + path + table
  std::uint64_t source_size;
  std::int64_t source_mtime_ns;
  std::uint64_t total_bytes;   ///< the whole index file
  std::uint32_t sections;
  std::uint32_t path_bytes;
};
struct table_entry {
  std::uint32_t kind;
  std::uint32_t crc;
  std::uint64_t offset;
  std::uint64_t size;
};
#pragma pack(pop)

std::uint32_t crc_of(const void* data, std::uint64_t bytes) {
  return static_cast<std::uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0), static_cast<const Bytef*>(data), static_cast<z_size_t>(bytes)));
}

std::uint64_t align_up(std::uint64_t v) { return (v + alignment - 1) / alignment * alignment; }

template <class T>
std::string_view column_bytes(const std::vector<T>& v) {
  static_assert(std::is_trivially_copyable_v<T>, "model columns are copied byte for byte");
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)};
}

/// The byte of a bool or enum field must be one of its values: anything else read as a bool
/// is undefined behaviour, so the raw bytes are checked before the record is used.
bool byte_at_most(const void* record, std::size_t offset, unsigned max) {
  unsigned char b = 0;
  std::memcpy(&b, static_cast<const unsigned char*>(record) + offset, 1);
  return b <= max;
}
#define KS_BOOL_OK(rec, type, field) byte_at_most(&(rec), offsetof(type, field), 1)

nlohmann::json model_misc(const an::trace_model& m) {
  nlohmann::json j;
  j["devices"] = devices_json(m.devices);
  if (m.distributed)
    j["distributed"] = {m.distributed->backend, m.distributed->rank, m.distributed->world_size};
  j["lightning"] = m.lightning;
  j["legacy_array"] = m.legacy_array;
  j["schema_version"] = m.schema_version;
  j["base_time_ns"] = m.base_time_ns;
  j["record_window_end_dropped"] = m.record_window_end_dropped;
  j["events_by_category"] = m.diagnostics.events_by_category;
  j["warnings"] = m.diagnostics.warnings;
  j["messages"] = m.diagnostics.messages;
  j["text_bytes"] = m.diagnostics.text_bytes;
  return j;
}

/// Throws (nlohmann::json::exception, std::runtime_error from json_int) on a wrong shape; the
/// caller reports it as corrupt.
void read_model_misc(const nlohmann::json& j, an::trace_model& m) {
  m.devices = devices_of(j.at("devices"));
  if (j.contains("distributed")) {
    const auto& d = j.at("distributed");
    m.distributed = an::distributed_meta{d.at(0).get<std::string>(), json_int<std::int64_t>(d.at(1)),
                                         json_int<std::int64_t>(d.at(2))};
  }
  m.lightning = j.at("lightning").get<bool>();
  m.legacy_array = j.at("legacy_array").get<bool>();
  m.schema_version = json_int<std::int64_t>(j.at("schema_version"));
  m.base_time_ns = json_int<std::int64_t>(j.at("base_time_ns"));
  m.record_window_end_dropped = j.at("record_window_end_dropped").get<bool>();
  m.diagnostics.events_by_category = json_int_map<std::uint64_t>(j.at("events_by_category"));
  m.diagnostics.warnings = json_int_map<std::uint64_t>(j.at("warnings"));
  m.diagnostics.messages = j.at("messages").get<std::vector<std::string>>();
  m.diagnostics.text_bytes = json_int<std::uint64_t>(j.at("text_bytes"));
}

/// Every field that indexes something, and every bool and enum byte, in range.
std::string check_model(const an::trace_model& m) {
  const std::size_t n_strings = m.strings.size();
  const auto string_ok = [&](std::uint32_t id) { return id < n_strings; };
  const auto encoded_ok = [&](std::int64_t v, bool is_string) {
    if (!is_string) return true;
    const std::int64_t id = an::string_id_base - v;
    return id >= 0 && static_cast<std::uint64_t>(id) < n_strings;
  };
  for (std::size_t i = 0; i < m.events.size(); ++i) {
    const an::event& e = m.events[i];
    if (!byte_at_most(&e, offsetof(an::event, type), static_cast<unsigned>(an::event_type::other)) ||
        !KS_BOOL_OK(e, an::event, gpu_annotation) || !KS_BOOL_OK(e, an::event, pid_is_string) ||
        !KS_BOOL_OK(e, an::event, tid_is_string) || !KS_BOOL_OK(e, an::event, has_external_id))
      return "event " + std::to_string(i) + ": a flag byte out of range";
    if (!string_ok(e.name) || !encoded_ok(e.pid, e.pid_is_string) || !encoded_ok(e.tid, e.tid_is_string))
      return "event " + std::to_string(i) + ": a string id out of range";
    // The loader's invariants the views rely on: finite times, sorted by start.
    if (!std::isfinite(e.ts) || !std::isfinite(e.dur) || (i > 0 && e.ts < m.events[i - 1].ts))
      return "event " + std::to_string(i) + ": a time out of order or not finite";
    std::size_t table = 0;
    bool optional = false;
    switch (e.type) {
      case an::event_type::op:
      case an::event_type::user_annotation:
      case an::event_type::python: table = m.ops.size(); optional = true; break;
      case an::event_type::kernel: table = m.kernels.size(); break;
      case an::event_type::python_function:
      case an::event_type::module: table = m.python.size(); break;
      case an::event_type::memory: table = m.memory.size(); break;
      default: optional = true; break;  // no side table: only no_index
    }
    if (!(e.extra == an::no_index ? optional : e.extra < table))
      return "event " + std::to_string(i) + ": a side-table index out of range";
  }
  const auto collective_ok = [&](std::uint32_t c) { return c == an::no_index || c < m.collectives.size(); };
  for (const an::op_args& a : m.ops)
    if (!string_ok(a.input_dims) || !string_ok(a.input_types) || !string_ok(a.call_stack) ||
        !collective_ok(a.collective))
      return "op args: an index out of range";
  for (const an::kernel_args& k : m.kernels)
    if (!collective_ok(k.collective)) return "kernel args: an index out of range";
  for (const an::collective_args& c : m.collectives)
    if (!string_ok(c.name) || !string_ok(c.dtype) || !string_ok(c.group_name) || !string_ok(c.group_desc) ||
        !string_ok(c.group_ranks))
      return "collective args: a string id out of range";
  for (const an::kernel_args& k : m.kernels)
    if (!KS_BOOL_OK(k, an::kernel_args, has_blocks_per_sm) || !KS_BOOL_OK(k, an::kernel_args, has_occupancy) ||
        !KS_BOOL_OK(k, an::kernel_args, has_grid) || !KS_BOOL_OK(k, an::kernel_args, has_block) ||
        !KS_BOOL_OK(k, an::kernel_args, has_registers) || !KS_BOOL_OK(k, an::kernel_args, has_shared_memory))
      return "kernel args: a flag byte out of range";
  for (const an::memory_args& a : m.memory)
    if (!KS_BOOL_OK(a, an::memory_args, has_addr)) return "memory args: a flag byte out of range";
  for (const an::flow_event& f : m.fwdbwd)
    if (!KS_BOOL_OK(f, an::flow_event, is_start)) return "flows: a flag byte out of range";
  for (const an::track_meta& t : m.track_metas)
    if (!KS_BOOL_OK(t, an::track_meta, pid_is_string) || !KS_BOOL_OK(t, an::track_meta, tid_is_string) ||
        !byte_at_most(&t, offsetof(an::track_meta, kind), static_cast<unsigned>(an::meta_kind::thread_sort_index)) ||
        !string_ok(t.text) || !encoded_ok(t.pid, t.pid_is_string) || !encoded_ok(t.tid, t.tid_is_string))
      return "track metadata: a field out of range";
  return {};
}

/// Writes all of `bytes` at file offset `at`.
void write_all_at(int fd, const char* data, std::uint64_t bytes, std::uint64_t at, const std::string& file) {
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd, data, static_cast<std::size_t>(std::min<std::uint64_t>(bytes, 1 << 30)),
                               static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("cannot write " + file + ": " + std::strerror(n < 0 ? errno : EIO));
    data += n;
    at += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::uint64_t>(n);
  }
}

/// index_writer::output's staging buffer: a multiple of the largest logical block size O_DIRECT
/// asks for (4 KiB), and of the 64-byte section alignment.
constexpr std::size_t direct_buffer_bytes = std::size_t{8} << 20;
constexpr std::size_t direct_block = 4096;

}  // namespace

std::optional<index_key> index_key_of(const std::string& path) {
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec).lexically_normal();
  if (ec) return std::nullopt;
  struct stat st {};
  if (::stat(abs.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  index_key k;
  k.path = abs.string();
  k.size = static_cast<std::uint64_t>(st.st_size);
  k.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return k;
}

std::string default_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return (fs::path(xdg) / "kinetoscope").string();
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0') return (fs::path(home) / ".cache" / "kinetoscope").string();
  return {};
}

std::uint64_t fnv1a(std::string_view bytes, std::uint64_t h) noexcept {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string index_file_path(const std::string& cache_dir, const std::string& absolute_path, std::string_view variant) {
  std::uint64_t h = fnv1a(absolute_path);  // a name (the header holds the whole path)
  if (!variant.empty()) h = fnv1a(variant, fnv1a(std::string_view("\0", 1), h));
  static const char hex[] = "0123456789abcdef";
  std::string name(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) name[static_cast<std::size_t>(i)] = hex[h & 15];
  return (fs::path(cache_dir) / (name + ".ksidx")).string();
}

std::string_view index_status_name(index_status s) noexcept {
  switch (s) {
    case index_status::ok: return "ok";
    case index_status::missing: return "missing";
    case index_status::unreadable: return "unreadable";
    case index_status::foreign: return "foreign";
    case index_status::version: return "version";
    case index_status::stale: return "stale";
    case index_status::truncated: return "truncated";
    case index_status::corrupt: return "corrupt";
  }
  return "unknown";
}

/// The model's sections' kinds, in the order write_model() writes them.
constexpr std::uint32_t model_kinds[] = {s_string_offsets, s_string_blob, s_events,      s_ops,
                                         s_kernels,        s_memory,      s_python,      s_fwdbwd,
                                         s_track_metas,    s_collectives, s_model_misc};
/// The timeline's sections' kinds, in the order write_timeline() writes them (before the
/// model's: the reader finds every section by its kind in the table, whatever its place).
constexpr std::uint32_t timeline_kinds[] = {s_tl_meta,   s_tl_lanes,      s_tl_lane_events, s_tl_levels,
                                            s_tl_items,  s_tl_counter_ts, s_tl_counter_values};
constexpr std::uint32_t section_count = 1 + std::size(model_kinds) + std::size(timeline_kinds);

index_writer::output::~output() {
  stop_direct();
}

void index_writer::output::stop_direct() noexcept {
  if (direct_fd_ >= 0) ::close(direct_fd_);
  direct_fd_ = -1;
  std::free(buf_);
  buf_ = nullptr;
}

void index_writer::output::open(int fd, const std::string& path, bool direct) {
  fd_ = fd;
  path_ = path;
  if (!direct) return;
  direct_fd_ = ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  if (direct_fd_ < 0) return;  // (EINVAL: no O_DIRECT on this file system)
  void* p = nullptr;
  if (::posix_memalign(&p, direct_block, direct_buffer_bytes) != 0) {
    stop_direct();
    return;
  }
  buf_ = static_cast<char*>(p);
}

void index_writer::output::drain(std::size_t bytes) {
  // A direct write that the file system refuses (EINVAL: an alignment it does not support) goes
  // through the ordinary descriptor, and so does everything after it (direct_fd_ closed).
  std::size_t done = 0;
  while (done < bytes && direct_fd_ >= 0) {
    const ssize_t n = ::pwrite(direct_fd_, buf_ + done, bytes - done, static_cast<off_t>(at_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL) {
      ::close(direct_fd_);
      direct_fd_ = -1;
      break;
    }
    if (n <= 0) throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(n < 0 ? errno : EIO));
    done += static_cast<std::size_t>(n);
    used_direct_ = true;
  }
  if (done < bytes) write_all_at(fd_, buf_ + done, bytes - done, at_ + done, path_);
  at_ += bytes;
  fill_ -= bytes;
  if (fill_ > 0) std::memmove(buf_, buf_ + bytes, fill_);
}

void index_writer::output::write(const char* data, std::uint64_t bytes) {
  while (bytes > 0 && direct_fd_ >= 0) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(bytes, direct_buffer_bytes - fill_));
    std::memcpy(buf_ + fill_, data, n);
    fill_ += n;
    data += n;
    bytes -= n;
    if (fill_ == direct_buffer_bytes) drain(fill_);
  }
  if (bytes == 0) return;
  stop_direct();  // (direct writes refused: drain() wrote all it had staged, the rest goes ordinary)
  write_all_at(fd_, data, bytes, at_, path_);
  at_ += bytes;
}

void index_writer::output::zeros(std::uint64_t bytes) {
  static const char none[4096] = {};
  while (bytes > 0) {
    const std::uint64_t n = std::min<std::uint64_t>(bytes, sizeof none);
    write(none, n);
    bytes -= n;
  }
}

void index_writer::output::flush() {
  if (buf_ == nullptr) return;
  // The whole blocks directly (when still allowed), the last partial one through the page cache.
  if (direct_fd_ >= 0) drain(fill_ / direct_block * direct_block);
  if (fill_ > 0) drain_ordinary();
  stop_direct();
}

void index_writer::output::drain_ordinary() {
  write_all_at(fd_, buf_, fill_, at_, path_);
  at_ += fill_;
  fill_ = 0;
}

index_writer::index_writer(std::string file, index_key key, io mode) : file_(std::move(file)), key_(std::move(key)) {
  header_bytes_ = sizeof(file_header) + key_.path.size() + section_count * sizeof(table_entry);
  std::error_code ec;
  fs::create_directories(fs::path(file_).parent_path(), ec);
  if (ec) throw std::runtime_error("cannot create " + fs::path(file_).parent_path().string() + ": " + ec.message());
  remove_stale_temporaries_once(fs::path(file_).parent_path().string());  // killed writers' (index_cache.hpp)
  static std::atomic<std::uint64_t> serial{0};  // two writers of one file in a process
  tmp_ = file_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(serial.fetch_add(1));
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot create " + tmp_ + ": " + std::strerror(errno));
  out_.open(fd_, tmp_, mode == io::direct);
}

index_writer::~index_writer() {
  if (writing_.valid()) writing_.wait();
  if (fd_ >= 0) ::close(fd_);
  if (!done_) ::unlink(tmp_.c_str());
}

void index_writer::write_sections(const std::string_view* parts, const std::uint32_t* kinds, std::size_t count) {
  // Each section at the next aligned offset after the last one written; the summary comes after
  // them all (finish()). Before the first: room for the header, zeros until finish().
  if (end_ == 0) out_.zeros(align_up(header_bytes_));
  for (std::size_t i = 0; i < count; ++i) {
    const std::string_view bytes = parts[i];
    const std::uint64_t at = out_.offset();
    table_.push_back({kinds[i], crc_of(bytes.data(), bytes.size()), at, bytes.size()});
    out_.write(bytes.data(), bytes.size());
    out_.zeros(align_up(at + bytes.size()) - at - bytes.size());
  }
  end_ = out_.offset();
}

void index_writer::write_timeline(const timeline* tl) {
  if (timeline_written_) throw std::logic_error("index_writer: the timeline's sections are written twice");
  static const timeline_columns none;
  const timeline_columns& t = tl != nullptr ? tl->columns() : none;
  const std::string_view parts[] = {
      t.meta,                     column_bytes(t.lanes),
      column_bytes(t.lane_events), column_bytes(t.levels),
      column_bytes(t.items),      column_bytes(t.counter_ts),
      column_bytes(t.counter_values),
  };
  static_assert(std::size(parts) == std::size(timeline_kinds));
  write_sections(parts, timeline_kinds, std::size(parts));
  timeline_written_ = true;
}

void index_writer::write_model(const an::trace_model& model, const timeline* tl) {
  if (!timeline_written_) write_timeline(tl);
  // The strings as offsets + one blob.
  std::vector<std::uint64_t> offsets;
  offsets.reserve(model.strings.size() + 1);
  std::string blob;
  {
    std::uint64_t total = 0;
    for (const std::string& s : model.strings) total += s.size();
    blob.reserve(total);
    offsets.push_back(0);
    for (const std::string& s : model.strings) {
      blob += s;
      offsets.push_back(blob.size());
    }
  }
  const std::string misc = model_misc(model).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const std::string_view parts[] = {
      column_bytes(offsets),      blob,
      column_bytes(model.events), column_bytes(model.ops),
      column_bytes(model.kernels), column_bytes(model.memory),
      column_bytes(model.python), column_bytes(model.fwdbwd),
      column_bytes(model.track_metas), column_bytes(model.collectives),
      misc,
  };
  static_assert(std::size(parts) == std::size(model_kinds));
  write_sections(parts, model_kinds, std::size(parts));
  model_written_ = true;
}

template <class Write>
void index_writer::write_async(Write write) {
  try {
    writing_ = std::async(std::launch::async, write);
  } catch (const std::system_error&) {
    write();  // no thread to be had (EAGAIN): write them now
  }
}

void index_writer::start(const an::trace_model& model, const timeline* tl) {
  write_async([this, &model, tl] { write_model(model, tl); });
}

void index_writer::start(const an::trace_model& model, std::unique_ptr<const timeline> tl) {
  owned_timeline_ = std::move(tl);
  timeline_freed_ = std::promise<void>();
  timeline_freed_future_ = timeline_freed_.get_future();
  const auto write = [this, &model] {
    try {
      write_timeline(owned_timeline_.get());
    } catch (...) {
      owned_timeline_.reset();
      timeline_freed_.set_value();
      throw;  // finish() reports it
    }
    owned_timeline_.reset();
    timeline_freed_.set_value();
    write_model(model);
  };
  write_async(write);
}

void index_writer::finish(std::string_view summary) {
  if (fd_ < 0) throw std::logic_error("index_writer::finish called twice");
  if (writing_.valid()) writing_.get();  // rethrows the model write's error
  if (!model_written_) throw std::logic_error("index_writer::finish before the model's sections");
  // (write_model() wrote the timeline's sections too, when write_timeline() had not.)
  file_header h{};
  std::memcpy(h.magic, magic, sizeof magic);
  h.version = index_format_version;
  h.source_size = key_.size;
  h.source_mtime_ns = key_.mtime_ns;
  h.sections = section_count;
  h.path_bytes = static_cast<std::uint32_t>(key_.path.size());
  h.header_bytes = static_cast<std::uint32_t>(header_bytes_);
  std::vector<table_entry> table;
  table.reserve(section_count);
  table.push_back({s_summary, crc_of(summary.data(), summary.size()), end_, summary.size()});
  for (const written& t : table_) table.push_back({t.kind, t.crc, t.offset, t.size});
  h.total_bytes = align_up(end_ + summary.size());
  out_.write(summary.data(), summary.size());
  out_.zeros(h.total_bytes - end_ - summary.size());
  out_.flush();
  // The header over the zeros before the first section, through the page cache (after the
  // direct writes: flush() has returned).
  std::string head(reinterpret_cast<const char*>(&h), sizeof h);
  head += key_.path;
  head.append(reinterpret_cast<const char*>(table.data()), table.size() * sizeof(table_entry));
  write_all_at(fd_, head.data(), head.size(), 0, tmp_);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw std::runtime_error("cannot write " + tmp_ + ": " + std::strerror(errno));
  if (::rename(tmp_.c_str(), file_.c_str()) != 0) {
    const int e = errno;
    throw std::runtime_error("cannot rename " + tmp_ + " to " + file_ + ": " + std::strerror(e));
  }
  done_ = true;
}

void write_index(const std::string& file, const index_key& key, std::string_view summary,
                 const an::trace_model& model, const timeline* tl) {
  index_writer w(file, key);
  w.write_model(model, tl);
  w.finish(summary);
}

trace_index::~trace_index() {
  if (fd_ >= 0) ::close(fd_);
}

bool trace_index::fail(std::string why) {
  error_ = std::move(why);
  return false;
}

bool trace_index::read_at(std::uint64_t offset, void* out, std::uint64_t bytes) {
  auto* p = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, static_cast<std::size_t>(std::min<std::uint64_t>(bytes, 1 << 30)),
                              static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(std::string("cannot read the index: ") + std::strerror(errno));
    if (n == 0) return fail("the index is shorter than its header says");
    p += n;
    offset += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::uint64_t>(n);
  }
  return true;
}

const trace_index::section* trace_index::find(std::uint32_t kind) const noexcept {
  for (const section& s : sections_)
    if (s.kind == kind) return &s;
  return nullptr;
}

std::optional<index_header_info> read_index_header(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  file_header h{};
  std::optional<index_header_info> out;
  if (::pread(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h) && std::memcmp(h.magic, magic, sizeof magic) == 0 &&
      h.path_bytes <= max_path_bytes) {
    std::string path(h.path_bytes, '\0');
    if (::pread(fd, path.data(), path.size(), sizeof h) == static_cast<ssize_t>(path.size()))
      out = index_header_info{std::move(path), h.version, h.source_size, h.source_mtime_ns};
  }
  ::close(fd);
  return out;
}

index_status trace_index::open(const std::string& file, const index_key& key) {
  if (fd_ >= 0) ::close(fd_);
  sections_.clear();
  summary_.clear();
  fd_ = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    const int e = errno;
    error_ = file + ": " + std::strerror(e);
    return e == ENOENT ? index_status::missing : index_status::unreadable;
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    error_ = file + ": not a regular file";
    return index_status::unreadable;
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
  file_header h{};
  if (size_ < sizeof h || !read_at(0, &h, sizeof h) || std::memcmp(h.magic, magic, sizeof magic) != 0) {
    error_ = "not a kinetoscope index";
    return size_ < sizeof h && size_ > 0 ? index_status::truncated : index_status::foreign;
  }
  if (h.version != index_format_version) {
    error_ = "written by index format " + std::to_string(h.version) + ", this is " +
             std::to_string(index_format_version);
    return index_status::version;
  }
  if (h.total_bytes != size_) {
    error_ = "the index has " + std::to_string(size_) + " bytes, its header says " + std::to_string(h.total_bytes);
    return index_status::truncated;
  }
  if (h.path_bytes > max_path_bytes || h.sections > max_sections ||
      h.header_bytes != sizeof h + h.path_bytes + std::uint64_t{h.sections} * sizeof(table_entry) ||
      h.header_bytes > size_) {
    error_ = "the index header is inconsistent";
    return index_status::corrupt;
  }
  std::string path(h.path_bytes, '\0');
  if (!read_at(sizeof h, path.data(), path.size())) return index_status::truncated;
  if (path != key.path) {
    error_ = "the index belongs to another trace";
    return index_status::foreign;
  }
  if (h.source_size != key.size || h.source_mtime_ns != key.mtime_ns) {
    error_ = "the trace changed since it was indexed";
    return index_status::stale;
  }
  std::vector<table_entry> table(h.sections);
  if (!read_at(sizeof h + h.path_bytes, table.data(), table.size() * sizeof(table_entry))) return index_status::truncated;
  for (const table_entry& t : table) {
    if (t.offset < h.header_bytes || t.offset > size_ || t.size > size_ - t.offset) {
      error_ = "section " + std::to_string(t.kind) + " lies outside the index";
      return index_status::corrupt;
    }
    sections_.push_back({t.kind, t.offset, t.size, t.crc});
  }
  const section* s = find(s_summary);
  if (s == nullptr || s->size > max_summary_bytes) {
    error_ = "the index has no summary";
    return index_status::corrupt;
  }
  summary_.resize(s->size);
  if (!read_at(s->offset, summary_.data(), s->size)) return index_status::truncated;
  if (crc_of(summary_.data(), summary_.size()) != s->crc) {
    summary_.clear();
    error_ = "the summary's checksum does not match";
    return index_status::corrupt;
  }
  error_.clear();
  return index_status::ok;
}

template <class T>
bool trace_index::read_column(std::uint32_t kind, std::vector<T>& out) {
  static_assert(std::is_trivially_copyable_v<T>);
  const section* s = find(kind);
  if (s == nullptr) return fail("the index lacks section " + std::to_string(kind));
  if (s->size % sizeof(T) != 0) return fail("section " + std::to_string(kind) + " is not whole records");
  out.clear();
  out.shrink_to_fit();
  out.resize(s->size / sizeof(T));
  if (!read_at(s->offset, out.data(), s->size)) return false;
  if (crc_of(out.data(), s->size) != s->crc) return fail("section " + std::to_string(kind) + ": checksum mismatch");
  return true;
}

bool trace_index::read_model(an::trace_model& m) {
  if (fd_ < 0 || summary_.empty()) return fail("no index is open");
  std::vector<std::uint64_t> offsets;
  std::vector<char> blob;
  if (!read_column(s_string_offsets, offsets) || !read_column(s_string_blob, blob)) return false;
  if (offsets.empty() || offsets.front() != 0 || offsets.back() != blob.size())
    return fail("the string table is inconsistent");
  m.strings.clear();
  m.strings.reserve(offsets.size() - 1);
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
    if (offsets[i + 1] < offsets[i] || offsets[i + 1] > blob.size()) return fail("the string table is inconsistent");
    m.strings.emplace_back(blob.data() + offsets[i], offsets[i + 1] - offsets[i]);
  }
  blob = {};
  if (m.strings.empty() || !m.strings.front().empty()) return fail("string 0 must be empty");
  if (!read_column(s_events, m.events) || !read_column(s_ops, m.ops) || !read_column(s_kernels, m.kernels) ||
      !read_column(s_memory, m.memory) || !read_column(s_python, m.python) || !read_column(s_fwdbwd, m.fwdbwd) ||
      !read_column(s_track_metas, m.track_metas) || !read_column(s_collectives, m.collectives))
    return false;
  std::vector<char> misc;
  if (!read_column(s_model_misc, misc)) return false;
  try {
    read_model_misc(nlohmann::json::parse(misc.begin(), misc.end()), m);
  } catch (const std::exception& e) {
    return fail(std::string("the model's scalars are unreadable: ") + e.what());
  }
  if (std::string why = check_model(m); !why.empty()) return fail(std::move(why));
  return true;
}

bool trace_index::read_timeline(timeline_columns& t) {
  if (fd_ < 0 || summary_.empty()) return fail("no index is open");
  std::vector<char> meta;
  if (!read_column(s_tl_meta, meta)) return false;
  t.meta.assign(meta.begin(), meta.end());
  if (t.meta.empty()) {
    error_.clear();
    return false;  // the trace has no timeline
  }
  return read_column(s_tl_lanes, t.lanes) && read_column(s_tl_lane_events, t.lane_events) &&
         read_column(s_tl_levels, t.levels) && read_column(s_tl_items, t.items) &&
         read_column(s_tl_counter_ts, t.counter_ts) && read_column(s_tl_counter_values, t.counter_values);
}

std::string_view rules_variant(analysis::rule_set rules) noexcept {
  return rules == analysis::rule_set::kinetoscope ? std::string_view() : analysis::rule_set_name(rules);
}

}  // namespace kinetoscope::server
