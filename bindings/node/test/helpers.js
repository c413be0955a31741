'use strict';
// Starts a real `dls` server (binary from env DLS_BIN) on free loopback ports in a temp
// dir, and kills it at the end. No mocks anywhere in this suite.

const { spawn, execFile, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const https = require('node:https');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { promisify } = require('node:util');

const DLS_BIN = process.env.DLS_BIN;

function requireBin() {
  if (!DLS_BIN || !fs.existsSync(DLS_BIN)) {
    throw new Error(`DLS_BIN must point to the dls binary (got ${JSON.stringify(DLS_BIN)}); run \`make dls-debug\``);
  }
  return DLS_BIN;
}

/** A listener on `port`, or null when the port is taken. */
function holdPort(port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', () => resolve(null));
    srv.listen(port, '127.0.0.1', () => resolve(srv));
  });
}

// Test ports come from below Linux's ephemeral range (32768-60999), where outgoing
// connections take their local ports and could take a picked port before the server binds
// it; a port is handed out at most once per test process (as the Rust test kit does).
const PORT_RANGE = [20000, 32768];
const handedOut = new Set();

/**
 * `n` distinct ports that were free a moment ago. They are held together before any is
 * let go, and never handed out twice: two nodes told the same port make a cluster that is
 * not the one the test meant.
 */
async function freePorts(n) {
  const held = [];
  try {
    for (let tries = 0; held.length < n && tries < 50_000; tries++) {
      const port = PORT_RANGE[0] + Math.floor(Math.random() * (PORT_RANGE[1] - PORT_RANGE[0]));
      if (handedOut.has(port)) continue;
      const srv = await holdPort(port);
      if (!srv) continue;
      handedOut.add(port);
      held.push(srv);
    }
    if (held.length < n) throw new Error(`no ${n} free loopback ports left in ${PORT_RANGE.join('..')}`);
    return held.map((srv) => srv.address().port);
  } finally {
    await Promise.all(held.map((srv) => new Promise((r) => srv.close(r))));
  }
}

function portIsFree(port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * A cluster CA, node 1's certificate (127.0.0.1, localhost) and a client certificate
 * `client-app`, made by `dls certs` in a new temporary directory.
 */
function makeCerts() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'caerus-node-certs-'));
  for (const args of [['init'], ['node', '1', '--host', '127.0.0.1', '--host', 'localhost'], ['client', 'app']]) {
    execFileSync(requireBin(), ['certs', ...args, '--dir', dir], { stdio: 'ignore' });
  }
  const file = (name) => path.join(dir, name);
  return {
    dir,
    ca: file('ca.pem'),
    clientCert: file('client-app.pem'),
    clientKey: file('client-app-key.pem'),
    remove: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}

