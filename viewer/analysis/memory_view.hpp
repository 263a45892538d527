// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file memory_view.hpp
/// The Memory view of torch-tb-profiler 0.4.3 (docs/plugin-rules.md#memory-view): `[memory]`
/// records, their attribution to operators, the per-device memory curve and peaks, the
/// allocation/free events table and the per-operator statistics table, both filterable by a time
/// range.
///
///     trace_model ─► records        ─► attribution walk over op_trees        ─┬─► statistics
///                         │                                                   └─► free ← alloc op name
///                         ├─► curve + peaks                                        │
///                         └─► events table        ◄──────────────────────────────────┘
///     (all in docs/plugin-rules.md#memory-view)
///
/// Units: times are µs (curve and table times relative to `memory_result::first_ts`, range
/// bounds absolute like event `ts`), sizes are bytes. The HTTP layer converts to the requested
/// units (parse_time_unit / parse_memory_unit, default ms and KB / MB) and applies
/// memory_display_round() to table numbers as the plugin did.
///
/// **Example**:
/// @code
/// auto trees = build_op_tree(model);
/// memory_result all = compute_memory(model, trees);
/// memory_result zoomed = compute_memory(model, trees, std::pair{all.first_ts + 1000.0, all.first_ts + 2000.0});
/// // Many ranges of one trace (the server): index once, then each range costs milliseconds.
/// memory_index index = build_memory_index(model, trees);
/// memory_result same = compute_memory_range(index, model, trees, {all.first_ts + 1000.0, all.first_ts + 2000.0});
/// @endcode

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/model.hpp"
#include "analysis/op_tree.hpp"

namespace kinetoscope::analysis {

/// One row of the statistics table (plugin-rules.md#memory-view) for one device. Sizes in bytes
/// (frees negative).
struct memory_stat_row {
  std::string name;                          ///< operator name
  std::int64_t calls = 0;                    ///< visited operator nodes with this name (all devices)
  std::int64_t size_increase_bytes = 0;      ///< self + all descendants
  std::int64_t self_size_increase_bytes = 0;
  std::int64_t allocation_count = 0;
  std::int64_t self_allocation_count = 0;
  std::int64_t allocation_size_bytes = 0;
  std::int64_t self_allocation_size_bytes = 0;
};

/// One row of the memory events table (plugin-rules.md#memory-view). Times in µs relative to
/// memory_result::first_ts.
struct memory_event_row {
  /// `<op>`, `<parent> (<op>)` when the op starts with `aten::empty` and has a parent, or
  /// `<unknown>` (the plugin's "Operator" column).
  std::string op_name;
  std::int64_t size_bytes = 0;                  ///< allocation size (positive)
  std::optional<double> allocation_time_us;     ///< nullopt for an unpaired free
  std::optional<double> release_time_us;        ///< nullopt for an allocation never freed
  std::optional<double> duration_us;            ///< release − allocation, paired rows only
};

/// Everything the Memory view shows for one device ("CPU", "GPU0", …).
struct memory_device {
  std::string device;
  /// max "Total Allocated" / "Total Reserved" over the curve's records (0 when none). The
  /// plugin titles the chart "Peak Memory Usage: <peak_allocated·mf %.1f><unit>".
  std::int64_t peak_allocated_bytes = 0;
  std::int64_t peak_reserved_bytes = 0;
  /// Time of the first record reaching peak_allocated_bytes (µs relative to first_ts); for a
  /// peak marker (the plugin has none). nullopt when the curve is empty.
  std::optional<double> peak_time_us;
  /// [time_us, allocated, reserved], already in the plugin's step shape (before each point but
  /// the first, [this time, previous allocated, previous reserved] is inserted) and **not**
  /// down-sampled: use downsample_memory_curve() for the plugin's 10 240-point limit.
  /// Empty when the device has no record with an address and non-NaN totals.
  std::vector<std::array<double, 3>> curve;
  /// Statistics table, sorted by operator name (rows where any of the six metrics is non-zero).
  std::vector<memory_stat_row> stats;
  /// Events table: paired rows in free order, then unfreed allocations, then unpaired frees.
  std::vector<memory_event_row> events;
  /// Device capacity (deviceProperties totalGlobalMem) for GPUs that have it (quirk Q11 fixed:
  /// the plugin always sent `{}`); nullopt for CPU or when unknown.
  std::optional<std::int64_t> capacity_bytes;
};

/// Counters for diagnostics and UI notes.
struct memory_counts {
  std::uint64_t records = 0;                 ///< [memory] records of known devices
  std::uint64_t records_without_addr = 0;    ///< pre-1.10 records (statistics only)
  std::uint64_t unknown_device_records = 0;  ///< Device Type other than 0/1: skipped everywhere (Q18)
  std::uint64_t attributed_records = 0;      ///< records that landed on an operator (#memory-view)
  /// Allocations at an address that still had an open allocation in the events table: the
  /// earlier one is silently replaced (quirk Q16 replicated, counted here).
  std::uint64_t replaced_allocations = 0;
  std::uint64_t repeated_frees = 0;          ///< unpaired frees of an address already freed unpaired
  /// Devices whose records carry no "Total Allocated" at all and whose curve was rebuilt from the
  /// running sum of "Bytes" (op_tree_options::rebuild_memory_totals, docs/kinetoscope-rules.md#k5;
  /// "Total Reserved" is then unknown and drawn equal to the allocated total).
  std::uint64_t rebuilt_total_devices = 0;
};

/// The Memory view of one trace file.
struct memory_result {
  bool present = false;            ///< the trace has any [memory] event (the view exists)
  double first_ts = 0;             ///< profiler_start_ts (#event-categories), absolute µs
  /// Devices sorted by name as strings ("CPU" < "GPU0" < "GPU10" < "GPU2"): every device with a
  /// curve point, a statistics row or an events row.
  std::vector<memory_device> devices;
  /// First device name starting with "GPU", else "CPU" (the plugin's default_device).
  std::string default_device = "CPU";
  memory_counts counts;

