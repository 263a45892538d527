// SPDX-License-Identifier: BSD-3-Clause
// The web app shell: the left drawer (Normal / Diff tabs with the run -> view -> worker -> span
// cascade), the rule set toggle (kinetoscope's rules or torch-tb-profiler's), loading progress, the
// Files panel, URL state in location.hash, and the view area where the selected view module
// renders. Every view module exports `render(el, ctx)`.
import './style.css';
import { RULE_SETS, apiGet, boundApi, setRules } from './api.js';
import { createTable } from './components/table.js';
import { formatBytes, formatDuration } from './components/units.js';
import * as overview from './views/overview.js';
import * as operator from './views/operator.js';
import * as kernel from './views/kernel.js';
import * as trace from './views/trace.js';
import * as distributed from './views/distributed.js';
import * as memory from './views/memory.js';
import * as module from './views/module.js';
import * as recommendations from './views/recommendations.js';
import * as diff from './views/diff.js';
import * as scalars from './views/scalars.js';

const VIEWS = {
  Overview: overview,
  Operator: operator,
  Kernel: kernel,
  Trace: trace,
  Distributed: distributed,
  Memory: memory,
  Module: module,
  Lightning: module,
  Recommendations: recommendations,
  Scalars: scalars,
};
const LABELS = { Kernel: 'GPU Kernel' };
const RECOMMENDATIONS = 'Recommendations';
const SCALARS = 'Scalars';  // the run's TensorBoard scalars, offered when the run has event files
// `rules` (the rule set, 'kinetoscope' or 'plugin') is kept in the hash of every state, so a link
// reproduces the numbers it showed; a hash without it (in-app links) keeps the current one.
const SELECTION_KEYS = ['tab', 'run', 'view', 'worker', 'span', 'exp_run', 'exp_worker', 'exp_span', 'rules'];
const PLUGIN_RULES_LABEL = 'torch-tb-profiler rules';
const RULES_HELP = "Off: kinetoscope's rules (docs/kinetoscope-rules.md). On: torch-tb-profiler 0.4.3's numbers exactly.";

// ---------------------------------------------------------------------------------------------
// DOM helpers

function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function spinner(text) {
  return h('div', { class: 'kt-loading' }, h('span', { class: 'kt-spinner' }), h('span', {}, text || 'Loading\u2026'));
}

function errorBox(title, message) {
  return h('div', { class: 'kt-error-box', role: 'alert' },
    h('div', { class: 'kt-error-title' }, title), h('div', { class: 'kt-error-message' }, message));
}

function fillSelect(select, values, selected, label = (v) => v) {
  select.textContent = '';
  for (const v of values) select.append(h('option', { value: v }, label(v)));
  if (selected !== null && selected !== undefined) select.value = selected;
}

/// The run select: the loaded runs, then the runs still loading (listed, not selectable).
function fillRunSelect(selected) {
  fillSelect(runSelect, state.runs, selected);
  for (const r of state.pending) {
    runSelect.append(h('option', { value: r, disabled: true, class: 'kt-run-loading' }, `${r} (loading\u2026)`));
  }
  if (selected !== null && selected !== undefined) runSelect.value = selected;
}

function field(labelText, control) {
  return h('label', { class: 'kt-field' }, h('span', { class: 'kt-field-label' }, labelText), control);
}

// ---------------------------------------------------------------------------------------------
// URL state

function readHash() {
  const out = {};
  const q = new URLSearchParams(location.hash.replace(/^#/, ''));
  for (const [k, v] of q) out[k] = v;
  return out;
}

let writtenHash = null;
function writeHash(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== null && v !== undefined && v !== '') q.set(k, String(v));
  }
  const next = `#${q.toString()}`;
  writtenHash = next;
  if (location.hash !== next) history.replaceState(null, '', next);
}

// ---------------------------------------------------------------------------------------------
// Layout