/** GET on the HTTP port; over https with `certs` (the CA and the client certificate). */
function httpGetStatus(url, certs) {
  const options = certs
    ? { ca: fs.readFileSync(certs.ca), cert: fs.readFileSync(certs.clientCert), key: fs.readFileSync(certs.clientKey) }
    : {};
  return new Promise((resolve, reject) => {
    const req = (certs ? https : http).get(url, { ...options, timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

/**
 * Starts a single-node server; `port` may be fixed (else a free one). With `certs` (from
 * makeCerts) its client and HTTP ports serve TLS and require a client certificate; `args`
 * are extra `dls serve` flags.
 */
async function startServer({ port, certs, args = [] } = {}) {
  const bin = requireBin();
  const [picked, httpPort] = await freePorts(2);
  const grpcPort = port ?? picked;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'caerus-node-test-'));
  const endpoint = `127.0.0.1:${grpcPort}`;
  const logPath = path.join(dataDir, 'server.log');
  const log = fs.openSync(logPath, 'a');
  const tlsArgs = certs
    ? ['--tls-cert', path.join(certs.dir, 'node-1.pem'), '--tls-key', path.join(certs.dir, 'node-1-key.pem'), '--tls-client-ca', certs.ca]
    : [];
  const child = spawn(
    bin,
    ['serve', '--listen', endpoint, '--http-listen', `127.0.0.1:${httpPort}`, '--data-dir', path.join(dataDir, 'data'), '--log', 'warn', ...tlsArgs, ...args],
    { stdio: ['ignore', log, log] },
  );
  let exited = null;
  child.on('exit', (code, signal) => {
    exited = { code, signal };
  });
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exited) {
      throw new Error(`dls exited early (${JSON.stringify(exited)}):\n${fs.readFileSync(logPath, 'utf8')}`);
    }
    try {
      const scheme = certs ? 'https' : 'http';
      if ((await httpGetStatus(`${scheme}://127.0.0.1:${httpPort}/readyz`, certs)) === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`dls not ready within 60 s:\n${fs.readFileSync(logPath, 'utf8')}`);
    }
    await sleep(100);
  }
  return {
    endpoint,
    grpcPort,
    httpAddr: `127.0.0.1:${httpPort}`,
    dataDir,
    async stop() {
      if (!exited) {
        const gone = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await gone;
        clearTimeout(timer);
      }
      fs.closeSync(log);
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** GET a JSON document over plain HTTP. */
function httpJson(url) {
  return new Promise((resolve, reject) => {
    http
      .get(url, { timeout: 2000 }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => {
          try {
            resolve(JSON.parse(body));
          } catch (e) {
            reject(e);
          }
        });
      })
      .on('error', reject)
      .on('timeout', function () {
        this.destroy(new Error('timeout'));
      });
  });
}

/**
 * Three real nodes on free ports (client, peer and HTTP port each), authenticated to each
 * other with a cluster secret, fast elections; resolves once a leader is elected.
 * `leader()` names the node that leads now.
 */
async function startThreeNodes() {
  const bin = requireBin();
  const ports = await freePorts(9);
  const peers = [0, 1, 2].map((i) => `${i + 1}=127.0.0.1:${ports[3 * i]}/127.0.0.1:${ports[3 * i + 1]}`).join(',');
  const secret = `node-secret-${Math.random().toString(16).slice(2)}${Date.now()}`;
  const nodes = [0, 1, 2].map((i) => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `caerus-node3-${i + 1}-`));
    const log = fs.openSync(path.join(dataDir, 'server.log'), 'a');
    const child = spawn(
      bin,
      ['serve', '--node-id', String(i + 1), '--peers', peers, '--http-listen', `127.0.0.1:${ports[3 * i + 2]}`,
        '--data-dir', path.join(dataDir, 'data'), '--heartbeat-ms', '50', '--election-timeout-ms', '300', '--log', 'warn'],
      { stdio: ['ignore', log, log], env: { ...process.env, DLS_CLUSTER_SECRET: secret } },
    );
    const node = { id: i + 1, endpoint: `127.0.0.1:${ports[3 * i]}`, httpAddr: `127.0.0.1:${ports[3 * i + 2]}`, child, log, dataDir };
    // A node that dies on its own takes its log with it when the directory is removed:
    // say so, with the log, so a failing test shows why.
    child.on('exit', (code, signal) => {
      if (!node.stopping) {
        const text = fs.readFileSync(path.join(dataDir, 'server.log'), 'utf8');
        process.stderr.write(`dls node ${i + 1} exited on its own (code ${code}, signal ${signal}):\n${text}\n`);
      }
    });
    return node;
  });
  const cluster = {
    nodes,
    endpoints: nodes.map((n) => n.endpoint),
    async leader() {
      const deadline = Date.now() + 30_000;
      while (Date.now() < deadline) {
        for (const n of nodes) {
          try {
            const c = await httpJson(`http://${n.httpAddr}/api/v1/cluster`);
            if (c.leader_id === c.node_id) return n;
          } catch {
            // not up yet
          }
        }
        await sleep(100);
      }
      throw new Error('no leader within 30 s');
    },
    async stop() {
      for (const n of nodes) {
        n.stopping = true;
        n.child.kill('SIGKILL');
        fs.closeSync(n.log);
        fs.rmSync(n.dataDir, { recursive: true, force: true });
      }
    },
  };
  try {
    await cluster.leader();
  } catch (e) {
    await cluster.stop();
    throw e;
  }
  return cluster;
}

