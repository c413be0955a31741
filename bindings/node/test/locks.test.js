'use strict';
// Locks against a real dls server: modes, acquire timeout, fencing order, withTransaction
// semantics and 200 concurrent acquires from one process.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Dls } = require('@caerus-dev/sdk');
const { eventually, metric, startServer, sleep } = require('./helpers');

let server;
let dls;

before(async () => {
  server = await startServer();
  dls = new Dls.DlsClient({ endpoints: [server.endpoint] });
});

after(async () => {
  await server?.stop();
});

test('fencing tokens are bigints and strictly increase across grants', async () => {
  const tokens = [];
  for (let i = 0; i < 3; i++) {
    await dls.withTransaction(async (tx) => {
      const lock = await tx.acquireLock('fence', 'k', 'EXCLUSIVE', { timeoutMs: 5000 });
      assert.equal(typeof lock.fencingToken, 'bigint');
      assert.equal(lock.namespace, 'fence');
      assert.equal(lock.key, 'k');
      assert.equal(lock.mode, 'EXCLUSIVE');
      tokens.push(lock.fencingToken);
    });
  }
  assert.ok(tokens[0] < tokens[1] && tokens[1] < tokens[2], `tokens ${tokens}`);
  // Re-entrant: the same grant and token again.
  const tx = await dls.beginTransaction({ timeoutMs: 10000 });
  const a = await tx.acquireLock('fence', 'k2');
  const b = await tx.acquireLock('fence', 'k2');
  assert.equal(a.fencingToken, b.fencingToken);
  assert.ok(a.fencingToken > tokens[2]);
  await tx.commit();
});

test('SHARED_READ locks coexist; EXCLUSIVE excludes them; bad mode is INVALID_ARGUMENT', async () => {
  const r1 = await dls.beginTransaction();
  const r2 = await dls.beginTransaction();
  const w = await dls.beginTransaction();
  try {
    const l1 = await r1.acquireLock('modes', 'doc', 'SHARED_READ', { timeoutMs: 5000 });
    const l2 = await r2.acquireLock('modes', 'doc', 'SHARED_READ', { timeoutMs: 5000 });
    assert.equal(l1.mode, 'SHARED_READ');
    assert.equal(l2.mode, 'SHARED_READ');
    assert.notEqual(l1.fencingToken, l2.fencingToken);
    await assert.rejects(w.acquireLock('modes', 'doc', 'EXCLUSIVE', { timeoutMs: 200 }), Dls.LockTimeoutError);
    await r1.release('modes', 'doc');
    await r2.commit();
    const lw = await w.acquireLock('modes', 'doc', 'EXCLUSIVE', { timeoutMs: 5000 });
    assert.ok(lw.fencingToken > l2.fencingToken);
    // A reader now waits behind the writer.
    await assert.rejects(r1.acquireLock('modes', 'doc', 'SHARED_READ', { timeoutMs: 200 }), Dls.LockTimeoutError);
    await assert.rejects(w.acquireLock('modes', 'x', 'WRITE'), (e) => {
      assert.ok(e instanceof Dls.InvalidArgumentError);
      assert.equal(e.code, 'INVALID_ARGUMENT');
      return true;
    });
  } finally {
    await Promise.all([r1.abort(), r2.abort(), w.abort()]);
  }
});

