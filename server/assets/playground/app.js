// Caerus DLS Playground. Plain JavaScript, no build step, no external fetches: every
// lock decision shown here is made by the server; this page only calls the HTTP API
// (/api/v1, see /openapi.json), draws what the server reports, and sends heartbeats for
// the simulated clients whose heartbeat switch is on.
'use strict';

const $ = (sel, root = document) => root.querySelector(sel);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const NS_DEFAULT = 'playground';
const ACQUIRE_WAIT_MS = 60000;
const POLL_MS = 500;

// ---- HTTP API -------------------------------------------------------------------------
const keyInput = $('#api-key');
keyInput.value = localStorage.getItem('caerus-api-key') || '';
keyInput.addEventListener('change', () => localStorage.setItem('caerus-api-key', keyInput.value.trim()));

function authHeaders() {
  const k = keyInput.value.trim();
  return k ? { authorization: `Bearer ${k}` } : {};
}

class ApiError extends Error {
  constructor(status, err) {
    super(err.message || `HTTP ${status}`);
    this.status = status;
    this.code = err.code;
    this.kind = err.kind;
  }
}

async function api(method, path, body) {
  const headers = { ...authHeaders() };
  // The server takes POSTs only as JSON (an HTML form elsewhere cannot send that type).
  if (method === 'POST') headers['content-type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: method === 'POST' ? JSON.stringify(body ?? {}) : undefined });
  const text = await res.text();
  let data = {};
  try { data = text ? JSON.parse(text) : {}; } catch { data = { error: { message: text } }; }
  if (!res.ok) throw new ApiError(res.status, data.error || {});
  return data;
}

// ---- state ----------------------------------------------------------------------------
/** My simulated clients, by transaction id (a decimal string: ids are 64-bit). */
const txns = new Map();
/** Every transaction name seen in the lock table, for other clients' locks. */
const names = new Map();
let lockTable = [];
let lastDeadlock = null;
let lastSeq = null;
const store = { lastToken: 0n, writes: [] };

function nameOf(id) {
  const t = txns.get(id);
  return (t && t.name) || names.get(id) || `#${id}`;
}

// ---- timeline -------------------------------------------------------------------------
function log(text, cls = 'local') {
  const li = document.createElement('li');
  li.className = cls;
  const t = document.createElement('span');
  t.className = 't';
  t.textContent = new Date().toLocaleTimeString();
  li.append(t, document.createTextNode(text));
  $('#log').prepend(li);
  while ($('#log').children.length > 300) $('#log').lastChild.remove();
  return li;
}

// ---- transactions ---------------------------------------------------------------------
async function begin(name, priority, leaseMs) {
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
  render();
  return t;
}

/** Every call of a transaction renews its lease on the server; mirror that locally. */
function renewed(t, remainingMs = t.leaseMs) {
  t.leaseUntil = Date.now() + remainingMs;
}

function startHeartbeat(t) {
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

function ended(t, state, reason) {
  if (t.state !== 'ACTIVE') return;
  t.state = state;
  t.reason = reason || '';
  t.pending = null;
  clearInterval(t.hbTimer);
  t.hbTimer = null;
  render();
}

async function acquire(t, namespace, key, mode, timeoutMs = ACQUIRE_WAIT_MS) {
  t.pending = { namespace, key, mode };
  render();
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
    render();
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
  render();
}

async function release(t, namespace, key) {
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
  render();
}

async function end(t, commit) {
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

// ---- server events (SSE over fetch, so the API key can go in a header) -----------------
function onEvent(e) {
  lastSeq = e.sequence;
  const d = e.detail || {};
  if (e.kind === 'DEADLOCK_RESOLVED') {
    const cycle = d.cycle.map((m) => m.transaction_id);
    d.cycle.forEach((m) => names.set(m.transaction_id, m.transaction_name));
    lastDeadlock = { cycle, victim: d.victim_transaction_id, policy: d.policy, members: d.cycle, seq: e.sequence };
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
  render();
}

async function followEvents() {
  for (;;) {
    try {
      const q = lastSeq === null ? 'only_new=true' : `after=${lastSeq}`;
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

function handleFrame(frame) {
  let data = '';
  let type = 'message';
  for (const line of frame.split('\n')) {
    const m = /^: caerus-dls events from sequence (\d+)/.exec(line);
    if (m && lastSeq === null) lastSeq = (BigInt(m[1]) - 1n).toString();
    if (line.startsWith('data: ')) data += line.slice(6);
    if (line.startsWith('event: ')) type = line.slice(7);
  }
  if (!data) return;
  const obj = JSON.parse(data);
  if (type === 'dls-error') log(`event stream ended: ${obj.error.message}`, 'bad');
  else onEvent(obj);
}

// ---- polling: the lock table and the cluster ------------------------------------------
async function pollLocks() {
  try {
    const r = await api('GET', '/api/v1/locks');
    lockTable = r.locks;
    for (const k of lockTable) {
      for (const h of k.holders) {
        names.set(h.transaction_id, h.transaction_name || names.get(h.transaction_id));
        const t = txns.get(h.transaction_id);
        if (t && t.pending && t.pending.namespace === k.namespace && t.pending.key === k.key && h.mode === t.pending.mode) {
          granted(t, k.namespace, k.key, h.mode, h.fencing_token);
        }
      }
      for (const w of k.waiters) names.set(w.transaction_id, w.transaction_name || names.get(w.transaction_id));
    }
    render();
  } catch (e) {
    $('#locks').textContent = `cannot list locks: ${e.message}`;
  }
}

async function pollCluster() {
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

// ---- rendering ------------------------------------------------------------------------
function h(tag, attrs = {}, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') el.className = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v);
  }
  for (const kid of kids) if (kid !== null && kid !== undefined) el.append(kid);
  return el;
}

let txnsSig = '';
function renderTxns() {
  const box = $('#txns');
  // Rebuild the cards only when something shown changed, so a half-typed key survives polls.
  const sig = JSON.stringify([...txns.values()].map((t) => [t.id, t.state, t.victim, t.heartbeat, t.pending, t.reason,
    lockTable.flatMap((k) => k.holders.filter((hd) => hd.transaction_id === t.id).map((hd) => [k.namespace, k.key, hd.mode, hd.fencing_token]))]));
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
        h('span', { class: 'muted' }, `#${t.id} · priority ${t.priority}`),
        h('span', { class: `badge ${t.state}`, 'data-testid': 'state' }, t.state),
        t.victim ? h('span', { class: 'badge victim', 'data-testid': 'victim' }, 'DEADLOCK VICTIM') : null));
    if (t.state === 'ACTIVE') {
      const left = Math.max(0, t.leaseUntil - Date.now());
      const bar = h('div', { class: `lease ${left < t.leaseMs / 3 ? 'low' : ''}` }, h('div', { style: `width:${(100 * left) / t.leaseMs}%` }));
      card.append(bar, h('div', { class: 'row' },
        h('span', { class: 'muted lease-left' }, `lease ${(left / 1000).toFixed(1)} s left`),
        h('label', {}, (() => {
          const cb = h('input', { type: 'checkbox', 'data-testid': 'heartbeat', onchange: (ev) => {
            t.heartbeat = ev.target.checked;
            log(`${t.name}: heartbeats ${t.heartbeat ? 'ON' : 'OFF (the lease will lapse)'}`);
            startHeartbeat(t);
          } });
          cb.checked = t.heartbeat;
          return cb;
        })(), ' heartbeats')));
    } else if (t.reason) {
      card.append(h('div', { class: 'muted' }, t.reason));
    }
    const heldRow = h('div', { class: 'held' });
    for (const { k, hd } of held) {
      heldRow.append(h('span', { class: `chip ${hd.mode}` }, `${hd.mode === 'EXCLUSIVE' ? 'X' : 'S'} ${k.namespace}/${k.key} `,
        h('span', { class: 'token' }, `token ${hd.fencing_token}`),
        t.state === 'ACTIVE' ? h('button', { type: 'button', class: 'quiet', onclick: () => release(t, k.namespace, k.key) }, 'release') : null));
    }
    if (held.length) card.append(heldRow);
    if (t.pending) card.append(h('div', { class: 'waiting muted' }, `waiting for ${t.pending.mode} ${t.pending.namespace}/${t.pending.key}…`));
    if (t.state === 'ACTIVE') {
      const form = h('form', { class: 'row acq' },
        h('input', { name: 'namespace', value: NS_DEFAULT, 'aria-label': 'namespace', size: 10 }),
        h('input', { name: 'key', placeholder: 'key', required: '', 'aria-label': 'key' }),
        (() => {
          const s = h('select', { name: 'mode', 'aria-label': 'mode' }, h('option', { value: 'EXCLUSIVE' }, 'EXCLUSIVE'), h('option', { value: 'SHARED_READ' }, 'SHARED_READ'));
          return s;
        })(),
        h('button', { type: 'submit' }, 'Acquire'),
        h('button', { type: 'button', class: 'quiet', onclick: () => end(t, true) }, 'Commit'),
        h('button', { type: 'button', class: 'danger', onclick: () => end(t, false) }, 'Abort'),
        h('button', { type: 'button', class: 'quiet', title: 'write to the fenced store with the newest token this client holds',
          onclick: () => writeStore(t) }, 'Write to store'));
      form.addEventListener('submit', (ev) => {
        ev.preventDefault();
        const f = new FormData(form);
        acquire(t, f.get('namespace'), f.get('key'), f.get('mode'));
      });
      card.append(form);
    }
    box.append(card);
  }
}

function renderLocks() {
  const box = $('#locks');
  box.replaceChildren();
  const keys = lockTable.filter((k) => k.holders.length || k.waiters.length);
  if (!keys.length) { box.append(h('p', { class: 'muted' }, 'no locks held')); return; }
  for (const k of keys) {
    const q = h('div', { class: 'queue' });
    for (const hd of k.holders) {
      q.append(h('span', { class: `holder ${hd.mode}`, dataset: { txnId: hd.transaction_id } },
        `${nameOf(hd.transaction_id)} ${hd.mode === 'EXCLUSIVE' ? 'X' : 'S'} `, h('span', { class: 'token' }, `#${hd.fencing_token}`)));
    }
    for (const w of k.waiters) {
      q.append(h('span', { class: 'arrow' }, '←'),
        h('span', { class: 'waiter', dataset: { txnId: w.transaction_id } }, `${w.position}. ${nameOf(w.transaction_id)} ${w.mode === 'EXCLUSIVE' ? 'X' : 'S'}${w.upgrade ? ' (upgrade)' : ''}`));
    }
    box.append(h('div', { class: 'key', dataset: { key: `${k.namespace}/${k.key}` } }, h('div', { class: 'title' }, `${k.namespace}/${k.key}`), q));
  }
}

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
function renderGraph() {
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
    svg.append(s('text', { x: 200, y: 150, 'text-anchor': 'middle', fill: '#6b7280', 'font-size': 13 }, 'nobody is waiting'));
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
    g.append(s('text', { x: p.x, y: p.y + 9, fill: victim ? '#c53030' : '#6b7280' }, victim ? '✖ victim' : `#${id}`));
    svg.append(g);
  }
}

function renderDeadlock() {
  const el = $('#deadlock');
  if (!lastDeadlock) return;
  el.className = 'found';
  el.dataset.victimId = lastDeadlock.victim;
  el.dataset.sequence = lastDeadlock.seq;
  el.textContent = `Deadlock (event #${lastDeadlock.seq}): ${lastDeadlock.cycle.map(nameOf).join(' → ')} → ${nameOf(lastDeadlock.cycle[0])}. `
    + `Victim: ${nameOf(lastDeadlock.victim)} (#${lastDeadlock.victim}), policy ${lastDeadlock.policy}. The others proceed.`;
}

function writeStore(t, token) {
  if (token === undefined) {
    const all = [...t.tokens.values()].map((x) => BigInt(x));
    if (!all.length) { log(`${t.name} holds no token to write with`, 'bad'); return false; }
    token = all.reduce((a, b) => (a > b ? a : b)).toString();
  }
  const ok = BigInt(token) > store.lastToken;
  if (ok) store.lastToken = BigInt(token);
  store.writes.unshift({ who: t.name, token, ok });
  log(`fenced store: write by ${t.name} with token ${token} ${ok ? 'ACCEPTED' : `REJECTED (stale: the store has seen token ${store.lastToken})`}`, ok ? 'local' : 'bad');
  renderStore();
  return ok;
}

function renderStore() {
  const box = $('#store');
  box.replaceChildren(h('div', {}, 'highest token accepted: ', h('span', { class: 'token', 'data-testid': 'store-token' }, store.lastToken.toString())));
  for (const w of store.writes.slice(0, 8)) {
    box.append(h('div', { class: `write ${w.ok ? 'ok' : 'rejected'}` }, `${w.who} wrote with token ${w.token}: ${w.ok ? 'accepted' : 'REJECTED (stale token)'}`));
  }
}

function render() {
  renderTxns();
  renderLocks();
  renderGraph();
  renderDeadlock();
}

// The lease bars move between polls.
setInterval(() => {
  for (const card of document.querySelectorAll('.txn')) {
    const t = txns.get(card.dataset.txnId);
    if (!t || t.state !== 'ACTIVE') continue;
    const left = Math.max(0, t.leaseUntil - Date.now());
    const bar = card.querySelector('.lease');
    if (bar) { bar.firstChild.style.width = `${(100 * left) / t.leaseMs}%`; bar.classList.toggle('low', left < t.leaseMs / 3); }
    const txt = card.querySelector('.lease-left');
    if (txt) txt.textContent = `lease ${(left / 1000).toFixed(1)} s left`;
  }
}, 200);

// ---- scenarios ------------------------------------------------------------------------
const scenarios = {
  deadlock2: {
    note: 'alice (priority 5) holds a, bob (priority 1) holds b; each then asks for the other\'s key. The server finds the cycle and aborts the lowest priority; alice proceeds and commits.',
    async run(ns) {
      const a = await begin('alice', 5, 15000);
      const b = await begin('bob', 1, 15000);
      await acquire(a, ns, 'a', 'EXCLUSIVE');
      await acquire(b, ns, 'b', 'EXCLUSIVE');
      a.commitWhenGranted = true;
      b.commitWhenGranted = true;
      await acquire(a, ns, 'b', 'EXCLUSIVE');
      await sleep(800);
      await acquire(b, ns, 'a', 'EXCLUSIVE');
    },
  },
  deadlock3: {
    note: 'alice → bob → carol → alice, over keys a, b, c. carol has the lowest priority and is the victim; the other two finish one after the other.',
    async run(ns) {
      const ts = [await begin('alice', 3, 15000), await begin('bob', 2, 15000), await begin('carol', 1, 15000)];
      const keys = ['a', 'b', 'c'];
      for (let i = 0; i < 3; i++) await acquire(ts[i], ns, keys[i], 'EXCLUSIVE');
      for (let i = 0; i < 3; i++) {
        ts[i].commitWhenGranted = true;
        await sleep(800);
        await acquire(ts[i], ns, keys[(i + 1) % 3], 'EXCLUSIVE');
      }
    },
  },
  fairness: {
    note: 'reader-1 reads; writer queues; reader-2 arrives and queues BEHIND the writer (FIFO: readers cannot starve a writer) although it could share with reader-1. reader-1 commits, the writer goes, then reader-2.',
    async run(ns) {
      const r1 = await begin('reader-1', 0, 15000);
      const w = await begin('writer', 0, 15000);
      const r2 = await begin('reader-2', 0, 15000);
      await acquire(r1, ns, 'doc', 'SHARED_READ');
      await sleep(600);
      await acquire(w, ns, 'doc', 'EXCLUSIVE');
      await sleep(600);
      await acquire(r2, ns, 'doc', 'SHARED_READ');
      w.commitWhenGranted = true;
      r2.commitWhenGranted = true;
      await sleep(3000);
      await end(r1, true);
    },
  },
  gcpause: {
    note: 'worker-1 takes the lock and writes with its token. Then it "pauses" (heartbeats off) until its lease lapses; worker-2 gets the lock with a higher token and writes. worker-1 wakes and writes with its old token: the fenced store rejects it.',
    async run(ns) {
      const w1 = await begin('worker-1', 0, 2000);
      const r1 = await acquire(w1, ns, 'ledger', 'EXCLUSIVE');
      if (!r1 || r1.status !== 'granted') return;
      const stale = r1.fencing_token;
      writeStore(w1, stale);
      await sleep(500);
      w1.heartbeat = false;
      startHeartbeat(w1);
      log('worker-1 stalls (GC pause): heartbeats OFF');
      render();
      for (let i = 0; i < 100 && w1.state === 'ACTIVE'; i++) await sleep(100);
      const w2 = await begin('worker-2', 0, 15000);
      const r2 = await acquire(w2, ns, 'ledger', 'EXCLUSIVE');
      if (r2 && r2.status === 'granted') writeStore(w2, r2.fencing_token);
      await sleep(1000);
      log('worker-1 wakes up and, still believing it holds the lock, writes with its old token');
      writeStore(w1, stale);
    },
  },
};

function showNote() {
  $('#scenario-note').textContent = scenarios[$('#scenario').value].note;
}
$('#scenario').addEventListener('change', showNote);
showNote();

$('#run-scenario').addEventListener('click', async () => {
  const name = $('#scenario').value;
  const btn = $('#run-scenario');
  btn.disabled = true;
  // A fresh namespace per run, so earlier runs (or other people) never interfere.
  const ns = `pg-${name}-${Date.now().toString(36)}`;
  log(`scenario "${$('#scenario').selectedOptions[0].textContent}" in namespace ${ns}`);
  try {
    await scenarios[name].run(ns);
  } catch (e) {
    log(`scenario failed: ${e.message}`, 'bad');
  } finally {
    btn.disabled = false;
  }
});

$('#clear').addEventListener('click', async () => {
  for (const t of txns.values()) if (t.state === 'ACTIVE') await end(t, false);
});

$('#new-txn').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const name = String(f.get('name')).trim() || `client-${txns.size + 1}`;
  try {
    await begin(name, Number(f.get('priority')) || 0, Number(f.get('lease')) || 10000);
    ev.target.elements.name.value = '';
  } catch (e) {
    log(`begin failed: ${e.kind || e.code}: ${e.message}`, 'bad');
  }
});

// ---- start ----------------------------------------------------------------------------
render();
renderStore();
followEvents();
pollCluster();
setInterval(pollLocks, POLL_MS);
setInterval(pollCluster, 1000);
pollLocks();
