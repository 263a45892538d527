#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The viewer server on real PyTorch traces (scripts/gpu-check.sh, part b): starts
`kinetoscope --logdir DIR --port 0` on loopback with a fresh cache folder, waits for the load,
then asks every run for its views and the views for their data (and the Trace view for its
tracks, a full-range window and a slice with its flows). Then starts it again on the same cache
folder: every file must come from its persisted index ("read", nothing parsed) and every one of
those answers must be byte for byte the first start's. Prints PASS/FAIL lines.

usage: server_check.py KINETOSCOPE_BIN LOGDIR
"""
import json
import re
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

from gpu_common import stop


def serve(binary, logdir, cache, label):
    """One server start: (ok, {request: raw answer bytes}, {file path: index note})."""
    # These traces are small: index every one, so that the restart reads them all back.
    proc = subprocess.Popen([binary, "--logdir", logdir, "--port", "0", "--reload_interval", "0",
                             "--cache_dir", cache],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "KINETOSCOPE_INDEX_MIN_SIZE": "0"})
    ok = True
    answers_all = {}
    notes = {}
    try:
        base = None
        for _ in range(20):
            l = proc.stdout.readline()
            m = re.search(r"(http://[^ /]+)", l)
            if m:
                base = m.group(1)
                break
        if base is None:
            print(f"FAIL server start ({label}): no URL printed")
            return False, {}, {}

        def raw(path, **params):
            url = base + path + ("?" + urllib.parse.urlencode(params) if params else "")
            for _ in range(120):  # a full profile loaded on demand answers 503 until it is there
                try:
                    with urllib.request.urlopen(url, timeout=60) as r:
                        return r.read()
                except urllib.error.HTTPError as e:
                    if e.code != 503:
                        raise
                    time.sleep(0.5)
            raise TimeoutError(url)

        def get(path, **params):
            body = raw(path, **params)
            answers_all[path + "?" + urllib.parse.urlencode(sorted(params.items()))] = body
            return json.loads(body)

        t0 = time.time()
        while True:
            st = json.loads(raw("/api/status"))
            if not st["loading"] or time.time() - t0 > 90:
                break
            time.sleep(0.2)
        files = st["files"]
        notes = {f["path"]: f["index"] for f in files}
        failed = [f for f in files if f["state"] != "loaded"]
        ok = not failed and not st["loading"]
        print(f"{'PASS' if ok else 'FAIL'} server load ({label}): {len(files) - len(failed)} of {len(files)} files "
              f"loaded in {time.time() - t0:.2f} s" + (f"; failed: {failed}" if failed else ""))
        for run in json.loads(raw("/api/runs"))["runs"]:
            views = get("/api/views", run=run)
            worker = get("/api/workers", run=run, view="Overview")[0]
            span = get("/api/spans", run=run, worker=worker)[0]
            q = dict(run=run, worker=worker, span=span)
            answers = {"Overview": get("/api/overview", **q), "Operator": get("/api/operation/table", group_by="Operation", **q)}
            if "Kernel" in views:
                answers["Kernel"] = get("/api/kernel/table", **q)
            if "Memory" in views:
                answers["Memory"] = get("/api/memory_curve", time_metric="ms", memory_metric="MB", **q)
            if "Module" in views:
                answers["Module"] = get("/api/module", **q)
            if "Distributed" in views:
                answers["Distributed"] = get("/api/distributed/overlap", run=run, span=span)
            answers["Trace tracks"] = get("/api/timeline/tracks", **q)["tracks"]
            window = get("/api/timeline", start="-1e18", end="1e18", px="1000", **q)
            answers["Trace window"] = window["slices"]["id"]
            ids = [i for i in window["slices"]["id"] if i >= 0]
            if ids:
                answers["Trace slice"] = get("/api/timeline/event", id=str(ids[len(ids) // 2]), subtree="1", **q)
            empty = [k for k, v in answers.items() if not v]
            good = not empty and "Kernel" in views
            ok = ok and good
            print(f"{'PASS' if good else 'FAIL'} server run {run} ({label}): views {views}, worker {worker} span {span}"
                  + (f"; empty answers: {empty}" if empty else ""))
    finally:
        if not stop(proc):
            print(f"FAIL server exit ({label}): did not stop within 10 s of SIGTERM")
            ok = False
    return ok, answers_all, notes


def main():
    binary, logdir = sys.argv[1], sys.argv[2]
    cache = tempfile.mkdtemp(prefix="kinetoscope-cache.")
    ok1, first, notes1 = serve(binary, logdir, cache, "first start")
    written = all(n == "written" for n in notes1.values())
    print(f"{'PASS' if written and notes1 else 'FAIL'} index written: {len(notes1)} files, notes "
          f"{sorted(set(notes1.values()))}")
    ok2, second, notes2 = serve(binary, logdir, cache, "restart")
    read = all(n == "read" for n in notes2.values())
    differ = sorted(k for k in first if second.get(k) != first[k])
    same = read and notes2 and not differ and len(second) == len(first)
    print(f"{'PASS' if same else 'FAIL'} index reopen: {len(notes2)} files read from their index "
          f"(notes {sorted(set(notes2.values()))}), {len(first) - len(differ)} of {len(first)} answers identical"
          + (f"; differ: {differ[:5]}" if differ else ""))
    return 0 if ok1 and ok2 and written and same else 1


if __name__ == "__main__":
    sys.exit(main())
