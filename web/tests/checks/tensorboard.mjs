// SPDX-License-Identifier: BSD-3-Clause
// Browser check of issue 31's TensorBoard tab (python/kinetoscope/tensorboard_plugin.py): a real
// TensorBoard from the project's venv (.venv/bin/python tests/python/run_tensorboard.py: its own
// plugins plus kinetoscope's, loaded from python/ without installing it) on a temporary logdir
// holding the H200 traces resnet18 (one worker, recorded with profile_memory and with_modules:
// Memory and Module views) and ddp_gloo (two gloo ranks: the Distributed view), in front of the
// kinetoscope under test (--kinetoscope_bin). Its URL for the plugin's tab,
// http://127.0.0.1:PORT/#kinetoscope, must show the tab "PyTorch Profiler" and, two frames down
// (TensorBoard's data/plugin_entry.html?name=kinetoscope, then the plugin's iframe on
// data/plugin/kinetoscope/index.html), kinetoscope's Overview with its "Average Step Time" row,
// filling the tab. Then every view the app offers for each run (api/views, asked from the frame,
// plus Recommendations) is opened in that frame by its hash and must draw what it draws in
// web/tests/browser.mjs, with no error box. Skipped (said, not failed) when .venv/bin/python
// cannot import tensorboard; tests/python/test_tensorboard_plugin.py checks the routes.
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const PYTHON = join(REPO, '.venv', 'bin', 'python');
const LAUNCHER = join(REPO, 'tests', 'python', 'run_tensorboard.py');
const H200 = join(REPO, 'tests', 'data', 'gpu', 'pytorch-2.11-h200');
/// The runs of the logdir (folders of H200) and the views each must offer (api/views), so that
/// every view of the app is checked in the tab: Memory and Module from resnet18, Distributed
/// from ddp_gloo.
const RUNS = { resnet18: ['Memory', 'Module'], ddp_gloo: ['Distributed'] };
/// The view the app adds to every run's list (web/src/main.js).
const RECOMMENDATIONS = 'Recommendations';
/// What shows that a view failed: main.js's error box, the Memory view's and the timeline's own.
const ERROR_BOXES = '.kt-error-box, .mem-error, .ks-tl-status-error';
const TIMEOUT_MS = 60000;

/// Resolves with the URL the TensorBoard process `tb` prints (no trailing slash).
function startTensorBoard(tb) {
  return new Promise((resolveUrl, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`TensorBoard printed no URL in 90 s; stderr: ${err.slice(-2000)}`)), 90000);
    const scan = () => {
      const m = /TensorBoard \S+ at (http:\/\/\S+?)\/? /.exec(out);
      if (m) {
        clearTimeout(timer);
        resolveUrl(m[1]);
      }
    };
    // The URL line goes to stdout or stderr depending on TensorBoard's logging setup.
    tb.stdout.on('data', (d) => { out += d; scan(); });
    tb.stderr.on('data', (d) => {
      err += d;
      if (err.length > 20000) err = err.slice(-10000);
      if (!/TensorBoard \S+ at /.test(out)) { out += d; scan(); }
    });
    tb.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`TensorBoard exited (${code ?? signal}) before printing its URL; stderr: ${err.slice(-2000)}`));
    });
  });
}

/// The first frame of `page` whose URL satisfies `test`, polled until the timeout; or null.
async function waitForFrame(page, test, timeout = TIMEOUT_MS) {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    const f = page.frames().find((x) => test(x.url()));
    if (f) return f;
    await page.waitForTimeout(200);
  }
  return null;
}

async function evaluateIn(frame, fn, arg, timeout = TIMEOUT_MS) {
  try {
    const handle = await frame.waitForFunction(fn, arg, { timeout, polling: 200 });
    return await handle.jsonValue();
  } catch (e) {
    if (/Timeout/i.test(String(e && e.message))) return null;
    throw e;
  }
}