const app = document.getElementById('app');
const runSelect = h('select', { 'aria-label': 'Runs' });
const viewSelect = h('select', { 'aria-label': 'Views' });
const workerSelect = h('select', { 'aria-label': 'Workers' });
const spanSelect = h('select', { 'aria-label': 'Spans' });
const spanField = field('Spans', spanSelect);
const scalarsBox = h('div', { class: 'kt-run-scalars' });
const progressBox = h('div', { class: 'kt-progress', hidden: true });
// Says when a view waits for the server to load a trace again (api.js 'kt-waiting').
const waitingBox = h('div', { class: 'kt-waiting', hidden: true, role: 'status' });
window.addEventListener('kt-waiting', (ev) => {
  waitingBox.hidden = !ev.detail;
  waitingBox.textContent = ev.detail ? `Waiting: the server is ${ev.detail}\u2026` : '';
});
const filesLink = h('a', { href: '#', class: 'kt-files-link' }, 'Files');
// The rule set toggle: off = kinetoscope's rules, on = torch-tb-profiler 0.4.3's (api.js adds
// rules=<set> to every analysis request). It applies to both tabs.
const rulesToggle = h('input', { type: 'checkbox', class: 'kt-rules-toggle', 'aria-label': PLUGIN_RULES_LABEL });
const rulesField = h('label', { class: 'kt-rules-field', title: RULES_HELP },
  rulesToggle, h('span', { class: 'kt-rules-label' }, PLUGIN_RULES_LABEL));
// Beside the view title while the plugin's rules are on, so a screenshot says which numbers it shows.
const rulesBadge = h('span', { class: 'kt-rules-badge', hidden: true, title: RULES_HELP }, PLUGIN_RULES_LABEL);

const diffSel = {
  run: h('select', { 'aria-label': 'Baseline run' }),
  worker: h('select', { 'aria-label': 'Baseline worker' }),
  span: h('select', { 'aria-label': 'Baseline span' }),
  exp_run: h('select', { 'aria-label': 'Experimental run' }),
  exp_worker: h('select', { 'aria-label': 'Experimental worker' }),
  exp_span: h('select', { 'aria-label': 'Experimental span' }),
};

const tabNormal = h('button', { type: 'button', class: 'kt-tab', role: 'tab' }, 'Normal');
const tabDiff = h('button', { type: 'button', class: 'kt-tab', role: 'tab' }, 'Diff');
const normalPane = h('div', { class: 'kt-pane' },
  field('Runs', runSelect), scalarsBox, field('Views', viewSelect), field('Workers', workerSelect), spanField);
const diffPane = h('div', { class: 'kt-pane', hidden: true },
  h('div', { class: 'kt-pane-heading' }, 'Baseline'),
  field('Runs', diffSel.run), field('Workers', diffSel.worker), field('Spans', diffSel.span),
  h('div', { class: 'kt-pane-heading' }, 'Experimental'),
  field('Runs', diffSel.exp_run), field('Workers', diffSel.exp_worker), field('Spans', diffSel.exp_span));

const drawerClose = h('button', { type: 'button', class: 'kt-icon-button', title: 'Hide the panel', 'aria-label': 'Hide the panel' }, '\u00AB');
// Light/dark theme: follows prefers-color-scheme until the toggle picks one, which is kept in
// localStorage ('kt-theme') and set as html[data-theme] (style.css holds both palettes).
const THEME_KEY = 'kt-theme';
const darkQuery = window.matchMedia ? window.matchMedia('(prefers-color-scheme: dark)') : null;
function storedTheme() {
  try { return localStorage.getItem(THEME_KEY); } catch (_) { return null; }
}
function effectiveTheme() {
  const t = document.documentElement.dataset.theme;
  if (t === 'dark' || t === 'light') return t;
  return darkQuery && darkQuery.matches ? 'dark' : 'light';
}
const themeToggle = h('button', { type: 'button', class: 'kt-icon-button kt-theme-toggle' });
function showThemeToggle() {
  const next = effectiveTheme() === 'dark' ? 'light' : 'dark';
  themeToggle.textContent = next === 'dark' ? '\u263E' : '\u2600';
  themeToggle.title = `Switch to the ${next} theme`;
  themeToggle.setAttribute('aria-label', themeToggle.title);
}
{
  const t = storedTheme();
  if (t === 'dark' || t === 'light') document.documentElement.dataset.theme = t;
  showThemeToggle();
}
const drawerOpen = h('button', { type: 'button', class: 'kt-drawer-open', title: 'Show the panel', 'aria-label': 'Show the panel' }, '\u00BB');
const drawer = h('aside', { class: 'kt-drawer' },
  h('div', { class: 'kt-brand' }, h('span', { class: 'kt-logo' }, 'kinetoscope'), h('span', {}, themeToggle, drawerClose)),
  h('div', { class: 'kt-tabs', role: 'tablist' }, tabNormal, tabDiff),
  normalPane, diffPane,
  h('div', { class: 'kt-rules-pane' }, rulesField),
  h('div', { class: 'kt-drawer-foot' }, progressBox, filesLink));
