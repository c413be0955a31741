#!/usr/bin/env node
// sdk-bench (Node): the dls-bench lock cycle through Node client libraries.
//
// Runs one workload against one target for a fixed time with N concurrent async workers in
// this one process (the way a Node service runs concurrent requests: one event loop, one
// client object shared by every request), prints a progress line a second on stderr, checks
// safety as it goes, and prints one JSON result line in dls-bench's format (with `driver`
// and `language` fields) on stdout.
//
// Targets, each written the way a user of that library writes a lock:
//   dls    @caerus-dev/sdk: client.withTransaction(async (tx) => tx.acquireLock(...))
//   etcd   etcd3 (npm): const lock = client.lock(key).ttl(s); await lock.acquire(); await lock.release()
//          (acquire fails at once when the key is taken: retried after 1-5 ms, as for redis)
//   redis  ioredis: SET key owner NX PX ttl (retried after 1-5 ms), compare-and-delete Lua release
//
// The safety check is dls-bench's (bench/src/checker.rs): a grant is recorded after the
// client has it, a release before the client sends it, so a recorded overlap is a real one;
// an exclusive grant must carry a token above every earlier token of its key (DLS: the
// fencing token; etcd: the revision of the Txn that created the lock key, read off its
// response; redis: none, as in dls-bench). A cycle takes one lock, so a holder is never
// blocked in another acquire and every collision counts.
//
// Exit status: 0 ok, 1 failure or no progress, 2 safety violations.
// The SDK module is CAERUS_SDK_MODULE (a path) or '@caerus-dev/sdk' from node_modules.

import { parseArgs } from 'node:util';
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';

const NAMESPACE = 'bench';
const KEPT_SAMPLES = 10;
const DEFAULT_ENDPOINTS = { dls: '127.0.0.1:7070', etcd: '127.0.0.1:2379', redis: '127.0.0.1:6379' };
const USAGE = `usage: sdk-bench.mjs [--target dls|etcd|redis] [--workload uncontended|contended]
  [--clients N] [--duration S] [--warmup S] [--endpoints H:P,...] [--lease-ms MS] [--wait-ms MS]
  [--pids PID,...] [--label TEXT] [--self-test]
Runs the dls-bench lock cycle with N async workers in this process; prints one JSON line.`;

class OpError extends Error {
  constructor(kind, message) {
    super(`${kind}: ${message}`);
    this.kind = kind;
  }
}

/** dls-bench's checker for one-lock cycles: per key, the holder and the highest token. */
export class Checker {
  constructor({ quiet = false } = {}) {
    this.keys = new Map();
    this.violations = 0;
    this.samples = [];
    this.quiet = quiet;
  }
  violation(msg) {
    this.violations += 1;
    if (this.samples.length < KEPT_SAMPLES) {
      if (!this.quiet) console.error(`VIOLATION: ${msg}`);
      this.samples.push(msg);
    }
  }
  granted(key, client, token) {
    let st = this.keys.get(key);
    if (!st) this.keys.set(key, (st = { holder: null, holderToken: null, maxToken: null }));
    if (st.holder !== null) {
      this.violation(`${key}: client ${client} granted EXCLUSIVE (token ${token}) while client ${st.holder} holds it (token ${st.holderToken})`);
    }
    st.holder = client;
    st.holderToken = token;
    if (token !== null && token !== undefined) {
      const t = BigInt(token);
      if (st.maxToken !== null && t <= st.maxToken) {
        this.violation(`${key}: exclusive token ${t} to client ${client} not above earlier token ${st.maxToken}`);
      }
      if (st.maxToken === null || t > st.maxToken) st.maxToken = t;
    }
  }
  releasing(key, client) {
    const st = this.keys.get(key);
    if (st && st.holder === client) st.holder = null;
  }
}

