// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file loader_stream.hpp
/// Internal to the loader: bounded-memory input for big traces. A producer thread reads (or
/// inflates) the text in chunks; the parser sees a sliding window of it (text_stream::ensure)
/// and says how much of the past it still needs, so at most a few chunks are resident. Not part
/// of the analysis API.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "analysis/loader_stats.hpp"
#include "analysis/loader_text.hpp"

namespace kinetoscope::analysis::detail {

/// Bytes of text, produced in order on the stream's thread.
class byte_source {
 public:
  virtual ~byte_source() = default;
  /// Up to `cap` bytes into `dst`: the count, 0 at the end, -1 on error (see error).
  virtual std::ptrdiff_t fill(char* dst, std::size_t cap) = 0;
  /// Bytes taken from the underlying file or buffer so far (before inflating): the load's
  /// progress in file bytes.
  virtual std::uint64_t consumed() const noexcept = 0;
  std::string error;
  std::string warning;
};

/// A file descriptor read sequentially (closed by the destructor).
class fd_source : public byte_source {
 public:
  explicit fd_source(int fd) : fd_(fd) {}
  fd_source(const fd_source&) = delete;
  fd_source& operator=(const fd_source&) = delete;
  ~fd_source() override {
    if (fd_ >= 0) ::close(fd_);
  }
  std::ptrdiff_t fill(char* dst, std::size_t cap) override {
    for (;;) {
      const ssize_t got = ::read(fd_, dst, std::min<std::size_t>(cap, std::size_t{1} << 30));
      if (got >= 0) {
        consumed_ += static_cast<std::uint64_t>(got);
        return got;
      }
      if (errno == EINTR) continue;
      error = std::string("read error: ") + std::strerror(errno);
      return -1;
    }
  }
  std::uint64_t consumed() const noexcept override { return consumed_; }

 private:
  int fd_;
  std::uint64_t consumed_ = 0;
};

/// Bytes already in memory (not owned).
class memory_source : public byte_source {
 public:
  memory_source(const char* p, std::size_t n) : p_(p), n_(n) {}
  std::ptrdiff_t fill(char* dst, std::size_t cap) override {
    const std::size_t k = std::min({cap, n_, std::size_t{1} << 30});
    if (k > 0) std::memcpy(dst, p_, k);
    p_ += k;
    n_ -= k;
    consumed_ += k;
    return static_cast<std::ptrdiff_t>(k);
  }
  std::uint64_t consumed() const noexcept override { return consumed_; }

 private:
  const char* p_;
  std::size_t n_;
  std::uint64_t consumed_ = 0;
};

/// Byte ranges of one file or buffer, read in order, between an optional literal prefix and
/// suffix: the split parse (loader.cpp, load_split) hands each reader its part of the text this
/// way. File ranges use pread, so several sources may share one descriptor (not owned).
class ranges_source : public byte_source {
 public:
  struct range {
    std::uint64_t begin = 0, end = 0;
  };
  /// From a file descriptor (`mem` null) or from memory at `mem`.
  ranges_source(int fd, const char* mem, std::vector<range> ranges, std::string prefix = {}, std::string suffix = {})
      : fd_(fd), mem_(mem), ranges_(std::move(ranges)), prefix_(std::move(prefix)), suffix_(std::move(suffix)) {}
  std::ptrdiff_t fill(char* dst, std::size_t cap) override {
    std::size_t done = 0;
    auto literal = [&](const std::string& s, std::size_t& used) {
      const std::size_t k = std::min(cap - done, s.size() - used);
      std::memcpy(dst + done, s.data() + used, k);
      used += k;
      done += k;
    };
    literal(prefix_, prefix_used_);
    while (done < cap && next_ < ranges_.size()) {
      range& r = ranges_[next_];
      if (r.begin >= r.end) {
        ++next_;
        continue;
      }
      const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>({cap - done, r.end - r.begin, std::uint64_t{1} << 30}));
      if (mem_ != nullptr) {
        std::memcpy(dst + done, mem_ + r.begin, want);
        r.begin += want;
        done += want;
        consumed_ += want;
        continue;
      }
      const ssize_t got = ::pread(fd_, dst + done, want, static_cast<off_t>(r.begin));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        error = std::string("read error: ") + std::strerror(errno);
        return -1;
      }
      if (got == 0) {  // the file became shorter: end here (the caller compares sizes)
        ranges_.resize(next_);
        break;
      }
      r.begin += static_cast<std::uint64_t>(got);
      done += static_cast<std::size_t>(got);
      consumed_ += static_cast<std::uint64_t>(got);
    }
    if (next_ >= ranges_.size()) literal(suffix_, suffix_used_);
    return static_cast<std::ptrdiff_t>(done);
  }
  std::uint64_t consumed() const noexcept override { return consumed_; }

 private:
  int fd_;
  const char* mem_;
  std::vector<range> ranges_;
  std::size_t next_ = 0;
  std::string prefix_, suffix_;
  std::size_t prefix_used_ = 0, suffix_used_ = 0;
  std::uint64_t consumed_ = 0;
};

