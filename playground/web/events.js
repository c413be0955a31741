// The cluster's events, followed as server-sent events over fetch (so the API key can go
// in a header), reconnecting from the last sequence seen.

import { authHeaders } from './api.js';
import { sleep } from './dom.js';
import { t } from './i18n.js';
import { changed, nameOf, names, txns, view } from './state.js';
import { ensureOk, readFrames } from './sse.js';
import { log } from './timeline.js';
import { ended, pollLocks } from './transactions.js';

function onEvent(e) {
  view.lastSeq = e.sequence;
  const d = e.detail || {};
  if (e.kind === 'DEADLOCK_RESOLVED') {
    const cycle = d.cycle.map((m) => m.transaction_id);
    d.cycle.forEach((m) => names.set(m.transaction_id, m.transaction_name));
    view.lastDeadlock = { cycle, victim: d.victim_transaction_id, policy: d.policy, members: d.cycle, seq: e.sequence };
    const path = [...d.cycle.map((m) => t('log.waitsFor', { name: nameOf(m.transaction_id), key: `${m.namespace}/${m.key}` })), nameOf(cycle[0])].join(' → ');
    log(t('log.deadlock', { path, victim: nameOf(d.victim_transaction_id), id: d.victim_transaction_id, policy: d.policy, seq: e.sequence }), 'server bad');
    const v = txns.get(d.victim_transaction_id);
    if (v) { v.victim = true; ended(v, 'ABORTED', t('reason.victim')); }
  } else if (e.kind === 'TRANSACTION_EXPIRED') {
    const name = d.transaction_name || `#${d.transaction_id}`;
    log(t('log.expired', { name, n: d.released_locks.length, seq: e.sequence }), 'server bad', { event: 'expired', txn: name });
    const mine = txns.get(d.transaction_id);
    if (mine) ended(mine, 'EXPIRED', t('reason.expired'));
  } else if (e.kind === 'TRANSACTION_ABORTED') {
    log(t('log.aborted', { name: d.transaction_name || `#${d.transaction_id}`, operator: d.operator, reason: d.reason, seq: e.sequence }), 'server');
    const mine = txns.get(d.transaction_id);
    if (mine) ended(mine, 'ABORTED', d.reason);
  } else if (e.kind === 'LOCK_REVOKED') {
    log(t('log.revoked', { key: `${d.namespace}/${d.key}`, token: d.fencing_token, id: d.transaction_id, cause: d.end_cause, seq: e.sequence }), 'server');
  }
  // An event changes the table (a victim's locks freed): show it now, not at the next poll.
  pollLocks();
  changed();
}

function handleFrame({ type, data, comments }) {
  for (const c of comments) {
    const m = /^caerus-dls events from sequence (\d+)/.exec(c);
    if (m && view.lastSeq === null) view.lastSeq = (BigInt(m[1]) - 1n).toString();
  }
  if (!data) return;
  const obj = JSON.parse(data);
  if (type === 'dls-error') log(t('log.streamEnded', { msg: obj.error.message }), 'bad');
  else onEvent(obj);
}

export async function followEvents() {
  // A refused key is retried every second until the reader pastes one: logged once.
  let refused = null;
  for (;;) {
    try {
      const q = view.lastSeq === null ? 'only_new=true' : `after=${view.lastSeq}`;
      const res = await fetch(`/api/v1/events?${q}`, { headers: authHeaders() });
      await ensureOk(res);
      refused = null;
      await readFrames(res, handleFrame);
    } catch (err) {
      if (!err.auth || err.auth !== refused) log(t('log.streamRetry', { msg: err.message }), 'bad');
      refused = err.auth || null;
    }
    await sleep(1000);
  }
}
