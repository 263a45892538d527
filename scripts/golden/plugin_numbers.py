#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""torch-tb-profiler's own numbers for one trace file, as `kinetoscope analyze --json` keys.

    plugin_numbers.py TRACE [--indent N]
    plugin_numbers.py --distributed RUN_FOLDER [--span S] [--indent N]

Runs the plugin's code (the package `torch_tb_profiler`, requirements/peers.txt) on TRACE the way
its loader does for one file (profiler/loader.py `RunLoader._process_data`: `RunProfileData.parse`,
then `RunGenerator.generate_run_profile`), in this process, and maps the payloads its HTTP routes
would send onto the keys of `kinetoscope analyze --json`:

    overview.steps[]            rows of the "steps" chart: name + kernel, memcpy, memset,
                                communication, runtime, dataloader, cpu_exec, other, total (µs,
                                raw floats; a column the plugin does not show is 0)
    overview.average            the "Average Step Time" tree (integers, as the plugin rounds them;
                                only the columns the plugin shows)
    overview.gpus[]             the GPU summary: id, name, compute_capability, utilization_pct,
                                sm_efficiency_pct, achieved_occupancy_pct, tensor_cores_pct (each
                                only when the plugin shows it)
    overview.recommendations[]  the recommendation list with the HTML removed ("N/A" when none)
    operators.by_name[], operators.by_name_and_input_shape[]   the Operator view's tables
    kernels.by_name[], kernels.by_name_and_operator[]          the Kernel view's tables

