// SPDX-License-Identifier: BSD-3-Clause
/// @file api.cpp
/// Request validation and routing of the JSON API (http-api.md). The bodies are built by
/// payloads.cpp from what the store computed at load time; serialized bodies of the profile
/// views are cached in the store under (route, query, profile generation), so a repeated
/// request is a lookup.
#include "server/api.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <limits>
#include <map>
#include <set>

#include "analysis/memory_view.hpp"
#include "kinetoscope/tensorboard/tfevents.hpp"
#include "server/payloads.hpp"
#include "server/store.hpp"
#include "server/summary.hpp"
#include "server/timeline.hpp"

namespace kinetoscope::server {
namespace {

namespace fs = std::filesystem;
namespace an = kinetoscope::analysis;
using payloads::ojson;

constexpr std::size_t max_param_bytes = 1024;
/// How long a request waits for a full profile being loaded before it answers 503 (the page
/// says that the view waits for a load and asks again).
constexpr auto full_wait = std::chrono::milliseconds(1500);
/// View names in the plugin's order (Lightning is served as Module).
const char* const view_order[] = {"Overview", "Operator", "Kernel", "Trace", "Distributed", "Memory", "Module"};

/// Thrown by the helpers below; handle() turns it into the response.
struct api_error {
  unsigned status;
  std::string message;
};

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

api_response json_ok(std::string body) { return {200, "application/json; charset=utf-8", std::move(body)}; }

const std::string& required(const api_request& r, std::string_view name) {
  const std::string* v = r.param(name);
  if (v == nullptr) throw api_error{400, "Must specify " + std::string(name) + " in request url"};
  return *v;
}

/// Strict decimal number: the whole text, finite.
double parse_double(std::string_view name, const std::string& text) {
  double v = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+') ++first;
  const auto [ptr, ec] = std::from_chars(first, last, v);
  if (text.empty() || ec != std::errc() || ptr != last || !std::isfinite(v))
    throw api_error{400, std::string(name) + " must be a number (got '" + text + "')"};
  return v;
}

std::int64_t parse_int(std::string_view name, const std::string& text, std::int64_t lo, std::int64_t hi) {
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || v < lo || v > hi)
    throw api_error{400, std::string(name) + " must be an integer in [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "] (got '" + text + "')"};
  return v;
}

std::optional<double> optional_double(const api_request& r, std::string_view name) {
  const std::string* v = r.param(name);
  if (v == nullptr) return std::nullopt;
  return parse_double(name, *v);
}

an::memory_size_unit memory_unit(const api_request& r, an::memory_size_unit fallback) {
  const std::string* v = r.param("memory_metric");
  if (v == nullptr) return fallback;
  auto u = an::parse_memory_unit(*v);
  if (!u) throw api_error{400, "memory_metric must be B, KB, MB or GB (got '" + *v + "')"};
  return *u;
}

an::memory_time_unit time_unit(const api_request& r) {
  const std::string* v = r.param("time_metric");
  if (v == nullptr) return an::memory_time_unit::ms;
  auto u = an::parse_time_unit(*v);
  if (!u) throw api_error{400, "time_metric must be us, ms or s (got '" + *v + "')"};
  return *u;
}

/// The [start_ts, end_ts] filter of the memory routes (absolute µs; a missing end is open).
std::optional<std::pair<double, double>> memory_range(const api_request& r) {
  const auto start = optional_double(r, "start_ts");
  const auto end = optional_double(r, "end_ts");
  if (!start && !end) return std::nullopt;
  const double inf = std::numeric_limits<double>::infinity();
  const double lo = start ? *start : -inf;
  const double hi = end ? *end : inf;
  if (lo > hi) throw api_error{400, "start_ts must not be greater than end_ts"};
  return std::pair{lo, hi};
}

/// "0", "0-3", "0-3-1".
void check_diff_path(const std::string& path) {
  bool digit = false;
  for (char c : path) {
    if (c >= '0' && c <= '9') {
      digit = true;
    } else if (c == '-' && digit) {
      digit = false;
    } else {
      digit = false;
      break;
    }
  }
  if (!digit) throw api_error{400, "path must look like 0-1-2 (got '" + path + "')"};
}

std::vector<int> parse_tracks(const std::string& text) {
  std::vector<int> out;
  if (text.empty()) return out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    out.push_back(static_cast<int>(parse_int("tracks", text.substr(pos, comma - pos), 0, 1 << 30)));
    pos = comma + 1;
  }
  return out;
}

