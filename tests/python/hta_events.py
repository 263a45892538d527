#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Holistic Trace Analysis's trace DataFrame of a job folder, per rank, as JSON
(tests/python/test_hta_peer.py runs it under the HTA venv, requirements/hta.txt).

    .venv-hta/bin/python tests/python/hta_events.py FOLDER [FOLDER...] [-o OUT.json]

For each FOLDER (the trace files of one job, one per rank) it loads the traces with HTA's own
code, `hta.common.trace.Trace(trace_dir=FOLDER)`, then `parse_traces()` and `_align_all_ranks()`:
the DataFrame `TraceAnalysis(trace_dir=FOLDER)` starts from, before its last step
(`_filter_irrelevant_gpu_kernels`, which keeps only the CPU operators of the complete iterations and
their GPU kernels; its counts are reported as `filtered_count`, from a separate TraceAnalysis load).
Prints (or writes to OUT.json):

    {"hta": "0.5.0", "pandas": ..., "python": ..., "folders": [{
        "folder": ..., "seconds": {"parse": s, "trace_analysis": s},
        "min_ts": the one value subtracted from every rank's ts (HTA's Trace.min_ts),
        "ranks": [{"rank": r, "file": name, "rounded": bool, "count": n, "filtered_count": n,
                   "columns": [...], "count_per_name": {...}, "count_per_cat": {...},
                   "events": [[name, cat, ts, dur, pid, tid, stream, correlation, external_id],
                              ...]}]}]}

`events` is sorted; ts and dur are HTA's values (after its rounding and alignment, µs) rounded to
3 decimals; pid and tid as strings (integral numbers without ".0"); stream, correlation and
external_id are HTA's integer columns (-1 when the event's args have none). `rounded` says whether
HTA's parser applied its nanosecond rounding to that file (it decides per file; see
test_hta_peer.py for what that and everything else HTA does to the events means).

HTA's logging goes to stderr at ERROR level; HTA_DISABLE_NS_ROUNDING must be unset (the script
refuses to run otherwise, since the comparison assumes HTA's default).
"""

import argparse
import json
import logging
import math
import os
import sys
import time
import warnings
from collections import Counter


def quiet():
    warnings.filterwarnings('ignore')
    for name in ('hta', 'root'):
        logging.getLogger(name if name != 'root' else None).setLevel(logging.ERROR)


def norm_id(v):
    """pid/tid as a string: integral numbers without a fraction, anything else as str()."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if hasattr(v, 'item'):  # numpy scalar
        return norm_id(v.item())
    return str(v)


def as_int(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return -1
    return int(v)


def num(v):
    v = float(v)
    return round(v, 3) if math.isfinite(v) else None


def load_folder(folder):
    import hta.common.trace_parser as trace_parser
    from hta.common.trace import Trace
    from hta.trace_analysis import TraceAnalysis

    # Observe (not change) HTA's per-file decision to round: trace_parser.round_down_time_stamps
    # rounds only when the file's ts column came out as float64. parse_traces() with one process
    # calls it once per rank, in sorted rank order.
    decisions = []
    original = trace_parser.round_down_time_stamps

    def observed(df):
        decisions.append(str(df['ts'].dtype) == 'float64')
        return original(df)

    trace_parser.round_down_time_stamps = observed
    try:
        t0 = time.monotonic()
        t = Trace(trace_dir=folder)
        t.parse_traces(use_multiprocessing=False)
        t._align_all_ranks()  # load_traces' first step: ts -= min over all ranks of ts
        parse_seconds = time.monotonic() - t0
    finally:
        trace_parser.round_down_time_stamps = original

    # The whole TraceAnalysis load, as a user runs it (multiprocessing, filtering), for the time
    # and the filtered counts.
    t0 = time.monotonic()
    ta = TraceAnalysis(trace_dir=folder)
    analysis_seconds = time.monotonic() - t0

    ranks = sorted(t.traces)
    symbols = t.symbol_table.get_sym_table()
    out = {'folder': os.path.abspath(folder),
           'seconds': {'parse': round(parse_seconds, 3), 'trace_analysis': round(analysis_seconds, 3)},
           'min_ts': num(t.min_ts), 'ranks': []}
    for i, rank in enumerate(ranks):
        df = t.traces[rank]
        cols = list(df.columns)
        names = [symbols[x] for x in df['name']]
        cats = [symbols[x] for x in df['cat']]

        def column(c, conv):
            return [conv(v) for v in df[c]] if c in df.columns else [conv(None)] * len(df)

        events = sorted(zip(names, cats, column('ts', num), column('dur', num),
                            column('pid', norm_id), column('tid', norm_id),
                            column('stream', as_int), column('correlation', as_int),
                            column('external_id', as_int)),
                        key=lambda e: tuple('' if x is None else x for x in e[:2])
                        + tuple(-math.inf if x is None else x for x in e[2:4]) + e[4:6] + e[6:])
        out['ranks'].append({
            'rank': int(rank), 'file': os.path.basename(t.trace_files[rank]),
            'rounded': decisions[i] if i < len(decisions) else None,
            'count': len(df), 'filtered_count': len(ta.t.traces.get(rank, [])),
            'columns': cols,
            'count_per_name': dict(sorted(Counter(names).items())),
            'count_per_cat': dict(sorted(Counter(cats).items())),
            'events': [list(e) for e in events],
        })
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('folders', nargs='+', help='job folders, one trace file per rank')
    ap.add_argument('-o', '--output', help='write the JSON here (default: stdout)')
    args = ap.parse_args()
    if os.environ.get('HTA_DISABLE_NS_ROUNDING'):
        sys.exit('hta_events.py: HTA_DISABLE_NS_ROUNDING is set; unset it (the comparison '
                 'assumes HTA\'s default rounding)')
    quiet()
    try:
        import importlib.metadata
        import hta.common.trace  # noqa: F401
        import pandas
    except ImportError as e:
        sys.exit(f'hta_events.py: cannot import HTA ({e}); install requirements/hta.txt')
    quiet()  # importing hta configures its logger
    result = {'hta': importlib.metadata.version('HolisticTraceAnalysis'), 'pandas': pandas.__version__,
              'python': sys.version.split()[0], 'folders': []}
    for folder in args.folders:
        result['folders'].append(load_folder(folder))
        quiet()
    text = json.dumps(result, separators=(',', ':'))
    if args.output:
        with open(args.output, 'w') as f:
            f.write(text + '\n')
    else:
        sys.stdout.write(text + '\n')
    for f in result['folders']:
        print(f"hta_events.py: {f['folder']}: {len(f['ranks'])} ranks, "
              f"{sum(r['count'] for r in f['ranks'])} events, parse {f['seconds']['parse']} s, "
              f"TraceAnalysis {f['seconds']['trace_analysis']} s", file=sys.stderr)


if __name__ == '__main__':
    main()
