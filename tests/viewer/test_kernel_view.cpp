// SPDX-License-Identifier: BSD-3-Clause
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "analysis/kernel_view.hpp"
#include "analysis/loader.hpp"
#include "analysis/op_tree.hpp"
#include "op_tree_golden.hpp"
#include "op_tree_test_builder.hpp"

using namespace kinetoscope::analysis;
using kinetoscope::analysis::testing::model_builder;

namespace {

kernel_args args(double bps, double occ, bool with_metrics = true) {
  kernel_args a;
  a.device = 0;
  if (with_metrics) {
    a.blocks_per_sm = bps;
    a.has_blocks_per_sm = true;
    a.occupancy = occ;
    a.has_occupancy = true;
  }
  a.grid[0] = 98;
  a.grid[1] = 8;
  a.grid[2] = 1;
  a.has_grid = true;
  a.block[0] = 256;
  a.block[1] = 1;
  a.block[2] = 1;
  a.has_block = true;
  a.registers_per_thread = 32;
  a.has_registers = true;
  a.shared_memory = 0;
  a.has_shared_memory = true;
  return a;
}

}  // namespace

TEST_CASE("kernel_view: group by name over all kernel events") {
  model_builder b;
  b.host("aten::mm", 0, 100, 1, 1)
      .runtime(1, 1, 1, 1, 10)
      .kernel("volta_h884gemm", 200, 2.5, 10, 1, args(2, 50))
      .runtime(2, 1, 1, 1, 11)
      .kernel("volta_h884gemm", 210, 1.5, 11, 1, args(4, 30, false))  // no metrics: weighted as 0
      .kernel("not_in_tree", 220, 10, 999, 0, args(1, 100));           // stale, no step: not in tree
  auto m = b.build();
  auto t = build_op_tree(m);
  auto rows = kernels_by_name(m, t);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].name == "not_in_tree");  // total 10 first
  const auto& tc = rows[1];
  CHECK(tc.name == "volta_h884gemm");
  CHECK(tc.tensor_cores_used);
  CHECK(tc.calls == 2);
  CHECK(tc.total_us == 4);  // round(4.0)
  CHECK(tc.mean_us == 2);   // round(2.0)
  CHECK(tc.max_us == 2);    // round(2.5) = 2 (ties to even)
  CHECK(tc.min_us == 2);    // round(1.5) = 2
  CHECK(tc.blocks_per_sm == doctest::Approx(1.25));   // (2*2.5 + 0*1.5) / 4
  CHECK(tc.occupancy_pct == doctest::Approx(31.25));  // (50*2.5) / 4
  CHECK(tc.total_raw_us == 4.0);
  CHECK_FALSE(rows[0].tensor_cores_used);
  auto cols = kernel_view_metric_columns(m);
  CHECK(cols.blocks_per_sm);
  CHECK(cols.occupancy);
  CHECK(kernel_view_present(m, t));
  CHECK(tc_kernel_ratio(m) == doctest::Approx(4.0 / 14.0));
}

TEST_CASE("kernel_view: metric columns need args.device and valid values") {
  model_builder b;
  kernel_args no_device = args(2, 50);
  no_device.device = -1;
  kernel_args negative = args(-1, -1);
  b.kernel("k1", 0, 1, 1, 0, no_device).kernel("k2", 2, 1, 2, 0, negative);
  auto m = b.build();
  auto cols = kernel_view_metric_columns(m);
  CHECK_FALSE(cols.blocks_per_sm);
  CHECK_FALSE(cols.occupancy);
}

TEST_CASE("kernel_view: group by properties and operator over the kernels in the tree") {
  model_builder b;
  kernel_args bare;  // no grid/block/registers/shared memory
  bare.device = 0;
  b.host("ProfilerStep#1", 0, 1000, 1, 1)
      .host("aten::conv2d", 10, 100, 1, 2)
      .host("aten::cudnn_convolution", 20, 50, 1, 3)
      .runtime(21, 1, 1, 3, 10)
      .kernel("conv_kernel", 2000, 3.25, 10, 3, args(2, 40))
      .runtime(22, 1, 1, 3, 11)
      .kernel("conv_kernel", 2010, 1.75, 11, 3, args(4, 20))
      .runtime(23, 1, 1, 3, 12)
      .kernel("conv_kernel", 2020, 1, 12, 3, bare)  // other grid/block: its own row
      .kernel("stale", 2100, 8, 555)                // no runtime: under the main root
      .host("other", 300, 10, 1, 4)
      .runtime(301, 1, 1, 4, 13)
      .kernel("conv_kernel", 2200, 2, 13, 4, args(2, 40));
  auto m = b.build();
  auto t = build_op_tree(m);
  auto rows = kernels_by_name_and_operator(m, t);
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].name == "stale");
  CHECK(rows[0].operator_name == "CallTreeRoot");
  CHECK(rows[0].grid == "None");
  CHECK(rows[0].block == "None");
  CHECK(rows[0].registers_per_thread == "0");
  CHECK(rows[0].shared_memory == "0");
  CHECK(rows[0].total_us == 8);  // the kernel table does not double stale kernels

  const auto& conv = rows[1];
  CHECK(conv.name == "conv_kernel");
  CHECK(conv.operator_name == "aten::cudnn_convolution");
  CHECK(conv.grid == "[98, 8, 1]");
  CHECK(conv.block == "[256, 1, 1]");
  CHECK(conv.registers_per_thread == "32");
  CHECK(conv.shared_memory == "0");
  CHECK(conv.calls == 2);
  CHECK(conv.total_us == 5.0);  // raw
  CHECK(conv.max_us == 3.25);
  CHECK(conv.min_us == 1.75);
  CHECK(conv.mean_us == 2);     // round(2.5) = 2
  CHECK(conv.op_tc_eligible);   // aten::cudnn_convolution is on the allow-list
  CHECK_FALSE(conv.tensor_cores_used);
  CHECK(conv.blocks_per_sm == doctest::Approx(2.7));  // (2*3.25 + 4*1.75) / 5
  CHECK(conv.occupancy_pct == doctest::Approx(33));   // (40*3.25 + 20*1.75) / 5

  CHECK(rows[2].operator_name == "other");
  CHECK_FALSE(rows[2].op_tc_eligible);
  CHECK(rows[3].grid == "None");
  CHECK(rows[3].operator_name == "aten::cudnn_convolution");
  CHECK(rows[3].mean_us == 1);
}

