#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Holistic Trace Analysis against kinetoscope's events() on the multi-rank traces
(meson test hta_peer).

    test_hta_peer.py --hta-python HTA_PY --python PY --traces DIR [--source-root ROOT]
                     [--folder FOLDER ...] [--emulate-events] [-v]

HTA_PY is the venv with HTA (requirements/hta.txt, .venv-hta); PY a Python that imports
kinetoscope (the environment, PYTHONPATH included, is passed on to it). The job folders are the
committed ROOT/tests/data/gpu/pytorch-2.11-h200/ddp_gloo (PyTorch 2.11, gloo, 2 ranks, ns-precision
timestamps) and DIR/two_ranks (HTA's own test data, nccl, 2 ranks, integer timestamps), or those
given with --folder.

For each folder:
  1. HTA_PY tests/python/hta_events.py FOLDER: HTA's trace DataFrame per rank (HTA's own parser:
     hta.common.trace.Trace(trace_dir=FOLDER).parse_traces(), then its rank alignment).
  2. PY runs this file with --dump-events FOLDER: `kinetoscope.open(FOLDER).events()`, a pandas
     DataFrame with one row per trace event and the columns name, cat, ph, ts, dur, pid, tid,
     stream, correlation, external_id and rank.
  3. kinetoscope's rows are put through HTA's normalization (below, rules H1-H6) and compared:
       ranks              the same rank numbers
       min_ts             the alignment offset (H5) equals HTA's Trace.min_ts
       count              per rank, the number of events HTA keeps (H1)
       count per name     per rank, those events counted by name
       (name, ts, dur)    per rank, the multisets equal after H2-H5 (3 decimals)
       ids                per rank, (name, ts, dur) with (pid, tid), with stream, with
                          correlation and with external_id: four multisets equal after H6

HTA's normalization, as hta/common/trace_parser.py and trace.py (0.5.0) do it with the default
ParserConfig and the default JSON backend, in our words:

  H1  Kept events: HTA builds a DataFrame from every traceEvents entry, then drops the rows whose
      "dur" or "cat" is missing (so instant events "i", flow events "s"/"f", counters "C" and
      metadata "M" go: in Kineto traces only complete events "X" have both) and the rows whose cat
      is "Trace" (Kineto's profiler-span event). No other category is dropped: cpu_op,
      user_annotation, python_function, gpu_user_annotation, kernel, gpu_memcpy/memset,
      cuda_runtime and cuda_driver events all stay (the ijson backends would skip
      python_function; the JSON backend, the default, does not; drop_gpu_user_annotation is not
      applied by the parser). The ph column itself is dropped. Here: a row is kept when its ph
      is "X", its dur a number (not None/NaN) and its cat is not None/NaN and not "Trace".
      events() also has the memory instants (ph "i"), with dur 0 where the file has none, so
      "has a dur" is read as "is a complete event": Kineto writes dur on "X" events only, and
      --emulate-events (below) checks that on these files the two select the same events.
  H2  Rounding, decided per file: HTA rounds only when the file's ts column came out as floating
      point in pandas, i.e. when any event of the file has a non-integer ts or none at all
      (metadata events without ts count). hta_events.py records HTA's decision per rank
      ("rounded"); the comparison applies the same one to that rank's rows.
  H3  When rounding: end = ts + dur (as doubles), ts := ceil(ts), end := floor(end),
      dur := end - ts (so an event of less than 1 µs can get dur 0 or -1). Otherwise ts and dur
      stay as in the file.
  H4  Names and categories: HTA stores them as ids into a symbol table shared by the ranks; the
      comparison uses the decoded strings (the exact "name"/"cat" of the file).
  H5  Alignment: one offset for the whole job, min_ts = the smallest ts (after H3) of the kept
      events of all ranks; every rank's ts := ts - min_ts. Not per rank.
  H6  Ids: stream, correlation and external_id are the args "stream", "correlation" and
      "External id" as integers, -1 when absent (a missing value here is None/NaN); pid and tid
      keep the file's values (compared as strings, integral numbers without ".0").
  K1  One difference on purpose: a gpu_user_annotation slice (Kineto writes it on the GPU stream's
      track, pid = device, tid = stream, with no args) has kinetoscope's stream = its track's
      stream, HTA's -1 (it reads args "stream" only). The comparison sets -1 for those rows.
  Ranks: HTA takes each file's rank from the first line of its text that matches
      `"rank":\\s+(\\d+)` (Kineto writes distributedInfo near the top), rank 0 when none (two
      files of one rank: the one listed last by os.listdir wins); the comparison uses
      kinetoscope's rank column as it is.
  Not compared: HTA's later steps of TraceAnalysis (dropping every event but the CPU operators
      of the complete iterations and their GPU kernels), its derived columns (index,
      index_correlation, iteration, end) and the other args columns.

