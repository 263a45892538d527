// SPDX-License-Identifier: BSD-3-Clause
/// @file gen_big_trace.cpp
/// Makes a large, realistic `.pt.trace.json` for load benchmarks by replicating the profiled
/// steps of the ResNet-50 sample (era A, 2021, Kineto's pretty-printed layout) until the output
/// reaches the requested size. Each replica is shifted in time by the span length; External id,
/// correlation and flow ids are offset so they stay unique and matched; `ProfilerStep#N`
/// continues the numbering. The span event, the global instants and the metadata are written
/// once, at the end, with the span widened to cover all replicas. The output is streamed (only
/// the small input is held as a DOM).
///
/// Usage: gen_big_trace OUT.json SIZE_MB [--gzip] [--input TRACE.json[.gz]] [--small | --same-ts]
/// (--small / --same-ts: synthetic traces of many small CPU events instead, see
/// generate_small_events_trace)
/// (default input: $KINETOSCOPE_REAL_TRACES/traces/resnet50_v100/worker0.1623143089861.pt.trace.json.gz)

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef KINETOSCOPE_REAL_TRACES_DIR
#define KINETOSCOPE_REAL_TRACES_DIR "../shared"
#endif

namespace {

using json = nlohmann::json;

/// Gunzips `bytes` when they carry the gzip magic.
std::string maybe_gunzip(std::string bytes) {
  if (bytes.size() < 2 || static_cast<unsigned char>(bytes[0]) != 0x1f ||
      static_cast<unsigned char>(bytes[1]) != 0x8b) {
    return bytes;
  }
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) throw std::runtime_error("zlib init failed");
  std::string out;
  out.resize(bytes.size() * 8);
  zs.next_in = reinterpret_cast<unsigned char*>(bytes.data());
  zs.avail_in = static_cast<uInt>(bytes.size());
  for (;;) {
    if (zs.total_out == out.size()) out.resize(out.size() * 2);
    zs.next_out = reinterpret_cast<unsigned char*>(out.data() + zs.total_out);
    zs.avail_out = static_cast<uInt>(out.size() - zs.total_out);
    const int ret = inflate(&zs, Z_NO_FLUSH);
    if (ret == Z_STREAM_END) break;
    if (ret != Z_OK && ret != Z_BUF_ERROR) {
      inflateEnd(&zs);
      throw std::runtime_error("corrupt gzip input");
    }
    if (ret == Z_BUF_ERROR && zs.avail_in == 0) {
      inflateEnd(&zs);
      throw std::runtime_error("truncated gzip input");
    }
  }
  out.resize(zs.total_out);
  inflateEnd(&zs);
  return out;
}

/// Buffered output to a plain or gzip file.
class out_file {
 public:
  out_file(const std::string& path, bool gzip) : gzip_(gzip) {
    if (gzip_) {
      gz_ = gzopen(path.c_str(), "wb1");
      if (gz_ == nullptr) throw std::runtime_error("cannot write " + path);
      gzbuffer(gz_, 1 << 20);
    } else {
      file_ = std::fopen(path.c_str(), "wb");
      if (file_ == nullptr) throw std::runtime_error("cannot write " + path);
    }
    buf_.reserve(1 << 20);
  }
  ~out_file() { close(); }
  out_file(const out_file&) = delete;
  out_file& operator=(const out_file&) = delete;

  void put(std::string_view s) {
    buf_.append(s);
    if (buf_.size() >= (1 << 20)) flush();
  }
  void put_int(std::int64_t v) {
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf_.append(tmp, r.ptr);
  }
  /// µs value: integers as integers, others with 3 decimals (like Kineto).
  void put_time(double v) {
    if (v == std::floor(v) && std::fabs(v) < 9e15) {
      put_int(static_cast<std::int64_t>(v));
      return;
    }
    char tmp[48];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v, std::chars_format::fixed, 3);
    buf_.append(tmp, r.ptr);
  }
  std::uint64_t bytes() const noexcept { return written_ + buf_.size(); }
  void flush() {
    if (buf_.empty()) return;
    if (gzip_) {
      if (gzwrite(gz_, buf_.data(), static_cast<unsigned>(buf_.size())) <= 0) throw std::runtime_error("gzip write failed");
    } else if (std::fwrite(buf_.data(), 1, buf_.size(), file_) != buf_.size()) {
      throw std::runtime_error("write failed");
    }
    written_ += buf_.size();
    buf_.clear();
  }
  void close() {
    if (gz_ == nullptr && file_ == nullptr) return;
    flush();
    if (gz_ != nullptr) gzclose(gz_);
    if (file_ != nullptr) std::fclose(file_);
    gz_ = nullptr;
    file_ = nullptr;
  }

 private:
  bool gzip_;
  gzFile gz_ = nullptr;
  std::FILE* file_ = nullptr;
  std::string buf_;
  std::uint64_t written_ = 0;
};

