// SPDX-License-Identifier: BSD-3-Clause
// kinetoscope._engine: the analysis engine as a Python extension (nanobind). The pure-Python
// layer (python/kinetoscope/__init__.py) wraps it into kinetoscope.open() and DataFrames.
//
// Two ways numbers leave the engine, both column by column (no Python object per row but the
// strings themselves):
//  - events(): straight from the model's event table; names and categories as category codes
//    (int32) plus their texts, every number a NumPy array that owns the engine's buffer;
//  - the views' tables (overview, operators, kernels, memory, modules, distributed, diff): the
//    rows of `kinetoscope analyze --json`'s document (server/analysis_document.hpp, the same code
//    path), turned into columns here. Equal numbers by construction.
// Loading and analysis run without the GIL. Engine failures become kinetoscope.TraceError with
// the loader's file, byte offset, event index and reason.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "analysis/discovery.hpp"
#include "analysis/loader.hpp"
#include "analysis/model.hpp"
#include "analysis/rules.hpp"
#include "server/analysis_document.hpp"
#include "server/trace_index.hpp"

namespace nb = nanobind;
namespace an = kinetoscope::analysis;
namespace sv = kinetoscope::server;
using ojson = nlohmann::ordered_json;

namespace {

// ---- errors --------------------------------------------------------------------------------

/// A failure of the engine with the loader's details (file, byte offset, event index, reason).
struct trace_failure {
  std::string message;
  std::string file;
  std::optional<std::uint64_t> byte_offset;
  std::optional<std::int64_t> event_index;
  std::string reason;
};

PyObject* trace_error_type = nullptr;

trace_failure failure_of(const an::load_error& e) {
  trace_failure f{e.message(), e.file, std::nullopt, std::nullopt, e.reason};
  if (e.byte_offset) f.byte_offset = e.byte_offset;
  if (e.event_index >= 0) f.event_index = e.event_index;
  return f;
}

// ---- columns -------------------------------------------------------------------------------

/// A NumPy array that owns `values` (moved onto the heap; freed with the array).
template <typename T>
nb::object numpy_array(std::vector<T>&& values) {
  auto* owned = new std::vector<T>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  const std::size_t shape[1] = {owned->size()};
  return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(owned->data(), 1, shape, owner));
}

nb::object to_python(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::null: return nb::none();
    case ojson::value_t::boolean: return nb::bool_(v.get<bool>());
    case ojson::value_t::number_integer: return nb::int_(v.get<std::int64_t>());
    case ojson::value_t::number_unsigned: return nb::steal(PyLong_FromUnsignedLongLong(v.get<std::uint64_t>()));
    case ojson::value_t::number_float: return nb::float_(v.get<double>());
    case ojson::value_t::string: return nb::str(v.get_ref<const std::string&>().c_str(), v.get_ref<const std::string&>().size());
    case ojson::value_t::array: {
      nb::list l;
      for (const auto& e : v) l.append(to_python(e));
      return l;
    }
    case ojson::value_t::object: {
      nb::dict d;
      for (const auto& [k, e] : v.items()) d[nb::str(k.c_str(), k.size())] = to_python(e);
      return d;
    }
    default: return nb::none();
  }
}

/// Rows of a table as columns. A row is a flat list of (column, value); nested objects of the
/// document are flattened by the caller ("calls" {"baseline": ..} -> "calls_baseline").
using flat_row = std::vector<std::pair<std::string, const ojson*>>;

void flatten(const ojson& obj, const std::string& prefix, flat_row& out) {
  for (const auto& [k, v] : obj.items()) {
    const std::string name = prefix.empty() ? k : prefix + "_" + k;
    if (v.is_object()) flatten(v, name, out);
    else out.emplace_back(name, &v);
  }
}

