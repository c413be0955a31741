// Starts a real single-node `dls serve` on ports picked at run time, with its own data
// directory; nothing is mocked. DLS_BIN names the binary (the Makefile passes it).
import { execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes, X509Certificate } from 'node:crypto';
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const DLS_BIN = process.env.DLS_BIN || path.resolve('../target/debug/dls');

async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** CA certificates (PEM) of the TLS nodes started here, by origin (`https://127.0.0.1:PORT`). */
const trusted = new Map();

/**
 * Node's fetch, except for the origin of a TLS node started here: Node's fetch cannot be
 * given a CA, so those requests go through node:https trusting that node's CA (never
 * skipping verification). Resolves to a fetch-like `{ ok, status, json(), text() }`.
 */
function request(url, { method = 'GET', headers = {}, body } = {}) {
  const ca = trusted.get(new URL(url).origin);
  if (!ca) return fetch(url, { method, headers, body });
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method, headers, ca, timeout: 5000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => { text += chunk; });
      res.on('end', () => resolve({
        ok: res.statusCode >= 200 && res.statusCode < 300,
        status: res.statusCode,
        text: async () => text,
        json: async () => JSON.parse(text),
      }));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url}`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** `dls certs`: a cluster CA and node 1's certificate for 127.0.0.1 and localhost, in `dir`. */
function makeCerts(dir) {
  execFileSync(DLS_BIN, ['certs', 'init', '--dir', dir], { stdio: 'ignore' });
  execFileSync(DLS_BIN, ['certs', 'node', '1', '--host', '127.0.0.1', '--host', 'localhost', '--dir', dir], { stdio: 'ignore' });
  const cert = path.join(dir, 'node-1.pem');
  // What Chromium's --ignore-certificate-errors-spki-list pins: base64 SHA-256 of the key.
  const spki = new X509Certificate(readFileSync(cert)).publicKey.export({ type: 'spki', format: 'der' });
  return {
    ca: readFileSync(path.join(dir, 'ca.pem'), 'utf8'),
    flags: ['--tls-cert', cert, '--tls-key', path.join(dir, 'node-1-key.pem')],
    spkiHash: createHash('sha256').update(spki).digest('base64'),
  };
}

/** `dls keys add`: a new key in the keys file `file` (created if missing); returns the key. */
export function addKey(file, name, extraArgs = []) {
  const out = execFileSync(DLS_BIN, ['keys', 'add', '--file', file, '--name', name, ...extraArgs], { encoding: 'utf8' });
  return out.split('\n')[0].trim();
}

/**
 * Starts a single node. `tls: true`: its client and HTTP ports serve TLS with a node
 * certificate made by `dls certs`; `base` is then https and the handle's `tls` carries the
 * CA (PEM) and the node key's SPKI hash.
 */
export async function startDls(extraArgs = [], { tls = false } = {}) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dls-playground-'));
  const [grpc, http] = [await freePort(), await freePort()];
  const logFile = path.join(dir, 'dls.log');
  const out = openSync(logFile, 'a');
  const certs = tls ? makeCerts(dir) : null;
  const child = spawn(DLS_BIN, ['serve', '--listen', `127.0.0.1:${grpc}`, '--http-listen', `127.0.0.1:${http}`,
    '--data-dir', path.join(dir, 'data'), ...(certs?.flags ?? []), ...extraArgs],
  { stdio: ['ignore', out, out], env: { ...process.env, DLS_LOG: 'info' } });
  const base = `${tls ? 'https' : 'http'}://127.0.0.1:${http}`;
  if (certs) trusted.set(base, certs.ca);
  const deadline = Date.now() + 20000;
  for (;;) {
    try {
      const r = await request(`${base}/readyz`);
      if (r.ok) break;
    } catch { /* not listening yet */ }
    if (child.exitCode !== null || Date.now() > deadline) {
      throw new Error(`dls did not become ready; log:\n${readFileSync(logFile, 'utf8')}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    base,
    tls: certs && { ca: certs.ca, spkiHash: certs.spkiHash },
    log: () => readFileSync(logFile, 'utf8'),
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
      trusted.delete(base);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Starts an n-node cluster; returns each node's HTTP base URL and a way to SIGKILL one. */
export async function startCluster(n) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dls-playground-cluster-'));
  const nodes = [];
  for (let id = 1; id <= n; id++) nodes.push({ id, grpc: await freePort(), peer: await freePort(), http: await freePort() });
  const peers = nodes.map((x) => `${x.id}=127.0.0.1:${x.grpc}/${x.peer}`).join(',');
  // Peers authenticate each other; on loopback a cluster secret is enough.
  const secret = `playground-test-${randomBytes(16).toString('hex')}`;
  for (const x of nodes) {
    const out = openSync(path.join(dir, `node-${x.id}.log`), 'a');
    x.base = `http://127.0.0.1:${x.http}`;
    x.child = spawn(DLS_BIN, ['serve', '--node-id', String(x.id), '--peers', peers, '--http-listen', `127.0.0.1:${x.http}`,
      '--data-dir', path.join(dir, `data-${x.id}`), '--heartbeat-ms', '50', '--election-timeout-ms', '300'],
    { stdio: ['ignore', out, out], env: { ...process.env, DLS_LOG: 'info', DLS_CLUSTER_SECRET: secret } });
  }
  const cluster = {
    nodes,
    /** The leader's id as the given (running) nodes see it, once they all agree. */
    async leader(except = 0) {
      const deadline = Date.now() + 30000;
      for (;;) {
        try {
          const views = await Promise.all(nodes.filter((x) => x.child.exitCode === null && x.child.signalCode === null)
            .map(async (x) => (await (await fetch(`${x.base}/api/v1/cluster`)).json()).leader_id));
          if (views.length && views.every((v) => v === views[0]) && views[0] !== '0' && views[0] !== String(except)) return Number(views[0]);
        } catch { /* starting */ }
        if (Date.now() > deadline) throw new Error('no leader elected');
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    kill(id) { nodes[id - 1].child.kill('SIGKILL'); },
    async stop() {
      for (const x of nodes) {
        if (x.child.exitCode === null && x.child.signalCode === null) {
          x.child.kill('SIGTERM');
          await new Promise((r) => x.child.once('exit', r));
        }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return cluster;
}

/** Calls the HTTP API (over https for a TLS node started here); throws on an error status. */
export async function api(base, method, p, body) {
  const res = await request(base + p, { method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined });
  const data = await res.json();
  if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(data)}`);
  return data;
}

/** Reads server events from the SSE endpoint until `pred` matches one; returns it. */
export async function waitForEvent(base, query, pred, timeoutMs = 20000) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), timeoutMs);
  try {
    const res = await fetch(`${base}/api/v1/events?${query}`, { signal: ctl.signal });
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error('event stream ended');
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const frame = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = frame.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('');
        if (data) {
          const e = JSON.parse(data);
          if (pred(e)) return e;
        }
      }
    }
  } finally {
    clearTimeout(timer);
    ctl.abort();
  }
}
