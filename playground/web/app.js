// Caerus DLS Playground. Plain JavaScript modules, no build step, no external fetches:
// every lock decision shown here is made by the server; this page only calls the HTTP API
// (/api/v1, see /openapi.json), draws what the server reports, and sends heartbeats for
// the simulated clients whose heartbeat switch is on. This module wires the page together.

import { pollCluster } from './cluster.js';
import { $ } from './dom.js';
import { followEvents } from './events.js';
import { lang, onLanguage, setLanguage, t, translatePage } from './i18n.js';
import { render, tickLeaseBars } from './render.js';
import { scenarios } from './scenarios.js';
import { onChange, txns } from './state.js';
import { renderStore } from './store.js';
import { pollRules, wireLockDelay } from './lockdelay.js';
import { log } from './timeline.js';
import { begin, end, pollLocks } from './transactions.js';

const POLL_MS = 500;

onChange(render);

translatePage();
$('#lang').value = lang();
$('#lang').addEventListener('change', (ev) => setLanguage(ev.target.value));
// Everything drawn with words is drawn again in the new language (the timeline keeps the
// lines already written).
onLanguage(() => {
  showNote();
  render();
  renderStore();
  pollCluster();
  pollRules();
});

// A new key is tried at once, not at the next polls.
$('#api-key').addEventListener('change', () => {
  pollCluster();
  pollLocks();
  pollRules();
});

function showNote() {
  $('#scenario-note').textContent = t(`note.${$('#scenario').value}`);
}
$('#scenario').addEventListener('change', showNote);
showNote();

$('#run-scenario').addEventListener('click', async () => {
  const name = $('#scenario').value;
  const btn = $('#run-scenario');
  btn.disabled = true;
  // A fresh namespace per run, so earlier runs (or other people) never interfere.
  const ns = `pg-${name}-${Date.now().toString(36)}`;
  log(t('log.scenario', { name: $('#scenario').selectedOptions[0].textContent, ns }));
  try {
    await scenarios[name].run(ns);
  } catch (e) {
    log(t('log.scenarioFailed', { msg: e.message }), 'bad');
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
    log(t('log.beginFailed', { kind: e.kind || e.code, msg: e.message }), 'bad');
  }
});

render();
renderStore();
wireLockDelay();
followEvents();
pollCluster();
setInterval(tickLeaseBars, 200);
setInterval(pollLocks, POLL_MS);
setInterval(pollCluster, 1000);
pollLocks();