/// What each view draws (web/tests/browser.mjs waits for the same), as [what, fn, arg, say]:
/// fn(arg) runs in the app's frame and is truthy once the view is drawn; say(value) is the account
/// of it for the check's line. `tableRowsJs` is browser.mjs's (ctx.tableRowsJs). A view the app
/// lists that is missing here fails its check.
function viewMarkers(tableRowsJs) {
  const rows = (v) => v && `${v.length} rows, first: ${v[0].slice(0, 3).join(' | ')}`;
  return {
    Overview: ['the "Average Step Time" row', () => {
      const tr = [...document.querySelectorAll('.kt-view-body tr')].find((t) => /Average Step Time/.test(t.textContent));
      return tr && [...tr.querySelectorAll('td')].some((td) => /\d/.test(td.textContent)) ? tr.textContent.trim() : null;
    }, null, (v) => v],
    Operator: ['operator table rows', tableRowsJs, '.kt-view-body', rows],
    Kernel: ['kernel table rows', tableRowsJs, '.kt-view-body', rows],
    Trace: ['a canvas drawing slices on tracks (data-slices, data-tracks)', () => {
      const c = [...document.querySelectorAll('canvas')].find((x) => Number(x.dataset.slices) > 0 && Number(x.dataset.tracks) > 0);
      return c ? `${c.dataset.slices} slices on ${c.dataset.tracks} tracks` : null;
    }, null, (v) => v],
    Memory: ['the curve (.mem-chart data-points), the events and the statistics tables', () => {
      const count = (scope) => {
        const t = document.querySelector(`${scope} .kt-table-grid tbody`);
        return t ? [...t.querySelectorAll('tr')].filter((r) => r.querySelectorAll('td').length > 1).length : 0;
      };
      const chart = document.querySelector('.mem-chart');
      const points = chart && chart.querySelector('.uplot canvas') ? Number(chart.dataset.points) : 0;
      const events = count('.mem-events');
      const stats = count('.mem-stats');
      return points > 0 && events > 0 && stats > 0 ? `${points} points, ${events} event rows, ${stats} statistics rows` : null;
    }, null, (v) => v],
    Distributed: ['both charts (.dist-chart with .kt-bar) and the communication ops table', () => {
      const charts = [...document.querySelectorAll('.dist-chart')];
      const t = document.querySelector('.dist-ops .kt-table-grid tbody');
      const ops = t ? [...t.querySelectorAll('tr')].filter((r) => r.querySelectorAll('td').length > 1).length : 0;
      return charts.length === 2 && charts.every((c) => c.querySelector('.kt-bar')) && ops > 0
        ? `charts of ${charts.map((c) => c.dataset.workers).join(' and ')} workers, ${ops} ops rows` : null;
    }, null, (v) => v],
    Module: ['the flame graph (.mod-flame data-frames), the module table and the timeline', () => {
      const f = document.querySelector('.mod-flame');
      const tl = document.querySelector('.mod-timeline');
      const n = document.querySelectorAll('.mod-view .kt-table-grid tbody tr').length;
      return f && Number(f.dataset.frames) > 0 && n > 0 && tl && Number(tl.dataset.drawn) > 0
        ? `${f.dataset.frames} frames, ${n} table rows, ${tl.dataset.drawn} timeline bars` : null;
    }, null, (v) => v],
    [RECOMMENDATIONS]: ['the findings (or that there are none)', () => {
      const body = document.querySelector('.kt-view-body');
      const head = body && body.querySelector('.kt-muted');
      const titles = body ? [...body.querySelectorAll('.kt-finding .kt-card-title')].map((e) => e.textContent) : [];
      return head && /finding/i.test(head.textContent) ? `${head.textContent} ${titles.join('; ')}`.trim() : null;
    }, null, (v) => v],
  };
}

/// The JSON of the app's API route `route` (relative: data/plugin/kinetoscope/api/...), asked from
/// the app's frame as the app asks it.
async function apiIn(app, route) {
  return app.evaluate(async (r) => {
    const res = await fetch(r);
    return res.ok ? res.json() : { error: `HTTP ${res.status} ${await res.text()}` };
  }, route);
}

/// Waits until the engine behind the app has loaded every run of `runs` (api/runs, asked from the
/// app's frame): the app opens a run by its hash only once it is loaded. The runs, or null after
/// the timeout.
async function loadedIn(app, runs, timeout = TIMEOUT_MS) {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    const st = await apiIn(app, 'api/runs');
    if (st && st.loading === false && runs.every((r) => (st.runs || []).includes(r))) return st.runs;
    await app.waitForTimeout(250);
  }
  return null;
}

/// The texts of the error boxes the app's frame shows (ERROR_BOXES), each cut to 300 characters.
async function errorBoxesIn(app) {
  return app.evaluate((sel) => [...document.querySelectorAll(sel)].map((e) => e.textContent.trim().slice(0, 300)), ERROR_BOXES);
}

/// Sets the app frame's location.hash to `hash` (of `state`: run, view, worker, span) and waits
/// until the app shows that view of that run: its run and view selects and the view's title say
/// so (main.js clears the view area when it sets the title, so nothing of the previous view is
/// left). True, or null after the timeout.
async function openInApp(app, hash, state) {
  await app.evaluate((h) => { location.hash = h; }, hash);
  return evaluateIn(app, (want) => {
    const run = document.querySelector('select[aria-label="Runs"]');
    const view = document.querySelector('select[aria-label="Views"]');
    const option = view && view.selectedOptions[0];
    const title = document.querySelector('.kt-view-title');
    return (run && run.value === want.run && view.value === want.view && option && title
      && title.textContent === option.textContent) || null;
  }, state);
}

