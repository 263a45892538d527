// SPDX-License-Identifier: BSD-3-Clause
/// @file table.cpp
/// averages::table(): the text table of PyTorch's key_averages().table()
/// (torch/autograd/profiler_util.py _build_table; docs/profiler-rules.md#table).
///
/// Deliberate difference from PyTorch: when both "Source Location" and the FLOPs column are
/// shown, PyTorch appends the headers as (..., Source Location, Total FLOPs) but the row values
/// as (..., flops, source), so each value sits under the other's header and stack continuation
/// lines land in the FLOPs column. Here headers and values use the same order (Source Location,
/// then FLOPs) and continuation lines fill the Source Location column. Tables without a stack
/// column (every key_averages() without group_by_stack_n) are identical to PyTorch's.
///
/// Widths and text lengths count Unicode code points of UTF-8 names, like Python's len().

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kinetoscope/key_averages.hpp"
#include "shapes_text.hpp"

namespace kinetoscope {
namespace {

constexpr int default_column_width = 12;
constexpr int spacing = 2;

bool is_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

/// Python's len() of a UTF-8 string: the number of code points.
std::int64_t text_length(std::string_view s) {
  std::int64_t n = 0;
  for (char c : s)
    if (!is_continuation_byte(c)) ++n;
  return n;
}

/// Byte offset of code point `k` (0 <= k <= length).
std::size_t byte_offset(std::string_view s, std::int64_t k) {
  std::size_t i = 0;
  for (std::int64_t seen = 0; i < s.size(); ++i) {
    if (!is_continuation_byte(s[i])) {
      if (seen == k) return i;
      ++seen;
    }
  }
  return s.size();
}

/// Python's s[:k] (negative k counts from the end).
std::string py_prefix(std::string_view s, std::int64_t k) {
  const std::int64_t len = text_length(s);
  if (k < 0) k = std::max<std::int64_t>(0, len + k);
  if (k >= len) return std::string(s);
  return std::string(s.substr(0, byte_offset(s, k)));
}

/// Python's s[k:] for 0 <= k.
std::string py_suffix_from(std::string_view s, std::int64_t k) {
  return std::string(s.substr(std::min(byte_offset(s, k), s.size())));
}

std::string printf_double(const char* format, double v) {
  char buf[64];
  const int n = std::snprintf(buf, sizeof buf, format, v);
  if (n < 0) return {};
  if (static_cast<std::size_t>(n) < sizeof buf) return std::string(buf, static_cast<std::size_t>(n));
  std::string big(static_cast<std::size_t>(n) + 1, '\0');
  std::snprintf(big.data(), big.size(), format, v);
  big.resize(static_cast<std::size_t>(n));
  return big;
}

/// _format_time + override_time_unit: µs in, "171.000us" / "52.260ms" / "1.234s" out.
std::string format_time(double time_us, std::string_view unit) {
  constexpr double us_in_second = 1000.0 * 1000.0;
  constexpr double us_in_ms = 1000.0;
  if (unit == "s") return printf_double("%.3fs", time_us / us_in_second);
  if (unit == "ms") return printf_double("%.3fms", time_us / us_in_ms);
  if (unit == "us") return printf_double("%.3fus", time_us);
  if (time_us >= us_in_second) return printf_double("%.3fs", time_us / us_in_second);
  if (time_us >= us_in_ms) return printf_double("%.3fms", time_us / us_in_ms);
  return printf_double("%.3fus", time_us);
}

double to_us(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }

/// _format_time_share: "12.34%", or "NaN" when the total is 0.
std::string format_share(double time_us, double total_us) {
  if (total_us == 0) return "NaN";
  return printf_double("%.2f%%", time_us * 100.0 / total_us);
}

/// _format_memory: powers of 1024, thresholds on the absolute value, sign kept.
std::string format_memory(std::int64_t nbytes, bool modern) {
  constexpr std::int64_t kb = 1024;
  constexpr std::int64_t mb = 1024 * kb;
  constexpr std::int64_t gb = 1024 * mb;
  const std::uint64_t magnitude =
      nbytes < 0 ? 0 - static_cast<std::uint64_t>(nbytes) : static_cast<std::uint64_t>(nbytes);
  const double v = static_cast<double>(nbytes);
  if (magnitude >= static_cast<std::uint64_t>(gb))
    return printf_double(modern ? "%.2f GB" : "%.2f Gb", v / static_cast<double>(gb));
  if (magnitude >= static_cast<std::uint64_t>(mb))
    return printf_double(modern ? "%.2f MB" : "%.2f Mb", v / static_cast<double>(mb));
  if (magnitude >= static_cast<std::uint64_t>(kb))
    return printf_double(modern ? "%.2f KB" : "%.2f Kb", v / static_cast<double>(kb));
  return std::to_string(nbytes) + (modern ? " B" : " b");
}

using detail::shapes_text;

/// trim_path: keep the last `width` characters, the first three of them replaced by "...".
std::string trim_path(std::string_view path, std::int64_t width) {
  const std::int64_t len = text_length(path);
  if (len <= width) return std::string(path);
  std::string kept = py_suffix_from(path, len - width);
  if (text_length(kept) > 3) return "..." + py_suffix_from(kept, 3);
  return kept;
}

/// The attributes sort_by may name (after "cuda"/"xpu"/"privateuse1" → "device").
struct sort_key {
  std::string_view name;
  long double (*get)(const event_avg&);
};

constexpr sort_key sort_keys[] = {
    {"cpu_time", [](const event_avg& e) -> long double { return e.count ? to_us(e.cpu_time_total_ns) / double(e.count) : 0.0; }},
    {"device_time", [](const event_avg& e) -> long double { return e.count ? to_us(e.device_time_total_ns) / double(e.count) : 0.0; }},
    {"cpu_time_total", [](const event_avg& e) -> long double { return e.cpu_time_total_ns; }},
    {"device_time_total", [](const event_avg& e) -> long double { return e.device_time_total_ns; }},
    {"self_cpu_time_total", [](const event_avg& e) -> long double { return e.self_cpu_time_total_ns; }},
    {"self_device_time_total", [](const event_avg& e) -> long double { return e.self_device_time_total_ns; }},
    {"cpu_memory_usage", [](const event_avg& e) -> long double { return e.cpu_memory_usage; }},
    {"device_memory_usage", [](const event_avg& e) -> long double { return e.device_memory_usage; }},
    {"self_cpu_memory_usage", [](const event_avg& e) -> long double { return e.self_cpu_memory_usage; }},
    {"self_device_memory_usage", [](const event_avg& e) -> long double { return e.self_device_memory_usage; }},
    {"count", [](const event_avg& e) -> long double { return e.count; }},
    {"flops", [](const event_avg& e) -> long double { return e.flops; }},
};

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
}

const sort_key& find_sort_key(const std::string& requested) {
  std::string name = requested;
  replace_all(name, "cuda", "device");
  replace_all(name, "xpu", "device");
  replace_all(name, "privateuse1", "device");
  for (const sort_key& k : sort_keys)
    if (k.name == name) return k;
  throw std::invalid_argument(
      "table(): unknown sort_by key '" + requested +
      "'; valid keys: cpu_time, cuda_time, device_time, xpu_time, cpu_time_total, cuda_time_total, "
      "device_time_total, xpu_time_total, self_cpu_time_total, self_cuda_time_total, "
      "self_device_time_total, self_xpu_time_total, cpu_memory_usage, cuda_memory_usage, "
      "device_memory_usage, self_cpu_memory_usage, self_cuda_memory_usage, "
      "self_device_memory_usage, count, flops");
}

struct column {
  std::string header;
  std::int64_t width;
  bool left = false;
};

/// One table line: every cell aligned in its width and followed by two spaces.
void append_line(std::string& out, const std::vector<column>& columns,
                 const std::vector<std::string>& cells) {
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const std::string& text = cells[i];
    const std::int64_t pad = std::max<std::int64_t>(0, columns[i].width - text_length(text));
    if (columns[i].left) {
      out += text;
      out.append(static_cast<std::size_t>(pad), ' ');
    } else {
      out.append(static_cast<std::size_t>(pad), ' ');
      out += text;
    }
    out.append(spacing, ' ');
  }
  out += '\n';
}

}  // namespace

