'use strict';
// Real `dls` servers (binary from env DLS_BIN), started by the test kit's `dls-cluster`
// (env KIT_BIN) on ports the nodes bind themselves, in a temp dir, killed at the end. No
// mocks anywhere in this suite.

const { spawn, execFile, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { promisify } = require('node:util');

const DLS_BIN = process.env.DLS_BIN;
const KIT_BIN = process.env.KIT_BIN;

function requireBin() {
  if (!DLS_BIN || !fs.existsSync(DLS_BIN)) {
    throw new Error(`DLS_BIN must point to the dls binary (got ${JSON.stringify(DLS_BIN)}); run \`make test-node\``);
  }
  return DLS_BIN;
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

/**
 * Nodes run by `dls-cluster --control`: it starts them, waits until every node serves and
 * prints their addresses; `command(line)` sends it one command (`leader`, `kill ID`,
 * `start ID`, ...) and resolves with its answer. Its nodes die with it, and it exits when
 * its stdin closes (`stop()`, or this process ending).
 */
async function startKit(nodes, { certs, probeKey, args = [] } = {}) {
  if (!KIT_BIN || !fs.existsSync(KIT_BIN)) {
    throw new Error(`KIT_BIN must point to dls-cluster (got ${JSON.stringify(KIT_BIN)}); run \`make test-node\``);
  }
  const kitArgs = ['--dls', requireBin(), '--nodes', String(nodes), '--fast-elections', '--control'];
  if (certs) kitArgs.push('--tls', certs.dir);
  if (probeKey) kitArgs.push('--probe-key', probeKey);
  const child = spawn(KIT_BIN, [...kitArgs, '--', ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const gone = new Promise((resolve) => child.once('exit', resolve));
  const lines = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`dls-cluster exited (${await gone}); see its stderr`);
    return value;
  };
  const env = {};
  while (!('DLS_DIR' in env)) {
    const line = await next();
    env[line.slice(0, line.indexOf('='))] = line.slice(line.indexOf('=') + 1);
  }
  return {
    endpoints: env.DLS_ENDPOINTS.split(','),
    http: env.DLS_HTTP.split(','),
    async command(line) {
      child.stdin.write(`${line}\n`);
      const answer = await next();
      if (!answer.startsWith('ok')) throw new Error(`dls-cluster ${line}: ${answer}`);
      return answer.slice(3);
    },
    async stop() {
      child.stdin.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await gone;
      clearTimeout(timer);
    },
  };
}

/**
 * Starts a single-node server, serving once this resolves. With `certs` (from makeCerts)
 * its client and HTTP ports serve TLS and require a client certificate; `args` are extra
 * `dls serve` flags; `probeKey` is a valid API key when `args` require keys.
 */
async function startServer({ certs, args = [], probeKey } = {}) {
  const kit = await startKit(1, { certs, args, probeKey });
  return { endpoint: kit.endpoints[0], httpAddr: kit.http[0], stop: () => kit.stop() };
}

/**
 * Three real nodes authenticated to each other with a cluster secret, fast elections;
 * resolves once every node serves. `leader()` names the node that leads now.
 */
async function startThreeNodes() {
  const kit = await startKit(3);
  const nodes = kit.endpoints.map((endpoint, i) => ({ id: i + 1, endpoint, httpAddr: kit.http[i] }));
  return {
    nodes,
    endpoints: kit.endpoints,
    leader: async () => nodes[Number(await kit.command('leader')) - 1],
    stop: () => kit.stop(),
  };
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
 * a fresh cluster in a temporary directory, trust authentication, reached by its Unix socket
 * in that directory (no TCP port to pick). As root (CI) it runs as the `postgres` user, since PostgreSQL refuses root. Missing
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
  try {
    run('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '-N']);
    const opts = `-k ${dir} -c listen_addresses='' -c fsync=off`;
    run('pg_ctl', ['-D', data, '-l', path.join(dir, 'server.log'), '-w', '-t', '60', '-o', opts, 'start']);
  } catch (e) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw new Error(`starting PostgreSQL failed: ${e.stderr || e.message}`);
  }
  return {
    /** node-postgres connection settings for the `postgres` superuser and database. */
    config: { host: dir, user: 'postgres', database: 'postgres' },
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

module.exports = { metric, eventually, within, waitsInLine, startServer, startThreeNodes, startPostgres, makeCerts, dlsCli, aborted, sleep, requireBin };
