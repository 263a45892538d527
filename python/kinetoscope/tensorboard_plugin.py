# SPDX-License-Identifier: BSD-3-Clause
"""TensorBoard plugin: the "PyTorch Profiler" tab, served by the kinetoscope engine.

`tensorboard --logdir DIR` loads this plugin through the `tensorboard_plugins` entry point
(`KinetoscopeLoader`). The plugin starts one `kinetoscope` server per TensorBoard process, on
127.0.0.1 and a port the system picks, under the path prefix /data/plugin/kinetoscope, and
forwards every request TensorBoard receives under /data/plugin/kinetoscope/ to it. The browser
only ever talks to TensorBoard (no second port to expose through --bind_all, SSH tunnels or
proxies).

Routes (all under TensorBoard's `[--path_prefix]/data/plugin/kinetoscope`):

  /index.js        the tab's ES module (FrontendMetadata.es_module_path): TensorBoard runs its
                   render() in the frame data/plugin_entry.html?name=kinetoscope, whose
                   <base href> is data/plugin/kinetoscope/; render() asks plugin_status, then
                   fills the frame with an iframe on ./index.html (the kinetoscope app), or
                   shows why the engine is not there.
  /plugin_status   JSON {"ok", "state", "error", "pid"}, always 200; starts the engine when
                   needed.
  /*               everything else: forwarded to the engine (GET and HEAD; query string and the
                   request's Accept*/If-* headers; status, headers and body streamed back).

The app itself is /data/plugin/kinetoscope/index.html, not .../kinetoscope/: TensorBoard's
router drops a path's trailing slash before matching, so the plugin's "/*" route never sees
the bare folder URL. The app's URLs are all relative, so index.html works the same.

Flags (TBLoader.define_flags): --kinetoscope_bin PATH, --kinetoscope_max_memory SIZE,
--kinetoscope_plugin_rules. TensorBoard's --reload_interval is passed on; a --logdir_spec
(several folders, or a named group) becomes a temporary folder of symlinks named after the
groups, served with --follow_symlinks.
"""

import atexit
import collections
import concurrent.futures
import http.client
import json
import logging
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.parse

from tensorboard.plugins import base_plugin

logger = logging.getLogger(__name__)

PLUGIN_NAME = "kinetoscope"
TAB_NAME = "PyTorch Profiler"
#: Where TensorBoard serves the plugin's routes (application.DATA_PREFIX + PLUGIN_PREFIX + name),
#: below its own --path_prefix; the engine is started with this --path_prefix so that the paths
#: are forwarded unchanged.
ROUTE_PREFIX = "/data/plugin/" + PLUGIN_NAME
ES_MODULE_ROUTE = "/index.js"
STATUS_ROUTE = "/plugin_status"

#: Trace names is_active() looks for (the engine also reads other names whose content is a trace).
TRACE_SUFFIXES = (".pt.trace.json", ".pt.trace.json.gz")
#: How long a negative is_active() answer is kept before the logdir is walked again.
ACTIVE_RECHECK_S = 5.0
#: Bounds of one is_active() walk (per logdir).
WALK_MAX_DEPTH = 16
WALK_MAX_ENTRIES = 20000
WALK_MAX_SECONDS = 1.0

#: How long the engine may take to print the URL it serves (it prints it before loading).
START_TIMEOUT_S = 60.0
#: After a failed start (or a crash), requests get the error for this long before a new try.
RESTART_BACKOFF_S = 10.0
#: Socket timeout of one forwarded request.
UPSTREAM_TIMEOUT_S = 600.0
CHUNK_BYTES = 64 * 1024

_URL_LINE = re.compile(r"^kinetoscope \S+ at https?://\S*?:(\d+)/")
_SIZE = re.compile(r"\d+(?:[KMGTkmgt](?:[iI]?[bB])?|[bB])?")

#: Request headers passed on to the engine (WSGI environ keys).
_FORWARDED_REQUEST_HEADERS = {
    "HTTP_ACCEPT": "Accept",
    "HTTP_ACCEPT_ENCODING": "Accept-Encoding",
    "HTTP_ACCEPT_LANGUAGE": "Accept-Language",
    "HTTP_IF_NONE_MATCH": "If-None-Match",
    "HTTP_IF_MODIFIED_SINCE": "If-Modified-Since",
    "HTTP_CACHE_CONTROL": "Cache-Control",
    "HTTP_USER_AGENT": "User-Agent",
}
#: Response headers not passed back: hop-by-hop (RFC 9110 7.6.1; WSGI forbids them) and those
#: TensorBoard's server writes itself.
_DROPPED_RESPONSE_HEADERS = frozenset(
    [
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "server",
        "date",
    ]
)

