#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""TensorBoard's "PyTorch Profiler" tab (python/kinetoscope/tensorboard_plugin.py), end to end
(meson test tensorboard_plugin).

    test_tensorboard_plugin.py --kinetoscope BIN [--python VENV_PYTHON] [--only TEXT] [--keep]

Starts real TensorBoard servers (VENV_PYTHON tests/python/run_tensorboard.py: TensorBoard's own
plugins plus KinetoscopeLoader from python/, not installed) on temporary logdirs holding copies
of tests/data/gpu/pytorch-2.11-h200/{resnet18,transformer_bf16_fp8}, and a kinetoscope server of
its own (BIN, same --path_prefix) to compare with. Checks:

  main       plugins_listing (tab name, iframe module path), index.js, plugin_entry.html, one
             engine child with the expected flags; runs, views, workers, spans, overview,
             kernel/table, operation/table, timeline/tracks, index.html and the app bundle answer
             byte for byte as the engine's own server does; HEAD, gzip, ETag/304, the engine's
             404s, 405; a killed engine is started again; SIGKILL of TensorBoard kills the engine
             (PR_SET_PDEATHSIG).
  active     an empty logdir: the tab is inactive and no engine runs; once a trace appears it
             turns active and the engine starts; --kinetoscope_plugin_rules and
             --kinetoscope_max_memory reach it; SIGTERM of TensorBoard stops it (atexit).
  missing    --kinetoscope_bin naming no file: 500 with the reason as JSON (API) and as a page
             (index.html), plugin_status says so, TensorBoard keeps serving.
  spec       --logdir_spec a:DIR,b:DIR under TensorBoard's --path_prefix /tb: runs a/<run>,
             b/<run>, module path under /tb.
  flags      a malformed --kinetoscope_max_memory stops TensorBoard at start with a message.
  entry_point  plain `python -m tensorboard.main` loads the plugin through the
             `tensorboard_plugins` entry point (a .dist-info folder on PYTHONPATH stands for the
             installed package).

