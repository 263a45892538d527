// SPDX-License-Identifier: BSD-3-Clause
// Trace loader: bytes -> (gunzip) -> repairs -> simdjson On-Demand -> trace_model.
// Helpers: loader_text.hpp (buffer, gzip, repairs), loader_reader.hpp (the reader class),
// loader_top.hpp (top-level keys), loader_stream.hpp (bounded-memory chunked input).
// This file: the event reader's loops (hot path), the whole-document and windowed drivers,
// the streamed load (big files: the text is never whole in memory), the repair-and-retry loop
// over the whole text (damaged or unusual files) and the public functions.
#include "analysis/loader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "analysis/loader_reader.hpp"
#include "analysis/loader_text.hpp"
#include "analysis/loader_top.hpp"

namespace kinetoscope::analysis {

std::string load_error::message() const {
  std::string m = file + ": " + reason;
  if (byte_offset > 0 || event_index >= 0) {
    m += " (";
    if (byte_offset > 0) m += "at byte " + std::to_string(byte_offset);
    if (byte_offset > 0 && event_index >= 0) m += ", ";
    if (event_index >= 0) m += "event #" + std::to_string(event_index);
    m += ")";
  }
  return m;
}

namespace detail {

std::size_t reader::category_slot(std::string_view text, bool is_cat) {
  auto matches = [&](const cat_entry& c) {
    // Entries without cat are stored as "<ph>"; a real cat may not collide with them.
    return c.text.size() == text.size() + (is_cat ? 0 : 2) &&
           (is_cat ? c.text == text : c.text.compare(1, text.size(), text) == 0) &&
           (is_cat || c.text.front() == '<');
  };
  if (last_cat_ < cats_.size() && matches(cats_[last_cat_])) return last_cat_;
  if (cats_.size() <= 16) {
    for (std::size_t i = 0; i < cats_.size(); ++i) {
      if (matches(cats_[i])) return last_cat_ = i;
    }
  } else {
    const std::string key = is_cat ? std::string(text) : "<" + std::string(text) + ">";
    if (auto it = cat_index_.find(key); it != cat_index_.end()) return last_cat_ = it->second;
  }
  cat_entry c;
  c.text = is_cat ? std::string(text) : "<" + std::string(text) + ">";
  if (is_cat) c.info = classify_category(text);
  cats_.push_back(std::move(c));
  if (cats_.size() == 17) {
    for (std::size_t i = 0; i < cats_.size(); ++i) cat_index_.emplace(cats_[i].text, i);
  } else if (cats_.size() > 17) {
    cat_index_.emplace(cats_.back().text, cats_.size() - 1);
  }
  return last_cat_ = cats_.size() - 1;
}

error_code reader::read_events(od::array& arr) {
  in_events_ = true;
  for (auto er : arr) {
    od::value v;
    if (auto e = std::move(er).get(v)) return e;
    if (auto e = read_event(v)) return e;
    ++event_index_;
  }
  in_events_ = false;
  return SUCCESS;
}

error_code reader::read_event(od::value& v) {
  od::object obj;
  if (auto e = v.get_object().get(obj); e != SUCCESS) {
    if (e != simdjson::INCORRECT_TYPE) return e;
    warn("event is not an object");
    ++cats_[category_slot("not an object", false)].count;
    return SUCCESS;
  }
  pending& p = p_;
  p = pending{};
  for (auto fr : obj) {
    od::field f;
    if (auto e = std::move(fr).get(f)) return e;
    const std::string_view key = key_of(f.key());
    od::value& fv = f.value();
    switch (key.size()) {
      case 2:
        if (key == "ph") {
          p.has_ph = get_str(fv, p.ph, ph_buf_);
          if (!p.has_ph) warn("wrong type", "ph");
        } else if (key == "ts") {
          p.has_ts = get_f64(fv, p.ts, "ts");
        } else if (key == "id") {
          get_i64(fv, p.flow_id, "id");
        }
        break;
      case 3:
        if (key == "cat") {
          p.has_cat = get_str(fv, p.cat, cat_buf_);
          if (!p.has_cat) warn("wrong type", "cat");
        } else if (key == "pid") {
          get_id(fv, p.pid, p.pid_str, "pid");
        } else if (key == "tid") {
          get_id(fv, p.tid, p.tid_str, "tid");
        } else if (key == "dur") {
          get_f64(fv, p.dur, "dur");
        }
        break;
      case 4:
        if (key == "name") {
          p.has_name = get_str(fv, p.name, name_buf_);
          if (!p.has_name) warn("wrong type", "name");
        } else if (key == "args") {
          if (auto e = read_args(fv)) return e;
        }
        break;
      default: break;
    }
  }
  finish_event();
  return SUCCESS;
}

error_code reader::read_args(od::value& v) {
  od::object obj;
  if (v.get_object().get(obj) != SUCCESS) {
    warn("wrong type", "args");
    return SUCCESS;
  }
  pending& p = p_;
  // Metadata args (process/thread names, sort indexes) are read when the event is, or may be
  // (args before "ph"), a ph "M" event; finish_event() keeps them only for ph "M".
  const auto is_meta = [&] { return !p.has_ph || p.ph == "M"; };
  deferring_ = true;
  for (auto fr : obj) {
    od::field f;
    if (auto e = std::move(fr).get(f)) {
      deferring_ = false;
      return e;
    }
    const std::string_view key = key_of(f.key());
    od::value& fv = f.value();
    error_code e = SUCCESS;
    group_ = group_of(key);
    // Collective metadata (collective_args): a string or an integer per key.
    const auto coll_str = [&](std::uint32_t& out, const char* what) {
      std::string_view s;
      if (get_str(fv, s, tmp_buf_)) {
        out = m_.intern(s);
        p.has_coll = true;
      } else {
        warn("wrong type", what);
      }
    };
    const auto coll_int = [&](std::int64_t& out, const char* what) {
      if (get_i64(fv, out, what)) p.has_coll = true;
    };
    switch (key.size()) {
      case 3:
        if (key == "Seq") coll_int(p.coll.seq, "Seq");
        break;
      case 4:
        if (key == "grid") e = get_triple(fv, p.kernel.grid, p.kernel.has_grid, "grid");
        else if (key == "name" && is_meta()) {  // process_name / thread_name
          std::string_view s;
          if (get_str(fv, s, tmp_buf_)) {
            p.meta_text = m_.intern(s);
            p.has_meta_text = true;
          }
        }
        else if (key == "Addr") {
          std::int64_t a = 0;
          if (get_i64(fv, a, "Addr")) {
            p.mem.addr = static_cast<std::uint64_t>(a);
            p.mem.has_addr = true;
          }
        }
        break;
      case 5:
        if (key == "block") e = get_triple(fv, p.kernel.block, p.kernel.has_block, "block");
        else if (key == "Bytes") get_i64(fv, p.mem.bytes, "Bytes");
        else if (key == "dtype") coll_str(p.coll.dtype, "dtype");
        break;
      case 6:
        if (key == "device") get_i64(fv, p.kernel.device, "device");
        else if (key == "stream") get_i64(fv, p.kernel.stream, "stream");
        else if (key == "labels" && is_meta()) {
          std::string_view s;
          if (get_str(fv, s, tmp_buf_)) {
            p.meta_text = m_.intern(s);
            p.has_meta_text = true;
          }
        }
        break;
      case 9:
        if (key == "Python id") get_i64(fv, p.py.python_id, "Python id");
        else if (key == "Device Id") get_i64(fv, p.mem.device_id, "Device Id");
        break;
      case 10:
        if (key == "Input Dims") e = get_json_array(fv, p.input_dims, "Input Dims");
        else if (key == "Input dims") e = get_json_array(fv, p.input_dims_lower, "Input dims");
        else if (key == "Input type") e = get_json_array(fv, p.input_types, "Input type");
        else if (key == "sort_index" && is_meta()) p.has_meta_sort = get_i64(fv, p.meta_sort, "sort_index");
        else if (key == "Group size") coll_int(p.coll.group_size, "Group size");
        else if (key == "Call stack") {
          std::string_view s;
          if (get_str(fv, s, tmp_buf_)) p.call_stack = m_.intern(s);
          else warn("wrong type", "Call stack");
        }
        break;
      case 11:
        if (key == "External id") p.has_ext_upper = get_i64(fv, p.ext_upper, "External id");
        else if (key == "external id") p.has_ext_lower = get_i64(fv, p.ext_lower, "external id");
        else if (key == "correlation") get_i64(fv, p.correlation, "correlation");
        else if (key == "Device Type") get_i64(fv, p.mem.device_type, "Device Type");
        break;
      case 13:
        if (key == "Fwd thread id") get_i64(fv, p.fwd_tid, "Fwd thread id");
        else if (key == "blocks per SM") p.kernel.has_blocks_per_sm = get_f64(fv, p.kernel.blocks_per_sm, "blocks per SM");
        else if (key == "shared memory") p.kernel.has_shared_memory = get_i64(fv, p.kernel.shared_memory, "shared memory");
        else if (key == "In msg nelems") coll_int(p.coll.in_nelems, "In msg nelems");
        break;
      case 14:
        if (key == "Total Reserved") get_f64(fv, p.mem.total_reserved, "Total Reserved");
        else if (key == "Out msg nelems") coll_int(p.coll.out_nelems, "Out msg nelems");
        break;
      case 15:
        if (key == "Sequence number") get_i64(fv, p.seq, "Sequence number");
        else if (key == "Total Allocated") get_f64(fv, p.mem.total_allocated, "Total Allocated");
        else if (key == "Collective name") coll_str(p.coll.name, "Collective name");
        break;
      case 16:
        if (key == "Python parent id") get_i64(fv, p.py.parent_id, "Python parent id");
        else if (key == "Python module id") p.has_module_id = get_i64(fv, p.py.module_id, "Python module id");
        break;
      case 18:
        if (key == "Process Group Name") coll_str(p.coll.group_name, "Process Group Name");
        break;
      case 19:
        if (key == "Process Group Ranks") coll_str(p.coll.group_ranks, "Process Group Ranks");
        break;
      case 20:
        if (key == "registers per thread")
          p.kernel.has_registers = get_i64(fv, p.kernel.registers_per_thread, "registers per thread");
        break;
      case 25:
        if (key == "est. achieved occupancy %")
          p.kernel.has_occupancy = get_f64(fv, p.kernel.occupancy, "est. achieved occupancy %");
        else if (key == "Process Group Description") coll_str(p.coll.group_desc, "Process Group Description");
        break;
      default: break;
    }
    if (e) {
      deferring_ = false;
      return e;
    }
  }
  deferring_ = false;
  return SUCCESS;
}

void reader::emit_deferred(event_type type) {
  for (std::size_t i = 0; i < p_.n_warnings; ++i) {
    const pending::deferred& d = p_.warnings[i];
    bool relevant = false;
    switch (d.group) {
      case arg_group::any: relevant = true; break;
      case arg_group::op:
        relevant = type == event_type::op || type == event_type::user_annotation || type == event_type::python;
        break;
      case arg_group::kernel: relevant = type == event_type::kernel; break;
      case arg_group::memory: relevant = type == event_type::memory; break;
      case arg_group::python:
        relevant = type == event_type::python_function || type == event_type::module;
        break;
      case arg_group::collective:
        relevant = type == event_type::op || type == event_type::user_annotation || type == event_type::python ||
                   type == event_type::kernel;
        break;
    }
    if (relevant) warn(d.kind, d.field);
  }
}

void reader::saturate_memory_sizes(memory_args& mem) {
  // ±2^53 bytes (8 PiB) is beyond any device and keeps sizes, their negations and the curve's
  // doubles exact; larger values (Bytes = -2^63, Total Allocated = 1e308) are saturated.
  constexpr std::int64_t limit = std::int64_t{1} << 53;
  constexpr double limit_d = static_cast<double>(limit);
  if (mem.bytes > limit || mem.bytes < -limit) {
    mem.bytes = mem.bytes > 0 ? limit : -limit;
    warn("memory size out of range, saturated", "Bytes");
  }
  if (std::abs(mem.total_allocated) > limit_d) {
    mem.total_allocated = std::copysign(limit_d, mem.total_allocated);
    warn("memory size out of range, saturated", "Total Allocated");
  }
  if (std::abs(mem.total_reserved) > limit_d) {
    mem.total_reserved = std::copysign(limit_d, mem.total_reserved);
    warn("memory size out of range, saturated", "Total Reserved");
  }
}

void reader::finish_event() {
  pending& p = p_;
  const std::size_t slot = p.has_cat ? category_slot(p.cat, true) : category_slot(p.has_ph ? p.ph : "", false);
  cat_entry& c = cats_[slot];
  ++c.count;
  const char ph = p.ph.size() == 1 ? p.ph[0] : '\0';
  if (!p.has_ph) warn("missing ph");
  if (p.has_name && p.has_ts && !p.name.empty()) {
    if (p.name[0] == 'R' && p.name == "Record Window End") {
      rwe_ts_ = p.ts;
      has_rwe_ = true;
    } else if (p.name[0] == 'I' && p.name.substr(0, 16) == "Iteration Start:") {
      iter_ts_ = p.ts;
      has_iter_ = true;
    }
  }
  // Times must fit the model's range: µs that fit a signed 64-bit integer, the span the operator
  // tree's root covers (and the plugin's). Beyond it (1e19, 1e308, a 30-digit integer) an event
  // could not be placed in any tree, so it is dropped with a warning naming the event.
  const bool placed = ph == 'X' || ((ph == 'i' || ph == 'I') && p.name == "[memory]") ||
                      ((ph == 's' || ph == 'f') && p.has_cat && c.info.fwdbwd);
  if (placed && (!time_in_model_range(p.ts) || (ph == 'X' && !time_in_model_range(p.ts + p.dur)))) {
    warn("time out of range, event dropped", ph == 'X' && time_in_model_range(p.ts) ? "dur" : "ts");
    return;
  }
  if (ph == 'X') {
    event ev;
    if (p.has_cat) {
      ev.type = c.info.type;
      ev.gpu_annotation = c.info.gpu_annotation;
    } else if (legacy_) {
      ev.type = event_type::op;
    } else {
      warn("X event without cat");
    }
    if (!p.has_name) warn("missing name");
    if (!p.has_ts) warn("missing ts");
    if (ev.type == event_type::python_function && p.has_module_id) ev.type = event_type::module;
    ev.ts = p.ts;
    ev.dur = p.dur;
    ev.pid = p.pid;
    ev.tid = p.tid;
    ev.pid_is_string = p.pid_str;
    ev.tid_is_string = p.tid_str;
    ev.external_id = p.has_ext_lower ? p.ext_lower : (p.has_ext_upper ? p.ext_upper : 0);
    ev.has_external_id = p.has_ext_lower || p.has_ext_upper;
    ev.correlation = p.correlation;
    ev.name = p.has_name ? m_.intern(p.name) : 0;
    switch (ev.type) {
      case event_type::op:
      case event_type::user_annotation:
      case event_type::python:
      {
        const op_args a{.input_dims = p.input_dims != 0 ? p.input_dims : p.input_dims_lower,
                        .input_types = p.input_types,
                        .call_stack = p.call_stack,
                        .collective = p.has_coll ? add_collective() : no_index,
                        .sequence_nr = p.seq,
                        .fwd_thread_id = p.fwd_tid};
        // Most small events carry none of these args: they share "no entry" (extra = no_index,
        // read as the defaults) instead of 32 bytes each.
        if (a.input_dims == 0 && a.input_types == 0 && a.call_stack == 0 && a.sequence_nr == -1 &&
            a.fwd_thread_id == -1 && a.collective == no_index) {
          ev.extra = no_index;
          break;
        }
        ev.extra = static_cast<std::uint32_t>(m_.ops.size());
        m_.ops.push_back(a);
        break;
      }
      case event_type::kernel:
        ev.extra = static_cast<std::uint32_t>(m_.kernels.size());
        if (p.has_coll) p.kernel.collective = add_collective();
        m_.kernels.push_back(p.kernel);
        break;
      case event_type::python_function:
      case event_type::module:
        ev.extra = static_cast<std::uint32_t>(m_.python.size());
        m_.python.push_back(p.py);
        break;
      default: break;
    }
    emit_deferred(ev.type);
    m_.events.push_back(ev);
  } else if ((ph == 'i' || ph == 'I') && p.name == "[memory]") {
    event ev;
    ev.type = event_type::memory;
    ev.ts = p.ts;
    ev.pid = p.pid;
    ev.tid = p.tid;
    ev.pid_is_string = p.pid_str;
    ev.tid_is_string = p.tid_str;
    ev.name = m_.intern(p.name);
    ev.extra = static_cast<std::uint32_t>(m_.memory.size());
    if (!p.has_ts) warn("missing ts");
    saturate_memory_sizes(p.mem);
    m_.memory.push_back(p.mem);
    emit_deferred(ev.type);
    m_.events.push_back(ev);
  } else if ((ph == 's' || ph == 'f') && p.has_cat && c.info.fwdbwd) {
    if (p.pid_str || p.tid_str) {
      flow_strs_.emplace_back(static_cast<std::uint32_t>(m_.fwdbwd.size()),
                              static_cast<std::uint8_t>((p.pid_str ? 1 : 0) | (p.tid_str ? 2 : 0)));
    }
    m_.fwdbwd.push_back({p.flow_id, p.ts, p.pid, p.tid, ph == 's'});
  } else if (ph == 'M' && p.has_name) {
    track_meta tm;
    tm.pid = p.pid;
    tm.tid = p.tid;
    tm.pid_is_string = p.pid_str;
    tm.tid_is_string = p.tid_str;
    bool keep = false;
    if (p.name == "process_name") tm.kind = meta_kind::process_name, keep = p.has_meta_text;
    else if (p.name == "process_labels") tm.kind = meta_kind::process_labels, keep = p.has_meta_text;
    else if (p.name == "thread_name") tm.kind = meta_kind::thread_name, keep = p.has_meta_text;
    else if (p.name == "process_sort_index") tm.kind = meta_kind::process_sort_index, keep = p.has_meta_sort;
    else if (p.name == "thread_sort_index") tm.kind = meta_kind::thread_sort_index, keep = p.has_meta_sort;
    if (keep) {
      tm.text = p.has_meta_text ? p.meta_text : 0;
      tm.sort_index = p.meta_sort;
      m_.track_metas.push_back(tm);
    }
  }
}

// --- drivers ------------------------------------------------------------------------------

void reader::fail(failure& f, error_code e, od::document* doc, const char* region_begin) {
  f.code = e;
  f.event_index = in_events_ ? event_index_ : -1;
  const char* loc = nullptr;
  if (e == simdjson::INCOMPLETE_ARRAY_OR_OBJECT || e == simdjson::UNCLOSED_STRING) {
    f.offset = size_;  // the text ended too early
  } else if (doc != nullptr && doc->current_location().get(loc) == SUCCESS && loc >= base_ &&
             loc <= base_ + (avail_ - shift_)) {
    f.offset = offset_of(loc);
  } else {
    f.offset = region_begin != nullptr ? offset_of(region_begin) : 0;
  }
}

bool reader::run_whole(failure& f) {
  bool unused = false;
  if (!need(size_)) return input_short(f, unused);
  std::size_t start = 0;
  if (size_ >= 3 && std::memcmp(base_, "\xEF\xBB\xBF", 3) == 0) start = 3;  // UTF-8 BOM
  // Trailing NUL bytes (a file preallocated or padded by a crash) are ignored, as the windowed
  // path ignores them: simdjson sees the text without them.
  const std::size_t end = std::max(start, content_end(start));
  od::document doc;
  if (auto e = parser_.iterate(base_ + start, end - start, alloc_ - start).get(doc)) {
    fail(f, e, nullptr, nullptr);
    return false;
  }
  od::json_type type;
  if (auto e = doc.type().get(type)) {
    fail(f, e, &doc, base_ + start);
    f.reason = "not JSON (the text does not start with a JSON value)";
    return false;
  }
  if (type == od::json_type::array) {
    legacy_ = true;
    od::array arr;
    if (auto e = doc.get_array().get(arr)) {
      fail(f, e, &doc, base_);
      return false;
    }
    if (auto e = read_events(arr)) {
      fail(f, e, &doc, base_);
      return false;
    }
  } else if (type == od::json_type::object) {
    od::object obj;
    if (auto e = doc.get_object().get(obj)) {
      fail(f, e, &doc, base_);
      return false;
    }
    bool saw_events = false;
    for (auto fr : obj) {
      od::field fld;
      if (auto e = std::move(fr).get(fld)) {
        fail(f, e, &doc, base_);
        return false;
      }
      const std::string_view key = key_of(fld.key());
      od::value& v = fld.value();
      error_code e = SUCCESS;
      if (key == "traceEvents") {
        // One acceptance rule on every path (docs/trace-format.md#file-structure): a second
        // traceEvents is an error, never a second or replacing list of events. Other
        // top-level keys may repeat; the last value wins, as in Python's json.
        if (saw_events) {
          fail(f, SUCCESS, &doc, base_);
          f.reason = "the top-level key \"traceEvents\" appears twice";
          return false;
        }
        od::array arr;
        if (v.get_array().get(arr) != SUCCESS) {
          fail(f, SUCCESS, &doc, base_);
          f.reason = "\"traceEvents\" is not an array";
          return false;
        }
        saw_events = true;
        e = read_events(arr);
      } else {
        e = read_top_field(key, v);
      }
      if (e) {
        fail(f, e, &doc, base_);
        return false;
      }
    }
    if (!saw_events) {
      f.reason = "the top-level object has no \"traceEvents\" array";
      return false;
    }
  } else {
    static constexpr const char* names[] = {"", "array", "object", "number", "string", "boolean", "null"};
    const auto t = static_cast<std::size_t>(type);
    f.reason = std::string("the top-level JSON value is a ") + (t < 7 ? names[t] : "scalar") +
               "; expected an object with \"traceEvents\" or an array of events";
    return false;
  }
  const char* loc = nullptr;
  if (auto e = doc.current_location().get(loc); e != simdjson::OUT_OF_BOUNDS) {
    fail(f, simdjson::TAPE_ERROR, &doc, base_);
    f.reason = "unexpected text after the JSON value";
    return false;
  }
  return true;
}

std::size_t reader::content_end(std::size_t from) {
  std::size_t j = size_;
  trailing_nul_ = false;
  while (j > from && (is_space(*at(j - 1)) || *at(j - 1) == '\0')) {
    trailing_nul_ = trailing_nul_ || *at(j - 1) == '\0';
    --j;
  }
  return j;
}

/// The ',' of the next `}` <ws> `,` <ws> `{` at or after `from` (a likely event boundary).
std::size_t reader::find_separator(std::size_t from, std::size_t limit) {
  while (from < limit) {
    const std::size_t chunk_end = std::min(limit, from + (std::size_t{64} << 10));
    const std::size_t look_end = std::min(limit, chunk_end + 4096);  // whitespace lookahead
    if (!need(look_end)) return npos;
    const auto* q = static_cast<const char*>(std::memchr(at(from), '}', chunk_end - from));
    if (q == nullptr) {
      from = chunk_end;
      continue;
    }
    const std::size_t brace = offset_of(q);
    if (const std::size_t comma = separator_after(q, look_end - brace); comma != npos) return brace + comma;
    from = brace + 1;
  }
  return npos;
}

/// The ']' closing traceEvents, found from the end by parsing the text after it as the rest of
/// the top-level object; npos when that fails (the text is truncated or unusual). Of the
/// candidates that parse, the earliest within 1 MB wins: a later one may close an array among
/// the keys after traceEvents ("deviceProperties": [...]).
std::size_t reader::find_tail(std::size_t events_begin) {
  const std::size_t j = content_end(events_begin);
  if (j == events_begin || *at(j - 1) != '}') return npos;
  const snapshot s0 = take_snapshot();
  const top_meta meta0 = meta_;
  std::size_t best = npos;
  std::optional<snapshot> best_state;
  top_meta best_meta;
  std::size_t q = j - 1;
  for (int tries = 0; tries < 64; ++tries) {
    const void* r = ::memrchr(at(events_begin), ']', q - events_begin);
    if (r == nullptr) break;
    q = offset_of(r);
    if (j - q > (std::size_t{64} << 20) || (best != npos && best - q > (std::size_t{1} << 20))) break;
    std::size_t k = q + 1;
    while (k < j && is_space(*at(k))) ++k;
    if (*at(k) != '}' && *at(k) != ',') continue;
    restore(s0);
    meta_ = meta0;
    if (parse_top_doc("{\"traceEvents\":[]" + std::string(at(q + 1), j - q - 1))) {
      best = q;
      best_state = take_snapshot();
      best_meta = meta_;
    }
  }
  restore(best_state ? *best_state : s0);
  meta_ = best_state ? std::move(best_meta) : meta0;
  return best;
}

error_code reader::parse_window(std::size_t begin, std::size_t end, failure& f) {
  od::document doc;
  const char* p = at(begin);
  if (auto e = parser_.iterate(p, end - begin + 1, alloc_ - begin).get(doc)) {
    fail(f, e, nullptr, p);
    return e;
  }
  od::array arr;
  error_code e = doc.get_array().get(arr);
  if (!e) e = read_events(arr);
  const char* loc = nullptr;
  if (!e && doc.current_location().get(loc) != simdjson::OUT_OF_BOUNDS) e = simdjson::TAPE_ERROR;
  if (e) fail(f, e, &doc, p);
  in_events_ = false;
  return e;
}

/// Parses the window [pos, end] (see run_windows); false when it is not valid JSON.
error_code reader::try_window(std::size_t pos, std::size_t end, bool last, std::vector<std::size_t>& edits,
                              failure& f) {
  if (!last) {
    *at(end) = ']';
    edits.push_back(end);
  }
  // (Streaming: the window is resident and padded even when the text ends within the padding.)
  if (!need(std::min(size_, end + 1 + padding)) && stream_ == nullptr) return simdjson::IO_ERROR;
  return parse_window(pos, end, f);
}

bool reader::run_windows(std::size_t window, failure& f, bool& final_error) {
  // 1. The start: '[' (legacy bare array) or the object's keys up to "traceEvents": [.
  keep_ = 0;
  std::size_t head = std::min(size_, std::size_t{4} << 20);
  if (!need(head)) {
    if (stream_ == nullptr) return input_short(f, final_error);
    head = avail_;  // a text shorter than the head
  }
  std::size_t i = 0;
  if (head >= 3 && std::memcmp(at(0), "\xEF\xBB\xBF", 3) == 0) i = 3;
  while (i < head && is_space(*at(i))) ++i;
  if (i >= head) return false;
  std::size_t events_begin = 0;
  if (*at(i) == '[') {
    legacy_ = true;
    events_begin = i;
  } else if (*at(i) == '{') {
    const std::string_view key = "\"traceEvents\"";
    const void* found = ::memmem(at(i), head - i, key.data(), key.size());
    if (found == nullptr && head < size_) {
      if (stream_ == nullptr) {
        if (!need(size_)) return input_short(f, final_error);
        found = ::memmem(at(i), size_ - i, key.data(), key.size());
      } else {
        // Streaming keeps the keys before traceEvents in memory: give up (to the whole-text
        // parse) if they are implausibly big.
        constexpr std::size_t head_limit = std::size_t{64} << 20;
        while (found == nullptr && head < head_limit && !stream_->eof()) {
          need(std::min(head_limit, head * 2));
          head = std::min(head_limit, avail_);
          found = ::memmem(at(i), head - i, key.data(), key.size());
        }
      }
    }
    if (found == nullptr) return false;
    const std::size_t key_pos = offset_of(found);
    std::size_t near = std::min(size_, key_pos + (std::size_t{64} << 10));
    if (!need(near)) {
      if (stream_ == nullptr) return input_short(f, final_error);
      near = avail_;
    }
    std::size_t k = key_pos + key.size();
    while (k < near && is_space(*at(k))) ++k;
    if (k >= near || *at(k) != ':') return false;
    ++k;
    while (k < near && is_space(*at(k))) ++k;
    if (k >= near || *at(k) != '[') return false;
    events_begin = k;
    if (!parse_top_doc(std::string(at(i), key_pos - i) + "\"traceEvents\":[]}")) return false;
  } else {
    return false;
  }
  // Windows [pos, end]: text[pos] is '[' (the real one, or a ',' we overwrote), text[end] is
  // the real closing ']' or a ',' overwritten with ']'. Undo the edits if we give up.
  std::vector<std::size_t> edits;
  auto undo = [&] {
    for (std::size_t e : edits) {
      if (e >= shift_) *at(e) = ',';
    }
  };
  std::size_t pos = events_begin;
  keep_ = pos;
  auto bad_text = [](error_code e) { return e == simdjson::UTF8_ERROR || e == simdjson::UNESCAPED_CHARS; };
  // 2. While far from the end, windows need only the bytes up to their end (the text may still
  // be arriving, see text_feed and text_stream). A failure here only ends this phase: the window
  // may have run past the end of traceEvents, which phase 3 locates.
  constexpr std::size_t end_margin = std::size_t{1} << 20;
  // The split parse: the window that reaches split_at_ ends exactly there, and must parse.
  const auto split_here = [&](std::size_t end) {
    return split_at_ != npos && !split_done_ && pos < split_at_ && (end == npos || end >= split_at_);
  };
  const auto split_window = [&]() {
    const error_code e = try_window(pos, split_at_, false, edits, f);
    if (e) {
      undo();
      final_error = true;
      return false;
    }
    mark_split();
    *at(split_at_) = '[';
    pos = split_at_;
    keep_ = pos;
    return true;
  };
  while (pos + window + end_margin < size_) {
    if (cancelled()) {
      undo();
      final_error = true;
      return false;
    }
    std::size_t end = find_separator(pos + window, size_ - end_margin);
    if (split_here(end)) {
      if (!split_window()) return false;
      continue;
    }
    if (end == npos) break;
    reserve_ahead(pos);
    const snapshot s = take_snapshot();
    error_code e = try_window(pos, end, false, edits, f);
    // Streaming: phase 3 must hold the rest of the text, so first try longer windows (the
    // separator may have been inside a string), as phase 3 does.
    for (int tries = 0; e && tries < 8; ++tries) {
      restore(s);
      *at(end) = ',';
      edits.pop_back();
      if (bad_text(e)) {
        undo();
        final_error = true;
        return false;
      }
      f = failure{};
      if (stream_ == nullptr) break;
      end = find_separator(end + 1, size_ - end_margin);
      if (end == npos) break;
      e = try_window(pos, end, false, edits, f);
    }
    if (e) {
      if (end != npos && stream_ != nullptr) {  // the eighth try failed
        restore(s);
        *at(end) = ',';
        edits.pop_back();
        f = failure{};
      }
      break;
    }
    *at(end) = '[';
    pos = end;
    keep_ = pos;
  }
  // 3. The end of traceEvents, from the end of the text.
  if (stream_ != nullptr) {
    need(unknown_size);  // the rest of the text (small unless the file is unusual)
    if (stream_->failed() || !stream_->eof()) return false;
  } else if (!need(size_)) {
    return input_short(f, final_error);
  }
  std::size_t events_end = npos;
  bool truncated = false;
  if (legacy_) {
    const std::size_t j = content_end(pos + 1);
    if (*at(j - 1) == ']') events_end = j - 1;
    else truncated = true;
  } else {
    events_end = find_tail(pos);
    if (events_end == npos) {
      const std::size_t j = content_end(pos);
      if (*at(j - 1) == '}') {  // complete but unusual: let the whole parse decide
        undo();
        return false;
      }
      truncated = true;
    }
  }
  const std::size_t limit = events_end != npos ? events_end : size_;
  for (;;) {
    std::size_t end = npos;
    bool last = false;
    if (pos + window < limit) end = find_separator(pos + window, limit);
    if (split_here(end) && split_at_ < limit) {
      if (!split_window()) return false;
      continue;
    }
    if (end == npos) {
      if (truncated) {
        f = failure{simdjson::INCOMPLETE_ARRAY_OR_OBJECT, {}, size_, event_index_};
        undo();
        final_error = true;
        return false;
      }
      end = events_end;
      last = true;
    }
    reserve_ahead(pos);
    const snapshot s = take_snapshot();
    for (int tries = 0;; ++tries) {
      const error_code e = try_window(pos, end, last, edits, f);
      if (!e) break;
      restore(s);
      if (!last) {
        *at(end) = ',';
        edits.pop_back();
      }
      if (e == simdjson::IO_ERROR) {
        undo();
        return input_short(f, final_error);
      }
      if (bad_text(e)) final_error = true;
      if (final_error || last || tries >= 8) {
        undo();
        return false;
      }
      // Maybe the separator was inside a string or a nested value: extend the window.
      const std::size_t next = find_separator(end + 1, limit);
      if (next == npos) {
        if (truncated) {
          f = failure{simdjson::INCOMPLETE_ARRAY_OR_OBJECT, {}, size_, event_index_};
          undo();
          final_error = true;
          return false;
        }
        end = events_end;
        last = true;
      } else {
        end = next;
      }
    }
    if (last) break;
    *at(end) = '[';
    pos = end;
    keep_ = pos;
  }
  return split_at_ == npos || split_done_;
}

void reader::mark_split() {
  mark_ = split_mark{take_snapshot(), m_.strings.size()};
  has_rwe_ = has_iter_ = false;  // from here on: C's
  split_done_ = true;
}

bool reader::run_part(std::size_t window) {
  keep_ = 0;
  if (!need(1) || *at(0) != '[') return false;
  std::vector<std::size_t> edits;
  std::size_t pos = 0;
  // The end of the part: its last byte is the ']' after its events.
  const auto final_end = [&]() -> std::size_t {
    need(unknown_size);
    if (stream_->failed() || !stream_->eof()) return npos;
    const std::size_t j = content_end(pos);
    return j > pos && *at(j - 1) == ']' ? j - 1 : npos;
  };
  for (;;) {
    if (cancelled()) return false;
    bool last = false;
    std::size_t end = find_separator(pos + window, size_);
    if (end == npos) {
      end = final_end();
      if (end == npos) return false;
      last = true;
    }
    reserve_ahead(pos);
    const snapshot s = take_snapshot();
    for (int tries = 0;; ++tries) {
      failure f;
      const error_code e = try_window(pos, end, last, edits, f);
      if (!e) break;
      restore(s);
      if (!last) {
        *at(end) = ',';
        edits.pop_back();
      }
      if (last || tries >= 8) return false;
      // The separator may have been inside a string: a longer window (as run_windows does).
      end = find_separator(end + 1, size_);
      if (end == npos) {
        end = final_end();
        if (end == npos) return false;
        last = true;
      }
    }
    if (last) return true;
    *at(end) = '[';
    pos = end;
    keep_ = pos;
  }
}

/// "event #N: ..." with N shifted by `by` (other messages unchanged).
static std::string shift_event_number(const std::string& msg, std::int64_t by) {
  constexpr std::string_view prefix = "event #";
  if (by == 0 || msg.compare(0, prefix.size(), prefix) != 0) return msg;
  std::int64_t n = 0;
  const char* b = msg.data() + prefix.size();
  const auto [end, ec] = std::from_chars(b, msg.data() + msg.size(), n);
  if (ec != std::errc()) return msg;
  return std::string(prefix) + std::to_string(n + by) + std::string(end, msg.data() + msg.size());
}

/// The events of a split parse in time order: `all` holds A's sorted events in [0, a) and C's
/// after them, `b` B's sorted events; afterwards `all` holds the three runs merged as one stable
/// sort of A, B, C (file order) by ts gives them: on equal keys A's before B's before C's. The
/// merge runs from the end down, so A's events stay in place until read (only C's, a small
/// tail, are copied out first).
static void merge_sorted_runs(std::vector<event>& all, std::size_t a, const std::vector<event>& b) {
  const std::vector<event> c(all.begin() + static_cast<std::ptrdiff_t>(a), all.end());
  all.resize(a + b.size() + c.size());
  std::size_t ia = a, ib = b.size(), ic = c.size(), out = all.size();
  while (ib + ic > 0) {
    // The largest (key, run) of the three tails; ties go to the later run.
    const event* pick = nullptr;
    std::uint64_t best = 0;
    int from = -1;
    if (ic > 0) {
      pick = &c[ic - 1];
      best = order_key(pick->ts);
      from = 2;
    }
    if (ib > 0) {
      const std::uint64_t k = order_key(b[ib - 1].ts);
      if (from < 0 || k > best) pick = &b[ib - 1], best = k, from = 1;
    }
    if (ia > 0 && order_key(all[ia - 1].ts) > best) pick = &all[ia - 1], from = 0;
    all[--out] = *pick;
    if (from == 2) --ic;
    else if (from == 1) --ib;
    else --ia;
  }
  // (A's remaining events are already where they belong: out == ia.)
}

/// Moves the rows of `from` into `into` before row `at`, frees `from`; the number moved.
template <class Row>
static std::size_t splice_rows(std::vector<Row>& into, std::size_t at, std::vector<Row>& from) {
  into.insert(into.begin() + static_cast<std::ptrdiff_t>(at), from.begin(), from.end());
  const std::size_t n = from.size();
  from = {};
  return n;
}

void reader::splice_part_rows(reader& part) {
  if (rows_spliced_) return;
  trace_model& m = m_;
  trace_model& b = part.m_;
  const snapshot& k = mark_.at;
  part_ops_ = splice_rows(m.ops, k.ops, b.ops);
  part_kernels_ = splice_rows(m.kernels, k.kernels, b.kernels);
  part_memory_ = splice_rows(m.memory, k.memory, b.memory);
  part_python_ = splice_rows(m.python, k.python, b.python);
  rows_spliced_ = true;
}

void reader::absorb_part(reader& part) {
  splice_part_rows(part);  // (unless the part's thread did)
  trace_model& m = m_;
  trace_model& b = part.m_;
  const snapshot& k = mark_.at;
  // Strings: A's ids stay; B's, then C's new strings follow in their order of first occurrence.
  // (Strings pushed by hand: intern() rebuilds its index over A's on the first call.)
  std::vector<std::string> c_strings(std::make_move_iterator(m.strings.begin() + static_cast<std::ptrdiff_t>(mark_.strings)),
                                     std::make_move_iterator(m.strings.end()));
  m.strings.resize(mark_.strings);
  std::vector<std::uint32_t> b_ids(b.strings.size(), 0);
  for (std::size_t i = 1; i < b.strings.size(); ++i) b_ids[i] = m.intern(b.strings[i]);
  std::vector<std::uint32_t> c_ids(c_strings.size(), 0);
  for (std::size_t i = 0; i < c_strings.size(); ++i) c_ids[i] = m.intern(c_strings[i]);
  c_strings = {};
  b.strings = {};
  const auto b_id = [&](std::uint32_t id) { return b_ids[id]; };
  const auto c_id = [&](std::uint32_t id) { return id < mark_.strings ? id : c_ids[id - mark_.strings]; };
  const auto remap_id = [](std::int64_t v, const auto& map) {  // a string pid/tid (string_id_base)
    return string_id_base - static_cast<std::int64_t>(map(static_cast<std::uint32_t>(string_id_base - v)));
  };
  // Side-table indexes: B's follow A's rows, C's follow B's.
  const auto shift_index = [](std::uint32_t& i, std::size_t by) {
    if (i != no_index) i += static_cast<std::uint32_t>(by);
  };
  const auto fix_event = [&](event& ev, const auto& map, std::size_t ops, std::size_t kernels, std::size_t memory,
                             std::size_t python) {
    ev.name = map(ev.name);
    if (ev.pid_is_string) ev.pid = remap_id(ev.pid, map);
    if (ev.tid_is_string) ev.tid = remap_id(ev.tid, map);
    switch (ev.type) {
      case event_type::op:
      case event_type::user_annotation:
      case event_type::python: shift_index(ev.extra, ops); break;
      case event_type::kernel: shift_index(ev.extra, kernels); break;
      case event_type::memory: shift_index(ev.extra, memory); break;
      case event_type::python_function:
      case event_type::module: shift_index(ev.extra, python); break;
      default: break;
    }
  };
  const auto fix_op = [&](op_args& a, const auto& map, std::size_t collectives) {
    a.input_dims = map(a.input_dims);
    a.input_types = map(a.input_types);
    a.call_stack = map(a.call_stack);
    shift_index(a.collective, collectives);
  };
  const auto fix_collective = [&](collective_args& c, const auto& map) {
    c.name = map(c.name);
    c.dtype = map(c.dtype);
    c.group_name = map(c.group_name);
    c.group_desc = map(c.group_desc);
    c.group_ranks = map(c.group_ranks);
  };
  const auto fix_meta = [&](track_meta& t, const auto& map) {
    t.text = map(t.text);
    if (t.pid_is_string) t.pid = remap_id(t.pid, map);
    if (t.tid_is_string) t.tid = remap_id(t.tid, map);
  };
  const auto fix_flows = [&](std::vector<flow_event>& flows, const auto& strs, std::size_t from, const auto& map) {
    for (std::size_t i = from; i < strs.size(); ++i) {
      flow_event& fl = flows[strs[i].first];
      if ((strs[i].second & 1) != 0) fl.pid = remap_id(fl.pid, map);
      if ((strs[i].second & 2) != 0) fl.tid = remap_id(fl.tid, map);
    }
  };
  for (std::size_t i = k.events; i < m.events.size(); ++i)
    fix_event(m.events[i], c_id, part_ops_, part_kernels_, part_memory_, part_python_);
  for (event& ev : b.events) fix_event(ev, b_id, k.ops, k.kernels, k.memory, k.python);
  // (The side rows are in place already, B's at the mark, then C's: splice_part_rows.)
  for (std::size_t i = k.ops; i < k.ops + part_ops_; ++i) fix_op(m.ops[i], b_id, k.collectives);
  for (std::size_t i = k.ops + part_ops_; i < m.ops.size(); ++i) fix_op(m.ops[i], c_id, b.collectives.size());
  for (std::size_t i = k.kernels; i < k.kernels + part_kernels_; ++i) shift_index(m.kernels[i].collective, k.collectives);
  for (std::size_t i = k.kernels + part_kernels_; i < m.kernels.size(); ++i)
    shift_index(m.kernels[i].collective, b.collectives.size());
  for (std::size_t i = k.collectives; i < m.collectives.size(); ++i) fix_collective(m.collectives[i], c_id);
  for (collective_args& c : b.collectives) fix_collective(c, b_id);
  for (std::size_t i = k.metas; i < m.track_metas.size(); ++i) fix_meta(m.track_metas[i], c_id);
  for (track_meta& t : b.track_metas) fix_meta(t, b_id);
  fix_flows(m.fwdbwd, flow_strs_, k.flow_strs, c_id);
  fix_flows(b.fwdbwd, part.flow_strs_, 0, b_id);
  // B's rows go between A's and C's (file order); the events: the three sorted runs merged.
  merge_sorted_runs(m.events, k.events, b.events);
  b.events = {};
  splice_rows(m.collectives, k.collectives, b.collectives);
  splice_rows(m.fwdbwd, k.fwdbwd, b.fwdbwd);
  splice_rows(m.track_metas, k.metas, b.track_metas);
  flow_strs_.clear();  // (used only here)
  // Diagnostics: counts add up; the first messages are A's, B's, C's, with event numbers of
  // the whole file.
  for (const cat_entry& c : part.cats_) m.diagnostics.events_by_category[c.text] += c.count;
  for (const auto& [kind, n] : b.diagnostics.warnings) m.diagnostics.warnings[kind] += n;
  std::vector<std::string> messages(m.diagnostics.messages.begin(),
                                    m.diagnostics.messages.begin() + static_cast<std::ptrdiff_t>(k.messages));
  for (const std::string& s : b.diagnostics.messages) messages.push_back(shift_event_number(s, k.event_index));
  for (std::size_t i = k.messages; i < m.diagnostics.messages.size(); ++i)
    messages.push_back(shift_event_number(m.diagnostics.messages[i], part.event_index_));
  if (messages.size() > 20) messages.resize(20);
  m.diagnostics.messages = std::move(messages);
  event_index_ += part.event_index_;
  // The last Record Window End / Iteration Start in file order wins (C's, else B's, else A's).
  if (!has_rwe_) {
    has_rwe_ = part.has_rwe_ || k.has_rwe;
    rwe_ts_ = part.has_rwe_ ? part.rwe_ts_ : k.rwe_ts;
  }
  if (!has_iter_) {
    has_iter_ = part.has_iter_ || k.has_iter;
    iter_ts_ = part.has_iter_ ? part.iter_ts_ : k.iter_ts;
  }
}

void reader::finish() {
  sort_events_by_ts(m_.events);
  for (const cat_entry& c : cats_) m_.diagnostics.events_by_category[c.text] += c.count;
  m_.devices = std::move(meta_.devices);
  m_.distributed = std::move(meta_.distributed);
  m_.schema_version = meta_.schema_version;
  m_.base_time_ns = meta_.base_time_ns;
  m_.lightning = meta_.lightning;
  m_.legacy_array = legacy_;
  if (trailing_nul_) {
    in_events_ = false;
    warn("NUL bytes after the JSON value ignored");
  }
  if (has_rwe_ && has_iter_ && rwe_ts_ - iter_ts_ > 86400000.0) {
    m_.record_window_end_dropped = true;
    in_events_ = false;
    warn("Record Window End more than 86.4 s after Iteration Start (dropped, as the plugin does)");
  }
}

static std::string too_large(std::uint64_t limit) {
  return "trace text larger than the limit of " + std::to_string(limit) + " bytes (--max_file_size)";
}

/// gunzip()'s output limit for `max_text_bytes`: one byte more, so that exceeding it shows.
static std::size_t inflate_limit(std::uint64_t max_text_bytes) {
  return max_text_bytes >= static_cast<std::uint64_t>(static_cast<std::size_t>(-1) - 1)
             ? static_cast<std::size_t>(-1)
             : static_cast<std::size_t>(max_text_bytes) + 1;
}

/// Drops the spare capacity of `v`, unless `v` is big enough that its spare pages were never
/// touched (trace_model::spare_kept_bytes).
template <class T>
static void shrink_exact(std::vector<T>& v) {
  if (v.capacity() > v.size() && v.capacity() * sizeof(T) < trace_model::spare_kept_bytes) v.shrink_to_fit();
}

static std::size_t events_estimate(std::size_t text_size) { return text_size / 160 + 16; }

static load_result error_result(const std::string& name, std::string reason, std::uint64_t offset = 0) {
  load_result out;
  out.error = load_error{name, offset, -1, std::move(reason)};
  return out;
}

/// The end of a successful load: sort, meta, and the file-level warnings first.
static load_result finish_load(reader& r, trace_model& model, const std::vector<std::string>& pre_warnings) {
  // The tables grew by doubling (the event table was reserved from the text size): the model is
  // kept as long as the file is open in the viewer, so give every unused slot back, but for
  // the big tables' untouched pages (trace_model::spare_kept_bytes).
  shrink_exact(model.events);
  r.finish();
  shrink_exact(model.ops);
  shrink_exact(model.kernels);
  shrink_exact(model.memory);
  shrink_exact(model.python);
  shrink_exact(model.collectives);
  shrink_exact(model.fwdbwd);
  shrink_exact(model.track_metas);
  shrink_exact(model.strings);
  for (const std::string& w : pre_warnings) {
    ++model.diagnostics.warnings[w];
    model.diagnostics.messages.insert(model.diagnostics.messages.begin(), "file: " + w);
  }
  if (model.diagnostics.messages.size() > 20) model.diagnostics.messages.resize(20);
  load_result out;
  out.model = std::move(model);
  return out;
}

/// Parses `text` (still arriving when `feed` is given), repairing and retrying as needed.
static load_result parse_text(text_buffer& text, const std::string& name, const load_options& options,
                              std::vector<std::string> pre_warnings, text_feed* feed = nullptr) {
  bool fixed_utf8 = false, fixed_ctrl = false, fixed_na = false;
  for (;;) {
    trace_model model;
    try {  // only address space (pages are touched as events arrive); skip it if refused
      model.events.reserve(events_estimate(text.size()));
    } catch (const std::bad_alloc&) {
    }
    failure f;
    reader r(model, text.data(), text.size(), text.alloc_size(), feed);
    r.expect_text_bytes(text.size());
    const bool ok = r.run(options.window_bytes, f);
    if (feed != nullptr) {
      feed->join();
      if (!feed->error().empty()) return error_result(name, feed->error(), feed->delivered());
      if (feed->delivered() < text.size()) {
        return error_result(name, "the file became shorter while it was read", feed->delivered());
      }
      if (!feed->warning().empty()) pre_warnings.push_back(feed->warning());
      feed = nullptr;
    }
    if (ok) {
      model.diagnostics.text_bytes = text.size();
      text.release();  // before the sort: peak memory = text + model
      return finish_load(r, model, pre_warnings);
    }
    if (f.code == simdjson::UTF8_ERROR && !fixed_utf8) {
      fixed_utf8 = true;
      if (repair_utf8(text.data(), text.size()) > 0) {
        pre_warnings.emplace_back("invalid UTF-8 bytes replaced with '?'");
        continue;
      }
    }
    if (f.code == simdjson::UNESCAPED_CHARS && !fixed_ctrl) {
      fixed_ctrl = true;
      if (repair_control_chars(text.data(), text.size()) > 0) {
        pre_warnings.emplace_back("raw control characters inside strings replaced with spaces");
        continue;
      }
    }
    if (!fixed_na) {
      fixed_na = true;
      text_buffer quoted;
      if (repair_bare_na(text.data(), text.size(), quoted) > 0) {
        text.swap(quoted);
        pre_warnings.emplace_back("bare N/A tokens quoted");
        continue;
      }
    }
    load_error err;
    err.file = name;
    err.byte_offset = f.offset;
    err.event_index = f.event_index;
    err.reason = !f.reason.empty() ? f.reason : reason_for(f.code);
    // Both parse paths fail differently on a text that ends early or goes on after its value;
    // one scan of the text decides which it is, so the message and place do not depend on the path.
    if (f.reason.empty() && (f.code == simdjson::INCOMPLETE_ARRAY_OR_OBJECT || f.code == simdjson::UNCLOSED_STRING ||
                             f.code == simdjson::TAPE_ERROR)) {
      const json_extent x = scan_json_extent(text.data(), text.size());
      std::size_t end = text.size();
      while (end > 0 && (is_space(text.data()[end - 1]) || text.data()[end - 1] == '\0')) --end;
      if (x.complete && x.trailing_at != npos) {
        err.reason = "unexpected text after the JSON value";
        err.byte_offset = x.trailing_at;
        err.event_index = -1;
      } else if (!x.complete && (f.code != simdjson::TAPE_ERROR || f.offset >= end)) {
        err.reason = reason_for(x.in_string ? simdjson::UNCLOSED_STRING : simdjson::INCOMPLETE_ARRAY_OR_OBJECT);
        err.byte_offset = text.size();
        err.event_index = x.event_index;
      }
    }
    load_result out;
    out.error = std::move(err);
    return out;
  }
}

/// Streaming (text_stream): the bytes read per chunk, from the window size (tests use tiny windows
/// to exercise chunk boundaries).
static std::size_t stream_chunk(const load_options& o) { return o.window_bytes * 4; }

/// Parses the text of `src` with bounded memory; nullopt when that fails for any reason (a
/// damaged or unusual file): the caller then loads the whole text the usual way, which repairs
/// what it can and reports errors with their exact position.
static std::optional<load_result> load_streamed(std::unique_ptr<byte_source> src, std::size_t size_hint,
                                                const std::string& name, const load_options& options) {
  const std::size_t window = options.window_bytes;
  std::atomic<bool> exceeded{false};
  src = std::make_unique<limited_source>(std::move(src), options.max_text_bytes, &exceeded);
  // The gap holds the tail carried from one chunk to the next: a window plus the separator scan.
  if (options.progress_bytes != nullptr) options.progress_bytes->store(0, std::memory_order_relaxed);
  text_stream stream(std::move(src), stream_chunk(options), window + (std::size_t{96} << 10), options.progress_bytes);
  trace_model model;
  try {
    if (size_hint > 0) model.events.reserve(events_estimate(std::min(size_hint, options.max_text_bytes)));
  } catch (const std::bad_alloc&) {
  }
  reader r(model, stream);
  r.expect_text_bytes(std::min<std::size_t>(size_hint, options.max_text_bytes));
  if (!r.run_streamed(window)) {
    stream.close();  // joins the producer
    if (exceeded.load()) return error_result(name, too_large(options.max_text_bytes));
    return std::nullopt;
  }
  std::vector<std::string> warnings;
  if (!stream.warning().empty()) warnings.push_back(stream.warning());
  model.diagnostics.text_bytes = stream.avail();
  stream.close();
  ++streamed_loads;
  return finish_load(r, model, warnings);
}

/// The split parse of a plain text of `size` bytes in a file (`fd`, read with pread) or in
/// memory (`mem`): see load_options::split_min_bytes and reader::absorb_part. The text is cut at
/// two event separators inside traceEvents: X near the end (the keys after traceEvents stay
/// with the main reader) and M halfway to X. The part reader gets "[" + text(M, X) + "]"; the
/// main reader gets text[0, M) + text[X, size), whose window at M must end exactly there. Both
/// run at once; nullopt when either fails (the caller then reads the text with one reader), so
/// a bad guess costs time, never correctness.
static std::optional<load_result> load_split(int fd, const char* mem, std::size_t size, const load_options& options) {
  const std::size_t window = options.window_bytes;
  if (options.split_min_bytes == 0 || size < options.split_min_bytes || size < 64 || window == 0 ||
      size > options.max_text_bytes) {
    return std::nullopt;
  }
  const auto read_at = [&](std::size_t off, std::size_t n, std::string& out) {
    n = std::min(n, size - std::min(off, size));
    out.resize(n);
    if (mem != nullptr) {
      std::memcpy(out.data(), mem + off, n);
      return true;
    }
    std::size_t done = 0;
    while (done < n) {
      const ssize_t got = ::pread(fd, out.data() + done, n - done, static_cast<off_t>(off + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      done += static_cast<std::size_t>(got);
    }
    return true;
  };
  std::string buf;
  // Only an object with traceEvents (a bare array is old and small).
  if (!read_at(0, 4096, buf)) return std::nullopt;
  std::size_t i = buf.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  while (i < buf.size() && is_space(buf[i])) ++i;
  if (i >= buf.size() || buf[i] != '{') return std::nullopt;
  // The ',' of the first "}" <ws> "," <ws> "{" in [from, limit) (searched in the first MB).
  const auto separator = [&](std::size_t from, std::size_t limit) -> std::size_t {
    const std::size_t span = std::min(limit, from + (std::size_t{1} << 20)) - std::min(from, limit);
    if (span == 0 || !read_at(from, span + 4096, buf)) return npos;
    for (std::size_t k = 0; k < span; ++k) {
      if (buf[k] != '}') continue;
      if (const std::size_t comma = separator_after(buf.data() + k, buf.size() - k); comma != npos) return from + k + comma;
    }
    return npos;
  };
  // X: the first separator in the last 1/16 of the text (at most 8 MB); further back if the keys
  // after traceEvents fill that (Kineto's log lines, say), up to a quarter of the text.
  std::size_t x = npos;
  for (std::size_t room = std::clamp<std::size_t>(size / 16, 64, std::size_t{8} << 20); x == npos && room <= size / 4;
       room *= 2) {
    x = separator(size - room, size);
  }
  if (x == npos) return std::nullopt;
  // M after the start of traceEvents (keys before it, such as a long distributedInfo, can be
  // half of a small file), found as the main reader finds it.
  constexpr std::string_view key = "\"traceEvents\"";
  std::size_t events_at = npos;
  for (std::size_t from = 0; events_at == npos && from < x / 2; from += (std::size_t{1} << 20) - key.size()) {
    if (!read_at(from, std::size_t{1} << 20, buf)) return std::nullopt;
    if (const std::size_t k = buf.find(key); k != std::string::npos) events_at = from + k;
  }
  if (events_at == npos || events_at >= x / 2) return std::nullopt;
  const std::size_t m = separator(std::max(x / 2, events_at + key.size()), x);
  if (m == npos || m + 2 >= x) return std::nullopt;

  if (options.progress_bytes != nullptr) options.progress_bytes->store(0, std::memory_order_relaxed);
  const std::size_t chunk = stream_chunk(options), gap = window + (std::size_t{96} << 10);
  std::atomic<bool> cancel{false};
  using range = ranges_source::range;
  text_stream part_stream(std::make_unique<ranges_source>(fd, mem, std::vector<range>{{m + 1, x}}, "[", "]"), chunk, gap,
                          options.progress_bytes);
  trace_model part_model;
  trace_model model;
  try {  // address space only, as in load_streamed
    part_model.events.reserve(events_estimate(x - m));
    model.events.reserve(events_estimate(size));
  } catch (const std::bad_alloc&) {
  }
  reader part(part_model, part_stream);
  part.expect_text_bytes(x - m);
  part.cancel_on(&cancel);
  bool part_ok = false;
  // The main reader's run as the part's thread sees it: 0 running, 1 done (`main_reader` set),
  // 2 failed or left. The part's thread waits for it to leave 0, so every way out of the main
  // run sets it (a failed run below, anything else through `guard`).
  std::atomic<int> main_run{0};
  reader* main_reader = nullptr;
  const auto main_run_ended = [&main_run](int how) {
    int running = 0;
    main_run.compare_exchange_strong(running, how);
    main_run.notify_all();
  };
  std::jthread helper([&] {
    try {
      const bool parsed = part.run_part(window);
      if (parsed) {
        sort_events_by_ts(part_model.events);  // (absorb_part merges the sorted runs)
        // The part's side rows into the main model while its reader sorts (see splice_part_rows).
        main_run.wait(0);
        if (main_run.load() == 1) main_reader->splice_part_rows(part);
      }
      part_ok = parsed;
    } catch (const std::exception&) {  // out of memory: one reader will try
    }
    if (!part_ok) cancel.store(true);
    part_stream.close();
  });
  // However this function is left, the part reader is told to stop (and not to wait for the
  // main reader) before `helper` joins it.
  struct cancel_on_exit {
    std::atomic<bool>& flag;
    const decltype(main_run_ended)& ended;
    ~cancel_on_exit() {
      flag.store(true);
      ended(2);
    }
  } guard{cancel, main_run_ended};
  text_stream stream(std::make_unique<ranges_source>(fd, mem, std::vector<range>{{0, m}, {x, size}}), chunk, gap,
                     options.progress_bytes);
  reader r(model, stream);
  r.expect_text_bytes(size);  // (its tables receive the part's rows: absorb_part)
  r.split_at(m);
  r.cancel_on(&cancel);
  bool ok = false;
  try {
    ok = r.run_streamed(window) && r.split_done();
    if (ok) {
      main_reader = &r;
      main_run_ended(1);
      r.sort_split_runs();  // (while the part reader's thread sorts its own, then splices)
    }
  } catch (const std::exception&) {
    ok = false;
  }
  if (!ok) {
    cancel.store(true);
    main_run_ended(2);  // (a part that parsed waits for this before it splices)
  }
  stream.close();
  helper.join();
  if (!ok || !part_ok) return std::nullopt;
  struct stat sb {};
  if (fd >= 0 && (::fstat(fd, &sb) != 0 || static_cast<std::size_t>(sb.st_size) != size)) return std::nullopt;
  r.absorb_part(part);
  model.diagnostics.text_bytes = size;
  ++streamed_loads;
  ++split_loads;
  return finish_load(r, model, {});
}

/// Texts at least this big are parsed while they are still being read or inflated.
constexpr std::size_t async_min_bytes = std::size_t{16} << 20;

static load_result load_text(text_buffer& raw, const std::string& name, const load_options& options) {
  std::vector<std::string> warnings;
  if (raw.size() == 0) return error_result(name, "empty file");
  const auto* bytes = reinterpret_cast<const unsigned char*>(raw.data());
  if (is_gzip(bytes, raw.size())) {
    const std::size_t isize = gzip_isize(bytes, raw.size());
    if (raw.size() > options.max_text_bytes) return error_result(name, too_large(options.max_text_bytes));
    // (An ISIZE over the limit goes the bounded way below, which counts what really comes out.)
    if (isize >= async_min_bytes && isize >= raw.size() && isize <= options.max_text_bytes) {  // inflate on a thread while parsing
      text_buffer text;
      if (text.reserve(isize)) {
        text.set_size(isize);
        text.seal();
        text_feed feed;
        fixed_output out{text.data(), isize, 0, &feed};
        const std::size_t n = raw.size();
        feed.start([bytes, n, out](text_feed& f) mutable {
          const gzip_status st = gunzip(bytes, n, out);
          if (st.ok && st.trailing_garbage) f.set_warning("trailing bytes after the gzip stream ignored");
          f.finish(st.ok ? std::string() : st.reason);
        });
        load_result r = parse_text(text, name, options, {}, &feed);
        if (r.ok() || r.error->reason != gzip_grew) return r;
        // Concatenated members (ISIZE is only the last one's): inflate the usual way.
      }
    }
    text_buffer text;
    const gzip_status st = gunzip(bytes, raw.size(), text, inflate_limit(options.max_text_bytes));
    if (text.size() > options.max_text_bytes) return error_result(name, too_large(options.max_text_bytes));
    if (!st.ok) return error_result(name, st.reason, st.offset);
    if (st.trailing_garbage) warnings.emplace_back("trailing bytes after the gzip stream ignored");
    raw.release();
    if (text.size() == 0) return error_result(name, "empty file (after gunzip)");
    text.seal();
    return parse_text(text, name, options, std::move(warnings));
  }
  if (raw.size() > options.max_text_bytes) return error_result(name, too_large(options.max_text_bytes));
  raw.seal();
  return parse_text(raw, name, options, std::move(warnings));
}

/// Big plain files: read on a thread while the parser works on what has arrived. nullopt when
/// the file is small, gzip or not a regular file (then it is read first, then parsed).
static std::optional<load_result> load_plain_async(const std::string& path, const load_options& options) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat sb {};
  unsigned char magic[2] = {0, 0};
  if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || static_cast<std::size_t>(sb.st_size) < async_min_bytes ||
      ::pread(fd, magic, 2, 0) != 2 || is_gzip(magic, 2)) {
    ::close(fd);
    return std::nullopt;
  }
  const auto size = static_cast<std::size_t>(sb.st_size);
  if (size > options.max_text_bytes) {
    ::close(fd);
    return error_result(path, too_large(options.max_text_bytes));
  }
  text_buffer text;
  if (!text.reserve(size)) {
    ::close(fd);
    return error_result(path, "out of memory reading file");
  }
  text.set_size(size);
  text.seal();
  text_feed feed;
  char* dst = text.data();
  feed.start([fd, dst, size](text_feed& f) {
    std::size_t done = 0;
    std::string error;
    while (done < size) {
      const std::size_t want = std::min<std::size_t>(size - done, std::size_t{4} << 20);
      const ssize_t got = ::pread(fd, dst + done, want, static_cast<off_t>(done));
      if (got < 0) {
        if (errno == EINTR) continue;
        error = std::string("read error: ") + std::strerror(errno);
        break;
      }
      if (got == 0) break;  // the file shrank
      done += static_cast<std::size_t>(got);
      f.publish(done);
    }
    ::close(fd);
    f.finish(std::move(error));
  });
  return parse_text(text, path, options, {}, &feed);
}

/// Big files (plain or gzip) through text_stream; nullopt when the file is small or not regular,
/// or the streamed parse gave up (then the file is loaded whole).
static std::optional<load_result> load_file_streamed(const std::string& path, const load_options& options) {
  if (options.window_bytes == 0) return std::nullopt;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat sb {};
  unsigned char magic[2] = {0, 0};
  if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || ::pread(fd, magic, 2, 0) != 2) {
    ::close(fd);
    return std::nullopt;
  }
  const auto size = static_cast<std::size_t>(sb.st_size);
  std::size_t text_size = size;
  const bool gz = is_gzip(magic, 2);
  if (gz) {
    unsigned char tail[4] = {0, 0, 0, 0};
    const std::size_t isize = size >= 18 && ::pread(fd, tail, 4, static_cast<off_t>(size - 4)) == 4
                                  ? std::size_t{tail[0]} | std::size_t{tail[1]} << 8 |
                                        std::size_t{tail[2]} << 16 | std::size_t{tail[3]} << 24
                                  : 0;
    text_size = isize >= size ? isize : size * 4;  // ISIZE is mod 2^32, and the last member's only
  }
  if (!gz && size > options.max_text_bytes) {
    ::close(fd);
    return error_result(path, too_large(options.max_text_bytes));
  }
  if (text_size <= stream_chunk(options)) {
    ::close(fd);
    return std::nullopt;
  }
  if (!gz) {
    std::optional<load_result> split;
    try {
      split = load_split(fd, nullptr, size, options);
    } catch (const std::exception&) {  // no thread, no memory for the merge: one reader tries
    }
    if (split) {
      ::close(fd);
      return split;
    }
  }
  std::unique_ptr<byte_source> src = std::make_unique<fd_source>(fd);
  if (gz) src = std::make_unique<gzip_source>(std::move(src));
  return load_streamed(std::move(src), text_size, path, options);
}

/// load_trace_buffer's streamed path (see load_file_streamed).
static std::optional<load_result> load_buffer_streamed(std::string_view bytes, const std::string& name,
                                                       const load_options& options) {
  if (options.window_bytes == 0) return std::nullopt;
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  const bool gz = is_gzip(b, bytes.size());
  const std::size_t isize = gz ? gzip_isize(b, bytes.size()) : 0;
  const std::size_t text_size = !gz ? bytes.size() : (isize >= bytes.size() ? isize : bytes.size() * 4);
  if (text_size <= stream_chunk(options)) return std::nullopt;
  if (!gz) {
    try {
      if (auto split = load_split(-1, bytes.data(), bytes.size(), options)) return split;
    } catch (const std::exception&) {  // as in load_file_streamed
    }
  }
  std::unique_ptr<byte_source> src = std::make_unique<memory_source>(bytes.data(), bytes.size());
  if (gz) src = std::make_unique<gzip_source>(std::move(src));
  return load_streamed(std::move(src), text_size, name, options);
}

}  // namespace detail

