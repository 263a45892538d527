// SPDX-License-Identifier: BSD-3-Clause
// Request-target parsing (viewer/server/url.hpp): every refusal rule, prefixes, queries, and the
// Accept-Encoding / If-None-Match helpers.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "server/url.hpp"

using namespace kinetoscope::server;

namespace {

/// The status a target is refused with, or 200 when it parses.
unsigned status_of(std::string_view target, std::string_view prefix = "") {
  const target_result r = parse_target(target, prefix);
  CHECK(r.target.has_value() != r.error.has_value());
  if (r.error) {
    CHECK(!r.error->message.empty());
    return r.error->status;
  }
  return 200;
}

std::string path_of(std::string_view target, std::string_view prefix = "") {
  const target_result r = parse_target(target, prefix);
  REQUIRE_MESSAGE(r.target.has_value(), std::string(target));
  return r.target->path;
}

}  // namespace

TEST_CASE("percent_decode") {
  CHECK(percent_decode("a%20b%2Fc%2f", false) == "a b/c/");
  CHECK(percent_decode("a+b", false) == "a+b");
  CHECK(percent_decode("a+b%2B", true) == "a b+");
  CHECK(percent_decode("%C3%A9", false) == "\xC3\xA9");
  CHECK(percent_decode("", false) == "");
  CHECK_FALSE(percent_decode("%zz", false));
  CHECK_FALSE(percent_decode("%4", false));
  CHECK_FALSE(percent_decode("abc%", false));
  CHECK_FALSE(percent_decode("%g0", false));
  CHECK_FALSE(percent_decode("a%00b", false));
  CHECK_FALSE(percent_decode(std::string_view("a\0b", 3), false));
}

TEST_CASE("normalize_prefix") {
  CHECK(normalize_prefix("") == "");
  CHECK(normalize_prefix("/") == "");
  CHECK(normalize_prefix("x") == "/x");
  CHECK(normalize_prefix("/x") == "/x");
  CHECK(normalize_prefix("/x/") == "/x");
  CHECK(normalize_prefix("/profiler/v2") == "/profiler/v2");
  CHECK_FALSE(normalize_prefix("/a/../b"));
  CHECK_FALSE(normalize_prefix(".."));
  CHECK_FALSE(normalize_prefix("/a/./b"));
  CHECK_FALSE(normalize_prefix("//a"));
  CHECK_FALSE(normalize_prefix("/a//b"));
  CHECK_FALSE(normalize_prefix("/a//"));
  CHECK_FALSE(normalize_prefix("/a?b"));
  CHECK_FALSE(normalize_prefix("/a#b"));
  CHECK_FALSE(normalize_prefix("/a%2e"));
  CHECK_FALSE(normalize_prefix("/a\\b"));
  CHECK_FALSE(normalize_prefix("/a\nb"));
  CHECK_FALSE(normalize_prefix(std::string_view("/a\0b", 4)));
}

TEST_CASE("parse_target: ordinary targets") {
  CHECK(path_of("/") == "");
  CHECK(path_of("/index.html") == "index.html");
  CHECK(path_of("/api/runs") == "api/runs");
  CHECK(path_of("/assets/app.0123abcd.js") == "assets/app.0123abcd.js");
  CHECK(path_of("/api/operation/table?run=a") == "api/operation/table");
  CHECK(path_of("/a%20b/c") == "a b/c");
  CHECK(path_of("/a+b") == "a+b");  // '+' is a space only in the query
  CHECK(path_of("/api/runs/") == "api/runs/");
  CHECK(path_of("/..a/b..") == "..a/b..");  // dots inside a name are not dot segments
}

TEST_CASE("parse_target: hostile paths are refused with 400") {
  CHECK(status_of("/../etc/passwd") == 400);
  CHECK(status_of("/api/../../etc/passwd") == 400);
  CHECK(status_of("/%2e%2e/x") == 400);
  CHECK(status_of("/a/%2E./b") == 400);
  CHECK(status_of("/a/.%2e/b") == 400);
  CHECK(status_of("/a/./b") == 400);
  CHECK(status_of("/a/%2e/b") == 400);
  CHECK(status_of("/a/..") == 400);
  CHECK(status_of("/.") == 400);
  CHECK(status_of("/%00") == 400);
  CHECK(status_of(std::string_view("/a\0b", 4)) == 400);
  CHECK(status_of("/a%5c..%5cb") == 400);
  CHECK(status_of("/a\\b") == 400);
  CHECK(status_of("/a%2fb") == 400);  // an encoded '/' would make a segment out of thin air
  CHECK(status_of("//etc") == 400);
  CHECK(status_of("/a//b") == 400);
  CHECK(status_of("/a%0ab") == 400);
  CHECK(status_of("/a%7fb") == 400);
  CHECK(status_of("/a\tb") == 400);
  CHECK(status_of("/a b") == 400);
  CHECK(status_of("/a\x7f") == 400);
  CHECK(status_of("/caf\xC3\xA9") == 400);  // raw non-ASCII: browsers encode it
  CHECK(status_of("/a#frag") == 400);
  CHECK(status_of("/%zz") == 400);
  CHECK(status_of("/%4") == 400);
  CHECK(status_of("") == 400);
  CHECK(status_of("*") == 400);
  CHECK(status_of("api/runs") == 400);
  CHECK(status_of("http://example.com/api/runs") == 400);
  CHECK(status_of("HTTP://127.0.0.1:6006/") == 400);
}

