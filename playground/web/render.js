// The clients and locks panels, and `render()`, which redraws everything that follows the
// state (the wait-for graph and deadlock line included).

import { $, h } from './dom.js';
import { renderDeadlock, renderGraph } from './graph.js';
import { lang, t as tr } from './i18n.js';
import { nameOf, txns, view } from './state.js';
import { writeStore } from './store.js';
import { log } from './timeline.js';
import { acquire, end, release, startHeartbeat } from './transactions.js';

const NS_DEFAULT = 'playground';
/** X for exclusive, S for shared, P for a semaphore permit. */
const letter = (mode) => ({ EXCLUSIVE: 'X', SHARED_READ: 'S', SEMAPHORE: 'P' })[mode] || '?';

let txnsSig = '';
function renderTxns() {
  const { lockTable } = view;
  const box = $('#txns');
  // Rebuild the cards only when something shown changed, so a half-typed key survives polls.
  const sig = JSON.stringify([lang(), ...[...txns.values()].map((t) => [t.id, t.state, t.victim, t.heartbeat, t.pending, t.reason,
    lockTable.flatMap((k) => k.holders.filter((hd) => hd.transaction_id === t.id).map((hd) => [k.namespace, k.key, hd.mode, hd.fencing_token]))])]);
  if (sig === txnsSig) return;
  txnsSig = sig;
  box.replaceChildren();
  for (const t of [...txns.values()].reverse()) {
    const held = [];
    for (const k of lockTable) for (const hd of k.holders) if (hd.transaction_id === t.id) held.push({ k, hd });
    const card = h('div', { class: `txn ${t.victim ? 'victim' : ''} ${t.state !== 'ACTIVE' ? 'ended' : ''}`,
      dataset: { txnId: t.id, state: t.state, name: t.name, testid: `txn-${t.name}` } },
      h('header', {},
        h('span', { class: 'name' }, t.name),
        h('span', { class: 'muted' }, tr('txn.header', { id: t.id, priority: t.priority })),
        h('span', { class: `badge ${t.state}`, 'data-testid': 'state' }, tr(`state.${t.state}`)),
        t.victim ? h('span', { class: 'badge victim', 'data-testid': 'victim' }, tr('txn.victim')) : null));
    if (t.state === 'ACTIVE') {
      const left = Math.max(0, t.leaseUntil - Date.now());
      const bar = h('div', { class: `lease ${left < t.leaseMs / 3 ? 'low' : ''}` }, h('div', { style: `width:${(100 * left) / t.leaseMs}%` }));
      card.append(bar, h('div', { class: 'row' },
        h('span', { class: 'muted lease-left' }, leaseLeft(left)),
        h('label', {}, (() => {
          const cb = h('input', { type: 'checkbox', 'data-testid': 'heartbeat', onchange: (ev) => {
            t.heartbeat = ev.target.checked;
            log(tr('log.heartbeats', { name: t.name, on: t.heartbeat }));
            startHeartbeat(t);
          } });
          cb.checked = t.heartbeat;
          return cb;
        })(), tr('txn.heartbeats'))));
    } else if (t.reason) {
      card.append(h('div', { class: 'muted' }, t.reason));
    }
    const heldRow = h('div', { class: 'held' });
    for (const { k, hd } of held) {
      heldRow.append(h('span', { class: `chip ${hd.mode}` }, `${letter(hd.mode)} ${k.namespace}/${k.key} `,
        h('span', { class: 'token' }, tr('txn.token', { token: hd.fencing_token })),
        t.state === 'ACTIVE' ? h('button', { type: 'button', class: 'quiet', onclick: () => release(t, k.namespace, k.key) }, tr('txn.release')) : null));
    }
    if (held.length) card.append(heldRow);
    if (t.pending) card.append(h('div', { class: 'waiting muted' }, tr('txn.waiting', { mode: t.pending.mode, key: `${t.pending.namespace}/${t.pending.key}` })));
    if (t.state === 'ACTIVE') {
      // The permit count means something only to a SEMAPHORE request: shown, labelled, for that mode alone.
      const permits = h('label', { class: 'permits', hidden: '', title: tr('txn.permitsHint') }, tr('txn.permits'), ' ',
        h('input', { name: 'permits', type: 'number', min: '1', max: '100000', value: '2', size: 3 }));
      const form = h('form', { class: 'row acq' },
        h('input', { name: 'namespace', value: NS_DEFAULT, 'aria-label': tr('txn.namespace'), size: 10 }),
        h('input', { name: 'key', placeholder: tr('txn.key'), title: tr('txn.keyHint'), required: '', 'aria-label': tr('txn.key') }),
        h('select', { name: 'mode', 'aria-label': tr('txn.mode'), onchange: (ev) => { permits.hidden = ev.target.value !== 'SEMAPHORE'; } },
          h('option', { value: 'EXCLUSIVE' }, 'EXCLUSIVE'), h('option', { value: 'SHARED_READ' }, 'SHARED_READ'), h('option', { value: 'SEMAPHORE' }, 'SEMAPHORE')),
        permits,
        h('button', { type: 'submit' }, tr('txn.acquire')),
        h('button', { type: 'button', class: 'quiet', onclick: () => end(t, true) }, tr('txn.commit')),
        h('button', { type: 'button', class: 'danger', onclick: () => end(t, false) }, tr('txn.abort')),
        h('button', { type: 'button', class: 'quiet', title: tr('txn.writeHint'), onclick: () => writeStore(t) }, tr('txn.write')));
      form.addEventListener('submit', (ev) => {
        ev.preventDefault();
        const f = new FormData(form);
        acquire(t, f.get('namespace'), f.get('key'), f.get('mode'), undefined, Number(f.get('permits')) || 1);
      });
      card.append(form);
    }
    box.append(card);
  }
}

