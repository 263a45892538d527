// SPDX-License-Identifier: BSD-3-Clause
// Human units for every view: durations (input in microseconds) as ns/µs/ms/s and sizes (input
// in bytes) as B/KB/MB/GB (1024-based, as PyTorch's memory tools), both picked by magnitude, with
// thousands separators. One spelling: "µs".

const NUM = (v, digits) => v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 });

/// Three significant digits at most for fractional values (1.23, 12.3, 123), none for integers
/// of 1000 or more (which get thousands separators).
function short(v) {
  const a = Math.abs(v);
  if (a >= 100) return NUM(Math.round(v), 0);
  if (a >= 10) return NUM(v, 1);
  return NUM(v, 2);
}

/// A duration given in µs: "850 ns", "12.3 µs", "1.23 ms", "4.56 s" (seconds from 1,000 ms on).
export function formatDuration(us) {
  if (typeof us !== 'number' || !Number.isFinite(us)) return us === null || us === undefined ? '' : String(us);
  const a = Math.abs(us);
  if (a === 0) return '0 µs';
  if (a < 1) return `${short(us * 1000)} ns`;
  if (a < 1000) return `${short(us)} µs`;
  if (a < 1e6) return `${short(us / 1000)} ms`;
  return `${short(us / 1e6)} s`;
}

const BYTE_UNITS = ['B', 'KB', 'MB', 'GB', 'TB'];

/// A size given in bytes: "512 B", "1.5 KB", "45.6 MB", "1.07 GB" (powers of 1024).
export function formatBytes(bytes) {
  if (typeof bytes !== 'number' || !Number.isFinite(bytes)) return bytes === null || bytes === undefined ? '' : String(bytes);
  let v = bytes;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < BYTE_UNITS.length - 1) { v /= 1024; i++; }
  return i === 0 ? `${NUM(v, 0)} B` : `${short(v)} ${BYTE_UNITS[i]}`;
}

/// Scale factors of the unit suffixes the server puts in column names ("Size (KB)",
/// "Duration (us)"): to bytes and to µs.
const SIZE_FACTOR = { B: 1, KB: 1024, MB: 1024 ** 2, GB: 1024 ** 3 };
const TIME_FACTOR = { ns: 0.001, us: 1, 'µs': 1, ms: 1000, s: 1e6 };

/// For a column title ending in a unit in parentheses, {title without the unit, format(v)}
/// showing the value in a unit picked by magnitude; null when the title has no known unit.
export function unitColumn(title) {
  const m = /^(.*?)\s*\((B|KB|MB|GB|ns|us|µs|ms|s)\)$/.exec(String(title || ''));
  if (!m) return null;
  const [, name, unit] = m;
  if (unit in SIZE_FACTOR) {
    const f = SIZE_FACTOR[unit];
    return { title: name, format: (v) => (typeof v === 'number' ? formatBytes(v * f) : v ?? '') };
  }
  const f = TIME_FACTOR[unit];
  return { title: name, format: (v) => (typeof v === 'number' ? formatDuration(v * f) : v ?? '') };
}
