// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: a TensorBoard event file read whole and read incrementally in small steps
// (as the server's store does); both must find the same scalars.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kinetoscope/tensorboard/tfevents.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/kinetoscope_fuzz_tfevents_" + std::to_string(::getpid());
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return 0;
    if (size > 0) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  try {
    const kinetoscope::event_file_contents whole = kinetoscope::read_event_file(path);
    kinetoscope::event_file_cursor cursor;
    kinetoscope::event_file_contents steps;
    for (int i = 0; i < 64 && !cursor.stopped; ++i) {
      if (kinetoscope::read_event_file_from(path, cursor, 1 + size / 7, steps) == 0) break;
    }
    if (!cursor.stopped && whole.scalars.size() != steps.scalars.size()) std::abort();
    if (!cursor.stopped) {
      for (const auto& [tag, points] : whole.scalars) {
        const auto it = steps.scalars.find(tag);
        if (it == steps.scalars.end() || it->second.size() != points.size()) std::abort();
      }
    }
  } catch (const std::exception&) {
  }
  return 0;
}
