// SPDX-License-Identifier: BSD-3-Clause
// write_chrome_trace_file (atomic write, directories, gzip, errors), trace_file_name,
// default_worker_name, tensorboard_trace_handler and export_chrome_trace(profile, path).

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kinetoscope/kinetoscope.hpp"
#include "kinetoscope/writer/chrome_trace.hpp"
#include "kinetoscope/writer/trace_handler.hpp"
#include "writer_test_util.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using writer_test::example_trace;
using writer_test::gunzip;
using writer_test::read_file;
using writer_test::temp_dir;

namespace {

// The TensorBoard plugin's file-name pattern (docs/tensorboard-files.md#trace-file-names).
const std::regex tb_pattern(R"(^(.*?)(\.\d+)?\.pt\.trace\.json(?:\.gz)?$)");

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) out.push_back(entry.path());
  }
  return out;
}

bool any_tmp_file(const fs::path& dir) {
  for (const fs::path& p : files_in(dir)) {
    if (p.extension() == ".tmp") return true;
  }
  return false;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

std::string hostname() {
  char host[256] = {};
  REQUIRE(::gethostname(host, sizeof(host) - 1) == 0);
  return host;
}

}  // namespace

TEST_CASE("trace_handler: file names match the TensorBoard plugin pattern") {
  const std::string plain = kinetoscope::trace_file_name("worker0", 1623143089861, false);
  const std::string gz = kinetoscope::trace_file_name("myhost_4242", 1760500000123, true);
  CHECK(plain == "worker0.1623143089861.pt.trace.json");
  CHECK(gz == "myhost_4242.1760500000123.pt.trace.json.gz");
  std::smatch m;
  REQUIRE(std::regex_match(plain, m, tb_pattern));
  CHECK(m[1] == "worker0");
  CHECK(m[2] == ".1623143089861");
  REQUIRE(std::regex_match(gz, m, tb_pattern));
  CHECK(m[1] == "myhost_4242");
  CHECK(m[2] == ".1760500000123");
  // Dots in the worker name stay in the worker group.
  const std::string dotted = kinetoscope::trace_file_name("a.b.c", 1700000000000, false);
  REQUIRE(std::regex_match(dotted, m, tb_pattern));
  CHECK(m[1] == "a.b.c");
  // Always 13 digits, so that string order is time order.
  CHECK(kinetoscope::trace_file_name("w", 42, false) == "w.0000000000042.pt.trace.json");
  CHECK(kinetoscope::trace_file_name("w", -5, false) == "w.0000000000000.pt.trace.json");
}

TEST_CASE("trace_handler: default worker name is <hostname>_<pid>") {
  const std::string name = kinetoscope::default_worker_name();
  CHECK(name == hostname() + "_" + std::to_string(::getpid()));
  std::smatch m;
  REQUIRE(std::regex_match(name, m, std::regex(R"(^(.*)_(\d+)$)")));  // the plugin's split
  CHECK(m[2] == std::to_string(::getpid()));
}

TEST_CASE("write_chrome_trace_file: creates nested directories, leaves no temporary file") {
  temp_dir tmp;
  const fs::path path = tmp.path() / "a" / "b" / "c" / "w.1700000000000.pt.trace.json";
  const auto d = example_trace();
  kinetoscope::write_chrome_trace_file(d, path.string());
  REQUIRE(fs::is_regular_file(path));
  const std::string text = read_file(path);
  CHECK(text == kinetoscope::chrome_trace_string(d, {.trace_name = path.string()}));
  CHECK(json::parse(text)["traceName"] == path.string());
  CHECK_FALSE(any_tmp_file(tmp.path()));
  CHECK(files_in(tmp.path()).size() == 1);
}

TEST_CASE("write_chrome_trace_file: an existing file is replaced completely") {
  temp_dir tmp;
  const fs::path path = tmp.path() / "t.pt.trace.json";
  auto big = example_trace();
  for (int i = 0; i < 2000; ++i) big.memory.push_back(big.memory.front());
  kinetoscope::write_chrome_trace_file(big, path.string());
  const auto big_size = fs::file_size(path);

  // A stale temporary file from a crashed writer is overwritten and does not survive.
  { std::ofstream(path.string() + ".tmp") << "stale garbage that is longer than nothing"; }
  kinetoscope::trace_data small;
  kinetoscope::write_chrome_trace_file(small, path.string());
  const std::string text = read_file(path);
  CHECK(text == kinetoscope::chrome_trace_string(small, {.trace_name = path.string()}));
  CHECK(fs::file_size(path) < big_size);
  CHECK(json::accept(text));
  CHECK_FALSE(fs::exists(path.string() + ".tmp"));
}

