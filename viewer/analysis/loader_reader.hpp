// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file loader_reader.hpp
/// Internal to loader.cpp: the category table, and the reader class that turns one text buffer
/// into one trace_model with simdjson On-Demand (member functions with loops live in
/// loader.cpp). Not part of the analysis API.

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/loader_stream.hpp"
#include "analysis/loader_text.hpp"  // includes simdjson (see there)
#include "analysis/model.hpp"

namespace kinetoscope::analysis::detail {

namespace od = simdjson::ondemand;
using simdjson::error_code;
using simdjson::SUCCESS;

// ------------------------------------------------------------------------------------------
// Categories (docs/plugin-rules.md#event-categories, case-insensitive) and warnings.

struct cat_info {
  event_type type = event_type::other;
  bool gpu_annotation = false;
  bool fwdbwd = false;  ///< exact, case-sensitive "fwdbwd"
};

inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (x != b[i]) return false;
  }
  return true;
}

inline cat_info classify_category(std::string_view cat) {
  struct row {
    std::string_view name;
    event_type type;
  };
  static constexpr row table[] = {
      {"trace", event_type::trace},
      {"cpu_op", event_type::op},
      {"operator", event_type::op},
      {"user_annotation", event_type::user_annotation},
      {"gpu_user_annotation", event_type::user_annotation},
      {"python", event_type::python},
      {"python_function", event_type::python_function},
      {"runtime", event_type::runtime},
      {"cuda_runtime", event_type::runtime},
      {"mtia_runtime", event_type::runtime},
      {"glow_runtime", event_type::runtime},
      {"xpu_runtime", event_type::runtime},
      {"privateuse1_runtime", event_type::runtime},
      {"cuda_driver", event_type::driver},
      {"kernel", event_type::kernel},
      {"memcpy", event_type::memcpy},
      {"gpu_memcpy", event_type::memcpy},
      {"memset", event_type::memset},
      {"gpu_memset", event_type::memset},
  };
  cat_info info;
  info.fwdbwd = cat == "fwdbwd";
  for (const row& r : table) {
    if (iequals(cat, r.name)) {
      info.type = r.type;
      info.gpu_annotation = iequals(cat, "gpu_user_annotation");
      break;
    }
  }
  return info;
}

/// Which event types use an args field (for deferred warnings).
enum class arg_group : std::uint8_t { any, op, kernel, memory, python, collective };

struct cat_entry {
  std::string text;  ///< raw cat, or "<ph>" for events without cat
  cat_info info;
  std::uint64_t count = 0;
};

/// Top-level keys other than traceEvents (docs/trace-format.md#file-structure).
struct top_meta {
  std::vector<device_info> devices;
  std::optional<distributed_meta> distributed;
  std::int64_t schema_version = 0;
  std::int64_t base_time_ns = 0;
  bool lightning = false;
};

/// Why a parse attempt failed.
struct failure {
  error_code code = SUCCESS;
  std::string reason;  ///< set for shape errors (code stays SUCCESS)
  std::uint64_t offset = 0;
  std::int64_t event_index = -1;
};

inline std::string reason_for(error_code e) {
  switch (e) {
    case simdjson::UTF8_ERROR: return "invalid UTF-8 in the JSON text";
    case simdjson::UNESCAPED_CHARS: return "raw control character inside a JSON string";
    case simdjson::UNCLOSED_STRING: return "unexpected end of text inside a string (truncated file?)";
    case simdjson::INCOMPLETE_ARRAY_OR_OBJECT:
      return "unexpected end of JSON: unclosed array or object (truncated file?)";
    case simdjson::EMPTY: return "no JSON value (empty or whitespace-only file)";
    case simdjson::TAPE_ERROR: return "JSON syntax error";
    case simdjson::DEPTH_ERROR: return "JSON nested too deeply";
    case simdjson::CAPACITY: return "JSON text too large for a single-document parse (> 4 GB)";
    case simdjson::MEMALLOC: return "out of memory while parsing";
    default: return std::string("JSON error: ") + simdjson::error_message(e);
  }
}

inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

constexpr std::size_t npos = static_cast<std::size_t>(-1);