function renderLocks() {
  const box = $('#locks');
  box.replaceChildren();
  const keys = view.lockTable.filter((k) => k.holders.length || k.waiters.length || k.delay);
  if (!keys.length) { box.append(h('p', { class: 'muted' }, tr('locks.none'))); return; }
  for (const k of keys) {
    const q = h('div', { class: 'queue' });
    if (k.delay) {
      // A revoked holder's key under a lock-delay: nothing is granted until it ends.
      const s = (Math.max(0, k.delay.until_ms - Date.now()) / 1000).toFixed(1);
      q.append(h('span', { class: 'badge delay', 'data-testid': 'delay', title: tr('locks.delayHelp') },
        tr('locks.delayed', { s, who: nameOf(k.delay.transaction_id), cause: k.delay.cause })));
    }
    for (const hd of k.holders) {
      q.append(h('span', { class: `holder ${hd.mode}`, dataset: { txnId: hd.transaction_id } },
        `${nameOf(hd.transaction_id)} ${letter(hd.mode)} `, h('span', { class: 'token' }, `#${hd.fencing_token}`)));
    }
    for (const w of k.waiters) {
      q.append(h('span', { class: 'arrow' }, '←'),
        h('span', { class: 'waiter', dataset: { txnId: w.transaction_id } }, `${w.position}. ${nameOf(w.transaction_id)} ${letter(w.mode)}${w.upgrade ? tr('locks.upgrade') : ''}`));
    }
    const title = k.permits ? `${k.namespace}/${k.key} ${tr('locks.semaphore', { n: k.permits, used: k.holders.length })}` : `${k.namespace}/${k.key}`;
    box.append(h('div', { class: 'key', dataset: { key: `${k.namespace}/${k.key}`, permits: k.permits || 0 } }, h('div', { class: 'title' }, title), q));
  }
}

const leaseLeft = (ms) => tr('txn.leaseLeft', { s: (ms / 1000).toFixed(1) });

export function render() {
  renderTxns();
  renderLocks();
  renderGraph();
  renderDeadlock();
}

/** The lease bars move between polls. */
export function tickLeaseBars() {
  for (const card of document.querySelectorAll('.txn')) {
    const t = txns.get(card.dataset.txnId);
    if (!t || t.state !== 'ACTIVE') continue;
    const left = Math.max(0, t.leaseUntil - Date.now());
    const bar = card.querySelector('.lease');
    if (bar) { bar.firstChild.style.width = `${(100 * left) / t.leaseMs}%`; bar.classList.toggle('low', left < t.leaseMs / 3); }
    const txt = card.querySelector('.lease-left');
    if (txt) txt.textContent = leaseLeft(left);
  }
}