/// The columns of `rows` in first-seen order: int64 where every row has an integer, float64
/// (NaN for null or absent) where every value is a number or null, bool where every row has a
/// boolean, else a list of Python objects (strings; None for null or absent).
nb::dict columns(const std::vector<flat_row>& rows, const flat_row& empty_shape = {}) {
  if (rows.empty()) {
    // No row: the columns of `empty_shape` (the table's fields at their defaults), typed alike.
    nb::dict out;
    for (const auto& [k, v] : empty_shape) {
      const nb::str name(k.c_str(), k.size());
      if (v->is_boolean()) out[name] = numpy_array(std::vector<std::uint8_t>{}).attr("astype")("bool");
      else if (v->is_number_integer() || v->is_number_unsigned()) out[name] = numpy_array(std::vector<std::int64_t>{});
      else if (v->is_number() || v->is_null()) out[name] = numpy_array(std::vector<double>{});
      else out[name] = nb::list();
    }
    return out;
  }
  std::vector<std::string> order;
  std::map<std::string, std::size_t> index;
  for (const auto& r : rows)
    for (const auto& [k, v] : r)
      if (index.emplace(k, order.size()).second) order.push_back(k);
  const std::size_t n = rows.size();
  std::vector<std::vector<const ojson*>> cells(order.size(), std::vector<const ojson*>(n, nullptr));
  for (std::size_t i = 0; i < n; ++i)
    for (const auto& [k, v] : rows[i]) cells[index[k]][i] = v;
  nb::dict out;
  for (std::size_t c = 0; c < order.size(); ++c) {
    const auto& col = cells[c];
    bool all_int = true, all_number = true, all_bool = true;
    for (const ojson* v : col) {
      const bool present = v && !v->is_null();
      all_int = all_int && present && (v->is_number_integer() || v->is_number_unsigned()) &&
                !(v->is_number_unsigned() && v->get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max()));
      all_number = all_number && (!present || v->is_number());
      all_bool = all_bool && present && v->is_boolean();
    }
    const nb::str name(order[c].c_str(), order[c].size());
    if (n > 0 && all_bool) {
      std::vector<std::uint8_t> bytes;
      for (const ojson* v : col) bytes.push_back(v->get<bool>() ? 1 : 0);
      out[name] = numpy_array(std::move(bytes)).attr("astype")("bool");
    } else if (n > 0 && all_int) {
      std::vector<std::int64_t> xs;
      xs.reserve(n);
      for (const ojson* v : col) xs.push_back(v->get<std::int64_t>());
      out[name] = numpy_array(std::move(xs));
    } else if (all_number) {
      std::vector<double> xs;
      xs.reserve(n);
      for (const ojson* v : col) xs.push_back(v && !v->is_null() ? v->get<double>() : std::nan(""));
      out[name] = numpy_array(std::move(xs));
    } else {
      nb::list l;
      for (const ojson* v : col) l.append(v ? to_python(*v) : nb::none());
      out[name] = l;
    }
  }
  return out;
}

/// Rows of a JSON array of objects, each flattened; `extra` columns are put first.
void add_rows(const ojson& array, std::vector<flat_row>& rows, const flat_row& extra = {}) {
  if (!array.is_array()) return;
  for (const auto& r : array) {
    flat_row row = extra;
    if (r.is_object()) flatten(r, "", row);
    rows.push_back(std::move(row));
  }
}

// ---- the event table -------------------------------------------------------------------------

/// The category column's texts: Kineto's names for each event type (ph "X" events; memory
/// instants are "[memory]" ph "i" events, whatever cat they had).
const char* category_name(an::event_type type, bool gpu_annotation) {
  switch (type) {
    case an::event_type::trace: return "Trace";
    case an::event_type::op: return "cpu_op";
    case an::event_type::user_annotation: return gpu_annotation ? "gpu_user_annotation" : "user_annotation";
    case an::event_type::python: return "python";
    case an::event_type::python_function: return "python_function";
    case an::event_type::module: return "python_function";
    case an::event_type::runtime: return "cuda_runtime";
    case an::event_type::driver: return "cuda_driver";
    case an::event_type::kernel: return "kernel";
    case an::event_type::memcpy: return "gpu_memcpy";
    case an::event_type::memset: return "gpu_memset";
    case an::event_type::memory: return "cpu_instant_event";
    case an::event_type::other: return "other";
  }
  return "other";
}

