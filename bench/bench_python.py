# SPDX-License-Identifier: BSD-3-Clause
"""The Python package against its peers, on generated traces of 300 MB and 1 GB (figures only).

    .venv/bin/python bench/bench_python.py --build BUILD [--hta-python PY] [--sizes 300,1000]

For each size, one trace made by bench's gen_big_trace (the ResNet-50 sample's steps replicated)
in a folder of its own, then, each measurement in a fresh child process (time of the operation
alone, imports excluded; peak RSS of the whole child, imports included):
  events     kinetoscope.open(path, cache=False).events()   vs  Holistic Trace Analysis parsing
             the same folder (TraceAnalysis(trace_dir=...)); goal >= 30x faster at <= 0.5x peak
  operators  kinetoscope.open(path, cache=False).operators() vs torch-tb-profiler loading the
             same file (its parser and view generation, scripts/golden/plugin_numbers.py);
             goal >= 50x faster
  tensorboard  seconds from starting `tensorboard --logdir` (our plugin; tests/python/
             run_tensorboard.py) to the tab's Overview of that trace, against `kinetoscope
             --logdir` alone, cold (empty index cache) and warm (the index the cold start
             wrote); goal: the plugin adds <= 10 %
A peer that is not installed (no --hta-python) or fails (e.g. runs out of memory) is reported as
such; nothing is asserted. Meson: `meson test -C build-test --suite bench python -v`.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Each child prints one JSON line: {"seconds": operation time, "rss_mb": peak RSS, "rows": n}.
CHILD_KINETOSCOPE = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import kinetoscope, kinetoscope._engine, kinetoscope._frames  # pandas too: imports are not timed
t0 = time.perf_counter()
trace = kinetoscope.open(sys.argv[2], cache=False)
table = trace.events() if sys.argv[3] == "events" else trace.operators()
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "rows": len(table),
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

CHILD_HTA = r"""
import json, logging, resource, sys, time
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t0 = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
seconds = time.perf_counter() - t0
rows = sum(len(analysis.t.get_trace(r)) for r in analysis.t.traces)
print(json.dumps({"seconds": seconds, "rows": rows,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

CHILD_PLUGIN = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import plugin_numbers
plugin_numbers.import_plugin()
plugin_numbers.apply_upstream_fixes()
t0 = time.perf_counter()
numbers = plugin_numbers.plugin_numbers(sys.argv[2])
rows = len(numbers["operators"]["by_name"])
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "rows": rows,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def child(python, code, *args, timeout=3600):
    """Runs a measuring child; its JSON line, or {"error": why}."""
    try:
        p = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, MALLOC_PERTURB_="0"))
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout} s"}
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {p.returncode}: {tail[:200]}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def figure(r):
    if "error" in r:
        return f"failed ({r['error']})"
    return f"{r['seconds']:8.2f} s  {r['rss_mb']:8.0f} MB peak  ({r['rows']} rows)"


def ratio_line(ours, theirs, goal_speed, goal_mem=None):
    if "error" in ours or "error" in theirs:
        return "  ratio: n/a"
    speed = theirs["seconds"] / max(ours["seconds"], 1e-9)
    line = f"  ratio: {speed:6.1f}x faster (goal >= {goal_speed}x)"
    if goal_mem is not None:
        mem = ours["rss_mb"] / max(theirs["rss_mb"], 1e-9)
        line += f", {mem:4.2f}x the peak memory (goal <= {goal_mem}x)"
    return line


