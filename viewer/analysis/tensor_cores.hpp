// SPDX-License-Identifier: BSD-3-Clause
#pragma once
/// @file tensor_cores.hpp
/// Kinetoscope's tensor-core kernel classifier (docs/kinetoscope-rules.md#k3-tensor-cores, the
/// rules in words: docs/tensor-cores.md). torch-tb-profiler's `is_tc_kernel` (op_tree.hpp) stays
/// for the plugin's rule set.
///
/// A kernel uses tensor cores (NVIDIA Tensor Cores, AMD Matrix Cores / MFMA, Intel XMX) when the
/// first rule of tensor_core_rules() whose pattern matches its name says so; a name that no rule
/// matches does not. The table is ordered: the exclusions (helper kernels of attention and
/// split-K GEMMs, FP32 SIMT GEMMs, Inductor's pointwise and reduction kernels) come before the
/// positive patterns, some of which would otherwise catch them.
///
/// Patterns are matched case-sensitively against either the whole name or its base name
/// (kernel_base_name(): the function's own identifier, without return type, namespaces,
/// template arguments and parameters), so that a type inside some template argument list
/// cannot make an elementwise kernel look like a GEMM. Three characters are wildcards:
/// `*` any run of characters (possibly none), `?` any one character, `#` one or more decimal
/// digits (`_MI#x` matches `_MI16x16x1` but not `_MIWT2_1`).
///
/// The classifier allocates nothing and throws nothing; a call costs one scan for the base name
/// plus a substring search per rule (the callers classify each distinct kernel name once).
///
/// **Example**:
/// @code
/// using namespace kinetoscope::analysis;
/// kernel_uses_tensor_cores("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN");   // true
/// kernel_uses_tensor_cores("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_"
///                          "warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas");  // false
/// if (const tc_rule* r = tensor_core_rule(name)) std::cout << r->pattern << ": " << r->why;
/// @endcode

#include <cstdint>
#include <span>
#include <string_view>

namespace kinetoscope::analysis {

/// Whose naming scheme a rule reads (informative: every rule is tried on every kernel).
enum class tc_vendor : std::uint8_t { nvidia, amd, intel, any };

/// What a rule's pattern is matched against.
enum class tc_match : std::uint8_t {
  prefix,         ///< the whole name starts with the pattern
  contains,       ///< the pattern occurs anywhere in the whole name
  base_prefix,    ///< kernel_base_name() starts with the pattern
  base_contains,  ///< the pattern occurs anywhere in kernel_base_name()
};

/// One row of the classifier's table.
struct tc_rule {
  std::string_view pattern;  ///< literal text with the wildcards `*`, `?` and `#` (see above)
  tc_match how = tc_match::contains;
  bool tensor_cores = false;  ///< the verdict for names this rule decides
  tc_vendor vendor = tc_vendor::any;
  std::string_view why;  ///< one sentence: which library names kernels so, and why the verdict
};

/// The function's own identifier inside a kernel name, a view into `name`:
/// - `void ns::Kernel<args>(params)` (a demangled C++ name) gives `Kernel`; a return type,
///   namespaces, `(anonymous namespace)`, template arguments and the parameter list are dropped;
/// - `_ZN2ck16tensor_operation6device9kernel_xyzI...` (an Itanium-mangled name, as ROCm traces
///   keep them) gives the last identifier of the nested name, `kernel_xyz`;
/// - a plain name (`nvjet_sm90_tst_...`, `Cijk_...`, `triton_poi_fused_0`) is its own base.
///
/// **Example**: `kernel_base_name("void at::native::reduce_kernel<512, 1>(int)")` is
/// `"reduce_kernel"`.
std::string_view kernel_base_name(std::string_view name) noexcept;

/// Whether `text` matches `pattern` the way `how` says (the base name is not taken here: pass
/// it as `text` for the base_* kinds). Exposed for the tests and for tools that show the rules.
///
/// **Example**: `tc_pattern_matches("Cijk_Alik_Bljk_HHS_BH_MT64x64x32_MI32x32x8x1_SN",
/// "Cijk_*_MI#x", tc_match::prefix)` is true.
bool tc_pattern_matches(std::string_view text, std::string_view pattern, tc_match how) noexcept;

/// The rules in the order they are tried (first match wins).
///
/// **Example**: `for (const tc_rule& r : tensor_core_rules()) std::cout << r.pattern << "\n";`
std::span<const tc_rule> tensor_core_rules() noexcept;

/// The rule that decides `kernel_name`, or nullptr when none matches (then: no tensor cores).
///
/// **Example**: `tensor_core_rule("triton_poi_fused_add_0")->tensor_cores` is false.
const tc_rule* tensor_core_rule(std::string_view kernel_name) noexcept;

/// Kernel uses tensor cores / matrix cores by kinetoscope's rules (docs/tensor-cores.md).
///
/// **Example**: `kernel_uses_tensor_cores("volta_h884gemm_64x64_ldg8_nn")` is true.
bool kernel_uses_tensor_cores(std::string_view kernel_name) noexcept;

}  // namespace kinetoscope::analysis
