// SPDX-License-Identifier: BSD-3-Clause
// Browser checks of the Distributed view's Ranks section (issue 16) on the 8-rank job browser.mjs
// writes with gen_dist_job (run "job"; what it injected is in ctx.opts.jobInjected): the heatmap
// canvas draws every rank × step cell, the metric select redraws it, the stragglers table lists
// the injected ranks and causes, the collectives table is sorted by skew, and a click on a
// straggler opens the Trace view of that worker zoomed to its step.

export async function run(ctx) {
  const { page, base, check, getJson, waitFor, open, shot, opts } = ctx;
  const views = await getJson(base, 'views?run=job');
  check(views.includes('Distributed'), `the generated job offers the Distributed view (${views.join(', ')})`);
  const spans = await getJson(base, 'spans?run=job&worker=All');
  const span = spans[0];
  const data = await getJson(base, `distributed/ranks?run=job&span=${encodeURIComponent(span)}&top=20`);
  check(data.ranks.length === 8 && data.steps.length === 8,
    `/api/distributed/ranks: 8 ranks x 8 steps (${data.ranks.length} x ${data.steps.length})`);
  check(data.metrics.length === 6 && data.metrics.every((m) => data.heatmaps[m].length === 8 && data.heatmaps[m].every((row) => row.length === 8)),
    `/api/distributed/ranks: six heatmaps of 8 x 8 cells (${data.metrics.join(', ')})`);
  check(data.collectives.matched_by === 'seq' && data.collectives.total === 8 * 9 && data.collectives.unmatched === 0,
    `/api/distributed/ranks: 72 collectives matched by Seq (${data.collectives.total}, ${data.collectives.matched_by}, ${data.collectives.unmatched} unmatched)`);
  const top = data.collectives.top;
  check(top.length === 20 && top.every((c, i) => i === 0 || c.skew_us <= top[i - 1].skew_us),
    `/api/distributed/ranks?top=20: 20 collectives, largest skew first (${top.map((c) => Math.round(c.skew_us)).join(', ')})`);
  // The generator's findings ("injected: rank 2 (node0_2) compute ... in steps 2") are reported.
  const injected = (opts.jobInjected || []).map((line) => {
    const m = /^injected: rank (\d+) \(\S+\) (compute|data loading|communication) .* in steps ([\d, ]+)$/.exec(line);
    return m ? m[3].split(', ').map((s) => `${m[1]}/${s}/${m[2]}`) : [];
  }).flat().sort();
  const found = data.stragglers.map((s) => `${s.rank}/${s.step_index}/${s.cause}`).sort();
  check(injected.length === 3 && JSON.stringify(found) === JSON.stringify(injected),
    `/api/distributed/ranks: the stragglers are exactly the injected ones (${found.join(' ')}; injected ${injected.join(' ')})`);

  await open({ run: 'job', worker: 'All', span, view: 'Distributed' });
  const drawn = await waitFor(page, () => {
    const c = document.querySelector('.ranks-canvas');
    const rows = [...document.querySelectorAll('.ranks-stragglers-card .kt-table-grid tbody tr')];
    return c && Number(c.dataset.cells) > 0 && rows.length ? { cells: Number(c.dataset.cells), width: c.width, stragglers: rows.length } : null;
  }, null);
  check(drawn && drawn.cells === 64 && drawn.width > 0 && drawn.stragglers === 3,
    `Ranks: the heatmap canvas draws 64 cells and the stragglers table has 3 rows (${JSON.stringify(drawn)})`);
  const colls = await waitFor(page, () => {
    const rows = [...document.querySelectorAll('.ranks-colls-card .kt-table-grid tbody tr')];
    return rows.length ? rows.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent.trim())) : null;
  }, null);
  check(colls && colls.length === 10 && colls[0][0].length > 0,
    `Ranks: the collectives table shows the top 10 by skew (${colls ? colls.length : 0} rows, first ${colls && colls[0].join(' | ')})`);
  // The metric select redraws the heatmap and lands in the URL.
  await page.selectOption('.ranks-metric', 'wait');
  const metric = await waitFor(page, () => (new URLSearchParams(location.hash.slice(1)).get('ranks_metric') === 'wait'
    && /^Wait:/.test(document.querySelector('.ranks-legend').textContent)) || null, null);
  check(metric === true, 'Ranks: choosing the Wait metric redraws the legend and records ranks_metric=wait in the URL');
  await shot(page, opts.out, 'distributed_ranks.png');

  // A straggler's worker link opens the Trace view of that worker and span on its step.
  const first = data.stragglers[0];
  await page.click('.ranks-stragglers-card .kt-table-grid tbody tr:first-child a.ranks-link');
  const trace = await waitFor(page, () => {
    const q = new URLSearchParams(location.hash.slice(1));
    return q.get('view') === 'Trace' && q.get('t0') ? { worker: q.get('worker'), span: q.get('span'), t0: Number(q.get('t0')), t1: Number(q.get('t1')) } : null;
  }, null);
  const sorted = [...data.stragglers].sort((a, b) => b.excess_us - a.excess_us);
  const want = sorted[0] || first;
  check(trace && trace.worker === want.worker && trace.span === span && Math.abs((trace.t1 - trace.t0) - (want.end - want.start)) < 1,
    `Ranks: the straggler link opens the Trace view of ${want.worker} on its step (${JSON.stringify(trace)})`);
}