/// A likely event boundary inside traceEvents: with p[0] == '}', the offset from p of the ',' in
/// "}" <ws> "," <ws> "{" when the n readable bytes at p start with one, else npos. The windowed
/// parse ends its windows there (reader::find_separator) and the split parse cuts there.
inline std::size_t separator_after(const char* p, std::size_t n) {
  std::size_t i = 1;
  while (i < n && is_space(p[i])) ++i;
  if (i >= n || p[i] != ',') return npos;
  std::size_t j = i + 1;
  while (j < n && is_space(p[j])) ++j;
  return j < n && p[j] == '{' ? i : npos;
}

/// The event types an args key matters for (deferred warnings, see reader::pending).
inline arg_group group_of(std::string_view key) {
  switch (key.size()) {
    case 3: return key == "Seq" ? arg_group::collective : arg_group::kernel;
    case 4: return key == "Addr" ? arg_group::memory : arg_group::kernel;
    case 5: return key == "Bytes" ? arg_group::memory : (key == "dtype" ? arg_group::collective : arg_group::kernel);
    case 6: return arg_group::kernel;
    case 9: return key == "Device Id" ? arg_group::memory : arg_group::python;
    case 10: return key == "Group size" ? arg_group::collective : arg_group::op;
    case 11: return key == "Device Type" ? arg_group::memory : arg_group::any;
    case 13:
      if (key == "Fwd thread id") return arg_group::op;
      return key == "In msg nelems" ? arg_group::collective : arg_group::kernel;
    case 14: return key == "Out msg nelems" ? arg_group::collective : arg_group::memory;
    case 15:
      if (key == "Sequence number") return arg_group::op;
      return key == "Collective name" ? arg_group::collective : arg_group::memory;
    case 16: return arg_group::python;
    case 18:
    case 19: return arg_group::collective;  // "Process Group Name", "Process Group Ranks"
    case 25: return key == "Process Group Description" ? arg_group::collective : arg_group::kernel;
    default: return arg_group::kernel;
  }
}

/// Order-preserving unsigned key of a double (negatives flipped; -0 and 0 equal).
inline std::uint64_t order_key(double d) {
  if (d == 0) d = 0;
  std::uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return (u >> 63) != 0 ? ~u : (u | (std::uint64_t{1} << 63));
}

/// Stable sort by ts (the plugin's order): LSD radix sort of (key, index) over 11-bit digits,
/// skipping digits where all keys agree (most high bits of a trace's timestamps), then a gather.
/// (A loaded ts is always finite: the reader takes numbers from simdjson, which refuses NaN and
/// out-of-range values, and numeric strings only when finite; so order_key's order and `<`
/// agree.)
inline void sort_events_by_ts(event* evs, std::size_t n) {
  bool sorted = true;
  for (std::size_t i = 1; i < n && sorted; ++i) sorted = !(evs[i].ts < evs[i - 1].ts);
  if (sorted) return;
  struct item {
    std::uint64_t key;
    std::uint32_t index;
  };
  std::vector<item> a(n), b(n);
  constexpr int bits = 11, passes = 6;
  constexpr std::size_t buckets = std::size_t{1} << bits;
  std::vector<std::uint32_t> hist(buckets * passes, 0);
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = {order_key(evs[i].ts), static_cast<std::uint32_t>(i)};
    for (int p = 0; p < passes; ++p) ++hist[p * buckets + ((a[i].key >> (p * bits)) & (buckets - 1))];
  }
  for (int p = 0; p < passes; ++p) {
    std::uint32_t* h = hist.data() + p * buckets;
    const std::size_t digit0 = (a[0].key >> (p * bits)) & (buckets - 1);
    if (h[digit0] == n) continue;  // every key has the same digit here
    std::uint32_t sum = 0;
    for (std::size_t d = 0; d < buckets; ++d) {
      const std::uint32_t c = h[d];
      h[d] = sum;
      sum += c;
    }
    for (const item& it : a) b[h[(it.key >> (p * bits)) & (buckets - 1)]++] = it;
    a.swap(b);
  }
  b = {};
  // Apply the permutation in place, cycle by cycle (no second event table): position i
  // receives evs[a[i].index]; a[i].index is set to i once position i is final.
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i].index == i) continue;
    const event first = evs[i];
    std::size_t j = i;
    for (;;) {
      const std::size_t from = a[j].index;
      a[j].index = static_cast<std::uint32_t>(j);
      if (from == i) {
        evs[j] = first;
        break;
      }
      evs[j] = evs[from];
      j = from;
    }
  }
}

inline void sort_events_by_ts(std::vector<event>& evs) { sort_events_by_ts(evs.data(), evs.size()); }

