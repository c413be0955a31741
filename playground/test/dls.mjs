// Starts a real single-node `dls serve` on ports picked at run time, with its own data
// directory; nothing is mocked. DLS_BIN names the binary (the Makefile passes it).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
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

export async function startDls(extraArgs = []) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'dls-playground-'));
  const [grpc, http] = [await freePort(), await freePort()];
  const logFile = path.join(dir, 'dls.log');
  const out = openSync(logFile, 'a');
  const child = spawn(DLS_BIN, ['serve', '--listen', `127.0.0.1:${grpc}`, '--http-listen', `127.0.0.1:${http}`,
    '--data-dir', path.join(dir, 'data'), ...extraArgs], { stdio: ['ignore', out, out], env: { ...process.env, DLS_LOG: 'info' } });
  const base = `http://127.0.0.1:${http}`;
  const deadline = Date.now() + 20000;
  for (;;) {
    try {
      const r = await fetch(`${base}/readyz`);
      if (r.ok) break;
    } catch { /* not listening yet */ }
    if (child.exitCode !== null || Date.now() > deadline) {
      throw new Error(`dls did not become ready; log:\n${readFileSync(logFile, 'utf8')}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    base,
    log: () => readFileSync(logFile, 'utf8'),
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
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

/** Calls the HTTP API; throws on an error status. */
export async function api(base, method, p, body) {
  const res = await fetch(base + p, { method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined });
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