const viewTitle = h('h1', { class: 'kt-view-title' });
const viewArea = h('div', { class: 'kt-view', id: 'kt-view' });
const mainArea = h('main', { class: 'kt-main' }, h('div', { class: 'kt-main-head' }, drawerOpen, viewTitle, rulesBadge), waitingBox, viewArea);
app.append(h('div', { class: 'kt-shell' }, drawer, mainArea));

drawerClose.addEventListener('click', () => document.body.classList.add('kt-drawer-hidden'));
drawerOpen.addEventListener('click', () => document.body.classList.remove('kt-drawer-hidden'));

// ---------------------------------------------------------------------------------------------
// State

const state = {
  tab: 'normal',
  runs: [],
  pending: [],        // runs discovered whose files are still loading (none loaded yet)
  latest: null,       // the loaded run with the newest trace file: the landing page's run
  loading: true,
  progress: null,
  sel: { run: null, view: null, worker: null, span: null },
  diff: { run: null, worker: null, span: null, exp_run: null, exp_worker: null, exp_span: null },
  extra: {},          // view-specific hash keys
  filesOpen: false,
  rules: null,        // the rule set requests carry ('kinetoscope' or 'plugin'; null: not known yet)
  defaultRules: null, // the server's default (/api/status "rules")
};
let cascadeToken = 0;
let renderToken = 0;
let cleanup = null;
let scalarsRun = null;

function currentHash() {
  if (state.tab === 'diff') return { tab: 'diff', ...state.diff, rules: state.rules, ...state.extra };
  return { ...state.sel, rules: state.rules, ...state.extra };
}

// ---------------------------------------------------------------------------------------------
// Rendering the view area

async function renderInto(title, fn) {
  const token = ++renderToken;
  if (cleanup) {
    try { cleanup(); } catch (e) { console.warn('view cleanup failed', e); }
    cleanup = null;
  }
  viewTitle.textContent = title;
  viewArea.textContent = '';
  const el = h('div', { class: 'kt-view-body' });
  viewArea.append(el);
  try {
    const result = await fn(el);
    if (token !== renderToken) {
      if (typeof result === 'function') result();
      return;
    }
    if (typeof result === 'function') cleanup = result;
  } catch (e) {
    if (token !== renderToken) return;
    el.textContent = '';
    el.append(errorBox(`Could not show ${title}`, e && e.message ? e.message : String(e)));
  }
}

function makeCtx(sel) {
  return {
    run: sel.run,
    worker: sel.worker,
    span: sel.span,
    view: sel.view,
    rules: state.rules,
    api: boundApi(sel),
    hash: { ...state.extra },
    setHash(partial) {
      for (const [k, v] of Object.entries(partial || {})) {
        if (SELECTION_KEYS.includes(k)) continue;
        if (v === null || v === undefined || v === '') delete state.extra[k];
        else state.extra[k] = String(v);
      }
      this.hash = { ...state.extra };
      writeHash(currentHash());
    },
    navigate(target) {
      const next = { ...state.sel, ...target };
      state.extra = {};
      setTab('normal', false);
      cascade(next);
    },
  };
}

function renderSelectedView() {
  const sel = { ...state.sel };
  writeHash(currentHash());
  const mod = VIEWS[sel.view];
  if (!mod) {
    renderInto(sel.view || '', async (el) => {
      el.append(errorBox('Unknown view', `This viewer has no page for "${sel.view}".`));
    });
    return;
  }
  const label = LABELS[sel.view] || sel.view;
  renderInto(label, (el) => mod.render(el, makeCtx(sel)));
}

