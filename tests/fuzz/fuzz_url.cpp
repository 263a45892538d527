// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: the request-target parser and the header helpers the HTTP layer calls on
// every request (url.hpp), on arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/url.hpp"

namespace ks = kinetoscope::server;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view s(reinterpret_cast<const char*>(data), size);
  for (std::string_view prefix : {std::string_view(), std::string_view("/prof")}) {
    const ks::target_result r = ks::parse_target(s, prefix);
    if (r.target.has_value() == r.error.has_value()) std::abort();  // exactly one is set
    if (r.target) {
      // Whatever passes never climbs out: no "..", NUL or backslash in the decoded path.
      const std::string& p = r.target->path;
      if (p.find('\0') != std::string::npos || p.find('\\') != std::string::npos) std::abort();
      if (p == ".." || p.starts_with("../") || p.find("/../") != std::string::npos || p.ends_with("/..")) std::abort();
    }
  }
  (void)ks::percent_decode(s, true);
  (void)ks::normalize_prefix(s);
  (void)ks::accepts_gzip(s);
  (void)ks::etag_matches(s, "\"abc\"");
  const ks::host_policy policy{false, {"viewer.example.com", ".corp.example"}};
  const bool allowed = ks::host_allowed(s, policy);
  if (allowed && !ks::host_of(s)) std::abort();  // only well-formed hosts pass
  (void)ks::parse_allowed_hosts(s);
  return 0;
}
