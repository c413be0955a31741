'use strict';
// Key watches and leader election against a real dls server.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');
const { Dls } = require('@caerus-dev/sdk');
const { startServer, sleep } = require('./helpers');

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

test('watchKey reports each change with its kind and cause', async () => {
  const n = ns();
  const watch = await dls.watchKey(n, 'k');
  const first = await watch.next();
  assert.deepEqual(first.value, { holders: [], changes: [], initial: true });
  const tx = await dls.beginTransaction({ name: 'alpha' });
  const lock = await tx.acquireLock(n, 'k');
  const granted = (await watch.next()).value;
  assert.deepEqual(
    granted.changes.map((c) => [c.kind, c.holder.transactionName, c.holder.fencingToken]),
    [['GRANTED', 'alpha', lock.fencingToken]],
  );
  await dls.abortTransaction(tx.id, 'test');
  const revoked = (await watch.next()).value;
  assert.deepEqual(
    revoked.changes.map((c) => [c.kind, c.endCause]),
    [['REVOKED', 'OPERATOR_ABORT']],
  );
  await watch.return();
  await assert.rejects(dls.watchKey(n, ''), Dls.InvalidArgumentError);
});

test('candidates lead in turn; observers see each leader', async () => {
  const election = dls.election(ns(), 'leader');
  assert.equal(await election.leader(), null);
  const seen = [];
  const observing = (async () => {
    for await (const leader of election.observe()) {
      seen.push(leader ? leader.transactionName : null);
      if (seen.length === 3) return;
    }
  })();
  const first = await election.campaign('a', { leaseMs: 5000 });
  let secondDone = false;
  const second = election.campaign('b', { leaseMs: 5000 }).then((l) => {
    secondDone = true;
    return l;
  });
  await sleep(200);
  assert.equal(secondDone, false, 'b waits while a leads');
  assert.equal((await election.leader()).transactionName, 'a');
  await first.resign();
  const leadership = await second;
  assert.ok(leadership.term > first.term);
  await observing;
  assert.deepEqual(seen, [null, 'a', 'b']);
  await leadership.resign();
});
