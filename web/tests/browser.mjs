// SPDX-License-Identifier: BSD-3-Clause
// End-to-end browser test of the kinetoscope viewer: a real server on a temporary logdir (copies
// of real PyTorch traces plus a run recorded by the cnn_train sample and a small 8-rank job written
// by bench's gen_dist_job), every view opened in
// headless Debian chromium through playwright-core, checked the way a person would look at it,
// and screenshotted.
// The server runs with its default rule set (kinetoscope's, docs/kinetoscope-rules.md); checks that
// compare with torch-tb-profiler's golden numbers (../shared/expected) open their pages with
// rules=plugin in the URL (the web app's "torch-tb-profiler rules" toggle) and ask the API with
// rules=plugin; checks/rules.mjs checks the toggle itself.
//
//   node web/tests/browser.mjs --bin build/viewer/kinetoscope --sample build/samples/cnn_train \
//        --gen-dist-job build/bench/gen_dist_job --real-traces ../shared --out /tmp/screenshots
//
// Exits 0 when every check passed, 1 with one line per failed check otherwise, 2 on bad usage.
// The server is killed on every path (checks failing, exceptions, signals).
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
const require = createRequire(join(here, '..', 'package.json'));

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const RUNS = ['resnet50_v100', 'two_ranks', 'cpu_only', 'diff_base', 'diff_test'];
/// The run whose trace files are the newest (what the landing page opens).
const LATEST_RUN = 'diff_test';
/// A PyTorch 2.11 trace from an H200 (tests/data), where the two rule sets disagree (K1, K3 of
/// docs/kinetoscope-rules.md): checks/rules.mjs flips the page between them on it.
const H200_RUN = 'h200_resnet18';
const H200_TRACE = join(here, '..', '..', 'tests', 'data', 'gpu', 'pytorch-2.11-h200', 'resnet18');
/// The hash key and value that open a page with torch-tb-profiler's rules.
const PLUGIN = { rules: 'plugin' };
const VIEW_TIMEOUT_MS = 60000;

// ---------------------------------------------------------------------------------------------
// Arguments.

function usage(message) {
  console.error(`browser test: ${message}`);
  console.error('usage: node browser.mjs --bin KINETOSCOPE --sample CNN_TRAIN --gen-dist-job GEN_DIST_JOB --real-traces DIR --out DIR');
  process.exit(2);
}

function parseArgs(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const key = { '--bin': 'bin', '--sample': 'sample', '--gen-dist-job': 'genDistJob', '--real-traces': 'realTraces', '--out': 'out' }[a];
    if (!key) usage(`unknown argument ${a}`);
    if (i + 1 >= argv.length) usage(`${a} needs a value`);
    opts[key] = resolve(argv[++i]);
  }
  for (const [k, flag] of [['bin', 'bin'], ['sample', 'sample'], ['genDistJob', 'gen-dist-job'], ['realTraces', 'real-traces'], ['out', 'out']]) if (!opts[k]) usage(`--${flag} is required`);
  if (!existsSync(opts.bin)) usage(`no kinetoscope binary at ${opts.bin}`);
  if (!existsSync(opts.sample)) usage(`no cnn_train binary at ${opts.sample}`);
  if (!existsSync(opts.genDistJob)) usage(`no gen_dist_job binary at ${opts.genDistJob}`);
  if (!existsSync(join(opts.realTraces, 'traces'))) usage(`no traces/ under ${opts.realTraces}`);
  if (!existsSync(CHROMIUM)) usage(`${CHROMIUM} is missing (apt-get install chromium)`);
  return opts;
}

