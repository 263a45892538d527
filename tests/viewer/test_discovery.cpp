// SPDX-License-Identifier: BSD-3-Clause
// Discovery tests: run/worker/span naming as torch-tb-profiler did it, tmp files, other-named
// trace files found by content, directory symlinks (and loops), the logdir itself as a run.
#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/discovery.hpp"
#include "analysis/loader.hpp"
#include "../real_traces.hpp"

namespace {

namespace fs = std::filesystem;
using namespace kinetoscope::analysis;

/// A fresh temporary directory, removed at the end of the test.
struct temp_dir {
  fs::path path;
  explicit temp_dir(const std::string& name) {
    path = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
};

void write_file(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out << text;
}

void write_gz(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  gzFile gz = gzopen(p.string().c_str(), "wb");
  REQUIRE(gz != nullptr);
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
}

const std::string k_trace = R"({"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]})";

std::string describe(const trace_file& f) { return f.run + "|" + f.worker + "|" + f.span + "|" + f.raw_span; }

}  // namespace

TEST_CASE("discovery: file name pattern") {
  auto p = parse_trace_name("worker0.1623143089861.pt.trace.json.gz");
  REQUIRE(p.has_value());
  CHECK(p->worker == "worker0");
  CHECK(p->raw_span == "1623143089861");
  CHECK(p->gzip_suffix);
  p = parse_trace_name("host_4242.pt.trace.json");
  REQUIRE(p.has_value());
  CHECK(p->worker == "host_4242");
  CHECK(p->raw_span.empty());
  p = parse_trace_name("a.b.123.456.pt.trace.json");
  REQUIRE(p.has_value());
  CHECK(p->worker == "a.b.123");
  CHECK(p->raw_span == "456");
  p = parse_trace_name("a.b.c.123.pt.trace.json");
  REQUIRE(p.has_value());
  CHECK(p->worker == "a.b.c");
  p = parse_trace_name("w.12x.pt.trace.json");
  REQUIRE(p.has_value());
  CHECK(p->worker == "w.12x");
  CHECK(p->raw_span.empty());
  CHECK_FALSE(parse_trace_name("rank0.json").has_value());
  CHECK_FALSE(parse_trace_name("x.pt.trace.json.tmp").has_value());
  CHECK_FALSE(parse_trace_name("w.12.pt.trace.json.gzip").has_value());
  CHECK_FALSE(parse_trace_name("profile_0.json").has_value());
}

TEST_CASE("discovery: runs, workers, spans in a temporary logdir") {
  temp_dir tmp("kinetoscope-discovery");
  const fs::path log = tmp.path / "logs";
  // The logdir itself is a run: three spans of one worker, raw spans "1", "10", "2".
  write_file(log / "w.1.pt.trace.json", k_trace);
  write_file(log / "w.10.pt.trace.json", k_trace);
  write_file(log / "w.2.pt.trace.json", k_trace);
  write_file(log / "w.3.pt.trace.json.tmp", k_trace);  // being written: ignored
  write_file(log / "notes.txt", "hello");
  // A nested run with gzip, other-named traces (found by content) and non-traces.
  write_gz(log / "runA" / "host_1.pt.trace.json.gz", k_trace);
  write_file(log / "runA" / "profile_0.json", k_trace);
  write_gz(log / "runA" / "rank1.json.gz", k_trace);
  write_file(log / "runA" / "legacy.json", R"([{"name": "aten::mm", "ph": "X", "ts": 1, "dur": 2, "pid": "CPU functions", "tid": 1}])");
  write_file(log / "runA" / "config.json", R"({"lr": 0.1, "epochs": 3})");
  write_file(log / "runA" / "empty.json", "");
  write_file(log / "runA" / "partial.json.tmp", k_trace);
  write_file(log / "runA" / "nested" / "deeper" / "a.pt.trace.json", k_trace);
  // A directory symlink (listed under its own name too) and a symlink loop.
  fs::create_directory_symlink(log / "runA" / "nested", log / "linked");
  fs::create_directory_symlink(log, log / "runA" / "loop");

  const std::vector<trace_file> files = discover(log.string() + "/");
  std::vector<std::string> got;
  for (const trace_file& f : files) got.push_back(describe(f));
  const std::vector<std::string> want = {
      "linked/deeper|a|default|",
      "logs|w|1|1",
      "logs|w|2|10",  // raw spans sorted as strings: "1" < "10" < "2"
      "logs|w|3|2",
      "runA|host_1|default|",
      "runA|legacy|default|",
      "runA|profile_0|default|",
      "runA|rank1|default|",
      "runA/nested/deeper|a|default|",
  };
  CHECK(got == want);
  for (const trace_file& f : files) {
    CAPTURE(f.path);
    CHECK(fs::exists(f.path));
    CHECK(f.size == fs::file_size(f.path));
    CHECK(f.mtime_ns > 0);
    CHECK(load_trace(f.path).ok());
  }

  // One file on its own.
  auto one = classify((log / "runA" / "nested" / "deeper" / "a.pt.trace.json").string(), log.string());
  REQUIRE(one.has_value());
  CHECK(describe(*one) == "runA/nested/deeper|a|default|");
  one = classify((log / "w.10.pt.trace.json").string(), log.string());
  REQUIRE(one.has_value());
  CHECK(describe(*one) == "logs|w||10");
  CHECK(classify((log / "runA" / "profile_0.json").string(), log.string()).has_value());
  CHECK_FALSE(classify((log / "runA" / "config.json").string(), log.string()).has_value());
  CHECK_FALSE(classify((log / "w.3.pt.trace.json.tmp").string(), log.string()).has_value());
  CHECK_FALSE(classify((log / "w.1.pt.trace.json").string(), (log / "runA").string()).has_value());

  // New files and runs appear on the next call; removed ones disappear.
  write_file(log / "runB" / "w.5.pt.trace.json", k_trace);
  fs::remove(log / "w.10.pt.trace.json");
  got.clear();
  for (const trace_file& f : discover(log.string())) got.push_back(describe(f));
  CHECK(std::find(got.begin(), got.end(), "runB|w|1|5") != got.end());
  CHECK(std::find(got.begin(), got.end(), "logs|w|2|2") != got.end());
}