def get_json(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, json.loads(r.read() or b"null")


def time_to_overview(argv, base, run, env, deadline=1800):
    """Seconds from starting argv to a 200 answer of the run's Overview under `base`."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        port = None
        while port is None:
            line = proc.stdout.readline()
            if not line:
                return None, "exited before it listened"
            for word in line.split():
                if word.startswith("http://127.0.0.1:"):
                    port = int(word.split(":")[2].split("/")[0])
        # The rest of the output is not read any more: drain it so the child never blocks.
        import threading

        threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
        root = f"http://127.0.0.1:{port}{base}"
        while time.perf_counter() - t0 < deadline:
            try:
                status, workers = get_json(f"{root}/api/workers?run={run}&view=Overview")
                if status == 200 and workers:
                    status, spans = get_json(f"{root}/api/spans?run={run}&worker={workers[0]}")
                    if status == 200 and spans:
                        status, body = get_json(
                            f"{root}/api/overview?run={run}&worker={workers[0]}&span={spans[0]}", timeout=600)
                        if status == 200 and body:
                            return time.perf_counter() - t0, None
            except OSError:
                pass
            time.sleep(0.05)
        return None, "no Overview in time"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--hta-python", default="")
    ap.add_argument("--sizes", default="300,1000")
    ap.add_argument("--skip", default="", help="comma list of events,operators,tensorboard")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    pkg = os.path.join(build, "python")
    binary = os.path.join(build, "viewer", "kinetoscope")
    gen = os.path.join(build, "bench", "gen_big_trace")
    py = sys.executable
    skip = set(filter(None, a.skip.split(",")))
    hta = a.hta_python if a.hta_python and os.path.exists(a.hta_python) else ""

    work = tempfile.mkdtemp(prefix="kinetoscope-bench-python.")
    try:
        for size in [int(s) for s in a.sizes.split(",")]:
            run = f"big{size}"
            folder = os.path.join(work, "logs", run)
            os.makedirs(folder)
            path = os.path.join(folder, "worker0.1.pt.trace.json")
            subprocess.run([gen, path, str(size)], check=True, capture_output=True)
            print(f"== {size} MB trace ({os.path.getsize(path) / 1e6:.0f} MB on disk)", flush=True)

            if "events" not in skip:
                ours = child(py, CHILD_KINETOSCOPE, pkg, path, "events")
                print(f"events()     kinetoscope            {figure(ours)}", flush=True)
                theirs = child(hta, CHILD_HTA, folder) if hta else {"error": "HTA not installed (--hta-python)"}
                print(f"             Holistic Trace Analysis {figure(theirs)}", flush=True)
                print(ratio_line(ours, theirs, 30, 0.5), flush=True)

            if "operators" not in skip:
                ours = child(py, CHILD_KINETOSCOPE, pkg, path, "operators")
                print(f"operators()  kinetoscope            {figure(ours)}", flush=True)
                theirs = child(py, CHILD_PLUGIN, os.path.join(REPO, "scripts", "golden"), path)
                print(f"             torch-tb-profiler      {figure(theirs)}", flush=True)
                print(ratio_line(ours, theirs, 50), flush=True)

            if "tensorboard" not in skip:
                logdir = os.path.join(work, "logs")
                for state in ("cold", "warm"):
                    cache = os.path.join(work, f"cache-{size}")
                    if state == "cold":
                        shutil.rmtree(cache, ignore_errors=True)
                    env = dict(os.environ, XDG_CACHE_HOME=cache, MALLOC_PERTURB_="0")
                    alone, err1 = time_to_overview(
                        [binary, "--logdir", logdir, "--host", "127.0.0.1", "--port", "0"], "", run, env)
                    if state == "cold":  # the plugin's cold start gets an empty cache too
                        shutil.rmtree(cache, ignore_errors=True)
                    plugin, err2 = time_to_overview(
                        [py, os.path.join(REPO, "tests", "python", "run_tensorboard.py"), "--logdir", logdir,
                         "--kinetoscope_bin", binary, "--host", "127.0.0.1", "--port", "0", "--load_fast=false"],
                        "/data/plugin/kinetoscope", run, env)
                    a_txt = f"{alone:7.2f} s" if alone else f"failed ({err1})"
                    p_txt = f"{plugin:7.2f} s" if plugin else f"failed ({err2})"
                    extra = f"  plugin adds {100 * (plugin / alone - 1):+5.1f} % (goal <= 10 %)" if alone and plugin else ""
                    print(f"start->Overview ({state}): kinetoscope --logdir {a_txt}, tensorboard + plugin {p_txt}{extra}",
                          flush=True)
            shutil.rmtree(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
