// SPDX-License-Identifier: BSD-3-Clause
// The Distributed view's "Ranks" section (/api/distributed/ranks): a rank × step heatmap on one
// canvas (no element per cell, so 256 ranks × 500 steps stay cheap) with a metric select, the
// stragglers with their causes, and the collectives with the largest arrival skew. A click on a
// cell or a straggler opens the Trace view of that worker and span on that step.
import { createTable } from '../components/table.js';
import { formatBytes, formatDuration } from '../components/units.js';
import { h, titledCard as card } from '../components/dom.js';

const METRIC_TITLES = {
  step_time: 'Step time',
  compute: 'Compute',
  communication: 'Communication',
  overlap: 'Overlap',
  wait: 'Wait',
  data_loading: 'Data loading',
};

/// The URL hash of the Trace view of `worker` zoomed to [start, end] (absolute µs): the
/// timeline's t0/t1 are relative to its first event, which /api/timeline/tracks gives.
async function traceHash(ctx, worker, start, end) {
  const tracks = await ctx.api('timeline/tracks', { worker });
  const t0 = Number(tracks && tracks.t0) || 0;
  const q = new URLSearchParams({ run: ctx.run, worker, span: ctx.span, view: 'Trace' });
  q.set('t0', String(Math.max(0, start - t0)));
  q.set('t1', String(Math.max(0, end - t0)));
  if (ctx.rules) q.set('rules', ctx.rules);
  return q.toString();
}

function openTrace(ctx, worker, start, end) {
  if (typeof start !== 'number' || typeof end !== 'number') return;
  traceHash(ctx, worker, start, end).then((hash) => { location.hash = hash; }).catch(() => {});
}

/// A colour from light to dark for t in [0, 1] (one hue: magnitude reads at a glance).
function ramp(t) {
  const x = Math.min(1, Math.max(0, t));
  const l = 92 - x * 62;
  return `hsl(${210 - x * 200}, 75%, ${l}%)`;
}