// ------------------------------------------------------------------------------------------
// The reader: one parse attempt over one text buffer into one model.

class reader {
 public:
  /// `feed`, when given, is still filling `text` (see text_feed): the reader waits for bytes.
  reader(trace_model& m, char* text, std::size_t size, std::size_t alloc, text_feed* feed = nullptr)
      : m_(m), base_(text), size_(size), alloc_(alloc), end_(text + alloc), feed_(feed), avail_(size) {}
  /// Streaming: the text arrives through `stream`, only a window of it resident at a time.
  reader(trace_model& m, text_stream& stream)
      : m_(m), base_(nullptr), size_(unknown_size), alloc_(0), end_(nullptr), feed_(nullptr), stream_(&stream) {}

  /// Windowed parse first (when window > 0), the whole-document parse as the fallback.
  bool run(std::size_t window, failure& f) {
    if (window > 0) {
      bool final_error = false;
      if (run_windows(window, f, final_error)) return true;
      if (final_error) return false;
      reset();
      f = failure{};
    }
    return run_whole(f);
  }

  /// The windowed parse over a text_stream; false when it cannot be done that way (then the
  /// caller loads the whole text and parses it with run(), which also gives exact errors).
  bool run_streamed(std::size_t window) {
    failure f;
    bool final_error = false;
    return run_windows(window, f, final_error) && !stream_->failed() && stream_->eof();
  }

  /// The text's expected size (a part's, for the part reader; the whole file's for the main
  /// reader of a split parse, whose tables receive the part's rows). Once a sample of it has
  /// been read (1/64, between 64 KiB and 64 MiB), each side table is given the capacity its
  /// rows so far project for the whole text, a quarter more (reserve_ahead): address space, its
  /// pages touched only as rows come. Without it the tables double, and each doubling writes
  /// the table again into fresh pages: on a 10 GB trace about 1 GB more fresh memory, and the
  /// splice of a split parse had to move every row once more.
  void expect_text_bytes(std::size_t bytes) noexcept { expect_bytes_ = bytes; }

  /// After a successful run (the text may already be freed): sort, fill diagnostics and meta.
  void finish();

  // --- The split parse (loader.cpp, load_split): two readers on two parts of one plain text.
  // The main reader reads the text with a middle part cut out ("A" before the cut, "C" after
  // it, spliced at offset `split_at`, an event separator); a part reader reads the middle part
  // ("B", given as "[" + its events + "]") at the same time. absorb_part() then makes the main
  // model exactly the model a single reader of the whole text gives: file order A, B, C.

  /// Main reader: a window must end exactly at `at` (the ',' before C's first event); the
  /// counts there are noted (split_mark). run_streamed() fails if that cannot be done.
  void split_at(std::size_t at) { split_at_ = at; }
  bool split_done() const noexcept { return split_done_; }
  /// Checked between windows: another reader of the same text failed, stop early.
  void cancel_on(const std::atomic<bool>* flag) { cancel_ = flag; }
  /// Part reader: parses "[" events "]" from the stream in windows; false on any failure.
  bool run_part(std::size_t window);
  /// Main reader, after both runs succeeded: B's events and tables go between A's and C's,
  /// string ids are renumbered in first-occurrence order, side-table indexes and the event
  /// numbers in warning messages are shifted. Call before finish().
  void absorb_part(reader& part);
  /// Main reader, once its run succeeded and while it sorts (sort_split_runs): the part's rows
  /// of the big side tables (ops, kernels, memory, python) go between A's and C's as they are;
  /// absorb_part() then fixes their indexes where they lie. Runs on the part reader's thread
  /// (it touches only those tables of both models, which nothing else does then): on a 10 GB
  /// trace the 0.45 GB of rows it writes into fresh pages took 0.9 s after both sorts.
  void splice_part_rows(reader& part);
  /// Main reader, after its run: sorts A's and C's events by ts, each apart (while the part
  /// reader's thread sorts B's): absorb_part() then merges the three sorted runs instead of
  /// splicing B in for one sort of the whole table (on a 10 GB trace 4.4 s of one core became
  /// about 1 s on each of two and a merge).
  void sort_split_runs() {
    sort_events_by_ts(m_.events.data(), mark_.at.events);
    sort_events_by_ts(m_.events.data() + mark_.at.events, m_.events.size() - mark_.at.events);
  }

