// Leader election, as the SDKs' Election does it: candidates campaign by asking for one key
// EXCLUSIVE and lead while they hold it; the term is the grant's fencing token, so a deposed
// leader's writes carry a lower term than its successor's. The page follows the key with
// WatchKey (GET /api/v1/keys/watch, Server-Sent Events) and shows who leads.

import { authHeaders } from './api.js';
import { $ } from './dom.js';
import { t } from './i18n.js';
import { nameOf } from './state.js';
import { ensureOk, readFrames } from './sse.js';
import { log } from './timeline.js';

function show(ns, key, leader) {
  const el = $('#election');
  el.dataset.leaderName = leader ? nameOf(leader.transaction_id) : '';
  el.dataset.term = leader ? leader.fencing_token : '';
  el.textContent = leader
    ? t('election.leader', { key: `${ns}/${key}`, name: nameOf(leader.transaction_id), term: leader.fencing_token })
    : t('election.none', { key: `${ns}/${key}` });
}

/** Follows who holds `ns/key` until `signal` aborts, logging each change of leader. */
export async function watchLeader(ns, key, signal) {
  try {
    const q = `namespace=${encodeURIComponent(ns)}&key=${encodeURIComponent(key)}`;
    const res = await fetch(`/api/v1/keys/watch?${q}`, { headers: authHeaders(), signal });
    await ensureOk(res);
    await readFrames(res, ({ type, data }) => {
      if (!data || type !== 'message') return;
      const u = JSON.parse(data);
      for (const c of u.changes) {
        const name = c.holder.transaction_name || `#${c.holder.transaction_id}`;
        if (c.kind === 'GRANTED') log(t('log.leads', { name, term: c.holder.fencing_token }), 'server');
        else log(t('log.leadershipLost', { name, kind: c.kind }), 'server');
      }
      show(ns, key, u.holders[0]);
    });
  } catch (e) {
    if (!signal.aborted) log(t('log.streamRetry', { msg: e.message }), 'bad');
  }
}
