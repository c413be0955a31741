// The HTTP API client (/api/v1, see /openapi.json), with the API key the page remembers.

import { $ } from './dom.js';
import { t } from './i18n.js';

const keyInput = $('#api-key');
keyInput.value = localStorage.getItem('caerus-api-key') || '';
keyInput.addEventListener('change', () => localStorage.setItem('caerus-api-key', keyInput.value.trim()));

export function authHeaders() {
  const k = keyInput.value.trim();
  return k ? { authorization: `Bearer ${k}` } : {};
}

/**
 * What a refused call asks of the reader, from the HTTP status alone (the server's message
 * is gRPC's, for SDK users: "send metadata `authorization: ...`"): 401 is a missing or
 * unknown key, 403 a key without the right (the page's operator calls need an admin key).
 */
function authProblem(status) {
  if (status === 401) return keyInput.value.trim() ? 'unknownKey' : 'noKey';
  if (status === 403) return 'notAdmin';
  return null;
}

export class ApiError extends Error {
  constructor(status, err) {
    const auth = authProblem(status);
    super(auth ? t(`auth.${auth}`) : err.message || `HTTP ${status}`);
    this.status = status;
    this.auth = auth;
    this.code = err.code;
    this.kind = err.kind;
    // What ended the transaction, as data (LEASE_EXPIRED, DEADLOCK_VICTIM, ...); null if
    // the server did not say.
    this.endCause = err.detail ? err.detail.end_cause : null;
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
