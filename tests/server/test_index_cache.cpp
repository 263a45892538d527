// SPDX-License-Identifier: BSD-3-Clause
// The index cache folder as a whole (server/index_cache.hpp): the size budget with
// least-recently-used eviction (through `kinetoscope index` and a server's store), temporaries
// of writers that died, small traces left unindexed, a write that fails for lack of space, and
// `kinetoscope cache`.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../real_traces.hpp"
#include "../scratch_dir.hpp"
#include "../run_command.hpp"
#include "server/index_cache.hpp"
#include "server/store.hpp"
#include "server/trace_index.hpp"

namespace fs = std::filesystem;
namespace ks = kinetoscope::server;
using json = nlohmann::json;

namespace {

/// Each test's folder: <tmp>/kinetoscope_test_cache_<tag>_<pid> (tests/scratch_dir.hpp).
struct scratch : kinetoscope::test::scratch {
  explicit scratch(const std::string& tag) : kinetoscope::test::scratch("cache_" + tag) {}
};

std::string bin() {
  const char* b = std::getenv("KINETOSCOPE_BIN");
  REQUIRE_MESSAGE(b != nullptr, "KINETOSCOPE_BIN not set (meson test sets it)");
  return b;
}

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

/// `n` copies of one small real trace, w0 ... w(n-1): indexes of equal size.
std::vector<fs::path> copies(const fs::path& dir, int n) {
  const fs::path src = fs::path(kinetoscope::test::real_traces()) / "traces" / "cpu_only" /
                       "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz";
  fs::create_directories(dir);
  std::vector<fs::path> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(dir / ("w" + std::to_string(i) + ".pt.trace.json.gz"));
    fs::copy_file(src, out.back());
  }
  return out;
}

kinetoscope::test::command_result index(const fs::path& cache, const fs::path& trace, const std::string& extra = "") {
  // Every test here sets the threshold itself; the suite's default setup indexes every trace.
  return kinetoscope::test::run_command("KINETOSCOPE_INDEX_MIN_SIZE=0 " + bin() + " index --cache_dir " + q(cache) +
                                        " " + extra + " " + q(trace));
}