TEST_CASE("write_chrome_trace_file: unwritable paths throw a clear error and leave nothing") {
  temp_dir tmp;
  const fs::path blocker = tmp.path() / "regular_file";
  { std::ofstream(blocker) << "x"; }

  SUBCASE("parent is a regular file") {
    const fs::path path = blocker / "sub" / "t.pt.trace.json";
    const std::string err =
        error_of([&] { kinetoscope::write_chrome_trace_file(example_trace(), path.string()); });
    CAPTURE(err);
    CHECK(err.rfind("cannot write trace " + path.string() + ": ", 0) == 0);
    CHECK(err.find("cannot create directory") != std::string::npos);
    CHECK_FALSE(fs::exists(blocker / "sub"));
  }
  SUBCASE("the target is a directory (rename fails after writing)") {
    const fs::path path = tmp.path() / "a_directory.pt.trace.json";
    fs::create_directory(path);
    fs::create_directory(path / "keep");  // non-empty: rename over it must fail
    const std::string err =
        error_of([&] { kinetoscope::write_chrome_trace_file(example_trace(), path.string()); });
    CAPTURE(err);
    CHECK(err.rfind("cannot write trace " + path.string() + ": ", 0) == 0);
    CHECK(err.size() > ("cannot write trace " + path.string() + ": ").size());
    CHECK(fs::is_directory(path / "keep"));
  }
  SUBCASE("empty path") {
    const std::string err =
        error_of([&] { kinetoscope::write_chrome_trace_file(example_trace(), ""); });
    CHECK(err == "cannot write trace : empty path");
  }
  CHECK_FALSE(any_tmp_file(tmp.path()));
  std::set<std::string> names;
  for (const auto& p : files_in(tmp.path())) names.insert(p.filename().string());
  CHECK(names == std::set<std::string>{"regular_file"});
}

TEST_CASE("write_chrome_trace_file: gzip round trip is byte-identical to the plain output") {
  temp_dir tmp;
  const auto d = example_trace();
  for (const int level : {1, 6, 9, 0}) {
    CAPTURE(level);
    const fs::path path = tmp.path() / ("level" + std::to_string(level) + ".pt.trace.json.gz");
    kinetoscope::write_chrome_trace_file(d, path.string(), level);
    const std::string compressed = read_file(path);
    REQUIRE(compressed.size() > 18);
    CHECK(static_cast<unsigned char>(compressed[0]) == 0x1f);  // gzip magic
    CHECK(static_cast<unsigned char>(compressed[1]) == 0x8b);
    CHECK(static_cast<unsigned char>(compressed[2]) == 8);  // deflate
    const std::string expected = kinetoscope::chrome_trace_string(d, {.trace_name = path.string()});
    CHECK(gunzip(compressed) == expected);
    if (level != 0) CHECK(compressed.size() < expected.size());
  }
  // A large trace (several buffer flushes and deflate output blocks).
  auto big = example_trace();
  for (int i = 0; i < 30000; ++i) {
    auto e = big.events[2];
    e.external_id = 1000 + i;
    big.events.push_back(e);
  }
  const fs::path path = tmp.path() / "big.pt.trace.json.gz";
  kinetoscope::write_chrome_trace_file(big, path.string());
  const std::string expected = kinetoscope::chrome_trace_string(big, {.trace_name = path.string()});
  CHECK(expected.size() > (std::size_t{2} << 20));
  CHECK(gunzip(read_file(path)) == expected);
  CHECK_FALSE(any_tmp_file(tmp.path()));
}

// ---------------------------------------------------------------------------------------------
// Through a real profile (core's recorder).

