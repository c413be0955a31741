// The cluster's events, followed as server-sent events over fetch (so the API key can go
// in a header), reconnecting from the last sequence seen.

import { authHeaders } from './api.js';
import { sleep } from './dom.js';
import { changed, nameOf, names, txns, view } from './state.js';
import { log } from './timeline.js';
import { ended, pollLocks } from './transactions.js';

function onEvent(e) {
  view.lastSeq = e.sequence;
  const d = e.detail || {};
  if (e.kind === 'DEADLOCK_RESOLVED') {
    const cycle = d.cycle.map((m) => m.transaction_id);
    d.cycle.forEach((m) => names.set(m.transaction_id, m.transaction_name));
    view.lastDeadlock = { cycle, victim: d.victim_transaction_id, policy: d.policy, members: d.cycle, seq: e.sequence };
    const path = [...d.cycle.map((m) => `${nameOf(m.transaction_id)} (waits for ${m.namespace}/${m.key})`), nameOf(cycle[0])].join(' → ');
    log(`DEADLOCK detected: ${path}. Victim: ${nameOf(d.victim_transaction_id)} #${d.victim_transaction_id} (${d.policy}). Event #${e.sequence}`, 'server bad');
    const v = txns.get(d.victim_transaction_id);
    if (v) { v.victim = true; ended(v, 'ABORTED', 'deadlock victim'); }
  } else if (e.kind === 'TRANSACTION_EXPIRED') {
    log(`${d.transaction_name || '#' + d.transaction_id} EXPIRED: lease lapsed, ${d.released_locks.length} lock(s) freed. Event #${e.sequence}`, 'server bad');
    const t = txns.get(d.transaction_id);
    if (t) ended(t, 'EXPIRED', 'lease expired');
  } else if (e.kind === 'TRANSACTION_ABORTED') {
    log(`${d.transaction_name || '#' + d.transaction_id} aborted by ${d.operator || 'an operator'}: ${d.reason}. Event #${e.sequence}`, 'server');
    const t = txns.get(d.transaction_id);
    if (t) ended(t, 'ABORTED', d.reason);
  } else if (e.kind === 'LOCK_REVOKED') {
    log(`lock ${d.namespace}/${d.key} (token ${d.fencing_token}) of #${d.transaction_id} revoked: ${d.cause}. Event #${e.sequence}`, 'server');
  }
  // An event changes the table (a victim's locks freed): show it now, not at the next poll.
  pollLocks();
  changed();
}

function handleFrame(frame) {
  let data = '';
  let type = 'message';
  for (const line of frame.split('\n')) {
    const m = /^: caerus-dls events from sequence (\d+)/.exec(line);
    if (m && view.lastSeq === null) view.lastSeq = (BigInt(m[1]) - 1n).toString();
    if (line.startsWith('data: ')) data += line.slice(6);
    if (line.startsWith('event: ')) type = line.slice(7);
  }
  if (!data) return;
  const obj = JSON.parse(data);
  if (type === 'dls-error') log(`event stream ended: ${obj.error.message}`, 'bad');
  else onEvent(obj);
}

export async function followEvents() {
  for (;;) {
    try {
      const q = view.lastSeq === null ? 'only_new=true' : `after=${view.lastSeq}`;
      const res = await fetch(`/api/v1/events?${q}`, { headers: authHeaders() });
      if (!res.ok) {
        const body = await res.json().catch(() => ({}));
        throw new Error((body.error && body.error.message) || `HTTP ${res.status}`);
      }
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const frame = buf.slice(0, i);
          buf = buf.slice(i + 2);
          handleFrame(frame);
        }
      }
    } catch (err) {
      log(`event stream: ${err.message}; reconnecting`, 'bad');
    }
    await sleep(1000);
  }
}