TEST_CASE("parse_target: length limits") {
  const std::string longest = "/" + std::string(8191, 'a');
  CHECK(status_of(longest) == 200);
  CHECK(status_of(longest + "a") == 414);
  CHECK(status_of("/?q=" + std::string(10 * 1024, 'x')) == 414);

  CHECK(status_of("/api/x?q=" + std::string(4096, 'x')) == 200);
  CHECK(status_of("/api/x?q=" + std::string(4097, 'x')) == 400);
  CHECK(status_of("/api/x?" + std::string(4097, 'k') + "=1") == 400);
  // the limit is on decoded bytes: 2000 escapes (6000 bytes) decode to 2000
  std::string escaped = "/api/x?q=";
  for (int i = 0; i < 2000; ++i) escaped += "%41";
  CHECK(status_of(escaped) == 200);

  std::string many = "/api/x?";
  for (int i = 0; i < 64; ++i) many += "k" + std::to_string(i) + "=" + std::to_string(i) + "&";
  CHECK(status_of(many) == 200);
  CHECK(parse_target(many, "").target->query.size() == 64);
  CHECK(status_of(many + "k64=64") == 400);
  CHECK(status_of(many + "=ignored&&") == 200);  // empty keys and pairs do not count
}

TEST_CASE("parse_target: query decoding keeps order, '+' is a space, empty keys dropped") {
  const target_result r =
      parse_target("/api/timeline/search?q=conv+2d%2Bx&limit=5&=x&&flag&q=second&e=", "");
  REQUIRE(r.target);
  CHECK(r.target->path == "api/timeline/search");
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"q", "conv 2d+x"}, {"limit", "5"}, {"flag", ""}, {"q", "second"}, {"e", ""}};
  CHECK(r.target->query == expected);

  CHECK(parse_target("/api/x?a=b=c", "").target->query ==
        std::vector<std::pair<std::string, std::string>>{{"a", "b=c"}});
  CHECK(parse_target("/api/x?", "").target->query.empty());
  CHECK(status_of("/api/runs?run=%zz") == 400);
  CHECK(status_of("/api/runs?run=a%00") == 400);
  CHECK(status_of("/api/runs?%zz=1") == 400);
  // the query may hold what the path may not: it is data, never a path
  CHECK(parse_target("/api/x?p=..%2F..%5Cetc", "").target->query.front().second == "../..\\etc");
}

TEST_CASE("parse_target: path prefix") {
  CHECK(path_of("/p/api/runs", "/p") == "api/runs");
  CHECK(path_of("/p/", "/p") == "");
  CHECK(path_of("/p/assets/app.js?x=1", "/p") == "assets/app.js");
  CHECK(path_of("/a/b/index.html", "/a/b") == "index.html");
  CHECK(status_of("/pother", "/p") == 404);
  CHECK(status_of("/pother/api/runs", "/p") == 404);
  CHECK(status_of("/api/runs", "/p") == 404);
  CHECK(status_of("/", "/p") == 404);
  CHECK(status_of("/p", "/p") == 404);  // the server redirects "/p" to "/p/" before parsing
  CHECK(status_of("/%70/api/runs", "/p") == 404);
  CHECK(status_of("/a/api", "/a/b") == 404);
  // below the prefix the same rules hold
  CHECK(status_of("/p/../etc/passwd", "/p") == 400);
  CHECK(status_of("/p//etc", "/p") == 400);
  CHECK(status_of("/p/%2e%2e/x", "/p") == 400);
  CHECK(status_of("/../p/api/runs", "/p") == 404);  // outside the prefix before anything else
}