/// Inflates every gzip member of another source (as gunzip() does, but incrementally).
class gzip_source : public byte_source {
 public:
  explicit gzip_source(std::unique_ptr<byte_source> in) : in_(std::move(in)), buf_(std::size_t{1} << 20) {
    ok_ = inflateInit2(&zs_, 15 + 16) == Z_OK;
  }
  gzip_source(const gzip_source&) = delete;
  gzip_source& operator=(const gzip_source&) = delete;
  ~gzip_source() override {
    if (ok_) inflateEnd(&zs_);
  }

  std::ptrdiff_t fill(char* dst, std::size_t cap) override {
    if (!ok_) return fail("zlib initialisation failed");
    if (done_) return 0;
    const auto want = static_cast<uInt>(std::min<std::size_t>(cap, std::size_t{1} << 30));
    zs_.next_out = reinterpret_cast<unsigned char*>(dst);
    zs_.avail_out = want;
    int stalls = 0;
    while (zs_.avail_out > 0 && !done_) {
      if (!top_up(1)) return -1;
      if (zs_.avail_in == 0) return fail("truncated gzip stream (unexpected end of compressed data)");
      const uInt before_in = zs_.avail_in, before_out = zs_.avail_out;
      const int ret = inflate(&zs_, Z_NO_FLUSH);
      if (ret == Z_STREAM_END) {
        if (!top_up(2)) return -1;
        if (zs_.avail_in == 0) {
          done_ = true;
        } else if (is_gzip(zs_.next_in, zs_.avail_in)) {  // concatenated member
          inflateReset(&zs_);
        } else {
          if (!skip_trailing()) return -1;
          done_ = true;
        }
      } else if (ret == Z_OK || ret == Z_BUF_ERROR) {
        if (zs_.avail_in == before_in && zs_.avail_out == before_out && ++stalls > 4) {
          if (in_eof_) return fail("truncated gzip stream (unexpected end of compressed data)");
          if (!top_up(zs_.avail_in + 1)) return -1;
        }
      } else {
        return fail("corrupt gzip stream");
      }
    }
    return static_cast<std::ptrdiff_t>(want - zs_.avail_out);
  }
  std::uint64_t consumed() const noexcept override { return in_->consumed(); }

 private:
  std::unique_ptr<byte_source> in_;
  std::vector<unsigned char> buf_;
  z_stream zs_{};
  bool ok_ = false;
  bool done_ = false;
  bool in_eof_ = false;

  std::ptrdiff_t fail(const char* why) {
    error = why;
    return -1;
  }

  /// At least `n` unread input bytes unless the input ended; false on a read error.
  bool top_up(std::size_t n) {
    while (zs_.avail_in < n && !in_eof_) {
      if (zs_.avail_in > 0 && zs_.next_in != buf_.data()) std::memmove(buf_.data(), zs_.next_in, zs_.avail_in);
      if (zs_.avail_in >= buf_.size()) buf_.resize(buf_.size() * 2);
      const std::ptrdiff_t got =
          in_->fill(reinterpret_cast<char*>(buf_.data()) + zs_.avail_in, buf_.size() - zs_.avail_in);
      if (got < 0) {
        error = in_->error;
        return false;
      }
      if (got == 0) in_eof_ = true;
      zs_.next_in = buf_.data();
      zs_.avail_in += static_cast<uInt>(got);
    }
    return true;
  }

