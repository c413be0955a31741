// The simulated clients' transactions: begin, heartbeats, acquire, release, end, and the
// lock-table poll that tells a queued request it was granted.

import { api } from './api.js';
import { $ } from './dom.js';
import { changed, nameOf, names, txns, view } from './state.js';
import { log } from './timeline.js';

const ACQUIRE_WAIT_MS = 60000;

export async function begin(name, priority, leaseMs) {
  const r = await api('POST', '/api/v1/transactions', { name, priority, timeout_ms: leaseMs });
  const t = {
    id: r.transaction_id, name, priority, leaseMs: r.lease_timeout_ms, heartbeat: true,
    state: 'ACTIVE', reason: '', leaseUntil: Date.now() + r.lease_timeout_ms, pending: null,
    victim: false, hbTimer: null, commitWhenGranted: false, tokens: new Map(),
  };
  txns.set(t.id, t);
  names.set(t.id, name);
  log(`${name} began transaction #${t.id} (priority ${priority}, lease ${t.leaseMs} ms)`);
  startHeartbeat(t);
  changed();
  return t;
}

/** Every call of a transaction renews its lease on the server; mirror that locally. */
function renewed(t, remainingMs = t.leaseMs) {
  t.leaseUntil = Date.now() + remainingMs;
}

export function startHeartbeat(t) {
  clearInterval(t.hbTimer);
  t.hbTimer = null;
  if (!t.heartbeat || t.state !== 'ACTIVE') return;
  // A third of the lease, as the SDKs do: two beats may be lost before it lapses.
  t.hbTimer = setInterval(async () => {
    if (!t.heartbeat || t.state !== 'ACTIVE') return startHeartbeat(t);
    try {
      const r = await api('POST', `/api/v1/transactions/${t.id}/heartbeat`);
      renewed(t, r.lease_remaining_ms);
    } catch (e) {
      if (e.kind === 'TRANSACTION_LOST' || e.kind === 'TRANSACTION_NOT_FOUND') ended(t, stateFromMessage(e.message), e.message);
    }
  }, Math.max(50, Math.floor(t.leaseMs / 3)));
}

function stateFromMessage(msg) {
  for (const s of ['EXPIRED', 'ABORTED', 'COMMITTED']) if (msg.toUpperCase().includes(s)) return s;
  return 'ABORTED';
}

export function ended(t, state, reason) {
  if (t.state !== 'ACTIVE') return;
  t.state = state;
  t.reason = reason || '';
  t.pending = null;
  clearInterval(t.hbTimer);
  t.hbTimer = null;
  changed();
}

export async function acquire(t, namespace, key, mode, timeoutMs = ACQUIRE_WAIT_MS) {
  t.pending = { namespace, key, mode };
  changed();
  try {
    const r = await api('POST', `/api/v1/transactions/${t.id}/locks`, {
      namespace, key, mode, timeout_ms: timeoutMs, return_when_queued: true,
    });
    renewed(t);
    pollLocks();
    if (r.status === 'granted') {
      granted(t, namespace, key, mode, r.fencing_token);
    } else {
      const by = r.blocking_transaction_ids.map(nameOf).join(', ');
      log(`${t.name} queued for ${mode} ${namespace}/${key} at position ${r.position}${by ? `, behind ${by}` : ''}`);
    }
    return r;
  } catch (e) {
    t.pending = null;
    log(`${t.name}: acquire ${namespace}/${key} failed: ${e.kind || e.code}: ${e.message}`, 'bad');
    if (e.kind === 'DEADLOCK_VICTIM') ended(t, 'ABORTED', e.message);
    changed();
    return null;
  }
}

function granted(t, namespace, key, mode, token) {
  t.pending = null;
  t.tokens.set(`${namespace}/${key}`, token);
  log(`${t.name} GRANTED ${mode} ${namespace}/${key} — fencing token ${token}`, 'server');
  if (t.commitWhenGranted) {
    t.commitWhenGranted = false;
    setTimeout(() => end(t, true), 1500);
  }
  changed();
}

export async function release(t, namespace, key) {
  try {
    const r = await api('POST', `/api/v1/transactions/${t.id}/release`, { namespace, key });
    renewed(t);
    t.tokens.delete(`${namespace}/${key}`);
    if (t.pending && t.pending.namespace === namespace && t.pending.key === key) t.pending = null;
    log(`${t.name} released ${namespace}/${key}${r.released ? '' : ' (was not held)'}`);
    pollLocks();
  } catch (e) {
    log(`${t.name}: release failed: ${e.message}`, 'bad');
  }
  changed();
}

export async function end(t, commit) {
  if (t.state !== 'ACTIVE') return;
  try {
    const r = await api('POST', `/api/v1/transactions/${t.id}/end`, { commit });
    log(`${t.name} ${r.state.toLowerCase()} (released ${r.released_locks} lock${r.released_locks === 1 ? '' : 's'})`);
    ended(t, r.state, commit ? 'committed' : 'aborted by its client');
    pollLocks();
  } catch (e) {
    log(`${t.name}: end failed: ${e.message}`, 'bad');
    if (e.kind === 'TRANSACTION_LOST') ended(t, stateFromMessage(e.message), e.message);
  }
}

/** Reads the lock table; a queued request of mine that now holds its lock was granted. */
export async function pollLocks() {
  try {
    const r = await api('GET', '/api/v1/locks');
    view.lockTable = r.locks;
    for (const k of view.lockTable) {
      for (const h of k.holders) {
        names.set(h.transaction_id, h.transaction_name || names.get(h.transaction_id));
        const t = txns.get(h.transaction_id);
        if (t && t.pending && t.pending.namespace === k.namespace && t.pending.key === k.key && h.mode === t.pending.mode) {
          granted(t, k.namespace, k.key, h.mode, h.fencing_token);
        }
      }
      for (const w of k.waiters) names.set(w.transaction_id, w.transaction_name || names.get(w.transaction_id));
    }
    changed();
  } catch (e) {
    $('#locks').textContent = `cannot list locks: ${e.message}`;
  }
}
