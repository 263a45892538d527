// SPDX-License-Identifier: BSD-3-Clause
// Small form controls shared by the views (Top-N radio).
import { h } from './dom.js';

export { h };

let radioGroup = 0;

/// The plugin's Top-N control: radio "All" / "Top ... to show" + a number box (integer >= 1;
/// an invalid number is marked and ignored). Default = min(max, 10). `value` restores a saved
/// choice ('all' or a number). Returns {element, value()}; value() is 0 for "All".
export function topNControl({ allLabel, topLabel, max, value, onChange }) {
  const name = `kt-topn-${++radioGroup}`;
  const root = h('div', 'kt-controls kt-topn');
  const all = h('input');
  all.type = 'radio';
  all.name = name;
  const top = h('input');
  top.type = 'radio';
  top.name = name;
  const num = h('input');
  num.type = 'number';
  num.min = '1';
  num.step = '1';
  const def = Math.max(1, Math.min(max || 0, 10));
  const saved = Number(value);
  num.value = String(Number.isInteger(saved) && saved >= 1 ? saved : def);
  if (value === 'all') all.checked = true; else top.checked = true;
  const err = h('span', 'kt-error kt-small');
  const la = h('label');
  la.append(all, allLabel);
  const lt = h('label');
  lt.append(top, topLabel);
  root.append(la, lt, num, err);
  const current = () => {
    if (all.checked) return 0;
    const n = Number(num.value);
    return Number.isInteger(n) && n >= 1 ? n : -1;
  };
  const fire = () => {
    const n = current();
    num.disabled = all.checked;
    num.classList.toggle('kt-invalid', n < 0);
    err.textContent = n < 0 ? 'Enter an integer of 1 or more' : '';
    if (n >= 0 && onChange) onChange(n);
  };
  num.disabled = all.checked;
  all.addEventListener('change', fire);
  top.addEventListener('change', fire);
  num.addEventListener('input', () => { top.checked = true; fire(); });
  return { element: root, value: () => Math.max(0, current()) };
}

/// The "Group By" select of the Operator and Kernel views: `groups` = [{value, label}].
/// Returns {label, select}; the caller listens to the select's change event.
export function groupBySelect(groups, value) {
  const select = h('select');
  for (const g of groups) {
    const o = h('option', '', g.label);
    o.value = g.value;
    select.append(o);
  }
  select.value = value;
  const label = h('label', '', 'Group By');
  label.append(select);
  return { label, select };
}
