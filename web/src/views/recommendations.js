// SPDX-License-Identifier: BSD-3-Clause
// Recommendations (our page, not in the plugin): every finding of /api/recommendations as a
// card with its text, the numbers behind it (named, in units), and a link to the view state that
// shows it (the finding's `target`: a Trace window, a kernel, a memory device, or a view).
import { createTable } from '../components/table.js';
import { h } from '../components/controls.js';
import { formatBytes, formatDuration } from '../components/units.js';

// Which view shows the evidence of a finding, by words of its title and text; first match wins.
const RELATED = [
  [/data ?loader|input data/i, 'Overview'],
  [/tensor core|mixed precision/i, 'Kernel'],
  [/\bmemory\b|out of memory/i, 'Memory'],
  [/DataParallel|\bDDP\b|NCCL|communicat|gradient compression/i, 'Distributed'],
  [/synchroni|idle|gap/i, 'Trace'],
  [/launch|runtime|kernel/i, 'Kernel'],
  [/utili[sz]ation/i, 'Overview'],
];

/// The view a finding relates to among `views` (the run's views), or 'Operator'.
export function relatedView(finding, views) {
  const text = `${finding.title || ''} ${finding.text || ''}`;
  for (const [re, view] of RELATED) {
    if (re.test(text) && views.includes(view)) return view;
  }
  return views.includes('Operator') ? 'Operator' : 'Overview';
}

const LABELS = { Kernel: 'GPU Kernel' };

// The measures of /api/recommendations' `numbers`, by key: a human name and a formatter.
const pct = (v) => `${Number(v).toLocaleString('en-US', { maximumFractionDigits: 2 })}%`;
const ratio = (v) => pct(100 * Number(v));
const count = (v) => Number(v).toLocaleString('en-US');
const MEASURES = {
  avg_step_us: ['Average step time', formatDuration],
  avg_dataloader_us: ['Average DataLoader time per step', formatDuration],
  dataloader_pct: ['DataLoader share of the step', pct],
  avg_communication_us: ['Average communication time per step', formatDuration],
  communication_pct: ['Communication share of the step', pct],
  avg_runtime_us: ['Average CUDA runtime time per step', formatDuration],
  runtime_pct: ['CUDA runtime share of the step', pct],
  threshold_pct: ['Threshold', pct],
  devices: ['Devices used', count],
  world_size: ['World size', (v) => (v < 0 ? 'unknown' : count(v))],
  kernels: ['Kernels', count],
  tensor_core_kernel_ratio: ['Kernel time on Tensor Cores', ratio],
  eligible_op_kernel_ratio: ['Kernel time of Tensor Core eligible operators', ratio],
};

/// [name, formatted value] of one measure (keys with a device in them are spelled out).
export function describeMeasure(key, value) {
  if (Array.isArray(value)) return [key, value.join(', ')];
  if (MEASURES[key]) return [MEASURES[key][0], value === null ? '' : MEASURES[key][1](value)];
  let m = /^gpu(\d+)_utilization_pct$/.exec(key);
  if (m) return [`GPU ${m[1]} utilization`, pct(value)];
  m = /^(.+)_peak_allocated_bytes$/.exec(key);
  if (m) return [`${m[1]} peak allocated memory`, formatBytes(value)];
  m = /^(.+)_capacity_bytes$/.exec(key);
  if (m) return [`${m[1]} memory capacity`, formatBytes(value)];
  // Unknown keys: words from the key, the unit from its suffix.
  const words = key.replace(/_(us|pct|bytes)$/, '').replace(/_/g, ' ');
  const name = words.charAt(0).toUpperCase() + words.slice(1);
  if (typeof value !== 'number') return [name, String(value ?? '')];
  if (key.endsWith('_us')) return [name, formatDuration(value)];
  if (key.endsWith('_pct')) return [name, pct(value)];
  if (key.endsWith('_bytes')) return [name, formatBytes(value)];
  return [name, count(value)];
}

/// The URL hash (without '#') of the view state that shows a finding: its target's view and
/// state, on the current run/worker/span; a view the run lacks falls back to relatedView().
export function targetHash(finding, ctx, views) {
  const t = finding.target && typeof finding.target === 'object' ? finding.target : null;
  const q = new URLSearchParams({ run: ctx.run, worker: ctx.worker, span: ctx.span });
  if (t && views.includes(t.view)) {
    q.set('view', t.view);
    for (const [k, v] of Object.entries(t.state || {})) q.set(k, String(v));
  } else {
    q.set('view', relatedView(finding, views));
  }
  // The rule set the finding was computed with, so the link (opened anywhere) shows the same numbers.
  if (ctx.rules) q.set('rules', ctx.rules);
  return q.toString();
}

/// The link's words: what the state shows.
function linkText(finding, view) {
  const t = finding.target || {};
  const label = LABELS[view] || view;
  if (t.kind === 'trace' && t.view === view && typeof t.start_us === 'number') {
    const gpu = typeof t.device === 'number' ? ` on GPU ${t.device}` : '';
    return `Show the ${formatDuration(t.end_us - t.start_us)} stretch${gpu} in the ${label} \u2192`;
  }
  if (t.kind === 'kernel' && t.view === view && t.kernel) return `Show kernel ${t.kernel} in ${label} \u2192`;
  if (t.kind === 'memory' && t.view === view && t.device) return `Show ${t.device} in ${label} \u2192`;
  return `Open ${label} \u2192`;
}

/// Renders the Recommendations page.
export async function render(el, ctx) {
  const [findings, views] = await Promise.all([
    ctx.api('recommendations'),
    ctx.api('views', { run: ctx.run }).catch(() => ['Overview', 'Operator']),
  ]);
  el.textContent = '';
  const list = Array.isArray(findings) ? findings : [];
  el.append(h('div', 'kt-muted kt-small',
    list.length ? `${list.length} finding${list.length === 1 ? '' : 's'} for ${ctx.run} / ${ctx.worker} / span ${ctx.span}.`
      : `No findings for ${ctx.run} / ${ctx.worker} / span ${ctx.span}: no rule's threshold was crossed.`));
  for (const f of list) {
    const card = h('section', 'kt-card kt-finding');
    card.append(h('h2', 'kt-card-title', f.title || 'Finding'));
    card.append(h('p', 'kt-finding-text', f.text || ''));
    const nums = f.numbers && typeof f.numbers === 'object' ? Object.entries(f.numbers) : [];
    if (nums.length) {
      const box = h('div', 'kt-finding-numbers');
      createTable(box, {
        columns: [
          { key: 'name', title: 'Measure', type: 'string' },
          { key: 'value', title: 'Value', type: 'string' },
        ],
        rows: nums.map(([key, value]) => {
          const [name, shown] = describeMeasure(key, value);
          return { name, value: shown };
        }),
        pageSize: 10,
        csvName: 'recommendation.csv',
      });
      card.append(box);
    }
    const hash = targetHash(f, ctx, views);
    const view = new URLSearchParams(hash).get('view');
    // A plain link to the state: the app follows the hash (and it can be opened in a new tab).
    const link = h('a', 'kt-finding-link', linkText(f, view));
    link.href = `#${hash}`;
    if (f.target && f.target.kind) link.dataset.target = f.target.kind;
    card.append(link);
    el.append(card);
  }
}
