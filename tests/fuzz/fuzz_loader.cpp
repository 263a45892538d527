// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: one trace file's bytes through both parse paths (whole text and 64-byte
// windows, which must agree), the split parse (two readers merged: exactly the windowed model)
// and, when it loads, through every view the server computes at load time plus a few timeline
// windows. Built with -Dfuzzing=true (see scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "analysis/kernel_view.hpp"
#include "analysis/loader.hpp"
#include "analysis/memory_view.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/operator_view.hpp"
#include "analysis/report.hpp"
#include "server/timeline.hpp"

namespace an = kinetoscope::analysis;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  an::load_options whole;
  whole.window_bytes = 0;
  whole.max_text_bytes = std::uint64_t{64} << 20;
  an::load_options windowed = whole;
  windowed.window_bytes = 64;
  an::load_result a = an::load_trace_buffer(bytes, "fuzz.json", whole);
  const an::load_result b = an::load_trace_buffer(bytes, "fuzz.json", windowed);
  // Differential: both paths accept the same texts and read the same events.
  if (a.ok() != b.ok()) std::abort();
  if (!a.ok()) return 0;
  if (a.model->events.size() != b.model->events.size()) std::abort();
  // The split parse (two readers, merged) gives the windowed reader's model: same string ids,
  // same events in the same order, same counts (a split that cannot be done falls back to it).
  an::load_options split = windowed;
  split.split_min_bytes = 1;
  const an::load_result c = an::load_trace_buffer(bytes, "fuzz.json", split);
  if (!c.ok()) std::abort();
  const an::trace_model& w = *b.model;
  const an::trace_model& x = *c.model;
  if (x.strings != w.strings || x.events.size() != w.events.size() || x.ops.size() != w.ops.size() ||
      x.kernels.size() != w.kernels.size() || x.collectives.size() != w.collectives.size() ||
      x.fwdbwd.size() != w.fwdbwd.size() || x.track_metas.size() != w.track_metas.size() ||
      x.diagnostics.warnings != w.diagnostics.warnings ||
      x.diagnostics.events_by_category != w.diagnostics.events_by_category)
    std::abort();
  for (std::size_t i = 0; i < w.events.size(); ++i) {
    const an::event& p = w.events[i];
    const an::event& q = x.events[i];
    if (p.name != q.name || p.extra != q.extra || p.type != q.type || p.pid != q.pid || p.tid != q.tid ||
        !(p.ts == q.ts || (p.ts != p.ts && q.ts != q.ts)))
      std::abort();
  }

  const an::trace_model& m = *a.model;
  const an::op_trees trees = an::build_op_tree(m);
  const an::full_report report = an::compute_report(m, trees);
  const an::memory_index index = an::build_memory_index(m, trees);
  if (report.memory.present)
    (void)an::compute_memory_range(index, m, trees, {report.memory.first_ts, report.memory.first_ts + 1000.0});
  (void)an::operator_pies_by_name(m, trees);
  (void)an::kernel_view_present(m, trees);
  (void)an::tc_kernel_ratio(m);
  (void)an::eligible_op_kernel_ratio(trees);
  const kinetoscope::server::timeline tl(m);
  tl.prepare_flows();
  (void)tl.tracks_json();
  (void)tl.window_json(0, 1e6, 800);
  (void)tl.window_json(-1e300, 1e300, 1);
  (void)tl.event_json(0);
  (void)tl.search_json("a", 10);
  return 0;
}