/// The heatmap card; returns nothing (draws on select change and resize).
function heatmap(parent, ctx, data) {
  const c = card('Ranks × steps', 'ranks-heat-card');
  parent.appendChild(c.card);
  const metrics = data.metrics || Object.keys(METRIC_TITLES);
  const label = h('label', 'dist-label', 'Metric ');
  const select = h('select', 'dist-select ranks-metric');
  select.setAttribute('aria-label', 'Metric');
  for (const m of metrics) {
    const o = h('option', '', METRIC_TITLES[m] || m);
    o.value = m;
    select.appendChild(o);
  }
  const saved = (ctx.hash || {}).ranks_metric;
  if (metrics.includes(saved)) select.value = saved;
  label.appendChild(select);
  c.head.appendChild(label);
  const ranks = data.ranks || [];
  const steps = data.steps || [];
  const info = h('div', 'ranks-info', `${ranks.length} ranks × ${steps.length} steps. Click a cell to open that step in the Trace view.`);
  const wrap = h('div', 'ranks-canvas-wrap');
  const canvas = h('canvas', 'ranks-canvas');
  const tip = h('div', 'ranks-tip');
  tip.hidden = true;
  wrap.append(canvas, tip);
  const legend = h('div', 'ranks-legend');
  c.body.append(info, wrap, legend);
  const headH = 18;
  const rowLabel = (r) => `${r.rank >= 0 ? r.rank : ''} ${r.worker}`.trim();
  let labelW = 90;  // set from the widest row label when drawing
  let layout = null;

  const draw = () => {
    const values = (data.heatmaps || {})[select.value] || [];
    const g = canvas.getContext('2d');
    g.font = '11px sans-serif';
    labelW = 8 + Math.min(200, ranks.reduce((w, r) => Math.max(w, g.measureText(rowLabel(r)).width), 0));
    const width = Math.max(300, wrap.clientWidth || 800);
    const cellW = Math.max(1, (width - labelW) / Math.max(1, steps.length));
    const cellH = Math.max(2, Math.min(18, Math.floor(600 / Math.max(1, ranks.length))));
    const height = headH + cellH * ranks.length;
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, width, height);
    let lo = Infinity;
    let hi = -Infinity;
    for (const row of values) for (const v of row) if (typeof v === 'number') { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    if (!Number.isFinite(lo)) { lo = 0; hi = 0; }
    const span = hi - lo || 1;
    const style = getComputedStyle(document.documentElement);
    const text = style.getPropertyValue('--kt-text').trim() || '#222';
    g.font = '11px sans-serif';
    g.fillStyle = text;
    g.textBaseline = 'middle';
    // Row labels where they fit; column labels every so many steps.
    const rowEvery = Math.ceil(12 / cellH);
    ranks.forEach((r, i) => {
      if (i % rowEvery === 0) g.fillText(rowLabel(r), 2, headH + i * cellH + cellH / 2, labelW - 6);
    });
    const colEvery = Math.ceil(40 / cellW);
    steps.forEach((s, k) => { if (k % colEvery === 0) g.fillText(s, labelW + k * cellW, headH / 2); });
    values.forEach((row, i) => {
      row.forEach((v, k) => {
        g.fillStyle = typeof v === 'number' ? ramp((v - lo) / span) : 'transparent';
        g.fillRect(labelW + k * cellW, headH + i * cellH, Math.ceil(cellW), cellH);
      });
    });
    // Stragglers outlined; rows too thin for an outline get red ticks in the margins instead, so
    // the cell keeps its colour.
    g.strokeStyle = '#d00';
    g.fillStyle = '#d00';
    g.lineWidth = 1.5;
    for (const s of data.stragglers || []) {
      const x = labelW + s.step_index * cellW;
      const y = headH + s.rank_index * cellH;
      if (cellH >= 6 && cellW >= 6) {
        g.strokeRect(x + 0.75, y + 0.75, cellW - 1.5, cellH - 1.5);
      } else {
        g.fillRect(labelW - 5, y, 4, Math.max(2, cellH));
        g.fillRect(x, headH - 4, Math.max(2, cellW), 3);
      }
    }
    layout = { cellW, cellH, values };
    canvas.dataset.cells = String(ranks.length * steps.length);
    legend.textContent = `${METRIC_TITLES[select.value] || select.value}: ${formatDuration(lo)} (light) … ${formatDuration(hi)} (dark); stragglers outlined (or ticked in the margins) in red.`;
  };

  const cellAt = (ev) => {
    if (!layout) return null;
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left - labelW;
    const y = ev.clientY - r.top - headH;
    if (x < 0 || y < 0) return null;
    const k = Math.floor(x / layout.cellW);
    const i = Math.floor(y / layout.cellH);
    if (i >= ranks.length || k >= steps.length) return null;
    return { i, k };
  };
  canvas.addEventListener('mousemove', (ev) => {
    const at = cellAt(ev);
    if (!at) { tip.hidden = true; return; }
    const v = (layout.values[at.i] || [])[at.k];
    const r = ranks[at.i];
    tip.textContent = `${r.worker} (rank ${r.rank}), step ${steps[at.k]}: ${typeof v === 'number' ? formatDuration(v) : 'no data'}`;
    tip.hidden = false;
    const box = wrap.getBoundingClientRect();
    tip.style.left = `${ev.clientX - box.left + 12}px`;
    tip.style.top = `${ev.clientY - box.top + 12}px`;
  });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; });
  canvas.addEventListener('click', (ev) => {
    const at = cellAt(ev);
    if (!at) return;
    const start = ((data.step_start || [])[at.i] || [])[at.k];
    const end = ((data.step_end || [])[at.i] || [])[at.k];
    openTrace(ctx, ranks[at.i].worker, start, end);
  });
  select.addEventListener('change', () => {
    if (ctx.setHash) ctx.setHash({ ranks_metric: select.value });
    draw();
  });
  draw();
}

