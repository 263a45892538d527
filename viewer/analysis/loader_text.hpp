// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file loader_text.hpp
/// Internal to the loader (loader.cpp, discovery.cpp): a growable padded text buffer, file
/// reading, gzip inflation and the text repairs of docs/plugin-rules.md#discovery (invalid UTF-8,
/// raw control characters, bare N/A), plus JSON string helpers. Not part of the analysis API.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <type_traits>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

// simdjson checks its On-Demand invariants with assert() unless NDEBUG is set, and meson's
// debugoptimized builds keep asserts on; those checks cost several % of a load, so simdjson is
// always included with NDEBUG. Include simdjson only through this header.
#ifndef NDEBUG
#define NDEBUG
#include <simdjson.h>
#undef NDEBUG
#else
#include <simdjson.h>
#endif

namespace kinetoscope::analysis::detail {

constexpr std::size_t padding = simdjson::SIMDJSON_PADDING;

// Text buffer (malloc/realloc so large buffers grow in place) and gzip.

class text_buffer {
 public:
  text_buffer() = default;
  text_buffer(const text_buffer&) = delete;
  text_buffer& operator=(const text_buffer&) = delete;
  ~text_buffer() { std::free(data_); }

  /// Room for `n` bytes of text plus simdjson's padding.
  bool reserve(std::size_t n) {
    const std::size_t need = n + padding;
    if (need <= cap_) return true;
    void* p = std::realloc(data_, need);
    if (p == nullptr) return false;
    data_ = static_cast<char*>(p);
    cap_ = need;
    return true;
  }

  char* data() noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t room() const noexcept { return cap_ - padding - size_; }
  std::size_t alloc_size() const noexcept { return cap_; }
  void set_size(std::size_t n) noexcept { size_ = n; }
  /// Zeroes the padding (simdjson may read it).
  void seal() noexcept {
    if (data_ != nullptr) std::memset(data_ + size_, 0, cap_ - size_);
  }
  void release() noexcept {
    std::free(data_);
    data_ = nullptr;
    size_ = cap_ = 0;
  }
  void swap(text_buffer& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(cap_, o.cap_);
  }

 private:
  char* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t cap_ = 0;
};

/// Lets the parser start while a background thread is still filling a text buffer (reading a
/// file, or inflating gzip). The buffer is allocated at its final size first; the producer
/// writes bytes in order and publishes how many are final; the consumer only touches bytes
/// below that mark (ensure()). The destructor joins the thread.
class text_feed {
 public:
  text_feed() = default;
  text_feed(const text_feed&) = delete;
  text_feed& operator=(const text_feed&) = delete;
  ~text_feed() { join(); }

  /// Runs `produce(*this)` on a new thread; it must call publish() as bytes become final and
  /// finish() once at the end.
  template <class F>
  void start(F produce) {
    thread_ = std::thread([this, produce]() mutable { produce(*this); });
  }
  void publish(std::size_t n) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      available_.store(n, std::memory_order_release);
    }
    cv_.notify_all();
  }
  /// `error` empty: the input ended normally (possibly short of the size announced).
  void finish(std::string error = {}) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::move(error);
      done_ = true;
    }
    cv_.notify_all();
  }
  /// Waits until bytes [0, n) are final; false if the producer finished without them.
  bool ensure(std::size_t n) {
    if (available_.load(std::memory_order_acquire) >= n) return true;
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return done_ || available_.load(std::memory_order_acquire) >= n; });
    return available_.load(std::memory_order_acquire) >= n;
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  /// Producer: a non-fatal remark (e.g. trailing bytes after the gzip stream).
  void set_warning(std::string w) {
    std::lock_guard<std::mutex> lock(mutex_);
    warning_ = std::move(w);
  }
  const std::string& warning() const noexcept { return warning_; }
  /// After join(): the producer's error ("" if none) and the bytes it delivered.
  const std::string& error() const noexcept { return error_; }
  std::size_t delivered() const noexcept { return available_.load(std::memory_order_acquire); }

 private:
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<std::size_t> available_{0};
  bool done_ = false;
  std::string error_;
  std::string warning_;
};

inline bool is_gzip(const unsigned char* p, std::size_t n) { return n >= 2 && p[0] == 0x1f && p[1] == 0x8b; }

struct gzip_status {
  bool ok = true;
  std::string reason;
  std::uint64_t offset = 0;
  bool trailing_garbage = false;
};

/// The uncompressed size mod 2^32 of the last gzip member (its ISIZE field); 0 if too short.
inline std::size_t gzip_isize(const unsigned char* in, std::size_t n) {
  if (n < 18) return 0;
  return std::size_t{in[n - 4]} | std::size_t{in[n - 3]} << 8 | std::size_t{in[n - 2]} << 16 |
         std::size_t{in[n - 1]} << 24;
}

