// SPDX-License-Identifier: BSD-3-Clause
// Kinetoscope's tensor-core classifier (viewer/analysis/tensor_cores.hpp, docs/tensor-cores.md):
// the hand-made list of every kernel name of the traces the tests read
// (tests/data/tensor_cores/kernel_names.tsv), each rule on a name of its own, the base-name and
// wildcard helpers, and the plugin's rule beside ours.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/loader.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/tensor_cores.hpp"
#include "real_trace_files.hpp"

using namespace kinetoscope::analysis;

namespace {

std::string test_data() {
  const char* s = std::getenv("KINETOSCOPE_TEST_DATA");
  REQUIRE_MESSAGE(s != nullptr, "KINETOSCOPE_TEST_DATA is not set (meson test sets it)");
  return s;
}

/// kernel_names.tsv: name -> uses tensor cores (by hand).
std::map<std::string, bool> expected_names() {
  const std::string path = test_data() + "/tensor_cores/kernel_names.tsv";
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  std::map<std::string, bool> out;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    const std::size_t tab = line.find('\t');
    REQUIRE_MESSAGE(tab != std::string::npos, path << ":" << number << ": no tab");
    const std::string verdict = line.substr(0, tab);
    REQUIRE_MESSAGE((verdict == "tc" || verdict == "no"), path << ":" << number << ": '" << verdict << "'");
    const bool inserted = out.emplace(line.substr(tab + 1), verdict == "tc").second;
    CHECK_MESSAGE(inserted, path << ":" << number << ": listed twice");
  }
  return out;
}

/// name -> the first trace file it was seen in.
using name_sources = std::map<std::string, std::string>;

void add_kernel_names(const std::string& file, name_sources& out) {
  load_result r = load_trace(file);
  REQUIRE_MESSAGE(r.ok(), r.error->message());
  const trace_model& m = *r.model;
  for (const event& e : m.events)
    if (e.type == event_type::kernel) out.emplace(std::string(m.str(e.name)), file);
}

/// Every kernel name of the committed traces (tests/data/**/*.pt.trace.json*).
name_sources committed_kernel_names() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(test_data()))
    if (e.is_regular_file() && e.path().filename().string().find(".pt.trace.json") != std::string::npos)
      files.push_back(e.path().string());
  REQUIRE(!files.empty());
  name_sources out;
  for (const std::string& f : files) add_kernel_names(f, out);
  return out;
}

/// The names missing from kernel_names.tsv, one per line with the trace that has it.
std::string missing_names(const name_sources& seen, const std::map<std::string, bool>& expected) {
  std::ostringstream s;
  for (const auto& [name, file] : seen)
    if (!expected.contains(name)) s << "\n  " << name << "\n    (in " << file << ")";
  return s.str();
}

const tc_rule* rule_with(std::string_view pattern) {
  for (const tc_rule& r : tensor_core_rules())
    if (r.pattern == pattern) return &r;
  return nullptr;
}

}  // namespace

TEST_CASE("tensor cores: every line of kernel_names.tsv classifies as written") {
  const auto expected = expected_names();
  CHECK(expected.size() > 600);
  std::ostringstream wrong;
  std::size_t tc = 0;
  for (const auto& [name, uses] : expected) {
    tc += uses ? 1 : 0;
    if (kernel_uses_tensor_cores(name) == uses) continue;
    const tc_rule* r = tensor_core_rule(name);
    wrong << "\n  expected " << (uses ? "tc" : "no") << ", rule "
          << (r != nullptr ? std::string(r->pattern) : std::string("(none)")) << ": " << name;
  }
  CHECK_MESSAGE(wrong.str().empty(), "classified differently from kernel_names.tsv:" << wrong.str());
  MESSAGE(expected.size() << " names, " << tc << " tc, " << expected.size() - tc << " no");
}

