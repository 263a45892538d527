// SPDX-License-Identifier: BSD-3-Clause
// A program outside the kinetoscope build: what tests/install/consumers.sh compiles against an
// installed kinetoscope (pkg-config, CMake, Meson subproject). It records a range and two
// operators for three steps and writes one trace. Usage: consumer OUT.pt.trace.json
#include <kinetoscope/kinetoscope.hpp>
#include <kinetoscope/writer/chrome_trace.hpp>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fputs("usage: consumer OUT.pt.trace.json\n", stderr);
    return 2;
  }
  kinetoscope::profile prof({.record_shapes = true, .with_flops = true});
  prof.start();
  std::vector<float> a(64 * 64, 1.0f), c(64 * 64);
  for (int step = 0; step < 3; ++step) {
    KINETOSCOPE_RANGE("consumer_step");
    kinetoscope::record_op mm("aten::mm", {kinetoscope::arg::tensor({64, 64}), kinetoscope::arg::tensor({64, 64})});
    for (int i = 0; i < 64; ++i)
      for (int k = 0; k < 64; ++k)
        for (int j = 0; j < 64; ++j) c[i * 64 + j] += a[i * 64 + k] * a[k * 64 + j];
    mm.end();
    kinetoscope::record_op relu("aten::relu", {kinetoscope::arg::tensor({64, 64})});
    for (float& x : c) x = x > 0 ? x : 0;
    relu.end();
    prof.step();
  }
  prof.stop();
  export_chrome_trace(prof, argv[1]);
  std::printf("consumer: wrote %s (c[0] = %g)\n", argv[1], static_cast<double>(c[0]));
  return 0;
}