constexpr const char* gzip_grew = "gzip output larger than its size field";

/// A gunzip output of fixed capacity that a parser reads while it fills (see text_feed).
struct fixed_output {
  char* base = nullptr;
  std::size_t cap = 0;
  std::size_t used = 0;
  text_feed* feed = nullptr;
  static constexpr std::size_t min_room = 1;
  bool reserve(std::size_t n) const noexcept { return n <= cap; }
  char* data() noexcept { return base; }
  std::size_t size() const noexcept { return used; }
  std::size_t room() const noexcept { return cap - used; }
  void set_size(std::size_t n) {
    used = n;
    feed->publish(n);
  }
};

/// Inflates every gzip member of `in` into `out` (stops early once `limit` bytes are out; the
/// buffer never grows much beyond it).
/// `Out` is text_buffer (grows) or fixed_output.
template <class Out>
gzip_status gunzip(const unsigned char* in, std::size_t n, Out& out, std::size_t limit = static_cast<std::size_t>(-1)) {
  gzip_status st;
  std::size_t hint = n * 4;
  if (gzip_isize(in, n) >= n) hint = gzip_isize(in, n);
  hint = std::min(hint, limit) + 1024;
  if (!out.reserve(hint) && out.room() == 0) return {false, "out of memory inflating gzip stream", 0, false};
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return {false, "zlib initialisation failed", 0, false};
  std::size_t consumed = 0;  // bytes of `in` handed to zlib so far
  bool done = false;
  while (!done) {
    if (zs.avail_in == 0 && consumed < n) {
      const std::size_t chunk = std::min<std::size_t>(n - consumed, std::size_t{1} << 30);
      zs.next_in = const_cast<unsigned char*>(in + consumed);
      zs.avail_in = static_cast<uInt>(chunk);
      consumed += chunk;
    }
    if (out.room() < (std::size_t{1} << 16)) {
      std::size_t grow = std::max<std::size_t>(out.size() / 2, std::size_t{1} << 20);
      if (limit - out.size() < grow) grow = std::max<std::size_t>(limit - out.size(), std::size_t{1} << 16);
      if (!out.reserve(out.size() + grow) && out.room() == 0) {
        inflateEnd(&zs);
        if constexpr (std::is_same_v<Out, fixed_output>) return {false, gzip_grew, consumed - zs.avail_in, false};
        return {false, "out of memory inflating gzip stream", 0, false};
      }
    }
    const std::size_t room = std::min({out.room(), limit - out.size(), std::size_t{1} << 30});
    zs.next_out = reinterpret_cast<unsigned char*>(out.data() + out.size());
    zs.avail_out = static_cast<uInt>(room);
    const int ret = inflate(&zs, Z_NO_FLUSH);
    out.set_size(out.size() + (room - zs.avail_out));
    const std::size_t pos = consumed - zs.avail_in;  // next unread input byte
    if (out.size() >= limit) break;
    switch (ret) {
      case Z_STREAM_END: {
        std::size_t rest = n - pos;
        if (rest == 0) {
          done = true;
        } else if (is_gzip(in + pos, rest)) {  // concatenated member
          inflateReset(&zs);
        } else {
          const unsigned char* r = in + pos;
          st.trailing_garbage = std::any_of(r, r + rest, [](unsigned char c) { return c != 0; });
          done = true;
        }
        break;
      }
      case Z_OK:
        if (zs.avail_in == 0 && consumed >= n && zs.avail_out != 0) {
          st = {false, "truncated gzip stream (unexpected end of compressed data)", pos, false};
          done = true;
        }
        break;
      case Z_BUF_ERROR:
        if (zs.avail_in == 0 && consumed >= n) {
          st = {false, "truncated gzip stream (unexpected end of compressed data)", pos, false};
          done = true;
        }
        break;
      case Z_MEM_ERROR:
        st = {false, "out of memory inflating gzip stream", pos, false};
        done = true;
        break;
      default: {  // Z_DATA_ERROR, Z_NEED_DICT, Z_STREAM_ERROR
        const bool header = zs.total_out == 0 && pos < 32;
        st = {false,
              std::string(header ? "corrupt gzip header" : "corrupt gzip stream") + " (" +
                  (zs.msg != nullptr ? zs.msg : "data error") + ")",
              pos, false};
        done = true;
        break;
      }
    }
  }
  inflateEnd(&zs);
  return st;
}