  /// The device named `name`, or nullptr.
  const memory_device* device(std::string_view name) const;
};

/**
 * Computes the Memory view. `trees` must be built from `model`. `range` = absolute µs bounds
 * `[start, end]` applied to the events and statistics tables as the plugin applied
 * `start_ts`/`end_ts`: **both bounds inclusive** for records, and a tree node is skipped when
 * it ends before `start` or starts after `end` (pass ±infinity for a one-sided bound). The
 * curve, peaks and counts ignore the range (the plugin never re-requests the curve).
 */
memory_result compute_memory(const trace_model& model, const op_trees& trees,
                             std::optional<std::pair<double, double>> range = {});

/// Which parts of a memory_result compute_memory_range() fills (the rest stays empty / zero).
struct memory_parts {
  bool curve = true;   ///< memory_device::curve (copied from the index; peaks are always set)
  bool stats = true;   ///< memory_device::stats
  /// memory_device::events and the range-dependent counts (replaced_allocations, repeated_frees).
  bool events = true;
};

/**
 * Everything of the Memory view that does not depend on the range, computed once per loaded
 * trace by build_memory_index(): the records with an address in time order with their device,
 * operator text and neighbouring records at the same address (the events table's pairing), the
 * per-device curves and peaks, and the statistics walk flattened to a pre-order list of the
 * tree nodes it can reach, each with its attributed records. compute_memory_range() then answers
 * a range with two binary searches, one pass over the records in range and one pass over that
 * list that skips every sub-tree outside the range (no maps, no recursion).
 *
 * Self-contained (no pointer into the model or the trees); move-only.
 */
class memory_index {
 public:
  memory_index();
  ~memory_index();
  memory_index(memory_index&&) noexcept;
  memory_index& operator=(memory_index&&) noexcept;
  memory_index(const memory_index&) = delete;
  memory_index& operator=(const memory_index&) = delete;

  /// The trace has a Memory view (memory_result::present).
  bool present() const noexcept;
  /// Approximate heap bytes held (for diagnostics and benchmarks).
  std::size_t memory_bytes() const noexcept;
  /// Whether compute_memory_range() reads its `trees` argument (the index could not be used:
  /// a record time is NaN, or 2³² records or nodes). When false, any op_trees may be passed.
  bool reads_trees() const noexcept;