/// One replicated event, pre-rendered: text pieces between the values that change per replica.
struct event_template {
  std::string head;            ///< up to and including `"name": ` (or the whole name for non-steps)
  std::int64_t step = -1;      ///< ProfilerStep number, -1 otherwise
  std::string after_name;      ///< `, "pid": .., "tid": ..,\n    "ts": `
  double ts = 0;
  std::string after_ts;        ///< dur, args up to the first id
  struct id_piece {
    std::int64_t value;        ///< id to offset
    std::string after;         ///< text up to the next id (or the end of the event)
  };
  std::vector<id_piece> ids;
};

bool is_id_key(const std::string& k) { return k == "External id" || k == "external id" || k == "correlation"; }

std::string dump_scalar(const json& v) { return v.dump(); }

event_template make_template(const json& ev, std::int64_t& max_id, double& t_min, double& t_max) {
  event_template t;
  const std::string ph = ev.value("ph", "");
  t.head = "  {\n    \"ph\": " + json(ph).dump();
  if (ev.contains("cat")) t.head += ", \"cat\": " + ev["cat"].dump();
  t.head += ", \n    \"name\": ";
  const std::string name = ev.value("name", "");
  if (name.rfind("ProfilerStep#", 0) == 0) {
    t.step = std::stoll(name.substr(13));
  } else {
    t.head += json(name).dump();
  }
  t.after_name = ", \"pid\": " + ev.value("pid", json(0)).dump() + ", \"tid\": " + ev.value("tid", json(0)).dump() +
                 ",\n    \"ts\": ";
  t.ts = ev.value("ts", 0.0);
  const double dur = ev.value("dur", 0.0);
  t_min = std::min(t_min, t.ts);
  t_max = std::max(t_max, t.ts + dur);
  std::string cur;
  if (ev.contains("dur")) cur += ", \"dur\": " + dump_scalar(ev["dur"]);
  if (ev.contains("s")) cur += ", \"s\": " + ev["s"].dump();
  if (ev.contains("bp")) cur += ", \"bp\": " + ev["bp"].dump();
  if (ev.contains("id")) {
    cur += ", \"id\": ";
    t.after_ts = cur;
    cur.clear();
    const std::int64_t id = ev["id"].get<std::int64_t>();
    max_id = std::max(max_id, id);
    t.ids.push_back({id, {}});
  }
  auto flush_text = [&](std::string s) {
    if (t.ids.empty()) t.after_ts += s;
    else t.ids.back().after += s;
  };
  flush_text(cur);
  cur.clear();
  if (ev.contains("args") && ev["args"].is_object() && !ev["args"].empty()) {
    std::string text = ",\n    \"args\": {\n      ";
    bool first = true;
    for (const auto& [k, v] : ev["args"].items()) {
      if (!first) text += ", ";
      first = false;
      text += json(k).dump() + ": ";
      if (is_id_key(k) && v.is_number_integer()) {
        flush_text(text);
        text.clear();
        const std::int64_t id = v.get<std::int64_t>();
        max_id = std::max(max_id, id);
        t.ids.push_back({id, {}});
      } else {
        text += v.dump();
      }
    }
    text += "\n    }";
    flush_text(text);
  }
  flush_text("\n  }");
  return t;
}

}  // namespace

