// SPDX-License-Identifier: BSD-3-Clause
// The HTTP transport (http_server.hpp): the only translation unit that includes Boost.Beast.
// One io_context run on N threads; each connection is a strand with a tcp_stream (30 s
// timeout), a fresh request_parser per request (16 KiB of header, 1 MiB of body) and
// keep-alive. Routing, target checks and the API live in Boost-free code (url.cpp, api.cpp).
#include "server/http_server.hpp"

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "assets.hpp"
#include "server/api.hpp"
#include "server/url.hpp"

namespace kinetoscope::server {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr std::size_t header_limit = 16 * 1024;
constexpr std::uint64_t body_limit = 1024 * 1024;
constexpr std::size_t max_target = 8 * 1024;
constexpr std::size_t compress_above = 1024;
constexpr auto io_timeout = std::chrono::seconds(30);

constexpr std::string_view json_type = "application/json; charset=utf-8";
constexpr std::string_view csp =
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'";
constexpr std::string_view cache_api = "no-store";
constexpr std::string_view cache_immutable = "public, max-age=31536000, immutable";
constexpr std::string_view cache_revalidate = "no-cache";

using request = http::request<http::string_body>;
using string_response = http::response<http::string_body>;
using asset_response = http::response<http::span_body<const char>>;

/// gzip (RFC 1952) of `data` at zlib level 1: API bodies are made per request, so speed wins.
std::string gzip_fast(std::string_view data) {
  z_stream zs{};
  if (deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("zlib: deflateInit2 failed");
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw std::runtime_error("zlib: deflate did not finish");
  return out;
}

/// Headers every response carries.
template <class Body>
void common_headers(http::response<Body>& res) {
  res.set(http::field::server, "kinetoscope");
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Referrer-Policy", "no-referrer");
  res.set("Content-Security-Policy", csp);
}

/// Sets Content-Length to `length` and, for HEAD, drops the body that was sized.
template <class Body>
void finish_payload(http::response<Body>& res, bool head, std::size_t length) {
  res.content_length(length);
  if (head) res.body() = typename Body::value_type{};
}

/// A dynamic (JSON, CSV, text) response, gzip-compressed when the client accepts it.
string_response make_dynamic(const request& req, unsigned status, std::string_view content_type,
                             std::string body, std::string_view cache_control = cache_api) {
  string_response res{static_cast<http::status>(status), req.version()};
  common_headers(res);
  res.set(http::field::content_type, content_type);
  res.set(http::field::cache_control, cache_control);
  if (body.size() > compress_above) {
    res.set(http::field::vary, "Accept-Encoding");
    if (accepts_gzip(req[http::field::accept_encoding])) {
      body = gzip_fast(body);
      res.set(http::field::content_encoding, "gzip");
    }
  }
  const std::size_t length = body.size();
  res.body() = std::move(body);
  finish_payload(res, req.method() == http::verb::head, length);
  res.keep_alive(req.keep_alive());
  return res;
}

string_response make_error(const request& req, unsigned status, std::string_view message) {
  api_response e = error_response(status, message);
  return make_dynamic(req, e.status, e.content_type, std::move(e.body));
}

/// The answer to a request that the parser refused: no request to take a version from, and
/// the connection is closed after it since the stream position is unknown.
string_response make_parse_error(unsigned status, std::string_view message) {
  string_response res{static_cast<http::status>(status), 11};
  common_headers(res);
  res.set(http::field::content_type, json_type);
  res.set(http::field::cache_control, cache_api);
  res.body() = error_response(status, message).body;
  res.prepare_payload();
  res.keep_alive(false);
  return res;
}

/// Routes one request. Exceptions of the API become 500 answers here; the session catches
/// anything else (allocation failures) the same way.
class router {
 public:
  router(const api& handler, std::string prefix) : api_(handler), prefix_(std::move(prefix)) {}

  http::message_generator respond(request&& req) const {
    const std::string_view target(req.target().data(), req.target().size());
    if (target.size() > max_target)
      return make_error(req, 414, "request target longer than 8192 bytes");
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      string_response res = make_error(req, 405, "only GET and HEAD are allowed");
      res.set(http::field::allow, "GET, HEAD");
      return res;
    }
    // "<prefix>" alone: send the browser to "<prefix>/" so the app's relative URLs resolve.
    if (!prefix_.empty() && target.substr(0, target.find('?')) == prefix_) {
      string_response res = make_dynamic(req, 308, "text/plain; charset=utf-8", "");
      std::string location = prefix_ + "/";
      if (const std::size_t q = target.find('?'); q != std::string_view::npos)
        location += target.substr(q);
      res.set(http::field::location, location);
      return res;
    }
    target_result parsed = parse_target(target, prefix_);
    if (parsed.error) return make_error(req, parsed.error->status, parsed.error->message);
    parsed_target& t = *parsed.target;
    if (t.path.starts_with("api/")) return respond_api(req, std::move(t));
    const web::asset* a = web::find_asset(t.path);
    if (a == nullptr) return make_error(req, 404, "not found: /" + t.path);
    return respond_asset(req, *a);
  }

 private:
  http::message_generator respond_api(const request& req, parsed_target&& t) const {
    api_request areq;
    areq.route = t.path.substr(4);
    areq.query = std::move(t.query);
    try {
      api_response r = api_.handle(areq);
      return make_dynamic(req, r.status, r.content_type, std::move(r.body));
    } catch (const std::exception& e) {
      std::cerr << "kinetoscope: internal error in /api/" << areq.route << ": " << e.what() << '\n';
      return make_error(req, 500, std::string("internal error: ") + e.what());
    } catch (...) {
      std::cerr << "kinetoscope: internal error in /api/" << areq.route << '\n';
      return make_error(req, 500, "internal error");
    }
  }

  http::message_generator respond_asset(const request& req, const web::asset& a) const {
    const std::string_view cache = a.immutable ? cache_immutable : cache_revalidate;
    const bool compressible = !a.gzip.empty() && a.data.size() > compress_above;
    if (etag_matches(req[http::field::if_none_match], a.etag)) {
      http::response<http::empty_body> res{http::status::not_modified, req.version()};
      common_headers(res);
      res.set(http::field::etag, a.etag);
      res.set(http::field::cache_control, cache);
      if (compressible) res.set(http::field::vary, "Accept-Encoding");
      res.keep_alive(req.keep_alive());
      return res;
    }
    asset_response res{http::status::ok, req.version()};
    common_headers(res);
    res.set(http::field::content_type, a.content_type);
    res.set(http::field::etag, a.etag);
    res.set(http::field::cache_control, cache);
    std::string_view bytes = a.data;
    if (compressible) {
      res.set(http::field::vary, "Accept-Encoding");
      if (accepts_gzip(req[http::field::accept_encoding])) {
        bytes = a.gzip;
        res.set(http::field::content_encoding, "gzip");
      }
    }
    res.body() = {bytes.data(), bytes.size()};
    finish_payload(res, req.method() == http::verb::head, bytes.size());
    res.keep_alive(req.keep_alive());
    return res;
  }

  const api& api_;
  std::string prefix_;
};

/// One connection: read a request's header, check it, read its body, answer, repeat while
/// keep-alive holds. `active` counts the live sessions (the connection cap).
class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket&& socket, const router& r, const host_policy& hosts, std::atomic<std::size_t>& active)
      : stream_(std::move(socket)), router_(r), hosts_(hosts), active_(active) {
    ++active_;
  }
  ~session() { --active_; }
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  void start() {
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&session::read, shared_from_this()));
  }

 private:
  void read() {
    parser_.emplace();
    parser_->header_limit(header_limit);
    parser_->body_limit(body_limit);
    stream_.expires_after(io_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&session::on_header, shared_from_this()));
  }

  /// The header is in: refuse what must not reach the router before reading any body.
  void on_header(beast::error_code ec, std::size_t n) {
    if (ec) return on_read(ec, n);
    const auto& req = parser_->get();
    // RFC 9112 section 6.3: a request whose Transfer-Encoding does not end in "chunked" has no
    // determinable length; answering it and reading on would take its body for the next
    // request (smuggling behind a proxy that reads it differently). 400, and close.
    if (req.find(http::field::transfer_encoding) != req.end() && !parser_->chunked())
      return send(make_parse_error(400, "Transfer-Encoding must end with chunked"));
    std::optional<std::string_view> host;
    if (const auto it = req.find(http::field::host); it != req.end()) host = std::string_view(it->value().data(), it->value().size());
    if (req.count(http::field::host) > 1) return send(make_parse_error(400, "more than one Host header"));
    if (!host && req.version() >= 11) return send(make_parse_error(400, "HTTP/1.1 request without a Host header"));
    if (!host_allowed(host, hosts_)) {
      const std::string shown = host_of(*host).value_or("?");
      return send(make_parse_error(403, "Host '" + shown + "' is not allowed; start kinetoscope with --allowed_hosts " +
                                            shown + " to serve it under that name"));
    }
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec) {
      // Nothing to answer when the peer left, went quiet or sent half a request; the parser's
      // own refusals get a status and the connection is closed after it.
      static const auto& parse_errors = http::make_error_code(http::error::bad_target).category();
      if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
          ec == beast::error::timeout || ec.category() != parse_errors)
        return close();
      if (ec == http::error::header_limit || ec == http::error::buffer_overflow)
        return send(make_parse_error(431, "request header fields too large (16 KiB at most)"));
      if (ec == http::error::body_limit)
        return send(make_parse_error(413, "request body too large (1 MiB at most)"));
      return send(make_parse_error(400, "malformed request: " + ec.message()));
    }
    std::optional<http::message_generator> answer;
    try {
      answer.emplace(router_.respond(parser_->release()));
    } catch (const std::exception& e) {  // out of memory and the like: answer, never crash
      std::cerr << "kinetoscope: internal error: " << e.what() << '\n';
      answer.emplace(make_parse_error(500, "internal error"));
    }
    send(std::move(*answer));
  }

  void send(http::message_generator&& msg) {
    const bool keep_alive = msg.keep_alive();
    stream_.expires_after(io_timeout);
    beast::async_write(
        stream_, std::move(msg),
        beast::bind_front_handler(&session::on_write, shared_from_this(), keep_alive));
  }

  void on_write(bool keep_alive, beast::error_code ec, std::size_t) {
    if (ec) return;
    if (!keep_alive) return close();
    read();
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  const router& router_;
  const host_policy& hosts_;
  std::atomic<std::size_t>& active_;
};

}  // namespace

