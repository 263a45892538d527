// SPDX-License-Identifier: BSD-3-Clause
// DOM helpers shared by the views and components.

const SVG_NS = 'http://www.w3.org/2000/svg';

/// Creates an element with an optional class name and text.
export function h(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/// Creates an SVG element with attributes.
export function svg(tag, attrs = {}) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

/// A titled card: returns {card, head, body}; `extraClass` is added to the card.
export function titledCard(title, extraClass) {
  const c = h('section', `kt-card ${extraClass || ''}`.trim());
  const head = h('div', 'kt-card-title ks-head');
  head.appendChild(h('span', 'ks-title', title));
  const body = h('div', 'ks-body');
  c.append(head, body);
  return { card: c, head, body };
}
