// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file trace_data.hpp
/// The result of one recorded window: plain data handed from the recording core to the writer
/// and to key_averages(). Every time is an int64 count of nanoseconds since the Unix epoch on
/// one clock (CPU and GPU alike); units are spelled in member names. Names are interned: an
/// event holds an index into `trace_data::strings`.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kinetoscope {

/// c10::DeviceType codes, as written in the "Device Type" arg of [memory] events.
enum class device_type : std::int8_t { cpu = 0, cuda = 1 };

/// Kineto categories of host-side slices.
enum class cpu_category : std::uint8_t {
  cpu_op,           ///< an operator (aten::mm, conv2d forward, ...): `record_op`
  user_annotation,  ///< a `record_function` range, ProfilerStep#N, DataLoader, Optimizer ranges
};

/// What one operator input looked like (record_shapes). Mirrors the four per-input arrays PyTorch
/// writes: "Input Dims", "Input type", "Input Strides", "Concrete Inputs".
struct op_input {
  std::vector<std::int64_t> dims;     ///< tensor sizes; empty for scalars, lists and None
  std::vector<std::int64_t> strides;  ///< tensor strides (same layout as dims)
  std::string type;                   ///< "float", "long int", "Scalar", "ScalarList", "" (None)
  std::string concrete;               ///< "" for tensors and None, else the printed value ("1", "[1, 1]")
  std::vector<std::int64_t> values;   ///< integer value(s) of Scalar / ScalarList inputs (for FLOPs)
};

/// One closed host-side range.
struct cpu_event {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t tid = 0;           ///< OS thread id where the range began
  std::int64_t end_tid = 0;       ///< OS thread id where it ended (differs for async ranges)
  std::uint32_t name = 0;         ///< index into trace_data::strings
  cpu_category category = cpu_category::cpu_op;
  std::int64_t external_id = 0;   ///< "External id": process-wide op counter, starts at 1
  std::int64_t sequence_nr = -1;  ///< "Sequence number" (autograd linkage), -1 = none
  std::int64_t fwd_thread_id = 0; ///< "Fwd thread id": 0 for forward ops, >= 1 for backward nodes
  std::uint32_t first_input = 0;  ///< range [first_input, first_input + input_count) in trace_data::inputs
  std::uint32_t input_count = 0;
  std::int64_t flops = 0;         ///< with_flops estimate (#flops), 0 = not counted
  std::uint32_t first_frame = 0;  ///< with_stack: range [first_frame, first_frame + frame_count) in trace_data::frames
  std::uint32_t frame_count = 0;  ///< 0 = no stack
};

/// One allocator call (profile_memory): a [memory] instant event.
struct memory_event {
  std::int64_t time_ns = 0;
  std::int64_t tid = 0;
  std::uint64_t addr = 0;
  std::int64_t bytes = 0;             ///< > 0 allocation, < 0 free
  std::int64_t total_allocated = 0;   ///< bytes allocated on that device after this event
  std::int64_t total_reserved = 0;    ///< bytes reserved (cached) after this event; 0 for CPU
  device_type device = device_type::cpu;
  std::int16_t device_id = -1;        ///< -1 for CPU
};

/// One call of a module scope (module_scope.hpp, with_modules). Written as a python_function
/// slice "nn.Module: <type>_<instance>" (docs/trace-format.md#python_function).
struct module_event {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t tid = 0;
  std::uint32_t path = 0;            ///< index into strings: dotted path ("layer1.0.conv1"), "" = model root
  std::uint32_t type = 0;            ///< index into strings: class name ("Conv2d")
  std::int64_t params = 0;           ///< parameters the module owns directly (not its sub-modules')
  std::int64_t call_id = 0;          ///< "Python id": unique per call, >= 1
  std::int64_t parent_call_id = 0;   ///< "Python parent id": enclosing call on the thread; 0 = none
  std::int64_t module_id = 0;        ///< "Python module id": one per (type, path) instance
  std::int32_t instance = 0;         ///< k of "nn.Module: <type>_<k>": instance number within the type
};

/// GPU-side work (filled by the CUPTI backend).
enum class gpu_kind : std::uint8_t { kernel, memcpy, memset };

