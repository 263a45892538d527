// SPDX-License-Identifier: BSD-3-Clause
// Module view (the plugin's fe/src/components/ModuleView.tsx): the module statistics tree
// (collapsible rows) and an SVG flame graph of one top-level module (width = avg_duration, 25 px
// per level, click to zoom).
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
  const ro = new ResizeObserver(() => {
    if (flameBox.clientWidth !== lastWidth) {
      lastWidth = flameBox.clientWidth;
      redraw();
    }
  });
  ro.observe(flameBox);
  return () => ro.disconnect();
}