/// The body of a profile route that reads nothing but the profile (no op trees, no memory
/// range, no other profile): what a summary can keep. nullopt for the other routes and requests.
/// Throws api_error on a bad parameter.
std::optional<std::string> plain_body(const profile& pr, const profile_views& v, const api_request& r,
                                      std::size_t workers) {
  const std::string& route = r.route;
  const std::string* group = r.param("group_by");
  if (route == "memory" || route == "memory_events") {
    if (memory_range(r)) return std::nullopt;
    const auto unit = memory_unit(r, an::memory_size_unit::kb);
    const auto tunit = time_unit(r);
    return dump(route == "memory" ? payloads::memory_stats(v.report.memory, unit)
                                  : payloads::memory_events(v.report.memory, tunit, unit));
  }
  if (route == "memory_curve") {
    const auto unit = memory_unit(r, an::memory_size_unit::mb);
    return dump(payloads::memory_curve(v.report.memory, time_unit(r), unit));
  }
  if (route == "overview") return dump(payloads::overview(v, workers));
  if (route == "operation")
    return dump(payloads::operation_pies(v, group != nullptr && *group == "OperationAndInputShape"));
  if (route == "operation/table")
    return dump(payloads::operation_table(v, group != nullptr && *group == "OperationAndInputShape"));
  if (route == "kernel") return dump(payloads::kernel_pie(v));
  if (route == "kernel/tc_pie") return dump(payloads::kernel_tc_pie(v));
  if (route == "kernel/table") return dump(payloads::kernel_table(v, group != nullptr && *group != "Kernel"));
  if (route == "module") return dump(payloads::module_view(v));
  if (route == "recommendations") return dump(payloads::recommendations(pr, v));
  if (route == "diagnostics") return dump(payloads::diagnostics(pr, v));
  if (route == "timeline/tracks" && pr.timeline) return pr.timeline->tracks_json();
  if (route == "timeline/tracks" && pr.indexed_timeline) return pr.indexed_timeline->tracks_json;
  return std::nullopt;
}

/// Sets the "Number of Worker(s)" of an overview body made for one worker.
std::string overview_for_workers(const std::string& body, std::size_t workers) {
  ojson j = ojson::parse(body);
  for (auto& e : j["environments"])
    if (e.value("title", "") == "Number of Worker(s)") e["value"] = std::to_string(workers);
  return dump(j);
}

/// The collectives the Ranks section lists by default (`top`).
constexpr std::size_t default_top = 50;

class router {
 public:
  router(store& s, const api_request& r) : s_(s), r_(r) {}

  api_response route() {
    for (const auto& [k, v] : r_.query)
      if (v.size() > max_param_bytes || k.size() > max_param_bytes || v.find('\0') != std::string::npos)
        throw api_error{400, "parameter " + k.substr(0, 64) + " is too long or holds a NUL byte"};
    const std::string& route = r_.route;
    if (const std::string* rules = r_.param("rules")) {
      const auto set = an::parse_rule_set(*rules);
      if (!set) throw api_error{400, "rules must be kinetoscope or plugin (got '" + rules->substr(0, 64) + "')"};
      if (*set != s_.options().rules) alt_ = *set;
    }
    if (route == "runs") return runs();
    if (route == "status") return status();
    if (route == "errors") return errors();
    if (route == "views") return views();
    if (route == "workers") return workers();
    if (route == "spans") return spans();
    if (route == "scalars") return scalars();
    if (route.starts_with("distributed/")) return distributed(route.substr(12));
    if (route == "diffnode") return diffnode();
    static const std::set<std::string, std::less<>> profile_routes = {
        "overview",      "operation",    "operation/table", "operation/stack", "kernel",
        "kernel/table",  "kernel/tc_pie", "memory",         "memory_curve",    "memory_events",
        "module",        "recommendations", "diagnostics",  "timeline",        "timeline/tracks",
        "timeline/event", "timeline/search", "timeline/summary", "timeline/counters", "tree"};
    if (profile_routes.count(route) != 0) return profile_route(route);
    throw api_error{404, "unknown API route '" + route.substr(0, 128) + "'"};
  }