test('acquire timeout rejects with LockTimeoutError and the transaction stays active', async () => {
  const holder = await dls.beginTransaction({ name: 'holder' });
  const waiter = await dls.beginTransaction({ name: 'waiter', priority: 5 });
  try {
    await holder.acquireLock('timeouts', 'k', 'EXCLUSIVE');
    const err = await waiter.acquireLock('timeouts', 'k', 'EXCLUSIVE', { timeoutMs: 300 }).then(
      () => assert.fail('acquired a held lock'),
      (e) => e,
    );
    assert.ok(err instanceof Dls.LockTimeoutError, `got ${err}`);
    assert.ok(err instanceof Dls.DlsError);
    assert.ok(err instanceof Error);
    assert.equal(err.code, 'LOCK_TIMEOUT');
    assert.equal(err.name, 'LockTimeoutError');
    assert.ok(err.message.length > 0);
    const status = await waiter.status();
    assert.equal(status.state, 'ACTIVE');
    assert.equal(status.name, 'waiter');
    assert.equal(status.priority, 5);
    assert.equal(status.id, waiter.id);
    assert.equal(typeof status.id, 'bigint');
    const hs = await holder.status();
    assert.deepEqual(hs.locks.map((l) => [l.namespace, l.key, l.mode]), [['timeouts', 'k', 'EXCLUSIVE']]);
  } finally {
    await holder.abort();
    await waiter.abort();
  }
});

test('withTransaction returns the value and commits; a throw aborts, is rethrown and frees the locks', async () => {
  let id;
  const value = await dls.withTransaction(async (tx) => {
    await tx.acquireLock('wt', 'k');
    id = tx.id; // known once the first call (the acquire) began the transaction
    return { ok: 42 };
  });
  assert.deepEqual(value, { ok: 42 });
  assert.equal((await dls.transactionStatus(id)).state, 'COMMITTED');

  class Boom extends Error {}
  await assert.rejects(
    dls.withTransaction(async (tx) => {
      await tx.acquireLock('wt', 'k');
      id = tx.id;
      throw new Boom('business failure');
    }),
    Boom,
  );
  assert.equal((await dls.transactionStatus(id)).state, 'ABORTED');
  // The lock was released: another transaction gets it.
  await dls.withTransaction(async (tx) => {
    await tx.acquireLock('wt', 'k', 'EXCLUSIVE', { timeoutMs: 5000 });
  });
  // A synchronous callback works too.
  assert.equal(await dls.withTransaction(() => 'sync'), 'sync');
  // Using the transaction after it ended is TRANSACTION_LOST.
  const tx = await dls.beginTransaction();
  await tx.commit();
  await assert.rejects(tx.acquireLock('wt', 'z'), Dls.TransactionLostError);
  await assert.rejects(dls.transactionStatus(-1), Dls.InvalidArgumentError);
});

test('200 concurrent acquires from one process never overlap and tokens follow critical-section order', async () => {
  const N = 200;
  let inside = 0;
  let maxInside = 0;
  const order = [];
  await Promise.all(
    Array.from({ length: N }, (_, i) =>
      dls.withTransaction(
        async (tx) => {
          const lock = await tx.acquireLock('concurrency', 'counter', 'EXCLUSIVE', { timeoutMs: 120000 });
          inside += 1;
          maxInside = Math.max(maxInside, inside);
          order.push(lock.fencingToken);
          await sleep(i % 3); // yield to the event loop inside the critical section
          inside -= 1;
        },
        { timeoutMs: 30000, name: `worker-${i}` },
      ),
    ),
  );
  assert.equal(order.length, N);
  assert.equal(maxInside, 1);
  for (let i = 1; i < N; i++) {
    assert.ok(order[i] > order[i - 1], `token ${order[i]} after ${order[i - 1]} at ${i}`);
  }
});

