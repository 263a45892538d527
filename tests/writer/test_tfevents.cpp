// SPDX-License-Identifier: BSD-3-Clause
// TensorBoard event files (docs/tensorboard-files.md): CRC-32C, the worked byte vectors
// (#worked-records), file names, writer -> reader round trips,
// tensor-form scalars, corruption and truncation, and a cross-check with `protoc --decode`.

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "kinetoscope/tensorboard/tfevents.hpp"
#include "kinetoscope_tfevents.pb.h"
#include "writer_test_util.hpp"

namespace fs = std::filesystem;
using writer_test::read_file;
using writer_test::temp_dir;

namespace {

std::string bytes(std::initializer_list<int> list) {
  std::string s;
  for (int b : list) s.push_back(static_cast<char>(b));
  return s;
}

std::string hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    if (!out.empty()) out.push_back(' ');
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15U]);
  }
  return out;
}

void write_bytes(const fs::path& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  REQUIRE(out.good());
}

// The two worked records of docs/tensorboard-files.md#worked-records.
const std::string event1_payload =
    bytes({0x09, 0x00, 0x00, 0x10, 0x48, 0xc6, 0x3b, 0xda, 0x41, 0x1a, 0x0d, 0x62,
           0x72, 0x61, 0x69, 0x6e, 0x2e, 0x45, 0x76, 0x65, 0x6e, 0x74, 0x3a, 0x32});
const std::string event1_record =
    bytes({0x18, 0, 0, 0, 0, 0, 0, 0, 0xa3, 0x7f, 0x4b, 0x22}) + event1_payload +
    bytes({0x6a, 0x22, 0xb9, 0x2d});
const std::string event2_payload =
    bytes({0x09, 0x00, 0x00, 0x50, 0x48, 0xc6, 0x3b, 0xda, 0x41, 0x10, 0x07, 0x2a, 0x1e, 0x0a, 0x1c,
           0x0a, 0x15, 0x50, 0x72, 0x6f, 0x66, 0x69, 0x6c, 0x65, 0x72, 0x2f, 0x73, 0x74, 0x65, 0x70,
           0x5f, 0x74, 0x69, 0x6d, 0x65, 0x5f, 0x6d, 0x73, 0x15, 0x00, 0x00, 0xf7, 0x42});
const std::string event2_record =
    bytes({0x2b, 0, 0, 0, 0, 0, 0, 0, 0x86, 0x1b, 0xc3, 0x4b}) + event2_payload +
    bytes({0x2a, 0xbb, 0x07, 0xd4});

/// A file: version record + `steps` scalar records with tags "a" and "b/c".
std::string sample_file(int steps, std::vector<std::size_t>* offsets = nullptr) {
  std::string data = kinetoscope::tfrecord_frame(kinetoscope::encode_file_version_event(100.0));
  for (int s = 1; s <= steps; ++s) {
    if (offsets) offsets->push_back(data.size());
    data += kinetoscope::tfrecord_frame(kinetoscope::encode_scalars_event(
        100.0 + s, s, {{"a", static_cast<float>(s)}, {"b/c", static_cast<float>(s) * 0.5f}}));
  }
  return data;
}

std::string run_command(const std::string& cmd) {
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("popen failed: " + cmd);
  std::string out;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  if (rc != 0) throw std::runtime_error("command failed (" + std::to_string(rc) + "): " + cmd);
  return out;
}

}  // namespace

TEST_CASE("tfevents: CRC-32C check value and masking") {
  CHECK(kinetoscope::crc32c("123456789", 9) == 0xE3069283U);
  CHECK(kinetoscope::crc32c("", 0) == 0U);
  // Incremental use.
  CHECK(kinetoscope::crc32c("6789", 4, kinetoscope::crc32c("12345", 5)) == 0xE3069283U);
  const std::uint32_t crc = 0xE3069283U;
  CHECK(kinetoscope::masked_crc32c("123456789", 9) == ((crc >> 15) | (crc << 17)) + 0xA282EAD8U);
}