--emulate-events replaces step 2 by the same table computed from the trace JSON with Python's json
(each event's name, cat, ph, ts, dur, pid, tid, args.stream, args.correlation, args["External
id"], and distributedInfo.rank): a check of this harness and of the rules above against HTA itself,
not of kinetoscope.

One line per check ("ok    ..." or "FAIL  ..."; "info  ..." lines are not counted); the last line
is `hta checks: N passed, N failed`, and the exit status is 1 when one failed.
"""

import argparse
import glob
import gzip
import json
import math
import os
import subprocess
import sys
import time
from collections import Counter

from checklist import Checks

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ROOT = os.path.dirname(os.path.dirname(HERE))
COMMITTED = os.path.join('tests', 'data', 'gpu', 'pytorch-2.11-h200', 'ddp_gloo')
SHARED = ('two_ranks',)
COLUMNS = ['name', 'cat', 'ph', 'ts', 'dur', 'pid', 'tid', 'stream', 'correlation', 'external_id',
           'rank']
MAX_DETAILS = 5


# ---------------------------------------------------------------------------------------------
# Values

def missing(v):
    return v is None or (isinstance(v, float) and math.isnan(v))


def norm_id(v):
    """pid/tid as hta_events.py writes them: integral numbers without a fraction, else str()."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def as_int(v):
    return -1 if missing(v) else int(v)


def num(v):
    return round(float(v), 3)


# ---------------------------------------------------------------------------------------------
# The kinetoscope side (--dump-events, run by PY) and its emulation (--emulate-events)

def plain(v):
    if hasattr(v, 'item'):  # numpy scalar
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def dump_events(folder):
    import kinetoscope
    df = kinetoscope.open(folder).events()
    absent = [c for c in COLUMNS if c not in df.columns]
    rows = [[plain(v) for v in row] for row in
            df[[c for c in COLUMNS if c in df.columns]].itertuples(index=False, name=None)]
    return {'columns': [c for c in COLUMNS if c in df.columns], 'absent': absent, 'rows': rows,
            'kinetoscope': getattr(kinetoscope, '__version__', '?')}


def emulate_events(folder):
    rows = []
    for path in sorted(glob.glob(os.path.join(folder, '*.json')) + glob.glob(os.path.join(folder, '*.gz'))):
        opener = gzip.open if path.endswith('.gz') else open
        with opener(path, 'rt', encoding='utf-8') as f:
            trace = json.load(f)
        rank = (trace.get('distributedInfo') or {}).get('rank', 0)
        for e in trace.get('traceEvents', []):
            args = e.get('args') if isinstance(e.get('args'), dict) else {}
            rows.append([e.get('name'), e.get('cat'), e.get('ph'), e.get('ts'), e.get('dur'),
                         e.get('pid'), e.get('tid'), args.get('stream'), args.get('correlation'),
                         args.get('External id'), rank])
    return {'columns': COLUMNS, 'absent': [], 'rows': rows, 'kinetoscope': 'emulated'}


# ---------------------------------------------------------------------------------------------
# HTA's normalization (H1-H6 in the docstring) applied to kinetoscope's rows

def normalize(table, rounded_by_rank):
    """{rank: [(name, cat, ts, dur, pid, tid, stream, correlation, external_id)]}, and min_ts."""
    col = {c: i for i, c in enumerate(table['columns'])}

    def get(row, c):
        return row[col[c]] if c in col else None

    kept = {}
    for row in table['rows']:
        cat, dur = get(row, 'cat'), get(row, 'dur')
        if missing(dur) or missing(cat) or cat == 'Trace':  # H1
            continue
        if 'ph' in col and get(row, 'ph') != 'X':  # H1: instants have dur 0 in events()
            continue
        rank = as_int(get(row, 'rank')) if 'rank' in col else 0
        ts = get(row, 'ts')
        if missing(ts):
            continue  # HTA: such a row's dur becomes NaN in H3, and H1 drops it
        ts, dur = float(ts), float(dur)
        if rounded_by_rank.get(rank, True):  # H2, H3
            end = ts + dur
            ts = float(math.ceil(ts))
            dur = float(math.floor(end)) - ts
        kept.setdefault(rank, []).append([get(row, 'name'), cat, ts, dur,
                                          norm_id(plain(get(row, 'pid'))),
                                          norm_id(plain(get(row, 'tid'))),
                                          -1 if cat == 'gpu_user_annotation' else as_int(get(row, 'stream')),  # H6, K1
                                          as_int(get(row, 'correlation')),
                                          as_int(get(row, 'external_id'))])
    all_ts = [e[2] for evs in kept.values() for e in evs]
    min_ts = min(all_ts) if all_ts else None  # H5
    for evs in kept.values():
        for e in evs:
            e[2] = num(e[2] - min_ts)
            e[3] = num(e[3])
    return {r: [tuple(e) for e in evs] for r, evs in kept.items()}, min_ts


# ---------------------------------------------------------------------------------------------
# Checks

def multiset_diff(ref, got, verbose):
    """'' when equal, else a short description of what differs."""
    a, b = Counter(ref), Counter(got)
    only_ref, only_got = a - b, b - a
    if not only_ref and not only_got:
        return ''
    n = None if verbose else MAX_DETAILS
    parts = []
    if only_ref:
        parts.append(f'{sum(only_ref.values())} only in HTA, e.g. '
                     + '; '.join(map(repr, sorted(only_ref.elements(), key=repr)[:n])))
    if only_got:
        parts.append(f'{sum(only_got.values())} only in kinetoscope, e.g. '
                     + '; '.join(map(repr, sorted(only_got.elements(), key=repr)[:n])))
    return ' | '.join(parts)


def run_json(cmd, timeout, env=None):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None, f'timed out after {timeout} s', timeout, ''
    except OSError as e:
        return None, str(e), time.monotonic() - t0, ''
    dt = time.monotonic() - t0
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-4:]
        return None, f'exit {p.returncode}: ' + ' | '.join(tail), dt, p.stderr
    try:
        return json.loads(p.stdout), None, dt, p.stderr
    except json.JSONDecodeError as e:
        return None, f'not JSON ({e})', dt, p.stderr


