// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file dist_job_writer.hpp
/// Writes a synthetic N-rank data-parallel job as a logdir run: one `.pt.trace.json` per rank,
/// named as torch.profiler.tensorboard_trace_handler names them (`<worker>.<ts_ns>.pt.trace.json`)
/// in the layout of PyTorch 2.x (Kineto: distributedInfo, deviceProperties, baseTimeNanoseconds,
/// cpu_op / user_annotation / cuda_runtime / kernel events with External id and correlation, ac2g
/// flows). Used by bench/gen_dist_job.cpp and by the tests of the job view.
///
/// The job, per ProfilerStep#N of every rank: a data-loader op, a forward pass (one GEMM kernel
/// per layer, and half way an all_gather in the rank's tensor-parallel group that the compute
/// stream waits for), a backward pass (one kernel per layer, an all_reduce of the default group
/// per gradient bucket on the communication stream), a reduce_scatter in the tensor-parallel
/// group, an optimizer step that waits for the collectives, and an all_reduce of the loss that the
/// host waits for (the usual `loss.item()` of a logged global loss): every rank ends the step
/// together, so a straggler's effect stays within its step. Collectives are written as c10d does: a `record_param_comms`
/// cpu_op carrying the collective metadata (name, dtype, message sizes, process group name,
/// description, ranks, size, per-group `Seq`), an `nccl:*` annotation inside it, the launch, and
/// the NCCL kernel carrying the same metadata.
///
/// Ranks are simulated in lock step on one clock (absolute µs, as NTP-aligned multi-node traces
/// are): a collective's kernel starts on each rank when that rank arrives (its host launched it,
/// its stream is free, its inputs are ready) and ends on every rank of the group at the same time,
/// the last arrival plus the transfer time. A late rank therefore shows as waiting on the others.
///
/// Stragglers are injected on request (compute slowdown, slow data loader, late collective
/// kernels) and reported back in dist_job_report. With jitter = 0 every clean rank behaves the
/// same, so a collective's arrival skew is exactly the injected delay.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace kinetoscope::bench {

/// One kind of injected slowness on one rank in some steps.
struct dist_straggler {
  int rank = -1;               ///< -1 = none
  std::set<int> steps;         ///< step indexes (0 = the first ProfilerStep written)
  /// data loading: µs added to the data-loader op; compute: kernel time factor - 1; communication:
  /// µs each of its default-group collective kernels starts late (a slow inter-node link; the
  /// tensor-parallel groups stay inside a node)
  double extra_us = 0;
};

struct dist_job_options {
  int ranks = 8;
  int steps = 12;              ///< ProfilerSteps per rank; 0 = as many as `mb_per_rank` needs
  double mb_per_rank = 0;      ///< target trace size per rank when steps = 0 (MB of JSON)
  int layers = 12;             ///< forward and backward kernels per step
  int buckets = 4;             ///< all_reduce gradient buckets per step
  int tp_size = 4;             ///< tensor-parallel group size (ranks are cut in consecutive blocks)
  std::uint64_t seed = 1;
  double jitter = 0.02;        ///< relative noise on durations (0 = every clean rank identical)
  bool write_seq = true;       ///< write "Seq" (newer PyTorch); false = as older builds, without it
  int first_step = 10;         ///< number of the first ProfilerStep#
  dist_straggler slow_compute;  ///< extra_us = relative slowdown of its kernels (0.5 = 50 % slower)
  dist_straggler slow_loader;   ///< extra_us = µs added to its data-loader op
  dist_straggler slow_comm;     ///< extra_us = µs its default-group collective kernels start after they could
};

/// What was written.
struct dist_job_report {
  std::vector<std::string> files;    ///< paths, rank order
  std::vector<std::string> workers;  ///< worker names, rank order
  int steps = 0;
  std::uint64_t bytes = 0;           ///< over all files
  std::uint64_t collectives_per_rank = 0;
};

namespace detail {

/// A rank's output: JSON text buffered and flushed to its file (or only counted).
class rank_sink {
 public:
  explicit rank_sink(const std::string& path) {
    if (!path.empty()) {
      out_.open(path, std::ios::binary);
      if (!out_) throw std::runtime_error("cannot write " + path);
    }
  }
  void put(const std::string& s) {
    buf_ += s;
    bytes_ += s.size();
    if (buf_.size() > (1u << 20)) flush();
  }
  void flush() {
    if (out_.is_open()) out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }
  std::uint64_t bytes() const { return bytes_; }