_ENV_BIN = "KINETOSCOPE_BIN"


class EngineError(Exception):
    """The engine is not there to answer; `status` is the HTTP status to answer with."""

    def __init__(self, message, status=503):
        super().__init__(message)
        self.status = status


# ---------------------------------------------------------------------------------------------
# Configuration.


def find_binary(flag_value=""):
    """The kinetoscope program to run: --kinetoscope_bin, else $KINETOSCOPE_BIN, else
    kinetoscope/bin/kinetoscope inside this package, else the one in the scripts folder of this
    Python environment (where the wheel installs it), else `kinetoscope` on PATH. Returns the path; raises EngineError (500) with what was looked at."""
    for value, what in ((flag_value, "--kinetoscope_bin"), (os.environ.get(_ENV_BIN, ""), "$" + _ENV_BIN)):
        if value:
            path = os.path.abspath(os.path.expanduser(value))
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
            raise EngineError(
                "%s is %s: %s" % (what, value, "not an executable file" if os.path.exists(path) else "no such file"),
                status=500,
            )
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "kinetoscope")
    if os.path.isfile(bundled) and os.access(bundled, os.X_OK):
        return bundled
    # The wheel installs the program into the scripts folder of the environment the package is
    # in (a venv's bin/), which is not on PATH when TensorBoard is started as .venv/bin/tensorboard.
    scripts = os.path.join(sysconfig.get_path("scripts"), "kinetoscope")
    if os.path.isfile(scripts) and os.access(scripts, os.X_OK):
        return scripts
    on_path = shutil.which("kinetoscope")
    if on_path:
        return os.path.abspath(on_path)
    raise EngineError(
        "no kinetoscope program found: pass --kinetoscope_bin PATH to tensorboard, or set $%s, "
        "or put kinetoscope on PATH (looked for %s, %s and on PATH)" % (_ENV_BIN, bundled, scripts),
        status=500,
    )


def _parse_logdir_spec(spec):
    """TensorBoard's --logdir_spec as [(group name or None, path)], in the flag's order."""
    out = []
    uri = re.compile(r"[a-zA-Z][0-9a-zA-Z.]*://.*")
    for item in spec.split(","):
        if not item:
            continue
        # The same rules as tensorboard's data_ingester._parse_event_files_spec.
        if uri.match(item) is None and ":" in item and item[0] != "/" and not os.path.splitdrive(item)[0]:
            name, _, path = item.partition(":")
        else:
            name, path = None, item
        out.append((name, path))
    return out


def logdirs_of(flags, context_logdir=None):
    """The local folders TensorBoard reads: [(group name or None, absolute path)], and notes on
    what is left out (remote URIs: the engine reads local files only)."""
    logdir = context_logdir or (getattr(flags, "logdir", None) if flags is not None else None)
    spec = getattr(flags, "logdir_spec", None) if flags is not None else None
    pairs = [(None, logdir)] if logdir else (_parse_logdir_spec(spec) if spec else [])
    dirs, notes = [], []
    for name, path in pairs:
        if "://" in path:
            notes.append("%s is not a local folder (kinetoscope reads local files only)" % path)
            continue
        dirs.append((name, os.path.abspath(os.path.expanduser(path))))
    return dirs, notes


def _reload_interval(flags):
    value = getattr(flags, "reload_interval", None) if flags is not None else None
    if value is None:
        return "5"
    # TensorBoard: 0 loads once, negative never; the engine: 0 scans once.
    return "%g" % max(0.0, float(value))


EngineConfig = collections.namedtuple(
    "EngineConfig", ["bin_flag", "dirs", "notes", "max_memory", "plugin_rules", "reload_interval"]
)


def config_of(context):
    flags = getattr(context, "flags", None)
    dirs, notes = logdirs_of(flags, getattr(context, "logdir", None))
    return EngineConfig(
        bin_flag=getattr(flags, "kinetoscope_bin", "") or "",
        dirs=tuple(dirs),
        notes=tuple(notes),
        max_memory=getattr(flags, "kinetoscope_max_memory", "") or "",
        plugin_rules=bool(getattr(flags, "kinetoscope_plugin_rules", False)),
        reload_interval=_reload_interval(flags),
    )


