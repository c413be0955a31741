'use strict';
// The shared conformance scenarios (conformance/scenarios.json) through the SDK, against a
// real dls server: one test per scenario, raw-only ones skipped, and so are those needing a
// capability this runner lacks (see CAPABILITIES).
//
// Each op maps onto the SDK as "Writing an SDK runner" in conformance/README.md says.
// `expect_queued` polls listLocks for the waiting transaction's place and blockers (not the
// acquire's onQueued callback), as the Python runner does. Mode SEMAPHORE goes to
// tx.acquirePermit.
const { test, before, after } = require('node:test');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { Dls } = require('@caerus-dev/sdk');
const { startServer, sleep } = require('./helpers');

const SCENARIOS = JSON.parse(
  fs.readFileSync(path.join(__dirname, '..', '..', '..', 'conformance', 'scenarios.json'), 'utf8'),
).scenarios;
// How long a step waits for the server: a hang guard, not a timing assertion.
const PATIENCE_MS = 30_000;
const POLL_MS = 10;
const RUN_ID = crypto.randomBytes(3).toString('hex');
// What this runner can express of the scenarios' `needs` (conformance/README.md
// "Capabilities"); a scenario needing anything else is skipped, saying why.
const CAPABILITIES = new Set(['permits']);
// Why each capability missing from CAPABILITIES is missing (none is, so far).
const WHY_NOT = {};

/** Why `spec` is skipped here (raw only, or a capability this runner lacks), or undefined. */
function skipReason(spec) {
  if (spec.raw_only) return `raw only: ${spec.why_raw_only ?? ''}`;
  const lacking = (spec.needs ?? []).filter((n) => !CAPABILITIES.has(n));
  if (lacking.length === 0) return undefined;
  return lacking.map((n) => `needs ${n}: ${WHY_NOT[n] ?? 'not implemented by this runner'}`).join('; ');
}

let server;

before(async () => {
  server = await startServer();
});

after(async () => {
  await server?.stop();
});

class StepFailed extends Error {}

// The ok checks made on a granted lock (acquire, await, downgrade, each acquire_all entry).
const GRANT_CHECKS = ['mode', 'token_equals', 'token_greater_than', 'save_token'];

function check(what, got, want) {
  if (got !== want) throw new StepFailed(`${what}: expected ${String(want)}, got ${String(got)}`);
}

/**
 * An acquire (`op` "acquire") or acquire_all started with `"wait": false`, running until
 * `await` collects its outcome (`granted`: a lock, or the locks in the order asked); `keys`
 * are the `{ namespace, key }` it asked for.
 */
class Background {
  constructor(tx, op, keys, promise) {
    Object.assign(this, { tx, op, keys, outcome: null });
    this.promise = promise.then(
      (granted) => (this.outcome = { granted }),
      (error) => (this.outcome = { error }),
    );
  }
}

class Scenario {
  constructor(dls, ns) {
    Object.assign(this, { dls, ns, txns: new Map(), tokens: new Map(), handles: new Map(), watches: new Map() });
  }

  text(value) {
    if (value !== null && typeof value === 'object') value = value.repeat.repeat(value.times);
    if (typeof value !== 'string') throw new StepFailed(`expected a string, got ${JSON.stringify(value)}`);
    return value.replaceAll('${ns}', this.ns);
  }

  field(step, name, dflt) {
    return this.text(step[name] ?? dflt);
  }

  txn(step) {
    if ('txn_id' in step) throw new StepFailed('a literal txn_id cannot be expressed through the SDK (raw-only)');
    const tx = this.txns.get(step.txn);
    if (!tx) throw new StepFailed(`transaction ${step.txn} was not begun`);
    return tx;
  }

  token(name) {
    if (!this.tokens.has(name)) throw new StepFailed(`no saved token ${name}`);
    return this.tokens.get(name);
  }

  static mode(step) {
    const mode = step.mode ?? 'EXCLUSIVE';
    if (mode !== 'EXCLUSIVE' && mode !== 'SHARED_READ' && mode !== 'SEMAPHORE') {
      throw new StepFailed(`mode ${JSON.stringify(mode)} cannot be expressed through the SDK (raw-only)`);
    }
    return mode;
  }

