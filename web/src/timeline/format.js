// SPDX-License-Identifier: BSD-3-Clause
// Time formatting, ruler steps and slice colors of the trace timeline. Times are µs.

/// A duration in the nicest unit: 850 ns, 12.3 µs, 4.56 ms, 1.234 s.
export function formatDuration(us) {
  if (!Number.isFinite(us)) return '\u2014';
  const a = Math.abs(us);
  if (a >= 1e6) return `${trim(us / 1e6, 3)} s`;
  if (a >= 1e3) return `${trim(us / 1e3, 3)} ms`;
  if (a >= 1 || a === 0) return `${trim(us, 3)} \u00b5s`;
  return `${trim(us * 1e3, 1)} ns`;
}

/// A time relative to the trace start. With `unit` (1, 1e3, 1e6 µs) and `decimals` the ruler's
/// format; without them the duration format.
export function formatTime(us, unit, decimals) {
  if (unit == null) return formatDuration(us);
  const suffix = unit === 1e6 ? 's' : unit === 1e3 ? 'ms' : '\u00b5s';
  return `${(us / unit).toFixed(decimals)} ${suffix}`;
}

/// The ruler step (1, 2 or 5 × 10^k µs) for about `ticks` ticks across `span` µs, with the unit
/// (by the largest time shown, `maxAbs`, so that deep zooms read 87.25 ms rather than 87250 µs)
/// and the number of decimals its labels need.
export function niceStep(span, ticks, maxAbs = span) {
  const raw = span / Math.max(1, ticks);
  const p = 10 ** Math.floor(Math.log10(raw));
  const m = raw / p;
  const step = (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  const unit = maxAbs >= 1e6 ? 1e6 : maxAbs >= 1e3 ? 1e3 : 1;
  const decimals = Math.min(9, Math.max(0, Math.ceil(-Math.log10(step / unit) - 1e-9)));
  return { step, unit, decimals };
}

function trim(v, digits) {
  return String(Number(v.toFixed(digits)));
}

const PALETTE = [
  '#8fb8e8', '#f2b38a', '#9fd39a', '#e9a3a6', '#c2aee0', '#b9d98a', '#f3d67a', '#8fd3cf',
  '#e6b3d6', '#a9c4a0', '#d9c19f', '#9ab0dc', '#f0a98f', '#b8e0b0', '#d0a9c8', '#a5d4e6',
  '#e2cf8c', '#c7b9a5', '#a4c8c0', '#e3b7a0',
];

/// Index in `sliceColor.palette` of a name's color: a stable hash (FNV-1a) of the name, so the
/// same operator or kernel has the same color in every window and every run.
export function sliceColor(name) {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) {
    h ^= name.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % PALETTE.length;
}
sliceColor.palette = PALETTE;
