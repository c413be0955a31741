// The lock-delay control: set how long a revoked holder's keys stay unavailable in
// namespaces starting with a prefix (an operator call: needs an admin key on a server with
// a keys file), and show the rules in force. The delayed keys themselves are drawn with
// the locks (render.js), from the server's lock table.

import { api } from './api.js';
import { $, h } from './dom.js';
import { t } from './i18n.js';
import { log } from './timeline.js';

let rules = [];

function draw() {
  const box = $('#lock-delay-rules');
  box.replaceChildren();
  if (!rules.length) { box.append(t('lockDelay.none')); return; }
  for (const r of rules) {
    box.append(h('span', { class: 'chip', dataset: { prefix: r.namespace_prefix } },
      t('lockDelay.rule', { prefix: r.namespace_prefix, s: (r.delay_ms / 1000).toFixed(1) })));
  }
}

export async function pollRules() {
  try {
    rules = (await api('GET', '/api/v1/lock-delays')).rules;
    draw();
  } catch (e) {
    $('#lock-delay-rules').textContent = t('lockDelay.unreadable', { msg: e.message });
  }
}

export function wireLockDelay() {
  $('#lock-delay').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    const prefix = String(f.get('prefix')).trim();
    const ms = Number(f.get('ms')) || 0;
    try {
      await api('POST', '/api/v1/lock-delays', { namespace_prefix: prefix, delay_ms: ms });
      log(t('log.lockDelaySet', { prefix, s: (ms / 1000).toFixed(1) }));
    } catch (e) {
      log(t('log.lockDelayFailed', { msg: e.message }), 'bad');
    }
    pollRules();
  });
  pollRules();
}