 private:
  store& s_;
  const api_request& r_;
  /// The request's `rules=` when it is not the store's rule set (docs/kinetoscope-rules.md):
  /// its views are computed on demand (store::views()), never read from the summaries.
  std::optional<an::rule_set> alt_;

  /// The query as part of a cache key: pairs sorted, unit-separated.
  std::string query_key() const {
    auto q = r_.query;
    std::sort(q.begin(), q.end());
    std::string k;
    for (const auto& [name, value] : q) k += name + '\x1f' + value + '\x1e';
    return k;
  }

  /// The body of this request from the store's cache, else make() (cached when it returns;
  /// an api_error thrown by make() is not cached). `version` identifies the data it reads.
  template <class F>
  api_response cached(std::uint64_t generation, F&& make, std::string_view version = {}) {
    const std::string key =
        r_.route + '\x1d' + query_key() + '\x1d' + std::to_string(generation) + '\x1d' + std::string(version);
    if (auto body = s_.cached_body(key)) return json_ok(std::move(*body));
    std::string body = make();
    s_.cache_body(key, body);
    return json_ok(std::move(body));
  }

  ojson progress_json() const {
    const load_progress p = s_.progress();
    return {{"files_total", p.files_total},
            {"files_loaded", p.files_loaded},
            {"files_failed", p.files_failed},
            {"bytes_total", p.bytes_total},
            {"bytes_loaded", p.bytes_loaded},
            {"percent", std::round(p.percent() * 10.0) / 10.0},
            {"current_file", p.current_file.empty() ? ojson(nullptr) : ojson(p.current_file)}};
  }

  const std::string& known_run() {
    const std::string& run = required(r_, "run");
    if (!s_.run_known(run)) throw api_error{404, "could not find the run " + run};
    return run;
  }
  /// A run with at least one loaded file, and those files.
  std::vector<file_status> loaded_run(const std::string& run) {
    std::vector<file_status> files = s_.run_files(run);
    if (files.empty()) throw api_error{404, "could not find the run " + run};
    return files;
  }

  api_response runs() {
    ojson j;
    j["runs"] = s_.runs();
    const load_progress p = s_.progress();
    j["loading"] = p.loading;
    j["progress"] = progress_json();
    // Every discovered run, loaded or not, and the loaded run with the newest trace file.
    ojson discovered = ojson::array();
    const run_info* latest = nullptr;
    const std::vector<run_info> infos = s_.discovered_runs();
    for (const run_info& r : infos) {
      const char* state = r.files_pending > 0 ? "loading" : r.files_loaded > 0 ? "loaded" : "failed";
      discovered.push_back({{"run", r.name},
                            {"state", state},
                            {"files_loaded", r.files_loaded},
                            {"files_pending", r.files_pending},
                            {"files_failed", r.files_failed},
                            {"mtime", static_cast<double>(r.newest_mtime_ns) / 1e9}});
      if (r.files_loaded > 0 && (latest == nullptr || r.newest_mtime_ns > latest->newest_mtime_ns)) latest = &r;
    }
    j["discovered"] = std::move(discovered);
    j["latest"] = latest == nullptr ? ojson(nullptr) : ojson(latest->name);
    return json_ok(dump(j));
  }

  api_response status() {
    ojson j;
    // The logdir's own name, not its path: the page needs no more, and a path tells a remote
    // reader about the server's file system.
    {
      std::string name = std::filesystem::path(s_.options().logdir).lexically_normal().string();
      while (name.size() > 1 && name.back() == '/') name.pop_back();
      const std::string base = std::filesystem::path(name).filename().string();
      j["logdir"] = base.empty() ? name : base;
    }
    j["notes"] = s_.notes();
    j["rules"] = std::string(an::rule_set_name(s_.options().rules));
    j["loading"] = s_.progress().loading;
    j["progress"] = progress_json();
    ojson files = ojson::array();
    for (const auto& f : s_.files())
      files.push_back({{"run", f.run},
                       {"worker", f.worker},
                       {"span", f.span},
                       {"path", f.path},
                       {"size", f.size},
                       {"state", file_state_name(f.state)},
                       {"error", f.error.empty() ? ojson(nullptr) : ojson(f.error)},
                       {"warnings", f.warnings},
                       {"load_seconds", f.load_seconds ? ojson(*f.load_seconds) : ojson(nullptr)},
                       {"index", f.index.empty() ? ojson(nullptr) : ojson(f.index)},
                       {"resident", f.resident}});
    j["files"] = std::move(files);
    return json_ok(dump(j));
  }