/// Runs TensorBoard with the plugin on `logdir` (plus `flags`), opens its #kinetoscope URL in a
/// new page of `context` and calls fn(page, problems); TensorBoard is stopped on every path.
/// `problems` collects the failed requests, console errors and uncaught exceptions of the
/// plugin's own URLs (TensorBoard's page is not ours to judge).
async function withTensorBoard(context, tmp, logdir, flags, fn) {
  const tb = spawn(PYTHON, [LAUNCHER, '--logdir', logdir, '--host', '127.0.0.1', '--port', '0',
    '--load_fast=false', ...flags], {
    // The engine's index cache goes to the temporary folder, not the user's.
    env: { ...process.env, XDG_CACHE_HOME: join(tmp, 'cache'), PYTHONUNBUFFERED: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const killTb = () => {
    if (tb.exitCode === null && tb.signalCode === null) {
      try { tb.kill('SIGTERM'); } catch { /* gone */ }
    }
  };
  process.on('exit', killTb);
  let page = null;
  try {
    const url = await startTensorBoard(tb);
    page = await context.newPage();
    const problems = [];
    const ours = (u) => u.includes('/data/plugin/kinetoscope/') || u.includes('plugin_entry.html');
    page.on('response', (r) => { if (r.status() >= 400 && ours(r.url())) problems.push(`HTTP ${r.status()} for ${r.url()}`); });
    page.on('console', (msg) => {
      const where = msg.location() && msg.location().url;
      if (msg.type() === 'error' && where && ours(where)) problems.push(`console error: ${msg.text()} (${where})`);
    });
    // Uncaught exceptions of the app's scripts (their stacks name the plugin's URLs).
    page.on('pageerror', (e) => { if (ours(String(e && e.stack))) problems.push(`page error: ${e.message}`); });
    page.on('requestfailed', (r) => {
      const f = r.failure();
      if (ours(r.url()) && f && !/ERR_ABORTED/.test(f.errorText)) problems.push(`request failed: ${r.url()} ${f.errorText}`);
    });
    await page.goto(`${url}/#kinetoscope`, { waitUntil: 'load' });
    await fn(page, problems);
  } finally {
    if (page) await page.close();
    killTb();
    if (tb.exitCode === null && tb.signalCode === null) {
      await new Promise((r) => {
        const t = setTimeout(() => { try { tb.kill('SIGKILL'); } catch { /* gone */ } r(); }, 10000);
        tb.on('exit', () => { clearTimeout(t); r(); });
      });
    }
    process.off('exit', killTb);
  }
}

export async function run(ctx) {
  const { context, opts, check, shot, hashOf } = ctx;
  const markers = viewMarkers(ctx.tableRowsJs);
  if (!existsSync(PYTHON) || spawnSync(PYTHON, ['-c', 'import tensorboard'], { stdio: 'ignore' }).status !== 0) {
    console.log(`skip  TensorBoard tab: ${PYTHON} cannot import tensorboard (pip install -r requirements/peers.txt)`);
    return;
  }
  const missingRun = Object.keys(RUNS).find((r) => !existsSync(join(H200, r)));
  if (missingRun) {
    console.log(`skip  TensorBoard tab: no ${join(H200, missingRun)}`);
    return;
  }
  const tmp = mkdtempSync(join(tmpdir(), 'kinetoscope-tensorboard-'));
  const logdir = join(tmp, 'logdir');
  for (const r of Object.keys(RUNS)) cpSync(join(H200, r), join(logdir, r), { recursive: true });
  try {
    // The tab, the two frames, the Overview.
    await withTensorBoard(context, tmp, logdir, ['--kinetoscope_bin', opts.bin], async (page, problems) => {
      // innerText as shown: TensorBoard's CSS writes tab names in capitals.
      const tabShown = await evaluateIn(page, () => /pytorch profiler/i.test(document.body.innerText) || null, null);
      check(tabShown === true, 'TensorBoard: the "PyTorch Profiler" tab is shown');
      const entry = await waitForFrame(page, (u) => u.includes('/data/plugin_entry.html?name=kinetoscope'));
      check(entry !== null, `TensorBoard #kinetoscope: the plugin's frame data/plugin_entry.html?name=kinetoscope (${page.frames().map((f) => f.url()).join(', ')})`);
      const app = await waitForFrame(page, (u) => /\/data\/plugin\/kinetoscope\/index\.html(#.*)?$/.test(u));
      check(app !== null, 'TensorBoard #kinetoscope: an iframe opens the app at data/plugin/kinetoscope/index.html');
      if (app) {
        // The run it lands on is the first one loaded (the engine loads them while the tab opens).
        const landing = await evaluateIn(app, () => {
          const run = document.querySelector('select[aria-label="Runs"]');
          const tr = [...document.querySelectorAll('tr')].find((t) => /Average Step Time/.test(t.textContent));
          return tr && [...tr.querySelectorAll('td')].some((td) => /\d/.test(td.textContent)) ? { run: run && run.value, row: tr.textContent } : null;
        }, null);
        check(landing !== null, `TensorBoard #kinetoscope: kinetoscope's Overview${landing ? ` of ${landing.run}` : ''} shows "Average Step Time" (${landing && landing.row})`);
        // The app fills the tab: the plugin's frame is most of the viewport, the app all of it.
        const sizes = entry && await entry.evaluate(() => {
          const f = document.querySelector('iframe');
          const r = f && f.getBoundingClientRect();
          return { frame: [window.innerWidth, window.innerHeight], app: r ? [r.width, r.height] : null };
        });
        const vp = page.viewportSize();
        check(sizes && sizes.app && sizes.app[0] === sizes.frame[0] && sizes.app[1] === sizes.frame[1]
          && sizes.frame[0] > vp.width * 0.6 && sizes.frame[1] > vp.height * 0.6,
        `TensorBoard #kinetoscope: the app fills the tab (${JSON.stringify(sizes)} in ${vp.width}x${vp.height})`);
      }
      await shot(page, opts.out, 'tensorboard.png');

      // Every view of every run, in the tab: the app's frame follows its hash, as in a link.
      const loaded = app && await loadedIn(app, Object.keys(RUNS));
      check(loaded !== null, `TensorBoard #kinetoscope: the engine loaded the runs ${Object.keys(RUNS).join(', ')} (${JSON.stringify(loaded)})`);
      for (const [run, mustOffer] of app ? Object.entries(RUNS) : []) {
        const listed = await apiIn(app, `api/views?run=${encodeURIComponent(run)}`);
        check(Array.isArray(listed) && mustOffer.every((v) => listed.includes(v)),
          `TensorBoard #kinetoscope: ${run} offers the views ${mustOffer.join(', ')} (api/views: ${JSON.stringify(listed)})`);
        const views = Array.isArray(listed) ? [...listed, RECOMMENDATIONS] : [];
        for (const view of views) {
          const label = `TensorBoard #kinetoscope: ${run} ${view}`;
          const workerView = view === RECOMMENDATIONS ? 'Overview' : view;
          const workers = await apiIn(app, `api/workers?run=${encodeURIComponent(run)}&view=${encodeURIComponent(workerView)}`);
          const worker = Array.isArray(workers) ? workers[0] : undefined;
          const spans = worker === undefined ? null
            : await apiIn(app, `api/spans?run=${encodeURIComponent(run)}&worker=${encodeURIComponent(worker)}`);
          const state = { run, worker, span: Array.isArray(spans) ? spans[0] : undefined, view };
          const hash = hashOf(state);
          const opened = await openInApp(app, hash, state);
          const marker = markers[view];
          const shown = opened && marker ? await evaluateIn(app, marker[1], marker[2]) : null;
          const errors = await errorBoxesIn(app);
          check(shown !== null,
            `${label} (${hash}) shows ${marker ? marker[0] : 'a view this check has no marker for'}: ${
              !opened ? 'the app did not open it' : shown !== null ? marker[3](shown) : 'not shown'}${errors.length ? `; error box: ${errors.join(' | ')}` : ''}`);
          await shot(page, opts.out, `tensorboard-${run}-${view.toLowerCase()}.png`);
          // After the screenshot's pause: no error box came late (e.g. a table loaded after).
          const late = await errorBoxesIn(app);
          check(late.length === 0, `${label}: no error box (${late.join(' | ') || 'none'})`);
        }
      }
      check(problems.length === 0, `TensorBoard #kinetoscope: no failed request, console error or page error of the plugin (${problems.join(' | ') || 'none'})`);
    });

    // No engine (a --kinetoscope_bin that names no file): the tab says why, not a blank frame.
    const missing = join(tmp, 'no', 'kinetoscope');
    await withTensorBoard(context, tmp, logdir, ['--kinetoscope_bin', missing], async (page, problems) => {
      const entry = await waitForFrame(page, (u) => u.includes('/data/plugin_entry.html?name=kinetoscope'));
      const text = entry && await evaluateIn(entry, () => {
        const e = document.querySelector('.kinetoscope-error');
        return e && e.textContent ? document.body.innerText : null;
      }, null);
      check(text !== null && text.includes('not available') && text.includes(missing) && text.includes('no such file'),
        `TensorBoard #kinetoscope without an engine: the tab says why (${text && text.replace(/\s+/g, ' ')})`);
      check(problems.length === 0,
        `TensorBoard #kinetoscope without an engine: no failed request or console error (${problems.join(' | ') || 'none'})`);
      await shot(page, opts.out, 'tensorboard-no-engine.png');
    });
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
