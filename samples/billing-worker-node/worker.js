#!/usr/bin/env node
// Monthly billing worker (Node, @caerus-dev/sdk).
//
// Takes billing-jobs/monthly-billing-job exclusively, asks the ledger which customers of the
// cycle are already charged, charges the others with the lock's fencing token, and commits.
// Settings and exit codes: see README.md (the same as the Rust and Python workers).
'use strict';

const { Dls } = require('@caerus-dev/sdk');

const NAMESPACE = 'billing-jobs';
const KEY = 'monthly-billing-job';
const RESOURCE = `${NAMESPACE}/${KEY}`;
// The subscriptions billed every cycle: customer and monthly price in cents.
const SUBSCRIPTIONS = [['acme', 4900], ['globex', 2900], ['initech', 9900],
  ['umbrella', 1900], ['hooli', 4900], ['stark', 14900]];
const EXIT_FENCED = 3;
const EXIT_BUSY = 75;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// One request to the ledger: { status, body }. Fencing tokens are bigint: sent as JSON numbers.
async function http(ledger, method, path, body) {
  const json = body === undefined ? undefined
    : JSON.stringify(body, (_, v) => (typeof v === 'bigint' ? `@@${v}@@` : v)).replace(/"@@(\d+)@@"/g, '$1');
  const resp = await fetch(ledger.replace(/\/$/, '') + path,
    { method, body: json, headers: { 'Content-Type': 'application/json' } });
  return { status: resp.status, body: await resp.json() };
}

async function main() {
  const cycle = process.env.CYCLE;
  if (!cycle) { console.error('set CYCLE, e.g. CYCLE=2026-11'); return 1; }
  const ledger = process.env.LEDGER_URL || 'http://127.0.0.1:8080';
  const name = process.env.WORKER_NAME || `node-${process.pid}`;
  const leaseMs = Number(process.env.LEASE_MS || 15000);
  const waitMs = Number(process.env.LOCK_WAIT_MS || 60000);
  const delayMs = Number(process.env.CHARGE_DELAY_MS || 0);
  const say = (msg) => console.log(`[${name}] cycle ${cycle}: ${msg}`);

  const client = new Dls.DlsClient(); // endpoints from $DLS_ENDPOINTS, key from $CAERUS_API_KEY
  const tx = await client.beginTransaction({ timeoutMs: leaseMs, name: `${name} ${cycle}` });
  say(`waiting for ${RESOURCE} (transaction ${tx.id})`);
  let lock;
  try {
    lock = await tx.acquireLock(NAMESPACE, KEY, 'EXCLUSIVE', { timeoutMs: waitMs });
  } catch (e) {
    if (!(e instanceof Dls.LockTimeoutError)) throw e;
    say(`lock still busy after ${waitMs} ms; giving up`);
    await tx.abort();
    return EXIT_BUSY;
  }
  const token = lock.fencingToken; // a bigint
  say(`lock acquired, fencing token ${token}`);

  // Which subscriptions of this cycle are already charged (by an earlier holder)?
  const listing = await http(ledger, 'GET', `/charges?cycle=${encodeURIComponent(cycle)}`);
  if (listing.status !== 200) {
    await tx.abort();
    throw new Error(`ledger answered ${listing.status} to the listing`);
  }
  const charged = new Set(listing.body.charges.map((c) => c.customer));
  const todo = SUBSCRIPTIONS.filter(([customer]) => !charged.has(customer));
  if (todo.length === 0) {
    say('already billed; skipping');
    await tx.commit();
    return 0;
  }
  if (charged.size > 0) say(`${charged.size} of ${SUBSCRIPTIONS.length} already charged by an earlier holder; resuming`);

  for (const [customer, amountCents] of todo) {
    await sleep(delayMs);
    // No "is my lock still mine?" check before writing: it could pass and the process be
    // paused right after. The ledger's fencing check is what protects.
    const { status, body } = await http(ledger, 'POST', '/charges',
      { resource: RESOURCE, customer, amount_cents: amountCents, cycle, fencing_token: token });
    if (status === 201) {
      say(`charged ${customer} ${amountCents} cents (token ${token})`);
    } else if (status === 409) {
      say(`ledger REJECTED the charge of ${customer} with 409: token ${token} is stale `
        + `(last accepted ${body.last_token}); another worker took over, stopping`);
      await tx.abort();
      return EXIT_FENCED;
    } else {
      await tx.abort();
      throw new Error(`ledger answered ${status} to a charge: ${JSON.stringify(body)}`);
    }
  }
  await tx.commit();
  say('billed; committed');
  return 0;
}

main().then((code) => process.exit(code), (e) => {
  console.error(`billing-worker-node: ${e.stack || e}`);
  process.exit(1);
});
