// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file op_tree_golden.hpp
/// Helpers for the golden tests of the operator and kernel views: walks
/// $KINETOSCOPE_REAL_TRACES/expected/<run>/<file>.expected.json, loads the matching trace and
/// compares rows by key: durations within max(1, 0.1 %), percentages and ratios within 0.01.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include "../real_traces.hpp"

namespace kinetoscope::analysis::testing {

struct golden_case {
  std::string run;
  std::string file;             ///< trace file name
  std::filesystem::path trace;  ///< $KINETOSCOPE_REAL_TRACES/traces/<run>/<file>
  nlohmann::json expected;
};

/// Every expected file (sorted by path). Fails the calling test when KINETOSCOPE_REAL_TRACES is
/// not set or has no `expected` folder.
inline std::vector<golden_case> golden_cases() {
  std::vector<golden_case> out;
  const char* real = kinetoscope::test::real_traces();
  REQUIRE_MESSAGE(real != nullptr, "KINETOSCOPE_REAL_TRACES not set (meson test sets it)");
  const std::filesystem::path root(real);
  std::vector<std::filesystem::path> files;
  REQUIRE_MESSAGE(std::filesystem::is_directory(root / "expected"), ((root / "expected").string() + " missing"));
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root / "expected")) {
    const std::string name = entry.path().filename().string();
    const std::string suffix = ".expected.json";
    if (name.size() > suffix.size() && name.ends_with(suffix)) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    golden_case c;
    c.run = f.parent_path().filename().string();
    c.file = f.filename().string();
    c.file.resize(c.file.size() - std::string(".expected.json").size());
    c.trace = root / "traces" / c.run / c.file;
    std::ifstream in(f);
    c.expected = nlohmann::json::parse(in);
    out.push_back(std::move(c));
  }
  return out;
}

/// Collects mismatches of one table as readable lines.
class golden_compare {
 public:
  explicit golden_compare(std::string table) : table_(std::move(table)) {}

  void time(const std::string& key, const char* field, const nlohmann::json& want, double got) {
    if (!want.contains(field)) return;
    const double w = want[field].get<double>();
    if (std::abs(w - got) > std::max(1.0, 0.001 * std::abs(w))) add(key, field, want[field].dump(), got);
  }
  void pct(const std::string& key, const char* field, const nlohmann::json& want, double got) {
    if (!want.contains(field)) return;
    const double w = want[field].get<double>();
    if (std::abs(w - got) > 0.01 + 1e-9) add(key, field, want[field].dump(), got);
  }
  void exact_int(const std::string& key, const char* field, const nlohmann::json& want, std::int64_t got) {
    if (!want.contains(field)) return;
    if (want[field].get<std::int64_t>() != got) add(key, field, want[field].dump(), static_cast<double>(got));
  }
  void exact_bool(const std::string& key, const char* field, const nlohmann::json& want, bool got) {
    if (!want.contains(field)) return;
    if (want[field].get<bool>() != got) mismatches_.push_back(table_ + " [" + key + "] " + field + ": want " +
                                                              want[field].dump() + ", got " + (got ? "true" : "false"));
  }
  void missing(const std::string& key) { mismatches_.push_back(table_ + " [" + key + "]: row missing"); }
  void count(std::size_t want, std::size_t got) {
    if (want != got)
      mismatches_.push_back(table_ + ": " + std::to_string(want) + " rows expected, " + std::to_string(got) + " computed");
  }
  const std::vector<std::string>& mismatches() const { return mismatches_; }

 private:
  void add(const std::string& key, const char* field, const std::string& want, double got) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", got);
    mismatches_.push_back(table_ + " [" + key + "] " + field + ": want " + want + ", got " + buf);
  }
  std::string table_;
  std::vector<std::string> mismatches_;
};

inline std::string short_key(std::string s) {
  if (s.size() > 120) s = s.substr(0, 117) + "...";
  return s;
}

}  // namespace kinetoscope::analysis::testing
