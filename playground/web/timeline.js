// The timeline panel: what happened, newest first.

import { $ } from './dom.js';

export function log(text, cls = 'local') {
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
