// SPDX-License-Identifier: BSD-3-Clause
// The DeepSpeed-style module profile: number formatting (docs/profiler-rules.md#report), counting
// rules (profiler-rules.md#counting) and the whole report for a hand-computed model
// (tests/module_fixture.hpp).
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../module_fixture.hpp"
#include "kinetoscope/kinetoscope.hpp"

using namespace kinetoscope;

namespace {

op_input tensor(std::vector<std::int64_t> dims) {
  op_input in;
  in.dims = std::move(dims);
  in.type = "float";
  return in;
}

op_input int_list(std::vector<std::int64_t> values) {
  op_input in;
  in.type = "ScalarList";
  in.values = std::move(values);
  return in;
}

op_input scalar(std::int64_t v) {
  op_input in;
  in.type = "Scalar";
  in.values = {v};
  in.concrete = std::to_string(v);
  return in;
}

op_count count(std::string_view op, const std::vector<op_input>& inputs) {
  return deepspeed_count(op, inputs.data(), inputs.size());
}

const std::string banner = "\n-------------------------- DeepSpeed Flops Profiler --------------------------\n";
const std::string notations =
    "Notations:\n"
    "data parallel size (dp_size), model parallel size(mp_size),\n"
    "number of parameters (params), number of multiply-accumulate operations(MACs),\n"
    "number of floating-point operations (flops), floating-point operations per second (FLOPS),\n"
    "fwd latency (forward propagation latency), bwd latency (backward propagation latency),\n"
    "step (weights update latency), iter latency (sum of fwd, bwd and step latency)\n\n";

/// The summary block of the fixture model (labels padded to 70, values to 8).
const std::string tiny_summary =
    "params per GPU:                                                         58      \n"
    "params of model = params per GPU * mp_size:                             58      \n"
    "fwd MACs per GPU:                                                       96 MACs \n"
    "fwd flops per GPU:                                                      212     \n"
    "fwd flops of model = fwd flops per GPU * mp_size:                       212     \n"
    "fwd latency:                                                            100 us  \n"
    "fwd FLOPS per GPU = fwd flops per GPU / fwd latency:                    2.12 MFLOPS\n"
    "fwd passes averaged (MACs, flops, latency are per pass):                2 (steps 3-4)\n";

const std::string tiny_tree =
    "TinyNet(\n"
    "  58 = 100% Params, 96 MACs = 100% MACs, 100 us = 100% latency, 2.12 MFLOPS\n"
    "  (fc1): Linear(40 = 68.97% Params, 64 MACs = 66.67% MACs, 25 us = 25% latency, 5.12 MFLOPS)\n"
    "  (act): ReLU(0 = 0% Params, 0 MACs = 0% MACs, 10 us = 10% latency, 1.6 MFLOPS)\n"
    "  (fc2): Linear(18 = 31.03% Params, 32 MACs = 33.33% MACs, 40 us = 40% latency, 1.6 MFLOPS)\n"
    ")\n";

const std::string detailed_header =
    "\n------------------------------ Detailed Profile per GPU ------------------------------\n"
    "Each module profile is listed after its name in the following order: \n"
    "params, percentage of total params, MACs, percentage of total MACs, fwd latency, percentage "
    "of total fwd latency, fwd FLOPS\n"
    "\nNote: 1. MACs and flops of a module include its sub-modules'; operators a module runs "
    "outside its sub-modules make up the difference between a parent's figures and the sum of its "
    "children's.\n"
    "2. Number of floating-point operations is a theoretical estimation, thus FLOPS computed using "
    "that could be larger than the maximum system throughput.\n"
    "3. Latency is the wall time of the module scopes, averaged per forward pass over the window.\n\n";

}  // namespace