std::string averages::table(const table_options& opts) const {
  if (rows_.empty()) return "";

  std::vector<const event_avg*> rows(rows_.size());
  for (std::size_t i = 0; i < rows_.size(); ++i) rows[i] = &rows_[i];
  if (!opts.sort_by.empty()) {
    const sort_key& key = find_sort_key(opts.sort_by);
    std::stable_sort(rows.begin(), rows.end(), [&](const event_avg* a, const event_avg* b) {
      return key.get(*a) > key.get(*b);
    });
  }

  bool has_device_time = false, has_device_mem = false, has_input_shapes = false, has_stack = false;
  std::int64_t longest_name = 0, longest_shapes = 0, longest_entry = 0;
  std::int64_t sum_self_cpu_ns = 0, sum_self_device_ns = 0;
  std::int64_t min_flops = 0;
  for (const event_avg& e : rows_) {
    has_device_time |= e.self_device_time_total_ns > 0;
    has_device_mem |= e.self_device_memory_usage > 0;
    has_input_shapes |= !e.input_shapes.empty();
    longest_name = std::max(longest_name, text_length(e.key));
    longest_shapes = std::max(longest_shapes, text_length(shapes_text(e.input_shapes)));
    if (!e.stack.empty()) {
      has_stack = true;
      for (const std::string& entry : e.stack) longest_entry = std::max(longest_entry, text_length(entry));
    }
    sum_self_cpu_ns += e.self_cpu_time_total_ns;
    if (e.on_device && !e.is_user_annotation) sum_self_device_ns += e.self_device_time_total_ns;
    if (e.flops > 0 && (min_flops == 0 || e.flops < min_flops)) min_flops = e.flops;
  }
  const bool show_flops = with_flops_ && min_flops > 0;
  const bool show_device_mem = profile_memory_ && has_device_mem;

  const std::int64_t name_width = std::min<std::int64_t>(longest_name + 4, opts.max_name_column_width);
  const std::int64_t shapes_width = std::min<std::int64_t>(longest_shapes + 4, opts.max_shapes_column_width);
  const std::int64_t src_width = std::min<std::int64_t>(longest_entry + 4, opts.max_src_column_width);

  // FLOPs unit from the smallest positive value: FLOPs, KFLOPs, ... PFLOPs.
  static constexpr const char* flop_units[] = {"FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs"};
  double flops_scale = 1.0;
  int flops_unit = 0;
  if (show_flops) {
    const double log_flops = std::max(0.0, std::min(std::log10(static_cast<double>(min_flops)) / 3.0, 5.0));
    flops_unit = static_cast<int>(log_flops);
    flops_scale = std::pow(10.0, std::floor(log_flops) * -3.0);
  }

  std::vector<column> columns;
  auto add = [&](std::string header, std::int64_t width = default_column_width, bool left = false) {
    columns.push_back({std::move(header), width, left});
  };
  add("Name", name_width);
  add("Self CPU %");
  add("Self CPU");
  add("CPU total %");
  add("CPU total");
  add("CPU time avg");
  if (has_device_time) {
    add("Self CUDA");
    add("Self CUDA %");
    add("CUDA total");
    add("CUDA time avg");
  }
  if (profile_memory_) {
    add("CPU Mem");
    add("Self CPU Mem");
    if (show_device_mem) {
      add("CUDA Mem");
      add("Self CUDA Mem");
    }
  }
  add("# of Calls");
  if (has_input_shapes) add("Input Shapes", shapes_width);
  std::size_t src_column = 0;
  if (has_stack) {
    src_column = columns.size();
    add("Source Location", src_width, true);
  }
  if (show_flops) add(std::string("Total ") + flop_units[flops_unit]);

  std::string separator;
  std::int64_t line_length = -spacing;
  for (const column& c : columns) {
    separator.append(static_cast<std::size_t>(std::max<std::int64_t>(0, c.width)), '-');
    separator.append(spacing, ' ');
    line_length += c.width + spacing;
  }
  separator += '\n';

  std::string out;
  const std::string rule(static_cast<std::size_t>(std::max<std::int64_t>(0, line_length)), '=');
  if (!opts.header.empty()) {
    out += rule + '\n';
    out += opts.header + '\n';
  }
  if (opts.top_level_events_only) {
    out += rule + '\n';
    out += "This report only display top-level ops statistics\n";
  }
  out += separator;
  std::vector<std::string> cells;
  for (const column& c : columns) cells.push_back(c.header);
  append_line(out, columns, cells);
  out += separator;

  const double total_cpu_us = to_us(sum_self_cpu_ns);
  const double total_device_us = to_us(sum_self_device_ns);
  const std::string_view unit = opts.time_unit;
  int printed = 0;
  for (const event_avg* row : rows) {
    if (printed == opts.row_limit) break;
    const event_avg& e = *row;
    if (opts.top_level_events_only && e.has_cpu_parent) continue;
    ++printed;

    std::string name = e.key;
    if (text_length(name) >= opts.max_name_column_width - 3)
      name = py_prefix(name, opts.max_name_column_width - 3) + "...";
    const double count = static_cast<double>(e.count);
    cells.clear();
    cells.push_back(std::move(name));
    cells.push_back(format_share(to_us(e.self_cpu_time_total_ns), total_cpu_us));
    cells.push_back(format_time(to_us(e.self_cpu_time_total_ns), unit));
    cells.push_back(e.is_async ? "0" : format_share(to_us(e.cpu_time_total_ns), total_cpu_us));
    cells.push_back(format_time(to_us(e.cpu_time_total_ns), unit));
    cells.push_back(format_time(e.count ? to_us(e.cpu_time_total_ns) / count : 0.0, unit));
    if (has_device_time) {
      cells.push_back(format_time(to_us(e.self_device_time_total_ns), unit));
      cells.push_back(format_share(to_us(e.self_device_time_total_ns), total_device_us));
      cells.push_back(format_time(to_us(e.device_time_total_ns), unit));
      cells.push_back(format_time(e.count ? to_us(e.device_time_total_ns) / count : 0.0, unit));
    }
    if (profile_memory_) {
      cells.push_back(format_memory(e.cpu_memory_usage, opts.modern_memory_units));
      cells.push_back(format_memory(e.self_cpu_memory_usage, opts.modern_memory_units));
      if (show_device_mem) {
        cells.push_back(format_memory(e.device_memory_usage, opts.modern_memory_units));
        cells.push_back(format_memory(e.self_device_memory_usage, opts.modern_memory_units));
      }
    }
    cells.push_back(std::to_string(e.count));
    if (has_input_shapes) cells.push_back(py_prefix(shapes_text(e.input_shapes), shapes_width));
    if (has_stack) cells.push_back(e.stack.empty() ? std::string() : trim_path(e.stack.front(), src_width));
    if (show_flops)
      cells.push_back(e.flops <= 0 ? std::string("--")
                                   : printf_double("%8.3f", static_cast<double>(e.flops) * flops_scale));
    append_line(out, columns, cells);

    if (has_stack) {
      std::vector<std::string> blank(columns.size());
      for (std::size_t i = 1; i < e.stack.size(); ++i) {
        blank[src_column] = trim_path(e.stack[i], src_width);
        append_line(out, columns, blank);
      }
      blank[src_column].clear();
      append_line(out, columns, blank);
    }
  }

  out += separator;
  out += "Self CPU time total: " + format_time(total_cpu_us, unit) + '\n';
  if (has_device_time) out += "Self CUDA time total: " + format_time(total_device_us, unit) + '\n';
  return out;
}

}  // namespace kinetoscope
