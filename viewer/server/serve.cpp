// SPDX-License-Identifier: BSD-3-Clause
// `kinetoscope --logdir DIR` (serve.hpp): flags, the start line, the progress reporter.
#include "server/serve.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include "analysis/loader.hpp"
#include "server/api.hpp"
#include "server/http_server.hpp"
#include "server/store.hpp"
#include "server/trace_index.hpp"
#include "server/url.hpp"

namespace kinetoscope::server {
namespace {

template <class T>
bool parse_integer(std::string_view text, T& value) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return !text.empty() && ec == std::errc() && ptr == end;
}

bool parse_double(std::string_view text, double& value) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return !text.empty() && ec == std::errc() && ptr == end && std::isfinite(value);
}

bool parse_bool(std::string_view text, bool& value) {
  if (text == "true" || text == "1") return value = true, true;
  if (text == "false" || text == "0") return value = false, true;
  return false;
}

/// "loading: 3/11 files, 120.5 of 300.0 MB (40.2 %)"
std::string progress_text(const load_progress& p) {
  char line[160];
  std::snprintf(line, sizeof line, "loading: %zu/%zu files, %.1f of %.1f MB (%.1f %%)",
                p.files_loaded + p.files_failed, p.files_total, double(p.bytes_loaded) / 1e6,
                double(p.bytes_total) / 1e6, p.percent());
  return line;
}

/// "loaded 11 files (1 failed) in 1.4 s"
std::string done_text(const load_progress& p, double seconds) {
  char line[160];
  std::snprintf(line, sizeof line, "loaded %zu files (%zu failed) in %.1f s",
                p.files_loaded + p.files_failed, p.files_failed, seconds);
  return line;
}

/// Reports load progress on `err` from its own thread until stopped: rewritten in place on a
/// terminal, otherwise a line at most every 2 s when it changed; a summary whenever loading ends
/// (after the first scan and after any rescan that found work).
class progress_reporter {
 public:
  progress_reporter(const store& s, std::ostream& err, bool terminal)
      : store_(s), err_(err), terminal_(terminal), thread_([this] { loop(); }) {}
  ~progress_reporter() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  void loop() {
    using clock = std::chrono::steady_clock;
    const auto tick = std::chrono::milliseconds(terminal_ ? 200 : 250);
    auto began = clock::now();
    std::optional<clock::time_point> last_print;
    std::string last_text;
    bool loading = true;  // the first scan counts as loading until the store says otherwise
    bool line_open = false;
    std::unique_lock lock(mutex_);
    for (;;) {
      const bool stopping = stop_;  // one last look after stop, so a finished load is reported
      const load_progress p = store_.progress();
      const auto now = clock::now();
      if (p.loading && p.files_total > 0) {
        if (!loading) {
          began = now;
          loading = true;
        }
        const std::string text = progress_text(p);
        if (text != last_text) {
          if (terminal_) {
            err_ << '\r' << text << "\x1b[K" << std::flush;
            line_open = true;
            last_text = text;
          } else if (!last_print || now - *last_print >= std::chrono::seconds(2)) {
            err_ << text << std::endl;
            last_print = now;
            last_text = text;
          }
        }
      } else if (!p.loading && loading) {
        if (line_open) err_ << "\r\x1b[K";
        line_open = false;
        const double seconds = std::chrono::duration<double>(now - began).count();
        err_ << done_text(p, seconds) << std::endl;
        loading = false;
        last_text.clear();
      }
      if (stopping) break;
      wake_.wait_for(lock, tick, [this] { return stop_; });
    }
    if (line_open) err_ << std::endl;
  }

  const store& store_;
  std::ostream& err_;
  bool terminal_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after every other member is ready
};

/// The host to show in the URL: the machine's name for --bind_all (as TensorBoard does),
/// brackets around an IPv6 literal.
std::string display_host(const serve_options& o) {
  std::string host = o.host;
  if (o.bind_all) {
    char name[256] = {};
    host = gethostname(name, sizeof name - 1) == 0 && name[0] != '\0' ? name : "localhost";
  }
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return host;
}

