// SPDX-License-Identifier: BSD-3-Clause
// Browser checks of issue 15's "progress and recommendations": the landing page (no hash) opens
// the run with the newest trace file, which /api/runs names `latest`. Called by browser.mjs with
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
}
