// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file api.hpp
/// The viewer's JSON API (viewer/server/http-api.md) as a plain function of a decoded request:
/// no sockets, no Beast, so it is tested in-process and the HTTP layer (http_server.cpp) stays a
/// thin transport. Thread-safe: handle() may run on every I/O thread at once.

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kinetoscope::server {

class store;

/// A request below `<prefix>/api/`, already split and percent-decoded by the HTTP layer.
struct api_request {
  std::string route;  ///< path after "api/", e.g. "overview", "operation/table", "timeline"
  std::vector<std::pair<std::string, std::string>> query;  ///< decoded, in order
  /// The first value of `name`, or nullptr.
  const std::string* param(std::string_view name) const;
};

/// A JSON (or CSV) answer; the HTTP layer adds headers and compression.
struct api_response {
  unsigned status = 200;
  std::string content_type = "application/json; charset=utf-8";
  std::string body;
};

/// Routes API requests to the views of the profiles in `store`.
class api {
 public:
  explicit api(store& s) : store_(s) {}
  api_response handle(const api_request& request) const;

 private:
  store& store_;
};

/// `{"error": message}` with `status`.
api_response error_response(unsigned status, std::string_view message);

struct profile;
/// The key of a request among a profile's summary bodies (file_summary::bodies): the route and
/// its query sorted, without run, worker and span.
std::string request_key(const api_request& request);
/// The requests the web app makes by default for a profile's views, which a summary answers
/// without the model (units, group_by values and routes as web/src/views send them, plus the
/// same routes without parameters), with their bodies for `p` (the overview for one worker).
/// Bodies larger than `max_body_bytes` are left out (served from the full profile).
std::map<std::string, std::string> canonical_bodies(const profile& p, std::size_t max_body_bytes);

}  // namespace kinetoscope::server
