// SPDX-License-Identifier: BSD-3-Clause
// The job view (analysis/job_view.hpp) on jobs written by bench/dist_job_writer.hpp: the injected
// stragglers are exactly the ones reported, a clean job reports none, collectives are matched
// across every rank with the injected skew, summaries survive JSON, and traces without Seq are
// matched by order. Plus the real nccl_ddp trace's collectives.
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/job_view.hpp"
#include "analysis/loader.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/overview.hpp"
#include "dist_job_writer.hpp"
#include "../real_traces.hpp"

using namespace kinetoscope::analysis;
namespace kb = kinetoscope::bench;
namespace fs = std::filesystem;

namespace {

struct loaded_job {
  std::vector<rank_summary> summaries;
  std::vector<std::string> workers;
  std::vector<std::int64_t> ranks;
  job_result result;
};

/// Writes the job into a temporary directory, loads every rank and analyses it.
loaded_job run_job(const kb::dist_job_options& o) {
  static int counter = 0;
  const fs::path dir =
      fs::temp_directory_path() / ("kinetoscope-job-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  const kb::dist_job_report rep = kb::write_dist_job(dir, o);
  loaded_job job;
  for (std::size_t i = 0; i < rep.files.size(); ++i) {
    load_result r = load_trace(rep.files[i]);
    if (!r.ok()) FAIL(r.error->message());
    CHECK(r.model->diagnostics.warnings.empty());
    const op_trees trees = build_op_tree(*r.model);
    const overview_result ov = compute_overview(*r.model, trees);
    REQUIRE(ov.steps.size() == static_cast<std::size_t>(o.steps));
    job.summaries.push_back(summarize_rank(*r.model, ov));
    job.workers.push_back(rep.workers[i]);
    job.ranks.push_back(r.model->distributed ? r.model->distributed->rank : -1);
  }
  fs::remove_all(dir);
  std::vector<job_input> in;
  // Reverse order: analyze_job orders by rank itself.
  for (std::size_t i = job.summaries.size(); i-- > 0;) in.push_back({job.workers[i], job.ranks[i], &job.summaries[i]});
  job.result = analyze_job(in);
  return job;
}

kb::dist_job_options small_job() {
  kb::dist_job_options o;
  o.ranks = 8;
  o.steps = 12;
  o.layers = 8;
  o.seed = 7;
  return o;
}

using finding = std::tuple<std::int64_t, std::uint32_t, straggler_cause>;

std::set<finding> findings(const job_result& r) {
  std::set<finding> out;
  for (const job_straggler& s : r.stragglers) out.insert({r.ranks[s.rank_index].rank, s.step, s.cause});
  return out;
}

}  // namespace

TEST_CASE("job view: a clean job has no stragglers, and every collective is matched on every rank") {
  // Another noise draw: still nothing reported.
  {
    kb::dist_job_options o = small_job();
    o.seed = 1;
    o.steps = 5;
    CHECK(run_job(o).result.stragglers.empty());
  }
  const loaded_job job = run_job(small_job());
  const job_result& r = job.result;
  REQUIRE(r.ranks.size() == 8);
  for (std::size_t i = 0; i < 8; ++i) CHECK(r.ranks[i].rank == static_cast<std::int64_t>(i));
  CHECK(r.ranks[3].worker == "node0_3");
  CHECK(r.steps.size() == 12);
  CHECK(r.steps.front() == "10");
  CHECK(r.stragglers.empty());
  CHECK(r.matched_by == "seq");
  CHECK(r.unmatched == 0);
  CHECK(r.notes.empty());
  // Per step: an all_gather and a reduce_scatter in each of 2 tensor-parallel groups, 4 all_reduce
  // buckets and the loss all_reduce in the default group.
  CHECK(r.collectives.size() == 12 * (2 * 2 + 5));
  for (const job_collective& c : r.collectives) {
    CAPTURE(c.group);
    CAPTURE(c.seq);
    const std::size_t size = c.group == "0" ? 8 : 4;
    CHECK(c.arrivals.size() == size);
    CHECK(c.group_size == static_cast<std::int64_t>(size));
    CHECK(c.step >= 0);
    CHECK(c.skew >= 0);
  }
  for (std::size_t m = 0; m < job_metric_count; ++m) {
    for (double v : r.heatmaps[m]) CHECK_FALSE(std::isnan(v));
  }
  // Compute, communication and data loading are there in every cell; overlap never exceeds either.
  for (std::size_t rank = 0; rank < 8; ++rank)
    for (std::size_t s = 0; s < r.steps.size(); ++s) {
      CHECK(r.value(job_metric::compute, rank, s) > 0);
      CHECK(r.value(job_metric::communication, rank, s) > 0);
      CHECK(r.value(job_metric::data_loading, rank, s) > 1500);
      CHECK(r.value(job_metric::overlap, rank, s) <= r.value(job_metric::communication, rank, s));
      CHECK(r.value(job_metric::step_time, rank, s) > r.value(job_metric::compute, rank, s));
    }
  // Bytes: the all_reduce buckets carry 2^24 floats.
  CHECK(r.collectives[1].name == "allreduce");
  CHECK(r.collectives[1].bytes == (std::int64_t{1} << 24) * 4);
}

TEST_CASE("job view: the injected stragglers are exactly the ones reported") {
  kb::dist_job_options o = small_job();
  o.slow_compute = {2, {3, 7}, 0.5};
  o.slow_loader = {5, {4}, 20'000};
  o.slow_comm = {7, {9}, 6'000};
  const loaded_job job = run_job(o);
  const std::set<finding> expected = {{2, 3, straggler_cause::compute},
                                      {2, 7, straggler_cause::compute},
                                      {5, 4, straggler_cause::data_loading},
                                      {7, 9, straggler_cause::communication}};
  for (const job_straggler& s : job.result.stragglers) MESSAGE(s.evidence);
  CHECK(findings(job.result) == expected);
  for (const job_straggler& s : job.result.stragglers) {
    CHECK(s.excess_us > 0);
    CHECK_FALSE(s.evidence.empty());
    if (s.cause == straggler_cause::data_loading) CHECK(s.excess_us == doctest::Approx(20'000).epsilon(0.05));
    if (s.cause == straggler_cause::communication) CHECK(s.excess_us == doctest::Approx(6'000).epsilon(0.05));
  }
  // The slow data loader makes the others wait for it in that step.
  CHECK(job.result.value(job_metric::wait, 0, 4) > 15'000);
  CHECK(job.result.value(job_metric::wait, 5, 4) < 1'000);
}

TEST_CASE("job view: two stragglers of different causes in one step are both reported") {
  // Rank 5's slow data loader makes every other rank wait at the step's first collective, which
  // delays their next collectives on the same communicator stream: that is not lateness. Rank 7's
  // own late start in that step is (bench_job found it hidden when the whole earlier wait was
  // discounted).
  kb::dist_job_options o = small_job();
  o.steps = 6;
  o.slow_loader = {5, {4}, 20'000};
  o.slow_comm = {7, {4}, 6'000};
  const loaded_job job = run_job(o);
  for (const job_straggler& s : job.result.stragglers) MESSAGE(s.evidence);
  CHECK(findings(job.result) ==
        std::set<finding>{{5, 4, straggler_cause::data_loading}, {7, 4, straggler_cause::communication}});
}

TEST_CASE("job view: arrival skew equals the injected delay") {
  kb::dist_job_options o = small_job();
  o.jitter = 0;  // every clean rank identical: the skew is the delay alone
  o.slow_comm = {6, {5}, 4'000};
  const loaded_job job = run_job(o);
  const job_result& r = job.result;
  std::size_t in_step = 0;
  for (const job_collective& c : r.collectives) {
    CAPTURE(c.name);
    CAPTURE(c.seq);
    if (c.step != 5) {
      CHECK(c.skew < 0.002);
      continue;
    }
    // Rank 6's default-group collectives start late (its tensor-parallel group "2" is not delayed).
    if (c.group == "0") {
      ++in_step;
      CHECK(std::abs(c.skew - 4'000) < 0.002);  // µs at 5e12 µs: doubles resolve ~0.001
      CHECK(r.ranks[c.last_rank_index].rank == 6);
      for (const job_arrival& a : c.arrivals)
        if (a.rank_index != c.last_rank_index) CHECK(std::abs(a.wait - 4'000) < 0.002);
    } else {
      CHECK(c.skew < 0.002);
    }
  }
  CHECK(in_step == 5);
  CHECK(findings(r) == std::set<finding>{{6, 5, straggler_cause::communication}});
}

TEST_CASE("job view: traces without Seq are matched by order within group and name") {
  kb::dist_job_options o = small_job();
  o.write_seq = false;
  o.jitter = 0;
  o.slow_comm = {1, {2}, 3'000};
  const loaded_job job = run_job(o);
  const job_result& r = job.result;
  CHECK(r.matched_by == "order");
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].find("no Seq") != std::string::npos);
  CHECK(r.collectives.size() == 12 * 9);
  for (const job_collective& c : r.collectives) CHECK(c.arrivals.size() == (c.group == "0" ? 8u : 4u));
  // The same matching as with Seq: the delayed step's collectives have the delay as skew.
  for (const job_collective& c : r.collectives) {
    CAPTURE(c.name);
    CAPTURE(c.group);
    CAPTURE(c.seq);
    CAPTURE(c.step);
    if (c.step == 2 && c.group == "0") CHECK(std::abs(c.skew - 3'000) < 0.002);
    else CHECK(c.skew < 0.002);
  }
  CHECK(findings(r) == std::set<finding>{{1, 2, straggler_cause::communication}});
}

TEST_CASE("job view: 256 ranks analyse quickly") {
  // Summaries built directly (loading 256 traces would dominate): every rank alike except rank 77,
  // slow in compute in step 50. Few steps keep the case short under sanitizers; ARCHITECTURE.md
  // has the figure for 500 steps.
  constexpr std::size_t ranks = 256, steps = 64, per_step = 6;
  std::vector<rank_summary> sums(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    rank_summary& s = sums[r];
    for (std::size_t k = 0; k < steps; ++k) {
      const double t0 = static_cast<double>(k) * 40'000;
      const double noise = static_cast<double>((r * 31 + k * 17) % 13) * 10;
      const double compute = 25'000 + noise + (r == 77 && k == 50 ? 8'000 : 0);
      s.steps.push_back({std::to_string(k), t0, t0 + 40'000, compute, 9'000, 3'000, 2'000 + noise});
      for (std::size_t c = 0; c < per_step; ++c) {
        rank_collective rc;
        rc.group = s.intern("0");
        rc.name = s.intern("allreduce");
        rc.seq = static_cast<std::int64_t>(k * per_step + c);
        rc.group_size = ranks;
        rc.launch = t0 + 5'000 + static_cast<double>(c) * 5'000;
        rc.start = rc.launch + 100 + noise;
        rc.end = rc.launch + 2'000;
        rc.on_device = true;
        rc.step = static_cast<std::int32_t>(k);
        s.collectives.push_back(rc);
      }
    }
  }
  std::vector<job_input> in;
  for (std::size_t r = 0; r < ranks; ++r) in.push_back({"w_" + std::to_string(r), static_cast<std::int64_t>(r), &sums[r]});
  const auto t0 = std::chrono::steady_clock::now();
  const job_result res = analyze_job(in);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("analyze_job, 256 ranks x 64 steps x 6 collectives: " << seconds << " s");
  CHECK(res.collectives.size() == steps * per_step);
  CHECK(findings(res) == std::set<finding>{{77, 50, straggler_cause::compute}});
  CHECK(seconds < 3);  // ~0.03 s optimised; generous for sanitizers
}

TEST_CASE("job view: a (group, Seq) seen twice on one rank is one arrival (coalesced collectives)") {
  const auto summary = [](double start, bool twice) {
    rank_summary s;
    s.steps.push_back({"1", 0, 1000, 500, 100, 0, 10});
    rank_collective c;
    c.group = s.intern("0");
    c.name = s.intern("allreduce");
    c.seq = 7;
    c.group_size = 3;
    c.launch = 100;
    c.start = start;
    c.end = 400;
    c.on_device = true;
    c.step = 0;
    s.collectives.push_back(c);
    if (twice) {
      c.launch = 150;
      c.start = start + 50;
      c.end = 420;
      s.collectives.push_back(c);
    }
    return s;
  };
  const rank_summary a = summary(200, true), b = summary(250, false), c = summary(300, false);
  const job_result r = analyze_job({{"a", 0, &a}, {"b", 1, &b}, {"c", 2, &c}});
  REQUIRE(r.collectives.size() == 1);
  const job_collective& j = r.collectives[0];
  REQUIRE(j.arrivals.size() == 3);
  CHECK(j.arrivals[0].arrival == 200);
  CHECK(j.arrivals[0].end == 420);
  CHECK(j.arrivals[0].wait == 100);
  CHECK(j.skew == 100);
  CHECK(j.last_rank_index == 2);
  CHECK(r.unmatched == 0);
  CHECK(r.value(job_metric::wait, 0, 0) == 100);  // counted once
  CHECK(r.value(job_metric::wait, 1, 0) == 50);
}

TEST_CASE("job view: the collectives of a real trace (nccl_ddp, no Seq)") {
  const char* dir = kinetoscope::test::real_traces();
  REQUIRE(dir != nullptr);
  load_result r = load_trace(std::string(dir) + "/traces/nccl_ddp/nccl_data.pt.trace.json.gz");
  REQUIRE(r.ok());
  const trace_model& m = *r.model;
  // record_param_comms ops and the NCCL kernels both carry the metadata.
  std::size_t ops = 0, kernels = 0;
  for (const event& e : m.events) {
    const std::string_view name = m.str(e.name);
    if (e.type == event_type::op && name == "record_param_comms") {
      REQUIRE(e.extra < m.ops.size());
      REQUIRE(m.ops[e.extra].collective < m.collectives.size());
      ++ops;
    }
    if (e.type == event_type::kernel && name.starts_with("ncclKernel_")) {
      const std::uint32_t c = m.kernels[e.extra].collective;
      REQUIRE(c < m.collectives.size());
      const collective_args& a = m.collectives[c];
      CHECK(m.str(a.group_name) == "0");
      CHECK(m.str(a.group_desc) == "default_pg");
      CHECK(m.str(a.group_ranks) == "[0, 1]");
      CHECK(a.group_size == 2);
      CHECK(a.seq == -1);
      CHECK(a.in_nelems > 0);
      CHECK((m.str(a.dtype) == "Float" || m.str(a.dtype) == "Long"));
      ++kernels;
    }
  }
  CHECK(ops > 0);
  CHECK(kernels > 0);
  CHECK(m.collectives.size() == ops + kernels);
  const op_trees trees = build_op_tree(m);
  const rank_summary s = summarize_rank(m, compute_overview(m, trees));
  std::size_t on_device = 0;
  for (const rank_collective& c : s.collectives) {
    CHECK(c.seq == -1);
    CHECK(c.start >= c.launch);
    on_device += c.on_device ? 1 : 0;
  }
  CHECK(on_device == kernels);
  const job_result job = analyze_job({{"worker0", 0, &s}});
  CHECK(job.matched_by == "order");
  CHECK(job.collectives.size() == s.collectives.size());
  CHECK(job.unmatched > 0);  // one rank of groups of two
}
