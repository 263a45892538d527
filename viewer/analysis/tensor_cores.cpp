// SPDX-License-Identifier: BSD-3-Clause
#include "analysis/tensor_cores.hpp"

#include <array>
#include <cstddef>

namespace kinetoscope::analysis {

namespace {

using enum tc_match;

constexpr tc_rule no(std::string_view pattern, tc_match how, tc_vendor vendor, std::string_view why) {
  return tc_rule{pattern, how, false, vendor, why};
}
constexpr tc_rule tc(std::string_view pattern, tc_match how, tc_vendor vendor, std::string_view why) {
  return tc_rule{pattern, how, true, vendor, why};
}

constexpr tc_vendor nv = tc_vendor::nvidia;
constexpr tc_vendor amd = tc_vendor::amd;
constexpr tc_vendor intel = tc_vendor::intel;
constexpr tc_vendor any = tc_vendor::any;

// The table, in the order it is tried (docs/tensor-cores.md says the same in words). The
// examples are names the libraries produce; tests/data/tensor_cores/kernel_names.tsv holds every
// name of the traces the tests read, classified by hand. Exclusions first: some stop a positive
// pattern further down (flash_fwd_splitkv_combine_kernel would match flash_fwd), the others say
// "no" explicitly so that tensor_core_rule() names the reason and a broader pattern cannot
// catch them later.
constexpr std::array rules = {
    // ---- 1. Helper kernels around tensor-core kernels: elementwise work, reductions, copies.
    no("dot_do_o", base_contains, any,
       "rowsum(dO * O) before an attention backward pass (FlashAttention 2's flash_bwd_dot_do_o_kernel, "
       "cuDNN's cudnn::fusion::compute_dot_do_o_specialized): a product and a reduction"),
    no("convert_dq", base_contains, any,
       "converts the FP32 dQ accumulator to 16 bits after an attention backward pass "
       "(FlashAttention 2's flash_bwd_convert_dq_kernel, cuDNN's cudnn::fusion::convert_dq_to_16bits)"),
    no("flash_bwd_convert_dkv", base_prefix, nv,
       "FlashAttention 2's dK/dV conversion after an MQA/GQA backward pass: a cast and a sum"),
    no("flash_bwd_clear_dkvaccum", base_prefix, nv, "zeroes FlashAttention 2's dK/dV accumulators"),
    no("splitkv_combine", base_contains, nv,
       "FlashAttention 2's flash_fwd_splitkv_combine_kernel: merges the partial outputs of split-KV "
       "decoding by their log-sum-exp"),
    no("FlashAttnBwdPreprocess", contains, nv,
       "FlashAttention 3's backward preprocessing (dO.O row sums, cleared dQ accumulator), launched as "
       "cutlass::device_kernel<flash::FlashAttnBwdPreprocess<...>>"),
    no("FlashAttnBwdPostprocess", contains, nv, "FlashAttention 3's dQ conversion after the backward pass"),
    no("FlashAttnFwdCombine", contains, nv, "FlashAttention 3's split-KV combine"),
    no("prepare_varlen_num_blocks", base_prefix, nv, "FlashAttention 3's scheduler metadata"),
    no("FmhaBwdOGradDotO", contains, amd,
       "composable_kernel's (ck_tile) dO.O row sums before the attention backward pass"),
    no("FmhaBwdConvertQGrad", contains, amd, "ck_tile's dQ conversion after the attention backward pass"),
    no("FmhaFwdSplitKVCombine", contains, amd, "ck_tile's split-KV combine"),
    no("FmhaFwdAppendKV", contains, amd, "ck_tile's KV-cache append (rotary embedding and copy)"),
    no("bwd_preprocess", base_contains, any,
       "Triton attention backward preprocessing (the Triton tutorial's _attn_bwd_preprocess, AOTriton's "
       "bwd_preprocess): dO.O row sums"),
    no("splitKreduce", base_contains, nv,
       "cuBLAS / cuBLASLt split-K reduction (splitKreduce_kernel, cublasLt::splitKreduce_kernel): sums "
       "the partial products of a split-K GEMM on CUDA cores"),
    no("ReduceSplitK", contains, nv,
       "CUTLASS's split-K reduction (cutlass::reduction::kernel::ReduceSplitK, also inside cuDNN's "
       "cutlass_cudnn_train:: copy)"),
    no("init_device_workspace", contains, nv, "xmma's workspace initialisation launched beside cuDNN convolutions"),

    // ---- 2. GEMMs on CUDA cores (SIMT) whose names look like tensor-core ones.
    no("xmma*_?fma", base_contains, nv,
       "xmma GEMMs and convolutions built on FFMA / HFMA2 / DFMA (sm80_xmma_gemm_f32f32_..._ffma_...): "
       "CUDA-core kernels, which the plugin counts because they contain xmma_gemm"),
    no("_simt_", contains, nv, "CUTLASS SIMT kernels (cutlass_80_simt_sgemm_...): CUDA-core FMA"),
    no("fmha_cutlass*_sm5#", base_prefix, nv,
       "PyTorch's / xformers' memory-efficient attention built for sm50: the CUTLASS SIMT fallback"),
    no("fmha_cutlass?_f32*_sm7#", base_prefix, nv,
       "memory-efficient attention in FP32 built for sm70 / sm75: SIMT (FP32 runs on tensor cores, as "
       "3xTF32, in the sm80 builds only)"),

    // ---- 3. Inductor's generated kernels without tl.dot.
    no("triton_poi_", base_prefix, any, "Inductor pointwise kernel: loads, arithmetic, stores; no tl.dot"),
    no("triton_per_", base_prefix, any, "Inductor persistent reduction: no tl.dot"),
    no("triton_red_", base_prefix, any, "Inductor looped reduction: no tl.dot"),
    no("triton_for_", base_prefix, any, "Inductor combo (foreach) kernel of pointwise parts: no tl.dot"),

    // ---- 4. Vendor GEMM and convolution libraries with their own naming schemes.
    tc("nvjet_", base_prefix, nv,
       "cuBLASLt's generated GEMMs for Hopper and later (nvjet_sm90_tst_..., nvjet_sm100_...; _qq... = "
       "FP8 operands): wgmma / tcgen05 kernels"),
    tc("sm#_xmma_*tensor#", base_prefix, nv,
       "cuBLAS / cuDNN xmma kernel naming its MMA instruction shape (tensor16x8x16, tensor16x8x8, "
       "sptensor16x8x32, tensor1688)"),
    tc("sm#_xmma_*warpgroupsize", base_prefix, nv,
       "sm90 xmma kernel organised in warpgroups: Hopper warpgroup MMA (wgmma)"),
    tc("sm#_xmma_*_f16f16_", base_prefix, nv,
       "xmma kernel with FP16 A and B operands (sm90 names carry no MMA shape; the SIMT builds are "
       "excluded above)"),
    tc("sm#_xmma_*_bf16bf16_", base_prefix, nv, "xmma kernel with BF16 A and B operands"),
    tc("sm#_xmma_*tf32", base_prefix, nv, "xmma kernel with TF32 operands: TF32 exists only as a tensor-core format"),
    tc("sm#_xmma_*_e4m3", base_prefix, nv, "xmma kernel with FP8 (E4M3) operands"),
    tc("sm#_xmma_*_e5m2", base_prefix, nv, "xmma kernel with FP8 (E5M2) operands"),
    tc("Cijk_*_MI#x", base_prefix, amd,
       "Tensile GEMM (rocBLAS, hipBLASLt) with a MatrixInstruction token _MI<M>x<N>x...: MFMA on CDNA"),
    no("Cijk_", base_prefix, amd, "Tensile GEMM without a MatrixInstruction token: vector ALU (FMA / dot) code"),
    tc("igemm_*_gtcx", base_prefix, amd,
       "MIOpen's assembly implicit-GEMM convolutions for gfx908 / gfx90a / gfx942 (igemm_fwd_gtcx3_nhwc_...): "
       "XDLOPS; its igemm kernels without gtcx are not"),
    tc("xdl", base_contains, amd,
       "composable_kernel / MIOpen XDLOPS kernels (kernel_grouped_conv_fwd_xdl_cshuffle_v3, "
       "kernel_batched_gemm_xdlops_bwd_weight): XDLOPS is AMD's name for MFMA"),
    tc("Fmha", contains, amd,
       "ck_tile fused attention (FmhaFwdKernel, FmhaFwdSplitKVKernel, FmhaBwdDQDKDVKernel; helpers "
       "excluded above): MFMA for QK^T and PV"),
    tc("_ZN5aiter#*gemm", prefix, amd,
       "AITER's assembly GEMMs (_ZN5aiter..f4gemm_..., ..fp8gemm_..., ..bf16gemm_...): MFMA"),
    tc("_ZN5aiter#fmoe", prefix, amd, "AITER's assembly fused-MoE GEMMs: MFMA"),
    tc("_ZN5aiter#pa_", prefix, amd, "AITER's assembly paged attention: MFMA for QK^T and PV"),

    // ---- 5. Fused attention (the helpers were excluded in part 1).
    tc("cudnn_generated_fort_native_sdpa", base_prefix, nv,
       "cuDNN's runtime-compiled fused attention (SDPA), forward and backward"),
    tc("flash_fwd", base_prefix, nv,
       "FlashAttention 2 forward (flash_fwd_kernel, flash_fwd_splitkv_kernel; PyTorch's pytorch_flash:: "
       "copy): mma.sync"),
    tc("flash_bwd_dq_dk_dv", base_prefix, nv,
       "FlashAttention 2 backward (flash_bwd_dq_dk_dv_loop_kernel, ..._loop_seqk_parallel_kernel)"),
    tc("FlashAttn", contains, nv,
       "FlashAttention 3, launched as cutlass::device_kernel<flash::FlashAttnFwdSm90<...>> / "
       "FlashAttnBwdSm90 (helpers excluded above)"),
    tc("fmha", base_contains, any,
       "fused multi-head attention (PyTorch's / xformers' memory-efficient fmha_cutlassF_* / fmha_cutlassB_*, "
       "AITER's assembly fmha_fwd_* / fmha_bwd_*; SIMT builds excluded above)"),
    tc("attn_fwd", base_prefix, any, "Triton flash-attention forward (AMD's / AOTriton's attn_fwd): tl.dot"),
    tc("_attn_fwd", base_prefix, any, "the Triton tutorial's flash-attention forward: tl.dot"),
    tc("_attn_bwd", base_prefix, any, "the Triton tutorial's attention backward (_attn_bwd, _attn_bwd_dkdv): tl.dot"),
    tc("bwd_kernel_d", base_prefix, any, "AOTriton's attention backward (bwd_kernel_dk_dv, bwd_kernel_dq): tl.dot"),
    tc("kernel_unified_attention_", base_prefix, any,
       "vLLM's Triton unified attention (kernel_unified_attention_2d / _3d): tl.dot; its reduce_segments "
       "combine kernel matches no rule"),

    // ---- 6. Triton GEMMs.
    tc("triton_tem_*mm", base_prefix, any,
       "Inductor's matmul templates (triton_tem_fused_mm_0, ..._addmm_..., ..._bmm_...): tl.dot"),
    tc("triton_tem_*conv", base_prefix, any, "Inductor's convolution template: tl.dot"),
    tc("triton_tem_*flex", base_prefix, any, "Inductor's flex attention and flex decoding templates: tl.dot"),
    tc("matmul_ogs", base_contains, any,
       "triton_kernels' matmul_ogs GEMMs (_matmul_ogs_*, _p_matmul_ogs_*; dense and MoE, MXFP4 weights "
       "included): tl.dot / tl.dot_scaled"),
    tc("fused_moe_kernel", base_prefix, any, "vLLM's / SGLang's Triton fused-MoE GEMM: tl.dot"),

    // ---- 7. NVIDIA's tensor-op vocabulary: CUTLASS, CuTe, instruction names, legacy cuBLAS/cuDNN.
    tc("tensorop", contains, nv,
       "CUTLASS's generated kernel names (cutlass_80_tensorop_s1688gemm_..., cutlass_tensorop_f16_s16816fprop_..., "
       "cutlass_80_wmma_tensorop_..., cutlass3x_sm90_tensorop_...), also as the argument of cutlass::Kernel<...>"),
    tc("MmaTensorOp", contains, nv,
       "a CUTLASS template instance (often left mangled) whose warp-level MMA is "
       "cutlass::gemm::warp::MmaTensorOp"),
    tc("OpClassTensorOp", contains, nv,
       "a CUTLASS template instance of operator class cutlass::arch::OpClassTensorOp"),
    tc("gmma", contains, nv,
       "Hopper warpgroup MMA named in the kernel (wgmma, hgmma, igmma, gmmastage: sm90 xmma, cuDNN's "
       "generated kernels)"),
    tc("GMMA", contains, nv, "CuTe's Hopper MMA atoms (cute::SM90::GMMA::...) among the template arguments"),
    tc("SM#_#x#x#_", contains, nv,
       "a CuTe MMA atom among the template arguments (SM80_16x8x16_F32F16F16F32_TN, "
       "SM90_64x128x16_F32BF16BF16_SS)"),
    tc("tcgen05", contains, nv, "Blackwell's tensor-core instructions named in the kernel (CUTLASS 3 sm100 kernels)"),
    tc("UMMA", contains, nv, "CuTe's Blackwell MMA atoms (cute::UMMA::...) among the template arguments"),
    tc("SM100_MMA_", contains, nv, "CuTe's Blackwell MMA atoms (SM100_MMA_F16BF16_SS, ...)"),
    tc("wmma", contains, any,
       "the WMMA API (nvcuda::wmma kernels, CUTLASS's wmma_tensorop; WMMA on AMD RDNA3 in composable_kernel)"),
    tc("h884", base_contains, nv,
       "Volta HMMA 8x8x4, FP16 accumulation (volta_h884gemm_..., volta_fp16_h884cudnn_...)"),
    tc("s884", base_contains, nv,
       "Volta HMMA 8x8x4, FP32 accumulation (volta_s884gemm_..., volta_fp16_s884cudnn_fp16_...)"),
    tc("h1688", base_contains, nv, "Turing / Ampere HMMA 16x8x8, FP16 accumulation (turing_h1688gemm_...)"),
    tc("s1688", base_contains, nv,
       "HMMA 16x8x8, FP32 accumulation (turing_fp16_s1688gemm_fp16_..., ampere_bf16_s1688gemm_bf16_...)"),
    tc("s1684", base_contains, nv, "Ampere TF32 HMMA 16x8x4 (ampere_fp32_s1684tf32gemm_fp32_...)"),
    tc("c1688", base_contains, nv, "complex GEMMs on HMMA 16x8x8 (from the plugin's list)"),
    tc("16816", base_contains, nv,
       "Ampere HMMA 16x8x16 (ampere_fp16_s16816gemm_fp16_..., ampere_h16816gemm_..., "
       "ampere_bf16_s16816gemm_bf16_...)"),
    tc("i8816", base_contains, nv, "Turing IMMA 8x8x16 (turing_int8_i8816gemm_...)"),
    tc("i16832", base_contains, nv, "Ampere IMMA 16x8x32 (ampere_int8_i16832gemm_int8_...)"),
    tc("hmma", contains, nv,
       "HMMA named in the kernel or its traits (xmma_cudnn::Volta_hmma_fp16_traits, ..._hmma_...)"),
    tc("_imma_", contains, nv, "IMMA named in the kernel's traits (xmma_cudnn::Turing_imma_int8_traits)"),
    tc("dgrad_1x1_stride_2x2", base_contains, nv,
       "cuDNN name from NVIDIA PyProf's tensor-core list, which the plugin copied (no trace here has it)"),
    tc("first_layer_wgrad_kernel", base_contains, nv,
       "cuDNN name from NVIDIA PyProf's tensor-core list (no trace here has it)"),
    tc("conv1x1", base_contains, nv, "cuDNN name from NVIDIA PyProf's tensor-core list (no trace here has it)"),
    tc("conv2d_c1_k1", base_contains, nv, "cuDNN name from NVIDIA PyProf's tensor-core list (no trace here has it)"),
    tc("direct_group", base_contains, nv, "cuDNN name from NVIDIA PyProf's tensor-core list (no trace here has it)"),

    // ---- 8. Intel (no Intel trace was available to check these).
    tc("xmx", base_contains, intel, "kernels that name Intel's XMX matrix engines (unverified)"),
    tc("dpas", base_contains, intel, "kernels that name DPAS, the XMX instruction (unverified)"),
};

constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// `#` is matched greedily, which is right only when what follows it cannot be a digit.
constexpr bool valid_rule(const tc_rule& r) {
  if (r.pattern.empty() || r.why.empty()) return false;
  for (std::size_t i = 0; i + 1 < r.pattern.size(); ++i) {
    const char next = r.pattern[i + 1];
    if (r.pattern[i] == '#' && (is_digit(next) || next == '#' || next == '?')) return false;
  }
  return true;
}
constexpr bool valid_table() {
  for (const tc_rule& r : rules)
    if (!valid_rule(r)) return false;
  return true;
}
static_assert(valid_table(), "a tensor-core rule is empty or has '#' before a digit, '#' or '?'");

constexpr bool has_wildcard(std::string_view p) noexcept {
  return p.find_first_of("*?#") != std::string_view::npos;
}

// `pattern` against the start of `text` (floating: anywhere in it), with an implicit `*` at the
// end: the classic one-backtrack-point wildcard walk, O(text x pattern) at worst.
bool glob(std::string_view text, std::string_view pattern, bool floating) noexcept {
  constexpr std::size_t none = std::string_view::npos;
  std::size_t ti = 0;
  std::size_t pi = 0;
  std::size_t star_pi = floating ? 0 : none;
  std::size_t star_ti = 0;
  for (;;) {
    if (pi == pattern.size()) return true;
    const char c = pattern[pi];
    if (c == '*') {
      star_pi = ++pi;
      star_ti = ti;
      continue;
    }
    if (ti < text.size()) {
      if (c == '#') {
        if (is_digit(text[ti])) {
          do ++ti;
          while (ti < text.size() && is_digit(text[ti]));
          ++pi;
          continue;
        }
      } else if (c == '?' || c == text[ti]) {
        ++ti;
        ++pi;
        continue;
      }
    }
    if (star_pi == none || star_ti >= text.size()) return false;
    ti = ++star_ti;
    pi = star_pi;
  }
}

// The last identifier of an Itanium-mangled name's (nested) name: _ZN2ck6device9kernel_xyzI...
// gives kernel_xyz, _Z10foo_kernelPf gives foo_kernel. The whole name when it cannot tell.
std::string_view mangled_base(std::string_view n) noexcept {
  std::size_t i = 2;  // after "_Z"
  bool nested = false;
  if (i < n.size() && n[i] == 'N') {
    nested = true;
    ++i;
    while (i < n.size() && (n[i] == 'r' || n[i] == 'V' || n[i] == 'K')) ++i;
  } else if (i < n.size() && n[i] == 'L') {
    ++i;
  }
  std::string_view last;
  while (i < n.size()) {
    if (nested && n.substr(i, 2) == "St") {
      i += 2;
      continue;
    }
    if (!is_digit(n[i])) break;
    std::size_t len = 0;
    while (i < n.size() && is_digit(n[i])) {
      len = len * 10 + static_cast<std::size_t>(n[i] - '0');
      if (len > n.size()) return n;
      ++i;
    }
    if (len == 0 || len > n.size() - i) break;
    last = n.substr(i, len);
    i += len;
    if (!nested) break;
  }
  return last.empty() ? n : last;
}

// The identifier right before the parameter list of a demangled name, outside every template
// argument list; `(anonymous namespace)` counts as a namespace, not as the parameter list.
std::string_view demangled_base(std::string_view n) noexcept {
  constexpr std::string_view anonymous = "(anonymous namespace)";
  constexpr std::size_t none = std::string_view::npos;
  std::size_t depth = 0;
  std::size_t start = 0;
  std::size_t args = none;  // where the identifier's template argument list starts
  std::size_t i = 0;
  for (; i < n.size(); ++i) {
    const char c = n[i];
    if (c == '<') {
      if (depth == 0 && args == none) args = i;
      ++depth;
    } else if (c == '>') {
      if (depth > 0) --depth;
    } else if (depth == 0) {
      if (c == '(') {
        if (n.substr(i, anonymous.size()) != anonymous) break;
        i += anonymous.size() - 1;
        start = i + 1;
        args = none;
      } else if (c == ' ' || c == ':') {
        start = i + 1;
        args = none;
      }
    }
  }
  const std::size_t end = args != none ? args : i;
  if (end <= start) return n;
  return n.substr(start, end - start);
}

}  // namespace

std::string_view kernel_base_name(std::string_view name) noexcept {
  return name.starts_with("_Z") ? mangled_base(name) : demangled_base(name);
}

bool tc_pattern_matches(std::string_view text, std::string_view pattern, tc_match how) noexcept {
  const bool at_start = how == tc_match::prefix || how == tc_match::base_prefix;
  if (!has_wildcard(pattern))
    return at_start ? text.starts_with(pattern) : text.find(pattern) != std::string_view::npos;
  return glob(text, pattern, !at_start);
}

std::span<const tc_rule> tensor_core_rules() noexcept { return rules; }

const tc_rule* tensor_core_rule(std::string_view kernel_name) noexcept {
  const std::string_view base = kernel_base_name(kernel_name);
  for (const tc_rule& r : rules) {
    const bool on_base = r.how == tc_match::base_prefix || r.how == tc_match::base_contains;
    if (tc_pattern_matches(on_base ? base : kernel_name, r.pattern, r.how)) return &r;
  }
  return nullptr;
}

bool kernel_uses_tensor_cores(std::string_view kernel_name) noexcept {
  const tc_rule* r = tensor_core_rule(kernel_name);
  return r != nullptr && r->tensor_cores;
}

}  // namespace kinetoscope::analysis