TEST_CASE("discovery: sniffing and odd logdirs") {
  temp_dir tmp("kinetoscope-sniff");
  write_file(tmp.path / "a.json", "  \n" + k_trace);
  write_file(tmp.path / "b.json", R"({"x": 1})");
  write_file(tmp.path / "c.json", "[1, 2, 3]");
  write_gz(tmp.path / "d.json.gz", k_trace);
  write_file(tmp.path / "e.json.gz", "\x1f\x8b not really gzip");
  CHECK(sniff_trace((tmp.path / "a.json").string()));
  CHECK_FALSE(sniff_trace((tmp.path / "b.json").string()));
  CHECK_FALSE(sniff_trace((tmp.path / "c.json").string()));
  CHECK(sniff_trace((tmp.path / "d.json.gz").string()));
  CHECK_FALSE(sniff_trace((tmp.path / "e.json.gz").string()));
  CHECK_FALSE(sniff_trace((tmp.path / "missing.json").string()));
  CHECK(discover((tmp.path / "does-not-exist").string()).empty());
  CHECK(discover((tmp.path / "a.json").string()).empty());  // a file, not a directory
  const auto files = discover(tmp.path.string());
  REQUIRE(files.size() == 2);
  CHECK(files[0].worker == "a");
  CHECK(files[1].worker == "d");
  CHECK(files[0].run == tmp.path.filename().string());
}

TEST_CASE("discovery: the real traces folder (../shared/traces)") {
  const char* real = kinetoscope::test::real_traces();
  REQUIRE_MESSAGE(real != nullptr, "KINETOSCOPE_REAL_TRACES not set (meson test sets it)");
  const std::string dir = std::string(real) + "/traces";
  const auto files = discover(dir);
  REQUIRE(files.size() == 20);  // 18 runs (tests/data/real/README.md); two of them have two files
  CHECK(describe(files.front()) == "amd_mi250|mi250_minitoy_train|default|");
  std::vector<std::string> resnet;
  for (const trace_file& f : files) {
    if (f.run == "resnet50_v100") resnet.push_back(describe(f));
  }
  CHECK(resnet == std::vector<std::string>{"resnet50_v100|worker0|1|1623143089861", "resnet50_v100|worker0|2|1623143566756"});
}

TEST_CASE("discovery: symlinks leaving the logdir and the walk's bounds") {
  temp_dir tmp("kinetoscope-bounds");
  const fs::path log = tmp.path / "logs";
  write_file(log / "run" / "w.pt.trace.json", k_trace);
  write_file(tmp.path / "out" / "x.pt.trace.json", k_trace);
  fs::create_directory_symlink("/", log / "root");
  fs::create_directory_symlink(tmp.path / "out", log / "out");
  fs::create_symlink(tmp.path / "out" / "x.pt.trace.json", log / "run" / "x.pt.trace.json");

  SUBCASE("not followed: nothing outside is listed or read, and the walk ends at once") {
    const auto t0 = std::chrono::steady_clock::now();
    const discover_result r = discover_logdir(log.string(), {});
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    CHECK(r.complete);
    std::vector<std::string> got;
    for (const trace_file& f : r.files) got.push_back(describe(f) + "|" + f.skipped);
    CHECK(got == std::vector<std::string>{
                     "run|w|default||",
                     "run|x|default||a symlink leading outside the logdir, not followed (--follow_symlinks)"});
    CHECK(r.notes == std::vector<std::string>{
                         "out: a directory symlink leading outside the logdir, not followed (--follow_symlinks)",
                         "root: a directory symlink leading outside the logdir, not followed (--follow_symlinks)"});
  }
  SUBCASE("followed, a link to / ends at the entry bound with a note") {
    discover_options o;
    o.follow_outside_symlinks = true;
    o.max_entries = 2000;
    const discover_result r = discover_logdir(log.string(), o);
    CHECK_FALSE(r.complete);
    REQUIRE_FALSE(r.notes.empty());
    CHECK(r.notes.back() == "stopped after 2000 directory entries; files beyond them are not listed");
  }
  SUBCASE("followed, the time bound") {
    discover_options o;
    o.follow_outside_symlinks = true;
    o.max_time = std::chrono::milliseconds(0);
    const discover_result r = discover_logdir(log.string(), o);
    CHECK_FALSE(r.complete);
    CHECK(r.notes == std::vector<std::string>{"stopped after 0.0 s of searching; files beyond are not listed"});
  }
  SUBCASE("the depth bound") {
    fs::remove(log / "root");
    fs::path deep = log / "d";
    for (int i = 0; i < 5; ++i) deep /= "d";
    write_file(deep / "deep.pt.trace.json", k_trace);
    discover_options o;
    o.max_depth = 3;
    const discover_result r = discover_logdir(log.string(), o);
    CHECK(r.complete);
    for (const trace_file& f : r.files) CHECK(f.worker != "deep");
    CHECK(std::find(r.notes.begin(), r.notes.end(),
                    "d/d/d/d: deeper than 3 levels below the logdir, not searched") != r.notes.end());
    o.max_depth = 16;
    bool found = false;
    for (const trace_file& f : discover_logdir(log.string(), o).files) found = found || f.worker == "deep";
    CHECK(found);
  }
}
