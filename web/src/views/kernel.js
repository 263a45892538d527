// SPDX-License-Identifier: BSD-3-Clause
// GPU Kernel view: Top-N control, Total Time and Tensor Cores donuts, Group By (Kernel Name /
// Kernel Properties + Op Name), kernel-name search (case-sensitive, as the plugin) and, when
// grouped by properties, an operator-name search; the generic table from columns/rows.
import { createTable } from '../components/table.js';
import { donut } from '../components/charts.js';
import { topNControl, groupBySelect, h } from '../components/controls.js';
import { unitColumn } from '../components/units.js';

const GROUPS = [
  { value: 'Kernel', label: 'Kernel Name' },
  { value: 'KernelNameAndOpName', label: 'Kernel Properties + Op Name' },
];

/// Turns the server's {columns, rows} (rows as arrays) into table columns and row objects keyed
/// by column index.
export function genericTable(data) {
  const cols = (data && data.columns) || [];
  // "Total Duration (us)" -> "Total Duration" with values shown as µs/ms/s by magnitude.
  const columns = cols.map((c, i) => {
    const u = c.type === 'number' ? unitColumn(c.name) : null;
    return {
      key: `c${i}`, title: u ? u.title : c.name, type: c.type === 'number' ? 'number' : 'string', tooltip: c.tooltip,
      format: u ? u.format : undefined, serverName: c.name,
    };
  });
  const rows = ((data && data.rows) || []).map((r) => {
    const o = {};
    r.forEach((v, i) => { o[`c${i}`] = v; });
    return o;
  });
  return { columns, rows };
}

function searchBox(placeholder, onInput) {
  const input = h('input', 'kt-table-search');
  input.type = 'search';
  input.placeholder = placeholder;
  let timer = 0;
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => onInput(input.value.trim()), 300);
  });
  return input;
}

/// Renders the GPU Kernel view.
export async function render(el, ctx) {
  let groupBy = GROUPS.some((g) => g.value === ctx.hash.kernel_group) ? ctx.hash.kernel_group : 'Kernel';
  const [pie, tc, first] = await Promise.all([
    ctx.api('kernel', { group_by: groupBy }),
    ctx.api('kernel/tc_pie'),
    ctx.api('kernel/table', { group_by: groupBy }),
  ]);
  el.textContent = '';
  if (!pie && !first) {
    el.append(h('div', 'kt-card kt-muted', 'This profile has no GPU kernels.'));
    return;
  }
  const pieRows = (pie && pie.total && pie.total.rows) || [];

  const pieCard = h('section', 'kt-card');
  pieCard.append(h('h2', 'kt-card-title', 'Kernel Time'));
  const grid = h('div', 'kt-pie-grid');
  const totalBox = h('div');
  const tcBox = h('div');
  grid.append(totalBox, tcBox);
  const drawTotal = (n) => {
    totalBox.textContent = '';
    const sorted = [...pieRows].sort((a, b) => b[1] - a[1]);
    const shown = n > 0 ? sorted.slice(0, n) : sorted;
    const whole = sorted.reduce((a, r) => a + Math.max(0, Number(r[1]) || 0), 0);
    donut(totalBox, { title: 'Total Time', items: shown.map((r) => ({ name: String(r[0]), value: Number(r[1]) })), unit: 'us',
      total: whole, centreLabel: 'Total of the table' });
  };
  const top = topNControl({
    allLabel: 'All kernels', topLabel: 'Top kernels to show', max: pieRows.length, value: ctx.hash.kernel_top,
    onChange: (n) => { ctx.setHash({ kernel_top: n > 0 ? n : 'all' }); drawTotal(n); },
  });
  drawTotal(top.value());
  const tcRows = (tc && tc.total && tc.total.rows) || [];
  // The plugin shows only percentages for this pie: values are fractions of kernel time.
  donut(tcBox, { title: 'Tensor Cores Utilization', items: tcRows.map((r) => ({ name: String(r[0]), value: Number(r[1]) })), percentOnly: true });
  pieCard.append(top.element, grid);

  const tableCard = h('section', 'kt-card');
  tableCard.append(h('h2', 'kt-card-title', 'Kernels'));
  const controls = h('div', 'kt-controls');
  const { label: lab, select } = groupBySelect(GROUPS, groupBy);
  // A link may name a kernel (kernel_search in the URL, e.g. from a recommendation): shown filtered.
  let nameQuery = typeof ctx.hash.kernel_search === 'string' ? ctx.hash.kernel_search : '';
  let opQuery = '';
  const nameSearch = searchBox('Search by Kernel Name', (q) => {
    nameQuery = q;
    ctx.setHash({ kernel_search: q || null });
    applyFilter();
  });
  nameSearch.value = nameQuery;
  const opSearch = searchBox('Search by Operator Name', (q) => { opQuery = q; applyFilter(); });
  controls.append(lab, nameSearch, opSearch);
  const tableBox = h('div');
  tableCard.append(controls, tableBox);

  let table = null;
  let all = { columns: [], rows: [] };
  let nameKey = null;
  let opKey = null;
  function applyFilter() {
    if (!table) return;
    // Kernel names: case-sensitive substring (as the plugin); operators: case-insensitive.
    const rows = all.rows.filter((r) =>
      (!nameQuery || !nameKey || String(r[nameKey] ?? '').includes(nameQuery)) &&
      (!opQuery || !opKey || String(r[opKey] ?? '').toLowerCase().includes(opQuery.toLowerCase())));
    table.setRows(rows);
  }
  const show = (data) => {
    tableBox.textContent = '';
    table = null;
    if (!data) {
      tableBox.append(h('div', 'kt-muted', 'No kernels.'));
      return;
    }
    all = genericTable(data.data);
    const find = (t) => { const c = all.columns.find((x) => x.serverName === t); return c ? c.key : null; };
    nameKey = find('Name');
    opKey = find('Operator');
    opSearch.hidden = !opKey;
    const sortTitle = data.metadata && data.metadata.sort;
    const sortKey = find(sortTitle) || (all.columns[0] && all.columns[0].key);
    table = createTable(tableBox, {
      columns: all.columns,
      rows: all.rows,
      sort: sortKey ? { key: sortKey, desc: true } : null,
      pageSize: 30,
      csvName: groupBy === 'Kernel' ? 'kernels.csv' : 'kernels_by_op.csv',
    });
    applyFilter();
  };
  show(first);
  let seq = 0;
  select.addEventListener('change', async () => {
    groupBy = select.value;
    ctx.setHash({ kernel_group: groupBy === 'Kernel' ? null : groupBy });
    opQuery = '';
    opSearch.value = '';
    const mine = ++seq;
    tableBox.textContent = 'Loading\u2026';
    try {
      const data = await ctx.api('kernel/table', { group_by: groupBy });
      if (mine === seq) show(data);
    } catch (e) {
      if (mine !== seq) return;
      tableBox.textContent = '';
      tableBox.append(h('div', 'kt-error-box', e.message));
    }
  });
  el.append(pieCard, tableCard);
}