  api_response errors() {
    const std::string& run = known_run();
    ojson out = ojson::array();
    for (const auto& f : s_.files()) {
      if (f.run != run) continue;
      const bool failed = f.state == file_state::failed || f.state == file_state::skipped;
      const bool warned = f.summary && f.warnings > 0;
      if (!failed && !warned) continue;
      ojson e;
      e["path"] = f.path;
      e["error"] = f.error.empty() ? ojson(nullptr) : ojson(f.error);
      e["warnings"] = f.summary ? ojson(f.summary->diagnostics.warnings) : ojson::object();
      e["messages"] = f.summary ? ojson(f.summary->diagnostics.messages) : ojson::array();
      out.push_back(std::move(e));
    }
    return json_ok(dump(out));
  }

  static bool offers(const file_summary& p, std::string_view view) {
    if (view == "Overview" || view == "Operator" || view == "Trace") return true;
    if (view == "Kernel") return p.kernel_view;
    if (view == "Memory") return p.memory_view;
    if (view == "Module") return p.module_view;
    return false;
  }

  /// The spans of `run` that have a Distributed view: those whose workers (one or more) all
  /// communicate, as torch-tb-profiler's loader.py decides (store::distributed(), cached).
  std::set<std::string> distributed_spans(const std::string& run, const std::vector<file_status>& files) {
    std::set<std::string> all;
    for (const auto& f : files) all.insert(f.span);
    std::set<std::string> spans;
    for (const auto& span : all) {
      auto bodies = panels(run, span);
      if (bodies && bodies->available) spans.insert(span);
    }
    return spans;
  }

  /// The span's Distributed bodies with their defaults (store::span_panels(): from memory, the
  /// cache folder, or computed here: the panels from store::distributed() while the job view
  /// is computed beside them).
  std::shared_ptr<const span_bodies> panels(const std::string& run, const std::string& span) {
    if (alt_) return alt_panels(run, span);
    return s_.span_panels(run, span, [&] {
      span_bodies out;
      auto ranks = std::async(std::launch::async, [&]() -> std::string {
        auto job = s_.job(run, span);
        return job ? dump(payloads::distributed_ranks(*job, span, default_top)) : std::string("null");
      });
      auto entry = s_.distributed(run, span);
      if (entry) {
        const an::distributed_result& d = entry->result;
        out.available = d.available;
        out.bodies["gpuinfo"] = dump(payloads::distributed_gpuinfo(d));
        out.bodies["overlap"] = dump(payloads::distributed_overlap(d));
        out.bodies["waittime"] = dump(payloads::distributed_waittime(d));
        out.bodies["commops"] = dump(payloads::distributed_commops(d));
      }
      out.bodies["ranks"] = ranks.get();
      return out;
    });
  }

