// SPDX-License-Identifier: BSD-3-Clause
// Placeholder: replaced by the engineer who owns this view.
export async function render(el, ctx) {
  el.textContent = 'scalars: not built yet';
}
/// Small charts of the run's TensorBoard scalars (/api/scalars) for the shell's side panel.
export async function renderRunScalars(el, ctx) {
  el.textContent = '';
}
