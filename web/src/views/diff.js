// SPDX-License-Identifier: BSD-3-Clause
// Diff view (the plugin's fe/src/components/DiffOverview.tsx): baseline vs experiment, one level of
// the diff tree at a time. A combo chart (bars per child, running-sum trend lines on a right axis;
// click a bar to drill into that child), "Go Back", the Execution Diff chart and the Operator View
// table with its column-group multi-select. The drill path lives in the URL (diff_path).
import './diff.css';
import { createTable } from '../components/table.js';
import { lineChart, colors } from '../components/charts.js';
import { h, svg, titledCard as card } from '../components/dom.js';
import { formatDuration } from '../components/units.js';

const GROUPS = [
  { id: 'host', title: 'Host Duration', key: 'host_duration' },
  { id: 'self_host', title: 'Self Host Duration', key: 'self_host_duration' },
  { id: 'device', title: 'Device Duration', key: 'device_duration' },
  { id: 'self_device', title: 'Self Device Duration', key: 'self_device_duration' },
];

const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
const fmt = (v) => {
  if (v === null || v === undefined) return '';
  if (typeof v !== 'number') return String(v);
  return v.toLocaleString('en-US', { maximumFractionDigits: 2 });
};
const fmtPct = (v) => (v === null || v === undefined ? '\u2014' : `${v.toFixed(2)}%`);

/// Percentage change from base to exp; null when base is 0 and exp is not (no finite ratio).
export function deltaPercent(base, exp) {
  if (base === 0) return exp === 0 ? 0 : null;
  return ((exp - base) / base) * 100;
}

/// Parent path of a diff path ("0-3-1" -> "0-3"); null at the root.
export function parentPath(path) {
  const i = path.lastIndexOf('-');
  return i < 0 ? null : path.slice(0, i);
}

/// Operator rows comparing the aggs of the baseline and experiment nodes, by operator name.
export function operatorRows(left, right) {
  const byName = new Map();
  const add = (aggs, side) => {
    for (const a of aggs || []) {
      let r = byName.get(a.name);
      if (!r) {
        r = { name: a.name, base: null, exp: null };
        byName.set(a.name, r);
      }
      r[side] = a;
    }
  };
  add(left && left.aggs, 'base');
  add(right && right.aggs, 'exp');
  const rows = [];
  for (const r of byName.values()) {
    const row = { operator: r.name };
    const fill = (prefix, key) => {
      const b = r.base ? num(r.base[key]) : 0;
      const e = r.exp ? num(r.exp[key]) : 0;
      row[`${prefix}_base`] = b;
      row[`${prefix}_exp`] = e;
      row[`${prefix}_delta`] = e - b;
      row[`${prefix}_pct`] = deltaPercent(b, e);
    };
    fill('calls', 'calls');
    for (const g of GROUPS) fill(g.id, g.key);
    rows.push(row);
  }
  return rows;
}

const fmtUs = (v) => (typeof v === 'number' ? `${v > 0 ? '+' : ''}${formatDuration(v)}` : fmt(v));

function tableColumns(groups) {
  const cols = [{ key: 'operator', title: 'Operator', type: 'string' }];
  const four = (prefix, title, f, fd) => [
    { key: `${prefix}_base`, title: `Baseline ${title}`, type: 'number', format: f },
    { key: `${prefix}_exp`, title: `Exp ${title}`, type: 'number', format: f },
    { key: `${prefix}_delta`, title: `Delta ${title}`, type: 'number', format: fd },
    { key: `${prefix}_pct`, title: `Delta ${title}%`, type: 'number', format: fmtPct },
  ];
  cols.push(...four('calls', 'Calls', (v) => (typeof v === 'number' ? v.toLocaleString('en-US') : fmt(v)),
    (v) => (typeof v === 'number' ? `${v > 0 ? '+' : ''}${v.toLocaleString('en-US')}` : fmt(v))));
  for (const g of GROUPS) {
    if (groups.includes(g.id)) cols.push(...four(g.id, g.title, (v) => (typeof v === 'number' ? formatDuration(v) : fmt(v)), fmtUs));
  }
  return cols;
}

function palette() {
  return Array.isArray(colors) && colors.length >= 4 ? colors : ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2'];
}

/// Rounds an axis maximum up to 4 ticks of 1, 2, 2.5 or 5 times a power of ten.
function niceMax(max) {
  const raw = max / 4;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((f) => f * mag).find((v) => v >= raw);
  return step * 4;
}