TEST_CASE("tfevents: worked byte vectors") {
  const std::string p1 = kinetoscope::encode_file_version_event(1760500000.25);
  CHECK(hex(p1) == hex(event1_payload));
  CHECK(hex(kinetoscope::tfrecord_frame(p1)) == hex(event1_record));

  const std::string p2 =
      kinetoscope::encode_scalars_event(1760500001.25, 7, {{"Profiler/step_time_ms", 123.5f}});
  CHECK(hex(p2) == hex(event2_payload));
  CHECK(hex(kinetoscope::tfrecord_frame(p2)) == hex(event2_record));

  // And the reader decodes the worked bytes.
  temp_dir dir;
  const fs::path f = dir.path() / "events.out.tfevents.1760500000.h.1.0";
  write_bytes(f, event1_record + event2_record);
  const auto c = kinetoscope::read_event_file(f.string());
  CHECK(c.records == 2);
  CHECK(c.errors.empty());
  CHECK(c.file_version == "brain.Event:2");
  REQUIRE(c.scalars.count("Profiler/step_time_ms") == 1);
  const auto& pts = c.scalars.at("Profiler/step_time_ms");
  REQUIRE(pts.size() == 1);
  CHECK(pts[0].step == 7);
  CHECK(pts[0].wall_time == 1760500001.25);
  CHECK(pts[0].value == 123.5f);
}

TEST_CASE("tfevents: writer file name and first record") {
  temp_dir dir;
  const fs::path sub = dir.path() / "run1" / "nested";
  std::string p1, p2;
  {
    kinetoscope::event_file_writer w(sub.string());
    kinetoscope::event_file_writer w2(sub.string(), ".v2");
    p1 = w.path();
    p2 = w2.path();
  }
  const std::regex pattern(R"(^events\.out\.tfevents\.(\d{10,})\.([^/]+)\.(\d+)\.(\d+)$)");
  std::smatch m;
  const std::string n1 = fs::path(p1).filename().string();
  REQUIRE(std::regex_match(n1, m, pattern));
  CHECK(m[3].str() == std::to_string(::getpid()));
  const long long secs = std::stoll(m[1].str());
  CHECK(std::llabs(secs - static_cast<long long>(std::time(nullptr))) < 120);
  const std::string n2 = fs::path(p2).filename().string();
  CHECK(n2.size() > 3);
  CHECK(n2.substr(n2.size() - 3) == ".v2");
  CHECK(n1 != n2);
  CHECK(fs::path(p1).parent_path() == sub);

  // File contents: exactly one file_version record.
  const std::string data = read_file(p1);
  const auto c = kinetoscope::read_event_file(p1);
  CHECK(c.records == 1);
  CHECK(c.file_version == "brain.Event:2");
  CHECK(c.scalars.empty());
  CHECK_FALSE(c.truncated_tail);
  kinetoscope::tfevents::Event ev;
  REQUIRE(data.size() > 16);
  REQUIRE(ev.ParseFromArray(data.data() + 12, static_cast<int>(data.size() - 16)));
  CHECK(ev.file_version() == "brain.Event:2");
  CHECK(ev.wall_time() > 1.7e9);

  // find_event_files: recursive, name-sorted, profile-empty and non-tfevents excluded.
  write_bytes(dir.path() / "events.out.tfevents.0000000001.x.1.0", "");
  write_bytes(dir.path() / "events.out.tfevents.0000000000.x.1.0", "");
  write_bytes(dir.path() / "events.out.tfevents.0000000002.profile-empty", "");
  write_bytes(dir.path() / "w.pt.trace.json", "{}");
  const auto files = kinetoscope::find_event_files(dir.path().string());
  REQUIRE(files.size() == 4);
  CHECK(fs::path(files[0]).filename() == "events.out.tfevents.0000000000.x.1.0");
  CHECK(fs::path(files[1]).filename() == "events.out.tfevents.0000000001.x.1.0");
  CHECK(fs::path(files[2]).parent_path() == sub);
  CHECK(fs::path(files[3]).parent_path() == sub);
  CHECK(files[2] < files[3]);
  CHECK(kinetoscope::find_event_files((dir.path() / "missing").string()).empty());

  // Unwritable location -> runtime_error naming the path.
  write_bytes(dir.path() / "plainfile", "x");
  try {
    kinetoscope::event_file_writer bad((dir.path() / "plainfile" / "sub").string());
    FAIL("expected an exception");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("plainfile") != std::string::npos);
  }
}