using detail::error_result;
using detail::gunzip;
using detail::gzip_status;
using detail::is_gzip;
using detail::load_text;
using detail::read_file;
using detail::text_buffer;

std::uint64_t default_split_min_bytes() noexcept {
  static const std::uint64_t value = std::thread::hardware_concurrency() >= 2 ? std::uint64_t{64} << 20 : 0;
  return value;
}

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
  std::uint64_t n = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, n);
  if (ec != std::errc() || ptr == text.data()) return std::nullopt;
  std::string rest(ptr, end);
  for (char& c : rest) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (rest.ends_with("ib")) rest.resize(rest.size() - 2);
  else if (rest.size() == 2 && rest[1] == 'b') rest.resize(1);
  else if (rest == "b") rest.clear();
  int shift = 0;
  if (rest == "k") shift = 10;
  else if (rest == "m") shift = 20;
  else if (rest == "g") shift = 30;
  else if (rest == "t") shift = 40;
  else if (!rest.empty()) return std::nullopt;
  if (n > (std::uint64_t{1} << 63) >> shift) return std::nullopt;
  return n << shift;
}

load_result load_trace(const std::string& path, const load_options& options) {
  try {
    if (auto r = detail::load_file_streamed(path, options)) return std::move(*r);
    // (A streamed attempt that gave up is loaded whole: its progress starts again.)
    if (options.progress_bytes != nullptr) options.progress_bytes->store(0, std::memory_order_relaxed);
    if (auto r = detail::load_plain_async(path, options)) return std::move(*r);
    text_buffer raw;
    int error_number = 0;
    const std::string why = read_file(path, raw, detail::inflate_limit(options.max_text_bytes), &error_number);
    if (!why.empty()) {
      load_result r = error_result(path, why);
      r.error->sys_errno = error_number;
      return r;
    }
    // (A plain text over the limit, e.g. from a pipe, is refused by load_text.)
    return load_text(raw, path, options);
  } catch (const std::exception& e) {
    return error_result(path, std::string("internal error: ") + e.what());
  }
}

