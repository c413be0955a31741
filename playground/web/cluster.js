// The cluster panel: members, leader, term and counters, polled.

import { api } from './api.js';
import { $ } from './dom.js';
import { t } from './i18n.js';

export async function pollCluster() {
  const el = $('#cluster');
  try {
    const c = await api('GET', '/api/v1/cluster');
    delete el.dataset.i18n;
    el.replaceChildren();
    for (const m of c.members) {
      const s = document.createElement('span');
      s.className = 'member' + (m.node_id === c.leader_id ? ' leader' : '');
      s.dataset.nodeId = m.node_id;
      s.textContent = t('cluster.member', { id: m.node_id, addr: m.addr })
        + (m.node_id === c.leader_id ? t('cluster.leader') : '') + (m.node_id === c.node_id ? t('cluster.thisPage') : '');
      el.append(s);
    }
    const p = document.createElement('div');
    p.className = 'muted';
    p.textContent = t('cluster.summary', { term: c.term, token: c.last_fencing_token, active: c.active_transactions, seq: c.last_event_sequence });
    el.append(p);
    el.dataset.leader = c.leader_id;
  } catch (e) {
    el.textContent = t('cluster.unreadable', { msg: e.message });
  }
}