/// Raises the soft limit on open descriptors to the hard limit (connections and trace files
/// share it); returns the limit in force.
std::size_t raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  if (rl.rlim_cur != RLIM_INFINITY && (rl.rlim_max == RLIM_INFINITY || rl.rlim_cur < rl.rlim_max)) {
    rlimit raised = rl;
    // (Linux refuses RLIM_INFINITY above fs.nr_open; 1 << 20 is its default.)
    raised.rlim_cur = rl.rlim_max == RLIM_INFINITY ? rlim_t{1} << 20 : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  return rl.rlim_cur == RLIM_INFINITY ? std::size_t{1} << 20 : static_cast<std::size_t>(rl.rlim_cur);
}

/// Connections served at once: the descriptor limit less a reserve for the store (trace files,
/// directory listings), the listening socket, the event loop and the standard streams.
std::size_t connection_cap(std::size_t fd_limit) {
  constexpr std::size_t reserve = 64;
  return fd_limit > 2 * reserve ? fd_limit - reserve : std::max<std::size_t>(fd_limit / 2, 1);
}

/// Bytes of physical memory (sysconf), 8 GiB when unknown.
std::uint64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return std::uint64_t{8} << 30;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
}

/// The Host names the server answers (see host_policy).
host_policy host_policy_of(const serve_options& o) {
  host_policy p;
  p.allow_all = o.bind_all && o.allowed_hosts.empty();
  p.names = o.allowed_hosts;
  if (auto h = host_of(o.host)) p.names.push_back(*h);
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0 && name[0] != '\0')
    if (auto h = host_of(name)) p.names.push_back(*h);
  return p;
}

}  // namespace

std::string serve_usage() {
  return "usage: kinetoscope --logdir DIR [--port N] [--host ADDR | --bind_all]\n"
         "                   [--path_prefix /PATH] [--reload_interval SECONDS] [--threads N]\n"
         "                   [--follow_symlinks] [--max_file_size SIZE] [--allowed_hosts NAMES]\n"
         "                   [--max_memory SIZE] [--cache_dir DIR | --no_cache] [--cache_max SIZE]\n"
         "                   [--plugin_rules]\n"
         "  --logdir DIR              folder of runs (<run>/<worker>.pt.trace.json[.gz]) to serve\n"
         "  --port N                  TCP port (default 6006; 0: any free port)\n"
         "  --host ADDR               address or name to listen on (default 127.0.0.1)\n"
         "  --bind_all                listen on every interface (IPv6 and IPv4); without\n"
         "                            --allowed_hosts, requests under any Host name are answered\n"
         "  --allowed_hosts NAMES     comma-separated Host names to answer besides IP addresses,\n"
         "                            localhost and this machine's name (\".example.com\": it and\n"
         "                            every name below it; \"*\": any); others get 403 (a\n"
         "                            defence against DNS rebinding)\n"
         "  --path_prefix /PATH       serve under http://host:port/PATH/ (behind a proxy)\n"
         "  --reload_interval SECONDS rescan the logdir this often (default 5; 0: scan once)\n"
         "  --threads N               HTTP I/O threads (default 4)\n"
         "  --follow_symlinks         also follow symlinks (to files or directories) that lead\n"
         "                            outside the logdir\n"
         "  --max_file_size SIZE      refuse trace files whose JSON text (after gunzip) is\n"
         "                            larger (default 16G; K, M, G, T: powers of 1024)\n"
         "  --max_memory SIZE         keep full trace models within SIZE (e.g. 400M, 8G; default:\n"
         "                            half the physical memory); the least recently used are\n"
         "                            unloaded, every view still answers (small per-file\n"
         "                            summaries stay), a view that needs one loads it again\n"
         "  --cache_dir DIR           keep the index of each trace here, so the next start\n"
         "                            reads it instead of parsing (default: $XDG_CACHE_HOME/\n"
         "                            kinetoscope, else ~/.cache/kinetoscope)\n"
         "  --no_cache                neither read nor write indexes\n"
         "  --cache_max SIZE          keep the cache folder's indexes under SIZE, evicting the\n"
         "                            least recently used (default $KINETOSCOPE_CACHE_MAX, else\n"
         "                            5G or a tenth of its disk; 0: no limit). Traces under 1 MiB\n"
         "                            ($KINETOSCOPE_INDEX_MIN_SIZE) are not indexed\n"
         "  --plugin_rules            show torch-tb-profiler 0.4.3's numbers exactly by default\n"
         "                            (default: kinetoscope's rules, docs/kinetoscope-rules.md;\n"
         "                            the page's toggle and ?rules= pick either per request)\n"
         "  --help, --version\n"
         "flags take their value as '--flag value' or '--flag=value'\n";
}