TEST_CASE("module profile: number formatting follows DeepSpeed's helpers") {
  // Examples of DeepSpeed output. "6279.86 G" and "3139.93 GMACs" were printed by a DeepSpeed
  // without a T prefix for flops and MACs; today's helpers pick T on their own and print them when
  // G is asked for through the units argument.
  CHECK(number_to_string(6279.86e9, "G") == "6279.86 G");
  CHECK(number_to_string(6279.86e9) == "6.28 T");
  CHECK(macs_to_string(3139.93e9, "G") == "3139.93 GMACs");
  CHECK(macs_to_string(3139.93e9) == "3.14 TMACs");
  CHECK(flops_to_string(81.9e12) == "81.9 TFLOPS");
  CHECK(params_to_string(336.23e6) == "336.23 M");
  CHECK(params_to_string(156) == "156");
  CHECK(duration_to_string(0.07667) == "76.67 ms");
  CHECK(duration_to_string(273.47e-6) == "273.47 us");
  // Units at each boundary, G -> B for params, 0 and the trailing space.
  CHECK(number_to_string(0) == "0 ");
  CHECK(number_to_string(1e12) == "1 T");
  CHECK(number_to_string(999.999) == "1000 ");
  CHECK(number_to_string(0.5) == "500 m");
  CHECK(number_to_string(0.0005) == "500 u");
  CHECK(params_to_string(1.5e9) == "1.5 B");
  CHECK(params_to_string(0) == "0");
  CHECK(params_to_string(2.5e9, "B") == "2.5 B");
  CHECK(duration_to_string(0.25, "m") == "250 ms");
  // Python's round(): 2675 / 1000 is 2.67499999... in binary, so 2.67, not 2.68.
  CHECK(number_to_string(2675) == "2.67 K");
  // %g: six significant digits.
  CHECK(number_to_string(1234567e12) == "1.23457e+06 T");
}