struct http_server::impl {
  impl(http_options o, const api& handler)
      : options(std::move(o)),
        routes(handler, options.prefix),
        ioc(static_cast<int>(std::max(1u, options.threads))),
        acceptor(ioc),
        retry(ioc),
        signals(ioc) {}

  void listen() {
    std::vector<tcp::endpoint> candidates;
    if (options.bind_all) {
      candidates.emplace_back(net::ip::address_v6::any(), options.port);
      candidates.emplace_back(net::ip::address_v4::any(), options.port);
    } else {
      beast::error_code ec;
      tcp::resolver resolver(ioc);
      const auto results = resolver.resolve(options.host, std::to_string(options.port),
                                            tcp::resolver::passive | tcp::resolver::numeric_service,
                                            ec);
      if (ec)
        throw listen_error("cannot resolve host '" + options.host + "': " + ec.message(), false);
      for (const auto& r : results) candidates.push_back(r.endpoint());
    }
    beast::error_code ec;
    for (const tcp::endpoint& ep : candidates) {
      ec = {};
      acceptor.close(ec);
      ec = {};
      if (acceptor.open(ep.protocol(), ec)) continue;
      acceptor.set_option(net::socket_base::reuse_address(true), ec);
      if (ep.address().is_v6() && options.bind_all)
        acceptor.set_option(net::ip::v6_only(false), ec);  // dual-stack: IPv4 too
      ec = {};
      if (acceptor.bind(ep, ec)) {
        if (ec == net::error::address_in_use) break;  // the port is taken: no point in going on
        continue;
      }
      if (acceptor.listen(net::socket_base::max_listen_connections, ec)) continue;
      return;
    }
    acceptor.close();
    const std::string where = (options.bind_all ? std::string("*") : options.host) + ":" +
                              std::to_string(options.port);
    throw listen_error("cannot listen on " + where + ": " + ec.message(),
                       ec == net::error::address_in_use);
  }

