#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Rewrites the fuzz_index seed corpus (tests/fuzz/corpus/index/) with the current index format,
# as test_index's "seed indexes are of this format version" asks whenever index_format_version
# changes (older seeds stop at the version check and fuzz nothing past it):
#   cuda_sample, nccl_1rank,      `kinetoscope index` of three small traces our own programs
#   legacy                        recorded (tests/data: kinetoscope's CUPTI trace, PyTorch 2.11's
#                                 NCCL rank from the GPU check, the PyTorch 1.13 legacy array);
#                                 committed seeds are never derived from third-party traces
#   string_offset_past_blob       cuda_sample's trace indexed, then one string offset moved past
#                                 the blob (the finding that created the target, kept checked)
#   meta_float_as_integer         the same with the timeline meta's t0 written as a float (a
#                                 finding of 2026-11-28, kept checked)
#   span_bodies                   a span's Distributed bodies cache file, from a 2-rank job of
#                                 gen_dist_job served once with the Distributed view requested
# Usage: scripts/make-index-seeds.sh [BUILD_DIR]   (default build-test; needs its kinetoscope
# and bench/gen_dist_job, python3)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-test}
bin=$build/viewer/kinetoscope
gen=$build/bench/gen_dist_job
ninja -C "$build" viewer/kinetoscope bench/gen_dist_job >/dev/null
seeds=tests/fuzz/corpus/index
work=/tmp/ksseeds  # the seeds hold the paths of their traces: a short fixed folder
rm -rf "$work"
mkdir -p "$work"
trap 'if [ -n "${server:-}" ]; then kill "$server" 2>/dev/null || true; fi; rm -rf "$work"' EXIT
export KINETOSCOPE_INDEX_MIN_SIZE=0  # the seed traces are small: index them all the same
data=tests/data

# The key inside an index is the trace's absolute path: short fixed names keep the seeds small.
mkdir -p "$work/fz"
cp "$data"/gpu/kinetoscope-h200/cuda_sample/*.pt.trace.json.gz "$work/fz/cuda_sample.pt.trace.json.gz"
cp "$data"/gpu/pytorch-2.11-h200/nccl_1rank/*.pt.trace.json.gz "$work/fz/nccl_1rank.pt.trace.json.gz"
cp "$data"/real/traces/legacy_torch113_cpu/*.pt.trace.json.gz "$work/fz/legacy.pt.trace.json.gz"
"$bin" index --cache_dir "$work/cache" "$work/fz" >/dev/null
index_of() {  # the cache file of one trace: the one whose header names it
  grep -l --binary-files=text "$1" "$work"/cache/*.ksidx | head -n 1
}
for name in cuda_sample nccl_1rank legacy; do
  cp "$(index_of "$work/fz/$name.pt.trace.json.gz")" "$seeds/$name.ksidx"
done

# One string offset past the blob, its CRC set right (the fuzz target sets CRCs anyway).
python3 - "$(index_of "$work/fz/cuda_sample.pt.trace.json.gz")" "$seeds/string_offset_past_blob.ksidx" <<'EOF'
import struct, sys, zlib
data = bytearray(open(sys.argv[1], 'rb').read())
sections, path_bytes = struct.unpack_from('<II', data, 40)
at = 48 + path_bytes
for i in range(sections):
    kind, crc, off, size = struct.unpack_from('<IIQQ', data, at + 24 * i)
    if kind == 2:  # string offsets: strings + 1 uint64
        k = size // 8 // 2
        struct.pack_into('<Q', data, off + 8 * k, 1 << 40)
        struct.pack_into('<I', data, at + 24 * i + 4, zlib.crc32(bytes(data[off:off + size])))
        break
else:
    sys.exit('no string offsets section')
open(sys.argv[2], 'wb').write(bytes(data))
EOF

# The timeline meta's t0 (a double's bits as a JSON integer) written as a float of the same
# length, its CRC set right: nlohmann's get<uint64_t> cast it with undefined behaviour (the
# campaign of 2026-11-28 found it; server/json_int.hpp).
python3 - "$(index_of "$work/fz/cuda_sample.pt.trace.json.gz")" "$seeds/meta_float_as_integer.ksidx" <<'EOF'
import re, struct, sys, zlib
data = bytearray(open(sys.argv[1], 'rb').read())
sections, path_bytes = struct.unpack_from('<II', data, 40)
at = 48 + path_bytes
for i in range(sections):
    kind, crc, off, size = struct.unpack_from('<IIQQ', data, at + 24 * i)
    if kind == 13:  # the timeline's meta JSON
        meta = bytes(data[off:off + size])
        m = re.search(rb'"t0":(\d+)', meta)
        digits = m.group(1)
        if len(digits) < 6:
            sys.exit('t0 too short')
        text = b'1.' + b'0' * (len(digits) - 5) + b'e99'  # 1e99, as long as the integer
        data[off + m.start(1):off + m.end(1)] = text
        struct.pack_into('<I', data, at + 24 * i + 4, zlib.crc32(bytes(data[off:off + size])))
        break
else:
    sys.exit('no timeline meta section')
open(sys.argv[2], 'wb').write(bytes(data))
EOF

# A span's cache file: serve a small job once and ask for its Distributed view.
mkdir -p "$work/sj"
"$gen" "$work/sj/job" --ranks 2 --mb-per-rank 1 --steps 4 >/dev/null
port=$((20000 + RANDOM % 20000))
"$bin" --logdir "$work/sj" --cache_dir "$work/sjcache" --port "$port" >/dev/null 2>&1 &
server=$!
python3 - "$port" <<'EOF'
import json, sys, time, urllib.request
base = f'http://127.0.0.1:{sys.argv[1]}/api/'
def get(q):
    return json.load(urllib.request.urlopen(base + q, timeout=30))
for _ in range(300):
    try:
        if 'job' in get('runs')['runs'] and not get('runs')['loading']:
            break
    except OSError:
        pass
    time.sleep(0.2)
else:
    sys.exit('the server did not load the job')
span = get('spans?run=job&worker=All')[0]
get(f'distributed/overlap?run=job&worker=All&span={span}')
EOF
kill "$server"
wait "$server" 2>/dev/null || true
cp "$(grep -l --binary-files=text "span:$work/sj/job" "$work"/sjcache/*.ksidx | head -n 1)" "$seeds/span_bodies.ksidx"
ls -l "$seeds"