  /// The span's Distributed bodies under the request's other rule set: from every worker's full
  /// profile (503 while one loads) and its views under those rules (store::views()), kept in the
  /// body cache under the members' generations.
  std::shared_ptr<const span_bodies> alt_panels(const std::string& run, const std::string& span) {
    std::vector<file_status> members;
    std::uint64_t generation = 0xcbf29ce484222325ull;
    for (const auto& f : s_.run_files(run))
      if (f.span == span) {
        members.push_back(f);
        generation = (generation ^ f.summary->generation) * 0x100000001b3ull;
      }
    if (members.empty()) return nullptr;
    const std::string key = std::string("alt-panels\x1d") + run + '\x1f' + span + '\x1d' +
                            std::string(an::rule_set_name(*alt_)) + '\x1d' + std::to_string(generation);
    auto out = std::make_shared<span_bodies>();
    if (auto body = s_.cached_body(key)) {
      const ojson j = ojson::parse(*body);
      out->available = j.at("available").get<bool>();
      for (const auto& [k, v] : j.at("bodies").items()) out->bodies[k] = v.get<std::string>();
      return out;
    }
    const an::analysis_rules rules = an::rules(*alt_);
    std::vector<std::shared_ptr<const profile>> profiles;
    std::vector<std::shared_ptr<const alternate_views>> views;
    for (const auto& f : members) {
      full_result full = s_.acquire(run, f.worker, span, full_wait);
      if (full.loading) throw api_error{503, "loading " + full.path + " for this view"};
      if (!full.full) throw api_error{500, full.error.empty() ? "cannot load " + full.path : full.error};
      views.push_back(s_.views(full.full, *alt_));
      profiles.push_back(std::move(full.full));
    }
    std::vector<an::distributed_worker_part> parts(members.size());
    std::vector<an::rank_summary> ranks(members.size());
    std::vector<std::pair<std::string, const an::distributed_worker_part*>> named;
    std::vector<an::job_input> job_in;
    for (std::size_t i = 0; i < members.size(); ++i) {
      const profile& p = *profiles[i];
      parts[i] = an::prepare_distributed_worker(
          {std::string(), &p.model, views[i]->used_devices, an::distributed_steps(views[i]->report.overview)},
          rules.distributed);
      ranks[i] = an::summarize_rank(p.model, views[i]->report.overview, rules.overview.all_collectives);
      named.emplace_back(members[i].worker, &parts[i]);
      job_in.push_back({members[i].worker, p.model.distributed ? p.model.distributed->rank : -1, &ranks[i]});
    }
    const an::distributed_result d = an::combine_distributed(named, /*keep_records=*/false);
    out->available = d.available;
    out->bodies["gpuinfo"] = dump(payloads::distributed_gpuinfo(d));
    out->bodies["overlap"] = dump(payloads::distributed_overlap(d));
    out->bodies["waittime"] = dump(payloads::distributed_waittime(d));
    out->bodies["commops"] = dump(payloads::distributed_commops(d));
    out->bodies["ranks"] = dump(payloads::distributed_ranks(an::analyze_job(job_in), span, default_top));
    s_.cache_body(key, dump(ojson{{"available", out->available}, {"bodies", out->bodies}}));
    return out;
  }

  api_response views() {
    const std::string& run = required(r_, "run");
    const std::vector<file_status> files = loaded_run(run);
    ojson out = ojson::array();
    const bool dist = !distributed_spans(run, files).empty();
    for (const char* v : view_order) {
      bool any = v == std::string_view("Distributed") && dist;
      for (const auto& f : files) any = any || offers(*f.summary, v);
      if (any) out.push_back(v);
    }
    return json_ok(dump(out));
  }

  api_response workers() {
    const std::string& run = required(r_, "run");
    const std::vector<file_status> files = loaded_run(run);
    const std::string& view = required(r_, "view");
    if (std::find(std::begin(view_order), std::end(view_order), view) == std::end(view_order) && view != "Lightning")
      throw api_error{400, "unknown view '" + view + "'"};
    std::set<std::string> names;
    if (view == "Distributed") {
      if (!distributed_spans(run, files).empty()) names.insert("All");
    } else {
      for (const auto& f : files)
        if (offers(*f.summary, view == "Lightning" ? "Module" : view)) names.insert(f.worker);
    }
    return json_ok(dump(ojson(std::vector<std::string>(names.begin(), names.end()))));
  }

  api_response spans() {
    const std::string& run = required(r_, "run");
    const std::vector<file_status> files = loaded_run(run);
    const std::string& worker = required(r_, "worker");
    std::set<std::string> spans;
    if (worker == "All") {
      spans = distributed_spans(run, files);
    } else {
      for (const auto& f : files)
        if (f.worker == worker) spans.insert(f.span);
      if (spans.empty()) throw api_error{404, "could not find the worker " + worker};
    }
    return json_ok(dump(ojson(std::vector<std::string>(spans.begin(), spans.end()))));
  }

  /// Read by the store's scanner thread (store::scalars_body); never from disk here.
  api_response scalars() {
    const std::string& run = known_run();
    if (auto body = s_.scalars_body(run)) return json_ok(*body);
    return json_ok(R"({"tags":{},"files":0,"errors":[],"skipped_other_summaries":0,"corrupt_records":0,"loading":true})");
  }

