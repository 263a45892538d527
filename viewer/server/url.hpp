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

struct parsed_target {
  std::string path;  ///< decoded path below the prefix, without the leading '/': "", "index.html", "api/runs"
  std::vector<std::pair<std::string, std::string>> query;  ///< decoded
};

struct target_error {
  unsigned status;      ///< 400 or 404 (outside the prefix) or 414 (too long)
  std::string message;
};

/// Percent-decodes `s` ('+' becomes ' ' when `plus_is_space`); nullopt on a bad escape or NUL.
std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space);

/// Normalises a --path_prefix: "" or "/" -> ""; "x", "/x/", "/x" -> "/x". nullopt when it has
/// "..", "//", '?', '#', '%' or control characters.
std::optional<std::string> normalize_prefix(std::string_view prefix);

/// Parses a request target against `prefix` (normalised). Either result or error is set.
struct target_result {
  std::optional<parsed_target> target;
  std::optional<target_error> error;
};
target_result parse_target(std::string_view target, std::string_view prefix);

}  // namespace kinetoscope::server