function selfTest() {
  const c = new Checker({ quiet: true });
  const check = (cond, what) => {
    if (!cond) throw new Error(`checker self-test: ${what}`);
  };
  c.granted('k', 1, 5n);
  c.releasing('k', 1);
  c.granted('k', 2, 9n);
  check(c.violations === 0, 'a clean hand-over was flagged');
  c.granted('k', 3, 10n);
  check(c.violations === 1, 'an overlap was missed');
  c.releasing('k', 3);
  c.releasing('k', 2);
  c.granted('k', 4, 10n);
  check(c.violations === 2, 'a token not above the last was missed');
  c.releasing('k', 4);
  c.granted('k', 5, null);
  check(c.violations === 2, 'a grant without token after a release was flagged');
  console.error('sdk-bench.mjs self-test: checker ok');
}

const backoff = () => sleep(1 + Math.random() * 4);

async function dlsTarget(opts) {
  const mod = await import(process.env.CAERUS_SDK_MODULE ? pathToFileURL(process.env.CAERUS_SDK_MODULE).href : '@caerus-dev/sdk');
  const sdk = mod.default ?? mod; // a CommonJS entry imported by path has only a default export
  const client = new sdk.DlsClient({ endpoints: opts.endpoints });
  return {
    driver: '@caerus-dev/sdk',
    async cycle(key, onGrant, onRelease) {
      try {
        await client.withTransaction(
          async (tx) => {
            const lock = await tx.acquireLock(NAMESPACE, key, 'EXCLUSIVE', { timeoutMs: opts.waitMs });
            onGrant(lock.fencingToken);
            onRelease();
          },
          { timeoutMs: opts.leaseMs },
        );
      } catch (e) {
        if (e instanceof sdk.DlsError) throw new OpError(e.code, e.message);
        throw e;
      }
    },
    async close() {},
  };
}

async function etcdTarget(opts) {
  const { Etcd3, EtcdLockFailedError } = await import('etcd3');
  const { ComparatorBuilder } = await import('etcd3/lib/builder.js');
  // etcd3's Lock keeps no token: its acquire is a Txn "create the key if absent"; that Txn's
  // revision is the lock key's create revision, which orders the holders. Read it off the
  // response as it passes (no extra round trip), by key, since workers share the client.
  const revisions = new Map();
  const commit = ComparatorBuilder.prototype.commit;
  ComparatorBuilder.prototype.commit = async function commitAndKeepRevision() {
    const res = await commit.call(this);
    const cmp = await this.request?.compare?.[0]; // the builder keeps its clauses as promises
    if (res.succeeded && cmp?.key) revisions.set(Buffer.from(cmp.key).toString(), BigInt(res.header.revision));
    return res;
  };
  let hosts = opts.endpoints.map((e) => `http://${e}`);
  const probe = new Etcd3({ hosts });
  // Talk to the leader: a follower forwards every write, which would add a hop to etcd.
  const status = await probe.maintenance.status({});
  const members = await probe.cluster.memberList({});
  const leader = members.members.find((m) => m.ID === status.leader);
  if (leader?.clientURLs?.length) hosts = [leader.clientURLs[0]];
  probe.close();
  const client = new Etcd3({ hosts });
  const ttl = Math.max(1, Math.floor(opts.leaseMs / 1000));
  return {
    driver: 'etcd3 (npm)',
    async cycle(key, onGrant, onRelease) {
      const deadline = Date.now() + opts.waitMs;
      let lock;
      for (;;) {
        lock = client.lock(key).ttl(ttl);
        try {
          await lock.acquire();
          break;
        } catch (e) {
          if (!(e instanceof EtcdLockFailedError)) throw new OpError('ETCD_ERROR', String(e.message ?? e));
          if (Date.now() >= deadline) throw new OpError('LOCK_TIMEOUT', `${key} still taken after ${opts.waitMs} ms`);
          await backoff();
        }
      }
      const token = revisions.get(key);
      revisions.delete(key);
      if (token === undefined) {
        await lock.release();
        throw new OpError('ETCD_ERROR', 'no revision seen on the acquiring Txn');
      }
      try {
        onGrant(token);
      } finally {
        onRelease();
        await lock.release();
      }
    },
    async close() {
      client.close();
    },
  };
}

const RELEASE_LUA = 'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end';