function showEmpty() {
  renderToken++;
  if (cleanup) { try { cleanup(); } catch { /* ignore */ } cleanup = null; }
  viewTitle.textContent = '';
  viewArea.textContent = '';
  if (state.loading) {
    const p = state.progress;
    const pct = p && typeof p.percent === 'number' ? ` ${p.percent.toFixed(1)}%` : '';
    const file = p && p.current_file ? ` \u00B7 ${p.current_file}` : '';
    viewArea.append(h('div', { class: 'kt-empty-state' }, spinner(`Loading profiles\u2026${pct}${file}`)));
    return;
  }
  const box = h('div', { class: 'kt-empty-state' }, h('h2', {}, 'No runs found'));
  viewArea.append(box);
  apiGet('status').then((st) => {
    box.append(h('p', {}, `There are no loadable runs in ${st.logdir}.`));
    const files = st.files || [];
    if (!files.length) {
      box.append(h('p', { class: 'kt-muted' },
        'No trace files were seen (files named *.pt.trace.json or *.pt.trace.json.gz, one folder per run).'));
    } else {
      box.append(h('p', {}, `Files seen: ${files.length}`));
      box.append(h('ul', { class: 'kt-file-list' }, files.slice(0, 50).map((f) =>
        h('li', {}, h('code', {}, f.path), ` \u2014 ${f.state}${f.error ? `: ${f.error}` : ''}`))));
    }
  }, (e) => box.append(h('p', { class: 'kt-error' }, e.message)));
}

// ---------------------------------------------------------------------------------------------
// The Normal cascade: run -> views -> workers -> spans -> render

async function cascade(pref) {
  const token = ++cascadeToken;
  const stale = () => token !== cascadeToken;
  if (!state.runs.length) {
    fillRunSelect(null);
    fillSelect(viewSelect, [], null);
    fillSelect(workerSelect, [], null);
    fillSelect(spanSelect, [], null);
    state.sel = { run: null, view: null, worker: null, span: null };
    showEmpty();
    return;
  }
  const landing = state.runs.includes(state.latest) ? state.latest : state.runs[0];
  const run = state.runs.includes(pref.run) ? pref.run : landing;
  fillRunSelect(run);
  if (run !== pref.run) pref = { run };
  state.sel.run = run;
  updateRunScalars(run);
  try {
    const [runViews, runScalars] = await Promise.all([
      apiGet('views', { run }), apiGet('scalars', { run }).catch(() => null)]);
    if (stale()) return;
    const views = [...runViews, RECOMMENDATIONS];
    if (runScalars && Object.keys(runScalars.tags || {}).length) views.push(SCALARS);
    const view = views.includes(pref.view) ? pref.view : views[0];
    fillSelect(viewSelect, views, view, (v) => LABELS[v] || v);
    if (view !== state.sel.view) state.extra = view === pref.view ? state.extra : {};
    state.sel.view = view;

    const workerView = view === RECOMMENDATIONS || view === SCALARS ? 'Overview' : view;
    const workers = await apiGet('workers', { run, view: workerView });
    if (stale()) return;
    const worker = workers.includes(pref.worker) ? pref.worker : workers[0] ?? null;
    fillSelect(workerSelect, workers, worker);
    state.sel.worker = worker;
    if (worker === null) {
      state.sel.span = null;
      fillSelect(spanSelect, [], null);
      writeHash(currentHash());
      renderInto(LABELS[view] || view, async (el) => {
        el.append(errorBox('No data', `Run "${run}" has no worker with the ${view} view.`));
      });
      return;
    }
    const spans = await apiGet('spans', { run, worker });
    if (stale()) return;
    const span = spans.includes(pref.span) ? pref.span : spans[0] ?? null;
    fillSelect(spanSelect, spans, span);
    spanField.hidden = spans.length <= 1;
    state.sel.span = span;
    renderSelectedView();
  } catch (e) {
    if (stale()) return;
    renderInto(run, async (el) => { el.append(errorBox('Could not load the selection', e.message)); });
  }
}

function updateRunScalars(run) {
  if (scalarsRun === run) return;
  scalarsRun = run;
  scalarsBox.textContent = '';
  const el = h('div');
  scalarsBox.append(el);
  Promise.resolve()
    .then(() => scalars.renderRunScalars(el, { ...makeCtx({ run, worker: null, span: null, view: null }) }))
    .catch((e) => { el.textContent = ''; el.append(h('div', { class: 'kt-muted kt-small' }, `Scalars: ${e.message}`)); });
}

