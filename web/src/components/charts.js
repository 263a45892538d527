// SPDX-License-Identifier: BSD-3-Clause
// Chart helpers shared by the views: SVG donut and stacked columns, uPlot line charts, SVG
// sparklines, and the palette. Each helper appends to `container` and returns {element}
// (line charts also {plot, setSize}); all text is set with textContent (never parsed as HTML)
// except the tooltipHtml callback's result, which the caller builds.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './charts.css';
import { h as el, svg } from './dom.js';
import { formatDuration, formatBytes } from './units.js';

/// The value of a CSS variable of the page (the theme's chart colours), or `fallback`.
export function cssVar(name, fallback) {
  const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return v || fallback;
}

const UNIT_FORMATS = { us: formatDuration, bytes: formatBytes };

/// The palette every chart uses, in series order (colour-blind friendly first entries).
export const colors = [
  '#3366cc', '#dc3912', '#ff9900', '#109618', '#990099', '#0099c6', '#dd4477', '#66aa00',
  '#b82e2e', '#316395', '#994499', '#22aa99', '#aaaa11', '#6633cc', '#e67300', '#8b0707',
];

function fmt(v) {
  if (typeof v !== 'number' || !Number.isFinite(v)) return String(v);
  return Number.isInteger(v) ? v.toLocaleString('en-US')
    : v.toLocaleString('en-US', { maximumFractionDigits: 2 });
}

// One floating tooltip for the page; charts fill it with text or caller-built HTML.
let tipEl = null;
function tooltip() {
  if (!tipEl) {
    tipEl = el('div', 'kt-chart-tip');
    tipEl.setAttribute('role', 'tooltip');
    document.body.append(tipEl);
  }
  return tipEl;
}
function showTip(event, content, isHtml) {
  const t = tooltip();
  if (isHtml) t.innerHTML = content; else t.textContent = content;
  t.style.display = 'block';
  const pad = 12;
  const w = t.offsetWidth;
  const h = t.offsetHeight;
  let x = event.clientX + pad;
  let y = event.clientY + pad;
  if (x + w > window.innerWidth - 4) x = Math.max(4, event.clientX - pad - w);
  if (y + h > window.innerHeight - 4) y = Math.max(4, event.clientY - pad - h);
  t.style.left = `${x}px`;
  t.style.top = `${y}px`;
}
function hideTip() {
  if (tipEl) tipEl.style.display = 'none';
}

function card(container, title, cls) {
  const root = el('div', `kt-chart ${cls}`);
  if (title) root.append(el('div', 'kt-chart-title', title));
  container.append(root);
  return root;
}

function legend(names, onHover, swatches) {
  const box = el('div', 'kt-legend');
  names.forEach((n, i) => {
    const item = el('span', 'kt-legend-item');
    const sw = el('span', 'kt-swatch');
    sw.style.background = swatches ? swatches[i] : colors[i % colors.length];
    item.append(sw, el('span', 'kt-legend-label', n));
    item.title = n;
    if (onHover) {
      item.addEventListener('mouseenter', () => onHover(i));
      item.addEventListener('mouseleave', () => onHover(-1));
    }
    box.append(item);
  });
  return box;
}

