// SPDX-License-Identifier: BSD-3-Clause
/// @file summary.cpp
/// file_summary's persisted form (the index's summary section): see summary.hpp for the layout.
#include "server/summary.hpp"

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>

#include "nlohmann/json.hpp"
#include "server/device_json.hpp"
#include "server/json_int.hpp"

namespace kinetoscope::server {
namespace {

namespace an = kinetoscope::analysis;
using json = nlohmann::json;

constexpr char summary_magic[8] = {'K', 'S', 'S', 'U', 'M', 'M', '0', '1'};
constexpr char span_magic[8] = {'K', 'S', 'S', 'P', 'A', 'N', '0', '1'};
constexpr std::uint32_t no_string = std::numeric_limits<std::uint32_t>::max();

json bar_json(const an::overlap_bar& b) { return {b.computation, b.overlap, b.communication, b.other}; }
an::overlap_bar bar_of(const json& j) {
  return {j.at(0).get<double>(), j.at(1).get<double>(), j.at(2).get<double>(), j.at(3).get<double>()};
}

/// Appends fixed-size little-endian values and interned strings.
class writer {
 public:
  template <class T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const std::size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  void put_text(std::string_view s) {
    put(static_cast<std::uint64_t>(s.size()));
    out_.append(s);
  }
  /// u64 n, then n texts.
  void put_texts(const std::vector<std::string>& list) {
    put(static_cast<std::uint64_t>(list.size()));
    for (const std::string& t : list) put_text(t);
  }
  /// u64 n, then n (key, body) texts.
  void put_bodies(const std::map<std::string, std::string>& bodies) {
    put(static_cast<std::uint64_t>(bodies.size()));
    for (const auto& [key, body] : bodies) {
      put_text(key);
      put_text(body);
    }
  }
  /// The id of `s` in the string table (written by finish()).
  std::uint32_t id(const std::string& s) {
    auto [it, inserted] = ids_.try_emplace(s, static_cast<std::uint32_t>(strings_.size()));
    if (inserted) strings_.push_back(&it->first);
    return it->second;
  }
  /// The table, then the records written so far.
  std::string finish(std::string head) {
    writer table;
    table.put(static_cast<std::uint64_t>(strings_.size()));
    for (const std::string* s : strings_) table.put_text(*s);
    return std::move(head) + table.out_ + out_;
  }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
  std::unordered_map<std::string, std::uint32_t> ids_;
  std::vector<const std::string*> strings_;
};

/// Reads what writer wrote; every read is bounds-checked and throws std::runtime_error.
class reader {
 public:
  explicit reader(std::string_view b) : b_(b) {}
  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T));
    T v;
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  double finite() {
    const double v = get<double>();
    if (!std::isfinite(v)) throw std::runtime_error("a time is not finite");
    return v;
  }
  std::string_view text() {
    const auto n = get<std::uint64_t>();
    need(n);
    const std::string_view s = b_.substr(at_, static_cast<std::size_t>(n));
    at_ += static_cast<std::size_t>(n);
    return s;
  }
  /// A record count, refused when the bytes left cannot hold that many of `min_bytes` each
  /// (so a corrupt count never asks for a huge allocation).
  std::size_t count(std::size_t min_bytes) {
    const auto n = get<std::uint64_t>();
    if (n > (b_.size() - at_) / min_bytes) throw std::runtime_error("a record count is larger than the section");
    return static_cast<std::size_t>(n);
  }
  /// What writer::put_texts() wrote.
  std::vector<std::string> texts() {
    std::vector<std::string> out(count(sizeof(std::uint64_t)));
    for (std::string& t : out) t = text();
    return out;
  }
  /// What writer::put_bodies() wrote; a key twice is refused.
  std::map<std::string, std::string> bodies() {
    std::map<std::string, std::string> out;
    for (std::size_t i = 0, n = count(2 * sizeof(std::uint64_t)); i < n; ++i) {
      std::string key(text());
      std::string body(text());
      if (!out.emplace(std::move(key), std::move(body)).second) throw std::runtime_error("a body is repeated");
    }
    return out;
  }
  void read_strings() { strings_ = texts(); }
  const std::string& str(std::uint32_t id) const {
    if (id >= strings_.size()) throw std::runtime_error("a string id is out of range");
    return strings_[id];
  }
  bool done() const noexcept { return at_ == b_.size(); }

 private:
  void need(std::uint64_t n) const {
    if (n > b_.size() - at_) throw std::runtime_error("the section ends inside a record");
  }
  std::string_view b_;
  std::size_t at_ = 0;
  std::vector<std::string> strings_;
};

// Smallest encoded record sizes (count() checks).
constexpr std::size_t comm_min = 4 + 4 + 8 + 8 + 8 + 8 + 4 + 4;
constexpr std::size_t interval_bytes = 16;
constexpr std::size_t step_min = 4 + 6 * 8;
constexpr std::size_t collective_min = 3 * 4 + 3 * 8 + 3 * 8 + 1 + 4;

}  // namespace