  api_response distributed(const std::string& which) {
    if (which != "gpuinfo" && which != "overlap" && which != "waittime" && which != "commops" && which != "ranks")
      throw api_error{404, "unknown API route 'distributed/" + which.substr(0, 64) + "'"};
    const std::string& run = required(r_, "run");
    const std::string& span = required(r_, "span");
    loaded_run(run);
    if (which == "ranks" && r_.param("top") != nullptr && !alt_) return ranks(run, span);
    auto bodies = panels(run, span);
    if (!bodies) throw api_error{404, "could not find the span " + span + " of run " + run};
    const auto it = bodies->bodies.find(which);
    return json_ok(it != bodies->bodies.end() ? it->second : std::string("null"));
  }

  /// The job view of (run, span) from the per-rank summaries (store::job(), cached); the body is
  /// cached under the generations of the span's profiles.
  api_response ranks(const std::string& run, const std::string& span) {
    const std::string* top_param = r_.param("top");
    const auto top = static_cast<std::size_t>(top_param ? parse_int("top", *top_param, 0, 10000) : default_top);
    auto job = s_.job(run, span);
    if (!job) throw api_error{404, "could not find the span " + span + " of run " + run};
    std::uint64_t generation = 0xcbf29ce484222325ull;
    for (const auto& f : s_.run_files(run))
      if (f.span == span) generation = (generation ^ f.summary->generation) * 0x100000001b3ull;
    return cached(generation, [&] { return dump(payloads::distributed_ranks(*job, span, top)); }, "ranks");
  }

  api_response diffnode() {
    auto base = full_profile("run", "worker", "span");
    auto exp = full_profile("exp_run", "exp_worker", "exp_span");
    const std::string* path_param = r_.param("path");
    const std::string path = path_param ? *path_param : "0";
    check_diff_path(path);
    return cached(base->generation, [&] {
      auto root = alt_ ? std::make_shared<const an::diff_node>(
                             an::compute_diff(*s_.views(base, *alt_)->trees, *s_.views(exp, *alt_)->trees))
                       : s_.diff(base, exp);
      const an::diff_node* node = an::find_diff_node(*root, path);
      if (node == nullptr) throw api_error{404, "could not find diff run for " + path};
      return dump(payloads::diff_node(*node));
    }, std::to_string(exp->generation));
  }

  std::size_t workers_in_span(const std::string& run, const std::string& span) const {
    std::set<std::string> w;
    for (const auto& f : s_.run_files(run))
      if (f.span == span) w.insert(f.worker);
    return w.size();
  }

  /// compute_memory_range() with the op trees built only when the index cannot answer alone.
  an::memory_result memory_range_result(const std::shared_ptr<const profile>& p, std::pair<double, double> range,
                                        an::memory_parts parts) {
    static const an::op_trees unused;  // never read: the index answers alone
    const auto trees = p->memory_index.reads_trees() ? s_.trees(p) : nullptr;
    return an::compute_memory_range(p->memory_index, p->model, trees ? *trees : unused, range, parts);
  }

  /// The full profile of the request's (run, worker, span); 503 while it is being loaded
  /// (the page retries and says so), the load's error when it failed.
  /// `timeline_only`: the caller reads only the timeline, model, path and generation (see
  /// store::acquire): the Trace view's routes get the profile as soon as its timeline is built.
  std::shared_ptr<const profile> full_profile(const char* run_key, const char* worker_key, const char* span_key,
                                              bool timeline_only = false) {
    const std::string& run = required(r_, run_key);
    const std::string& worker = required(r_, worker_key);
    const std::string& span = required(r_, span_key);
    full_result f = s_.acquire(run, worker, span, full_wait, timeline_only);
    if (f.full) return std::move(f.full);
    if (f.loading) throw api_error{503, "loading " + f.path + " for this view"};
    if (!f.error.empty()) throw api_error{500, f.error};
    throw api_error{404, "could not find the profile for " + run + "/" + worker + "/" + span};
  }