  /**
   * Compares a call's outcome with the step's `expect`: resolves with `{ checks, value }`
   * when it succeeded as expected, `{ checks: null }` when the expected error happened.
   * Only the error kind and message are visible through an SDK; the gRPC code is a
   * raw-client check.
   */
  static async call(step, promise) {
    const expect = step.expect ?? { ok: {} };
    let value;
    try {
      value = await promise;
    } catch (e) {
      if (!(e instanceof Dls.DlsError)) throw e;
      if (!expect.error) throw new StepFailed(`expected ok, got ${e.code}: ${e.message}`);
      const want = expect.error;
      if (e.code !== want.kind) throw new StepFailed(`expected error ${want.kind}, got ${e.code}: ${e.message}`);
      const words = want.message_contains;
      if (words !== undefined && !e.message.includes(words)) {
        throw new StepFailed(`expected error ${want.kind} saying ${JSON.stringify(words)}, got ${e.code}: ${e.message}`);
      }
      return { checks: null };
    }
    if (expect.error) throw new StepFailed(`expected error ${expect.error.code}/${expect.error.kind}, got ok`);
    return { checks: expect.ok ?? {}, value };
  }

  async run(spec) {
    try {
      for (const [i, step] of spec.steps.entries()) {
        try {
          await this.step(step);
        } catch (e) {
          throw new StepFailed(`step ${i + 1} (${step.op}): ${e.message}`, { cause: e });
        }
      }
    } finally {
      // Leave nothing behind for later scenarios, whatever happened. A background acquire
      // ends when its transaction is aborted.
      for (const tx of this.txns.values()) await tx.abort().catch(() => {});
      for (const w of this.watches.values()) await w.return().catch(() => {});
      let timer;
      const guard = new Promise((resolve) => (timer = setTimeout(resolve, PATIENCE_MS)));
      await Promise.race([Promise.all([...this.handles.values()].map((h) => h.promise)), guard]);
      clearTimeout(timer);
    }
  }

