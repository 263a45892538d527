// SPDX-License-Identifier: BSD-3-Clause
// Memory view (the plugin's fe/src/components/MemoryView.tsx): device select, the
// Allocated/Reserved curve with drag-to-zoom, the allocation events table with a size filter, and
// the per-operator statistics.
import './memory.css';
import { createTable } from '../components/table.js';
import { lineChart } from '../components/charts.js';
import { h, titledCard as card } from '../components/dom.js';
import { unitColumn } from '../components/units.js';

const EMPTY_MESSAGE = 'This profile has no memory events (record with profile_memory=True)';

/// Table columns from a plugin column list ([{name, type, tooltip}]); keys are c0, c1, ...
/// Sizes ("(KB)") and times ("(ms)") are shown in a unit picked by magnitude.
function tableColumns(cols) {
  return cols.map((c, i) => {
    const u = c.type === 'number' ? unitColumn(c.name) : null;
    return {
      key: `c${i}`,
      title: u ? u.title : c.name,
      type: c.type === 'number' ? 'number' : 'string',
      tooltip: c.tooltip || undefined,
      format: u ? u.format : c.type === 'number' ? formatNumber : undefined,
    };
  });
}

function formatNumber(v) {
  if (v === null || v === undefined || v === '') return '';
  if (typeof v !== 'number') return String(v);
  return Number.isInteger(v) ? String(v) : String(Math.round(v * 100) / 100);
}

/// Row arrays -> objects keyed like tableColumns().
function tableRows(rows) {
  return rows.map((r) => {
    const o = {};
    r.forEach((v, i) => { o[`c${i}`] = v; });
    return o;
  });
}

/// Parses a number box; empty -> null.
function parseBox(input) {
  const t = input.value.trim();
  if (t === '') return null;
  const v = Number(t);
  return Number.isFinite(v) ? v : null;
}

