'use strict';
// Losing a transaction for real: deadlock victims, operator aborts (the dls CLI and a
// second SDK client), tx.signal, and the event watch that records them.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Dls } = require('@caerus-dev/sdk');
const { startServer, dlsCli, aborted, sleep } = require('./helpers');

let server;
let dls;

before(async () => {
  server = await startServer();
  dls = new Dls.DlsClient({ endpoints: [server.endpoint] });
});

after(async () => {
  await server?.stop();
});

test('a deadlock makes the lower-priority transaction the victim; the other goes on', async () => {
  const important = await dls.beginTransaction({ name: 'important', priority: 10 });
  const victim = await dls.beginTransaction({ name: 'victim', priority: 0 });
  const victimSignal = victim.signal;
  try {
    await important.acquireLock('deadlock', 'a');
    await victim.acquireLock('deadlock', 'b');
    const importantWaits = important.acquireLock('deadlock', 'b', 'EXCLUSIVE', { timeoutMs: 30000 });
    // Wait until `important` is queued on b so the victim's request closes the cycle.
    for (;;) {
      const s = await important.status();
      if (s.waiting) break;
      await sleep(20);
    }
    const err = await victim.acquireLock('deadlock', 'a', 'EXCLUSIVE', { timeoutMs: 30000 }).then(
      () => assert.fail('victim acquired'),
      (e) => e,
    );
    assert.ok(err instanceof Dls.DeadlockVictimError, `got ${err}`);
    assert.equal(err.code, 'DEADLOCK_VICTIM');
    // The cause and the cycle arrive as fields, not as words of the message.
    assert.equal(err.endCause, 'DEADLOCK_VICTIM');
    assert.ok(err.deadlock, 'the victim error carries the broken cycle');
    assert.equal(err.deadlock.victimTransactionId, victim.id);
    assert.equal(err.deadlock.policy, 'LOWEST_PRIORITY_THEN_YOUNGEST');
    const members = err.deadlock.cycle.map((m) => [m.transactionId, m.transactionName, m.key, m.mode]);
    members.sort((x, y) => x[2].localeCompare(y[2]));
    assert.deepEqual(members, [
      [victim.id, 'victim', 'a', 'EXCLUSIVE'],
      [important.id, 'important', 'b', 'EXCLUSIVE'],
    ]);
    const lock = await importantWaits;
    assert.equal(lock.key, 'b');
    const reason = await aborted(victimSignal);
    assert.ok(reason instanceof Dls.DeadlockVictimError, `signal reason ${reason}`);
    assert.equal(reason.lostKind, 'DEADLOCK_VICTIM');
    assert.equal(victim.isLost, true);
    assert.equal(important.signal.aborted, false);
    await important.commit();
    await assert.rejects(victim.commit(), Dls.DlsError);
  } finally {
    await important.abort();
    await victim.abort();
  }
});

test('tx.signal aborts when an operator aborts the transaction (dls txn abort)', async () => {
  const tx = await dls.beginTransaction({ timeoutMs: 3000, name: 'stuck-job' });
  const lock = await tx.acquireLock('ops', 'job');
  const signal = tx.signal;
  assert.equal(signal.aborted, false);
  await dlsCli(server, 'txn', 'abort', String(tx.id), '--reason', 'test abort');
  const reason = await aborted(signal);
  assert.ok(signal.aborted);
  assert.ok(reason instanceof Dls.TransactionLostError, `signal reason ${reason}`);
  assert.equal(reason.lostKind, 'ABORTED');
  assert.equal(tx.lostReason.kind, 'ABORTED');
  await assert.rejects(tx.commit(), Dls.TransactionLostError);
  await assert.rejects(tx.acquireLock('ops', 'other'), Dls.TransactionLostError);
  // The lock was passed on: a new grant with a higher token.
  await dls.withTransaction(async (t2) => {
    const l2 = await t2.acquireLock('ops', 'job', 'EXCLUSIVE', { timeoutMs: 5000 });
    assert.ok(l2.fencingToken > lock.fencingToken);
  });

  // The event log recorded it.
  const watch = dls.watchEvents({ fromSequence: 1 });
  let seen;
  for await (const event of watch) {
    if (event.kind === 'TRANSACTION_ABORTED' && event.transactionId === tx.id) {
      seen = event;
      break;
    }
  }
  assert.equal(seen.reason, 'test abort');
  assert.equal(seen.transactionName, 'stuck-job');
  assert.equal(typeof seen.sequence, 'bigint');
  assert.deepEqual(seen.releasedLocks.map((l) => l.fencingToken), [lock.fencingToken]);
});

test('withTransaction: the body sees tx.signal abort and the call rejects with TransactionLostError', async () => {
  const operator = new Dls.DlsClient({ endpoints: [server.endpoint] });
  const watch = operator.watchEvents({ onlyNew: true, kinds: ['LOCK_REVOKED'] });
  await watch.attached();
  let txId;
  const err = await dls
    .withTransaction(
      async (tx) => {
        await tx.acquireLock('ops', 'guarded');
        txId = tx.id; // known once the first call (the acquire) began the transaction
        // A second client (an operator) aborts this transaction while the body works.
        assert.equal(await operator.abortTransaction(tx.id, 'from a second client'), 'ABORTED');
        await aborted(tx.signal);
        return 'unreachable value';
      },
      { timeoutMs: 3000 },
    )
    .then(
      (v) => assert.fail(`resolved with ${v}`),
      (e) => e,
    );
  assert.ok(err instanceof Dls.TransactionLostError, `got ${err}`);
  assert.equal((await dls.transactionStatus(txId)).state, 'ABORTED');
  const { value: revoked } = await watch.next();
  assert.equal(revoked.kind, 'LOCK_REVOKED');
  assert.equal(revoked.transactionId, txId);
  assert.equal(revoked.key, 'guarded');
  await watch.close();
  assert.deepEqual(await watch.next(), { done: true, value: undefined });
});

test('a committed transaction never fires its signal', async () => {
  const tx = await dls.beginTransaction();
  const signal = tx.signal;
  await tx.acquireLock('ops', 'fine');
  await tx.commit();
  await tx.commit(); // twice is fine
  assert.equal(signal.aborted, false);
  assert.equal(tx.isLost, false);
});