  async step(step) {
    switch (step.op) {
      case 'begin': {
        const name = this.field(step, 'name', '');
        const options = { timeoutMs: step.timeout_ms ?? 15000, priority: step.priority ?? 0 };
        if (name) options.name = name;
        if ('max_duration_ms' in step) options.maxDurationMs = step.max_duration_ms;
        if (step.lost_stream) options.lostStream = true;
        const { checks, value: tx } = await Scenario.call(step, this.dls.beginTransaction(options));
        if (!checks) return;
        if ('lease_timeout_ms' in checks) check('lease_timeout_ms', tx.leaseMs, checks.lease_timeout_ms);
        if ('same_txn_as' in checks) check('transaction id', tx.id, this.txns.get(checks.same_txn_as)?.id);
        this.txns.set(step.txn, tx);
        return;
      }
      case 'acquire': {
        const tx = this.txn(step);
        const namespace = this.field(step, 'namespace', '${ns}');
        const key = this.field(step, 'key', '');
        const mode = Scenario.mode(step);
        const timeoutMs = step.timeout_ms ?? 10000;
        const permits = step.permits ?? 0;
        if (mode !== 'SEMAPHORE' && permits !== 0) {
          throw new StepFailed('permits with a lock mode cannot be expressed through the SDK (raw-only)');
        }
        // A permit, of any count (the server judges it).
        const promise =
          mode === 'SEMAPHORE'
            ? tx.acquirePermit(namespace, key, permits, { timeoutMs })
            : tx.acquireLock(namespace, key, mode, { timeoutMs });
        if (step.wait === false) {
          this.handles.set(step.handle, new Background(tx, step.op, [{ namespace, key }], promise));
          return;
        }
        const { checks, value } = await Scenario.call(step, promise);
        this.checkGrant(checks, value);
        return;
      }
      case 'acquire_all': {
        const tx = this.txn(step);
        const wanted = step.locks.map((w) => ({
          namespace: this.field(w, 'namespace', '${ns}'),
          key: this.field(w, 'key', ''),
          mode: Scenario.mode(w),
        }));
        const promise = tx.acquireLocks(wanted, { timeoutMs: step.timeout_ms ?? 10000 });
        if (step.wait === false) {
          this.handles.set(step.handle, new Background(tx, step.op, wanted, promise));
          return;
        }
        const { checks, value } = await Scenario.call(step, promise);
        this.checkGrants(checks, value);
        return;
      }
      case 'expect_queued':
        return this.expectQueued(step);
      case 'await': {
        const h = this.handle(step);
        await h.promise;
        const replay = h.outcome.error ? Promise.reject(h.outcome.error) : Promise.resolve(h.outcome.granted);
        const { checks, value } = await Scenario.call(step, replay);
        if (h.op === 'acquire_all') this.checkGrants(checks, value);
        else this.checkGrant(checks, value);
        return;
      }
      case 'downgrade': {
        const tx = this.txn(step);
        const { checks, value: lock } = await Scenario.call(
          step,
          tx.downgrade(this.field(step, 'namespace', '${ns}'), this.field(step, 'key', '')),
        );
        if (!checks) return;
        if ('held' in checks) check('held', lock != null, checks.held);
        if (lock != null) this.checkGrant(checks, lock);
        else if (GRANT_CHECKS.some((c) => c in checks)) {
          throw new StepFailed('grant checks on a lock that is not held (held=false)');
        }
        return;
      }
      case 'verify_token': {
        const token = typeof step.token === 'string' ? this.token(step.token) : BigInt(step.token);
        const { checks, value } = await Scenario.call(
          step,
          this.dls.verifyFencingToken(this.field(step, 'namespace', '${ns}'), this.field(step, 'key', ''), token),
        );
        if (!checks) return;
        if ('current' in checks) check('current', value.current, checks.current);
        if ('current_tokens' in checks) {
          // Sorted, so the holders compare as a set.
          const sorted = (tokens) => `[${[...tokens].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).join(', ')}]`;
          check('current_tokens', sorted(value.currentTokens), sorted(checks.current_tokens.map((n) => this.token(n))));
        }
        return;
      }
      case 'release': {
        const tx = this.txn(step);
        const { checks, value } = await Scenario.call(
          step,
          tx.release(this.field(step, 'namespace', '${ns}'), this.field(step, 'key', '')),
        );
        if (checks && 'released' in checks) check('released', value, checks.released);
        return;
      }
      case 'status': {
        const promise = 'txn_id' in step ? this.dls.transactionStatus(BigInt(step.txn_id)) : this.txn(step).status();
        const { checks, value } = await Scenario.call(step, promise);
        if (checks) this.checkStatus(checks, value);
        return;
      }
      case 'heartbeat':
        // The SDK heartbeats by itself; the scenario's later status shows the lease was
        // kept. Heartbeat errors are only expected in raw-only scenarios.
        this.txn(step);
        if (step.expect?.error) {
          throw new StepFailed('an explicit heartbeat error cannot be expressed through the SDK (raw-only)');
        }
        return;
      case 'end': {
        const tx = this.txn(step);
        const commit = step.commit ?? true;
        const { checks } = await Scenario.call(step, commit ? tx.commit() : tx.abort());
        // The state is implied by the call succeeding; released_locks is not exposed.
        if (checks && 'state' in checks) check('state', commit ? 'COMMITTED' : 'ABORTED', checks.state);
        return;
      }
      case 'await_status':
        // The SDK heartbeats by itself: `heartbeat` needs nothing more here.
        return this.awaitStatus(step);
      case 'sleep_ms':
        return sleep(step.ms);
      case 'watch': {
        if ('resume' in step) throw new StepFailed('a watch cursor cannot be expressed through the SDK (raw-only)');
        const { checks, value: watch } = await Scenario.call(
          step,
          this.dls.watchKey(this.field(step, 'namespace', '${ns}'), this.field(step, 'key', '')),
        );
        if (!checks) return;
        this.watches.set(step.handle, watch);
        const first = await Scenario.nextUpdate(watch);
        if ('initial' in checks) check('initial', first.initial, checks.initial);
        this.checkWatch(checks, first.holders, first.changes);
        return;
      }
      case 'expect_watch': {
        const watch = this.watches.get(step.handle);
        if (!watch) throw new StepFailed(`no watch ${step.handle}`);
        const checks = step.expect?.ok ?? {};
        const changes = [];
        let update;
        do {
          update = await Scenario.nextUpdate(watch);
          changes.push(...update.changes);
        } while (changes.length < (checks.changes ?? []).length);
        this.checkWatch(checks, update.holders, changes);
        return;
      }
      case 'unwatch': {
        const watch = this.watches.get(step.handle);
        if (!watch) throw new StepFailed(`no watch ${step.handle}`);
        this.watches.delete(step.handle);
        await watch.return();
        return;
      }
      case 'expect_lost': {
        const tx = this.txn(step);
        const within = step.within_ms ?? PATIENCE_MS;
        if (!tx.signal.aborted) {
          let timer;
          await Promise.race([
            new Promise((resolve) => tx.signal.addEventListener('abort', resolve, { once: true })),
            new Promise((resolve) => (timer = setTimeout(resolve, within))),
          ]);
          clearTimeout(timer);
        }
        const reason = tx.lostReason;
        if (!tx.signal.aborted || !reason) {
          throw new StepFailed(`the transaction was not reported lost within ${within} ms`);
        }
        // end_cause (the server's LockStreamLost) is not visible through the SDK: its kind is.
        const checks = step.expect?.ok ?? {};
        if ('lost_kind' in checks) check('lost kind', reason.kind, checks.lost_kind);
        return;
      }
      case 'set_lock_delay': {
        const prefix = this.field(step, 'namespace_prefix', '${ns}');
        const { checks, value } = await Scenario.call(step, this.dls.setLockDelay(prefix, step.delay_ms ?? 0));
        if (checks && 'previous_delay_ms' in checks) check('previous_delay_ms', value, checks.previous_delay_ms);
        return;
      }
      case 'lock_delays': {
        const { checks, value } = await Scenario.call(step, this.dls.lockDelays());
        if (checks && 'rules' in checks) {
          // Only this scenario's rules: other runs may share the server.
          const got = value
            .filter((r) => r.namespacePrefix.startsWith(this.ns))
            .map((r) => `${r.namespacePrefix}=${r.delayMs}`);
          const want = checks.rules.map((w) => `${this.field(w, 'namespace_prefix', '')}=${w.delay_ms ?? 0}`);
          check('rules', JSON.stringify(got), JSON.stringify(want));
        }
        return;
      }
      case 'operator_abort': {
        const tx = this.txn(step);
        const reason = this.field(step, 'reason', '');
        const { checks, value } = await Scenario.call(step, this.dls.abortTransaction(tx.id, reason));
        if (checks && 'state' in checks) check('state', value, checks.state);
        return;
      }
      case 'list_key': {
        const namespace = this.field(step, 'namespace', '${ns}');
        const key = this.field(step, 'key', '');
        const { checks, value } = await Scenario.call(step, this.dls.listLocks(namespace));
        if (checks) this.checkListed(checks, value.find((k) => k.namespace === namespace && k.key === key));
        return;
      }
      case 'expect_streams_closed': {
        // The SDK shows no stream; it must not have reported the transaction lost.
        const reason = this.txn(step).lostReason;
        if (reason) throw new StepFailed(`the transaction was reported lost: ${reason.kind}: ${reason.message}`);
        return;
      }
      default:
        throw new StepFailed(`unknown op ${JSON.stringify(step.op)}`);
    }
  }

