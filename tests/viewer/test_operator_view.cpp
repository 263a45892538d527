// SPDX-License-Identifier: BSD-3-Clause
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "analysis/loader.hpp"
#include "analysis/op_tree.hpp"
#include "analysis/operator_view.hpp"
#include "analysis/report.hpp"
#include "kinetoscope/kinetoscope.hpp"
#include "kinetoscope/writer/chrome_trace.hpp"
#include "op_tree_golden.hpp"
#include "op_tree_test_builder.hpp"

using namespace kinetoscope::analysis;
using kinetoscope::analysis::testing::model_builder;

namespace {

const operator_row* row_named(const std::vector<operator_row>& rows, std::string_view name,
                              std::string_view shape = {}) {
  for (const auto& r : rows)
    if (r.name == name && (shape.empty() || r.input_shape == shape)) return &r;
  return nullptr;
}

// Two call sites of the same op, for the stack grouping of a trace kinetoscope records itself.
[[gnu::noinline]] void stack_site_a() { kinetoscope::record_op op("aten::mm"); }
[[gnu::noinline]] void stack_site_b() { kinetoscope::record_op op("aten::mm"); }

}  // namespace

TEST_CASE("operator_view: Python list text of input dims") {
  CHECK(python_list_text("") == "[]");
  CHECK(python_list_text("[]") == "[]");
  CHECK(python_list_text("[[32,256,14,14],[1024,256,1,1],[],[]]") == "[[32, 256, 14, 14], [1024, 256, 1, 1], [], []]");
  CHECK(python_list_text("[ [1, 2] ,[ ] ]") == "[[1, 2], []]");
  CHECK(python_list_text("[1.0,2.5,1e-05,-3]") == "[1.0, 2.5, 1e-05, -3]");
  CHECK(python_list_text("[\"float\",\"it's\",null,true,false]") == "['float', \"it's\", None, True, False]");
  CHECK(python_list_text("{\"a\":[1]}") == "{'a': [1]}");
  CHECK(python_list_text("[1e16,123456.0,0.0001]") == "[1e+16, 123456.0, 0.0001]");
}

TEST_CASE("operator_view: aggregation, Python rounding and ordering") {
  model_builder b;
  b.host("aten::mm", 0, 10.5, 1, 1, event_type::op, "[[2,3],[3,4]]", "a.py(1): f")  // host 10.5
      .runtime(1, 1, 1, 1, 10)
      .kernel("volta_h884gemm", 100, 2.5, 10)
      .kernel("plain", 110, 5, 10)
      .host("aten::mm", 20, 2.5, 1, 2, event_type::op, "[[2,3],[3,4]]")  // host 2.5: total 13
      .host("aten::mm", 30, 1, 1, 3, event_type::op, "[[5],[5]]", "b.py(2): g")
      .host("aten::add", 40, 3.5, 1, 4, event_type::op, "[[1],[1]]")
      .runtime(41, 0.5, 1, 4, 11)
      .kernel("add_kernel", 120, 20, 11);
  auto m = b.build();
  auto t = build_op_tree(m);
  REQUIRE(operator_view_has_device_columns(m, t));

  auto rows = operators_by_name(m, t);
  REQUIRE(rows.size() == 2);
  // Ordered by unrounded device self, descending: add (20) before mm (7.5).
  CHECK(rows[0].name == "aten::add");
  CHECK(rows[1].name == "aten::mm");
  const auto& mm = rows[1];
  CHECK(mm.calls == 3);
  CHECK(mm.host_total_us == 14);  // round(10.5 + 2.5 + 1) = round(14.0)
  CHECK(mm.host_self_us == 13);   // 9.5 + 2.5 + 1 = 13.0
  CHECK(mm.device_self_us == 8);  // round(7.5) = 8 (ties to even)
  CHECK(mm.device_total_us == 8);
  CHECK(mm.tc_eligible);
  CHECK(mm.tc_self_pct == doctest::Approx(33.33));  // round(100 * 2.5 / 7.5, 2)
  CHECK(mm.tc_total_pct == doctest::Approx(33.33));
  CHECK(mm.has_call_stack);
  CHECK(mm.call_stacks == std::vector<std::string>{"a.py(1): f", "b.py(2): g"});
  const auto& add = rows[0];
  CHECK(add.host_self_us == 3);   // 3.5 - 0.5 = 3.0
  CHECK(add.host_total_us == 4);  // round(3.5) = 4
  CHECK(add.device_self_us == 20);
  CHECK(add.tc_self_pct == 0);
  CHECK_FALSE(add.has_call_stack);

  auto by_shape = operators_by_name_and_input_shape(m, t);
  REQUIRE(by_shape.size() == 3);
  const auto* mm23 = row_named(by_shape, "aten::mm", "[[2, 3], [3, 4]]");
  REQUIRE(mm23 != nullptr);
  CHECK(mm23->calls == 2);
  CHECK(mm23->host_total_us == 13);
  CHECK(mm23->host_self_us == 12);  // round(9.5 + 2.5) = 12
  const auto* mm5 = row_named(by_shape, "aten::mm", "[[5], [5]]");
  REQUIRE(mm5 != nullptr);
  CHECK(mm5->device_self_us == 0);
  CHECK(mm5->tc_self_pct == 0);

  // Without device columns, rows are ordered by host self.
  auto host_rows = operators_by_name(m, t, false);
  CHECK(host_rows[0].name == "aten::mm");

  // Call-stack drill-down.
  auto stacks = operator_stack_rows(m, t, "aten::mm", std::nullopt);
  REQUIRE(stacks.size() == 2);
  CHECK(stacks[0].call_stack == "a.py(1): f");
  CHECK(stacks[0].calls == 1);
  CHECK(stacks[0].device_self_us == 8);
  CHECK(stacks[1].call_stack == "b.py(2): g");
  auto stacks_shape = operator_stack_rows(m, t, "aten::mm", std::string_view("[[5], [5]]"));
  REQUIRE(stacks_shape.size() == 1);
  CHECK(stacks_shape[0].call_stack == "b.py(2): g");

  auto pies = operator_pies_by_name(m, t);
  REQUIRE(pies.device_self.size() == 2);
  CHECK(pies.device_self[0].first == "aten::add");
  CHECK(pies.device_self[1].second == doctest::Approx(7.5));
  CHECK(pies.host_total.size() == 2);
  CHECK(pies.host_total[0].first == "aten::mm");
}