The last line is `tensorboard checks: N passed, N failed`; the exit status is 1 when one failed,
77 (skipped) when VENV_PYTHON cannot import tensorboard.
"""

import argparse
import gzip
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
LAUNCHER = os.path.join(HERE, "run_tensorboard.py")
H200 = os.path.join(REPO, "tests", "data", "gpu", "pytorch-2.11-h200")
RUNS = ["resnet18", "transformer_bf16_fp8"]
PREFIX = "/data/plugin/kinetoscope"

passed = 0
failed = []


def check(ok, what):
    global passed
    if ok:
        passed += 1
        print("ok    " + what, flush=True)
    else:
        failed.append(what)
        print("FAIL  " + what, flush=True)
    return ok


# ---------------------------------------------------------------------------------------------
# Processes.


class Server:
    """A child process that prints the URL it serves on stdout (TensorBoard or kinetoscope)."""

    def __init__(self, argv, pattern, env=None, name="server"):
        self.name = name
        self.argv = argv
        self.out = []
        self.err = []
        self.url = None
        self._found = threading.Event()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        threading.Thread(target=self._read, args=(self.proc.stdout, self.out, pattern), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.err, pattern), daemon=True).start()

    def _read(self, stream, sink, pattern):
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip()
            sink.append(line)
            if len(sink) > 2000:
                del sink[:1000]
            m = re.search(pattern, line)
            if m and self.url is None:
                self.url = m.group(1).rstrip("/")
                self._found.set()
        self._found.set()

    def wait_url(self, timeout=90):
        self._found.wait(timeout)
        if self.url is None:
            raise RuntimeError(
                "%s printed no URL (exit %s); stdout: %s; stderr: %s"
                % (self.name, self.proc.poll(), "\n".join(self.out[-20:]), "\n".join(self.err[-40:]))
            )
        return self.url

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=20):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


_servers = []


def start_tensorboard(python, flags, env, name="tensorboard"):
    argv = [python, LAUNCHER] + flags + ["--host", "127.0.0.1", "--port", "0", "--load_fast=false"]
    s = Server(argv, r"TensorBoard \S+ at (http://\S+?)/? ", env=env, name=name)
    _servers.append(s)
    s.wait_url()
    return s


def start_kinetoscope(binary, logdir):
    argv = [binary, "--logdir", logdir, "--host", "127.0.0.1", "--port", "0", "--path_prefix", PREFIX, "--no_cache"]
    s = Server(argv, r"kinetoscope \S+ at (http://\S+?)/? ", name="kinetoscope")
    _servers.append(s)
    s.wait_url()
    return s


def children_named(pid, comm="kinetoscope"):
    """Live (not zombie) processes whose parent is `pid` and whose command name is `comm`."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        if name == comm and int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(entry))
    return out


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return [a.decode() for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def gone(pid, timeout=10.0):
    """True once `pid` no longer runs (absent or a zombie)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open("/proc/%d/stat" % pid) as f:
                stat = f.read()
            if stat[stat.rindex(")") + 2 :].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


def wait_until(fn, timeout, step=0.25):
    deadline = time.monotonic() + timeout
    value = fn()
    while not value and time.monotonic() < deadline:
        time.sleep(step)
        value = fn()
    return value


# ---------------------------------------------------------------------------------------------
# HTTP.


class Reply:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # lower-case names
        self.body = body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "HTTP %d %s %r" % (self.status, self.headers.get("content-type"), self.body[:300])


def request(base, path, method="GET", headers=None, timeout=120):
    """One request without any decoding of the body (gzip stays gzip)."""
    m = re.match(r"http://([^/:]+):(\d+)(.*)", base)
    host, port, root = m.group(1), int(m.group(2)), m.group(3)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, root + path, headers=dict(headers or {}))
        resp = conn.getresponse()
        body = resp.read()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)
    finally:
        conn.close()


def get_json(base, path):
    r = request(base, path)
    if r.status != 200:
        raise RuntimeError("GET %s%s: %r" % (base, path, r))
    return r.json()


def wait_loaded(base, runs, timeout=120):
    def ready():
        try:
            r = get_json(base, PREFIX + "/api/runs")
        except (OSError, RuntimeError, ValueError):
            return None
        return r if not r["loading"] and all(x in r["runs"] for x in runs) else None

    return wait_until(ready, timeout)


# ---------------------------------------------------------------------------------------------
# Scenarios.


def copy_runs(dest, runs):
    os.makedirs(dest, exist_ok=True)
    for run in runs:
        shutil.copytree(os.path.join(H200, run), os.path.join(dest, run))


def scenario_main(opts, tmp, env):
    logdir = os.path.join(tmp, "main")
    copy_runs(logdir, RUNS)
    ref = start_kinetoscope(opts.kinetoscope, logdir)
    tb = start_tensorboard(opts.python, ["--logdir", logdir, "--kinetoscope_bin", opts.kinetoscope], env)
    tb_base, ref_base = tb.url, ref.url.rsplit(PREFIX, 1)[0]
    print("info  tensorboard at %s, reference kinetoscope at %s%s/" % (tb_base, ref_base, PREFIX), flush=True)

    listing = get_json(tb_base, "/data/plugins_listing")
    meta = listing.get("kinetoscope", {})
    check(meta.get("tab_name") == "PyTorch Profiler", "plugins_listing: kinetoscope's tab is \"PyTorch Profiler\" (%r)" % meta.get("tab_name"))
    check(
        meta.get("loading_mechanism") == {"type": "IFRAME", "module_path": PREFIX + "/index.js"},
        "plugins_listing: an IFRAME plugin with module path %s/index.js (%r)" % (PREFIX, meta.get("loading_mechanism")),
    )
    check(meta.get("enabled") is True, "plugins_listing: enabled on a logdir with traces (%r)" % meta.get("enabled"))

    js = request(tb_base, PREFIX + "/index.js")
    check(
        js.status == 200 and js.headers.get("content-type", "").startswith("text/javascript") and b"export async function render" in js.body and b"./index.html" in js.body,
        "index.js: the ES module with render() and the iframe on ./index.html (%r)" % js,
    )
    entry = request(tb_base, "/data/plugin_entry.html?name=kinetoscope")
    check(
        entry.status == 200 and b'<base href="plugin/kinetoscope/"' in entry.body and b'"./index.js"' in entry.body,
        "plugin_entry.html?name=kinetoscope: base href plugin/kinetoscope/ imports ./index.js (%r)" % entry,
    )

    status = get_json(tb_base, PREFIX + "/plugin_status")
    pid = status.get("pid")
    check(status.get("ok") is True and isinstance(pid, int), "plugin_status: ok with the engine's pid (%r)" % status)
    kids = children_named(tb.proc.pid)
    check(kids == [pid], "one kinetoscope child of TensorBoard, the one plugin_status names (%r, %r)" % (kids, pid))
    argv = cmdline(pid)
    want = ["--logdir", logdir, "--host", "127.0.0.1", "--port", "0", "--path_prefix", PREFIX, "--reload_interval", "5"]
    check(argv[1:] == want, "the engine runs %s (%s)" % (" ".join(want), " ".join(argv[1:])))

    a = wait_loaded(tb_base, RUNS)
    b = wait_loaded(ref_base, RUNS)
    check(a is not None and b is not None, "both servers load %s" % ", ".join(RUNS))

    # The same bodies through TensorBoard as from the engine's own server.
    routes = ["/api/runs", "/index.html", "/api/status?x=%20y&z=%C3%A9"]
    for run in RUNS:
        routes.append("/api/views?run=" + run)
        workers = get_json(ref_base, PREFIX + "/api/workers?run=%s&view=Overview" % run)
        routes.append("/api/workers?run=%s&view=Overview" % run)
        worker = workers[0]
        spans = get_json(ref_base, PREFIX + "/api/spans?run=%s&worker=%s" % (run, worker))
        routes.append("/api/spans?run=%s&worker=%s" % (run, worker))
        sel = "run=%s&worker=%s&span=%s" % (run, worker, spans[0])
        for view in ("overview", "kernel/table", "operation/table", "timeline/tracks"):
            routes.append("/api/%s?%s" % (view, sel))
    html = request(ref_base, PREFIX + "/index.html").body.decode()
    bundle = re.findall(r'src="\./([^"]+\.js)"', html)
    routes += ["/" + p for p in bundle]
    check(len(bundle) == 1, "index.html names the app bundle (%r)" % bundle)
    for route in routes:
        mine = request(tb_base, PREFIX + route)
        theirs = request(ref_base, PREFIX + route)
        if route.startswith("/api/status"):
            # Says whether each file's index came from the cache: the engines differ there.
            for r in (mine, theirs):
                body = r.json()
                for f in body.get("files", []):
                    f.pop("index", None)
                    f.pop("load_seconds", None)
                r.body = json.dumps(body, sort_keys=True).encode()
        same = (
            mine.status == theirs.status == 200
            and mine.body == theirs.body
            and mine.headers.get("content-type") == theirs.headers.get("content-type")
            and mine.headers.get("cache-control") == theirs.headers.get("cache-control")
        )
        check(same, "GET %s: as the engine answers (%d bytes; %r vs %r)" % (route, len(theirs.body), mine if not same else "", theirs if not same else ""))

    # HEAD: the headers of GET, no body.
    sel0 = [r for r in routes if r.startswith("/api/kernel/table")][0]
    for route in ("/index.html", sel0):
        head = request(tb_base, PREFIX + route, method="HEAD")
        full = request(tb_base, PREFIX + route)
        check(
            head.status == 200 and head.body == b"" and head.headers.get("content-length") == str(len(full.body))
            and head.headers.get("content-type") == full.headers.get("content-type"),
            "HEAD %s: 200, Content-Length %d, no body (%r)" % (route, len(full.body), head),
        )

    # gzip passes through: Content-Encoding and the compressed bytes, Vary kept.
    big = [r for r in routes if r.startswith("/api/timeline/tracks")][0]
    plain = request(ref_base, PREFIX + big).body
    zipped = request(tb_base, PREFIX + big, headers={"Accept-Encoding": "gzip"})
    try:
        unzipped = gzip.decompress(zipped.body)
    except OSError:
        unzipped = None
    check(
        zipped.headers.get("content-encoding") == "gzip" and unzipped == plain and len(zipped.body) < len(plain)
        and "Accept-Encoding" in zipped.headers.get("vary", ""),
        "gzip: %s comes gzip-encoded through TensorBoard (%d -> %d bytes, Vary %r)" % (big, len(plain), len(zipped.body), zipped.headers.get("vary")),
    )
    asset = request(tb_base, PREFIX + "/" + bundle[0], headers={"Accept-Encoding": "gzip"})
    check(asset.headers.get("content-encoding") == "gzip", "gzip: the app bundle too (%r)" % asset.headers.get("content-encoding"))

    # ETag and 304.
    page = request(tb_base, PREFIX + "/index.html")
    etag = page.headers.get("etag")
    again = request(tb_base, PREFIX + "/index.html", headers={"If-None-Match": etag or '"x"'})
    check(etag is not None and again.status == 304 and again.body == b"", "index.html: ETag %s, If-None-Match gives 304 (%r)" % (etag, again))

    # The engine's errors, as it words them.
    for route in ("/api/no_such_route", "/no_such_file.txt", "/api/overview?run=nope&worker=x&span=1", "/api/views"):
        mine = request(tb_base, PREFIX + route)
        theirs = request(ref_base, PREFIX + route)
        check(
            mine.status == theirs.status and mine.status in (400, 404) and mine.body == theirs.body
            and mine.headers.get("content-type") == theirs.headers.get("content-type"),
            "GET %s: the engine's %d %s (%r)" % (route, theirs.status, theirs.body.decode(), mine),
        )
    post = request(tb_base, PREFIX + "/api/runs", method="POST", headers={"Content-Length": "0"})
    check(post.status == 405 and post.json().get("error") and "GET" in post.headers.get("allow", ""), "POST: 405 with Allow: GET, HEAD (%r)" % post)

    kids = children_named(tb.proc.pid)
    check(kids == [pid], "still one engine after %d requests (%r)" % (len(routes) * 2 + 12, kids))

    # A crashed engine is started again (at once, or after the restart backoff).
    os.kill(pid, signal.SIGKILL)
    check(gone(pid), "the engine is killed")

    def restarted():
        r = request(tb_base, PREFIX + "/plugin_status")
        body = r.json()
        return body if body.get("ok") and body.get("pid") not in (None, pid) else None

    again = wait_until(restarted, 30, step=1.0)
    check(again is not None, "after the engine was killed, a new one serves (%r)" % again)
    if again:
        check(wait_loaded(tb_base, RUNS) is not None, "the new engine loads the runs again")
        pid = again["pid"]

    # TensorBoard killed outright: no atexit, the engine goes through PR_SET_PDEATHSIG.
    tb.stop(signal.SIGKILL)
    check(gone(pid), "SIGKILL of TensorBoard: its engine (pid %d) goes too" % pid)
    ref.stop()


def scenario_active(opts, tmp, env):
    logdir = os.path.join(tmp, "empty")
    os.makedirs(os.path.join(logdir, "not_yet"))
    tb = start_tensorboard(
        opts.python,
        ["--logdir", logdir, "--kinetoscope_bin", opts.kinetoscope, "--kinetoscope_plugin_rules", "--kinetoscope_max_memory", "2G", "--reload_interval", "1"],
        env,
        name="tensorboard (empty logdir)",
    )
    meta = get_json(tb.url, "/data/plugins_listing").get("kinetoscope", {})
    check(meta.get("enabled") is False, "empty logdir: the tab is inactive (%r)" % meta.get("enabled"))
    time.sleep(0.5)
    check(children_named(tb.proc.pid) == [], "empty logdir: no engine started by is_active()")

    shutil.copytree(os.path.join(H200, "resnet18"), os.path.join(logdir, "not_yet", "resnet18"))
    enabled = wait_until(lambda: get_json(tb.url, "/data/plugins_listing")["kinetoscope"]["enabled"], 20, step=0.5)
    check(enabled is True, "a trace appears under the logdir: the tab turns active")
    kids = wait_until(lambda: children_named(tb.proc.pid), 15)
    check(bool(kids) and len(kids) == 1, "is_active() started the engine in the background (%r)" % kids)
    if kids:
        argv = cmdline(kids[0])
        check(
            argv[-3:] == ["--max_memory", "2G", "--plugin_rules"] and "--reload_interval" in argv and argv[argv.index("--reload_interval") + 1] == "1",
            "flags reach the engine: --reload_interval 1 --max_memory 2G --plugin_rules (%s)" % " ".join(argv[1:]),
        )
    runs = wait_loaded(tb.url, ["not_yet/resnet18"])
    check(runs is not None, "the engine serves the new run not_yet/resnet18 (%r)" % (runs and runs["runs"]))
    status = get_json(tb.url, PREFIX + "/api/status")
    check(status.get("rules") == "plugin", "--kinetoscope_plugin_rules: the engine's rule set is plugin (%r)" % status.get("rules"))

    # SIGTERM: TensorBoard exits through atexit, which stops the engine.
    code = tb.stop(signal.SIGTERM)
    check(code is not None and code != -signal.SIGKILL, "SIGTERM: TensorBoard exits (%s)" % code)
    check(all(gone(k) for k in kids), "SIGTERM of TensorBoard: its engine goes too")


def scenario_missing(opts, tmp, env):
    logdir = os.path.join(tmp, "missing")
    copy_runs(logdir, RUNS[:1])
    missing = os.path.join(tmp, "no", "such", "kinetoscope")
    tb = start_tensorboard(opts.python, ["--logdir", logdir, "--kinetoscope_bin", missing], env, name="tensorboard (missing binary)")
    api = request(tb.url, PREFIX + "/api/runs")
    try:
        error = api.json().get("error", "")
    except ValueError:
        error = ""
    check(
        api.status == 500 and api.headers.get("content-type", "").startswith("application/json") and "--kinetoscope_bin" in error and missing in error and "no such file" in error,
        "missing binary: /api/runs answers 500 with the reason (%r)" % api,
    )
    page = request(tb.url, PREFIX + "/index.html")
    check(
        page.status == 500 and page.headers.get("content-type", "").startswith("text/html") and b"not available" in page.body and missing.encode() in page.body,
        "missing binary: index.html is a page that says why (%r)" % page,
    )
    status = request(tb.url, PREFIX + "/plugin_status")
    body = status.json()
    check(
        status.status == 200 and body.get("ok") is False and body.get("status") == 500 and missing in body.get("error", ""),
        "missing binary: plugin_status says why (%r)" % status,
    )
    listing = request(tb.url, "/data/plugins_listing")
    check(tb.alive() and listing.status == 200 and "kinetoscope" in listing.json(), "missing binary: TensorBoard keeps serving (%r)" % listing.status)
    check(children_named(tb.proc.pid) == [], "missing binary: no engine process")
    tb.stop()


def scenario_spec(opts, tmp, env):
    dir_a = os.path.join(tmp, "spec_a")
    dir_b = os.path.join(tmp, "spec_b")
    copy_runs(dir_a, RUNS[:1])
    copy_runs(dir_b, RUNS[1:])
    tb = start_tensorboard(
        opts.python,
        ["--logdir_spec", "a:%s,b:%s" % (dir_a, dir_b), "--path_prefix", "/tb", "--kinetoscope_bin", opts.kinetoscope],
        env,
        name="tensorboard (logdir_spec)",
    )
    base = tb.url if tb.url.endswith("/tb") else tb.url + "/tb"
    meta = get_json(base, "/data/plugins_listing").get("kinetoscope", {})
    check(
        meta.get("enabled") is True and meta.get("loading_mechanism", {}).get("module_path") == "/tb" + PREFIX + "/index.js",
        "--path_prefix /tb: module path /tb%s/index.js, enabled (%r)" % (PREFIX, meta),
    )
    want = ["a/" + RUNS[0], "b/" + RUNS[1]]
    runs = wait_loaded(base, want)
    check(runs is not None and runs["runs"] == want, "--logdir_spec a:DIR,b:DIR: runs %s (%r)" % (want, runs and runs["runs"]))
    kids = children_named(tb.proc.pid)
    argv = cmdline(kids[0]) if kids else []
    check("--follow_symlinks" in argv, "--logdir_spec: the engine reads a folder of symlinks with --follow_symlinks (%s)" % " ".join(argv[1:]))
    linkdir = argv[argv.index("--logdir") + 1] if "--logdir" in argv else None
    entry = request(base, "/data/plugin_entry.html?name=kinetoscope")
    check(entry.status == 200, "--path_prefix /tb: plugin_entry.html answers (%d)" % entry.status)
    tb.stop()
    check(all(gone(k) for k in kids), "--logdir_spec: the engine stops with TensorBoard")
    check(linkdir is not None and not os.path.exists(linkdir), "--logdir_spec: the folder of symlinks is removed at exit (%s)" % linkdir)


def scenario_entry_point(opts, tmp, env):
    """Plain `tensorboard` (python -m tensorboard.main) finds the plugin through the
    `tensorboard_plugins` entry point that the package's pyproject.toml declares, simulated by a
    .dist-info folder on PYTHONPATH."""
    site = os.path.join(tmp, "site")
    info = os.path.join(site, "kinetoscope_entry_point_test-0.0.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: kinetoscope-entry-point-test\nVersion: 0.0.0\n")
    with open(os.path.join(info, "entry_points.txt"), "w") as f:
        f.write("[tensorboard_plugins]\nkinetoscope = kinetoscope.tensorboard_plugin:KinetoscopeLoader\n")
    logdir = os.path.join(tmp, "entry_point")
    copy_runs(logdir, RUNS[:1])
    env = dict(env, PYTHONPATH=os.pathsep.join([site, os.path.join(REPO, "python")]))
    argv = [opts.python, "-m", "tensorboard.main", "--logdir", logdir, "--kinetoscope_bin", opts.kinetoscope,
            "--host", "127.0.0.1", "--port", "0", "--load_fast=false"]
    tb = Server(argv, r"TensorBoard \S+ at (http://\S+?)/? ", env=env, name="tensorboard (entry point)")
    _servers.append(tb)
    tb.wait_url()
    meta = get_json(tb.url, "/data/plugins_listing").get("kinetoscope", {})
    check(meta.get("tab_name") == "PyTorch Profiler" and meta.get("enabled") is True,
          "entry point: plain tensorboard lists the PyTorch Profiler tab (%r)" % meta)
    runs = wait_loaded(tb.url, RUNS[:1])
    check(runs is not None, "entry point: the engine serves %s through TensorBoard" % RUNS[0])
    tb.stop()


def scenario_flags(opts, tmp, env):
    argv = [opts.python, LAUNCHER, "--logdir", tmp, "--port", "0", "--kinetoscope_max_memory", "lots"]
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, env=env)
    check(
        r.returncode != 0 and "--kinetoscope_max_memory" in r.stderr,
        "--kinetoscope_max_memory lots: TensorBoard stops at start and says why (exit %s: %s)" % (r.returncode, r.stderr.strip()[-300:]),
    )


SCENARIOS = [
    ("flags", scenario_flags),
    ("main", scenario_main),
    ("active", scenario_active),
    ("missing", scenario_missing),
    ("spec", scenario_spec),
    ("entry_point", scenario_entry_point),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinetoscope", required=True, help="the kinetoscope program")
    parser.add_argument("--python", default=sys.executable, help="a Python with tensorboard (default: this one)")
    parser.add_argument("--only", default="", help="run the scenarios whose name contains this")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    opts = parser.parse_args()
    opts.kinetoscope = os.path.abspath(opts.kinetoscope)
    if not os.access(opts.kinetoscope, os.X_OK):
        print("test_tensorboard_plugin: no kinetoscope program at %s" % opts.kinetoscope, file=sys.stderr)
        return 2
    probe = subprocess.run([opts.python, "-c", "import tensorboard"], capture_output=True)
    if probe.returncode != 0:
        print("test_tensorboard_plugin: %s cannot import tensorboard: skipped" % opts.python)
        return 77

    tmp = tempfile.mkdtemp(prefix="kinetoscope-tb-test-")
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = os.path.join(tmp, "cache")  # the engines' index cache
    env.pop("KINETOSCOPE_BIN", None)
    env["PYTHONUNBUFFERED"] = "1"
    try:
        for name, fn in SCENARIOS:
            if opts.only and opts.only not in name:
                continue
            print("-- %s" % name, flush=True)
            try:
                fn(opts, tmp, env)
            except Exception as e:  # noqa: BLE001 - one failed check, the others go on
                import traceback

                traceback.print_exc()
                check(False, "%s: %s: %s" % (name, type(e).__name__, e))
            finally:
                for s in _servers:
                    if s.alive():
                        s.stop(signal.SIGKILL)
                        if failed:
                            print("info  %s stderr tail:\n%s" % (s.name, "\n".join(s.err[-15:])))
                _servers.clear()
    finally:
        if opts.keep:
            print("info  kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print("tensorboard checks: %d passed, %d failed" % (passed, len(failed)))
    if failed:
        print("\nfailed:")
        for f in failed:
            print("  - " + f)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