  api_response profile_route(const std::string& route) {
    const std::string& run = required(r_, "run");
    const std::string& worker = required(r_, "worker");
    const std::string& span = required(r_, "span");
    auto sum = s_.find_summary(run, worker, span);
    if (!sum) throw api_error{404, "could not find the profile for " + run + "/" + worker + "/" + span};
    // The views' default requests are answered from the resident summary (its rule set's).
    const bool timeline_route_ = route.starts_with("timeline");  // the timeline has no rules
    if (auto it = sum->bodies.find(request_key(r_)); (!alt_ || timeline_route_) && it != sum->bodies.end()) {
      if (route != "overview") return json_ok(it->second);
      const std::size_t workers = workers_in_span(run, span);
      if (workers == 1) return json_ok(it->second);
      return cached(sum->generation, [&] { return overview_for_workers(it->second, workers); },
                    std::to_string(workers));
    }
    if (route.starts_with("timeline") && !sum->timeline_error.empty())
      throw api_error{404, "no timeline for this profile: " + sum->timeline_error};
    const bool timeline_only = route.starts_with("timeline") && route != "timeline/tracks";
    auto p = full_profile("run", "worker", "span", timeline_only);
    const profile& pr = *p;
    if (timeline_only) return timeline_route(route, pr);  // reads pr's timeline, model, generation only
    // The views of the request's rule set: the profile's own, or computed for another one.
    const std::shared_ptr<const alternate_views> alt = alt_ && !timeline_route_ ? s_.views(p, *alt_) : nullptr;
    const profile_views& v = alt ? static_cast<const profile_views&>(*alt) : pr;
    const auto trees_of = [&] { return alt ? alt->trees : s_.trees(p); };
    const auto range = route == "memory" || route == "memory_events" ? memory_range(r_) : std::nullopt;
    if (range) {
      // Validate before the cache lookup so bad input never hits a cached body.
      const auto unit = memory_unit(r_, an::memory_size_unit::kb);
      const auto tunit = time_unit(r_);
      return cached(pr.generation, [&] {
        const bool filter = v.report.memory.present;
        an::memory_parts parts;  // only what this route shows
        parts.curve = false;
        parts.stats = route == "memory";
        parts.events = route == "memory_events";
        an::memory_result ranged;
        if (filter && alt) {
          ranged = an::compute_memory(pr.model, *alt->trees, std::pair{range->first, range->second});
        } else if (filter) {
          ranged = memory_range_result(p, *range, parts);
        }
        const an::memory_result& m = filter ? ranged : v.report.memory;
        return dump(route == "memory" ? payloads::memory_stats(m, unit) : payloads::memory_events(m, tunit, unit));
      });
    }
    if (route == "operation/stack") {
      const std::string& op = required(r_, "op_name");
      const std::string* group = r_.param("group_by");
      const bool by_shape = group != nullptr && *group == "OperationAndInputShape";
      std::optional<std::string_view> shape;
      if (by_shape) shape = required(r_, "input_shape");
      return cached(pr.generation, [&] {
        auto j = payloads::operation_stack(pr, v, *trees_of(), op, shape);
        if (!j) throw api_error{404, "could not find the call stack of operator " + op};
        return dump(*j);
      });
    }
    if (route == "tree") {
      return cached(pr.generation, [&] {
        auto j = payloads::operator_tree(pr, *trees_of());
        if (!j) throw api_error{404, "could not find the operator tree of this profile"};
        return dump(*j);
      });
    }
    if (route == "timeline/tracks" && !pr.timeline) throw api_error{404, "no timeline for this profile: " + pr.timeline_error};
    const std::size_t workers = route == "overview" ? workers_in_span(run, span) : 1;
    return cached(pr.generation, [&] {
      auto body = plain_body(pr, v, r_, workers);  // throws api_error on a bad parameter: not cached
      if (!body) throw api_error{500, "no body for route " + route};
      return std::move(*body);
    }, route == "overview" ? std::to_string(workers) : "");
  }

