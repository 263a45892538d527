// SPDX-License-Identifier: BSD-3-Clause
// Browser check of issue 16's memory-bounded server, client side: a request the server answers
// 503 ("loading <file> for this view": the trace's model is being loaded again after it was let
// go to stay within --max_memory) is asked again every second while the page says the view is
// waiting; once answered, the view shows and the notice goes. The 503s are injected by routing
// the operator table request (a real server answers it from its summary at once).

export async function run(ctx) {
  const { page, check, waitFor, open, sel, problems } = ctx;
  const before = problems.length;
  const target = await sel('resnet50_v100', 'Operator');
  let refused = 0;
  const pattern = /\/api\/operation\/table\?/;
  await page.route(pattern, async (route) => {
    if (refused < 2) {
      refused += 1;
      await route.fulfill({ status: 503, contentType: 'application/json; charset=utf-8',
        body: JSON.stringify({ error: 'loading resnet50_v100/worker0.pt.trace.json for this view' }) });
    } else {
      await route.continue();
    }
  });
  try {
    await open(target);
    const notice = await waitFor(page, () => {
      const el = document.querySelector('.kt-waiting');
      return el && !el.hidden ? el.textContent : null;
    }, null);
    check(notice === 'Waiting: the server is loading resnet50_v100/worker0.pt.trace.json for this view\u2026',
      `a view answered 503 says it waits for the load (${notice})`);
    const rows = await waitFor(page, () => {
      const el = document.querySelector('.kt-waiting');
      const n = document.querySelectorAll('.kt-table-grid tbody tr').length;
      return el && el.hidden && n > 0 ? n : null;
    }, null);
    check(rows > 0 && refused === 2, `after two 503s the operator table shows (${rows} rows) and the notice is gone (asked ${refused + 1} times)`);
  } finally {
    await page.unroute(pattern);
    // The injected 503s are expected here: drop what the page watcher noted of them, nothing else.
    const injected = (p) => /HTTP 503 for .*\/api\/operation\/table\?/.test(p) || /status of 503/.test(p);
    const kept = problems.slice(before).filter((p) => !injected(p));
    check(problems.length - before - kept.length >= 2,
      `the watcher saw the two injected 503s (response + console each): ${problems.slice(before).join(' | ')}`);
    problems.splice(before, problems.length - before, ...kept);
  }
}