function stragglerTable(parent, ctx, data) {
  const c = card('Stragglers', 'ranks-stragglers-card');
  parent.appendChild(c.card);
  const list = data.stragglers || [];
  if (list.length === 0) {
    c.body.appendChild(h('div', 'dist-note', 'No straggler: every rank stays within the usual spread of the others in every step.'));
    return;
  }
  const box = h('div', 'ranks-stragglers');
  c.body.appendChild(box);
  const link = (v, row) => {
    const a = h('a', 'ranks-link', String(v));
    a.href = '#';
    a.addEventListener('click', (ev) => {
      ev.preventDefault();
      openTrace(ctx, row.worker, row.start, row.end);
    });
    return a;
  };
  createTable(box, {
    columns: [
      { key: 'worker', title: 'Worker', format: link },
      { key: 'rank', title: 'Rank', type: 'number' },
      { key: 'step', title: 'Step' },
      { key: 'cause', title: 'Cause' },
      { key: 'excess_us', title: 'Excess', type: 'number', format: formatDuration },
      { key: 'evidence', title: 'Evidence', wrap: true },
    ],
    rows: list,
    sort: { key: 'excess_us', desc: true },
    pageSize: 30,
    csvName: 'stragglers.csv',
  });
}

function collectiveTable(parent, data) {
  const info = data.collectives || {};
  const c = card('Collectives by arrival skew', 'ranks-colls-card');
  parent.appendChild(c.card);
  const how = info.matched_by === 'order' ? 'matched by order within each group and name (no Seq)' : 'matched by process group and Seq';
  c.body.appendChild(h('div', 'ranks-info',
    `${info.total || 0} collectives, ${how}; largest skew ${formatDuration(info.max_skew_us || 0)}, total ${formatDuration(info.total_skew_us || 0)}.` +
    (info.unmatched ? ` ${info.unmatched} seen on fewer ranks than their group size.` : '')));
  if (!(info.top || []).length) return;
  const box = h('div', 'ranks-colls');
  c.body.appendChild(box);
  const rows = (info.top || []).map((x) => ({ ...x, group_text: x.group_desc ? `${x.group} (${x.group_desc})` : x.group,
    last: `${x.last_worker} (rank ${x.last_rank})` }));
  createTable(box, {
    columns: [
      { key: 'name', title: 'Collective' },
      { key: 'group_text', title: 'Group' },
      { key: 'seq', title: 'Seq', type: 'number' },
      { key: 'step', title: 'Step' },
      { key: 'bytes', title: 'Size', type: 'number', format: formatBytes },
      { key: 'ranks', title: 'Ranks', type: 'number' },
      { key: 'skew_us', title: 'Skew', type: 'number', format: formatDuration },
      { key: 'wait_us', title: 'Total wait', type: 'number', format: formatDuration },
      { key: 'last', title: 'Last to arrive' },
    ],
    rows,
    sort: { key: 'skew_us', desc: true },
    pageSize: 10,
    csvName: 'collectives_by_skew.csv',
  });
}

/// Renders the Ranks section into `parent` (the Distributed view's root); `pending`, when given, is
/// the /distributed/ranks request already made.
export async function renderRanks(parent, ctx, pending) {
  const section = h('div', 'ranks-section');
  parent.appendChild(section);
  section.appendChild(h('h3', 'ranks-title', 'Ranks'));
  const data = await (pending || ctx.api('distributed/ranks', { worker: 'All' }));
  if (!data || !(data.ranks || []).length) {
    section.appendChild(h('div', 'dist-note', 'No rank data for this span.'));
    return;
  }
  for (const note of data.notes || []) section.appendChild(h('div', 'dist-note ranks-note', note));
  heatmap(section, ctx, data);
  stragglerTable(section, ctx, data);
  collectiveTable(section, data);
}
