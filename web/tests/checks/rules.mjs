// SPDX-License-Identifier: BSD-3-Clause
// The rule set toggle (docs/kinetoscope-rules.md): kinetoscope's own rules by default, the
// "torch-tb-profiler rules" toggle for torch-tb-profiler 0.4.3's. For both rule sets, on
// resnet50_v100 and (when tests/data has it) the H200 resnet18 run, the Overview's average step
// time and the GPU summary's "Kernel Time using Tensor Cores" on the page are what
// `kinetoscope analyze FILE --json` (kinetoscope's rules) and `... --plugin_rules` print; the
// toggle starts at the server's default (/api/status "rules"), flips the page between the two,
// makes every analysis request carry rules=<set>, shows a badge beside the view title, and is
// kept in the URL across a reload. Called by browser.mjs with its context (see there).
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const US = { ns: 0.001, 'µs': 1, ms: 1000, s: 1e6 };
const RULESETS = ['kinetoscope', 'plugin'];

/// "27.7 ms" -> 27700 (µs), or null when the text is not a duration.
function parseDuration(text) {
  const m = /^(-?[\d,]+(?:\.\d+)?) (ns|µs|ms|s)$/.exec(String(text ?? '').trim());
  return m ? Number(m[1].replace(/,/g, '')) * US[m[2]] : null;
}

/// "9.23 %" -> 9.23, or null.
function parsePercent(text) {
  const m = /^(-?\d+(?:\.\d+)?)\s*%$/.exec(String(text ?? '').trim());
  return m ? Number(m[1]) : null;
}

const close = (a, b, rel) => a !== null && b !== null && Math.abs(a - b) <= rel * Math.abs(b) + 1e-9;

/// What the Overview page shows now: the Execution Summary's "Average Step Time" duration, the
/// GPU summary's first "Kernel Time using Tensor Cores" value (null when there is no such row),
/// the toggle, the badge and the hash's rules; null until the Overview is drawn.
function pageStateJs() {
  const body = document.querySelector('.kt-view-body');
  const toggle = document.querySelector('input.kt-rules-toggle');
  const badge = document.querySelector('.kt-rules-badge');
  if (!body || !toggle || !badge) return null;
  let avg = null;
  for (const t of body.querySelectorAll('.kt-table-grid')) {
    const ths = [...t.querySelectorAll('thead th')];
    const col = ths.findIndex((th) => (th.querySelector('.kt-th-label') || th).textContent.trim() === 'Time Duration');
    const tr = [...t.querySelectorAll('tbody tr')].find((r) => r.querySelector('td')?.textContent.trim() === 'Average Step Time');
    if (col >= 0 && tr) avg = tr.querySelectorAll('td')[col]?.textContent.trim() ?? null;
  }
  if (avg === null) return null;
  const dt = [...body.querySelectorAll('.kt-gpu-kv dt')].find((d) => d.textContent.trim() === 'Kernel Time using Tensor Cores');
  return {
    avg,
    tc: dt && dt.nextElementSibling ? dt.nextElementSibling.textContent.trim() : null,
    gpuSummary: !!body.querySelector('.kt-gpu-kv'),
    checked: toggle.checked,
    badge: !badge.hidden && badge.getBoundingClientRect().width > 0,
    badgeText: badge.textContent,
    title: document.querySelector('.kt-view-title')?.textContent,
    tooltip: (toggle.closest('label') || toggle).title,
    hashRules: new URLSearchParams(location.hash.slice(1)).get('rules'),
  };
}

