// SPDX-License-Identifier: BSD-3-Clause
// The real `kinetoscope --logdir` binary (env KINETOSCOPE_BIN) on a temporary logdir built from
// tests/data/real/traces, spoken to over raw POSIX sockets: static assets, caching, compression,
// the API's headers, hostile requests, the path prefix, start-up errors and shutdown.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <gnu/libc-version.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include "../real_traces.hpp"

extern char** environ;

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

/// A temporary folder removed on destruction.
struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string tmpl = (fs::temp_directory_path() / "kinetoscope_http_XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

/// The logdir of these tests: two runs copied from tests/data/real/traces (3 trace files).
struct test_logdir {
  temp_dir dir;
  fs::path logdir = dir.path / "logs";
  std::uintmax_t bytes = 0;
  std::size_t files = 0;
  test_logdir() {
    const fs::path traces = fs::path(kinetoscope::test::real_traces()) / "traces";
    REQUIRE_MESSAGE(fs::is_directory(traces), "KINETOSCOPE_REAL_TRACES/traces missing");
    fs::create_directories(logdir);
    for (const char* run : {"resnet50_v100", "cpu_only"})
      fs::copy(traces / run, logdir / run, fs::copy_options::recursive);
    for (const auto& e : fs::recursive_directory_iterator(logdir))
      if (e.is_regular_file()) {
        bytes += e.file_size();
        ++files;
      }
  }
};

/// The kinetoscope binary as a child process: stdout on a pipe (the start line), stderr into a
/// file. Killed and reaped on destruction whatever happened, so no test leaves it behind.
class child {
 public:
  /// `nofile`: run it under that hard descriptor limit, with a soft limit of half of it (set
  /// by /bin/sh's ulimit; the server raises the soft one).
  child(const std::vector<std::string>& args, const fs::path& stderr_file, int nofile = 0) {
    std::string bin = env_or_empty("KINETOSCOPE_BIN");
    REQUIRE_MESSAGE(!bin.empty(), "KINETOSCOPE_BIN is not set");
    std::vector<std::string> words;
    if (nofile > 0) {
      words = {"sh", "-c",
               "ulimit -Sn " + std::to_string(nofile / 2) + " && ulimit -Hn " + std::to_string(nofile) +
                   " && exec \"$0\" \"$@\"",
               bin};
      bin = "/bin/sh";
    }
    int fds[2];
    REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_file.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> argv;
    if (words.empty()) argv.push_back(const_cast<char*>(bin.c_str()));
    for (const std::string& w : words) argv.push_back(const_cast<char*>(w.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, bin.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out_ = fds[0];
    REQUIRE_MESSAGE(rc == 0, "posix_spawn failed");
    stderr_file_ = stderr_file;
  }
  ~child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) close(out_);
  }
  child(const child&) = delete;
  child& operator=(const child&) = delete;

  /// The first stdout line ("" when stdout closed or nothing came within `timeout`).
  std::string first_line(std::chrono::milliseconds timeout = 30s) {
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char c;
      if (read(out_, &c, 1) != 1) break;
      if (c == '\n') return line;
      line.push_back(c);
    }
    return line;
  }

  /// Waits for the exit; the exit status, or -signal when killed, or nullopt on timeout.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout = 20s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
      std::this_thread::sleep_for(10ms);
    }
    return std::nullopt;
  }

  void signal(int sig) const { kill(pid_, sig); }
  pid_t pid() const { return pid_; }

  std::string stderr_text() const {
    std::ifstream in(stderr_file_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  fs::path stderr_file_;
};

struct response {
  int status = 0;
  std::string status_line;
  std::map<std::string, std::string> headers;  ///< lower-case names
  std::string body;
  bool has(const std::string& name) const { return headers.count(name) != 0; }
  std::string header(const std::string& name) const {
    const auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

/// A plain blocking TCP connection with poll() time limits.
class connection {
 public:
  explicit connection(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~connection() { close(fd_); }
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  /// Sends all of `data`; false when the peer closed (EPIPE/ECONNRESET).
  bool send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  /// Reads one response; nullopt when the connection closed (or went silent) before a status
  /// line. `head`: the response to a HEAD request has no body whatever Content-Length says.
  std::optional<response> read_response(bool head = false) {
    std::size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos)
      if (!fill()) return std::nullopt;
    response r;
    std::istringstream lines(buffer_.substr(0, end));
    std::getline(lines, r.status_line);
    if (!r.status_line.empty() && r.status_line.back() == '\r') r.status_line.pop_back();
    std::smatch m;
    static const std::regex status_re(R"(HTTP/1\.[01] (\d{3}) .*)");
    REQUIRE_MESSAGE(std::regex_match(r.status_line, m, status_re), r.status_line);
    r.status = std::stoi(m[1]);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const std::size_t colon = line.find(':');
      REQUIRE(colon != std::string::npos);
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      r.headers[name] = value;
    }
    buffer_.erase(0, end + 4);
    const bool bodyless = head || r.status == 304 || r.status == 204;
    if (r.has("content-length") && !bodyless) {
      const std::size_t length = std::stoull(r.header("content-length"));
      while (buffer_.size() < length)
        if (!fill()) break;
      REQUIRE(buffer_.size() >= length);
      r.body = buffer_.substr(0, length);
      buffer_.erase(0, length);
    } else if (!bodyless) {
      while (fill()) {
      }
      r.body = std::move(buffer_);
      buffer_.clear();
    }
    return r;
  }

  /// True when the server closes the connection (EOF or reset) within `timeout`.
  bool closed_by_peer(std::chrono::milliseconds timeout = 10s) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char c;
    const ssize_t n = recv(fd_, &c, 1, 0);
    return n <= 0;
  }

 private:
  bool fill() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) return false;
    char chunk[65536];
    const ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string buffer_;
};