TEST_CASE("operator_view: tc_eligible of the group is the first instance's") {
  model_builder b;
  b.host("my_op", 0, 10, 1, 1)  // not eligible
      .host("my_op", 20, 10, 1, 2)
      .host("aten::mm", 21, 2, 1, 3);  // makes the second my_op eligible
  auto m = b.build();
  auto t = build_op_tree(m);
  auto rows = operators_by_name(m, t);
  const auto* r = row_named(rows, "my_op");
  REQUIRE(r != nullptr);
  CHECK_FALSE(r->tc_eligible);
  // Runtime-only profile: no device columns.
  CHECK_FALSE(operator_view_has_device_columns(m, t));
}

TEST_CASE("operator_view: golden tables equal torch-tb-profiler's") {
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
    const bool device_columns = operator_view_has_device_columns(m, trees);
    const auto& ops = c.expected.at("operators");

    golden_compare by_name("operators.by_name");
    auto rows = operators_by_name(m, trees, device_columns);
    std::map<std::string, const operator_row*> index;
    for (const auto& r : rows) index[r.name] = &r;
    by_name.count(ops.at("by_name").size(), rows.size());
    for (const auto& want : ops.at("by_name")) {
      const std::string key = want.at("name").get<std::string>();
      auto it = index.find(key);
      if (it == index.end()) {
        by_name.missing(short_key(key));
        continue;
      }
      const operator_row& got = *it->second;
      by_name.exact_int(key, "calls", want, got.calls);
      by_name.time(key, "host_self_us", want, got.host_self_us);
      by_name.time(key, "host_total_us", want, got.host_total_us);
      by_name.time(key, "device_self_us", want, got.device_self_us);
      by_name.time(key, "device_total_us", want, got.device_total_us);
      by_name.exact_bool(key, "tc_eligible", want, got.tc_eligible);
      by_name.pct(key, "tc_self_pct", want, got.tc_self_pct);
      by_name.pct(key, "tc_total_pct", want, got.tc_total_pct);
    }
    for (const auto& line : by_name.mismatches()) FAIL_CHECK(line);

    golden_compare by_shape("operators.by_name_and_input_shape");
    auto shape_rows = operators_by_name_and_input_shape(m, trees, device_columns);
    std::map<std::string, const operator_row*> shape_index;
    for (const auto& r : shape_rows) shape_index[r.name + "###" + r.input_shape] = &r;
    by_shape.count(ops.at("by_name_and_input_shape").size(), shape_rows.size());
    for (const auto& want : ops.at("by_name_and_input_shape")) {
      const std::string key = want.at("name").get<std::string>() + "###" + want.at("input_shape").get<std::string>();
      auto it = shape_index.find(key);
      if (it == shape_index.end()) {
        by_shape.missing(short_key(key));
        continue;
      }
      const operator_row& got = *it->second;
      by_shape.exact_int(key, "calls", want, got.calls);
      by_shape.time(key, "host_self_us", want, got.host_self_us);
      by_shape.time(key, "host_total_us", want, got.host_total_us);
      by_shape.time(key, "device_self_us", want, got.device_self_us);
      by_shape.time(key, "device_total_us", want, got.device_total_us);
      by_shape.exact_bool(key, "tc_eligible", want, got.tc_eligible);
      by_shape.pct(key, "tc_self_pct", want, got.tc_self_pct);
      by_shape.pct(key, "tc_total_pct", want, got.tc_total_pct);
    }
    for (const auto& line : by_shape.mismatches()) FAIL_CHECK(line);
    CHECK(by_name.mismatches().empty());
    CHECK(by_shape.mismatches().empty());
  }
}

