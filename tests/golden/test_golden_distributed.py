#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The Distributed view against torch-tb-profiler itself (meson test golden_distributed).

    test_golden_distributed.py --kinetoscope BIN --python VENV_PYTHON --folder DIR [--folder DIR...]
                               [-v]

For every run folder DIR (one or more ranks' *.pt.trace.json[.gz]) it runs

    BIN analyze DIR --json --view distributed --plugin_rules --no_cache
    VENV_PYTHON scripts/golden/plugin_numbers.py --distributed DIR --span SPAN
                                 (the plugin's loader on every worker file of analyze's span)

and compares them, one line per group:

    view                 available, the workers (names, in order), reason "" when available
    WORKER overlap       the "all" bar: computation_us, overlap_us, communication_us, other_us
    WORKER wait          the "all" bar: data_transfer_us, synchronizing_us
    WORKER comm_ops      the op rows: names in order, calls, total/avg size (bytes), total/avg
                         latency and data transfer time (µs)

Tolerances as test_golden_rules.py: times max(1 µs, 0.1 %) (the plugin hands out the bars and the
averages as integers), names, counts and bytes equal. Lines start with `ok` or `FAIL`; the last
line is `distributed checks: N passed, N failed`, and the exit status is 1 when one failed.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PLUGIN_SCRIPT = os.path.join(REPO, 'scripts', 'golden', 'plugin_numbers.py')
sys.path.insert(0, HERE)
from test_golden_rules import Group, RunError, fmt, run_json  # noqa: E402

OVERLAP = ['computation_us', 'overlap_us', 'communication_us', 'other_us']
WAIT = ['data_transfer_us', 'synchronizing_us']
OP_TIMES = ['total_latency_us', 'avg_latency_us', 'data_transfer_us', 'avg_data_transfer_us']
OP_EQUALS = ['calls', 'total_size_bytes', 'avg_size_bytes']


def cmp_view(ref, got):
    g = Group()
    g.equal('available', ref.get('available'), got.get('available'))
    g.equal('workers', [w['worker'] for w in ref.get('workers', [])],
            [w['worker'] for w in got.get('workers', [])])
    if ref.get('available') and got.get('available'):
        g.equal('reason', '', got.get('reason'))
    elif ref.get('reason') or got.get('reason'):
        g.note = f" (reasons: plugin {fmt(ref.get('reason'))}, analyze {fmt(got.get('reason'))})"
    return g


def cmp_bar(ref, got, keys, what):
    g = Group()
    for k in keys:
        g.time(f'{what} {k}', ref.get(k), got.get(k))
    return g


def cmp_ops(ref, got):
    g = Group()
    rn, gn = [r['name'] for r in ref], [r['name'] for r in got]
    g.equal('op names', rn, gn)
    if rn == gn:
        for r, s in zip(ref, got):
            for k in OP_EQUALS:
                g.equal(f"{r['name']} {k}", r.get(k), s.get(k))
            for k in OP_TIMES:
                g.time(f"{r['name']} {k}", r.get(k), s.get(k))
    return g


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--kinetoscope', required=True, help='the kinetoscope binary')
    ap.add_argument('--python', required=True, help='a Python that imports torch_tb_profiler')
    ap.add_argument('--folder', action='append', required=True,
                    help='a run folder (repeat for several)')
    ap.add_argument('-v', '--verbose', action='store_true',
                    help='every mismatch, not the first few')
    args = ap.parse_args()

    passed = failed = 0
    seconds = {'plugin_numbers --distributed': [], 'analyze --view distributed': []}

    def report(label, title, group):
        nonlocal passed, failed
        if group.bad:
            failed += 1
        else:
            passed += 1
        print(f"{'FAIL' if group.bad else 'ok  '}  {label} | {title}: {group.detail(args.verbose)}", flush=True)

    def failure(label, title, text):
        g = Group()
        g.fail(text)
        report(label, title, g)

    for folder in args.folder:
        label = os.path.basename(os.path.normpath(folder))
        if not os.path.isdir(folder):
            failure(label, 'folder', f'{folder}: no such folder')
            continue
        analyze = [args.kinetoscope, 'analyze', folder, '--json', '--view', 'distributed',
                   '--plugin_rules', '--no_cache']
        try:
            a, dt = run_json(analyze)
            seconds['analyze --view distributed'].append(dt)
        except RunError as e:
            failure(label, 'run analyze', str(e))
            continue
        span = a.get('span')
        label = f'{label} (span {span})'
        try:
            p, dt = run_json([args.python, PLUGIN_SCRIPT, '--distributed', folder,
                              '--span', str(span), '--indent', '0'])
            seconds['plugin_numbers --distributed'].append(dt)
        except RunError as e:
            failure(label, 'run plugin_numbers', str(e))
            continue
        if p.get('failed_files'):
            failure(label, 'plugin loading', '; '.join(p['failed_files']))
        pd, ad = p['distributed'], a.get('distributed') or {}
        report(label, 'view', cmp_view(pd, ad))
        got = {w['worker']: w for w in ad.get('workers', [])}
        for w in pd.get('workers', []):
            s = got.get(w['worker'])
            if s is None:
                continue  # counted in `view`
            name = w['worker']
            report(label, f'{name} overlap', cmp_bar(w['overlap'], s.get('overlap') or {},
                                                    OVERLAP, 'overlap'))
            report(label, f'{name} wait', cmp_bar(w['wait'], s.get('wait') or {}, WAIT, 'wait'))
            report(label, f'{name} comm_ops', cmp_ops(w['comm_ops'], s.get('comm_ops') or []))

    for name, ts in seconds.items():
        if ts:
            print(f'time  {name}: {len(ts)} runs, mean {sum(ts) / len(ts):.2f} s, '
                  f'max {max(ts):.2f} s')
    print(f'distributed checks: {passed} passed, {failed} failed')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