/// Events by (type, gpu_annotation): the per-event key of the category column and filter, so
/// that the event loop compares no strings.
constexpr std::size_t category_slots = (static_cast<std::size_t>(an::event_type::other) + 1) * 2;
std::size_t category_slot(const an::event& e) { return static_cast<std::size_t>(e.type) * 2 + (e.gpu_annotation ? 1 : 0); }
const char* category_name(std::size_t slot) { return category_name(static_cast<an::event_type>(slot / 2), slot % 2 != 0); }

/// Codes of a categorical column: string id -> dense code, in first-use order.
struct coder {
  std::vector<std::int32_t> code_of;  // by string id; -1 = not used yet
  std::vector<std::uint32_t> ids;     // by code
  std::vector<std::int32_t> codes;    // the column
  explicit coder(std::size_t strings) : code_of(strings, -1) {}
  void push(std::uint32_t id) {
    if (code_of[id] < 0) {
      code_of[id] = static_cast<std::int32_t>(ids.size());
      ids.push_back(id);
    }
    codes.push_back(code_of[id]);
  }
  void push_missing() { codes.push_back(-1); }  // pandas' code for a missing value
  nb::tuple result(const an::trace_model& m) {
    nb::list texts;
    for (std::uint32_t id : ids) texts.append(nb::str(m.strings[id].data(), m.strings[id].size()));
    return nb::make_tuple(numpy_array(std::move(codes)), texts);
  }
};

