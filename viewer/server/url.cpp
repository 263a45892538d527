// SPDX-License-Identifier: BSD-3-Clause
// Request-target parsing (url.hpp). Strict by design: a browser never sends what is refused
// here, so anything unusual is treated as an attack and answered 400 before routing.
#include "server/url.hpp"

#include <algorithm>
#include <cctype>
#include <cstddef>

namespace kinetoscope::server {
namespace {

constexpr std::size_t max_target_bytes = 8 * 1024;
constexpr std::size_t max_query_params = 64;
constexpr std::size_t max_param_bytes = 4 * 1024;

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// A C0 control character or DEL.
bool is_control(char c) noexcept {
  const auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}

/// Characters allowed unencoded in a request target: visible ASCII (RFC 9112 forbids spaces,
/// controls and non-ASCII bytes; browsers percent-encode them).
bool is_target_char(char c) noexcept {
  const auto u = static_cast<unsigned char>(c);
  return u > 0x20 && u < 0x7f;
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

/// Calls f(item) for every trimmed, non-empty item of a comma-separated header value.
template <class F>
void for_each_item(std::string_view list, F&& f) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view item = trim(list.substr(0, comma));
    if (!item.empty()) f(item);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

target_result fail(unsigned status, std::string message) {
  return {std::nullopt, target_error{status, std::move(message)}};
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      const int hi = hex_value(s[i + 1]);
      const int lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    }
    if (c == '\0') return std::nullopt;
    out.push_back(c);
  }
  return out;
}

std::optional<std::string> normalize_prefix(std::string_view prefix) {
  std::string p(prefix);
  if (p.empty() || p == "/") return std::string();
  if (p.front() != '/') p.insert(p.begin(), '/');
  if (p.back() == '/') p.pop_back();
  for (char c : p)
    if (is_control(c) || c == '?' || c == '#' || c == '%' || c == '\\' || c == ' ' ||
        static_cast<unsigned char>(c) >= 0x80)
      return std::nullopt;
  // Segments: "/a/b" -> "a", "b"; empty ones come from "//" (or a doubled trailing slash).
  std::size_t begin = 1;
  while (begin <= p.size()) {
    std::size_t end = p.find('/', begin);
    if (end == std::string::npos) end = p.size();
    const std::string_view segment(p.data() + begin, end - begin);
    if (segment.empty() || segment == "." || segment == "..") return std::nullopt;
    begin = end + 1;
  }
  return p;
}

target_result parse_target(std::string_view target, std::string_view prefix) {
  if (target.size() > max_target_bytes)
    return fail(414, "request target longer than " + std::to_string(max_target_bytes) + " bytes");
  if (target.empty() || target.front() != '/')
    return fail(400, "request target must be a path starting with '/'");
  for (char c : target) {
    if (c == '\0') return fail(400, "NUL in request target");
    if (!is_target_char(c)) return fail(400, "control, space or non-ASCII byte in request target");
    if (c == '\\') return fail(400, "backslash in request target");
    if (c == '#') return fail(400, "fragment in request target");
  }

  const std::size_t qmark = target.find('?');
  std::string_view raw_path = target.substr(0, qmark);
  const std::string_view raw_query =
      qmark == std::string_view::npos ? std::string_view() : target.substr(qmark + 1);

  // The prefix is compared on the raw path: it never holds '%', so an encoded form of it is
  // simply another path (404), and "/pother" must not match "/p".
  if (!prefix.empty()) {
    if (raw_path.size() <= prefix.size() || raw_path.substr(0, prefix.size()) != prefix ||
        raw_path[prefix.size()] != '/')
      return fail(404, "not found (outside the path prefix " + std::string(prefix) + ")");
    raw_path.remove_prefix(prefix.size());
  }
  raw_path.remove_prefix(1);  // the leading '/'

  parsed_target result;
  // Segment by segment, so that an encoded '/' cannot create a segment and encoded dots are
  // caught after decoding. The last segment may be empty (a trailing slash), no other may.
  std::size_t begin = 0;
  while (!raw_path.empty() && begin <= raw_path.size()) {
    std::size_t end = raw_path.find('/', begin);
    const bool last = end == std::string_view::npos;
    if (last) end = raw_path.size();
    const std::string_view raw_segment = raw_path.substr(begin, end - begin);
    if (raw_segment.empty() && !last) return fail(400, "empty path segment ('//')");
    auto segment = percent_decode(raw_segment, false);
    if (!segment) return fail(400, "bad percent escape or NUL in path");
    if (*segment == "." || *segment == "..") return fail(400, "'.' or '..' segment in path");
    for (char c : *segment) {
      if (c == '/') return fail(400, "encoded '/' in path segment");
      if (c == '\\') return fail(400, "backslash in path");
      if (is_control(c)) return fail(400, "control character in path");
    }
    if (begin != 0) result.path.push_back('/');
    result.path += *segment;
    begin = end + 1;
  }

  std::size_t pos = 0;
  while (pos <= raw_query.size() && !raw_query.empty()) {
    std::size_t end = raw_query.find('&', pos);
    if (end == std::string_view::npos) end = raw_query.size();
    const std::string_view pair = raw_query.substr(pos, end - pos);
    pos = end + 1;
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    const std::string_view raw_key = pair.substr(0, eq);
    const std::string_view raw_value =
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    auto key = percent_decode(raw_key, true);
    auto value = percent_decode(raw_value, true);
    if (!key || !value) return fail(400, "bad percent escape or NUL in query");
    if (key->empty()) continue;
    if (key->size() > max_param_bytes || value->size() > max_param_bytes)
      return fail(400, "query parameter longer than " + std::to_string(max_param_bytes) + " bytes");
    if (result.query.size() == max_query_params)
      return fail(400, "more than " + std::to_string(max_query_params) + " query parameters");
    result.query.emplace_back(std::move(*key), std::move(*value));
  }
  return {std::move(result), std::nullopt};
}

bool accepts_gzip(std::string_view accept_encoding) {
  int gzip = -1, star = -1;  // -1: not listed, 0: refused (q=0), 1: accepted
  for_each_item(accept_encoding, [&](std::string_view item) {
    const std::size_t semi = item.find(';');
    const std::string_view coding = trim(item.substr(0, semi));
    bool allowed = true;
    if (semi != std::string_view::npos) {
      std::string_view params = item.substr(semi + 1);
      while (!params.empty()) {
        const std::size_t next = params.find(';');
        const std::string_view param = trim(params.substr(0, next));
        if (param.size() >= 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=') {
          // q-values are "0", "0.", "0.0" .. "1.000": allowed unless every digit is zero.
          const std::string_view value = trim(param.substr(2));
          allowed = value.find_first_of("123456789") != std::string_view::npos;
        }
        if (next == std::string_view::npos) break;
        params.remove_prefix(next + 1);
      }
    }
    if (iequals(coding, "gzip") || iequals(coding, "x-gzip"))
      gzip = std::max(gzip, allowed ? 1 : 0);
    else if (coding == "*")
      star = allowed ? 1 : 0;
  });
  if (gzip >= 0) return gzip == 1;
  return star == 1;
}

bool etag_matches(std::string_view if_none_match, std::string_view etag) {
  if (etag.empty()) return false;
  const auto opaque = [](std::string_view tag) {
    if (tag.size() >= 2 && tag[0] == 'W' && tag[1] == '/') tag.remove_prefix(2);
    return tag;
  };
  bool match = false;
  for_each_item(if_none_match, [&](std::string_view item) {
    if (item == "*" || opaque(item) == opaque(etag)) match = true;
  });
  return match;
}

namespace {

bool host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

bool is_ipv4(std::string_view h) {
  int parts = 0;
  while (true) {
    std::size_t n = 0;
    unsigned value = 0;
    while (n < h.size() && n < 4 && h[n] >= '0' && h[n] <= '9') value = value * 10 + unsigned(h[n++] - '0');
    if (n == 0 || n > 3 || value > 255) return false;
    ++parts;
    h.remove_prefix(n);
    if (h.empty()) return parts == 4;
    if (h.front() != '.' || parts == 4) return false;
    h.remove_prefix(1);
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::optional<std::string> host_of(std::string_view header) {
  while (!header.empty() && (header.front() == ' ' || header.front() == '\t')) header.remove_prefix(1);
  while (!header.empty() && (header.back() == ' ' || header.back() == '\t')) header.remove_suffix(1);
  std::string_view host = header, port;
  if (!header.empty() && header.front() == '[') {
    const std::size_t close = header.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = header.substr(1, close - 1);
    const std::string_view rest = header.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port = rest.substr(1);
      if (port.empty()) return std::nullopt;
    }
    if (host.empty() || host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string_view::npos) return std::nullopt;
  } else {
    if (const std::size_t colon = header.find(':'); colon != std::string_view::npos) {
      host = header.substr(0, colon);
      port = header.substr(colon + 1);
      if (port.empty()) return std::nullopt;
    }
    if (host.empty()) return std::nullopt;
  }
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  std::string h = lower(host);
  if (header.front() != '[' && !std::all_of(h.begin(), h.end(), host_char)) return std::nullopt;
  if (h.size() > 1 && h.back() == '.') h.pop_back();  // "localhost." is "localhost"
  return h;
}

bool host_allowed(std::optional<std::string_view> host_header, const host_policy& policy) {
  if (policy.allow_all || !host_header) return true;
  const std::optional<std::string> host = host_of(*host_header);
  if (!host) return false;
  const std::string& h = *host;
  if (h.find(':') != std::string::npos || is_ipv4(h)) return true;  // an IP literal
  if (h == "localhost" || h.ends_with(".localhost")) return true;
  for (const std::string& name : policy.names) {
    if (name == "*") return true;
    if (!name.empty() && name.front() == '.') {
      if (h == std::string_view(name).substr(1) || h.ends_with(name)) return true;
    } else if (h == name) {
      return true;
    }
  }
  return false;
}

std::optional<std::vector<std::string>> parse_allowed_hosts(std::string_view list) {
  std::vector<std::string> out;
  while (true) {
    const std::size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    std::string name = lower(item);
    if (name.empty()) return std::nullopt;
    if (name != "*") {
      const std::string_view body = name.front() == '.' ? std::string_view(name).substr(1) : std::string_view(name);
      if (body.empty() || !std::all_of(body.begin(), body.end(), host_char)) return std::nullopt;
    }
    out.push_back(std::move(name));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace kinetoscope::server