export async function run(ctx) {
  const { page, base, check, getJson, waitFor, open, sel, shot, opts } = ctx;
  const status = await getJson(base, 'status');
  // browser.mjs starts the server without --plugin_rules: kinetoscope's rules are its default.
  check(status.rules === 'kinetoscope', `/api/status names the server's default rule set, kinetoscope (${status.rules})`);
  const def = RULESETS.includes(status.rules) ? status.rules : 'kinetoscope';

  const runs = ['resnet50_v100', ...(opts.h200Run ? [opts.h200Run] : [])];
  check(!!opts.h200Run, `the logdir holds the H200 resnet18 run of tests/data (${opts.h200Run})`);

  // Only 'plugin' and 'kinetoscope' are rule sets: the API refuses anything else.
  const ov0 = await sel('resnet50_v100', 'Overview');
  const q0 = `run=resnet50_v100&worker=${encodeURIComponent(ov0.worker)}&span=${encodeURIComponent(ov0.span)}`;
  const bad = await fetch(new URL(`api/overview?${q0}&rules=tensorboard`, base));
  check(bad.status === 400, `/api/overview?rules=tensorboard is refused with 400 (${bad.status})`);

  /// `kinetoscope analyze FILE --json [--plugin_rules]`: {avg (µs), tc (% or null)}, or null.
  const analyze = (file, rules) => {
    const args = ['analyze', file, '--json', '--view', 'overview', '--no_cache', ...(rules === 'plugin' ? ['--plugin_rules'] : [])];
    const r = spawnSync(opts.bin, args, { encoding: 'utf8', timeout: 180000, maxBuffer: 256 * 1024 * 1024 });
    if (r.status !== 0) {
      check(false, `kinetoscope ${args.join(' ')} exits 0 (${r.status ?? r.signal}: ${(r.stderr || '').slice(0, 300)})`);
      return null;
    }
    try {
      const ov = JSON.parse(r.stdout).overview;
      const gpu = (ov.gpus || [])[0];
      return { avg: ov.average.total, tc: gpu && typeof gpu.tensor_cores_pct === 'number' ? gpu.tensor_cores_pct : null };
    } catch (e) {
      check(false, `kinetoscope ${args.join(' ')} prints the overview as JSON (${e.message})`);
      return null;
    }
  };

  /// Whether the page state `s` shows the numbers `want` ({avg, tc}).
  const shows = (s, want) => !!s && !!want && close(parseDuration(s.avg), want.avg, 0.006)
    && (want.tc === null ? s.tc === null : s.tc !== null && Math.abs(parsePercent(s.tc) - want.tc) <= 0.006);
  /// Waits until the page shows `want` with the toggle and the URL set for `rules` (or, with no
  /// `want`, any Overview so set); returns the page's state, what it shows at the timeout when it
  /// never does. Polled from here: the app's CSP forbids the eval a waitForFunction would need.
  const settle = async (want, rules) => {
    const deadline = Date.now() + 60000;
    for (;;) {
      const st = await page.evaluate(pageStateJs).catch(() => null);  // null while a page loads
      const set = st && st.checked === (rules === 'plugin') && st.hashRules === rules;
      if (set && (want ? shows(st, want) : true)) return st;
      if (Date.now() > deadline) return st;
      await page.waitForTimeout(250);
    }
  };
  const describe = (s) => (s ? `avg ${s.avg}, tensor cores ${s.tc}, toggle ${s.checked ? 'on' : 'off'}, badge ${s.badge ? 'shown' : 'hidden'}, hash rules=${s.hashRules}` : 'no Overview');
  const describeWant = (w) => (w ? `avg ${Math.round(w.avg)} µs, tensor cores ${w.tc === null ? 'none' : `${w.tc} %`}` : 'no analyze output');

  const wants = {};
  for (const runName of runs) {
    const s = await sel(runName, 'Overview');
    const file = status.files.find((f) => f.run === runName && f.worker === s.worker && f.span === s.span);
    if (!check(!!file, `${runName}: /api/status names the file of worker ${s.worker} span ${s.span}`)) continue;
    const path = join(opts.logdir, file.path);
    wants[runName] = {};
    for (const rules of RULESETS) {
      const want = analyze(path, rules);
      wants[runName][rules] = want;
      await open({ ...s, rules });
      const got = await settle(want, rules);
      check(shows(got, want),
        `${runName} (${rules} rules): the Overview shows what analyze${rules === 'plugin' ? ' --plugin_rules' : ''} prints (page: ${describe(got)}; analyze: ${describeWant(want)})`);
      check(got && got.checked === (rules === 'plugin') && got.badge === (rules === 'plugin') && got.hashRules === rules,
        `${runName} (${rules} rules): the toggle is ${rules === 'plugin' ? 'on' : 'off'}, the badge ${rules === 'plugin' ? 'shown' : 'hidden'}, the URL says rules=${rules} (${describe(got)})`);
    }
  }

  // The flip, on the run where the rule sets disagree (the H200 trace: K1's steps, K3's tensor
  // cores), else on resnet50_v100.
  const flipRun = opts.h200Run && wants[opts.h200Run] ? opts.h200Run : 'resnet50_v100';
  const w = wants[flipRun] || {};
  const other = def === 'plugin' ? 'kinetoscope' : 'plugin';
  if (flipRun === opts.h200Run) {
    check(w.kinetoscope && w.plugin && !close(w.kinetoscope.avg, w.plugin.avg, 0.01),
      `${flipRun}: the two rule sets give different average step times (K1: ${describeWant(w.kinetoscope)} vs ${describeWant(w.plugin)})`);
  }
  const s = await sel(flipRun, 'Overview');
  // No rules in the URL: the server's default, written into the URL.
  await open(s);
  const first = await settle(w[def], def);
  check(shows(first, w[def]) && first.checked === (def === 'plugin') && first.hashRules === def,
    `${flipRun}: without rules in the URL the page opens with the server's default (${def}) and writes it into the URL (${describe(first)})`);
  check(first && /kinetoscope-rules\.md/.test(first.tooltip) && /torch-tb-profiler 0\.4\.3/.test(first.tooltip),
    `the toggle's tooltip explains both settings (${first && first.tooltip})`);

  // Flipping the toggle: the page shows the other rule set's numbers, every analysis request
  // carries rules=<other>, and the view list and the selection are asked again.
  const requests = [];
  const onRequest = (r) => { if (/\/api\//.test(r.url())) requests.push(r.url()); };
  page.on('request', onRequest);
  await page.click('input.kt-rules-toggle');
  const flipped = await settle(w[other], other);
  for (let i = 0; i < 40 && !requests.some((u) => /\/api\/overview\?/.test(u)); i++) await page.waitForTimeout(250);
  page.off('request', onRequest);
  check(shows(flipped, w[other]) && flipped.checked === (other === 'plugin') && flipped.hashRules === other,
    `${flipRun}: the toggle flips the page to the ${other} rules' numbers and the URL to rules=${other} (${describe(flipped)}; want ${describeWant(w[other])})`);
  check(flipped && flipped.badge === (other === 'plugin') && (other !== 'plugin' || /torch-tb-profiler rules/.test(flipped.badgeText)),
    `${flipRun}: the "torch-tb-profiler rules" badge is ${other === 'plugin' ? 'shown' : 'hidden'} beside the title ${flipped && flipped.title}`);
  const routes = requests.map((u) => new URL(u)).map((u) => ({ route: u.pathname.replace(/^.*\/api\//, ''), rules: u.searchParams.get('rules') }));
  const analysis = routes.filter((r) => r.route !== 'status' && r.route !== 'runs');
  check(analysis.length > 0 && analysis.every((r) => r.rules === other),
    `after the flip every analysis request carries rules=${other} (${analysis.map((r) => `${r.route}:${r.rules}`).join(', ')})`);
  check(['views', 'workers', 'spans', 'overview'].every((name) => analysis.some((r) => r.route === name)),
    `the flip asks again for the views, workers, spans and the overview (${[...new Set(analysis.map((r) => r.route))].join(', ')})`);
  if (other === 'plugin') await shot(page, opts.out, 'rules-plugin.png');

  // The URL keeps the choice across a reload.
  await page.reload({ waitUntil: 'load' });
  const reloaded = await settle(w[other], other);
  check(shows(reloaded, w[other]) && reloaded.checked === (other === 'plugin') && reloaded.hashRules === other,
    `${flipRun}: after a reload the page keeps the ${other} rules (${describe(reloaded)})`);

  // And back.
  await page.click('input.kt-rules-toggle');
  const back = await settle(w[def], def);
  check(shows(back, w[def]) && back.checked === (def === 'plugin') && back.hashRules === def && back.badge === (def === 'plugin'),
    `${flipRun}: the toggle flips back to the ${def} rules (${describe(back)})`);
  if (def === 'plugin') await shot(page, opts.out, 'rules-plugin.png');

  // An in-app link without rules (a recommendation's, a straggler's) keeps the current set.
  await open({ ...s, rules: 'plugin' });
  await settle(w.plugin, 'plugin');
  await page.evaluate((hash) => { location.hash = hash; }, new URLSearchParams({ run: s.run, worker: s.worker, span: s.span, view: 'Overview' }).toString());
  const kept = await settle(w.plugin, 'plugin');
  check(kept && kept.checked && kept.hashRules === 'plugin',
    `a link without rules keeps the torch-tb-profiler rules (${describe(kept)})`);
}
