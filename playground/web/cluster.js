// The cluster panel: members, leader, term and counters, polled.

import { api } from './api.js';
import { $ } from './dom.js';

export async function pollCluster() {
  const el = $('#cluster');
  try {
    const c = await api('GET', '/api/v1/cluster');
    el.replaceChildren();
    for (const m of c.members) {
      const s = document.createElement('span');
      s.className = 'member' + (m.node_id === c.leader_id ? ' leader' : '');
      s.dataset.nodeId = m.node_id;
      s.textContent = `node ${m.node_id} ${m.addr}${m.node_id === c.leader_id ? ' ★ leader' : ''}${m.node_id === c.node_id ? ' (this page)' : ''}`;
      el.append(s);
    }
    const p = document.createElement('div');
    p.className = 'muted';
    p.textContent = `term ${c.term} · last fencing token ${c.last_fencing_token} · ${c.active_transactions} active transaction(s) · last event #${c.last_event_sequence}`;
    el.append(p);
    el.dataset.leader = c.leader_id;
  } catch (e) {
    el.textContent = `cannot read cluster status: ${e.message}`;
  }
}