TEST_CASE("tensor cores: every kernel of the committed traces is in kernel_names.tsv") {
  const auto expected = expected_names();
  const name_sources seen = committed_kernel_names();
  CHECK(seen.size() > 150);
  const std::string missing = missing_names(seen, expected);
  CHECK_MESSAGE(missing.empty(), "kernel names missing from tests/data/tensor_cores/kernel_names.tsv "
                                 "(add each with tc or no):" << missing);
}

TEST_CASE("tensor cores: every kernel of the real traces is in kernel_names.tsv, and nothing else") {
  const auto expected = expected_names();
  name_sources seen = committed_kernel_names();
  for (const std::string& f : kinetoscope_test::real_traces()) add_kernel_names(f, seen);
  const std::string missing = missing_names(seen, expected);
  CHECK_MESSAGE(missing.empty(), "kernel names missing from tests/data/tensor_cores/kernel_names.tsv "
                                 "(add each with tc or no):" << missing);
  std::ostringstream stale;
  for (const auto& [name, uses] : expected)
    if (!seen.contains(name)) stale << "\n  " << name;
  CHECK_MESSAGE(stale.str().empty(), "kernel_names.tsv lists names no trace has:" << stale.str());
}

TEST_CASE("tensor cores: each rule decides a name of its own") {
  struct example {
    std::string_view name;
    std::string_view rule;  // the pattern of the rule that must decide it
  };
  // Names as the libraries write them (shortened where they are long); those marked "made up"
  // follow a naming scheme that no trace here shows.
  const example examples[] = {
      // 1. helpers
      {"void pytorch_flash::flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<64, 128, 128, 8, 4, 4, 4, "
       "false, false, cutlass::bfloat16_t> >(pytorch_flash::Flash_bwd_params)",
       "dot_do_o"},
      {"void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*, unsigned int)", "convert_dq"},
      {"void flash::flash_bwd_convert_dkv_kernel<Flash_bwd_kernel_traits<128> >(flash::Flash_bwd_params)",
       "flash_bwd_convert_dkv"},
      {"void flash::flash_bwd_clear_dkvaccum_kernel<Flash_bwd_kernel_traits<128> >(flash::Flash_bwd_params)",
       "flash_bwd_clear_dkvaccum"},
      {"void flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128>, 4, 2, true>("
       "flash::Flash_fwd_params)",
       "splitkv_combine"},
      {"void cutlass::device_kernel<flash::FlashAttnBwdPreprocess<cute::tuple<cute::C<128> >, cutlass::bfloat16_t, "
       "float, cutlass::arch::Sm90, true, false> >(flash::FlashAttnBwdPreprocess<>::Params)",
       "FlashAttnBwdPreprocess"},
      {"void cutlass::device_kernel<flash::FlashAttnBwdPostprocessConvertdQ<cute::tuple<>, cutlass::bfloat16_t> >("
       "Params)",
       "FlashAttnBwdPostprocess"},
      {"void cutlass::device_kernel<flash::FlashAttnFwdCombine<cute::tuple<>, 7, 256, true, false, "
       "cutlass::bfloat16_t, float, cutlass::arch::Sm90> >(Params)",
       "FlashAttnFwdCombine"},
      {"void flash::prepare_varlen_num_blocks_kernel<1, true>(int, int, int, int const*)",
       "prepare_varlen_num_blocks"},
      {"void ck_tile::kentry<256, 2, ck_tile::FmhaBwdOGradDotOKernel<ck_tile::BlockFmhaBwdOGradDotO<> > >(Kargs)",
       "FmhaBwdOGradDotO"},
      {"void ck_tile::kentry<256, 1, ck_tile::FmhaBwdConvertQGradKernel<ck_tile::BlockFmhaBwdConvertQGrad<> > >("
       "Kargs)",
       "FmhaBwdConvertQGrad"},
      {"void ck_tile::kentry<256, 1, ck_tile::FmhaFwdSplitKVCombineKernel<> >(Kargs)", "FmhaFwdSplitKVCombine"},
      {"void ck_tile::kentry<256, 1, ck_tile::FmhaFwdAppendKVKernel<> >(Kargs)", "FmhaFwdAppendKV"},
      {"_attn_bwd_preprocess", "bwd_preprocess"},
      {"void splitKreduce_kernel<float, float, float, float>(cublasSplitKParams<float>, float const*)",
       "splitKreduce"},
      {"void cutlass_cudnn_train::Kernel<cutlass_cudnn_train::reduction::kernel::ReduceSplitK<cutlass_cudnn_train::"
       "MatrixShape<4, 128> > >(Params)",
       "ReduceSplitK"},
      {"void cask_plugin__5x_cudnn::xmma__5x_cudnn::init_device_workspace_kernel<xmma__5x_cudnn::implicit_gemm::"
       "wgrad_indexed::Warp_specialized_params<> >(Params)",
       "init_device_workspace"},
      // 2. SIMT
      {"sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_"
       "kernel__5x_cublas",
       "xmma*_?fma"},
      {"void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass_80_simt_sgemm_128x32_8x5_nn_"
       "align1::Params)",
       "_simt_"},
      {"fmha_cutlassF_f16_aligned_64x64_rf_sm50(PyTorchMemEffAttention::AttentionKernel<cutlass::half_t, "
       "cutlass::arch::Sm50, true, 64, 64, 64, true, true>::Params)",
       "fmha_cutlass*_sm5#"},
      {"fmha_cutlassB_f32_aligned_64x64_k64_sm75(PyTorchMemEffAttention::AttentionBackwardKernel<"
       "cutlass::arch::Sm75, float, true, false, false, 64, 64, 64, false>::Params)",
       "fmha_cutlass?_f32*_sm7#"},
      // 3. Inductor without tl.dot
      {"triton_poi_fused_add_cos_sin_0", "triton_poi_"},
      {"triton_per_fused__to_copy_native_layer_norm_backward_view_1", "triton_per_"},
      {"triton_red_fused_sum_3", "triton_red_"},
      {"triton_for_fused_0", "triton_for_"},  // made up
      // 4. vendor libraries
      {"nvjet_sm90_qqtst_128x128_128x6_2x1_v_bz_coopA_algo2_TNT", "nvjet_"},
      {"sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5_warpsize2x2x1_g1_"
       "tensor16x8x8_execute_kernel_cudnn_infer",
       "sm#_xmma_*tensor#"},
      {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_"
       "kernel__5x_cublas",
       "sm#_xmma_*warpgroupsize"},
      // made up: sm90 xmma names without a warpgroup size
      {"sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_execute_kernel_cublas", "sm#_xmma_*_f16f16_"},
      {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_execute_kernel_cublas", "sm#_xmma_*_bf16bf16_"},
      {"sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_execute_kernel_cublas", "sm#_xmma_*tf32"},
      {"sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x128_execute_kernel_cublas", "sm#_xmma_*_e4m3"},
      {"sm90_xmma_gemm_e5m2e4m3_bf16f32_f32_tn_n_tilesize128x128x128_execute_kernel_cublas", "sm#_xmma_*_e5m2"},
      {"Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1", "Cijk_*_MI#x"},
      {"Cijk_Ailk_Bljk_SB_MT64x64x8_SE_K1_MIAV0_MIWT2_1_GRVW4", "Cijk_"},  // made up: no _MI<digits>x
      {"igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x2x1_"
       "1x4x1x64_gkgs",
       "igemm_*_gtcx"},
      {"_ZN2ck16tensor_operation6device37kernel_batched_gemm_xdlops_bwd_weightINS_47GridwiseGemm_bk0mk1_bk0nk1_mn_"
       "xdlops_bwd_weightILi64EttftEEEvv",
       "xdl"},
      {"void ck_tile::kentry<256, 2, ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipelineQRKSVSAsync<> > >(Kargs)",
       "Fmha"},
      {"_ZN5aiter33f4gemm_bf16_per1x32Fp4_tn_256x256E", "_ZN5aiter#*gemm"},
      {"_ZN5aiter50fmoe_bf16_pertokenMXfp4_g1u1_flat_novs_silu_16x128E", "_ZN5aiter#fmoe"},
      {"_ZN5aiter42pa_bf16_pertokenFp8_gqa10_1tg_4w_mtp3_msk1E", "_ZN5aiter#pa_"},
      // 5. fused attention
      {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
       "cudnn_generated_fort_native_sdpa"},
      {"void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
       "cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true>("
       "pytorch_flash::Flash_fwd_params)",
       "flash_fwd"},
      {"void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<64, 128, 128, 8> >("
       "pytorch_flash::Flash_bwd_params)",
       "flash_bwd_dq_dk_dv"},
      {"void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<"
       "flash::CollectiveMainloopFwdSm90<2, cute::tuple<> > > > >(Params)",
       "FlashAttn"},
      {"fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, "
       "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
       "fmha"},
      {"attn_fwd", "attn_fwd"},
      {"_attn_fwd", "_attn_fwd"},
      {"_attn_bwd", "_attn_bwd"},
      {"bwd_kernel_dk_dv", "bwd_kernel_d"},
      {"kernel_unified_attention_3d", "kernel_unified_attention_"},
      // 6. Triton GEMMs
      {"triton_tem_fused_addmm_relu_0", "triton_tem_*mm"},
      {"triton_tem_fused_convolution_0", "triton_tem_*conv"},
      {"triton_tem_fused_flex_attention_0", "triton_tem_*flex"},
      {"_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu", "matmul_ogs"},
      {"fused_moe_kernel", "fused_moe_kernel"},
      // 7. NVIDIA vocabulary
      {"void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_tn_align4>(cutlass_80_tensorop_s1688gemm_"
       "64x64_32x4_tn_align4::Params)",
       "tensorop"},
      {"_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS6_4warp11MmaTensorOpINS7_"
       "ILi64ELi64ELi32EEEEEEEvNT_6ParamsE",
       "MmaTensorOp"},
      {"void cutlass::Kernel<cutlass::gemm::kernel::Gemm<cutlass::half_t, cutlass::arch::OpClassTensorOp, "
       "cutlass::arch::Sm75> >(Params)",
       "OpClassTensorOp"},
      {"sm90_xmma_gemm_i8i8_i8i32_f32_tn_n_tilesize128x128x128_stage4_gmmastage2_igmma64x128x32", "gmma"},  // made up
      {"void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::TiledMMA<cute::MMA_Atom<"
       "cute::SM90::GMMA::MMA_64x128x16_F32BF16BF16_SS<(cute::SM90::GMMA::Major)0> > > > >(Params)",
       "GMMA"},
      {"void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::TiledMMA<cute::MMA_Atom<"
       "cute::SM80_16x8x16_F32BF16BF16F32_TN> > > >(Params)",
       "SM#_#x#x#_"},
      {"void gemm_tcgen05_kernel<256, 128>(Params)", "tcgen05"},  // made up
      {"void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::MMA_Atom<cute::SM100_MMA_F16BF16_SS<"
       "cutlass::bfloat16_t, float, 128, 256, (cute::UMMA::Major)0> > > >(Params)",
       "UMMA"},
      {"void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::MMA_Atom<cute::SM100_MMA_TF32_SS<"
       "float, float, float, 128, 128> > > >(Params)",
       "SM100_MMA_"},
      {"void wmma_gemm_kernel<__half>(__half const*, __half const*, float*, int, int, int)", "wmma"},
      {"volta_h884gemm_64x64_ldg8_nn", "h884"},
      {"volta_fp16_s884cudnn_fp16_128x128_ldg8_splitK_relu_f2f_exp_small_nhwc_tn_v1", "s884"},
      {"turing_h1688gemm_128x128_ldg8_nn", "h1688"},
      {"turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn", "s1688"},
      {"ampere_fp32_s1684tf32gemm_fp32_128x128_ldg4_nt_v1", "s1684"},
      {"ampere_c1688gemm_64x64_nt", "c1688"},  // made up
      {"ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", "16816"},
      {"turing_int8_i8816gemm_int8_128x128_ldg16_nt", "i8816"},
      {"ampere_int8_i16832gemm_int8_128x128_ldg16_relu_stages_64x3_nt", "i16832"},
      {"void xmma_cudnn::gemm::kernel<xmma_cudnn::implicit_gemm::fprop::Kernel_traits<"
       "xmma_cudnn::Volta_hmma_fp32_traits, xmma_cudnn::Cta_tile<128, 128, 32> > >(Params)",
       "hmma"},
      {"void xmma_cudnn::gemm::kernel<xmma_cudnn::implicit_gemm::fprop::Kernel_traits<"
       "xmma_cudnn::Turing_imma_int8_traits, xmma_cudnn::Cta_tile<128, 128, 64> > >(Params)",
       "_imma_"},
      // made up: cuDNN names of NVIDIA PyProf's list
      {"void cudnn::detail::dgrad_1x1_stride_2x2<__half, 64>(Params)", "dgrad_1x1_stride_2x2"},
      {"void cudnn::detail::first_layer_wgrad_kernel<__half, 128, 7, 7>(Params)", "first_layer_wgrad_kernel"},
      {"void cudnn::detail::conv1x1_kernel<__half>(Params)", "conv1x1"},
      {"void cudnn::detail::conv2d_c1_k1_nhwc_kernel<__half>(Params)", "conv2d_c1_k1"},
      {"void cudnn::detail::direct_group_conv_kernel<__half>(Params)", "direct_group"},
      // 8. Intel (made up)
      {"gemm_xmx_bf16_kernel", "xmx"},
      {"dpas_gemm_kernel", "dpas"},
  };
  std::set<const tc_rule*> decided;
  for (const example& x : examples) {
    CAPTURE(x.name);
    const tc_rule* want = rule_with(x.rule);
    REQUIRE_MESSAGE(want != nullptr, "no rule has the pattern " << x.rule);
    const tc_rule* got = tensor_core_rule(x.name);
    REQUIRE(got != nullptr);
    CHECK(got->pattern == x.rule);
    CHECK(kernel_uses_tensor_cores(x.name) == want->tensor_cores);
    decided.insert(got);
  }
  for (const tc_rule& r : tensor_core_rules()) {
    CAPTURE(r.pattern);
    CHECK(decided.contains(&r));
    CHECK(!r.why.empty());
  }

  // No rule: no tensor cores. Types inside template arguments do not count for the base_* rules.
  for (std::string_view name : {
           std::string_view{},
           std::string_view{"volta_sgemm_128x64_nn"},
           std::string_view{"ampere_hgemm_256x128_nt_v0"},  // HFMA2
           std::string_view{"igemm_fwd_gtc_nhwc_fp16_bx0_ex1_bt128x128x16"},  // made up: not gtcx
           std::string_view{"reduce_segments"},
           std::string_view{"SubTensorOpWithScalar1d"},
           std::string_view{"void vllm::reshape_and_cache_flash_kernel<__hip_bfloat16, __hip_bfloat16, "
                            "(vllm::Fp8KVCacheDataType)0>(__hip_bfloat16 const*)"},
           std::string_view{"void at::native::vectorized_elementwise_kernel<4, my::h884_cast<c10::Half>, "
                            "std::array<char*, 2ul> >(int, my::h884_cast<c10::Half>, std::array<char*, 2ul>)"},
       }) {
    CAPTURE(name);
    CHECK(tensor_core_rule(name) == nullptr);
    CHECK_FALSE(kernel_uses_tensor_cores(name));
  }
}

TEST_CASE("tensor cores: kernel_base_name") {
  CHECK(kernel_base_name("void at::native::reduce_kernel<512, 1>(int)") == "reduce_kernel");
  CHECK(kernel_base_name("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true>(float*, "
                         "float const*, int, int, int)") == "softmax_warp_forward");
  CHECK(kernel_base_name("cuda_sample::(anonymous namespace)::add_inplace(float*, float const*, int)") ==
        "add_inplace");
  CHECK(kernel_base_name("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float>("
                         "cublasGemvParams<float>)") == "kernel");
  CHECK(kernel_base_name("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass_80_simt_sgemm_"
                         "128x32_8x5_nn_align1::Params)") == "Kernel2");
  CHECK(kernel_base_name("void foo<bar<(baz)1> >()") == "foo");
  CHECK(kernel_base_name("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)") ==
        "ncclKernel_AllReduce_RING_LL_Sum_float");
  CHECK(kernel_base_name("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN") ==
        "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN");
  CHECK(kernel_base_name("_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl_cshuffle_v3INS_"
                         "28GridwiseGemm_xdl_cshuffle_v3EEEvv") == "kernel_grouped_conv_fwd_xdl_cshuffle_v3");
  CHECK(kernel_base_name("_ZN7ck_tile6kentryILi1EEEvv") == "kentry");
  CHECK(kernel_base_name("_ZN5aiter26fmha_fwd_hd128_bf16_causalE") == "fmha_fwd_hd128_bf16_causal");
  CHECK(kernel_base_name("_ZNK3foo3barEv") == "bar");
  CHECK(kernel_base_name("_Z10foo_kernelPf") == "foo_kernel");
  CHECK(kernel_base_name("_ZN5aiter999xE") == "_ZN5aiter999xE");  // a length past the end: the whole name
  CHECK(kernel_base_name("").empty());
}

TEST_CASE("tensor cores: wildcard patterns") {
  CHECK(tc_pattern_matches("Cijk_A_MI16x16x1_SN", "Cijk_*_MI#x", tc_match::prefix));
  CHECK_FALSE(tc_pattern_matches("Cijk_A_MIWT2_1_SN", "Cijk_*_MI#x", tc_match::prefix));
  CHECK_FALSE(tc_pattern_matches("Cijk_A_MI_x", "Cijk_*_MI#x", tc_match::prefix));  // # needs a digit
  CHECK_FALSE(tc_pattern_matches("xCijk_A_MI16x", "Cijk_*_MI#x", tc_match::prefix));
  CHECK(tc_pattern_matches("xCijk_A_MI16x", "Cijk_*_MI#x", tc_match::contains));
  CHECK(tc_pattern_matches("fmha_cutlassF_f32_a_sm75", "fmha_cutlass?_f32*_sm7#", tc_match::base_prefix));
  CHECK_FALSE(tc_pattern_matches("fmha_cutlassFF_f32_a_sm75", "fmha_cutlass?_f32*_sm7#", tc_match::base_prefix));
  CHECK(tc_pattern_matches("ab", "a*b", tc_match::prefix));  // * may be empty
  // the star backtracks past a first, wrong "tensor"
  CHECK(tc_pattern_matches("sm80_xmma_a_tensorb_tensor16x8x8", "sm#_xmma_*tensor#", tc_match::prefix));
  CHECK_FALSE(tc_pattern_matches("sm_xmma_tensor1", "sm#_xmma_*tensor#", tc_match::prefix));
  CHECK(tc_pattern_matches("a_SM80_16x8x16_F32", "SM#_#x#x#_", tc_match::base_contains));
  CHECK_FALSE(tc_pattern_matches("SM75_U32x4_LDSM_N", "SM#_#x#x#_", tc_match::contains));
  CHECK(tc_pattern_matches("volta_h884gemm", "h884", tc_match::contains));
  CHECK_FALSE(tc_pattern_matches("volta_h884gemm", "h884", tc_match::prefix));
  CHECK(tc_pattern_matches("anything", "", tc_match::prefix));
}

TEST_CASE("tensor cores: the plugin's rule beside ours") {
  // Plugin-era names where the plugin is right: the two agree.
  for (std::string_view name : {
           "volta_h884gemm_64x64_ldg8_nn",
           "volta_fp16_s884cudnn_fp16_128x128_ldg8_splitK_relu_f2f_exp_small_nhwc_tn_v1",
           "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn",
           "turing_h1688gemm_128x128_ldg8_nn",
           "turing_int8_i8816gemm_int8_128x128_ldg16_nt",
           "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn",
           "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_tn_align4>(cutlass_80_tensorop_s1688gemm_"
           "64x64_32x4_tn_align4::Params)",
           "sm80_xmma_gemm_f16f16_f16f32_f32_nt_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16",
           "sm80_xmma_sparse_gemm_f16f16_f16f32_f32_nt_n_tilesize128x128x64_stage3_warpsize2x2x1_sptensor16x8x32",
           "sm90_xmma_wgrad_image_first_layer_f16f16_f32_f32_nhwckrsc_nhwc_hmma_k64c4r7s7_stride2x2_tile16x64x64_"
           "tensor1688_execute_kernel_kernel__5x_cudnn",
           "void cudnn::detail::first_layer_wgrad_kernel<__half, 128, 7, 7>(Params)",
           // right by its xmma_gemm substring, where the sm90 convolutions below are missed
           "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_"
           "kernel__5x_cublas",
       }) {
    CAPTURE(name);
    CHECK(is_tc_kernel(name));
    CHECK(kernel_uses_tensor_cores(name));
  }

  // Where they differ (docs/tensor-cores.md#the-plugins-rule): {name, plugin, ours}.
  struct difference {
    std::string_view name;
    bool plugin;
    bool ours;
  };
  const difference differences[] = {
      // FP32 SIMT GEMMs that contain "xmma_gemm"
      {"sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_"
       "kernel__5x_cublas",
       true, false},
      // Hopper: warpgroup MMA without a plugin substring
      {"sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize64x128x64_warpgroupsize1x1x1_g1_"
       "execute_segment_k_off_kernel__5x_cudnn",
       false, true},
      {"nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN", false, true},
      {"nvjet_sm90_qqtst_128x128_128x6_2x1_v_bz_coopA_algo2_TNT", false, true},
      // Ampere cuDNN convolutions name the MMA shape, not the plugin's 16816 / s1688
      {"sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5_warpsize2x2x1_g1_"
       "tensor16x8x8_execute_kernel_cudnn_infer",
       false, true},
      {"void cutlass::Kernel2<cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_64x1_nn_align2>(cutlass_80_wmma_"
       "tensorop_f16_s161616gemm_f16_32x32_64x1_nn_align2::Params)",
       false, true},
      {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
       false, true},
      {"void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
       "cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true>("
       "pytorch_flash::Flash_fwd_params)",
       false, true},
      {"Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1", false, true},
      {"igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt64x128x32_wt32x32x8_ws1x1_wr2x1_gkgs", false, true},
      {"attn_fwd", false, true},
      {"_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1", false, true},
  };
  for (const difference& d : differences) {
    CAPTURE(d.name);
    CHECK(is_tc_kernel(d.name) == d.plugin);
    CHECK(kernel_uses_tensor_cores(d.name) == d.ours);
  }

  // On every name of the traces: wherever the plugin says tensor cores, so do we, except the
  // FP32 `_ffma_` xmma GEMMs.
  std::size_t both = 0;
  std::size_t plugin_only = 0;
  std::size_t ours_only = 0;
  for (const auto& [name, uses] : expected_names()) {
    const bool plugin = is_tc_kernel(name);
    if (plugin && uses) ++both;
    if (plugin && !uses) {
      ++plugin_only;
      CHECK_MESSAGE(name.find("_ffma_") != std::string::npos, name);
    }
    if (!plugin && uses) ++ours_only;
  }
  CHECK(both > 0);
  CHECK(plugin_only > 0);
  CHECK(ours_only > 0);
  MESSAGE("tensor-core names: both rules " << both << ", the plugin's only " << plugin_only << ", ours only "
                                           << ours_only);
}
