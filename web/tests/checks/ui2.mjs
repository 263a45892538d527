// SPDX-License-Identifier: BSD-3-Clause
// Browser checks of issue 15's "progress and recommendations": the landing page (no hash) opens
// the run with the newest trace file, which /api/runs names `latest`; recommendations link to the
// view state that shows them. Called by browser.mjs with
// its context (see there); browser.mjs dates every trace file back but those of ctx.latestRun.

export async function run(ctx) {
  const { page, base, check, getJson, waitFor, shot, opts, latestRun } = ctx;

  // ---------------------------------------------------------------------------------------
  // Issue 15 item 6: the landing page opens the most recent run.
  const runs = await getJson(base, 'runs');
  check(runs.latest === latestRun, `/api/runs names the run with the newest trace file as latest (${runs.latest}, want ${latestRun})`);
  check(runs.runs[0] !== latestRun, `the newest run is not the first by name (${runs.runs[0]}), so the landing choice is seen`);
  const discovered = (runs.discovered || []).map((d) => `${d.run}:${d.state}`);
  check(runs.runs.every((r) => discovered.includes(`${r}:loaded`)),
    `/api/runs lists every loaded run among the discovered ones (${discovered.join(', ')})`);
  check(runs.progress && runs.progress.current_file === null, `no file is being loaded once idle (${runs.progress && runs.progress.current_file})`);

  await page.goto('about:blank');
  await page.goto(base, { waitUntil: 'load' });
  const landed = await waitFor(page, () => {
    const q = new URLSearchParams(location.hash.replace(/^#/, ''));
    const select = document.querySelector('select[aria-label="Runs"]');
    if (!q.get('run') || !q.get('view') || !select) return null;
    return { run: q.get('run'), view: q.get('view'), selected: select.value,
      disabled: [...select.options].filter((o) => o.disabled).length };
  }, null);
  check(landed && landed.run === latestRun && landed.selected === latestRun,
    `the landing page opens the most recent run ${latestRun} (hash run=${landed && landed.run}, select ${landed && landed.selected})`);
  check(landed && landed.disabled === 0, `no run is marked loading once everything loaded (${landed && landed.disabled})`);
  await shot(page, opts.out, 'landing.png');

  await runRecommendations(ctx);
}

// Issue 15 item 5: each recommendation links to the exact view state that shows it, and its
// measures have human names and units.
export async function runRecommendations(ctx) {
  const { page, base, check, getJson, waitFor, open, sel, shot, opts } = ctx;
  const ov = await sel('resnet50_v100', 'Overview');
  const q = `run=${encodeURIComponent(ov.run)}&worker=${encodeURIComponent(ov.worker)}&span=${encodeURIComponent(ov.span)}`;
  const recs = await getJson(base, `recommendations?${q}`);
  const idle = recs.find((r) => r.target && r.target.kind === 'trace' && /is idle for/.test(r.text));
  check(!!idle, `resnet50_v100 span ${ov.span} has an idle-GPU finding with a Trace target (${recs.map((r) => r.target && r.target.kind).join(', ')})`);
  const loader = recs.find((r) => r.numbers && typeof r.numbers.avg_step_us === 'number');
  await open({ ...ov, view: 'Recommendations' });
  const cards = await waitFor(page, () => {
    const list = [...document.querySelectorAll('.kt-finding')];
    if (!list.length) return null;
    return list.map((c) => ({
      title: c.querySelector('.kt-card-title').textContent,
      text: c.querySelector('.kt-finding-text').textContent,
      href: c.querySelector('.kt-finding-link') && c.querySelector('.kt-finding-link').getAttribute('href'),
      link: c.querySelector('.kt-finding-link') && c.querySelector('.kt-finding-link').textContent,
      cells: [...c.querySelectorAll('.kt-table-grid tbody tr')].map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent.trim())),
    }));
  }, null);
  check(cards && cards.length === recs.length, `Recommendations: one card per finding (${cards && cards.length} of ${recs.length})`);
  const all = JSON.stringify(cards || []);
  check(!/_us\b|_pct\b|avg_step/.test(all), 'Recommendations: no raw measure keys (avg_step_us, ..._pct) on the page');
  if (loader) {
    const card = (cards || []).find((c) => c.text === loader.text);
    const row = card && card.cells.find((r) => r[0] === 'Average step time');
    const want = loader.numbers.avg_step_us >= 1000 ? `${Math.round(loader.numbers.avg_step_us / 1000)} ms` : null;
    check(row && row[1] === want, `Recommendations: "Average step time" reads ${want} (${row && row[1]})`);
    const share = card && card.cells.find((r) => r[0] === 'DataLoader share of the step');
    check(share && share[1] === `${loader.numbers.dataloader_pct}%`, `Recommendations: DataLoader share in percent (${share && share[1]})`);
  }
  if (!idle) return;
  const idleCard = (cards || []).find((c) => c.text === idle.text);
  const params = new URLSearchParams(((idleCard && idleCard.href) || '').replace(/^#/, ''));
  check(params.get('view') === 'Trace' && params.get('t0') === String(idle.target.state.t0) && params.get('t1') === String(idle.target.state.t1)
    && params.get('run') === ov.run && params.get('span') === ov.span,
  `Recommendations: the idle-GPU card links to the Trace window t0=${idle.target.state.t0}, t1=${idle.target.state.t1} (${idleCard && idleCard.href})`);
  // Following the link opens the Trace view on that window.
  await page.click(`.kt-finding-link[href="${idleCard.href}"]`);
  const shown = await waitFor(page, () => {
    const h = new URLSearchParams(location.hash.replace(/^#/, ''));
    const c = [...document.querySelectorAll('canvas')].find((x) => Number(x.dataset.slices) > 0);
    return h.get('view') === 'Trace' && c ? { t0: Number(h.get('t0')), t1: Number(h.get('t1')), slices: Number(c.dataset.slices) } : null;
  }, null);
  const span = idle.target.state.t1 - idle.target.state.t0;
  check(shown && Math.abs(shown.t0 - idle.target.state.t0) <= span * 0.01 && Math.abs(shown.t1 - idle.target.state.t1) <= span * 0.01,
    `Recommendations: the link opens the Trace view on the idle stretch (${shown && `${shown.t0}..${shown.t1}`}, want ${idle.target.state.t0}..${idle.target.state.t1})`);
  await shot(page, opts.out, 'recommendation-trace.png');
}