TEST_CASE("kernel_view: golden tables equal torch-tb-profiler's") {
  using namespace kinetoscope::analysis::testing;
  auto cases = golden_cases();
  REQUIRE_FALSE(cases.empty());
  for (const auto& c : cases) {
    CAPTURE(c.run);
    CAPTURE(c.file);
    auto loaded = load_trace(c.trace.string());
    REQUIRE_MESSAGE(loaded.ok(), (loaded.error ? loaded.error->message() : std::string()));
    const trace_model& m = *loaded.model;
    auto trees = build_op_tree(m);
    const bool present = kernel_view_present(m, trees);
    const bool expected_present = c.expected.contains("kernels") && !c.expected.at("kernels").is_null();
    CHECK(present == expected_present);
    if (!expected_present) continue;
    const auto& ks = c.expected.at("kernels");
    const auto cols = kernel_view_metric_columns(m);

    golden_compare by_name("kernels.by_name");
    auto rows = kernels_by_name(m, trees);
    std::map<std::string, const kernel_row*> index;
    for (const auto& r : rows) index[r.name] = &r;
    by_name.count(ks.at("by_name").size(), rows.size());
    for (const auto& want : ks.at("by_name")) {
      const std::string name = want.at("name").get<std::string>();
      const std::string key = short_key(name);
      CHECK(want.contains("blocks_per_sm") == cols.blocks_per_sm);
      CHECK(want.contains("occupancy_pct") == cols.occupancy);
      auto it = index.find(name);
      if (it == index.end()) {
        by_name.missing(key);
        continue;
      }
      const kernel_row& got = *it->second;
      by_name.exact_bool(key, "tensor_cores_used", want, got.tensor_cores_used);
      by_name.exact_int(key, "calls", want, got.calls);
      by_name.time(key, "total_us", want, got.total_us);
      by_name.time(key, "mean_us", want, got.mean_us);
      by_name.time(key, "max_us", want, got.max_us);
      by_name.time(key, "min_us", want, got.min_us);
      by_name.pct(key, "blocks_per_sm", want, got.blocks_per_sm);
      by_name.pct(key, "occupancy_pct", want, got.occupancy_pct);
    }
    for (const auto& line : by_name.mismatches()) FAIL_CHECK(line);

    golden_compare by_op("kernels.by_name_and_operator");
    auto op_rows = kernels_by_name_and_operator(m, trees);
    auto key_of = [](const std::string& name, const std::string& op, const std::string& grid, const std::string& block,
                     const std::string& regs, const std::string& shm) {
      return name + "###" + op + "###" + grid + "###" + block + "###" + regs + "###" + shm;
    };
    std::map<std::string, const kernel_op_row*> op_index;
    for (const auto& r : op_rows)
      op_index[key_of(r.name, r.operator_name, r.grid, r.block, r.registers_per_thread, r.shared_memory)] = &r;
    by_op.count(ks.at("by_name_and_operator").size(), op_rows.size());
    for (const auto& want : ks.at("by_name_and_operator")) {
      const std::string full = key_of(want.at("name").get<std::string>(), want.at("operator").get<std::string>(),
                                      want.at("grid").get<std::string>(), want.at("block").get<std::string>(),
                                      want.at("registers_per_thread").get<std::string>(),
                                      want.at("shared_memory").get<std::string>());
      const std::string key = short_key(want.at("operator").get<std::string>() + " / " + want.at("name").get<std::string>());
      auto it = op_index.find(full);
      if (it == op_index.end()) {
        by_op.missing(key);
        continue;
      }
      const kernel_op_row& got = *it->second;
      by_op.exact_bool(key, "tensor_cores_used", want, got.tensor_cores_used);
      by_op.exact_int(key, "calls", want, got.calls);
      by_op.time(key, "total_us", want, got.total_us);
      by_op.time(key, "mean_us", want, got.mean_us);
      by_op.time(key, "max_us", want, got.max_us);
      by_op.time(key, "min_us", want, got.min_us);
      by_op.pct(key, "blocks_per_sm", want, got.blocks_per_sm);
      by_op.pct(key, "occupancy_pct", want, got.occupancy_pct);
    }
    for (const auto& line : by_op.mismatches()) FAIL_CHECK(line);
    CHECK(by_name.mismatches().empty());
    CHECK(by_op.mismatches().empty());
  }
}
