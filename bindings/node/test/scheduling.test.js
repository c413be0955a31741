'use strict';
// @caerus-dev/sdk/scheduling against a real dls: several "hosts" (each its own client) fire the
// same job at once and it runs once per slot; node-cron firing it every second on three hosts.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { randomUUID } = require('node:crypto');
const cron = require('node-cron');
const { Dls } = require('@caerus-dev/sdk');
const { oncePerSlot, currentClaim, periodMs, Skipped } = require('@caerus-dev/sdk/scheduling');
const { startServer, sleep } = require('./helpers');

const DAY = '1d'; // a slot long enough that no test run crosses into the next one
const HOSTS = 6;
const quiet = () => {};
let server;

before(async () => {
  server = await startServer();
});

after(async () => {
  await server?.stop();
});

const ns = () => `node-sched-${randomUUID().slice(0, 8)}`;
const host = () => new Dls.DlsClient({ endpoints: [server.endpoint] });

test('hosts firing at once run the job once per slot; a late host finds it done', async () => {
  const n = ns();
  const runs = [];
  const jobs = Array.from({ length: HOSTS }, (_, i) =>
    oncePerSlot(host(), n, 'report', DAY, async () => {
      runs.push({ host: i, slot: currentClaim().slot });
      return `done by host-${i}`;
    }, { name: `host-${i}`, log: quiet }),
  );
  const results = await Promise.all(jobs.map((job) => job()));
  assert.equal(runs.length, 1, JSON.stringify(results));
  const winner = runs[0].host;
  assert.deepEqual(results.filter((r) => !(r instanceof Skipped)), [`done by host-${winner}`]);
  for (const r of results.filter((r) => r instanceof Skipped)) assert.ok(['locked', 'slot-done'].includes(r.reason));
  assert.equal(currentClaim(), null);

  const late = await jobs[(winner + 1) % HOSTS]();
  assert.ok(late instanceof Skipped);
  assert.equal(late.reason, 'slot-done');
  assert.equal(late.slot, runs[0].slot);
  assert.equal(late.lastRun.state, 'SUCCEEDED');
  assert.equal(late.lastRun.transactionName, `host-${winner}`);
  assert.equal(runs.length, 1);
});

test('a job that throws records FAILED and rejects; reruns only with retryFailed', async () => {
  const n = ns();
  const dls = host();
  let calls = 0;
  const job = () => {
    calls += 1;
    if (calls === 1) throw new Error('the payment provider said no');
    return 'ok';
  };
  const plain = oncePerSlot(dls, n, 'charge', DAY, job, { log: quiet });
  const retrying = oncePerSlot([server.endpoint], n, 'charge', DAY, job, { retryFailed: true, log: quiet });
  await assert.rejects(plain(), /said no/);
  const skipped = await plain();
  assert.equal(skipped.reason, 'slot-done');
  assert.equal(skipped.lastRun.state, 'FAILED');
  assert.equal(await retrying(), 'ok');
  assert.equal(calls, 2);
  assert.equal((await retrying()).lastRun.state, 'SUCCEEDED'); // a succeeded slot is not rerun, even when asked
});

test('periods', () => {
  assert.equal(periodMs('500ms'), 500);
  assert.equal(periodMs('5m'), 300_000);
  assert.equal(periodMs(90_000), 90_000);
  for (const bad of ['5 minutes', '0s', -1, 1.5]) assert.throws(() => periodMs(bad), RangeError);
  assert.throws(() => periodMs(null), TypeError);
});

test('node-cron on three hosts, every second: the job runs once in the slot', async () => {
  const n = ns();
  let runs = 0;
  const fired = [0, 0, 0];
  const tasks = fired.map((_, i) => {
    const job = oncePerSlot(host(), n, 'every-second', DAY, () => {
      runs += 1;
    }, { name: `cron-host-${i}`, log: () => (fired[i] += 1) });
    return cron.schedule('* * * * * *', async () => {
      if ((await job()) === undefined) fired[i] += 1;
    });
  });
  try {
    // Every host has fired at least twice: more firings than slots.
    for (let waited = 0; fired.some((f) => f < 2); waited += 100) {
      assert.ok(waited < 15_000, `hosts fired ${fired} times in 15 s`);
      await sleep(100);
    }
  } finally {
    await Promise.all(tasks.map((t) => t.destroy()));
  }
  assert.equal(runs, 1, `fired ${fired}`);
});