/// Draws the "Execution Comparison" combo chart: grouped bars Baseline / Experiment
/// (total_duration) per child on the left axis, their running sums as lines on the right axis.
function comboChart(box, children, onBar, tooltip) {
  box.textContent = '';
  const n = children.length;
  const width = Math.max(360, box.clientWidth || 900);
  const height = 320;
  const m = { l: 64, r: 64, t: 28, b: 64 };
  const pw = width - m.l - m.r;
  const ph = height - m.t - m.b;
  const base = children.map((c) => num(c.left && c.left.total_duration));
  const exp = children.map((c) => num(c.right && c.right.total_duration));
  const trend = (v) => v.reduce((acc, x) => { acc.push((acc.length ? acc[acc.length - 1] : 0) + x); return acc; }, []);
  const baseTrend = trend(base);
  const expTrend = trend(exp);
  const maxBar = niceMax(Math.max(1, ...base, ...exp));
  const maxTrend = niceMax(Math.max(1, ...baseTrend, ...expTrend));
  const pal = palette();
  const s = svg('svg', { width, height, class: 'diff-combo-svg' });
  s.setAttribute('role', 'img');
  s.setAttribute('aria-label', 'Execution Comparison');
  const y = (v) => m.t + ph - (v / maxBar) * ph;
  const y2 = (v) => m.t + ph - (v / maxTrend) * ph;
  // Axes and grid.
  for (let i = 0; i <= 4; i++) {
    const gy = m.t + (ph * i) / 4;
    s.appendChild(svg('line', { x1: m.l, x2: m.l + pw, y1: gy, y2: gy, class: 'diff-grid' }));
    const l = svg('text', { x: m.l - 6, y: gy + 4, class: 'diff-axis', 'text-anchor': 'end' });
    l.textContent = fmt(Math.round(maxBar * (1 - i / 4)));
    s.appendChild(l);
    const r = svg('text', { x: m.l + pw + 6, y: gy + 4, class: 'diff-axis', 'text-anchor': 'start' });
    r.textContent = fmt(Math.round(maxTrend * (1 - i / 4)));
    s.appendChild(r);
  }
  const yl = svg('text', { x: 14, y: m.t + ph / 2, class: 'diff-axis-title', transform: `rotate(-90 14 ${m.t + ph / 2})`, 'text-anchor': 'middle' });
  yl.textContent = 'Time (µs)';
  s.appendChild(yl);
  const yr = svg('text', { x: width - 10, y: m.t + ph / 2, class: 'diff-axis-title', transform: `rotate(90 ${width - 10} ${m.t + ph / 2})`, 'text-anchor': 'middle' });
  yr.textContent = 'Accumulated Time (µs)';
  s.appendChild(yr);
  const slot = pw / Math.max(1, n);
  const bw = Math.max(1, Math.min(28, slot * 0.38));
  let bars = 0;
  children.forEach((c, i) => {
    const cx = m.l + slot * (i + 0.5);
    const name = (c.left && c.left.name) || (c.right && c.right.name) || c.path;
    const tip = `${name}\nBaseline: ${formatDuration(base[i])}\nExperiment: ${formatDuration(exp[i])}\n` +
      `Baseline Trend: ${formatDuration(baseTrend[i])}\nExp Trend: ${formatDuration(expTrend[i])}`;
    const g = svg('g', { class: 'diff-bar-group' });
    g.dataset.path = c.path;
    [[base[i], pal[0], -bw], [exp[i], pal[1], 0]].forEach(([v, color, dx]) => {
      const top = y(v);
      g.appendChild(svg('rect', { x: cx + dx, y: top, width: bw, height: Math.max(0, m.t + ph - top), fill: color, class: 'diff-bar' }));
      bars++;
    });
    // A transparent hit area over the whole slot makes small bars clickable.
    g.appendChild(svg('rect', { x: m.l + slot * i, y: m.t, width: slot, height: ph, fill: 'transparent' }));
    g.addEventListener('click', () => onBar(c));
    g.addEventListener('mousemove', (ev) => {
      tooltip.textContent = tip;
      tooltip.hidden = false;
      const r = box.getBoundingClientRect();
      const left = Math.min(ev.clientX - r.left + 12, r.width - 260);
      tooltip.style.left = `${Math.max(0, left)}px`;
      tooltip.style.top = `${ev.clientY - r.top + 12}px`;
    });
    g.addEventListener('mouseleave', () => { tooltip.hidden = true; });
    s.appendChild(g);
    if (n <= 40) {
      const label = name.length > 18 ? `${name.slice(0, 17)}…` : name;
      const t = svg('text', { x: cx, y: m.t + ph + 12, class: 'diff-xlabel', 'text-anchor': 'end', transform: `rotate(-35 ${cx} ${m.t + ph + 12})` });
      t.textContent = label;
      s.appendChild(t);
    }
  });
  const line = (vals, color, dash) => {
    const pts = vals.map((v, i) => `${m.l + slot * (i + 0.5)},${y2(v)}`).join(' ');
    s.appendChild(svg('polyline', { points: pts, fill: 'none', stroke: color, 'stroke-width': 2, 'stroke-dasharray': dash, class: 'diff-trend' }));
  };
  line(baseTrend, pal[2], '');
  line(expTrend, pal[3], '5 3');
  // Legend.
  const legend = [['Baseline', pal[0]], ['Experiment', pal[1]], ['Baseline Trend', pal[2]], ['Exp Trend', pal[3]]];
  let lx = m.l;
  for (const [name, color] of legend) {
    s.appendChild(svg('rect', { x: lx, y: 8, width: 12, height: 12, fill: color }));
    const t = svg('text', { x: lx + 16, y: 18, class: 'diff-legend' });
    t.textContent = name;
    s.appendChild(t);
    lx += 24 + name.length * 7;
  }
  box.dataset.bars = String(bars);
  box.appendChild(s);
  box.appendChild(tooltip);
}

