// DOM helpers shared by the page's modules.

export const $ = (sel, root = document) => root.querySelector(sel);

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** An HTML element: `class`, `on<event>` handlers, `dataset` and plain attributes. */
export function h(tag, attrs = {}, ...kids) {
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