/// Writes a trace of at least `size_mb` MB (10^6 bytes) to `out_path`; returns the bytes written
/// (compressed size for gzip). Throws std::runtime_error on I/O errors.
std::uint64_t generate_big_trace(const std::string& input, const std::string& out_path, double size_mb, bool gzip) {
  std::ifstream in(input, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + input);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const json doc = json::parse(maybe_gunzip(std::move(bytes)));
  const json& events = doc.at("traceEvents");

  std::vector<event_template> reps;
  std::vector<const json*> once;  // metadata, span, global instants
  std::int64_t max_id = 0;
  double t_min = std::numeric_limits<double>::infinity();
  double t_max = -t_min;
  std::int64_t step_min = std::numeric_limits<std::int64_t>::max(), step_max = -1;
  for (const json& ev : events) {
    const std::string ph = ev.value("ph", "");
    const bool global_instant = ph == "i" && ev.value("s", "") == "g";
    if (ph == "M" || global_instant || ev.value("cat", "") == "Trace") {
      once.push_back(&ev);
      continue;
    }
    reps.push_back(make_template(ev, max_id, t_min, t_max));
    if (reps.back().step >= 0) {
      step_min = std::min(step_min, reps.back().step);
      step_max = std::max(step_max, reps.back().step);
    }
  }
  if (reps.empty()) throw std::runtime_error("no events to replicate in " + input);
  const double period = std::ceil(t_max - t_min) + 1000;  // µs between replica starts
  const std::int64_t id_stride = max_id + 1;
  const std::int64_t step_stride = step_max >= step_min ? step_max - step_min + 1 : 0;

  out_file out(out_path, gzip);
  const double target = size_mb * 1e6;
  out.put("{\n  \"schemaVersion\": 1,\n");
  for (const auto& [k, v] : doc.items()) {
    if (k == "traceEvents" || k == "schemaVersion") continue;
    out.put("  " + json(k).dump() + ": " + v.dump() + ",\n");
  }
  out.put("  \"traceEvents\": [\n");
  std::int64_t replica = 0;
  bool first = true;
  std::uint64_t raw_bytes = 0;
  while (raw_bytes < target) {
    const double shift = period * static_cast<double>(replica);
    const std::int64_t id_off = id_stride * replica;
    const std::uint64_t before = out.bytes();
    for (const event_template& t : reps) {
      if (!first) out.put(",\n");
      first = false;
      out.put(t.head);
      if (t.step >= 0) {
        out.put("\"ProfilerStep#");
        out.put_int(t.step + step_stride * replica);
        out.put("\"");
      }
      out.put(t.after_name);
      out.put_time(t.ts + shift);
      out.put(t.after_ts);
      for (const auto& piece : t.ids) {
        out.put_int(piece.value + id_off);
        out.put(piece.after);
      }
    }
    // For gzip, out.bytes() counts uncompressed bytes too (we count before compression).
    raw_bytes += out.bytes() - before;
    ++replica;
  }
  const double total_span = period * static_cast<double>(replica);
  for (const json* ev : once) {
    json e = *ev;
    if (e.value("cat", "") == "Trace" && e.contains("dur")) e["dur"] = std::ceil(total_span);
    if (e.value("name", "") == "Record Window End") e["ts"] = t_min + total_span;
    out.put(",\n  ");
    out.put(e.dump());
  }
  out.put("\n]}\n");
  out.close();
  return static_cast<std::uint64_t>(std::filesystem::file_size(out_path));
}

