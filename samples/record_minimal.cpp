// SPDX-License-Identifier: BSD-3-Clause
// The smallest complete use of kinetoscope: record a range and an operator, write one trace,
// print the table. Usage: record_minimal [out.pt.trace.json]
#include <iostream>
#include <string>
#include <vector>

#include <kinetoscope/kinetoscope.hpp>
#include <kinetoscope/writer/chrome_trace.hpp>

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "minimal.pt.trace.json";
  kinetoscope::profile prof({.record_shapes = true, .with_flops = true});  // no schedule
  prof.start();
  std::vector<float> a(64 * 128, 1.0f), b(128 * 256, 0.5f), c(64 * 256, 0.0f);
  for (int iteration = 0; iteration < 3; ++iteration) {
    KINETOSCOPE_RANGE("forward");  // a user range; static names cost nearly nothing
    {
      kinetoscope::record_op mm("aten::mm", {kinetoscope::arg::tensor({64, 128}),
                                             kinetoscope::arg::tensor({128, 256})});
      for (int i = 0; i < 64; ++i)
        for (int k = 0; k < 128; ++k)
          for (int j = 0; j < 256; ++j) c[i * 256 + j] += a[i * 128 + k] * b[k * 256 + j];
    }
    KINETOSCOPE_RANGE("activation");  // nested inside "forward"
    kinetoscope::record_op relu("aten::relu", {kinetoscope::arg::tensor({64, 256})});
    for (float& v : c) v = v > 0.0f ? v : 0.0f;
  }
  prof.stop();
  export_chrome_trace(prof, path);  // throws std::runtime_error if it cannot be written
  std::cout << prof.key_averages().table({.sort_by = "cpu_time_total", .row_limit = 10})
            << "wrote " << path << '\n';
}
