# SPDX-License-Identifier: BSD-3-Clause
"""The Python API (python/kinetoscope: kinetoscope.open and its DataFrames) against the program.

    .venv/bin/python tests/python/test_python_api.py --build BUILD_DIR --traces DIR

Imports the package from BUILD_DIR/python (the engine module built there) and checks, on every
real trace under DIR (../shared/traces) and both rule sets:
  - each table (overview, GPUs, operators, kernels, memory, modules, distributed, diff) equals
    the rows of `kinetoscope analyze --json` run as a separate process on the same file;
  - events() equals the trace file read with Python's json module: per name, the number of
    "X" slices and the sums of their ts and dur;
  - job folders open as a Job with one rank per worker;
  - bad input raises kinetoscope.TraceError with the engine's file, byte offset and reason;
  - without pandas the same numbers come as dicts of NumPy arrays.
Prints one line per check and ends with `python checks: N passed, N failed`.
"""

import argparse
import collections
import gzip
import json
import math
import os
import subprocess
import sys
import tempfile
import traceback

passed = 0
failed = 0


def check(what, fn):
    global passed, failed
    try:
        fn()
        print(f"ok    {what}", flush=True)
        passed += 1
    except Exception:  # noqa: BLE001 - every failure is reported, then the run goes on
        print(f"FAIL  {what}", flush=True)
        print("      " + traceback.format_exc().strip().replace("\n", "\n      "), flush=True)
        failed += 1


def same_number(a, b):
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    return a == b


def assert_rows_equal(frame, rows, what, extra=None):
    """frame (a DataFrame) holds exactly `rows` (dicts from analyze --json), in order."""
    records = frame.to_dict("records")
    assert len(records) == len(rows), f"{what}: {len(records)} rows, analyze has {len(rows)}"
    for i, (got, want) in enumerate(zip(records, rows)):
        want = dict(want, **(extra[i] if extra else {}))
        for key, value in want.items():
            if isinstance(value, (dict, list)) and key in ("children",):
                continue
            assert key in got, f"{what} row {i}: no column {key!r} (columns {list(got)})"
            g = got[key]
            if hasattr(g, "item"):
                g = g.item()
            assert same_number(g, value), f"{what} row {i} column {key!r}: {g!r} != analyze's {value!r}"


def flatten(obj, prefix=""):
    out = {}
    for k, v in obj.items():
        name = f"{prefix}_{k}" if prefix else k
        if isinstance(v, dict):
            out.update(flatten(v, name))
        else:
            out[name] = v
    return out


def module_rows(nodes, depth=0, parent=""):
    for n in nodes:
        row = {k: v for k, v in n.items() if k != "children"}
        row.update(depth=depth, parent=parent)
        yield row
        yield from module_rows(n["children"], depth + 1, f"{parent}/{n['name']}" if parent else n["name"])