runSelect.addEventListener('change', () => { state.extra = {}; cascade({ ...state.sel, run: runSelect.value }); });
viewSelect.addEventListener('change', () => { state.extra = {}; cascade({ ...state.sel, view: viewSelect.value }); });
workerSelect.addEventListener('change', () => cascade({ ...state.sel, worker: workerSelect.value }));
spanSelect.addEventListener('change', () => cascade({ ...state.sel, span: spanSelect.value }));

// ---------------------------------------------------------------------------------------------
// The Diff tab

let diffToken = 0;
async function diffCascade(pref) {
  const token = ++diffToken;
  const stale = () => token !== diffToken;
  const d = {};
  try {
    for (const side of ['', 'exp_']) {
      const runs = state.runs;
      const run = runs.includes(pref[`${side}run`]) ? pref[`${side}run`] : null;
      fillSelect(diffSel[`${side}run`], ['', ...runs], run ?? '', (v) => v || '\u2014 select \u2014');
      d[`${side}run`] = run;
      let workers = [];
      if (run) workers = await apiGet('workers', { run, view: 'Overview' });
      if (stale()) return;
      const worker = workers.includes(pref[`${side}worker`]) ? pref[`${side}worker`] : workers[0] ?? null;
      fillSelect(diffSel[`${side}worker`], workers, worker);
      d[`${side}worker`] = worker;
      let spans = [];
      if (run && worker) spans = await apiGet('spans', { run, worker });
      if (stale()) return;
      const span = spans.includes(pref[`${side}span`]) ? pref[`${side}span`] : spans[0] ?? null;
      fillSelect(diffSel[`${side}span`], spans, span);
      d[`${side}span`] = span;
    }
  } catch (e) {
    if (stale()) return;
    renderInto('Diff', async (el) => { el.append(errorBox('Could not load the diff selection', e.message)); });
    return;
  }
  const changed = Object.keys(d).some((k) => d[k] !== state.diff[k]);
  state.diff = d;
  if (changed) state.extra = {};
  writeHash(currentHash());
  if (!Object.values(d).every((v) => v !== null)) {
    renderInto('Diff', async (el) => {
      el.append(h('div', { class: 'kt-empty-state' }, h('h2', {}, 'No run selected for diff'),
        h('p', {}, 'Choose a Baseline and an Experimental run, worker and span in the Diff panel.')));
    });
    return;
  }
  const sel = { run: d.run, worker: d.worker, span: d.span, view: 'Diff' };
  renderInto('Diff', (el) => diff.render(el, { ...makeCtx(sel), diff: { ...d } }));
}

for (const key of Object.keys(diffSel)) {
  diffSel[key].addEventListener('change', () => {
    const pref = { ...state.diff, [key]: diffSel[key].value || null };
    // Changing a run or worker resets the selects below it on that side.
    const side = key.startsWith('exp_') ? 'exp_' : '';
    if (key.endsWith('run')) { pref[`${side}worker`] = null; pref[`${side}span`] = null; }
    if (key.endsWith('worker')) pref[`${side}span`] = null;
    diffCascade(pref);
  });
}

function setTab(tab, go = true) {
  state.tab = tab;
  tabNormal.classList.toggle('kt-active', tab === 'normal');
  tabDiff.classList.toggle('kt-active', tab === 'diff');
  tabNormal.setAttribute('aria-selected', String(tab === 'normal'));
  tabDiff.setAttribute('aria-selected', String(tab === 'diff'));
  normalPane.hidden = tab !== 'normal';
  diffPane.hidden = tab !== 'diff';
  if (!go) return;
  state.extra = {};
  if (tab === 'diff') diffCascade(state.diff);
  else cascade(state.sel);
}
tabNormal.addEventListener('click', () => { if (state.tab !== 'normal') setTab('normal'); });
tabDiff.addEventListener('click', () => { if (state.tab !== 'diff') setTab('diff'); });

// ---------------------------------------------------------------------------------------------
// Loading progress, the Files panel