std::size_t file_summary::bytes() const noexcept {
  std::size_t n = sizeof(*this) + timeline_error.size();
  for (const auto& [k, v] : bodies) n += k.size() + v.size() + 64;
  for (const auto& m : diagnostics.messages) n += m.size() + 32;
  n += (diagnostics.warnings.size() + diagnostics.events_by_category.size()) * 64;
  n += distributed.records.heap_bytes();
  n += distributed.overlap.size() * 64 + distributed.devices.size() * sizeof(an::device_info);
  n += rank.steps.size() * (sizeof(an::rank_step) + 16);
  n += rank.collectives.size() * sizeof(an::rank_collective);
  for (const auto& t : rank.strings) n += sizeof(t) + t.size();
  return n;
}

std::string summary_to_bytes(const file_summary& s) {
  // The small, irregular part as JSON.
  json j;
  j["file_bytes"] = s.file_bytes;
  j["load_seconds"] = s.load_seconds;
  j["full_bytes"] = s.full_bytes;
  j["warnings"] = s.warnings;
  j["diagnostics"] = {{"events_by_category", s.diagnostics.events_by_category},
                      {"warnings", s.diagnostics.warnings},
                      {"messages", s.diagnostics.messages},
                      {"text_bytes", s.diagnostics.text_bytes}};
  j["views"] = {s.kernel_view, s.memory_view, s.module_view};
  j["timeline_error"] = s.timeline_error;
  json overlap = json::array();
  for (const auto& [step, bar] : s.distributed.overlap) overlap.push_back({step, bar_json(bar)});
  j["distributed"] = {{"devices", devices_json(s.distributed.devices)},
                      {"used_devices", s.distributed.used_devices},
                      {"overlap", std::move(overlap)},
                      {"overlap_all", bar_json(s.distributed.overlap_all)}};
  j["rank_id"] = s.rank_id;
  writer head;
  head.bytes().append(summary_magic, sizeof(summary_magic));
  head.put_text(j.dump(-1, ' ', false, json::error_handler_t::replace));

  // The bodies and the per-record parts as records (they are most of the bytes).
  writer w;
  w.put_bodies(s.bodies);
  const an::packed_comm_records& comm = s.distributed.records;
  w.put_texts(comm.names);
  w.put_texts(comm.steps);
  w.put(static_cast<std::uint64_t>(comm.records.size()));
  for (const an::packed_comm_records::record& r : comm.records) {
    w.put(r.name);
    w.put(r.step);
    w.put(r.external_id);
    w.put(r.start);
    w.put(r.end);
    w.put(r.bytes);
    w.put(r.first_range);
    w.put(r.range_count);
  }
  w.put(static_cast<std::uint64_t>(comm.ranges.size()));
  for (const an::interval& i : comm.ranges) {
    w.put(i.start);
    w.put(i.end);
  }
  w.put(static_cast<std::uint64_t>(s.rank.steps.size()));
  for (const an::rank_step& r : s.rank.steps) {
    w.put(w.id(r.name));
    for (double v : {r.start, r.end, r.compute, r.communication, r.overlap, r.data_loading}) w.put(v);
  }
  w.put_texts(s.rank.strings);
  w.put(static_cast<std::uint64_t>(s.rank.collectives.size()));
  for (const an::rank_collective& c : s.rank.collectives) {
    w.put(c.group);
    w.put(c.group_desc);
    w.put(c.name);
    w.put(c.seq);
    w.put(c.group_size);
    w.put(c.bytes);
    w.put(c.launch);
    w.put(c.start);
    w.put(c.end);
    w.put(static_cast<std::uint8_t>(c.on_device ? 1 : 0));
    w.put(c.step);
  }
  return w.finish(std::move(head.bytes()));
}

