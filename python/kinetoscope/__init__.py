# SPDX-License-Identifier: BSD-3-Clause
"""kinetoscope: PyTorch profiler traces (*.pt.trace.json[.gz]) as DataFrames, and the viewer.

    import kinetoscope
    trace = kinetoscope.open("logs/run1/host_123.1700000000000.pt.trace.json.gz")
    trace.overview()          # the step-time breakdown, one row per step (µs)
    trace.operators()         # the Operator view, by name
    trace.kernels()           # the Kernel view, by name
    trace.events(cat="kernel", start=t0, end=t1)   # every slice, one row each

    job = kinetoscope.open("logs/run1")   # a run folder with several ranks' traces
    job.events()              # every rank's slices, with a "rank" column
    job.distributed()         # communication/computation overlap per worker

Every table equals `kinetoscope analyze PATH --json` on the same file (same engine, same code
path); rules="plugin" gives torch-tb-profiler 0.4.3's numbers instead of kinetoscope's
(docs/kinetoscope-rules.md). Tables are pandas DataFrames when pandas is installed, else dicts of
NumPy arrays. Times are µs as in the trace file, sizes bytes. Errors raise kinetoscope.TraceError
with the engine's diagnostic (file, byte offset, event index, reason).

The engine is C++ (kinetoscope._engine, imported on first use); the package also holds the
TensorBoard plugin (kinetoscope.tensorboard_plugin) behind `tensorboard --logdir`'s "PyTorch
Profiler" tab, and the `kinetoscope` program (`kinetoscope --logdir DIR`) is installed with it.
"""

from __future__ import annotations

import os as _os
from typing import Any, Iterable, Sequence

from ._errors import TraceError

__version__ = "0.1.0"
__all__ = ["open", "Trace", "Job", "TraceError", "__version__"]

_RULES = ("kinetoscope", "plugin")


def _load_engine():
    from . import _engine as engine  # the compiled engine; imported on first use

    return engine


def _cache_dir(cache: bool, cache_dir: str | None) -> str:
    if not cache:
        return ""
    return cache_dir if cache_dir else _load_engine().default_cache_dir()


def _check_rules(rules: str) -> str:
    if rules not in _RULES:
        raise ValueError(f"rules must be 'kinetoscope' or 'plugin' (got {rules!r})")
    return rules


def open(path: str | _os.PathLike, *, worker: str | None = None, span: str | None = None,
         rules: str = "kinetoscope", cache: bool = True, cache_dir: str | None = None,
         max_file_size: int | None = None) -> "Trace | Job":
    """Opens a trace file, or a run folder.

    path: a .pt.trace.json[.gz] file, or a folder holding one run (the files
        tensorboard_trace_handler wrote: worker.span.pt.trace.json[.gz]).
    worker, span: which trace of a run folder (as `kinetoscope analyze --worker/--span`).
        Without worker, a folder whose span has several workers opens as a Job (one Trace per
        worker); with one worker, as that Trace.
    rules: "kinetoscope" (default) or "plugin" (torch-tb-profiler 0.4.3's numbers exactly).
    cache: read the model from the index `kinetoscope --logdir` or `kinetoscope index` left in
        cache_dir (default: the same folder they use) when it is valid; never written.
    max_file_size: refuse traces whose JSON text (after gunzip) is larger (default 16 GiB).
    Raises TraceError (missing path, no trace, unreadable or malformed trace).
    """
    _check_rules(rules)
    path = _os.fspath(path)
    engine = _load_engine()
    options = dict(cache_dir=_cache_dir(cache, cache_dir),
                   max_file_size=engine.default_max_file_size if max_file_size is None else int(max_file_size))
    if _os.path.isdir(path) and worker is None:
        files = engine.discover(path)
        runs = sorted({f[1] for f in files})
        if len(runs) == 1:
            spans = [f[3] for f in files]
            chosen_span = span if span is not None else spans[0]
            workers = [f[2] for f in files if f[3] == chosen_span]
            if len(workers) > 1:
                return Job([Trace(engine.Trace(path, w, chosen_span, **options), rules) for w in workers])
    return Trace(engine.Trace(path, worker or "", span or "", **options), rules)