serve_args parse_serve_args(const std::vector<std::string>& args) {
  serve_args result;
  serve_options o;
  bool have_logdir = false, have_host = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view word = args[i];
    if (word == "--help" || word == "-h") {
      result.help = true;
      return result;
    }
    if (word == "--version") {
      result.version = true;
      return result;
    }
    if (!word.starts_with("--")) {
      result.error = "unexpected argument '" + args[i] + "'";
      return result;
    }
    std::string_view name = word.substr(2);
    std::optional<std::string_view> inline_value;
    if (const std::size_t eq = name.find('='); eq != std::string_view::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const bool is_switch =
        name == "bind_all" || name == "follow_symlinks" || name == "no_cache" || name == "plugin_rules";
    std::string_view value;
    if (is_switch) {
      bool on = true;
      if (inline_value && !parse_bool(*inline_value, on)) {
        result.error = "--" + std::string(name) + " takes true or false, not '" +
                       std::string(*inline_value) + "'";
        return result;
      }
      (name == "bind_all"       ? o.bind_all
       : name == "no_cache"     ? o.no_cache
       : name == "plugin_rules" ? o.plugin_rules
                                : o.follow_symlinks) = on;
      continue;
    }
    if (name != "logdir" && name != "port" && name != "host" && name != "path_prefix" &&
        name != "reload_interval" && name != "threads" && name != "max_file_size" && name != "allowed_hosts" &&
        name != "max_memory" && name != "cache_dir" && name != "cache_max") {
      result.error = "unknown flag '--" + std::string(name) + "'";
      return result;
    }
    if (inline_value) {
      value = *inline_value;
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      result.error = "--" + std::string(name) + " needs a value";
      return result;
    }
    const auto bad = [&](std::string_view why) {
      result.error = "bad value '" + std::string(value) + "' for --" + std::string(name) + ": " +
                     std::string(why);
      return result;
    };
    if (name == "logdir") {
      if (value.empty()) return bad("empty");
      o.logdir = value;
      have_logdir = true;
    } else if (name == "port") {
      if (!parse_integer(value, o.port)) return bad("expected a port number 0-65535");
    } else if (name == "host") {
      if (value.empty()) return bad("empty");
      o.host = value;
      have_host = true;
    } else if (name == "path_prefix") {
      auto prefix = normalize_prefix(value);
      if (!prefix) return bad("expected a path like /profiler (no '..', '//', '?', '#', '%')");
      o.prefix = *prefix;
    } else if (name == "reload_interval") {
      if (!parse_double(value, o.reload_interval_s) || o.reload_interval_s < 0)
        return bad("expected seconds >= 0");
    } else if (name == "allowed_hosts") {
      auto names = parse_allowed_hosts(value);
      if (!names) return bad("expected comma-separated host names, e.g. viewer.example.com,.corp.example");
      o.allowed_hosts.insert(o.allowed_hosts.end(), names->begin(), names->end());
    } else if (name == "max_file_size") {
      const auto size = analysis::parse_byte_size(value);
      if (!size || *size == 0) return bad("expected a size in bytes, optionally with K, M, G or T (e.g. 16G)");
      o.max_file_size = *size;
    } else if (name == "max_memory") {
      const auto size = analysis::parse_byte_size(value);
      if (!size || *size == 0) return bad("expected a size in bytes, optionally with K, M, G or T (e.g. 8G)");
      o.max_memory = *size;
    } else if (name == "cache_dir") {
      if (value.empty()) return bad("empty");
      o.cache_dir = value;
    } else if (name == "cache_max") {
      const auto size = analysis::parse_byte_size(value);
      if (!size) return bad("expected a size in bytes, optionally with K, M, G or T (e.g. 5G; 0: no limit)");
      o.cache_max = *size;
    } else if (name == "threads") {
      if (!parse_integer(value, o.threads) || o.threads < 1 || o.threads > 256)
        return bad("expected 1-256");
    }
  }
  if (!have_logdir) {
    result.error = "--logdir is required";
    return result;
  }
  if (o.no_cache && !o.cache_dir.empty()) {
    result.error = "--cache_dir and --no_cache are mutually exclusive";
    return result;
  }
  if (have_host && o.bind_all) {
    result.error = "--host and --bind_all are mutually exclusive";
    return result;
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(o.logdir, ec)) {
    result.error = "--logdir '" + o.logdir + "' is not an existing directory" +
                   (ec && ec != std::errc::no_such_file_or_directory ? " (" + ec.message() + ")"
                                                                     : std::string());
    return result;
  }
  result.options = std::move(o);
  return result;
}

