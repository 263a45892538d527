// SPDX-License-Identifier: BSD-3-Clause
// Trace view (timeline) checks: track names and groups from the trace's metadata, pins, the area
// selection summary (against /api/timeline/summary, whose numbers test_timeline.cpp pins), keys
// without a click, flags in the URL, the status bar's words, counter tracks, search navigation.

/// The timeline's accessible track list: [{kind: 'group'|'track'|'counter', name}] in display order.
function trackListJs() {
  const list = document.querySelector('.ks-tl-tracklist');
  if (!list || !list.children.length) return null;
  return [...list.children].map((li) => ({
    kind: li.classList.contains('ks-tl-li-group') ? 'group' : li.classList.contains('ks-tl-li-counter') ? 'counter' : 'track',
    name: (li.querySelector('.ks-tl-li-name') || li).textContent.trim(),
    track: li.dataset.track == null ? null : Number(li.dataset.track),
  }));
}

function statusJs() {
  const s = document.querySelector('.ks-tl-status');
  const c = document.querySelector('canvas.ks-tl-canvas');
  return s && c && Number(c.dataset.slices) > 0 ? s.textContent : null;
}

export async function run(ctx) {
  const { page, base, opts, check, getJson, waitFor, open, sel, shot } = ctx;
  const trace = await sel('resnet50_v100', 'Trace');
  const q = `run=resnet50_v100&worker=${encodeURIComponent(trace.worker)}&span=${trace.span}`;
  const meta = await getJson(base, `timeline/tracks?${q}`);
  const idOf = (name) => (meta.tracks.find((t) => t.name === name) || {}).id;
  const mainId = idOf('thread 25738 (python)');
  const streamId = idOf('GPU 0 stream 7');
  check(mainId != null && streamId != null, `Trace: the tracks API names "thread 25738 (python)" and "GPU 0 stream 7" (${meta.tracks.map((t) => t.name).join(', ')})`);

  // 1. Names and groups in the view, never a bare id.
  await open(trace);
  const list = await waitFor(page, trackListJs, null);
  const names = list ? list.map((x) => x.name) : [];
  check(names.includes('thread 25738 (python)') && names.includes('GPU 0 stream 7'),
    `Trace: track headers "thread 25738 (python)" and "GPU 0 stream 7" (${names.slice(0, 8).join(' | ')})`);
  check(names.includes('python (pid 25738)') && names.some((n) => n.startsWith('GPU 0 \u00b7 Tesla V100')),
    `Trace: groups "python (pid 25738)" and "GPU 0 · Tesla V100…" (${list ? list.filter((x) => x.kind === 'group').map((x) => x.name).join(' | ') : 'none'})`);
  check(list && list.every((x) => !/^\s*-?\d+(\s+-?\d+)?\s*$/.test(x.name)), 'Trace: no track or group is named by raw ids alone');
  // 4. Counters: utilization and SM efficiency side by side.
  const counters = list ? list.filter((x) => x.kind === 'counter').map((x) => x.name) : [];
  const u = counters.indexOf('GPU 0 Utilization');
  check(u >= 0 && counters[u + 1] === 'GPU 0 Est. SM Efficiency',
    `Trace: counter tracks "GPU 0 Utilization" then "GPU 0 Est. SM Efficiency" (${counters.join(', ')})`);
  // 3. Search navigation buttons read as search navigation.
  const nav = await page.evaluate(() => [...document.querySelectorAll('.ks-tl-searchbox button')].map((b) => b.getAttribute('aria-label')));
  check(nav.join('|') === 'Previous match|Next match', `Trace: the search box's buttons are "Previous match" / "Next match" (${nav.join(', ')})`);

  // 6. Status bar in user words (no merge width or request time without debug=1).
  const status = await waitFor(page, statusJs, null);
  check(status && /^Showing /.test(status) && /slices on screen/.test(status) && !/merge|request/.test(status),
    `Trace: status bar in user words (${status})`);
  const help = await page.evaluate(() => document.querySelector('.ks-tl-help').textContent);
  check(/Ctrl/.test(help) && /wheel/.test(help) && /zoom/.test(help) && /Shift \+ drag/.test(help.replace(/\s+/g, ' ')),
    'Trace: the help says Ctrl/⌘ + wheel zooms and Shift + drag selects an area');

  // 3. Keys without clicking the canvas first: W zooms in, D and → pan.
  const hashSpan = () => page.evaluate(() => {
    const p = new URLSearchParams(location.hash.slice(1));
    return p.get('t0') == null ? null : [Number(p.get('t0')), Number(p.get('t1'))];
  });
  await page.mouse.move(5, 5);
  const focused = await page.evaluate(() => document.activeElement && document.activeElement.tagName);
  await page.keyboard.press('w');
  await page.keyboard.press('w');
  const zoomed = await waitFor(page, () => {
    const p = new URLSearchParams(location.hash.slice(1));
    return p.get('t0') == null ? null : [Number(p.get('t0')), Number(p.get('t1'))];
  }, null);
  const full = meta.duration;
  check(zoomed && zoomed[1] - zoomed[0] < full * 0.8,
    `Trace: W zooms in without a click on the canvas (focus on ${focused}; window ${zoomed && (zoomed[1] - zoomed[0]).toFixed(0)} µs of ${full.toFixed(0)})`);
  await page.keyboard.press('ArrowRight');
  await page.waitForTimeout(400);
  const panned = await hashSpan();
  check(panned && zoomed && panned[0] > zoomed[0] && Math.abs((panned[1] - panned[0]) - (zoomed[1] - zoomed[0])) < 1,
    `Trace: → pans right keeping the width (${zoomed && zoomed[0].toFixed(0)} → ${panned && panned[0].toFixed(0)} µs)`);

  // 3. Plain wheel leaves the time range alone (the tracks scroll natively); Ctrl + wheel zooms.
  const cbox = await page.evaluate(() => { const r = document.querySelector('canvas.ks-tl-canvas').getBoundingClientRect(); return { x: r.x, y: r.y, w: r.width, h: r.height }; });
  await page.evaluate(() => {
    window.__wheelPrevented = null;
    document.querySelector('canvas.ks-tl-canvas').addEventListener('wheel', (e) => { setTimeout(() => { window.__wheelPrevented = e.defaultPrevented; }, 0); });
  });
  await page.mouse.move(cbox.x + cbox.w * 0.6, cbox.y + cbox.h * 0.5);
  await page.mouse.wheel(0, 200);
  await page.waitForTimeout(500);
  const afterWheel = await hashSpan();
  const prevented = await page.evaluate(() => window.__wheelPrevented);
  check(prevented === false && afterWheel && panned && afterWheel[0] === panned[0] && afterWheel[1] === panned[1],
    `Trace: a plain wheel scrolls the tracks and keeps the time range (default prevented: ${prevented}; ${afterWheel && afterWheel.join('–')})`);
  await page.keyboard.down('Control');
  await page.mouse.wheel(0, -200);
  await page.keyboard.up('Control');
  const ctrlZoom = await waitFor(page, (w) => {
    const p = new URLSearchParams(location.hash.slice(1));
    const span = Number(p.get('t1')) - Number(p.get('t0'));
    return span < w ? span : null;
  }, afterWheel ? afterWheel[1] - afterWheel[0] : 0);
  check(ctrlZoom !== null, `Trace: Ctrl + wheel zooms in (window ${ctrlZoom && ctrlZoom.toFixed(0)} µs)`);

  // 2. Area selection from the URL: the summary rows equal the API's (pinned by test_timeline.cpp).
  const start = 450000;
  const end = 451500;
  const api = await getJson(base, `timeline/summary?${q}&start=${start}&end=${end}&tracks=${mainId},${streamId}`);
  await open({ ...trace, t0: 449000, t1: 452500, area: `${start},${end}`, area_tracks: `${mainId},${streamId}` });
  const rows = await waitFor(page, () => {
    const t = document.querySelector('.ks-tl-area .ks-tl-summary');
    if (!t || t.querySelectorAll('tr').length < 2) return null;
    return [...t.querySelectorAll('tr[data-name]')].map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent.trim()));
  }, null);
  const fmt = (us) => (us >= 1e3 ? `${String(Number((us / 1e3).toFixed(3)))} ms` : `${String(Number(us.toFixed(3)))} \u00b5s`);
  const want = api.rows.find((r) => r.name === 'aten::batch_norm');
  const got = rows && rows.find((r) => r[0] === 'aten::batch_norm');
  check(want && want.count === 2 && got && got[1] === String(want.count) && got[2] === fmt(want.total) && got[3] === fmt(want.self),
    `Trace: area summary row aten::batch_norm = API (count ${want && want.count}, total ${want && fmt(want.total)}, self ${want && fmt(want.self)}; shown ${got && got.slice(1, 4).join(' / ')})`);
  check(rows && rows.length === Math.min(200, api.rows.length) && rows[0][0] === api.rows[0].name,
    `Trace: area summary lists ${api.rows.length} names, the longest first (${rows && rows[0] && rows[0][0]})`);
  const gpuLine = await page.evaluate(() => { const g = document.querySelector('.ks-tl-area .ks-tl-gpu'); return g ? g.textContent : null; });
  check(gpuLine && api.gpus.length === 1 && gpuLine.includes(`busy ${fmt(api.gpus[0].busy)}`) && gpuLine.includes(`idle ${fmt(api.gpus[0].idle)}`),
    `Trace: area GPU 0 busy/idle as the API (${gpuLine})`);
  const flameCells = await page.evaluate(() => document.querySelectorAll('.ks-tl-area .ks-tl-flame-cell').length);
  check(flameCells > 3, `Trace: the area's flame graph draws (${flameCells} cells)`);
  await shot(page, opts.out, 'trace-selection.png');

  // 2. Shift-drag on the canvas makes an area and asks for its summary.
  const box = await page.evaluate(() => { const r = document.querySelector('canvas.ks-tl-canvas').getBoundingClientRect(); return { x: r.x, y: r.y, w: r.width, h: r.height }; });
  await page.keyboard.press('Escape');
  await waitFor(page, () => !new URLSearchParams(location.hash.slice(1)).get('area'), null);
  await page.keyboard.down('Shift');
  await page.mouse.move(box.x + 400, box.y + box.h * 0.5);
  await page.mouse.down();
  await page.mouse.move(box.x + 600, box.y + box.h * 0.6, { steps: 5 });
  await page.mouse.move(box.x + 700, box.y + box.h * 0.7, { steps: 5 });
  await page.mouse.up();
  await page.keyboard.up('Shift');
  const dragged = await waitFor(page, () => {
    const a = document.querySelector('.ks-tl-area');
    const area = new URLSearchParams(location.hash.slice(1)).get('area');
    return a && !a.hidden && a.dataset.slices != null && area ? { area, slices: Number(a.dataset.slices) } : null;
  }, null);
  check(dragged !== null, `Trace: Shift-drag selects an area, summarised and kept in the URL (${dragged && `${dragged.area}: ${dragged.slices} slices`})`);

  // 5. Flags: M at two mouse positions; the URL keeps them and a shared link restores them.
  await page.keyboard.press('Escape');
  await page.mouse.move(box.x + 500, box.y + box.h * 0.5);
  await page.keyboard.press('m');
  await page.mouse.move(box.x + 800, box.y + box.h * 0.5);
  await page.keyboard.press('m');
  const flagged = await waitFor(page, () => {
    const f = new URLSearchParams(location.hash.slice(1)).get('flags');
    return f && f.split(',').length === 2 ? location.hash : null;
  }, null);
  check(flagged !== null, `Trace: M drops flags, kept in the URL (${flagged})`);
  if (flagged) {
    await page.goto('about:blank');
    await page.goto(`${base}${flagged}`, { waitUntil: 'load' });
    const st = await waitFor(page, () => {
      const s = document.querySelector('.ks-tl-status');
      return s && /2 flags, first to last/.test(s.textContent) ? s.textContent : null;
    }, null);
    check(st !== null, `Trace: a shared link restores the flags and the measure between them (${st})`);
  }

  // 1. Pins: pin the stream via the track list; it moves to the top and into the URL.
  await page.evaluate((id) => {
    const li = document.querySelector(`.ks-tl-tracklist [data-track="${id}"] .ks-tl-li-pin`);
    if (li) li.click();
  }, streamId);
  const pinned = await waitFor(page, (id) => {
    const list = [...document.querySelectorAll('.ks-tl-tracklist > *')];
    const firstTrack = list.find((li) => li.dataset.track != null);
    const pins = new URLSearchParams(location.hash.slice(1)).get('pins');
    return firstTrack && firstTrack.dataset.track === String(id) && pins === String(id) ? pins : null;
  }, streamId);
  check(pinned !== null, `Trace: a pinned track comes first and is kept in the URL (pins=${pinned})`);
  // Groups collapse: the GPU group's tracks leave the list.
  const collapsed = await page.evaluate(() => {
    const g = [...document.querySelectorAll('.ks-tl-tracklist .ks-tl-li-group')].find((x) => x.dataset.group === 'python (pid 25738)');
    if (!g) return null;
    const before = document.querySelectorAll('.ks-tl-tracklist .ks-tl-li-track').length;
    g.querySelector('button').click();
    const after = document.querySelectorAll('.ks-tl-tracklist .ks-tl-li-track').length;
    return { before, after };
  });
  check(collapsed && collapsed.after < collapsed.before, `Trace: collapsing a group hides its tracks (${collapsed && `${collapsed.before} → ${collapsed.after}`})`);
  await page.evaluate(() => {
    const g = [...document.querySelectorAll('.ks-tl-tracklist .ks-tl-li-group')].find((x) => x.dataset.group === 'python (pid 25738)');
    if (g) g.querySelector('button').click();
  });

  // 4. "Show all flows" of a selected slice's subtree: the API's subtree flows, drawn and listed.
  const conv = (await getJson(base, `timeline/search?${q}&q=aten::conv2d&limit=1`)).results[0];
  const own = await getJson(base, `timeline/event?${q}&id=${conv.id}`);
  const all = await getJson(base, `timeline/event?${q}&id=${conv.id}&subtree=1`);
  await open({ ...trace, event: conv.id });
  const flowsTitle = () => {
    const d = document.querySelector('.ks-tl-details:not(.ks-tl-area)');
    if (!d || d.hidden || !d.querySelector('.ks-tl-allflows')) return null;
    const t = [...d.querySelectorAll('.ks-tl-subtitle')].find((x) => /^Flows/.test(x.textContent));
    return t ? t.textContent : 'no flows';
  };
  const before = await waitFor(page, flowsTitle, null);
  await page.evaluate(() => document.querySelector('.ks-tl-details .ks-tl-allflows').click());
  const after = await waitFor(page, (want) => {
    const t = [...document.querySelectorAll('.ks-tl-details .ks-tl-subtitle')].find((x) => /^Flows/.test(x.textContent));
    return t && t.textContent.startsWith(want) ? t.textContent : null;
  }, `Flows (${all.flows.length}`);
  check(before === (own.flows.length ? `Flows (${own.flows.length})` : 'no flows') && after !== null && all.flows.length > 0 && all.flows.every((f) => f.from),
    `Trace: "Show all flows of its subtree" lists the subtree's flows (${before} → ${after}; API ${own.flows.length} → ${all.flows.length})`);

  // 4. Memory counter tracks of the cnn run (its trace has totals).
  const cnn = await sel('cnn', 'Trace');
  await open(cnn);
  const cnnList = await waitFor(page, trackListJs, null);
  const memCounters = cnnList ? cnnList.filter((x) => x.kind === 'counter' && /Memory (Allocated|Reserved)/.test(x.name)).map((x) => x.name) : [];
  check(memCounters.length >= 1, `Trace (cnn): memory counter tracks (${memCounters.join(', ') || 'none'})`);
}
