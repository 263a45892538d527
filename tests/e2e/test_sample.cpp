// SPDX-License-Identifier: BSD-3-Clause
// End to end: run the sample CNN (the README's main job) and read what it wrote.
#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../run_command.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// Runs `command` (stderr merged) and requires exit status 0; returns its output.
std::string run(const std::string& command) {
  const kinetoscope::test::command_result r = kinetoscope::test::run_command(command);
  REQUIRE_MESSAGE(r.status == 0, "command failed: " << command << "\n" << r.output);
  return r.output;
}

std::string read_maybe_gzip(const fs::path& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files too
  REQUIRE(f != nullptr);
  std::string out;
  char buf[65536];
  int n = 0;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, static_cast<std::size_t>(n));
  gzclose(f);
  return out;
}

std::vector<fs::path> trace_files(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::exists(dir)) return files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".pt.trace.json") != std::string::npos) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("e2e: the sample CNN records two windows that real tools can read") {
  const char* bin = std::getenv("KINETOSCOPE_SAMPLE_BIN");
  REQUIRE(bin != nullptr);
  const fs::path logdir = fs::temp_directory_path() / ("kinetoscope_e2e_" + std::to_string(::getpid()));
  fs::remove_all(logdir);
  const std::string out = run(std::string(bin) + " --logdir " + logdir.string() + " --run cnn --steps 12");

  // the key_averages table is printed, sorted by self CPU, with FLOPs and memory columns
  CHECK(out.find("Self CPU time total:") != std::string::npos);
  CHECK(out.find("CPU Mem") != std::string::npos);
  CHECK(out.find("FLOPs") != std::string::npos);
  CHECK(out.find("ProfilerStep*") != std::string::npos);
  // ... followed by the module profile of the last window (steps 7-9): the model's parameters
  // are fixed by its layers (conv1 3·8·9 + 8 = 224, bn 16 + 32, conv2 8·16·9 + 16 = 1168,
  // fc 1024·10 + 10 = 10250), conv1's MACs by its shapes (9·3·8 · 16·32·32).
  CHECK(out.find("-------------------------- DeepSpeed Flops Profiler --------------------------\n"
                 "Profile Summary at step 7:\n") != std::string::npos);
  CHECK(out.find("params per GPU:                                                         11.69 K \n") !=
        std::string::npos);
  CHECK(out.find("fwd passes averaged (MACs, flops, latency are per pass):                3 (steps 7-9)\n") !=
        std::string::npos);
  CHECK(out.find("  (conv1): Conv2d(224 = 1.92% Params, 3.54 MMACs = ") != std::string::npos);
  CHECK(out.find("  (fc): Linear(10.25 K = 87.68% Params, 163.84 KMACs = ") != std::string::npos);

  // schedule(wait=1, warmup=1, active=3, repeat=2) over 12 steps: two windows, two files
  const auto files = trace_files(logdir / "cnn");
  REQUIRE(files.size() == 2);
  // ... and one TensorBoard event file with the per-step scalars beside them
  std::size_t event_files = 0;
  for (const auto& e : fs::directory_iterator(logdir / "cnn"))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) ++event_files;
  CHECK(event_files == 1);
  const std::regex pattern(R"(^(.*?)(\.\d+)?\.pt\.trace\.json(?:\.gz)?$)");
  const std::vector<std::vector<std::string>> expected_steps = {
      {"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"},
      {"ProfilerStep#7", "ProfilerStep#8", "ProfilerStep#9"}};
  for (std::size_t w = 0; w < files.size(); ++w) {
    const std::string name = files[w].filename().string();
    CAPTURE(name);
    std::smatch m;
    REQUIRE(std::regex_match(name, m, pattern));
    CHECK(m[2].str().size() == 14);  // "." + 13-digit unix ms
    const json trace = json::parse(read_maybe_gzip(files[w]));
    REQUIRE(trace.is_object());
    CHECK(trace.at("schemaVersion") == 1);
    CHECK(trace.contains("baseTimeNanoseconds"));
    CHECK(trace.at("record_shapes") == 1);
    CHECK(trace.at("profile_memory") == 1);
    CHECK(trace.at("with_flops") == 1);
    CHECK(trace.at("with_modules") == 1);

    std::vector<std::string> steps;
    std::map<std::string, int> categories;
    std::set<std::string> thread_names;
    int conv_with_dims = 0;
    int memory = 0;
    int dataloader = 0;
    int fwdbwd_s = 0;
    int fwdbwd_f = 0;
    std::map<std::string, int> modules;
    for (const json& e : trace.at("traceEvents")) {
      REQUIRE(e.contains("name"));
      const std::string ph = e.at("ph");
      const std::string ename = e.at("name");
      if (ph == "X") {
        REQUIRE(e.at("cat").is_string());
        categories[e.at("cat")] += 1;
        if (ename.rfind("ProfilerStep#", 0) == 0) steps.push_back(ename);
        if (ename == "aten::conv2d" && e.at("args").contains("Input Dims")) ++conv_with_dims;
        if (ename == "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__") ++dataloader;
        if (e.at("cat") == "python_function") modules[ename] += 1;
      } else if (ph == "i" && ename == "[memory]") {
        ++memory;
        CHECK(e.at("args").contains("Total Allocated"));
      } else if (ph == "M" && ename == "thread_name") {
        thread_names.insert(e.at("args").at("name").get<std::string>());
      } else if (e.value("cat", "") == "fwdbwd") {
        (ph == "s" ? fwdbwd_s : fwdbwd_f) += 1;
      }
    }
    CHECK(steps == expected_steps[w]);
    CHECK(categories["cpu_op"] > 50);
    CHECK(categories["user_annotation"] >= 3 + 3);
    CHECK(conv_with_dims == 2 * 3);  // two conv layers, three steps
    CHECK(dataloader == 3);
    // One call per step of the model, its five layers and the criterion, named per class.
    const std::map<std::string, int> expected_modules = {
        {"nn.Module: SmallCNN_0", 3},    {"nn.Module: Conv2d_0", 3},      {"nn.Module: Conv2d_1", 3},
        {"nn.Module: BatchNorm2d_0", 3}, {"nn.Module: BatchNorm2d_1", 3}, {"nn.Module: Linear_0", 3},
        {"nn.Module: CrossEntropyLoss_0", 3}};
    CHECK(modules == expected_modules);
    CHECK(memory > 10);
    CHECK(fwdbwd_s > 0);
    CHECK(fwdbwd_s == fwdbwd_f);
    bool loader_thread = false;
    bool autograd_thread = false;
    for (const auto& t : thread_names) {
      if (t.find("dataloader") != std::string::npos) loader_thread = true;
      if (t.find("pt_autograd_0") != std::string::npos) autograd_thread = true;
    }
    CHECK(loader_thread);
    CHECK(autograd_thread);
    CHECK(trace.at("traceEvents").back().at("name") == "Record Window End");
  }
  fs::remove_all(logdir);
}

