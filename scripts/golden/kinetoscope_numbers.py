#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Kinetoscope's default numbers (docs/kinetoscope-rules.md) for one trace, from its JSON alone.

    kinetoscope_numbers.py TRACE [--tc-table FILE] [--indent N]

An independent second computation of what `kinetoscope analyze --json` (kinetoscope's rules, the
default) prints, for the figures the rules K1-K4 decide, written from the two rule pages only:
docs/kinetoscope-rules.md (K1...K6) and, where that page is silent, docs/plugin-rules.md
(sections quoted as "plugin-rules: <section>"). Python's json and gzip, nothing else: no pandas,
no torch_tb_profiler, no code of kinetoscope.

Prints JSON with the keys of `analyze --json`:

    overview.steps[]    name, total and the role times (µs) of every kept step (K1, plugin-rules:
                        Steps, Step extension, Tail steps, Step time breakdown)
    overview.average    the mean of each of those over the steps
    overview.gpus[]     id, tensor_cores_pct per GPU (K3)
    overview.has_communication   whether the profile has communication time (K4)
    kernels.by_name[]   name, calls, total_us, tensor_cores_used over every kernel (plugin-rules:
                        Kernel view; K3 for the flag)
    kernels.tensor_cores_pct     the Kernel view's "Using Tensor Cores" share (K3)

Tensor cores: the script does not classify kernel names itself. It reads the hand-made table
tests/data/tensor_cores/kernel_names.tsv (`tc<TAB>name` or `no<TAB>name`, `#` comments), the
ground truth the C++ classifier is tested against; a kernel name missing from it is listed under
`tc_unclassified` and the figures that need it are left out (null).