function showProgress() {
  const p = state.progress;
  progressBox.textContent = '';
  if (!state.loading || !p) { progressBox.hidden = true; return; }
  progressBox.hidden = false;
  const pct = typeof p.percent === 'number' ? p.percent : 0;
  const bar = h('div', { class: 'kt-progress-bar' }, h('div', { class: 'kt-progress-fill' }));
  bar.firstChild.style.width = `${Math.max(0, Math.min(100, pct))}%`;
  progressBox.append(h('div', { class: 'kt-small' },
    `Loading ${pct.toFixed(1)}% \u00B7 ${p.files_loaded ?? 0}/${p.files_total ?? 0} files`), bar);
  if (p.current_file) {
    progressBox.append(h('div', { class: 'kt-small kt-muted kt-progress-file', title: p.current_file },
      `${p.current_file} \u00B7 ${formatBytes(p.bytes_loaded ?? 0)} of ${formatBytes(p.bytes_total ?? 0)}`));
  }
  const failed = p.files_failed || 0;
  filesLink.textContent = failed ? `Files (${failed} failed)` : 'Files';
  filesLink.classList.toggle('kt-files-failed', failed > 0);
}

async function openFiles() {
  state.filesOpen = true;
  const close = h('button', { type: 'button', class: 'kt-button' }, 'Close');
  const body = h('div', { class: 'kt-modal-body' }, spinner());
  const modal = h('div', { class: 'kt-modal-backdrop' },
    h('div', { class: 'kt-modal', role: 'dialog', 'aria-label': 'Files' },
      h('div', { class: 'kt-modal-head' }, h('h2', {}, 'Files'), close), body));
  const done = () => { modal.remove(); state.filesOpen = false; document.removeEventListener('keydown', onKey); };
  const onKey = (e) => { if (e.key === 'Escape') done(); };
  close.addEventListener('click', done);
  modal.addEventListener('click', (e) => { if (e.target === modal) done(); });
  document.addEventListener('keydown', onKey);
  document.body.append(modal);
  try {
    const st = await apiGet('status');
    body.textContent = '';
    const files = st.files || [];
    const failed = files.filter((f) => f.state === 'failed');
    body.append(h('p', { class: 'kt-muted' }, `Log directory: ${st.logdir} \u2014 ${files.length} files, ${failed.length} failed.`));
    for (const f of failed) {
      body.append(errorBox(f.path, f.error || 'failed'));
    }
    createTable(body, {
      columns: [
        { key: 'run', title: 'Run', type: 'string' },
        { key: 'worker', title: 'Worker', type: 'string' },
        { key: 'span', title: 'Span', type: 'string' },
        { key: 'path', title: 'Path', type: 'string' },
        { key: 'size', title: 'Size', type: 'number', format: formatBytes },
        { key: 'state', title: 'State', type: 'string' },
        { key: 'warnings', title: 'Warnings', type: 'number' },
        { key: 'load_seconds', title: 'Load Time', type: 'number',
          format: (v) => (typeof v === 'number' ? formatDuration(v * 1e6) : '') },
        { key: 'error', title: 'Error', type: 'string' },
      ],
      rows: files,
      sort: { key: 'path', desc: false },
      pageSize: 20,
      search: { keys: ['run', 'path', 'state', 'error'], placeholder: 'Search files' },
      csvName: 'files.csv',
      rowClass: (r) => (r.state === 'failed' ? 'kt-row-failed' : ''),
    });
  } catch (e) {
    body.textContent = '';
    body.append(errorBox('Could not list the files', e.message));
  }
}
filesLink.addEventListener('click', (e) => { e.preventDefault(); openFiles(); });

let pollTimer = 0;
async function pollRuns() {
  clearTimeout(pollTimer);
  let next = 5000;
  try {
    const r = await apiGet('runs');
    const runs = Array.isArray(r.runs) ? r.runs : [];
    state.loading = !!r.loading;
    state.progress = r.progress || null;
    state.latest = typeof r.latest === 'string' ? r.latest : null;
    const pending = (Array.isArray(r.discovered) ? r.discovered : [])
      .filter((d) => d.state === 'loading' && !runs.includes(d.run)).map((d) => d.run);
    const pendingChanged = pending.join('\n') !== state.pending.join('\n');
    state.pending = pending;
    showProgress();
    next = state.loading ? 1000 : 5000;
    const changed = runs.length !== state.runs.length || runs.some((x, i) => x !== state.runs[i]);
    const first = pollRuns.first !== false;
    pollRuns.first = false;
    if (changed || first) {
      state.runs = runs;
      if (first || (state.tab === 'normal' && !state.sel.run)) applyHash(readHash());
      else if (state.tab === 'normal' && (!runs.includes(state.sel.run) || !state.sel.view)) cascade(state.sel);
      else if (state.tab === 'normal') fillRunSelect(state.sel.run);
      else diffCascade(state.diff);
    } else if (pendingChanged && state.tab === 'normal') {
      fillRunSelect(state.sel.run);
    } else if (!runs.length && state.tab === 'normal') {
      showEmpty();
    }
  } catch (e) {
    progressBox.hidden = false;
    progressBox.textContent = '';
    progressBox.append(h('div', { class: 'kt-error kt-small' }, e.message));
    if (pollRuns.first !== false) {
      renderInto('kinetoscope', async (el) => { el.append(errorBox('The server does not answer', e.message)); });
    }
  }
  pollTimer = setTimeout(pollRuns, next);
}