/// The traces (file names) whose indexes the folder holds, sorted.
std::vector<std::string> indexed(const fs::path& cache) {
  std::vector<std::string> names;
  for (const ks::cache_entry& e : ks::list_cache(cache.string())) names.push_back(fs::path(e.source).filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::uint64_t folder_index_bytes(const fs::path& cache) {
  std::uint64_t sum = 0;
  for (const auto& e : fs::directory_iterator(cache))
    if (e.path().extension() == ".ksidx") sum += fs::file_size(e.path());
  return sum;
}

/// Sets a file's modification time `seconds_ago` into the past.
void age(const fs::path& file, int seconds_ago) {
  const auto t = fs::file_time_type::clock::now() - std::chrono::seconds(seconds_ago);
  fs::last_write_time(file, t);
}

/// A pid no process has now: a child that already exited and was reaped.
pid_t dead_pid() {
  const pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  int status = 0;
  ::waitpid(p, &status, 0);
  return p;
}

std::unique_ptr<ks::store> started(const fs::path& logdir, const fs::path& cache, std::uint64_t cache_max,
                                   std::uint64_t index_min_bytes) {
  ks::store_options o;
  o.logdir = logdir.string();
  o.reload_interval_s = 0;
  o.cache_dir = cache.string();
  o.cache_max = cache_max;
  o.index_min_bytes = index_min_bytes;
  auto s = std::make_unique<ks::store>(o);
  s->start();
  REQUIRE(s->wait_idle(std::chrono::seconds(120)));
  return s;
}

}  // namespace

TEST_CASE("index cache: the budget evicts the least recently used indexes, never this run's, sizes summed exactly") {
  scratch d("budget");
  const std::vector<fs::path> traces = copies(d.path / "logs", 6);
  const fs::path cache = d.path / "cache";
  // One index alone gives the size of each (the copies differ only in one digit of the path).
  REQUIRE(index(cache, traces[0], "--cache_max 0").status == 0);
  const std::uint64_t one = folder_index_bytes(cache);
  REQUIRE(one > 0);
  fs::remove_all(cache);
  const std::uint64_t budget = 3 * one + one / 2;  // room for three

  const std::string cache_max = "--cache_max " + std::to_string(budget);
  for (int i = 0; i < 5; ++i) {
    const auto r = index(cache, traces[static_cast<std::size_t>(i)], cache_max);
    REQUIRE_MESSAGE(r.status == 0, r.output);
    if (i >= 3) CHECK(r.output.find("evicted") != std::string::npos);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // distinct modification times
  }
  CHECK(indexed(cache) == std::vector<std::string>{"w2.pt.trace.json.gz", "w3.pt.trace.json.gz", "w4.pt.trace.json.gz"});
  // Each index is about `one` (the summary's load time is a JSON number of varying length, and
  // sections are 64-byte aligned), and the listing sums exactly what is on disk.
  const std::uint64_t on_disk = folder_index_bytes(cache);
  CHECK(on_disk >= 3 * one - 3 * 128);
  CHECK(on_disk <= 3 * one + 3 * 128);
  std::uint64_t listed = 0;
  for (const ks::cache_entry& e : ks::list_cache(cache.string())) {
    listed += e.bytes;
    CHECK(e.state == "current");
  }
  CHECK(listed == on_disk);

  // Reading w2's index (analyze) makes it the most recently used: w3 goes next, not w2.
  const auto a = kinetoscope::test::run_command(bin() + " analyze --json --view overview --cache_dir " + q(cache) + " " +
                                                q(traces[2]));
  REQUIRE_MESSAGE(a.status == 0, a.output);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  REQUIRE(index(cache, traces[5], cache_max).status == 0);
  CHECK(indexed(cache) == std::vector<std::string>{"w2.pt.trace.json.gz", "w4.pt.trace.json.gz", "w5.pt.trace.json.gz"});

  // One run over several files never evicts what it wrote itself, even over the budget.
  fs::remove_all(cache);
  const auto all = index(cache, d.path / "logs", "--cache_max " + std::to_string(one));
  REQUIRE_MESSAGE(all.status == 0, all.output);
  CHECK(indexed(cache).size() == 6);
  CHECK(all.output.find("evicted") == std::string::npos);
}

TEST_CASE("index cache: a server's store keeps the indexes of the traces it holds, evicts the others") {
  scratch d("store");
  const std::vector<fs::path> traces = copies(d.path / "other", 1);
  const fs::path cache = d.path / "cache";
  REQUIRE(index(cache, traces[0], "--cache_max 0").status == 0);
  age(ks::list_cache(cache.string()).at(0).file, 3600);
  copies(d.path / "logs" / "run", 2);
  auto s = started(d.path / "logs", cache, /*cache_max=*/1, /*index_min_bytes=*/0);
  CHECK(indexed(cache) == std::vector<std::string>{"w0.pt.trace.json.gz", "w1.pt.trace.json.gz"});
  bool noted = false;
  for (const ks::file_status& f : s->files()) {
    CHECK(f.index.starts_with("written"));
    noted = noted || f.index.find("evicted to keep the cache under 1 B") != std::string::npos;
  }
  CHECK(noted);  // the first write evicted the old index of the other trace
}

TEST_CASE("index cache: temporaries of writers that died are removed by the next writer, live ones stay") {
  scratch d("temps");
  const std::vector<fs::path> traces = copies(d.path / "logs", 1);
  const fs::path cache = d.path / "cache";
  fs::create_directories(cache);
  const auto make = [&](const std::string& name, int seconds_ago) {
    std::ofstream(cache / name) << "half an index";
    age(cache / name, seconds_ago);
    return cache / name;
  };
  const std::string dead = std::to_string(dead_pid()), alive = std::to_string(::getpid());
  const fs::path dead_old = make("0123456789abcdef.ksidx.tmp." + dead + ".0", 120);
  const fs::path dead_fresh = make("0123456789abcdef.ksidx.tmp." + dead + ".1", 0);
  const fs::path alive_old = make("fedcba9876543210.ksidx.tmp." + alive + ".0", 120);
  const fs::path not_ours = make("notes.txt", 120);
  REQUIRE(index(cache, traces[0]).status == 0);
  CHECK_FALSE(fs::exists(dead_old));   // writer gone, a minute old: removed
  CHECK(fs::exists(dead_fresh));       // too young to be sure (a pid may be reused)
  CHECK(fs::exists(alive_old));        // its writer (this test) is alive
  CHECK(fs::exists(not_ours));
  CHECK(indexed(cache) == std::vector<std::string>{"w0.pt.trace.json.gz"});

  // A writer really killed while writing (SIGKILL before it renames): its temporary is left,
  // and the next writer, once it is old enough, removes it.
  const fs::path big = d.path / "big.pt.trace.json";
  {
    std::ofstream out(big);
    out << "{\"traceEvents\": [";
    for (int i = 0; i < 400000; ++i)
      out << (i ? ",\n" : "") << R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": )" << i * 10
          << R"(, "dur": 5, "args": {"External id": )" << i << "}}";
    out << "]}";
  }
  const pid_t writer = ::fork();
  if (writer == 0) {
    const std::string b = bin(), c = cache.string(), t = big.string();
    ::setenv("KINETOSCOPE_INDEX_MIN_SIZE", "0", 1);
    ::execl(b.c_str(), b.c_str(), "index", "--cache_dir", c.c_str(), t.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const std::string prefix = ".ksidx.tmp." + std::to_string(writer) + ".";
  fs::path left;
  for (int i = 0; i < 2000 && left.empty(); ++i) {  // until its temporary appears (at most 20 s)
    for (const auto& e : fs::directory_iterator(cache))
      if (e.path().filename().string().find(prefix) != std::string::npos) left = e.path();
    if (left.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(writer, SIGKILL);
  int status = 0;
  ::waitpid(writer, &status, 0);
  REQUIRE_MESSAGE(!left.empty(), "the killed writer never created its temporary");
  REQUIRE(fs::exists(left));
  CHECK(ks::list_cache(cache.string()).size() == 1);  // no index of big: it never finished
  age(left, 120);
  REQUIRE(index(cache, traces[0], "--force").status == 0);
  CHECK_FALSE(fs::exists(left));
}

TEST_CASE("index cache: traces under the threshold get no index, with a note") {
  scratch d("small");
  copies(d.path / "logs" / "run", 1);
  const fs::path cache = d.path / "cache";
  const std::uint64_t size = fs::file_size(d.path / "logs" / "run" / "w0.pt.trace.json.gz");
  REQUIRE(size < ks::default_index_min_trace_bytes);
  {
    auto s = started(d.path / "logs", cache, 0, ks::default_index_min_trace_bytes);
    REQUIRE(s->files().size() == 1);
    CHECK(s->files()[0].index == "skipped: the trace is under 1.0 MiB, parsed as fast as its index would be read");
    CHECK(s->files()[0].state == ks::file_state::loaded);
  }
  CHECK(ks::list_cache(cache.string()).empty());
  const auto r = kinetoscope::test::run_command("KINETOSCOPE_INDEX_MIN_SIZE=1M " + bin() + " index --cache_dir " + q(cache) +
                                                " " + q(d.path / "logs"));
  CHECK(r.status == 0);
  CHECK(r.output.find("skipped: the trace is under 1.0 MiB") != std::string::npos);
  CHECK(ks::list_cache(cache.string()).empty());
  // At the threshold itself the trace is indexed.
  const auto at = kinetoscope::test::run_command("KINETOSCOPE_INDEX_MIN_SIZE=" + std::to_string(size) + " " + bin() +
                                                 " index --cache_dir " + q(cache) + " " + q(d.path / "logs"));
  CHECK(at.status == 0);
  CHECK(ks::list_cache(cache.string()).size() == 1);
}

TEST_CASE("index cache: a write that runs out of space leaves no index and no temporary; the server still answers") {
  scratch d("full");
  const std::vector<fs::path> traces = copies(d.path / "logs" / "run", 1);
  const fs::path cache = d.path / "cache";
  // RLIMIT_FSIZE stands for a full disk: write() fails (EFBIG) past 8 KiB, as ENOSPC would.
  const auto r = kinetoscope::test::run_command("trap '' XFSZ; ulimit -f 16; KINETOSCOPE_INDEX_MIN_SIZE=0 " + bin() +
                                                " index --cache_dir " + q(cache) + " " + q(traces[0]));
  CHECK(r.status == 1);
  CHECK(r.output.find("File too large") != std::string::npos);
  REQUIRE(fs::is_directory(cache));
  CHECK(fs::is_empty(cache));  // neither an index nor a temporary

  // The server: the view answers, /api/status says why there is no index.
  const pid_t child = ::fork();
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{8 << 10, 8 << 10};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    ks::store_options o;
    o.logdir = (d.path / "logs").string();
    o.reload_interval_s = 0;
    o.cache_dir = cache.string();
    o.index_min_bytes = 0;
    ks::store s(o);
    s.start();
    bool ok = s.wait_idle(std::chrono::seconds(120)) && s.files().size() == 1 &&
              s.files()[0].state == ks::file_state::loaded && s.files()[0].index.starts_with("not written: ") &&
              s.files()[0].index.find("File too large") != std::string::npos;
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(fs::is_empty(cache));
}

TEST_CASE("kinetoscope cache: list, prune and clear") {
  scratch d("cli");
  const std::vector<fs::path> traces = copies(d.path / "logs", 3);
  const fs::path cache = d.path / "cache";
  for (const fs::path& t : traces) {
    REQUIRE(index(cache, t, "--cache_max 0").status == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  const std::uint64_t total = folder_index_bytes(cache);
  const auto list = kinetoscope::test::run_command(bin() + " cache list --json --cache_dir " + q(cache));
  REQUIRE_MESSAGE(list.status == 0, list.output);
  const json doc = json::parse(list.output);
  CHECK(doc["bytes"] == total);
  REQUIRE(doc["indexes"].size() == 3);
  CHECK(fs::path(doc["indexes"][0]["source"].get<std::string>()).filename() == "w2.pt.trace.json.gz");  // newest first
  CHECK(doc["indexes"][0]["state"] == "current");
  // A trace that changed makes its index stale.
  std::ofstream(traces[1], std::ios::app) << " ";
  const json again = json::parse(kinetoscope::test::run_command(bin() + " cache --json --cache_dir " + q(cache)).output);
  CHECK(again["indexes"][1]["state"] == "stale");

  const auto text = kinetoscope::test::run_command(bin() + " cache --cache_dir " + q(cache) + " --cache_max 5G");
  CHECK(text.output.find("3 index(es)") != std::string::npos);
  CHECK(text.output.find("of 5.0 GiB (--cache_max)") != std::string::npos);

  const auto prune = kinetoscope::test::run_command(bin() + " cache prune --json --cache_dir " + q(cache) +
                                                    " --cache_max " + std::to_string(total / 3 + 1));
  REQUIRE(prune.status == 0);
  const json p = json::parse(prune.output);
  CHECK(p["removed"].size() == 2);  // the two oldest
  CHECK(indexed(cache) == std::vector<std::string>{"w2.pt.trace.json.gz"});
  CHECK(p["bytes_after"] == folder_index_bytes(cache));

  const auto clear = kinetoscope::test::run_command(bin() + " cache clear --cache_dir " + q(cache));
  CHECK(clear.status == 0);
  CHECK(ks::list_cache(cache.string()).empty());
  CHECK(kinetoscope::test::run_command(bin() + " cache bogus").status == 2);
}
