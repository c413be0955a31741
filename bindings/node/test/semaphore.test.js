'use strict';
// Counted semaphores (acquirePermit) through the SDK against a real dls: up to N holders with
// a token each, FIFO, no mixing with lock modes; listLocks shows the permit count.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');
const { Dls } = require('@caerus-dev/sdk');
const { startServer, sleep } = require('./helpers');

let server;
let dls;

before(async () => {
  server = await startServer();
  dls = new Dls.DlsClient({ endpoints: [server.endpoint] });
});

after(async () => {
  await server?.stop();
});

test('a semaphore admits its permit count, queues the rest in order and refuses mixing', async () => {
  const ns = `node-sem-${randomUUID().slice(0, 8)}`;
  const [a, b, c, other] = await Promise.all([0, 1, 2, 3].map(() => dls.beginTransaction()));
  const pa = await a.acquirePermit(ns, 'pool', 2);
  const pb = await b.acquirePermit(ns, 'pool', 2);
  assert.equal(pa.mode, 'SEMAPHORE');
  assert.ok(pb.fencingToken > pa.fencingToken);
  const positions = [];
  const waiting = c.acquirePermit(ns, 'pool', 2, { timeoutMs: 30_000, onQueued: (q) => positions.push(q.position) });
  for (let i = 0; i < 300 && !positions.length; i++) await sleep(10);
  assert.equal(positions[0], 1);
  const [listed] = await dls.listLocks(ns);
  assert.equal(listed.permits, 2);
  assert.deepEqual(listed.holders.map((h) => h.mode), ['SEMAPHORE', 'SEMAPHORE']);
  await assert.rejects(other.acquirePermit(ns, 'pool', 2, { timeoutMs: 0 }), Dls.LockTimeoutError);
  await assert.rejects(other.acquireLock(ns, 'pool', 'EXCLUSIVE', { timeoutMs: 0 }), (e) =>
    e instanceof Dls.InvalidArgumentError && /semaphore with 2 permits/.test(e.message));
  await assert.rejects(other.acquirePermit(ns, 'pool', 0), Dls.InvalidArgumentError);
  assert.equal(await a.release(ns, 'pool'), true);
  const got = await waiting;
  assert.ok(got.fencingToken > pb.fencingToken);
  await Promise.all([b, c, other].map((t) => t.commit()));
});
