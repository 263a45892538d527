// SPDX-License-Identifier: BSD-3-Clause
// The trace timeline: a canvas view over the server's windowed timeline API (http-api.md "Trace
// timeline"). The browser never holds the whole trace: after every zoom or pan it asks for the
// visible window (plus a margin) at canvas resolution, keeps only the latest answer, and keeps
// drawing the previous window at the new scale meanwhile so navigation feels immediate.
//
// Layout of the canvas (CSS pixels): a track header column on the left (HEADER_W), a time ruler on
// top (RULER_H), then the counters (small area charts), then the pinned tracks (they stay put),
// then the tracks grouped by process / GPU (a GROUP_H header per group, collapsible), one lane of
// LANE_H per row. The canvas is sticky inside a scrolling box whose sizer has the height of all
// tracks, so vertical scrolling is the browser's own; the canvas draws the part at scrollTop.
//
// Shift-drag selects an area (time range x tracks): the server summarises it exactly
// (/api/timeline/summary) into a table by name, GPU busy time and a flame graph. Flags (M) and
// the view, the pins and the area are kept in the URL hash.
import './trace.css';
import { formatDuration, formatTime, niceStep, sliceColor } from './format.js';

const HEADER_W = 210;
const RULER_H = 22;
const COUNTER_H = 26;
const LANE_H = 18;
const TRACK_GAP = 4;
const GROUP_H = 20;
const PIN_W = 22;               // the pin toggle at the right end of a track header
const MIN_SPAN_US = 0.01;       // deepest zoom: 10 ns across the canvas
const FETCH_MARGIN = 0.25;      // fetch a quarter of the view on each side
const FETCH_DEBOUNCE_MS = 50;
const HASH_DEBOUNCE_MS = 250;
const MERGED_FILL = '#c4c8cf';
const FONT = '11px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
const HEADER_FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';

const HELP_HTML = `
<h3>Trace timeline</h3>
<table>
<tr><td><kbd>W</kbd> / <kbd>S</kbd>, <kbd>&uarr;</kbd> / <kbd>&darr;</kbd></td><td>zoom in / out around the mouse (or the centre)</td></tr>
<tr><td><kbd>A</kbd> / <kbd>D</kbd>, <kbd>&larr;</kbd> / <kbd>&rarr;</kbd></td><td>pan left / right (with <kbd>Shift</kbd>: further)</td></tr>
<tr><td><kbd>Ctrl</kbd> / <kbd>&#8984;</kbd> + wheel, pinch</td><td>zoom around the mouse</td></tr>
<tr><td>wheel</td><td>scroll the tracks up / down</td></tr>
<tr><td><kbd>Shift</kbd> + wheel</td><td>pan left / right</td></tr>
<tr><td>drag</td><td>pan (both directions)</td></tr>
<tr><td><kbd>Shift</kbd> + drag</td><td>select an area: a summary of its slices, GPU busy time and a flame graph</td></tr>
<tr><td>click</td><td>select a slice (details and flows below)</td></tr>
<tr><td>double click</td><td>zoom to a slice</td></tr>
<tr><td><kbd>F</kbd></td><td>zoom to the selected slice or area</td></tr>
<tr><td><kbd>M</kbd></td><td>drop a flag at the mouse; with two or more flags the ruler shows the time between them (click a flag on the ruler to remove it)</td></tr>
<tr><td><kbd>0</kbd></td><td>reset zoom</td></tr>
<tr><td><kbd>Esc</kbd></td><td>clear the selection and the area</td></tr>
<tr><td>click a group or track name</td><td>collapse / expand it</td></tr>
<tr><td>click &#9678; at a track name's right</td><td>pin the track at the top (again: unpin)</td></tr>
<tr><td>search box</td><td><kbd>Enter</kbd> next, <kbd>Shift</kbd>+<kbd>Enter</kbd> or <kbd>&uarr;</kbd> previous, <kbd>&darr;</kbd> next</td></tr>
</table>
<p>Keys work as soon as the Trace view is open (not while typing in a field). Grey hatched
blocks stand for several slices shorter than a pixel; zoom in to separate them. Flags, pins,
the area and the view are part of the link: sharing it restores them.</p>`;

/// Element helper: h('div', {class: 'x', onclick}, child, 'text', ...).
function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c != null) e.append(c);
  return e;
}

/// Creates the timeline inside `el`. `ctx` is the view context of views/*.js (api, hash, setHash).
/// Returns {destroy()}.
export function createTimeline(el, ctx) {
  const tl = new Timeline(el, ctx);
  return { destroy: () => tl.destroy() };
}

class Timeline {
  constructor(el, ctx) {
    this.ctx = ctx;
    this.el = el;
    this.alive = true;
    this.cleanups = [];
    this.meta = null;           // /api/timeline/tracks
    this.view = { start: 0, end: 1 };
    this.win = null;            // latest /api/timeline answer, with per-slice color indices
    this.seq = 0;               // id of the latest window request
    this.requestMs = null;
    this.collapsed = new Set();
    this.collapsedGroups = new Set();
    this.pinned = new Set();    // track ids shown at the top
    this.layout = [];           // per track id: {y, h, rows, pinned}; undefined for hidden tracks
    this.groupRows = [];        // group headers of the scrolling area: {name, y, count}
    this.pinnedH = 0;
    this.area = null;           // {start, end, tracks: [ids]}: the area selection
    this.flags = [];            // flag times (µs, relative)
    this.debug = false;
    this.contentH = 0;
    this.selected = null;       // /api/timeline/event answer
    this.search = { q: '', results: [], total: 0, index: -1, ids: new Set() };
    this.mouse = null;          // {x, y} in canvas CSS pixels while over the canvas
    this.drag = null;
    this.frame = 0;
    this.build();
    this.start();
  }

  // ---- DOM -------------------------------------------------------------------------------------

  build() {
    const reset = h('button', { class: 'ks-tl-btn', title: 'Show the whole trace (0)', onclick: () => this.resetZoom() },
      'Reset zoom');
    this.searchInput = h('input', { class: 'ks-tl-search', type: 'search', placeholder: 'Search slices by name',
      'aria-label': 'Search slices by name' });
    this.searchInfo = h('span', { class: 'ks-tl-searchinfo' });
    const prev = h('button', { class: 'ks-tl-btn ks-tl-searchnav', title: 'Previous match (Shift+Enter)',
      'aria-label': 'Previous match', onclick: () => this.stepResult(-1) }, '\u25b2');
    const next = h('button', { class: 'ks-tl-btn ks-tl-searchnav', title: 'Next match (Enter)',
      'aria-label': 'Next match', onclick: () => this.stepResult(1) }, '\u25bc');
    const help = h('button', { class: 'ks-tl-btn ks-tl-icon', title: 'Keyboard and mouse help', onclick: () => this.toggleHelp() }, '?');
    const searchBox = h('span', { class: 'ks-tl-searchbox' }, this.searchInput, prev, next);
    this.toolbar = h('div', { class: 'ks-tl-toolbar' }, reset, searchBox, this.searchInfo,
      h('span', { class: 'ks-tl-spacer' }), help);

    this.canvas = h('canvas', { class: 'ks-tl-canvas', tabindex: '0', 'aria-label': 'Trace timeline' });
    this.sizer = h('div', { class: 'ks-tl-sizer' }, this.canvas);
    this.scroller = h('div', { class: 'ks-tl-scroller' }, this.sizer);
    this.tooltip = h('div', { class: 'ks-tl-tooltip', hidden: '' });
    this.help = h('div', { class: 'ks-tl-help', hidden: '' });
    this.help.innerHTML = HELP_HTML;
    this.help.append(h('button', { class: 'ks-tl-btn', onclick: () => this.toggleHelp(false) }, 'Close'));
    // The track list for keyboard and screen-reader users (the canvas draws the same names).
    this.trackList = h('div', { class: 'ks-tl-tracklist', role: 'list', 'aria-label': 'Tracks' });
    this.stage = h('div', { class: 'ks-tl-stage' }, this.scroller, this.tooltip, this.help, this.trackList);
    this.resultsBox = h('div', { class: 'ks-tl-results', hidden: '' });
    this.main = h('div', { class: 'ks-tl-main' }, this.stage, this.resultsBox);
    this.details = h('div', { class: 'ks-tl-details', hidden: '' });
    this.areaBox = h('div', { class: 'ks-tl-details ks-tl-area', hidden: '' });
    this.status = h('div', { class: 'ks-tl-status' }, 'Loading tracks\u2026');
    this.root = h('div', { class: 'ks-tl' }, this.toolbar, this.main, this.areaBox, this.details, this.status);
    this.el.replaceChildren(this.root);
    this.g = this.canvas.getContext('2d');
    this.hatch = this.makeHatch();
    this.fitHeight();
  }

  /// Fills the window below the view's top edge (the shell's content area has no fixed height).
  fitHeight() {
    const top = Math.max(0, this.root.getBoundingClientRect().top + window.scrollY);
    let hgt = Math.max(480, Math.floor(window.innerHeight - top - 12));
    this.root.style.height = `${hgt}px`;
    // Padding below the view (the shell's) must not make the page scroll.
    const over = document.documentElement.scrollHeight - window.innerHeight;
    if (over > 0 && hgt > 480) {
      hgt = Math.max(480, hgt - over);
      this.root.style.height = `${hgt}px`;
    }
  }

