'use strict';
// Several locks at once, downgrade, token verification and bounded transactions against a
// real dls server.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');
const { Dls } = require('@caerus-dev/sdk');
const { startServer, sleep, eventually, within, waitsInLine } = require('./helpers');

let server;
let dls;

/** A namespace of its own per test, so tests never share keys. */
const ns = () => `node-${randomUUID().slice(0, 12)}`;

before(async () => {
  server = await startServer();
  dls = new Dls.DlsClient({ endpoints: [server.endpoint] });
});

after(async () => {
  await server?.stop();
});

test('acquireLocks grants every lock together, in the order given, with its own token', async () => {
  const n = ns();
  const tx = await dls.beginTransaction();
  try {
    const locks = await tx.acquireLocks([
      { namespace: n, key: 'b' },
      { namespace: n, key: 'a', mode: 'SHARED_READ' },
    ]);
    assert.deepEqual(
      locks.map((l) => [l.key, l.mode]),
      [
        ['b', 'EXCLUSIVE'],
        ['a', 'SHARED_READ'],
      ],
    );
    assert.ok(locks[0].fencingToken < locks[1].fencingToken);
    // Re-entrant: a held lock comes back with its token.
    const again = await tx.acquireLocks([{ namespace: n, key: 'b' }]);
    assert.equal(again[0].fencingToken, locks[0].fencingToken);
  } finally {
    await tx.abort();
  }
});

test('acquireLocks takes nothing while one key is held, then everything', async () => {
  const n = ns();
  const holder = await dls.beginTransaction();
  const multi = await dls.beginTransaction();
  try {
    const held = await holder.acquireLock(n, 'q');
    await assert.rejects(
      multi.acquireLocks(
        [
          { namespace: n, key: 'p' },
          { namespace: n, key: 'q' },
        ],
        { timeoutMs: 0 },
      ),
      Dls.LockTimeoutError,
    );
    assert.deepEqual((await multi.status()).locks, []);
    const waiting = multi.acquireLocks(
      [
        { namespace: n, key: 'p' },
        { namespace: n, key: 'q' },
      ],
      { timeoutMs: 30000 },
    );
    let settled = false;
    waiting.finally(() => (settled = true)).catch(() => {});
    await eventually('the two-lock acquire waits in line for q', () => waitsInLine(dls, n, 'q', multi.id, () => settled));
    assert.equal(settled, false, 'acquireLocks waits while q is held');
    await holder.commit();
    const locks = await within('both locks granted once q is free', waiting);
    assert.deepEqual(
      locks.map((l) => l.key),
      ['p', 'q'],
    );
    assert.ok(locks.every((l) => l.fencingToken > held.fencingToken));
  } finally {
    await multi.abort();
  }
});

test('acquireLocks refuses an empty list, a repeated key and a bad mode', async () => {
  const n = ns();
  const tx = await dls.beginTransaction();
  try {
    await assert.rejects(tx.acquireLocks([]), Dls.InvalidArgumentError);
    await assert.rejects(
      tx.acquireLocks([
        { namespace: n, key: 'k' },
        { namespace: n, key: 'k' },
      ]),
      Dls.InvalidArgumentError,
    );
    await assert.rejects(tx.acquireLocks([{ namespace: n, key: 'k', mode: 'WRITE' }]), Dls.InvalidArgumentError);
    await assert.rejects(async () => tx.acquireLocks('k'), Dls.InvalidArgumentError);
    assert.deepEqual((await tx.status()).locks, []);
  } finally {
    await tx.abort();
  }
});

test('downgrade keeps the token and lets a queued reader in', async () => {
  const n = ns();
  const writer = await dls.beginTransaction();
  const reader = await dls.beginTransaction();
  try {
    const lock = await writer.acquireLock(n, 'doc');
    const waiting = reader.acquireLock(n, 'doc', 'SHARED_READ', { timeoutMs: 30000 });
    let settled = false;
    waiting.finally(() => (settled = true)).catch(() => {});
    await eventually('the reader waits in line for doc', () => waitsInLine(dls, n, 'doc', reader.id, () => settled));
    assert.equal(settled, false, 'the reader waits while the writer holds doc EXCLUSIVE');
    const down = await writer.downgrade(n, 'doc');
    assert.equal(down.mode, 'SHARED_READ');
    assert.equal(down.fencingToken, lock.fencingToken);
    const read = await within('the queued reader granted by the downgrade', waiting);
    assert.ok(read.fencingToken > lock.fencingToken);
    assert.equal(await writer.downgrade(n, 'not-held'), null);
  } finally {
    await writer.abort();
    await reader.abort();
  }
});