async function redisTarget(opts) {
  const { default: Redis } = await import('ioredis');
  const [host, port] = [opts.endpoints[0].slice(0, opts.endpoints[0].lastIndexOf(':')), Number(opts.endpoints[0].split(':').pop())];
  const redis = new Redis({ host, port, lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  redis.defineCommand('releaseLock', { numberOfKeys: 1, lua: RELEASE_LUA });
  return {
    driver: 'ioredis',
    async cycle(key, onGrant, onRelease) {
      const owner = randomUUID();
      const deadline = Date.now() + opts.waitMs;
      while ((await redis.set(key, owner, 'PX', opts.leaseMs, 'NX')) !== 'OK') {
        if (Date.now() >= deadline) throw new OpError('LOCK_TIMEOUT', `${key} still taken after ${opts.waitMs} ms`);
        await backoff();
      }
      let deleted;
      try {
        onGrant(null);
      } finally {
        onRelease();
        deleted = await redis.releaseLock(key, owner);
      }
      if (deleted !== 1) throw new OpError('LEASE_LOST', `${key} was no longer ours at release`);
    },
    async close() {
      redis.disconnect();
    },
  };
}

const TARGETS = { dls: dlsTarget, etcd: etcdTarget, redis: redisTarget };

function cpuTicks(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(')').pop().trim().split(/\s+/);
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return null;
  }
}

function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  const i = Math.min(Math.max(Math.ceil(p * sorted.length), 1), sorted.length) - 1;
  return sorted[i] / 1000;
}

const nowMs = () => performance.now();

async function run(o) {
  const target = await TARGETS[o.target](o);
  const checker = new Checker();
  const prefix = `n${randomBytes(4).toString('hex')}`;
  const errors = {};
  const firstErrors = [];
  const lat = [];
  let cycles = 0;
  const start = nowMs();
  const measureFrom = start + o.warmup * 1000;
  const end = measureFrom + o.duration * 1000;
  const tag = `[${o.target}/${target.driver} ${o.workload} c=${o.clients}]`;

  async function worker(client) {
    const key = o.workload === 'uncontended' ? `${prefix}-u${client}` : `${prefix}-contended`;
    const onGrant = (token) => checker.granted(key, client, token);
    const onRelease = () => checker.releasing(key, client);
    for (;;) {
      const t0 = nowMs();
      if (t0 >= end) return;
      try {
        await target.cycle(key, onGrant, onRelease);
      } catch (e) {
        const kind = e instanceof OpError ? e.kind : e?.constructor?.name ?? 'Error';
        if (t0 >= measureFrom) {
          errors[kind] = (errors[kind] ?? 0) + 1;
          if (firstErrors.length < 5) firstErrors.push(e instanceof OpError ? e.message : `${kind}: ${e?.message ?? e}`);
        }
        await sleep(10); // do not spin on a failing server
        continue;
      }
      const t1 = nowMs();
      if (t0 >= measureFrom && t1 <= end) {
        lat.push(Math.round((t1 - t0) * 1000));
        cycles += 1;
      }
    }
  }

  let cpuBefore = null;
  let cpuAt = null;
  let last = 0;
  const ticker = setInterval(() => {
    const phase = nowMs() >= measureFrom ? '' : ' (warmup)';
    console.error(`${tag} t=${((nowMs() - start) / 1000).toFixed(0)}s ${cycles - last} cycles/s total=${cycles} violations=${checker.violations}${phase}`);
    last = cycles;
  }, 1000);
  const cpuTimer = setTimeout(() => {
    cpuAt = nowMs();
    cpuBefore = o.pids.map(cpuTicks);
  }, Math.max(0, measureFrom - nowMs()));
  let cpuAfter = null;
  let cpuEndAt = null;
  const cpuEndTimer = setTimeout(() => {
    cpuEndAt = nowMs();
    cpuAfter = o.pids.map(cpuTicks);
  }, Math.max(0, end - nowMs()));
  const workers = [];
  for (let c = 0; c < o.clients; c++) workers.push(worker(c));
  const grace = o.waitMs + 20_000;
  const stopped = await Promise.race([Promise.all(workers).then(() => true), sleep(end - nowMs() + grace).then(() => false)]);
  clearInterval(ticker);
  clearTimeout(cpuTimer);
  clearTimeout(cpuEndTimer);
  if (!stopped) {
    console.error(`sdk-bench.mjs: a worker did not stop within ${grace} ms of the end`);
    return 1;
  }
  await target.close();
  const measuredS = cpuAt !== null && cpuEndAt !== null ? (cpuEndAt - cpuAt) / 1000 : o.duration;
  const cpu = {};
  if (cpuBefore && cpuAfter) {
    const hz = 100; // USER_HZ: 100 on every Linux ABI Node runs on
    o.pids.forEach((pid, i) => {
      if (cpuBefore[i] !== null && cpuAfter[i] !== null) cpu[String(pid)] = Math.round(((cpuAfter[i] - cpuBefore[i]) / hz / measuredS) * 100 * 1000) / 1000;
    });
  }
  lat.sort((a, b) => a - b);
  const rd = (x) => Math.round(x * 1000) / 1000;
  const errorTotal = Object.values(errors).reduce((a, b) => a + b, 0);
  const cpus = Object.values(cpu);
  const result = {
    target: o.target,
    workload: o.workload,
    clients: o.clients,
    label: o.label ?? null,
    endpoints: o.endpoints.join(','),
    duration_s: rd(measuredS),
    cycles: lat.length,
    throughput: rd(lat.length / Math.max(measuredS, 1e-9)),
    p50_ms: rd(percentile(lat, 0.5)),
    p90_ms: rd(percentile(lat, 0.9)),
    p99_ms: rd(percentile(lat, 0.99)),
    max_ms: rd(percentile(lat, 1)),
    errors: errorTotal,
    errors_by_kind: errors,
    first_errors: firstErrors,
    deadlocks: 0,
    violations: checker.violations,
    violation_samples: checker.samples,
    alive: null,
    cpu_pct: cpu,
    leader_cpu_pct: cpus.length ? Math.max(...cpus) : null,
    group_commit: null,
    language: 'node',
    driver: target.driver,
    concurrency: `${o.clients} async worker(s) in one process, one shared client`,
  };
  console.log(JSON.stringify(result));
  console.error(`${tag} ${result.throughput.toFixed(1)} cycles/s, p50 ${result.p50_ms.toFixed(2)} ms, p99 ${result.p99_ms.toFixed(2)} ms, errors ${errorTotal} ${JSON.stringify(errors)}, violations ${checker.violations}`);
  if (checker.violations > 0) {
    console.error(`sdk-bench.mjs: ${checker.violations} SAFETY VIOLATION(S)`);
    return 2;
  }
  if (lat.length === 0) {
    console.error('sdk-bench.mjs: no progress: no lock cycle completed');
    return 1;
  }
  return 0;
}