# ---------------------------------------------------------------------------------------------
# is_active(): a bounded walk for trace files.


def has_trace(root, max_depth=WALK_MAX_DEPTH, max_entries=WALK_MAX_ENTRIES, max_seconds=WALK_MAX_SECONDS):
    """True when a *.pt.trace.json or *.pt.trace.json.gz lies under `root` (breadth first,
    directory symlinks followed once each, at most max_entries entries and max_seconds)."""
    deadline = time.monotonic() + max_seconds
    seen = set()
    todo = collections.deque([(root, 0)])
    entries = 0
    while todo:
        path, depth = todo.popleft()
        try:
            st = os.stat(path)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        try:
            with os.scandir(path) as it:
                for entry in it:
                    entries += 1
                    if entries > max_entries or time.monotonic() > deadline:
                        return False
                    name = entry.name
                    if name.endswith(TRACE_SUFFIXES):
                        try:
                            if entry.is_file():
                                return True
                        except OSError:
                            pass
                    elif depth < max_depth:
                        try:
                            if entry.is_dir():
                                todo.append((entry.path, depth + 1))
                        except OSError:
                            pass
        except OSError:
            continue
    return False


# ---------------------------------------------------------------------------------------------
# The engine process.


def _death_signal_preexec(parent_pid):
    """A preexec_fn for Linux: the child gets SIGKILL when the thread that started it ends
    (prctl PR_SET_PDEATHSIG), so a TensorBoard killed without running atexit (SIGKILL, a
    crash) does not leave the engine behind. None where prctl is not available."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl  # looked up here: no imports or allocations after fork
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = ctypes.c_int(1)
    sigkill = ctypes.c_ulong(int(signal.SIGKILL))
    zero = ctypes.c_ulong(0)

    def preexec():
        prctl(pr_set_pdeathsig, sigkill, zero, zero, zero)
        # The parent may have gone between fork and prctl.
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


class _Spawner:
    """Starts engines from one thread that lives as long as the process: PR_SET_PDEATHSIG fires
    when the *thread* that forked the child ends, and TensorBoard answers every request on a
    thread of its own that ends with the request."""

    def __init__(self):
        self._lock = threading.Lock()
        self._queue = queue.Queue()
        self._thread = None

    def popen(self, argv, **kwargs):
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="kinetoscope-spawner", daemon=True)
                self._thread.start()
        future = concurrent.futures.Future()
        self._queue.put((argv, kwargs, future))
        return future.result()

    def _run(self):
        while True:
            argv, kwargs, future = self._queue.get()
            try:
                future.set_result(subprocess.Popen(argv, **kwargs))
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                future.set_exception(e)


_spawner = _Spawner()


def _describe_exit(code):
    if code is not None and code < 0:
        try:
            return "signal %s" % signal.Signals(-code).name
        except ValueError:
            return "signal %d" % -code
    return "status %s" % code


class _Child:
    """One running engine process and the threads that read its output."""

    def __init__(self, proc):
        self.proc = proc
        self.port = None
        self.started = threading.Event()  # the URL line came, or stdout ended
        self.stderr_tail = collections.deque(maxlen=30)
        self._stderr_done = threading.Event()
        threading.Thread(target=self._read_stdout, name="kinetoscope-stdout", daemon=True).start()
        threading.Thread(target=self._read_stderr, name="kinetoscope-stderr", daemon=True).start()

    def _read_stdout(self):
        try:
            for raw in self.proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip()
                if self.port is None:
                    m = _URL_LINE.match(line)
                    if m:
                        self.port = int(m.group(1))
                        self.started.set()
                if line:
                    logger.info("kinetoscope: %s", line)
        except (OSError, ValueError):
            pass
        finally:
            self.started.set()

    def _read_stderr(self):
        try:
            for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip()
                if line:
                    self.stderr_tail.append(line)
                    logger.info("kinetoscope: %s", line)
        except (OSError, ValueError):
            pass
        finally:
            self._stderr_done.set()

    def alive(self):
        return self.proc.poll() is None

    def stderr_text(self, wait_s=0.0):
        if wait_s:
            self._stderr_done.wait(wait_s)
        return "\n".join(self.stderr_tail)

    def stop(self, grace_s=5.0):
        if self.proc.poll() is None:
            for sig, wait_s in ((signal.SIGTERM, grace_s), (getattr(signal, "SIGKILL", signal.SIGTERM), 5.0)):
                killpg = getattr(os, "killpg", None)
                try:
                    if killpg is None:
                        raise ProcessLookupError
                    killpg(self.proc.pid, sig)  # its own process group (start_new_session)
                except (ProcessLookupError, PermissionError):
                    try:
                        self.proc.send_signal(sig)
                    except OSError:
                        pass
                try:
                    self.proc.wait(wait_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
        for stream in (self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except (OSError, ValueError):
                pass


class Engine:
    """The kinetoscope server of one configuration, started on demand and again after a crash
    (not more often than every RESTART_BACKOFF_S)."""

    def __init__(self, config):
        self.config = config
        self._lock = threading.Lock()
        self._child = None
        self._error = None  # EngineError of the last failed start or of the crash
        self._last_attempt = None
        self._background_lock = threading.Lock()  # not _lock: a start may hold that for long
        self._starting_in_background = False
        self._linkdir = None

    # -- state

    def pid(self):
        child = self._child
        return child.proc.pid if child is not None and child.alive() else None

    def state(self):
        child = self._child
        if child is not None and child.alive() and child.port:
            return "running"
        if self._lock.locked():
            return "starting"
        return "failed" if self._error is not None else "stopped"

    # -- start

    def start_in_background(self):
        """Starts the engine without waiting (is_active(): the traces load while the user
        opens the tab). Errors are kept for the requests that follow."""
        with self._background_lock:
            child = self._child
            if self._starting_in_background or (child is not None and child.alive()):
                return
            self._starting_in_background = True

        def run():
            try:
                self.ensure_started()
            except EngineError as e:
                logger.warning("kinetoscope plugin: %s", e)
            finally:
                self._starting_in_background = False

        threading.Thread(target=run, name="kinetoscope-start", daemon=True).start()

    def ensure_started(self):
        """The port of the running engine; starts it first when needed. Raises EngineError."""
        with self._lock:
            child = self._child
            if child is not None and child.alive() and child.port:
                return child.port
            if child is not None:
                code = child.proc.poll()
                self._error = EngineError(
                    "the kinetoscope engine exited (%s)%s"
                    % (_describe_exit(code), _tail_suffix(child.stderr_text(wait_s=1.0))),
                    status=503,
                )
                logger.warning("kinetoscope plugin: %s", self._error)
                child.stop()
                self._child = None
            # A failed start, or a crash within RESTART_BACKOFF_S of the start, is retried only
            # after the backoff: a broken setup must not start an engine per request.
            now = time.monotonic()
            if self._error is not None and self._last_attempt is not None and now - self._last_attempt < RESTART_BACKOFF_S:
                raise self._error
            self._last_attempt = now
            try:
                port = self._start()
            except EngineError as e:
                self._error = e
                raise
            self._error = None
            return port

    def _argv(self):
        binary = find_binary(self.config.bin_flag)
        dirs = self.config.dirs
        if not dirs:
            notes = "; ".join(self.config.notes)
            raise EngineError(
                "TensorBoard has no local logdir to show" + (" (%s)" % notes if notes else ""), status=500
            )
        argv = [binary]
        if len(dirs) == 1 and dirs[0][0] is None:
            argv += ["--logdir", dirs[0][1]]
        else:
            argv += ["--logdir", self._link_folder(), "--follow_symlinks"]
        argv += [
            "--host", "127.0.0.1",
            "--port", "0",
            "--path_prefix", ROUTE_PREFIX,
            "--reload_interval", self.config.reload_interval,
        ]
        if self.config.max_memory:
            argv += ["--max_memory", self.config.max_memory]
        if self.config.plugin_rules:
            argv += ["--plugin_rules"]
        return argv

    def _link_folder(self):
        """--logdir_spec NAME:DIR,...: one folder holding a symlink per group (NAME -> DIR),
        so the engine's runs are named NAME/<run> as TensorBoard names them."""
        if self._linkdir is not None and os.path.isdir(self._linkdir):
            return self._linkdir
        folder = tempfile.mkdtemp(prefix="kinetoscope-tensorboard-")
        used = set()
        for name, path in self.config.dirs:
            base = name if name else (os.path.basename(os.path.normpath(path)) or "logdir")
            base = re.sub(r"[/\\\x00]", "_", base).strip() or "logdir"
            if base in (".", ".."):
                base = "logdir"
            link, n = base, 2
            while link in used:
                link, n = "%s_%d" % (base, n), n + 1
            used.add(link)
            os.symlink(path, os.path.join(folder, link))
        self._linkdir = folder
        return folder

    def _start(self):
        argv = self._argv()
        kwargs = dict(stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True)
        if os.name == "posix":
            kwargs["start_new_session"] = True  # own process group: stopped with killpg
            preexec = _death_signal_preexec(os.getpid())
            if preexec is not None:
                kwargs["preexec_fn"] = preexec
        logger.info("kinetoscope plugin: starting %s", " ".join(argv))
        try:
            proc = _spawner.popen(argv, **kwargs)
        except OSError as e:
            raise EngineError("could not run %s: %s" % (argv[0], e), status=500)
        child = _Child(proc)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not child.started.wait(0.1):
            if time.monotonic() > deadline:
                child.stop(grace_s=1.0)
                raise EngineError(
                    "the kinetoscope engine printed no URL in %d s%s"
                    % (START_TIMEOUT_S, _tail_suffix(child.stderr_text())),
                    status=503,
                )
        if child.port is None:
            proc.wait(5)
            code = proc.poll()
            text = child.stderr_text(wait_s=2.0)
            child.stop(grace_s=1.0)
            raise EngineError(
                "the kinetoscope engine exited (%s) before serving%s" % (_describe_exit(code), _tail_suffix(text)),
                status=503,
            )
        self._child = child
        logger.info("kinetoscope plugin: engine (pid %d) serving on 127.0.0.1:%d", proc.pid, child.port)
        return child.port

    def note_unreachable(self):
        """A request could not reach the engine: True when it is gone (a restart may help)."""
        child = self._child
        return child is None or not child.alive()

    # -- stop

    def stop(self):
        with self._lock:
            child, self._child = self._child, None
            if child is not None:
                child.stop()
            if self._linkdir is not None:
                shutil.rmtree(self._linkdir, ignore_errors=True)  # symlinks only: not followed
                self._linkdir = None


