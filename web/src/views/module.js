// SPDX-License-Identifier: BSD-3-Clause
// Placeholder: replaced by the engineer who owns this view.
export async function render(el, ctx) {
  el.textContent = 'module: not built yet';
}