TEST_CASE("e2e: --with-stack writes the sample's own frames in Call stack and export_stacks") {
  const char* bin = std::getenv("KINETOSCOPE_SAMPLE_BIN");
  REQUIRE(bin != nullptr);
  const fs::path logdir = fs::temp_directory_path() / ("kinetoscope_e2e_stack_" + std::to_string(::getpid()));
  fs::remove_all(logdir);
  // wait 1 + warmup 1 + active 3: one window over steps 2-4.
  const std::string out =
      run(std::string(bin) + " --logdir " + logdir.string() + " --run cnn --steps 5 --with-stack");
  CHECK(out.find("Source Location") != std::string::npos);  // the by-stack table

  const auto files = trace_files(logdir / "cnn");
  REQUIRE(files.size() == 1);
  const json trace = json::parse(read_maybe_gzip(files[0]));
  CHECK(trace.at("with_stack") == 1);
  // aten::conv2d is recorded in cnn::aten::conv2d, called by cnn::nn::conv2d (samples/cnn/).
  const std::regex conv_stack(R"(^[^;]*samples/cnn/aten_nn\.cpp\(\d+\): cnn::aten::conv2d;)"
                              R"([^;]*samples/cnn/nn\.cpp\(\d+\): cnn::nn::conv2d;.*\): main$)");
  int conv = 0, conv_with_stack = 0, with_stack = 0, ops = 0;
  for (const json& e : trace.at("traceEvents")) {
    if (e.value("ph", "") != "X" || (e.value("cat", "") != "cpu_op" && e.value("cat", "") != "user_annotation"))
      continue;
    ++ops;
    const json& args = e.at("args");
    if (args.contains("Call stack")) {
      ++with_stack;
      CHECK(!args.at("Call stack").get<std::string>().empty());
    }
    if (e.at("name") == "aten::conv2d") {
      ++conv;
      if (args.contains("Call stack") && std::regex_search(args.at("Call stack").get<std::string>(), conv_stack))
        ++conv_with_stack;
      else
        FAIL_CHECK("aten::conv2d stack: " << args.value("Call stack", "<none>"));
    }
  }
  CHECK(conv == 2 * 3);  // two conv layers, three steps
  CHECK(conv_with_stack == conv);
  // Every range of the main and autograd threads has a stack; the data loader's too.
  CHECK(with_stack == ops);

  // Folded stacks: outermost first, ' ' -> '_', a positive integer of µs at the end.
  const fs::path stacks = logdir / "cnn.stacks.txt";
  REQUIRE(fs::exists(stacks));
  std::ifstream in(stacks);
  const std::regex line_re(R"(^[^ ]+ [1-9]\d*$)");
  const std::regex conv_line(R"(samples/cnn/nn\.cpp\(\d+\):_cnn::nn::conv2d;[^ ]*samples/cnn/aten_nn\.cpp\(\d+\):_cnn::aten::conv2d)");
  int lines = 0, conv_lines = 0;
  for (std::string line; std::getline(in, line);) {
    ++lines;
    CHECK_MESSAGE(std::regex_match(line, line_re), line);
    if (std::regex_search(line, conv_line)) ++conv_lines;
  }
  CHECK(lines > 20);
  CHECK(conv_lines > 0);
  fs::remove_all(logdir);
}