  struct data;  ///< implementation detail (memory_view.cpp)

 private:
  friend memory_index build_memory_index(const trace_model& model, const op_trees& trees);
  friend memory_result compute_memory_range(const memory_index& index, const trace_model& model,
                                            const op_trees& trees, std::pair<double, double> range,
                                            memory_parts parts);
  std::unique_ptr<data> d_;
};

/// Builds the range-independent part of the Memory view of `model` (`trees` built from it).
/// Costs about one and a half compute_memory() calls (~0.3 s on a 1 GB trace); meant to run
/// once at load time.
memory_index build_memory_index(const trace_model& model, const op_trees& trees);

/**
 * compute_memory(model, trees, range) from an index: the same result, field for field (devices,
 * their order, default_device, curves and peaks, statistics and event rows, counts), for the
 * parts asked for. `index` must be built from `model` and `trees`; they are only read when the
 * index could not be used (a record time is NaN, or 2³² records or nodes), where this falls
 * back to compute_memory().
 * Bounds are inclusive; pass ±infinity for an open side. Without `parts.events` the
 * range-dependent counts stay 0; the device list and default_device are exact for any parts.
 */
memory_result compute_memory_range(const memory_index& index, const trace_model& model, const op_trees& trees,
                                   std::pair<double, double> range, memory_parts parts = {});

/// profiler_start_ts (plugin-rules.md#event-categories): minimum ts over the events the plugin used
/// (every duration event of a recognised category and every [memory] instant; not cuda_driver nor
/// unknown categories; python_function/module events are ignored in Lightning traces). 0 if none.
double profiler_start_ts(const trace_model& model);

/// The plugin's down-sampling (plugin-rules.md#memory-view): Largest-Triangle-Three-Buckets on
/// (time, allocated) to exactly `n_out` points when the curve has more (first and last kept; inner
/// points split into n_out − 2 consecutive bins, the first `size % bins` one point larger; per bin
/// the point with the largest triangle against the previously chosen point and the next bin's mean,
/// the first such point on ties). Shorter curves are returned unchanged.
std::vector<std::array<double, 3>> downsample_memory_curve(const std::vector<std::array<double, 3>>& curve,
                                                           std::size_t n_out = 10240);

/// Units accepted by the memory endpoints (plugin-rules.md#memory-view).
enum class memory_time_unit : std::uint8_t { us, ms, s };
enum class memory_size_unit : std::uint8_t { b, kb, mb, gb };
/// "us"/"micro"/"microsecond", "ms"/"milli"/"millisecond", "s"/"second"/"" → unit; nullopt otherwise.
std::optional<memory_time_unit> parse_time_unit(std::string_view text);
/// "B"/"" , "KB"/"K", "MB"/"M", "GB"/"G" (powers of 1024) → unit; nullopt otherwise.
std::optional<memory_size_unit> parse_memory_unit(std::string_view text);
/// Factor from µs: 1, 0.001, 0.000001.
double time_factor(memory_time_unit unit) noexcept;
/// Factor from bytes: 1, 1/1024, 1/1024², 1/1024³.
double memory_factor(memory_size_unit unit) noexcept;
/// Unit suffix as the plugin prints it: "us", "ms", "s" / "B", "KB", "MB", "GB".
std::string_view unit_name(memory_time_unit unit) noexcept;
std::string_view unit_name(memory_size_unit unit) noexcept;

/// The plugin's DisplayRounder for memory tables (plugin-rules.md#number-formatting): 0 stays 0; |v| ≥ 0.01 → round(v, 2);
/// else round to the first significant digit (0.0009765625 → 0.001). Python rounding.
double memory_display_round(double v);

/// "Peak Memory Usage: <peak·factor formatted %.1f><unit>" (the chart title).
std::string memory_peak_text(std::int64_t peak_bytes, memory_size_unit unit);

}  // namespace kinetoscope::analysis