TEST_CASE("accepts_gzip") {
  CHECK(accepts_gzip("gzip"));
  CHECK(accepts_gzip("gzip, deflate, br"));
  CHECK(accepts_gzip("br;q=1.0, GZIP;q=0.5"));
  CHECK(accepts_gzip("x-gzip"));
  CHECK(accepts_gzip("*"));
  CHECK(accepts_gzip("deflate, *;q=0.1"));
  CHECK(accepts_gzip("gzip;q=0.001"));
  CHECK_FALSE(accepts_gzip(""));
  CHECK_FALSE(accepts_gzip("identity"));
  CHECK_FALSE(accepts_gzip("deflate, br"));
  CHECK_FALSE(accepts_gzip("gzip;q=0"));
  CHECK_FALSE(accepts_gzip("gzip; q=0.000"));
  CHECK_FALSE(accepts_gzip("gzip;q=0, *"));  // listed gzip wins over the wildcard
  CHECK_FALSE(accepts_gzip("*;q=0"));
  CHECK_FALSE(accepts_gzip("gzipx"));
}

TEST_CASE("etag_matches") {
  CHECK(etag_matches("\"abc\"", "\"abc\""));
  CHECK(etag_matches("\"x\", \"abc\"", "\"abc\""));
  CHECK(etag_matches("W/\"abc\"", "\"abc\""));
  CHECK(etag_matches("*", "\"abc\""));
  CHECK_FALSE(etag_matches("\"abd\"", "\"abc\""));
  CHECK_FALSE(etag_matches("abc", "\"abc\""));
  CHECK_FALSE(etag_matches("", "\"abc\""));
  CHECK_FALSE(etag_matches("\"abc\"", ""));
}

TEST_CASE("host_of: the host part of a Host header, lower-case") {
  CHECK(host_of("localhost") == "localhost");
  CHECK(host_of("LocalHost:6006") == "localhost");
  CHECK(host_of("localhost.:80") == "localhost");
  CHECK(host_of("127.0.0.1:6006") == "127.0.0.1");
  CHECK(host_of("[::1]:6006") == "::1");
  CHECK(host_of("[::1]") == "::1");
  CHECK(host_of(" viewer.example.com ") == "viewer.example.com");
  CHECK_FALSE(host_of(""));
  CHECK_FALSE(host_of(":6006"));
  CHECK_FALSE(host_of("a:"));
  CHECK_FALSE(host_of("a:66a"));
  CHECK_FALSE(host_of("a:123456"));
  CHECK_FALSE(host_of("[::1"));
  CHECK_FALSE(host_of("[::1]x"));
  CHECK_FALSE(host_of("[evil.com]"));
  CHECK_FALSE(host_of("a b"));
  CHECK_FALSE(host_of("a/b"));
  CHECK_FALSE(host_of("a@b"));
}

TEST_CASE("host_allowed: IP literals, localhost and named hosts only (DNS rebinding)") {
  const host_policy strict{false, {"viewer.example.com", ".corp.example"}};
  for (const char* ok : {"localhost", "localhost:6006", "app.localhost", "127.0.0.1:6006", "10.1.2.3", "[::1]:1",
                         "[fe80::1]", "viewer.example.com:6006", "VIEWER.example.com", "corp.example", "a.b.corp.example"}) {
    CAPTURE(ok);
    CHECK(host_allowed(std::string_view(ok), strict));
  }
  for (const char* refused : {"evil.example", "viewer.example.com.evil.example", "localhost.evil.example",
                              "xcorp.example", "1.2.3", "1.2.3.4.5", "256.1.1.1", "127.0.0.1.nip.io", "", "a b"}) {
    CAPTURE(refused);
    CHECK_FALSE(host_allowed(std::string_view(refused), strict));
  }
  CHECK(host_allowed(std::nullopt, strict));  // HTTP/1.0 without Host
  const host_policy all{true, {}};
  CHECK(host_allowed(std::string_view("evil.example"), all));
  const host_policy star{false, {"*"}};
  CHECK(host_allowed(std::string_view("evil.example"), star));
}

TEST_CASE("parse_allowed_hosts") {
  CHECK(parse_allowed_hosts("a.example") == std::vector<std::string>{"a.example"});
  CHECK(parse_allowed_hosts("A.example, .Corp.example,*") ==
        std::vector<std::string>{"a.example", ".corp.example", "*"});
  CHECK_FALSE(parse_allowed_hosts(""));
  CHECK_FALSE(parse_allowed_hosts("a,,b"));
  CHECK_FALSE(parse_allowed_hosts("."));
  CHECK_FALSE(parse_allowed_hosts("a/b"));
  CHECK_FALSE(parse_allowed_hosts("a:80"));
}
