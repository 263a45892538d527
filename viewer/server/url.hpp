// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file url.hpp
/// Request-target parsing for the HTTP layer: split path and query, percent-decode, strip the
/// --path_prefix, and refuse hostile targets (`..` segments, NUL, backslashes, absolute paths
/// after the prefix, over-long parts) before anything else looks at them. No Beast here.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kinetoscope::server {

/// A request target that passed every check.
struct parsed_target {
  /// Decoded path below the prefix, without the leading '/': "", "index.html", "api/runs".
  std::string path;
  std::vector<std::pair<std::string, std::string>> query;  ///< decoded
};

/// Why a request target was refused, with the status to answer.
struct target_error {
  unsigned status;      ///< 400 or 404 (outside the prefix) or 414 (too long)
  std::string message;
};

/// Percent-decodes `s` ('+' becomes ' ' when `plus_is_space`); nullopt on a bad escape or NUL.
std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space);

/// Normalises a --path_prefix: "" or "/" -> ""; "x", "/x/", "/x" -> "/x". nullopt when it has
/// "..", "//", '?', '#', '%' or control characters.
std::optional<std::string> normalize_prefix(std::string_view prefix);

/// Either target or error is set.
struct target_result {
  std::optional<parsed_target> target;
  std::optional<target_error> error;
};
/// Parses a request target against `prefix` (normalised): 414 over 8 KiB; 404 outside the
/// prefix; 400 for a target not starting with '/', bad escapes, NUL, backslashes, control
/// bytes, '.'/'..' or empty segments (encoded or not), an encoded '/', more than 64 query
/// parameters or one longer than 4 KiB. In the query '+' is a space; order is kept; pairs with
/// an empty key are dropped.
target_result parse_target(std::string_view target, std::string_view prefix);

/// True when an Accept-Encoding header value allows gzip: "gzip" (or "x-gzip") with q > 0, or
/// "*" with q > 0 when gzip is not listed. Codings are case-insensitive; "gzip;q=0" refuses.
bool accepts_gzip(std::string_view accept_encoding);

/// True when an If-None-Match header value matches `etag` ("*", or a comma list of entity tags
/// compared weakly as RFC 9110 requires for If-None-Match: a "W/" prefix is ignored).
bool etag_matches(std::string_view if_none_match, std::string_view etag);

/// Which Host header values the server answers (a defence against DNS rebinding: a page on
/// evil.example whose name is made to resolve to 127.0.0.1 sends "Host: evil.example", so
/// refusing unknown names keeps it from reading the API). Allowed: IP literals (a rebinding needs
/// a name), "localhost" and names below ".localhost", the names in `names` (case-insensitive; one
/// starting with '.' also allows every name below it: ".example.com" allows "a.example.com" and
/// "example.com"), or anything when `allow_all`.
struct host_policy {
  bool allow_all = false;
  std::vector<std::string> names;  ///< --host (when a name), --allowed_hosts, the machine's name
};

/// The host part of a Host header value: "name" of "name:port", "::1" of "[::1]:port", lower-case;
/// nullopt when it is malformed (empty, a bad port, unbalanced brackets, characters no host name
/// or address has).
std::optional<std::string> host_of(std::string_view host_header);

/// Whether a request with this Host header value may be answered under `policy`. A missing
/// header (`host_header` nullopt) is allowed: HTTP/1.0 clients may omit it and browsers always send it.
bool host_allowed(std::optional<std::string_view> host_header, const host_policy& policy);

/// Parses --allowed_hosts: a comma-separated list of names ("a.example,.corp.example", "*" for
/// any); nullopt when an entry is empty or not a host name.
std::optional<std::vector<std::string>> parse_allowed_hosts(std::string_view list);

}  // namespace kinetoscope::server
