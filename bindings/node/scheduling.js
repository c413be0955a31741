'use strict';
// @caerus-dev/sdk/scheduling: run a scheduled job at most once per schedule slot, whichever
// scheduler fires it (node-cron, BullMQ repeatable jobs, setInterval) and on however many hosts.
//
//   const cron = require('node-cron');
//   const { oncePerSlot } = require('@caerus-dev/sdk/scheduling');
//   cron.schedule('*/5 * * * *', oncePerSlot(['dls-1:7070'], 'jobs', 'sync', '5m', sync));
//
// Each call takes the lock namespace/key without waiting (a host that finds it held skips:
// another host is running the slot), asks the cluster whether the current slot ran (slot N =
// floor(cluster clock / period), so no host's clock decides it), runs the job only if not,
// records the outcome (a rejection records FAILED and is rethrown) and releases the lock.

const { AsyncLocalStorage } = require('node:async_hooks');
const { DlsClient, LockTimeoutError } = require('./index.js');

const UNITS_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const current = new AsyncLocalStorage();

/** A period in ms: a positive integer number of ms, or a string such as '500ms', '30s', '5m', '1h', '1d'. */
function periodMs(period) {
  let ms;
  if (typeof period === 'number') {
    ms = period;
  } else if (typeof period === 'string') {
    const m = /^\s*(\d+)\s*(ms|s|m|h|d)\s*$/.exec(period);
    if (!m) throw new RangeError(`period ${JSON.stringify(period)}: expected a number and a unit (ms, s, m, h, d), e.g. '5m'`);
    ms = Number(m[1]) * UNITS_MS[m[2]];
  } else {
    throw new TypeError(`period must be ms (a number) or a string such as '5m', not ${typeof period}`);
  }
  if (!Number.isSafeInteger(ms) || ms <= 0) throw new RangeError(`period ${JSON.stringify(period)} must be a positive whole number of ms`);
  return ms;
}

/**
 * What a wrapped job resolves with when this firing did not run it. `reason` is 'locked' (another
 * host holds the lock: it is running the slot) or 'slot-done' (the slot already ran; `lastRun`
 * says who ran it and how it ended).
 */
class Skipped {
  constructor(reason, slot = null, lastRun = null) {
    this.skipped = true;
    this.reason = reason;
    this.slot = slot;
    this.lastRun = lastRun;
    Object.freeze(this);
  }
}

/** Inside a job wrapped by oncePerSlot: the SlotClaim it runs under (`slot`, `attempt`); null elsewhere. */
function currentClaim() {
  return current.getStore() ?? null;
}

/**
 * Wraps `job` (sync or async) so that it runs at most once per slot of `period`.
 * `client`: a DlsClient, or endpoints to build one from on the first call (API key from
 * $CAERUS_API_KEY). Options: `retryFailed` (a later firing may rerun a failed or lost slot; off by
 * default, a half-done job may not be safe to repeat), `leaseMs` (the transaction's lease, renewed
 * while the job runs; default 15000), `name` (labels the transaction in `dls locks`; default the
 * job's name), `log` (called with a line when a firing skips; default console.info).
 * Errors of the lock service (UnavailableError, ...) reject: nothing ran then.
 */
function oncePerSlot(client, namespace, key, period, job, options = {}) {
  const slotMs = periodMs(period);
  if (typeof job !== 'function') throw new TypeError('job must be a function');
  const { retryFailed = false, leaseMs, name = job.name || `${namespace}/${key}`, log = console.info } = options;
  let dls = client instanceof DlsClient ? client : null;
  const endpoints = typeof client === 'string' ? [client] : client;

  return async function runOncePerSlot(...args) {
    dls ??= new DlsClient({ endpoints });
    const tx = await dls.beginTransaction({ timeoutMs: leaseMs, name });
    try {
      try {
        // No wait: a holder is running this slot (or finishing the last one), and queueing
        // behind it would only find the slot done.
        await tx.acquireLock(namespace, key, 'EXCLUSIVE', { timeoutMs: 0 });
      } catch (err) {
        if (!(err instanceof LockTimeoutError)) throw err;
        log(`${name}: skipped, ${namespace}/${key} is held by another host`);
        return new Skipped('locked');
      }
      const claim = await tx.claimSlot(namespace, key, slotMs, { retryFailed });
      if (!claim.run) {
        const last = claim.lastRun;
        log(`${name}: skipped, slot ${claim.slot} of ${namespace}/${key} already ran (${last?.state} by ${JSON.stringify(last?.transactionName)})`);
        return new Skipped('slot-done', claim.slot, last);
      }
      let result;
      try {
        result = await current.run(claim, () => job.apply(this, args));
      } catch (err) {
        await tx.finishSlot(claim, 'FAILED');
        throw err;
      }
      await tx.finishSlot(claim, 'SUCCEEDED');
      return result;
    } finally {
      // Commit releases the lock; a transaction already lost has nothing to release.
      await (tx.isLost ? tx.abort() : tx.commit());
    }
  };
}

module.exports = { oncePerSlot, currentClaim, periodMs, Skipped };
