// SPDX-License-Identifier: BSD-3-Clause
/// @file gen_dist_job.cpp
/// Writes a synthetic distributed job (bench/dist_job_writer.hpp) into a logdir run folder: one
/// PyTorch 2.x trace per rank with NCCL collectives in process groups, a shared clock, and
/// injected stragglers, for the job view's benchmarks and manual checks at scale.
///
/// Usage: gen_dist_job OUTDIR --ranks N --mb-per-rank M [--seed S] [--steps K] [--no-seq]
/// Prints what it injected (rank, steps, cause) so the viewer's findings can be checked.

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "dist_job_writer.hpp"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: gen_dist_job OUTDIR --ranks N --mb-per-rank M [--seed S] [--steps K] [--no-seq]\n"
               "  writes one <worker>.<ts>.pt.trace.json per rank into OUTDIR (a run of a logdir)\n");
  return 2;
}

std::string steps_text(const kinetoscope::bench::dist_straggler& s) {
  std::string t;
  for (int step : s.steps) t += (t.empty() ? "" : ", ") + std::to_string(step);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  namespace kb = kinetoscope::bench;
  if (argc < 2) return usage();
  kb::dist_job_options o;
  o.steps = 0;
  o.mb_per_rank = 50;
  const std::string dir = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--ranks" && has_value) o.ranks = std::atoi(argv[++i]);
    else if (a == "--mb-per-rank" && has_value) o.mb_per_rank = std::atof(argv[++i]);
    else if (a == "--seed" && has_value) o.seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--steps" && has_value) o.steps = std::atoi(argv[++i]);
    else if (a == "--no-seq") o.write_seq = false;
    else return usage();
  }
  if (o.ranks < 1 || (o.steps <= 0 && o.mb_per_rank <= 0)) return usage();
  // Stragglers on different ranks (so their causes stay apart) and periodic steps (the step
  // count is only known once write_dist_job has sized the job; later steps are simply unused).
  try {
    const int r = o.ranks;
    o.slow_compute.rank = r >= 3 ? r / 3 : -1;
    o.slow_compute.extra_us = 0.4;
    o.slow_loader.rank = r >= 3 ? (2 * r) / 3 : -1;
    o.slow_loader.extra_us = 15'000;
    o.slow_comm.rank = r >= 4 ? r - 1 : -1;
    o.slow_comm.extra_us = 5'000;
    for (int s = 2; s < 100000; s += 7) o.slow_compute.steps.insert(s);
    for (int s = 4; s < 100000; s += 9) o.slow_loader.steps.insert(s);
    for (int s = 5; s < 100000; s += 11) o.slow_comm.steps.insert(s);
    const kb::dist_job_report rep = kb::write_dist_job(dir, o);
    std::printf("wrote %zu ranks x %d steps (%.1f MB per rank, %llu collectives per rank) into %s\n", rep.files.size(),
                rep.steps, static_cast<double>(rep.bytes) / 1e6 / static_cast<double>(rep.files.size()),
                static_cast<unsigned long long>(rep.collectives_per_rank), dir.c_str());
    const auto print = [&](const char* cause, const kb::dist_straggler& s, const char* how) {
      if (s.rank < 0) return;
      kb::dist_straggler used = s;
      std::erase_if(used.steps, [&](int step) { return step >= rep.steps; });
      if (used.steps.empty()) return;
      std::printf("injected: rank %d (%s) %s %s in steps %s\n", s.rank, rep.workers[static_cast<std::size_t>(s.rank)].c_str(),
                  cause, how, steps_text(used).c_str());
    };
    char buf[64];
    std::snprintf(buf, sizeof buf, "(kernels %.0f %% slower)", o.slow_compute.extra_us * 100);
    print("compute", o.slow_compute, buf);
    std::snprintf(buf, sizeof buf, "(+%.0f us per data-loader call)", o.slow_loader.extra_us);
    print("data loading", o.slow_loader, buf);
    std::snprintf(buf, sizeof buf, "(default-group collective kernels start %.0f us late)", o.slow_comm.extra_us);
    print("communication", o.slow_comm, buf);
    std::printf("steps are counted from 0 (ProfilerStep#%d)\n", o.first_step);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gen_dist_job: %s\n", e.what());
    return 1;
  }
  return 0;
}
