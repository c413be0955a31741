// The simulated clients' transactions: begin, heartbeats, acquire, release, end, and the
// lock-table poll that tells a queued request it was granted.

import { api } from './api.js';
import { $ } from './dom.js';
import { t as tr } from './i18n.js';
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
  log(tr('log.began', { name, id: t.id, priority, lease: t.leaseMs }));
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
      if (e.kind === 'TRANSACTION_LOST' || e.kind === 'TRANSACTION_NOT_FOUND') ended(t, stateOf(e.endCause), e.message);
    }
  }, Math.max(50, Math.floor(t.leaseMs / 3)));
}

/** The final state an end cause leaves a transaction in (the server sends the cause). */
export function stateOf(endCause) {
  switch (endCause) {
    case 'LEASE_EXPIRED': return 'EXPIRED';
    case 'COMMITTED': return 'COMMITTED';
    default: return 'ABORTED';
  }
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

export async function acquire(t, namespace, key, mode, timeoutMs = ACQUIRE_WAIT_MS, permits = 0) {
  // "a, b, c" asks for every key at once, all or nothing (one AcquireLocks request).
  const keys = key.split(',').map((k) => k.trim()).filter(Boolean);
  if (keys.length > 1) return acquireAll(t, namespace, keys, mode, timeoutMs);
  t.pending = { namespace, key, mode, keys: [key] };
  changed();
  try {
    // A SEMAPHORE request names the semaphore's permit count; the others send none.
    const r = await api('POST', `/api/v1/transactions/${t.id}/locks`, {
      namespace, key, mode, timeout_ms: timeoutMs, return_when_queued: true,
      ...(mode === 'SEMAPHORE' ? { permits } : {}),
    });
    return answered(t, r, () => granted(t, namespace, key, mode, r.fencing_token));
  } catch (e) {
    return acquireFailed(t, `${namespace}/${key}`, e);
  }
}

async function acquireAll(t, namespace, keys, mode, timeoutMs) {
  const label = `${namespace}/{${keys.join(', ')}}`;
  t.pending = { namespace, key: keys.join(', '), mode, keys };
  changed();
  try {
    const r = await api('POST', `/api/v1/transactions/${t.id}/locks/all`, {
      locks: keys.map((key) => ({ namespace, key, mode })), timeout_ms: timeoutMs, return_when_queued: true,
    });
    return answered(t, r, () => {
      t.pending = null;
      for (const l of r.locks) granted(t, l.namespace, l.key, l.mode, l.fencing_token);
    }, label);
  } catch (e) {
    return acquireFailed(t, label, e);
  }
}

/** The first answer of an acquire: granted now, or queued (the lock-table poll sees the grant). */
function answered(t, r, onGranted, label) {
  renewed(t);
  pollLocks();
  if (r.status === 'granted') {
    onGranted();
  } else {
    const by = r.blocking_transaction_ids.map(nameOf).join(', ');
    const key = label ?? `${t.pending.namespace}/${t.pending.key}`;
    log(tr('log.queued', { name: t.name, mode: t.pending.mode, key, position: r.position, by }));
  }
  return r;
}

function acquireFailed(t, label, e) {
  t.pending = null;
  log(tr('log.acquireFailed', { name: t.name, key: label, kind: e.kind || e.code, msg: e.message }), 'bad');
  if (e.kind === 'DEADLOCK_VICTIM') ended(t, 'ABORTED', e.message);
  changed();
  return null;
}

function granted(t, namespace, key, mode, token) {
  if (t.pending && t.pending.keys.length === 1) t.pending = null;
  t.tokens.set(`${namespace}/${key}`, token);
  log(tr('log.granted', { name: t.name, mode, key: `${namespace}/${key}`, token }), 'server', { event: 'granted', txn: t.name, token });
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
    // Releasing any key of a waiting request withdraws the whole request.
    if (t.pending && t.pending.namespace === namespace && t.pending.keys.includes(key)) t.pending = null;
    log(tr('log.released', { name: t.name, key: `${namespace}/${key}`, held: r.released }));
    pollLocks();
  } catch (e) {
    log(tr('log.releaseFailed', { name: t.name, msg: e.message }), 'bad');
  }
  changed();
}

export async function end(t, commit) {
  if (t.state !== 'ACTIVE') return;
  try {
    const r = await api('POST', `/api/v1/transactions/${t.id}/end`, { commit });
    log(tr('log.ended', { name: t.name, state: r.state, n: r.released_locks }));
    ended(t, r.state, tr(commit ? 'reason.committed' : 'reason.abortedByClient'));
    pollLocks();
  } catch (e) {
    log(tr('log.endFailed', { name: t.name, msg: e.message }), 'bad');
    if (e.kind === 'TRANSACTION_LOST') ended(t, stateOf(e.endCause), e.message);
  }
}

/** Reads the lock table; a queued request of mine that now holds its lock was granted. */
export async function pollLocks() {
  try {
    const r = await api('GET', '/api/v1/locks');
    view.lockTable = r.locks;
    const holds = new Map(); // "txn namespace/key" -> the holder entry
    for (const k of view.lockTable) {
      for (const h of k.holders) {
        names.set(h.transaction_id, h.transaction_name || names.get(h.transaction_id));
        holds.set(`${h.transaction_id} ${k.namespace}/${k.key}`, h);
      }
      for (const w of k.waiters) names.set(w.transaction_id, w.transaction_name || names.get(w.transaction_id));
    }
    // A pending request is granted once its transaction holds every key of it (several
    // keys are granted together, so they show up in the same poll).
    for (const t of txns.values()) {
      const p = t.pending;
      if (!p) continue;
      const got = p.keys.map((key) => ({ key, h: holds.get(`${t.id} ${p.namespace}/${key}`) }));
      if (got.every(({ h }) => h && h.mode === p.mode)) {
        t.pending = null;
        for (const { key, h } of got) granted(t, p.namespace, key, h.mode, h.fencing_token);
      }
    }
    changed();
  } catch (e) {
    $('#locks').textContent = tr('locks.unreadable', { msg: e.message });
  }
}