TEST_CASE("operator_view: call stacks of a trace recorded by kinetoscope with_stack") {
  kinetoscope::profile prof({.with_stack = true});
  prof.start();
  for (void (*site)() : {stack_site_a, stack_site_b, stack_site_a}) site();
  prof.stop();
  const kinetoscope::trace_data& d = prof.last_trace();
  // The "Call stack" text the writer produces for each site, from the recorded frames.
  std::vector<std::string> expected;
  for (const auto& e : d.events) {
    std::string text;
    for (std::uint32_t i = 0; i < e.frame_count; ++i)
      text += (i ? ";" : "") + d.strings[d.frames[e.first_frame + i]];
    if (std::find(expected.begin(), expected.end(), text) == expected.end()) expected.push_back(text);
  }
  REQUIRE(expected.size() == 2);
  CHECK(expected[0].find("stack_site_a;") != std::string::npos);
  CHECK(expected[1].find("stack_site_b;") != std::string::npos);

  const load_result r = load_trace_buffer(kinetoscope::chrome_trace_string(d), "stacks.pt.trace.json");
  REQUIRE(r.ok());
  const op_trees t = build_op_tree(*r.model);
  const auto rows = operators_by_name(*r.model, t, false);
  const operator_row* mm = row_named(rows, "aten::mm");
  REQUIRE(mm != nullptr);
  CHECK(mm->calls == 3);
  CHECK(mm->has_call_stack);
  CHECK(mm->call_stacks == expected);
  const auto stacks = operator_stack_rows(*r.model, t, "aten::mm", std::nullopt, false);
  REQUIRE(stacks.size() == 2);
  const auto a = std::find_if(stacks.begin(), stacks.end(), [&](const operator_row& x) { return x.call_stack == expected[0]; });
  const auto b = std::find_if(stacks.begin(), stacks.end(), [&](const operator_row& x) { return x.call_stack == expected[1]; });
  REQUIRE(a != stacks.end());
  REQUIRE(b != stacks.end());
  CHECK(a->calls == 2);
  CHECK(b->calls == 1);
}

TEST_CASE("operator_view: a table and its pies from one aggregation equal the two computed apart") {
  // compute_report fills the Operator view's tables and pies from one grouping each
  // (operator_table_by_name...): the same rows and the same pies as the separate calls, value
  // for value, on every golden trace.
  using namespace kinetoscope::analysis::testing;
  const auto same_rows = [](const std::vector<operator_row>& a, const std::vector<operator_row>& b) {
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      CAPTURE(i);
      CHECK(a[i].name == b[i].name);
      CHECK(a[i].input_shape == b[i].input_shape);
      CHECK(a[i].calls == b[i].calls);
      CHECK(a[i].host_self_us == b[i].host_self_us);
      CHECK(a[i].host_total_us == b[i].host_total_us);
      CHECK(a[i].device_self_us == b[i].device_self_us);
      CHECK(a[i].device_total_us == b[i].device_total_us);
      CHECK(a[i].tc_self_pct == b[i].tc_self_pct);
      CHECK(a[i].call_stacks == b[i].call_stacks);
    }
  };
  const auto same_pies = [](const operator_pies& a, const operator_pies& b) {
    CHECK(a.device_total == b.device_total);
    CHECK(a.device_self == b.device_self);
    CHECK(a.host_total == b.host_total);
    CHECK(a.host_self == b.host_self);
  };
  std::size_t with_pies = 0;
  for (const auto& c : golden_cases()) {
    CAPTURE(c.file);
    auto loaded = load_trace(c.trace.string());
    REQUIRE(loaded.ok());
    const trace_model& m = *loaded.model;
    const auto trees = build_op_tree(m);
    const bool dc = operator_view_has_device_columns(m, trees);
    const operator_table by_name = operator_table_by_name(m, trees, dc);
    const operator_table by_shape = operator_table_by_name_and_input_shape(m, trees, dc);
    same_rows(by_name.rows, operators_by_name(m, trees, dc));
    same_rows(by_shape.rows, operators_by_name_and_input_shape(m, trees, dc));
    same_pies(by_name.pies, operator_pies_by_name(m, trees));
    same_pies(by_shape.pies, operator_pies_by_name_and_input_shape(m, trees));
    const full_report r = compute_report(m, trees);
    same_rows(r.operators_by_name, by_name.rows);
    same_rows(r.operators_by_shape, by_shape.rows);
    same_pies(r.pies_by_name, by_name.pies);
    same_pies(r.pies_by_shape, by_shape.pies);
    if (!by_name.pies.host_self.empty() && !by_shape.pies.host_total.empty()) ++with_pies;
  }
  CHECK(with_pies >= 8);
}