test('withTransaction, transaction(), lock() and withLock begin in their first acquire (two writes per cycle)', async () => {
  const before = await metric(server, 'dls_proposed_commands_total');
  const tokens = [];
  await dls.withTransaction(async (tx) => {
    assert.equal(tx.id, 0n, 'nothing is sent before the first call');
    tokens.push((await tx.acquireLock('one', 'k')).fencingToken);
    assert.ok(tx.id > 0n);
  });
  const tx = dls.transaction({ timeoutMs: 5000 });
  assert.equal(tx.leaseMs, 5000);
  tokens.push((await tx.acquireLock('one', 'k')).fencingToken);
  await tx.commit();
  assert.equal((await dls.transactionStatus(tx.id)).state, 'COMMITTED');
  const held = await dls.lock('one', 'k', { timeoutMs: 5000, leaseMs: 5000, name: 'held' });
  assert.equal(held.key, 'k');
  assert.equal(held.mode, 'EXCLUSIVE');
  assert.equal((await held.transaction.status()).locks[0].fencingToken, held.fencingToken);
  assert.equal(held.signal.aborted, false);
  tokens.push(held.fencingToken);
  await held[Symbol.asyncDispose](); // what `await using` calls
  assert.equal((await dls.transactionStatus(held.transaction.id)).state, 'COMMITTED');
  tokens.push(await dls.withLock('one', 'k', (lock, t) => (assert.ok(t.id > 0n), lock.fencingToken)));
  for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `tokens increase: ${tokens}`);
  // Begin + acquire in one replicated write, commit in another.
  assert.equal((await metric(server, 'dls_proposed_commands_total')) - before, 2 * tokens.length);
});

test('lock() on a busy key rejects with LockTimeoutError and leaves nothing held; withLock aborts on a throw', async () => {
  const holder = await dls.lock('busy', 'k');
  await assert.rejects(dls.lock('busy', 'k', { timeoutMs: 100 }), Dls.LockTimeoutError);
  await holder.release();
  // Nothing of the timed-out attempt is left queued: the key is free at once.
  await (await dls.lock('busy', 'k', { timeoutMs: 1000 })).release();
  let id;
  await assert.rejects(
    dls.withLock('busy', 'k', (_lock, tx) => {
      id = tx.id;
      throw new Error('boom');
    }),
    /boom/,
  );
  assert.equal((await dls.transactionStatus(id)).state, 'ABORTED');
  await assert.rejects(dls.lock('', 'k'), Dls.InvalidArgumentError);
  await assert.rejects(dls.withLock('busy', 'k'), Dls.InvalidArgumentError);
});

test('timeoutMs 0 is a try-lock: LockTimeoutError at once while held, nothing queued, granted once free', async () => {
  const holder = await dls.beginTransaction({ timeoutMs: 10000 });
  const held = await holder.acquireLock('try', 'k', 'EXCLUSIVE', { timeoutMs: 1000 });
  const other = await dls.beginTransaction({ timeoutMs: 10000 });
  await assert.rejects(other.acquireLock('try', 'k', 'SHARED_READ', { timeoutMs: 0 }), Dls.LockTimeoutError);
  assert.equal((await other.status()).state, 'ACTIVE');
  await holder.commit();
  const lock = await other.acquireLock('try', 'k', 'SHARED_READ', { timeoutMs: 0 });
  assert.ok(lock.fencingToken > held.fencingToken);
  await other.commit();
});

test('a pending call keeps Node running, and nothing keeps it running once every call settled', async () => {
  const { execFile } = require('node:child_process');
  const { once } = require('node:events');
  const holder = await dls.lock('alive', 'k');
  const script = `
    const { Dls } = require(${JSON.stringify(require('node:path').join(__dirname, '..'))});
    const dls = new Dls.DlsClient({ endpoints: [${JSON.stringify(server.endpoint)}] });
    dls.lock('alive', 'k', { timeoutMs: 30000 }).then(async (held) => {
      console.log('granted', held.fencingToken > 0n);
      await held.release();
      console.log('released');
    });`;
  const child = execFile(process.execPath, ['-e', script]);
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = once(child, 'exit');
  // Released only once the child's acquire waits at the server: its "granted" line then
  // proves the pending call kept it running. Its exit ends the wait early, to fail below.
  await eventually("the child's acquire waits in line for alive/k (or the child exited)", async () =>
    child.exitCode !== null || child.signalCode !== null || (await waiters('alive', 'k')).length === 1,
  );
  assert.equal(child.exitCode, null, `the waiting acquire must keep the child alive; it printed: ${out}`);
  await holder.release();
  const timer = setTimeout(() => child.kill('SIGKILL'), 10000);
  const [code, signal] = await exited;
  clearTimeout(timer);
  assert.equal(signal, null, `the child did not exit by itself after its last call settled: ${out}`);
  assert.equal(code, 0, out);
  assert.equal(out, 'granted true\nreleased\n');
});