  makeHatch() {
    const c = document.createElement('canvas');
    c.width = c.height = 6;
    const g = c.getContext('2d');
    g.fillStyle = MERGED_FILL;
    g.fillRect(0, 0, 6, 6);
    g.strokeStyle = '#9aa0a8';
    g.lineWidth = 1.2;
    g.beginPath();
    g.moveTo(0, 6); g.lineTo(6, 0);
    g.moveTo(-1, 1); g.lineTo(1, -1);
    g.moveTo(5, 7); g.lineTo(7, 5);
    g.stroke();
    return this.g.createPattern(c, 'repeat');
  }

  listen(target, type, fn, opts) {
    target.addEventListener(type, fn, opts);
    this.cleanups.push(() => target.removeEventListener(type, fn, opts));
  }

  // ---- start-up --------------------------------------------------------------------------------

  async start() {
    let meta;
    try {
      meta = await this.ctx.api('timeline/tracks');
    } catch (err) {
      if (this.alive) this.fail(`Could not load the timeline: ${err.message}`);
      return;
    }
    if (!this.alive) return;
    if (!meta || !Array.isArray(meta.tracks) || meta.tracks.length === 0) {
      this.fail('This trace has no timeline events.');
      return;
    }
    this.meta = meta;
    this.counters = (meta.counters || []).filter((c) => Array.isArray(c.points) && c.points.length > 0);
    for (const c of this.counters) c.max = c.points.reduce((m, pt) => Math.max(m, pt[1]), 0);
    // Series that grow with the trace (SM efficiency, memory): fetched per window.
    // Per device (CPU first): utilization, SM efficiency, memory allocated, memory reserved.
    const device = (n) => { const m = /^GPU (\d+)/.exec(n); return m ? Number(m[1]) : -1; };
    const order = (n) => device(n) * 10 + (/Utilization/.test(n) ? 0 : /SM Efficiency/.test(n) ? 1 : 2);
    for (const c of meta.windowed_counters || []) {
      if (c.points > 0) this.counters.push({ name: c.name, unit: c.unit, max: c.max, points: [], windowed: true });
    }
    this.counters.sort((a, b) => order(a.name) - order(b.name) || a.name.localeCompare(b.name, 'en', { numeric: true }));
    this.trackById = new Map(meta.tracks.map((t) => [t.id, t]));
    this.canvas.dataset.tracks = String(meta.tracks.length);
    this.canvas.dataset.slices = '0';
    this.relayout();

    const hash = this.ctx.hash || {};
    this.debug = hash.debug === '1';
    for (const id of String(hash.pins || '').split(',')) {
      if (/^\d+$/.test(id) && this.trackById.has(Number(id))) this.pinned.add(Number(id));
    }
    this.flags = String(hash.flags || '').split(',').filter((v) => v !== '').map(Number).filter(Number.isFinite);
    this.relayout();
    const t0 = Number(hash.t0);
    const t1 = Number(hash.t1);
    if (hash.t0 != null && hash.t1 != null && Number.isFinite(t0) && Number.isFinite(t1) && t1 > t0) {
      this.view = this.clampView(t0, t1);
    } else {
      this.view = this.fullView();
    }
    this.bindEvents();
    this.resize();
    if (hash.event != null && /^\d+$/.test(String(hash.event))) {
      this.select(Number(hash.event), { reveal: !(hash.t0 != null && hash.t1 != null) });
    }
    const a = String(hash.area || '').split(',').map(Number);
    const tracks = String(hash.area_tracks || '').split(',').filter((v) => /^\d+$/.test(v)).map(Number)
      .filter((id) => this.trackById.has(id));
    if (a.length === 2 && a.every(Number.isFinite) && a[1] > a[0] && tracks.length) {
      this.setArea({ start: a[0], end: a[1], tracks });
    }
  }

  fail(message) {
    this.root.replaceChildren(h('div', { class: 'ks-tl-empty' }, message));
  }

  destroy() {
    this.alive = false;
    this.seq++;
    clearTimeout(this.fetchTimer);
    clearTimeout(this.hashTimer);
    clearTimeout(this.searchTimer);
    this.areaToken = (this.areaToken || 0) + 1;
    cancelAnimationFrame(this.frame);
    for (const c of this.cleanups) c();
    this.cleanups = [];
  }

  // ---- geometry --------------------------------------------------------------------------------

  fullView() {
    const d = Math.max(this.meta.duration, MIN_SPAN_US);
    const pad = d * 0.01;
    return { start: -pad, end: d + pad };
  }

  clampView(start, end) {
    const full = this.fullView();
    const maxSpan = (full.end - full.start) * 1.5;
    let span = Math.min(Math.max(end - start, MIN_SPAN_US), maxSpan);
    const mid = (start + end) / 2;
    let s = mid - span / 2;
    const lo = full.start - span * 0.5;
    const hi = full.end + span * 0.5;
    if (s < lo) s = lo;
    if (s + span > hi) s = hi - span;
    return { start: s, end: s + span };
  }

  get plotW() { return Math.max(1, this.cssW - HEADER_W); }
  /// Bottom of the counters: the pinned tracks start here.
  get countersBottom() { return RULER_H + this.counters.length * COUNTER_H; }
  /// Top of the scrolling tracks (below the pinned ones).
  get topH() { return this.countersBottom + this.pinnedH; }
  /// Canvas y of the top of a laid-out track.
  trackTop(l) { return l.pinned ? this.countersBottom + l.y : this.topH + l.y - this.scroller.scrollTop; }
  xOf(t) { return HEADER_W + ((t - this.view.start) / (this.view.end - this.view.start)) * this.plotW; }
  tOf(x) { return this.view.start + ((x - HEADER_W) / this.plotW) * (this.view.end - this.view.start); }

  /// Lays the tracks out vertically: the pinned ones (y from the counters' bottom), then each group
  /// (process or GPU, in order of first appearance) with its header and, unless collapsed, its
  /// tracks (y from the top of the scrolling area).
  relayout() {
    this.layout = [];
    const rowsOf = (t) => (this.collapsed.has(t.id) ? 1 : Math.max(1, t.rows | 0));
    let y = 0;
    for (const t of this.meta.tracks) {
      if (!this.pinned.has(t.id)) continue;
      const rows = rowsOf(t);
      this.layout[t.id] = { y, h: rows * LANE_H, rows, pinned: true };
      y += rows * LANE_H + TRACK_GAP;
    }
    // At most half the canvas for pinned tracks.
    this.pinnedH = y ? Math.min(y + 2, Math.max(LANE_H * 2, ((this.cssH || 600) - this.countersBottom) / 2)) : 0;
    const groups = new Map();
    for (const t of this.meta.tracks) {
      const name = t.group || t.kind;
      if (!groups.has(name)) groups.set(name, []);
      groups.get(name).push(t);
    }
    y = 0;
    this.groupRows = [];
    for (const [name, list] of groups) {
      const shown = list.filter((t) => !this.pinned.has(t.id));
      if (!shown.length) continue;
      this.groupRows.push({ name, y, count: list.length });
      y += GROUP_H;
      if (this.collapsedGroups.has(name)) continue;
      for (const t of shown) {
        const rows = rowsOf(t);
        this.layout[t.id] = { y, h: rows * LANE_H, rows, pinned: false };
        y += rows * LANE_H + TRACK_GAP;
      }
    }
    this.contentH = y;
    this.renderTrackList();
    if (this.cssH) this.sizer.style.height = `${Math.max(this.cssH, this.topH + this.contentH + 8)}px`;
  }

  /// The accessible track list: counters, pinned tracks, then each group with its tracks; buttons
  /// collapse a group or pin a track like clicks on the canvas do.
  renderTrackList() {
    const items = [];
    const toggleGroup = (name) => {
      if (!this.collapsedGroups.delete(name)) this.collapsedGroups.add(name);
      this.relayout();
      this.draw();
    };
    const togglePin = (id) => {
      if (!this.pinned.delete(id)) this.pinned.add(id);
      this.relayout();
      this.draw();
      this.scheduleHash();
    };
    const track = (t) => h('div', { role: 'listitem', class: 'ks-tl-li-track', 'data-track': String(t.id) },
      h('span', { class: 'ks-tl-li-name' }, t.name),
      h('button', { class: 'ks-tl-li-pin', onclick: () => togglePin(t.id) }, this.pinned.has(t.id) ? `Unpin ${t.name}` : `Pin ${t.name}`));
    for (const c of this.counters || []) items.push(h('div', { role: 'listitem', class: 'ks-tl-li-counter' }, c.name));
    const pinned = this.meta.tracks.filter((t) => this.pinned.has(t.id));
    if (pinned.length) items.push(h('div', { role: 'listitem', class: 'ks-tl-li-group', 'data-group': 'Pinned' }, 'Pinned'), ...pinned.map(track));
    for (const gr of this.groupRows) {
      const open = !this.collapsedGroups.has(gr.name);
      items.push(h('div', { role: 'listitem', class: 'ks-tl-li-group', 'data-group': gr.name },
        h('span', { class: 'ks-tl-li-name' }, gr.name),
        h('button', { class: 'ks-tl-li-toggle', 'aria-expanded': String(open), onclick: () => toggleGroup(gr.name) },
          `${open ? 'Collapse' : 'Expand'} ${gr.name}`)));
      if (open) for (const t of this.meta.tracks) if ((t.group || t.kind) === gr.name && !this.pinned.has(t.id)) items.push(track(t));
    }
    this.trackList.replaceChildren(...items);
  }

