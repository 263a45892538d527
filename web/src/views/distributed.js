// SPDX-License-Identifier: BSD-3-Clause
// Distributed view (the plugin's fe/src/components/DistributedView.tsx), shown for worker "All":
// device information per node/process/GPU, computation/communication and
// synchronizing/communication stacked columns per worker with a step select each, and the
// communication operations table per worker; then the job view's Ranks section (ranks.js).
import './distributed.css';
import { renderRanks } from './ranks.js';
import { createTable } from '../components/table.js';
import { stackedColumns } from '../components/charts.js';
import { h, titledCard as card } from '../components/dom.js';

/// A labelled select; returns the <select>.
function labelledSelect(parent, text, values, value) {
  const label = h('label', 'dist-label', `${text} `);
  const s = h('select', 'dist-select');
  s.setAttribute('aria-label', text);
  for (const v of values) {
    const o = h('option', '', v);
    o.value = v;
    s.appendChild(o);
  }
  if (values.includes(value)) s.value = value;
  label.appendChild(s);
  parent.appendChild(label);
  return s;
}

/// Steps of a {"all": .., "<step>": ..} payload: "all" first, then numeric order.
function stepKeys(data) {
  const keys = Object.keys(data || {});
  const rest = keys.filter((k) => k !== 'all');
  rest.sort((a, b) => {
    const x = Number(a);
    const y = Number(b);
    if (Number.isFinite(x) && Number.isFinite(y)) return x - y;
    return a < b ? -1 : a > b ? 1 : 0;
  });
  return keys.includes('all') ? ['all', ...rest] : rest;
}

const fmt = (v) => (typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(2)) : String(v));

/// Device information: node (bold) -> process -> GPU -> key: value, with row-spanning cells.
function deviceTable(data) {
  const table = h('table', 'dist-devices');
  const head = h('tr');
  for (const t of ['Node', 'Process', 'GPU', 'Property', 'Value']) head.appendChild(h('th', '', t));
  const thead = h('thead');
  thead.appendChild(head);
  const tbody = h('tbody');
  table.append(thead, tbody);
  const count = (o, depth) => {
    if (depth === 0) return Math.max(1, Object.keys(o).filter((k) => k !== 'Memory Raw').length);
    let n = 0;
    for (const v of Object.values(o)) n += count(v, depth - 1);
    return Math.max(1, n);
  };
  for (const [node, procs] of Object.entries(data)) {
    let firstNode = true;
    for (const [proc, gpus] of Object.entries(procs)) {
      let firstProc = true;
      for (const [gpu, props] of Object.entries(gpus)) {
        const entries = Object.entries(props).filter(([k]) => k !== 'Memory Raw');
        if (entries.length === 0) entries.push(['', '']);
        entries.forEach(([k, v], i) => {
          const tr = h('tr');
          if (firstNode) {
            const td = h('td', 'dist-node', node);
            td.rowSpan = count(procs, 2);
            tr.appendChild(td);
            firstNode = false;
          }
          if (firstProc) {
            const td = h('td', 'dist-proc', proc);
            td.rowSpan = count(gpus, 1);
            tr.appendChild(td);
            firstProc = false;
          }
          if (i === 0) {
            const td = h('td', 'dist-gpu', gpu);
            td.rowSpan = entries.length;
            tr.appendChild(td);
          }
          tr.appendChild(h('td', 'dist-key', k));
          tr.appendChild(h('td', 'dist-value', fmt(v)));
          tbody.appendChild(tr);
        });
      }
    }
  }
  return table;
}

/// One stacked-column chart card with its own step select.
function stepChart(parent, payload, stepName, onStep) {
  const md = (payload && payload.metadata) || {};
  const c = card(md.title || '', 'dist-chart-card');
  parent.appendChild(c.card);
  const data = (payload && payload.data) || {};
  const steps = stepKeys(data);
  if (steps.length === 0) {
    c.body.appendChild(h('div', 'dist-note', 'No data.'));
    return () => {};
  }
  const select = labelledSelect(c.head, 'Step', steps, steps.includes(stepName) ? stepName : steps[0]);
  const box = h('div', 'dist-chart');
  c.body.appendChild(box);
  const legends = md.legends || [];
  const units = md.units || 'us';
  const draw = () => {
    box.textContent = '';
    const perWorker = data[select.value] || {};
    const workers = Object.keys(perWorker);
    box.dataset.workers = String(workers.length);
    const series = legends.map((name, i) => ({
      name,
      values: workers.map((w) => Number(perWorker[w][i]) || 0),
    }));
    stackedColumns(box, {
      title: '',
      categories: workers,
      series,
      yLabel: `Time (${units})`,
      height: 300,
      tooltipHtml: (si, ci) => {
        const w = workers[ci];
        const vals = perWorker[w] || [];
        const total = vals.reduce((a, b) => a + (Number(b) || 0), 0);
        const v = Number(vals[si]) || 0;
        const pct = total > 0 ? ((v / total) * 100).toFixed(2) : '0.00';
        return `<b>${escapeHtml(w)}</b><br>${escapeHtml(legends[si])}: ${fmt(v)} ${units}<br>${pct}%`;
      },
    });
  };
  select.addEventListener('change', () => {
    onStep(select.value);
    draw();
  });
  return draw;
}

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[ch]));
}