TEST_CASE("e2e: KINETOSCOPE_* variables override the sample's profile without recompiling") {
  const char* bin = std::getenv("KINETOSCOPE_SAMPLE_BIN");
  REQUIRE(bin != nullptr);
  const fs::path logdir = fs::temp_directory_path() / ("kinetoscope_e2e_env_" + std::to_string(::getpid()));
  fs::remove_all(logdir);
  const std::string args = " --logdir " + logdir.string() + " --run cnn --steps 4";

  SUBCASE("schedule, output dir, gzip and with_modules from the environment") {
    // Warmup at step 0, steps 1-2 recorded: one window, where the sample's own schedule (wait 1,
    // warmup 1, active 3) would have recorded steps 2-4 into <logdir>/cnn.
    const std::string out = run("KINETOSCOPE_SCHEDULE=wait=0,warmup=1,active=2,repeat=1 KINETOSCOPE_OUTPUT_DIR=" +
                                (logdir / "envrun").string() +
                                " KINETOSCOPE_WITH_MODULES=0 KINETOSCOPE_USE_GZIP=1 " + bin + args);
    CHECK(out.find("step  0  loss 2.6166") != std::string::npos);
    CHECK(out.find("[WARMUP]") != std::string::npos);
    CHECK(out.find("module profile: no module scopes in this window") != std::string::npos);
    CHECK(trace_files(logdir / "cnn").empty());
    const auto files = trace_files(logdir / "envrun");
    REQUIRE(files.size() == 1);
    CHECK(files[0].extension() == ".gz");
    const json trace = json::parse(read_maybe_gzip(files[0]));
    std::set<std::string> steps;
    int modules = 0;
    for (const json& e : trace.at("traceEvents")) {
      const std::string name = e.value("name", "");
      if (name.rfind("ProfilerStep#", 0) == 0) steps.insert(name);
      if (e.value("cat", "") == "python_function") ++modules;
    }
    CHECK(steps == std::set<std::string>{"ProfilerStep#1", "ProfilerStep#2"});
    CHECK(modules == 0);
    bool tfevents = false;
    for (const auto& e : fs::directory_iterator(logdir / "envrun"))
      tfevents = tfevents || e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
    CHECK(tfevents);  // the sample keeps its scalars handler in the directory it was given
  }
  SUBCASE("KINETOSCOPE_PROFILE=0 trains without the profiler") {
    const std::string out = run("KINETOSCOPE_PROFILE=0 " + std::string(bin) + args);
    CHECK(out.find("not profiled (KINETOSCOPE_PROFILE)") != std::string::npos);
    CHECK(out.find("Self CPU time total") == std::string::npos);
    CHECK(!fs::exists(logdir / "cnn"));
  }
  SUBCASE("a bad value stops the program before it trains, naming the variable") {
    const auto [status, out] = kinetoscope::test::run_command("KINETOSCOPE_WITH_STACK=maybe " + std::string(bin) + args);
    CHECK(status == 1);
    CHECK(out.find("cnn_train: KINETOSCOPE_WITH_STACK: expected 1/0, true/false, yes/no or on/off, not \"maybe\"") !=
          std::string::npos);
    CHECK(out.find("step  0") == std::string::npos);
  }
  fs::remove_all(logdir);
}
