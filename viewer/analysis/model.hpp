// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file model.hpp
/// The viewer's in-memory form of one trace file: a compact event table with interned strings
/// and per-type side tables, built by the loader (loader.hpp) from any generation of
/// `.pt.trace.json` (docs/plugin-rules.md#event-categories, docs/trace-format.md#generations).
/// Times stay in µs as doubles, exactly as the file has them, because torch-tb-profiler computed in
/// Python floats and our numbers must equal its numbers.

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kinetoscope::analysis {

/// Event types after normalisation (plugin-rules.md#event-categories; cat matched
/// case-insensitively).
enum class event_type : std::uint8_t {
  trace,            ///< cat "Trace" (the "PyTorch Profiler (0)" span)
  op,               ///< cat "cpu_op" / "Operator"
  user_annotation,  ///< cat "user_annotation" / "gpu_user_annotation" (see event::gpu_annotation)
  python,           ///< cat "python" (legacy)
  python_function,  ///< cat "python_function" without "Python module id"
  module,           ///< cat "python_function" with "Python module id"
  runtime,          ///< cat "runtime", "cuda_runtime", "mtia_runtime", "glow_runtime", "xpu_runtime", "privateuse1_runtime"
  driver,           ///< cat "cuda_driver" (ignored by the plugin; kept for the "better" modes)
  kernel,           ///< cat "kernel" / "Kernel"
  memcpy,           ///< cat "memcpy" / "gpu_memcpy"
  memset,           ///< cat "memset" / "gpu_memset"
  memory,           ///< ph "i" named "[memory]" (any cat)
  other,            ///< any other ph "X" category (kept for the trace view and diagnostics)
};

constexpr std::uint32_t no_index = std::numeric_limits<std::uint32_t>::max();

/// One duration event (ph "X") or memory instant. 64 bytes.
struct event {
  double ts = 0;                    ///< µs, as in the file (relative or absolute)
  double dur = 0;                   ///< µs; 0 for instants
  std::int64_t pid = 0;             ///< numeric pid; GPU events: device index; string pids: see pid_is_string
  std::int64_t tid = 0;             ///< numeric tid ("25738" and "stream 7" are converted: 25738, 7)
  std::int64_t external_id = 0;     ///< args "external id" (era A) else "External id"; 0 = absent
  std::int64_t correlation = 0;     ///< args "correlation"; 0 = absent
  std::uint32_t name = 0;           ///< string id
  std::uint32_t extra = no_index;   ///< index into the side table of its type (ops, kernels, memory, python); ops: no_index when every arg is absent
  event_type type = event_type::other;
  bool gpu_annotation = false;      ///< cat was gpu_user_annotation (pid = device, tid = stream)
  bool pid_is_string = false;       ///< pid was a non-numeric string ("Spans", "Traces", "CPU functions"):
                                    ///< pid = string_id_base - string id (trace_model::id_text)
  bool tid_is_string = false;       ///< tid was a non-numeric string (same encoding)
  /// The event has an integer "External id" / "external id" (external_id is 0 both when the id
  /// is absent and when it is 0). The plugin tells the two apart (plugin-rules.md, quirk Q22).
  bool has_external_id = false;
  /// Zero: the padding made explicit, so that a table's bytes (the index writes them as they
  /// are) hold no leftover heap bytes and one model always gives the same file.
  std::uint8_t reserved_[3] = {};

  double end() const noexcept { return ts + dur; }
};

/// Args of op / user_annotation / python events. Events whose args are all absent have no
/// entry (event::extra = no_index): read them as a default op_args.
/// 32 bytes, no padding (one per operator event: 7 million on a 10 GB trace).
struct op_args {
  std::uint32_t input_dims = 0;     ///< string id of the "Input Dims" (else "Input dims") JSON text, minified; 0 = absent
  std::uint32_t input_types = 0;    ///< string id of the "Input type" JSON text, minified; 0 = absent
  std::uint32_t call_stack = 0;     ///< string id of "Call stack"; 0 = absent
  std::uint32_t collective = no_index;  ///< index into trace_model::collectives; no_index = none
  std::int64_t sequence_nr = -1;    ///< "Sequence number"
  std::int64_t fwd_thread_id = -1;  ///< "Fwd thread id"
};

/// Args of kernel events (absent fields keep their "has_" flag false). 112 bytes: the flags
/// after the wide fields, the padding explicit (as event's).
struct kernel_args {
  std::int64_t device = -1;               ///< args "device"; -1 = absent
  double blocks_per_sm = 0;
  double occupancy = 0;                   ///< "est. achieved occupancy %"
  std::int64_t grid[3] = {0, 0, 0};
  std::int64_t block[3] = {0, 0, 0};
  std::int64_t registers_per_thread = 0;
  std::int64_t shared_memory = 0;
  std::int64_t stream = -1;               ///< args "stream"
  std::uint32_t collective = no_index;    ///< index into trace_model::collectives; no_index = none
  bool has_blocks_per_sm = false;
  bool has_occupancy = false;
  bool has_grid = false;
  bool has_block = false;
  bool has_registers = false;
  bool has_shared_memory = false;
  std::uint8_t reserved_[6] = {};
};

/// The collective metadata PyTorch's c10d writes on a `record_param_comms` cpu_op, and Kineto
/// copies onto the NCCL kernel that op launched (docs/trace-format.md, collective metadata): what
/// lets the same collective be found on every rank of its process group. Strings are string ids
/// (0 = absent) so the table stays trivially copyable; integers keep the file's exact values.
struct collective_args {
  std::uint32_t name = 0;           ///< "Collective name" ("allreduce", "allgather", ...)
  std::uint32_t dtype = 0;          ///< "dtype" ("Float", "BFloat16", ...)
  std::uint32_t group_name = 0;     ///< "Process Group Name" ("0", "1", ...)
  std::uint32_t group_desc = 0;     ///< "Process Group Description" ("default_pg", ...)
  std::uint32_t group_ranks = 0;    ///< "Process Group Ranks" as written ("[0, 1]")
  std::uint32_t reserved_ = 0;      ///< (the padding explicit, as event's)
  std::int64_t group_size = -1;     ///< "Group size"; -1 = absent
  std::int64_t in_nelems = -1;      ///< "In msg nelems"; -1 = absent
  std::int64_t out_nelems = -1;     ///< "Out msg nelems"; -1 = absent
  std::int64_t seq = -1;            ///< "Seq": the collective's sequence number in its group (newer builds); -1 = absent
};
// The model's tables are copied and serialized column by column: keep their rows plain data.
static_assert(std::is_trivially_copyable_v<collective_args> && std::is_trivially_copyable_v<op_args> &&
              std::is_trivially_copyable_v<kernel_args>);

/// Args of [memory] instants.
struct memory_args {
  std::int64_t device_type = -1;    ///< 0 CPU, 1 CUDA, others = unknown device
  std::int64_t device_id = -1;
  std::uint64_t addr = 0;
  std::int64_t bytes = 0;           ///< default 0
  double total_allocated = std::numeric_limits<double>::quiet_NaN();
  double total_reserved = std::numeric_limits<double>::quiet_NaN();
  bool has_addr = false;
  std::uint8_t reserved_[7] = {};   ///< (the padding explicit, as event's)
};

/// Args of python_function / module events.
struct python_args {
  std::int64_t python_id = -1;
  std::int64_t parent_id = -1;      ///< -1 also for JSON null
  std::int64_t module_id = -1;      ///< -1 = absent
};

/// A fwdbwd flow end (cat "fwdbwd", ph "s" or "f").
struct flow_event {
  std::int64_t id = 0;
  double ts = 0;
  std::int64_t pid = 0;
  std::int64_t tid = 0;
  bool is_start = false;            ///< "s" (forward side) or "f" (backward side)
  std::uint8_t reserved_[7] = {};   ///< (the padding explicit, as event's)
};

/// One entry of the top-level "deviceProperties" list (index = device id).
struct device_info {
  bool present = false;             ///< false for non-object entries
  std::string name;                 bool has_name = false;
  std::int64_t total_global_mem = 0; bool has_total_global_mem = false;
  std::int64_t compute_major = 0;   bool has_compute_major = false;
  std::int64_t compute_minor = 0;   bool has_compute_minor = false;
  std::int64_t num_sms = 0;
  std::int64_t max_threads_per_multiprocessor = 0;
};

/// Which metadata event (ph "M") a track_meta entry comes from.
enum class meta_kind : std::uint8_t {
  process_name,        ///< args "name": the process's name ("python")
  process_labels,      ///< args "labels": "CPU", "GPU 0"
  process_sort_index,  ///< args "sort_index"
  thread_name,         ///< args "name": "thread 4961 (dataloader)", "stream 7"
  thread_sort_index,   ///< args "sort_index"
};

/// One metadata event naming or ordering a process or thread (the trace view's track names).
/// Other metadata events are not kept.
struct track_meta {
  std::int64_t pid = 0;             ///< encoded as event::pid (string pids: see string_id_base)
  std::int64_t tid = 0;             ///< as event::tid; unused for process_* kinds
  bool pid_is_string = false;
  bool tid_is_string = false;
  meta_kind kind = meta_kind::process_name;
  std::uint8_t reserved_ = 0;       ///< (the padding explicit, as event's)
  std::uint32_t text = 0;           ///< string id of the name or labels (0 for sort indexes)
  std::int64_t sort_index = 0;      ///< for the *_sort_index kinds
};

// The index writes the tables' bytes as they are (trace_index.cpp): every row type has its
// padding as named zero fields (`reserved_`), so a file holds no leftover heap bytes and one
// model always gives the same bytes. A new field must keep these sizes free of implicit
// padding (or change them on purpose, with index_format_version).
static_assert(sizeof(event) == 64 && sizeof(op_args) == 32 && sizeof(kernel_args) == 112 &&
              sizeof(memory_args) == 56 && sizeof(python_args) == 24 && sizeof(collective_args) == 56 &&
              sizeof(flow_event) == 40 && sizeof(track_meta) == 32);

struct distributed_meta {
  std::string backend;
  std::int64_t rank = -1;
  std::int64_t world_size = -1;
};

/// Counters of what loading saw and skipped (reported by `analyze --json` under diagnostics).
struct load_diagnostics {
  /// Every element of traceEvents counted by its raw `cat` ("Kernel", "cpu_op", "ac2g", ...);
  /// events without `cat` are counted as "<" + ph + ">" ("<M>", "<i>", "<X>" for legacy arrays),
  /// elements that are not objects as "<not an object>".
  std::map<std::string, std::uint64_t> events_by_category;
  /// Warning kind -> count. Kinds: "wrong type", "number written as a string", "id beyond int64"
  /// (2^63..2^64-1: the value keeps its bits, so it reads negative but ids still match),
  /// "number out of range", "number out of range or not an integer", "unreadable value",
  /// "invalid escape in string (kept literally)", "missing ph", "missing name", "missing ts", "X event without cat",
  /// "event is not an object", and file-level repairs: "invalid UTF-8 bytes replaced with '?'",
  /// "raw control characters inside strings replaced with spaces", "bare N/A tokens quoted",
  /// "trailing bytes after the gzip stream ignored", "Record Window End more than 86.4 s after
  /// Iteration Start (dropped, as the plugin does)". Args warnings count only where the field
  /// matters for the event's type (a cpu_op's string "grid" is not a kernel's bad grid).
  std::map<std::string, std::uint64_t> warnings;
  /// The first 20 warnings as text: "event #<index in traceEvents>: <kind> (<field>)",
  /// "top level: ..." or "file: ...".
  std::vector<std::string> messages;
  /// Bytes of JSON text parsed: a plain file's size, a gzip file's inflated size.
  std::uint64_t text_bytes = 0;
};

/// Non-numeric string pids/tids ("Spans", "CPU functions", "PyTorch Profiler", "") are stored as
/// `string_id_base - <string id of the text>`: equal texts get equal values inside one model, the
/// value never collides with a numeric id (numeric ids are > -2^40 in every real trace), and
/// trace_model::id_text() gives the text back. event::pid_is_string / tid_is_string flag them.
constexpr std::int64_t string_id_base = -(std::int64_t{1} << 40);

/// One loaded trace file.
struct trace_model {
  std::vector<std::string> strings{std::string()};  ///< index 0 is ""; add strings only through intern()
  std::vector<event> events;                  ///< X events of every type + [memory] instants, stable-sorted by ts
  std::vector<op_args> ops;                   ///< only for events with some op arg (see op_args)
  std::vector<kernel_args> kernels;
  std::vector<memory_args> memory;
  std::vector<python_args> python;
  std::vector<collective_args> collectives;   ///< from op_args::collective / kernel_args::collective
  std::vector<flow_event> fwdbwd;             ///< in file order
  std::vector<track_meta> track_metas;        ///< process/thread names, labels, sort indexes; in file order
  std::vector<device_info> devices;           ///< deviceProperties, index = device id
  std::optional<distributed_meta> distributed;
  bool lightning = false;                     ///< top-level "Framework": "pytorch-lightning"
  bool legacy_array = false;                  ///< the file was a bare JSON array (PyTorch without Kineto)
  std::int64_t schema_version = 0;
  std::int64_t base_time_ns = 0;              ///< "baseTimeNanoseconds" (era D+); 0 = absent
  /// The plugin's Record Window End fix (plugin-rules.md#discovery) fired: the file's "Record
  /// Window End" instant lies > 86 400 000 µs after "Iteration Start:". (Instants are not in
  /// `events`, so nothing else changes; the trace view should drop that instant when it serves the
  /// file.)
  bool record_window_end_dropped = false;
  load_diagnostics diagnostics;

  std::string_view str(std::uint32_t id) const { return strings[id]; }
  /// The string id of `s`, or no_index if it never occurs in this trace.
  std::uint32_t find_string(std::string_view s) const;
  /// Interns `s` (used by the loader and tests that build models by hand). Ids are dense and
  /// stable; the same text always gives the same id.
  std::uint32_t intern(std::string_view s);
  /// The text of a string pid/tid (see string_id_base); "" for numeric ids.
  std::string_view id_text(std::int64_t id, bool is_string) const;
  /// Heap bytes held by the tables and strings (capacities, not sizes, but for the untouched
  /// spare of big tables, see spare_kept_bytes; diagnostics excluded). The viewer keeps the
  /// model of every open file: benchmarks, tests and the server's memory budget watch this
  /// figure.
  std::size_t heap_bytes() const noexcept;
  /// A table of at least this many bytes keeps its spare capacity after a load: a block that
  /// large was mapped fresh from the kernel (glibc maps blocks past 32 MiB), so its pages past
  /// the table's end were never touched and cost address space, not memory; heap_bytes()
  /// counts such a table by its size. Shrinking them meant copying them into fresh pages: on a
  /// 10 GB trace 1.9 GB and 2.5 s of a 32 s index.
  static constexpr std::size_t spare_kept_bytes = std::size_t{64} << 20;

 private:
  /// Open-addressing hash index over `strings`: slot = (hash high 32 bits << 32) | (id + 1),
  /// 0 = empty; power-of-two size, at most half full. Index based, so copying the model is safe.
  std::vector<std::uint64_t> slots_;
  std::size_t indexed_ = 0;  ///< strings[0, indexed_) are in slots_
  void rebuild_index();
};

}  // namespace kinetoscope::analysis