  /// Canvas y (CSS px) of the top of `row` in track `track`, or null for an unknown track.
  laneY(track, row) {
    const l = this.layout[track];
    if (!l) return null;
    const r = row < l.rows ? row : 0;
    return this.trackTop(l) + r * LANE_H;
  }

  resize() {
    const w = this.scroller.clientWidth;
    const hgt = this.scroller.clientHeight;
    if (w <= 0 || hgt <= 0) return;
    const dpr = window.devicePixelRatio || 1;
    this.cssW = w;
    this.cssH = hgt;
    this.dpr = dpr;
    this.canvas.width = Math.round(w * dpr);
    this.canvas.height = Math.round(hgt * dpr);
    this.canvas.style.width = `${w}px`;
    this.canvas.style.height = `${hgt}px`;
    this.relayout();
    this.draw();
    this.scheduleFetch(0);
  }

  // ---- data ------------------------------------------------------------------------------------

  scheduleFetch(delay = FETCH_DEBOUNCE_MS) {
    clearTimeout(this.fetchTimer);
    this.fetchTimer = setTimeout(() => this.fetchWindow(), delay);
  }

  async fetchWindow() {
    if (!this.alive || !this.meta || !this.cssW) return;
    const span = this.view.end - this.view.start;
    const start = this.view.start - span * FETCH_MARGIN;
    const end = this.view.end + span * FETCH_MARGIN;
    const px = Math.max(1, Math.min(10000, Math.round(this.plotW * (1 + 2 * FETCH_MARGIN))));
    const id = ++this.seq;
    const t = performance.now();
    let win;
    let counters = null;
    try {
      const range = { start: fmtParam(start), end: fmtParam(end), px };
      [win, counters] = await Promise.all([this.ctx.api('timeline', range),
        this.counters.some((c) => c.windowed) ? this.ctx.api('timeline/counters', range) : null]);
    } catch (err) {
      if (id === this.seq && this.alive) this.setStatusError(`Window request failed: ${err.message}`);
      return;
    }
    if (id !== this.seq || !this.alive) return;  // a newer request is under way: drop this one
    this.requestMs = performance.now() - t;
    this.error = null;
    this.win = prepareWindow(win);
    if (counters && Array.isArray(counters.counters)) {
      const byName = new Map(counters.counters.map((c) => [c.name, c.points]));
      for (const c of this.counters) if (c.windowed) c.points = byName.get(c.name) || [];
    }
    this.draw();
  }

  setStatusError(message) {
    this.error = message;
    this.updateStatus();
  }

  // ---- view changes ----------------------------------------------------------------------------

  setView(start, end) {
    this.view = this.clampView(start, end);
    this.hideTooltip();
    this.requestDraw();
    this.scheduleFetch();
    this.scheduleHash();
  }

  zoomAt(factor, x) {
    const anchor = x != null && x >= HEADER_W ? this.tOf(x) : (this.view.start + this.view.end) / 2;
    const s = anchor - (anchor - this.view.start) * factor;
    const e = anchor + (this.view.end - anchor) * factor;
    this.setView(s, e);
  }

  panBy(fraction) {
    const d = (this.view.end - this.view.start) * fraction;
    this.setView(this.view.start + d, this.view.end + d);
  }

  resetZoom() {
    const f = this.fullView();
    this.setView(f.start, f.end);
  }

  /// Zooms so that [ts, ts+dur] fills most of the view.
  zoomTo(ts, dur) {
    const span = Math.max(dur, MIN_SPAN_US * 10);
    this.setView(ts - span * 0.15, ts + span * 1.15);
  }

  /// Makes an event visible: pans (or zooms in when it would be thinner than 2 px) and scrolls
  /// its track into view.
  reveal(e) {
    const span = this.view.end - this.view.start;
    const wpx = (e.dur / span) * this.plotW;
    const inside = e.ts >= this.view.start && e.ts + e.dur <= this.view.end;
    const mid = e.ts + e.dur / 2;
    if (wpx < 8 || e.dur > span) {
      const w = Math.max(e.dur * 6, MIN_SPAN_US * 10);
      this.setView(mid - w / 2, mid + w / 2);
    } else if (!inside) {
      this.setView(mid - span / 2, mid + span / 2);
    }
    this.scrollToLane(e);
  }

  /// Scrolls vertically so that the lane of event `e` is visible.
  scrollToLane(e) {
    const l = this.layout[e.track];
    if (!l) {
      // A track of a collapsed group: open the group.
      const t = this.trackById.get(e.track);
      if (t && this.collapsedGroups.delete(t.group || t.kind)) {
        this.relayout();
        return this.scrollToLane(e);
      }
    }
    if (l && !l.pinned) {
      const r = e.row < l.rows ? e.row : 0;
      const y = l.y + r * LANE_H;
      const visible = this.cssH - this.topH;
      const st = this.scroller.scrollTop;
      if (y < st || y + LANE_H > st + visible) this.scroller.scrollTop = Math.max(0, y - visible / 3);
    }
    this.requestDraw();
  }

  /// Shows a flow's two ends together when the view does not: both slices, 10 % padding.
  revealPair(a, b) {
    const lo = Math.min(a.ts, b.ts);
    const hi = Math.max(a.ts + a.dur, b.ts + b.dur);
    const inside = lo >= this.view.start && hi <= this.view.end;
    const span = this.view.end - this.view.start;
    if (!inside || (Math.min(a.dur, b.dur) / span) * this.plotW < 2) {
      const pad = Math.max((hi - lo) * 0.1, MIN_SPAN_US);
      this.setView(lo - pad, hi + pad);
    }
    this.scrollToLane(b);
  }

  scheduleHash() {
    clearTimeout(this.hashTimer);
    this.hashTimer = setTimeout(() => {
      if (!this.alive || !this.ctx.setHash) return;
      this.ctx.setHash({ t0: fmtParam(this.view.start), t1: fmtParam(this.view.end),
        event: this.selected ? String(this.selected.id) : undefined,
        pins: this.pinned.size ? [...this.pinned].join(',') : undefined,
        flags: this.flags.length ? this.flags.map(fmtParam).join(',') : undefined,
        area: this.area ? `${fmtParam(this.area.start)},${fmtParam(this.area.end)}` : undefined,
        area_tracks: this.area ? this.area.tracks.join(',') : undefined });
    }, HASH_DEBOUNCE_MS);
  }

  // ---- drawing ---------------------------------------------------------------------------------

  requestDraw() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  draw() {
    if (!this.meta || !this.cssW || !this.alive) return;
    const g = this.g;
    g.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    g.clearRect(0, 0, this.cssW, this.cssH);
    g.fillStyle = '#ffffff';
    g.fillRect(0, 0, this.cssW, this.cssH);

    // Two passes: the scrolling tracks below the pinned ones, then the pinned tracks.
    let drawn = 0;
    for (const pinned of [false, true]) {
      const top = pinned ? this.countersBottom : this.topH;
      const bottom = pinned ? this.topH : this.cssH;
      if (bottom <= top) continue;
      g.save();
      g.beginPath();
      g.rect(0, top, this.cssW, bottom - top);
      g.clip();
      this.drawTrackBackgrounds(pinned);
      this.drawGrid(top, bottom);
      g.save();
      g.beginPath();
      g.rect(HEADER_W, top, this.plotW, bottom - top);
      g.clip();
      drawn += this.drawSlices(pinned, top, bottom);
      this.drawHighlights(pinned);
      g.restore();
      this.drawTrackHeaders(pinned);
      g.restore();
    }
    if (this.pinnedH) {
      g.fillStyle = '#9aa0a6';
      g.fillRect(0, this.topH - 1, this.cssW, 1);
    }
    g.save();
    g.beginPath();
    g.rect(HEADER_W, this.countersBottom, this.plotW, this.cssH - this.countersBottom);
    g.clip();
    this.drawFlows();
    this.drawArea();
    this.drawFlags(this.countersBottom);
    g.restore();

    this.drawCounters();
    this.drawRuler();
    this.canvas.dataset.slices = String(drawn);
    this.drawnSlices = drawn;
    this.updateStatus();
  }

