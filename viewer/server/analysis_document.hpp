// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file analysis_document.hpp
/// The numbers of one trace as one JSON document: what `kinetoscope analyze --json` prints and
/// what the Python module (python/kinetoscope/_engine.cpp) turns into DataFrames. One code path
/// for both, so `kinetoscope.open(p).operators()` equals `analyze p --json` by construction.
/// No HTTP and no Boost: the Python module links this without the server.
///
///   auto c = choose_trace("/logs/run1", "", "");      // a file, or a run folder + worker/span
///   auto loaded = load_model(c.path, {}, "");          // parse (no index cache)
///   document_options o;  o.view = "operators";
///   ordered_json doc = analysis_document(c, *loaded.model, 0.0, o);

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/discovery.hpp"
#include "analysis/loader.hpp"
#include "analysis/model.hpp"
#include "analysis/rules.hpp"

namespace kinetoscope::server {

/// The views of the document, in its key order ("" asks for all of them).
inline constexpr const char* document_views[] = {"overview", "operators", "operators_by_shape", "kernels",
                                                 "kernels_by_operator", "memory", "modules", "distributed",
                                                 "diff", "diagnostics"};

/// The trace file a path names: the file itself, or the one trace of a run folder that matches
/// worker and span (empty: the first). `run_files` lists every file of the run (for the
/// distributed view); empty for a file path.
struct chosen_trace {
  std::string path;
  std::string run;
  std::string worker;
  std::string span;
  std::vector<analysis::trace_file> run_files;
};

/// Throws std::runtime_error naming the path (missing, no traces, several runs, no match with
/// the available worker/span pairs listed).
chosen_trace choose_trace(const std::string& path, const std::string& worker, const std::string& span);

/// The model of `path`: from its persisted index in `cache_dir` when one is valid (the server's
/// or `kinetoscope index`'s; the same model a parse gives), else parsed. `cache_dir` "" = parse.
analysis::load_result load_model(const std::string& path, const analysis::load_options& load,
                                 const std::string& cache_dir);

/// What the document holds and how it is computed.
struct document_options {
  std::string view;                               ///< one of document_views, "" = all
  analysis::rule_set rules = analysis::rule_set::kinetoscope;
  std::optional<std::pair<double, double>> memory_range;  ///< µs from the trace's start
  std::string diff_path;                          ///< the experimental trace of the diff view ("" = none)
  analysis::load_options load;                    ///< for the run's other workers and the diff trace
  std::string cache_dir;                          ///< as load_model's
};

/// `analyze --json`'s document for `model` (loaded from c.path in `load_seconds`). Throws
/// std::runtime_error when another file it needs (a worker of the run, the diff trace) cannot
/// be loaded.
nlohmann::ordered_json analysis_document(const chosen_trace& c, const analysis::trace_model& model,
                                         double load_seconds, const document_options& options);

/// The diff view's rows (the document's "diff"/"rows") of two loaded traces, with `rules`' op
/// trees: what analysis_document gives with diff_path, without loading the experimental again.
nlohmann::ordered_json diff_rows(const analysis::trace_model& baseline, const analysis::trace_model& experimental,
                                 analysis::rule_set rules);

/// A row of `table` with every field at its default: its keys are the table's columns (for an
/// empty table's column names). Tables: steps, gpus, operators_by_name,
/// operators_by_name_and_input_shape, kernels_by_name, kernels_by_name_and_operator,
/// memory_stats, modules, distributed_comm_ops, diff; another name gives {}.
nlohmann::ordered_json row_template(std::string_view table);

}  // namespace kinetoscope::server