/// Where a JSON text that failed to parse really ends, for an accurate message whichever path
/// failed: a string-aware bracket scan (no validation) from the first byte.
struct json_extent {
  bool complete = false;            ///< the top-level value closes
  std::size_t trailing_at = static_cast<std::size_t>(-1);  ///< first non-space, non-NUL byte after it
  bool in_string = false;           ///< (not complete) the text ends inside a string
  /// (not complete) index in traceEvents (or the bare array) of the first event not read whole
  /// (the one the text ends in, or the next one); -1 when it ends outside the events array.
  std::int64_t event_index = -1;
};

inline json_extent scan_json_extent(const char* p, std::size_t n) {
  json_extent out;
  std::size_t i = 0;
  if (n >= 3 && std::memcmp(p, "\xEF\xBB\xBF", 3) == 0) i = 3;
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\0'; };
  while (i < n && space(p[i])) ++i;
  if (i >= n || (p[i] != '{' && p[i] != '[')) {  // a scalar: let the parser's message stand
    out.complete = true;
    return out;
  }
  int depth = 0;
  int events_depth = p[i] == '[' ? 1 : -1;  // depth of the events array's elements' container
  std::int64_t started = 0;                 // elements begun in the events array
  bool element_open = false;                // inside an element (or just after one, before ',')
  std::size_t last_string_begin = 0, last_string_end = 0;
  for (; i < n; ++i) {
    const char c = p[i];
    if (c == '"') {
      if (depth == events_depth && !element_open) {
        ++started;
        element_open = true;
      }
      last_string_begin = i + 1;
      ++i;
      while (i < n && p[i] != '"') i += p[i] == '\\' ? 2 : 1;
      if (i >= n) {
        out.in_string = true;
        break;
      }
      last_string_end = i;
      continue;
    }
    if (c == '{' || c == '[') {
      if (depth == events_depth && !element_open) {
        ++started;
        element_open = true;
      }
      // "traceEvents": [ at the top level of an object
      if (c == '[' && depth == 1 && events_depth == -1) {
        std::size_t k = i;
        while (k > 0 && space(p[k - 1])) --k;
        if (k > 0 && p[k - 1] == ':' && last_string_end > 0 &&
            std::string_view(p + last_string_begin, last_string_end - last_string_begin) == "traceEvents")
          events_depth = 2;
      }
      ++depth;
      continue;
    }
    if (c == '}' || c == ']') {
      --depth;
      if (depth == events_depth - 1 && events_depth > 0) events_depth = -2;  // the events array closed
      if (depth == 0) {
        out.complete = true;
        ++i;
        while (i < n && space(p[i])) ++i;
        if (i < n) out.trailing_at = i;
        return out;
      }
      continue;
    }
    if (c == ',' && depth == events_depth) {
      element_open = false;
      continue;
    }
    if (!space(c) && depth == events_depth && !element_open) {  // a scalar element
      ++started;
      element_open = true;
    }
  }
  // The first event not read whole: the one the text ends in, or the next one.
  if (events_depth > 0 && depth >= events_depth) out.event_index = depth > events_depth ? started - 1 : started;
  return out;
}

/// Reads a whole file into `out`; "" on success, else the reason.
inline std::string read_file(const std::string& path, text_buffer& out, std::size_t limit, int* error_number = nullptr) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (error_number != nullptr) *error_number = errno;
    return std::string("cannot open file: ") + std::strerror(errno);
  }
  struct stat sb {};
  std::size_t expect = 1 << 20;
  if (::fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    ::close(fd);
    return "is a directory";
  }
  if (S_ISREG(sb.st_mode)) expect = static_cast<std::size_t>(sb.st_size) + 1;  // +1: room to see EOF
  expect = std::min(expect, limit);
  if (!out.reserve(expect)) {
    ::close(fd);
    return "out of memory reading file";
  }
  for (;;) {
    if (out.size() >= limit) break;
    if (out.room() == 0 && !out.reserve(out.size() + std::max<std::size_t>(out.size() / 2, 1 << 20))) {
      ::close(fd);
      return "out of memory reading file";
    }
    const std::size_t want = std::min({out.room(), limit - out.size(), std::size_t{1} << 30});
    const ssize_t got = ::read(fd, out.data() + out.size(), want);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (error_number != nullptr) *error_number = errno;
      const std::string why = std::string("read error: ") + std::strerror(errno);
      ::close(fd);
      return why;
    }
    if (got == 0) break;
    out.set_size(out.size() + static_cast<std::size_t>(got));
  }
  ::close(fd);
  return {};
}

// ------------------------------------------------------------------------------------------
// Text repairs (only run after a strict parse failed).