function applyHash(hp) {
  if (RULE_SETS.includes(hp.rules)) applyRules(hp.rules);
  const extra = {};
  for (const [k, v] of Object.entries(hp)) if (!SELECTION_KEYS.includes(k)) extra[k] = v;
  state.extra = extra;
  if (hp.tab === 'diff') {
    setTab('diff', false);
    diffCascade({ run: hp.run, worker: hp.worker, span: hp.span,
      exp_run: hp.exp_run, exp_worker: hp.exp_worker, exp_span: hp.exp_span });
  } else {
    setTab('normal', false);
    cascade({ run: hp.run, view: hp.view, worker: hp.worker, span: hp.span });
  }
}

window.addEventListener('hashchange', () => {
  if (location.hash === writtenHash) return;
  applyHash(readHash());
});

// ---------------------------------------------------------------------------------------------
// The rule set

/// Makes `rules` the rule set of every request, the toggle's state and the badge's.
function applyRules(rules) {
  state.rules = rules;
  setRules(rules);
  rulesToggle.checked = rules === 'plugin';
  rulesBadge.hidden = rules !== 'plugin';
  document.body.classList.toggle('kt-plugin-rules', rules === 'plugin');
}

function showRulesDefault() {
  const def = state.defaultRules ? `\nThis server's default: ${state.defaultRules === 'plugin' ? 'on' : 'off'}.` : '';
  rulesField.title = `${RULES_HELP}${def}`;
}

/// The rule set before the first view: the page URL's when it names one, else the server's
/// default (/api/status "rules"; a server that does not say uses kinetoscope's rules).
async function initRules() {
  const fromHash = readHash().rules;
  if (RULE_SETS.includes(fromHash)) applyRules(fromHash);
  const asked = apiGet('status').then((st) => {
    state.defaultRules = st && RULE_SETS.includes(st.rules) ? st.rules : 'kinetoscope';
    showRulesDefault();
  }, () => { /* pollRuns says when the server does not answer */ });
  if (!state.rules) {
    await asked;
    if (!state.rules && state.defaultRules) applyRules(state.defaultRules);
  }
}

// Another rule set: which views exist can change, so the whole cascade is asked again (keeping
// the selection where it still exists), and the hash keeps the choice.
rulesToggle.addEventListener('change', () => {
  applyRules(rulesToggle.checked ? 'plugin' : 'kinetoscope');
  if (!state.runs.length) { writeHash(currentHash()); return; }
  if (state.tab === 'diff') diffCascade({ ...state.diff });
  else cascade({ ...state.sel });
});

// Charts read the theme's colours when drawn: redraw the view when the theme changes.
function onThemeChanged() {
  showThemeToggle();
  if (state.runs.length) applyHash(readHash());
}
themeToggle.addEventListener('click', () => {
  const next = effectiveTheme() === 'dark' ? 'light' : 'dark';
  document.documentElement.dataset.theme = next;
  try { localStorage.setItem(THEME_KEY, next); } catch (_) { /* private mode */ }
  onThemeChanged();
});
if (darkQuery && darkQuery.addEventListener) {
  darkQuery.addEventListener('change', () => { if (!document.documentElement.dataset.theme) onThemeChanged(); });
}

setTab('normal', false);
viewArea.append(h('div', { class: 'kt-empty-state' }, spinner()));
initRules().finally(pollRuns);
