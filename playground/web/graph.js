// The wait-for graph panel (SVG).

import { $ } from './dom.js';
import { t } from './i18n.js';
import { nameOf, view } from './state.js';

const SVG = 'http://www.w3.org/2000/svg';
function s(tag, attrs = {}, text) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}

/** The wait-for graph: an edge waiter → each transaction it waits behind (holders it
 *  conflicts with, earlier incompatible waiters), as the server reports them; plus the
 *  last deadlock's cycle, drawn in red even after the victim's abort broke it. */
export function renderGraph() {
  const { lockTable, lastDeadlock } = view;
  const svg = $('#graph');
  svg.replaceChildren();
  const defs = s('defs');
  for (const [id, color] of [['arrow', '#94a3b8'], ['arrow-red', '#c53030']]) {
    const m = s('marker', { id, viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
    m.append(s('path', { d: 'M 0 0 L 10 5 L 0 10 z', fill: color }));
    defs.append(m);
  }
  svg.append(defs);
  const edges = new Map();
  const nodes = new Set();
  for (const k of lockTable) {
    for (const w of k.waiters) {
      nodes.add(w.transaction_id);
      for (const b of w.blocking_transaction_ids) {
        nodes.add(b);
        edges.set(`${w.transaction_id}>${b}`, { from: w.transaction_id, to: b, cycle: false });
      }
    }
  }
  const cycle = lastDeadlock ? lastDeadlock.cycle : [];
  cycle.forEach((id, i) => {
    const to = cycle[(i + 1) % cycle.length];
    nodes.add(id);
    edges.set(`${id}>${to}`, { from: id, to, cycle: true });
  });
  const list = [...nodes];
  if (!list.length) {
    svg.append(s('text', { x: 200, y: 150, 'text-anchor': 'middle', fill: '#6b7280', 'font-size': 13 }, t('graph.nobody')));
    return;
  }
  const pos = new Map();
  const r = list.length === 1 ? 0 : 105;
  list.forEach((id, i) => {
    const a = (2 * Math.PI * i) / list.length - Math.PI / 2;
    pos.set(id, { x: 200 + r * Math.cos(a), y: 150 + r * Math.sin(a) });
  });
  const R = 26;
  for (const e of edges.values()) {
    const p = pos.get(e.from);
    const q = pos.get(e.to);
    const dx = q.x - p.x;
    const dy = q.y - p.y;
    const len = Math.hypot(dx, dy) || 1;
    // Bend the two edges of a two-way wait apart so both arrows show.
    const nx = -dy / len * 14;
    const ny = dx / len * 14;
    const x1 = p.x + (dx / len) * R;
    const y1 = p.y + (dy / len) * R;
    const x2 = q.x - (dx / len) * R;
    const y2 = q.y - (dy / len) * R;
    svg.append(s('path', { class: `edge ${e.cycle ? 'cycle' : ''}`, d: `M ${x1} ${y1} Q ${(x1 + x2) / 2 + nx} ${(y1 + y2) / 2 + ny} ${x2} ${y2}` }));
  }
  for (const id of list) {
    const p = pos.get(id);
    const victim = lastDeadlock && lastDeadlock.victim === id;
    const g = s('g', { class: `node ${cycle.includes(id) ? 'cycle' : ''} ${victim ? 'victim' : ''}`, 'data-txn-id': id });
    g.append(s('circle', { cx: p.x, cy: p.y, r: R }));
    g.append(s('text', { x: p.x, y: p.y - 5 }, nameOf(id).slice(0, 10)));
    g.append(s('text', { x: p.x, y: p.y + 9, fill: victim ? '#c53030' : '#6b7280' }, victim ? t('graph.victim') : `#${id}`));
    svg.append(g);
  }
}

/** The deadlock line under the graph: the last cycle the server broke and its victim. */
export function renderDeadlock() {
  const { lastDeadlock } = view;
  const el = $('#deadlock');
  if (!lastDeadlock) return;
  delete el.dataset.i18n;
  el.className = 'found';
  el.dataset.victimId = lastDeadlock.victim;
  el.dataset.sequence = lastDeadlock.seq;
  el.textContent = t('deadlock.line', {
    seq: lastDeadlock.seq,
    path: [...lastDeadlock.cycle, lastDeadlock.cycle[0]].map(nameOf).join(' → '),
    victim: nameOf(lastDeadlock.victim),
    id: lastDeadlock.victim,
    policy: lastDeadlock.policy,
  });
}