/// Replaces every byte that is not part of a valid UTF-8 sequence with '?'. Returns the count.
inline std::size_t repair_utf8(char* text, std::size_t n) {
  auto* s = reinterpret_cast<unsigned char*>(text);
  std::size_t fixed = 0;
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    bool valid = len != 0 && i + len <= n && s[i + 1] >= lo && s[i + 1] <= hi;
    for (std::size_t k = 2; valid && k < len; ++k) valid = s[i + k] >= 0x80 && s[i + k] <= 0xBF;
    if (valid) {
      i += len;
    } else {
      s[i++] = '?';
      ++fixed;
    }
  }
  return fixed;
}

/// Replaces raw control characters (< 0x20) inside JSON strings with spaces. Returns the count.
inline std::size_t repair_control_chars(char* s, std::size_t n) {
  std::size_t fixed = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < n; ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
        if (i < n && static_cast<unsigned char>(s[i]) < 0x20) {
          s[i] = ' ';
          ++fixed;
        }
      } else if (c == '"') {
        in_string = false;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        s[i] = ' ';
        ++fixed;
      }
    } else if (c == '"') {
      in_string = true;
    }
  }
  return fixed;
}

/// Copies `in` to `out`, quoting every bare N/A token outside strings. Returns the count.
inline std::size_t repair_bare_na(const char* s, std::size_t n, text_buffer& out) {
  std::size_t count = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < n; ++i) {
    if (!in_string && s[i] == 'N' && i + 3 <= n && s[i + 1] == '/' && s[i + 2] == 'A') ++count;
    if (s[i] == '"' && !in_string) in_string = true;
    else if (in_string && s[i] == '\\') ++i;
    else if (in_string && s[i] == '"') in_string = false;
  }
  if (count == 0 || !out.reserve(n + 2 * count)) return 0;
  char* d = out.data();
  std::size_t o = 0;
  in_string = false;
  for (std::size_t i = 0; i < n; ++i) {
    const char c = s[i];
    if (!in_string && c == 'N' && i + 3 <= n && s[i + 1] == '/' && s[i + 2] == 'A') {
      std::memcpy(d + o, "\"N/A\"", 5);
      o += 5;
      i += 2;
      continue;
    }
    d[o++] = c;
    if (c == '"' && !in_string) {
      in_string = true;
    } else if (in_string && c == '\\' && i + 1 < n) {
      d[o++] = s[++i];
    } else if (in_string && c == '"') {
      in_string = false;
    }
  }
  out.set_size(o);
  out.seal();
  return count;
}

/// `raw` JSON text without the whitespace outside strings, into `out`.
inline void minify_json(std::string_view raw, std::string& out) {
  out.resize(raw.size());
  char* d = out.data();
  std::size_t o = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (in_string) {
      d[o++] = c;
      if (c == '\\' && i + 1 < raw.size()) d[o++] = raw[++i];
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
      d[o++] = c;
    } else if (c != ' ' && c != '\n' && c != '\t' && c != '\r') {
      d[o++] = c;
    }
  }
  out.resize(o);
}

inline void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

inline bool parse_hex4(std::string_view s, std::size_t i, std::uint32_t& v) {
  if (i + 4 > s.size()) return false;
  v = 0;
  for (std::size_t k = i; k < i + 4; ++k) {
    const char c = s[k];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= static_cast<std::uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f') v |= static_cast<std::uint32_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= static_cast<std::uint32_t>(c - 'A' + 10);
    else return false;
  }
  return true;
}

/// Lenient JSON string unescape: invalid escapes are kept literally (Windows paths, kineto #336).
/// Returns false when an invalid escape was met.
inline bool unescape(std::string_view raw, std::string& out) {
  out.clear();
  bool clean = true;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c != '\\' || i + 1 >= raw.size()) {
      out.push_back(c);
      continue;
    }
    const char e = raw[++i];
    switch (e) {
      case '"': out.push_back('"'); break;
      case '\\': out.push_back('\\'); break;
      case '/': out.push_back('/'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'u': {
        std::uint32_t cp = 0;
        if (!parse_hex4(raw, i + 1, cp)) {
          out += "\\u";
          clean = false;
          break;
        }
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          std::uint32_t lo = 0;
          if (i + 2 < raw.size() && raw[i + 1] == '\\' && raw[i + 2] == 'u' && parse_hex4(raw, i + 3, lo) &&
              lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
          } else {
            cp = 0xFFFD;
          }
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          cp = 0xFFFD;
        }
        append_utf8(out, cp);
        break;
      }
      default:
        out.push_back('\\');
        out.push_back(e);
        clean = false;
        break;
    }
  }
  return clean;
}

}  // namespace kinetoscope::analysis::detail
