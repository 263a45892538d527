// SPDX-License-Identifier: BSD-3-Clause
// Browser checks of issue 15's "tables, numbers, first impressions": wide tables (column chooser,
// sticky header and first column, reachable last column, elided names with the full text in the
// title), operator call stacks, units, the first screen of Memory / Module / Diff, and the dark
// theme. The checks against torch-tb-profiler's golden numbers (expectedResnet) open their pages,
// and ask the API, with the plugin's rules (rules=plugin); the others use the server's default.
// Called by browser.mjs with its context (see there).

const US = { ns: 0.001, 'µs': 1, ms: 1000, s: 1e6 };
const BYTES = { B: 1, KB: 1024, MB: 1024 ** 2, GB: 1024 ** 3 };

/// "1,234 ms" -> {value: 1234000, unit: 'ms'} (µs), or null when the text is not a duration.
function parseDuration(text) {
  const m = /^(-?[\d,]+(?:\.\d+)?) (ns|µs|ms|s)$/.exec(String(text).trim());
  return m ? { value: Number(m[1].replace(/,/g, '')) * US[m[2]], unit: m[2], number: Number(m[1].replace(/,/g, '')) } : null;
}

function parseBytes(text) {
  const m = /^(-?[\d,]+(?:\.\d+)?) (B|KB|MB|GB)$/.exec(String(text).trim());
  return m ? { value: Number(m[1].replace(/,/g, '')) * BYTES[m[2]], unit: m[2], number: Number(m[1].replace(/,/g, '')) } : null;
}

/// The unit a person expects for `us` microseconds.
const wantUnit = (us) => (us >= 1e6 ? 's' : us >= 1000 ? 'ms' : us >= 1 ? 'µs' : 'ns');
const close = (a, b, rel) => Math.abs(a - b) <= rel * Math.abs(b) + 1e-9;

/// Column index (among td cells of a row) of the header titled `title` in the first table in scope.
function columnIndexJs([scope, title]) {
  const root = scope ? document.querySelector(scope) : document;
  if (!root) return -1;  // not drawn yet (waitFor polls again)
  const ths = [...root.querySelectorAll('.kt-table-grid thead th')];
  return ths.findIndex((th) => th.querySelector('.kt-th-label') && th.querySelector('.kt-th-label').textContent === title);
}

