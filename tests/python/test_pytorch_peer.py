#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Real PyTorch from the package index, on the CPU, against kinetoscope and torch-tb-profiler
(meson test pytorch_peer).

    test_pytorch_peer.py --kinetoscope BIN --torch-python TORCH_PY --python VENV_PY
                         [--source-root DIR] [--keep]

TORCH_PY is the venv with torch (requirements/torch.txt, .venv-torch), VENV_PY the project's
venv with torch-tb-profiler and tensorboard (requirements/peers.txt, .venv). Steps:

  record     TORCH_PY tests/python/record_torch.py TMP/log: a small conv + MLP model trained
             under torch.profiler.profile with every option (record_shapes, profile_memory,
             with_stack, with_flops, with_modules, schedule(wait=1, warmup=1, active=2, repeat=1),
             tensorboard_trace_handler), into TMP/log/torch_cpu (.pt.trace.json) and
             TMP/log/torch_cpu_gz (use_gzip=True).
  naming     one file per run, named <host>_<pid>.<time_ns>.pt.trace.json[.gz] as the handler
             names it (time_ns between the profile's start and end), gzip where asked.
  content    the trace holds what each option records: Input Dims (record_shapes), [memory]
             events (profile_memory), python_function and nn.Module events (with_stack), the
             with_flops / with_modules / profile_memory / record_shapes / with_stack metadata,
             steps ProfilerStep#2 and #3 only (the schedule), the record_function ranges and the
             DataLoader's range.
  plugin     torch-tb-profiler (scripts/golden/plugin_numbers.py, run by VENV_PY in this file's
             --plugin-views mode, which adds the Memory and Module views) against
             `BIN analyze FILE --json --plugin_rules`: overview (steps, average, GPUs,
             recommendations), operators (both tables), kernels (none on the CPU: both sides
             have none), memory (devices, peaks, the curve, the statistics table), modules (the
             tree). Figure groups and tolerances of tests/golden/test_golden_rules.py: times
             max(1 µs, 0.1 %), percentages 0.01, names, counts, bytes and flags equal.
  default    `BIN analyze FILE --json` (kinetoscope's rules) loads it, and agrees with
             scripts/golden/kinetoscope_numbers.py (the golden test's groups).
  tensorboard  TensorBoard from VENV_PY with kinetoscope's plugin (tests/python/run_tensorboard.py,
             --kinetoscope_bin BIN) on TMP/log: the "PyTorch Profiler" tab is enabled, lists both
             runs and their worker, offers the Overview, Operator, Memory and Module views, and its
             Overview steps are analyze's.

One line per check ("ok    ..." or "FAIL  ..."; "info  ..." lines are not counted); the last line
is `pytorch checks: N passed, N failed`, and the exit status is 1 when one failed.
"""

import argparse
import gzip
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import checklist

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ROOT = os.path.dirname(os.path.dirname(HERE))
RUNS = ('torch_cpu', 'torch_cpu_gz')
STEPS = ['2', '3']  # schedule(wait=1, warmup=1, active=2): steps 0 and 1 are not recorded
RANGES = ('train_step', 'loss')
MODULES = ('SmallNet_0', 'Sequential_0', 'ConvBlock_0', 'ConvBlock_1', 'Head_0', 'Conv2d_0',
           'BatchNorm2d_0', 'Linear_0', 'CrossEntropyLoss_0')


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------------------------------------
# --plugin-views TRACE: run under the project's venv (torch_tb_profiler). Prints
# plugin_numbers.py's JSON plus the Memory and Module views, each in analyze --json's keys.

def plugin_views(trace, root):
    sys.path.insert(0, os.path.join(root, 'scripts', 'golden'))
    import plugin_numbers as pn
    out = pn.plugin_numbers(trace)  # exactly what the golden test compares
    data, profile = pn.run_plugin(trace)  # the fixes are applied once per process already
    out['memory'] = plugin_memory(profile) if profile.memory_snapshot else None
    view = profile.get_module_view()
    out['modules'] = plugin_modules(view['data']) if view else None
    return out


def plugin_memory(profile):
    """run.py get_memory_curve (time in µs from profiler start, bytes) and get_memory_stats
    (bytes), per device, in analyze --json's memory.devices[] keys."""
    curve = profile.get_memory_curve(time_metric='us', memory_metric='B')
    stats = profile.get_memory_stats(memory_metric='B')
    devices = {}
    for dev, rows in curve['rows'].items():
        d = devices.setdefault(dev, {'device': dev})
        d['curve'] = [[float(t), float(a), float(r)] for t, a, r in rows]
        # 'Peak Memory Usage: 370800.0B': the max Total Allocated, as the chart title prints it
        m = re.search(r'([-\d.]+)B$', curve['metadata']['peaks'].get(dev, ''))
        d['peak_allocated_bytes'] = float(m.group(1)) if m else None
        d['peak_reserved_bytes'] = max((r for _, _, r in d['curve']), default=0.0)
        d['curve_downsampled'] = False  # lttb_sample leaves a curve of <= 10240 points alone
    names = ['name', 'calls', 'size_increase_bytes', 'self_size_increase_bytes',
             'allocation_count', 'self_allocation_count', 'allocation_size_bytes',
             'self_allocation_size_bytes']
    for dev, rows in stats['rows'].items():
        d = devices.setdefault(dev, {'device': dev})
        d['stats'] = [dict(zip(names, r)) for r in rows]
    return {'devices': [devices[k] for k in sorted(devices)]}


def plugin_modules(rows):
    """run.py get_module_view data, in analyze --json's modules[] keys."""
    keys = {'occurences': 'occurrences', 'host_duration': 'host_duration_us',
            'self_host_duration': 'self_host_duration_us', 'device_duration': 'device_duration_us',
            'self_device_duration': 'self_device_duration_us', 'avg_duration': 'avg_duration_us'}
    out = []
    for r in rows:
        m = {keys.get(k, k): v for k, v in r.items() if k != 'children'}
        m['children'] = plugin_modules(r.get('children') or [])
        out.append(m)
    return out


# ---------------------------------------------------------------------------------------------
# The checks.

class Checks(checklist.Checks):
    def __init__(self, verbose):
        super().__init__()
        self.verbose = verbose

    def group(self, label, title, g):
        detail = g.detail(self.verbose)
        if not g.bad and g.figures == 0:
            g.bad.append('nothing compared')
            detail += ' (nothing compared)'
        return self.check(not g.bad, f'{label} | {title}: {detail}')


def run(cmd, timeout=300, env=None):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None, f'timed out after {timeout} s', time.monotonic() - t0
    except OSError as e:
        return None, str(e), time.monotonic() - t0
    dt = time.monotonic() - t0
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-4:]
        return None, f'exit {p.returncode}: ' + ' | '.join(tail), dt
    try:
        return json.loads(p.stdout), None, dt
    except json.JSONDecodeError as e:
        return None, f'not JSON ({e}): {p.stdout[:200]!r}', dt


def read_trace(path):
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rt', encoding='utf-8') as f:
        return json.load(f)


def check_naming(c, info, run_info, label):
    files = run_info['files']
    pattern = (r'^' + re.escape(f"{info['host']}_{info['pid']}") + r'\.(\d+)\.pt\.trace\.json'
               + (r'\.gz' if run_info['gzip'] else '') + r'$')
    ok = c.check(len(files) == 1, f'{label} | naming: one trace file in the run folder ({files})')
    if not ok:
        return None
    name = files[0]
    m = re.match(pattern, name)
    c.check(m is not None, f'{label} | naming: {name} is <host>_<pid>.<time_ns>.pt.trace.json'
            + ('.gz' if run_info['gzip'] else '') + f' (host {info["host"]}, pid {info["pid"]})')
    if m:
        ns = int(m.group(1))
        c.check(run_info['before_ns'] <= ns <= run_info['after_ns'],
                f'{label} | naming: the time in the name ({ns}) is a time_ns() within the profile '
                f'({run_info["before_ns"]}..{run_info["after_ns"]})')
    path = os.path.join(run_info['dir'], name)
    with open(path, 'rb') as f:
        magic = f.read(2)
    c.check((magic == b'\x1f\x8b') == run_info['gzip'],
            f'{label} | naming: {"gzip" if run_info["gzip"] else "plain JSON"} content '
            f'(starts {magic!r})')
    return path


def check_content(c, path, label):
    try:
        trace = read_trace(path)
    except (OSError, ValueError) as e:
        c.check(False, f'{label} | content: the file reads as JSON ({e})')
        return
    events = [e for e in trace.get('traceEvents', []) if isinstance(e, dict)]
    # aten:: operators carry their inputs; the autograd engine's ranges (also cpu_op) have none
    ops = [e for e in events if e.get('cat') == 'cpu_op' and e.get('name', '').startswith('aten::')]
    c.check(bool(ops) and all('Input Dims' in e.get('args', {}) for e in ops),
            f'{label} | content: record_shapes: every one of {len(ops)} aten:: operators has '
            'Input Dims')
    mem = [e for e in events if e.get('name') == '[memory]']
    c.check(len(mem) > 0 and all('Addr' in e.get('args', {}) and 'Total Allocated' in e['args']
                                 for e in mem),
            f'{label} | content: profile_memory: {len(mem)} [memory] events with Addr and '
            'Total Allocated')
    py = [e for e in events if e.get('cat') == 'python_function']
    mods = sorted({e['name'][len('nn.Module: '):] for e in py
                   if e.get('name', '').startswith('nn.Module: ')})
    c.check(len(py) > 0 and all(m in mods for m in MODULES),
            f'{label} | content: with_stack: {len(py)} python_function events, nn.Module scopes '
            f'{", ".join(MODULES)} among {mods}')
    flags = {k: trace.get(k) for k in ('record_shapes', 'profile_memory', 'with_stack',
                                        'with_flops', 'with_modules')}
    c.check(all(v == 1 for v in flags.values()),
            f'{label} | content: the options in the metadata are all 1 ({flags})')
    c.check(not any(e.get('cat') in ('kernel', 'gpu_memcpy', 'gpu_memset', 'cuda_runtime')
                    for e in events),
            f'{label} | content: CPU only: no kernel, memcpy, memset or cuda_runtime event')
    ann = [e.get('name') for e in events if e.get('cat') == 'user_annotation']
    steps = sorted(n for n in ann if n.startswith('ProfilerStep#'))
    c.check(steps == ['ProfilerStep#' + s for s in STEPS],
            f'{label} | content: schedule(wait=1, warmup=1, active=2): steps {steps}')
    c.check(all(ann.count(r) == len(STEPS) for r in RANGES)
            and sum(1 for n in ann if n.startswith('enumerate(DataLoader)#')) == len(STEPS),
            f'{label} | content: record_function ranges {", ".join(RANGES)} and the DataLoader '
            f'range once per step ({sorted(set(ann))})')


def memory_groups(ref, got, Group, time_ok):
    """The plugin's Memory view (ref) against analyze --json's memory (got)."""
    out = []
    g = Group()
    rd = {d['device']: d for d in (ref or {}).get('devices', [])}
    gd = {d['device']: d for d in (got or {}).get('devices', [])}
    g.equal('memory devices', sorted(rd), sorted(gd))
    out.append(('memory devices', g))
    for dev in sorted(set(rd) & set(gd)):
        r, s = rd[dev], gd[dev]
        g = Group()
        g.equal(f'{dev} peak allocated bytes', r.get('peak_allocated_bytes'),
                None if s.get('peak_allocated_bytes') is None else float(s['peak_allocated_bytes']))
        g.equal(f'{dev} peak reserved bytes', r.get('peak_reserved_bytes'),
                None if s.get('peak_reserved_bytes') is None else float(s['peak_reserved_bytes']))
        out.append((f'memory {dev} peaks', g))
        g = Group()
        rc, sc = r.get('curve') or [], s.get('curve') or []
        g.equal(f'{dev} curve points', len(rc), len(sc))
        if len(rc) == len(sc):
            for i, (p, q) in enumerate(zip(rc, sc)):
                g.check(time_ok(p[0], q[0]), f'{dev} point {i} time: {p[0]} vs {q[0]}')
                g.equal(f'{dev} point {i} allocated', p[1], float(q[1]))
                g.equal(f'{dev} point {i} reserved', p[2], float(q[2]))
        out.append((f'memory {dev} curve', g))
        g = Group()
        rs = {x['name']: x for x in r.get('stats') or []}
        ss = {x['name']: x for x in s.get('stats') or []}
        missing, extra = sorted(set(rs) - set(ss)), sorted(set(ss) - set(rs))
        g.check(not missing and not extra,
                f'{dev} statistics rows: {len(missing)} only in the plugin {missing[:3]}, '
                f'{len(extra)} only in analyze {extra[:3]}')
        for name in sorted(set(rs) & set(ss)):
            for k, v in rs[name].items():
                if k != 'name':
                    g.equal(f'{dev} {name} {k}', v, ss[name].get(k))
        out.append((f'memory {dev} statistics', g))
    return out


def flatten_modules(rows, path=()):
    for r in rows or []:
        key = path + ((r.get('name'), r.get('id')),)
        yield key, r
        yield from flatten_modules(r.get('children'), key)


def modules_group(ref, got, Group):
    g = Group()
    if ref is None or got is None:
        g.fail(f'module view: plugin {"none" if ref is None else "present"}, '
               f'analyze {"none" if got is None else "present"}')
        return g
    rf, gf = list(flatten_modules(ref)), list(flatten_modules(got))
    g.equal('module tree (names, ids, order)', [k for k, _ in rf], [k for k, _ in gf])
    gmap = dict(gf)
    for key, r in rf:
        s = gmap.get(key)
        if s is None:
            continue
        where = '/'.join(n for n, _ in key)
        for k in ('occurrences', 'operators'):
            g.equal(f'{where} {k}', r.get(k), s.get(k))
        for k in ('host_duration_us', 'self_host_duration_us', 'device_duration_us',
                  'self_device_duration_us', 'avg_duration_us'):
            g.time(f'{where} {k}', r.get(k), s.get(k))
    return g


def tensorboard_checks(c, args, logdir, tmp, expected_steps, info):
    """TensorBoard with our plugin on the recorded logdir."""
    tbt = load_module('test_tensorboard_plugin', os.path.join(HERE, 'test_tensorboard_plugin.py'))
    try:
        ok = subprocess.run([args.python, '-c', 'import tensorboard'],
                            capture_output=True).returncode == 0
    except OSError:
        ok = False
    if not c.check(ok, f'tensorboard: {args.python} imports tensorboard'):
        return
    env = dict(os.environ)
    env['XDG_CACHE_HOME'] = os.path.join(tmp, 'cache')
    env.pop('KINETOSCOPE_BIN', None)
    env['PYTHONUNBUFFERED'] = '1'
    prefix = tbt.PREFIX
    try:
        try:
            tb = tbt.start_tensorboard(args.python, ['--logdir', logdir, '--kinetoscope_bin',
                                                     args.kinetoscope], env)
        except RuntimeError as e:
            c.check(False, f'tensorboard: starts on {logdir} ({e})')
            return
        base = tb.url
        meta = tbt.get_json(base, '/data/plugins_listing').get('kinetoscope', {})
        c.check(meta.get('tab_name') == 'PyTorch Profiler' and meta.get('enabled') is True,
                f'tensorboard: the "PyTorch Profiler" tab is enabled ({meta})')
        runs = tbt.wait_loaded(base, list(RUNS))
        c.check(runs is not None, f'tensorboard: the tab lists the runs {", ".join(RUNS)} '
                f'({None if runs is None else runs.get("runs")})')
        if runs is None:
            return
        worker = f"{info['host']}_{info['pid']}"
        for run_name in RUNS:
            workers = tbt.get_json(base, f'{prefix}/api/workers?run={run_name}&view=Overview')
            c.check(workers == [worker], f'tensorboard: {run_name}: worker {worker} ({workers})')
            views = tbt.get_json(base, f'{prefix}/api/views?run={run_name}')
            want = ['Overview', 'Operator', 'Memory', 'Module']
            c.check(all(v in views for v in want) and 'Kernel' not in views
                    and 'GPU Kernel' not in views,
                    f'tensorboard: {run_name}: views {want}, no kernel view ({views})')
            spans = tbt.get_json(base, f'{prefix}/api/spans?run={run_name}&worker={worker}')
            span = spans[0] if spans else ''
            ov = tbt.get_json(base, f'{prefix}/api/overview?run={run_name}&worker={worker}'
                              f'&span={span}')
            cols = [col.get('name') for col in ov['steps']['columns']]
            rows = ov['steps']['rows']
            got = {}
            for row in rows:
                got[row[0]] = {col: v for col, v in zip(cols[1:], row[1:])
                               if col is not None and isinstance(v, (int, float))}
            want_steps = expected_steps.get(run_name) or []
            names_ok = list(got) == [s['name'] for s in want_steps]
            bad = []
            roles = {'DataLoader': 'dataloader', 'CPU Exec': 'cpu_exec', 'Other': 'other',
                     'Kernel': 'kernel', 'Runtime': 'runtime', 'Memcpy': 'memcpy',
                     'Memset': 'memset', 'Communication': 'communication'}
            if names_ok:
                for s in want_steps:
                    for col, v in got[s['name']].items():
                        key = roles.get(col)
                        if key is None or abs(v - s.get(key, 0)) > max(1.0, 0.001 * abs(v)):
                            bad.append(f'step {s["name"]} {col}: {v} vs {s.get(key)}')
            c.check(names_ok and not bad and len(want_steps) > 0,
                    f'tensorboard: {run_name}: Overview steps {list(got)} and their times are '
                    f'analyze\'s{": " + "; ".join(bad[:4]) if bad else ""}')
    finally:
        for s in tbt._servers:
            if s.alive():
                s.stop(signal.SIGTERM)
        tbt._servers.clear()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--kinetoscope', help='the kinetoscope program')
    ap.add_argument('--torch-python', help='a Python that imports torch (.venv-torch/bin/python)')
    ap.add_argument('--python', help='a Python that imports torch_tb_profiler and tensorboard '
                                     '(.venv/bin/python)')
    ap.add_argument('--source-root', default=DEFAULT_ROOT, help='the repository (default: %(default)s)')
    ap.add_argument('--keep', action='store_true', help='keep the temporary folder')
    ap.add_argument('-v', '--verbose', action='store_true', help='every mismatch')
    ap.add_argument('--plugin-views', metavar='TRACE', help=argparse.SUPPRESS)
    args = ap.parse_args()
    root = os.path.abspath(args.source_root)

    if args.plugin_views:  # the child mode, under the project's venv
        out = plugin_views(args.plugin_views, root)
        json.dump(out, sys.stdout)
        sys.stdout.write('\n')
        return 0
    for name in ('kinetoscope', 'torch_python', 'python'):
        if not getattr(args, name):
            ap.error(f'--{name.replace("_", "-")} is required')

    golden = load_module('test_golden_rules', os.path.join(root, 'tests', 'golden',
                                                           'test_golden_rules.py'))
    c = Checks(args.verbose)
    tmp = tempfile.mkdtemp(prefix='kinetoscope-pytorch-peer.')
    logdir = os.path.join(tmp, 'log')
    try:
        try:
            probe = subprocess.run([args.torch_python, '-c', 'import torch; print(torch.__version__)'],
                                   capture_output=True, text=True)
            ok, said = probe.returncode == 0, (probe.stdout or probe.stderr).strip().splitlines()[-1:]
        except OSError as e:
            ok, said = False, str(e)
        if not c.check(ok, f'record | {args.torch_python} imports torch ({said})'):
            return finish(c)
        info, err, dt = run([args.torch_python, os.path.join(root, 'tests', 'python',
                                                             'record_torch.py'), logdir])
        if not c.check(info is not None, f'record | record_torch.py wrote {logdir} '
                       f'({err or "torch " + info["torch"]}, {dt:.1f} s)'):
            return finish(c)
        expected_steps = {}
        for run_info in info['runs']:
            label = os.path.basename(run_info['dir'])
            try:
                check_run(c, args, root, info, run_info, label, golden, expected_steps)
            except Exception as e:  # noqa: BLE001 - one failed check, the rest goes on
                import traceback
                traceback.print_exc()
                c.check(False, f'{label} | {type(e).__name__}: {e}')
        try:
            tensorboard_checks(c, args, logdir, tmp, expected_steps, info)
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            c.check(False, f'tensorboard: {type(e).__name__}: {e}')
    finally:
        if args.keep:
            print(f'info  kept {tmp}')
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return finish(c)


def check_run(c, args, root, info, run_info, label, golden, expected_steps):
    """Naming, content, plugin vs analyze --plugin_rules and the default rules for one run."""
    Group, time_ok = golden.Group, golden.time_ok
    path = check_naming(c, info, run_info, label)
    if path is None:
        return
    check_content(c, path, label)

    plugin, err, dt_p = run([args.python, os.path.abspath(__file__), '--source-root', root,
                             '--plugin-views', path])
    c.check(plugin is not None, f'{label} | plugin: torch-tb-profiler reads it '
            f'({err or plugin["source"]}, {dt_p:.1f} s)')
    analyze = [args.kinetoscope, 'analyze', path, '--json', '--no_cache']
    ap_, err_a, dt_a = run(analyze + ['--plugin_rules'])
    c.check(ap_ is not None and ap_.get('rules') == 'plugin',
            f'{label} | analyze --plugin_rules reads it ({err_a or ap_.get("rules")}, '
            f'{dt_a:.2f} s)')
    if plugin is not None and ap_ is not None:
        for title, g in golden.plugin_groups(plugin, ap_):
            c.group(label, f'plugin vs analyze --plugin_rules: {title}', g)
        g = Group()
        g.equal('plugin kernel tables', plugin.get('kernels'), None)
        ak = ap_.get('kernels') or {}
        g.equal('analyze kernels.by_name', ak.get('by_name') or [], [])
        g.equal('analyze kernels.by_name_and_operator',
                ak.get('by_name_and_operator') or [], [])
        c.group(label, 'plugin vs analyze --plugin_rules: kernels (none on the CPU)', g)
        c.check(plugin.get('memory') is not None,
                f'{label} | plugin: has a Memory view')
        for title, g in memory_groups(plugin.get('memory'), ap_.get('memory'), Group,
                                      time_ok):
            c.group(label, f'plugin vs analyze --plugin_rules: {title}', g)
        c.group(label, 'plugin vs analyze --plugin_rules: modules',
                modules_group(plugin.get('modules'), ap_.get('modules'), Group))

    ak_, err_k, _ = run(analyze)
    c.check(ak_ is not None and ak_.get('rules') == 'kinetoscope'
            and [s['name'] for s in ak_['overview']['steps']] == STEPS,
            f'{label} | default rules: analyze reads it, steps '
            f'{err_k or [s["name"] for s in ak_["overview"]["steps"]]}')
    knum, err_n, _ = run([sys.executable, os.path.join(root, 'scripts', 'golden',
                                                       'kinetoscope_numbers.py'), path])
    c.check(knum is not None, f'{label} | default rules: kinetoscope_numbers.py reads it'
            f'{" (" + err_n + ")" if err_n else ""}')
    if ak_ is not None:
        expected_steps[label] = ak_['overview']['steps']
    if knum is not None and ak_ is not None:
        groups, _ = golden.kinetoscope_groups(knum, ak_)
        for title, g in groups:
            if g.figures == 0:
                continue  # no kernels on the CPU: nothing to compare in that group
            c.group(label, f'default rules: kinetoscope_numbers vs analyze: {title}', g)


def finish(c):
    print(f'pytorch checks: {c.passed} passed, {len(c.failed)} failed')
    return 1 if c.failed else 0


if __name__ == '__main__':
    sys.exit(main())
