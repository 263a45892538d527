// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: HTTP request handling below the transport. A request target (the input) goes
// through parse_target as the server does, then through the API's routing and parameter checks
// against a store holding one small trace with memory, kernels and flows. Every answer must be a
// 2xx/3xx/4xx with a body, never a 500 or a crash.
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "server/api.hpp"
#include "server/store.hpp"
#include "server/url.hpp"

namespace ks = kinetoscope::server;
namespace fs = std::filesystem;

namespace {

const char* const k_trace = R"J({"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 20, "args": {"External id": 7, "Input Dims": [[2, 3], [3, 4]], "Call stack": "a.py(1): f"}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12, "dur": 3, "args": {"External id": 7, "correlation": 9}},
  {"ph": "X", "cat": "kernel", "name": "volta_sgemm", "pid": 0, "tid": 7, "ts": 40, "dur": 5, "args": {"External id": 7, "correlation": 9, "device": 0, "stream": 7}},
  {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 11, "args": {"Addr": 4096, "Bytes": 512, "Total Allocated": 512, "Total Reserved": 2048, "Device Type": 1, "Device Id": 0}},
  {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 25, "args": {"Addr": 4096, "Bytes": -512, "Total Allocated": 0, "Total Reserved": 2048, "Device Type": 1, "Device Id": 0}},
  {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_0", "pid": 1, "tid": 1, "ts": 9, "dur": 30, "args": {"Python id": 1, "Python parent id": null, "Python module id": 3}}
]})J";

struct fixture {
  fs::path dir;
  std::unique_ptr<ks::store> store;
  std::unique_ptr<ks::api> api;
  fixture() {
    dir = fs::temp_directory_path() / ("kinetoscope_fuzz_api_" + std::to_string(::getpid()));
    fs::create_directories(dir / "run");
    std::ofstream(dir / "run" / "w.1.pt.trace.json") << k_trace;
    ks::store_options o;
    o.logdir = dir.string();
    o.reload_interval_s = 0;
    store = std::make_unique<ks::store>(o);
    store->start();
    if (!store->wait_idle(std::chrono::seconds(60))) std::abort();
    api = std::make_unique<ks::api>(*store);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fixture f;
  const std::string_view target(reinterpret_cast<const char*>(data), size);
  ks::target_result t = ks::parse_target(target, "");
  if (!t.target || !t.target->path.starts_with("api/")) return 0;
  ks::api_request r;
  r.route = t.target->path.substr(4);
  r.query = std::move(t.target->query);
  const ks::api_response res = f.api->handle(r);
  if (res.status >= 500 || res.status < 200 || res.body.empty()) std::abort();
  return 0;
}