export async function run(ctx) {
  const { page, context, base, check, getJson, waitFor, open, sel, shot, opts, expectedResnet, PLUGIN } = ctx;

  // ---------------------------------------------------------------------------------------
  // 1 and 3: the Operator table of resnet50_v100 span 1 (the plugin's rules: golden numbers).
  const ov = await sel('resnet50_v100', 'Overview');
  const ovp = { ...ov, ...PLUGIN };
  await page.evaluate(() => localStorage.clear()).catch(() => {});
  await open({ ...ovp, view: 'Operator' });
  await waitFor(page, ctx.tableRowsJs, null);
  const byName = expectedResnet.operators.by_name;
  const top = byName.reduce((a, b) => (b.device_self_us > a.device_self_us ? b : a));
  const opCells = await page.evaluate(([name, colJs]) => {
    const col = new Function(`return (${colJs})`)();
    const rows = [...document.querySelectorAll('.kt-table-grid tbody tr')];
    const tr = rows.find((r) => [...r.querySelectorAll('td')].some((td) => td.textContent.trim() === name));
    if (!tr) return null;
    const tds = [...tr.querySelectorAll('td')];
    const at = (t) => { const i = col([null, t]); return i >= 0 ? tds[i].textContent.trim() : null; };
    return { dself: at('Device Self Duration'), hself: at('Host Self Duration'), calls: at('Calls') };
  }, [top.name, columnIndexJs.toString()]);
  const dself = opCells && parseDuration(opCells.dself);
  check(dself && dself.unit === wantUnit(top.device_self_us) && close(dself.value, top.device_self_us, 0.006),
    `Operator: ${top.name}'s Device Self Duration reads ${top.device_self_us} µs in ${wantUnit(top.device_self_us)} (${opCells && opCells.dself})`);
  const hself = opCells && parseDuration(opCells.hself);
  check(hself && hself.unit === wantUnit(top.host_self_us) && close(hself.value, top.host_self_us, 0.006),
    `Operator: ${top.name}'s Host Self Duration reads ${top.host_self_us} µs in ${wantUnit(top.host_self_us)} (${opCells && opCells.hself})`);
  check(opCells && opCells.calls === top.calls.toLocaleString('en-US'), `Operator: calls of ${top.name} with thousands separators (${opCells && opCells.calls})`);

  // The donut centre of device self time: the sum of the whole table, labelled.
  const wantDevice = byName.reduce((a, o) => a + o.device_self_us, 0);
  const centre = await page.evaluate(() => {
    const d = [...document.querySelectorAll('.kt-donut')].find((x) => /Device Self/i.test(x.querySelector('.kt-chart-title')?.textContent || ''));
    return d ? { total: d.querySelector('.kt-donut-total')?.textContent, label: d.querySelector('.kt-donut-unit')?.textContent } : null;
  });
  const ct = centre && parseDuration(centre.total);
  check(ct && close(ct.value, wantDevice, 0.006) && /total/i.test(centre.label || ''),
    `Operator: the Device Self donut centre is the table's total ${wantDevice} µs, labelled (${centre && `${centre.total} / ${centre.label}`})`);

  // The last column is reachable: scrolled into view it is on screen and not covered.
  const narrow = await context.newPage();
  ctx.watch(narrow, 'narrow page', ctx.problems);
  await narrow.setViewportSize({ width: 900, height: 700 });
  await narrow.goto(`${base}${ctx.hashOf({ ...ovp, view: 'Operator' })}`, { waitUntil: 'load' });
  await waitFor(narrow, ctx.tableRowsJs, null);
  const wide = await narrow.evaluate(() => {
    const sc = document.querySelectorAll('.kt-table-scroll')[0];
    return sc ? { sw: sc.scrollWidth, cw: sc.clientWidth } : null;
  });
  check(wide && wide.sw > wide.cw, `Operator (900 px window): the table is wider than its box (${JSON.stringify(wide)})`);
  const lastTh = narrow.locator('.kt-table-grid').first().locator('thead th').last();
  await lastTh.scrollIntoViewIfNeeded();
  const lastSeen = await lastTh.evaluate((th) => {
    const r = th.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    const sc = th.closest('.kt-table-scroll').getBoundingClientRect();
    return { text: th.textContent, onScreen: r.right <= window.innerWidth && r.left >= 0 && r.bottom <= window.innerHeight,
      inBox: r.right <= sc.right + 1, hit: !!hit && th.contains(hit) };
  });
  check(lastSeen.onScreen && lastSeen.inBox && lastSeen.hit, `Operator: the last column "${lastSeen.text}" scrolls into view, uncovered (${JSON.stringify(lastSeen)})`);
  // The first column stays while the table is scrolled sideways, and the header while it is
  // scrolled down.
  const sticky = await narrow.evaluate(() => {
    const sc = document.querySelector('.kt-table-scroll');
    sc.scrollLeft = sc.scrollWidth;
    sc.scrollTop = 200;
    const box = sc.getBoundingClientRect();
    const first = sc.querySelector('tbody tr td.kt-sticky');
    const th = sc.querySelector('thead th');
    const fr = first.getBoundingClientRect();
    const hr = th.getBoundingClientRect();
    return { scrolledLeft: sc.scrollLeft, scrolledTop: sc.scrollTop, firstLeft: fr.left - box.left, headTop: hr.top - box.top,
      firstText: first.textContent.trim() };
  });
  check(sticky.scrolledLeft > 0 && sticky.firstLeft >= 0 && sticky.firstLeft < 40,
    `Operator: scrolled sideways, the first column stays at the left (${JSON.stringify(sticky)})`);
  check(sticky.scrolledTop > 0 && Math.abs(sticky.headTop) <= 2, `Operator: scrolled down, the header row stays on top (${sticky.headTop})`);
  // The horizontal scrollbar is on screen: the table box ends above the window's bottom.
  const boxBottom = await narrow.evaluate(() => {
    const sc = document.querySelector('.kt-table-scroll');
    sc.scrollIntoView({ block: 'end' });
    return { bottom: sc.getBoundingClientRect().bottom, height: sc.getBoundingClientRect().height, win: window.innerHeight };
  });
  check(boxBottom.height <= boxBottom.win && boxBottom.bottom <= boxBottom.win + 1,
    `Operator: the table's box (and its horizontal scrollbar) fits the window height (${JSON.stringify(boxBottom)})`);
  await narrow.close();

  // Column chooser: hiding "Host Total Duration" removes its header and one cell per row.
  const before = await page.evaluate(() => document.querySelectorAll('.kt-table-grid')[0].querySelectorAll('thead th').length);
  await page.click('.kt-table >> nth=0 >> .kt-col-chooser summary');
  await page.locator('.kt-col-list').first().locator('label', { hasText: 'Host Total Duration' }).locator('input').uncheck();
  const after = await page.evaluate(() => {
    const t = document.querySelectorAll('.kt-table-grid')[0];
    const labels = [...t.querySelectorAll('thead th')].map((th) => th.textContent);
    const row = t.querySelector('tbody tr');
    return { n: labels.length, hasCol: labels.some((l) => l.includes('Host Total Duration')), cells: row.querySelectorAll('td').length };
  });
  check(after.n === before - 1 && !after.hasCol && after.cells === after.n,
    `Operator: the column chooser hides Host Total Duration (${before} -> ${after.n} headers, ${after.cells} cells a row, still there: ${after.hasCol})`);
  await page.reload({ waitUntil: 'load' });
  await waitFor(page, ctx.tableRowsJs, null);
  const kept = await page.evaluate(() => [...document.querySelectorAll('.kt-table-grid')[0].querySelectorAll('thead th')].some((th) => th.textContent.includes('Host Total Duration')));
  check(kept === false, 'Operator: the hidden column stays hidden after a reload');
  await page.click('.kt-table >> nth=0 >> .kt-col-chooser summary');
  await page.locator('.kt-col-list').first().locator('label', { hasText: 'Host Total Duration' }).locator('input').check();
  await page.keyboard.press('Escape');

  // ---------------------------------------------------------------------------------------
  // 2: call stacks. The stack row names the user's frame with file:line; expanding it lists
  // every frame without sideways scrolling.
  const opTable = await getJson(base, `operation/table?run=resnet50_v100&worker=${encodeURIComponent(ov.worker)}&span=${ov.span}&group_by=Operation&rules=${ovp.rules}`);
  const withStack = opTable.data.filter((r) => r.has_call_stack).sort((a, b) => b.host_self_duration - a.host_self_duration)[0];
  if (check(!!withStack, `Operator: resnet50_v100 has operators with call stacks (${withStack && withStack.name})`)) {
    const stacks = await getJson(base, `operation/stack?run=resnet50_v100&worker=${encodeURIComponent(ov.worker)}&span=${ov.span}&group_by=Operation&op_name=${encodeURIComponent(withStack.name)}&rules=${ovp.rules}`);
    const fileLines = (stack) => stack.split(';').filter(Boolean).map((f) => /^(.*)\((\d+)\):/.exec(f)).map((m) => (m ? `${m[1]}:${m[2]}` : null));
    await page.fill('.kt-table-search', withStack.name);
    // Wait for the search to apply ("N of M rows"), so the table is not redrawn under the clicks.
    const ok = await waitFor(page, (name) => {
      const count = document.querySelector('.kt-table-count');
      const rows = [...document.querySelectorAll('.kt-table-grid tbody tr')].filter((r) => r.querySelectorAll('td').length > 1);
      return count && / of /.test(count.textContent) && rows.some((r) => r.textContent.includes(name)) ? rows.length : null;
    }, withStack.name, 10000);
    if (check(ok !== null, `Operator: search finds ${withStack.name}`)) {
      await page.evaluate((name) => {
        const tr = [...document.querySelectorAll('.kt-table-grid tbody tr')].find((r) => [...r.querySelectorAll('td')].some((td) => td.textContent.trim() === name));
        tr.querySelector('.kt-expander').click();
      }, withStack.name);
      const cell = await waitFor(page, () => {
        const box = document.querySelector('.kt-stack');
        if (!box) return null;
        const t = box.querySelector('.kt-table-grid');
        const i = [...t.querySelectorAll('thead th')].findIndex((th) => th.textContent.startsWith('Call Stack'));
        const tr = [...t.querySelectorAll('tbody tr')].find((r) => r.querySelectorAll('td').length > i);
        return tr && i >= 0 ? tr.querySelectorAll('td')[i].textContent.trim() : null;
      }, null, 15000);
      await page.locator('.kt-stack .kt-table-grid tbody tr .kt-expander').first().click();
      const list = await waitFor(page, () => {
        const ol = document.querySelector('.kt-stack .kt-frames');
        if (!ol) return null;
        const sc = ol.closest('.kt-table-scroll');
        const r = ol.getBoundingClientRect();
        const s = sc.getBoundingClientRect();
        return { files: [...ol.querySelectorAll('li')].map((li) => li.querySelector('.kt-frame-file')?.textContent || null),
          fits: r.right <= s.right + 1 && r.left >= s.left - 1 };
      }, null, 15000);
      // The stack the first row stands for: the API's stack with exactly these frames.
      const match = list && stacks.data.find((st) => JSON.stringify(fileLines(st.call_stack)) === JSON.stringify(list.files));
      check(match && list.fits && list.files.every((f) => /:\d+$/.test(f)),
        `Operator: the expanded stack lists every frame as file:line inside the visible table (${list && `${list.files.length} frames, fits: ${list.fits}, matches an API stack: ${!!match}`})`);
      const frames = match ? fileLines(match.call_stack) : [];
      const user = frames.find((f) => f && !/site-packages|\/torch\/|^</.test(f));
      check(user && cell && cell.includes(user) && !/site-packages/.test(cell) && frames[0] !== user,
        `Operator: the stack row of ${withStack.name} shows the user frame ${user}, not the first frame ${frames[0]} (${cell})`);
      await shot(page, opts.out, 'operator-stack.png');
    }
  }

  // ---------------------------------------------------------------------------------------
  // 1: input shapes stay on one line, the whole shape in the title and the copied text.
  const shapes = expectedResnet.operators.by_name_and_input_shape;
  const longShape = shapes.reduce((a, b) => (b.input_shape.length > a.input_shape.length ? b : a));
  await open({ ...ovp, view: 'Operator', op_group: 'OperationAndInputShape' });
  await waitFor(page, ctx.tableRowsJs, null);
  await page.selectOption('.kt-table-pager >> nth=0 >> .kt-page-size', '100');
  await page.fill('.kt-table-search', longShape.name);
  const shapeCell = await waitFor(page, (shape) => {
    const td = [...document.querySelectorAll('.kt-table-grid tbody td')].find((x) => x.title === shape);
    if (!td) return null;
    const th = [...document.querySelectorAll('.kt-table-grid thead th')][td.cellIndex];
    return { text: td.textContent, height: td.getBoundingClientRect().height, head: th && th.textContent,
      row: td.parentElement.getBoundingClientRect().height };
  }, longShape.input_shape, 15000);
  check(shapeCell && shapeCell.text === longShape.input_shape && shapeCell.head === 'Input Shape' && shapeCell.row < 30,
    `Operator by input shape: ${longShape.name}'s ${longShape.input_shape.length}-character shape is one line with the full text (${JSON.stringify(shapeCell)})`);

  // ---------------------------------------------------------------------------------------
  // 1 and 3: Kernel names are elided with the full name in the title; durations in units.
  await open({ ...ovp, view: 'Kernel' });
  await waitFor(page, ctx.tableRowsJs, null);
  const kTop = expectedResnet.kernels.by_name.reduce((a, b) => (b.total_us > a.total_us ? b : a));
  const kCell = await page.evaluate(([name, colJs]) => {
    const col = new Function(`return (${colJs})`)();
    const tds = [...document.querySelectorAll('.kt-table-grid tbody tr td')];
    const td = tds.find((x) => x.title === name);
    if (!td) return { found: false, titles: tds.slice(0, 3).map((x) => x.title) };
    const tr = td.parentElement;
    const i = col([null, 'Total Duration']);
    const r = td.getBoundingClientRect();
    return { found: true, text: td.textContent, elided: td.scrollWidth > td.clientWidth, oneLine: r.height < 30,
      total: i >= 0 ? tr.querySelectorAll('td')[i].textContent.trim() : null };
  }, [kTop.name, columnIndexJs.toString()]);
  check(kCell.found && kCell.text === kTop.name && kCell.elided && kCell.oneLine,
    `Kernel: the top kernel's long name is one elided line, its title and copied text the full name (${JSON.stringify({ ...kCell, text: undefined })})`);
  const kTotal = kCell.total && parseDuration(kCell.total);
  check(kTotal && kTotal.unit === wantUnit(kTop.total_us) && close(kTotal.value, kTop.total_us, 0.006),
    `Kernel: the top kernel's Total Duration reads ${kTop.total_us} µs in ${wantUnit(kTop.total_us)} (${kCell.total})`);
  const usSpellings = await page.evaluate(() => /\(us\)|\bus\b/.test(document.querySelector('.kt-view-body, #kt-view').innerText));
  check(usSpellings === false, 'Kernel: no "us" spelling of microseconds left on the page');

  // ---------------------------------------------------------------------------------------
  // 4 and 3: Memory opens on a device with data and lists every event; sizes in units.
  const memSel = await sel('cnn', 'Memory');
  const mq = `run=cnn&worker=${encodeURIComponent(memSel.worker)}&span=${encodeURIComponent(memSel.span)}`;
  const memEvents = await getJson(base, `memory_events?${mq}&time_metric=ms&memory_metric=KB`);
  await open(memSel);
  const memState = await waitFor(page, () => {
    const s = document.querySelector('.mem-device');
    const chart = document.querySelector('.mem-chart');
    const count = document.querySelector('.mem-events .kt-table-count');
    const hint = document.querySelector('.mem-hint');
    if (!s || !chart || !count) return null;
    const t = document.querySelector('.mem-events .kt-table-grid');
    const i = [...t.querySelectorAll('thead th')].findIndex((th) => /^Size/.test(th.textContent));
    const sizes = [...t.querySelectorAll('tbody tr')].map((r) => r.querySelectorAll('td')[i]?.textContent.trim()).filter(Boolean);
    return { device: s.value, points: Number(chart.dataset.points), count: count.textContent, hint: hint ? hint.textContent : '', sizes };
  }, null);
  const devRows = memState && (memEvents.rows[memState.device] || []).length;
  check(memState && memState.points > 0 && devRows > 0, `Memory (cnn): opens on device ${memState && memState.device}, which has ${memState && memState.points} curve points and ${devRows} events`);
  check(memState && memState.count === `${devRows} rows` && memState.hint.includes(`all ${devRows} events`),
    `Memory (cnn): no size filter at first, all ${devRows} events listed (${memState && `${memState.count}; ${memState.hint}`})`);
  check(memState && memState.sizes.length > 0 && memState.sizes.every((s) => parseBytes(s) !== null),
    `Memory (cnn): sizes shown as B/KB/MB/GB (${memState && memState.sizes.slice(0, 3).join(', ')})`);
  const sizeIdx = memEvents.columns.findIndex((c) => /^Size/.test(c.name));
  const biggestKb = memState ? Math.max(...(memEvents.rows[memState.device] || []).map((r) => r[sizeIdx])) : NaN;
  const biggest = memState && parseBytes(memState.sizes[0]);
  check(biggest && close(biggest.value, biggestKb * 1024, 0.006) && biggest.number < 1024 && biggest.number >= 1,
    `Memory (cnn): the largest event (${biggestKb} KB) reads ${memState && memState.sizes[0]}`);
  // The size boxes are in KB: "Min 100" keeps the events of at least 100 KB (exact bytes).
  const memBytes = await getJson(base, `memory_events?${mq}&time_metric=ms&memory_metric=B`);
  const bIdx = memBytes.columns.findIndex((c) => /^Size/.test(c.name));
  const wantAtLeast = memState ? (memBytes.rows[memState.device] || []).filter((r) => r[bIdx] >= 100 * 1024).length : -1;
  await page.fill('.mem-size >> nth=0', '100');
  const filtered = await waitFor(page, (n) => {
    const c = document.querySelector('.mem-events .kt-table-count');
    return c && c.textContent === `${n} rows` ? c.textContent : null;
  }, wantAtLeast, 10000);
  check(wantAtLeast > 0 && filtered === `${wantAtLeast} rows`,
    `Memory (cnn): Min Size 100 (KB) keeps the ${wantAtLeast} events of at least 102,400 bytes (${filtered})`);
  await shot(page, opts.out, 'memory-ui.png');

  // ---------------------------------------------------------------------------------------
  // 3: the Files list gives sizes in B/KB/MB/GB.
  const st = await getJson(base, 'status');
  const bigFile = st.files.reduce((a, f) => (f.size > a.size ? f : a));
  await page.click('.kt-files-link');
  const sizeText = await waitFor(page, (path) => {
    const m = document.querySelector('.kt-modal');
    const tr = m && [...m.querySelectorAll('.kt-table-grid tbody tr')].find((r) => [...r.querySelectorAll('td')].some((td) => td.textContent.trim() === path));
    if (!tr) return null;
    const i = [...m.querySelectorAll('.kt-table-grid thead th')].findIndex((th) => th.textContent.startsWith('Size'));
    return tr.querySelectorAll('td')[i].textContent.trim();
  }, bigFile.path, 10000);
  const sz = sizeText && parseBytes(sizeText);
  check(sz && close(sz.value, bigFile.size, 0.006) && sz.number >= 1 && sz.number < 1024,
    `Files: ${bigFile.path} (${bigFile.size} bytes) is listed as ${sizeText}`);
  await page.keyboard.press('Escape');

  // ---------------------------------------------------------------------------------------
  // 4: Module opens on the model root (the top-level module taking the most time).
  const modSel = await sel('modules', 'Module');
  const mods = await getJson(base, `module?run=modules&worker=${encodeURIComponent(modSel.worker)}&span=${encodeURIComponent(modSel.span)}`);
  const rootMod = mods.data.reduce((a, b) => (b.avg_duration > a.avg_duration ? b : a));
  await open(modSel);
  const flameOf = await waitFor(page, () => document.querySelector('.mod-flame svg')?.getAttribute('aria-label') || null, null);
  check(flameOf === `Flame graph of ${rootMod.name}`, `Module: the flame graph opens on the model root ${rootMod.name} (${flameOf})`);
  const modTime = await page.evaluate((name) => {
    const t = document.querySelector('.mod-view .kt-table-grid');
    const i = [...t.querySelectorAll('thead th')].findIndex((th) => th.textContent.startsWith('Host Total Time'));
    const tr = [...t.querySelectorAll('tbody tr')].find((r) => r.querySelector('td .kt-cell-text')?.textContent === name);
    return tr && i >= 0 ? tr.querySelectorAll('td')[i].textContent.trim() : null;
  }, rootMod.name);
  const mt = modTime && parseDuration(modTime);
  check(mt && close(mt.value, rootMod.host_duration, 0.006) && mt.unit === wantUnit(mt.value),
    `Module: ${rootMod.name}'s Host Total Time in a unit by magnitude (${modTime})`);

  // ---------------------------------------------------------------------------------------
  // 4: Diff never opens on a bare "No more level": a pair with nothing under the root explains
  // what to pick instead.
  const runs = (await getJson(base, 'runs')).runs;
  let flat = null;
  for (const r of runs) {
    const s = await sel(r, 'Overview').catch(() => null);
    if (!s || !s.worker) continue;
    const q = `run=${encodeURIComponent(r)}&worker=${encodeURIComponent(s.worker)}&span=${encodeURIComponent(s.span)}`;
    const node = await getJson(base, `diffnode?${q}&exp_${q.replace(/&/g, '&exp_')}&path=0`).catch(() => null);
    if (node && (!node.children || node.children.length === 0)) { flat = s; break; }
  }
  if (check(flat !== null, `Diff: some run's span has nothing under its root (${flat && flat.run})`)) {
    await open({ tab: 'diff', run: flat.run, worker: flat.worker, span: flat.span, exp_run: flat.run, exp_worker: flat.worker, exp_span: flat.span });
    const note = await waitFor(page, () => document.querySelector('.diff-note')?.textContent || null, null);
    check(note && !/^No more level/.test(note) && /Pick other spans/.test(note), `Diff (${flat.run} vs itself): the first screen says what to pick instead (${note})`);
  }

  // 3: the Diff table of resnet50_v100 span 1 vs 2 in units, the chart's axis with separators.
  const s1 = await sel('resnet50_v100', 'Overview', 0);
  const s2 = await sel('resnet50_v100', 'Overview', 1);
  const dq = `run=resnet50_v100&worker=${encodeURIComponent(s1.worker)}&span=${s1.span}` +
    `&exp_run=resnet50_v100&exp_worker=${encodeURIComponent(s2.worker)}&exp_span=${s2.span}`;
  const droot = await getJson(base, `diffnode?${dq}&path=0`);
  const agg = droot.left.aggs.reduce((a, b) => (b.host_duration > a.host_duration ? b : a));
  await open({ tab: 'diff', run: s1.run, worker: s1.worker, span: s1.span, exp_run: s2.run, exp_worker: s2.worker, exp_span: s2.span });
  const dCell = await waitFor(page, ([name]) => {
    // (No new Function() here: the app's CSP forbids eval, and waitFor polls inside the app page.)
    const ths = [...document.querySelectorAll('.diff-ops .kt-table-grid thead th')];
    const i = ths.findIndex((th) => th.querySelector('.kt-th-label') && th.querySelector('.kt-th-label').textContent === 'Baseline Host Duration');
    const tr = [...document.querySelectorAll('.diff-ops .kt-table-grid tbody tr')].find((r) => r.querySelector('td')?.textContent.trim() === name);
    const ticks = [...document.querySelectorAll('.diff-combo text')].map((t) => t.textContent).filter((t) => /^[\d,]+$/.test(t));
    return tr && i >= 0 ? { cell: tr.querySelectorAll('td')[i].textContent.trim(), ticks } : null;
  }, [agg.name, columnIndexJs.toString()]);
  const dv = dCell && parseDuration(dCell.cell);
  check(dv && dv.unit === wantUnit(agg.host_duration) && close(dv.value, agg.host_duration, 0.006),
    `Diff: ${agg.name}'s Baseline Host Duration ${agg.host_duration} µs reads ${dCell && dCell.cell}`);
  check(dCell && dCell.ticks.some((t) => Number(t.replace(/,/g, '')) >= 1000) &&
    dCell.ticks.every((t) => Number(t.replace(/,/g, '')) < 1000 || t.includes(',')),
  `Diff: the comparison chart's axis numbers have thousands separators (${dCell && dCell.ticks.join(' ')})`);

  // ---------------------------------------------------------------------------------------
  // 7: dark mode. The toggle changes the page's colours and is remembered; prefers-color-scheme
  // dark starts dark.
  // The page's colours once its cards and chart axes are drawn (null while a re-render after a
  // theme change has them absent), for the theme `want` ('' for any).
  const coloursJs = (want) => {
    const card = document.querySelector('.kt-card');
    const axis = document.querySelector('.kt-axis');
    const theme = document.documentElement.dataset.theme || '';
    if (!card || !axis || (want && theme !== want)) return null;
    const lum = (c) => { const m = c.match(/\d+(\.\d+)?/g).map(Number); return (0.2126 * m[0] + 0.7152 * m[1] + 0.0722 * m[2]) / 255; };
    const bg = getComputedStyle(document.body).backgroundColor;
    const text = getComputedStyle(document.body).color;
    return { bg, bgLum: lum(bg), textLum: lum(text), card: lum(getComputedStyle(card).backgroundColor),
      axisLum: lum(getComputedStyle(axis).fill), theme };
  };
  const colours = () => page.evaluate(() => {
    const card = document.querySelector('.kt-card');
    const lum = (c) => { const m = c.match(/\d+(\.\d+)?/g).map(Number); return (0.2126 * m[0] + 0.7152 * m[1] + 0.0722 * m[2]) / 255; };
    const bg = getComputedStyle(document.body).backgroundColor;
    const text = getComputedStyle(document.body).color;
    const axis = document.querySelector('.kt-axis');
    return { bg, bgLum: lum(bg), textLum: lum(text), card: card ? lum(getComputedStyle(card).backgroundColor) : null,
      axisLum: axis ? lum(getComputedStyle(axis).fill) : null, theme: document.documentElement.dataset.theme || '' };
  });
  await page.emulateMedia({ colorScheme: 'light' });
  await page.evaluate(() => localStorage.removeItem('kt-theme'));
  await open(ov);
  await waitFor(page, () => document.querySelector('.kt-axis') || null, null);
  const light = await colours();
  check(light.bgLum > 0.8 && light.textLum < 0.3, `Theme: light by default with a light system (${JSON.stringify(light)})`);
  await page.click('.kt-theme-toggle');
  const dark = await waitFor(page, coloursJs, 'dark', 10000);
  check(dark && dark.bg !== light.bg && dark.bgLum < 0.2 && dark.textLum > 0.7 && dark.card < 0.2 && dark.axisLum > 0.5,
    `Theme: the toggle switches to dark, text and chart axes stay readable (${JSON.stringify(dark)})`);
  await shot(page, opts.out, 'overview-dark.png');
  // The Trace view keeps its light timeline (its canvas paints a light palette) in the dark page.
  await open({ ...ov, view: 'Trace' });
  const tl = await waitFor(page, () => {
    const root = document.querySelector('.ks-tl');
    const c = root && [...root.querySelectorAll('canvas')].find((x) => Number(x.dataset.slices) > 0);
    if (!c) return null;
    const lum = (v) => { const m = v.match(/\d+(\.\d+)?/g).map(Number); return (0.2126 * m[0] + 0.7152 * m[1] + 0.0722 * m[2]) / 255; };
    const st = getComputedStyle(root);
    return { theme: document.documentElement.dataset.theme, bg: lum(st.backgroundColor), text: lum(st.color),
      page: lum(getComputedStyle(document.body).backgroundColor) };
  }, null);
  check(tl && tl.theme === 'dark' && tl.page < 0.2 && tl.bg > 0.8 && tl.text < 0.3,
    `Theme: in the dark page the Trace timeline stays a readable light panel (${JSON.stringify(tl)})`);
  await shot(page, opts.out, 'trace-dark.png');
  await page.reload({ waitUntil: 'load' });
  const kept2 = await waitFor(page, () => (getComputedStyle(document.body).backgroundColor !== 'rgba(0, 0, 0, 0)' ? document.documentElement.dataset.theme || 'none' : null), null, 10000);
  check(kept2 === 'dark', `Theme: the choice is kept after a reload (${kept2})`);
  await page.click('.kt-theme-toggle');
  await page.evaluate(() => localStorage.removeItem('kt-theme'));
  await page.emulateMedia({ colorScheme: 'dark' });
  await open({ ...ov, view: 'Operator' });
  await waitFor(page, ctx.tableRowsJs, null);
  const sys = await colours();
  check(sys.theme === '' && sys.bgLum < 0.2 && sys.textLum > 0.7, `Theme: prefers-color-scheme dark starts dark (${JSON.stringify(sys)})`);
  await shot(page, opts.out, 'operator-dark.png');
  await page.emulateMedia({ colorScheme: 'light' });
}