/// Renders the Memory view into el.
export async function render(el, ctx) {
  el.textContent = '';
  const root = h('div', 'mem-view');
  el.appendChild(root);
  const status = h('div', 'mem-status', 'Loading memory data…');
  root.appendChild(status);

  const [stats, curve, events] = await Promise.all([
    ctx.api('memory', { memory_metric: 'B' }),
    ctx.api('memory_curve', { time_metric: 'ms', memory_metric: 'MB' }),
    ctx.api('memory_events', { time_metric: 'ms', memory_metric: 'B' }),
  ]);
  // Each body lists only its devices with rows (as the plugin): offer every device any of the
  // three has, so a device with a curve but no operator statistics stays selectable.
  const devices = [...new Set([
    ...Object.keys((stats && stats.rows) || {}),
    ...((curve && curve.metadata && curve.metadata.devices) || []),
    ...Object.keys((events && events.rows) || {}),
  ])].sort();
  if (devices.length === 0) {
    status.className = 'mem-empty';
    status.textContent = EMPTY_MESSAGE;
    return undefined;
  }
  status.remove();

  const meta = (curve && curve.metadata) || {};
  const timeFactor = meta.time_factor || 0.001;
  const firstTs = meta.first_ts || 0;
  // Open on a device that has data: the one in the URL, else the server's default device, else
  // the first device with curve points or events (a CPU-only curve next to an empty GPU, say).
  const hasData = (d) => ((curve && curve.rows && curve.rows[d]) || []).length > 0
    || ((events && events.rows && events.rows[d]) || []).length > 0
    || ((stats && stats.rows && stats.rows[d]) || []).length > 0;
  const wanted = ctx.hash && ctx.hash.device;
  // The bodies' rule for default_device, over all their devices (the first GPU, else the
  // first), unless the URL names one; then the first of those that has data.
  const preferred = [wanted, devices.find((d) => d.startsWith('GPU')), ...devices].filter((d) => devices.includes(d));
  let device = preferred.find(hasData) || preferred[0];
  let range = null;  // {start_ts, end_ts} absolute µs, or null for the whole profile
  let generation = 0;  // drops answers of superseded requests
  const cleanups = [];

  // Toolbar: device select.
  const bar = h('div', 'mem-toolbar');
  const label = h('label', 'mem-label', 'Device ');
  const select = h('select', 'mem-device');
  select.setAttribute('aria-label', 'Device');
  for (const d of devices) {
    const o = h('option', '', d);
    o.value = d;
    select.appendChild(o);
  }
  select.value = device;
  label.appendChild(select);
  const rangeText = h('span', 'mem-range');
  bar.append(label, rangeText);
  root.appendChild(bar);

  // Curve card.
  const curveCard = card('Memory Curve');
  curveCard.head.appendChild(h('span', 'kt-muted kt-small ks-hint',
    'Drag on the chart to select a time range; double-click resets.'));
  const chartBox = h('div', 'mem-chart');
  curveCard.body.appendChild(chartBox);
  root.appendChild(curveCard.card);

  // Events card.
  const eventsCard = card('Memory Events');
  const filters = h('div', 'mem-filters');
  const minBox = h('input', 'mem-size');
  minBox.type = 'number';
  minBox.placeholder = 'Min Size(KB)';
  minBox.setAttribute('aria-label', 'Min Size(KB)');
  const maxBox = h('input', 'mem-size');
  maxBox.type = 'number';
  maxBox.placeholder = 'Max Size(KB)';
  maxBox.setAttribute('aria-label', 'Max Size(KB)');
  const showAll = h('button', 'kt-button mem-showall', 'Show all sizes');
  showAll.type = 'button';
  const hint = h('span', 'mem-hint');
  const minLabel = h('label', 'mem-label', 'Min Size(KB) ');
  minLabel.appendChild(minBox);
  const maxLabel = h('label', 'mem-label', 'Max Size(KB) ');
  maxLabel.appendChild(maxBox);
  filters.append(minLabel, maxLabel, showAll, hint);
  const eventsBox = h('div', 'mem-events');
  eventsCard.body.append(filters, eventsBox);
  root.appendChild(eventsCard.card);

  // Statistics card.
  const statsCard = card('Memory Statistics');
  const statsBox = h('div', 'mem-stats');
  statsCard.body.appendChild(statsBox);
  root.appendChild(statsCard.card);

  let eventsTable = null;
  let eventsAll = [];      // row objects of the device
  let sizeKey = null;      // key of the "Size (KB)" column
  let statsTable = null;
  let statsPayload = stats;
  let eventsPayload = events;

  function applySizeFilter() {
    if (!eventsTable) return;
    const lo = parseBox(minBox);
    const hi = parseBox(maxBox);
    const rows = sizeKey === null ? eventsAll : eventsAll.filter((r) => {
      const v = r[sizeKey];
      if (typeof v !== 'number') return lo === null && hi === null;
      // The tables hold exact bytes; the boxes are in KB.
      return (lo === null || v >= lo * 1024) && (hi === null || v <= hi * 1024);
    });
    eventsTable.setRows(rows);
    const parts = [];
    if (lo !== null) parts.push(`>= ${formatNumber(lo)} KB`);
    if (hi !== null) parts.push(`<= ${formatNumber(hi)} KB`);
    hint.textContent = parts.length
      ? `showing events ${parts.join(' and ')}: ${rows.length} of ${eventsAll.length}`
      : `showing all ${eventsAll.length} events`;
    showAll.disabled = parts.length === 0;
  }
  let filterTimer = 0;
  const onBox = () => {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(applySizeFilter, 300);
  };
  minBox.addEventListener('input', onBox);
  maxBox.addEventListener('input', onBox);
  showAll.addEventListener('click', () => {
    minBox.value = '';
    maxBox.value = '';
    applySizeFilter();
  });
  cleanups.push(() => clearTimeout(filterTimer));

  function drawEvents(resetFilter) {
    eventsBox.textContent = '';
    eventsTable = null;
    const rows = (eventsPayload && eventsPayload.rows && eventsPayload.rows[device]) || [];
    const cols = (eventsPayload && eventsPayload.columns) || [];
    if (cols.length === 0 || rows.length === 0) {
      eventsAll = [];
      filters.hidden = true;
      eventsBox.appendChild(h('div', 'mem-note', range
        ? 'No allocation or release of this device in the selected range.'
        : 'No allocation events on this device.'));
      return;
    }
    filters.hidden = false;
    const columns = tableColumns(cols);
    const sizeIdx = cols.findIndex((c) => /^Size/.test(c.name));
    sizeKey = sizeIdx >= 0 ? `c${sizeIdx}` : null;
    eventsAll = tableRows(rows);
    if (resetFilter && sizeKey !== null) {
      let max = 0;
      for (const r of eventsAll) if (typeof r[sizeKey] === 'number' && r[sizeKey] > max) max = r[sizeKey];
      // No size filter at first: every event is listed (the boxes narrow it down).
      const step = max > 0 ? 10 ** (Math.floor(Math.log10(max / 1024)) - 3) : 1;
      minBox.step = maxBox.step = String(step);
      minBox.value = '';
      maxBox.value = '';
    }
    const opIdx = cols.findIndex((c) => c.type === 'string');
    eventsTable = createTable(eventsBox, {
      columns,
      rows: eventsAll,
      sort: sizeKey ? { key: sizeKey, desc: true } : undefined,
      pageSize: 10,
      search: opIdx >= 0 ? { keys: [`c${opIdx}`], placeholder: 'Search by Name', caseSensitive: false } : undefined,
      csvName: `memory_events_${device}.csv`,
    });
    applySizeFilter();
  }

  function drawStats() {
    statsBox.textContent = '';
    const cols = statsPayload.columns || [];
    const rows = (statsPayload.rows && statsPayload.rows[device]) || [];
    const md = statsPayload.metadata || {};
    const columns = tableColumns(cols);
    const keyOf = (name) => {
      const i = cols.findIndex((c) => c.name === name);
      return i >= 0 ? `c${i}` : null;
    };
    const sortKey = keyOf(md.sort);
    const searchKey = keyOf(md.search);
    statsTable = createTable(statsBox, {
      columns,
      rows: tableRows(rows),
      sort: sortKey ? { key: sortKey, desc: true } : undefined,
      pageSize: 30,
      search: searchKey ? { keys: [searchKey], placeholder: 'Search by Name', caseSensitive: false } : undefined,
      csvName: `memory_statistics_${device}.csv`,
    });
  }

  let chartCleanup = null;
  function drawCurve() {
    if (chartCleanup) { try { chartCleanup(); } catch (_) { /* chart already gone */ } }
    chartCleanup = null;
    chartBox.textContent = '';
    const rows = (curve && curve.rows && curve.rows[device]) || [];
    chartBox.dataset.points = String(rows.length);
    const peak = (meta.peaks && meta.peaks[device]) || device;
    if (rows.length === 0) {
      chartBox.appendChild(h('div', 'mem-note', 'No memory curve for this device.'));
      return;
    }
    const cols = (curve.columns || []).map((c) => c.name);
    const chart = lineChart(chartBox, {
      title: peak,
      xLabel: cols[0] || 'Time (ms)',
      yLabel: 'Memory Usage (MB)',
      x: rows.map((r) => r[0]),
      series: [
        { name: 'Allocated', values: rows.map((r) => r[1]), stepped: true },
        { name: 'Reserved', values: rows.map((r) => r[2]), stepped: true },
      ],
      height: 300,
      onRange: (x0, x1) => {
        const a = Math.round(Math.min(x0, x1) / timeFactor + firstTs);
        const b = Math.round(Math.max(x0, x1) / timeFactor + firstTs);
        setRange(a === b ? null : { start_ts: a, end_ts: b });
      },
      onReset: () => setRange(null),
    });
    if (chart && chart.plot) chartCleanup = () => chart.plot.destroy();
  }

  async function fetchTables() {
    const my = ++generation;
    const params = range ? { ...range } : {};
    eventsBox.classList.add('mem-loading');
    statsBox.classList.add('mem-loading');
    try {
      const [s, ev] = await Promise.all([
        ctx.api('memory', { ...params, memory_metric: 'B' }),
        ctx.api('memory_events', { ...params, time_metric: 'ms', memory_metric: 'B' }),
      ]);
      if (my !== generation) return;
      statsPayload = s && s.rows ? s : { ...statsPayload, rows: {} };
      eventsPayload = ev;
    } catch (e) {
      if (my !== generation) return;
      eventsBox.textContent = '';
      eventsBox.appendChild(h('div', 'mem-error', `Could not load memory events: ${e.message}`));
      return;
    } finally {
      if (my === generation) {
        eventsBox.classList.remove('mem-loading');
        statsBox.classList.remove('mem-loading');
      }
    }
    drawEvents(true);
    drawStats();
  }

  function setRange(r) {
    range = r;
    rangeText.textContent = r
      ? `Range ${((r.start_ts - firstTs) * timeFactor).toFixed(2)}–${((r.end_ts - firstTs) * timeFactor).toFixed(2)} ms`
      : '';
    fetchTables();
  }

  select.addEventListener('change', () => {
    device = select.value;
    if (ctx.setHash) ctx.setHash({ device });
    drawCurve();
    if (range) {
      setRange(null);
    } else {
      drawEvents(true);
      drawStats();
    }
  });

  drawCurve();
  drawEvents(true);
  drawStats();
  return () => {
    generation++;
    for (const c of cleanups) c();
    if (chartCleanup) { try { chartCleanup(); } catch (_) { /* ignore */ } }
  };
}
