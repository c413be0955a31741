'use strict';
// Lock-delay through the SDK (setLockDelay, lockDelays, listLocks' `delay`) against a real
// dls: a revoked holder's key is listed with its delay and grants nothing until it ends;
// rules are listed, removed and refused.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const { randomUUID } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { promisify } = require('node:util');
const { Dls } = require('@caerus-dev/sdk');
const { startServer, eventually } = require('./helpers');

let server;
let dls;

before(async () => {
  // A node of its own: its rules touch no other test file.
  server = await startServer();
  dls = new Dls.DlsClient({ endpoints: [server.endpoint] });
});

after(async () => {
  await server?.stop();
});

const ns = () => `node-delay-${randomUUID().slice(0, 8)}`;

async function listed(namespace, key) {
  return (await dls.listLocks(namespace)).find((k) => k.key === key);
}

test('an aborted holder leaves its key under the lock-delay; the queued waiter gets it after', async () => {
  const n = ns();
  assert.deepEqual(await dls.lockDelays(), [], 'off by default');
  assert.equal(await dls.setLockDelay(n, 3000), 0);
  assert.deepEqual(await dls.lockDelays(), [{ namespacePrefix: n, delayMs: 3000 }]);

  const holder = await dls.beginTransaction({ timeoutMs: 30_000 });
  await holder.acquireLock(n, 'k');
  const next = await dls.beginTransaction({ timeoutMs: 30_000 });
  let granted = false;
  const waiting = next.acquireLock(n, 'k', 'EXCLUSIVE', { timeoutMs: 30_000 }).then((lock) => {
    granted = true;
    return lock;
  });
  await eventually('the waiter is queued', async () => (await listed(n, 'k'))?.waiters.length);
  assert.equal((await listed(n, 'k')).delay, undefined, 'no delay while held');

  assert.equal(await dls.abortTransaction(holder.id, 'maintenance'), 'ABORTED');
  const k = await eventually('the key is under a lock-delay', async () => {
    const l = await listed(n, 'k');
    return l?.delay ? l : undefined;
  });
  assert.equal(k.delay.transactionId, holder.id);
  assert.equal(k.delay.cause, 'OPERATOR_ABORT');
  assert.equal(typeof k.delay.untilMs, 'number');
  assert.deepEqual(k.holders, []);
  assert.deepEqual(
    k.waiters.map((w) => w.transactionId),
    [next.id],
  );
  // The node runs on this machine: its clock is ours.
  if (Date.now() < k.delay.untilMs - 500) {
    const other = await dls.beginTransaction({ timeoutMs: 30_000 });
    await assert.rejects(other.acquireLock(n, 'k', 'EXCLUSIVE', { timeoutMs: 0 }), Dls.LockTimeoutError);
    assert.equal(granted, false, 'granted during the delay');
    await other.abort();
  }

  const lock = await waiting;
  assert.ok(lock.fencingToken > 0n);
  const now = await listed(n, 'k');
  assert.equal(now.delay, undefined);
  assert.equal(now.holders[0].transactionId, next.id);
  assert.ok(now.holders[0].sinceMs >= k.delay.untilMs, 'granted before the delay ended');
  await next.commit();

  assert.equal(await dls.setLockDelay(n, 0), 3000, 'removing returns the previous delay');
  assert.deepEqual(await dls.lockDelays(), []);
});

test('a delay above 10 minutes is refused with InvalidArgumentError; 10 minutes is allowed', async () => {
  const n = ns();
  const err = await dls.setLockDelay(n, 600_001).then(
    () => assert.fail('accepted'),
    (e) => e,
  );
  assert.ok(err instanceof Dls.InvalidArgumentError, `got ${err}`);
  assert.equal(err.code, 'INVALID_ARGUMENT');
  assert.match(err.message, /delay_ms/);
  await assert.rejects(dls.setLockDelay(n, -1), Dls.InvalidArgumentError);
  assert.deepEqual(await dls.lockDelays(), [], 'a refused rule is not stored');
  assert.equal(await dls.setLockDelay(n, 600_000), 0);
  assert.equal(await dls.setLockDelay(n, 0), 600_000);
  assert.deepEqual(await dls.lockDelays(), []);
});

test('the lock-delay calls are typed in index.d.ts', async () => {
  const root = path.join(__dirname, '..');
  const dir = path.join(root, 'test', '.build');
  fs.mkdirSync(dir, { recursive: true });
  const src = path.join(dir, 'lock-delay.mts');
  fs.writeFileSync(
    src,
    [
      "import { Dls, type KeyLocks, type LockDelayRule } from '@caerus-dev/sdk';",
      'export async function f(dls: Dls.DlsClient): Promise<number> {',
      "  const previous: number = await dls.setLockDelay('billing-', 5000);",
      '  const rules: LockDelayRule[] = await dls.lockDelays();',
      "  const locks: KeyLocks[] = await dls.listLocks('billing-');",
      "  const cause: Dls.EndCause | undefined = locks[0]?.delay?.cause;",
      '  const until: number | undefined = locks[0]?.delay?.untilMs;',
      '  // @ts-expect-error the delay is a number of ms',
      "  await dls.setLockDelay('billing-', '5s');",
      '  return previous + rules.length + (until ?? 0) + (cause ? 1 : 0);',
      '}',
      '',
    ].join('\n'),
  );
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const args = [tsc, '--strict', '--noEmit', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--types', 'node', src];
  await promisify(execFile)(process.execPath, args, { cwd: root }).catch((e) => {
    assert.fail(`tsc failed:\n${e.stdout}${e.stderr}`);
  });
});