file_summary summary_from_bytes(std::string_view bytes) {
  try {
    if (bytes.size() < sizeof(summary_magic) || std::memcmp(bytes.data(), summary_magic, sizeof(summary_magic)) != 0)
      throw std::runtime_error("not a summary");
    reader r(bytes.substr(sizeof(summary_magic)));
    const json j = json::parse(r.text());
    file_summary s;
    s.file_bytes = json_int<std::uint64_t>(j.at("file_bytes"));
    s.load_seconds = j.at("load_seconds").get<double>();
    s.full_bytes = json_int<std::uint64_t>(j.at("full_bytes"));
    s.warnings = json_int<std::uint64_t>(j.at("warnings"));
    const json& d = j.at("diagnostics");
    s.diagnostics.events_by_category = json_int_map<std::uint64_t>(d.at("events_by_category"));
    s.diagnostics.warnings = json_int_map<std::uint64_t>(d.at("warnings"));
    s.diagnostics.messages = d.at("messages").get<std::vector<std::string>>();
    s.diagnostics.text_bytes = json_int<std::uint64_t>(d.at("text_bytes"));
    const json& v = j.at("views");
    s.kernel_view = v.at(0).get<bool>();
    s.memory_view = v.at(1).get<bool>();
    s.module_view = v.at(2).get<bool>();
    s.timeline_error = j.at("timeline_error").get<std::string>();
    const json& dist = j.at("distributed");
    s.distributed.devices = devices_of(dist.at("devices"));
    s.distributed.used_devices = json_int_set<std::int64_t>(dist.at("used_devices"));
    for (const auto& o : dist.at("overlap")) s.distributed.overlap.emplace_back(o.at(0).get<std::string>(), bar_of(o.at(1)));
    s.distributed.overlap_all = bar_of(dist.at("overlap_all"));
    s.rank_id = json_int<std::int64_t>(j.at("rank_id"));

    r.read_strings();
    s.bodies = r.bodies();
    an::packed_comm_records& comm = s.distributed.records;
    comm.names = r.texts();
    comm.steps = r.texts();
    comm.records.resize(r.count(comm_min));
    for (an::packed_comm_records::record& c : comm.records) {
      c.name = r.get<std::uint32_t>();
      c.step = r.get<std::uint32_t>();
      c.external_id = r.get<std::int64_t>();
      c.start = r.finite();
      c.end = r.finite();
      c.bytes = r.get<std::int64_t>();
      c.first_range = r.get<std::uint32_t>();
      c.range_count = r.get<std::uint32_t>();
    }
    comm.ranges.resize(r.count(interval_bytes));
    for (an::interval& i : comm.ranges) {
      i.start = r.finite();
      i.end = r.finite();
    }
    for (const an::packed_comm_records::record& c : comm.records) {
      if (c.name >= comm.names.size() || (c.step != an::packed_comm_records::no_step && c.step >= comm.steps.size()))
        throw std::runtime_error("a communication record's name or step is out of range");
      if (c.first_range > comm.ranges.size() || c.range_count > comm.ranges.size() - c.first_range)
        throw std::runtime_error("a communication record's ranges are out of range");
    }
    s.rank.steps.resize(r.count(step_min));
    for (an::rank_step& st : s.rank.steps) {
      st.name = r.str(r.get<std::uint32_t>());
      for (double* f : {&st.start, &st.end, &st.compute, &st.communication, &st.overlap, &st.data_loading}) *f = r.finite();
    }
    s.rank.strings = r.texts();
    s.rank.collectives.resize(r.count(collective_min));
    for (an::rank_collective& c : s.rank.collectives) {
      c.group = r.get<std::uint32_t>();
      c.group_desc = r.get<std::uint32_t>();
      c.name = r.get<std::uint32_t>();
      const std::size_t texts = s.rank.strings.size();
      if (c.group >= texts || c.group_desc >= texts || c.name >= texts)
        throw std::runtime_error("a collective's text id is out of range");
      c.seq = r.get<std::int64_t>();
      c.group_size = r.get<std::int64_t>();
      c.bytes = r.get<std::int64_t>();
      c.launch = r.finite();
      c.start = r.finite();
      c.end = r.finite();
      const auto on_device = r.get<std::uint8_t>();
      if (on_device > 1) throw std::runtime_error("a collective's on_device is not a bool");
      c.on_device = on_device == 1;
      c.step = r.get<std::int32_t>();
      if (c.step < -1 || c.step >= static_cast<std::int32_t>(s.rank.steps.size()))
        throw std::runtime_error("a collective's step is out of range");
    }
    if (!r.done()) throw std::runtime_error("bytes after the last record");
    s.from_index = true;
    return s;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("the summary is unreadable: ") + e.what());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("the summary is unreadable: ") + e.what());
  }
}

std::string span_bodies_to_bytes(const span_bodies& b) {
  writer w;
  w.bytes().append(span_magic, sizeof(span_magic));
  w.put(static_cast<std::uint8_t>(b.available ? 1 : 0));
  w.put_bodies(b.bodies);
  return std::move(w.bytes());
}

span_bodies span_bodies_from_bytes(std::string_view bytes) {
  if (bytes.size() < sizeof(span_magic) || std::memcmp(bytes.data(), span_magic, sizeof(span_magic)) != 0)
    throw std::runtime_error("not a span's bodies");
  reader r(bytes.substr(sizeof(span_magic)));
  span_bodies b;
  const auto available = r.get<std::uint8_t>();
  if (available > 1) throw std::runtime_error("a span's available flag is not a bool");
  b.available = available == 1;
  b.bodies = r.bodies();
  if (!r.done()) throw std::runtime_error("bytes after a span's bodies");
  return b;
}

}  // namespace kinetoscope::server