`cuda_driver` calls are launchers like runtime calls (K2): they link their kernels and take the
Runtime role of the step breakdown.
"""

import argparse
import gzip
import json
import os
import re
import sys
import time
from collections import defaultdict

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_TC_TABLE = os.path.join(REPO, 'tests', 'data', 'tensor_cores', 'kernel_names.tsv')


# ---------------------------------------------------------------------------------------------
# Reading the trace (plugin-rules: Discovery "Loading", Event categories)

def load_trace(path):
    """The whole file, gunzipped for .gz; a bare JSON array is a list of events. Like the plugin,
    a second try allows control characters in strings, a third quotes bare N/A tokens."""
    with open(path, 'rb') as f:
        raw = f.read()
    if path.endswith('.gz'):
        raw = gzip.decompress(raw)
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError:
        try:
            doc = json.loads(raw, strict=False)
        except json.JSONDecodeError:
            doc = json.loads(re.sub(r'(?<!")N/A(?!")', '"N/A"', raw.decode('utf-8')), strict=False)
    if isinstance(doc, list):
        doc = {'traceEvents': doc}
    return doc


HOST_OP_CATS = {'cpu_op', 'operator'}
HOST_ANNOTATION_CATS = {'user_annotation'}
KERNEL_CATS = {'kernel'}
MEMCPY_CATS = {'memcpy', 'gpu_memcpy'}
MEMSET_CATS = {'memset', 'gpu_memset'}
DRIVER_CATS = {'cuda_driver'}


def is_runtime_cat(cat):
    """plugin-rules: Event categories: `cuda_runtime`/`runtime` and the other `*_runtime`."""
    return cat == 'runtime' or cat.endswith('_runtime')


def external_id(e):
    a = e.get('args') or {}
    v = a.get('external id')
    return a.get('External id') if v is None else v


def correlation(e):
    return (e.get('args') or {}).get('correlation')


class Trace:
    """The complete events (`ph: "X"`) by the role their category gives them, each list in `ts`
    order (plugin-rules: Operator tree, 1: events are visited in `ts` order)."""

    def __init__(self, doc):
        self.host_ops = []          # cpu_op / Operator
        self.host_annotations = []  # user_annotation (K1: gpu_user_annotation is not here)
        self.python = []            # legacy `python` events
        self.runtimes = []          # *_runtime
        self.drivers = []           # cuda_driver (K2)
        self.kernels = []
        self.memcpys = []
        self.memsets = []
        self.gpu_annotations = 0    # counted only, for the notes
        for e in doc.get('traceEvents') or []:
            if not isinstance(e, dict) or e.get('ph') != 'X':
                continue
            cat = str(e.get('cat') or '').lower()
            if 'ts' not in e or e.get('dur') is None:
                continue
            if cat in HOST_OP_CATS:
                self.host_ops.append(e)
            elif cat in HOST_ANNOTATION_CATS:
                self.host_annotations.append(e)
            elif cat == 'gpu_user_annotation':
                self.gpu_annotations += 1
            elif cat == 'python':
                self.python.append(e)
            elif is_runtime_cat(cat):
                self.runtimes.append(e)
            elif cat in DRIVER_CATS:
                self.drivers.append(e)
            elif cat in KERNEL_CATS:
                self.kernels.append(e)
            elif cat in MEMCPY_CATS:
                self.memcpys.append(e)
            elif cat in MEMSET_CATS:
                self.memsets.append(e)
        for lst in (self.host_ops, self.host_annotations, self.python, self.runtimes, self.drivers,
                    self.kernels, self.memcpys, self.memsets):
            lst.sort(key=lambda e: e['ts'])

    def host_events(self):
        """Operators and annotations of the host, in `ts` order."""
        return sorted(self.host_ops + self.host_annotations, key=lambda e: e['ts'])

    def device_events(self):
        return self.kernels + self.memcpys + self.memsets


def end(e):
    return e['ts'] + e['dur']


# ---------------------------------------------------------------------------------------------
# Interval lists: sorted, disjoint, half-open [start, end) (plugin-rules: introduction)

def merge(ranges):
    out = []
    for s, e in sorted(ranges):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def intersect(a, b):
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a, b):
    out, j = [], 0
    for s, e in a:
        while j < len(b) and b[j][1] <= s:
            j += 1
        k, cur = j, s
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def length(ranges):
    return sum(e - s for s, e in ranges)


# ---------------------------------------------------------------------------------------------
# K1 Steps come from the host

STEP_RE = re.compile(r'^ProfilerStep#(\d+)')


def host_steps(tr):
    """K1: a `ProfilerStep#N` is a step when it is a host event (`cpu_op`, `user_annotation`); the
    `gpu_user_annotation` copy Kineto writes since PyTorch 2.3 is ignored (Trace leaves it out).
    plugin-rules: Steps: one step per event in time order, named N; without any, one step `0` over
    the host range (the plugin's host range: operators, legacy `python` events and steps)."""
    steps, names = [], []
    for e in tr.host_events():
        m = STEP_RE.match(e.get('name') or '')
        if m:
            steps.append((e['ts'], end(e)))
            names.append(str(int(m.group(1))))
    if not steps:
        host = tr.host_ops + tr.python
        if host:
            steps.append((min(e['ts'] for e in host), max(end(e) for e in host)))
        else:
            steps.append((0.0, 0.0))
        names.append('0')
    return steps, names


def launchers(tr):
    """K2: `cuda_driver` launches link their kernels like runtime calls: the launchers are the
    runtimes and the driver calls. Each with the device nodes (kernels, memcpys, memsets) that
    carry its `correlation` (plugin-rules: Operator tree, 1)."""
    by_corr = defaultdict(list)
    for d in tr.device_events():
        c = correlation(d)
        if c is not None:
            by_corr[c].append(d)
    out = []
    for r in tr.runtimes + tr.drivers:
        c = correlation(r)
        out.append((r, by_corr.get(c, []) if c is not None else []))
    return out


def extend_steps(tr, steps, names):
    """plugin-rules: Step extension and Tail steps (Q17).

    Each step is widened to the GPU work launched by the launchers that lie inside it (start and
    end within the step): it ends at the latest end of those device nodes, and starts no earlier
    than the end of the previous step, or, for the first step, than the end of unmatched GPU work
    that ended before the first step's GPU work. With matched GPU work and two or more steps,
    steps after the last one with device work are dropped, and that one too when it has fewer than
    80 % of the previous step's device nodes. Returns (steps, names, notes)."""
    INF = float('inf')
    rts = sorted(launchers(tr), key=lambda x: x[0]['ts'])
    n = len(steps)
    dev = [(INF, -INF)] * n
    cnt = [0] * n
    matched = set()
    i = j = 0
    lo, hi = INF, -INF
    # a two-way merge of launchers and steps, the plugin's walk (event_parser.py
    # _find_device_steps): a launcher starting before the step or crossing its end is skipped
    while i < n and j < len(rts):
        s, e = steps[i]
        r, nodes = rts[j]
        if r['ts'] < s:
            j += 1
        elif end(r) <= e:
            for d in nodes:
                lo, hi = min(lo, d['ts']), max(hi, end(d))
                matched.add(id(d))
                cnt[i] += 1
            j += 1
        elif r['ts'] < e:
            j += 1
        else:
            dev[i] = (lo, hi)
            i += 1
            lo, hi = INF, -INF
    while i < n:
        dev[i] = (lo, hi)
        lo, hi = INF, -INF
        i += 1

    notes = []
    if not matched:
        return list(steps), list(names), notes
    prev_end = steps[0][0]
    if dev[0][0] != INF:
        for d in tr.device_events():
            if id(d) not in matched and end(d) < dev[0][0]:
                prev_end = max(prev_end, end(d))
    out = []
    for k in range(n):
        start = max(prev_end, steps[k][0])
        stop = steps[k][1]
        if dev[k][0] == INF:
            stop = max(stop, start)
        else:
            stop = max(stop, dev[k][1])
            if stop < start:
                stop = start
        out.append((start, stop))
        prev_end = stop

    keep = n
    if n > 1:
        last = n - 1
        while last >= 0 and cnt[last] == 0:
            last -= 1
        if last >= 0:
            keep = last + 1
            if last > 0 and cnt[last - 1] * 0.8 > cnt[last]:
                keep = last
    if keep < n:
        notes.append(f'tail steps dropped: {names[keep:]} (device nodes per step {cnt})')
    return out[:keep], list(names[:keep]), notes


# ---------------------------------------------------------------------------------------------
# K4 Communication

COMM_BACKENDS = ('nccl', 'gloo', 'mpi', 'ucc', 'xccl', 'hccl')
COMM_OP_RE = re.compile(r'^(?:' + '|'.join(COMM_BACKENDS) + r'):.+')
NCCL_KERNEL_RE = re.compile(r'\b(?:ncclKernel|ncclDevKernel)_')


def communication_ops(tr):
    """K4: a host operator or annotation whose name is `<backend>:<anything>` (nccl, gloo, mpi,
    ucc, xccl, hccl) is communication. Host only (K1: GPU annotations take no part)."""
    return [e for e in tr.host_events() if COMM_OP_RE.match(e.get('name') or '')]


def communication_kernels(tr, comm_ops):
    """K4: the kernels a communication op launched, and every kernel named like NCCL/RCCL's
    (`ncclKernel_*`, `ncclDevKernel_*`) even when no host op claims it.

    "Launched by" the op: the kernel carries the op's `External id` (the plugin's link,
    plugin-rules: Role ranges), or its launcher (K2: runtime or driver call, by `correlation`) was
    called on the op's thread while the op ran. Returns the set of id() of those kernels, and how
    many only the second test found."""
    comm_ext = {external_id(o) for o in comm_ops if external_id(o) is not None}
    spans = defaultdict(list)
    for o in comm_ops:
        spans[(o.get('pid'), o.get('tid'))].append((o['ts'], end(o)))
    launcher_of = {}
    for r in tr.runtimes + tr.drivers:
        c = correlation(r)
        if c is not None:
            launcher_of[c] = r
    out, by_time_only = set(), 0
    for k in tr.kernels:
        if NCCL_KERNEL_RE.search(k.get('name') or ''):
            out.add(id(k))
            continue
        if external_id(k) in comm_ext:
            out.add(id(k))
            continue
        r = launcher_of.get(correlation(k))
        if r is not None:
            t = r['ts']
            if any(s <= t <= e for s, e in spans.get((r.get('pid'), r.get('tid')), ())):
                out.add(id(k))
                by_time_only += 1
    return out, by_time_only


# ---------------------------------------------------------------------------------------------
# Step time breakdown (plugin-rules: Role ranges, Step time breakdown; K1, K4)

ROLES = ['kernel', 'memcpy', 'memset', 'communication', 'runtime', 'dataloader', 'cpu_exec']


def is_dataloader(name):
    """plugin-rules: Event categories: `enumerate(DataLoader)#….__next__` and
    `enumerate(DataPipe)#…` are data loading."""
    return (name.startswith('enumerate(DataLoader)#') and name.endswith('.__next__')) \
        or name.startswith('enumerate(DataPipe)#')


def role_ranges(tr, comm_ops, comm_kernels):
    """plugin-rules: Role ranges, with K1 (no `gpu_user_annotation` in any role) and K4 (which ops
    and kernels are communication). Each event's interval goes to one role: Kernel (kernels that
    are not communication), Memcpy, Memset, Communication (communication kernels and host ops),
    Runtime (runtime calls and, K2, driver calls), DataLoader, CPU Exec (every other operator, annotation and legacy
    `python` event; steps are not), then Other."""
    r = {k: [] for k in ROLES}
    for k in tr.kernels:
        r['communication' if id(k) in comm_kernels else 'kernel'].append((k['ts'], end(k)))
    r['memcpy'] = [(e['ts'], end(e)) for e in tr.memcpys]
    r['memset'] = [(e['ts'], end(e)) for e in tr.memsets]
    r['runtime'] = [(e['ts'], end(e)) for e in tr.runtimes + tr.drivers]  # K2
    comm_ids = {id(o) for o in comm_ops}
    for e in tr.host_events():
        name = e.get('name') or ''
        if id(e) in comm_ids:
            r['communication'].append((e['ts'], end(e)))
        elif STEP_RE.match(name):
            continue
        elif is_dataloader(name):
            r['dataloader'].append((e['ts'], end(e)))
        else:
            r['cpu_exec'].append((e['ts'], end(e)))
    r['cpu_exec'] += [(e['ts'], end(e)) for e in tr.python]
    return {k: merge(v) for k, v in r.items()}


def breakdown(steps, roles):
    """plugin-rules: Step time breakdown: over the union of the steps, each role takes the part of
    its ranges that no higher-priority role took (Kernel takes all of its ranges); what remains is
    Other; a step's cost of a role is the length of that part inside the step."""
    slots = merge(steps)
    taken = {}
    for i, role in enumerate(ROLES):
        part = roles[role] if i == 0 else intersect(slots, roles[role])
        taken[role] = part
        slots = subtract(slots, part)
    taken['other'] = slots
    rows = []
    for s, e in steps:
        row = {role: length(intersect([(s, e)], taken[role])) for role in ROLES + ['other']}
        row['total'] = e - s
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# K3 Tensor cores

def load_tc_table(path):
    """tests/data/tensor_cores/kernel_names.tsv: `tc<TAB>name` or `no<TAB>name` per line, `#`
    comments and blank lines skipped. Returns {name: bool}."""
    table = {}
    with open(path, encoding='utf-8') as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip('\n').rstrip('\r')
            if not line.strip() or line.lstrip().startswith('#'):
                continue
            tag, sep, name = line.partition('\t')
            if not sep or tag not in ('tc', 'no'):
                raise ValueError(f'{path}:{lineno}: expected "tc|no<TAB>kernel name": '
                                 f'{line[:80]!r}')
            table[name] = tag == 'tc'
    return table


def kernel_device(k):
    d = (k.get('args') or {}).get('device')
    return int(d) if d is not None else None


def tensor_core_shares(tr, table):
    """K3: the GPU summary's share of a GPU is the tensor-core kernel time over all kernel time on
    that GPU, every kernel counted (attributed or not, communication or not, inside the steps or
    not); the Kernel view's pie is the same over every kernel. GPUs are those seen in a kernel's
    `args.device` (plugin-rules: GPU summary). None where a kernel's name is not in the table."""
    unknown = sorted({k.get('name') for k in tr.kernels if k.get('name') not in table})
    tc, total = defaultdict(float), defaultdict(float)
    for k in tr.kernels:
        dev = kernel_device(k)
        if dev is None:
            continue
        total[dev] += k['dur']
        if table.get(k.get('name')):
            tc[dev] += k['dur']
    gpus = []
    for dev in sorted(total):
        pct = None if unknown else (round(100 * tc[dev] / total[dev], 2) if total[dev] > 0 else 0.0)
        gpus.append({'id': dev, 'tensor_cores_pct': pct})
    all_time = sum(k['dur'] for k in tr.kernels)
    all_tc = sum(k['dur'] for k in tr.kernels if table.get(k.get('name')))
    view_pct = None
    if not unknown and tr.kernels:
        view_pct = round(100 * all_tc / all_time, 2) if all_time > 0 else 0.0
    return gpus, view_pct, unknown


def kernels_by_name(tr, table):
    """plugin-rules: Kernel view, By name: over all kernel events; calls and total duration (µs,
    unrounded here); K3 for `tensor_cores_used` (null when the table lacks the name)."""
    rows = {}
    for k in tr.kernels:
        name = k.get('name')
        row = rows.setdefault(name, {'name': name, 'calls': 0, 'total_us': 0.0,
                                     'tensor_cores_used': table.get(name)})
        row['calls'] += 1
        row['total_us'] += k['dur']
    return sorted(rows.values(), key=lambda r: -r['total_us'])


# ---------------------------------------------------------------------------------------------

def kinetoscope_numbers(path, tc_table_path):
    tr = Trace(load_trace(path))
    notes = []
    try:
        table = load_tc_table(tc_table_path)
    except FileNotFoundError:
        table = {}
        notes.append(f'no tensor-core table at {tc_table_path}: tensor-core figures left out')

    steps, names = host_steps(tr)                                  # K1
    steps, names, step_notes = extend_steps(tr, steps, names)      # Step extension, Tail steps
    notes += step_notes
    comm_ops = communication_ops(tr)                               # K4
    comm_kernels, by_time_only = communication_kernels(tr, comm_ops)
    if by_time_only:
        notes.append(f'{by_time_only} kernel(s) are communication only because their launch lies '
                     'inside a communication op (not by External id)')
    roles = role_ranges(tr, comm_ops, comm_kernels)
    rows = breakdown(steps, roles)
    for row, name in zip(rows, names):
        row['name'] = name
    keys = ['name'] + ROLES + ['other', 'total']
    rows = [{k: row[k] for k in keys} for row in rows]
    average = {k: sum(r[k] for r in rows) / len(rows) for k in keys[1:]}

    gpus, view_pct, unknown = tensor_core_shares(tr, table)        # K3
    out = {
        'rules': 'kinetoscope',
        'file': os.path.basename(path),
        'overview': {
            'steps': rows,
            'average': average,
            'gpus': gpus,
            'has_communication': bool(roles['communication']),
        },
        'kernels': {
            'by_name': kernels_by_name(tr, table),
            'tensor_cores_pct': view_pct,
        },
        'tc_unclassified': unknown,
        'counts': {'communication_ops': len(comm_ops), 'communication_kernels': len(comm_kernels),
                   'gpu_user_annotations_ignored': tr.gpu_annotations,
                   'driver_calls': len(tr.drivers)},
        'notes': notes,
    }
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('trace', help='a .pt.trace.json[.gz] file')
    ap.add_argument('--tc-table', default=DEFAULT_TC_TABLE,
                    help='the tensor-core ground truth '
                         '(default: tests/data/tensor_cores/kernel_names.tsv)')
    ap.add_argument('--indent', type=int, default=1)
    args = ap.parse_args()
    t0 = time.monotonic()
    out = kinetoscope_numbers(args.trace, args.tc_table)
    out['seconds'] = round(time.monotonic() - t0, 3)
    json.dump(out, sys.stdout, indent=args.indent)
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
