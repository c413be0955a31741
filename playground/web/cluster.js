// The cluster panel: members, leader, term and counters, polled. The poll is an operator
// call, so it also tells the reader when the server wants a (different) API key.

import { api } from './api.js';
import { $ } from './dom.js';
import { t } from './i18n.js';

/** The note under the bar: what to do about the key, or nothing once the server takes it. */
function showAuth(problem) {
  const note = $('#auth-note');
  note.hidden = !problem;
  note.dataset.auth = problem || '';
  note.textContent = problem ? t(`auth.${problem}`) : '';
}

export async function pollCluster() {
  const el = $('#cluster');
  try {
    const c = await api('GET', '/api/v1/cluster');
    showAuth(null);
    delete el.dataset.i18n;
    el.replaceChildren();
    for (const m of c.members) {
      const s = document.createElement('span');
      s.className = 'member' + (m.node_id === c.leader_id ? ' leader' : '');
      s.dataset.nodeId = m.node_id;
      // A member's address is its gRPC one (what SDKs and the CLI dial); the node that
      // answered this poll is the one whose HTTP port serves the page (the call is never
      // forwarded), so it is marked with the page's own address.
      const here = m.node_id === c.node_id;
      if (here) s.dataset.thisPage = location.host;
      s.textContent = t('cluster.member', { id: m.node_id, addr: m.addr })
        + (m.node_id === c.leader_id ? t('cluster.leader') : '') + (here ? t('cluster.thisPage', { http: location.host }) : '');
      el.append(s);
    }
    const p = document.createElement('div');
    p.className = 'muted';
    p.textContent = t('cluster.summary', { term: c.term, token: c.last_fencing_token, active: c.active_transactions, seq: c.last_event_sequence });
    el.append(p);
    el.dataset.leader = c.leader_id;
  } catch (e) {
    showAuth(e.auth);
    el.textContent = t('cluster.unreadable', { msg: e.message });
  }
}