/// What events() returns: plain columns (NumPy arrays) and categorical ones (codes, texts).
nb::dict event_columns(const an::trace_model& m, const std::vector<std::string>& cats, std::optional<double> start,
                       std::optional<double> end, bool with_args) {
  const std::size_t n_all = m.events.size();
  std::vector<std::uint32_t> picked;
  picked.reserve(n_all);
  bool any_op = false, any_kernel = false, any_memory = false, any_python = false;
  std::array<bool, category_slots> wanted{};
  for (std::size_t slot = 0; slot < category_slots; ++slot)
    wanted[slot] = cats.empty() || std::find(cats.begin(), cats.end(), category_name(slot)) != cats.end();
  for (std::uint32_t i = 0; i < n_all; ++i) {
    const an::event& e = m.events[i];
    if (!wanted[category_slot(e)]) continue;
    // An event is in the window when it overlaps it; an instant when it lies inside.
    if (start && (e.dur > 0 ? e.end() <= *start : e.ts < *start)) continue;
    if (end && e.ts >= *end) continue;
    picked.push_back(i);
    switch (e.type) {
      case an::event_type::op:
      case an::event_type::user_annotation:
      case an::event_type::python: any_op = true; break;
      case an::event_type::kernel: any_kernel = true; break;
      case an::event_type::memory: any_memory = true; break;
      case an::event_type::python_function:
      case an::event_type::module: any_python = true; break;
      default: break;
    }
  }
  const std::size_t n = picked.size();
  coder names(m.strings.size());
  std::vector<std::int32_t> cat_codes;
  std::vector<std::string> cat_texts;        // by code, in first-use order
  std::array<std::int32_t, category_slots> cat_code_of;
  cat_code_of.fill(-1);
  std::vector<std::uint8_t> ph_codes;
  std::vector<double> ts, dur;
  std::vector<std::int64_t> pid, tid, stream, correlation, external_id;
  ts.reserve(n), dur.reserve(n), pid.reserve(n), tid.reserve(n), stream.reserve(n), correlation.reserve(n),
      external_id.reserve(n), cat_codes.reserve(n), ph_codes.reserve(n);
  for (std::uint32_t i : picked) {
    const an::event& e = m.events[i];
    names.push(e.name);
    std::int32_t& code = cat_code_of[category_slot(e)];
    if (code < 0) {  // first event of this slot: the code of its text (slots may share one)
      const char* c = category_name(category_slot(e));
      const auto at = std::find(cat_texts.begin(), cat_texts.end(), c);
      code = static_cast<std::int32_t>(at - cat_texts.begin());
      if (at == cat_texts.end()) cat_texts.emplace_back(c);
    }
    cat_codes.push_back(code);
    ph_codes.push_back(e.type == an::event_type::memory ? 1 : 0);
    ts.push_back(e.ts);
    dur.push_back(e.dur);
    pid.push_back(e.pid_is_string ? -1 : e.pid);
    tid.push_back(e.tid_is_string ? -1 : e.tid);
    std::int64_t s = -1;
    if (e.type == an::event_type::kernel || e.type == an::event_type::memcpy || e.type == an::event_type::memset ||
        (e.type == an::event_type::user_annotation && e.gpu_annotation)) {
      s = e.tid_is_string ? -1 : e.tid;
      if (e.type == an::event_type::kernel && e.extra != an::no_index && m.kernels[e.extra].stream >= 0)
        s = m.kernels[e.extra].stream;
    }
    stream.push_back(s);
    correlation.push_back(e.correlation != 0 ? e.correlation : -1);
    external_id.push_back(e.has_external_id ? e.external_id : -1);
  }
  nb::dict plain, categorical;
  categorical["name"] = names.result(m);
  {
    nb::list texts;
    for (const auto& t : cat_texts) texts.append(nb::str(t.c_str(), t.size()));
    categorical["cat"] = nb::make_tuple(numpy_array(std::move(cat_codes)), texts);
  }
  {
    std::vector<std::int32_t> codes(ph_codes.begin(), ph_codes.end());
    categorical["ph"] = nb::make_tuple(numpy_array(std::move(codes)), nb::make_tuple("X", "i"));
  }
  plain["ts"] = numpy_array(std::move(ts));
  plain["dur"] = numpy_array(std::move(dur));
  plain["pid"] = numpy_array(std::move(pid));
  plain["tid"] = numpy_array(std::move(tid));
  plain["stream"] = numpy_array(std::move(stream));
  plain["correlation"] = numpy_array(std::move(correlation));
  plain["external_id"] = numpy_array(std::move(external_id));

  if (with_args && any_op) {
    coder dims(m.strings.size()), types(m.strings.size()), stack(m.strings.size());
    std::vector<std::int64_t> seq, fwd;
    for (std::uint32_t i : picked) {
      const an::event& e = m.events[i];
      const bool has = (e.type == an::event_type::op || e.type == an::event_type::user_annotation ||
                        e.type == an::event_type::python) && e.extra != an::no_index;
      const an::op_args a = has ? m.ops[e.extra] : an::op_args{};
      a.input_dims ? dims.push(a.input_dims) : dims.push_missing();
      a.input_types ? types.push(a.input_types) : types.push_missing();
      a.call_stack ? stack.push(a.call_stack) : stack.push_missing();
      seq.push_back(a.sequence_nr);
      fwd.push_back(a.fwd_thread_id);
    }
    categorical["input_dims"] = dims.result(m);
    categorical["input_types"] = types.result(m);
    categorical["call_stack"] = stack.result(m);
    plain["sequence_nr"] = numpy_array(std::move(seq));
    plain["fwd_thread_id"] = numpy_array(std::move(fwd));
  }
  if (with_args && any_kernel) {
    std::vector<std::int64_t> device, gx, gy, gz, bx, by, bz, regs, smem;
    std::vector<double> bps, occ;
    constexpr double nan = std::numeric_limits<double>::quiet_NaN();
    for (std::uint32_t i : picked) {
      const an::event& e = m.events[i];
      const bool has = e.type == an::event_type::kernel && e.extra != an::no_index;
      const an::kernel_args k = has ? m.kernels[e.extra] : an::kernel_args{};
      device.push_back(k.device);
      gx.push_back(k.has_grid ? k.grid[0] : -1), gy.push_back(k.has_grid ? k.grid[1] : -1),
          gz.push_back(k.has_grid ? k.grid[2] : -1);
      bx.push_back(k.has_block ? k.block[0] : -1), by.push_back(k.has_block ? k.block[1] : -1),
          bz.push_back(k.has_block ? k.block[2] : -1);
      regs.push_back(k.has_registers ? k.registers_per_thread : -1);
      smem.push_back(k.has_shared_memory ? k.shared_memory : -1);
      bps.push_back(k.has_blocks_per_sm ? k.blocks_per_sm : nan);
      occ.push_back(k.has_occupancy ? k.occupancy : nan);
    }
    plain["device"] = numpy_array(std::move(device));
    plain["grid_x"] = numpy_array(std::move(gx));
    plain["grid_y"] = numpy_array(std::move(gy));
    plain["grid_z"] = numpy_array(std::move(gz));
    plain["block_x"] = numpy_array(std::move(bx));
    plain["block_y"] = numpy_array(std::move(by));
    plain["block_z"] = numpy_array(std::move(bz));
    plain["registers_per_thread"] = numpy_array(std::move(regs));
    plain["shared_memory"] = numpy_array(std::move(smem));
    plain["blocks_per_sm"] = numpy_array(std::move(bps));
    plain["occupancy_pct"] = numpy_array(std::move(occ));
  }
  if (with_args && any_memory) {
    std::vector<std::int64_t> dtype, did, bytes, addr;
    std::vector<double> allocated, reserved;
    for (std::uint32_t i : picked) {
      const an::event& e = m.events[i];
      const bool has = e.type == an::event_type::memory && e.extra != an::no_index;
      const an::memory_args a = has ? m.memory[e.extra] : an::memory_args{};
      dtype.push_back(a.device_type);
      did.push_back(a.device_id);
      bytes.push_back(has ? a.bytes : 0);
      addr.push_back(a.has_addr ? static_cast<std::int64_t>(a.addr) : -1);
      allocated.push_back(a.total_allocated);
      reserved.push_back(a.total_reserved);
    }
    plain["memory_device_type"] = numpy_array(std::move(dtype));
    plain["memory_device_id"] = numpy_array(std::move(did));
    plain["bytes"] = numpy_array(std::move(bytes));
    plain["addr"] = numpy_array(std::move(addr));
    plain["total_allocated"] = numpy_array(std::move(allocated));
    plain["total_reserved"] = numpy_array(std::move(reserved));
  }
  if (with_args && any_python) {
    std::vector<std::int64_t> python_id, parent_id, module_id;
    for (std::uint32_t i : picked) {
      const an::event& e = m.events[i];
      const bool has = (e.type == an::event_type::python_function || e.type == an::event_type::module) &&
                       e.extra != an::no_index;
      const an::python_args a = has ? m.python[e.extra] : an::python_args{};
      python_id.push_back(a.python_id);
      parent_id.push_back(a.parent_id);
      module_id.push_back(a.module_id);
    }
    plain["python_id"] = numpy_array(std::move(python_id));
    plain["python_parent_id"] = numpy_array(std::move(parent_id));
    plain["python_module_id"] = numpy_array(std::move(module_id));
  }
  nb::dict out;
  out["columns"] = plain;
  out["categorical"] = categorical;
  return out;
}