  drawTrackBackgrounds(pinned) {
    const g = this.g;
    let i = 0;
    for (const t of this.meta.tracks) {
      const l = this.layout[t.id];
      if (!l || l.pinned !== pinned) continue;
      const y = this.trackTop(l);
      if (y + l.h >= 0 && y <= this.cssH) {
        g.fillStyle = i % 2 ? '#fafbfc' : '#ffffff';
        g.fillRect(HEADER_W, y, this.plotW, l.h);
        g.fillStyle = '#e6e8eb';
        g.fillRect(0, y + l.h + TRACK_GAP / 2 - 0.5, this.cssW, 1);
      }
      i++;
    }
  }

  drawGrid(top, bottom) {
    const g = this.g;
    const { step } = niceStep(this.view.end - this.view.start, this.plotW / 110);
    g.fillStyle = '#eef0f2';
    const first = Math.ceil(this.view.start / step) * step;
    for (let t = first; t <= this.view.end; t += step) {
      const x = Math.round(this.xOf(t)) + 0.5;
      g.fillRect(x - 0.5, top, 1, bottom - top);
    }
  }

  /// Draws the window's slices batched by fill color; returns the number drawn.
  drawSlices(pinned, top, bottom) {
    const win = this.win;
    if (!win) return 0;
    const g = this.g;
    const S = win.slices;
    const n = S.ts.length;
    const scale = this.plotW / (this.view.end - this.view.start);
    const x0 = HEADER_W;
    const xMax = this.cssW;
    const byColor = win.buckets;
    for (const b of byColor) b.length = 0;
    const merged = [];
    const labels = [];
    let drawn = 0;
    for (let i = 0; i < n; i++) {
      const l = this.layout[S.track[i]];
      if (!l || l.pinned !== pinned) continue;
      const row = S.row[i];
      if (row >= l.rows) continue;  // collapsed track: only its first lane
      const y = this.trackTop(l) + row * LANE_H;
      if (y + LANE_H < top || y > bottom) continue;
      let xa = x0 + (S.ts[i] - this.view.start) * scale;
      let xb = xa + S.dur[i] * scale;
      if (xb < x0 || xa > xMax) continue;
      if (xa < x0 - 1) xa = x0 - 1;
      if (xb > xMax + 1) xb = xMax + 1;
      let w = xb - xa;
      if (w < 1) w = 1;
      drawn++;
      if (S.count[i] > 1) merged.push(xa, y, w);
      else byColor[win.color[S.name[i]]].push(xa, y, w);
      if (w >= 24) labels.push(i, xa, y, w);
    }
    const hgt = LANE_H - 1;
    for (let c = 0; c < byColor.length; c++) {
      const a = byColor[c];
      if (!a.length) continue;
      g.fillStyle = win.palette[c];
      for (let k = 0; k < a.length; k += 3) g.fillRect(a[k], a[k + 1], a[k + 2], hgt);
    }
    if (merged.length) {
      g.fillStyle = this.hatch || MERGED_FILL;
      for (let k = 0; k < merged.length; k += 3) g.fillRect(merged[k], merged[k + 1], merged[k + 2], hgt);
    }
    if (labels.length) {
      g.font = FONT;
      g.textBaseline = 'middle';
      const charW = this.charW || (this.charW = g.measureText('abcdefghijklmnopqrstuvwxyz_:').width / 28);
      for (let k = 0; k < labels.length; k += 4) {
        const i = labels[k];
        const xa = Math.max(labels[k + 1], x0);
        const w = Math.min(labels[k + 1] + labels[k + 3], xMax) - xa;
        if (w < 24) continue;
        const text = S.count[i] > 1 ? `${S.count[i]} events` : win.names[S.name[i]];
        const label = fitText(g, text, w - 6, charW);
        if (!label) continue;
        g.fillStyle = S.count[i] > 1 ? '#30343a' : '#1b1e22';
        g.fillText(label, xa + 3, labels[k + 2] + LANE_H / 2);
      }
    }
    return drawn;
  }

  /// Outlines the selected slice and the current search results.
  drawHighlights(pinned) {
    const g = this.g;
    const outline = (e, color, width) => {
      const l = this.layout[e.track];
      if (!l || l.pinned !== pinned) return;
      const y = this.laneY(e.track, e.row);
      if (y == null) return;
      const xa = this.xOf(e.ts);
      const w = Math.max(2, this.xOf(e.ts + e.dur) - xa);
      g.strokeStyle = color;
      g.lineWidth = width;
      g.strokeRect(xa - 0.5, y - 0.5, w + 1, LANE_H);
    };
    const s = this.search;
    if (s.results.length) {
      for (let k = 0; k < s.results.length; k++) {
        const e = s.results[k];
        if (e.ts > this.view.end || e.ts + e.dur < this.view.start) continue;
        outline(e, k === s.index ? '#e8710a' : 'rgba(232,113,10,0.55)', k === s.index ? 2.5 : 1);
      }
    }
    if (this.selected) outline(this.selected, '#1a57d6', 2.5);
  }

  /// Flow arrows between the selected slice and its related events.
  drawFlows() {
    const top = this.selected;
    if (!top || !Array.isArray(top.flows) || !top.flows.length) return;
    const g = this.g;
    g.lineWidth = 1.5;
    for (const f of top.flows) {
      const sel = f.from || top;  // subtree flows start at a slice inside the selected one
      const sy = this.laneY(sel.track, sel.row);
      const fy = this.laneY(f.track, f.row);
      if (fy == null || sy == null) continue;
      const incoming = f.relation === 'launched by' || f.relation === 'forward';
      const [ax, ay, bx, by] = incoming
        ? [this.xOf(f.ts), fy + LANE_H / 2, this.xOf(sel.ts), sy + LANE_H / 2]
        : [this.xOf(sel.ts), sy + LANE_H / 2, this.xOf(f.ts), fy + LANE_H / 2];
      const color = f.relation === 'forward' || f.relation === 'backward' ? '#8e24aa' : '#1a57d6';
      g.strokeStyle = color;
      g.fillStyle = color;
      g.beginPath();
      g.moveTo(ax, ay);
      const dx = Math.max(20, Math.abs(bx - ax) / 2);
      g.bezierCurveTo(ax + dx, ay, bx - dx, by, bx, by);
      g.stroke();
      // Arrowhead pointing along the curve's last tangent (horizontal, rightwards).
      g.beginPath();
      g.moveTo(bx, by);
      g.lineTo(bx - 7, by - 4);
      g.lineTo(bx - 7, by + 4);
      g.closePath();
      g.fill();
    }
  }

  drawTrackHeaders(pinned) {
    const g = this.g;
    const top = pinned ? this.countersBottom : this.topH;
    g.fillStyle = '#f4f5f7';
    g.fillRect(0, top, HEADER_W, this.cssH - top);
    g.fillStyle = '#d5d8dc';
    g.fillRect(HEADER_W - 1, top, 1, this.cssH - top);
    g.font = HEADER_FONT;
    g.textBaseline = 'middle';
    const charW = g.measureText('abcdefghijklmnopqrstuvwxyz').width / 26;
    if (!pinned) {
      // Group headers: a band across the whole width.
      for (const gr of this.groupRows) {
        const y = this.topH + gr.y - this.scroller.scrollTop;
        if (y + GROUP_H < top || y > this.cssH) continue;
        g.fillStyle = '#e8eaed';
        g.fillRect(0, y, this.cssW, GROUP_H - 1);
        g.fillStyle = '#3c4043';
        const open = !this.collapsedGroups.has(gr.name);
        g.font = `600 ${HEADER_FONT}`;
        const label = `${open ? '\u25be' : '\u25b8'} ${gr.name}`;
        g.fillText(fitText(g, label, this.cssW - 140, charW), 6, y + GROUP_H / 2);
        g.font = FONT;
        g.fillStyle = '#5f6368';
        const note = `${gr.count} track${gr.count === 1 ? '' : 's'}`;
        g.fillText(note, this.cssW - g.measureText(note).width - 10, y + GROUP_H / 2);
        g.font = HEADER_FONT;
      }
    }
    for (const t of this.meta.tracks) {
      const l = this.layout[t.id];
      if (!l || l.pinned !== pinned) continue;
      const y = this.trackTop(l);
      if (y + l.h < top || y > this.cssH) continue;
      const collapsible = (t.rows | 0) > 1;
      const collapsed = this.collapsed.has(t.id);
      g.fillStyle = t.kind === 'gpu' ? '#2e7d32' : t.kind === 'cpu' ? '#1a57d6' : '#757575';
      g.fillRect(0, y, 3, l.h);
      g.fillStyle = '#5f6368';
      if (collapsible) g.fillText(collapsed ? '\u25b8' : '\u25be', 8, y + LANE_H / 2);
      g.fillStyle = '#202124';
      const name = fitText(g, t.name, HEADER_W - 26 - PIN_W, charW);
      g.fillText(name, 22, y + LANE_H / 2);
      g.fillStyle = pinned ? '#1a57d6' : '#b0b4b9';
      g.fillText(pinned ? '\u25c9' : '\u25ce', HEADER_W - PIN_W + 4, y + LANE_H / 2);
      if (l.h >= 2 * LANE_H) {
        g.fillStyle = '#80868b';
        g.font = FONT;
        g.fillText(`${t.events} events \u00b7 ${t.rows} rows`, 22, y + LANE_H * 1.5);
        g.font = HEADER_FONT;
      }
    }
  }