  void accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) {
        beast::error_code ignored;
        if (options.max_connections > 0 && active.load() >= options.max_connections) {
          socket.close(ignored);  // over the cap: its descriptor is given back at once
          return accept();
        }
        socket.set_option(tcp::no_delay(true), ignored);
        std::make_shared<session>(std::move(socket), routes, options.hosts, active)->start();
        return accept();
      }
      // Out of descriptors and the like: wait a little instead of spinning.
      retry.expires_after(std::chrono::milliseconds(50));
      retry.async_wait([this](beast::error_code) { accept(); });
    });
  }

  http_options options;
  router routes;
  net::io_context ioc;
  tcp::acceptor acceptor;
  net::steady_timer retry;
  net::signal_set signals;
  std::atomic<std::size_t> active{0};  ///< live sessions
};

http_server::http_server(http_options options, const api& handler)
    : impl_(std::make_unique<impl>(std::move(options), handler)) {
  impl_->listen();
  // Registered now, not in run(): a signal that arrives before run() is kept and ends it.
  if (impl_->options.handle_signals) {
    impl_->signals.add(SIGINT);
    impl_->signals.add(SIGTERM);
    impl_->signals.async_wait([this](beast::error_code ec, int) {
      if (!ec) stop();
    });
  }
}

http_server::~http_server() { stop(); }

std::uint16_t http_server::port() const noexcept {
  beast::error_code ec;
  const auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

std::string http_server::address() const {
  beast::error_code ec;
  const auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? std::string() : ep.address().to_string();
}

void http_server::run() {
  impl_->accept();
  std::vector<std::thread> threads;
  const unsigned n = std::max(1u, impl_->options.threads);
  threads.reserve(n - 1);
  for (unsigned i = 1; i < n; ++i) threads.emplace_back([this] { impl_->ioc.run(); });
  impl_->ioc.run();
  for (std::thread& t : threads) t.join();
}

void http_server::stop() { impl_->ioc.stop(); }

}  // namespace kinetoscope::server