/// Donut chart of `items` [{name, value}] (non-positive values skipped). Hovering a slice or its
/// legend entry shows "name: value (p%)". `unit` ('us' or 'bytes') formats values in a unit
/// picked by magnitude; otherwise `valueLabel` is appended to plain values. The centre shows the
/// total under `centreLabel` (default "Total"); `total` (when larger than the items' sum) adds
/// an "Other" slice so the centre equals the whole table the donut summarises. `percentOnly`
/// shows only "name: p%" and no total in the centre (for shares).
export function donut(container, { title, items, valueLabel, unit, percentOnly, total: whole, centreLabel } = {}) {
  const show = UNIT_FORMATS[unit] || ((v) => `${fmt(v)}${valueLabel ? ` ${valueLabel}` : ''}`);
  items = [...(items || [])];
  if (typeof whole === 'number' && !percentOnly) {
    const sum = items.reduce((a, d) => a + (d.value > 0 ? d.value : 0), 0);
    if (whole - sum > Math.max(1e-9, whole * 1e-9)) items.push({ name: 'Other', value: whole - sum });
  }
  const root = card(container, title, 'kt-donut');
  // Colours follow the items' positions, so a category keeps its colour when others are 0.
  const data = (items || []).map((d, i) => ({ ...d, color: colors[i % colors.length] }))
    .filter((d) => typeof d.value === 'number' && d.value > 0);
  const total = data.reduce((s, d) => s + d.value, 0);
  if (!data.length || !(total > 0)) {
    root.append(el('div', 'kt-chart-empty', 'No data'));
    return { element: root };
  }
  const body = el('div', 'kt-donut-body');
  const size = 180;
  const r = 84;
  const inner = 48;
  const c = size / 2;
  const s = svg('svg', { viewBox: `0 0 ${size} ${size}`, width: size, height: size, class: 'kt-donut-svg' });
  const paths = [];
  const label = (d) => percentOnly ? `${d.name}: ${(100 * d.value / total).toFixed(2)}%`
    : `${d.name}: ${show(d.value)} (${(100 * d.value / total).toFixed(2)}%)`;
  let angle = -Math.PI / 2;
  data.forEach((d, i) => {
    const frac = d.value / total;
    const color = d.color;
    let shape;
    if (frac >= 0.99999) {
      shape = svg('circle', { cx: c, cy: c, r: (r + inner) / 2, fill: 'none', 'stroke-width': r - inner });
    } else {
      const a0 = angle;
      const a1 = angle + frac * 2 * Math.PI;
      const large = a1 - a0 > Math.PI ? 1 : 0;
      const p = (rad, a) => `${c + rad * Math.cos(a)} ${c + rad * Math.sin(a)}`;
      shape = svg('path', {
        d: `M ${p(r, a0)} A ${r} ${r} 0 ${large} 1 ${p(r, a1)} L ${p(inner, a1)} ` +
          `A ${inner} ${inner} 0 ${large} 0 ${p(inner, a0)} Z`,
      });
    }
    angle += frac * 2 * Math.PI;
    if (shape.tagName === 'circle') {
      shape.style.stroke = color;
      shape.style.strokeWidth = String(r - inner);
    } else {
      shape.setAttribute('fill', color);
    }
    shape.setAttribute('class', shape.tagName === 'circle' ? 'kt-slice kt-ring' : 'kt-slice');
    shape.addEventListener('mousemove', (e) => showTip(e, label(d)));
    shape.addEventListener('mouseleave', hideTip);
    paths.push(shape);
    s.append(shape);
  });
  const centre = svg('text', { x: c, y: c + 2, 'text-anchor': 'middle', class: 'kt-donut-total' });
  centre.textContent = UNIT_FORMATS[unit] ? show(total) : fmt(Math.round(total * 100) / 100);
  const centreName = svg('text', { x: c, y: c + 16, 'text-anchor': 'middle', class: 'kt-donut-unit' });
  centreName.textContent = centreLabel || (UNIT_FORMATS[unit] || !valueLabel ? 'Total' : `Total (${valueLabel})`);
  if (!percentOnly) s.append(centre, centreName);
  root.dataset.total = String(total);
  const highlight = (i) => paths.forEach((p, j) => p.classList.toggle('kt-dim', i >= 0 && i !== j));
  body.append(s, legend(data.map((d) => d.name), highlight, data.map((d) => d.color)));
  root.append(body);
  return { element: root };
}

function niceStep(max, ticks) {
  if (!(max > 0)) return 1;
  const raw = max / ticks;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const n = raw / mag;
  return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * mag;
}

function shortNumber(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return `${+(v / 1e9).toFixed(1)}G`;
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  return `${+v.toFixed(2)}`;
}