/** The transactions waiting for `ns/key`, by the leader's table (upgrade flag with each). */
async function waiters(ns, key) {
  const entry = (await dls.listLocks(ns)).find((k) => k.key === key);
  return (entry?.waiters ?? []).map((w) => [w.transactionId, w.upgrade]);
}

test('an AbortSignal withdraws a waiting acquire: the queue empties and nobody gets the lock', { timeout: 30_000 }, async () => {
  const holder = await dls.beginTransaction({ name: 'holder' });
  const waiter = await dls.beginTransaction({ name: 'waiter' });
  try {
    await holder.acquireLock('abort', 'k', 'EXCLUSIVE');
    const controller = new AbortController();
    const pending = waiter.acquireLock('abort', 'k', 'EXCLUSIVE', { timeoutMs: 3_600_000, signal: controller.signal });
    await eventually('the waiter in the queue', async () => (await waiters('abort', 'k')).length === 1);
    assert.deepEqual(await waiters('abort', 'k'), [[waiter.id, false]]);
    const reason = new Error('the caller gave up');
    controller.abort(reason);
    await assert.rejects(pending, (e) => e === reason);
    await eventually('the withdrawn wait leaves the queue', async () => (await waiters('abort', 'k')).length === 0);
    await holder.commit();
    const st = await waiter.status();
    assert.equal(st.state, 'ACTIVE');
    assert.deepEqual([st.locks.length, st.waiting ?? null], [0, null]);
    assert.ok(!(await dls.listLocks('abort')).some((k) => k.key === 'k'), 'nobody holds the key');
    // An aborted signal rejects at once, and the options are checked.
    await assert.rejects(waiter.acquireLock('abort', 'k', 'EXCLUSIVE', { signal: AbortSignal.abort(reason) }), (e) => e === reason);
    await assert.rejects(waiter.acquireLock('abort', 'k', 'EXCLUSIVE', { signal: {} }), Dls.InvalidArgumentError);
    // A later acquire of the same key is granted and kept.
    const lock = await waiter.acquireLock('abort', 'k', 'EXCLUSIVE', { signal: new AbortController().signal });
    assert.equal((await waiter.status()).locks[0].fencingToken, lock.fencingToken);
  } finally {
    await Promise.all([holder.abort(), waiter.abort()]);
  }
});

test('an AbortSignal withdraws a waiting upgrade and the shared hold stays', { timeout: 30_000 }, async () => {
  const a = await dls.beginTransaction();
  const b = await dls.beginTransaction();
  try {
    const shared = await a.acquireLock('abort', 'up', 'SHARED_READ');
    await b.acquireLock('abort', 'up', 'SHARED_READ');
    const controller = new AbortController();
    const upgrade = a.acquireLock('abort', 'up', 'EXCLUSIVE', { timeoutMs: 3_600_000, signal: controller.signal });
    await eventually('the upgrade in the queue', async () => (await waiters('abort', 'up')).length === 1);
    assert.deepEqual(await waiters('abort', 'up'), [[a.id, true]]);
    controller.abort();
    await assert.rejects(upgrade, (e) => e.name === 'AbortError');
    await eventually('the withdrawn upgrade leaves the queue', async () => (await waiters('abort', 'up')).length === 0);
    await b.commit();
    const st = await a.status();
    assert.deepEqual(
      st.locks.map((l) => [l.mode, l.fencingToken]),
      [['SHARED_READ', shared.fencingToken]],
    );
  } finally {
    await Promise.all([a.abort(), b.abort()]);
  }
});