  /// The input after the last member: non-zero bytes earn a warning, as in gunzip().
  bool skip_trailing() {
    bool garbage = false;
    for (;;) {
      for (uInt i = 0; i < zs_.avail_in && !garbage; ++i) garbage = zs_.next_in[i] != 0;
      zs_.avail_in = 0;
      if (in_eof_) break;
      if (!top_up(1)) return false;
    }
    if (garbage) warning = "trailing bytes after the gzip stream ignored";
    return true;
  }
};

/// Passes another source through until more than `limit` bytes have come out, then fails and
/// sets `*exceeded` (read by the consumer once the producer thread has stopped).
class limited_source : public byte_source {
 public:
  limited_source(std::unique_ptr<byte_source> in, std::uint64_t limit, std::atomic<bool>* exceeded)
      : in_(std::move(in)), limit_(limit), exceeded_(exceeded) {}
  std::ptrdiff_t fill(char* dst, std::size_t cap) override {
    const std::ptrdiff_t got = in_->fill(dst, cap);
    warning = in_->warning;
    if (got < 0) {
      error = in_->error;
      return got;
    }
    total_ += static_cast<std::uint64_t>(got);
    if (total_ > limit_) {
      exceeded_->store(true);
      error = "text larger than the limit";
      return -1;
    }
    return got;
  }
  std::uint64_t consumed() const noexcept override { return in_->consumed(); }

 private:
  std::unique_ptr<byte_source> in_;
  std::uint64_t limit_;
  std::atomic<bool>* exceeded_;
  std::uint64_t total_ = 0;
};

/// The sliding text window. ensure(n, keep) makes the text bytes [keep, n) resident (absolute
/// offsets in the text), dropping everything before `keep`; data() holds [shift(), avail()) and
/// simdjson padding after it. Pointers into it die at the next ensure() that has to read.
class text_stream {
 public:
  /// `chunk`: bytes per read; `gap`: room before each chunk for the carried tail of the last one.
  /// `progress` (optional): the source bytes (byte_source::consumed) behind the chunks handed to
  /// the parser so far are added to it, once per chunk (load_options::progress_bytes).
  text_stream(std::unique_ptr<byte_source> src, std::size_t chunk, std::size_t gap,
              std::atomic<std::uint64_t>* progress = nullptr)
      : src_(std::move(src)), chunk_(chunk), gap_(gap), std_cap_(gap + chunk + padding), progress_(progress) {
    thread_ = std::thread([this] { produce(); });
  }
  text_stream(const text_stream&) = delete;
  text_stream& operator=(const text_stream&) = delete;
  ~text_stream() { close(); }

  bool ensure(std::size_t n, std::size_t keep) {
    if (shift_ + filled_ >= n) return true;
    return ensure_slow(n, keep);
  }

  char* data() noexcept { return data_; }
  std::size_t shift() const noexcept { return shift_; }
  std::size_t avail() const noexcept { return shift_ + filled_; }
  /// Bytes allocated from data() on (padding included).
  std::size_t capacity() const noexcept { return cur_.mem == nullptr ? 0 : cur_.cap - (data_ - cur_.mem); }
  bool eof() const noexcept { return eof_; }
  bool failed() const noexcept { return failed_; }
  const std::string& warning() const noexcept { return warning_; }

