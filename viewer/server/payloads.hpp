// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file payloads.hpp
/// The JSON bodies of the API (http-api.md), built from the analysis engine's results in the
/// exact shapes of torch-tb-profiler 0.4.3 (its `plugin.py` routes; viewer/server/http-api.md).
/// Pure functions: no store, no locking, no I/O; api.cpp validates the request and picks the
/// inputs.
///
/// Numbers: a value the plugin computed from integer timestamps is written as a JSON integer
/// when it is integral (`json_number`), floats otherwise, so bodies read like the plugin's.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/diff_view.hpp"
#include "analysis/distributed_view.hpp"
#include "analysis/memory_view.hpp"
#include "analysis/recommendations.hpp"
#include "server/store.hpp"

namespace kinetoscope::server::payloads {

using ojson = nlohmann::ordered_json;

/// `v` as a JSON integer when it is integral and exactly representable (|v| < 2^53), else as
/// a float; NaN and infinities become null.
ojson json_number(double v);

/// `/api/overview` (plugin shape). `workers` = number of workers of the run in this span.
ojson overview(const profile_views& v, std::size_t workers);
/// The step tooltip of /api/overview: `<div class="visualization-tooltip" ...>Step 5<br>Total:
/// 187948us<br> <b>Kernel: 98598us</b><br>Percentage: 52.46%</div>`.
std::string step_tooltip(std::string_view step, std::string_view role, double value, double total);

/// `/api/operation` (plugin shape): the four pies, of the groups by name, or by name and input
/// shape when `by_shape` (`group_by=OperationAndInputShape`; slices keep the bare name).
ojson operation_pies(const profile_views& v, bool by_shape);
/// `/api/operation/table` (plugin shape).
ojson operation_table(const profile_views& v, bool by_shape);
/// `/api/operation/stack` (plugin shape) from the profile's op trees (store::trees()); nullopt
/// when no row has that key.
std::optional<ojson> operation_stack(const profile& p, const profile_views& v, const analysis::op_trees& trees, std::string_view op_name,
                                     std::optional<std::string_view> input_shape);

/// `/api/kernel` (plugin shape); null without kernels.
ojson kernel_pie(const profile_views& v);
/// `/api/kernel/tc_pie` (plugin shape); null without kernels.
ojson kernel_tc_pie(const profile_views& v);
/// `/api/kernel/table` (plugin shape; group_by Kernel by name, KernelNameAndOpName by properties +
/// operator); null without kernels.
ojson kernel_table(const profile_views& v, bool by_operator);

/// `/api/memory` (plugin shape) of `m` (the profile's memory view, possibly range-filtered).
ojson memory_stats(const analysis::memory_result& m, analysis::memory_size_unit unit);
/// `/api/memory_curve` (plugin shape), the curves down-sampled to 10 240 points.
ojson memory_curve(const analysis::memory_result& m, analysis::memory_time_unit time_unit,
                   analysis::memory_size_unit size_unit);
/// `/api/memory_events` (plugin shape).
ojson memory_events(const analysis::memory_result& m, analysis::memory_time_unit time_unit,
                    analysis::memory_size_unit size_unit);

/// `/api/module` (plugin shape); null without module data.
ojson module_view(const profile_views& v);
/// `/api/tree` (plugin shape): the operator tree of "the first tree" (op_trees::first_tree(); the
/// first Lightning tree on Lightning traces) as nested `{"name", "start_time", "end_time" (absolute
/// µs), "type", "tid", "children"}`, the Module view's timeline; runtimes and kernels left out.
/// nullopt when the profile has no tree.
std::optional<ojson> operator_tree(const profile& p, const analysis::op_trees& trees);

/// `/api/distributed/gpuinfo` (plugin shape); null without device information.
ojson distributed_gpuinfo(const analysis::distributed_result& d);
/// `/api/distributed/overlap` (plugin shape); null when the view is not available.
ojson distributed_overlap(const analysis::distributed_result& d);
/// `/api/distributed/waittime` (plugin shape); null when the view is not available.
ojson distributed_waittime(const analysis::distributed_result& d);
/// `/api/distributed/commops` (plugin shape); null when the view is not available.
ojson distributed_commops(const analysis::distributed_result& d);
/// `/api/distributed/ranks` (http-api.md): the job view of a span — rank × step heatmaps with
/// each cell's step range, the stragglers, and the `top` collectives by arrival skew.
ojson distributed_ranks(const analysis::job_result& j, std::string_view span, std::size_t top);

/// `/api/diffnode` (plugin shape) of `node`: left/right sides, its path and its children
/// (without their own children).
ojson diff_node(const analysis::diff_node& node);

/// `/api/recommendations`: `[{"title", "text", "html", "numbers": {name: value}}]`.
ojson recommendations(const profile& p, const profile_views& v);

/// `/api/diagnostics`: as `kinetoscope analyze --view diagnostics --json`.
ojson diagnostics(const profile& p, const profile_views& v);
/// The same from a model and its op trees' statistics (`kinetoscope analyze --view diagnostics`).
ojson diagnostics(const analysis::trace_model& model, const analysis::attribution_stats& stats, double load_seconds,
                  std::uint64_t file_bytes);

}  // namespace kinetoscope::server::payloads