class Trace:
    """One loaded trace file (see kinetoscope.open). The model stays in memory; each table is
    computed on request."""

    def __init__(self, engine_trace: Any, rules: str = "kinetoscope"):
        self._t = engine_trace
        self.rules = _check_rules(rules)

    def __repr__(self) -> str:
        return f"<kinetoscope.Trace {self.path!r} worker={self.worker!r} span={self.span!r} events={len(self)}>"

    def __len__(self) -> int:
        return self._t.event_count

    path = property(lambda self: self._t.path, doc="The trace file.")
    run = property(lambda self: self._t.run, doc="The run (folder) the file belongs to.")
    worker = property(lambda self: self._t.worker, doc="The worker name (from the file name).")
    span = property(lambda self: self._t.span, doc='The span ("1", "2", ... or "default").')
    rank = property(lambda self: self._t.rank, doc="distributedInfo.rank, or None.")
    load_seconds = property(lambda self: self._t.load_seconds, doc="Seconds the load (or index read) took.")

    def _rules(self, rules: str | None) -> str:
        return self.rules if rules is None else _check_rules(rules)

    def _table(self, view: str, table: str, rules: str | None = None, **kw):
        from ._frames import frame

        return frame(self._t.table(view, table, self._rules(rules), **kw))

    # -- every slice ---------------------------------------------------------------------
    def events(self, cat: str | Iterable[str] | None = None, start: float | None = None,
               end: float | None = None, args: bool = True):
        """Every duration event (ph "X") and memory instant (ph "i"), one row each, in ts order.

        Columns: name, cat, ph, ts, dur (µs as in the file), pid, tid, stream, correlation,
        external_id (-1 where absent; string pids/tids such as "Spans" are -1; stream is the
        GPU stream of kernels, memcpy, memset and GPU annotations: args "stream", else the
        track's), then, when such
        events are selected and args is true, their args: input_dims, input_types, call_stack,
        sequence_nr, fwd_thread_id (operators); device, grid_*, block_*, registers_per_thread,
        shared_memory, blocks_per_sm, occupancy_pct (kernels); memory_device_type,
        memory_device_id, bytes, addr, total_allocated, total_reserved (memory);
        python_id, python_parent_id, python_module_id (Python functions and modules).
        cat: Kineto's category names: cpu_op, user_annotation, gpu_user_annotation, kernel,
            gpu_memcpy, gpu_memset, cuda_runtime, cuda_driver, python_function, python, Trace,
            cpu_instant_event (memory instants), other. One name or several.
        start, end: keep events overlapping [start, end) (µs, the file's clock).
        name, cat, ph and the string args are pandas Categoricals (codes into distinct texts).
        """
        from ._frames import frame

        cats = [cat] if isinstance(cat, str) else list(cat or [])
        cols = self._t.events(cats, None if start is None else float(start),
                              None if end is None else float(end), bool(args))
        return frame(cols["columns"], cols["categorical"],
                     order=["name", "cat", "ph", "ts", "dur", "pid", "tid", "stream", "correlation", "external_id"])

    # -- the views -------------------------------------------------------------------------
    def overview(self, rules: str | None = None):
        """The step-time breakdown: one row per step (name, kernel, memcpy, memset,
        communication, runtime, dataloader, cpu_exec, other, total; µs)."""
        return self._table("overview", "steps", rules)

    def average_step(self, rules: str | None = None) -> dict:
        """The Overview's average step (the same categories, µs)."""
        return self.report("overview", rules)["overview"]["average"]

    def gpus(self, rules: str | None = None):
        """The Overview's GPU summary: one row per GPU (utilization, SM efficiency, occupancy,
        tensor cores %)."""
        return self._table("overview", "gpus", rules)

    def recommendations(self, rules: str | None = None) -> list[str]:
        """The Overview's recommendations (kinetoscope's own ones prefixed "(kinetoscope) ")."""
        o = self.report("overview", rules)["overview"]
        return list(o["recommendations"]) + ["(kinetoscope) " + r for r in o["extra_recommendations"]]

    def operators(self, group_by: str = "name", rules: str | None = None):
        """The Operator view: group_by "name" or "name_and_input_shape" (alias "input_shape")."""
        table = {"name": "operators_by_name", "name_and_input_shape": "operators_by_name_and_input_shape",
                 "input_shape": "operators_by_name_and_input_shape"}.get(group_by)
        if table is None:
            raise ValueError(f"group_by must be 'name' or 'name_and_input_shape' (got {group_by!r})")
        return self._table("operators", table, rules)

    def kernels(self, group_by: str = "name", rules: str | None = None):
        """The Kernel view: group_by "name" or "name_and_operator" (alias "operator")."""
        table = {"name": "kernels_by_name", "name_and_operator": "kernels_by_name_and_operator",
                 "operator": "kernels_by_name_and_operator"}.get(group_by)
        if table is None:
            raise ValueError(f"group_by must be 'name' or 'name_and_operator' (got {group_by!r})")
        return self._table("kernels", table, rules)

    def memory(self, start: float | None = None, end: float | None = None, rules: str | None = None):
        """The Memory view's statistics table per operator and device (bytes, µs); start/end
        (µs from the trace's start, both or neither) restrict it as the view's range selection."""
        if (start is None) != (end is None):
            raise ValueError("memory(): give both start and end, or neither")
        memory_range = None if start is None else (float(start), float(end))
        return self._table("memory", "memory_stats", rules, memory_range=memory_range)

    def memory_curve(self, rules: str | None = None):
        """The Memory view's curve: device, ts (µs from the trace's start), allocated and
        reserved bytes, in the plugin's step shape, not down-sampled."""
        return self._table("memory", "memory_curve", rules)

    def memory_peaks(self, rules: str | None = None):
        """Peak allocated and reserved bytes per device."""
        return self._table("memory", "memory_peaks", rules)

    def modules(self, rules: str | None = None):
        """The Module view's tree, depth first: depth, parent ("A/B" path of names), then the
        module's numbers."""
        return self._table("modules", "modules", rules)

    def distributed(self, what: str = "overlap", rules: str | None = None):
        """The Distributed view of the run this trace belongs to: what="overlap" (computation,
        overlap, communication, other, data transfer and synchronizing µs per worker) or
        "comm_ops" (the communication operations per worker). Raises TraceError when the run
        has no distributed view (the reason is in the message)."""
        table = {"overlap": "distributed_overlap", "comm_ops": "distributed_comm_ops"}.get(what)
        if table is None:
            raise ValueError(f"what must be 'overlap' or 'comm_ops' (got {what!r})")
        return self._table("distributed", table, rules)

    def diff(self, other: "Trace", rules: str | None = None):
        """The Diff view against `other` (this trace is the baseline): one row per operator
        group of the tree, with calls and host/device (self) durations for baseline,
        experimental, delta and delta_pct."""
        from ._frames import frame

        if not isinstance(other, Trace):
            raise TypeError("diff() wants a kinetoscope.Trace")
        return frame(self._t.diff(other._t, self._rules(rules)))

    def report(self, view: str | None = None, rules: str | None = None) -> dict:
        """`kinetoscope analyze PATH --json`'s document (one view, or all when view is None)."""
        return self._t.document(view or "", self._rules(rules))


