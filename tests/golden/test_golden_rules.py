#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Golden numbers for both rule sets, checked by independent scripts (meson test golden_rules).

    test_golden_rules.py --kinetoscope BIN --python VENV_PYTHON --shared DIR [--only TEXT] [-v]

For every committed modern trace (tests/data/gpu/pytorch-2.11-h200/*/, the first file of each
folder: ddp_gloo's rank 0) and every trace of DIR/traces that has a DIR/expected file, it runs

    BIN analyze TRACE --json                     kinetoscope's rules (docs/kinetoscope-rules.md)
    BIN analyze TRACE --json --plugin_rules      torch-tb-profiler's rules (docs/plugin-rules.md)
    scripts/golden/kinetoscope_numbers.py TRACE  the default numbers from the trace JSON alone
    VENV_PYTHON scripts/golden/plugin_numbers.py TRACE   torch-tb-profiler itself

and compares, one line per figure group:

    plugin_numbers      vs DIR/expected           (the harness maps the plugin's payloads right)
    plugin_numbers      vs analyze --plugin_rules
    kinetoscope_numbers vs analyze                (steps, step totals and the roles K1/K4 decide,
                                                   average, tensor-core shares, kernels by name,
                                                   communication present)

Tolerances (DIR/expected/README.md): times max(1 µs, 0.1 %), percentages 0.01, names, counts and
flags equal; recommendations: the same ones fire (the wording may differ). Lines starting with
`info` are printed for reading and not counted. The last line is
`golden checks: N passed, N failed`; the exit status is 1 when one failed.
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PLUGIN_SCRIPT = os.path.join(REPO, 'scripts', 'golden', 'plugin_numbers.py')
KINETOSCOPE_SCRIPT = os.path.join(REPO, 'scripts', 'golden', 'kinetoscope_numbers.py')
MODERN = os.path.join(REPO, 'tests', 'data', 'gpu', 'pytorch-2.11-h200')

ROLES = ['kernel', 'memcpy', 'memset', 'communication', 'runtime', 'dataloader', 'cpu_exec',
         'other']
MAX_DETAILS = 6


# ---------------------------------------------------------------------------------------------
# Tolerances

def time_ok(a, b):
    if a is None or b is None:
        return a is b
    return abs(a - b) <= max(1.0, 0.001 * max(abs(a), abs(b))) + 1e-9


def pct_ok(a, b, tol=0.01):
    if a is None or b is None:
        return a is b
    return abs(a - b) <= tol + 1e-9


def fmt(v):
    if isinstance(v, float):
        return f'{v:.3f}'.rstrip('0').rstrip('.')
    if isinstance(v, str) and len(v) > 60:
        return repr(v[:57] + '...')
    return repr(v) if isinstance(v, str) else str(v)


class Group:
    """One figure group: counts the figures compared and keeps the mismatches."""

    def __init__(self):
        self.figures = 0
        self.bad = []
        self.note = ''

    def check(self, ok, what):
        self.figures += 1
        if not ok:
            self.bad.append(what)

    def time(self, where, a, b):
        self.check(time_ok(a, b), f'{where}: {fmt(a)} vs {fmt(b)}')

    def pct(self, where, a, b, tol=0.01):
        self.check(pct_ok(a, b, tol), f'{where}: {fmt(a)} vs {fmt(b)}')

    def equal(self, where, a, b):
        self.check(a == b, f'{where}: {fmt(a)} vs {fmt(b)}')

    def fail(self, what):
        self.check(False, what)

    def detail(self, verbose=False):
        """"N figures[, K off: the first mismatches]" for a check line."""
        text = f'{self.figures} figures{self.note}'
        if self.bad:
            shown = self.bad if verbose else self.bad[:MAX_DETAILS]
            more = '' if len(shown) == len(self.bad) else f' (+{len(self.bad) - len(shown)} more)'
            text += f', {len(self.bad)} off: ' + '; '.join(shown) + more
        return text


# ---------------------------------------------------------------------------------------------
# Figure groups. `ref` is the left side of "A vs B" (the script or the expected file), `got` the
# right side; fields present in `ref` are compared.

def cmp_steps(ref, got, roles=ROLES):
    g = Group()
    rn, gn = [s['name'] for s in ref], [s['name'] for s in got]
    g.equal('step names', rn, gn)
    if rn == gn:
        for r, s in zip(ref, got):
            g.time(f"step {r['name']} total", r.get('total'), s.get('total'))
            for k in roles:
                if k in r:
                    g.time(f"step {r['name']} {k}", r[k], s.get(k))
    return g


def cmp_average(ref, got, keys=None):
    g = Group()
    for k, v in ref.items():
        if keys is not None and k not in keys:
            continue
        g.time(f'average {k}', v, got.get(k))
    return g


GPU_PCTS = ['utilization_pct', 'sm_efficiency_pct', 'achieved_occupancy_pct', 'tensor_cores_pct']


def cmp_gpus(ref, got, fields=None):
    g = Group()
    rg = {x['id']: x for x in ref}
    gg = {x['id']: x for x in got}
    g.equal('GPU ids', sorted(rg), sorted(gg))
    for gid, r in rg.items():
        s = gg.get(gid)
        if s is None:
            continue
        for k, v in r.items():
            if k == 'id' or (fields is not None and k not in fields):
                continue
            if k not in s:
                g.fail(f'GPU {gid} {k}: {fmt(v)} vs (absent)')
            elif k in GPU_PCTS:
                g.pct(f'GPU {gid} {k}', v, s[k])
            else:
                g.equal(f'GPU {gid} {k}', v, s[k])
    return g


REC_KINDS = [('dataloader', 'input data loading'),
             ('dataparallel', 'instead of DataParallel'),
             ('nccl_backend', 'Nccl backend'),
             ('communication', 'high time cost on communication'),
             ('low_utilization', 'low utilization'),
             ('tensor_cores', 'Tensor Cores eligible'),
             ('memory', 'memory usage is at the limit'),
             ('kernel_launch', 'launch')]


def rec_kind(text):
    for kind, needle in REC_KINDS:
        if needle.lower() in text.lower():
            if kind == 'low_utilization':
                m = re.search(r'GPUs?\s+(.*?)\s+(?:has|have)\s+low', text)
                ids = sorted(int(x) for x in re.findall(r'\d+', m.group(1))) if m else []
                return f'low_utilization{ids}'
            return kind
    return 'other: ' + text[:60]


def cmp_recommendations(ref, got):
    g = Group()
    rk = sorted(rec_kind(t) for t in ref if t.strip() != 'N/A')
    gk = sorted(rec_kind(t) for t in got if t.strip() != 'N/A')
    g.equal('recommendations', rk, gk)
    return g


def keyed(rows, key):
    out = {}
    for r in rows or []:
        out.setdefault(key(r), []).append(r)
    return out


def cmp_rows(ref_rows, got_rows, key, label, times, pcts=(), equals=(), pct_tol=0.01):
    g = Group()
    rk, gk = keyed(ref_rows, key), keyed(got_rows, key)
    missing = [k for k in rk if k not in gk]
    extra = [k for k in gk if k not in rk]
    g.figures += 1
    if missing or extra:
        parts = []
        for keys, side in ((missing, 'left'), (extra, 'right')):
            if keys:
                parts.append(f'{len(keys)} {label} only {side}: '
                             + ', '.join(fmt(str(m)) for m in keys[:3]))
        g.bad.append('; '.join(parts))
    for k, rs in rk.items():
        gs = gk.get(k)
        if gs is None:
            continue
        name = fmt(k if isinstance(k, str) else k[0])
        if len(rs) != len(gs):
            g.fail(f'{name}: {len(rs)} vs {len(gs)} rows')
            continue
        for r, s in zip(rs, gs):
            for f in times:
                if f in r:
                    g.time(f'{name} {f}', r[f], s.get(f))
            for f in pcts:
                if f in r:
                    g.pct(f'{name} {f}', r[f], s.get(f), pct_tol)
            for f in equals:
                if f in r:
                    g.equal(f'{name} {f}', r[f], s.get(f))
    return g


def kernel_name(r):
    return r['name']


def kernel_op_key(r):
    return (r['name'], r.get('operator'), r.get('grid'), r.get('block'),
            str(r.get('registers_per_thread')), str(r.get('shared_memory')))


def plugin_groups(ref, got):
    """The plugin's numbers (plugin_numbers.py) against expected/ or analyze --plugin_rules."""
    ro, go = ref['overview'], got.get('overview', {})
    groups = [
        ('steps', cmp_steps(ro['steps'], go.get('steps', []))),
        ('average', cmp_average(ro['average'], go.get('average') or {})),
        ('gpus', cmp_gpus(ro['gpus'], go.get('gpus', []))),
        ('recommendations', cmp_recommendations(ro['recommendations'],
                                                go.get('recommendations', []))),
        ('operators.by_name', cmp_rows(
            ref['operators']['by_name'], got.get('operators', {}).get('by_name'), kernel_name,
            'operators',
            times=['host_self_us', 'host_total_us', 'device_self_us', 'device_total_us'],
            pcts=['tc_self_pct', 'tc_total_pct'], equals=['calls', 'tc_eligible'])),
        ('operators.by_name_and_input_shape', cmp_rows(
            ref['operators']['by_name_and_input_shape'],
            got.get('operators', {}).get('by_name_and_input_shape'),
            lambda r: (r['name'], r.get('input_shape')), 'operator+shape rows',
            times=['host_self_us', 'host_total_us', 'device_self_us', 'device_total_us'],
            pcts=['tc_self_pct', 'tc_total_pct'], equals=['calls', 'tc_eligible'])),
    ]
    rk, gk = ref.get('kernels'), got.get('kernels')
    if rk or gk:
        rk, gk = rk or {}, gk or {}
        groups += [
            ('kernels.by_name', cmp_rows(
                rk.get('by_name'), gk.get('by_name'), kernel_name, 'kernels',
                times=['total_us', 'mean_us', 'max_us', 'min_us'],
                pcts=['blocks_per_sm', 'occupancy_pct'], equals=['calls', 'tensor_cores_used'])),
            ('kernels.by_name_and_operator', cmp_rows(
                rk.get('by_name_and_operator'), gk.get('by_name_and_operator'), kernel_op_key,
                'kernel+operator rows', times=['total_us', 'mean_us', 'max_us', 'min_us'],
                pcts=['blocks_per_sm', 'occupancy_pct'], equals=['calls', 'tensor_cores_used'])),
        ]
    return groups


COMPARED_ROLES = ['kernel', 'memcpy', 'memset', 'communication', 'dataloader']
DRIVER_ROLES = ['runtime', 'cpu_exec', 'other']


def tc_table_failure(k):
    names = k.get('tc_unclassified') or []
    if names:
        return (f'{len(names)} kernel name(s) missing from '
                f'tests/data/tensor_cores/kernel_names.tsv, e.g. {fmt(names[0])}')
    return None


def kinetoscope_groups(k, a):
    """kinetoscope_numbers.py against analyze (kinetoscope's rules). Returns (groups, infos)."""
    ko, ao = k['overview'], a.get('overview', {})
    groups, infos = [], []
    ks, as_ = ko['steps'], ao.get('steps', [])
    groups.append(('steps (K1: names, totals)', cmp_steps(ks, as_, roles=[])))
    groups.append(('step roles (K1, K4: ' + ', '.join(COMPARED_ROLES) + ')',
                   cmp_steps(ks, as_, roles=COMPARED_ROLES)))
    groups.append(('average', cmp_average(ko['average'], ao.get('average') or {},
                                          keys=['total'] + COMPARED_ROLES)))
    groups.append(('step roles (K2: ' + ', '.join(DRIVER_ROLES) + ', driver calls are Runtime)',
                   cmp_steps(ks, as_, roles=DRIVER_ROLES)))
    groups.append(('average (K2)', cmp_average(ko['average'], ao.get('average') or {}, keys=DRIVER_ROLES)))

    tc_fail = tc_table_failure(k)
    g = cmp_gpus(ko['gpus'], ao.get('gpus', []), fields=['tensor_cores_pct'])
    if tc_fail:
        g.fail(tc_fail)
    groups.append(('GPU tensor cores (K3)', g))

    g = Group()
    view = k['kernels']['tensor_cores_pct']
    ak = a.get('kernels') or {}
    if tc_fail:
        g.fail(tc_fail)
    elif 'tensor_cores_pct' in ak:
        g.pct('Kernel view tensor cores', view, ak['tensor_cores_pct'])
    elif view is not None:
        # analyze --json has no figure for the pie: both sides' shares are computed from their
        # by_name rows, each row's total rounded to whole µs as analyze prints it (a tie .5 may
        # round either way: each one widens the tolerance by what it can move)
        def share(rows):
            total = sum(round(r['total_us']) for r in rows)
            tc = sum(round(r['total_us']) for r in rows if r.get('tensor_cores_used'))
            return (round(100 * tc / total, 2) if total > 0 else 0.0), total
        mine, total = share(k['kernels']['by_name'])
        theirs, _ = share(ak.get('by_name') or [])
        ties = sum(1 for r in k['kernels']['by_name'] if abs(r['total_us'] % 1 - 0.5) < 1e-9)
        tol = 0.01 + (100 * ties / total if total > 0 else 0)
        g.pct('Kernel view tensor cores (from the by_name rows)', mine, theirs, tol)
        g.note = ' (analyze --json has no kernels.tensor_cores_pct: compared from by_name rows)'
    groups.append(('Kernel view tensor cores (K3)', g))

    kb = k['kernels']['by_name']
    g = cmp_rows(kb, ak.get('by_name'), kernel_name, 'kernels', times=['total_us'],
                 equals=['calls'] + ([] if tc_fail else ['tensor_cores_used']))
    groups.append(('kernels.by_name (calls, totals, K3 flag)', g))

    g = Group()
    kc = any(s['communication'] > 0 for s in ks)
    ac = any((s.get('communication') or 0) > 0 for s in as_)
    g.equal('communication time in the steps', kc, ac)
    groups.append(('communication present (K4)', g))
    return groups, infos


# ---------------------------------------------------------------------------------------------
# Running the programs

class RunError(Exception):
    pass


def run_json(cmd, timeout=300):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RunError(f'timed out after {timeout} s: {" ".join(cmd)}')
    dt = time.monotonic() - t0
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        program = ' '.join(os.path.basename(c) for c in cmd[:3])
        raise RunError(f'exit {p.returncode}: {program} ...: ' + ' | '.join(tail))
    try:
        return json.loads(p.stdout), dt
    except json.JSONDecodeError as e:
        raise RunError(f'not JSON ({e}): {" ".join(cmd[:3])}')


def traces(shared):
    """[(label, trace path, expected path or None)]."""
    out = []
    for d in sorted(glob.glob(os.path.join(MODERN, '*', ''))):
        files = sorted(glob.glob(os.path.join(d, '*.pt.trace.json*')))
        if files:
            label = os.path.basename(os.path.dirname(d)) + '/' + os.path.basename(files[0])
            out.append((label.split('.')[0], files[0], None))
    for exp in sorted(glob.glob(os.path.join(shared, 'expected', '*', '*.expected.json'))):
        run = os.path.basename(os.path.dirname(exp))
        name = os.path.basename(exp)[:-len('.expected.json')]
        trace = os.path.join(shared, 'traces', run, name)
        if os.path.isfile(trace):
            out.append((f'{run}/{name.split(".")[0]}', trace, exp))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--kinetoscope', required=True, help='the kinetoscope binary')
    ap.add_argument('--python', required=True, help='a Python that imports torch_tb_profiler')
    ap.add_argument('--shared', required=True,
                    help='the folder with traces/ and expected/ (../shared)')
    ap.add_argument('--only', help='only traces whose label contains this text')
    ap.add_argument('-v', '--verbose', action='store_true',
                    help='every mismatch, not the first few')
    args = ap.parse_args()

    cases = [c for c in traces(args.shared) if not args.only or args.only in c[0]]

    passed = failed = 0
    if not os.path.isdir(os.path.join(args.shared, 'expected')):
        print(f'FAIL  {args.shared}: no expected/ (the third-party traces and their goldens; '
              'meson setup -Dreal_traces=DIR)')
        failed += 1
    seconds = {'plugin_numbers': [], 'kinetoscope_numbers': [], 'analyze': []}

    def report(label, title, group, count=True):
        nonlocal passed, failed
        status = 'PASS' if not group.bad else 'FAIL'
        if not count:
            status = 'info'
        elif group.bad:
            failed += 1
        else:
            passed += 1
        print(f'{status}  {label} | {title}: {group.detail(args.verbose)}', flush=True)

    for label, trace, expected in cases:
        results = {}
        analyze = [args.kinetoscope, 'analyze', trace, '--json', '--no_cache']
        jobs = [('plugin', [args.python, PLUGIN_SCRIPT, trace, '--indent', '0'], 'plugin_numbers'),
                ('kinetoscope', [sys.executable, KINETOSCOPE_SCRIPT, trace, '--indent', '0'],
                 'kinetoscope_numbers'),
                ('analyze_plugin', analyze + ['--plugin_rules'], 'analyze'),
                ('analyze_kinetoscope', analyze, 'analyze')]
        for key, cmd, timer in jobs:
            try:
                results[key], dt = run_json(cmd)
                seconds[timer].append(dt)
            except RunError as e:
                g = Group()
                g.fail(str(e))
                report(label, f'run {key}', g)
        p, k = results.get('plugin'), results.get('kinetoscope')
        ap_, ak = results.get('analyze_plugin'), results.get('analyze_kinetoscope')
        if p is not None and expected:
            with open(expected) as f:
                e = json.load(f)
            for title, g in plugin_groups(e, p):
                report(label, f'plugin_numbers vs expected: {title}', g)
        if p is not None and ap_ is not None:
            for title, g in plugin_groups(p, ap_):
                report(label, f'plugin_numbers vs analyze --plugin_rules: {title}', g)
        if k is not None and ak is not None:
            groups, infos = kinetoscope_groups(k, ak)
            for title, g in groups:
                report(label, f'kinetoscope_numbers vs analyze: {title}', g)
            for title, g in infos:
                report(label, f'kinetoscope_numbers vs analyze: {title}', g, count=False)

    for name, ts in seconds.items():
        if ts:
            print(f'time  {name}: {len(ts)} runs, mean {sum(ts) / len(ts):.2f} s, '
                  f'max {max(ts):.2f} s')
    print(f'golden checks: {passed} passed, {failed} failed')
    return 1 if failed or not cases else 0


if __name__ == '__main__':
    sys.exit(main())