TEST_CASE("module profile: DeepSpeed's counting rules on aten ops") {
  // linear: MACs = numel(input) · out_features, flops = 2 · MACs (bias ignored).
  op_count c = count("aten::linear", {tensor({16, 1024}), tensor({10, 1024}), tensor({10})});
  CHECK(c.counted);
  CHECK(c.macs == 163840);
  CHECK(c.flops == 327680);
  // conv2d 3->8, 3x3, pad 1 on [16, 3, 32, 32]: MACs = 9·3·8 · 16·32·32; bias adds 8·16·32·32.
  c = count("aten::conv2d", {tensor({16, 3, 32, 32}), tensor({8, 3, 3, 3}), tensor({8}),
                             int_list({1, 1}), int_list({1, 1}), int_list({1, 1}), scalar(1)});
  CHECK(c.macs == 3538944);
  CHECK(c.flops == 2 * 3538944 + 131072);
  // stride 2, no bias, groups 2: out 15x15; MACs = 9 · 4 · (6/2) · 1 · 225.
  c = count("aten::conv2d", {tensor({1, 4, 31, 31}), tensor({6, 2, 3, 3}), op_input{},
                             int_list({2, 2}), int_list({0, 0}), int_list({1, 1}), scalar(2)});
  CHECK(c.macs == 24300);
  CHECK(c.flops == 48600);
  // Transposed: spatial = the input's; C_out = weight.shape[1].
  c = count("aten::conv_transpose2d", {tensor({1, 4, 5, 5}), tensor({4, 2, 3, 3}), op_input{},
                                       int_list({2, 2}), int_list({0, 0}), int_list({0, 0}),
                                       scalar(1), int_list({1, 1})});
  CHECK(c.macs == 1800);
  CHECK(c.flops == 3600);
  // batch_norm: training ×5 (affine) / ×4; eval ×2 / ×1.
  op_input train = scalar(1);
  op_input eval = scalar(0);
  const op_input x = tensor({16, 8, 32, 32});
  CHECK(count("aten::batch_norm", {x, tensor({8}), tensor({8}), tensor({8}), tensor({8}), train}).flops == 655360);
  CHECK(count("aten::batch_norm", {x, op_input{}, op_input{}, tensor({8}), tensor({8}), train}).flops == 524288);
  CHECK(count("aten::batch_norm", {x, tensor({8}), tensor({8}), tensor({8}), tensor({8}), eval}).flops == 262144);
  CHECK(count("aten::batch_norm", {x, op_input{}, op_input{}, tensor({8}), tensor({8}), eval}).flops == 131072);
  CHECK(count("aten::layer_norm", {tensor({4, 10}), int_list({10}), tensor({10}), tensor({10})}).flops == 200);
  // Activations and pooling: numel(input), no MACs.
  c = count("aten::max_pool2d", {tensor({16, 8, 32, 32}), int_list({2, 2})});
  CHECK(c.flops == 131072);
  CHECK(c.macs == 0);
  CHECK(count("aten::relu", {tensor({2, 8})}).flops == 16);
  CHECK(count("aten::gelu", {tensor({3, 5})}).flops == 15);
  // addmm: 2 · MACs + numel(bias).
  c = count("aten::addmm", {tensor({10}), tensor({16, 1024}), tensor({1024, 10})});
  CHECK(c.macs == 163840);
  CHECK(c.flops == 327690);
  c = count("aten::bmm", {tensor({4, 8, 16}), tensor({4, 16, 2})});
  CHECK(c.macs == 1024);
  CHECK(c.flops == 2048);
  // mul/add: the broadcast shape; a scalar operand has none.
  CHECK(count("aten::mul", {tensor({4, 1, 3}), tensor({5, 1})}).flops == 60);
  CHECK(count("aten::add", {tensor({2, 3}), scalar(1)}).flops == 6);
  CHECK(count("aten::add", {scalar(1), scalar(2)}).flops == 1);
  // scaled dot-product attention: Π q · Sk + Π q[:-1] · Sk · Dv.
  c = count("aten::scaled_dot_product_attention",
            {tensor({2, 4, 8, 16}), tensor({2, 4, 10, 16}), tensor({2, 4, 10, 32})});
  CHECK(c.macs == 30720);
  CHECK(c.flops == 61440);
  CHECK(count("aten::upsample_nearest2d", {tensor({1, 3, 4, 4}), int_list({8, 8})}).flops == 64);
  // Counted as zero (their inner ops must not count either) and not counted at all.
  c = count("aten::dropout", {tensor({4, 4})});
  CHECK(c.counted);
  CHECK(c.flops == 0);
  CHECK_FALSE(count("aten::log_softmax", {tensor({4, 4})}).counted);
  // Malformed inputs count 0 without failing.
  CHECK(count("aten::conv2d", {tensor({3, 32, 32}), tensor({8, 3, 3, 3})}).macs == 0);
  CHECK(count("aten::linear", {}).flops == 0);
}

TEST_CASE("module profile: tree, per-pass numbers and attribution of the fixture model") {
  const module_profile p = build_module_profile(module_fixture::tiny_net_trace());
  REQUIRE(p.ok);
  CHECK(p.passes == 2);
  CHECK(p.has_shapes);
  CHECK(p.first_step == 3);
  CHECK(p.last_step == 4);
  CHECK(p.root.type == "TinyNet");
  CHECK(p.root.params == 58);
  CHECK(p.root.macs == 96);
  CHECK(p.root.flops == 212);  // the nested addmm, the mul outside and the mm on thread 2 don't count
  CHECK(p.root.latency_s == 100e-6);
  REQUIRE(p.root.children.size() == 3);
  CHECK(p.root.children[0].key == "fc1");
  CHECK(p.root.children[0].calls == 2);
  CHECK(p.root.children[0].latency_s == 25e-6);
  CHECK(p.root.children[0].macs == 64);
  CHECK(p.root.children[1].key == "act");
  CHECK(p.root.children[1].flops == 16);
  CHECK(p.root.children[2].key == "fc2");
  CHECK(p.root.children[2].params == 18);

  const module_profile sub = build_module_profile(module_fixture::tiny_net_trace(), "fc2");
  REQUIRE(sub.ok);
  CHECK(sub.root.type == "Linear");
  CHECK(sub.root.macs == 32);
  CHECK_FALSE(build_module_profile(module_fixture::tiny_net_trace(), "nope").ok);
}

