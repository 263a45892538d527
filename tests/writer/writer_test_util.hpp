// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file writer_test_util.hpp
/// Shared helpers of the writer tests: the example of docs/trace-format.md#writer-checklist as
/// trace_data, gzip inflation, file reading and a self-removing temporary directory.

#include <stdlib.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kinetoscope/trace_data.hpp"

namespace writer_test {

/// Unix ns of `micros` µs after baseTimeNanoseconds (so the writer prints `micros` back).
inline std::int64_t at_us(double micros) {
  return kinetoscope::base_time_ns() + static_cast<std::int64_t>(micros * 1000.0 + 0.5);
}

inline kinetoscope::op_input tensor(std::vector<std::int64_t> dims,
                                    std::vector<std::int64_t> strides, std::string type = "float") {
  kinetoscope::op_input in;
  in.dims = std::move(dims);
  in.strides = std::move(strides);
  in.type = std::move(type);
  return in;
}

inline kinetoscope::op_input scalar(std::string concrete) {
  kinetoscope::op_input in;
  in.type = "Scalar";
  in.concrete = std::move(concrete);
  return in;
}

/**
 * The example of docs/trace-format.md#writer-checklist (one step of y = linear(x) on GPU 0,
 * backward on thread 4250) plus a few additions that exercise more rules:
 *  - a non-flow runtime call without GPU work and without External id (cudaStreamIsCapturing);
 *  - a driver launch (cuLaunchKernel) of a kernel literally named "kernel" on GPU 1 stream 3,
 *    inside my_block;
 *  - a zero-duration DtoH memcpy launched after my_block, inside ProfilerStep#3 only.
 */
inline kinetoscope::trace_data example_trace() {
  using namespace kinetoscope;
  trace_data d;
  d.start_ns = at_us(1000);
  d.end_ns = at_us(1400);
  d.pid = 4242;
  d.process_name = "python3.11";
  d.threads = {{4242, "python3.11"}, {4250, "pt_autograd_0"}};
  d.strings = {""};
  d.record_shapes = true;
  d.profile_memory = true;
  d.cuda_enabled = true;
  d.distributed = distributed_info{"nccl", 0, 1};

  const auto add_inputs = [&d](std::vector<op_input> ins, cpu_event& e) {
    e.first_input = static_cast<std::uint32_t>(d.inputs.size());
    e.input_count = static_cast<std::uint32_t>(ins.size());
    for (auto& in : ins) d.inputs.push_back(std::move(in));
  };
  const auto op = [&d](const char* name, cpu_category cat, double s, double e, std::int64_t tid,
                       std::int64_t ext, std::int64_t seq = -1, std::int64_t fwd = 0) {
    cpu_event ev;
    ev.name = d.intern(name);
    ev.category = cat;
    ev.start_ns = at_us(s);
    ev.end_ns = at_us(e);
    ev.tid = tid;
    ev.end_tid = tid;
    ev.external_id = ext;
    ev.sequence_nr = seq;
    ev.fwd_thread_id = fwd;
    return ev;
  };
  using cc = cpu_category;
  d.events.push_back(op("ProfilerStep#3", cc::user_annotation, 1010, 1390, 4242, 10));
  d.events.push_back(op("my_block", cc::user_annotation, 1020, 1220, 4242, 11));
  auto linear = op("aten::linear", cc::cpu_op, 1030, 1090, 4242, 12);
  add_inputs({tensor({32, 128}, {128, 1}), tensor({64, 128}, {128, 1}), tensor({64}, {1})}, linear);
  d.events.push_back(linear);
  auto t = op("aten::t", cc::cpu_op, 1032, 1037, 4242, 13);
  add_inputs({tensor({64, 128}, {128, 1})}, t);
  d.events.push_back(t);
  auto addmm = op("aten::addmm", cc::cpu_op, 1040, 1085, 4242, 14, 7, 0);
  add_inputs({tensor({64}, {1}), tensor({32, 128}, {128, 1}), tensor({128, 64}, {1, 128}),
              scalar("1"), scalar("1")},
             addmm);
  d.events.push_back(addmm);
  auto copy = op("aten::copy_", cc::cpu_op, 1100, 1140, 4242, 15);
  add_inputs({tensor({32, 128}, {128, 1}), tensor({32, 128}, {128, 1}), scalar("False")}, copy);
  d.events.push_back(copy);
  auto zero = op("aten::zero_", cc::cpu_op, 1150, 1170, 4242, 16);
  add_inputs({tensor({32, 64}, {64, 1})}, zero);
  d.events.push_back(zero);
  d.events.push_back(op("autograd::engine::evaluate_function: AddmmBackward0", cc::cpu_op, 1250,
                        1310, 4250, 30, 7, 1));
  d.events.push_back(op("AddmmBackward0", cc::cpu_op, 1252, 1307, 4250, 31, 7, 1));
  auto mm = op("aten::mm", cc::cpu_op, 1260, 1290, 4250, 32);
  add_inputs({tensor({32, 64}, {64, 1}), tensor({64, 128}, {128, 1})}, mm);
  d.events.push_back(mm);

  const auto mem = [](double t_us, device_type dev, std::int16_t dev_id, std::uint64_t addr,
                      std::int64_t bytes, std::int64_t alloc, std::int64_t reserved) {
    memory_event m;
    m.time_ns = at_us(t_us);
    m.tid = 4242;
    m.device = dev;
    m.device_id = dev_id;
    m.addr = addr;
    m.bytes = bytes;
    m.total_allocated = alloc;
    m.total_reserved = reserved;
    return m;
  };
  d.memory.push_back(mem(1050, device_type::cuda, 0, 139872456392704ULL, 8192, 1056768, 2097152));
  d.memory.push_back(mem(1101, device_type::cpu, -1, 94481720395776ULL, 16384, 16384, 0));
  d.memory.push_back(mem(1139, device_type::cpu, -1, 94481720395776ULL, -16384, 0, 0));

  const auto call = [&d](const char* name, double s, double e, std::int64_t tid, std::int32_t cbid,
                         std::int64_t corr, std::int64_t ext, bool flow, bool driver = false) {
    runtime_call c;
    c.name = d.intern(name);
    c.start_ns = at_us(s);
    c.end_ns = at_us(e);
    c.tid = tid;
    c.cbid = cbid;
    c.correlation = corr;
    c.external_id = ext;
    c.flow = flow;
    c.driver = driver;
    return c;
  };
  d.runtime.push_back(call("cudaStreamIsCapturing", 1045, 1046, 4242, 317, 500, 0, false));
  d.runtime.push_back(call("cudaLaunchKernel", 1060, 1068, 4242, 211, 501, 14, true));
  d.runtime.push_back(call("cudaMemcpyAsync", 1105, 1125, 4242, 41, 502, 15, true));
  d.runtime.push_back(call("cudaMemsetAsync", 1152, 1158, 4242, 51, 503, 16, true));
  d.runtime.push_back(call("cuLaunchKernel", 1180, 1185, 4242, 307, 506, 0, true, true));
  d.runtime.push_back(call("cudaMemcpyAsync", 1230, 1232, 4242, 41, 507, 0, true));
  d.runtime.push_back(call("cudaLaunchKernel", 1270, 1277, 4250, 211, 504, 32, true));

  const auto gpu = [&d](gpu_kind kind, const char* name, double s, double e, std::int32_t device,
                        std::int64_t stream, std::int64_t corr, std::int64_t ext) {
    gpu_activity g;
    g.kind = kind;
    g.name = d.intern(name);
    g.start_ns = at_us(s);
    g.end_ns = at_us(e);
    g.device = device;
    g.stream = stream;
    g.context = 1;
    g.correlation = corr;
    g.external_id = ext;
    return g;
  };
  auto k1 = gpu(gpu_kind::kernel, "ampere_sgemm_32x32_sliced1x4_tn", 1075, 1087.5, 0, 7, 501, 14);
  k1.registers_per_thread = 86;
  k1.shared_memory = 16384;
  k1.blocks_per_sm = 0.074074;
  k1.warps_per_sm = 0.296296;
  k1.grid[0] = 8;
  k1.grid[1] = 1;
  k1.grid[2] = 1;
  k1.block[0] = 128;
  k1.block[1] = 1;
  k1.block[2] = 1;
  d.gpu.push_back(k1);
  auto cp = gpu(gpu_kind::memcpy, "Memcpy HtoD (Pageable -> Device)", 1110, 1125, 0, 7, 502, 15);
  cp.bytes = 16384;
  d.gpu.push_back(cp);
  auto ms = gpu(gpu_kind::memset, "Memset (Device)", 1160, 1161.5, 0, 7, 503, 16);
  ms.bytes = 8192;
  d.gpu.push_back(ms);
  auto k3 = gpu(gpu_kind::kernel, "kernel", 1190, 1195, 1, 3, 506, 0);
  k3.grid[0] = 1;
  k3.grid[1] = 1;
  k3.grid[2] = 1;
  k3.block[0] = 32;
  k3.block[1] = 1;
  k3.block[2] = 1;
  k3.occupancy_pct = 3;
  d.gpu.push_back(k3);
  auto cp2 = gpu(gpu_kind::memcpy, "Memcpy DtoH (Device -> Pageable)", 1235, 1235, 0, 7, 507, 0);
  cp2.bytes = 4;
  d.gpu.push_back(cp2);
  auto k2 = gpu(gpu_kind::kernel, "ampere_sgemm_64x32_sliced1x4_nn", 1290, 1300, 0, 7, 504, 32);
  k2.registers_per_thread = 90;
  k2.shared_memory = 12288;
  k2.blocks_per_sm = 0.074074;
  k2.warps_per_sm = 0.296296;
  k2.grid[0] = 2;
  k2.grid[1] = 4;
  k2.grid[2] = 1;
  k2.block[0] = 128;
  k2.block[1] = 1;
  k2.block[2] = 1;
  d.gpu.push_back(k2);

  device_properties a100;
  a100.id = 0;
  a100.name = "NVIDIA A100-SXM4-80GB";
  a100.total_global_mem = 84974239744;
  a100.compute_major = 8;
  a100.compute_minor = 0;
  a100.max_threads_per_block = 1024;
  a100.max_threads_per_multiprocessor = 2048;
  a100.regs_per_block = 65536;
  a100.warp_size = 32;
  a100.shared_mem_per_block = 49152;
  a100.num_sms = 108;
  a100.regs_per_multiprocessor = 65536;
  a100.shared_mem_per_block_optin = 166912;
  a100.shared_mem_per_multiprocessor = 167936;
  d.devices.push_back(a100);
  a100.id = 1;
  d.devices.push_back(a100);

  d.metadata = {{"username", "\"alice\""},
                {"config", "{\"lr\": 0.1, \"layers\": [1, 2]}"},
                {"broken", "{not json"},
                {"traceName", "\"must not override\""},
                {"username", "\"bob\""}};
  return d;
}

/// Inflates a gzip stream (zlib, windowBits 31).
inline std::string gunzip(const std::string& compressed) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) throw std::runtime_error("inflateInit2 failed");
  std::string out;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  zs.avail_in = static_cast<uInt>(compressed.size());
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&zs);
      throw std::runtime_error("inflate failed: " + std::to_string(rc));
    }
    out.append(buf, sizeof(buf) - zs.avail_out);
    if (rc == Z_OK && zs.avail_in == 0 && zs.avail_out != 0) {
      inflateEnd(&zs);
      throw std::runtime_error("truncated gzip stream");
    }
  }
  const bool trailing = zs.avail_in != 0;
  inflateEnd(&zs);
  if (trailing) throw std::runtime_error("data after the gzip member");
  return out;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A fresh directory under the system temp dir, removed with its contents at scope exit.
class temp_dir {
 public:
  temp_dir() {
    std::string templ =
        (std::filesystem::temp_directory_path() / "kinetoscope-test-XXXXXX").string();
    if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace writer_test
