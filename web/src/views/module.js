// SPDX-License-Identifier: BSD-3-Clause
// Module view (the plugin's fe/src/components/ModuleView.tsx): the module statistics tree
// (collapsible rows), an SVG flame graph of one top-level module (width = avg_duration, 25 px
// per level, click to zoom), and the operator-tree timeline of /api/tree (one row per depth
// level, bars at their times; a canvas, as the tree can hold tens of thousands of nodes).
import './module.css';
import { createTable } from '../components/table.js';
import { colors } from '../components/charts.js';
import { h, svg, titledCard as card } from '../components/dom.js';
import { formatDuration, unitColumn } from '../components/units.js';

const LEVEL_PX = 25;

const fmt = (v) => (typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(2)) : v);
const value = (n) => Math.max(0, Number(n.avg_duration) || 0);

/// Lays out the flame graph of `root`: [{node, depth, x, w}] with x, w in [0, 1].
export function layoutFlame(root) {
  const out = [];
  const visit = (node, depth, x, w) => {
    out.push({ node, depth, x, w });
    const kids = node.children || [];
    if (kids.length === 0 || w <= 0) return;
    const sum = kids.reduce((a, k) => a + value(k), 0);
    // Children share the parent's width in proportion to their values; never wider than it.
    const scale = w / Math.max(value(node), sum, 1e-300);
    let cx = x;
    for (const k of kids) {
      const kw = value(k) * scale;
      visit(k, depth + 1, cx, kw);
      cx += kw;
    }
  };
  visit(root, 0, 0, 1);
  return out;
}

function palette() {
  return Array.isArray(colors) && colors.length ? colors : ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948'];
}

/// Draws the flame graph of `root` into box; clicking a frame zooms into it, clicking the
/// top frame of a zoomed graph goes back to the whole module.
function drawFlame(box, root, tooltip) {
  let focus = root;
  const pal = palette();
  const draw = () => {
    box.textContent = '';
    const cells = layoutFlame(focus);
    const depth = cells.reduce((m, c) => Math.max(m, c.depth), 0) + 1;
    const width = Math.max(300, box.clientWidth || 900);
    const s = svg('svg', { width, height: depth * LEVEL_PX, class: 'mod-flame-svg', role: 'img' });
    s.setAttribute('aria-label', `Flame graph of ${root.name}`);
    box.dataset.frames = String(cells.length);
    for (const c of cells) {
      const px = c.w * width;
      if (px < 0.5) continue;
      const g = svg('g', { transform: `translate(${c.x * width},${c.depth * LEVEL_PX})`, class: 'mod-frame' });
      const color = pal[(c.depth + (c.node.id || 0)) % pal.length];
      g.appendChild(svg('rect', { width: Math.max(0, px - 1), height: LEVEL_PX - 1, fill: color, rx: 2 }));
      if (px > 30) {
        const t = svg('text', { x: 4, y: LEVEL_PX / 2 + 4, class: 'mod-frame-label' });
        const chars = Math.floor((px - 8) / 6.5);
        t.textContent = c.node.name.length > chars ? `${c.node.name.slice(0, Math.max(1, chars - 1))}…` : c.node.name;
        g.appendChild(t);
      }
      const text = `${c.node.name} (module id: ${c.node.id}): ${formatDuration(value(c.node))}`;
      g.addEventListener('mousemove', (ev) => {
        tooltip.textContent = text;
        tooltip.hidden = false;
        const r = box.getBoundingClientRect();
        tooltip.style.left = `${ev.clientX - r.left + 12}px`;
        tooltip.style.top = `${ev.clientY - r.top + 12}px`;
      });
      g.addEventListener('mouseleave', () => { tooltip.hidden = true; });
      g.addEventListener('click', () => {
        focus = c.node === focus && focus !== root ? root : c.node;
        tooltip.hidden = true;
        draw();
      });
      s.appendChild(g);
    }
    box.appendChild(s);
    box.appendChild(tooltip);
  };
  draw();
  return draw;
}

const TIMELINE_ROW_PX = 22;

/// Flattens the /api/tree payload into rows by depth: [[{name, type, start, end}]], each row in
/// the order of the tree walk (starts ascending on a thread's tree).
export function timelineRows(tree) {
  const rows = [];
  const stack = tree ? [[tree, 0]] : [];
  while (stack.length) {
    const [n, depth] = stack.pop();
    (rows[depth] ||= []).push({ name: String(n.name), type: n.type, start: Number(n.start_time), end: Number(n.end_time) });
    const kids = n.children || [];
    for (let i = kids.length - 1; i >= 0; i--) stack.push([kids[i], depth + 1]);
  }
  for (const r of rows) r.sort((a, b) => a.start - b.start);
  return rows;
}

