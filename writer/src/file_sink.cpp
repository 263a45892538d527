// SPDX-License-Identifier: BSD-3-Clause
/// @file file_sink.cpp
/// File and gzip sinks, and write_chrome_trace_file(): temporary file + rename, so a reader
/// (TensorBoard plugin, HTA) never sees half a trace.

#include "file_sink.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace kinetoscope::detail {

namespace {

std::string errno_text(int err) { return std::generic_category().message(err); }

std::runtime_error zlib_error(const char* what, int code, const char* msg) {
  std::string text = std::string("zlib ") + what + " failed (" + std::to_string(code) + ")";
  if (msg != nullptr) text += std::string(": ") + msg;
  return std::runtime_error(text);
}

}  // namespace

void fd_sink::write(const char* data, std::size_t size) {
  while (size > 0) {
    const std::size_t chunk = std::min<std::size_t>(size, std::size_t{1} << 30);
    const ssize_t n = ::write(fd_, data, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(errno_text(errno));
    }
    if (n == 0) throw std::runtime_error("write returned 0 bytes");
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

// ---------------------------------------------------------------------------------------------

struct gzip_sink::state {
  z_stream zs{};
  bool initialised = false;
  bool finished = false;
  static constexpr std::size_t out_size = std::size_t{256} << 10;
  std::unique_ptr<unsigned char[]> out = std::make_unique_for_overwrite<unsigned char[]>(out_size);
};

gzip_sink::gzip_sink(byte_sink& out, int level) : out_(out), state_(std::make_unique<state>()) {
  level = std::clamp(level, -1, 9);
  // windowBits 15 + 16: a gzip header and trailer instead of zlib's.
  const int rc = deflateInit2(&state_->zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  if (rc != Z_OK) throw zlib_error("deflateInit2", rc, state_->zs.msg);
  state_->initialised = true;
}

gzip_sink::~gzip_sink() {
  if (state_ && state_->initialised) deflateEnd(&state_->zs);
}

void gzip_sink::pump(int flush_mode) {
  z_stream& zs = state_->zs;
  for (;;) {
    zs.next_out = state_->out.get();
    zs.avail_out = static_cast<uInt>(state::out_size);
    const int rc = deflate(&zs, flush_mode);
    if (rc == Z_STREAM_ERROR) throw zlib_error("deflate", rc, zs.msg);
    const std::size_t produced = state::out_size - zs.avail_out;
    if (produced > 0) out_.write(reinterpret_cast<const char*>(state_->out.get()), produced);
    if (flush_mode == Z_FINISH) {
      if (rc == Z_STREAM_END) return;
      if (rc != Z_OK && rc != Z_BUF_ERROR) throw zlib_error("deflate", rc, zs.msg);
    } else if (zs.avail_in == 0 && zs.avail_out != 0) {
      return;  // all input consumed and nothing pending
    }
  }
}

void gzip_sink::write(const char* data, std::size_t size) {
  if (state_->finished) throw std::logic_error("gzip_sink: write after finish");
  z_stream& zs = state_->zs;
  while (size > 0) {
    const std::size_t chunk = std::min<std::size_t>(size, UINT_MAX / 2);
    // zlib's API is not const-correct; deflate never writes through next_in.
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
    zs.avail_in = static_cast<uInt>(chunk);
    pump(Z_NO_FLUSH);
    data += chunk;
    size -= chunk;
  }
}

void gzip_sink::finish() {
  if (state_->finished) return;
  state_->zs.next_in = nullptr;
  state_->zs.avail_in = 0;
  pump(Z_FINISH);
  state_->finished = true;
  out_.finish();
}

bool has_gz_suffix(const std::string& path) noexcept {
  return path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

}  // namespace kinetoscope::detail

// ---------------------------------------------------------------------------------------------

namespace kinetoscope {

namespace {

/// Closes the descriptor and removes the temporary file unless released.
class tmp_file_guard {
 public:
  tmp_file_guard(int fd, std::string path) noexcept : fd_(fd), path_(std::move(path)) {}
  tmp_file_guard(const tmp_file_guard&) = delete;
  tmp_file_guard& operator=(const tmp_file_guard&) = delete;
  ~tmp_file_guard() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  /// Closes the descriptor; returns errno of a failed close (0 on success).
  int close() noexcept {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }
  /// The file was renamed into place: nothing to remove.
  void release() noexcept { path_.clear(); }

 private:
  int fd_;
  std::string path_;
};

}  // namespace

void write_chrome_trace_file(const trace_data& data, const std::string& path, int gzip_level) {
  const auto fail = [&path](const std::string& reason) {
    return std::runtime_error("cannot write trace " + path + ": " + reason);
  };
  if (path.empty()) throw fail("empty path");

  const std::filesystem::path fs_path(path);
  const std::filesystem::path parent = fs_path.parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) throw fail("cannot create directory " + parent.string() + ": " + ec.message());
    if (!std::filesystem::is_directory(parent, ec)) {
      throw fail("cannot create directory " + parent.string() + ": not a directory");
    }
  }

  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw fail(detail::errno_text(errno));
  tmp_file_guard guard(fd, tmp);

  chrome_trace_options options;
  options.trace_name = path;
  try {
    detail::fd_sink file(fd);
    if (detail::has_gz_suffix(path)) {
      detail::gzip_sink gz(file, gzip_level);
      write_chrome_trace(data, gz, options);
    } else {
      write_chrome_trace(data, file, options);
    }
  } catch (const std::exception& e) {
    throw fail(e.what());
  }
  if (const int err = guard.close(); err != 0) throw fail(detail::errno_text(err));
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw fail(detail::errno_text(errno));
  guard.release();
}

}  // namespace kinetoscope
