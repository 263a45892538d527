// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file json_text.hpp
/// The one JSON string escaper (and the JSON validator) of the project: the trace writer's
/// json_out streams through escape_some(), the viewer's timeline writer appends with
/// append_json_string(). Header-only and dependency-free (ARCHITECTURE.md, "Layers").
///
/// The output of a string is always a valid JSON string of valid UTF-8:
/// * `"` and `\` are escaped; `\b \f \n \r \t` by their short forms; the other control
///   characters U+0000..U+001F and DEL (U+007F) as `\u00XX` (lower-case hex);
/// * `/` and every character above U+007F (U+2028 and U+2029 included: JSON allows them) are
///   copied unchanged;
/// * invalid UTF-8 becomes U+FFFD (written as the three UTF-8 bytes EF BF BD), one per maximal
///   ill-formed subpart (Unicode's "substitution of maximal subparts", what browsers and Python's
///   `decode(errors="replace")` do): overlongs, surrogates, > U+10FFFF, stray continuation
///   bytes and truncated sequences.
///
/// Documents built as a DOM (the HTTP API's payloads, `kinetoscope analyze --json`) use
/// nlohmann::json instead: a different job (ARCHITECTURE.md, "JSON").

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kinetoscope::formats {

/// How a string is sanitised before it is escaped.
enum class string_mode : std::uint8_t {
  /// Only JSON escaping (`"`, `\`, control characters) and UTF-8 repair.
  text,
  /// Names and labels, as Kineto writes them: every `\` becomes `/` and newline characters
  /// (`\n`, `\r`) are deleted; then as `text`.
  name,
};

namespace json_text_detail {

// Byte classes for the escaping loop.
inline constexpr std::uint8_t plain = 0;    // copied as is
inline constexpr std::uint8_t special = 1;  // ASCII that needs escaping or sanitising
inline constexpr std::uint8_t multi = 2;    // >= 0x80: part of a UTF-8 sequence (validated)

inline constexpr std::array<std::uint8_t, 256> byte_classes = [] {
  std::array<std::uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c) {
    if (c < 0x20 || c == '"' || c == '\\' || c == 0x7f) {
      t[static_cast<std::size_t>(c)] = special;
    } else if (c >= 0x80) {
      t[static_cast<std::size_t>(c)] = multi;
    } else {
      t[static_cast<std::size_t>(c)] = plain;
    }
  }
  return t;
}();

constexpr std::uint8_t byte_class(char c) { return byte_classes[static_cast<unsigned char>(c)]; }

inline constexpr char hex_digits[] = "0123456789abcdef";

}  // namespace json_text_detail

/// The largest output one input unit (one byte or one UTF-8 sequence) can produce: "\u00XX".
inline constexpr std::size_t max_escape_unit = 6;

/// Length of the valid UTF-8 sequence starting at `p` (2..4), or the number of bytes that form
/// the longest valid-but-truncated prefix (>= 1) with `valid` false. Called with *p >= 0x80.
inline std::size_t utf8_sequence(const unsigned char* p, const unsigned char* end, bool& valid) {
  const unsigned char c = p[0];
  std::size_t len = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xbf;  // range of the second byte; later bytes are always 80..BF
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    if (c == 0xe0) lo = 0xa0;  // no overlongs
    if (c == 0xed) hi = 0x9f;  // no surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    if (c == 0xf0) lo = 0x90;  // no overlongs
    if (c == 0xf4) hi = 0x8f;  // <= U+10FFFF
  } else {
    valid = false;  // continuation byte, C0/C1, F5..FF
    return 1;
  }
  for (std::size_t k = 1; k < len; ++k) {
    if (p + k >= end) {
      valid = false;
      return k;
    }
    const unsigned char b = p[k];
    const unsigned char want_lo = k == 1 ? lo : 0x80;
    const unsigned char want_hi = k == 1 ? hi : 0xbf;
    if (b < want_lo || b > want_hi) {
      valid = false;
      return k;
    }
  }
  valid = true;
  return len;
}

