'use strict';
// The error classes come from the error table every SDK shares (caerus_types::ErrorClass),
// which the addon exports; the typings declare each of them.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const sdk = require('@caerus-dev/sdk');

const { Dls } = sdk;
const native = require(path.join(__dirname, '..', 'caerus.linux-x64-gnu.node'));
const typings = fs.readFileSync(path.join(__dirname, '..', 'index.d.ts'), 'utf8');

test('every class of the shared error table is exported, typed and a DlsError', () => {
  const table = native.errorClasses();
  assert.ok(table.some((c) => c.code === 'MEMBERSHIP_REFUSED'), 'the table has MEMBERSHIP_REFUSED');
  for (const { code, stem, retryable } of table) {
    const name = `${stem}Error`;
    const cls = Dls[name];
    assert.equal(typeof cls, 'function', `${name} is exported`);
    assert.equal(sdk[name], cls, `${name} is a top-level export too`);
    assert.equal(cls.name, name);
    assert.equal(cls.retryable, retryable);
    const err = new cls('m');
    assert.ok(err instanceof Dls.DlsError && err instanceof Error, name);
    assert.equal(err.code, code);
    assert.equal(err.name, name);
    assert.equal(err.message, 'm');
    assert.equal(err.endCause, null);
    assert.equal(err.deadlock, null);
    assert.match(typings, new RegExp(`class ${name} extends DlsError .*readonly code: '${code}'`), `${name} in index.d.ts`);
    assert.match(typings, new RegExp(`export import ${name} = Dls\\.${name};`), `${name} exported in index.d.ts`);
    assert.match(typings, new RegExp(`\\| '${code}'`), `${code} in ErrorCode`);
  }
  const names = Object.keys(Dls).filter((k) => k.endsWith('Error') && k !== 'DlsError');
  assert.deepEqual(names.sort(), table.map((c) => `${c.stem}Error`).sort(), 'no class beside the table');
});

test('an error of the addon arrives as its class with its fields', async () => {
  // A wrong argument the addon itself refuses: a record, decoded once by the wrapper.
  const dls = new Dls.DlsClient({ endpoints: ['127.0.0.1:1'] });
  const err = await dls.transactionStatus(-1n).then(
    () => assert.fail('accepted a negative id'),
    (e) => e,
  );
  assert.ok(err instanceof Dls.InvalidArgumentError, `got ${err}`);
  assert.equal(err.code, 'INVALID_ARGUMENT');
  assert.ok(!err.message.includes('{'), `a plain message: ${err.message}`);
  assert.equal(err.endCause, null);
});

test('a transaction the server ended says why in endCause', async (t) => {
  const { startServer, eventually } = require('./helpers');
  const server = await startServer();
  t.after(() => server.stop());
  const dls = new Dls.DlsClient({ endpoints: [server.endpoint] });
  for (const cause of ['MAX_DURATION_EXCEEDED', 'OPERATOR_ABORT']) {
    // A long lease: no heartbeat (every third of it) hears of the end before the next call,
    // so the refusal is the server's and carries its cause.
    const tx = await dls.beginTransaction({
      timeoutMs: 60_000,
      maxDurationMs: cause === 'MAX_DURATION_EXCEEDED' ? 800 : undefined,
    });
    await tx.acquireLock('errors', `k-${cause}`);
    if (cause === 'OPERATOR_ABORT') await dls.abortTransaction(tx.id, 'test');
    await eventually(`the server ended it (${cause})`, async () => {
      const status = await dls.transactionStatus(tx.id);
      return status.state !== 'ACTIVE' && status.endCause === cause;
    });
    const err = await tx.acquireLock('errors', 'other', 'EXCLUSIVE', { timeoutMs: 1000 }).then(
      () => assert.fail('acquired in an ended transaction'),
      (e) => e,
    );
    assert.ok(err instanceof Dls.TransactionLostError, `got ${err}`);
    assert.equal(err.code, 'TRANSACTION_LOST');
    assert.equal(err.endCause, cause);
    assert.equal(err.deadlock, null);
    // Now marked lost, the transaction keeps the cause: its lost reason and a later call say
    // the same (a reached maximum duration is not reported as a lapsed lease).
    assert.equal(tx.lostReason.endCause, cause);
    const again = await tx.acquireLock('errors', 'other2', 'EXCLUSIVE', { timeoutMs: 1000 }).then(
      () => assert.fail('acquired in a lost transaction'),
      (e) => e,
    );
    assert.equal(again.endCause, cause);
  }
});
