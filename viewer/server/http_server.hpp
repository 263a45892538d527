// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file http_server.hpp
/// The viewer's HTTP/1.1 transport: Boost.Beast over Asio, kept behind this Boost-free header
/// so that only http_server.cpp pays Beast's compile time. It serves GET and HEAD only: the JSON
/// API (api.hpp) under `<prefix>/api/` and the embedded web app (web/assets.hpp) under
/// `<prefix>/`. It never reads a file from disk.

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "server/url.hpp"

namespace kinetoscope::server {

class api;

/// Where and how to listen.
struct http_options {
  std::string host = "127.0.0.1";  ///< address or name to bind (ignored with bind_all)
  std::uint16_t port = 6006;       ///< 0: any free port (see http_server::port())
  bool bind_all = false;           ///< every interface ("::" dual-stack, else 0.0.0.0)
  std::string prefix;              ///< normalised path prefix ("" or "/x", see normalize_prefix)
  unsigned threads = 4;            ///< I/O threads running the io_context
  bool handle_signals = true;      ///< SIGINT/SIGTERM (from construction on) make run() return
  /// Host header values answered (DNS-rebinding defence, see url.hpp); others get 403.
  host_policy hosts;
  /// Connections served at once; more are accepted and closed at once, so the descriptors the
  /// store needs to read trace files never run out. 0: no cap.
  std::size_t max_connections = 0;
};

/// Thrown by the http_server constructor when it cannot listen.
class listen_error : public std::runtime_error {
 public:
  listen_error(const std::string& what, bool address_in_use)
      : std::runtime_error(what), address_in_use_(address_in_use) {}
  /// True when the port is taken by another socket.
  bool address_in_use() const noexcept { return address_in_use_; }

 private:
  bool address_in_use_;
};

/// An HTTP server bound on construction (so the port is known and errors come early) and run
/// by run(). stop() may be called from any thread. run() may be called once.
class http_server {
 public:
  /// Resolves and binds the listening socket; throws listen_error on failure.
  http_server(http_options options, const api& handler);
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  /// The bound port (the real one when options.port was 0).
  std::uint16_t port() const noexcept;
  /// The bound address as text ("127.0.0.1", "::").
  std::string address() const;

  /// Accepts and serves on options.threads threads until stop() or, with handle_signals, until
  /// SIGINT or SIGTERM. Returns once every thread has finished.
  void run();
  /// Makes run() return. Idempotent.
  void stop();

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace kinetoscope::server