/// Escapes the body of a JSON string (no quotes) from [src, end) into [dst, dst_end) until the
/// input is consumed or fewer than max_escape_unit bytes of room remain; advances `dst` and
/// returns the first unconsumed input byte. The streaming form, for a fixed output buffer.
inline const char* escape_some(const char* src, const char* end, char*& dst, char* dst_end,
                               string_mode mode = string_mode::text) {
  using namespace json_text_detail;
  char* d = dst;
  while (src < end) {
    // Run of plain bytes: bounded by input and output room.
    const std::size_t room = static_cast<std::size_t>(dst_end - d);
    const char* run_end = src + std::min(room, static_cast<std::size_t>(end - src));
    while (src < run_end && byte_class(*src) == plain) *d++ = *src++;
    if (src == end) break;
    if (static_cast<std::size_t>(dst_end - d) < max_escape_unit) break;

    const auto c = static_cast<unsigned char>(*src);
    if (c < 0x80) {
      ++src;
      switch (c) {
        case '"':
          *d++ = '\\';
          *d++ = '"';
          break;
        case '\\':
          if (mode == string_mode::name) {
            *d++ = '/';
          } else {
            *d++ = '\\';
            *d++ = '\\';
          }
          break;
        case '\n':
          if (mode != string_mode::name) {
            *d++ = '\\';
            *d++ = 'n';
          }
          break;
        case '\r':
          if (mode != string_mode::name) {
            *d++ = '\\';
            *d++ = 'r';
          }
          break;
        case '\t':
          *d++ = '\\';
          *d++ = 't';
          break;
        case '\b':
          *d++ = '\\';
          *d++ = 'b';
          break;
        case '\f':
          *d++ = '\\';
          *d++ = 'f';
          break;
        default:
          *d++ = '\\';
          *d++ = 'u';
          *d++ = '0';
          *d++ = '0';
          *d++ = hex_digits[c >> 4];
          *d++ = hex_digits[c & 0xf];
          break;
      }
      continue;
    }
    bool valid = false;
    const std::size_t n = utf8_sequence(reinterpret_cast<const unsigned char*>(src),
                                        reinterpret_cast<const unsigned char*>(end), valid);
    if (valid) {
      std::memcpy(d, src, n);
      d += n;
    } else {
      // U+FFFD REPLACEMENT CHARACTER for the maximal ill-formed subpart.
      *d++ = static_cast<char>(0xef);
      *d++ = static_cast<char>(0xbf);
      *d++ = static_cast<char>(0xbd);
    }
    src += n;
  }
  dst = d;
  return src;
}

/// Appends `s` to `out` as the body of a JSON string (no quotes).
inline void append_json_string_body(std::string& out, std::string_view s,
                                    string_mode mode = string_mode::text) {
  const char* src = s.data();
  const char* end = src + s.size();
  while (src < end) {
    // Room for the whole rest unescaped plus one escape; grows geometrically when escapes
    // make the text longer.
    const std::size_t old = out.size();
    out.resize(old + static_cast<std::size_t>(end - src) + max_escape_unit);
    char* d = out.data() + old;
    src = escape_some(src, end, d, out.data() + out.size(), mode);
    out.resize(static_cast<std::size_t>(d - out.data()));
  }
}

/// Appends `s` to `out` as a quoted JSON string.
inline void append_json_string(std::string& out, std::string_view s,
                               string_mode mode = string_mode::text) {
  out.push_back('"');
  append_json_string_body(out, s, mode);
  out.push_back('"');
}

/// `s` as a quoted JSON string.
inline std::string json_string(std::string_view s, string_mode mode = string_mode::text) {
  std::string out;
  out.reserve(s.size() + 2);
  append_json_string(out, s, mode);
  return out;
}

// ---------------------------------------------------------------------------------------------
// JSON validator (recursive descent, no allocation).

namespace json_text_detail {

class validator {
 public:
  explicit validator(std::string_view text)
      : p_(reinterpret_cast<const unsigned char*>(text.data())), end_(p_ + text.size()) {}