/// A small Kineto trace with nn.Module python_function events (none of the real traces has
/// module data): two steps of Net_0(Linear_0, ReLU_0, Dropout_0) and a top-level Loss_0.
function moduleTrace() {
  const ev = [];
  const op = (name, ts, dur, tid, ext, cat = 'cpu_op') =>
    ev.push({ ph: 'X', cat, name, pid: 1, tid, ts, dur, args: { 'External id': ext } });
  const py = (name, ts, dur, id, parent, moduleId = -1) => {
    const args = { 'Python id': id, 'Python parent id': parent < 0 ? null : parent };
    if (moduleId >= 0) args['Python module id'] = moduleId;
    ev.push({ ph: 'X', cat: 'python_function', name, pid: 1, tid: 1, ts, dur, args });
  };
  const launch = (ts, dur, ext, corr, kts, kdur) => {
    ev.push({ ph: 'X', cat: 'cuda_runtime', name: 'cudaLaunchKernel', pid: 1, tid: 1, ts, dur, args: { 'External id': ext, correlation: corr } });
    ev.push({ ph: 'X', cat: 'kernel', name: 'some_kernel', pid: 0, tid: 7, ts: kts, dur: kdur,
      args: { 'External id': ext, correlation: corr, device: 0, stream: 7 } });
  };
  py('train.py(1): <module>', 0, 2000, 0, -1);
  op('ProfilerStep#1', 0, 1000, 1, 1, 'user_annotation');
  py('nn.Module: Net_0', 100, 600, 1, 0, 100);
  py('nn.Module: Linear_0', 150, 290, 2, 1, 101);
  op('aten::linear', 200, 200, 1, 5);
  launch(250, 10, 5, 1, 500, 100);
  py('nn.Module: ReLU_0', 450, 150, 4, 1, 102);
  op('aten::relu', 460, 100, 1, 6);
  launch(470, 10, 6, 2, 610, 50);
  py('nn.Module: Dropout_0', 610, 40, 5, 1, 103);
  op('aten::dropout', 615, 25, 1, 7);
  py('nn.Module: Loss_0', 750, 30, 6, 0, 200);
  op('aten::mse_loss', 755, 15, 1, 8);
  op('ProfilerStep#2', 1000, 1000, 1, 20, 'user_annotation');
  py('nn.Module: Net_0', 1100, 400, 7, 0, 100);
  py('nn.Module: Linear_0', 1120, 180, 8, 7, 101);
  op('aten::linear', 1150, 100, 1, 21);
  launch(1160, 10, 21, 3, 1400, 20);
  py('nn.Module: ReLU_0', 1310, 90, 10, 7, 102);
  op('aten::relu', 1320, 60, 1, 22);
  launch(1330, 5, 22, 4, 1450, 10);
  py('nn.Module: Dropout_0', 1410, 30, 11, 7, 103);
  op('aten::dropout', 1415, 10, 1, 23);
  return JSON.stringify({ schemaVersion: 1, traceEvents: ev });
}

// ---------------------------------------------------------------------------------------------
// Check bookkeeping.

const failures = [];
let passed = 0;

function check(ok, what) {
  if (ok) {
    passed++;
    console.log(`ok    ${what}`);
  } else {
    failures.push(what);
    console.log(`FAIL  ${what}`);
  }
  return ok;
}

// ---------------------------------------------------------------------------------------------
// Server.

let server = null;
let tmp = null;

function killServer() {
  if (server && server.exitCode === null && server.signalCode === null) {
    try { server.kill('SIGKILL'); } catch { /* already gone */ }
  }
}

function cleanup() {
  killServer();
  if (tmp) {
    try { rmSync(tmp, { recursive: true, force: true }); } catch { /* best effort */ }
  }
}

process.on('exit', killServer);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    console.error(`browser test: ${sig}, stopping`);
    cleanup();
    process.exit(1);
  });
}