  static async nextUpdate(watch) {
    let timer;
    const guard = new Promise((resolve) => (timer = setTimeout(() => resolve('timeout'), PATIENCE_MS)));
    const next = await Promise.race([watch.next(), guard]);
    clearTimeout(timer);
    if (next === 'timeout') throw new StepFailed(`no key watch update within ${PATIENCE_MS} ms`);
    if (next.done) throw new StepFailed('the key watch ended');
    return next.value;
  }

  static showHolder(h) {
    return `txn ${h.transactionId} ${JSON.stringify(h.transactionName)} ${h.mode}#${h.fencingToken}`;
  }

  checkHolder(what, w, h) {
    if ('txn' in w) check(`${what} transaction (want ${w.txn})`, h.transactionId, this.txn(w).id);
    if ('name' in w) check(`${what} transaction_name`, h.transactionName, this.text(w.name));
    if ('mode' in w) check(`${what} mode`, h.mode, w.mode);
    if ('token' in w) check(`${what} fencing token (want ${w.token})`, h.fencingToken, this.token(w.token));
  }

  /** `holders` in order, exactly; `changes` in order, exactly. */
  checkWatch(checks, holders, changes) {
    if ('save_cursor' in checks) throw new StepFailed('a watch cursor cannot be expressed through the SDK (raw-only)');
    try {
      if ('holders' in checks) {
        check('number of holders', holders.length, checks.holders.length);
        for (const [i, w] of checks.holders.entries()) this.checkHolder(`holders[${i}]`, w, holders[i]);
      }
      if ('changes' in checks) {
        check('number of changes', changes.length, checks.changes.length);
        for (const [i, w] of checks.changes.entries()) {
          const c = changes[i];
          if ('kind' in w) check(`changes[${i}] kind`, c.kind, w.kind);
          if ('end_cause' in w) check(`changes[${i}] end_cause`, c.endCause, w.end_cause);
          this.checkHolder(`changes[${i}]`, w, c.holder);
        }
      }
    } catch (e) {
      const shown = changes.map((c) => `${c.kind} ${Scenario.showHolder(c.holder)} (${c.endCause})`);
      throw new StepFailed(`${e.message}; holders [${holders.map(Scenario.showHolder)}], changes [${shown}]`);
    }
  }

