// SPDX-License-Identifier: BSD-3-Clause
// Overview: Configuration, GPU Summary, Execution Summary (table + donut), Step Time Breakdown
// (stacked columns), Performance Recommendation, and a Diagnostics line (/api/diagnostics).
import { createTable } from '../components/table.js';
import { donut, stackedColumns } from '../components/charts.js';
import './overview.css';
import { h } from '../components/dom.js';
import { formatDuration } from '../components/units.js';

const STEP_HELP = 'Kernel: GPU kernel execution time.\nMemcpy: GPU memory copy time.\n' +
  'Memset: GPU memory set time.\nCommunication: communication time.\nRuntime: CUDA runtime time on the host ' +
  '(e.g. cudaLaunchKernel).\nDataLoader: data loading time in the DataLoader.\nCPU Exec: host compute time, ' +
  'including every PyTorch operator.\nOther: the time not included in any of the above.';

function card(title, help) {
  const c = h('section', 'kt-card');
  const t = h('h2', 'kt-card-title', title);
  if (help) {
    const q = h('span', 'kt-help', '?');
    q.title = help;
    t.append(q);
  }
  c.append(t);
  return c;
}

/// Text of an HTML fragment (for tooltips given as HTML by the server).
function htmlToText(html) {
  const doc = new DOMParser().parseFromString(String(html), 'text/html');
  doc.querySelectorAll('br').forEach((b) => b.replaceWith('\n'));
  return doc.body.textContent || '';
}

/// Sanitises the server's recommendation HTML: keeps only list, text and link markup; links
/// open in a new tab with rel=noopener.
function safeHtml(html) {
  const doc = new DOMParser().parseFromString(String(html), 'text/html');
  const allowed = new Set(['UL', 'OL', 'LI', 'A', 'B', 'I', 'EM', 'STRONG', 'BR', 'P', 'CODE', 'SPAN', 'DIV']);
  const out = document.createDocumentFragment();
  const copy = (src, dst) => {
    for (const n of src.childNodes) {
      if (n.nodeType === Node.TEXT_NODE) {
        dst.append(n.textContent);
      } else if (n.nodeType === Node.ELEMENT_NODE) {
        if (!allowed.has(n.tagName)) { copy(n, dst); continue; }
        const e = document.createElement(n.tagName.toLowerCase());
        if (n.tagName === 'A') {
          const href = n.getAttribute('href') || '';
          if (/^https?:\/\//i.test(href)) {
            e.href = href;
            e.target = '_blank';
            e.rel = 'noopener noreferrer';
          }
        }
        copy(n, e);
        dst.append(e);
      }
    }
  };
  copy(doc.body, out);
  return out;
}

function configurationCard(env) {
  const c = card('Configuration');
  const dl = h('dl', 'kt-kv');
  for (const e of env || []) {
    dl.append(h('dt', '', e.title), h('dd', '', e.value));
  }
  c.append(dl);
  return c;
}

function gpuCard(gm) {
  const c = card(gm.title || 'GPU Summary', gm.tooltip ? htmlToText(gm.tooltip) : '');
  const dl = h('dl', 'kt-kv kt-gpu-kv');
  for (const row of gm.data || []) {
    const title = htmlToText(row.title ?? '');
    const value = htmlToText(row.value ?? '');
    if (/^<hr\s*\/?>$/i.test(String(row.title).trim()) || (!title.trim() && !value.trim())) {
      dl.append(h('hr', 'kt-kv-sep'));
    } else if (!value.trim()) {
      dl.append(h('div', 'kt-kv-head', title));
    } else {
      dl.append(h('dt', '', title), h('dd', '', value));
    }
  }
  c.append(dl);
  return c;
}

function executionCard(perf) {
  const c = card('Execution Summary');
  const body = h('div', 'kt-row');
  const rows = [];
  const queue = [...(perf || [])];
  while (queue.length) {          // breadth-first, as the plugin flattens it
    const n = queue.shift();
    rows.push(n);
    for (const k of n.children || []) queue.push(k);
  }
  const root = rows[0];
  const tableBox = h('div');
  createTable(tableBox, {
    columns: [
      { key: 'name', title: 'Category', type: 'string' },
      { key: 'value', title: 'Time Duration', type: 'number', format: (v) => formatDuration(Number(v)) },
      { key: 'extra', title: 'Percentage (%)', type: 'number' },
    ],
    rows,
    pageSize: 30,
    csvName: 'execution_summary.csv',
    rowClass: (r) => (r === root ? '' : 'kt-row-child'),
  });
  const pieBox = h('div');
  const children = root ? root.children || [] : [];
  // The centre is the table's first row (the whole step), labelled with its name.
  donut(pieBox, { items: children.map((k) => ({ name: k.name, value: Number(k.value) })), unit: 'us',
    total: root ? Number(root.value) : undefined, centreLabel: root ? root.name : undefined });
  body.append(tableBox, pieBox);
  c.append(body);
  return c;
}

