#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Checks one `kinetoscope analyze --json` document: every view the trace has data for is
non-empty, and device time is attributed to operators. Prints "PASS|FAIL <label> <check>:
<numbers>" lines (scripts/gpu-check.sh counts them).

usage: analyze_check.py ANALYZE.json --label TEXT [--expect gpu,memory,modules,distributed]
       (--expect attribution alone: only the device attribution line)
                        [--trace TRACE]   (the trace analysed: its GPU time is the denominator)
                        [--attribution check|info]  (info: print the ratio, do not judge it;
                                                     for the plugin's rules, which drop cuda_driver)
"""
import argparse
import gzip
import json
import sys


def gpu_time_us(trace_path):
    """Total duration of the trace's kernels, copies and memsets: what operators' device self
    time can at most account for (torch-tb-profiler counts all three as an op's device time)."""
    opener = gzip.open if trace_path.endswith(".gz") else open
    with opener(trace_path, "rt") as f:
        trace = json.load(f)
    return sum(float(e.get("dur", 0)) for e in trace.get("traceEvents", [])
               if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("doc")
    ap.add_argument("--label", required=True)
    ap.add_argument("--expect", default="")
    ap.add_argument("--trace")
    ap.add_argument("--attribution", choices=["check", "info"], default="check")
    a = ap.parse_args()
    expect = set(filter(None, a.expect.split(",")))
    with open(a.doc) as f:
        doc = json.load(f)
    lines = []

    def line(ok, check, detail):
        lines.append(f"{'PASS' if ok else 'FAIL'} {a.label} {check}: {detail}")

    views = expect != {"attribution"}
    ov = doc.get("overview", {})
    steps = ov.get("steps", [])
    avg = ov.get("average", {})
    ops = doc.get("operators", {}).get("by_name", [])
    if views:
        line(len(steps) > 0 and avg.get("total", 0) > 0, "overview",
             f"{len(steps)} steps, average step {avg.get('total', 0):.0f} us "
             f"(kernel {avg.get('kernel', 0):.0f}, memcpy {avg.get('memcpy', 0):.0f}, "
             f"memset {avg.get('memset', 0):.0f}, communication {avg.get('communication', 0):.0f}, "
             f"runtime {avg.get('runtime', 0):.0f}, dataloader {avg.get('dataloader', 0):.0f}, "
             f"cpu_exec {avg.get('cpu_exec', 0):.0f}, other {avg.get('other', 0):.0f})")
        line(len(ops) > 0, "operators", f"{len(ops)} operators, {sum(o['calls'] for o in ops)} calls")
    if "gpu" in expect:
        gpus = ov.get("gpus", [])
        util = max((g.get("utilization_pct") or 0 for g in gpus), default=0)
        name = gpus[0]["name"] if gpus else ""
        line(len(gpus) > 0 and util > 0, "gpu utilization",
             f"{util:.2f} % on \"{name}\", est. occupancy "
             f"{(gpus[0].get('achieved_occupancy_pct') if gpus else None)}")
        kernels = doc.get("kernels", {}).get("by_name", [])
        kernel_us = sum(k["total_us"] for k in kernels)
        line(len(kernels) > 0 and kernel_us > 0, "kernels",
             f"{len(kernels)} kernel names, {sum(k['calls'] for k in kernels)} launches, {kernel_us:.0f} us")
    if "gpu" in expect or "attribution" in expect:
        device_self = sum(o.get("device_self_us") or 0 for o in ops)
        if a.trace:
            gpu_us = gpu_time_us(a.trace)
            ratio = device_self / gpu_us if gpu_us else 0
            # GPU work launched outside any operator belongs to none: 90 % is the floor. Device
            # times are rounded to whole µs per operator, so the sum may pass 100 % by 0.5 µs each.
            ceiling = (gpu_us + 0.5 * len(ops)) / gpu_us if gpu_us else 1
            ok = 0.9 <= ratio <= ceiling
            if a.attribution == "info":
                print(f"INFO {a.label} device attribution: {ratio * 100:.2f} % of the GPU time "
                      f"({device_self:.0f} of {gpu_us:.0f} us)")
            else:
                line(ok, "device attribution",
                     f"{ratio * 100:.2f} % of the GPU time ({device_self:.0f} of {gpu_us:.0f} us of kernels, "
                     f"copies and memsets) is operators' device self time")
    if "memory" in expect:
        devs = doc.get("memory", {}).get("devices", [])
        line(len(devs) > 0 and any(d["curve"] for d in devs), "memory",
             ", ".join(f"{d['device']}: peak {d['peak_allocated_bytes']} B, {len(d['curve'])} curve points, "
                       f"{len(d['stats'])} rows" for d in devs) or "no device")
    if "modules" in expect:
        mods = doc.get("modules", [])
        line(len(mods) > 0, "modules", f"{len(mods)} top-level modules: {', '.join(m['name'] for m in mods[:4])}")
    if "distributed" in expect:
        d = doc.get("distributed", {})
        line(bool(d.get("available")) or len(d.get("workers", [])) > 0, "distributed",
             f"available {d.get('available')}, {len(d.get('workers', []))} workers, reason \"{d.get('reason', '')}\"")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
