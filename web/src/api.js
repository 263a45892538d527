// SPDX-License-Identifier: BSD-3-Clause
// The web app's only path to the server: GET ./api/<route>?params, JSON in, Error out.
// URLs are relative so the app works under any --path_prefix or reverse proxy.

/// The rule sets the server knows (docs/kinetoscope-rules.md): kinetoscope's own, and
/// torch-tb-profiler 0.4.3's ("plugin").
export const RULE_SETS = ['kinetoscope', 'plugin'];

/// The rule set every analysis request carries as `rules=<set>` (null: none, the server's
/// default). Set here once by the app shell (setRules), so no view can forget it.
let currentRules = null;
/// Routes that are about the logdir, not an analysis: no `rules` parameter.
const RULELESS_ROUTES = new Set(['status', 'runs']);

/// Sets the rule set of every later request ('kinetoscope' or 'plugin'; anything else: none).
export function setRules(rules) {
  currentRules = RULE_SETS.includes(rules) ? rules : null;
}

/// The rule set requests carry now, or null.
export function getRules() {
  return currentRules;
}

/// Builds the relative URL of an API route; null/undefined parameters are left out. Analysis
/// routes get `rules=<current>` (setRules) unless params name `rules` themselves (null: none).
export function apiUrl(route, params = {}) {
  const q = new URLSearchParams();
  const all = currentRules && !RULELESS_ROUTES.has(route) && !Object.prototype.hasOwnProperty.call(params, 'rules')
    ? { ...params, rules: currentRules } : params;
  for (const [k, v] of Object.entries(all)) {
    if (v !== null && v !== undefined) q.append(k, String(v));
  }
  const qs = q.toString();
  return `./api/${route}${qs ? `?${qs}` : ''}`;
}

/// Requests waiting for the server to load a trace's full model (answered 503 while it loads,
/// see http-api.md): message per pending request, announced with a 'kt-waiting' window event
/// ({detail: message or null}) so the page can say why a view is slow.
const waiting = new Map();
let waitingIds = 0;
function announceWaiting() {
  const messages = [...waiting.values()];
  if (typeof window !== 'undefined' && window.dispatchEvent) {
    window.dispatchEvent(new CustomEvent('kt-waiting', { detail: messages.length ? messages[messages.length - 1] : null }));
  }
}
const sleep = (ms, signal) => new Promise((resolve, reject) => {
  const t = setTimeout(resolve, ms);
  if (signal) signal.addEventListener('abort', () => { clearTimeout(t); reject(new DOMException('Aborted', 'AbortError')); }, { once: true });
});

/// GETs an API route and returns its parsed JSON. Rejects with Error(message) where message is
/// the server's {"error": ...} text on 4xx/5xx (or the HTTP status when there is none), and
/// with a network error message when the server cannot be reached. A 503 (the trace's model is
/// being loaded again after the server let it go to stay within --max_memory) is asked again
/// every second while the page says so.
export async function apiGet(route, params = {}, { signal } = {}) {
  const id = ++waitingIds;
  try {
    for (;;) {
      try {
        return await apiGetOnce(route, params, { signal });
      } catch (e) {
        if (!e || e.status !== 503) throw e;
        waiting.set(id, e.message);
        announceWaiting();
        await sleep(1000, signal);
      }
    }
  } finally {
    if (waiting.delete(id)) announceWaiting();
  }
}

async function apiGetOnce(route, params, { signal }) {
  let res;
  try {
    res = await fetch(apiUrl(route, params), { signal, headers: { Accept: 'application/json' } });
  } catch (e) {
    if (e && e.name === 'AbortError') throw e;
    throw new Error(`Cannot reach the kinetoscope server (${e && e.message ? e.message : e})`);
  }
  const text = await res.text();
  let body = null;
  if (text) {
    try {
      body = JSON.parse(text);
    } catch {
      if (res.ok) throw new Error(`/api/${route}: the server answered invalid JSON`);
    }
  }
  if (!res.ok) {
    const msg = body && typeof body.error === 'string' ? body.error : `HTTP ${res.status} ${res.statusText}`;
    const err = new Error(msg);
    err.status = res.status;
    throw err;
  }
  return body;
}

/// Returns ctx.api for a selection: api(route, params) adds run, worker and span (when set)
/// to the parameters; explicit params win.
export function boundApi(selection) {
  return (route, params = {}) => {
    const base = {};
    for (const k of ['run', 'worker', 'span']) {
      if (selection[k] !== null && selection[k] !== undefined && selection[k] !== '') base[k] = selection[k];
    }
    return apiGet(route, { ...base, ...params });
  };
}
