// SPDX-License-Identifier: BSD-3-Clause
// export_stacks (docs/profiler-rules.md#export-stacks): the folded stacks of the raw events.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

#include "kinetoscope/key_averages.hpp"
#include "kinetoscope/profiler.hpp"

namespace kinetoscope {
namespace {

/// PyTorch's metric names; the device ones all read the self device time.
bool uses_device_time(std::string_view metric) {
  if (metric == "self_cpu_time_total") return false;
  if (metric == "self_cuda_time_total" || metric == "self_xpu_time_total" ||
      metric == "self_privateuse1_time_total")
    return true;
  throw std::invalid_argument("export_stacks: unknown metric \"" + std::string(metric) +
                              "\"; valid metrics: self_cpu_time_total, self_cuda_time_total, "
                              "self_xpu_time_total, self_privateuse1_time_total");
}

/// A frame as one folded-format field: the separators of the format become '_'.
void append_frame(std::string& out, std::string_view frame) {
  for (const char c : frame) out += (c == ' ' || c == ';' || c == '\t' || c == '\n') ? '_' : c;
}

}  // namespace

std::string folded_stacks(const event_list& events, std::string_view metric) {
  const bool device = uses_device_time(metric);
  std::string out;
  for (const function_event& e : events) {
    if (e.stack.empty()) continue;
    // int(µs) as PyTorch computes it: truncation toward zero of the float µs value.
    const std::int64_t value = (device ? e.self_device_time_total_ns : e.self_cpu_time_total_ns) / 1000;
    if (value <= 0) continue;
    for (std::size_t i = e.stack.size(); i-- > 0;) {
      append_frame(out, e.stack[i]);
      out += i == 0 ? ' ' : ';';
    }
    out += std::to_string(value);
    out += '\n';
  }
  return out;
}

void profile::export_stacks(const std::string& path, std::string_view metric) const {
  if (!options().with_stack)
    throw std::logic_error("export_stacks requires a profile made with with_stack = true");
  const std::string text = folded_stacks(events(), metric);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (file) file.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (file) file.close();
  if (!file) throw std::runtime_error("export_stacks: cannot write " + path + ": " + std::strerror(errno));
}

}  // namespace kinetoscope