TEST_CASE("tfevents: round trip writer -> reader") {
  temp_dir dir;
  std::string path;
  {
    kinetoscope::event_file_writer w(dir.path().string());
    path = w.path();
    for (int s = 0; s < 5; ++s) {
      w.add_scalars(s, {{"profiler/step_time_ms", 10.0f + static_cast<float>(s)},
                        {"profiler/gpu_util", 0.25f * static_cast<float>(s)}},
                    2000.0 + s);
      // Flushed after each call: readable while the writer is still open.
      const auto partial = kinetoscope::read_event_file(path);
      CHECK(partial.records == static_cast<std::uint64_t>(s + 2));
      CHECK_FALSE(partial.truncated_tail);
    }
    w.add_scalars(-3, {{"neg", -1.5f}});  // negative step, default wall time
    w.add_scalars(9, {});                 // nothing written
    w.flush();
  }
  const auto c = kinetoscope::read_event_file(path);
  CHECK(c.records == 7);
  CHECK(c.errors.empty());
  CHECK(c.corrupt_records == 0);
  CHECK(c.skipped_other_summaries == 0);
  REQUIRE(c.scalars.size() == 3);
  const auto& st = c.scalars.at("profiler/step_time_ms");
  const auto& gu = c.scalars.at("profiler/gpu_util");
  REQUIRE(st.size() == 5);
  REQUIRE(gu.size() == 5);
  for (int s = 0; s < 5; ++s) {
    CHECK(st[static_cast<std::size_t>(s)].step == s);
    CHECK(st[static_cast<std::size_t>(s)].wall_time == 2000.0 + s);
    CHECK(st[static_cast<std::size_t>(s)].value == 10.0f + static_cast<float>(s));
    CHECK(gu[static_cast<std::size_t>(s)].value == 0.25f * static_cast<float>(s));
  }
  const auto& neg = c.scalars.at("neg");
  REQUIRE(neg.size() == 1);
  CHECK(neg[0].step == -3);
  CHECK(neg[0].value == -1.5f);
  CHECK(neg[0].wall_time > 1.7e9);
}

TEST_CASE("tfevents: tensor-form scalars and other summaries") {
  namespace pb = kinetoscope::tfevents;
  std::string data = kinetoscope::tfrecord_frame(kinetoscope::encode_file_version_event(1.0));
  auto add = [&data](const pb::Event& ev) {
    std::string payload;
    REQUIRE(ev.SerializeToString(&payload));
    data += kinetoscope::tfrecord_frame(payload);
  };
  auto scalar_meta = [](pb::Value* v) {
    v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("scalars");
    v->mutable_metadata()->set_data_class(1);
  };
  {
    pb::Event ev;  // float_val, with metadata
    ev.set_wall_time(10.0);
    ev.set_step(1);
    auto* v = ev.mutable_summary()->add_value();
    v->set_tag("t/float");
    scalar_meta(v);
    v->mutable_tensor()->set_dtype(1);
    v->mutable_tensor()->mutable_tensor_shape();
    v->mutable_tensor()->add_float_val(3.25f);
    // double_val
    auto* d = ev.mutable_summary()->add_value();
    d->set_tag("t/double");
    scalar_meta(d);
    d->mutable_tensor()->set_dtype(2);
    d->mutable_tensor()->add_double_val(-8.5);
    // tensor_content float (LE)
    auto* tc = ev.mutable_summary()->add_value();
    tc->set_tag("t/content_f");
    scalar_meta(tc);
    tc->mutable_tensor()->set_dtype(1);
    tc->mutable_tensor()->set_tensor_content(bytes({0x00, 0x00, 0xf7, 0x42}));  // 123.5f
    // tensor_content double (LE) 2.5
    auto* td = ev.mutable_summary()->add_value();
    td->set_tag("t/content_d");
    scalar_meta(td);
    td->mutable_tensor()->set_dtype(2);
    td->mutable_tensor()->set_tensor_content(bytes({0, 0, 0, 0, 0, 0, 0x04, 0x40}));
    // another plugin's tensor: skipped
    auto* other = ev.mutable_summary()->add_value();
    other->set_tag("text");
    other->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
    other->mutable_tensor()->set_dtype(7);
    // rank-1 float tensor with plugin scalars: not a scalar, skipped
    auto* vec = ev.mutable_summary()->add_value();
    vec->set_tag("t/vector");
    scalar_meta(vec);
    vec->mutable_tensor()->set_dtype(1);
    vec->mutable_tensor()->mutable_tensor_shape()->add_dim()->set_size(2);
    vec->mutable_tensor()->add_float_val(1.0f);
    vec->mutable_tensor()->add_float_val(2.0f);
    // value without a value (e.g. an image in the real schema): skipped
    ev.mutable_summary()->add_value()->set_tag("image");
    add(ev);
  }
  {
    pb::Event ev;  // later value of a known tag without metadata
    ev.set_wall_time(11.0);
    ev.set_step(2);
    auto* v = ev.mutable_summary()->add_value();
    v->set_tag("t/float");
    v->mutable_tensor()->set_dtype(1);
    v->mutable_tensor()->add_float_val(4.5f);
    // unknown tag without metadata: skipped
    auto* u = ev.mutable_summary()->add_value();
    u->set_tag("unknown");
    u->mutable_tensor()->set_dtype(1);
    u->mutable_tensor()->add_float_val(1.0f);
    add(ev);
  }
  temp_dir dir;
  const fs::path f = dir.path() / "events.out.tfevents.1.h.1.0";
  write_bytes(f, data);
  const auto c = kinetoscope::read_event_file(f.string());
  CHECK(c.records == 3);
  CHECK(c.errors.empty());
  CHECK(c.skipped_other_summaries == 4);
  REQUIRE(c.scalars.count("t/float") == 1);
  REQUIRE(c.scalars.at("t/float").size() == 2);
  CHECK(c.scalars.at("t/float")[0].value == 3.25f);
  CHECK(c.scalars.at("t/float")[0].step == 1);
  CHECK(c.scalars.at("t/float")[1].value == 4.5f);
  CHECK(c.scalars.at("t/float")[1].wall_time == 11.0);
  CHECK(c.scalars.at("t/double").at(0).value == -8.5f);
  CHECK(c.scalars.at("t/content_f").at(0).value == 123.5f);
  CHECK(c.scalars.at("t/content_d").at(0).value == 2.5f);
  CHECK(c.scalars.count("text") == 0);
  CHECK(c.scalars.count("t/vector") == 0);
  CHECK(c.scalars.count("unknown") == 0);
}