/** An unlabelled counter or gauge from the server's /metrics. */
function metric(server, name) {
  return new Promise((resolve, reject) => {
    http
      .get(`http://${server.httpAddr}/metrics`, { timeout: 5000 }, (res) => {
        let body = '';
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => {
          const line = body.split('\n').find((l) => l.startsWith(`${name} `));
          if (line === undefined) reject(new Error(`no ${name} in /metrics`));
          else resolve(Number(line.split(' ')[1]));
        });
      })
      .on('error', reject);
  });
}

/** Runs the operator CLI against the server: `dls ARGS... --endpoints ENDPOINT`. */
async function dlsCli(server, ...args) {
  const { stdout } = await promisify(execFile)(requireBin(), [...args, '--endpoints', server.endpoint]);
  return stdout;
}

/** A promise that settles when the signal aborts (with its reason). */
function aborted(signal) {
  if (signal.aborted) return Promise.resolve(signal.reason);
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }));
}

/**
 * A throwaway PostgreSQL server: Debian's binaries (package `postgresql`, from `make deps`),
 * a fresh cluster in a temporary directory, trust authentication on 127.0.0.1 and a free
 * port. As root (CI) it runs as the `postgres` user, since PostgreSQL refuses root. Missing
 * binaries throw: the test fails, it is never skipped.
 */
async function startPostgres() {
  const versions = fs.existsSync('/usr/lib/postgresql') ? fs.readdirSync('/usr/lib/postgresql') : [];
  const found = versions
    .filter((v) => fs.existsSync(`/usr/lib/postgresql/${v}/bin/initdb`))
    .sort((a, b) => Number(a) - Number(b));
  const bin = process.env.PG_BIN || (found.length ? `/usr/lib/postgresql/${found.at(-1)}/bin` : null);
  if (!bin || !fs.existsSync(path.join(bin, 'initdb'))) {
    throw new Error(`PostgreSQL server binaries not found (no initdb in ${bin ?? '/usr/lib/postgresql/*/bin'}): run \`make deps\``);
  }
  const root = process.getuid() === 0;
  const run = (program, args) =>
    root
      ? execFileSync('runuser', ['-u', 'postgres', '--', path.join(bin, program), ...args], { stdio: 'pipe' })
      : execFileSync(path.join(bin, program), args, { stdio: 'pipe' });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'caerus-node-pg-'));
  if (root) execFileSync('chown', ['postgres:', dir]);
  const data = path.join(dir, 'data');
  const [port] = await freePorts(1);
  try {
    run('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '-N']);
    const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
    run('pg_ctl', ['-D', data, '-l', path.join(dir, 'server.log'), '-w', '-t', '60', '-o', opts, 'start']);
  } catch (e) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw new Error(`starting PostgreSQL failed: ${e.stderr || e.message}`);
  }
  return {
    port,
    /** node-postgres connection settings for the `postgres` superuser and database. */
    config: { host: '127.0.0.1', port, user: 'postgres', database: 'postgres' },
    async stop() {
      try {
        run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** Polls `probe` (async) until it returns something truthy, which it returns; fails naming `what` after `timeoutMs`. */
async function eventually(what, probe, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(50);
  }
}

/** `promise`, or a failure naming `what` if it has not settled within `timeoutMs`. */
async function within(what, promise, timeoutMs = 30_000) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting until ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * True once the transaction `who` (its name, or its id) is listed waiting for `ns`/`key`
 * (listLocks, an operator call), or once `settled()` says its acquire has finished: an
 * acquire granted when it should have waited then fails the caller's next assertion at once
 * instead of timing out in `eventually`.
 */
async function waitsInLine(dls, ns, key, who, settled = () => false) {
  if (settled()) return true;
  const entry = (await dls.listLocks(ns)).find((k) => k.namespace === ns && k.key === key);
  return (entry?.waiters ?? []).some((w) => w.transactionName === who || w.transactionId === who);
}

module.exports = { metric, eventually, within, waitsInLine, startServer, startThreeNodes, startPostgres, makeCerts, freePorts, portIsFree, dlsCli, aborted, sleep, requireBin };
