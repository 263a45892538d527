// SPDX-License-Identifier: BSD-3-Clause
/// @file summary.cpp
/// file_summary's JSON form (the index's summary section).
#include "server/summary.hpp"

#include <stdexcept>

#include "nlohmann/json.hpp"
#include "server/device_json.hpp"

namespace kinetoscope::server {
namespace {

namespace an = kinetoscope::analysis;
using json = nlohmann::json;

json bar_json(const an::overlap_bar& b) { return {b.computation, b.overlap, b.communication, b.other}; }
an::overlap_bar bar_of(const json& j) {
  return {j.at(0).get<double>(), j.at(1).get<double>(), j.at(2).get<double>(), j.at(3).get<double>()};
}

json intervals_json(const std::vector<an::interval>& v) {
  json out = json::array();
  for (const an::interval& i : v) out.push_back({i.start, i.end});
  return out;
}
std::vector<an::interval> intervals_of(const json& j) {
  std::vector<an::interval> out;
  for (const auto& i : j) out.push_back({i.at(0).get<double>(), i.at(1).get<double>()});
  return out;
}

json part_json(const an::distributed_worker_part& p) {
  json records = json::array();
  for (const an::comm_record& r : p.records)
    records.push_back({r.name, r.external_id, r.start, r.end, intervals_json(r.ranges), intervals_json(r.real_ranges),
                       r.step ? json(*r.step) : json(nullptr), r.bytes});
  json overlap = json::array();
  for (const auto& [step, bar] : p.overlap) overlap.push_back({step, bar_json(bar)});
  return {{"devices", devices_json(p.devices)},
          {"used_devices", p.used_devices},
          {"records", std::move(records)},
          {"overlap", std::move(overlap)},
          {"overlap_all", bar_json(p.overlap_all)}};
}

an::distributed_worker_part part_of(const json& j) {
  an::distributed_worker_part p;
  p.devices = devices_of(j.at("devices"));
  p.used_devices = j.at("used_devices").get<std::set<std::int64_t>>();
  for (const auto& r : j.at("records")) {
    an::comm_record c;
    c.name = r.at(0).get<std::string>();
    c.external_id = r.at(1).get<std::int64_t>();
    c.start = r.at(2).get<double>();
    c.end = r.at(3).get<double>();
    c.ranges = intervals_of(r.at(4));
    c.real_ranges = intervals_of(r.at(5));
    if (!r.at(6).is_null()) c.step = r.at(6).get<std::string>();
    c.bytes = r.at(7).get<std::int64_t>();
    p.records.push_back(std::move(c));
  }
  for (const auto& o : j.at("overlap")) p.overlap.emplace_back(o.at(0).get<std::string>(), bar_of(o.at(1)));
  p.overlap_all = bar_of(j.at("overlap_all"));
  return p;
}

}  // namespace

std::size_t file_summary::bytes() const noexcept {
  std::size_t n = sizeof(*this) + timeline_error.size();
  for (const auto& [k, v] : bodies) n += k.size() + v.size() + 64;
  for (const auto& m : diagnostics.messages) n += m.size() + 32;
  n += (diagnostics.warnings.size() + diagnostics.events_by_category.size()) * 64;
  for (const auto& r : distributed.records)
    n += sizeof(r) + r.name.size() + (r.ranges.size() + r.real_ranges.size()) * sizeof(an::interval);
  n += distributed.overlap.size() * 64 + distributed.devices.size() * sizeof(an::device_info);
  n += rank.steps.size() * (sizeof(an::rank_step) + 16);
  for (const auto& c : rank.collectives) n += sizeof(c) + c.group.size() + c.group_desc.size() + c.name.size();
  return n;
}

std::string summary_to_json(const file_summary& s) {
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
  j["bodies"] = s.bodies;
  j["distributed"] = part_json(s.distributed);
  j["rank"] = an::rank_summary_to_json(s.rank);
  j["rank_id"] = s.rank_id;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

file_summary summary_from_json(std::string_view text) {
  try {
    const json j = json::parse(text);
    file_summary s;
    s.file_bytes = j.at("file_bytes").get<std::uint64_t>();
    s.load_seconds = j.at("load_seconds").get<double>();
    s.full_bytes = j.at("full_bytes").get<std::uint64_t>();
    s.warnings = j.at("warnings").get<std::uint64_t>();
    const json& d = j.at("diagnostics");
    s.diagnostics.events_by_category = d.at("events_by_category").get<std::map<std::string, std::uint64_t>>();
    s.diagnostics.warnings = d.at("warnings").get<std::map<std::string, std::uint64_t>>();
    s.diagnostics.messages = d.at("messages").get<std::vector<std::string>>();
    s.diagnostics.text_bytes = d.at("text_bytes").get<std::uint64_t>();
    const json& v = j.at("views");
    s.kernel_view = v.at(0).get<bool>();
    s.memory_view = v.at(1).get<bool>();
    s.module_view = v.at(2).get<bool>();
    s.timeline_error = j.at("timeline_error").get<std::string>();
    s.bodies = j.at("bodies").get<std::map<std::string, std::string>>();
    s.distributed = part_of(j.at("distributed"));
    s.rank = an::rank_summary_from_json(j.at("rank"));
    s.rank_id = j.at("rank_id").get<std::int64_t>();
    s.from_index = true;
    return s;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("the summary is unreadable: ") + e.what());
  }
}

}  // namespace kinetoscope::server