TEST_CASE("tfevents: corrupted payload byte skips that record only") {
  std::vector<std::size_t> offs;
  std::string data = sample_file(4, &offs);
  data[offs[1] + 12 + 3] = static_cast<char>(data[offs[1] + 12 + 3] ^ 0x40);  // step 2 payload
  temp_dir dir;
  const fs::path f = dir.path() / "events.out.tfevents.1.h.1.0";
  write_bytes(f, data);
  const auto c = kinetoscope::read_event_file(f.string());
  CHECK(c.records == 4);
  CHECK(c.corrupt_records == 1);
  REQUIRE(c.errors.size() == 1);
  CHECK(c.errors[0].find("offset " + std::to_string(offs[1])) != std::string::npos);
  CHECK_FALSE(c.truncated_tail);
  const auto& a = c.scalars.at("a");
  REQUIRE(a.size() == 3);
  CHECK(a[0].step == 1);
  CHECK(a[1].step == 3);
  CHECK(a[2].step == 4);

  // A corrupted payload CRC byte behaves the same.
  std::string data2 = sample_file(4, &offs);
  data2[offs[2] - 1] = static_cast<char>(data2[offs[2] - 1] ^ 1);  // CRC of step 2
  write_bytes(f, data2);
  const auto c2 = kinetoscope::read_event_file(f.string());
  CHECK(c2.corrupt_records == 1);
  CHECK(c2.scalars.at("a").size() == 3);
}

TEST_CASE("tfevents: corrupted length stops reading with an error") {
  std::vector<std::size_t> offs;
  std::string data = sample_file(4, &offs);
  data[offs[2]] = static_cast<char>(data[offs[2]] + 1);  // length of step 3
  temp_dir dir;
  const fs::path f = dir.path() / "events.out.tfevents.1.h.1.0";
  write_bytes(f, data);
  const auto c = kinetoscope::read_event_file(f.string());
  CHECK(c.records == 3);  // version + steps 1, 2
  REQUIRE(c.errors.size() == 1);
  CHECK(c.errors[0].find("offset " + std::to_string(offs[2])) != std::string::npos);
  CHECK(c.errors[0].find("length") != std::string::npos);
  CHECK_FALSE(c.truncated_tail);
  REQUIRE(c.scalars.at("a").size() == 2);
  CHECK(c.scalars.at("b/c")[1].value == 1.0f);
}

TEST_CASE("tfevents: truncated last record at every offset") {
  std::vector<std::size_t> offs;
  const std::string data = sample_file(3, &offs);
  temp_dir dir;
  const fs::path f = dir.path() / "events.out.tfevents.1.h.1.0";
  for (std::size_t cut = offs.back() + 1; cut < data.size(); ++cut) {
    CAPTURE(cut);
    write_bytes(f, data.substr(0, cut));
    const auto c = kinetoscope::read_event_file(f.string());
    CHECK(c.truncated_tail);
    CHECK(c.errors.empty());
    CHECK(c.corrupt_records == 0);
    CHECK(c.records == 3);
    REQUIRE(c.scalars.count("a") == 1);
    CHECK(c.scalars.at("a").size() == 2);
  }
  write_bytes(f, data);
  const auto full = kinetoscope::read_event_file(f.string());
  CHECK_FALSE(full.truncated_tail);
  CHECK(full.records == 4);
}