/// Stacked column chart: one column per category, one coloured segment per series.
/// `tooltipHtml(seriesIndex, categoryIndex)` returns trusted HTML for a segment's tooltip;
/// without it the tooltip is "category / series: value (p% of the column)".
export function stackedColumns(container, { title, categories, series, yLabel, tooltipHtml, height } = {}) {
  const root = card(container, title, 'kt-columns');
  categories = categories || [];
  series = series || [];
  if (!categories.length || !series.length) {
    root.append(el('div', 'kt-chart-empty', 'No data'));
    return { element: root };
  }
  const H = height || 280;
  const holder = el('div', 'kt-columns-holder');
  const rects = [];
  const draw = (width) => {
    holder.textContent = '';
    rects.length = 0;
    const totals = categories.map((_, j) => series.reduce((s, ser) => s + Math.max(0, Number(ser.values[j]) || 0), 0));
    const max = Math.max(...totals, 0);
    const step = niceStep(max, 5);
    const top = Math.max(step, Math.ceil(max / step) * step);
    const left = 58;
    const right = 8;
    const topPad = 8;
    const bottom = 36;
    const W = Math.max(320, width, left + right + categories.length * 8);
    const plotW = W - left - right;
    const plotH = H - topPad - bottom;
    const s = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'kt-columns-svg' });
    for (let v = 0; v <= top + 1e-9; v += step) {
      const y = topPad + plotH - (v / top) * plotH;
      s.append(svg('line', { x1: left, x2: W - right, y1: y, y2: y, class: 'kt-grid' }));
      const t = svg('text', { x: left - 6, y: y + 4, 'text-anchor': 'end', class: 'kt-axis' });
      t.textContent = shortNumber(v);
      s.append(t);
    }
    if (yLabel) {
      const t = svg('text', { x: 12, y: topPad + plotH / 2, 'text-anchor': 'middle', class: 'kt-axis-label',
        transform: `rotate(-90 12 ${topPad + plotH / 2})` });
      t.textContent = yLabel;
      s.append(t);
    }
    const band = plotW / categories.length;
    const bw = Math.max(2, Math.min(60, band * 0.7));
    const labelEvery = Math.max(1, Math.ceil(categories.length / Math.max(1, Math.floor(plotW / 48))));
    categories.forEach((cat, j) => {
      const x = left + j * band + (band - bw) / 2;
      let acc = 0;
      series.forEach((ser, i) => {
        const v = Math.max(0, Number(ser.values[j]) || 0);
        if (v <= 0) return;
        const y0 = topPad + plotH - ((acc + v) / top) * plotH;
        const h = (v / top) * plotH;
        acc += v;
        const rect = svg('rect', { x, y: y0, width: bw, height: Math.max(0.5, h), fill: colors[i % colors.length],
          class: 'kt-bar' });
        rect.dataset.series = String(i);
        rect.addEventListener('mousemove', (e) => {
          if (tooltipHtml) {
            const html = tooltipHtml(i, j);
            if (html) { showTip(e, html, true); return; }
          }
          const pct = totals[j] > 0 ? (100 * v / totals[j]).toFixed(2) : '0';
          showTip(e, `${cat}\n${ser.name}: ${fmt(v)} (${pct}%)\nTotal: ${fmt(totals[j])}`);
        });
        rect.addEventListener('mouseleave', hideTip);
        rects.push(rect);
        s.append(rect);
      });
      if (j % labelEvery === 0) {
        const t = svg('text', { x: x + bw / 2, y: topPad + plotH + 16, 'text-anchor': 'middle', class: 'kt-axis' });
        const text = String(cat);
        t.textContent = text.length > 12 ? `${text.slice(0, 11)}\u2026` : text;
        s.append(t);
      }
    });
    s.append(svg('line', { x1: left, x2: W - right, y1: topPad + plotH, y2: topPad + plotH, class: 'kt-axis-line' }));

    holder.append(s);
  };
  const highlight = (i) => rects.forEach((r) => r.classList.toggle('kt-dim', i >= 0 && r.dataset.series !== String(i)));
  root.append(holder, legend(series.map((x) => x.name), highlight));
  let drawn = container.clientWidth || 640;
  draw(drawn);

  if (typeof ResizeObserver !== 'undefined') {
    const ro = new ResizeObserver(() => {
      const w = holder.clientWidth;
      if (w > 0 && Math.abs(w - drawn) > 2) { drawn = w; draw(w); }
    });
    ro.observe(holder);
  }
  return { element: root };
}