/// Writes a trace of many small CPU events, at least `size_mb` MB, to `out_path` (plain JSON);
/// returns the bytes written. `same_ts` false: one thread of `ProfilerStep#N` ranges, each
/// holding 2 500 groups of four short `cpu_op`s nested up to three deep (1-9 µs, short names,
/// args = External id only), about 120 bytes per event. `same_ts` true: every event is a
/// one-line `cpu_op` at ts 1000 with dur 0 and no args (about 78 bytes per event), the shape
/// that once made `analyze` run out of memory.
std::uint64_t generate_small_events_trace(const std::string& out_path, double size_mb, bool same_ts) {
  static constexpr std::string_view names[][4] = {
      {"aten::linear", "aten::t", "aten::addmm", "aten::mm"},
      {"aten::conv2d", "aten::view", "aten::convolution", "aten::add_"},
      {"aten::relu", "aten::empty", "aten::clamp_min", "aten::copy_"},
      {"aten::add", "aten::to", "aten::mul", "aten::fill_"},
  };
  out_file out(out_path, false);
  const double target = size_mb * 1e6;
  out.put("{\n  \"schemaVersion\": 1,\n  \"traceEvents\": [\n");
  std::int64_t ext = 1;
  bool first = true;
  if (same_ts) {
    std::uint64_t i = 0;
    while (static_cast<double>(out.bytes()) < target) {
      if (!first) out.put(",\n");
      first = false;
      out.put("{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"");
      out.put(names[i % 4][(i / 4) % 4]);
      out.put("\",\"pid\":1,\"tid\":1,\"ts\":1000,\"dur\":0}");
      ++i;
    }
  } else {
    constexpr int groups_per_step = 2500;
    constexpr double group_us = 10;  // 9 µs of ops + 1 µs gap
    double t = 1000;
    std::int64_t step = 1;
    auto op = [&](std::string_view name, double ts, double dur) {
      out.put(",\n  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"");
      out.put(name);
      out.put("\", \"pid\": 7, \"tid\": 7, \"ts\": ");
      out.put_time(ts);
      out.put(", \"dur\": ");
      out.put_time(dur);
      out.put(", \"args\": {\"External id\": ");
      out.put_int(ext++);
      out.put("}}");
    };
    while (static_cast<double>(out.bytes()) < target) {
      out.put(first ? "  " : ",\n  ");
      first = false;
      out.put("{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#");
      out.put_int(step);
      out.put("\", \"pid\": 7, \"tid\": 7, \"ts\": ");
      out.put_time(t);
      out.put(", \"dur\": ");
      out.put_time(groups_per_step * group_us);
      out.put(", \"args\": {\"External id\": ");
      out.put_int(ext++);
      out.put("}}");
      for (int g = 0; g < groups_per_step; ++g) {
        const double s = t + g * group_us + 0.5;
        const auto& n = names[(g + step) % 4];
        op(n[0], s, 9);          // outer
        op(n[1], s + 0.5, 2.5);  // first child
        op(n[2], s + 3.5, 5);    // second child
        op(n[3], s + 4, 3.5);    // grandchild
      }
      t += groups_per_step * group_us + 5;
      ++step;
    }
    out.put(",\n  {\"ph\": \"X\", \"cat\": \"Trace\", \"name\": \"PyTorch Profiler (0)\", \"pid\": \"Spans\", "
            "\"tid\": \"PyTorch Profiler\", \"ts\": 1000, \"dur\": ");
    out.put_time(t - 1000);
    out.put(", \"args\": {\"Op count\": 0}}");
  }
  out.put("\n]}\n");
  out.close();
  return static_cast<std::uint64_t>(std::filesystem::file_size(out_path));
}

#ifndef KINETOSCOPE_GEN_NO_MAIN
int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: gen_big_trace OUT.json SIZE_MB [--gzip] [--input TRACE] [--small | --same-ts]\n");
    return 2;
  }
  bool gzip = false;
  int small = 0;  // 1: many small events, 2: all events at one ts
  const char* real = std::getenv("KINETOSCOPE_REAL_TRACES");
  std::string input = std::string(real != nullptr ? real : KINETOSCOPE_REAL_TRACES_DIR) +
                      "/traces/resnet50_v100/worker0.1623143089861.pt.trace.json.gz";
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gzip") == 0) gzip = true;
    else if (std::strcmp(argv[i], "--input") == 0 && i + 1 < argc) input = argv[++i];
    else if (std::strcmp(argv[i], "--small") == 0) small = 1;
    else if (std::strcmp(argv[i], "--same-ts") == 0) small = 2;
  }
  try {
    const std::uint64_t n = small != 0 ? generate_small_events_trace(argv[1], std::atof(argv[2]), small == 2)
                                       : generate_big_trace(input, argv[1], std::atof(argv[2]), gzip);
    std::printf("%s: %llu bytes\n", argv[1], static_cast<unsigned long long>(n));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gen_big_trace: %s\n", e.what());
    return 1;
  }
  return 0;
}
#endif