  bool document() {
    skip_ws();
    if (!value(0)) return false;
    skip_ws();
    return p_ == end_;
  }

 private:
  static constexpr int max_depth = 512;

  void skip_ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  bool consume(char c) {
    if (p_ < end_ && *p_ == static_cast<unsigned char>(c)) {
      ++p_;
      return true;
    }
    return false;
  }
  bool word(std::string_view w) {
    if (static_cast<std::size_t>(end_ - p_) < w.size()) return false;
    if (std::memcmp(p_, w.data(), w.size()) != 0) return false;
    p_ += w.size();
    return true;
  }
  bool value(int depth) {
    if (p_ == end_ || depth > max_depth) return false;
    switch (*p_) {
      case '{':
        return object(depth + 1);
      case '[':
        return array(depth + 1);
      case '"':
        return string();
      case 't':
        return word("true");
      case 'f':
        return word("false");
      case 'n':
        return word("null");
      default:
        return number();
    }
  }
  bool object(int depth) {
    ++p_;  // '{'
    skip_ws();
    if (consume('}')) return true;
    for (;;) {
      skip_ws();
      if (p_ == end_ || *p_ != '"' || !string()) return false;
      skip_ws();
      if (!consume(':')) return false;
      skip_ws();
      if (!value(depth)) return false;
      skip_ws();
      if (consume('}')) return true;
      if (!consume(',')) return false;
    }
  }
  bool array(int depth) {
    ++p_;  // '['
    skip_ws();
    if (consume(']')) return true;
    for (;;) {
      skip_ws();
      if (!value(depth)) return false;
      skip_ws();
      if (consume(']')) return true;
      if (!consume(',')) return false;
    }
  }
  static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
  bool digits() {
    const unsigned char* start = p_;
    while (p_ < end_ && is_digit(*p_)) ++p_;
    return p_ != start;
  }
  bool number() {
    consume('-');
    if (p_ == end_) return false;
    if (*p_ == '0') {
      ++p_;
    } else if (!digits()) {
      return false;
    }
    if (consume('.') && !digits()) return false;
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (!consume('+')) consume('-');
      if (!digits()) return false;
    }
    return true;
  }
  static int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  bool hex4(unsigned& out) {
    if (end_ - p_ < 4) return false;
    out = 0;
    for (int k = 0; k < 4; ++k) {
      const int h = hex_value(*p_++);
      if (h < 0) return false;
      out = out * 16 + static_cast<unsigned>(h);
    }
    return true;
  }
  bool string() {
    ++p_;  // '"'
    while (p_ < end_) {
      const unsigned char c = *p_;
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        ++p_;
        if (p_ == end_) return false;
        const unsigned char e = *p_++;
        if (e == 'u') {
          unsigned cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xdc00 && cp <= 0xdfff) return false;  // lone low surrogate
          if (cp >= 0xd800 && cp <= 0xdbff) {              // needs a low surrogate next
            unsigned low = 0;
            if (!consume('\\') || !consume('u') || !hex4(low)) return false;
            if (low < 0xdc00 || low > 0xdfff) return false;
          }
        } else if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' &&
                   e != 'r' && e != 't') {
          return false;
        }
        continue;
      }
      if (c >= 0x80) {
        bool valid = false;
        const std::size_t n = utf8_sequence(p_, end_, valid);
        if (!valid) return false;
        p_ += n;
        continue;
      }
      ++p_;
    }
    return false;  // unterminated
  }

  const unsigned char* p_;
  const unsigned char* end_;
};

}  // namespace json_text_detail

/// Whether `text` is exactly one JSON value (RFC 8259, surrounding whitespace allowed) made of
/// valid UTF-8, with no lone surrogate escapes and nesting at most 512 deep. Used to decide
/// whether a text can be embedded verbatim as a JSON value.
inline bool is_valid_json(std::string_view text) {
  return json_text_detail::validator(text).document();
}

}  // namespace kinetoscope::formats