  /// Stops the producer and frees every buffer.
  void close() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    for (block& b : ready_) std::free(b.mem);
    for (block& b : free_) std::free(b.mem);
    ready_.clear();
    free_.clear();
    std::free(cur_.mem);
    cur_ = block{};
    data_ = nullptr;
  }

 private:
  struct block {
    char* mem = nullptr;
    std::size_t cap = 0;
    std::size_t len = 0;  ///< text bytes at mem + gap_
    bool last = false;
    bool failed = false;
    std::uint64_t source_end = 0;  ///< src_->consumed() once the block was filled
  };

  std::unique_ptr<byte_source> src_;
  const std::size_t chunk_, gap_, std_cap_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<block> ready_;  ///< filled, in order
  std::vector<block> free_;  ///< recycled standard blocks
  bool stop_ = false;
  std::string warning_;
  // Consumer side.
  block cur_;
  char* data_ = nullptr;
  std::size_t shift_ = 0, filled_ = 0;
  bool eof_ = false, failed_ = false;
  std::atomic<std::uint64_t>* progress_;
  std::uint64_t parsed_source_ = 0;  ///< source bytes of the blocks before the current one
  std::uint64_t reported_ = 0;       ///< of those, added to *progress_ so far

  static constexpr std::size_t ahead = 1;  ///< filled blocks waiting at most

  void produce() {
    for (;;) {
      block b;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || ready_.size() < ahead; });
        if (stop_) return;
        if (!free_.empty()) {
          b = free_.back();
          free_.pop_back();
        }
      }
      if (b.mem == nullptr) {
        b.mem = static_cast<char*>(std::malloc(std_cap_));
        b.cap = std_cap_;
      }
      if (b.mem == nullptr) {
        b = block{};
        b.last = b.failed = true;
      } else {
        while (b.len < chunk_) {
          const std::ptrdiff_t got = src_->fill(b.mem + gap_ + b.len, chunk_ - b.len);
          if (got <= 0) {
            b.last = true;
            b.failed = got < 0;
            break;
          }
          b.len += static_cast<std::size_t>(got);
        }
        b.source_end = src_->consumed();
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (b.last) warning_ = src_->warning;
        ready_.push_back(b);
      }
      cv_.notify_all();
      if (b.last) return;
    }
  }

  void recycle(block& b) {
    if (b.mem != nullptr && b.cap == std_cap_) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (free_.size() < 2) {
        free_.push_back({b.mem, b.cap, 0, false, false});
        b = block{};
        return;
      }
    }
    std::free(b.mem);
    b = block{};
  }

  bool ensure_slow(std::size_t n, std::size_t keep) {
    while (shift_ + filled_ < n) {
      if (eof_) return false;
      block b;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return !ready_.empty(); });
        b = ready_.front();
        ready_.pop_front();
      }
      cv_.notify_all();
      // The parser is done with the blocks before this one (but for a carried tail).
      // Added, not stored: the split parse runs two streams that report into one counter.
      if (progress_ != nullptr && parsed_source_ > reported_) {
        progress_->fetch_add(parsed_source_ - reported_, std::memory_order_relaxed);
        reported_ = parsed_source_;
      }
      if (b.source_end > parsed_source_) parsed_source_ = b.source_end;
      eof_ = b.last;
      failed_ = b.failed;
      if (b.failed || b.len == 0) {
        recycle(b);
        if (failed_) return false;
        continue;
      }
      const std::size_t len = b.len;
      keep = std::clamp(keep, shift_, shift_ + filled_);
      const std::size_t carry = shift_ + filled_ - keep;
      const char* from = data_ + (keep - shift_);
      const std::size_t need_cap = carry + len + padding;
      if (carry <= gap_ && b.cap == std_cap_) {  // the usual case: the tail goes before the chunk
        if (carry > 0) std::memcpy(b.mem + gap_ - carry, from, carry);
        recycle(cur_);
        cur_ = b;
        data_ = cur_.mem + (gap_ - carry);
      } else if (cur_.mem != nullptr && cur_.cap != std_cap_ && need_cap <= cur_.cap) {  // a big one, in place
        if (carry > 0) std::memmove(cur_.mem, from, carry);
        std::memcpy(cur_.mem + carry, b.mem + gap_, len);
        data_ = cur_.mem;
        recycle(b);
      } else {  // a tail bigger than the gap (a huge event, or the end of the text): grow
        const std::size_t cap = 2 * (carry + len) + padding;
        auto* mem = static_cast<char*>(std::malloc(cap));
        if (mem == nullptr) throw std::bad_alloc();
        if (carry > 0) std::memcpy(mem, from, carry);
        std::memcpy(mem + carry, b.mem + gap_, len);
        recycle(cur_);
        recycle(b);
        cur_ = block{mem, cap, 0, false, false};
        data_ = mem;
      }
      shift_ = keep;
      filled_ = carry + len;
      std::memset(data_ + filled_, 0, padding);
    }
    return true;
  }
};

}  // namespace kinetoscope::analysis::detail
