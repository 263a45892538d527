// SPDX-License-Identifier: BSD-3-Clause
// The run's TensorBoard scalars (/api/scalars: the Profiler/... tags the recorder writes):
// small sparklines under the run select (renderRunScalars) and a full page of line charts
// (render), step on x.
import './scalars.css';
import { sparkline, lineChart } from '../components/charts.js';
import { h } from '../components/dom.js';

/// Formats a scalar for a label: integers as is, others with 4 significant digits.
export function formatScalar(v) {
  if (typeof v !== 'number' || !Number.isFinite(v)) return String(v);
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  if (a >= 1000) return v.toFixed(0);
  return String(Number(v.toPrecision(4)));
}

/// Tags sorted by name with their points sorted by step: [{tag, x: steps, y: values}].
export function scalarSeries(payload) {
  const tags = (payload && payload.tags) || {};
  return Object.keys(tags).sort().map((tag) => {
    const pts = (tags[tag] || []).filter((p) => Array.isArray(p) && p.length >= 2)
      .slice().sort((a, b) => a[0] - b[0]);
    return { tag, x: pts.map((p) => p[0]), y: pts.map((p) => p[1]) };
  }).filter((s) => s.x.length > 0);
}

async function fetchScalars(ctx) {
  return ctx.api('scalars', { run: ctx.run });
}

/// Small charts of the run's TensorBoard scalars (/api/scalars) for the shell's side panel;
/// leaves el empty when the run has none.
export async function renderRunScalars(el, ctx) {
  el.textContent = '';
  if (!ctx || !ctx.run) return;
  let payload;
  try {
    payload = await fetchScalars(ctx);
  } catch (_) {
    return;  // the side panel stays empty; the page itself reports API errors
  }
  const series = scalarSeries(payload);
  if (series.length === 0) return;
  // Collapsible so a run with many tags does not push the view selects out of sight.
  const box = h('details', 'sc-side');
  box.open = series.length <= 4;
  box.appendChild(h('summary', 'sc-side-title', `Scalars (${series.length})`));
  // Corrupt records are skipped by the reader; say so instead of hiding it.
  const errors = (payload && payload.errors) || [];
  if (errors.length) {
    const e = h('div', 'sc-errors', `${errors.length} problem(s) reading event files: ${errors[0]}`);
    e.title = errors.join('\n');
    box.appendChild(e);
  }
  if (payload && payload.skipped_other_summaries > 0) {
    box.appendChild(h('div', 'sc-note', `${payload.skipped_other_summaries} non-scalar summaries skipped`));
  }
  if (ctx.navigate) {
    const open = h('a', 'sc-open', 'Open as a page');
    open.href = '#';
    open.addEventListener('click', (ev) => { ev.preventDefault(); ctx.navigate({ view: 'Scalars' }); });
    box.appendChild(open);
  }
  for (const s of series) {
    const item = h('div', 'sc-item');
    item.title = `${s.tag}: ${s.y.length} points, last at step ${s.x[s.x.length - 1]}`;
    const head = h('div', 'sc-item-head');
    head.appendChild(h('span', 'sc-tag', s.tag.replace(/^Profiler\//, '')));
    head.appendChild(h('span', 'sc-last', formatScalar(s.y[s.y.length - 1])));
    const chart = h('div', 'sc-spark');
    item.append(head, chart);
    box.appendChild(item);
    sparkline(chart, { title: '', x: s.x, y: s.y, width: 200, height: 24 });
  }
  el.appendChild(box);
}

/// A full page of the run's scalars, one line chart per tag.
export async function render(el, ctx) {
  el.textContent = '';
  const root = h('div', 'sc-page');
  el.appendChild(root);
  const payload = await fetchScalars(ctx);
  const series = scalarSeries(payload);
  const errors = (payload && payload.errors) || [];
  if (errors.length) {
    const e = h('div', 'sc-errors');
    for (const t of errors) e.appendChild(h('div', '', t));
    root.appendChild(e);
  }
  if (series.length === 0) {
    root.appendChild(h('div', 'sc-empty',
      'This run has no TensorBoard scalars (events.out.tfevents.* files next to its traces).'));
    return undefined;
  }
  const grid = h('div', 'sc-grid');
  root.appendChild(grid);
  const charts = [];
  for (const s of series) {
    const c = h('section', 'kt-card sc-card');
    const head = h('div', 'kt-card-title ks-head');
    head.appendChild(h('span', 'ks-title', s.tag));
    head.appendChild(h('span', 'kt-muted kt-small ks-hint', `last ${formatScalar(s.y[s.y.length - 1])}`));
    const body = h('div', 'ks-body');
    c.append(head, body);
    grid.appendChild(c);
    charts.push(lineChart(body, {
      title: '',
      xLabel: 'Step',
      yLabel: s.tag.replace(/^.*\//, ''),
      x: s.x,
      series: [{ name: s.tag, values: s.y }],
      height: 200,
    }));
  }
  return () => {
    for (const c of charts) {
      if (c && c.plot) c.plot.destroy();
    }
  };
}
