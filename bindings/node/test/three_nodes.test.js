'use strict';
// The lock features of issue 22 end to end through the SDK against a real three-node
// cluster: a client that knows every node, and one that knows only a follower (its calls
// are forwarded to the leader).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');
const { Dls } = require('@caerus-dev/sdk');
const { startThreeNodes, aborted, eventually, within, waitsInLine } = require('./helpers');

let cluster;
const clients = {};

before(async () => {
  cluster = await startThreeNodes();
  const leader = await cluster.leader();
  const follower = cluster.nodes.find((n) => n !== leader);
  clients['every node'] = new Dls.DlsClient({ endpoints: cluster.endpoints });
  clients['a follower only'] = new Dls.DlsClient({ endpoints: [follower.endpoint] });
});

after(async () => {
  await cluster?.stop();
});

for (const via of ['every node', 'a follower only']) {
  test(`locks, permits, tokens and bounds through ${via}`, async () => {
    const dls = clients[via];
    const ns = `node3-${randomUUID().slice(0, 8)}`;
    const [a, b, c] = await Promise.all([0, 1, 2].map(() => dls.beginTransaction()));
    const [x, y] = await a.acquireLocks([{ namespace: ns, key: 'x' }, { namespace: ns, key: 'y', mode: 'SHARED_READ' }]);
    await assert.rejects(b.acquireLock(ns, 'x', 'EXCLUSIVE', { timeoutMs: 0 }), Dls.LockTimeoutError);
    assert.equal((await dls.verifyFencingToken(ns, 'x', x.fencingToken)).current, true);
    const down = await a.downgrade(ns, 'x');
    assert.deepEqual([down.mode, down.fencingToken], ['SHARED_READ', x.fencingToken]);
    assert.ok((await b.acquireLock(ns, 'x', 'SHARED_READ', { timeoutMs: 2000 })).fencingToken > y.fencingToken);
    const p1 = await a.acquirePermit(ns, 'pool', 2);
    const p2 = await b.acquirePermit(ns, 'pool', 2);
    assert.ok(p1.mode === 'SEMAPHORE' && p2.fencingToken > p1.fencingToken);
    await assert.rejects(c.acquirePermit(ns, 'pool', 2, { timeoutMs: 0 }), Dls.LockTimeoutError);
    await assert.rejects(c.acquireLock(ns, 'pool', 'EXCLUSIVE', { timeoutMs: 0 }), Dls.InvalidArgumentError);
    await Promise.all([a, b, c].map((t) => t.commit()));
    const bounded = await dls.beginTransaction({ timeoutMs: 10_000, maxDurationMs: 800, lostStream: true });
    await bounded.acquireLock(ns, 'bounded');
    const reason = await aborted(bounded.signal);
    assert.equal(reason.lostKind, 'EXPIRED');
  });

  test(`watch, elect and lock-delay through ${via}`, async () => {
    const dls = clients[via];
    const ns = `node3-${randomUUID().slice(0, 8)}`;
    const election = dls.election(ns, 'leader');
    const first = await election.campaign('first', { leaseMs: 2000 });
    const now = await election.leader();
    assert.deepEqual([now.transactionName, now.fencingToken], ['first', first.term]);
    let settled = false;
    const second = election.campaign('second', { leaseMs: 2000 }).finally(() => (settled = true));
    await eventually('the second candidate waits in line behind the first', () =>
      waitsInLine(dls, ns, 'leader', 'second', () => settled),
    );
    assert.equal(settled, false, 'the second candidate waits while the first leads');
    await first.resign();
    const tookOver = await within('the second candidate leads after the first resigned', second);
    assert.ok(tookOver.term > first.term);
    await tookOver.resign();

    await dls.setLockDelay(ns, 1500);
    const holder = await dls.beginTransaction();
    await holder.acquireLock(ns, 'k');
    await dls.abortTransaction(holder.id, 'drill');
    const delayed = (await dls.listLocks(ns)).find((k) => k.key === 'k');
    assert.equal(delayed.delay.transactionId, holder.id);
    const next = await dls.beginTransaction();
    await next.acquireLock(ns, 'k', 'EXCLUSIVE', { timeoutMs: 15_000 });
    const held = (await dls.listLocks(ns)).find((k) => k.key === 'k');
    assert.equal(held.delay, undefined);
    assert.ok(held.holders[0].sinceMs >= delayed.delay.untilMs, 'granted before the delay ended');
    await next.commit();
    assert.equal(await dls.setLockDelay(ns, 0), 1500);
  });
}