def _tail_suffix(text):
    return (":\n" + text) if text else ""


_engines = {}
_engines_lock = threading.Lock()


def engine_for(config):
    """The one engine of this TensorBoard process for `config`."""
    with _engines_lock:
        engine = _engines.get(config)
        if engine is None:
            engine = _engines[config] = Engine(config)
        return engine


@atexit.register
def stop_all_engines():
    with _engines_lock:
        engines = list(_engines.values())
    for engine in engines:
        try:
            engine.stop()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass


# ---------------------------------------------------------------------------------------------
# WSGI helpers.


def _start(start_response, status, headers):
    start_response("%d %s" % (status, http.client.responses.get(status, "")), headers)


def _respond_bytes(environ, start_response, status, content_type, body, extra_headers=()):
    headers = [
        ("Content-Type", content_type),
        ("Content-Length", str(len(body))),
        ("X-Content-Type-Options", "nosniff"),
        ("Cache-Control", "no-store"),
    ]
    headers.extend(extra_headers)
    _start(start_response, status, headers)
    return [] if environ.get("REQUEST_METHOD") == "HEAD" else [body]


def _respond_json(environ, start_response, status, obj, extra_headers=()):
    body = json.dumps(obj).encode("utf-8")
    return _respond_bytes(environ, start_response, status, "application/json; charset=utf-8", body, extra_headers)