int run_serve(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const serve_args parsed = parse_serve_args(args);
  if (parsed.help) {
    out << serve_usage();
    return 0;
  }
  if (parsed.version) {
    out << "kinetoscope " << version << '\n';
    return 0;
  }
  if (!parsed.error.empty()) {
    err << "kinetoscope: " << parsed.error << '\n' << serve_usage();
    return 2;
  }
  const serve_options& o = *parsed.options;

  const std::size_t fd_limit = raise_fd_limit();
  store_options so;
  so.logdir = o.logdir;
  so.reload_interval_s = o.reload_interval_s;
  so.follow_outside_symlinks = o.follow_symlinks;
  so.max_text_bytes = o.max_file_size;
  so.rules = o.plugin_rules ? analysis::rule_set::plugin : analysis::rule_set::kinetoscope;
  so.cache_dir = o.no_cache ? std::string() : o.cache_dir.empty() ? default_cache_dir() : o.cache_dir;
  so.cache_max = o.cache_max ? *o.cache_max : default_cache_max(so.cache_dir);
  so.max_memory = o.max_memory != 0 ? o.max_memory : physical_memory() / 2;
  so.loader_threads = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  // The op trees rebuilt on demand count against the same budget.
  so.tree_cache_bytes = std::min<std::uint64_t>(so.tree_cache_bytes, so.max_memory / 4);
  store logs(so);
  const api handler(logs);
  std::optional<http_server> server;
  try {
    http_options h;
    h.host = o.host;
    h.port = o.port;
    h.bind_all = o.bind_all;
    h.prefix = o.prefix;
    h.threads = o.threads;
    h.hosts = host_policy_of(o);
    h.max_connections = connection_cap(fd_limit);
    server.emplace(std::move(h), handler);
  } catch (const listen_error& e) {
    if (e.address_in_use())
      err << "kinetoscope: port " << o.port
          << " is in use; choose another with --port, or --port 0 for any free port\n";
    else
      err << "kinetoscope: " << e.what() << '\n';
    return 1;
  }
  out << "kinetoscope " << version << " at http://" << display_host(o) << ':' << server->port()
      << o.prefix << "/ (Press CTRL+C to quit)" << std::endl;
  if (o.bind_all && o.allowed_hosts.empty())
    err << "kinetoscope: --bind_all without --allowed_hosts: requests under any Host name are answered "
           "(no DNS-rebinding check); name the hosts to serve with --allowed_hosts\n";

  logs.start();
  {
    const bool terminal = &err == &std::cerr && isatty(STDERR_FILENO) == 1;
    progress_reporter reporter(logs, err, terminal);
    server->run();
  }
  server.reset();
  return 0;
}

}  // namespace kinetoscope::server