TEST_CASE("module profile: the whole report of the fixture model") {
  const trace_data d = module_fixture::tiny_net_trace();
  const std::string expected =
      banner + "Profile Summary at step 3:\n" + notations + tiny_summary +
      "\n----------------------------- Aggregated Profile per GPU -----------------------------\n"
      "Top 2 modules in terms of params, MACs or fwd latency at different model depths:\n"
      "depth 0:\n"
      "    params      - {'TinyNet': '58'}\n"
      "    MACs        - {'TinyNet': '96 MACs'}\n"
      "    fwd latency - {'TinyNet': '100 us'}\n" +
      detailed_header + tiny_tree + std::string(78, '-') + "\n";
  CHECK(print_model_profile(d, {.top_modules = 2}) == expected);

  // module_depth 2 prints depths 0 and 1; top 1 keeps the largest class per metric (ties keep
  // the first seen); detailed = false drops the tree; profile_step overrides the step.
  const std::string shallow =
      banner + "Profile Summary at step 7:\n" + notations + tiny_summary +
      "\n----------------------------- Aggregated Profile per GPU -----------------------------\n"
      "Top 1 modules in terms of params, MACs or fwd latency at different model depths:\n"
      "depth 0:\n"
      "    params      - {'TinyNet': '58'}\n"
      "    MACs        - {'TinyNet': '96 MACs'}\n"
      "    fwd latency - {'TinyNet': '100 us'}\n"
      "depth 1:\n"
      "    params      - {'Linear': '58'}\n"
      "    MACs        - {'Linear': '96 MACs'}\n"
      "    fwd latency - {'Linear': '65 us'}\n" +
      std::string(78, '-') + "\n";
  CHECK(print_model_profile(d, {.profile_step = 7, .module_depth = 2, .detailed = false}) == shallow);
  // Deeper than the tree: clamped to its two levels.
  CHECK(print_model_profile(d, {.profile_step = 7, .module_depth = 9, .detailed = false}) == shallow);
}

TEST_CASE("module profile: missing shapes, missing scopes and the output file") {
  trace_data no_shapes = module_fixture::tiny_net_trace();
  no_shapes.record_shapes = false;
  for (cpu_event& e : no_shapes.events) e.input_count = 0;
  const std::string text = print_model_profile(no_shapes);
  CHECK(text.find("Note: recorded without record_shapes: operator input shapes are unknown, so "
                  "MACs and flops are 0.\n") != std::string::npos);
  CHECK(text.find("fwd MACs per GPU:                                                       0 MACs  \n") !=
        std::string::npos);

  trace_data empty = module_fixture::tiny_net_trace();
  empty.modules.clear();
  CHECK(print_model_profile(empty) ==
        "module profile: no module scopes in this window: profile with with_modules = true and wrap "
        "the model's module calls in kinetoscope::module_scope\n");

  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kinetoscope_module_profile_test";
  std::filesystem::remove_all(dir);
  const std::string path = (dir / "sub" / "profile.txt").string();
  const std::string printed = print_model_profile(module_fixture::tiny_net_trace(), {.output_file = path});
  std::ifstream in(path);
  std::stringstream file;
  file << in.rdbuf();
  CHECK(file.str() == printed);
  std::filesystem::remove_all(dir);

  CHECK_THROWS_WITH_AS(print_model_profile(module_fixture::tiny_net_trace(), {.output_file = "/proc/no/such/file"}),
                       doctest::Contains("cannot write module profile /proc/no/such/file"), std::runtime_error);
}