TEST_CASE("tfevents: empty file, garbage, missing file") {
  temp_dir dir;
  const fs::path empty = dir.path() / "events.out.tfevents.1.h.1.0";
  write_bytes(empty, "");
  const auto c = kinetoscope::read_event_file(empty.string());
  CHECK(c.records == 0);
  CHECK(c.errors.empty());
  CHECK_FALSE(c.truncated_tail);
  CHECK(c.scalars.empty());

  const fs::path garbage = dir.path() / "garbage";
  write_bytes(garbage, "{\"traceEvents\": [], \"this is\": \"not an event file at all\"}\n");
  const auto g = kinetoscope::read_event_file(garbage.string());
  CHECK(g.records == 0);
  REQUIRE(g.errors.size() == 1);
  CHECK(g.errors[0].find("offset 0") != std::string::npos);
  CHECK(g.scalars.empty());

  // Valid framing, payload that is not an Event: counted as corrupt.
  const fs::path notproto = dir.path() / "notproto";
  write_bytes(notproto, kinetoscope::tfrecord_frame(bytes({0xff, 0xff, 0xff})));
  const auto n = kinetoscope::read_event_file(notproto.string());
  CHECK(n.records == 0);
  CHECK(n.corrupt_records == 1);
  CHECK(n.errors.size() == 1);

  CHECK_THROWS_AS(kinetoscope::read_event_file((dir.path() / "missing").string()),
                  std::runtime_error);
}

TEST_CASE("tfevents: a tag that is not UTF-8 skips the record, silently") {
  // proto3 refuses such a string field; libprotobuf would also log an ERROR line to stderr for
  // every such record (a hostile file of a million of them floods the server's log): the reader
  // silences it and reports the record itself.
  namespace pb = kinetoscope::tfevents;
  temp_dir dir;
  pb::Event ev;
  ev.set_step(1);
  pb::Value* v = ev.mutable_summary()->add_value();
  v->set_tag("@@");
  v->set_simple_value(1.0f);
  std::string payload = ev.SerializeAsString();
  const auto at = payload.find("@@");
  REQUIRE(at != std::string::npos);
  payload[at] = '\xff';
  payload[at + 1] = '\xfe';
  const fs::path file = dir.path() / "bad_utf8";
  write_bytes(file, kinetoscope::tfrecord_frame(payload) + kinetoscope::tfrecord_frame(payload));

  // stderr into a file while reading.
  const fs::path err_file = dir.path() / "stderr";
  std::fflush(stderr);
  const int saved = ::dup(2);
  REQUIRE(saved >= 0);
  std::FILE* err = std::fopen(err_file.c_str(), "w");
  REQUIRE(err != nullptr);
  ::dup2(::fileno(err), 2);
  const auto c = kinetoscope::read_event_file(file.string());
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::fclose(err);

  CHECK(c.records == 0);
  CHECK(c.corrupt_records == 2);
  CHECK(c.errors.size() == 2);
  CHECK(fs::file_size(err_file) == 0);
}

TEST_CASE("tfevents: protoc --decode agrees with the worked records") {
  const char* proto = std::getenv("KINETOSCOPE_PROTO");
  const char* protoc_env = std::getenv("KINETOSCOPE_PROTOC");
  if (proto == nullptr) {
    MESSAGE("KINETOSCOPE_PROTO not set; skipping the protoc cross-check");
    return;
  }
  const std::string protoc = protoc_env ? protoc_env : "protoc";
  const fs::path proto_path(proto);
  REQUIRE(fs::exists(proto_path));
  temp_dir dir;
  const fs::path p1 = dir.path() / "p1.bin";
  const fs::path p2 = dir.path() / "p2.bin";
  write_bytes(p1, kinetoscope::encode_file_version_event(1760500000.25));
  write_bytes(p2, kinetoscope::encode_scalars_event(1760500001.25, 7,
                                                    {{"Profiler/step_time_ms", 123.5f}}));
  const std::string base = "'" + protoc + "' --proto_path='" +
                           proto_path.parent_path().string() +
                           "' --decode=kinetoscope.tfevents.Event '" +
                           proto_path.filename().string() + "' < '";
  CHECK(run_command(base + p1.string() + "'") ==
        "wall_time: 1760500000.25\nfile_version: \"brain.Event:2\"\n");
  CHECK(run_command(base + p2.string() + "'") ==
        "wall_time: 1760500001.25\n"
        "step: 7\n"
        "summary {\n"
        "  value {\n"
        "    tag: \"Profiler/step_time_ms\"\n"
        "    simple_value: 123.5\n"
        "  }\n"
        "}\n");
}
