#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Samples small fuzz seeds from real traces, at run time (scripts/fuzz.sh): third-party traces
stay in ../shared/traces and nothing derived from them is committed (tests/data/real/README.md).

For each trace file under SRC (.json or .json.gz, the legacy bare array too) it writes one seed
into OUT holding at most --events events: every (cat, ph) pair that occurs keeps its first
event, the rest is filled with events spread evenly over the file, in file order; the top-level
keys other than traceEvents (deviceProperties, distributedInfo, schemaVersion, ...) are kept
whole. A seed larger than --max-bytes is halved until it fits (libFuzzer's -max_len).

usage: sample-trace-seeds.py SRC OUT [--events 300] [--max-bytes 65536]
"""
import argparse
import gzip
import json
import os
import sys


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        return json.load(f)


def sample(events, n):
    keep = {}
    for i, e in enumerate(events):
        if isinstance(e, dict):
            keep.setdefault((str(e.get("cat")), str(e.get("ph"))), i)
    chosen = set(keep.values())
    if len(chosen) < n and events:
        step = max(1, -(-len(events) // (n - len(chosen))))
        chosen.update(range(0, len(events), step))
    return [events[i] for i in sorted(chosen)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--events", type=int, default=300)
    ap.add_argument("--max-bytes", type=int, default=65536)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    written = 0
    for root, _, files in sorted(os.walk(a.src)):
        for name in sorted(files):
            if not (name.endswith(".json") or name.endswith(".json.gz")):
                continue
            path = os.path.join(root, name)
            try:
                doc = read(path)
            except (OSError, ValueError) as e:
                print(f"sample-trace-seeds: skipped {path}: {e}", file=sys.stderr)
                continue
            events = doc if isinstance(doc, list) else doc.get("traceEvents", [])
            n = a.events
            while True:
                picked = sample(events, n)
                out = picked if isinstance(doc, list) else {**doc, "traceEvents": picked}
                text = json.dumps(out, separators=(",", ":"))
                if len(text) <= a.max_bytes or n <= 8:
                    break
                n //= 2
            run = os.path.relpath(root, a.src).replace(os.sep, "_")
            with open(os.path.join(a.out, f"{run}__{name.removesuffix('.gz')}"), "w") as f:
                f.write(text)
            written += 1
    print(f"sample-trace-seeds: {written} seeds from {a.src} in {a.out}")
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
