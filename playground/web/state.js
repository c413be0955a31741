// What the page knows: its simulated clients, the server's lock table and last deadlock,
// and the fenced store. Modules that change it call `changed()`; the page redraws once per
// call (app.js registers the drawing), so no module needs to import the rendering.

/** My simulated clients, by transaction id (a decimal string: ids are 64-bit). */
export const txns = new Map();
/** Every transaction name seen in the lock table, for other clients' locks. */
export const names = new Map();
/** The server's view: lock table (from polls), last deadlock and last event sequence (from events). */
export const view = { lockTable: [], lastDeadlock: null, lastSeq: null };
/** The fenced store simulated in this page. */
export const store = { lastToken: 0n, writes: [] };

export function nameOf(id) {
  const t = txns.get(id);
  return (t && t.name) || names.get(id) || `#${id}`;
}

const listeners = [];

export function onChange(fn) {
  listeners.push(fn);
}

export function changed() {
  for (const fn of listeners) fn();
}