  /**
   * list_key's checks on the key's listLocks entry (undefined: the key is not listed, so it
   * has no holders, waiters or delay).
   */
  checkListed(checks, k) {
    if ('listed' in checks) check('listed', k !== undefined, checks.listed);
    for (const field of ['holders', 'waiters']) {
      if (!(field in checks)) continue;
      const got = k?.[field] ?? [];
      const shown = got.map((e) => `txn ${e.transactionId} ${e.mode}`);
      if (got.length !== checks[field].length) {
        throw new StepFailed(`number of ${field}: expected ${checks[field].length}, got [${shown}]`);
      }
      for (const [i, w] of checks[field].entries()) {
        const e = got[i];
        if ('txn' in w) check(`${field}[${i}] transaction (want ${w.txn})`, e.transactionId, this.txn(w).id);
        if ('mode' in w) check(`${field}[${i}] mode`, e.mode, w.mode);
        if ('token' in w) check(`${field}[${i}] fencing token (want ${w.token})`, e.fencingToken, this.token(w.token));
      }
    }
    if ('delay' in checks) {
      const d = k?.delay;
      const w = checks.delay;
      const shown = d && `until ${d.untilMs} ms by txn ${d.transactionId} (${d.cause})`;
      if (w === null) {
        if (d) throw new StepFailed(`expected no delay, got ${shown}`);
      } else if (!d) {
        throw new StepFailed('expected a delay, got none');
      } else {
        if ('txn' in w) check(`delay transaction (want ${w.txn})`, d.transactionId, this.txn(w).id);
        if ('cause' in w) check('delay cause', d.cause, w.cause);
      }
    }
  }

  handle(step) {
    const h = this.handles.get(step.handle);
    if (!h) throw new StepFailed(`no background acquire ${step.handle}`);
    return h;
  }

  async expectQueued(step) {
    const h = this.handle(step);
    const blockers = (step.blocked_by ?? []).map((name) => {
      const tx = this.txns.get(name);
      if (!tx) throw new StepFailed(`blocked_by names ${name}, which was never begun`);
      return tx.id;
    });
    const deadline = Date.now() + PATIENCE_MS;
    let seen = 'nothing';
    for (;;) {
      // The transaction's entries in the queues of the keys it asked for (listLocks): like its
      // queued messages, an acquire_all takes the furthest position and every blocker. Read
      // the queues first, then whether the acquire ended: a wait seen there was real even if
      // the grant came right after.
      const waiters = [];
      for (const namespace of new Set(h.keys.map((k) => k.namespace))) {
        for (const k of await this.dls.listLocks(namespace)) {
          if (!h.keys.some((w) => w.namespace === k.namespace && w.key === k.key)) continue;
          waiters.push(...k.waiters.filter((w) => w.transactionId === h.tx.id));
        }
      }
      if (waiters.length) {
        const position = Math.max(...waiters.map((w) => w.position));
        const blocking = [...new Set(waiters.flatMap((w) => w.blockingTransactionIds))];
        seen = `position ${position}, blocked by ${blocking}`;
        if (position === step.position) {
          const missing = blockers.filter((b) => !blocking.includes(b));
          if (missing.length) throw new StepFailed(`queued at ${position} but not blocked by ${missing}; blockers ${blocking}`);
          return;
        }
      } else {
        seen = 'no wait';
      }
      if (h.outcome) {
        const how = h.outcome.error ? `error ${h.outcome.error.code}: ${h.outcome.error.message}` : 'granted';
        throw new StepFailed(`acquire ended (${how}) before queued position ${step.position}; last seen ${seen}`);
      }
      if (Date.now() > deadline) {
        throw new StepFailed(`no queued position ${step.position} within ${PATIENCE_MS} ms; last seen ${seen}`);
      }
      await sleep(POLL_MS);
    }
  }

