// SPDX-License-Identifier: BSD-3-Clause
// TensorBoard event files: TFRecord framing, CRC-32C, Event encoding/decoding
// (docs/tensorboard-files.md).

#include "kinetoscope/tensorboard/tfevents.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <system_error>

#include "kinetoscope_tfevents.pb.h"

// libprotobuf 3.x logs an ERROR line to stderr for every string field that is not UTF-8 when it
// parses; the reader reports such records itself, so it silences that (LogSilencer: scoped,
// thread-safe). Newer protobufs (4.22+) log through Abseil and have no LogSilencer.
#if defined(GOOGLE_PROTOBUF_VERSION) && GOOGLE_PROTOBUF_VERSION < 4022000
#include <google/protobuf/stubs/logging.h>
#define KINETOSCOPE_PROTOBUF_LOG_SILENCER 1
#endif

namespace kinetoscope {

namespace {

namespace fs = std::filesystem;
namespace pb = kinetoscope::tfevents;

constexpr std::array<std::uint32_t, 256> make_crc32c_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1U) ? (c >> 1) ^ 0x82F63B78U : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<std::uint32_t, 256> crc32c_table = make_crc32c_table();

std::uint32_t mask_crc(std::uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8U;
}

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFU));
}

std::uint64_t get_le(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

double now_seconds() {
  using namespace std::chrono;
  return static_cast<double>(
             duration_cast<microseconds>(system_clock::now().time_since_epoch()).count()) /
         1e6;
}

std::string serialize(const pb::Event& event) {
  std::string out;
  if (!event.SerializeToString(&out)) throw std::runtime_error("tfevents: cannot serialize Event");
  return out;
}

std::string errno_text(int err) { return std::generic_category().message(err); }

std::string host_name() {
  std::array<char, 256> buf{};
  if (::gethostname(buf.data(), buf.size() - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string h(buf.data());
  // Keep the name a single path component.
  std::replace(h.begin(), h.end(), '/', '_');
  return h;
}

std::atomic<unsigned> writer_counter{0};

/// Scalar value of a rank-0 DT_FLOAT / DT_DOUBLE tensor; false if it is not one.
bool tensor_scalar(const pb::TensorProto& t, float& out) {
  if (t.tensor_shape().dim_size() != 0) {
    for (const auto& d : t.tensor_shape().dim())
      if (d.size() != 1) return false;  // only shape [] (or all-ones) holds one value
  }
  if (t.dtype() == 1) {  // DT_FLOAT
    if (t.float_val_size() >= 1) {
      out = t.float_val(0);
      return true;
    }
    if (t.tensor_content().size() == 4) {
      auto bits = static_cast<std::uint32_t>(
          get_le(reinterpret_cast<const unsigned char*>(t.tensor_content().data()), 4));
      std::memcpy(&out, &bits, 4);
      return true;
    }
    return false;
  }
  if (t.dtype() == 2) {  // DT_DOUBLE
    double d = 0.0;
    if (t.double_val_size() >= 1) {
      d = t.double_val(0);
    } else if (t.tensor_content().size() == 8) {
      std::uint64_t bits =
          get_le(reinterpret_cast<const unsigned char*>(t.tensor_content().data()), 8);
      std::memcpy(&d, &bits, 8);
    } else {
      return false;
    }
    out = static_cast<float>(d);
    return true;
  }
  return false;
}

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t n, std::uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t c = ~crc;
  for (std::size_t i = 0; i < n; ++i) c = crc32c_table[(c ^ p[i]) & 0xFFU] ^ (c >> 8);
  return ~c;
}

std::uint32_t masked_crc32c(const void* data, std::size_t n) { return mask_crc(crc32c(data, n)); }

std::string tfrecord_frame(const std::string& payload) {
  std::string rec;
  rec.reserve(payload.size() + 16);
  put_le(rec, payload.size(), 8);
  put_le(rec, masked_crc32c(rec.data(), 8), 4);
  rec += payload;
  put_le(rec, masked_crc32c(payload.data(), payload.size()), 4);
  return rec;
}

std::string encode_file_version_event(double wall_time, const std::string& version) {
  pb::Event ev;
  ev.set_wall_time(wall_time);
  ev.set_file_version(version);
  return serialize(ev);
}

std::string encode_scalars_event(double wall_time, std::int64_t step,
                                 const std::vector<scalar_value>& values) {
  pb::Event ev;
  ev.set_wall_time(wall_time);
  ev.set_step(step);
  auto* summary = ev.mutable_summary();
  for (const auto& v : values) {
    auto* value = summary->add_value();
    value->set_tag(v.tag);
    value->set_simple_value(v.value);
  }
  return serialize(ev);
}

// ---------------------------------------------------------------------------------------------
// event_file_writer

event_file_writer::event_file_writer(const std::string& dir, std::string suffix) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("tfevents: " + dir + ": cannot create directory: " + ec.message());
  const double now = now_seconds();
  const auto secs = static_cast<long long>(now);
  std::string secs_text = std::to_string(secs);
  if (secs_text.size() < 10) secs_text.insert(0, 10 - secs_text.size(), '0');
  const std::string name = "events.out.tfevents." + secs_text + "." + host_name() + "." +
                           std::to_string(::getpid()) + "." +
                           std::to_string(writer_counter.fetch_add(1)) + suffix;
  path_ = (fs::path(dir) / name).string();
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("tfevents: " + path_ + ": cannot create: " + errno_text(errno));
  try {
    write_record(encode_file_version_event(now));
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

event_file_writer::~event_file_writer() {
  if (fd_ >= 0) ::close(fd_);
}

void event_file_writer::add_scalars(std::int64_t step, const std::vector<scalar_value>& values,
                                    double wall_time) {
  if (values.empty()) return;
  if (std::isnan(wall_time)) wall_time = now_seconds();
  write_record(encode_scalars_event(wall_time, step, values));
  flush();
}

void event_file_writer::flush() {
  // Records go straight to the kernel with write(2); nothing is buffered here.
}

void event_file_writer::write_record(const std::string& payload) {
  const std::string rec = tfrecord_frame(payload);
  std::size_t done = 0;
  while (done < rec.size()) {
    const ::ssize_t n = ::write(fd_, rec.data() + done, rec.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("tfevents: " + path_ + ": write failed: " + errno_text(errno));
    }
    done += static_cast<std::size_t>(n);
  }
}

// ---------------------------------------------------------------------------------------------
// reader

namespace {

/// Parses the complete records of `data` (the file's bytes from `base_offset`) into `out`;
/// returns the bytes consumed (the start of an incomplete last record, or of a bad length CRC,
/// which also sets `cursor.stopped`).
std::size_t parse_records(const unsigned char* base, std::size_t size, std::uint64_t base_offset,
                          event_file_cursor& cursor, event_file_contents& out) {
  std::size_t off = 0;
  out.truncated_tail = false;
  while (off < size) {
    const std::size_t left = size - off;
    if (left < 12) {
      out.truncated_tail = true;
      break;
    }
    const std::uint64_t len = get_le(base + off, 8);
    const auto len_crc = static_cast<std::uint32_t>(get_le(base + off + 8, 4));
    if (masked_crc32c(base + off, 8) != len_crc) {
      out.errors.push_back("offset " + std::to_string(base_offset + off) +
                           ": bad length CRC (not an event file or corrupted); reading stopped");
      cursor.stopped = true;
      break;
    }
    if (len > left - 12 || left - 12 - len < 4) {
      out.truncated_tail = true;
      cursor.need = 12 + len + 4;
      break;
    }
    const unsigned char* payload = base + off + 12;
    const auto data_crc = static_cast<std::uint32_t>(get_le(payload + len, 4));
    const std::uint64_t rec_off = base_offset + off;
    off += 12 + static_cast<std::size_t>(len) + 4;
    if (masked_crc32c(payload, static_cast<std::size_t>(len)) != data_crc) {
      ++out.corrupt_records;
      out.errors.push_back("offset " + std::to_string(rec_off) + ": bad payload CRC; record skipped");
      continue;
    }
    pb::Event ev;
#ifdef KINETOSCOPE_PROTOBUF_LOG_SILENCER
    const google::protobuf::LogSilencer quiet;
#endif
    if (!ev.ParseFromArray(payload, static_cast<int>(len))) {
      ++out.corrupt_records;
      out.errors.push_back("offset " + std::to_string(rec_off) +
                           ": payload is not an Event protocol buffer; record skipped");
      continue;
    }
    ++out.records;
    if (ev.what_case() == pb::Event::kFileVersion) {
      if (out.file_version.empty()) out.file_version = ev.file_version();
      continue;
    }
    if (ev.what_case() != pb::Event::kSummary) continue;
    for (const auto& v : ev.summary().value()) {
      float value = 0.0f;
      bool is_scalar = false;
      if (v.value_case() == pb::Value::kSimpleValue) {
        value = v.simple_value();
        is_scalar = true;
      } else if (v.value_case() == pb::Value::kTensor) {
        bool announced = false;
        if (v.has_metadata() && v.metadata().has_plugin_data()) {
          announced = v.metadata().plugin_data().plugin_name() == "scalars";
          if (announced) cursor.scalar_tags.insert(v.tag());
        } else {
          announced = cursor.scalar_tags.count(v.tag()) != 0;
        }
        is_scalar = announced && tensor_scalar(v.tensor(), value);
      }
      if (!is_scalar) {
        ++out.skipped_other_summaries;
        continue;
      }
      out.scalars[v.tag()].push_back(scalar_point{ev.step(), ev.wall_time(), value});
    }
  }
  return off;
}

}  // namespace

event_file_contents read_event_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("tfevents: " + path + ": cannot open: " + errno_text(errno));
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error("tfevents: " + path + ": read failed");
  event_file_contents out;
  event_file_cursor cursor;
  parse_records(reinterpret_cast<const unsigned char*>(data.data()), data.size(), 0, cursor, out);
  return out;
}

std::uint64_t read_event_file_from(const std::string& path, event_file_cursor& cursor, std::uint64_t max_bytes,
                                   event_file_contents& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("tfevents: " + path + ": cannot open: " + errno_text(errno));
  struct close_fd {
    int fd;
    ~close_fd() { ::close(fd); }
  } closer{fd};
  const off_t end = ::lseek(fd, 0, SEEK_END);
  if (end < 0) throw std::runtime_error("tfevents: " + path + ": cannot seek: " + errno_text(errno));
  const auto size = static_cast<std::uint64_t>(end);
  if (size < cursor.offset) {  // rewritten shorter: start over
    cursor = event_file_cursor{};
    out = event_file_contents{};
  }
  constexpr std::uint64_t chunk = std::uint64_t{16} << 20;
  std::uint64_t read_total = 0;
  std::string buf;
  while (!cursor.stopped && cursor.offset < size && read_total < max_bytes) {
    const std::uint64_t want = std::min(size - cursor.offset, std::max(chunk, cursor.need));
    buf.resize(static_cast<std::size_t>(want));
    std::size_t got = 0;
    while (got < want) {
      const ::ssize_t n = ::pread(fd, buf.data() + got, want - got, static_cast<off_t>(cursor.offset + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw std::runtime_error("tfevents: " + path + ": read failed: " + errno_text(errno));
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    cursor.need = 0;
    const std::size_t used =
        parse_records(reinterpret_cast<const unsigned char*>(buf.data()), got, cursor.offset, cursor, out);
    cursor.offset += used;
    read_total += got;
    if (used == 0 && (cursor.need == 0 || cursor.need <= got || cursor.offset + cursor.need > size)) break;  // the tail is still being written
  }
  return read_total;
}

std::vector<std::string> find_event_files(const std::string& logdir) {
  std::vector<fs::path> found;
  std::error_code ec;
  auto is_event_file = [](const fs::path& p) {
    const std::string name = p.filename().string();
    const std::string empty = ".profile-empty";
    if (name.find("tfevents") == std::string::npos) return false;
    return !(name.size() >= empty.size() &&
             name.compare(name.size() - empty.size(), empty.size(), empty) == 0);
  };
  if (fs::is_regular_file(logdir, ec)) {
    if (is_event_file(logdir)) return {logdir};
    return {};
  }
  if (!fs::is_directory(logdir, ec)) return {};
  fs::recursive_directory_iterator it(logdir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code ec2;
    if (it->is_regular_file(ec2) && is_event_file(it->path())) found.push_back(it->path());
  }
  std::sort(found.begin(), found.end(), [](const fs::path& a, const fs::path& b) {
    if (a.parent_path() != b.parent_path()) return a.parent_path() < b.parent_path();
    return a.filename() < b.filename();
  });
  std::vector<std::string> out;
  out.reserve(found.size());
  for (const auto& p : found) out.push_back(p.string());
  return out;
}

}  // namespace kinetoscope