_ERROR_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>PyTorch Profiler</title></head>
<body><h3>The PyTorch Profiler (kinetoscope) is not available</h3>
<pre>{message}</pre>
<p>Reload this page to try again.</p></body></html>
"""


def _respond_error_page(environ, start_response, status, message):
    import html

    body = _ERROR_PAGE.format(message=html.escape(message)).encode("utf-8")
    return _respond_bytes(
        environ,
        start_response,
        status,
        "text/html; charset=utf-8",
        body,
        [("Content-Security-Policy", "default-src 'none'")],
    )


class _UpstreamBody:
    """The engine's response body, streamed in chunks; closes the connection when done."""

    def __init__(self, conn, resp):
        self._conn = conn
        self._resp = resp

    def __iter__(self):
        while True:
            chunk = self._resp.read(CHUNK_BYTES)
            if not chunk:
                return
            yield chunk

    def close(self):
        try:
            self._resp.close()
        finally:
            self._conn.close()


def _upstream_target(environ):
    """Path and query string of the request as the engine expects them (PATH_INFO has
    TensorBoard's --path_prefix and experiment prefix stripped; it starts with ROUTE_PREFIX)."""
    path = environ.get("PATH_INFO", "")
    quoted = urllib.parse.quote(path.encode("latin-1", "replace"), safe="/-._~!$&'()*+,;=:@")
    query = environ.get("QUERY_STRING", "")
    return quoted + ("?" + query if query else "")