 private:
  struct pending {
    std::string_view ph, cat, name;
    bool has_ph = false, has_cat = false, has_name = false, has_ts = false;
    double ts = 0, dur = 0;
    std::int64_t pid = 0, tid = 0;
    bool pid_str = false, tid_str = false;
    std::int64_t flow_id = 0;
    std::int64_t ext_lower = 0, ext_upper = 0;
    bool has_ext_lower = false, has_ext_upper = false;
    std::int64_t correlation = 0;
    std::uint32_t input_dims = 0, input_dims_lower = 0, input_types = 0, call_stack = 0;
    std::int64_t seq = -1, fwd_tid = -1;
    kernel_args kernel;
    memory_args mem;
    python_args py;
    bool has_module_id = false;
    collective_args coll;
    bool has_coll = false;            ///< some collective key was read (see collective_args)
    std::uint32_t meta_text = 0;      ///< args "name" / "labels" of a metadata event (interned)
    std::int64_t meta_sort = 0;       ///< args "sort_index"
    bool has_meta_text = false, has_meta_sort = false;
    /// Args warnings wait until the event's type is known: a field only matters (and is only
    /// reported) for the types that use it (e.g. a cpu_op's Inductor "grid" string is fine).
    struct deferred {
      std::string_view kind;
      const char* field;
      arg_group group;
    };
    std::array<deferred, 4> warnings{};
    std::size_t n_warnings = 0;
  };

  struct snapshot {
    std::size_t events, ops, kernels, memory, python, collectives, fwdbwd, metas, messages, cats, flow_strs;
    std::vector<std::uint64_t> cat_counts;
    std::map<std::string, std::uint64_t> warnings;
    std::int64_t event_index;
    double rwe_ts, iter_ts;
    bool has_rwe, has_iter;
  };

  // --- state
  trace_model& m_;
  char* base_;
  std::size_t size_;
  std::size_t alloc_;
  const char* end_;
  text_feed* feed_;
  text_stream* stream_ = nullptr;
  std::size_t shift_ = 0;  ///< text offset of base_[0] (streaming; 0 otherwise)
  std::size_t avail_ = 0;  ///< text bytes [0, avail_) have arrived
  std::size_t keep_ = 0;   ///< streaming: text before this offset may be dropped
  static constexpr std::size_t unknown_size = std::numeric_limits<std::size_t>::max() / 4;
  od::parser parser_;
  pending p_;
  std::size_t expect_bytes_ = 0;  ///< expect_text_bytes()
  bool reserved_ahead_ = false;
  std::vector<cat_entry> cats_;
  std::unordered_map<std::string, std::size_t> cat_index_;  ///< used once cats_ grows past 16
  std::size_t last_cat_ = 0;
  top_meta meta_;
  bool legacy_ = false;
  bool in_events_ = false;
  std::int64_t event_index_ = 0;
  double rwe_ts_ = 0, iter_ts_ = 0;
  bool has_rwe_ = false, has_iter_ = false;
  bool deferring_ = false;            ///< reading args: warn() records into p_.warnings
  arg_group group_ = arg_group::any;  ///< the group of the args field being read
  std::string name_buf_, cat_buf_, ph_buf_, tmp_buf_, json_buf_;
  /// fwdbwd entries whose pid (bit 0) or tid (bit 1) is a string id (flow_event has no flags;
  /// the split parse renumbers string ids).
  std::vector<std::pair<std::uint32_t, std::uint8_t>> flow_strs_;
  // The split parse (see split_at): the reader's state where the window at split_at_ ended.
  struct split_mark {
    snapshot at{};
    std::size_t strings = 0;
  };
  std::size_t split_at_ = npos;
  bool split_done_ = false;
  split_mark mark_;
  /// splice_part_rows(): whether done, and the part's row counts it moved.
  bool rows_spliced_ = false;
  std::size_t part_ops_ = 0, part_kernels_ = 0, part_memory_ = 0, part_python_ = 0;
  const std::atomic<bool>* cancel_ = nullptr;
  bool cancelled() const noexcept { return cancel_ != nullptr && cancel_->load(std::memory_order_relaxed); }
  /// The window ending at split_at_ parsed: note the counts, start C's Record Window End state.
  void mark_split();

  void reset() {
    m_ = trace_model{};
    cats_.clear();
    cat_index_.clear();
    last_cat_ = 0;
    meta_ = top_meta{};
    legacy_ = false;
    event_index_ = 0;
    has_rwe_ = has_iter_ = false;
    flow_strs_.clear();
    split_done_ = false;
  }