// ---- the Trace class -----------------------------------------------------------------------

an::rule_set parse_rules(const std::string& name) {
  const auto r = an::parse_rule_set(name);
  if (!r) throw nb::value_error(("rules must be 'kinetoscope' or 'plugin' (got '" + name + "')").c_str());
  return *r;
}

/// One loaded trace file and the run it belongs to.
class trace {
 public:
  trace(const std::string& path, const std::string& worker, const std::string& span, const std::string& cache_dir,
        std::uint64_t max_file_size)
      : cache_dir_(cache_dir) {
    load_.max_text_bytes = max_file_size;
    std::optional<trace_failure> failure;
    {
      nb::gil_scoped_release unlocked;
      try {
        chosen_ = sv::choose_trace(path, worker, span);
        const auto t0 = std::chrono::steady_clock::now();
        an::load_result r = sv::load_model(chosen_.path, load_, cache_dir_);
        load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r.ok()) model_ = std::make_shared<const an::trace_model>(std::move(*r.model));
        else if (r.error) failure = failure_of(*r.error);
        else failure = trace_failure{chosen_.path + ": cannot load", chosen_.path, {}, {}, "cannot load"};
      } catch (const std::exception& e) {
        failure = trace_failure{e.what(), path, {}, {}, e.what()};
      }
    }
    if (failure) throw *failure;
  }

  const std::string& path() const { return chosen_.path; }
  const std::string& run() const { return chosen_.run; }
  const std::string& worker() const { return chosen_.worker; }
  const std::string& span() const { return chosen_.span; }
  double load_seconds() const { return load_seconds_; }
  std::optional<std::int64_t> rank() const {
    if (model_->distributed && model_->distributed->rank >= 0) return model_->distributed->rank;
    return std::nullopt;
  }
  std::size_t event_count() const { return model_->events.size(); }
  std::size_t heap_bytes() const { return model_->heap_bytes(); }

  /// analyze --json's document for `view` ("" = all), as Python objects.
  nb::object document(const std::string& view, const std::string& rules,
                      std::optional<std::pair<double, double>> memory_range, const std::string& diff_path) const {
    return to_python(compute(view, rules, memory_range, diff_path));
  }

  /// One table of the document as columns: `view` selects the view, `table` names the rows.
  nb::dict table(const std::string& view, const std::string& table, const std::string& rules,
                 std::optional<std::pair<double, double>> memory_range) const {
    const ojson doc = compute(view, rules, memory_range, "");
    std::vector<flat_row> rows;
    // An empty table still has its columns: lead columns, then the row's fields at defaults.
    static const ojson text = "", integer = 0, real = 0.0;
    const ojson tmpl = sv::row_template(table);
    flat_row shape;
    if (table == "memory_stats") shape = {{"device", &text}};
    if (table == "memory_curve") shape = {{"device", &text}, {"ts", &real}, {"allocated", &real}, {"reserved", &real}};
    if (table == "memory_peaks")
      shape = {{"device", &text}, {"peak_allocated_bytes", &integer}, {"peak_reserved_bytes", &integer}};
    if (table == "modules") shape = {{"depth", &integer}, {"parent", &text}};
    if (table.starts_with("distributed_")) shape = {{"worker", &text}};
    if (table == "distributed_overlap")
      for (const char* k : {"computation_us", "overlap_us", "communication_us", "other_us", "data_transfer_us",
                            "synchronizing_us"})
        shape.emplace_back(k, &real);
    for (const auto& [k, v] : tmpl.items())
      if (k != "children" && !v.is_object()) shape.emplace_back(k, &v);
      else if (v.is_object()) flatten(v, k, shape);
    if (table == "steps") {
      add_rows(doc["overview"]["steps"], rows);
    } else if (table == "gpus") {
      add_rows(doc["overview"]["gpus"], rows);
    } else if (table == "operators_by_name") {
      add_rows(doc["operators"]["by_name"], rows);
    } else if (table == "operators_by_name_and_input_shape") {
      add_rows(doc["operators"]["by_name_and_input_shape"], rows);
    } else if (table == "kernels_by_name") {
      add_rows(doc["kernels"]["by_name"], rows);
    } else if (table == "kernels_by_name_and_operator") {
      add_rows(doc["kernels"]["by_name_and_operator"], rows);
    } else if (table == "memory_stats") {
      for (const auto& d : doc["memory"]["devices"]) add_rows(d["stats"], rows, {{"device", &d["device"]}});
    } else if (table == "memory_curve" || table == "memory_peaks") {
      // Curve points: [µs from the trace's start, allocated bytes, reserved bytes].
      for (const auto& d : doc["memory"]["devices"]) {
        if (table == "memory_peaks") {
          rows.push_back({{"device", &d["device"]},
                          {"peak_allocated_bytes", &d["peak_allocated_bytes"]},
                          {"peak_reserved_bytes", &d["peak_reserved_bytes"]}});
          continue;
        }
        for (const auto& p : d["curve"]) rows.push_back({{"device", &d["device"]}, {"ts", &p[0]}, {"allocated", &p[1]},
                                                        {"reserved", &p[2]}});
      }
      return columns(rows, shape);
    } else if (table == "modules") {
      std::vector<std::unique_ptr<ojson>> cells;  // depth and parent of each row
      module_rows(doc["modules"], 0, "", rows, cells);
      return columns(rows, shape);
    } else if (table.starts_with("distributed_") && !doc.contains("distributed")) {
      throw no_distributed_view("a single trace file, not a run folder");
    } else if (table.starts_with("distributed_") && !doc["distributed"]["available"].get<bool>()) {
      throw no_distributed_view(doc["distributed"]["reason"].get<std::string>());
    } else if (table == "distributed_overlap") {
      for (const auto& w : doc["distributed"]["workers"]) {
        flat_row r{{"worker", &w["worker"]}};
        flatten(w["overlap"], "", r);
        flatten(w["wait"], "", r);
        rows.push_back(std::move(r));
      }
    } else if (table == "distributed_comm_ops") {
      for (const auto& w : doc["distributed"]["workers"]) add_rows(w["comm_ops"], rows, {{"worker", &w["worker"]}});
    } else {
      throw nb::value_error(("no table '" + table + "'").c_str());
    }
    return columns(rows, shape);
  }

  /// The diff view's rows against `other` (this trace is the baseline), as columns.
  nb::dict diff(const trace& other, const std::string& rules) const {
    const an::rule_set r = parse_rules(rules);
    ojson rows_doc;
    {
      nb::gil_scoped_release unlocked;
      rows_doc = sv::diff_rows(*model_, *other.model_, r);
    }
    std::vector<flat_row> rows;
    add_rows(rows_doc, rows);
    const ojson tmpl = sv::row_template("diff");
    flat_row shape;
    flatten(tmpl, "", shape);
    return columns(rows, shape);
  }

  nb::dict events(const std::vector<std::string>& cats, std::optional<double> start, std::optional<double> end,
                  bool with_args) const {
    return event_columns(*model_, cats, start, end, with_args);
  }

 private:
  trace_failure no_distributed_view(const std::string& why) const {
    const std::string message = chosen_.path + ": no distributed view: " + why;
    return trace_failure{message, chosen_.path, {}, {}, "no distributed view: " + why};
  }

  /// The module tree depth first: each node a row with its depth and its ancestors' names
  /// ("Net/Sequential"); their cells live in `cells`.
  static void module_rows(const ojson& nodes, std::int64_t depth, const std::string& parent,
                          std::vector<flat_row>& rows, std::vector<std::unique_ptr<ojson>>& cells) {
    for (const auto& n : nodes) {
      flat_row r;
      r.emplace_back("depth", cells.emplace_back(std::make_unique<ojson>(depth)).get());
      r.emplace_back("parent", cells.emplace_back(std::make_unique<ojson>(parent)).get());
      for (const auto& [k, v] : n.items())
        if (k != "children") r.emplace_back(k, &v);
      rows.push_back(std::move(r));
      const std::string name = n.contains("name") && n["name"].is_string() ? n["name"].get<std::string>() : "";
      module_rows(n["children"], depth + 1, parent.empty() ? name : parent + "/" + name, rows, cells);
    }
  }

  ojson compute(const std::string& view, const std::string& rules,
                std::optional<std::pair<double, double>> memory_range, const std::string& diff_path) const {
    sv::document_options o;
    o.view = view;
    o.rules = parse_rules(rules);
    o.memory_range = memory_range;
    o.diff_path = diff_path;
    o.load = load_;
    o.cache_dir = cache_dir_;
    std::optional<trace_failure> failure;
    ojson doc;
    {
      nb::gil_scoped_release unlocked;
      try {
        doc = sv::analysis_document(chosen_, *model_, load_seconds_, o);
      } catch (const std::exception& e) {
        failure = trace_failure{e.what(), chosen_.path, {}, {}, e.what()};
      }
    }
    if (failure) throw *failure;
    return doc;
  }

  sv::chosen_trace chosen_;
  std::shared_ptr<const an::trace_model> model_;
  an::load_options load_;
  std::string cache_dir_;
  double load_seconds_ = 0;
};

}  // namespace

