#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Real TensorBoard reads kinetoscope's event files (scripts/gpu-check.sh, part c):
1. tensorboard's EventAccumulator reads every run of LOGDIR: the same tags, and per tag the same
   (step, wall_time, value) points as `kinetoscope scalars --json LOGDIR` printed;
2. a `tensorboard --logdir LOGDIR` server on loopback lists each run and its scalar tags at
   /data/plugin/scalars/tags, and serves one tag's points at /data/plugin/scalars/scalars.
Prints PASS/FAIL lines.

usage: tb_check.py LOGDIR SCALARS.json [DUMP.json]
DUMP.json receives what EventAccumulator read, in the shape of `kinetoscope scalars --json`
({"runs": {run: {tag: [[step, wall_time, value], ...]}}}): the fixture tests compare with it.
"""
import json
import math
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request

from gpu_common import free_port, stop
from tensorboard.backend.event_processing import event_accumulator


def same(a, b):
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9) or (math.isnan(a) and math.isnan(b))


def main():
    logdir, scalars_path = sys.argv[1], sys.argv[2]
    with open(scalars_path) as f:
        ours = json.load(f)["runs"]
    ok = bool(ours)
    dump = {"runs": {}}
    for run, tags in ours.items():
        ea = event_accumulator.EventAccumulator(os.path.join(logdir, run), size_guidance={event_accumulator.SCALARS: 0})
        ea.Reload()
        theirs = ea.Tags()["scalars"]
        dump["runs"][run] = {t: [[e.step, e.wall_time, e.value] for e in ea.Scalars(t)] for t in theirs}
        mismatches = []
        points = 0
        for tag, series in tags.items():
            if tag not in theirs:
                mismatches.append(f"{tag} missing")
                continue
            events = ea.Scalars(tag)
            if len(events) != len(series):
                mismatches.append(f"{tag}: {len(events)} points, ours {len(series)}")
                continue
            for e, (step, wall, value) in zip(events, series):
                points += 1
                if e.step != step or not same(e.wall_time, wall) or not same(e.value, value):
                    mismatches.append(f"{tag} step {step}: tensorboard ({e.step}, {e.wall_time}, {e.value}) "
                                      f"ours ({step}, {wall}, {value})")
                    break
        extra = sorted(set(theirs) - set(tags))
        good = not mismatches and not extra and points > 0
        ok = ok and good
        print(f"{'PASS' if good else 'FAIL'} tensorboard event_accumulator {run}: {len(theirs)} tags, {points} points "
              f"equal to kinetoscope scalars" + (f"; {mismatches[:3]}" if mismatches else "")
              + (f"; tags only tensorboard sees: {extra}" if extra else ""), flush=True)

    if len(sys.argv) > 3:
        with open(sys.argv[3], "w") as f:
            json.dump(dump, f, indent=1)

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", logdir, "--host", "127.0.0.1",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        listed, t0 = {}, time.time()
        while time.time() - t0 < 90:
            try:
                with urllib.request.urlopen(base + "/data/plugin/scalars/tags", timeout=5) as r:
                    listed = json.load(r)
                if all(run in listed and set(ours[run]) <= set(listed[run]) for run in ours):
                    break
            except OSError:
                pass
            time.sleep(0.5)
        good = all(run in listed and set(ours[run]) <= set(listed[run]) for run in ours)
        detail = f"runs {sorted(listed)}, {sum(len(v) for v in listed.values())} tags after {time.time() - t0:.1f} s"
        if good:
            run = next(iter(ours))
            tag = next(iter(ours[run]))
            q = urllib.parse.urlencode({"run": run, "tag": tag})
            with urllib.request.urlopen(f"{base}/data/plugin/scalars/scalars?{q}", timeout=10) as r:
                served = json.load(r)  # [[wall_time, step, value], ...]
            good = len(served) == len(ours[run][tag]) and all(
                p[1] == step and same(p[2], value) for p, (step, _, value) in zip(served, ours[run][tag]))
            detail += f"; {tag}: {len(served)} points served, equal: {good}"
        ok = ok and good
        print(f"{'PASS' if good else 'FAIL'} tensorboard server: {detail}", flush=True)
    finally:
        stop(proc)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
