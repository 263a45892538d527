// SPDX-License-Identifier: BSD-3-Clause
// Module scopes in the written trace: python_function "nn.Module: <type>_<k>" slices with the
// args torch-tb-profiler's Module view reads (docs/trace-format.md#python_function), read back with
// nlohmann.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "../module_fixture.hpp"
#include "kinetoscope/writer/chrome_trace.hpp"

using json = nlohmann::json;

TEST_CASE("chrome_trace: module scopes become python_function nn.Module slices") {
  const kinetoscope::trace_data d = module_fixture::tiny_net_trace();
  const json doc = json::parse(kinetoscope::chrome_trace_string(d));
  CHECK(doc.at("with_modules") == 1);

  std::vector<json> modules;
  std::set<std::int64_t> ev_idx;
  std::size_t indexed = 0;
  for (const json& e : doc.at("traceEvents")) {
    if (e.contains("args") && e["args"].contains("Ev Idx")) {
      ev_idx.insert(e["args"]["Ev Idx"].get<std::int64_t>());
      ++indexed;
    }
    if (e.value("cat", "") == "cpu_op") CHECK_FALSE(e["args"].contains("Module Hierarchy"));
    if (e.value("cat", "") == "python_function") modules.push_back(e);
  }
  CHECK(ev_idx.size() == indexed);  // unique among cpu_op, user_annotation, python_function
  REQUIRE(modules.size() == 8);

  const json& root = modules[0];
  CHECK(root["ph"] == "X");
  CHECK(root["name"] == "nn.Module: TinyNet_0");
  CHECK(root["pid"] == 4242);
  CHECK(root["tid"] == 1);
  CHECK(root["ts"].get<double>() == 1000000.0);
  CHECK(root["dur"].get<double>() == 100.0);
  CHECK(root["args"]["Python parent id"].is_null());
  CHECK(root["args"]["Python id"] == 1);
  CHECK(root["args"]["Python module id"] == 11);
  CHECK(root["args"]["Module path"] == "");
  CHECK(root["args"]["Module params"] == 0);

  const json& fc1 = modules[1];
  CHECK(fc1["name"] == "nn.Module: Linear_0");
  CHECK(fc1["ts"].get<double>() == 1000010.0);
  CHECK(fc1["dur"].get<double>() == 30.0);
  CHECK(fc1["args"]["Python parent id"] == 1);
  CHECK(fc1["args"]["Python id"] == 2);
  CHECK(fc1["args"]["Python module id"] == 12);
  CHECK(fc1["args"]["Module path"] == "fc1");
  CHECK(fc1["args"]["Module params"] == 40);
  CHECK(modules[2]["name"] == "nn.Module: ReLU_0");
  CHECK(modules[3]["name"] == "nn.Module: Linear_1");
  CHECK(modules[3]["args"]["Module path"] == "fc2");

  // The second pass: same names and module ids, new call ids, parent = its own root call.
  CHECK(modules[4]["name"] == "nn.Module: TinyNet_0");
  CHECK(modules[4]["args"]["Python id"] == 5);
  CHECK(modules[5]["name"] == "nn.Module: Linear_0");
  CHECK(modules[5]["args"]["Python parent id"] == 5);
  CHECK(modules[5]["args"]["Python module id"] == 12);
  CHECK(modules[5]["dur"].get<double>() == 20.0);
}
