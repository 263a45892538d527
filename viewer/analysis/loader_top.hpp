// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file loader_top.hpp
/// Internal to loader.cpp: the reader's top-level keys (deviceProperties, distributedInfo,
/// schemaVersion, baseTimeNanoseconds, Framework), read from the whole document or from the
/// small texts before and after traceEvents. Not part of the analysis API.

#include <string>
#include <string_view>

#include "analysis/loader_reader.hpp"

namespace kinetoscope::analysis::detail {

// --- top level ----------------------------------------------------------------------------

inline error_code reader::read_devices(od::value& v) {
  od::array arr;
  if (v.get_array().get(arr) != SUCCESS) {
    warn("wrong type", "deviceProperties");
    return SUCCESS;
  }
  meta_.devices.clear();
  for (auto er : arr) {
    od::value dv;
    if (auto e = std::move(er).get(dv)) return e;
    device_info d;
    od::object obj;
    if (dv.get_object().get(obj) == SUCCESS) {
      d.present = true;
      for (auto fr : obj) {
        od::field f;
        if (auto e = std::move(fr).get(f)) return e;
        const std::string_view key = key_of(f.key());
        od::value& fv = f.value();
        if (key == "name") {
          std::string_view s;
          d.has_name = get_str(fv, s, tmp_buf_);
          if (d.has_name) d.name = std::string(s);
        } else if (key == "totalGlobalMem") {
          d.has_total_global_mem = get_i64(fv, d.total_global_mem, "totalGlobalMem");
        } else if (key == "computeMajor") {
          d.has_compute_major = get_i64(fv, d.compute_major, "computeMajor");
        } else if (key == "computeMinor") {
          d.has_compute_minor = get_i64(fv, d.compute_minor, "computeMinor");
        } else if (key == "numSms") {
          get_i64(fv, d.num_sms, "numSms");
        } else if (key == "maxThreadsPerMultiprocessor") {
          get_i64(fv, d.max_threads_per_multiprocessor, "maxThreadsPerMultiprocessor");
        }
      }
    }
    meta_.devices.push_back(std::move(d));
  }
  return SUCCESS;
}

inline error_code reader::read_distributed(od::value& v) {
  od::object obj;
  if (v.get_object().get(obj) != SUCCESS) {
    warn("wrong type", "distributedInfo");
    return SUCCESS;
  }
  distributed_meta d;
  for (auto fr : obj) {
    od::field f;
    if (auto e = std::move(fr).get(f)) return e;
    const std::string_view key = key_of(f.key());
    od::value& fv = f.value();
    if (key == "backend") {
      std::string_view s;
      if (get_str(fv, s, tmp_buf_)) d.backend = std::string(s);
    } else if (key == "rank") {
      get_i64(fv, d.rank, "rank");
    } else if (key == "world_size") {
      get_i64(fv, d.world_size, "world_size");
    }
  }
  meta_.distributed = std::move(d);
  return SUCCESS;
}

inline error_code reader::read_top_field(std::string_view key, od::value& v) {
  if (key == "deviceProperties") return read_devices(v);
  if (key == "distributedInfo") return read_distributed(v);
  if (key == "schemaVersion") {
    get_i64(v, meta_.schema_version, "schemaVersion");
  } else if (key == "baseTimeNanoseconds") {
    get_i64(v, meta_.base_time_ns, "baseTimeNanoseconds");
  } else if (key == "Framework") {
    std::string_view s;
    if (get_str(v, s, tmp_buf_)) meta_.lightning = s == "pytorch-lightning";
  }
  return SUCCESS;
}

/// Parses a small object holding top-level keys (the text before or after traceEvents, with
/// an empty "traceEvents":[] standing for the events). False when it is not that: not JSON, or
/// a second "traceEvents" key (the whole-text parse then decides, and rejects it).
inline bool reader::parse_top_doc(const std::string& text) {
  od::parser parser;
  const simdjson::padded_string padded(text);
  od::document doc;
  if (parser.iterate(padded).get(doc) != SUCCESS) return false;
  od::object obj;
  if (doc.get_object().get(obj) != SUCCESS) return false;
  const char* saved_end = end_;
  end_ = padded.data() + padded.size() + padding;
  bool ok = true;
  int events_keys = 0;
  for (auto fr : obj) {
    od::field f;
    if (std::move(fr).get(f) != SUCCESS) {
      ok = false;
      break;
    }
    const std::string_view key = key_of(f.key());
    if (key == "traceEvents") {
      if (++events_keys > 1) {
        ok = false;
        break;
      }
      continue;
    }
    if (read_top_field(key, f.value()) != SUCCESS) {
      ok = false;
      break;
    }
  }
  end_ = saved_end;
  const char* loc = nullptr;
  return ok && doc.current_location().get(loc) == simdjson::OUT_OF_BOUNDS;
}

}  // namespace kinetoscope::analysis::detail