def compare_folder(c, args, folder, label):
    if not c.check(os.path.isdir(folder), f'{label} | the folder exists ({folder})'):
        return
    hta, err, dt, _ = run_json([args.hta_python, os.path.join(HERE, 'hta_events.py'), folder],
                               timeout=600)
    if not c.check(hta is not None and len(hta.get('folders', [])) == 1,
                   f'{label} | HTA {"" if hta is None else hta["hta"]} parses it '
                   f'({err or "%.1f s in all" % dt})'):
        return
    h = hta['folders'][0]
    print(f"info  {label}: HTA {hta['hta']} (pandas {hta['pandas']}): parse "
          f"{h['seconds']['parse']} s, TraceAnalysis {h['seconds']['trace_analysis']} s, ranks "
          + ', '.join(f"{r['rank']}={r['file']} ({r['count']} events, rounded {r['rounded']})"
                      for r in h['ranks']), flush=True)

    if args.emulate_events:
        k, err = emulate_events(folder), None
        what = 'the events table emulated from the JSON (--emulate-events)'
    else:
        env = dict(os.environ)
        k, err, dt, _ = run_json([args.python, os.path.abspath(__file__), '--dump-events', folder],
                                 timeout=600, env=env)
        what = f'kinetoscope.open(folder).events() ({err or "%.1f s" % dt})'
    if not c.check(k is not None, f'{label} | {what}'):
        return
    c.check(not k['absent'], f'{label} | events() has the columns {", ".join(COLUMNS)}'
            f'{" (missing: " + ", ".join(k["absent"]) + ")" if k["absent"] else ""}')

    rounded = {r['rank']: r['rounded'] for r in h['ranks']}
    mine, min_ts = normalize(k, rounded)
    hta_ranks = sorted(r['rank'] for r in h['ranks'])
    c.check(sorted(mine) == hta_ranks, f'{label} | ranks {sorted(mine)} vs HTA {hta_ranks}')
    c.check(min_ts is not None and h['min_ts'] is not None and num(min_ts) == h['min_ts'],
            f'{label} | alignment offset (H5): {min_ts} vs HTA min_ts {h["min_ts"]}')
    for r in h['ranks']:
        rank = r['rank']
        evs = mine.get(rank, [])
        where = f'{label} | rank {rank}'
        c.check(len(evs) == r['count'], f'{where}: {len(evs)} events kept (H1) vs HTA {r["count"]}')
        names = dict(Counter(e[0] for e in evs))
        bad = sorted(n for n in set(names) | set(r['count_per_name'])
                     if names.get(n, 0) != r['count_per_name'].get(n, 0))
        shown = bad if args.verbose else bad[:MAX_DETAILS]
        c.check(not bad, f'{where}: count per name, {len(r["count_per_name"])} names'
                + (f', {len(bad)} differ: ' + '; '.join(
                    f'{n!r} {names.get(n, 0)} vs HTA {r["count_per_name"].get(n, 0)}' for n in shown)
                   if bad else ''))
        ref3 = [(e[0], e[2], e[3]) for e in r['events']]
        got3 = [(e[0], e[2], e[3]) for e in evs]
        diff = multiset_diff(ref3, got3, args.verbose)
        c.check(not diff, f'{where}: (name, ts, dur) multiset of {len(ref3)} events after H2-H5'
                + (': ' + diff if diff else ''))
        # H6, one check per id column (events are [name, cat, ts, dur, pid, tid, stream,
        # correlation, external_id] on both sides)
        for title, idx in (('pid, tid', (4, 5)), ('stream', (6,)), ('correlation', (7,)),
                           ('external_id', (8,))):
            refi = [(e[0], e[2], e[3]) + tuple(e[i] for i in idx) for e in r['events']]
            goti = [(e[0], e[2], e[3]) + tuple(e[i] for i in idx) for e in evs]
            diff = multiset_diff(refi, goti, args.verbose)
            c.check(not diff, f'{where}: (name, ts, dur, {title}) multiset after H6'
                    + (': ' + diff if diff else ''))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--hta-python', help='a Python that imports hta (.venv-hta/bin/python)')
    ap.add_argument('--python', help='a Python that imports kinetoscope (env passed through)')
    ap.add_argument('--traces', help='the third-party traces (../shared/traces)')
    ap.add_argument('--source-root', default=DEFAULT_ROOT, help='the repository (default: %(default)s)')
    ap.add_argument('--folder', action='append', default=[],
                    help='a job folder to compare instead of the default ones (repeatable)')
    ap.add_argument('--emulate-events', action='store_true',
                    help='the events table from the JSON instead of kinetoscope (checks the harness)')
    ap.add_argument('-v', '--verbose', action='store_true', help='every difference')
    ap.add_argument('--dump-events', metavar='FOLDER', help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.dump_events:  # the child mode, under PY
        json.dump(dump_events(args.dump_events), sys.stdout, separators=(',', ':'))
        sys.stdout.write('\n')
        return 0
    if not args.hta_python:
        ap.error('--hta-python is required')
    if not args.python and not args.emulate_events:
        ap.error('--python is required (or --emulate-events)')
    if args.folder:
        folders = [(os.path.basename(os.path.normpath(f)), os.path.abspath(f)) for f in args.folder]
    else:
        if not args.traces:
            ap.error('--traces is required (or --folder)')
        folders = [('ddp_gloo (committed)', os.path.join(os.path.abspath(args.source_root), COMMITTED))]
        folders += [(name, os.path.join(os.path.abspath(args.traces), name)) for name in SHARED]

    c = Checks()
    for label, folder in folders:
        try:
            compare_folder(c, args, folder, label)
        except Exception as e:  # noqa: BLE001 - one failed check, the other folders go on
            import traceback
            traceback.print_exc()
            c.check(False, f'{label} | {type(e).__name__}: {e}')
    print(f'hta checks: {c.passed} passed, {len(c.failed)} failed')
    return 1 if c.failed else 0


if __name__ == '__main__':
    sys.exit(main())