std::string gunzip(std::string_view data) {
  z_stream zs{};
  REQUIRE(inflateInit2(&zs, 15 + 16) == Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char chunk[65536];
  int rc;
  do {
    zs.next_out = reinterpret_cast<Bytef*>(chunk);
    zs.avail_out = sizeof chunk;
    rc = inflate(&zs, Z_NO_FLUSH);
    REQUIRE((rc == Z_OK || rc == Z_STREAM_END));
    out.append(chunk, sizeof chunk - zs.avail_out);
  } while (rc != Z_STREAM_END);
  inflateEnd(&zs);
  return out;
}

std::string get_request(std::string_view target, std::string_view extra_headers = "",
                        std::string_view method = "GET") {
  return std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: localhost\r\n" +
         std::string(extra_headers) + "\r\n";
}

/// One request on its own connection.
std::optional<response> fetch(int port, std::string_view target, std::string_view headers = "",
                              std::string_view method = "GET") {
  connection c(port);
  REQUIRE(c.send(get_request(target, headers, method)));
  return c.read_response(method == "HEAD");
}

/// A running server on `logdir` with extra flags; the port is read from its start line.
struct server {
  temp_dir scratch;
  std::unique_ptr<child> proc;
  std::string start_line;
  int port = 0;
  std::string prefix;

  server(const fs::path& logdir, std::vector<std::string> flags = {}, int nofile = 0) {
    std::vector<std::string> args = {"--logdir", logdir.string(), "--port", "0"};
    args.insert(args.end(), flags.begin(), flags.end());
    proc = std::make_unique<child>(args, scratch.path / "stderr.txt", nofile);
    start_line = proc->first_line();
    static const std::regex line_re(
        R"(kinetoscope 0\.1\.0 at http://127\.0\.0\.1:(\d+)(/[^ ]*)?/ \(Press CTRL\+C to quit\))");
    std::smatch m;
    REQUIRE_MESSAGE(std::regex_match(start_line, m, line_re),
                    "start line: '" << start_line << "' stderr: " << proc->stderr_text());
    port = std::stoi(m[1]);
    prefix = m[2];
    CHECK(port > 0);
  }

  /// Polls /api/runs until loading is false; the last answer.
  json wait_loaded() {
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    json runs;
    while (std::chrono::steady_clock::now() < deadline) {
      const auto r = fetch(port, prefix + "/api/runs");
      REQUIRE(r);
      REQUIRE_MESSAGE(r->status == 200, r->body);
      runs = json::parse(r->body);
      if (!runs.at("loading").get<bool>()) return runs;
      std::this_thread::sleep_for(50ms);
    }
    FAIL("the logdir did not finish loading");
    return runs;
  }
};

void check_common_headers(const response& r) {
  CHECK(r.header("x-content-type-options") == "nosniff");
  CHECK(r.header("referrer-policy") == "no-referrer");
  CHECK(r.header("server") == "kinetoscope");
  CHECK(r.header("content-security-policy") ==
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'");
}

void check_json_error(const std::optional<response>& r, int status) {
  REQUIRE(r);
  CHECK_MESSAGE(r->status == status, r->status_line << " " << r->body);
  CHECK(r->header("content-type") == "application/json; charset=utf-8");
  const json body = json::parse(r->body);
  CHECK(body.at("error").is_string());
  CHECK(!body.at("error").get<std::string>().empty());
  check_common_headers(*r);
}

}  // namespace

TEST_CASE("http: the app, its assets, caching and compression") {
  test_logdir logs;
  server srv(logs.logdir);
  CHECK(srv.prefix.empty());

  const auto index = fetch(srv.port, "/");
  REQUIRE(index);
  CHECK(index->status == 200);
  check_common_headers(*index);
  CHECK(index->header("content-type") == "text/html; charset=utf-8");
  CHECK(index->header("cache-control") == "no-cache");
  const std::string index_etag = index->header("etag");
  CHECK(index_etag.size() > 2);
  CHECK(index->body.find("<html") != std::string::npos);
  std::smatch m;
  REQUIRE(std::regex_search(index->body, m, std::regex(R"(\./assets/(app\.[0-9a-zA-Z]+\.js))")));
  const std::string js = "/assets/" + m[1].str();

  // the same document under /index.html; revalidation answers 304 without a body
  const auto again = fetch(srv.port, "/index.html");
  REQUIRE(again);
  CHECK(again->body == index->body);
  const auto not_modified = fetch(srv.port, "/", "If-None-Match: " + index_etag + "\r\n");
  REQUIRE(not_modified);
  CHECK(not_modified->status == 304);
  CHECK(not_modified->body.empty());
  CHECK(not_modified->header("etag") == index_etag);

  const auto plain = fetch(srv.port, js);
  REQUIRE(plain);
  CHECK(plain->status == 200);
  check_common_headers(*plain);
  CHECK(plain->header("cache-control") == "public, max-age=31536000, immutable");
  CHECK(plain->header("content-type").starts_with("text/javascript"));
  CHECK_FALSE(plain->has("content-encoding"));
  REQUIRE(plain->body.size() > 1024);
  CHECK(plain->header("vary") == "Accept-Encoding");

  const auto zipped = fetch(srv.port, js, "Accept-Encoding: gzip, deflate, br\r\n");
  REQUIRE(zipped);
  CHECK(zipped->status == 200);
  CHECK(zipped->header("content-encoding") == "gzip");
  CHECK(zipped->body.size() < plain->body.size());
  CHECK(gunzip(zipped->body) == plain->body);
  CHECK(zipped->header("etag") == plain->header("etag"));

  const auto refused = fetch(srv.port, js, "Accept-Encoding: gzip;q=0, br\r\n");
  REQUIRE(refused);
  CHECK_FALSE(refused->has("content-encoding"));
  CHECK(refused->body == plain->body);

  const auto cached = fetch(srv.port, js, "If-None-Match: " + plain->header("etag") + "\r\n");
  REQUIRE(cached);
  CHECK(cached->status == 304);
  CHECK(cached->header("cache-control") == "public, max-age=31536000, immutable");
  const auto stale = fetch(srv.port, js, "If-None-Match: \"other\"\r\n");
  REQUIRE(stale);
  CHECK(stale->status == 200);

  // HEAD: the GET's headers and length, no body
  const auto head = fetch(srv.port, js, "", "HEAD");
  REQUIRE(head);
  CHECK(head->status == 200);
  CHECK(head->header("content-length") == std::to_string(plain->body.size()));
  CHECK(head->body.empty());

  // keep-alive: three requests on one connection, HEAD in the middle
  connection c(srv.port);
  REQUIRE(c.send(get_request("/")));
  const auto first = c.read_response();
  REQUIRE(first);
  CHECK(first->body == index->body);
  REQUIRE(c.send(get_request(js, "", "HEAD")));
  const auto second = c.read_response(true);
  REQUIRE(second);
  CHECK(second->status == 200);
  REQUIRE(c.send(get_request("/api/runs")));
  const auto third = c.read_response();
  REQUIRE(third);
  CHECK(third->status == 200);

  // unknown static paths are 404 JSON; files of the logdir are never served
  check_json_error(fetch(srv.port, "/nothing.html"), 404);
  check_json_error(fetch(srv.port, "/assets/app.00000000.js"), 404);
  check_json_error(fetch(srv.port, "/cpu_only/" + fs::directory_iterator(logs.logdir / "cpu_only")
                                                   ->path().filename().string()),
                   404);

  srv.proc->signal(SIGTERM);
  CHECK(srv.proc->wait_exit() == 0);
}

TEST_CASE("http: the API answers JSON with no-store, gzip when asked, progress on stderr") {
  test_logdir logs;
  server srv(logs.logdir);
  const json runs = srv.wait_loaded();
  CHECK(runs.at("runs") == json::array({"cpu_only", "resnet50_v100"}));
  const json& p = runs.at("progress");
  CHECK(p.at("files_total") == logs.files);
  CHECK(p.at("files_loaded") == logs.files);
  CHECK(p.at("files_failed") == 0);
  CHECK(p.at("bytes_total") == logs.bytes);
  CHECK(p.at("bytes_loaded") == logs.bytes);

  const auto r = fetch(srv.port, "/api/runs");
  REQUIRE(r);
  CHECK(r->status == 200);
  check_common_headers(*r);
  CHECK(r->header("cache-control") == "no-store");
  CHECK(r->header("content-type") == "application/json; charset=utf-8");

  CHECK(json::parse(fetch(srv.port, "/api/status")->body).at("files").size() == logs.files);

  // a view over 1 KiB: gzip level 1 when accepted, the same JSON after gunzip
  const json workers =
      json::parse(fetch(srv.port, "/api/workers?run=resnet50_v100&view=Overview")->body);
  REQUIRE(workers.size() == 1);
  const std::string worker = workers.at(0);
  const json spans =
      json::parse(fetch(srv.port, "/api/spans?run=resnet50_v100&worker=" + worker)->body);
  CHECK(spans.size() == 2);
  const std::string span = spans.at(0);
  const std::string table =
      "/api/operation/table?run=resnet50_v100&worker=" + worker + "&span=" + span;
  const auto plain = fetch(srv.port, table);
  REQUIRE(plain);
  REQUIRE(plain->status == 200);
  REQUIRE(plain->body.size() > 1024);
  CHECK_FALSE(plain->has("content-encoding"));
  CHECK(plain->header("vary") == "Accept-Encoding");
  const auto zipped = fetch(srv.port, table, "Accept-Encoding: deflate, gzip\r\n");
  REQUIRE(zipped);
  CHECK(zipped->status == 200);
  CHECK(zipped->header("content-encoding") == "gzip");
  CHECK(zipped->header("cache-control") == "no-store");
  CHECK(zipped->body.size() < plain->body.size());
  CHECK(gunzip(zipped->body) == plain->body);
  const auto head = fetch(srv.port, table, "Accept-Encoding: gzip\r\n", "HEAD");
  REQUIRE(head);
  CHECK(head->header("content-length") == std::to_string(zipped->body.size()));

  // API errors keep their status and JSON; query decoding reaches the API
  check_json_error(fetch(srv.port, "/api/views"), 400);
  check_json_error(fetch(srv.port, "/api/views?run=no+such+run"), 404);
  const auto views = fetch(srv.port, "/api/views?run=cpu%5Fonly");
  REQUIRE(views);
  CHECK(views->status == 200);
  CHECK(json::parse(views->body).at(0) == "Overview");

  srv.proc->signal(SIGINT);
  CHECK(srv.proc->wait_exit() == 0);
  const std::string err = srv.proc->stderr_text();
  CHECK_MESSAGE(err.find("loaded " + std::to_string(logs.files) + " files (0 failed) in ") !=
                    std::string::npos,
                err);
}

TEST_CASE("http: hostile requests get 4xx or a closed connection, and the server lives on") {
  test_logdir logs;
  server srv(logs.logdir);

  for (const char* target : {"/../etc/passwd", "/%2e%2e/x", "/a/%2E./b", "/%00", "/a%5c..%5cb",
                             "//etc", "/api/runs?run=%zz", "/api/../../etc/passwd",
                             "/api/%2e%2e/%2e%2e/etc/passwd", "/a%2fb"}) {
    CAPTURE(target);
    check_json_error(fetch(srv.port, target), 400);
  }
  check_json_error(fetch(srv.port, "http://localhost/api/runs"), 400);
  check_json_error(fetch(srv.port, "/%ff%fe"), 404);  // invalid UTF-8 is echoed safely
  check_json_error(fetch(srv.port, "/api/nothing"), 404);
  check_json_error(fetch(srv.port, "/" + std::string(10 * 1024, 'a')), 414);
  check_json_error(fetch(srv.port, "/api/runs?q=" + std::string(5000, 'a')), 400);

  {  // a 20 KiB header: 431 and the connection closes
    connection c(srv.port);
    c.send(get_request("/", "X-Big: " + std::string(20 * 1024, 'b') + "\r\n"));
    const auto r = c.read_response();
    if (r) CHECK(r->status == 431);
    CHECK(c.closed_by_peer());
  }
  {  // POST with a body: 405 with Allow, the body is consumed and the connection stays usable
    connection c(srv.port);
    REQUIRE(c.send("POST /api/runs HTTP/1.1\r\nHost: localhost\r\nContent-Length: 11\r\n\r\nhello world"));
    const auto r = c.read_response();
    check_json_error(r, 405);
    CHECK(r->header("allow") == "GET, HEAD");
    REQUIRE(c.send(get_request("/api/runs")));
    const auto next = c.read_response();
    REQUIRE(next);
    CHECK(next->status == 200);
  }
  for (const char* method : {"PUT", "DELETE", "OPTIONS", "TRACE"}) {
    CAPTURE(method);
    check_json_error(fetch(srv.port, "/", "", method), 405);
  }
  {  // a body over 1 MiB is refused from its Content-Length
    connection c(srv.port);
    REQUIRE(c.send("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2000000\r\n\r\n"));
    const auto r = c.read_response();
    if (r) CHECK(r->status == 413);
    CHECK(c.closed_by_peer());
  }
  {  // raw garbage
    connection c(srv.port);
    c.send(std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n", 23));
    const auto r = c.read_response();
    if (r) CHECK(r->status == 400);
    CHECK(c.closed_by_peer());
  }
  {  // a request line with a NUL and a bare LF
    connection c(srv.port);
    c.send(std::string("GET /\0 HTTP/1.1\nHost: localhost\n\n", 34));
    const auto r = c.read_response();
    if (r) CHECK(r->status == 400);
    CHECK(c.closed_by_peer());
  }
  {  // a client that leaves mid-request
    connection c(srv.port);
    REQUIRE(c.send("GET /api/runs HTTP/1.1\r\nHost: localhost\r\nAccept: "));
  }
  {  // a client that leaves mid-body
    connection c(srv.port);
    REQUIRE(c.send("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\nabc"));
  }
  {  // HTTP/1.0: answered, then closed (no keep-alive asked for)
    connection c(srv.port);
    REQUIRE(c.send("GET /api/runs HTTP/1.0\r\n\r\n"));
    const auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->status_line.starts_with("HTTP/1.0 200"));
    CHECK(json::parse(r->body).contains("runs"));
    CHECK(c.closed_by_peer());
  }
  {  // Connection: close is honoured
    connection c(srv.port);
    REQUIRE(c.send(get_request("/api/runs", "Connection: close\r\n")));
    const auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(c.closed_by_peer());
  }

  const auto alive = fetch(srv.port, "/api/runs");
  REQUIRE(alive);
  CHECK(alive->status == 200);
  CHECK(json::parse(alive->body).contains("runs"));

  srv.proc->signal(SIGTERM);
  CHECK(srv.proc->wait_exit() == 0);
}

TEST_CASE("http: Transfer-Encoding not ending in chunked gets 400 and the connection closes") {
  temp_dir logdir;  // no traces needed
  server srv(logdir.path);
  for (const char* te : {"gzip", "chunked, gzip", "identity"}) {
    CAPTURE(te);
    connection c(srv.port);
    // What follows the header would be read as a second request if the first were answered.
    REQUIRE(c.send("GET /api/runs HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: " + std::string(te) +
                   "\r\n\r\nGET /api/status HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    const auto r = c.read_response();
    check_json_error(r, 400);
    CHECK(r->header("connection") == "close");
    CHECK(json::parse(r->body)["error"] == "Transfer-Encoding must end with chunked");
    CHECK(c.closed_by_peer());  // and no second answer
  }
  {  // chunked is fine (an empty chunked body on a GET)
    connection c(srv.port);
    REQUIRE(c.send("GET /api/runs HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"));
    const auto r = c.read_response();
    REQUIRE(r);
    CHECK(r->status == 200);
  }
  srv.proc->signal(SIGTERM);
  CHECK(srv.proc->wait_exit() == 0);
}

TEST_CASE("http: only Host names of this server are answered (DNS rebinding)") {
  temp_dir logdir;
  const auto host_request = [](const std::string& host) {
    return "GET /api/runs HTTP/1.1\r\nHost: " + host + "\r\n\r\n";
  };
  const auto status_for = [&](int port, const std::string& host) {
    connection c(port);
    REQUIRE(c.send(host_request(host)));
    const auto r = c.read_response();
    REQUIRE(r);
    return r->status;
  };
  SUBCASE("default: IP literals, localhost and the machine's name") {
    server srv(logdir.path);
    const std::string port = std::to_string(srv.port);
    for (const std::string& host : {"localhost:" + port, "127.0.0.1:" + port, std::string("LOCALHOST"), "[::1]:" + port}) {
      CAPTURE(host);
      CHECK(status_for(srv.port, host) == 200);
    }
    char name[256] = {};
    REQUIRE(gethostname(name, sizeof name - 1) == 0);
    CHECK(status_for(srv.port, std::string(name) + ":" + port) == 200);
    {
      connection c(srv.port);
      REQUIRE(c.send(host_request("evil.example:" + port)));
      const auto r = c.read_response();
      check_json_error(r, 403);
      CHECK(json::parse(r->body)["error"] ==
            "Host 'evil.example' is not allowed; start kinetoscope with --allowed_hosts evil.example to serve it "
            "under that name");
      CHECK(c.closed_by_peer());
    }
    CHECK(status_for(srv.port, "localhost.evil.example") == 403);
    {  // HTTP/1.1 without Host: 400; HTTP/1.0 without Host: answered
      connection c(srv.port);
      REQUIRE(c.send("GET /api/runs HTTP/1.1\r\n\r\n"));
      check_json_error(c.read_response(), 400);
    }
    {
      connection c(srv.port);
      REQUIRE(c.send("GET /api/runs HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n\r\n"));
      check_json_error(c.read_response(), 400);
    }
    CHECK(srv.proc->stderr_text().find("--allowed_hosts") == std::string::npos);
  }
  SUBCASE("--allowed_hosts adds names and domains") {
    server srv(logdir.path, {"--allowed_hosts", "viewer.example.com,.corp.example"});
    CHECK(status_for(srv.port, "viewer.example.com") == 200);
    CHECK(status_for(srv.port, "a.corp.example:80") == 200);
    CHECK(status_for(srv.port, "localhost") == 200);
    CHECK(status_for(srv.port, "evil.example") == 403);
  }
  SUBCASE("--bind_all without --allowed_hosts answers any Host and says so") {
    child c({"--logdir", logdir.path.string(), "--bind_all", "--port=0"}, logdir.path / "stderr.txt");
    const std::string line = c.first_line();
    std::smatch m;
    REQUIRE(std::regex_match(line, m, std::regex(R"(kinetoscope 0\.1\.0 at http://[^:/ ]+:(\d+)/ .*)")));
    const int port = std::stoi(m[1]);
    CHECK(status_for(port, "evil.example") == 200);
    CHECK(c.stderr_text().find("kinetoscope: --bind_all without --allowed_hosts: requests under any Host name "
                               "are answered") == 0);
    c.signal(SIGTERM);
    CHECK(c.wait_exit() == 0);
  }
  SUBCASE("--bind_all with --allowed_hosts checks") {
    child c({"--logdir", logdir.path.string(), "--bind_all", "--port=0", "--allowed_hosts=viewer.example.com"},
            logdir.path / "stderr.txt");
    const std::string line = c.first_line();
    std::smatch m;
    REQUIRE(std::regex_match(line, m, std::regex(R"(kinetoscope 0\.1\.0 at http://[^:/ ]+:(\d+)/ .*)")));
    const int port = std::stoi(m[1]);
    CHECK(status_for(port, "evil.example") == 403);
    CHECK(status_for(port, "viewer.example.com") == 200);
    c.signal(SIGTERM);
    CHECK(c.wait_exit() == 0);
  }
  SUBCASE("a bad --allowed_hosts value is a usage error") {
    child c({"--logdir", logdir.path.string(), "--allowed_hosts", "a,,b"}, logdir.path / "stderr.txt");
    CHECK(c.wait_exit() == 2);
    CHECK(c.stderr_text().starts_with("kinetoscope: bad value 'a,,b' for --allowed_hosts"));
  }
}

TEST_CASE("http: connections are capped below the descriptor limit; trace files still load") {
  temp_dir logdir;
  fs::create_directories(logdir.path / "run");
  // Started with a soft limit of 100 and a hard one of 200, the server raises the soft limit to
  // 200 and caps connections at 200 - 64 = 136.
  server srv(logdir.path, {"--reload_interval", "0.2"}, 200);
  {
    std::ifstream limits("/proc/" + std::to_string(srv.proc->pid()) + "/limits");
    std::string line, found;
    while (std::getline(limits, line))
      if (line.starts_with("Max open files")) found = line;
    CHECK(std::regex_search(found, std::regex(R"(Max open files +200 +200 )")));
  }
  std::vector<std::unique_ptr<connection>> flood;
  for (int i = 0; i < 136; ++i) {
    flood.push_back(std::make_unique<connection>(srv.port));
    REQUIRE(flood.back()->send("GET /api/runs HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    REQUIRE(flood.back()->read_response());  // served, and kept open (keep-alive)
  }
  for (int i = 0; i < 20; ++i) {  // over the cap: accepted and closed at once
    connection extra(srv.port);
    CHECK(extra.closed_by_peer(5s));
  }
  // A trace written now is read although 136 connections are open.
  std::ofstream(logdir.path / "run" / "w.1.pt.trace.json")
      << R"J({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]})J";
  bool loaded = false;
  for (int i = 0; i < 200 && !loaded; ++i) {
    std::this_thread::sleep_for(50ms);
    REQUIRE(flood[0]->send("GET /api/status HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    const auto r = flood[0]->read_response();
    REQUIRE(r);
    const json st = json::parse(r->body);
    loaded = st["files"].size() == 1 && st["files"][0]["state"] == "loaded";
  }
  CHECK(loaded);
  flood.clear();  // slots free again
  const auto after = fetch(srv.port, "/api/runs");
  REQUIRE(after);
  CHECK(after->status == 200);
  srv.proc->signal(SIGTERM);
  CHECK(srv.proc->wait_exit() == 0);
}

TEST_CASE("http: --path_prefix serves below the prefix only") {
  test_logdir logs;
  server srv(logs.logdir, {"--path_prefix=prof/"});
  CHECK(srv.prefix == "/prof");

  const auto index = fetch(srv.port, "/prof/");
  REQUIRE(index);
  CHECK(index->status == 200);
  CHECK(index->header("content-type") == "text/html; charset=utf-8");
  const auto runs = fetch(srv.port, "/prof/api/runs");
  REQUIRE(runs);
  CHECK(runs->status == 200);
  CHECK(json::parse(runs->body).contains("runs"));

  const auto bare = fetch(srv.port, "/prof?x=1");
  REQUIRE(bare);
  CHECK(bare->status == 308);
  CHECK(bare->header("location") == "/prof/?x=1");

  check_json_error(fetch(srv.port, "/"), 404);
  check_json_error(fetch(srv.port, "/api/runs"), 404);
  check_json_error(fetch(srv.port, "/profiler/api/runs"), 404);
  check_json_error(fetch(srv.port, "/prof/../api/runs"), 400);

  srv.proc->signal(SIGTERM);
  CHECK(srv.proc->wait_exit() == 0);
}

TEST_CASE("http: start-up errors") {
  test_logdir logs;
  temp_dir scratch;
  const fs::path err_file = scratch.path / "stderr.txt";

  SUBCASE("a port in use: message and exit 1") {
    server srv(logs.logdir);
    child second({"--logdir", logs.logdir.string(), "--port", std::to_string(srv.port)}, err_file);
    CHECK(second.first_line() == "");
    CHECK(second.wait_exit() == 1);
    CHECK(second.stderr_text() == "kinetoscope: port " + std::to_string(srv.port) +
                                      " is in use; choose another with --port, or --port 0 for "
                                      "any free port\n");
    // the first one is unharmed
    const auto r = fetch(srv.port, "/api/runs");
    REQUIRE(r);
    CHECK(r->status == 200);
  }
  SUBCASE("a missing logdir: exit 2") {
    child c({"--logdir", "/nonexistent", "--port", "0"}, err_file);
    CHECK(c.wait_exit() == 2);
    CHECK(c.stderr_text().starts_with(
        "kinetoscope: --logdir '/nonexistent' is not an existing directory\nusage: "));
  }
  SUBCASE("a file as logdir: exit 2") {
    const fs::path file = *fs::directory_iterator(logs.logdir / "cpu_only");
    child c({"--logdir=" + file.string()}, err_file);
    CHECK(c.wait_exit() == 2);
    CHECK(c.stderr_text().find("is not an existing directory") != std::string::npos);
  }
  SUBCASE("bad flags and values: exit 2 with the usage") {
    const std::vector<std::vector<std::string>> cases = {
        {"--logdir", logs.logdir.string(), "--bogus"},
        {"--logdir", logs.logdir.string(), "--port", "65536"},
        {"--logdir", logs.logdir.string(), "--port=12ab"},
        {"--logdir", logs.logdir.string(), "--port"},
        {"--logdir", logs.logdir.string(), "--threads", "0"},
        {"--logdir", logs.logdir.string(), "--reload_interval", "-1"},
        {"--logdir", logs.logdir.string(), "--path_prefix", "/a/../b"},
        {"--logdir", logs.logdir.string(), "--bind_all", "--host", "0.0.0.0"},
        {"--logdir", logs.logdir.string(), "--bind_all=maybe"},
        {"--port", "0"},
    };
    for (const auto& args : cases) {
      CAPTURE(args.back());
      child c(args, err_file);
      CHECK(c.wait_exit() == 2);
      const std::string err = c.stderr_text();
      CHECK(err.starts_with("kinetoscope: "));
      CHECK(err.find("usage: kinetoscope --logdir DIR") != std::string::npos);
    }
  }
  SUBCASE("--bind_all prints the host name and listens on loopback too; other flags work") {
    child c({"--logdir", logs.logdir.string(), "--bind_all", "--port=0", "--threads", "1",
             "--reload_interval=0", "--follow_symlinks"},
            err_file);
    const std::string line = c.first_line();
    std::smatch m;
    REQUIRE_MESSAGE(std::regex_match(line, m,
                                     std::regex(R"(kinetoscope 0\.1\.0 at http://([^:/ ]+):(\d+)/ )"
                                                R"(\(Press CTRL\+C to quit\))")),
                    line << c.stderr_text());
    char name[256] = {};
    REQUIRE(gethostname(name, sizeof name - 1) == 0);
    CHECK((m[1] == std::string(name) || m[1] == "localhost"));
    const auto r = fetch(std::stoi(m[2]), "/api/runs");
    REQUIRE(r);
    CHECK(r->status == 200);
    c.signal(SIGTERM);
    CHECK(c.wait_exit() == 0);
  }
  SUBCASE("--help and --version") {
    {
      child c({"--help"}, err_file);
      CHECK(c.first_line().starts_with("usage: kinetoscope --logdir DIR [--port N]"));
      CHECK(c.wait_exit() == 0);
    }
    {
      child c({"--version"}, err_file);
      CHECK(c.first_line() == "kinetoscope 0.1.0");
      CHECK(c.first_line().starts_with("heap: "));
      CHECK(c.wait_exit() == 0);
    }
  }
}

namespace {

/// Sets (or with nullptr removes) an environment variable for one scope, then puts it back.
struct scoped_env {
  std::string name;
  std::optional<std::string> saved;
  scoped_env(const char* n, const char* value) : name(n) {
    if (const char* v = std::getenv(n)) saved = v;
    if (value != nullptr) ::setenv(n, value, 1);
    else ::unsetenv(n);
  }
  ~scoped_env() {
    if (saved) ::setenv(name.c_str(), saved->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

/// The environment of process `pid`, as its exec left it.
std::vector<std::string> environment_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::vector<std::string> out;
  for (std::string item; std::getline(in, item, '\0');) out.push_back(item);
  return out;
}

/// Whether this machine lets the viewer turn on huge pages: the kernel has transparent huge
/// pages (not "never"), glibc has the tunable (2.35+), and this is not a sanitizer build.
bool platform_has_huge_pages() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return false;
#else
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(in, line) || line.find('[') == std::string::npos || line.find("[never]") != std::string::npos)
    return false;
  int major = 0, minor = 0;
  return std::sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor) == 2 && (major > 2 || minor >= 35);
#endif
}

}  // namespace

TEST_CASE("http: the server re-executes itself once with huge pages for its heap, where the platform has them") {
  test_logdir logs;
  temp_dir scratch;
  const bool platform = platform_has_huge_pages();
  CAPTURE(platform);
  auto tunables_of = [](pid_t pid) {
    std::vector<std::string> found;
    for (const std::string& item : environment_of(pid))
      if (item.starts_with("GLIBC_TUNABLES=")) found.push_back(item.substr(15));
    return found;
  };
  auto version_heap_line = [&] {
    child c({"--version"}, scratch.path / "version.txt");
    CHECK(c.first_line() == "kinetoscope 0.1.0");
    const std::string heap = c.first_line();
    CHECK(c.wait_exit() == 0);
    return heap;
  };
  // --version's heap line where nothing turns huge pages off: on where the platform has them.
  auto check_default_heap_line = [&] {
    const std::string heap = version_heap_line();
    if (platform) CHECK(heap == "heap: transparent huge pages (glibc.malloc.hugetlb=1, one malloc arena)");
    else CHECK(heap.starts_with("heap: default pages ("));
  };
  scoped_env opt_out("KINETOSCOPE_HUGE_PAGES", nullptr);
  scoped_env guard("KINETOSCOPE_HUGE_PAGES_REEXEC", nullptr);
  SUBCASE("by default: the same process (pid, arguments, descriptors) with the tunable added") {
    scoped_env tunables("GLIBC_TUNABLES", nullptr);
    server srv(logs.logdir);  // its start line came through the same stdout pipe
    const json runs = srv.wait_loaded();
    CHECK(runs.at("runs").size() == 2);  // --logdir survived the exec
    if (platform) CHECK(tunables_of(srv.proc->pid()) == std::vector<std::string>{"glibc.malloc.hugetlb=1"});
    else CHECK(tunables_of(srv.proc->pid()).empty());
    check_default_heap_line();
  }
  SUBCASE("the user's other tunables are kept") {
    scoped_env tunables("GLIBC_TUNABLES", "glibc.malloc.tcache_count=7");
    server srv(logs.logdir);
    // (What /proc shows of the value past the first tunable depends on how ld.so parsed it:
    // glibc 2.36 leaves a NUL where the ':' was. The process's own view is --version's.)
    const std::vector<std::string> seen = tunables_of(srv.proc->pid());
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].starts_with("glibc.malloc.tcache_count=7"));
    check_default_heap_line();
  }
  SUBCASE("a user's own glibc.malloc.hugetlb wins") {
    scoped_env tunables("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0");
    server srv(logs.logdir);
    CHECK(tunables_of(srv.proc->pid()) == std::vector<std::string>{"glibc.malloc.hugetlb=0"});
    if (platform) CHECK(version_heap_line() == "heap: default pages (GLIBC_TUNABLES sets glibc.malloc.hugetlb=0)");
  }
  SUBCASE("KINETOSCOPE_HUGE_PAGES=0 turns it off") {
    scoped_env tunables("GLIBC_TUNABLES", nullptr);
    scoped_env off("KINETOSCOPE_HUGE_PAGES", "0");
    server srv(logs.logdir);
    CHECK(tunables_of(srv.proc->pid()).empty());
    if (platform) CHECK(version_heap_line() == "heap: default pages (KINETOSCOPE_HUGE_PAGES=0)");
  }
}