  drawCounters() {
    if (!this.counters.length) return;
    const g = this.g;
    const scale = this.plotW / (this.view.end - this.view.start);
    g.font = FONT;
    g.textBaseline = 'middle';
    this.counters.forEach((c, k) => {
      const y = RULER_H + k * COUNTER_H;
      g.fillStyle = '#f4f5f7';
      g.fillRect(0, y, HEADER_W, COUNTER_H);
      g.fillStyle = '#ffffff';
      g.fillRect(HEADER_W, y, this.plotW, COUNTER_H);
      g.fillStyle = '#202124';
      g.fillText(fitText(g, c.name, HEADER_W - 16, 6), 10, y + COUNTER_H / 2);
      const pts = c.points;
      if (!pts.length) return;
      const full = c.unit === 'bytes' ? Math.max(1, c.max) : c.max <= 1 ? 1 : c.max <= 100 ? 100 : c.max;
      const memory = c.unit === 'bytes';
      const base = y + COUNTER_H - 2;
      const hgt = COUNTER_H - 5;
      g.save();
      g.beginPath();
      g.rect(HEADER_W, y, this.plotW, COUNTER_H);
      g.clip();
      g.beginPath();
      g.moveTo(HEADER_W, base);
      let lastY = base;
      for (let i = 0; i < pts.length; i++) {
        const x = HEADER_W + (pts[i][0] - this.view.start) * scale;
        const nx = i + 1 < pts.length ? HEADER_W + (pts[i + 1][0] - this.view.start) * scale : this.cssW + 1;
        if (nx < HEADER_W) { lastY = base - (pts[i][1] / full) * hgt; continue; }
        const vy = base - (Math.max(0, pts[i][1]) / full) * hgt;
        g.lineTo(Math.max(HEADER_W, x), lastY);
        g.lineTo(Math.max(HEADER_W, x), vy);
        lastY = vy;
        if (x > this.cssW) break;
      }
      g.lineTo(this.cssW, lastY);
      g.lineTo(this.cssW, base);
      g.closePath();
      g.fillStyle = memory ? 'rgba(26,87,214,0.25)' : 'rgba(46,125,50,0.35)';
      g.fill();
      g.strokeStyle = memory ? '#1a57d6' : '#2e7d32';
      g.lineWidth = 1;
      g.stroke();
      g.restore();
      g.fillStyle = '#e6e8eb';
      g.fillRect(0, y + COUNTER_H - 1, this.cssW, 1);
    });
  }

  drawRuler() {
    const g = this.g;
    g.fillStyle = '#f4f5f7';
    g.fillRect(0, 0, this.cssW, RULER_H);
    g.fillStyle = '#d5d8dc';
    g.fillRect(0, RULER_H - 1, this.cssW, 1);
    const span = this.view.end - this.view.start;
    const maxAbs = Math.max(Math.abs(this.view.start), Math.abs(this.view.end));
    const { step, unit, decimals } = niceStep(span, this.plotW / 110, maxAbs);
    g.font = FONT;
    g.textBaseline = 'middle';
    g.fillStyle = '#5f6368';
    g.fillText(`\u0394 ${formatDuration(span)}`, 8, RULER_H / 2);
    g.save();
    g.beginPath();
    g.rect(HEADER_W, 0, this.plotW, RULER_H);
    g.clip();
    const first = Math.ceil(this.view.start / step) * step;
    for (let t = first; t <= this.view.end + step; t += step) {
      const x = Math.round(this.xOf(t)) + 0.5;
      g.fillStyle = '#9aa0a6';
      g.fillRect(x - 0.5, RULER_H - 7, 1, 6);
      g.fillStyle = '#3c4043';
      g.fillText(formatTime(Math.abs(t) < step / 1e6 ? 0 : t, unit, decimals), x + 3, RULER_H / 2 - 1);
    }
    // Flags: a marker on the ruler each; between neighbours, the time between them.
    const flags = [...this.flags].sort((a, b) => a - b);
    for (let k = 0; k < flags.length; k++) {
      const x = this.xOf(flags[k]);
      if (k > 0) {
        const xa = this.xOf(flags[k - 1]);
        const text = `\u0394 ${formatDuration(flags[k] - flags[k - 1])}`;
        const tw = g.measureText(text).width;
        if (x - xa > tw + 16) {
          g.fillStyle = 'rgba(232,113,10,0.15)';
          g.fillRect(xa, 2, x - xa, RULER_H - 4);
          g.fillStyle = '#a04800';
          g.fillText(text, (xa + x) / 2 - tw / 2, RULER_H / 2);
        }
      }
      g.fillStyle = '#e8710a';
      g.beginPath();
      g.moveTo(x - 5, 0);
      g.lineTo(x + 5, 0);
      g.lineTo(x, 9);
      g.closePath();
      g.fill();
    }
    g.restore();
  }

  /// Vertical lines of the flags across the tracks.
  drawFlags(top) {
    const g = this.g;
    g.fillStyle = 'rgba(232,113,10,0.8)';
    for (const f of this.flags) {
      const x = Math.round(this.xOf(f)) + 0.5;
      g.fillRect(x - 0.5, top, 1, this.cssH - top);
    }
  }

  /// The area selection: its time range shaded on its tracks, edges across the whole height.
  drawArea() {
    const a = this.area;
    if (!a) return;
    const g = this.g;
    const xa = this.xOf(a.start);
    const xb = this.xOf(a.end);
    g.fillStyle = 'rgba(26,87,214,0.14)';
    for (const id of a.tracks) {
      const l = this.layout[id];
      if (!l) continue;
      g.fillRect(xa, this.trackTop(l), xb - xa, l.h);
    }
    g.fillStyle = '#1a57d6';
    g.fillRect(Math.round(xa), this.countersBottom, 1, this.cssH);
    g.fillRect(Math.round(xb), this.countersBottom, 1, this.cssH);
  }

  updateStatus() {
    if (!this.meta) return;
    const v = this.view;
    const parts = [
      `Showing ${formatTime(Math.max(0, v.start))} \u2013 ${formatTime(Math.min(this.meta.duration, v.end))} of ${formatDuration(this.meta.duration)}`,
      `${(this.drawnSlices || 0).toLocaleString('en-US')} slices on screen`,
      `${this.meta.tracks.length} tracks`,
    ];
    if (this.win) {
      if (this.win.slices.count.some((c) => c > 1)) parts.push('grey blocks group slices too short to draw: zoom in to see each one');
      if (this.win.truncated) parts.push('too many slices to show here: zoom in to see them all');
    }
    if (this.flags.length === 1) parts.push(`1 flag at ${formatTime(this.flags[0])}`);
    if (this.flags.length > 1) {
      const f = [...this.flags].sort((a, b) => a - b);
      parts.push(`${f.length} flags, first to last ${formatDuration(f[f.length - 1] - f[0])}`);
    }
    if (this.area) parts.push(`area: ${formatDuration(this.area.end - this.area.start)} on ${this.area.tracks.length} track${this.area.tracks.length === 1 ? '' : 's'}`);
    if (this.debug && this.win) parts.push(`merge ${formatDuration(this.win.merge_us)}`);
    if (this.debug && this.requestMs != null) parts.push(`request ${this.requestMs.toFixed(0)} ms`);
    if (this.error) parts.push(this.error);
    this.status.textContent = parts.join('  \u00b7  ');
    this.status.classList.toggle('ks-tl-status-error', !!this.error);
  }

  // ---- hit testing -----------------------------------------------------------------------------

  /// The track and row at canvas y, or null.
  laneAt(y) {
    if (y < this.countersBottom) return null;
    const pinned = y < this.topH;
    const cy = pinned ? y - this.countersBottom : y - this.topH + this.scroller.scrollTop;
    for (const t of this.meta.tracks) {
      const l = this.layout[t.id];
      if (!l || l.pinned !== pinned) continue;
      if (cy >= l.y && cy < l.y + l.h) return { track: t.id, row: Math.floor((cy - l.y) / LANE_H) };
    }
    return null;
  }

  /// The group header at canvas y, or null.
  groupAt(y) {
    if (y < this.topH) return null;
    const cy = y - this.topH + this.scroller.scrollTop;
    return this.groupRows.find((gr) => cy >= gr.y && cy < gr.y + GROUP_H) || null;
  }

  /// Ids of the tracks whose lanes meet canvas rows [ya, yb].
  tracksBetween(ya, yb) {
    const lo = Math.min(ya, yb);
    const hi = Math.max(ya, yb);
    const out = [];
    for (const t of this.meta.tracks) {
      const l = this.layout[t.id];
      if (!l) continue;
      const y = this.trackTop(l);
      if (!l.pinned && y + l.h < this.topH) continue;  // scrolled under the pinned tracks
      if (y <= hi && y + l.h >= lo) out.push(t.id);
    }
    return out;
  }