struct gpu_activity {
  gpu_kind kind = gpu_kind::kernel;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t name = 0;             ///< demangled kernel name / "Memcpy HtoD (Pageable -> Device)"
  std::int32_t device = 0;
  std::int64_t stream = 0;
  std::int64_t context = 0;
  std::int64_t correlation = 0;       ///< CUPTI correlation id of the launching API call
  std::int64_t external_id = 0;       ///< 0 = no enclosing op
  // kernels
  std::int32_t grid[3] = {0, 0, 0};
  std::int32_t block[3] = {0, 0, 0};
  std::int32_t registers_per_thread = 0;
  std::int32_t shared_memory = 0;     ///< static + dynamic bytes per block
  double blocks_per_sm = 0;
  double warps_per_sm = 0;
  std::int32_t occupancy_pct = 0;     ///< est. achieved occupancy %, 0..100
  // memcpy / memset
  std::int64_t bytes = 0;
};

/// A host-side CUDA runtime or driver API call.
struct runtime_call {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t tid = 0;
  std::uint32_t name = 0;             ///< "cudaLaunchKernel", "cuLaunchKernel", ...
  std::int32_t cbid = 0;
  std::int64_t correlation = 0;
  std::int64_t external_id = 0;       ///< innermost op on the calling thread, 0 = none (omitted)
  bool driver = false;                ///< cuda_driver instead of cuda_runtime
  bool flow = false;                  ///< enqueues or waits for GPU work: gets an ac2g flow
};

/// The fields of one entry of the top-level "deviceProperties" array.
struct device_properties {
  std::int32_t id = 0;
  std::string name;
  std::int64_t total_global_mem = 0;
  std::int32_t compute_major = 0;
  std::int32_t compute_minor = 0;
  std::int32_t max_threads_per_block = 0;
  std::int32_t max_threads_per_multiprocessor = 0;
  std::int32_t regs_per_block = 0;
  std::int32_t warp_size = 0;
  std::int64_t shared_mem_per_block = 0;
  std::int32_t num_sms = 0;
  std::int32_t regs_per_multiprocessor = 0;
  std::int64_t shared_mem_per_block_optin = 0;
  std::int64_t shared_mem_per_multiprocessor = 0;
};

/// Written as the top-level "distributedInfo" object.
struct distributed_info {
  std::string backend = "nccl";
  std::int32_t rank = 0;
  std::int32_t world_size = 1;
};

struct thread_info {
  std::int64_t tid = 0;
  std::string name;                   ///< OS thread name ("python3.11", "dataloader")
};

/// Everything one completed window holds.
struct trace_data {
  std::int64_t start_ns = 0;          ///< window start (span / Iteration Start)
  std::int64_t end_ns = 0;            ///< window end (Record Window End)
  std::int64_t pid = 0;
  std::string process_name;
  std::vector<thread_info> threads;

  std::vector<std::string> strings;   ///< interned names; index 0 is ""
  std::vector<cpu_event> events;      ///< sorted by (start_ns ascending, end_ns descending)
  std::vector<op_input> inputs;
  /// with_stack call stacks: string ids of frames ("<file>(<line>): <function>"), each event's
  /// range innermost first. Events with the same stack share one range.
  std::vector<std::uint32_t> frames;
  std::vector<memory_event> memory;   ///< sorted by time
  std::vector<gpu_activity> gpu;      ///< sorted by start
  std::vector<runtime_call> runtime;  ///< sorted by start
  std::vector<device_properties> devices;
  std::vector<module_event> modules;  ///< with_modules; sorted by (start ascending, end descending)

  // options echoed as top-level metadata when true
  bool record_shapes = false;
  bool profile_memory = false;
  bool with_stack = false;
  bool with_flops = false;
  bool with_modules = false;
  bool cuda_enabled = false;          ///< the cuda activity was on for this window

  std::optional<distributed_info> distributed;
  /// Extra top-level keys: (key, JSON text written verbatim).
  std::vector<std::pair<std::string, std::string>> metadata;

  std::string_view str(std::uint32_t id) const { return strings[id]; }
  /// Index of `s` in strings, adding it if absent (linear for small tables; used by tests
  /// and the CUPTI backend; the recorder interns through its own hash map).
  std::uint32_t intern(std::string_view s);
};

/// A process-wide constant: the Unix time floored to a multiple of 7 889 238 s ("three months"),
/// in ns, computed on first use. Kineto writes every ts relative to it (baseTimeNanoseconds).
std::int64_t base_time_ns();

}  // namespace kinetoscope
