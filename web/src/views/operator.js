// SPDX-License-Identifier: BSD-3-Clause
// Operator view: Top-N control, four donuts (device self/total when present, host self/total),
// Group By (Operator / Operator + Input Shape; pies and table follow it), the operator table
// with search and CSV export, and per-row call stacks (/api/operation/stack) with their frames.
import { createTable } from '../components/table.js';
import { donut } from '../components/charts.js';
import { topNControl, groupBySelect, h } from '../components/controls.js';
import { formatDuration } from '../components/units.js';

const GROUPS = [
  { value: 'Operation', label: 'Operator' },
  { value: 'OperationAndInputShape', label: 'Operator + Input Shape' },
];

const pct = (v) => (typeof v === 'number' ? (v * 100).toFixed(2) : v ?? '');

/// Table columns for operator rows present in `rows` (device and Tensor Core columns only
/// when the data has them), with header tooltips from metadata.tooltips.
export function operatorColumns(rows, tooltips = {}, byShape = false) {
  const has = (k) => rows.some((r) => r[k] !== undefined && r[k] !== null);
  const cols = [{ key: 'name', title: 'Name', type: 'string' }];
  if (byShape) cols.push({ key: 'input_shape', title: 'Input Shape', type: 'string' });
  cols.push({ key: 'calls', title: 'Calls', type: 'number' });
  const us = (v) => formatDuration(v);
  if (has('device_self_duration')) cols.push({ key: 'device_self_duration', title: 'Device Self Duration', type: 'number', format: us });
  if (has('device_total_duration')) cols.push({ key: 'device_total_duration', title: 'Device Total Duration', type: 'number', format: us });
  cols.push({ key: 'host_self_duration', title: 'Host Self Duration', type: 'number', format: us });
  cols.push({ key: 'host_total_duration', title: 'Host Total Duration', type: 'number', format: us });
  if (has('tc_eligible')) cols.push({ key: 'tc_eligible', title: 'Tensor Cores Eligible', type: 'string', tooltip: tooltips.tc_eligible });
  if (has('tc_self_ratio')) cols.push({ key: 'tc_self_ratio', title: 'Tensor Cores Self(%)', type: 'number', tooltip: tooltips.tc_self_ratio, format: pct });
  if (has('tc_total_ratio')) cols.push({ key: 'tc_total_ratio', title: 'Tensor Cores Total(%)', type: 'number', tooltip: tooltips.tc_total_ratio, format: pct });
  return cols;
}

/// Parses a call stack "file(line): func;..." into frames {raw, file?, line?}.
export function parseFrames(callStack) {
  return String(callStack || '').split(';').map((s) => s.trim()).filter(Boolean).map((raw) => {
    const m = /^(.*)\((\d+)\):\s*(.*)$/.exec(raw);
    return m ? { raw, file: m[1], line: Number(m[2]), func: m[3] } : { raw };
  });
}

/// Whether a frame belongs to a library rather than the user's code: PyTorch itself, installed
/// packages, the Python standard library and interpreter-internal frames.
export function isLibraryFrame(f) {
  const where = (f.file || f.raw || '').replace(/\\/g, '/');
  if (!f.file) return true;
  return /^<|\/(site|dist)-packages\/|(^|\/)torch\/|\/lib\/python\d[\d.]*\/|(^|\/)(threading|runpy|contextlib|functools)\.py$/.test(where);
}

/// The most useful frame of a stack: the first (innermost) frame of the user's code, else the
/// first frame.
export function usefulFrame(frames) {
  return frames.find((f) => !isLibraryFrame(f)) || frames[0] || null;
}

const frameText = (f) => (f.file ? `${f.func ? `${f.func} ` : ''}${f.file}:${f.line}` : f.raw);

function framesList(callStack) {
  const frames = parseFrames(callStack);
  if (!frames.length) return h('div', 'kt-muted kt-small', 'No call frames recorded.');
  const ol = h('ol', 'kt-frames');
  const best = usefulFrame(frames);
  for (const f of frames) {
    const li = h('li', f === best ? 'kt-frame-user' : isLibraryFrame(f) ? 'kt-frame-lib' : '');
    if (f.file) {
      li.append(h('code', 'kt-frame-func', f.func || ''), ' ', h('code', 'kt-frame-file', `${f.file}:${f.line}`));
    } else {
      li.append(h('code', '', f.raw));
    }
    ol.append(li);
  }
  return ol;
}

