// The timeline panel: what happened, newest first.

import { $ } from './dom.js';

/** Adds a line; `data` becomes data-* attributes, so tests can read what happened
 *  (`event`, `txn`, `token`) whatever the page's language. */
export function log(text, cls = 'local', data = {}) {
  const li = document.createElement('li');
  li.className = cls;
  Object.assign(li.dataset, data);
  const t = document.createElement('span');
  t.className = 't';
  t.textContent = new Date().toLocaleTimeString();
  li.append(t, document.createTextNode(text));
  $('#log').prepend(li);
  while ($('#log').children.length > 300) $('#log').lastChild.remove();
  return li;
}