/// Draws the operator-tree timeline of `tree` into box: one canvas row per depth level; hovering
/// a bar shows "<name> Duration: <µs> us"; clicking a bar zooms to it, clicking empty space
/// zooms back out. Returns a redraw function (for resizes).
function drawTimeline(box, tree, tooltip) {
  const rows = timelineRows(tree);
  const all = rows.flat();
  const t0 = all.reduce((m, b) => Math.min(m, b.start), Infinity);
  const t1 = all.reduce((m, b) => Math.max(m, b.end), -Infinity);
  let view = [t0, t1 > t0 ? t1 : t0 + 1];
  const pal = palette();
  const canvas = h('canvas', 'mod-timeline-canvas');
  canvas.setAttribute('role', 'img');
  canvas.setAttribute('aria-label', `Operator tree timeline: ${all.length} nodes in ${rows.length} levels`);
  box.dataset.bars = String(all.length);
  box.dataset.levels = String(rows.length);
  box.append(canvas, tooltip);
  const width = () => Math.max(300, box.clientWidth || 900);
  const xOf = (t, w) => ((t - view[0]) / (view[1] - view[0])) * w;
  const draw = () => {
    const w = width();
    const ratio = window.devicePixelRatio || 1;
    canvas.width = Math.round(w * ratio);
    canvas.height = Math.round(rows.length * TIMELINE_ROW_PX * ratio);
    canvas.style.width = `${w}px`;
    canvas.style.height = `${rows.length * TIMELINE_ROW_PX}px`;
    const g = canvas.getContext('2d');
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, w, rows.length * TIMELINE_ROW_PX);
    g.font = '11px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
    g.textBaseline = 'middle';
    let drawn = 0;
    rows.forEach((row, depth) => {
      const y = depth * TIMELINE_ROW_PX;
      for (const b of row) {
        if (b.end < view[0] || b.start > view[1]) continue;
        const x = Math.max(0, xOf(b.start, w));
        const x2 = Math.min(w, xOf(b.end, w));
        const bw = Math.max(1, x2 - x);
        g.fillStyle = pal[(depth + b.name.length) % pal.length];
        g.fillRect(x, y + 1, Math.max(1, bw - 0.5), TIMELINE_ROW_PX - 2);
        drawn++;
        if (bw > 40) {
          g.fillStyle = '#fff';
          const chars = Math.floor((bw - 8) / 6.2);
          g.fillText(b.name.length > chars ? `${b.name.slice(0, Math.max(1, chars - 1))}…` : b.name, x + 4, y + TIMELINE_ROW_PX / 2);
        }
      }
    });
    box.dataset.drawn = String(drawn);
  };
  const hit = (ev) => {
    const r = canvas.getBoundingClientRect();
    const depth = Math.floor((ev.clientY - r.top) / TIMELINE_ROW_PX);
    const row = rows[depth];
    if (!row) return null;
    const t = view[0] + ((ev.clientX - r.left) / r.width) * (view[1] - view[0]);
    const slack = ((view[1] - view[0]) / r.width) * 1.5;  // thin bars stay reachable
    let best = null;
    for (const b of row) {
      if (b.start - slack <= t && t <= b.end + slack && (!best || b.end - b.start < best.end - best.start)) best = b;
    }
    return best;
  };
  canvas.addEventListener('mousemove', (ev) => {
    const b = hit(ev);
    if (!b) { tooltip.hidden = true; return; }
    tooltip.textContent = `${b.name} Duration: ${fmt(b.end - b.start)} us`;
    tooltip.hidden = false;
    const r = box.getBoundingClientRect();
    tooltip.style.left = `${ev.clientX - r.left + 12}px`;
    tooltip.style.top = `${ev.clientY - r.top + 12}px`;
  });
  canvas.addEventListener('mouseleave', () => { tooltip.hidden = true; });
  canvas.addEventListener('click', (ev) => {
    const b = hit(ev);
    view = b && b.end > b.start ? [b.start, b.end] : [t0, t1 > t0 ? t1 : t0 + 1];
    tooltip.hidden = true;
    draw();
  });
  draw();
  return draw;
}