async function stackTable(ctx, row, groupBy) {
  const params = { op_name: row.name, group_by: groupBy };
  if (groupBy === 'OperationAndInputShape') params.input_shape = row.input_shape ?? '';
  const data = await ctx.api('operation/stack', params);
  const rows = (data && data.data) || [];
  const box = h('div', 'kt-stack');
  box.append(h('div', 'kt-small kt-muted', `Call stacks of ${row.name}: ${rows.length}`));
  const meta = (data && data.metadata) || {};
  const cols = operatorColumns(rows, meta.tooltips || {}, false);
  cols.splice(1, 0, { key: 'call_stack', title: 'Call Stack', type: 'string',
    format: (v) => {
      const f = parseFrames(v);
      const best = usefulFrame(f);
      return best ? `${frameText(best)} (${f.length} frame${f.length === 1 ? '' : 's'})` : '';
    } });
  createTable(box, {
    columns: cols,
    rows,
    sort: { key: meta.sort || 'host_self_duration', desc: true },
    pageSize: 10,
    csvName: 'operator_call_stacks.csv',
    expand: async (r) => framesList(r.call_stack),
  });
  return box;
}

/// Renders the Operator view.
export async function render(el, ctx) {
  let groupBy = GROUPS.some((g) => g.value === ctx.hash.op_group) ? ctx.hash.op_group : 'Operation';
  // The pies follow the Group By (by input shape: one slice per group, labelled with its name).
  const [firstPies, firstTable] = await Promise.all([
    ctx.api('operation', { group_by: groupBy }),
    ctx.api('operation/table', { group_by: groupBy }),
  ]);
  let pies = firstPies;
  el.textContent = '';
  const pieKeys = ['device_self_time', 'device_total_time', 'host_self_time', 'host_total_time'];
  let present = pieKeys.filter((k) => pies && pies[k]);
  const maxRows = Math.max(0, ...present.map((k) => (pies[k].rows || []).length));

  const pieCard = h('section', 'kt-card');
  pieCard.append(h('h2', 'kt-card-title', 'Operator Time'));
  const grid = h('div', 'kt-pie-grid');
  const drawPies = (n) => {
    grid.textContent = '';
    for (const k of present) {
      const p = pies[k];
      const sorted = [...(p.rows || [])].sort((a, b) => b[1] - a[1]);
      const shown = n > 0 ? sorted.slice(0, n) : sorted;
      const box = h('div');
      const whole = sorted.reduce((a, r) => a + Math.max(0, Number(r[1]) || 0), 0);
      donut(box, { title: String(p.title || '').replace(/\s*\(us\)$/, ''), items: shown.map((r) => ({ name: String(r[0]), value: Number(r[1]) })), unit: 'us',
        total: whole, centreLabel: 'Total of the table' });
      grid.append(box);
    }
    if (!present.length) grid.append(h('div', 'kt-muted', 'No operator time recorded.'));
  };
  const top = topNControl({
    allLabel: 'All operators', topLabel: 'Top operators to show', max: maxRows, value: ctx.hash.op_top,
    onChange: (n) => { ctx.setHash({ op_top: n > 0 ? n : 'all' }); drawPies(n); },
  });
  pieCard.append(top.element, grid);
  drawPies(top.value());

  const tableCard = h('section', 'kt-card');
  tableCard.append(h('h2', 'kt-card-title', 'Operator View'));
  const controls = h('div', 'kt-controls');
  const { label: lab, select } = groupBySelect(GROUPS, groupBy);
  controls.append(lab);
  tableCard.append(controls);
  const tableBox = h('div');
  tableCard.append(tableBox);

  let table = null;
  const show = (data) => {
    const rows = (data && data.data) || [];
    const meta = (data && data.metadata) || {};
    const cols = operatorColumns(rows, meta.tooltips || {}, groupBy === 'OperationAndInputShape');
    tableBox.textContent = '';
    table = createTable(tableBox, {
      columns: cols,
      rows,
      sort: { key: meta.sort || 'host_self_duration', desc: true },
      pageSize: 30,
      search: { keys: ['name'], placeholder: 'Search by Name', caseSensitive: false },
      csvName: groupBy === 'Operation' ? 'operators.csv' : 'operators_by_input_shape.csv',
      expand: (row) => stackTable(ctx, row, groupBy),
      rowClass: (row) => (row.has_call_stack ? '' : 'kt-no-expand'),
    });
  };
  show(firstTable);
  let seq = 0;
  select.addEventListener('change', async () => {
    groupBy = select.value;
    ctx.setHash({ op_group: groupBy === 'Operation' ? null : groupBy });
    const mine = ++seq;
    tableBox.textContent = 'Loading\u2026';
    try {
      const [newPies, data] = await Promise.all([
        ctx.api('operation', { group_by: groupBy }),
        ctx.api('operation/table', { group_by: groupBy }),
      ]);
      if (mine !== seq) return;
      pies = newPies;
      present = pieKeys.filter((k) => pies && pies[k]);
      drawPies(top.value());
      show(data);
    } catch (e) {
      if (mine !== seq) return;
      tableBox.textContent = '';
      tableBox.append(h('div', 'kt-error-box', e.message));
    }
  });
  el.append(pieCard, tableCard);
  void table;
}