test('verifyFencingToken answers whether a token is the current grant', async () => {
  const n = ns();
  const tx = await dls.beginTransaction();
  const lock = await tx.acquireLock(n, 'k');
  const check = await dls.verifyFencingToken(n, 'k', lock.fencingToken);
  assert.equal(check.current, true);
  assert.deepEqual(check.currentTokens, [lock.fencingToken]);
  await tx.commit();
  const after = await dls.verifyFencingToken(n, 'k', lock.fencingToken);
  assert.equal(after.current, false);
  assert.deepEqual(after.currentTokens, []);
  await assert.rejects(dls.verifyFencingToken(n, 'k', -1), Dls.InvalidArgumentError);
});

test('maxDurationMs ends the transaction although it heartbeats; the body sees it lost', async () => {
  const n = ns();
  const started = Date.now();
  await assert.rejects(
    dls.withTransaction(
      async (tx) => {
        await tx.acquireLock(n, 'k');
        // Work that only stops when told: the signal aborts when the server ends it.
        await new Promise((resolve) => tx.signal.addEventListener('abort', resolve, { once: true }));
        await sleep(500);
      },
      { timeoutMs: 10000, maxDurationMs: 800 },
    ),
    (e) => e instanceof Dls.TransactionLostError && e.lostKind === 'EXPIRED',
  );
  assert.ok(Date.now() - started >= 800);
  await assert.rejects(dls.beginTransaction({ maxDurationMs: 10 }), (e) => {
    assert.ok(e instanceof Dls.InvalidArgumentError);
    assert.match(e.message, /max_duration_ms/);
    return true;
  });
});

test('onQueued reports the place in line and the blockers, for one lock and several', async () => {
  const n = ns();
  const holder = await dls.beginTransaction();
  const waiter = await dls.beginTransaction();
  try {
    await holder.acquireLock(n, 'a');
    const seen = [];
    const single = waiter.acquireLock(n, 'a', 'EXCLUSIVE', { timeoutMs: 30000, onQueued: (p) => seen.push(p) });
    for (let i = 0; i < 300 && seen.length === 0; i++) await sleep(10);
    assert.deepEqual(seen, [{ position: 1, blockingTransactionIds: [holder.id] }]);
    await holder.commit();
    await single;

    const other = await dls.beginTransaction();
    const multiSeen = [];
    const multi = other.acquireLocks(
      [
        { namespace: n, key: 'a' },
        { namespace: n, key: 'b' },
      ],
      { timeoutMs: 30000, onQueued: (p) => multiSeen.push(p) },
    );
    for (let i = 0; i < 300 && multiSeen.length === 0; i++) await sleep(10);
    assert.deepEqual(multiSeen[0]?.blockingTransactionIds, [waiter.id]);
    await waiter.commit();
    assert.deepEqual(
      (await multi).map((l) => l.key),
      ['a', 'b'],
    );
    await other.commit();
    await assert.rejects(async () => other.acquireLock(n, 'c', 'EXCLUSIVE', { onQueued: 'nope' }), Dls.InvalidArgumentError);
  } finally {
    await waiter.abort();
  }
});

test('withTransaction hands the body the AbortSignal; locks serialise with JSON.stringify', async () => {
  const n = ns();
  const json = await dls.withTransaction(async (tx, signal) => {
    assert.equal(signal, tx.signal);
    assert.equal(signal.aborted, false);
    const lock = await tx.acquireLock(n, 'k');
    const text = JSON.stringify(lock);
    assert.deepEqual(JSON.parse(text), { namespace: n, key: 'k', mode: 'EXCLUSIVE', fencingToken: lock.fencingToken.toString() });
    // Anything else holding bigints goes through the replacer.
    const status = JSON.parse(JSON.stringify(await tx.status(), Dls.jsonReplacer));
    assert.equal(status.id, tx.id.toString());
    assert.equal(status.locks[0].fencingToken, lock.fencingToken.toString());
    return text;
  });
  assert.match(json, /"fencingToken":"\d+"/);
  await dls.withLock(n, 'k', async (lock, tx, signal) => {
    assert.equal(signal, tx.signal);
    assert.match(JSON.stringify(lock), /"fencingToken":"\d+"/);
  });
  const held = await dls.lock(n, 'k');
  try {
    assert.deepEqual(Object.keys(JSON.parse(JSON.stringify(held))).sort(), ['fencingToken', 'key', 'mode', 'namespace']);
  } finally {
    await held.release();
  }
});