/// Renders the Module view into el.
export async function render(el, ctx) {
  el.textContent = '';
  const root = h('div', 'mod-view');
  el.appendChild(root);
  const payload = await ctx.api('module');
  if (!payload || !Array.isArray(payload.data) || payload.data.length === 0) {
    root.appendChild(h('div', 'mod-empty', 'This profile has no module data (nn.Module ranges).'));
    return undefined;
  }

  const tableCard = card('Module View');
  const tableBox = h('div', 'mod-table');
  tableCard.body.appendChild(tableBox);
  root.appendChild(tableCard.card);
  // Durations (the "... Time" columns, in µs as the plugin's) in µs/ms/s by magnitude; other
  // numbers as they are.
  const columns = (payload.columns || []).map((c) => {
    const u = c.type !== 'number' ? null
      : / Time$/.test(c.name) ? { title: c.name, format: (v) => (typeof v === 'number' ? formatDuration(v) : v ?? '') }
        : unitColumn(c.name);
    return {
      key: c.key,
      title: u ? u.title : c.name,
      type: c.type === 'number' ? 'number' : 'string',
      format: u ? u.format : c.type === 'number' ? fmt : undefined,
    };
  });
  createTable(tableBox, {
    columns,
    rows: payload.data,
    tree: true,
    pageSize: 30,
    csvName: 'modules.csv',
  });

  const flameCard = card('Flame Graph');
  root.appendChild(flameCard.card);
  const tops = payload.data;
  const wanted = Number((ctx.hash || {}).module);
  // Without a choice in the URL, open on the model root: the top-level module that takes the
  // most time (the model, not a loss or a helper called next to it).
  let rootIndex = 0;
  tops.forEach((m, i) => { if (value(m) > value(tops[rootIndex])) rootIndex = i; });
  let index = Number.isInteger(wanted) && wanted >= 0 && wanted < tops.length ? wanted : rootIndex;
  if (tops.length > 1) {
    const label = h('label', 'mod-label', 'Module ');
    const select = h('select', 'mod-select');
    select.setAttribute('aria-label', 'Module');
    tops.forEach((m, i) => {
      const o = h('option', '', `${m.name} (id ${m.id})`);
      o.value = String(i);
      select.appendChild(o);
    });
    select.value = String(index);
    label.appendChild(select);
    flameCard.head.appendChild(label);
    select.addEventListener('change', () => {
      index = Number(select.value);
      if (ctx.setHash) ctx.setHash({ module: String(index) });
      redraw = drawFlame(flameBox, tops[index], tooltip);
    });
  }
  flameCard.head.appendChild(h('span', 'kt-muted kt-small ks-hint', 'Click a frame to zoom; click it again to go back.'));
  const flameBox = h('div', 'mod-flame');
  const tooltip = h('div', 'mod-tooltip');
  tooltip.hidden = true;
  flameCard.body.appendChild(flameBox);
  let redraw = drawFlame(flameBox, tops[index], tooltip);
  let lastWidth = flameBox.clientWidth;

  // The operator tree's timeline (/api/tree), loaded after the rest is on screen.
  const timelineCard = card('Timeline');
  timelineCard.head.appendChild(h('span', 'kt-muted kt-small ks-hint', 'Click a bar to zoom to it; click empty space to zoom out.'));
  const timelineBox = h('div', 'mod-timeline');
  timelineBox.textContent = 'Loading the operator tree\u2026';
  timelineCard.body.appendChild(timelineBox);
  root.appendChild(timelineCard.card);
  let redrawTimeline = null;
  let disposed = false;
  ctx.api('tree').then((tree) => {
    if (disposed) return;
    timelineBox.textContent = '';
    if (!tree) {
      timelineBox.append(h('div', 'kt-muted', 'This profile has no operator tree.'));
      return;
    }
    const tip = h('div', 'mod-tooltip');
    tip.hidden = true;
    redrawTimeline = drawTimeline(timelineBox, tree, tip);
  }, (e) => {
    if (disposed) return;
    timelineBox.textContent = '';
    timelineBox.append(h('div', 'kt-error-box', e.message));
  });

  const ro = new ResizeObserver(() => {
    if (flameBox.clientWidth !== lastWidth) {
      lastWidth = flameBox.clientWidth;
      redraw();
      if (redrawTimeline) redrawTimeline();
    }
  });
  ro.observe(flameBox);
  return () => {
    disposed = true;
    ro.disconnect();
  };
}