  /// Index in the current window of the slice under (x, y), or -1.
  sliceAt(x, y) {
    const win = this.win;
    if (!win || x < HEADER_W) return -1;
    const lane = this.laneAt(y);
    if (!lane) return -1;
    const S = win.slices;
    const scale = this.plotW / (this.view.end - this.view.start);
    const tol = 2 / scale;  // 2 px of slack for thin slices
    const t = this.tOf(x);
    let best = -1;
    let bestDist = Infinity;
    for (let i = 0; i < S.ts.length; i++) {
      if (S.track[i] !== lane.track || S.row[i] !== lane.row) continue;
      const a = S.ts[i];
      const b = a + S.dur[i];
      if (t >= a && t <= b) return i;
      const d = t < a ? a - t : t - b;
      if (d <= tol && d < bestDist) { best = i; bestDist = d; }
    }
    return best;
  }

  // ---- events ----------------------------------------------------------------------------------

  bindEvents() {
    const c = this.canvas;
    const ro = new ResizeObserver(() => this.resize());
    ro.observe(this.scroller);
    this.cleanups.push(() => ro.disconnect());
    this.listen(window, 'resize', () => this.fitHeight());
    this.listen(this.scroller, 'scroll', () => this.draw(), { passive: true });
    this.listen(c, 'wheel', (e) => this.onWheel(e), { passive: false });
    this.listen(c, 'mousedown', (e) => this.onMouseDown(e));
    this.listen(window, 'mousemove', (e) => this.onMouseMove(e));
    this.listen(window, 'mouseup', (e) => this.onMouseUp(e));
    this.listen(c, 'mouseleave', () => { this.mouse = null; this.hideTooltip(); });
    this.listen(c, 'dblclick', (e) => this.onDoubleClick(e));
    // Keys work without clicking the canvas first: listen on the window, skip typing in fields.
    this.listen(window, 'keydown', (e) => {
      const t = e.target;
      if (e.defaultPrevented || !this.root.isConnected || document.querySelector('[role="dialog"]')) return;  // a modal is open
      if (t && t !== this.canvas && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(t.tagName))) return;
      this.onKey(e);
    });
    this.listen(this.searchInput, 'keydown', (e) => this.onSearchKey(e));
    this.listen(this.searchInput, 'input', () => {
      clearTimeout(this.searchTimer);
      this.searchTimer = setTimeout(() => this.runSearch(this.searchInput.value.trim(), false), 400);
    });
  }

  canvasPoint(e) {
    const r = this.canvas.getBoundingClientRect();
    return { x: e.clientX - r.left, y: e.clientY - r.top };
  }

  onWheel(e) {
    const p = this.canvasPoint(e);
    const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? this.cssH : 1;
    if (e.ctrlKey || e.metaKey) {
      e.preventDefault();
      const dy = e.deltaY * unit;
      this.zoomAt(Math.exp(Math.max(-1, Math.min(1, dy / 300))), p.x);
    } else if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
      e.preventDefault();
      const d = (e.shiftKey && !e.deltaX ? e.deltaY : e.deltaX) * unit;
      this.panBy(d / this.plotW);
    }
    // Plain vertical wheel: the scroller scrolls the tracks natively.
  }

  onMouseDown(e) {
    if (e.button !== 0) return;
    const p = this.canvasPoint(e);
    this.canvas.focus({ preventScroll: true });
    if (p.y < RULER_H && p.x >= HEADER_W) {
      // A click on a flag's marker removes it.
      const k = this.flags.findIndex((f) => Math.abs(this.xOf(f) - p.x) <= 6);
      if (k >= 0) {
        this.flags.splice(k, 1);
        this.scheduleHash();
        this.draw();
        e.preventDefault();
        return;
      }
    }
    this.drag = { x: p.x, y: p.y, startX: p.x, startY: p.y, view: { ...this.view },
      scrollTop: this.scroller.scrollTop, moved: false, select: e.shiftKey && p.x >= HEADER_W };
    e.preventDefault();
  }

  onMouseMove(e) {
    const p = this.canvasPoint(e);
    const over = e.target === this.canvas;
    this.mouse = over ? p : null;
    const d = this.drag;
    if (d) {
      const dx = p.x - d.startX;
      const dy = p.y - d.startY;
      if (!d.moved && Math.abs(dx) + Math.abs(dy) > 3) {
        d.moved = true;
        this.canvas.classList.add('ks-tl-dragging');
      }
      if (d.moved && d.select) {
        const ta = this.tOf(Math.max(HEADER_W, d.startX));
        const tb = this.tOf(Math.max(HEADER_W, Math.min(this.cssW, p.x)));
        this.area = { start: Math.min(ta, tb), end: Math.max(ta, tb), tracks: this.tracksBetween(d.startY, p.y), pending: true };
        this.requestDraw();
        return;
      }
      if (d.moved) {
        const span = d.view.end - d.view.start;
        const dt = (-dx / this.plotW) * span;
        this.setView(d.view.start + dt, d.view.end + dt);
        this.scroller.scrollTop = d.scrollTop - dy;
        this.hideTooltip();
      }
      return;
    }
    if (over) this.showTooltip(p);
    else this.hideTooltip();
  }

  onMouseUp(e) {
    const d = this.drag;
    if (!d) return;
    this.drag = null;
    this.canvas.classList.remove('ks-tl-dragging');
    if (d.moved && d.select) {
      if (this.area && this.area.tracks.length && this.area.end > this.area.start) this.setArea(this.area);
      else this.clearArea();
      return;
    }
    if (d.moved) return;
    const p = this.canvasPoint(e);
    const group = this.groupAt(p.y);
    if (group) {
      if (!this.collapsedGroups.delete(group.name)) this.collapsedGroups.add(group.name);
      this.relayout();
      this.draw();
      return;
    }
    if (p.x < HEADER_W) {
      const lane = this.laneAt(p.y);
      const t = lane && this.trackById.get(lane.track);
      if (t && lane.row === 0 && p.x >= HEADER_W - PIN_W) {
        if (!this.pinned.delete(t.id)) this.pinned.add(t.id);
        this.relayout();
        this.draw();
        this.scheduleHash();
        return;
      }
      if (t && (t.rows | 0) > 1) {
        if (this.collapsed.has(t.id)) this.collapsed.delete(t.id);
        else this.collapsed.add(t.id);
        this.relayout();
        this.draw();
      }
      return;
    }
    const i = this.sliceAt(p.x, p.y);
    if (i < 0) {
      this.clearSelection();
      return;
    }
    const S = this.win.slices;
    if (S.id[i] >= 0) this.select(S.id[i], { reveal: false });
    else this.zoomTo(S.ts[i], S.dur[i]);  // a merged block: zoom in to separate it
  }

  onDoubleClick(e) {
    const p = this.canvasPoint(e);
    const i = this.sliceAt(p.x, p.y);
    if (i < 0) return;
    const S = this.win.slices;
    this.zoomTo(S.ts[i], S.dur[i]);
  }

  onKey(e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const x = this.mouse ? this.mouse.x : null;
    switch (e.key) {
      case 'w': case 'W': case 'ArrowUp': this.zoomAt(e.shiftKey ? 0.5 : 0.8, x); break;
      case 's': case 'S': case 'ArrowDown': this.zoomAt(e.shiftKey ? 2 : 1.25, x); break;
      case 'a': case 'A': case 'ArrowLeft': this.panBy(e.shiftKey ? -0.5 : -0.15); break;
      case 'd': case 'D': case 'ArrowRight': this.panBy(e.shiftKey ? 0.5 : 0.15); break;
      case 'f': case 'F':
        if (this.selected) this.zoomTo(this.selected.ts, this.selected.dur);
        else if (this.area) this.zoomTo(this.area.start, this.area.end - this.area.start);
        break;
      case 'm': case 'M': this.addFlag(x != null && x >= HEADER_W ? this.tOf(x) : (this.view.start + this.view.end) / 2); break;
      case '0': this.resetZoom(); break;
      case '?': this.toggleHelp(); break;
      case 'Escape':
        if (!this.help.hidden) this.toggleHelp(false);
        else {
          this.clearSelection();
          this.clearArea();
        }
        break;
      default: return;
    }
    e.preventDefault();
  }

  toggleHelp(show) {
    const visible = show ?? this.help.hidden;
    this.help.hidden = !visible;
  }

  showTooltip(p) {
    const counter = this.counterAt(p.x, p.y);
    if (counter) {
      this.tooltip.replaceChildren(h('div', { class: 'ks-tl-tt-name' }, counter.name),
        h('div', null, `${counter.value} at ${formatTime(counter.t)}`));
      this.placeTooltip(p);
      return;
    }
    const i = this.sliceAt(p.x, p.y);
    if (i < 0) {
      this.hideTooltip();
      return;
    }
    const S = this.win.slices;
    const name = this.win.names[S.name[i]];
    const count = S.count[i];
    const lines = [h('div', { class: 'ks-tl-tt-name' }, count > 1 ? `${count.toLocaleString('en-US')} events` : name)];
    if (count > 1) lines.push(h('div', null, `longest: ${name}`));
    lines.push(h('div', null, `start ${formatTime(S.ts[i])} \u00b7 ${count > 1 ? 'span' : 'duration'} ${formatDuration(S.dur[i])}`));
    if (count > 1) lines.push(h('div', { class: 'ks-tl-tt-hint' }, 'click to zoom in'));
    this.tooltip.replaceChildren(...lines);
    this.placeTooltip(p);
  }

  placeTooltip(p) {
    this.tooltip.hidden = false;
    const tw = this.tooltip.offsetWidth;
    const th = this.tooltip.offsetHeight;
    const left = p.x + 14 + tw > this.cssW ? p.x - tw - 10 : p.x + 14;
    const top = p.y + 16 + th > this.cssH ? p.y - th - 8 : p.y + 16;
    this.tooltip.style.left = `${Math.max(0, left)}px`;
    this.tooltip.style.top = `${Math.max(0, top)}px`;
  }

  /// The counter value under (x, y): the last point at or before the mouse's time.
  counterAt(x, y) {
    if (x < HEADER_W || y < RULER_H || y >= this.countersBottom) return null;
    const c = this.counters[Math.floor((y - RULER_H) / COUNTER_H)];
    if (!c) return null;
    const t = this.tOf(x);
    const pts = c.points;
    let lo = 0;
    let hi = pts.length - 1;
    if (!pts.length || t < pts[0][0]) return null;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (pts[mid][0] <= t) lo = mid;
      else hi = mid - 1;
    }
    const v = pts[lo][1];
    const fraction = /utilization|efficiency|occupancy/i.test(c.name) && c.max <= 1;
    const value = c.unit === 'bytes' ? formatBytes(v) : fraction ? `${(v * 100).toFixed(1)} %` : String(v);
    return { name: c.name, t: pts[lo][0], value };
  }

  hideTooltip() {
    this.tooltip.hidden = true;
  }

  // ---- selection and details -------------------------------------------------------------------

  async select(id, { reveal }) {
    const token = (this.selectToken = (this.selectToken || 0) + 1);
    let ev;
    try {
      ev = await this.ctx.api('timeline/event', this.allFlows ? { id, subtree: 1 } : { id });
    } catch (err) {
      if (token === this.selectToken && this.alive) this.setStatusError(`Event ${id}: ${err.message}`);
      return;
    }
    if (token !== this.selectToken || !this.alive) return;
    this.selected = ev;
    this.hideTooltip();
    this.renderDetails();
    if (reveal) this.reveal(ev);
    this.scheduleHash();
    this.draw();
  }

  clearSelection() {
    if (!this.selected) return;
    this.selectToken = (this.selectToken || 0) + 1;
    this.selected = null;
    this.details.hidden = true;
    this.scheduleHash();
    this.draw();
  }

  renderDetails() {
    const e = this.selected;
    const track = this.trackById.get(e.track);
    const kv = (k, v) => h('tr', null, h('th', null, k), h('td', null, v));
    const summary = h('table', { class: 'ks-tl-kv' },
      kv('Name', e.name),
      kv('Category', e.category || '\u2014'),
      kv('Start', formatTime(e.ts)),
      kv('Duration', formatDuration(e.dur)),
      kv('Track', track ? track.name : String(e.track)),
      kv('Id', String(e.id)));
    const args = h('table', { class: 'ks-tl-kv ks-tl-args' });
    const entries = Object.entries(e.args || {});
    for (const [k, v] of entries) {
      const text = typeof v === 'string' ? v : JSON.stringify(v);
      const cell = k === 'Call stack' && typeof v === 'string'
        ? h('pre', null, v.split(';').join('\n')) : text;
      args.append(kv(k, cell));
    }
    const allFlows = h('input', { type: 'checkbox', class: 'ks-tl-allflows' });
    allFlows.checked = !!this.allFlows;
    allFlows.addEventListener('change', () => {
      this.allFlows = allFlows.checked;
      this.select(e.id, { reveal: false });
    });
    const flowsBox = h('div', { class: 'ks-tl-flows' },
      h('label', { class: 'ks-tl-muted', title: 'Also the flows of every slice inside this one on its track' }, allFlows,
        ' Show all flows of its subtree'));
    const flows = Array.isArray(e.flows) ? e.flows : [];
    if (flows.length) {
      const list = h('table', { class: 'ks-tl-flowlist' },
        h('tr', null, h('th', null, 'Relation'), h('th', null, 'Name'), h('th', null, 'Start'), h('th', null, 'Duration')));
      for (const f of flows) {
        const row = h('tr', { class: 'ks-tl-link', title: 'Select and show this event', tabindex: '0' },
          h('td', null, f.from && f.from.id !== e.id ? `${f.from.name}: ${f.relation}` : f.relation), h('td', null, f.name), h('td', { class: 'num' }, formatTime(f.ts)),
          h('td', { class: 'num' }, formatDuration(f.dur)));
        const go = () => {
          this.revealPair(e, f);
          this.select(f.id, { reveal: false });
        };
        row.addEventListener('click', go);
        row.addEventListener('keydown', (k) => { if (k.key === 'Enter') go(); });
        list.append(row);
      }
      flowsBox.append(h('div', { class: 'ks-tl-subtitle' }, `Flows (${flows.length}${e.flows_truncated ? ', the first 1000' : ''})`), list);
    }
    const close = h('button', { class: 'ks-tl-btn ks-tl-close', title: 'Clear the selection (Esc)',
      onclick: () => this.clearSelection() }, '\u00d7');
    this.details.replaceChildren(
      h('div', { class: 'ks-tl-details-head' }, h('span', { class: 'ks-tl-title' }, e.name), close),
      h('div', { class: 'ks-tl-details-body' },
        h('div', null, h('div', { class: 'ks-tl-subtitle' }, 'Slice'), summary, flowsBox),
        h('div', null, h('div', { class: 'ks-tl-subtitle' }, `Args (${entries.length})`),
          entries.length ? args : h('div', { class: 'ks-tl-muted' }, 'none'))));
    this.details.hidden = false;
  }

  // ---- flags and area selection ---------------------------------------------------------------

  addFlag(t) {
    this.flags.push(t);
    this.scheduleHash();
    this.draw();
  }

  /// Selects an area and asks the server for its summary (exact, from every slice).
  async setArea(area) {
    this.area = { start: area.start, end: area.end, tracks: [...area.tracks] };
    this.scheduleHash();
    this.draw();
    const token = (this.areaToken = (this.areaToken || 0) + 1);
    this.areaBox.hidden = false;
    this.areaBox.replaceChildren(h('div', { class: 'ks-tl-muted' }, 'Summarising the area\u2026'));
    let sum;
    try {
      sum = await this.ctx.api('timeline/summary', { start: fmtParam(this.area.start), end: fmtParam(this.area.end),
        tracks: this.area.tracks.join(',') });
    } catch (err) {
      if (token === this.areaToken && this.alive) this.areaBox.replaceChildren(h('div', { class: 'ks-tl-muted' }, `Could not summarise the area: ${err.message}`));
      return;
    }
    if (token !== this.areaToken || !this.alive) return;
    this.renderArea(sum);
  }

  clearArea() {
    if (!this.area) return;
    this.areaToken = (this.areaToken || 0) + 1;
    this.area = null;
    this.areaBox.hidden = true;
    this.areaBox.replaceChildren();
    this.scheduleHash();
    this.draw();
  }

  renderArea(sum) {
    const range = sum.end - sum.start;
    const names = this.area.tracks.map((id) => (this.trackById.get(id) || {}).name).filter(Boolean);
    const close = h('button', { class: 'ks-tl-btn ks-tl-close', title: 'Clear the area (Esc)', onclick: () => this.clearArea() }, '\u00d7');
    const title = `Area: ${formatTime(sum.start)} \u2013 ${formatTime(sum.end)} (${formatDuration(range)}) on ${names.length} track${names.length === 1 ? '' : 's'}`;
    const head = h('div', { class: 'ks-tl-details-head' }, h('span', { class: 'ks-tl-title' }, title), close);
    const tracksLine = h('div', { class: 'ks-tl-muted ks-tl-area-tracks', title: names.join('\n') }, names.join(' \u00b7 '));
    const gpus = h('div', { class: 'ks-tl-area-gpus' });
    for (const gp of sum.gpus || []) {
      gpus.append(h('div', { class: 'ks-tl-gpu', 'data-device': String(gp.device) },
        h('b', null, `GPU ${gp.device}`), ` busy ${formatDuration(gp.busy)} (${gp.busy_percent.toFixed(1)} %) \u00b7 idle ${formatDuration(gp.idle)}`,
        h('span', { class: 'ks-tl-gpubar' }, h('span', { style: `width:${Math.max(0, Math.min(100, gp.busy_percent)).toFixed(2)}%` }))));
    }
    const table = h('table', { class: 'ks-tl-flowlist ks-tl-summary' },
      h('tr', null, ...['Name', 'Count', 'Total', 'Self', 'Avg', 'Min', 'Max', '% of area'].map((c) => h('th', null, c))));
    const rows = (sum.rows || []).slice(0, 200);
    for (const r of rows) {
      table.append(h('tr', { 'data-name': r.name },
        h('td', { title: r.name }, r.name), h('td', { class: 'num' }, r.count.toLocaleString('en-US')),
        h('td', { class: 'num' }, formatDuration(r.total)), h('td', { class: 'num' }, formatDuration(r.self)),
        h('td', { class: 'num' }, formatDuration(r.avg)), h('td', { class: 'num' }, formatDuration(r.min)),
        h('td', { class: 'num' }, formatDuration(r.max)), h('td', { class: 'num' }, `${r.percent.toFixed(1)} %`)));
    }
    const more = sum.names > rows.length ? h('div', { class: 'ks-tl-muted' }, `${rows.length} of ${sum.names} names (the longest in total)`) : null;
    const left = h('div', null, h('div', { class: 'ks-tl-subtitle' }, `Slices by name (${sum.slices.toLocaleString('en-US')} slices; times inside the area)`),
      table, more);
    const right = h('div', null, h('div', { class: 'ks-tl-subtitle' }, 'GPU'),
      (sum.gpus || []).length ? gpus : h('div', { class: 'ks-tl-muted' }, 'no GPU track in the area'),
      h('div', { class: 'ks-tl-subtitle' }, 'Flame graph'), this.flameGraph(sum.flame));
    this.areaBox.replaceChildren(head, tracksLine, h('div', { class: 'ks-tl-details-body' }, left, right));
    this.areaBox.hidden = false;
    this.areaBox.dataset.slices = String(sum.slices);
  }

  /// An icicle of the area's call paths (roots on top, widths proportional to time inside the area).
  flameGraph(f) {
    const box = h('div', { class: 'ks-tl-flame' });
    if (!f || !Array.isArray(f.parent) || !f.parent.length) {
      box.append(h('div', { class: 'ks-tl-muted' }, 'no slices'));
      return box;
    }
    const n = f.parent.length;
    const kids = Array.from({ length: n }, () => []);
    const roots = [];
    for (let i = 0; i < n; i++) (f.parent[i] < 0 ? roots : kids[f.parent[i]]).push(i);
    const byTotal = (a, b) => f.total[b] - f.total[a];
    const sumRoots = roots.reduce((acc, i) => acc + f.total[i], 0) || 1;
    const W = 100;  // percent
    const ROW = 18;
    let depthMax = 0;
    const place = (list, x0, depth) => {
      let x = x0;
      for (const i of list.sort(byTotal)) {
        const w = (f.total[i] / sumRoots) * W;
        if (w < 0.15 || depth > 40) break;
        depthMax = Math.max(depthMax, depth);
        const name = f.names[f.name[i]];
        const cell = h('div', { class: 'ks-tl-flame-cell',
          style: `left:${x}%;width:${w}%;top:${depth * ROW}px;background:${sliceColor.palette[sliceColor(name)]}`,
          title: `${name}\ntotal ${formatDuration(f.total[i])} \u00b7 self ${formatDuration(f.self[i])} \u00b7 ${f.count[i]} slice${f.count[i] === 1 ? '' : 's'}` },
        w > 3 ? name : '');
        box.append(cell);
        place(kids[i], x, depth + 1);
        x += w;
      }
    };
    place(roots, 0, 0);
    box.style.height = `${(depthMax + 1) * ROW + 2}px`;
    if (!f.truncated) return box;
    return h('div', null, box, h('div', { class: 'ks-tl-muted' }, 'large area: the flame graph shows its first 20 000 call paths'));
  }

  // ---- search ----------------------------------------------------------------------------------

  onSearchKey(e) {
    if (e.key === 'Enter') {
      e.preventDefault();
      const q = this.searchInput.value.trim();
      if (q !== this.search.q) this.runSearch(q, true);
      else this.stepResult(e.shiftKey ? -1 : 1);
    } else if (e.key === 'ArrowDown') {
      e.preventDefault();
      this.stepResult(1);
    } else if (e.key === 'ArrowUp') {
      e.preventDefault();
      this.stepResult(-1);
    } else if (e.key === 'Escape') {
      this.searchInput.value = '';
      this.runSearch('', false);
    }
  }

  async runSearch(q, jump) {
    clearTimeout(this.searchTimer);
    const token = (this.searchToken = (this.searchToken || 0) + 1);
    if (!q) {
      this.search = { q: '', results: [], total: 0, index: -1, ids: new Set() };
      this.renderResults();
      this.draw();
      return;
    }
    this.searchInfo.textContent = 'searching\u2026';
    let ans;
    try {
      ans = await this.ctx.api('timeline/search', { q, limit: 1000 });
    } catch (err) {
      if (token === this.searchToken && this.alive) this.searchInfo.textContent = err.message;
      return;
    }
    if (token !== this.searchToken || !this.alive) return;
    const results = Array.isArray(ans.results) ? ans.results : [];
    this.search = { q, results, total: ans.total ?? results.length, index: -1, ids: new Set(results.map((r) => r.id)) };
    this.renderResults();
    if (jump && results.length) this.stepResult(1);
    else this.draw();
  }

  stepResult(delta) {
    const s = this.search;
    if (!s.results.length) {
      const q = this.searchInput.value.trim();
      if (q && q !== s.q) this.runSearch(q, true);
      return;
    }
    s.index = s.index < 0 ? (delta > 0 ? 0 : s.results.length - 1)
      : (s.index + delta + s.results.length) % s.results.length;
    this.showResult(s.index);
  }

  showResult(index) {
    const s = this.search;
    s.index = index;
    const r = s.results[index];
    this.updateSearchInfo();
    for (const row of this.resultsBox.querySelectorAll('.ks-tl-active')) row.classList.remove('ks-tl-active');
    const row = this.resultsBox.querySelector(`[data-index="${index}"]`);
    if (row) {
      row.classList.add('ks-tl-active');
      row.scrollIntoView({ block: 'nearest' });
    }
    this.reveal(r);
    this.select(r.id, { reveal: false });
  }

  updateSearchInfo() {
    const s = this.search;
    if (!s.q) {
      this.searchInfo.textContent = '';
      return;
    }
    const shown = s.results.length < s.total ? ` (first ${s.results.length.toLocaleString('en-US')})` : '';
    this.searchInfo.textContent = s.total === 0 ? 'no match'
      : `${s.index >= 0 ? `${s.index + 1} / ` : ''}${s.total.toLocaleString('en-US')} matches${shown}`;
  }

  renderResults() {
    const s = this.search;
    this.updateSearchInfo();
    if (!s.q) {
      this.resultsBox.hidden = true;
      this.resultsBox.replaceChildren();
      return;
    }
    const table = h('table', { class: 'ks-tl-resultlist' },
      h('tr', null, h('th', null, 'Name'), h('th', null, 'Start'), h('th', null, 'Duration')));
    s.results.forEach((r, k) => {
      const row = h('tr', { class: 'ks-tl-link', 'data-index': String(k) },
        h('td', { title: r.name }, r.name), h('td', { class: 'num' }, formatTime(r.ts)),
        h('td', { class: 'num' }, formatDuration(r.dur)));
      row.addEventListener('click', () => this.showResult(k));
      table.append(row);
    });
    const close = h('button', { class: 'ks-tl-btn ks-tl-close', title: 'Close the results',
      onclick: () => { this.searchInput.value = ''; this.runSearch('', false); } }, '\u00d7');
    this.resultsBox.replaceChildren(
      h('div', { class: 'ks-tl-details-head' }, h('span', { class: 'ks-tl-title' }, `\u201c${s.q}\u201d`), close),
      s.results.length ? table : h('div', { class: 'ks-tl-muted' }, 'No slice name contains this text.'));
    this.resultsBox.hidden = false;
  }
}

