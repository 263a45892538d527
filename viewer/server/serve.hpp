// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file serve.hpp
/// `kinetoscope --logdir DIR [flags]`: the viewer server's command line (flags as TensorBoard
/// spells them, `--flag value` or `--flag=value`), start-up line, load progress and shutdown.
/// No Boost here: the transport is http_server.hpp.

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace kinetoscope::server {

/// The program version printed by --version and on start.
inline constexpr std::string_view version = "0.1.0";

/// The flags of `kinetoscope --logdir`.
struct serve_options {
  std::string logdir;              ///< required; an existing directory
  std::uint16_t port = 6006;       ///< 0: any free port
  std::string host = "127.0.0.1";  ///< address or name to listen on
  bool bind_all = false;           ///< every interface (exclusive with --host)
  std::string prefix;              ///< normalised --path_prefix ("" or "/x")
  double reload_interval_s = 5;    ///< seconds between logdir rescans; 0: scan once
  unsigned threads = 4;            ///< I/O threads
  bool follow_symlinks = false;    ///< follow symlinks that lead outside the logdir
  /// --max_file_size: the largest JSON text of a trace (after gunzip) the loader accepts.
  std::uint64_t max_file_size = std::uint64_t{16} << 30;
  /// --cache_dir: where persisted indexes go (default trace_index.hpp default_cache_dir()).
  std::string cache_dir;
  bool no_cache = false;           ///< --no_cache: neither read nor write indexes
  /// --plugin_rules: the views follow torch-tb-profiler's rules by default (a request's
  /// `rules=` still picks either; docs/kinetoscope-rules.md).
  bool plugin_rules = false;
  /// --cache_max: the cache folder's size budget (0: no limit); unset: default_cache_max().
  std::optional<std::uint64_t> cache_max;
  /// --max_memory: bytes of full profiles kept loaded (default: half the physical memory).
  std::uint64_t max_memory = 0;
  /// --allowed_hosts: Host names answered besides IP literals, localhost and the machine's name.
  std::vector<std::string> allowed_hosts;
};

/// What the command line asks for.
struct serve_args {
  std::optional<serve_options> options;  ///< set when the server should run
  bool help = false;                     ///< --help given
  bool version = false;                  ///< --version given
  std::string error;                     ///< a usage error (exit 2) when non-empty
};

/// Parses the words after the program name. Checks values (numbers strictly, the prefix with
/// normalize_prefix, the logdir exists and is a directory) and never throws.
serve_args parse_serve_args(const std::vector<std::string>& args);

/// The flags' help text.
std::string serve_usage();

/// Runs the server until SIGINT/SIGTERM. Prints the start line on `out` and progress on `err`.
/// Returns the exit status: 0 after a signal or --help/--version, 1 when it cannot listen (port
/// in use), 2 on a usage error.
int run_serve(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace kinetoscope::server
