// SPDX-License-Identifier: BSD-3-Clause
// Browser check of issue 31's TensorBoard tab (python/kinetoscope/tensorboard_plugin.py): a real
// TensorBoard from the project's venv (.venv/bin/python tests/python/run_tensorboard.py: its own
// plugins plus kinetoscope's, loaded from python/ without installing it) on a temporary logdir
// holding the H200 resnet18 trace, in front of the kinetoscope under test (--kinetoscope_bin).
// Its URL for the plugin's tab, http://127.0.0.1:PORT/#kinetoscope, must show the tab "PyTorch
// Profiler" and, two frames down (TensorBoard's data/plugin_entry.html?name=kinetoscope, then the
// plugin's iframe on data/plugin/kinetoscope/index.html), kinetoscope's Overview with its
// "Average Step Time" row, filling the tab. Skipped (said, not failed) when .venv/bin/python
// cannot import tensorboard; tests/python/test_tensorboard_plugin.py checks the routes.
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const PYTHON = join(REPO, '.venv', 'bin', 'python');
const LAUNCHER = join(REPO, 'tests', 'python', 'run_tensorboard.py');
const TRACE = join(REPO, 'tests', 'data', 'gpu', 'pytorch-2.11-h200', 'resnet18');
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

/// Runs TensorBoard with the plugin on `logdir` (plus `flags`), opens its #kinetoscope URL in a
/// new page of `context` and calls fn(page, problems); TensorBoard is stopped on every path.
/// `problems` collects the failed requests and console errors of the plugin's own URLs
/// (TensorBoard's page is not ours to judge).
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
  const { context, opts, check, shot } = ctx;
  if (!existsSync(PYTHON) || spawnSync(PYTHON, ['-c', 'import tensorboard'], { stdio: 'ignore' }).status !== 0) {
    console.log(`skip  TensorBoard tab: ${PYTHON} cannot import tensorboard (pip install -r requirements/peers.txt)`);
    return;
  }
  if (!existsSync(TRACE)) {
    console.log(`skip  TensorBoard tab: no ${TRACE}`);
    return;
  }
  const tmp = mkdtempSync(join(tmpdir(), 'kinetoscope-tensorboard-'));
  const logdir = join(tmp, 'logdir');
  cpSync(TRACE, join(logdir, 'resnet18'), { recursive: true });
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
        const row = await evaluateIn(app, () => {
          const tr = [...document.querySelectorAll('tr')].find((t) => /Average Step Time/.test(t.textContent));
          return tr && [...tr.querySelectorAll('td')].some((td) => /\d/.test(td.textContent)) ? tr.textContent : null;
        }, null);
        check(row !== null, `TensorBoard #kinetoscope: kinetoscope's Overview of resnet18 shows "Average Step Time" (${row})`);
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
      check(problems.length === 0, `TensorBoard #kinetoscope: no failed request or console error of the plugin (${problems.join(' | ') || 'none'})`);
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
