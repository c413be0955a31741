'use strict';
// At most once per schedule slot (claimSlot / finishSlot) through the SDK against a real dls: a
// slot runs once, a failed slot again only with retryFailed, a claim needs the lock EXCLUSIVE.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');
const { Dls } = require('@caerus-dev/sdk');
const { startServer } = require('./helpers');

const HOUR_MS = 3_600_000;
let server;
let dls;

before(async () => {
  server = await startServer();
  dls = new Dls.DlsClient({ endpoints: [server.endpoint] });
});

after(async () => {
  await server?.stop();
});

test('a slot runs once per slot; a failed one again only with retryFailed', async () => {
  const ns = `node-slot-${randomUUID().slice(0, 8)}`;
  const host = async (outcome, { retryFailed = false, exitCode = null } = {}) => {
    const tx = await dls.beginTransaction();
    await tx.acquireLock(ns, 'job');
    const claim = await tx.claimSlot(ns, 'job', HOUR_MS, { retryFailed });
    if (claim.run) {
      const run = await tx.finishSlot(claim, outcome, exitCode);
      assert.equal(run.state, outcome);
      assert.equal(run.slot, claim.slot);
    }
    await tx.commit();
    return claim;
  };
  const first = await host('FAILED', { exitCode: 4 });
  assert.equal(first.run, true);
  assert.equal(first.attempt, 1);
  const skipped = await host('SUCCEEDED');
  if (skipped.slot === first.slot) {
    // The same hour (the usual case).
    assert.equal(skipped.run, false);
    assert.equal(skipped.lastRun.state, 'FAILED');
    assert.equal(skipped.lastRun.exitCode, 4);
    const retried = await host('SUCCEEDED', { retryFailed: true });
    assert.equal(retried.run, true);
    assert.equal(retried.attempt, 2);
    const done = await host('SUCCEEDED', { retryFailed: true });
    assert.equal(done.run, false);
    assert.equal(done.lastRun.state, 'SUCCEEDED');
  }
});

test('a claim needs the lock held EXCLUSIVE and a known outcome', async () => {
  const ns = `node-slot-${randomUUID().slice(0, 8)}`;
  const tx = await dls.beginTransaction();
  await tx.acquireLock(ns, 'other');
  await assert.rejects(tx.claimSlot(ns, 'job', HOUR_MS), Dls.InvalidArgumentError);
  await tx.acquireLock(ns, 'job');
  await assert.rejects(tx.claimSlot(ns, 'job', 10), Dls.InvalidArgumentError);
  const claim = await tx.claimSlot(ns, 'job', HOUR_MS);
  await assert.rejects(tx.finishSlot(claim, 'MAYBE'), Dls.InvalidArgumentError);
  const run = await tx.finishSlot(claim, 'SUCCEEDED');
  assert.equal(run.exitCode, 0);
  assert.equal(run.periodMs, HOUR_MS);
  await tx.commit();
});
