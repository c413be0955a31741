'use strict';
// Key watches and leader election against a real dls server.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');
const { Dls } = require('@caerus-dev/sdk');
const { startServer, eventually, within, waitsInLine } = require('./helpers');

let server;
let dls;
const ns = () => `node-${randomUUID().slice(0, 12)}`;

before(async () => {
  server = await startServer();
  dls = new Dls.DlsClient({ endpoints: [server.endpoint] });
});

after(async () => {
  await server?.stop();
});

test('watchKey reports each change with its kind and cause', { timeout: 120_000 }, async () => {
  const n = ns();
  const watch = await dls.watchKey(n, 'k');
  const first = await within('the first key update', watch.next());
  assert.deepEqual(first.value, { holders: [], changes: [], initial: true });
  const tx = await dls.beginTransaction({ name: 'alpha' });
  const lock = await tx.acquireLock(n, 'k');
  const granted = (await within('the grant seen', watch.next())).value;
  assert.deepEqual(
    granted.changes.map((c) => [c.kind, c.holder.transactionName, c.holder.fencingToken]),
    [['GRANTED', 'alpha', lock.fencingToken]],
  );
  await dls.abortTransaction(tx.id, 'test');
  const revoked = (await within('the revocation seen', watch.next())).value;
  assert.deepEqual(
    revoked.changes.map((c) => [c.kind, c.endCause]),
    [['REVOKED', 'OPERATOR_ABORT']],
  );
  await watch.return();
  await assert.rejects(dls.watchKey(n, ''), Dls.InvalidArgumentError);
});

test('candidates lead in turn; observers see each leader', { timeout: 120_000 }, async () => {
  const n = ns();
  const election = dls.election(n, 'leader');
  assert.equal(await within('the election answers who leads', election.leader()), null);
  const seen = [];
  let watching;
  const firstEvent = new Promise((r) => (watching = r));
  const observing = (async () => {
    for await (const leader of election.observe()) {
      seen.push(leader ? leader.transactionName : null);
      watching();
      if (seen.length === 3) return;
    }
  })();
  // The observer's first event (nobody leads) is its proof that it watches: campaigning
  // before it would let it start at "a" and miss the empty seat.
  await within("the observer's first event", Promise.race([firstEvent, observing]));
  assert.deepEqual(seen, [null]);
  const first = await within('a leads', election.campaign('a', { leaseMs: 5000 }));
  let secondDone = false;
  const second = election.campaign('b', { leaseMs: 5000 }).finally(() => {
    secondDone = true;
  });
  await eventually('b waits in line for the leader key (or was wrongly granted it)', () =>
    waitsInLine(dls, n, 'leader', 'b', () => secondDone),
  );
  assert.equal(secondDone, false, 'b waits while a leads');
  assert.equal((await election.leader()).transactionName, 'a');
  await first.resign();
  const leadership = await within('b leads after a resigned', second);
  assert.ok(leadership.term > first.term);
  await within('the observer saw b', observing);
  assert.deepEqual(seen, [null, 'a', 'b']);
  await leadership.resign();
});
