// The fenced store: a register simulated in this page that accepts a write only with a
// fencing token higher than every token it accepted before, as real storage should.

import { $, h } from './dom.js';
import { t as tr } from './i18n.js';
import { store } from './state.js';
import { log } from './timeline.js';

/** Writes as client `t` with `token`, or with the newest token it holds. */
export function writeStore(t, token) {
  if (token === undefined) {
    const all = [...t.tokens.values()].map((x) => BigInt(x));
    if (!all.length) { log(tr('log.noToken', { name: t.name }), 'bad'); return false; }
    token = all.reduce((a, b) => (a > b ? a : b)).toString();
  }
  const ok = BigInt(token) > store.lastToken;
  if (ok) store.lastToken = BigInt(token);
  store.writes.unshift({ who: t.name, token, ok });
  log(tr('log.storeWrite', { name: t.name, token, ok, last: store.lastToken }), ok ? 'local' : 'bad');
  renderStore();
  return ok;
}

export function renderStore() {
  const box = $('#store');
  box.replaceChildren(h('div', {}, tr('store.highest'), h('span', { class: 'token', 'data-testid': 'store-token' }, store.lastToken.toString())));
  for (const w of store.writes.slice(0, 8)) {
    box.append(h('div', { class: `write ${w.ok ? 'ok' : 'rejected'}` }, tr('store.row', w)));
  }
}