NB_MODULE(_engine, m) {
  m.doc() = "kinetoscope's analysis engine (C++); use the kinetoscope package, not this module";

  // The exception class is pure Python (kinetoscope/_errors.py): importable without the engine.
  // One reference kept for the life of the process (never released at interpreter exit).
  trace_error_type = nb::object(nb::module_::import_("kinetoscope._errors").attr("TraceError")).release().ptr();
  m.attr("TraceError") = nb::handle(trace_error_type);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const trace_failure& f) {
      nb::object exc = nb::borrow(trace_error_type)(nb::str(f.message.c_str(), f.message.size()));
      exc.attr("file") = nb::str(f.file.c_str(), f.file.size());
      exc.attr("byte_offset") = f.byte_offset ? nb::cast(*f.byte_offset) : nb::none();
      exc.attr("event_index") = f.event_index ? nb::cast(*f.event_index) : nb::none();
      exc.attr("reason") = nb::str(f.reason.c_str(), f.reason.size());
      PyErr_SetObject(trace_error_type, exc.ptr());
    }
  });

  m.def(
      "discover",
      [](const std::string& path) {
        std::vector<an::trace_file> files;
        {
          nb::gil_scoped_release unlocked;
          files = an::discover(path);
        }
        nb::list out;
        for (const auto& f : files) out.append(nb::make_tuple(f.path, f.run, f.worker, f.span));
        return out;
      },
      nb::arg("path"), "The trace files under a folder: (path, run, worker, span) tuples.");
  m.def("default_cache_dir", &sv::default_cache_dir, "Where the index cache lives (as kinetoscope --logdir's).");
  m.attr("default_max_file_size") = an::default_max_text_bytes;

  nb::class_<trace>(m, "Trace")
      .def(nb::init<const std::string&, const std::string&, const std::string&, const std::string&, std::uint64_t>(),
           nb::arg("path"), nb::arg("worker") = "", nb::arg("span") = "", nb::arg("cache_dir") = "",
           nb::arg("max_file_size") = an::default_max_text_bytes)
      .def_prop_ro("path", &trace::path)
      .def_prop_ro("run", &trace::run)
      .def_prop_ro("worker", &trace::worker)
      .def_prop_ro("span", &trace::span)
      .def_prop_ro("rank", &trace::rank)
      .def_prop_ro("load_seconds", &trace::load_seconds)
      .def_prop_ro("event_count", &trace::event_count)
      .def_prop_ro("heap_bytes", &trace::heap_bytes)
      .def("document", &trace::document, nb::arg("view") = "", nb::arg("rules") = "kinetoscope",
           nb::arg("memory_range") = nb::none(), nb::arg("diff_path") = "")
      .def("table", &trace::table, nb::arg("view"), nb::arg("table"), nb::arg("rules") = "kinetoscope",
           nb::arg("memory_range") = nb::none())
      .def("diff", &trace::diff, nb::arg("other"), nb::arg("rules") = "kinetoscope")
      .def("events", &trace::events, nb::arg("cats") = std::vector<std::string>{}, nb::arg("start") = nb::none(),
           nb::arg("end") = nb::none(), nb::arg("with_args") = true);
}