/// Adds per-name color indices and empty per-color buckets to a window answer.
function prepareWindow(win) {
  const names = Array.isArray(win.names) ? win.names : [];
  const S = win.slices || {};
  for (const k of ['track', 'row', 'ts', 'dur', 'name', 'id', 'count']) if (!Array.isArray(S[k])) S[k] = [];
  const { palette } = sliceColor;
  const color = names.map((n) => sliceColor(n));
  return { ...win, names, slices: S, color, palette, buckets: palette.map(() => []) };
}

/// Text clipped to `maxW` pixels with an ellipsis ('' when not even one character fits).
function fitText(g, text, maxW, charW) {
  if (maxW <= charW) return '';
  if (text.length * charW * 0.8 <= maxW && g.measureText(text).width <= maxW) return text;
  let n = Math.min(text.length - 1, Math.floor(maxW / charW) - 1);
  while (n > 0) {
    const s = `${text.slice(0, n)}\u2026`;
    if (g.measureText(s).width <= maxW) return s;
    n = Math.floor(n * 0.85);
  }
  return '';
}

/// Bytes in the nicest binary unit: 512 B, 3.5 KiB, 1.25 GiB.
function formatBytes(b) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = b;
  let k = 0;
  while (Math.abs(v) >= 1024 && k < units.length - 1) {
    v /= 1024;
    k++;
  }
  return `${k ? v.toFixed(2) : String(v)} ${units[k]}`;
}

/// A number for a URL parameter: at most 3 decimals (ns), no exponent.
function fmtParam(v) {
  return String(Math.round(v * 1000) / 1000);
}