That is the mapping ../shared/expected/*.expected.json were made with (see its README); the golden
test (tests/golden/test_golden_rules.py) checks that this script reproduces them.

With --distributed, the Distributed view of one span of a run instead: every worker file of
RUN_FOLDER (the files of the folder itself named like `WORKER[.TIMESTAMP].pt.trace.json[.gz]`,
spans numbered 1, 2, … per worker in timestamp order, "default" without one; --span picks one,
else the first) is loaded as above (`run_plugin`, one after the other: the loader's
`RunLoader.load` without its processes and queue; a file the plugin cannot read is left out, as
there, and listed in `failed_files`), made into `DistributedRunProfileData`, and the whole run
handed to `RunLoader._process_spans` (the cross-worker real ranges, then
`DistributedRunGenerator`). Its payloads (routes /distributed/overlap, /waittime, /commops) map
onto `kinetoscope analyze RUN_FOLDER --json --view distributed --plugin_rules`:

    distributed.available       the span has a distributed profile (every worker communicates,
                                with as many communication ops and kernels as the others)
    distributed.reason          "" when available; else the loader's error log lines, or the
                                workers without communication (kinetoscope words it its own way)
    distributed.workers[]       the span's workers, sorted by name:
      .worker                   the worker name (the file name up to the timestamp)
      .overlap                  the "all" bar of steps_to_overlap (integers: Σ over the steps /
                                step count, truncated): computation_us, overlap_us,
                                communication_us, other_us (its legends Computation, Overlapping,
                                Communication, Other)
      .wait                     the "all" bar of steps_to_wait (integers, the same way):
                                data_transfer_us, synchronizing_us ("Data Transfer Time",
                                "Synchronizing Time")
      .comm_ops[]               the worker's "Communication Operations Stats" rows in the plugin's
                                order: name, calls, total_size_bytes, avg_size_bytes,
                                total_latency_us (raw), avg_latency_us, data_transfer_us (raw),
                                avg_data_transfer_us (the averages rounded by the plugin)

The per-step bars and the Device Information panel are not mapped (analyze --json does not print
them). The distributed code (loader.py, communication.py, DistributedRunGenerator, the
communication parts of event_parser.py) is the same in the final source as in the wheel, up to
type comments; the fixes below apply to it as to one file (#1166 and #845 change which events are
runtimes and annotations, hence the overlap bars). tests/golden/test_golden_distributed.py
compares this with analyze.

Which plugin. The goldens come from the plugin's last source in pytorch/kineto (tb_plugin/, whose
version string stayed 0.4.3 until the folder was removed in 2026; last analysis change 2025-12).
The wheel on PyPI called 0.4.3 was built in 2023, before five fixes, four of which change numbers on
today's traces. The wheel is what a package index can give us, so this script imports it and
makes it behave as those fixes do, in our own code around the wheel's (named by pull request):

  #1166 `cuda_runtime` (and the other `*_runtime`) categories are runtimes. Without it a PyTorch
        2.x trace has no runtime at all: no device time in any operator, no tensor-core share.
  #845  every `user_annotation`/`gpu_user_annotation` is an event (the wheel kept only steps and
        the ten collective names): they are CPU Exec time, and data-loader and optimizer
        annotations become tree nodes.
  #891  forward/backward flows have category `fwdbwd`, as Kineto writes them (the wheel looked for
        `forward_backward`, which no trace has).
  #900  (not applied: a backward module node takes its forward module's times; no trace the
        test reads needs it, see _apply_upstream_fixes)
  #941  a step of zero length gives its tooltip a 0 % share (the wheel raises ZeroDivisionError:
        the GPU copy of a step, Q4, is often such a step, e.g. in resnet18 and ddp_gloo).

On ../shared's 19 goldens the wheel as it is reproduces 3 (2021 and CPU-only traces); without
#1166 16 fail, without #845 9, without #891 or #941 mi300x_resnet_actckpt (#941 also makes the
wheel fail on the committed resnet18 and ddp_gloo traces); #900 changes none of them.

Nothing else of the wheel is changed, and no kinetoscope code is used.
"""

import argparse
import html
import json
import logging
import math
import os
import re
import sys
import tempfile
import time
import warnings


def import_plugin():
    """Import the plugin's modules quietly (TensorBoard and the plugin log to stderr)."""
    warnings.filterwarnings('ignore')
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
    try:
        from torch_tb_profiler import consts, utils  # noqa: F401
        from torch_tb_profiler.profiler import data, op_tree, run_generator, trace  # noqa: F401
    except ImportError as e:
        sys.exit(f'plugin_numbers.py: cannot import torch_tb_profiler ({e}); '
                 'install requirements/peers.txt into this Python')
    import logging
    utils.get_logger().setLevel(logging.ERROR)
    import torch_tb_profiler
    return torch_tb_profiler


# --------------------------------------------------------------------------------------------
# The upstream fixes the PyPI wheel lacks (see the module docstring). Each is applied only when
# the imported code still has the old behaviour, so a future wheel with them is left alone.

_applied_fixes = None


def apply_upstream_fixes():
    """Patches the imported plugin once per process; returns the pull requests applied."""
    global _applied_fixes
    if _applied_fixes is None:
        _applied_fixes = _apply_upstream_fixes()
    return _applied_fixes


def _apply_upstream_fixes():
    from torch_tb_profiler.profiler import node as node_mod
    from torch_tb_profiler.profiler import op_tree, trace
    from torch_tb_profiler.profiler.event_parser import ProfileRole
    from torch_tb_profiler.profiler.run_generator import RunGenerator
    applied = []

    # #1166: trace.py EventTypeMap
    runtime_cats = ['cuda_runtime', 'mtia_runtime', 'glow_runtime', 'xpu_runtime',
                    'privateuse1_runtime']
    if 'cuda_runtime' not in trace.EventTypeMap:
        for cat in runtime_cats:
            trace.EventTypeMap[cat] = trace.EventTypes.RUNTIME
        applied.append('1166')

    # #845: trace.py create_trace_event, USER_ANNOTATION branch: `return OperatorEvent(event_type,
    # event)` for every name that is not a step (the wheel returned it only for the ten collective
    # names and dropped the rest). Everything else of the function is the wheel's.
    original_create = trace.create_trace_event
    if not getattr(original_create, '_final_source', False):
        def create_trace_event(event, is_pytorch_lightning):
            category = event.get('cat')
            event_type = trace.EventTypeMap.get(category.lower())
            if event_type == trace.EventTypes.USER_ANNOTATION:
                name = event.get('name')
                if name and name.startswith('ProfilerStep#'):
                    return trace.ProfilerStepEvent(event)
                return trace.OperatorEvent(event_type, event)
            return original_create(event, is_pytorch_lightning)
        create_trace_event._final_source = True
        trace.create_trace_event = create_trace_event
        applied.append('845')

    # #900 (a backward module node takes its forward module's times; the wheel leaves them None,
    # which makes the file fail when such a node has no operator) is not applied: it changes no
    # number of the traces the test reads, and applying it would mean carrying upstream code.
    import inspect

    # #941: run_generator.py build_part_time_str: `percentage = 0.0` when the step's total is 0.
    # The tooltip computes `100 * part / total`; a zero total is handed over as a float whose
    # reflected division gives 0.0 (Python tries a right operand's subclass method first), which
    # is what the final source writes. Only the tooltip text sees it; every number we read is the
    # plain float.
    if 'total_cost' not in inspect.getsource(RunGenerator._generate_overview):
        class _ZeroTotal(float):
            def __rtruediv__(self, other):
                return 0.0

        original_overview = RunGenerator._generate_overview

        def _generate_overview(self):
            zeroed = [(c, c.costs[ProfileRole.Total]) for c in self.profile_data.steps_costs
                      if c.costs[ProfileRole.Total] == 0]
            for c, _ in zeroed:
                c.costs[ProfileRole.Total] = _ZeroTotal(0.0)
            try:
                return original_overview(self)
            finally:
                for c, value in zeroed:
                    c.costs[ProfileRole.Total] = value
        RunGenerator._generate_overview = _generate_overview
        applied.append('941')

    return applied


def flows_as_final_source(trace_json):
    """#891: data.py takes the flows of category `fwdbwd` (the wheel: `forward_backward`).

    The same result on the wheel: `fwdbwd` events are renamed to the category it looks for, and
    events that really say `forward_backward` (the final source hands them to create_event, which
    ignores an unknown category) get a category nobody knows."""
    events = trace_json.get('traceEvents') if isinstance(trace_json, dict) else None
    if not events:
        return
    for e in events:
        cat = e.get('cat') if isinstance(e, dict) else None
        if cat == 'fwdbwd':
            e['cat'] = 'forward_backward'
        elif cat == 'forward_backward':
            e['cat'] = 'forward_backward (not a flow)'


# --------------------------------------------------------------------------------------------
# Running the plugin on one file (profiler/loader.py RunLoader._process_data, without the worker
# process and the queue).

def run_plugin(path, span_index=0):
    """(RunProfileData, RunProfile) of one file. `span_index`: the loader's span number of the
    file (None = no span); 0 = the file taken alone (1 when its name has a timestamp)."""
    from torch_tb_profiler import consts
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    base = os.path.basename(path)
    match = consts.WORKER_PATTERN.match(base)
    worker = match.group(1) if match else base
    span = match.group(2)[1:] if match and match.group(2) else None
    if span_index == 0:
        # One file: its span index is 1 when it has a timestamp (loader.py numbers them per
        # worker).
        span_index = None if span is None else 1

    with tempfile.TemporaryDirectory(prefix='plugin_numbers.') as cache_dir:
        # RunProfileData.parse = _preprocess_file + from_json; the flows are renamed in between.
        trace_path, trace_json = RunProfileData._preprocess_file(path, cache_dir)
        flows_as_final_source(trace_json)
        data = RunProfileData.from_json(worker, span_index, trace_json)
        data.trace_file_path = trace_path
        profile = RunGenerator(worker, span_index, data).generate_run_profile()
    return data, profile


# --------------------------------------------------------------------------------------------
# Payload -> analyze --json keys.

STEP_COLUMNS = {'Kernel': 'kernel', 'Memcpy': 'memcpy', 'Memset': 'memset',
                'Communication': 'communication', 'Runtime': 'runtime', 'DataLoader': 'dataloader',
                'CPU Exec': 'cpu_exec', 'Other': 'other'}
STEP_KEYS = list(STEP_COLUMNS.values())


def map_overview(data, profile):
    """run_generator.py RunGenerator._generate_overview: the 'steps' rows, 'performance' (the
    average) and 'recommendations'."""
    from torch_tb_profiler.profiler.event_parser import ProfileRole
    ov = profile.overview
    columns = [c.get('name') for c in ov['steps']['columns']]
    steps = []
    for i, row in enumerate(ov['steps']['rows']):
        step = {'name': row[0]}
        step.update({k: 0 for k in STEP_KEYS})
        for col, value in zip(columns[1:], row[1:]):
            if col in STEP_COLUMNS:
                step[STEP_COLUMNS[col]] = value
        # The row has no total column (only its tooltips, "Total: …us"): the value they print.
        step['total'] = float(data.steps_costs[i].costs[ProfileRole.Total])
        steps.append(step)

    perf = ov['performance'][0]
    average = {'total': perf['value']}
    for child in perf['children']:
        average[STEP_COLUMNS[child['name']]] = child['value']

    items = re.findall(r'<li>(.*?)</li>', ov['recommendations'], flags=re.S)
    recommendations = [html.unescape(re.sub(r'<[^>]+>', '', item)).strip() for item in items]
    return {'steps': steps, 'average': average, 'recommendations': recommendations}


def parse_pct(text):
    return float(str(text).replace('%', '').strip())


def map_gpus(profile):
    """gpu_metrics_parser.py get_gpu_metrics_data_tooltip: a flat list of {title, value}."""
    gpus = []
    for item in profile.gpu_summary or []:
        title, value = item['title'], item['value']
        m = re.fullmatch(r'GPU (\d+):', title)
        if m:
            gpus.append({'id': int(m.group(1))})
        elif title == 'Name':
            gpus[-1]['name'] = value
        elif title == 'Compute Capability':
            gpus[-1]['compute_capability'] = value
        elif title == 'GPU Utilization':
            gpus[-1]['utilization_pct'] = parse_pct(value)
        elif title == 'Est. SM Efficiency':
            gpus[-1]['sm_efficiency_pct'] = parse_pct(value)
        elif title == 'Est. Achieved Occupancy':
            gpus[-1]['achieved_occupancy_pct'] = parse_pct(value)
        elif title == 'Kernel Time using Tensor Cores':
            gpus[-1]['tensor_cores_pct'] = parse_pct(value)
    return gpus


def map_op_table(table, with_shape):
    """run_generator.py _generate_op_table rows."""
    rows = []
    for r in table['data']:
        row = {'name': r['name'], 'calls': r['calls'],
               'host_self_us': r['host_self_duration'], 'host_total_us': r['host_total_duration'],
               # the plugin leaves the device columns out of a profile without GPU work
               'device_self_us': r.get('device_self_duration', 0),
               'device_total_us': r.get('device_total_duration', 0),
               'tc_eligible': r['tc_eligible'] == 'Yes',
               'tc_self_pct': r['tc_self_ratio'], 'tc_total_pct': r['tc_total_ratio']}
        if with_shape:
            row['input_shape'] = str(r['input_shape'])
        rows.append(row)
    return rows


KERNEL_COLUMNS = {'Name': 'name', 'Operator': 'operator', 'Grid': 'grid', 'Block': 'block',
                  'Register Per Thread': 'registers_per_thread', 'Shared Memory': 'shared_memory',
                  'Tensor Cores Used': 'tensor_cores_used',
                  'Kernel Uses Tensor Cores': 'tensor_cores_used',
                  'Op is Tensor Cores eligible': 'op_tc_eligible',
                  'Calls': 'calls', 'Total Duration (us)': 'total_us',
                  'Mean Duration (us)': 'mean_us', 'Max Duration (us)': 'max_us',
                  'Min Duration (us)': 'min_us', 'Mean Blocks Per SM': 'blocks_per_sm',
                  'Mean Est. Achieved Occupancy (%)': 'occupancy_pct'}


def map_kernel_table(table):
    """run_generator.py _generate_kernel_table / _generate_kernel_op_table rows (by column name)."""
    if table is None:
        return None
    names = [KERNEL_COLUMNS[c['name']] for c in table['data']['columns']]
    rows = []
    for r in table['data']['rows']:
        row = dict(zip(names, r))
        for k in ('tensor_cores_used', 'op_tc_eligible'):
            if k in row:
                row[k] = row[k] == 'Yes'
        for k, v in row.items():  # numpy scalars from pandas -> plain numbers
            if hasattr(v, 'item'):
                row[k] = v.item()
        rows.append(row)
    return rows


def plugin_numbers(path):
    plugin = import_plugin()
    fixes = apply_upstream_fixes() + ['891']  # 891: flows_as_final_source, in run_plugin
    data, profile = run_plugin(path)
    overview = map_overview(data, profile)
    overview['gpus'] = map_gpus(profile)
    out = {
        'source': f'torch-tb-profiler {getattr(plugin, "__version__", "?")} (PyPI wheel'
                  + (' + upstream ' + ', '.join('#' + f for f in fixes) if fixes else '') + ')',
        'file': os.path.basename(path),
        'overview': {k: overview[k] for k in ('steps', 'average', 'gpus', 'recommendations')},
        'operators': {
            'by_name': map_op_table(profile.operation_table_by_name, False),
            'by_name_and_input_shape': map_op_table(profile.operation_table_by_name_input, True),
        },
    }
    if data.has_kernel:
        out['kernels'] = {'by_name': map_kernel_table(profile.kernel_table),
                          'by_name_and_operator': map_kernel_table(profile.kernel_op_table)}
        # the Kernel view's "Using Tensor Cores" pie (run_generator.py _generate_tc_pie)
        out['kernels']['tensor_cores_pct'] = round(100 * data.tc_used_ratio, 2)
    out['overview']['has_communication'] = bool(data.has_communication)
    return out


# --------------------------------------------------------------------------------------------
# The Distributed view: every worker of one span (profiler/loader.py RunLoader.load, without the
# worker processes and the queue, then RunLoader._process_spans).

class _LoaderErrors(logging.Handler):
    """Keeps the plugin's error log lines (why a span gets no distributed view) instead of
    printing them."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def run_folder_files(folder):
    """[(worker, span index or None, path)] as RunLoader.load names them: the files of FOLDER
    itself matching consts.WORKER_PATTERN, spans numbered 1, 2, … per worker in string order of
    their timestamps."""
    import bisect
    from collections import defaultdict
    from torch_tb_profiler import consts
    workers, spans_by_workers = [], defaultdict(list)
    for name in sorted(os.listdir(folder)):
        if os.path.isdir(os.path.join(folder, name)):
            continue
        match = consts.WORKER_PATTERN.match(name)
        if not match:
            continue
        worker, span = match.group(1), match.group(2)
        if span is not None:
            span = span[1:]
            bisect.insort(spans_by_workers[worker], span)
        workers.append((worker, span, name))
    index = {(w, s): i for w, spans in spans_by_workers.items() for i, s in enumerate(spans, 1)}
    return [(w, None if s is None else index[(w, s)], os.path.join(folder, name))
            for w, s, name in workers]


def plugin_distributed(folder, span=None):
    """The Distributed view of one span of the run FOLDER, mapped onto `analyze --json --view
    distributed` (see the module docstring). `span`: the loader's span name ("1", "2", …;
    "default" for files without a timestamp); None = the first."""
    plugin = import_plugin()
    fixes = apply_upstream_fixes() + ['891']
    from torch_tb_profiler import utils
    from torch_tb_profiler.profiler.data import DistributedRunProfileData
    from torch_tb_profiler.profiler.loader import RunLoader
    from torch_tb_profiler.run import Run

    files = run_folder_files(folder)
    if not files:
        sys.exit(f'plugin_numbers.py: {folder}: no *.pt.trace.json[.gz] files')
    spans = sorted({'default' if s is None else str(s) for _, s, _ in files})
    if span is None:
        span = spans[0]
    elif span not in spans:
        sys.exit(f'plugin_numbers.py: {folder}: no span {span!r} (spans: {", ".join(spans)})')

    errors = _LoaderErrors()
    logger = utils.get_logger()
    logger.addHandler(errors)
    logger.propagate = False
    run_name = os.path.basename(os.path.normpath(folder))
    # RunLoader.load: every file of the run (all spans: _process_spans groups them), each as
    # _process_data parses it; a file that fails is left out, as the loader's (None, None).
    distributed_run = Run(run_name, folder)
    failed = []
    for worker, span_index, path in files:
        try:
            data, _ = run_plugin(path, span_index)
        except Exception as e:  # noqa: BLE001 (the loader catches everything too)
            failed.append(f'{os.path.basename(path)}: {type(e).__name__}: {e}')
            continue
        distributed_run.add_profile(DistributedRunProfileData(data))
    loader = RunLoader.__new__(RunLoader)  # _process_spans needs only run_name
    loader.run_name = run_name
    profiles = [p for p in loader._process_spans(distributed_run) if p is not None]
    # get_spans() is None when no file has a span: then the one profile has span None.
    profile = next((p for p in profiles if (p.span or 'default') == span), None)
    logger.removeHandler(errors)

    workers = sorted(w for w, s, _ in files if ('default' if s is None else str(s)) == span)
    out = {
        'source': f'torch-tb-profiler {getattr(plugin, "__version__", "?")} (PyPI wheel'
                  + (' + upstream ' + ', '.join('#' + f for f in fixes) if fixes else '') + ')',
        'folder': folder,
        'span': span,
        'distributed': map_distributed(profile, workers, distributed_run, span, errors.messages),
    }
    if failed:
        out['failed_files'] = failed
    return out


def map_distributed(profile, workers, distributed_run, span, errors):
    """run_generator.py DistributedRunGenerator: the 'all' bars of _generate_overlap_graph and
    _generate_wait_graph, and _generate_ops_table's rows, per worker."""
    if profile is None:
        if errors:
            reason = '; '.join(dict.fromkeys(errors))
        else:
            quiet = [d.worker for d in distributed_run.get_profiles(span=span) or []
                     if not (d.has_communication and d.comm_node_list)]
            reason = ('no communication in ' + ', '.join(sorted(quiet)) if quiet
                      else 'no worker file could be read')
        return {'available': False, 'reason': reason, 'workers': []}
    overlap = profile.steps_to_overlap['data']['all']
    wait = profile.steps_to_wait['data']['all']
    ops = profile.comm_ops['data']
    rows = []
    for worker in sorted(set(workers) | set(overlap) | set(ops)):
        o = overlap.get(worker, [None] * 4)
        w = wait.get(worker, [None] * 2)
        table = ops.get(worker) or {'columns': [], 'rows': []}
        names = [COMM_OP_COLUMNS[c['name']] for c in table['columns']]
        rows.append({
            'worker': worker,
            'overlap': dict(zip(OVERLAP_KEYS, o)),
            'wait': dict(zip(WAIT_KEYS, w)),
            'comm_ops': [dict(zip(names, r)) for r in table['rows']],
        })
    return {'available': True, 'reason': '', 'workers': rows}


OVERLAP_KEYS = ['computation_us', 'overlap_us', 'communication_us', 'other_us']
WAIT_KEYS = ['data_transfer_us', 'synchronizing_us']
COMM_OP_COLUMNS = {'Name': 'name', 'Calls': 'calls', 'Total Size (bytes)': 'total_size_bytes',
                   'Avg Size (bytes)': 'avg_size_bytes',
                   'Total Latency (us)': 'total_latency_us', 'Avg Latency (us)': 'avg_latency_us',
                   'Data Transfer Time (us)': 'data_transfer_us',
                   'Avg Data Transfer Time (us)': 'avg_data_transfer_us'}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('trace', nargs='?', help='a .pt.trace.json[.gz] file')
    ap.add_argument('--distributed', metavar='RUN_FOLDER',
                    help='the Distributed view of a run folder instead of one file\'s numbers')
    ap.add_argument('--span', help='with --distributed: the span ("1", "2", ... or "default"; '
                    'default: the first)')
    ap.add_argument('--indent', type=int, default=1)
    args = ap.parse_args()
    if (args.trace is None) == (args.distributed is None):
        ap.error('give either TRACE or --distributed RUN_FOLDER')
    if args.span is not None and args.distributed is None:
        ap.error('--span goes with --distributed')
    t0 = time.monotonic()
    if args.distributed is not None:
        out = plugin_distributed(args.distributed, args.span)
    else:
        out = plugin_numbers(args.trace)
    out['seconds'] = round(time.monotonic() - t0, 3)

    def finite(o):  # NaN/inf are not JSON
        if isinstance(o, float) and not math.isfinite(o):
            return None
        if isinstance(o, dict):
            return {k: finite(v) for k, v in o.items()}
        if isinstance(o, list):
            return [finite(v) for v in o]
        return o
    json.dump(finite(out), sys.stdout, indent=args.indent)
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