  /// See expect_text_bytes(): called at the start of each window with the text parsed so far.
  void reserve_ahead(std::size_t parsed) {
    if (reserved_ahead_ || expect_bytes_ == 0) return;
    const std::size_t sample = std::clamp(expect_bytes_ / 64, std::size_t{64} << 10, std::size_t{64} << 20);
    if (parsed < sample) return;
    reserved_ahead_ = true;
    const double scale = static_cast<double>(expect_bytes_) / static_cast<double>(parsed);
    const auto ahead = [&](auto& table) {
      // At most a row per 64 bytes of text (no event is that short).
      const double want = std::min(static_cast<double>(table.size()) * scale * 1.25 + 1024.0,
                                   static_cast<double>(expect_bytes_ / 64 + 1024));
      if (want <= static_cast<double>(table.capacity())) return;
      try {
        table.reserve(static_cast<std::size_t>(want));
      } catch (const std::bad_alloc&) {  // (address space refused: the table doubles as before)
      } catch (const std::length_error&) {
      }
    };
    ahead(m_.ops);
    ahead(m_.kernels);
    ahead(m_.memory);
    ahead(m_.python);
    ahead(m_.collectives);
    ahead(m_.fwdbwd);
  }

  snapshot take_snapshot() const {
    snapshot s{m_.events.size(), m_.ops.size(), m_.kernels.size(), m_.memory.size(), m_.python.size(), m_.collectives.size(),
               m_.fwdbwd.size(), m_.track_metas.size(), m_.diagnostics.messages.size(), cats_.size(), flow_strs_.size(), {},
               m_.diagnostics.warnings,
               event_index_, rwe_ts_, iter_ts_, has_rwe_, has_iter_};
    s.cat_counts.reserve(cats_.size());
    for (const cat_entry& c : cats_) s.cat_counts.push_back(c.count);
    return s;
  }

  void restore(const snapshot& s) {
    m_.events.resize(s.events);
    m_.ops.resize(s.ops);
    m_.kernels.resize(s.kernels);
    m_.memory.resize(s.memory);
    m_.python.resize(s.python);
    m_.collectives.resize(s.collectives);
    m_.fwdbwd.resize(s.fwdbwd);
    flow_strs_.resize(s.flow_strs);
    m_.track_metas.resize(s.metas);
    m_.diagnostics.messages.resize(s.messages);
    m_.diagnostics.warnings = s.warnings;
    for (std::size_t i = s.cats; i < cats_.size(); ++i) cat_index_.erase(cats_[i].text);
    cats_.resize(s.cats);
    for (std::size_t i = 0; i < s.cats; ++i) cats_[i].count = s.cat_counts[i];
    last_cat_ = 0;
    event_index_ = s.event_index;
    rwe_ts_ = s.rwe_ts;
    iter_ts_ = s.iter_ts;
    has_rwe_ = s.has_rwe;
    has_iter_ = s.has_iter;
  }

  // --- warnings
  void warn(std::string_view kind, const char* field = nullptr) {
    if (deferring_) {
      if (p_.n_warnings < p_.warnings.size()) p_.warnings[p_.n_warnings++] = {kind, field, group_};
      return;
    }
    ++m_.diagnostics.warnings[std::string(kind)];
    if (m_.diagnostics.messages.size() >= 20) return;
    std::string msg = in_events_ ? "event #" + std::to_string(event_index_) : std::string("top level");
    msg += ": ";
    msg += kind;
    if (field != nullptr) {
      msg += " (";
      msg += field;
      msg += ")";
    }
    m_.diagnostics.messages.push_back(std::move(msg));
  }

  // --- scalar readers. They never fail the parse: a value of the wrong type is left
  // unconsumed (the object iterator skips it) and counted as a warning.

  static std::string_view key_of(const od::raw_json_string& k) {
    const char* s = k.raw();
    const char* e = s;
    while (*e != '"') e += (*e == '\\') ? 2 : 1;
    return {s, static_cast<std::size_t>(e - s)};
  }

