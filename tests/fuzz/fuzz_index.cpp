// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: a persisted index file (server/trace_index.hpp) as the server reads it:
// the header, the section table and the summary, the summary's records (summary_from_bytes, or
// span_bodies_from_bytes for a span's cache file), the model's columns (read_model) and the
// timeline's (read_timeline). The key the server would ask for is taken from the input's own
// header, and every section's CRC-32 is set right before the file is written, so mutations
// get past the key and checksum checks to the summary parser and the record checks; a model
// that read_model() accepts must be safe to analyse, so it goes through the op tree, the
// report and the timeline, and timeline columns that the timeline's constructor accepts are
// queried like a built one. (A wrong checksum is rejected before anything reads the section:
// that path is exercised by tests/server/test_index.cpp.)
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "zlib.h"

#include "analysis/op_tree.hpp"
#include "analysis/report.hpp"
#include "server/summary.hpp"
#include "server/timeline.hpp"
#include "server/trace_index.hpp"

namespace ks = kinetoscope::server;
namespace an = kinetoscope::analysis;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/kinetoscope_fuzz_index_" + std::to_string(::getpid());
  std::vector<std::uint8_t> bytes(data, data + size);
  // The header's source size (16), mtime (24), section count (40), path length (44) and path
  // (48): the key. Then the table: per section kind, crc, offset, size (24 bytes).
  ks::index_key key;
  if (size >= 48) {
    std::uint32_t n = 0, sections = 0;
    std::memcpy(&key.size, data + 16, 8);
    std::memcpy(&key.mtime_ns, data + 24, 8);
    std::memcpy(&sections, data + 40, 4);
    std::memcpy(&n, data + 44, 4);
    key.path.assign(reinterpret_cast<const char*>(data) + 48, std::min<std::size_t>(n, size - 48));
    std::size_t at = 48 + static_cast<std::size_t>(n);
    for (std::uint32_t i = 0; i < sections && at + 24 <= size; ++i, at += 24) {
      std::uint64_t off = 0, len = 0;
      std::memcpy(&off, data + at + 8, 8);
      std::memcpy(&len, data + at + 16, 8);
      if (off > size || len > size - off) continue;
      const auto crc = static_cast<std::uint32_t>(
          crc32_z(crc32_z(0L, Z_NULL, 0), data + off, static_cast<z_size_t>(len)));
      std::memcpy(bytes.data() + at + 4, &crc, 4);
    }
  }
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return 0;
    if (size > 0) std::fwrite(bytes.data(), 1, size, f);
    std::fclose(f);
  }
  ks::trace_index idx;
  if (idx.open(path, key) != ks::index_status::ok) return 0;
  try {
    (void)ks::summary_from_bytes(idx.summary_bytes());
  } catch (const std::exception&) {
  }
  try {
    (void)ks::span_bodies_from_bytes(idx.summary_bytes());  // a span's cache file (store::span_panels)
  } catch (const std::exception&) {
  }
  an::trace_model m;
  if (!idx.read_model(m)) return 0;
  const an::op_trees trees = an::build_op_tree(m);
  (void)an::compute_report(m, trees);
  ks::timeline t(m);
  (void)t.window_json(-1e300, 1e300, 500);
  // The persisted timeline: columns the constructor accepts must answer like a built one.
  ks::timeline_columns cols;
  if (!idx.read_timeline(cols)) return 0;
  try {
    ks::timeline back(m, std::move(cols));
    (void)back.window_json(-1e300, 1e300, 500);
    (void)back.window_json(0, 1e3, 7, {0, 1}, 10);
    (void)back.counters_json(-1e300, 1e300, 100);
    (void)back.summary_json(-1e300, 1e300);
    (void)back.search_json("a", 10);
    for (std::uint32_t id = 0; id < m.events.size() && id < 64; ++id) (void)back.event_json(id, true);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