/// Renders the Diff view into el. ctx.diff = {run, worker, span, exp_run, exp_worker, exp_span}.
export async function render(el, ctx) {
  el.textContent = '';
  const root = h('div', 'diff-view');
  el.appendChild(root);
  const d = ctx.diff || {};
  const need = ['run', 'worker', 'span', 'exp_run', 'exp_worker', 'exp_span'];
  if (need.some((k) => !d[k])) {
    root.appendChild(h('div', 'diff-empty', 'No Runs Found: there is no run selected for diff.'));
    return undefined;
  }
  const hash = ctx.hash || {};
  let path = typeof hash.diff_path === 'string' && /^0(-\d+)*$/.test(hash.diff_path) ? hash.diff_path : '0';
  let groups = typeof hash.diff_cols === 'string'
    ? hash.diff_cols.split(',').filter((g) => GROUPS.some((x) => x.id === g))
    : ['host'];
  let alive = true;
  let generation = 0;

  const header = h('div', 'diff-header');
  header.appendChild(h('span', 'diff-pair',
    `Baseline ${d.run} / ${d.worker} / ${d.span}  vs  Experiment ${d.exp_run} / ${d.exp_worker} / ${d.exp_span}`));
  root.appendChild(header);

  const comboCard = card('Execution Comparison');
  const back = h('button', 'kt-button diff-back', 'Go Back');
  back.type = 'button';
  const crumb = h('span', 'diff-crumb');
  comboCard.head.append(crumb, back);
  const comboBox = h('div', 'diff-combo');
  const tooltip = h('div', 'diff-tooltip');
  tooltip.hidden = true;
  comboCard.body.appendChild(comboBox);
  root.appendChild(comboCard.card);

  const diffCard = card('Execution Diff');
  const diffBox = h('div', 'diff-line');
  diffCard.body.appendChild(diffBox);
  root.appendChild(diffCard.card);

  const opCard = card('Operator View');
  const groupBox = h('div', 'diff-groups');
  groupBox.setAttribute('role', 'group');
  groupBox.setAttribute('aria-label', 'Columns');
  for (const g of GROUPS) {
    const label = h('label', 'diff-group');
    const cb = h('input');
    cb.type = 'checkbox';
    cb.value = g.id;
    cb.checked = groups.includes(g.id);
    label.append(cb, document.createTextNode(` ${g.title}`));
    groupBox.appendChild(label);
  }
  opCard.head.appendChild(groupBox);
  const opBox = h('div', 'diff-ops');
  opCard.body.appendChild(opBox);
  root.appendChild(opCard.card);

  let table = null;
  let node = null;
  let lineCleanup = null;

  function drawTable() {
    const rows = operatorRows(node.left, node.right);
    const columns = tableColumns(groups);
    if (!table) {
      opBox.textContent = '';
      table = createTable(opBox, {
        columns,
        rows,
        sort: { key: groups.length ? `${groups[0]}_delta` : 'calls_delta', desc: true },
        pageSize: 30,
        search: { keys: ['operator'], placeholder: 'Search by Name', caseSensitive: false },
        csvName: 'diff_operators.csv',
      });
    } else {
      table.setColumns(columns);
      table.setRows(rows);
    }
  }

  function drawLine(children) {
    if (lineCleanup) { try { lineCleanup(); } catch (_) { /* gone */ } }
    lineCleanup = null;
    diffBox.textContent = '';
    diffCard.card.hidden = children.length === 0;
    if (children.length === 0) return;
    const diffs = children.map((c) => num(c.right && c.right.total_duration) - num(c.left && c.left.total_duration));
    const acc = [];
    diffs.forEach((v, i) => acc.push((i ? acc[i - 1] : 0) + v));
    const x = children.map((_, i) => i + 1);
    const chart = lineChart(diffBox, {
      title: '',
      xLabel: 'Child',
      yLabel: 'Time Difference (µs)',
      x,
      series: [
        { name: 'Diff', values: diffs, stepped: true },
        { name: 'Accumulated Diff', values: acc, stepped: true },
      ],
      height: 260,
    });
    if (chart && chart.plot) lineCleanup = () => chart.plot.destroy();
  }

  async function load(p) {
    const my = ++generation;
    comboBox.classList.add('diff-loading');
    let payload;
    try {
      payload = await ctx.api('diffnode', {
        run: d.run, worker: d.worker, span: d.span,
        exp_run: d.exp_run, exp_worker: d.exp_worker, exp_span: d.exp_span, path: p,
      });
    } catch (e) {
      if (!alive || my !== generation) return;
      comboBox.classList.remove('diff-loading');
      if (p !== '0') {  // a stale shared link: fall back to the root
        path = '0';
        if (ctx.setHash) ctx.setHash({ diff_path: '0' });
        await load('0');
        return;
      }
      comboBox.textContent = '';
      comboBox.appendChild(h('div', 'diff-error', `Could not load the diff: ${e.message}`));
      return;
    }
    if (!alive || my !== generation) return;
    comboBox.classList.remove('diff-loading');
    node = payload;
    path = p;
    back.disabled = parentPath(path) === null;
    const name = (node.left && node.left.name) || (node.right && node.right.name) || '';
    crumb.textContent = `${path === '0' ? 'Top level' : `Level ${path.split('-').length - 1}`}: ${name} (path ${path})`;
    const children = Array.isArray(node.children) ? node.children : [];
    if (children.length === 0) {
      // Nothing to drill into: compare the node itself. At the top level this is the first
      // screen, so say why and what to pick instead (not just "no more level").
      comboChart(comboBox, [{ left: node.left, right: node.right, path }], () => {}, tooltip);
      const why = path === '0'
        ? 'These two spans have nothing below their top level to compare step by step (no operators or ' +
          'profiler steps under it). Pick other spans for the baseline and the experiment in the panel ' +
          '(a span with operators, such as a training step), or compare the operator totals in the table below.'
        : 'No more level to show: this node has no children. Use "Go Back" to return to its parent.';
      comboBox.insertBefore(h('div', path === '0' ? 'diff-note diff-first-empty' : 'diff-note', why), comboBox.firstChild);
    } else {
      comboChart(comboBox, children, (c) => {
        if (ctx.setHash) ctx.setHash({ diff_path: c.path });
        load(c.path);
      }, tooltip);
    }
    drawLine(children);
    drawTable();
  }

  back.addEventListener('click', () => {
    const parent = parentPath(path);
    if (parent === null) return;
    if (ctx.setHash) ctx.setHash({ diff_path: parent });
    load(parent);
  });
  groupBox.addEventListener('change', () => {
    groups = [...groupBox.querySelectorAll('input:checked')].map((i) => i.value);
    if (ctx.setHash) ctx.setHash({ diff_cols: groups.join(',') });
    if (node) drawTable();
  });

  await load(path);
  return () => {
    alive = false;
    if (lineCleanup) { try { lineCleanup(); } catch (_) { /* gone */ } }
  };
}