  api_response timeline_route(const std::string& route, const profile& pr) {
    if (!pr.timeline) throw api_error{404, "no timeline for this profile: " + pr.timeline_error};
    const timeline& t = *pr.timeline;
    if (route == "timeline/tracks") return cached(pr.generation, [&] { return t.tracks_json(); });
    if (route == "timeline") {
      const double start = parse_double("start", required(r_, "start"));
      const double end = parse_double("end", required(r_, "end"));
      const int px = static_cast<int>(parse_int("px", required(r_, "px"), 1, 10000));
      const std::string* tracks = r_.param("tracks");
      const std::vector<int> ids = tracks ? parse_tracks(*tracks) : std::vector<int>{};
      return cached(pr.generation, [&] { return t.window_json(start, end, px, ids); });
    }
    if (route == "timeline/counters") {
      const double start = parse_double("start", required(r_, "start"));
      const double end = parse_double("end", required(r_, "end"));
      const int px = static_cast<int>(parse_int("px", required(r_, "px"), 1, 10000));
      return cached(pr.generation, [&] { return t.counters_json(start, end, px); });
    }
    if (route == "timeline/summary") {
      const double start = parse_double("start", required(r_, "start"));
      const double end = parse_double("end", required(r_, "end"));
      const std::string* tracks = r_.param("tracks");
      const std::vector<int> ids = tracks ? parse_tracks(*tracks) : std::vector<int>{};
      return cached(pr.generation, [&] { return t.summary_json(start, end, ids); });
    }
    if (route == "timeline/event") {
      const auto id = parse_int("id", required(r_, "id"), 0, std::numeric_limits<std::uint32_t>::max());
      const std::string* subtree = r_.param("subtree");
      auto body = t.event_json(static_cast<std::uint32_t>(id), subtree != nullptr && *subtree == "1");
      if (!body) throw api_error{404, "could not find the event " + std::to_string(id)};
      return json_ok(std::move(*body));
    }
    const std::string& q = required(r_, "q");
    const std::string* limit_text = r_.param("limit");
    std::int64_t limit = 200;
    if (limit_text) limit = std::min<std::int64_t>(parse_int("limit", *limit_text, 0, 1 << 30), 1000);
    return cached(pr.generation, [&] { return t.search_json(q, static_cast<std::size_t>(limit)); });
  }
};

}  // namespace

const std::string* api_request::param(std::string_view name) const {
  for (const auto& [k, v] : query)
    if (k == name) return &v;
  return nullptr;
}

api_response error_response(unsigned status, std::string_view message) {
  return {status, "application/json; charset=utf-8", dump(ojson{{"error", message}})};
}

std::string request_key(const api_request& request) {
  std::vector<std::pair<std::string, std::string>> q;
  for (const auto& kv : request.query)
    if (kv.first != "run" && kv.first != "worker" && kv.first != "span" && kv.first != "rules") q.push_back(kv);
  std::sort(q.begin(), q.end());
  std::string k = request.route;
  k += '\x1d';
  for (const auto& [name, value] : q) k += name + '\x1f' + value + '\x1e';
  return k;
}

std::map<std::string, std::string> canonical_bodies(const profile& p, std::size_t max_body_bytes) {
  // What web/src/views asks by default (api('memory', {memory_metric: 'B'}), ...), and each route
  // without parameters.
  const std::vector<api_request> requests = {
      {"overview", {}},
      {"operation", {}},
      {"operation", {{"group_by", "Operation"}}},
      {"operation", {{"group_by", "OperationAndInputShape"}}},
      {"operation/table", {}},
      {"operation/table", {{"group_by", "Operation"}}},
      {"operation/table", {{"group_by", "OperationAndInputShape"}}},
      {"kernel", {}},
      {"kernel", {{"group_by", "Kernel"}}},
      {"kernel", {{"group_by", "OperationAndKernel"}}},
      {"kernel/table", {}},
      {"kernel/table", {{"group_by", "Kernel"}}},
      {"kernel/table", {{"group_by", "OperationAndKernel"}}},
      {"kernel/tc_pie", {}},
      {"memory", {}},
      {"memory", {{"memory_metric", "B"}}},
      {"memory_events", {}},
      {"memory_events", {{"time_metric", "ms"}, {"memory_metric", "B"}}},
      {"memory_curve", {}},
      {"memory_curve", {{"time_metric", "ms"}, {"memory_metric", "MB"}}},
      {"module", {}},
      {"recommendations", {}},
      {"diagnostics", {}},
      {"timeline/tracks", {}},
  };
  std::map<std::string, std::string> out;
  for (const api_request& r : requests) {
    std::optional<std::string> body;
    try {
      body = plain_body(p, p, r, 1);
    } catch (const api_error&) {
      continue;  // not offered for this profile
    }
    if (body && body->size() <= max_body_bytes) out.emplace(request_key(r), std::move(*body));
  }
  return out;
}

api_response api::handle(const api_request& request) const {
  try {
    return router(store_, request).route();
  } catch (const api_error& e) {
    return error_response(e.status, e.message);
  } catch (const std::exception& e) {
    return error_response(500, std::string("internal error: ") + e.what());
  }
}

}  // namespace kinetoscope::server
