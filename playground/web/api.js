// The HTTP API client (/api/v1, see /openapi.json), with the API key the page remembers.

import { $ } from './dom.js';

const keyInput = $('#api-key');
keyInput.value = localStorage.getItem('caerus-api-key') || '';
keyInput.addEventListener('change', () => localStorage.setItem('caerus-api-key', keyInput.value.trim()));

export function authHeaders() {
  const k = keyInput.value.trim();
  return k ? { authorization: `Bearer ${k}` } : {};
}

export class ApiError extends Error {
  constructor(status, err) {
    super(err.message || `HTTP ${status}`);
    this.status = status;
    this.code = err.code;
    this.kind = err.kind;
  }
}

export async function api(method, path, body) {
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
