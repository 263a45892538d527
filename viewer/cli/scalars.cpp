// SPDX-License-Identifier: BSD-3-Clause
/// @file cli/scalars.cpp
/// `kinetoscope scalars`: reads TensorBoard event files with the project's tfevents reader.
#include "cli/scalars.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <system_error>

#include "kinetoscope/tensorboard/tfevents.hpp"

namespace kinetoscope::cli {
namespace {

namespace fs = std::filesystem;

/// Everything read from the event files of one run, merged in file order.
using run_series = std::map<std::string, std::vector<scalar_point>>;

struct file_summary {
  std::string run;
  std::string path;
  std::uint64_t records = 0;
  std::uint64_t corrupt_records = 0;
  bool truncated_tail = false;
};

/// The shortest text that reads back as the same float ("12.5", "1e+06").
std::string float_text(float v) {
  std::array<char, 32> buf{};
  const auto [ptr, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return ec == std::errc() ? std::string(buf.data(), ptr) : std::string("?");
}

/// The run name of `file` under `root`: its directory relative to root, "." at the top.
std::string run_name(const fs::path& file, const fs::path& root, bool root_is_file) {
  if (root_is_file) return ".";
  const fs::path rel = file.parent_path().lexically_normal().lexically_relative(root.lexically_normal());
  const std::string s = rel.generic_string();
  return s.empty() ? std::string(".") : s;
}

}  // namespace

std::string scalars_usage() {
  return "usage: kinetoscope scalars PATH [--json]\n"
         "  Lists the scalar series of the TensorBoard event files (events.out.tfevents.*)\n"
         "  under the logdir PATH (recursively), or of the event file PATH. The run of a file\n"
         "  is its directory relative to PATH. Corrupt records are reported and skipped.\n"
         "options:\n"
         "  --json   one JSON object: {\"runs\": {run: {tag: [[step, wall_time, value], ...]}},\n"
         "           \"files\": [...], \"errors\": [...], \"skipped_other_summaries\": N,\n"
         "           \"corrupt_records\": N}\n";
}

int run_scalars(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string path;
  bool json_out = false;
  for (const std::string& a : args) {
    if (a == "--json") {
      json_out = true;
    } else if (a == "--help" || a == "-h") {
      out << scalars_usage();
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      err << "kinetoscope scalars: unknown option '" << a << "'\n" << scalars_usage();
      return 2;
    } else if (path.empty()) {
      path = a;
    } else {
      err << "kinetoscope scalars: more than one PATH\n" << scalars_usage();
      return 2;
    }
  }
  if (path.empty()) {
    err << "kinetoscope scalars: PATH is missing\n" << scalars_usage();
    return 2;
  }

  std::vector<std::string> errors;
  std::map<std::string, run_series> runs;
  std::vector<file_summary> files;
  std::uint64_t skipped_other = 0;
  std::uint64_t corrupt = 0;
  std::size_t files_read = 0;

  std::error_code ec;
  const fs::path root(path);
  const bool exists = fs::exists(root, ec);
  const bool root_is_file = exists && !fs::is_directory(root, ec);
  std::vector<std::string> event_files;
  if (!exists) {
    errors.push_back(path + ": no such file or directory");
  } else {
    try {
      event_files = find_event_files(path);
    } catch (const std::exception& e) {
      errors.push_back(path + ": " + e.what());
    }
    if (event_files.empty() && errors.empty()) errors.push_back(path + ": no TensorBoard event files");
  }

  for (const std::string& file : event_files) {
    file_summary summary;
    summary.path = file;
    summary.run = run_name(fs::path(file), root, root_is_file);
    try {
      event_file_contents c = read_event_file(file);
      ++files_read;
      summary.records = c.records;
      summary.corrupt_records = c.corrupt_records;
      summary.truncated_tail = c.truncated_tail;
      skipped_other += c.skipped_other_summaries;
      corrupt += c.corrupt_records;
      for (const std::string& e : c.errors) errors.push_back(file + ": " + e);
      run_series& series = runs[summary.run];
      for (auto& [tag, points] : c.scalars) {
        std::vector<scalar_point>& dst = series[tag];
        dst.insert(dst.end(), points.begin(), points.end());
      }
    } catch (const std::exception& e) {
      errors.push_back(file + ": " + e.what());
    }
    files.push_back(std::move(summary));
  }

  if (json_out) {
    nlohmann::ordered_json j;
    j["runs"] = nlohmann::ordered_json::object();
    for (const auto& [run, series] : runs) {
      nlohmann::ordered_json tags = nlohmann::ordered_json::object();
      for (const auto& [tag, points] : series) {
        nlohmann::ordered_json list = nlohmann::ordered_json::array();
        for (const scalar_point& p : points) {
          list.push_back({p.step, p.wall_time, static_cast<double>(p.value)});
        }
        tags[tag] = std::move(list);
      }
      j["runs"][run] = std::move(tags);
    }
    j["files"] = nlohmann::ordered_json::array();
    for (const file_summary& f : files) {
      j["files"].push_back({{"run", f.run},
                            {"path", f.path},
                            {"records", f.records},
                            {"corrupt_records", f.corrupt_records},
                            {"truncated_tail", f.truncated_tail}});
    }
    j["errors"] = errors;
    j["skipped_other_summaries"] = skipped_other;
    j["corrupt_records"] = corrupt;
    out << j.dump(2) << '\n';
  } else {
    for (const std::string& e : errors) err << "kinetoscope scalars: " << e << '\n';
    for (const file_summary& f : files) {
      out << "file " << f.path << "  (run " << f.run << ", " << f.records << " records";
      if (f.corrupt_records) out << ", " << f.corrupt_records << " corrupt";
      if (f.truncated_tail) out << ", truncated tail";
      out << ")\n";
    }
    for (const auto& [run, series] : runs) {
      out << "\nrun " << run << '\n';
      std::size_t width = 3;
      for (const auto& [tag, points] : series) width = std::max(width, tag.size());
      out << "  " << std::string("tag") << std::string(width - 3, ' ') << "  step=value ...\n";
      for (const auto& [tag, points] : series) {
        out << "  " << tag << std::string(width - tag.size(), ' ') << ' ';
        for (const scalar_point& p : points) out << ' ' << p.step << '=' << float_text(p.value);
        out << '\n';
      }
    }
    if (skipped_other) out << "\n" << skipped_other << " non-scalar summary values skipped\n";
    if (corrupt) out << corrupt << " corrupt record(s) skipped\n";
  }
  return files_read > 0 ? 0 : 1;
}

}  // namespace kinetoscope::cli