/// Starts `bin --logdir dir --port 0` and resolves with the URL it prints.
function startServer(bin, logdir) {
  return new Promise((resolveUrl, reject) => {
    server = spawn(bin, ['--logdir', logdir, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`the server printed no URL in 60 s; stdout: ${out} stderr: ${err}`)), 60000);
    const scan = () => {
      const m = /kinetoscope \S+ at (https?:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolveUrl(m[1].endsWith('/') ? m[1] : `${m[1]}/`);
      }
    };
    server.stdout.on('data', (d) => { out += d; scan(); });
    server.stderr.on('data', (d) => { err += d; if (err.length > 20000) err = err.slice(-10000); });
    server.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the server exited (${code ?? signal}) before printing its URL; stderr: ${err.slice(-2000)}`));
    });
  });
}

async function getJson(base, route) {
  const res = await fetch(new URL(`api/${route}`, base));
  if (!res.ok) throw new Error(`GET /api/${route}: HTTP ${res.status} ${await res.text()}`);
  return res.json();
}

async function waitLoaded(base, runs) {
  const deadline = Date.now() + 180000;
  let last = null;
  while (Date.now() < deadline) {
    last = await getJson(base, 'runs');
    if (!last.loading && runs.every((r) => last.runs.includes(r))) return last;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`the logdir did not finish loading in 180 s: ${JSON.stringify(last)}`);
}

// ---------------------------------------------------------------------------------------------
// Page helpers.

function hashOf(state) {
  return `#${new URLSearchParams(Object.entries(state).filter(([, v]) => v !== undefined && v !== null)).toString()}`;
}

/// Watches a page for console errors and page errors.
function watch(page, label, problems) {
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    const where = msg.location() && msg.location().url ? ` (${msg.location().url})` : '';
    problems.push(`${label}: console error: ${msg.text()}${where}`);
  });
  page.on('pageerror', (e) => problems.push(`${label}: page error: ${e.message}`));
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`${label}: HTTP ${r.status()} for ${r.url()}`);
  });
  page.on('requestfailed', (r) => {
    const f = r.failure();
    if (f && !/ERR_ABORTED/.test(f.errorText)) problems.push(`${label}: request failed: ${r.url()} ${f.errorText}`);
  });
}

/// Waits until fn(arg) is truthy in the page; returns its value, or null after the timeout.
async function waitFor(page, fn, arg, timeout = VIEW_TIMEOUT_MS) {
  try {
    const handle = await page.waitForFunction(fn, arg, { timeout, polling: 200 });
    return await handle.jsonValue();
  } catch (e) {
    if (/Timeout/i.test(String(e && e.message))) return null;
    throw e;
  }
}

/// Rows of the first table (components/table.js) inside `scope` (a CSS selector or null).
function tableRowsJs(scope) {
  const root = scope ? document.querySelector(scope) : document;
  if (!root) return null;
  const t = root.querySelector('.kt-table-grid tbody');
  if (!t) return null;
  const rows = [...t.querySelectorAll('tr')].filter((tr) => tr.querySelectorAll('td').length > 1);
  return rows.length ? rows.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent.trim())) : null;
}

async function shot(page, out, name) {
  await page.waitForTimeout(300);  // let charts finish their resize pass
  await page.screenshot({ path: join(out, name), fullPage: true });
}