namespace {

/// A profile with one completed window containing the range "x".
void record_window(kinetoscope::profile& prof) {
  prof.start();
  { KINETOSCOPE_RANGE("x"); }
  prof.stop();
}

bool has_event_named(const json& doc, const std::string& name) {
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("name", "") == name) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("tensorboard_trace_handler: on_trace_ready writes <worker>.<ms>.pt.trace.json") {
  temp_dir tmp;
  const fs::path dir = tmp.path() / "log" / "run1";  // created by the handler (nested)
  kinetoscope::profile prof(
      {.on_trace_ready = kinetoscope::tensorboard_trace_handler(dir.string(), "worker0")});
  const auto before_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  record_window(prof);
  const auto files = files_in(dir);
  REQUIRE(files.size() == 1);
  const std::string name = files[0].filename().string();
  std::smatch m;
  REQUIRE(std::regex_match(name, m, std::regex(R"(^worker0\.(\d{13})\.pt\.trace\.json$)")));
  CHECK(std::stoll(m[1]) >= before_ms);
  CHECK(std::regex_match(name, tb_pattern));
  const json doc = json::parse(read_file(files[0]));
  CHECK(has_event_named(doc, "x"));
  CHECK(doc["traceName"] == (dir / name).string());
  CHECK_FALSE(any_tmp_file(tmp.path()));
}

TEST_CASE("tensorboard_trace_handler: worker defaults, gzip, and unique names") {
  temp_dir tmp;
  SUBCASE("profile option worker_name, then host_pid") {
    kinetoscope::profile prof({.worker_name = "optsworker"});
    record_window(prof);
    auto handler = kinetoscope::tensorboard_trace_handler(tmp.path().string());
    handler(prof);
    kinetoscope::profile anonymous;
    record_window(anonymous);
    handler(anonymous);
    std::set<std::string> workers;
    for (const auto& p : files_in(tmp.path())) {
      std::smatch m;
      const std::string name = p.filename().string();
      REQUIRE(std::regex_match(name, m, tb_pattern));
      workers.insert(m[1]);
    }
    CHECK(workers == std::set<std::string>{"optsworker", kinetoscope::default_worker_name()});
  }
  SUBCASE("gzip") {
    kinetoscope::profile prof;
    record_window(prof);
    kinetoscope::tensorboard_trace_handler(tmp.path().string(), "gz", true)(prof);
    const auto files = files_in(tmp.path());
    REQUIRE(files.size() == 1);
    CHECK(std::regex_match(files[0].filename().string(),
                           std::regex(R"(^gz\.\d{13}\.pt\.trace\.json\.gz$)")));
    const std::string text = gunzip(read_file(files[0]));
    CHECK(has_event_named(json::parse(text), "x"));
  }
  SUBCASE("an existing name bumps the stamp") {
    kinetoscope::profile prof;
    record_window(prof);
    auto handler = kinetoscope::tensorboard_trace_handler(tmp.path().string(), "w");
    // Occupy the names of the next two seconds: the handler must step past all of them.
    const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    for (std::int64_t ms = now_ms; ms < now_ms + 2000; ++ms) {
      std::ofstream(tmp.path() / kinetoscope::trace_file_name("w", ms, false)) << "taken";
    }
    for (int i = 0; i < 5; ++i) handler(prof);
    int ours = 0;
    for (const auto& p : files_in(tmp.path())) {
      const std::string text = read_file(p);
      if (text == "taken") continue;
      ++ours;
      CHECK(has_event_named(json::parse(text), "x"));
    }
    CHECK(ours == 5);  // five distinct files, none overwrote another
    CHECK(files_in(tmp.path()).size() == 2005);
  }
}

TEST_CASE("tensorboard_trace_handler: a directory that cannot be created") {
  temp_dir tmp;
  const fs::path blocker = tmp.path() / "file";
  { std::ofstream(blocker) << "x"; }
  const std::string dir = (blocker / "run").string();
  kinetoscope::profile prof;
  record_window(prof);
  const std::string err = error_of([&] { kinetoscope::tensorboard_trace_handler(dir)(prof); });
  CHECK(err == "Can't create directory: " + dir);
  CHECK(files_in(tmp.path()).size() == 1);
}

TEST_CASE("export_chrome_trace(profile, path): plain and .gz by suffix") {
  temp_dir tmp;
  kinetoscope::profile prof;
  CHECK_THROWS_AS(export_chrome_trace(prof, (tmp.path() / "none.json").string()), std::logic_error);
  CHECK(files_in(tmp.path()).empty());
  record_window(prof);
  const fs::path plain = tmp.path() / "out" / "trace.json";
  const fs::path gz = tmp.path() / "out" / "trace.json.gz";
  export_chrome_trace(prof, plain.string());
  export_chrome_trace(prof, gz.string());
  const std::string text = read_file(plain);
  CHECK(has_event_named(json::parse(text), "x"));
  const std::string inflated = gunzip(read_file(gz));
  // Same trace; only traceName differs.
  CHECK(json::parse(inflated)["traceName"] == gz.string());
  CHECK(inflated ==
        kinetoscope::chrome_trace_string(prof.last_trace(), {.trace_name = gz.string()}));
  CHECK(text ==
        kinetoscope::chrome_trace_string(prof.last_trace(), {.trace_name = plain.string()}));
  CHECK_FALSE(any_tmp_file(tmp.path()));
}

TEST_CASE("tensorboard_trace_handler: an unwritable directory inside a running profile") {
  // The issue's error case end to end: the program keeps running, the message names the
  // directory, the window stays in memory and can be exported elsewhere afterwards.
  temp_dir tmp;
  const fs::path blocker = tmp.path() / "file";
  { std::ofstream(blocker) << "x"; }
  const std::string dir = (blocker / "run").string();
  std::vector<std::string> messages;
  auto previous = kinetoscope::set_log_handler(
      [&](kinetoscope::log_level, std::string_view m) { messages.emplace_back(m); });
  kinetoscope::profile prof({.schedule = kinetoscope::schedule({.wait = 0, .warmup = 1, .active = 1}),
                             .on_trace_ready = kinetoscope::tensorboard_trace_handler(dir)});
  prof.start();
  for (int i = 0; i < 4; ++i) {
    { KINETOSCOPE_RANGE("work"); }
    prof.step();
  }
  prof.stop();
  kinetoscope::set_log_handler(previous);
  REQUIRE(messages.size() == 2);  // one per window
  CHECK(messages[0] == "on_trace_ready failed: Can't create directory: " + dir +
                           " (the window stays available through last_trace() and "
                           "export_chrome_trace(); profiling continues)");
  CHECK(has_event_named(json::parse(kinetoscope::chrome_trace_string(prof.last_trace())), "work"));
  const fs::path rescue = tmp.path() / "rescue.pt.trace.json";
  export_chrome_trace(prof, rescue.string());
  CHECK(has_event_named(json::parse(read_file(rescue)), "work"));
}