  /// A string value (unescaped leniently into `buf` only when it has escapes); false, leaving
  /// the value unconsumed, when it is not a string. The raw text comes from the token's extent
  /// in simdjson's structural index, so no scan for the closing quote is needed.
  bool get_str(od::value& v, std::string_view& out, std::string& buf) {
    const std::string_view tok = v.raw_json_token();
    if (tok.empty() || tok[0] != '"') return false;
    std::size_t n = tok.size();
    while (n > 1 && tok[n - 1] != '"') --n;  // whitespace before the next structural character
    if (n < 2) return false;
    const std::string_view raw = tok.substr(1, n - 2);
    if (std::memchr(raw.data(), '\\', raw.size()) == nullptr) {
      out = raw;
      return true;
    }
    if (!unescape(raw, buf)) warn("invalid escape in string (kept literally)");
    out = buf;
    return true;
  }

  /// Decimal, or hex with 0x (ROCm writes "stream": "0x0").
  static bool parse_int_text(std::string_view s, std::int64_t& out) {
    const char* b = s.data();
    const char* e = b + s.size();
    if (e - b > 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X')) {
      std::uint64_t u = 0;
      auto [ptr, ec] = std::from_chars(b + 2, e, u, 16);
      out = static_cast<std::int64_t>(u);
      return ec == std::errc() && ptr == e;
    }
    if (b != e && *b == '+') ++b;
    auto [ptr, ec] = std::from_chars(b, e, out);
    return ec == std::errc() && ptr == e && b != e;
  }

  /// True when `t` µs fits the model's range, [-2^63, 2^63) (a signed 64-bit µs count); false
  /// for NaN and infinities.
  static bool time_in_model_range(double t) noexcept { return t >= -0x1p63 && t < 0x1p63; }

