// SPDX-License-Identifier: BSD-3-Clause
// Parity with torch-tb-profiler (issue 15, "remaining differences"), as a user sees it:
// the Operator view's pies follow "Operator + Input Shape"; the Tensor Cores columns on a CPU-only
// trace; the Distributed view of a one-worker run; the Module view's operator-tree timeline.
// Every page is opened, and the API asked, with torch-tb-profiler's rules (rules=plugin): this is
// parity with the plugin, whatever the server's default rule set.
// Called by web/tests/browser.mjs with its context (see there).

/// Legend labels of the donut titled `title` in the Operator view, or null while absent.
/// (The title is shown without its "(us)": the values are shown in units.) The "Other" slice
/// (rows beyond the top N) is left out.
function legendJs(title) {
  const bare = title.replace(/\s*\(us\)$/, '');
  const chart = [...document.querySelectorAll('.kt-donut')]
    .find((c) => (c.querySelector('.kt-chart-title') || {}).textContent === bare);
  if (!chart) return null;
  const labels = [...chart.querySelectorAll('.kt-legend-label')].map((l) => l.textContent).filter((l) => l !== 'Other');
  return labels.length ? labels : null;
}

export async function run(ctx) {
  const { page, check, waitFor, open, sel, shot, opts, expectedResnet, tableRowsJs, getJson, base, PLUGIN } = ctx;
  const P = PLUGIN.rules;

  // --- 1. Operator + Input Shape: the pies are those of the (name, input shape) groups. The
  // plugin's top 10 of Host Self Time by shape (golden numbers, well apart on this trace).
  const golden = expectedResnet.operators.by_name_and_input_shape;
  const wantShape = [...golden].sort((a, b) => b.host_self_us - a.host_self_us).slice(0, 10).map((r) => r.name);
  const wantName = [...expectedResnet.operators.by_name].sort((a, b) => b.host_self_us - a.host_self_us)
    .slice(0, 10).map((r) => r.name);
  await open(await sel('resnet50_v100', 'Operator', 0, P));
  const before = await waitFor(page, legendJs, 'Host Self Time (us)');
  check(before && before.join('|') === wantName.join('|'),
    `Operator: Host Self Time pie by name shows the plugin's top 10 (${before && before.join(', ')})`);
  await page.selectOption('select:has(option[value="OperationAndInputShape"])', 'OperationAndInputShape');
  const after = await waitFor(page, (want) => {
    const chart = [...document.querySelectorAll('.kt-donut')]
      .find((c) => (c.querySelector('.kt-chart-title') || {}).textContent === 'Host Self Time');
    const labels = chart ? [...chart.querySelectorAll('.kt-legend-label')].map((l) => l.textContent).filter((l) => l !== 'Other') : [];
    return labels.join('|') === want ? labels : null;
  }, wantShape.join('|'), 15000);
  const shown = after || await page.evaluate(legendJs, 'Host Self Time (us)');
  check(after !== null,
    `Operator + Input Shape: Host Self Time pie shows the plugin's by-shape top 10, aten::add_ twice (${shown && shown.join(', ')})`);
  const shapeRows = await waitFor(page, () => {
    const head = [...document.querySelectorAll('.kt-table-grid thead th')].map((t) => t.textContent);
    return head.some((t) => /Input Shape/.test(t)) ? head : null;
  }, null, 10000);
  check(shapeRows !== null, 'Operator + Input Shape: the table shows the Input Shape column');
  await shot(page, opts.out, 'operator_by_shape.png');

  // --- 2. CPU-only trace: the Tensor Cores columns are there, as in the plugin.
  await open(await sel('cpu_only', 'Operator', 0, P));
  const cpuHead = await waitFor(page, () => {
    const head = [...document.querySelectorAll('.kt-table-grid thead th')].map((t) => t.textContent.trim());
    return head.length ? head : null;
  }, null);
  check(cpuHead && cpuHead.some((t) => /Tensor Cores Eligible/.test(t)) && !cpuHead.some((t) => /Device Self/.test(t)),
    `Operator (cpu_only): Tensor Cores columns shown, no device columns (${cpuHead && cpuHead.join(' | ')})`);
  const cpuRows = await waitFor(page, tableRowsJs, null);
  check(cpuRows && cpuRows.length > 0 && cpuRows.every((r) => r.includes('No') || r.includes('Yes')),
    `Operator (cpu_only): every row says whether it is Tensor Cores eligible (${cpuRows ? cpuRows.length : 0} rows)`);

  // --- 4. A one-worker run with communication: cpu_only is one rank of a Gloo job (10
  // gloo:all_reduce calls); the plugin offers its Distributed view, and so do we.
  const views = await getJson(base, `views?run=cpu_only&rules=${P}`);
  check(views.includes('Distributed'), `cpu_only (1 worker, Gloo) offers the Distributed view (${views.join(', ')})`);
  const noComm = await getJson(base, `views?run=resnet50_v100&rules=${P}`);
  check(!noComm.includes('Distributed'), `resnet50_v100 (no communication) has no Distributed view (${noComm.join(', ')})`);
  const spans = await getJson(base, `spans?run=cpu_only&worker=All&rules=${P}`);
  await open({ run: 'cpu_only', worker: 'All', span: spans[0], view: 'Distributed', ...PLUGIN });
  const dist = await waitFor(page, () => {
    const charts = [...document.querySelectorAll('.dist-chart')];
    return charts.length === 2 && charts.every((c) => c.querySelector('.kt-bar')) ? charts.map((c) => Number(c.dataset.workers)) : null;
  }, null);
  check(dist && dist.every((n) => n === 1), `Distributed (cpu_only): both charts draw 1 worker (${JSON.stringify(dist)})`);
  const ops = await waitFor(page, tableRowsJs, '.dist-view');
  check(ops && ops.length === 1 && ops[0][0] === 'gloo:all_reduce' && ops[0][1] === '10',
    `Distributed (cpu_only): the communication ops table shows gloo:all_reduce, 10 calls (${ops ? ops.map((r) => r.slice(0, 2).join(' ')).join(', ') : 'none'})`);
  await shot(page, opts.out, 'distributed_one_worker.png');

  // --- 3. Module view: the operator-tree timeline under the flame graph. The synthetic module
  // run's thread: CallTreeRoot, 2 ProfilerSteps, 9 module calls (Net_0, Linear_0, ReLU_0,
  // Dropout_0 twice, Loss_0 once) and 7 operators = 19 bars on 5 levels
  // (root > step > Net_0 > Linear_0 > aten::linear).
  await open(await sel('modules', 'Module', 0, P));
  const tl = await waitFor(page, () => {
    const box = document.querySelector('.mod-timeline');
    const canvas = box && box.querySelector('canvas');
    return canvas && Number(box.dataset.bars) > 0
      ? { bars: Number(box.dataset.bars), levels: Number(box.dataset.levels), drawn: Number(box.dataset.drawn), height: canvas.clientHeight }
      : null;
  }, null);
  check(tl && tl.bars === 19 && tl.levels === 5 && tl.drawn === 19 && tl.height > 0,
    `Module (modules): the timeline draws 19 bars on 5 levels (${JSON.stringify(tl)})`);
  // Hovering the first level-2 bar (the first Net_0 call, 100..700 µs of 0..2000) names it.
  const canvasBox = await (await page.$('.mod-timeline canvas')).boundingBox();
  if (check(canvasBox !== null, 'Module: the timeline canvas is on the page')) {
    const tree = await getJson(base, `tree?run=modules&worker=${encodeURIComponent((await sel('modules', 'Module', 0, P)).worker)}&span=default&rules=${P}`);
    const t0 = tree.start_time;
    const t1 = tree.end_time;
    const net = tree.children[0].children.find((c) => c.name === 'nn.Module: Net_0');
    const x = canvasBox.x + canvasBox.width * ((net.start_time + net.end_time) / 2 - t0) / (t1 - t0);
    await page.mouse.move(x, canvasBox.y + 2 * 22 + 11);
    const tip = await waitFor(page, () => {
      const t = document.querySelector('.mod-timeline .mod-tooltip');
      return t && !t.hidden ? t.textContent : null;
    }, null, 5000);
    check(tip === 'nn.Module: Net_0 Duration: 600 us', `Module: hovering the first Net_0 bar shows its duration (${tip})`);
  }
  await shot(page, opts.out, 'module_timeline.png');
}