/// Line chart with uPlot: `x` numbers, `series` [{name, values, stepped?}]. Dragging selects an
/// x range and calls onRange(x0, x1) (the chart zooms); double click resets and calls onReset().
/// Returns {element, plot, setSize(width)}; the chart follows its container's width.
export function lineChart(container, { title, xLabel, yLabel, x, series, height, onRange, onReset } = {}) {
  const root = card(container, title, 'kt-line');
  const holder = el('div', 'kt-line-holder');
  root.append(holder);
  if (!x || !x.length || !series || !series.length) {
    holder.append(el('div', 'kt-chart-empty', 'No data'));
    return { element: root, plot: null, setSize() {} };
  }
  const stepped = uPlot.paths && uPlot.paths.stepped ? uPlot.paths.stepped({ align: 1 }) : null;
  const opts = {
    width: Math.max(300, container.clientWidth || 600),
    height: height || 260,
    cursor: { drag: { x: true, y: false, setScale: true } },
    legend: { show: true },
    scales: { x: { time: false } },
    axes: [
      { label: xLabel || '', stroke: cssVar('--kt-chart-axis', '#4b5563'), grid: { stroke: cssVar('--kt-chart-grid', '#eef0f3') }, size: 40 },
      { label: yLabel || '', stroke: cssVar('--kt-chart-axis', '#4b5563'), grid: { stroke: cssVar('--kt-chart-grid', '#eef0f3') }, size: 64,
        values: (u, vals) => vals.map((v) => shortNumber(v)) },
    ],
    series: [
      { label: xLabel || 'x' },
      ...series.map((s, i) => ({
        label: s.name,
        stroke: colors[i % colors.length],
        width: 1.5,
        paths: s.stepped && stepped ? stepped : undefined,
        value: (u, v) => (v === null || v === undefined ? '-' : fmt(v)),
      })),
    ],
    hooks: {
      setSelect: [(u) => {
        if (u.select.width > 0 && onRange) {
          const x0 = u.posToVal(u.select.left, 'x');
          const x1 = u.posToVal(u.select.left + u.select.width, 'x');
          onRange(x0, x1);
        }
      }],
    },
  };
  const plot = new uPlot(opts, [x, ...series.map((s) => s.values)], holder);
  holder.addEventListener('dblclick', () => {
    plot.setScale('x', { min: x[0], max: x[x.length - 1] });
    if (onReset) onReset();
  });
  const setSize = (w) => plot.setSize({ width: Math.max(200, w), height: height || 260 });
  if (typeof ResizeObserver !== 'undefined') {
    const ro = new ResizeObserver(() => {
      if (!root.isConnected) { ro.disconnect(); return; }
      const w = root.clientWidth;
      if (w > 0 && Math.abs(w - plot.width) > 2) setSize(w);
    });
    ro.observe(root);
  }
  return { element: root, plot, setSize };
}

/// Small SVG line without axes; hovering shows the nearest point "x: y".
export function sparkline(container, { title, x, y, width, height } = {}) {
  const root = card(container, title, 'kt-spark');
  const W = width || 220;
  const H = height || 40;
  const n = Math.min((x || []).length, (y || []).length);
  if (!n) {
    root.append(el('div', 'kt-chart-empty', 'No data'));
    return { element: root };
  }
  const xs = x.slice(0, n).map(Number);
  const ys = y.slice(0, n).map(Number);
  const x0 = Math.min(...xs);
  const x1 = Math.max(...xs);
  const y0 = Math.min(...ys);
  const y1 = Math.max(...ys);
  const px = (v) => (x1 > x0 ? ((v - x0) / (x1 - x0)) * (W - 4) + 2 : W / 2);
  const py = (v) => (y1 > y0 ? H - 3 - ((v - y0) / (y1 - y0)) * (H - 6) : H / 2);
  const s = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'kt-spark-svg' });
  const d = xs.map((v, i) => `${i ? 'L' : 'M'}${px(v).toFixed(1)} ${py(ys[i]).toFixed(1)}`).join(' ');
  s.append(svg('path', { d, fill: 'none', stroke: colors[0], 'stroke-width': 1.5 }));
  const dot = svg('circle', { r: 2.5, fill: colors[1], visibility: 'hidden' });
  s.append(dot);
  s.addEventListener('mousemove', (e) => {
    const rect = s.getBoundingClientRect();
    const fx = ((e.clientX - rect.left) / rect.width) * W;
    let best = 0;
    for (let i = 1; i < n; i++) if (Math.abs(px(xs[i]) - fx) < Math.abs(px(xs[best]) - fx)) best = i;
    dot.setAttribute('cx', px(xs[best]));
    dot.setAttribute('cy', py(ys[best]));
    dot.setAttribute('visibility', 'visible');
    showTip(e, `${fmt(xs[best])}: ${fmt(ys[best])}`);
  });
  s.addEventListener('mouseleave', () => { dot.setAttribute('visibility', 'hidden'); hideTip(); });
  root.append(s);
  return { element: root };
}
