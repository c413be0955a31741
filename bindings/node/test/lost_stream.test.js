'use strict';
// The lost stream ({ lostStream: true }): tx.signal aborts as soon as the server ends the
// transaction, not at the next heartbeat.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Dls } = require('@caerus-dev/sdk');
const { startServer, aborted } = require('./helpers');

let server;
let dls;

before(async () => {
  server = await startServer();
  dls = new Dls.DlsClient({ endpoints: [server.endpoint] });
});

after(async () => {
  await server?.stop();
});

function within(ms, promise) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`nothing within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

test('an operator abort aborts tx.signal before the heartbeat would tell', async () => {
  // A 30 s lease heartbeats every 10 s: only the stream can tell within a few seconds.
  const streamed = await dls.beginTransaction({ timeoutMs: 30000, lostStream: true });
  const plain = await dls.beginTransaction({ timeoutMs: 30000 });
  try {
    await streamed.acquireLock('lost-stream', 'streamed');
    await plain.acquireLock('lost-stream', 'plain');
    await dls.abortTransaction(streamed.id, 'revoked by the operator');
    await dls.abortTransaction(plain.id, 'revoked by the operator');
    const reason = await within(5000, aborted(streamed.signal));
    assert.equal(reason.lostKind, 'ABORTED', `signal reason ${reason}`);
    assert.match(reason.message, /revoked by the operator/);
    assert.equal(plain.signal.aborted, false, 'the same abort without the stream is heard at the heartbeat');
  } finally {
    await streamed.abort();
    await plain.abort();
  }
});

test('lock() passes lostStream on', async () => {
  const held = await dls.lock('lost-stream', 'held', { leaseMs: 30000, lostStream: true });
  await dls.abortTransaction(held.transaction.id, 'gone');
  const reason = await within(5000, aborted(held.signal));
  assert.equal(reason.lostKind, 'ABORTED');
  await assert.rejects(held.release(), Dls.DlsError);
});