// ---------------------------------------------------------------------------------------------
// The test.

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  mkdirSync(opts.out, { recursive: true });
  tmp = mkdtempSync(join(tmpdir(), 'kinetoscope-browser-'));
  const logdir = join(tmp, 'logdir');
  mkdirSync(logdir);
  for (const r of RUNS) cpSync(join(opts.realTraces, 'traces', r), join(logdir, r), { recursive: true });
  opts.logdir = logdir;
  opts.h200Run = existsSync(H200_TRACE) ? H200_RUN : null;
  if (opts.h200Run) cpSync(H200_TRACE, join(logdir, H200_RUN), { recursive: true });
  mkdirSync(join(logdir, 'modules'));
  writeFileSync(join(logdir, 'modules', 'worker0.pt.trace.json'), moduleTrace());

  // A run recorded by the sample: two trace files with memory events and a tfevents file.
  const rec = spawnSync(opts.sample, ['--logdir', logdir, '--run', 'cnn', '--steps', '12'], { encoding: 'utf8', timeout: 300000 });
  if (rec.status !== 0) throw new Error(`cnn_train failed (${rec.status ?? rec.signal}): ${rec.stderr}`);
  const cnnFiles = readdirSync(join(logdir, 'cnn'));
  check(cnnFiles.filter((f) => f.includes('.pt.trace.json')).length === 2 && cnnFiles.some((f) => f.startsWith('events.out.tfevents')),
    `cnn_train wrote 2 traces and an event file (${cnnFiles.join(', ')})`);

  // A distributed job of 8 ranks x 8 steps (about 0.3 MB per rank) with the generator's stragglers
  // (checks/ranks.mjs).
  const job = spawnSync(opts.genDistJob, [join(logdir, 'job'), '--ranks', '8', '--steps', '8', '--mb-per-rank', '1'],
    { encoding: 'utf8', timeout: 120000 });
  if (job.status !== 0) throw new Error(`gen_dist_job failed (${job.status ?? job.signal}): ${job.stderr}`);
  opts.jobInjected = job.stdout.split('\n').filter((l) => l.startsWith('injected: '));

  // The landing page opens the run with the newest trace file: every file is dated back, but
  // those of diff_test (not the first run by name) are the newest (checks/ui2.mjs).
  const old = new Date('2021-06-08T12:00:00Z');
  for (const run of readdirSync(logdir)) {
    for (const f of readdirSync(join(logdir, run))) utimesSync(join(logdir, run, f), old, old);
  }
  const newest = new Date('2021-06-09T12:00:00Z');
  for (const f of readdirSync(join(logdir, LATEST_RUN))) utimesSync(join(logdir, LATEST_RUN, f), newest, newest);

  const base = await startServer(opts.bin, logdir);
  console.log(`server at ${base}`);
  const allRuns = [...RUNS, 'cnn', 'modules', 'job', ...(opts.h200Run ? [opts.h200Run] : [])];
  await waitLoaded(base, allRuns);
  const status = await getJson(base, 'status');
  check(status.files.every((f) => f.state === 'loaded'), `every file loaded (${status.files.filter((f) => f.state !== 'loaded').map((f) => `${f.path}: ${f.state} ${f.error}`).join('; ') || 'all'})`);

  // Expected numbers from the plugin (../shared/expected) and the server itself.
  const expectedResnet = JSON.parse(readFileSync(join(opts.realTraces, 'expected', 'resnet50_v100',
    'worker0.1623143089861.pt.trace.json.gz.expected.json'), 'utf8'));
  const spansOf = async (run, worker) => getJson(base, `spans?run=${encodeURIComponent(run)}&worker=${encodeURIComponent(worker)}`);
  // A page state: the first worker of `view` and the span at spanIndex; `rules` ('plugin' or
  // 'kinetoscope') is asked of the API and kept in the state (undefined: the server's default).
  const sel = async (run, view, spanIndex = 0, rules = undefined) => {
    const r = rules ? `&rules=${rules}` : '';
    const worker = (await getJson(base, `workers?run=${encodeURIComponent(run)}&view=${encodeURIComponent(view)}${r}`))[0];
    const spans = await getJson(base, `spans?run=${encodeURIComponent(run)}&worker=${encodeURIComponent(worker)}${r}`);
    return { run, worker, span: spans[Math.min(spanIndex, spans.length - 1)], view, ...(rules ? { rules } : {}) };
  };

  const { chromium } = require('playwright-core');
  const userDataDir = join(tmp, 'chromium-profile');
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true, viewport: { width: 1440, height: 900 },
  });
  const problems = [];
  try {
    const page = context.pages()[0] || await context.newPage();
    watch(page, 'main page', problems);
    // A fresh document per view, so no check can see the previous view's DOM.
    const open = async (state) => {
      await page.goto('about:blank');
      await page.goto(`${base}${hashOf(state)}`, { waitUntil: 'load' });
    };

    // --- Overview: resnet50_v100 span 1, with the plugin's rules (its golden numbers).
    const ov = await sel('resnet50_v100', 'Overview');
    check(ov.span === '1', `resnet50_v100 spans start at "1" (${ov.span})`);
    await open({ ...ov, ...PLUGIN });
    // The plugin's average step time in µs, as the table shows it: 177592 µs -> "178 ms".
    const avgUs = expectedResnet.overview.average.total;
    const avg = avgUs >= 1e6 ? `${(avgUs / 1e6).toPrecision(3)} s` : avgUs >= 1000 ? `${Math.round(avgUs / 1000)} ms` : `${avgUs} µs`;
    const ovState = await waitFor(page, (want) => {
      const row = [...document.querySelectorAll('tr')].find((tr) => /Average Step Time/.test(tr.textContent));
      const cols = document.querySelector('.kt-columns');
      if (!row || !cols || ![...row.querySelectorAll('td')].some((td) => td.textContent.trim() === want)) return null;
      const xs = new Set([...cols.querySelectorAll('.kt-bar')].map((r) => r.getAttribute('x')));
      return { row: row.textContent, columns: xs.size };
    }, avg);
    check(ovState && ovState.row.includes(avg), `Overview: "Average Step Time" row shows ${avgUs} µs as ${avg} (${ovState && ovState.row})`);
    check(ovState && ovState.columns === expectedResnet.overview.steps.length,
      `Overview: ${expectedResnet.overview.steps.length} step columns (${ovState && ovState.columns})`);
    await shot(page, opts.out, 'overview.png');

    // --- Operator: the plugin's default sort (device self duration, descending) on top.
    const opSel = { ...ov, view: 'Operator', ...PLUGIN };
    await open(opSel);
    const byName = expectedResnet.operators.by_name;
    const topOp = byName.reduce((a, b) => (b.device_self_us > a.device_self_us ? b : a)).name;
    const opRows = await waitFor(page, tableRowsJs, null);
    check(opRows && opRows.length > 0, `Operator: table has rows (${opRows ? opRows.length : 0})`);
    check(opRows && opRows[0].some((c) => c === topOp), `Operator: top row is ${topOp} (${opRows && opRows[0].slice(0, 3).join(' | ')})`);
    await shot(page, opts.out, 'operator.png');

    // --- Kernel.
    await open({ ...ov, view: 'Kernel' });
    const kRows = await waitFor(page, tableRowsJs, null);
    check(kRows && kRows.length > 0, `Kernel: table has rows (${kRows ? kRows.length : 0})`);
    await shot(page, opts.out, 'kernel.png');

    // --- Trace: the canvas draws slices on tracks.
    await open({ ...ov, view: 'Trace' });
    const tr = await waitFor(page, () => {
      const c = [...document.querySelectorAll('canvas')].find((x) => Number(x.dataset.slices) > 0 && Number(x.dataset.tracks) > 0);
      return c ? { slices: Number(c.dataset.slices), tracks: Number(c.dataset.tracks) } : null;
    }, null);
    check(tr !== null, `Trace: canvas draws (${tr ? `${tr.slices} slices on ${tr.tracks} tracks` : 'no canvas with data-slices/data-tracks > 0'})`);
    await shot(page, opts.out, 'trace.png');

    // --- Memory of the cnn run: curve points and event rows.
    const memSel = await sel('cnn', 'Memory');
    await open(memSel);
    const mem = await waitFor(page, () => {
      const chart = document.querySelector('.mem-chart');
      const plot = chart && chart.querySelector('.uplot canvas');
      const rows = (() => {
        const t = document.querySelector('.mem-events .kt-table-grid tbody');
        return t ? [...t.querySelectorAll('tr')].filter((r) => r.querySelectorAll('td').length > 1).length : 0;
      })();
      return chart && plot && Number(chart.dataset.points) > 0 && rows > 0 ? { points: Number(chart.dataset.points), rows } : null;
    }, null);
    check(mem !== null, `Memory (cnn): curve has points and the events table rows (${mem ? `${mem.points} points, ${mem.rows} rows` : 'missing'})`);
    const memStats = await waitFor(page, () => {
      const t = document.querySelector('.mem-stats .kt-table-grid tbody');
      return t ? t.querySelectorAll('tr').length : null;
    }, null);
    check(memStats > 0, `Memory (cnn): statistics table has rows (${memStats})`);
    // Dragging over the middle of the curve selects a time range: both tables are refetched
    // for it (start_ts/end_ts) and the range is shown.
    const over = await page.$('.mem-chart .u-over');
    const box = over && await over.boundingBox();
    if (check(box !== null, 'Memory: the curve has a plot area to drag on')) {
      const memRequests = [];
      const onReq = (r) => { if (/\/api\/memory_events\?.*start_ts=\d+.*end_ts=\d+/.test(r.url())) memRequests.push(r.url()); };
      page.on('request', onReq);
      await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2);
      await page.mouse.down();
      await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2, { steps: 8 });
      await page.mouse.up();
      const ranged = await waitFor(page, () => {
        const t = document.querySelector('.mem-range');
        return t && t.textContent ? t.textContent : null;
      }, null, 10000);
      page.off('request', onReq);
      check(ranged !== null && memRequests.length > 0, `Memory: dragging selects a range and refetches the events (${ranged}; ${memRequests.length} request)`);
      await page.mouse.dblclick(box.x + box.width / 2, box.y + box.height / 2);
      const reset = await waitFor(page, () => {
        const t = document.querySelector('.mem-range');
        return t && !t.textContent ? true : null;
      }, null, 10000);
      check(reset === true, 'Memory: double click resets the range');
    }
    await shot(page, opts.out, 'memory.png');

    // --- Distributed: two_ranks has 2 workers in both charts.
    await open({ run: 'two_ranks', worker: 'All', span: (await spansOf('two_ranks', 'All'))[0], view: 'Distributed' });
    const dist = await waitFor(page, () => {
      const charts = [...document.querySelectorAll('.dist-chart')];
      return charts.length === 2 && charts.every((c) => c.querySelector('.kt-bar')) ? charts.map((c) => Number(c.dataset.workers)) : null;
    }, null);
    check(dist && dist.every((n) => n === 2), `Distributed (two_ranks): both charts draw 2 workers (${JSON.stringify(dist)})`);
    const ops = await waitFor(page, tableRowsJs, '.dist-view');
    check(ops && ops.length > 0, `Distributed (two_ranks): communication ops table has rows (${ops ? ops.length : 0})`);
    await shot(page, opts.out, 'distributed.png');

    // --- Module: the cnn sample when it records modules, else the synthetic module run.
    const cnnViews = await getJson(base, 'views?run=cnn');
    const moduleRun = cnnViews.includes('Module') ? 'cnn' : 'modules';
    check((await getJson(base, 'views?run=modules')).includes('Module'), 'the synthetic module run offers the Module view');
    const modSel = await sel(moduleRun, 'Module');
    const modPayload = await getJson(base, `module?run=${moduleRun}&worker=${encodeURIComponent(modSel.worker)}&span=${encodeURIComponent(modSel.span)}`);
    const countNodes = (n) => 1 + (n.children || []).reduce((a, c) => a + countNodes(c), 0);
    // The flame graph opens on the model root: the top-level module that takes the most time.
    const modelRoot = modPayload && modPayload.data && modPayload.data.length
      ? modPayload.data.reduce((a, m) => (m.avg_duration > a.avg_duration ? m : a)) : null;
    const wantFrames = modelRoot ? countNodes(modelRoot) : -1;
    await open(modSel);
    const mod = await waitFor(page, () => {
      const f = document.querySelector('.mod-flame');
      const rows = [...document.querySelectorAll('.mod-view .kt-table-grid tbody tr')].map((r) => r.textContent);
      return f && Number(f.dataset.frames) > 0 && rows.length > 0 ? { frames: Number(f.dataset.frames), rows } : null;
    }, null);
    check(mod && mod.frames === wantFrames, `Module (${moduleRun}): flame graph of the model root ${modelRoot && modelRoot.name} has ${wantFrames} frames (${mod && mod.frames})`);
    check(mod && modPayload.data.every((m) => mod.rows.some((r) => r.includes(m.name))),
      `Module (${moduleRun}): the tree table lists the top-level modules ${modPayload && modPayload.data.map((m) => m.name).join(', ')}`);
    // Picking another top-level module redraws the flame graph with its whole subtree.
    if (modPayload.data.length > 1) {
      // Another top-level module than the one shown (the largest of the others).
      let big = modPayload.data.findIndex((m) => m !== modelRoot);
      modPayload.data.forEach((m, i) => { if (m !== modelRoot && countNodes(m) > countNodes(modPayload.data[big])) big = i; });
      await page.selectOption('.mod-select', String(big));
      const frames = await waitFor(page, (n) => {
        const f = document.querySelector('.mod-flame');
        return f && Number(f.dataset.frames) === n ? n : null;
      }, countNodes(modPayload.data[big]), 10000);
      check(frames === countNodes(modPayload.data[big]),
        `Module: selecting ${modPayload.data[big].name} draws its ${countNodes(modPayload.data[big])} frames (${frames})`);
      await page.selectOption('.mod-select', String(modPayload.data.indexOf(modelRoot)));
      await waitFor(page, (n) => Number(document.querySelector('.mod-flame')?.dataset.frames) === n || null, wantFrames, 10000);
    }
    await shot(page, opts.out, 'module.png');

    // --- Diff: diff_base vs diff_test.
    const dBase = await sel('diff_base', 'Overview');
    const dExp = await sel('diff_test', 'Overview');
    const diffState = {
      tab: 'diff', run: dBase.run, worker: dBase.worker, span: dBase.span,
      exp_run: dExp.run, exp_worker: dExp.worker, exp_span: dExp.span,
    };
    await open(diffState);
    const diff = await waitFor(page, () => {
      const c = document.querySelector('.diff-combo');
      const rows = document.querySelectorAll('.diff-ops .kt-table-grid tbody tr').length;
      return c && Number(c.dataset.bars) > 0 && rows > 0 ? { bars: Number(c.dataset.bars), rows } : null;
    }, null);
    check(diff !== null, `Diff (diff_base vs diff_test): bars and operator rows (${JSON.stringify(diff)})`);

    // --- Diff with levels: resnet50_v100 span 1 vs span 2, one bar pair per child of the root,
    // and a click on a bar drills into that child (the URL keeps the path).
    const rs1 = await sel('resnet50_v100', 'Overview', 0);
    const rs2 = await sel('resnet50_v100', 'Overview', 1);
    const diffQuery = `run=resnet50_v100&worker=${encodeURIComponent(rs1.worker)}&span=${rs1.span}` +
      `&exp_run=resnet50_v100&exp_worker=${encodeURIComponent(rs2.worker)}&exp_span=${rs2.span}`;
    const root = await getJson(base, `diffnode?${diffQuery}&path=0`);
    await open({ tab: 'diff', run: rs1.run, worker: rs1.worker, span: rs1.span,
      exp_run: rs2.run, exp_worker: rs2.worker, exp_span: rs2.span });
    const rootBars = await waitFor(page, () => {
      const c = document.querySelector('.diff-combo');
      return c && Number(c.dataset.bars) > 0 ? Number(c.dataset.bars) : null;
    }, null);
    check(root.children.length > 1 && rootBars === 2 * root.children.length,
      `Diff (resnet50_v100 span 1 vs 2): ${root.children.length} children drawn as bar pairs (${rootBars} bars)`);
    const target = root.children.find((c) => c.path === '0-1') || root.children[0];
    const targetNode = await getJson(base, `diffnode?${diffQuery}&path=${target.path}`);
    await shot(page, opts.out, 'diff.png');
    await page.click(`.diff-bar-group[data-path="${target.path}"]`);
    const drilled = await waitFor(page, (want) => decodeURIComponent(location.hash).includes(`diff_path=${want}`) || null, target.path);
    check(drilled === true, `Diff: clicking the bar of ${target.left.name} drills to path ${target.path}`);
    const wantBars = 2 * (targetNode.children ? targetNode.children.length : 0);
    if (wantBars > 0) {
      const drilledBars = await waitFor(page, (n) => {
        const c = document.querySelector('.diff-combo');
        return c && Number(c.dataset.bars) === n ? n : null;
      }, wantBars);
      check(drilledBars === wantBars, `Diff: the drilled level draws ${wantBars} bars (${drilledBars})`);
    }

    // --- Recommendations: findings of resnet50_v100.
    const recs = await getJson(base, `recommendations?run=resnet50_v100&worker=${encodeURIComponent(ov.worker)}&span=${ov.span}`);
    check(recs.length > 0, `Recommendations API has findings for resnet50_v100 (${recs.length})`);
    await open({ ...ov, view: 'Recommendations' });
    const recShown = recs.length ? await waitFor(page, (title) => document.body.innerText.includes(title), recs[0].title) : null;
    check(recShown === true, `Recommendations: the page shows "${recs[0] && recs[0].title}"`);
    await shot(page, opts.out, 'recommendations.png');

    // --- Scalars: one sparkline per tag of the cnn run.
    const scalars = await getJson(base, 'scalars?run=cnn');
    const tags = Object.keys(scalars.tags);
    check(tags.length > 0, `cnn has TensorBoard scalars (${tags.length} tags)`);
    await open({ ...memSel, view: 'Overview' });
    const sparks = await waitFor(page, () => {
      const n = document.querySelectorAll('.sc-item .kt-spark-svg').length;
      return n > 0 ? n : null;
    }, null);
    check(sparks === tags.length, `Scalars: ${tags.length} sparklines for cnn (${sparks})`);
    // "Open as a page": the Scalars view, one line chart per tag.
    await page.click('.sc-side summary');
    await page.click('.sc-open');
    const cards = await waitFor(page, () => {
      const n = document.querySelectorAll('.sc-card').length;
      return n > 0 && /view=Scalars/.test(location.hash) ? n : null;
    }, null);
    check(cards === tags.length, `Scalars page: ${tags.length} charts for cnn (${cards})`);
    await shot(page, opts.out, 'scalars.png');

    // --- A shared link restores the same view in a fresh page.
    await open(opSel);
    await waitFor(page, tableRowsJs, null);
    const url = page.url();
    const first = await page.evaluate(tableRowsJs, null);
    const fresh = await context.newPage();
    watch(fresh, 'shared link page', problems);
    await fresh.goto(url, { waitUntil: 'load' });
    const again = await waitFor(fresh, tableRowsJs, null);
    const sameHash = await fresh.evaluate(() => location.hash);
    check(again && first && again[0].join('|') === first[0].join('|') && sameHash === new URL(url).hash,
      `a shared link (${new URL(url).hash}) restores the Operator view with the same top row`);
    await fresh.close();

    // Per-area checks: every web/tests/checks/*.mjs exports `run(ctx)`, run in name order on the
    // same server and browser (one file per area keeps this file from growing without bound).
    const ctx = { page, context, base, opts, problems, expectedResnet, check, getJson, waitFor, open, sel, shot,
      tableRowsJs, watch, hashOf, latestRun: LATEST_RUN, PLUGIN };
    const checksDir = join(here, 'checks');
    const modules = existsSync(checksDir) ? readdirSync(checksDir).filter((f) => f.endsWith('.mjs')).sort() : [];
    for (const name of modules) {
      console.log(`-- checks/${name}`);
      const m = await import(new URL(`./checks/${name}`, import.meta.url).href);
      await m.run(ctx);
    }
  } finally {
    await context.close();
  }
  for (const p of problems) check(false, p);
  check(problems.length === 0, 'no console errors, page errors or failed requests');
}

main().then(() => {
  cleanup();
  // Counted by scripts/test.sh next to the doctest cases.
  console.log(`browser checks: ${passed} passed, ${failures.length} failed`);
  if (failures.length) {
    console.error(`\nbrowser test: ${failures.length} check(s) failed, ${passed} passed:`);
    for (const f of failures) console.error(`  - ${f}`);
    process.exit(1);
  }
  console.log(`\nbrowser test: all ${passed} checks passed`);
  process.exit(0);
}, (e) => {
  cleanup();
  console.error(`browser test: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