 private:
  std::ofstream out_;
  std::string buf_;
  std::uint64_t bytes_ = 0;
};

/// Times in ns integers (exact), written as µs with 3 decimals.
inline std::string us(std::int64_t ns) {
  char b[40];
  std::snprintf(b, sizeof b, "%lld.%03lld", static_cast<long long>(ns / 1000), static_cast<long long>(ns % 1000));
  return b;
}

struct collective_kind {
  const char* c10d;    ///< "Collective name"
  const char* op;      ///< the nccl:* annotation
  const char* kernel;  ///< the NCCL kernel
};
inline constexpr collective_kind all_reduce{"allreduce", "nccl:all_reduce",
                                            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"};
inline constexpr collective_kind all_gather{"allgather", "nccl:all_gather",
                                            "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"};
inline constexpr collective_kind reduce_scatter{
    "reduce_scatter", "nccl:reduce_scatter",
    "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"};

/// The lock-step simulation and the writing of every rank.
class job_writer {
 public:
  job_writer(const dist_job_options& o, std::vector<rank_sink>& sinks) : o_(o), sinks_(sinks), rng_(o.seed) {
    const int n = o_.ranks;
    r_.resize(static_cast<std::size_t>(n));
    tp_ = std::max(1, std::min(o_.tp_size, n));
    if (n % tp_ != 0) tp_ = 1;
    for (int i = 0; i < n; ++i) {
      rank_state& s = r_[static_cast<std::size_t>(i)];
      s.host = origin_ns;
      s.compute_free = s.comm_free = origin_ns;
    }
  }

  void header(int rank) {
    std::string h = "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n";
    for (int d = 0; d < 8; ++d) {
      h += "    {\"id\": " + std::to_string(d) +
           ", \"name\": \"NVIDIA H100 80GB HBM3\", \"totalGlobalMem\": 84929347584, \"computeMajor\": 9, "
           "\"computeMinor\": 0, \"maxThreadsPerBlock\": 1024, \"maxThreadsPerMultiprocessor\": 2048, "
           "\"regsPerBlock\": 65536, \"warpSize\": 32, \"sharedMemPerBlock\": 49152, \"numSms\": 132}";
      h += d < 7 ? ",\n" : "\n";
    }
    h += "  ],\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": " + std::to_string(rank) +
         ", \"world_size\": " + std::to_string(o_.ranks) + "},\n";
    h += "  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": 1790000000000000000,\n  \"traceEvents\": [\n";
    sinks_[static_cast<std::size_t>(rank)].put(h);
  }

  void step(int index) {
    const int n = o_.ranks;
    // Host: step start, data loader, first half of the forward pass.
    for (int i = 0; i < n; ++i) {
      rank_state& s = r_[static_cast<std::size_t>(i)];
      s.step_start = s.host;
      std::int64_t dl = noisy(2'000'000);
      if (hit(o_.slow_loader, i, index)) dl += static_cast<std::int64_t>(std::llround(o_.slow_loader.extra_us * 1000));
      cpu_op(i, "user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", s.host, dl);
      s.host += dl + 20'000;
      for (int l = 0; l < o_.layers / 2; ++l) layer(i, index, "aten::linear", "forward", l);
    }
    // Tensor-parallel all_gather: the compute stream waits for it.
    collective(index, all_gather, true, 1 << 22, [&](int i) { return r_[static_cast<std::size_t>(i)].compute_free; });
    for (int i = 0; i < n; ++i) {
      rank_state& s = r_[static_cast<std::size_t>(i)];
      s.compute_free = std::max(s.compute_free, s.last_end);
      for (int l = o_.layers / 2; l < o_.layers; ++l) layer(i, index, "aten::linear", "forward", l);
    }
    // Backward with one all_reduce per bucket (the comm stream waits for the bucket's gradients).
    const int per_bucket = std::max(1, o_.layers / std::max(1, o_.buckets));
    int done = 0;
    while (done < o_.layers) {
      const int upto = std::min(o_.layers, done + per_bucket);
      for (int i = 0; i < n; ++i)
        for (int l = done; l < upto; ++l)
          layer(i, index, "autograd::engine::evaluate_function: AddmmBackward0", "backward", o_.layers - 1 - l);
      done = upto;
      collective(index, all_reduce, false, 1 << 24, [&](int i) { return r_[static_cast<std::size_t>(i)].compute_free; });
    }
    collective(index, reduce_scatter, true, 1 << 22, [&](int i) { return r_[static_cast<std::size_t>(i)].compute_free; });
    // Optimizer (waits for every collective), the loss all_reduce, then the host waits for the
    // GPU: the step ends.
    for (int i = 0; i < n; ++i) {
      rank_state& s = r_[static_cast<std::size_t>(i)];
      s.compute_free = std::max(s.compute_free, s.comm_free);
      cpu_op(i, "user_annotation", "Optimizer.step#SGD.step", s.host, 5'000);
      launch(i, "multi_tensor_apply_kernel", s.host + 500, noisy(300'000), false, 0);
      s.host += 5'000;
    }
    collective(index, all_reduce, false, 1, [&](int i) { return r_[static_cast<std::size_t>(i)].compute_free; });
    for (int i = 0; i < n; ++i) {
      rank_state& s = r_[static_cast<std::size_t>(i)];
      const std::int64_t sync_end = std::max({s.host + 10'000, s.compute_free + 5'000, s.comm_free + 5'000});
      runtime(i, "cudaDeviceSynchronize", s.host, sync_end - s.host, 0);
      s.host = sync_end + 30'000;
      step_annotation(i, index, s.step_start, s.host);
      s.host += 1'000;
    }
  }

  void footer(int rank, std::int64_t end) {
    rank_sink& out = sinks_[static_cast<std::size_t>(rank)];
    const int dev = rank % 8;
    std::string t;
    t += "  {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " + std::to_string(host_pid(rank)) +
         ", \"tid\": 0, \"args\": {\"name\": \"python\"}},\n";
    t += "  {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " + std::to_string(dev) +
         ", \"tid\": 0, \"args\": {\"name\": \"python\"}},\n";
    t += "  {\"ph\": \"M\", \"name\": \"process_labels\", \"pid\": " + std::to_string(dev) +
         ", \"tid\": 0, \"args\": {\"labels\": \"GPU " + std::to_string(dev) + "\"}},\n";
    for (int stream : {compute_stream, comm_stream})
      t += "  {\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + std::to_string(dev) + ", \"tid\": " +
           std::to_string(stream) + ", \"args\": {\"name\": \"stream " + std::to_string(stream) + "\"}},\n";
    t += "  {\"ph\": \"X\", \"cat\": \"Trace\", \"name\": \"PyTorch Profiler (0)\", \"pid\": \"Spans\", \"tid\": "
         "\"PyTorch Profiler\", \"ts\": " + us(origin_ns) + ", \"dur\": " + us(end - origin_ns) + "}\n  ]\n}\n";
    out.put(t);
    out.flush();
  }

  std::int64_t end_ns() const {
    std::int64_t e = origin_ns;
    for (const rank_state& s : r_) e = std::max(e, s.host);
    return e;
  }
  std::uint64_t collectives_per_rank() const { return r_.empty() ? 0 : r_[0].collectives; }

 private:
  static constexpr std::int64_t origin_ns = 5'000'000'000'000'000;  // 5e12 µs, shared clock
  static constexpr int compute_stream = 7, comm_stream = 13;

  struct rank_state {
    std::int64_t host = 0;          ///< the host thread's clock
    std::int64_t compute_free = 0;  ///< compute stream busy until
    std::int64_t comm_free = 0;     ///< communication stream busy until
    std::int64_t last_end = 0;      ///< end of the last collective of this rank
    std::int64_t step_start = 0;
    std::int64_t ext = 1, corr = 1;
    std::uint64_t collectives = 0;
  };

  const dist_job_options& o_;
  std::vector<rank_sink>& sinks_;
  std::vector<rank_state> r_;
  std::mt19937_64 rng_;
  int tp_ = 1;
  std::vector<std::int64_t> group_seq_;  ///< next Seq per process group index

  static int host_pid(int rank) { return 4000 + rank; }
  bool hit(const dist_straggler& s, int rank, int step) const { return s.rank == rank && s.steps.count(step) != 0; }

  std::int64_t noisy(std::int64_t ns) {
    if (o_.jitter <= 0) return ns;
    std::uniform_real_distribution<double> d(-o_.jitter, o_.jitter);
    return static_cast<std::int64_t>(std::llround(static_cast<double>(ns) * (1 + d(rng_))));
  }

  void put(int rank, const std::string& s) { sinks_[static_cast<std::size_t>(rank)].put(s); }

  /// ProfilerStep#N, written when the step ends (its duration is known then).
  void step_annotation(int rank, int index, std::int64_t start, std::int64_t end) {
    rank_state& s = r_[static_cast<std::size_t>(rank)];
    const int number = o_.first_step + index;
    put(rank, "  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#" + std::to_string(number) +
                  "\", \"pid\": " + std::to_string(host_pid(rank)) + ", \"tid\": " + std::to_string(host_pid(rank)) +
                  ", \"ts\": " + us(start) + ", \"dur\": " + us(end - start) + ", \"args\": {\"External id\": " +
                  std::to_string(s.ext++) + "}},\n");
  }

  std::int64_t cpu_op(int rank, const char* cat, const std::string& name, std::int64_t ts, std::int64_t dur,
                      const std::string& extra_args = {}) {
    rank_state& s = r_[static_cast<std::size_t>(rank)];
    const std::int64_t ext = s.ext++;
    put(rank, "  {\"ph\": \"X\", \"cat\": \"" + std::string(cat) + "\", \"name\": \"" + name +
                  "\", \"pid\": " + std::to_string(host_pid(rank)) + ", \"tid\": " + std::to_string(host_pid(rank)) +
                  ", \"ts\": " + us(ts) + ", \"dur\": " + us(dur) + ", \"args\": {\"External id\": " +
                  std::to_string(ext) + extra_args + "}},\n");
    return ext;
  }

  void runtime(int rank, const char* name, std::int64_t ts, std::int64_t dur, std::int64_t corr) {
    put(rank, "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"" + std::string(name) +
                  "\", \"pid\": " + std::to_string(host_pid(rank)) + ", \"tid\": " + std::to_string(host_pid(rank)) +
                  ", \"ts\": " + us(ts) + ", \"dur\": " + us(dur) + ", \"args\": {\"cbid\": 211, \"correlation\": " +
                  std::to_string(corr) + "}},\n");
  }

  /// cudaLaunchKernel at `ts` (host) of a kernel of `dur` on the compute or comm stream; returns
  /// the kernel's start. `ready` = earliest start on the GPU besides the stream being free.
  std::int64_t launch(int rank, const std::string& kernel, std::int64_t ts, std::int64_t dur, bool comm,
                      std::int64_t ready, std::int64_t ext = 0, const std::string& coll_args = {},
                      std::int64_t fixed_end = -1) {
    rank_state& s = r_[static_cast<std::size_t>(rank)];
    const std::int64_t corr = s.corr++;
    if (ext == 0) ext = s.ext - 1;  // the enclosing op's (the last one opened)
    const std::int64_t launch_dur = 4'000;
    runtime(rank, comm ? "cudaLaunchKernelExC" : "cudaLaunchKernel", ts, launch_dur, corr);
    std::int64_t& free = comm ? s.comm_free : s.compute_free;
    const std::int64_t start = std::max({ts + launch_dur + 2'000, free, ready});
    const std::int64_t end = fixed_end >= 0 ? fixed_end : start + dur;
    free = end;
    const int dev = rank % 8;
    const int stream = comm ? comm_stream : compute_stream;
    put(rank, "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"" + kernel + "\", \"pid\": " + std::to_string(dev) +
                  ", \"tid\": " + std::to_string(stream) + ", \"ts\": " + us(start) + ", \"dur\": " + us(end - start) +
                  ", \"args\": {\"External id\": " + std::to_string(ext) + ", \"queued\": 0, \"device\": " +
                  std::to_string(dev) + ", \"context\": 1, \"stream\": " + std::to_string(stream) +
                  ", \"correlation\": " + std::to_string(corr) +
                  ", \"registers per thread\": 96, \"shared memory\": 0, \"blocks per SM\": 1.5, \"warps per SM\": 6, "
                  "\"grid\": [198, 1, 1], \"block\": [128, 1, 1], \"est. achieved occupancy %\": 9" +
                  coll_args + "}},\n");
    put(rank, "  {\"ph\": \"s\", \"id\": " + std::to_string(corr) + ", \"pid\": " + std::to_string(host_pid(rank)) +
                  ", \"tid\": " + std::to_string(host_pid(rank)) + ", \"ts\": " + us(ts) +
                  ", \"cat\": \"ac2g\", \"name\": \"ac2g\"},\n");
    put(rank, "  {\"ph\": \"f\", \"id\": " + std::to_string(corr) + ", \"pid\": " + std::to_string(dev) +
                  ", \"tid\": " + std::to_string(stream) + ", \"ts\": " + us(start) +
                  ", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"},\n");
    return start;
  }

  /// One layer on the host: the op, its launch, its kernel.
  void layer(int rank, int step, const char* op, const char* phase, int l) {
    rank_state& s = r_[static_cast<std::size_t>(rank)];
    const std::int64_t op_dur = noisy(60'000);
    cpu_op(rank, "cpu_op", op, s.host, op_dur, ", \"Sequence number\": " + std::to_string(l));
    double kernel = static_cast<double>(noisy(std::string_view(phase) == "forward" ? 900'000 : 1'600'000));
    if (hit(o_.slow_compute, rank, step)) kernel *= 1 + o_.slow_compute.extra_us;
    launch(rank, std::string("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_") + phase,
           s.host + 20'000, static_cast<std::int64_t>(kernel), false, 0);
    s.host += op_dur + 10'000;
  }

  /// The process group a rank uses for a collective: 0 = default (all ranks), else its
  /// tensor-parallel block. Names follow c10d's counter ("0" default, then "1", "2", ...).
  struct group {
    int index = 0;
    int first = 0, size = 0;
  };
  group group_of(int rank, bool tp) const {
    if (!tp || tp_ == o_.ranks) return {0, 0, o_.ranks};
    const int block = rank / tp_;
    return {1 + block, block * tp_, tp_};
  }

  template <class Ready>
  void collective(int step, const collective_kind& kind, bool tp, std::int64_t nelems, Ready ready_of) {
    const int n = o_.ranks;
    group_seq_.resize(static_cast<std::size_t>(1 + n), 0);
    // Host side of every rank, and each rank's arrival (when its kernel could start).
    std::vector<std::int64_t> launch_ts(static_cast<std::size_t>(n)), arrive(static_cast<std::size_t>(n));
    std::vector<std::int64_t> ext(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      rank_state& s = r_[static_cast<std::size_t>(i)];
      launch_ts[static_cast<std::size_t>(i)] = s.host;
      std::int64_t a = std::max({s.host + 30'000 + 4'000 + 2'000, s.comm_free, ready_of(i)});
      if (!tp && hit(o_.slow_comm, i, step)) a += static_cast<std::int64_t>(std::llround(o_.slow_comm.extra_us * 1000));
      arrive[static_cast<std::size_t>(i)] = a;
    }
    const std::int64_t transfer = noisy(nelems == 1 ? 40'000 : kind.c10d == all_reduce.c10d ? 2'500'000 : 800'000);
    std::vector<std::int64_t> group_end(static_cast<std::size_t>(1 + n), 0);
    for (int i = 0; i < n; ++i) {
      const group g = group_of(i, tp);
      std::int64_t last = 0;
      for (int j = g.first; j < g.first + g.size; ++j) last = std::max(last, arrive[static_cast<std::size_t>(j)]);
      group_end[static_cast<std::size_t>(g.index)] = last + transfer;
    }
    for (int i = 0; i < n; ++i) {
      rank_state& s = r_[static_cast<std::size_t>(i)];
      const group g = group_of(i, tp);
      const std::int64_t seq = group_seq_[static_cast<std::size_t>(g.index)];
      std::string ranks = "[";
      for (int j = g.first; j < g.first + g.size; ++j) ranks += (j > g.first ? ", " : "") + std::to_string(j);
      ranks += "]";
      const std::int64_t out = kind.c10d == all_gather.c10d ? nelems * g.size : nelems;
      const std::int64_t in = kind.c10d == reduce_scatter.c10d ? nelems * g.size : nelems;
      std::string args = ", \"Collective name\": \"" + std::string(kind.c10d) + "\", \"dtype\": \"Float\", \"In msg nelems\": " +
                         std::to_string(in) + ", \"Out msg nelems\": " + std::to_string(out) + ", \"Group size\": " +
                         std::to_string(g.size) + ", \"In split size\": \"[]\", \"Out split size\": \"[]\", "
                         "\"Global rank start\": " + std::to_string(g.first) + ", \"Global rank stride\": 1, "
                         "\"Process Group Name\": \"" + std::to_string(g.index) + "\", \"Process Group Description\": \"" +
                         (g.index == 0 ? std::string("default_pg") : "tp_" + std::to_string(g.index - 1)) +
                         "\", \"Process Group Ranks\": \"" + ranks + "\"";
      if (o_.write_seq) args += ", \"Seq\": " + std::to_string(seq);
      const std::int64_t t0 = launch_ts[static_cast<std::size_t>(i)];
      const std::int64_t op_dur = 50'000;
      const std::int64_t e = cpu_op(i, "cpu_op", "record_param_comms", t0, op_dur, args);
      cpu_op(i, "user_annotation", kind.op, t0 + 10'000, 30'000);
      // The kernel keeps record_param_comms' External id, as Kineto writes it.
      const std::int64_t end = group_end[static_cast<std::size_t>(g.index)];
      launch(i, kind.kernel, t0 + 30'000, 0, true, arrive[static_cast<std::size_t>(i)], e, args, end);
      s.last_end = end;
      s.host = t0 + op_dur + 5'000;
      ++s.collectives;
    }
    // Every group advanced its sequence number once.
    std::set<int> used;
    for (int i = 0; i < n; ++i) used.insert(group_of(i, tp).index);
    for (int g : used) ++group_seq_[static_cast<std::size_t>(g)];
  }
};

}  // namespace detail

/// The worker name of `rank` ("node<rank/8>_<rank>": the plugin splits host and process at the
/// last underscore).
inline std::string dist_job_worker(int rank) { return "node" + std::to_string(rank / 8) + "_" + std::to_string(rank); }

/// Writes the job into `dir` (created). Throws std::runtime_error when a file cannot be written.
inline dist_job_report write_dist_job(const std::filesystem::path& dir, const dist_job_options& options) {
  if (options.ranks < 1) throw std::runtime_error("--ranks must be at least 1");
  dist_job_options o = options;
  if (o.steps <= 0) {
    // Measure one step of the same job in memory, then size the real one. (All ranks: a
    // collective's "Process Group Ranks" lists the whole group, so a step's size grows with the
    // world size; a probe of 8 ranks made 256-rank traces 65 MB where 50 were asked for.)
    dist_job_options probe = o;
    probe.steps = 2;
    std::vector<detail::rank_sink> sinks;
    for (int i = 0; i < probe.ranks; ++i) sinks.emplace_back(std::string());
    detail::job_writer w(probe, sinks);
    for (int i = 0; i < probe.ranks; ++i) w.header(i);
    const std::uint64_t before = sinks[0].bytes();
    w.step(0);
    const double per_step = static_cast<double>(sinks[0].bytes() - before);
    o.steps = std::max(1, static_cast<int>(std::ceil(o.mb_per_rank * 1e6 / per_step)));
  }
  std::filesystem::create_directories(dir);
  dist_job_report report;
  std::vector<detail::rank_sink> sinks;
  sinks.reserve(static_cast<std::size_t>(o.ranks));
  for (int i = 0; i < o.ranks; ++i) {
    const std::string worker = dist_job_worker(i);
    const std::string path = (dir / (worker + "." + std::to_string(1790000000000000000LL + i) + ".pt.trace.json")).string();
    report.workers.push_back(worker);
    report.files.push_back(path);
    sinks.emplace_back(path);
  }
  detail::job_writer w(o, sinks);
  for (int i = 0; i < o.ranks; ++i) w.header(i);
  for (int s = 0; s < o.steps; ++s) w.step(s);
  const std::int64_t end = w.end_ns();
  for (int i = 0; i < o.ranks; ++i) {
    w.footer(i, end);
    report.bytes += sinks[static_cast<std::size_t>(i)].bytes();
  }
  report.steps = o.steps;
  report.collectives_per_rank = w.collectives_per_rank();
  return report;
}

}  // namespace kinetoscope::bench