  /**
   * acquire_all's `locks` check against the grants in the order asked; each entry's saved
   * token is stored before the next entry is checked.
   */
  checkGrants(checks, locks) {
    if (!checks || !('locks' in checks)) return;
    const got = locks.map((l) => `${l.key}:${l.mode}#${l.fencingToken}`);
    if (locks.length !== checks.locks.length) {
      throw new StepFailed(`locks: expected ${checks.locks.length} grants, got ${got}`);
    }
    for (const [i, w] of checks.locks.entries()) {
      const lock = locks[i];
      const want = `${this.field(w, 'namespace', '${ns}')}/${this.field(w, 'key', '')}`;
      check(`locks[${i}] lock`, `${lock.namespace}/${lock.key}`, want);
      try {
        this.checkGrant(w, lock);
      } catch (e) {
        throw new StepFailed(`locks[${i}]: ${e.message}`);
      }
    }
  }

  checkGrant(checks, lock) {
    if (!checks) return;
    if ('mode' in checks) check('mode', lock.mode, checks.mode);
    if ('token_equals' in checks) check('fencing token', lock.fencingToken, this.token(checks.token_equals));
    if ('token_greater_than' in checks) {
      const t = this.token(checks.token_greater_than);
      if (!(lock.fencingToken > t)) throw new StepFailed(`fencing token ${lock.fencingToken} is not greater than ${t}`);
    }
    if ('save_token' in checks) this.tokens.set(checks.save_token, lock.fencingToken);
  }

  /**
   * Polls the transaction's status until the step's ok checks hold; an ended transaction no
   * longer changes, so a mismatch then fails.
   */
  async awaitStatus(step) {
    const checks = step.expect?.ok ?? {};
    const deadline = Date.now() + (step.within_ms ?? PATIENCE_MS);
    for (;;) {
      const status = await this.txn(step).status();
      try {
        this.checkStatus(checks, status);
        return;
      } catch (e) {
        if (!(e instanceof StepFailed) || status.state !== 'ACTIVE' || Date.now() > deadline) {
          throw new StepFailed(`${e.message} (state ${status.state})`);
        }
      }
      await sleep(50);
    }
  }

  checkStatus(checks, s) {
    if ('state' in checks) check('state', s.state, checks.state);
    if ('name' in checks) check('name', s.name ?? '', this.text(checks.name));
    if ('priority' in checks) check('priority', s.priority, checks.priority);
    if ('lease_timeout_ms' in checks) check('lease_timeout_ms', s.leaseTimeoutMs, checks.lease_timeout_ms);
    if ('end_cause' in checks && s.endCause !== checks.end_cause) {
      throw new StepFailed(`end_cause: got ${s.endCause}, want ${checks.end_cause}`);
    }
    if ('locks' in checks) {
      const show = (l) => `${l.key}:${l.mode}#${l.fencingToken}`;
      const got = s.locks.map(show);
      const unmatched = [...s.locks];
      for (const w of checks.locks) {
        const namespace = this.field(w, 'namespace', '${ns}');
        const key = this.field(w, 'key', '');
        const token = 'token' in w ? this.token(w.token) : null;
        const i = unmatched.findIndex(
          (l) =>
            l.namespace === namespace && l.key === key && l.mode === w.mode && (token === null || l.fencingToken === token),
        );
        if (i < 0) throw new StepFailed(`locks: no ${key}:${w.mode}${token === null ? '' : `#${token}`} in ${got}`);
        unmatched.splice(i, 1);
      }
      if (unmatched.length) throw new StepFailed(`locks: unexpected ${unmatched.map(show)} in ${got}`);
    }
    if ('waiting' in checks) {
      const w = checks.waiting;
      const p = s.waiting;
      if (w === null) {
        if (p) throw new StepFailed(`expected no pending wait, got ${p.key}:${p.mode} at ${p.position}`);
      } else if (!p) {
        throw new StepFailed('expected a pending wait, got none');
      } else {
        check('waiting.namespace', p.namespace, this.field(w, 'namespace', '${ns}'));
        check('waiting.key', p.key, this.field(w, 'key', ''));
        if ('mode' in w) check('waiting.mode', p.mode, w.mode);
        if ('position' in w) check('waiting.position', p.position, w.position);
      }
    }
  }
}

for (const [i, spec] of SCENARIOS.entries()) {
  const reason = skipReason(spec);
  test(`conformance: ${spec.name}`, { skip: reason }, async () => {
    const ns = `cf-js-${RUN_ID}-${String(i).padStart(2, '0')}`;
    await new Scenario(new Dls.DlsClient({ endpoints: [server.endpoint] }), ns).run(spec);
  });
}
