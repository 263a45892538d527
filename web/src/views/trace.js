// SPDX-License-Identifier: BSD-3-Clause
// The Trace view: our own canvas timeline over the windowed timeline API (http-api.md "Trace
// timeline"), replacing the plugin's embedded Catapult viewer (the plugin's
// fe/src/components/TraceView.tsx). The browser asks only for the visible window; see
// timeline/timeline.js.
import { createTimeline } from '../timeline/timeline.js';

/// Renders the timeline of ctx.run/worker/span into `el`; URL keys: t0, t1 (visible window, µs
/// relative to the trace start) and event (the selected event id). Returns the cleanup function.
export async function render(el, ctx) {
  const timeline = createTimeline(el, ctx);
  return () => timeline.destroy();
}