load_result load_trace_buffer(std::string_view bytes, const std::string& name, const load_options& options) {
  try {
    const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
    if (!is_gzip(b, bytes.size()) && bytes.size() > options.max_text_bytes) {
      return error_result(name, detail::too_large(options.max_text_bytes));
    }
    if (auto r = detail::load_buffer_streamed(bytes, name, options)) return std::move(*r);
    text_buffer raw;
    if (!raw.reserve(bytes.size())) return error_result(name, "out of memory");
    if (!bytes.empty()) std::memcpy(raw.data(), bytes.data(), bytes.size());
    raw.set_size(bytes.size());
    return load_text(raw, name, options);
  } catch (const std::exception& e) {
    return error_result(name, std::string("internal error: ") + e.what());
  }
}

std::optional<std::string> read_text_head(const std::string& path, std::size_t max_bytes) {
  try {
    text_buffer raw;
    if (!read_file(path, raw, std::max<std::size_t>(max_bytes, 1 << 16)).empty()) return std::nullopt;
    const auto* bytes = reinterpret_cast<const unsigned char*>(raw.data());
    if (!is_gzip(bytes, raw.size())) return std::string(raw.data(), std::min(raw.size(), max_bytes));
    text_buffer text;
    const gzip_status st = gunzip(bytes, raw.size(), text, max_bytes);
    if (!st.ok && text.size() == 0) return std::nullopt;
    return std::string(text.data(), std::min(text.size(), max_bytes));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace kinetoscope::analysis