# ---------------------------------------------------------------------------------------------
# The plugin.


_INDEX_JS = r"""// kinetoscope's "PyTorch Profiler" tab (python/kinetoscope/tensorboard_plugin.py).
// TensorBoard imports this module in the frame data/plugin_entry.html?name=kinetoscope, whose
// <base href> is data/plugin/kinetoscope/, and calls render(): the relative URLs below resolve
// under the plugin's routes, which TensorBoard forwards to the kinetoscope engine.
export async function render() {
  const doc = document;
  doc.documentElement.style.height = '100%';
  Object.assign(doc.body.style, { margin: '0', height: '100%', fontFamily: 'Roboto, sans-serif' });
  doc.body.replaceChildren();
  const note = doc.createElement('div');
  note.className = 'kinetoscope-note';
  note.style.padding = '24px';
  note.textContent = 'Starting the kinetoscope engine\u2026';
  doc.body.appendChild(note);
  let status;
  try {
    const res = await fetch('./plugin_status', { cache: 'no-store' });
    status = await res.json();
  } catch (e) {
    status = { ok: false, error: `no answer from TensorBoard (${e})` };
  }
  if (!status || !status.ok) {
    note.replaceChildren();
    const title = doc.createElement('h3');
    title.textContent = 'The PyTorch Profiler (kinetoscope) is not available';
    const text = doc.createElement('pre');
    text.className = 'kinetoscope-error';
    text.style.whiteSpace = 'pre-wrap';
    text.textContent = (status && status.error) || 'unknown error';
    const retry = doc.createElement('button');
    retry.textContent = 'Try again';
    retry.addEventListener('click', () => { render(); });
    note.append(title, text, retry);
    return;
  }
  note.remove();
  const frame = doc.createElement('iframe');
  frame.className = 'kinetoscope-app';
  frame.title = 'PyTorch Profiler';
  frame.src = './index.html';
  Object.assign(frame.style, {
    position: 'fixed', top: '0', left: '0', width: '100%', height: '100%', border: '0', display: 'block',
  });
  doc.body.appendChild(frame);
}
"""


