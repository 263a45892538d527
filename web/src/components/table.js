// SPDX-License-Identifier: BSD-3-Clause
// A sortable, paginated, searchable data table with CSV export, optional row expansion and
// optional tree rows. Plain DOM, no framework; used by every view that shows a table.
// Wide tables stay usable: a column chooser, a header and first column that stay in view while
// the table scrolls inside its own box (so its horizontal scrollbar is always on screen), and
// text cells on one line, elided with the full text in the cell's title (copying the cell copies
// the full text: the ellipsis is only drawn).
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

function loadHidden(id) {
  if (!id) return new Set();
  try {
    const v = JSON.parse(localStorage.getItem(`kt-hidden-columns:${id}`) || '[]');
    return new Set(Array.isArray(v) ? v.map(String) : []);
  } catch (_) {
    return new Set();
  }
}

function saveHidden(id, hidden) {
  if (!id) return;
  try { localStorage.setItem(`kt-hidden-columns:${id}`, JSON.stringify([...hidden])); } catch (_) { /* private mode */ }
}

/// Creates a table in `container` (appended) and returns {element, setRows, setColumns}.
/// Options: columns [{key, title, type: 'string'|'number', tooltip?, format?(v,row), wrap?}]
/// (string cells are one line, elided, unless `wrap`), rows,
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
  // Hidden column keys (column chooser), remembered per table kind (its CSV name).
  const hiddenId = options.csvName ? options.csvName.replace(/\.csv$/, '') : null;
  const hidden = loadHidden(hiddenId);
  const visible = () => {
    const v = columns.filter((c) => !hidden.has(c.key));
    return v.length ? v : columns.slice(0, 1);
  };

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
  // Column chooser: one checkbox per column (the first column always stays).
  const chooser = el('details', 'kt-col-chooser');
  const chooserSummary = el('summary', 'kt-button', 'Columns');
  const chooserList = el('div', 'kt-col-list');
  chooser.append(chooserSummary, chooserList);
  // A click elsewhere closes it (the listener lives only while the list is open).
  const closeOutside = (e) => { if (!chooser.contains(e.target)) chooser.open = false; };
  chooser.addEventListener('toggle', () => {
    if (chooser.open) {
      drawChooser();
      document.addEventListener('click', closeOutside, true);
    } else {
      document.removeEventListener('click', closeOutside, true);
    }
  });
  toolbar.append(spacer, count, chooser, csvButton);

  function drawChooser() {
    chooserList.textContent = '';
    columns.forEach((c, i) => {
      const lab = el('label', 'kt-col-option');
      const box = el('input');
      box.type = 'checkbox';
      box.checked = !hidden.has(c.key);
      box.disabled = i === 0;
      box.dataset.key = c.key;
      box.addEventListener('change', () => {
        if (box.checked) hidden.delete(c.key); else hidden.add(c.key);
        saveHidden(hiddenId, hidden);
        draw();
      });
      lab.append(box, ` ${c.title}`);
      chooserList.append(lab);
    });
  }

  const scroller = el('div', 'kt-table-scroll');
  const table = el('table', `kt-table-grid${options.expand ? ' kt-has-expand' : ''}`);
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
    const blob = new Blob([toCsv(visible(), data)], { type: 'text/csv;charset=utf-8' });
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
    if (options.expand) tr.append(el('th', 'kt-col-expand kt-sticky-expand'));
    visible().forEach((c, i) => {
      const th = el('th', c.type === 'number' ? 'kt-num' : '');
      if (i === 0) th.classList.add('kt-sticky');
      th.dataset.key = c.key;
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
    });
    thead.append(tr);
  }

  function cell(c, row) {
    const td = el('td', c.type === 'number' ? 'kt-num' : c.wrap ? 'kt-wrap' : 'kt-text');
    const v = row[c.key];
    const shown = c.format ? c.format(v, row) : c.type === 'number' ? formatNumber(v) : v;
    if (shown instanceof Node) {
      td.append(shown);
    } else {
      const text = shown === null || shown === undefined ? '' : String(shown);
      if (c.type === 'number' || c.wrap) {
        td.textContent = text;
      } else {
        // One line, elided by CSS; the title carries the whole text.
        const span = el('span', 'kt-cell-text', text);
        if (text) td.title = text;
        td.append(span);
      }
    }
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
      const td = el('td', 'kt-col-expand kt-sticky-expand');
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
    visible().forEach((c, i) => {
      const td = cell(c, row);
      if (i === 0) td.classList.add('kt-sticky');
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
      td.colSpan = visible().length + 1;
      const box = el('div', 'kt-expansion-box', 'Loading\u2026');
      // The expansion stays in the visible part of a wide table (no sideways scrolling).
      if (scroller.clientWidth > 0) box.style.maxWidth = `${scroller.clientWidth - 48}px`;
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
      td.colSpan = visible().length + (options.expand ? 1 : 0);
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