function stepsCard(steps) {
  const c = card('Step Time Breakdown', STEP_HELP);
  const cols = (steps && steps.columns) || [];
  const rows = (steps && steps.rows) || [];
  const series = [];
  cols.forEach((col, i) => {
    if (i === 0 || col.role === 'tooltip' || col.type !== 'number') return;
    const tip = cols[i + 1] && cols[i + 1].role === 'tooltip' ? i + 1 : -1;
    series.push({ name: col.name, index: i, tip, values: rows.map((r) => Number(r[i]) || 0) });
  });
  stackedColumns(c, {
    categories: rows.map((r) => String(r[0])),
    series: series.map((s) => ({ name: s.name, values: s.values })),
    yLabel: 'Step Time (microseconds)',
    tooltipHtml: (si, ci) => {
      const s = series[si];
      if (s.tip < 0) return null;
      const frag = document.createElement('div');
      frag.append(safeHtml(rows[ci][s.tip]));
      return frag.innerHTML;
    },
    height: 300,
  });
  return c;
}

function recommendationCard(html) {
  const c = card('Performance Recommendation');
  const box = h('div', 'kt-recommendations');
  box.append(safeHtml(html || ''));
  c.append(box);
  return c;
}

function diagnosticsLine(d) {
  const line = h('div', 'kt-diagnostics kt-small kt-muted');
  line.append(h('b', '', 'Diagnostics: '));
  const parts = [];
  const a = d.attribution || {};
  if (typeof a.message === 'string' && a.message) parts.push(a.message);
  if (typeof a.kernels === 'number') {
    const attributed = a.kernels_attributed_to_operators ?? 0;
    const ratio = typeof a.kernel_attribution_ratio === 'number' ? ` (${(a.kernel_attribution_ratio * 100).toFixed(1)}%)` : '';
    parts.push(a.kernels ? `${attributed.toLocaleString('en-US')} of ${a.kernels.toLocaleString('en-US')} kernels attributed to operators${ratio}`
      : 'no GPU kernels in this profile');
    if (a.kernels_by_time_fallback) parts.push(`${a.kernels_by_time_fallback} attributed by time`);
  }
  if (typeof a.runtimes_dropped === 'number' && a.runtimes_dropped) parts.push(`${a.runtimes_dropped} runtime calls dropped`);
  const warnings = typeof d.warnings === 'number' ? d.warnings
    : d.warnings && typeof d.warnings === 'object' ? Object.values(d.warnings).reduce((s, v) => s + (Number(v) || 0), 0) : 0;
  parts.push(`${warnings} warning${warnings === 1 ? '' : 's'}`);
  if (typeof d.load_seconds === 'number') parts.push(`loaded in ${d.load_seconds.toFixed(2)} s`);
  line.append(parts.join(' \u00B7 '));
  const msgs = Array.isArray(d.messages) ? d.messages : [];
  if (msgs.length) line.title = msgs.slice(0, 20).join('\n');
  return line;
}

/// Renders the Overview of ctx's run/worker/span into el.
export async function render(el, ctx) {
  const [ov, diag] = await Promise.all([
    ctx.api('overview'),
    ctx.api('diagnostics').catch((e) => ({ error: e.message })),
  ]);
  el.textContent = '';
  const top = h('div', 'kt-overview-top');
  top.append(configurationCard(ov.environments));
  if (ov.gpu_metrics) top.append(gpuCard(ov.gpu_metrics));
  top.append(executionCard(ov.performance));
  top.classList.add(ov.gpu_metrics ? 'kt-with-gpu' : 'kt-no-gpu');
  el.append(top, stepsCard(ov.steps), recommendationCard(ov.recommendations));
  if (diag && !diag.error) el.append(diagnosticsLine(diag));
  else if (diag && diag.error) el.append(h('div', 'kt-small kt-muted', `Diagnostics unavailable: ${diag.error}`));
}