class KinetoscopePlugin(base_plugin.TBPlugin):
    """The "PyTorch Profiler" tab: routes, is_active() and the engine it forwards to."""

    plugin_name = PLUGIN_NAME

    def __init__(self, context):
        self._config = config_of(context)
        self._active = False
        self._checked_at = None
        self._active_lock = threading.Lock()

    # -- TBPlugin

    def get_plugin_apps(self):
        return {
            ES_MODULE_ROUTE: self._serve_index_js,
            STATUS_ROUTE: self._serve_status,
            "/*": self._serve_proxy,
        }

    def frontend_metadata(self):
        # The engine rescans the logdir itself (--reload_interval): TensorBoard's reload button
        # would do nothing for an iframe.
        return base_plugin.FrontendMetadata(es_module_path=ES_MODULE_ROUTE, tab_name=TAB_NAME, disable_reload=True)

    def is_active(self):
        """True once a trace file is under the logdir (walked at most every ACTIVE_RECHECK_S
        seconds while none is, with bounds); then the engine starts in the background."""
        if self._active:
            return True
        with self._active_lock:
            now = time.monotonic()
            if self._checked_at is not None and now - self._checked_at < ACTIVE_RECHECK_S:
                return False
            self._checked_at = now
            found = any(has_trace(path) for _, path in self._config.dirs)
            if found:
                self._active = True
        if found:
            self.engine().start_in_background()
        return found

    def engine(self):
        return engine_for(self._config)

    # -- routes

    def _serve_index_js(self, environ, start_response):
        body = _INDEX_JS.encode("utf-8")
        headers = [
            ("Content-Type", "text/javascript; charset=utf-8"),
            ("Content-Length", str(len(body))),
            ("X-Content-Type-Options", "nosniff"),
            ("Cache-Control", "no-cache"),
        ]
        _start(start_response, 200, headers)
        return [] if environ.get("REQUEST_METHOD") == "HEAD" else [body]

    def _serve_status(self, environ, start_response):
        engine = self.engine()
        try:
            engine.ensure_started()
        except EngineError as e:
            # 200 all the same: the answer is the engine's state (the frame shows the error;
            # a 5xx here would only add a console error). The forwarded routes answer 5xx.
            return _respond_json(
                environ,
                start_response,
                200,
                {"ok": False, "state": engine.state(), "error": str(e), "status": e.status, "pid": None},
            )
        return _respond_json(
            environ, start_response, 200, {"ok": True, "state": engine.state(), "error": None, "pid": engine.pid()}
        )

    def _engine_error(self, environ, start_response, error):
        path = environ.get("PATH_INFO", "")
        message = "kinetoscope plugin: %s" % error
        if path in (ROUTE_PREFIX + "/", ROUTE_PREFIX + "/index.html"):
            return _respond_error_page(environ, start_response, error.status, message)
        return _respond_json(environ, start_response, error.status, {"error": message})

    def _serve_proxy(self, environ, start_response):
        method = environ.get("REQUEST_METHOD", "GET").upper()
        if method not in ("GET", "HEAD"):
            return _respond_json(
                environ, start_response, 405, {"error": "only GET and HEAD are allowed"}, [("Allow", "GET, HEAD")]
            )
        if not environ.get("PATH_INFO", "").startswith(ROUTE_PREFIX + "/"):
            return _respond_json(environ, start_response, 404, {"error": "not found"})
        engine = self.engine()
        target = _upstream_target(environ)
        headers = {name: environ[key] for key, name in _FORWARDED_REQUEST_HEADERS.items() if environ.get(key)}
        if "Accept-Encoding" not in headers:
            headers["Accept-Encoding"] = "identity"  # http.client would not add one; be explicit
        for attempt in (0, 1):
            try:
                port = engine.ensure_started()
            except EngineError as e:
                return self._engine_error(environ, start_response, e)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=UPSTREAM_TIMEOUT_S)
            try:
                conn.request(method, target, headers=headers)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if attempt == 0 and engine.note_unreachable():
                    continue  # it crashed: ensure_started() restarts it (or says why not)
                return self._engine_error(
                    environ, start_response, EngineError("no answer from the kinetoscope engine: %s" % e, status=502)
                )
            break
        out = []
        for name, value in resp.getheaders():
            lower = name.lower()
            if lower in _DROPPED_RESPONSE_HEADERS:
                continue
            if lower == "location" and value.startswith("/"):
                value = environ.get("SCRIPT_NAME", "") + value
            out.append((name, value))
        start_response("%d %s" % (resp.status, resp.reason), out)
        return _UpstreamBody(conn, resp)


class KinetoscopeLoader(base_plugin.TBLoader):
    """Loads KinetoscopePlugin; its flags go to `tensorboard --help` under "kinetoscope"."""

    def define_flags(self, parser):
        group = parser.add_argument_group("kinetoscope")
        group.add_argument(
            "--kinetoscope_bin",
            metavar="PATH",
            type=str,
            default="",
            help="The kinetoscope program that serves the PyTorch Profiler tab (default: "
            "$KINETOSCOPE_BIN, else the one installed with this package, else kinetoscope on PATH).",
        )
        group.add_argument(
            "--kinetoscope_max_memory",
            metavar="SIZE",
            type=str,
            default="",
            help="Passed to kinetoscope --max_memory: keep full trace models within SIZE "
            "(e.g. 400M, 8G; default: half the physical memory).",
        )
        group.add_argument(
            "--kinetoscope_plugin_rules",
            action="store_true",
            default=False,
            help="Passed to kinetoscope --plugin_rules: show torch-tb-profiler 0.4.3's numbers by "
            "default instead of kinetoscope's rules.",
        )

    def fix_flags(self, flags):
        size = getattr(flags, "kinetoscope_max_memory", "") or ""
        if size and (not _SIZE.fullmatch(size) or not any(c != "0" for c in re.sub(r"\D", "", size))):
            raise base_plugin.FlagsError(
                "--kinetoscope_max_memory: expected a size in bytes, optionally with K, M, G or T "
                "(e.g. 8G), got %r" % size
            )

    def load(self, context):
        return KinetoscopePlugin(context)
