// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file module_profile.hpp
/// The DeepSpeed flops profiler's report (docs/profiler-rules.md#deepspeed-flops-profiler) computed
/// from a recorded window: the model's module tree (module_scope.hpp) with params, MACs, forward
/// latency, % of the totals and achieved FLOPS per module, and the top-k module classes per depth.
///
/// Where the numbers come from: module calls are the window's module scopes; MACs and flops are
/// counted with DeepSpeed's rules (profiler-rules.md#counting) from the operators recorded inside
/// each module (names and input shapes, so the window needs record_shapes or with_flops); latency
/// is the wall time of the module's scopes. A window usually holds several forward passes (one per
/// step), so every MACs, flops and latency figure is the per-pass average over the calls of the
/// model's root module in the window; the report says how many passes it averaged.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kinetoscope/trace_data.hpp"

namespace kinetoscope {

/// DeepSpeed's number formatting (flops_profiler/profiler.py): value / unit magnitude rounded
/// to `precision` decimals (Python's round: half-even on the binary value), printed with %g, a
/// space, then the unit prefix. `units` nullptr picks the prefix: T ≥ 1e12, G ≥ 1e9, M ≥ 1e6,
/// K ≥ 1e3, none ≥ 1 or 0, m ≥ 1e-3, u below; otherwise it forces one of "T", "G", "M", "K",
/// "m", "u" (anything else: magnitude 1), as DeepSpeed's `units` argument does.
/// Examples: number_to_string(6279.86e9) == "6.28 T"; number_to_string(6279.86e9, "G") ==
/// "6279.86 G" (DeepSpeed output printed by a version that had no T prefix for flops).
std::string number_to_string(double num, const char* units = nullptr, int precision = 2);
/// number + "MACs": macs_to_string(3139.93e9, "G") == "3139.93 GMACs".
std::string macs_to_string(double macs, const char* units = nullptr, int precision = 2);
/// number + "FLOPS": "81.9 TFLOPS".
std::string flops_to_string(double flops_per_second, const char* units = nullptr, int precision = 2);
/// number with G written B, surrounding spaces removed: "336.23 M", "156", "1.5 B".
std::string params_to_string(double params, const char* units = nullptr, int precision = 2);
/// seconds: number + "s": "76.67 ms", "273.47 us".
std::string duration_to_string(double seconds, const char* units = nullptr, int precision = 2);

/// DeepSpeed's count for one operator call (profiler-rules.md#counting): flops and MACs, and
/// whether the op is one DeepSpeed counts at all (`counted`; a counted op's nested ops are not
/// counted again).
struct op_count {
  std::uint64_t flops = 0;
  std::uint64_t macs = 0;
  bool counted = false;
};

/**
 * Applies the profiler-rules.md#counting rules to an aten-named operator and its recorded inputs
 * (PyTorch schema order, as record_op takes them): aten::linear, conv1d/2d/3d,
 * conv_transpose1d/2d/3d, relu, prelu, elu, leaky_relu, relu6 (hardtanh), silu, gelu, softmax (and
 * in-place forms), the avg/max/adaptive pooling ops, batch_norm, layer_norm, group_norm,
 * instance_norm, upsample_* with output sizes, matmul, mm, bmm, addmm, baddbmm, mul, add, embedding
 * and dropout (0), scaled_dot_product_attention. Any other name: not counted. Malformed inputs
 * (missing shapes, wrong ranks) count 0 but still mark the op as counted.
 */
op_count deepspeed_count(std::string_view op_name, const op_input* inputs, std::size_t count);

/// One module instance of the profile tree. MACs, flops and latency are per forward pass
/// (window totals divided by the number of passes) and include the sub-modules (latency is
/// measured, so it includes them anyway).
struct module_profile_node {
  std::string path;               ///< dotted path as recorded ("layer1.0.conv1", "" for the root)
  std::string type;               ///< class name ("Conv2d")
  std::string key;                ///< attribute name under its parent ("conv1"), shown as "(conv1): "
  std::int64_t params = 0;        ///< own + sub-modules' parameters (module.parameters())
  double macs = 0;
  double flops = 0;
  double latency_s = 0;           ///< forward wall time per pass, seconds
  std::int64_t calls = 0;         ///< calls in the window
  std::vector<module_profile_node> children;  ///< in order of first call
};

/// The module profile of one window.
struct module_profile {
  bool ok = false;                ///< false: `message` says why there is no profile
  std::string message;
  module_profile_node root;       ///< the model
  std::int64_t passes = 0;        ///< calls of the root module in the window
  bool has_shapes = false;        ///< the window recorded input shapes (MACs/flops known)
  std::int64_t first_step = -1;   ///< first ProfilerStep#N of the window, -1 = none
  std::int64_t last_step = -1;
};

/**
 * Builds the profile of the model whose root scope has path `root_path`; an empty `root_path`
 * picks the top-level scope (no enclosing scope) that ran first in the window. Ops are
 * attributed to the innermost module scope open around them on their thread; ops outside every
 * module scope (e.g. backward on the autograd thread) do not count, as DeepSpeed profiles the
 * forward pass only. Never throws on data: a window without module scopes gives ok == false
 * and a message.
 */
module_profile build_module_profile(const trace_data& data, std::string_view root_path = {});

/// Options of print_model_profile, named as DeepSpeed's.
struct module_profile_options {
  /// "Profile Summary at step N"; -1 = the first ProfilerStep#N of the window (0 without steps).
  std::int64_t profile_step = -1;
  /// Depths 0 … module_depth − 1 in the aggregated profile; -1 = every depth but the deepest
  /// (DeepSpeed's behaviour). Larger than the tree: clamped (DeepSpeed raised a KeyError).
  int module_depth = -1;
  int top_modules = 1;            ///< module classes listed per depth and metric
  bool detailed = true;           ///< print the model tree
  std::string output_file{};      ///< "" = only return the text; else also write it there
  std::string root{};             ///< path of the model's root scope ("" = first top-level scope)
};

/// The report as text (profiler-rules.md#report layout).
std::string format_module_profile(const module_profile& profile, const module_profile_options& options = {});

/**
 * DeepSpeed's print_model_profile for a recorded window: builds the profile and returns the
 * report; with `output_file` also writes it there (creating parent directories). Throws
 * std::runtime_error("cannot write module profile <path>: <reason>") when the file cannot be
 * written; a window without module scopes returns a one-line explanation instead of a report.
 *
 * **Example**:
 * @code
 * kinetoscope::profile prof({.record_shapes = true, .with_modules = true});
 * prof.start(); train_step(); prof.stop();
 * std::cout << kinetoscope::print_model_profile(prof.last_trace(), {.top_modules = 3});
 * @endcode
 */
std::string print_model_profile(const trace_data& data, const module_profile_options& options = {});

}  // namespace kinetoscope