def analyze(binary, path, rules, *extra):
    args = [binary, "analyze", path, "--json", "--no_cache"] + (["--plugin_rules"] if rules == "plugin" else [])
    out = subprocess.run(args + list(extra), check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def raw_slices(path):
    """Per name: count, sum of ts, sum of dur of the file's "X" events (Python's json)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        doc = json.load(f)
    events = doc if isinstance(doc, list) else doc.get("traceEvents", [])
    per = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X" and isinstance(e.get("ts"), (int, float)):
            p = per[str(e.get("name", ""))]
            p[0] += 1
            p[1] += float(e["ts"])
            p[2] += float(e.get("dur", 0) or 0)
    return per


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--traces", required=True)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    sys.path.insert(0, os.path.join(build, "python"))
    binary = os.path.join(build, "viewer", "kinetoscope")
    import kinetoscope
    import pandas as pd

    check("the package imports from the build, with its engine",
          lambda: kinetoscope._load_engine() and kinetoscope.__file__.startswith(os.path.join(build, "python")))

    files = []
    for root, _, names in os.walk(a.traces):
        files += [os.path.join(root, n) for n in names if ".pt.trace.json" in n]
    files.sort()
    assert files, f"no traces under {a.traces}"

    for path in files:
        short = os.path.relpath(path, a.traces)
        for rules in ("kinetoscope", "plugin"):
            t = kinetoscope.open(path, rules=rules, cache=False)
            doc = analyze(binary, path, rules)

            def tables(t=t, doc=doc):
                assert_rows_equal(t.overview(), doc["overview"]["steps"], "overview")
                assert_rows_equal(t.gpus(), doc["overview"]["gpus"], "gpus")
                assert t.average_step() == doc["overview"]["average"]
                assert t.recommendations() == doc["overview"]["recommendations"] + [
                    "(kinetoscope) " + r for r in doc["overview"]["extra_recommendations"]]
                assert_rows_equal(t.operators(), doc["operators"]["by_name"], "operators")
                assert_rows_equal(t.operators("name_and_input_shape"), doc["operators"]["by_name_and_input_shape"],
                                  "operators by shape")
                assert_rows_equal(t.kernels(), doc["kernels"]["by_name"], "kernels")
                assert_rows_equal(t.kernels("operator"), doc["kernels"]["by_name_and_operator"], "kernels by op")
                stats = [dict(s, device=d["device"]) for d in doc["memory"]["devices"] for s in d["stats"]]
                assert_rows_equal(t.memory(), stats, "memory")
                curve = [{"device": d["device"], "ts": p[0], "allocated": p[1], "reserved": p[2]}
                         for d in doc["memory"]["devices"] for p in d["curve"]]
                assert_rows_equal(t.memory_curve(), curve, "memory curve")
                assert_rows_equal(t.modules(), list(module_rows(doc["modules"])), "modules")
                assert t.report() == doc | {"diagnostics": t.report()["diagnostics"]}

            check(f"{short} ({rules} rules): every table equals analyze --json", tables)

        def events(t=t, path=path):
            e = t.events()
            assert list(e.columns[:10]) == ["name", "cat", "ph", "ts", "dur", "pid", "tid", "stream", "correlation",
                                            "external_id"], list(e.columns)
            assert isinstance(e["name"].dtype, pd.CategoricalDtype)
            x = e[e["ph"] == "X"]
            got = x.groupby("name", observed=True).agg(n=("ts", "size"), ts=("ts", "sum"), dur=("dur", "sum"))
            want = raw_slices(path)
            assert set(got.index) == set(want), sorted(set(got.index) ^ set(want))[:10]
            for name, (n, ts, dur) in want.items():
                g = got.loc[name]
                assert g["n"] == n, (name, g["n"], n)
                assert math.isclose(g["ts"], ts, rel_tol=1e-12), (name, g["ts"], ts)
                assert math.isclose(g["dur"], dur, rel_tol=1e-12, abs_tol=1e-9), (name, g["dur"], dur)
            assert e["ts"].is_monotonic_increasing
            assert len(t) == len(e)

        check(f"{short}: events() holds the file's X slices (count, ts, dur per name)", events)

    # ---- windows and categories ------------------------------------------------------------
    bert = [f for f in files if "h100_bert_small" in f][0]

    def window():
        t = kinetoscope.open(bert, cache=False)
        e = t.events()
        k = t.events(cat="kernel")
        assert len(k) == (e["cat"] == "kernel").sum() > 0
        assert set(k["cat"]) == {"kernel"} and (k["stream"] >= 0).all() and (k["correlation"] > 0).all()
        both = t.events(cat=["kernel", "cuda_runtime"])
        assert len(both) == e["cat"].isin(["kernel", "cuda_runtime"]).sum()
        lo, hi = e["ts"].quantile(0.4), e["ts"].quantile(0.6)
        w = t.events(start=lo, end=hi)
        overlap = e[(e["ts"] < hi) & ((e["ts"] + e["dur"] > lo) | ((e["dur"] == 0) & (e["ts"] >= lo)))]
        assert len(w) == len(overlap) and 0 < len(w) < len(e)
        assert "grid_x" not in t.events(cat="cpu_op").columns  # kernel args only when kernels are in
        assert list(t.events(args=False).columns)[-1] == "external_id"

    check("events(cat=..., start=..., end=...) select by category and by overlap with the window", window)

    # ---- jobs and the distributed view -----------------------------------------------------
    def job():
        j = kinetoscope.open(os.path.join(a.traces, "two_ranks"), cache=False)
        assert isinstance(j, kinetoscope.Job) and len(j) == 2, j
        assert sorted(j.ranks) == [0, 1], j.ranks
        e = j.events()
        assert list(e.columns[:3]) == ["rank", "worker", "name"], list(e.columns[:5])
        assert isinstance(e["name"].dtype, pd.CategoricalDtype)
        for t, r in zip(j.traces, j.ranks):
            assert (e["rank"] == r).sum() == len(t)
        doc = analyze(binary, os.path.join(a.traces, "two_ranks"), "kinetoscope", "--worker", j.traces[0].worker)
        rows = [dict(flatten(w["overlap"]), **flatten(w["wait"]), worker=w["worker"]) for w in doc["distributed"]["workers"]]
        assert_rows_equal(j.distributed(), rows, "distributed overlap")
        ops = [dict(op, worker=w["worker"]) for w in doc["distributed"]["workers"] for op in w["comm_ops"]]
        assert_rows_equal(j.distributed("comm_ops"), ops, "distributed comm ops")
        ov = j.overview()
        assert (ov["rank"].value_counts().sort_index() == [len(t.overview()) for t in j.traces]).all()
        single = kinetoscope.open(os.path.join(a.traces, "two_ranks"), worker=j.traces[1].worker, cache=False)
        assert isinstance(single, kinetoscope.Trace) and single.worker == j.traces[1].worker

    check("a run folder of two ranks opens as a Job: events with rank and worker, the distributed view", job)

    def single_file_no_distributed():
        t = kinetoscope.open(bert, cache=False)
        try:
            t.distributed()
        except kinetoscope.TraceError as e:
            assert "no distributed view" in str(e)
        else:
            raise AssertionError("distributed() of a lone file did not raise")

    check("distributed() of a lone trace file raises TraceError saying why", single_file_no_distributed)

    def diff():
        base = os.path.join(a.traces, "diff_base")
        test = os.path.join(a.traces, "diff_test")
        tb, tt = kinetoscope.open(base, cache=False), kinetoscope.open(test, cache=False)
        doc = analyze(binary, tb.path, "kinetoscope", "--diff", tt.path)
        rows = [flatten(r) for r in doc["diff"]["rows"]]
        assert len(rows) > 1
        assert_rows_equal(tb.diff(tt), rows, "diff")

    check("diff(other) equals analyze --diff", diff)

    # ---- empty tables keep their columns ------------------------------------------------------
    def empty_tables():
        fixture = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "gpu",
                               "pytorch-2.11-h200", "resnet18")
        with tempfile.TemporaryDirectory() as d:
            empty_path = os.path.join(d, "empty.pt.trace.json")
            with open(empty_path, "w") as f:
                f.write('{"traceEvents": []}')
            empty = kinetoscope.open(empty_path, cache=False)
            full = kinetoscope.open(fixture, cache=False)
            for method, args in [("overview", ()), ("gpus", ()), ("operators", ()), ("operators", ("input_shape",)),
                                 ("kernels", ()), ("kernels", ("operator",)), ("memory", ()), ("memory_curve", ()),
                                 ("memory_peaks", ()), ("modules", ()), ("events", ())]:
                x, y = getattr(empty, method)(*args), getattr(full, method)(*args)
                assert len(x) == 0 < len(y), (method, len(x), len(y))
                if method != "events":  # events(): args columns only when such events are in
                    assert list(x.columns) == list(y.columns), (method, list(x.columns), list(y.columns))
            base = kinetoscope.open(os.path.join(a.traces, "diff_base"), cache=False)
            assert list(empty.diff(empty).columns) == list(base.diff(base).columns)

    check("a trace without rows gives every table with the columns it has with rows", empty_tables)

    # ---- errors ----------------------------------------------------------------------------
    def errors():
        with tempfile.TemporaryDirectory() as d:
            raw = gzip.compress(open(bert.replace(".gz", ""), "rb").read() if not bert.endswith(".gz")
                                else gzip.open(bert).read())
            cut = os.path.join(d, "cut.pt.trace.json.gz")
            with open(cut, "wb") as f:
                f.write(raw[: len(raw) // 2])
            try:
                kinetoscope.open(cut, cache=False)
            except kinetoscope.TraceError as e:
                assert e.file == cut and e.reason and "gzip" in e.reason, (e.file, e.reason)
                assert isinstance(e.byte_offset, int) and e.byte_offset > 0, e.byte_offset
                assert str(e).startswith(cut), str(e)
            else:
                raise AssertionError("a truncated gzip opened")
            broken = os.path.join(d, "broken.pt.trace.json")
            with open(broken, "w") as f:
                f.write('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2, "cat": "cpu_op"},\n  {"ph": ')
            try:
                kinetoscope.open(broken, cache=False)
            except kinetoscope.TraceError as e:
                assert e.byte_offset and e.byte_offset > 60, e.byte_offset
            else:
                raise AssertionError("broken JSON opened")
            for bad in (os.path.join(d, "missing.json"), d):
                try:
                    kinetoscope.open(bad, cache=False)
                except kinetoscope.TraceError as e:
                    assert bad in str(e), str(e)
                else:
                    raise AssertionError(f"{bad} opened")
        try:
            kinetoscope.open(bert, rules="improved")
        except ValueError:
            pass
        else:
            raise AssertionError("an unknown rule set was accepted")
        assert issubclass(kinetoscope.TraceError, RuntimeError)

    check("bad input raises TraceError with file, byte offset and reason; bad arguments ValueError", errors)

    def docs():
        import pydoc

        text = pydoc.render_doc(kinetoscope, renderer=pydoc.plaintext)
        for name in ("open(", "class Trace", "class Job", "TraceError", "events(", "operators("):
            assert name in text, name
        stub = open(os.path.join(build, "python", "kinetoscope", "__init__.pyi")).read()
        for name in kinetoscope.__all__:
            assert name in stub, name
        for name in [n for n in dir(kinetoscope.Trace) if not n.startswith("_")]:
            assert f"def {name}(" in stub or f"    {name}:" in stub, f"Trace.{name} missing from the stub"
            assert getattr(kinetoscope.Trace, name).__doc__ or name == "rules", f"Trace.{name} has no docstring"

    check("help(kinetoscope) documents the API, and the type stub names every public member", docs)

    # ---- the README's example ------------------------------------------------------------------
    def readme_example():
        repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        text = open(os.path.join(repo, "README.md"), encoding="utf-8").read()
        marker = "<!-- example: python-api"
        assert marker in text, "the README lost its Python example"
        block = text[text.index(marker):]
        code = block[block.index("```python\n") + len("```python\n"):]
        code = code[:code.index("```")]
        env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
        out = subprocess.run([sys.executable, "-c", code], cwd=repo, env=env, check=True, capture_output=True,
                             text=True).stdout
        assert "aten::" in out and "total" in out, out

    check("the README's Python example runs", readme_example)

    # ---- without pandas ----------------------------------------------------------------------
    def no_pandas():
        code = f"""
import sys, json
sys.modules['pandas'] = None  # import pandas fails
sys.path.insert(0, {os.path.join(build, 'python')!r})
import numpy as np, kinetoscope
t = kinetoscope.open({bert!r}, cache=False)
ops = t.operators()
assert isinstance(ops, dict) and all(isinstance(v, np.ndarray) for v in ops.values()), type(ops)
e = t.events()
assert isinstance(e['name'], np.ndarray) and e['name'].dtype == object
print(json.dumps({{'ops': [ops['name'].tolist(), ops['calls'].tolist()], 'events': len(e['ts']),
                  'names': sorted(set(e['name'].tolist()))[:5]}}))
"""
        out = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                        text=True).stdout)
        t = kinetoscope.open(bert, cache=False)
        ops = t.operators()
        assert out["ops"] == [ops["name"].tolist(), ops["calls"].tolist()]
        assert out["events"] == len(t)
        assert out["names"] == sorted(set(t.events()["name"].astype(str)))[:5]

    check("without pandas: dicts of NumPy arrays with the same numbers", no_pandas)

    print(f"python checks: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
