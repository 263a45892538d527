// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file json_int.hpp
/// Integers read from the JSON parts of a persisted index (summary.cpp, timeline.cpp). nlohmann's
/// get<integer>() casts a JSON float to the integer type, which is undefined behaviour when the
/// value does not fit (a fuzz finding: tests/fuzz/corpus/index/meta_float_as_integer.ksidx);
/// these read only JSON integers that fit, and throw std::runtime_error otherwise, which
/// makes the index invalid (it is rebuilt from the trace).

#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace kinetoscope::server {

/// `j` as T when it is a JSON integer in T's range.
template <class T>
T json_int(const nlohmann::json& j) {
  if (j.is_number_unsigned()) {
    const auto u = j.get<std::uint64_t>();
    if (std::in_range<T>(u)) return static_cast<T>(u);
  } else if (j.is_number_integer()) {
    const auto i = j.get<std::int64_t>();
    if (std::in_range<T>(i)) return static_cast<T>(i);
  }
  throw std::runtime_error("index: an integer expected, got " + j.dump().substr(0, 64));
}

/// A JSON object of integers as a map.
template <class T>
std::map<std::string, T> json_int_map(const nlohmann::json& j) {
  if (!j.is_object()) throw std::runtime_error("index: an object expected");
  std::map<std::string, T> out;
  for (const auto& [k, v] : j.items()) out.emplace(k, json_int<T>(v));
  return out;
}

/// A JSON array of integers as a set.
template <class T>
std::set<T> json_int_set(const nlohmann::json& j) {
  if (!j.is_array()) throw std::runtime_error("index: an array expected");
  std::set<T> out;
  for (const auto& v : j) out.insert(json_int<T>(v));
  return out;
}

}  // namespace kinetoscope::server