async function main() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        target: { type: 'string', default: 'dls' },
        workload: { type: 'string', default: 'uncontended' },
        clients: { type: 'string', default: '1' },
        duration: { type: 'string', default: '10' },
        warmup: { type: 'string', default: '2' },
        endpoints: { type: 'string' },
        'lease-ms': { type: 'string', default: '15000' },
        'wait-ms': { type: 'string', default: '10000' },
        pids: { type: 'string', default: '' },
        label: { type: 'string' },
        'self-test': { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }));
  } catch (e) {
    console.error(`${e.message}\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (values['self-test']) {
    selfTest();
    return 0;
  }
  if (!TARGETS[values.target] || !['uncontended', 'contended'].includes(values.workload)) {
    console.error(`unknown --target or --workload\n${USAGE}`);
    return 2;
  }
  const o = {
    target: values.target,
    workload: values.workload,
    clients: Number(values.clients),
    duration: Number(values.duration),
    warmup: Number(values.warmup),
    endpoints: (values.endpoints ?? DEFAULT_ENDPOINTS[values.target]).split(',').map((s) => s.trim()).filter(Boolean),
    leaseMs: Number(values['lease-ms']),
    waitMs: Number(values['wait-ms']),
    pids: values.pids.split(',').filter((p) => p.trim()).map(Number),
    label: values.label,
  };
  if (!(o.clients >= 1)) {
    console.error('--clients must be at least 1');
    return 2;
  }
  return run(o);
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(`sdk-bench.mjs: ${e?.stack ?? e}`);
    process.exit(1);
  },
);
