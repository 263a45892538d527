// SPDX-License-Identifier: BSD-3-Clause
// A sortable, paginated, searchable data table with CSV export, optional row expansion and
// optional tree rows. Plain DOM, no framework; used by every view that shows a table.
import './table.css';

const PAGE_SIZES = [10, 20, 30, 50, 100];

/// Quotes one CSV field per RFC 4180: fields containing a comma, quote, CR or LF are wrapped
/// in double quotes with inner quotes doubled.
export function csvField(value) {
  const s = value === null || value === undefined ? '' : String(value);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/// Builds an RFC 4180 CSV document (CRLF line ends) from columns and row objects.
export function toCsv(columns, rows) {
  const lines = [columns.map((c) => csvField(c.title)).join(',')];
  for (const r of rows) lines.push(columns.map((c) => csvField(r[c.key])).join(','));
  return lines.join('\r\n') + '\r\n';
}

/// Formats a number for display: integers with thousands separators, others with at most
/// two decimals.
export function formatNumber(v) {
  if (typeof v !== 'number' || !Number.isFinite(v)) return v === null || v === undefined ? '' : String(v);
  return Number.isInteger(v) ? v.toLocaleString('en-US')
    : v.toLocaleString('en-US', { maximumFractionDigits: 2 });
}

function compareValues(a, b, type) {
  const an = a === null || a === undefined || a === '';
  const bn = b === null || b === undefined || b === '';
  if (an || bn) return an === bn ? 0 : an ? -1 : 1;
  if (type === 'number') {
    const x = Number(a);
    const y = Number(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  return String(a).localeCompare(String(b), 'en', { numeric: true });
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/// Creates a table in `container` (appended) and returns {element, setRows, setColumns}.
/// Options: columns [{key, title, type: 'string'|'number', tooltip?, format?(v,row)}], rows,
/// sort {key, desc}, pageSize (10/20/30/50/100), search {keys, placeholder, caseSensitive},
/// csvName, expand async (row) => HTMLElement, rowClass (row) => string, tree (rows with
/// `children` arrays are shown collapsible; search keeps a row when it or a descendant matches).
export function createTable(container, options = {}) {
  let columns = options.columns || [];
  let rows = options.rows || [];
  let sort = options.sort ? { ...options.sort } : null;
  let pageSize = PAGE_SIZES.includes(options.pageSize) ? options.pageSize : 30;
  let page = 0;
  let query = '';
  const search = options.search || null;
  const expanded = new Set();      // expansion (row objects) for `expand`
  const open = new Set();          // open tree nodes

  const root = el('div', 'kt-table');
  const toolbar = el('div', 'kt-table-toolbar');
  let searchInput = null;
  if (search) {
    searchInput = el('input', 'kt-table-search');
    searchInput.type = 'search';
    searchInput.placeholder = search.placeholder || 'Search';
    let timer = 0;
    searchInput.addEventListener('input', () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        query = searchInput.value.trim();
        page = 0;
        draw();
      }, 300);
    });
    toolbar.append(searchInput);
  }
  const spacer = el('div', 'kt-table-spacer');
  const count = el('span', 'kt-table-count');
  const csvButton = el('button', 'kt-button', 'Export CSV');
  csvButton.type = 'button';
  csvButton.addEventListener('click', exportCsv);
  toolbar.append(spacer, count, csvButton);

  const scroller = el('div', 'kt-table-scroll');
  const table = el('table', 'kt-table-grid');
  const thead = el('thead');
  const tbody = el('tbody');
  table.append(thead, tbody);
  scroller.append(table);

  const pager = el('div', 'kt-table-pager');
  root.append(toolbar, scroller, pager);
  container.append(root);

  function matches(row) {
    if (!query) return true;
    const keys = search.keys || columns.map((c) => c.key);
    const q = search.caseSensitive ? query : query.toLowerCase();
    return keys.some((k) => {
      const v = row[k];
      if (v === null || v === undefined) return false;
      const s = String(v);
      return (search.caseSensitive ? s : s.toLowerCase()).includes(q);
    });
  }

  // Filters (keeping ancestors of matching tree rows) and sorts; returns new node lists.
  function filterTree(list) {
    const out = [];
    for (const r of list) {
      if (options.tree && Array.isArray(r.children) && r.children.length) {
        const kids = filterTree(r.children);
        if (matches(r) || kids.length) out.push({ row: r, kids });
      } else if (matches(r)) {
        out.push({ row: r, kids: [] });
      }
    }
    sortNodes(out);
    return out;
  }

  function sortNodes(nodes) {
    if (!sort) return;
    const col = columns.find((c) => c.key === sort.key);
    const type = col ? col.type : 'string';
    nodes.sort((a, b) => {
      const c = compareValues(a.row[sort.key], b.row[sort.key], type);
      return sort.desc ? -c : c;
    });
  }

  function flattenAll(nodes, out, depth) {
    for (const n of nodes) {
      out.push(n.row);
      if (n.kids.length) flattenAll(n.kids, out, depth + 1);
    }
    return out;
  }

  function exportCsv() {
    const data = flattenAll(filterTree(rows), [], 0);
    const blob = new Blob([toCsv(columns, data)], { type: 'text/csv;charset=utf-8' });
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = options.csvName || 'table.csv';
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  }

  function drawHead() {
    thead.textContent = '';
    const tr = el('tr');
    if (options.expand) tr.append(el('th', 'kt-col-expand'));
    for (const c of columns) {
      const th = el('th', c.type === 'number' ? 'kt-num' : '');
      const label = el('span', 'kt-th-label', c.title);
      th.append(label);
      if (c.tooltip) {
        th.title = c.tooltip;
        th.classList.add('kt-has-tip');
      }
      if (sort && sort.key === c.key) {
        th.classList.add('kt-sorted');
        th.append(el('span', 'kt-sort-mark', sort.desc ? '\u25BC' : '\u25B2'));
        th.setAttribute('aria-sort', sort.desc ? 'descending' : 'ascending');
      }
      th.addEventListener('click', () => {
        if (sort && sort.key === c.key) sort = { key: c.key, desc: !sort.desc };
        else sort = { key: c.key, desc: c.type === 'number' };
        page = 0;
        draw();
      });
      tr.append(th);
    }
    thead.append(tr);
  }

  function cell(c, row) {
    const td = el('td', c.type === 'number' ? 'kt-num' : '');
    const v = row[c.key];
    const shown = c.format ? c.format(v, row) : c.type === 'number' ? formatNumber(v) : v;
    if (shown instanceof Node) td.append(shown);
    else td.textContent = shown === null || shown === undefined ? '' : String(shown);
    return td;
  }

  function drawRow(node, depth) {
    const row = node.row;
    const tr = el('tr');
    if (options.rowClass) {
      const cls = options.rowClass(row);
      if (cls) tr.className = cls;
    }
    if (options.expand) {
      const td = el('td', 'kt-col-expand');
      const b = el('button', 'kt-expander', expanded.has(row) ? '\u2212' : '+');
      b.type = 'button';
      b.title = 'Expand';
      b.addEventListener('click', () => {
        if (expanded.has(row)) expanded.delete(row); else expanded.add(row);
        draw();
      });
      td.append(b);
      tr.append(td);
    }
    columns.forEach((c, i) => {
      const td = cell(c, row);
      if (options.tree && i === 0) {
        td.style.paddingLeft = `${6 + depth * 16}px`;
        if (node.kids.length) {
          const isOpen = open.has(row) || (query && node.kids.length);
          const t = el('button', 'kt-tree-toggle', isOpen ? '\u25BE' : '\u25B8');
          t.type = 'button';
          t.addEventListener('click', () => {
            if (open.has(row)) open.delete(row); else open.add(row);
            draw();
          });
          td.prepend(t);
        } else {
          td.prepend(el('span', 'kt-tree-leaf'));
        }
      }
      tr.append(td);
    });
    tbody.append(tr);
    if (options.expand && expanded.has(row)) {
      const xr = el('tr', 'kt-expansion');
      const td = el('td');
      td.colSpan = columns.length + 1;
      const box = el('div', 'kt-expansion-box', 'Loading\u2026');
      td.append(box);
      xr.append(td);
      tbody.append(xr);
      Promise.resolve().then(() => options.expand(row)).then((content) => {
        box.textContent = '';
        if (content) box.append(content);
      }, (err) => {
        box.textContent = '';
        box.append(el('div', 'kt-error', err && err.message ? err.message : String(err)));
      });
    }
    if (options.tree && node.kids.length && (open.has(row) || query)) {
      for (const k of node.kids) drawRow(k, depth + 1);
    }
  }

  function drawPager(total) {
    pager.textContent = '';
    const pages = Math.max(1, Math.ceil(total / pageSize));
    if (page >= pages) page = pages - 1;
    const prev = el('button', 'kt-button', '\u2039');
    prev.type = 'button';
    prev.disabled = page === 0;
    prev.title = 'Previous page';
    prev.addEventListener('click', () => { page--; draw(); });
    const next = el('button', 'kt-button', '\u203A');
    next.type = 'button';
    next.disabled = page >= pages - 1;
    next.title = 'Next page';
    next.addEventListener('click', () => { page++; draw(); });
    const info = el('span', 'kt-page-info', `Page ${page + 1} of ${pages}`);
    const size = el('select', 'kt-page-size');
    for (const s of PAGE_SIZES) {
      const o = el('option', '', `${s} / page`);
      o.value = String(s);
      if (s === pageSize) o.selected = true;
      size.append(o);
    }
    size.addEventListener('change', () => {
      pageSize = Number(size.value);
      page = 0;
      draw();
    });
    pager.append(prev, info, next, size);
    pager.hidden = total <= PAGE_SIZES[0] && pageSize >= PAGE_SIZES[0];
  }

  function draw() {
    drawHead();
    const nodes = filterTree(rows);
    tbody.textContent = '';
    const total = nodes.length;
    drawPager(total);
    const start = page * pageSize;
    for (const n of nodes.slice(start, start + pageSize)) drawRow(n, 0);
    if (!total) {
      const tr = el('tr', 'kt-empty');
      const td = el('td', '', query ? 'No matching rows' : 'No data');
      td.colSpan = columns.length + (options.expand ? 1 : 0);
      tr.append(td);
      tbody.append(tr);
    }
    count.textContent = query ? `${total} of ${rows.length} rows` : `${total} rows`;
  }

  draw();
  return {
    element: root,
    /// Replaces the rows (keeps sort and page size; goes back to the first page).
    setRows(newRows) {
      rows = newRows || [];
      expanded.clear();
      page = 0;
      draw();
    },
    /// Replaces the columns; a sort on a column that no longer exists is dropped.
    setColumns(newColumns) {
      columns = newColumns || [];
      if (sort && !columns.some((c) => c.key === sort.key)) sort = null;
      draw();
    },
  };
}