/// Renders the Distributed view into el.
export async function render(el, ctx) {
  el.textContent = '';
  const root = h('div', 'dist-view');
  el.appendChild(root);
  const status = h('div', 'dist-note', 'Loading distributed data…');
  root.appendChild(status);
  const p = { worker: 'All' };
  // The Ranks section is asked for at once, with the panels: the server computes it (the job
  // view over every rank) while it computes theirs.
  const ranks = ctx.api('distributed/ranks', p);
  ranks.catch(() => {});  // (shown by the section)
  const [gpuinfo, overlap, waittime, commops] = await Promise.all([
    ctx.api('distributed/gpuinfo', p),
    ctx.api('distributed/overlap', p),
    ctx.api('distributed/waittime', p),
    ctx.api('distributed/commops', p),
  ]);
  status.remove();
  const hash = ctx.hash || {};

  if (gpuinfo && gpuinfo.data && Object.keys(gpuinfo.data).length) {
    const c = card((gpuinfo.metadata && gpuinfo.metadata.title) || 'Device Information', 'dist-devices-card');
    c.body.appendChild(deviceTable(gpuinfo.data));
    root.appendChild(c.card);
  }

  const charts = h('div', 'dist-charts');
  root.appendChild(charts);
  // Both cards exist before either chart is drawn, so each measures its final width.
  const draws = [
    stepChart(charts, overlap, hash.overlap_step, (s) => ctx.setHash && ctx.setHash({ overlap_step: s })),
    stepChart(charts, waittime, hash.wait_step, (s) => ctx.setHash && ctx.setHash({ wait_step: s })),
  ];
  for (const draw of draws) draw();

  const opsData = (commops && commops.data) || {};
  const workers = Object.keys(opsData);
  const c = card((commops && commops.metadata && commops.metadata.title) || 'Communication Operations Stats', 'dist-ops-card');
  root.appendChild(c.card);
  if (workers.length === 0) {
    c.body.appendChild(h('div', 'dist-note', 'No communication operations in this profile.'));
    ranksSection(root, ctx, ranks);
    return undefined;
  }
  const select = labelledSelect(c.head, 'Worker', workers, hash.comm_worker);
  const box = h('div', 'dist-ops');
  c.body.appendChild(box);
  const draw = () => {
    box.textContent = '';
    const t = opsData[select.value] || { columns: [], rows: [] };
    const columns = (t.columns || []).map((col, i) => ({
      key: `c${i}`,
      title: col.name,
      type: col.type === 'number' ? 'number' : 'string',
      format: col.type === 'number' ? fmt : undefined,
    }));
    const rows = (t.rows || []).map((r) => Object.fromEntries(r.map((v, i) => [`c${i}`, v])));
    const totalIdx = (t.columns || []).findIndex((col) => col.name.startsWith('Total Latency'));
    createTable(box, {
      columns,
      rows,
      sort: totalIdx >= 0 ? { key: `c${totalIdx}`, desc: true } : undefined,
      pageSize: 30,
      csvName: `communication_ops_${select.value}.csv`,
    });
  };
  select.addEventListener('change', () => {
    if (ctx.setHash) ctx.setHash({ comm_worker: select.value });
    draw();
  });
  draw();
  ranksSection(root, ctx, ranks);
  return undefined;
}

/// The job view's Ranks section, below the plugin's panels, from its request already made
/// (`pending`); the panels do not wait for it.
function ranksSection(root, ctx, pending) {
  const box = h('div', 'ranks-box');
  root.appendChild(box);
  renderRanks(box, ctx, pending).catch((e) => {
    box.appendChild(h('div', 'dist-note', `Could not show the ranks: ${e && e.message ? e.message : e}`));
  });
}
