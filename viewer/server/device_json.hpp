// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file device_json.hpp
/// trace_model::devices as JSON, the same way in the index's model section (trace_index.cpp)
/// and in a summary's Distributed part (summary.cpp). Reading throws nlohmann::json::exception
/// on a wrong shape and std::runtime_error on a non-integer where an integer belongs (the
/// caller reports the index as corrupt).

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/model.hpp"
#include "nlohmann/json.hpp"
#include "server/json_int.hpp"

namespace kinetoscope::server {

inline nlohmann::json devices_json(const std::vector<analysis::device_info>& devices) {
  nlohmann::json out = nlohmann::json::array();
  for (const analysis::device_info& d : devices)
    out.push_back({d.present, d.name, d.has_name, d.total_global_mem, d.has_total_global_mem, d.compute_major,
                   d.has_compute_major, d.compute_minor, d.has_compute_minor, d.num_sms,
                   d.max_threads_per_multiprocessor});
  return out;
}

inline std::vector<analysis::device_info> devices_of(const nlohmann::json& j) {
  std::vector<analysis::device_info> out;
  for (const auto& d : j) {
    analysis::device_info x;
    x.present = d.at(0).get<bool>();
    x.name = d.at(1).get<std::string>();
    x.has_name = d.at(2).get<bool>();
    x.total_global_mem = json_int<std::int64_t>(d.at(3));
    x.has_total_global_mem = d.at(4).get<bool>();
    x.compute_major = json_int<std::int64_t>(d.at(5));
    x.has_compute_major = d.at(6).get<bool>();
    x.compute_minor = json_int<std::int64_t>(d.at(7));
    x.has_compute_minor = d.at(8).get<bool>();
    x.num_sms = json_int<std::int64_t>(d.at(9));
    x.max_threads_per_multiprocessor = json_int<std::int64_t>(d.at(10));
    out.push_back(std::move(x));
  }
  return out;
}

}  // namespace kinetoscope::server
