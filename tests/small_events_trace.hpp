// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// A trace of many small events for memory-per-event checks (test_op_tree, test_api): 40 steps x
// 250 groups of four nested cpu_ops with short names and only an External id, about 140 bytes of
// JSON per event: the shape of bench_server's small-events trace. 40 x 1001 events.
#include <string>

namespace kinetoscope::test {

inline std::string small_events_trace() {
  std::string text = "{\"schemaVersion\": 1, \"traceEvents\": [\n";
  const char* names[4] = {"aten::linear", "aten::t", "aten::addmm", "aten::mm"};
  long ext = 1;
  double t = 1000;
  const auto ev = [&](const std::string& cat, const std::string& name, double ts, double dur) {
    text += "  {\"ph\": \"X\", \"cat\": \"" + cat + "\", \"name\": \"" + name + "\", \"pid\": 7, \"tid\": 7, \"ts\": " +
            std::to_string(ts) + ", \"dur\": " + std::to_string(dur) + ", \"args\": {\"External id\": " +
            std::to_string(ext++) + "}},\n";
  };
  for (int step = 1; step <= 40; ++step) {
    ev("user_annotation", "ProfilerStep#" + std::to_string(step), t, 2500);
    for (int g = 0; g < 250; ++g) {
      const double s = t + g * 10 + 0.5;
      ev("cpu_op", names[0], s, 9);
      ev("cpu_op", names[1], s + 0.5, 2.5);
      ev("cpu_op", names[2], s + 3.5, 5);
      ev("cpu_op", names[3], s + 4, 3.5);
    }
    t += 2505;
  }
  text.resize(text.size() - 2);  // the last ",\n"
  text += "\n]}\n";
  return text;
}

}  // namespace kinetoscope::test