class Job:
    """The traces of one span of a run, one per worker (rank): see kinetoscope.open."""

    def __init__(self, traces: Sequence[Trace]):
        self.traces = list(traces)
        self.ranks = [t.rank if t.rank is not None else i for i, t in enumerate(self.traces)]

    def __repr__(self) -> str:
        return f"<kinetoscope.Job {len(self.traces)} workers: {[t.worker for t in self.traces]}>"

    def __len__(self) -> int:
        return len(self.traces)

    def __iter__(self):
        return iter(self.traces)

    def trace(self, rank: int) -> Trace:
        """The trace of a rank."""
        return self.traces[self.ranks.index(rank)]

    def _per_rank(self, method: str, *args, **kwargs):
        import numpy as np

        from ._frames import concat

        frames = []
        for rank, t in zip(self.ranks, self.traces):
            f = getattr(t, method)(*args, **kwargs)
            n = len(f) if hasattr(f, "columns") else len(next(iter(f.values()), []))
            worker = np.empty(n, dtype=object)
            worker[:] = t.worker
            lead = {"rank": np.full(n, rank, dtype=np.int64), "worker": worker}
            if hasattr(f, "columns"):  # a DataFrame
                f.insert(0, "worker", lead["worker"])
                f.insert(0, "rank", lead["rank"])
                frames.append(f)
            else:
                frames.append(dict(lead, **f))
        return concat(frames)

    def events(self, cat: str | Iterable[str] | None = None, start: float | None = None,
               end: float | None = None, args: bool = True):
        """Every rank's Trace.events(), with rank and worker columns first."""
        return self._per_rank("events", cat, start, end, args)

    def overview(self, rules: str | None = None):
        """Every rank's step-time breakdown, with rank and worker columns first."""
        return self._per_rank("overview", rules)

    def operators(self, group_by: str = "name", rules: str | None = None):
        """Every rank's Operator view, with rank and worker columns first."""
        return self._per_rank("operators", group_by, rules)

    def kernels(self, group_by: str = "name", rules: str | None = None):
        """Every rank's Kernel view, with rank and worker columns first."""
        return self._per_rank("kernels", group_by, rules)

    def distributed(self, what: str = "overlap", rules: str | None = None):
        """The run's Distributed view (see Trace.distributed)."""
        return self.traces[0].distributed(what, rules)
