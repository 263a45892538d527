// SPDX-License-Identifier: BSD-3-Clause
// Recommendations (our page, not in the plugin): every finding of /api/recommendations as a
// card with its text, the numbers behind it, and a link to the view where it can be examined.
import { createTable } from '../components/table.js';
import { h } from '../components/controls.js';

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
          { key: 'value', title: 'Value', type: typeof nums[0][1] === 'number' ? 'number' : 'string' },
        ],
        rows: nums.map(([name, value]) => ({ name, value: Array.isArray(value) ? value.join(', ') : value })),
        pageSize: 10,
        csvName: 'recommendation.csv',
      });
      card.append(box);
    }
    const view = relatedView(f, views);
    const link = h('a', 'kt-finding-link', `Open ${LABELS[view] || view} \u2192`);
    link.href = '#';
    link.addEventListener('click', (e) => {
      e.preventDefault();
      ctx.navigate({ run: ctx.run, worker: ctx.worker, span: ctx.span, view });
    });
    card.append(link);
    el.append(card);
  }
}