  static bool parse_double_text(std::string_view s, double& out) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && ptr == s.data() + s.size() && !s.empty() && std::isfinite(out);
  }

  bool get_f64(od::value& v, double& out, const char* what) {
    double d;
    if (v.get_double().get(d) == SUCCESS) {
      out = d;
      return true;
    }
    return get_f64_slow(v, out, what);
  }

  bool get_f64_slow(od::value& v, double& out, const char* what) {
    od::json_type t;
    if (v.type().get(t) != SUCCESS) {
      warn("unreadable value", what);
      return false;
    }
    if (t == od::json_type::null) return false;
    if (t == od::json_type::number) {
      warn("number out of range", what);
      return false;
    }
    std::string_view s;
    if (t == od::json_type::string && get_str(v, s, tmp_buf_) && parse_double_text(s, out)) {
      warn("number written as a string", what);
      return true;
    }
    warn("wrong type", what);
    return false;
  }

  bool get_i64(od::value& v, std::int64_t& out, const char* what) {
    std::int64_t i;
    if (v.get_int64().get(i) == SUCCESS) {
      out = i;
      return true;
    }
    return get_i64_slow(v, out, what);
  }

  static std::int64_t clamp_to_i64(double d) {
    if (d >= 9.2233720368547758e18) return std::numeric_limits<std::int64_t>::max();
    if (d <= -9.2233720368547758e18) return std::numeric_limits<std::int64_t>::min();
    return static_cast<std::int64_t>(d);
  }

  bool get_i64_slow(od::value& v, std::int64_t& out, const char* what) {
    od::json_type t;
    if (v.type().get(t) != SUCCESS) {
      warn("unreadable value", what);
      return false;
    }
    switch (t) {
      case od::json_type::null: return false;
      case od::json_type::number: {
        std::uint64_t u;
        if (v.get_uint64().get(u) == SUCCESS) {  // 2^63 .. 2^64-1: keep the bits so ids still match
          out = static_cast<std::int64_t>(u);
          warn("id beyond int64", what);
          return true;
        }
        double d;
        if (v.get_double().get(d) == SUCCESS) {
          out = clamp_to_i64(d);
          if (static_cast<double>(out) != d) warn("number out of range or not an integer", what);
          return true;
        }
        warn("number out of range", what);
        return false;
      }
      case od::json_type::string: {
        std::string_view s;
        double d;
        if (get_str(v, s, tmp_buf_)) {
          if (parse_int_text(s, out)) {
            if (s.size() < 2 || s[1] != 'x') warn("number written as a string", what);  // ROCm hex is normal
            return true;
          }
          if (parse_double_text(s, d)) {
            out = clamp_to_i64(d);
            warn("number written as a string", what);
            return true;
          }
        }
        warn("wrong type", what);
        return false;
      }
      default: warn("wrong type", what); return false;
    }
  }

  /// pid/tid: int, numeric string ("25738"), "stream 7", or any other string (see string_id_base).
  void get_id(od::value& v, std::int64_t& out, bool& is_string, const char* what) {
    std::int64_t i;
    if (v.get_int64().get(i) == SUCCESS) {
      out = i;
      return;
    }
    std::string_view s;
    if (get_str(v, s, tmp_buf_)) {
      if (parse_int_text(s, out)) return;
      if (s.size() > 7 && s.substr(0, 7) == "stream " && parse_int_text(s.substr(7), out)) return;
      out = string_id_base - static_cast<std::int64_t>(m_.intern(s));
      is_string = true;
      return;
    }
    get_i64_slow(v, out, what);
  }

  /// An array value as minified JSON text, interned; 0 when absent or not an array.
  error_code get_json_array(od::value& v, std::uint32_t& out, const char* what) {
    od::array a;
    if (v.get_array().get(a) != SUCCESS) {
      od::json_type t;
      if (v.type().get(t) == SUCCESS && t != od::json_type::null) warn("wrong type", what);
      return SUCCESS;
    }
    std::string_view raw;
    if (auto e = a.raw_json().get(raw)) return e;
    minify_json(raw, json_buf_);
    out = m_.intern(json_buf_);
    return SUCCESS;
  }

  error_code get_triple(od::value& v, std::int64_t (&out)[3], bool& has, const char* what) {
    od::array a;
    if (v.get_array().get(a) != SUCCESS) {
      warn("wrong type", what);
      return SUCCESS;
    }
    std::size_t i = 0;
    for (auto er : a) {
      od::value ev;
      if (auto e = std::move(er).get(ev)) return e;
      if (i < 3) get_i64(ev, out[i], what);
      ++i;
    }
    has = true;
    return SUCCESS;
  }

  // --- events
  error_code read_events(od::array& arr);
  error_code read_event(od::value& v);
  error_code read_args(od::value& v);
  void finish_event();
  void saturate_memory_sizes(memory_args& mem);
  void emit_deferred(event_type type);
  /// Appends the pending event's collective args; their index.
  std::uint32_t add_collective() {
    m_.collectives.push_back(p_.coll);
    return static_cast<std::uint32_t>(m_.collectives.size() - 1);
  }
  std::size_t category_slot(std::string_view text, bool is_cat);

  // --- top level
  error_code read_top_field(std::string_view key, od::value& v);
  error_code read_devices(od::value& v);
  error_code read_distributed(od::value& v);
  bool parse_top_doc(const std::string& text);

  // --- drivers
  bool run_whole(failure& f);
  bool run_windows(std::size_t window, failure& f, bool& final_error);
  error_code parse_window(std::size_t begin, std::size_t end, failure& f);
  std::size_t find_separator(std::size_t from, std::size_t limit);
  error_code try_window(std::size_t pos, std::size_t end, bool last, std::vector<std::size_t>& edits, failure& f);
  /// Waits until text bytes [0, n) are there; false if the input ended early.
  bool need(std::size_t n) {
    if (stream_ == nullptr) return feed_ == nullptr || feed_->ensure(n);
    if (n <= avail_) return true;
    const bool ok = stream_->ensure(n, keep_);
    base_ = stream_->data();
    shift_ = stream_->shift();
    avail_ = stream_->avail();
    alloc_ = shift_ + stream_->capacity();
    if (stream_->eof()) size_ = avail_;
    return ok;
  }
  /// The text byte at offset `i` (resident: shift_ <= i < avail_ + padding).
  char* at(std::size_t i) const { return base_ + (i - shift_); }
  std::size_t offset_of(const void* p) const { return static_cast<std::size_t>(static_cast<const char*>(p) - base_) + shift_; }
  bool input_short(failure& f, bool& final_error) {
    f = failure{simdjson::IO_ERROR, "the input ended before its announced size", size_, -1};
    final_error = true;
    return false;
  }
  std::size_t find_tail(std::size_t events_begin);
  void fail(failure& f, error_code e, od::document* doc, const char* region_begin);
  /// The end of the text without trailing whitespace and NUL bytes (resident up to size_);
  /// notes in trailing_nul_ whether NULs were among them.
  std::size_t content_end(std::size_t from);
  bool trailing_nul_ = false;  ///< NUL bytes after the JSON value (ignored, one warning)
};

}  // namespace kinetoscope::analysis::detail
