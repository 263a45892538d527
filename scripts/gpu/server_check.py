#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The viewer server on real PyTorch traces (scripts/gpu-check.sh, part b): starts
`kinetoscope --logdir DIR --port 0` on loopback, waits for the load, then asks every run for
its views and the views for their data. Prints PASS/FAIL lines.

usage: server_check.py KINETOSCOPE_BIN LOGDIR
"""
import json
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request

from gpu_common import stop


def main():
    binary, logdir = sys.argv[1], sys.argv[2]
    proc = subprocess.Popen([binary, "--logdir", logdir, "--port", "0", "--reload_interval", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ok = True
    try:
        base = None
        for _ in range(20):
            l = proc.stdout.readline()
            m = re.search(r"(http://[^ /]+)", l)
            if m:
                base = m.group(1)
                break
        if base is None:
            print("FAIL server start: no URL printed")
            return 1

        def get(path, **params):
            url = base + path + ("?" + urllib.parse.urlencode(params) if params else "")
            with urllib.request.urlopen(url, timeout=60) as r:
                return json.load(r)

        t0 = time.time()
        while True:
            st = get("/api/status")
            if not st["loading"] or time.time() - t0 > 90:
                break
            time.sleep(0.2)
        files = st["files"]
        failed = [f for f in files if f["state"] != "loaded"]
        ok = not failed and not st["loading"]
        print(f"{'PASS' if ok else 'FAIL'} server load: {len(files) - len(failed)} of {len(files)} files loaded in "
              f"{time.time() - t0:.2f} s" + (f"; failed: {failed}" if failed else ""))
        for run in get("/api/runs")["runs"]:
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
            empty = [k for k, v in answers.items() if not v]
            good = not empty and "Kernel" in views
            ok = ok and good
            print(f"{'PASS' if good else 'FAIL'} server run {run}: views {views}, worker {worker} span {span}"
                  + (f"; empty answers: {empty}" if empty else ""))
    finally:
        if not stop(proc):
            print("FAIL server exit: did not stop within 10 s of SIGTERM")
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
