'use strict';
// @caerus-dev/sdk: JavaScript glue over the native binding (caerus.<platform>.node), which
// is itself a thin layer over the Rust client caerus-core. Lock logic (retries, leader
// discovery, heartbeats, the lost signal, commit/abort around withTransaction) lives in
// Rust; this file only maps errors to classes, turns core's lost signal into an
// AbortSignal and event watches into async iterators.

const fs = require('node:fs');
const path = require('node:path');

// Where the native addon comes from, in order: CAERUS_NODE_NATIVE (a path, for tests); a
// caerus.<platform>.node next to this file (a build in a checkout); the per-platform package
// npm installed as an optional dependency (@caerus-dev/sdk-linux-x64-gnu), as napi-rs lays
// packages out, so a user downloads only the binary for their platform.
// napi-rs's names, in the order to try. Windows: the release is built with the GNU toolchain
// (win32-x64-gnu; no MSVC here), a local MSVC build (win32-x64-msvc) is tried first. N-API
// symbols are resolved at load time, so either loads in the MSVC-built node.exe.
function platformTriples() {
  if (process.platform === 'win32') return [`win32-${process.arch}-msvc`, `win32-${process.arch}-gnu`];
  if (process.platform !== 'linux') return [`${process.platform}-${process.arch}`];
  // glibcVersionRuntime is absent on musl (Alpine); those need a -musl build.
  const { glibcVersionRuntime } = process.report.getReport().header;
  return [`linux-${process.arch}-${glibcVersionRuntime ? 'gnu' : 'musl'}`];
}

function loadNative() {
  const override = process.env.CAERUS_NODE_NATIVE;
  if (override) return require(path.resolve(override));
  const triples = platformTriples();
  const tried = [];
  for (const triple of triples) {
    const local = path.join(__dirname, `caerus.${triple}.node`);
    if (fs.existsSync(local)) return require(local);
    tried.push(local);
  }
  let missing;
  for (const triple of triples) {
    const pkg = `@caerus-dev/sdk-${triple}`;
    try {
      return require(pkg);
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND' || !String(e.message).includes(pkg)) throw e;
      missing ??= e;
    }
  }
  const pkg = `@caerus-dev/sdk-${triples.at(-1)}`;
  throw new Error(
    `@caerus-dev/sdk: no native addon for ${triples.join(' or ')}: neither ${tried.join(', ')} nor the ` +
      `package ${pkg} is installed. Install ${pkg} next to @caerus-dev/sdk (npm installs it as an ` +
      'optional dependency; --omit=optional or --no-optional skip it), or in a checkout build it with ' +
      '`npm install && npm run build` in bindings/node.',
    { cause: missing },
  );
}

const native = loadNative();

// ---------------------------------------------------------------- errors

/**
 * Base class of every error the SDK raises; `code` is core's stable error code. A
 * TransactionLostError or DeadlockVictimError says what ended the transaction in
 * `endCause` ('LEASE_EXPIRED', 'DEADLOCK_VICTIM', 'OPERATOR_ABORT', ...; null when the
 * server did not say), a DeadlockVictimError the broken cycle in `deadlock`
 * (`{ cycle, victimTransactionId, policy }`, as a DEADLOCK_RESOLVED event's detail; null
 * when the server no longer had it).
 */
class DlsError extends Error {
  constructor(code, message, options) {
    super(message, options);
    this.name = 'DlsError';
    this.code = code;
    this.endCause = options?.endCause ?? null;
    this.deadlock = options?.deadlock ?? null;
  }
}

// The classes come from the error table every SDK shares (caerus_types::ErrorClass), which
// the addon exports: `<stem>Error` per code, e.g. LockTimeoutError for LOCK_TIMEOUT.
const ERROR_CLASSES = {};
for (const { code, stem, retryable, description } of native.errorClasses()) {
  const name = `${stem}Error`;
  const cls = class extends DlsError {
    constructor(message, options) {
      super(code, message, options);
      this.name = name;
    }
  };
  Object.defineProperty(cls, 'name', { value: name });
  Object.defineProperty(cls, 'code', { value: code });
  Object.defineProperty(cls, 'retryable', { value: retryable });
  Object.defineProperty(cls, 'description', { value: description });
  ERROR_CLASSES[code] = cls;
}
const errorClasses = Object.fromEntries(Object.values(ERROR_CLASSES).map((cls) => [cls.name, cls]));
const {
  LockTimeoutError,
  DeadlockVictimError,
  TransactionLostError,
  InvalidArgumentError,
} = errorClasses;

/** The first key of the addon's error records (bindings/node/src/errors.rs). */
const ENVELOPE_TAG = '{"caerusDlsError":';

function deadlockOf(d) {
  if (d == null) return null;
  return {
    cycle: d.cycle.map((m) => ({ ...m, transactionId: BigInt(m.transactionId) })),
    victimTransactionId: BigInt(d.victimTransactionId),
    policy: d.policy,
  };
}

/** The one place native errors (records: code, message, endCause, deadlock) become SDK error classes. */
function mapError(err) {
  if (err instanceof DlsError || !(err instanceof Error)) return err;
  if (typeof err.message !== 'string' || !err.message.startsWith(ENVELOPE_TAG)) return err;
  const { code, message, endCause, deadlock } = JSON.parse(err.message);
  const options = { endCause: endCause ?? null, deadlock: deadlockOf(deadlock) };
  const cls = ERROR_CLASSES[code];
  return cls ? new cls(message, options) : new DlsError(code, message, options);
}

async function call(promise) {
  try {
    return await promise;
  } catch (e) {
    throw mapError(e);
  }
}

function sync(fn) {
  try {
    return fn();
  } catch (e) {
    throw mapError(e);
  }
}

function toBigInt(value, what) {
  if (typeof value === 'bigint') return value;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  throw new InvalidArgumentError(`${what} must be a non-negative integer (bigint or safe number), got ${value}`);
}

function txOptions(opts) {
  if (opts == null) return null;
  const { timeoutMs, priority, name, maxDurationMs, lostStream } = opts;
  return { timeoutMs, priority, name, maxDurationMs, lostStream };
}

/**
 * `JSON.stringify` replacer for anything holding SDK values: u64s (fencing tokens, ids,
 * sequences) are bigints, which JSON cannot hold, so they become decimal strings.
 */
function jsonReplacer(_key, value) {
  return typeof value === 'bigint' ? value.toString() : value;
}

/** A lock's JSON form: the same fields, the fencing token as a decimal string. */
function lockToJSON() {
  return { namespace: this.namespace, key: this.key, mode: this.mode, fencingToken: this.fencingToken.toString() };
}

/** Gives a lock from the native layer a (non-enumerable) `toJSON`, so `JSON.stringify(lock)` works. */
function jsonable(lock) {
  if (lock !== null && typeof lock === 'object') {
    Object.defineProperty(lock, 'toJSON', { value: lockToJSON, enumerable: false });
  }
  return lock;
}

function lostError(reason) {
  const message = `transaction lost (${reason.kind}): ${reason.message}`;
  const err =
    reason.kind === 'DEADLOCK_VICTIM' ? new DeadlockVictimError(message) : new TransactionLostError(message);
  err.lostKind = reason.kind;
  return err;
}

/** The `onQueued` option checked here, so a wrong type fails the call instead of the runtime. */
// The OpenTelemetry API package, when the application has it (an optional import: never a
// dependency of this package); null when it is not installed.
let otelApi;
function otel() {
  if (otelApi === undefined) {
    try {
      otelApi = require('@opentelemetry/api');
    } catch {
      otelApi = null;
    }
  }
  return otelApi;
}

/**
 * The W3C trace context to send with an acquire: `opts.traceparent` / `opts.tracestate`,
 * or else the active OpenTelemetry span's (when `@opentelemetry/api` is installed). Read from
 * the span context itself, so it works whatever propagator the application registered.
 * Tracing never fails a call: anything unexpected sends nothing.
 */
function traceContext(opts) {
  if (typeof opts?.traceparent === 'string') {
    return { traceparent: opts.traceparent, tracestate: opts.tracestate ?? null };
  }
  const api = otel();
  if (!api) return { traceparent: null, tracestate: null };
  try {
    const sc = api.trace.getSpanContext(api.context.active());
    if (!sc || !api.trace.isSpanContextValid(sc)) return { traceparent: null, tracestate: null };
    const flags = (sc.traceFlags & 1) === 1 ? '01' : '00';
    const state = sc.traceState?.serialize?.() || null;
    return { traceparent: `00-${sc.traceId}-${sc.spanId}-${flags}`, tracestate: state };
  } catch {
    return { traceparent: null, tracestate: null };
  }
}

function queuedCallback(onQueued) {
  if (onQueued == null) return null;
  if (typeof onQueued !== 'function') throw new InvalidArgumentError('onQueued must be a function');
  return onQueued;
}

/**
 * Runs `start(nativeAbort)` (a native acquire) under the caller's `opts.signal`: when the
 * signal aborts, the native call is dropped, which withdraws a waiting request on the
 * server (so it is never granted to nobody), and the promise rejects with `signal.reason`,
 * as `fetch` does. An already aborted signal rejects before anything is sent.
 */
async function abortable(signal, start) {
  if (signal == null) return call(start(null));
  if (typeof signal.aborted !== 'boolean' || typeof signal.addEventListener !== 'function') {
    throw new InvalidArgumentError('signal must be an AbortSignal');
  }
  signal.throwIfAborted();
  const abort = new native.NativeAbort();
  const onAbort = () => abort.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await call(start(abort));
  } catch (e) {
    if (signal.aborted) throw signal.reason;
    throw e;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/** Aborts and stops the heartbeat even if the abort fails: the caller owns the transaction's life. */
async function abortQuietly(tx) {
  try {
    await tx.abort();
  } catch {
    // the body's (or the commit's) error is the one to report
  }
  tx.abandon();
}

// ---------------------------------------------------------------- transaction

/** A running transaction. Its lease is kept alive by a heartbeat in Rust. */
class Transaction {
  #native;
  #controller = null;

  constructor(nativeTx) {
    this.#native = nativeTx;
  }

  /**
   * Transaction id assigned by the server (u64, so a bigint); 0n until the transaction's
   * first call reached the server (`transaction()`, `withTransaction` and `lock` begin with
   * the first acquire, in the same request).
   */
  get id() {
    return this.#native.id;
  }

  /** Lease length the server applied, in milliseconds (the requested one until it began). */
  get leaseMs() {
    return this.#native.leaseMs;
  }

  /**
   * An AbortSignal that aborts when the transaction is lost (lease expired, deadlock
   * victim, aborted by an operator); `signal.reason` is a TransactionLostError (or a
   * DeadlockVictimError). It never aborts after a normal commit or abort.
   */
  get signal() {
    if (this.#controller === null) {
      const controller = new AbortController();
      this.#controller = controller;
      this.#native.onLost((reason) => controller.abort(lostError(reason)));
    }
    return this.#controller.signal;
  }

  /**
   * Takes a lock; resolves with `{ namespace, key, mode, fencingToken }` (fencingToken:
   * bigint). `opts.onQueued({ position, blockingTransactionIds })` is called each time the
   * request's place in the key's queue changes (1 = next). `opts.signal` (an AbortSignal)
   * gives the wait up: the request is withdrawn on the server and this rejects with
   * `signal.reason`. `opts.traceparent` (and `opts.tracestate`), a W3C trace context, puts
   * the lock's wait, grant and release spans in that trace on a node that exports spans;
   * without it the active OpenTelemetry span's context is sent when `@opentelemetry/api`
   * is installed.
   */
  async acquireLock(namespace, key, mode = 'EXCLUSIVE', opts = {}) {
    const onQueued = queuedCallback(opts?.onQueued);
    const { traceparent, tracestate } = traceContext(opts);
    const lock = await abortable(opts?.signal, (abort) =>
      this.#native.acquireLock(namespace, key, mode, opts?.timeoutMs ?? null, onQueued, abort, traceparent, tracestate),
    );
    return jsonable(lock);
  }

  /**
   * Takes one permit of the counted semaphore `namespace/key` of `permits` permits: up to
   * that many transactions hold it at once, a fencing token each (mode 'SEMAPHORE'); the
   * others wait in arrival order. Everyone on the key must name the same count, and a
   * semaphore key takes no EXCLUSIVE or SHARED_READ request (InvalidArgumentError). Release
   * it like a lock. `opts` as in `acquireLock`.
   */
  async acquirePermit(namespace, key, permits, opts = {}) {
    if (!Number.isInteger(permits) || permits < 1) {
      throw new InvalidArgumentError(`acquirePermit needs permits, an integer between 1 and 100000 (got ${permits})`);
    }
    const onQueued = queuedCallback(opts?.onQueued);
    const lock = await abortable(opts?.signal, (abort) =>
      this.#native.acquirePermit(namespace, key, permits, opts?.timeoutMs ?? null, onQueued, abort),
    );
    return jsonable(lock);
  }

  /**
   * Takes every lock of `locks` (`[{ namespace, key, mode }]`, mode default EXCLUSIVE)
   * together or none of them; resolves with the granted locks in the order asked.
   */
  acquireLocks(locks, opts = {}) {
    if (!Array.isArray(locks)) throw new InvalidArgumentError('acquireLocks needs an array of { namespace, key, mode }');
    const wanted = locks.map((l) => ({ namespace: l?.namespace, key: l?.key, mode: l?.mode ?? 'EXCLUSIVE' }));
    const onQueued = queuedCallback(opts?.onQueued);
    return abortable(opts?.signal, (abort) =>
      Promise.resolve().then(() => this.#native.acquireLocks(wanted, opts?.timeoutMs ?? null, onQueued, abort)),
    ).then((granted) => granted.map(jsonable));
  }

  /**
   * Claims the schedule slot of a lock this transaction holds EXCLUSIVE: at most once per slot
   * of `periodMs` (aligned to the Unix epoch), decided by the cluster's clock. Run the job only
   * when the claim's `run` is true, then `finishSlot`. `opts.retryFailed`: a slot whose run
   * failed or was lost may run again.
   */
  claimSlot(namespace, key, periodMs, opts = {}) {
    return call(Promise.resolve().then(() => this.#native.claimSlot(namespace, key, periodMs, Boolean(opts?.retryFailed))));
  }

  /** Records how a claimed run ended: 'SUCCEEDED', 'FAILED' (with `exitCode`) or 'LOST'; resolves with the record. */
  finishSlot(claim, outcome, exitCode = null) {
    return call(Promise.resolve().then(() => this.#native.finishSlot(claim, outcome, exitCode)));
  }

  /** EXCLUSIVE -> SHARED_READ in place, keeping the fencing token; resolves with the lock, or null if not held. */
  async downgrade(namespace, key) {
    return jsonable(await call(this.#native.downgrade(namespace, key)));
  }

  /** Releases one lock early; resolves with whether the transaction held (or waited for) it. */
  release(namespace, key) {
    return call(this.#native.release(namespace, key));
  }

  /** The transaction as the leader sees it. */
  status() {
    return call(this.#native.status());
  }

  /** Commits: ends the transaction and releases its locks. */
  commit() {
    return call(this.#native.commit());
  }

  /** Aborts: ends the transaction and releases its locks. Succeeds if it already ended. */
  abort() {
    return call(this.#native.abort());
  }

  /** Stops the heartbeat without telling the server; the lease then runs out on its own. */
  abandon() {
    this.#native.abandon();
  }

  /** True once the transaction is lost. */
  get isLost() {
    return this.#native.lostReason() !== null;
  }

  /** `{ kind, message }` once the transaction is lost, else null. */
  get lostReason() {
    return this.#native.lostReason();
  }
}

// ---------------------------------------------------------------- key watch and election

/** Who holds one key: an async iterator of `{ holders, changes, initial }` updates. */
class KeyWatch {
  #native;

  constructor(nativeWatch) {
    this.#native = nativeWatch;
  }

  async next() {
    const update = await call(this.#native.next());
    return update === null ? { value: undefined, done: true } : { value: update, done: false };
  }

  async return() {
    this.#native.close();
    return { value: undefined, done: true };
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

// The longest single wait the server takes; a candidate waits again, keeping its turn
// except for the moment between two waits.
const CAMPAIGN_WAIT_MS = 3_600_000;

/** Held while this candidate leads (from `Election.campaign`). */
class Leadership {
  constructor(transaction, lock) {
    this.transaction = transaction;
    this.lock = lock;
  }

  /** The lock's fencing token: higher for every later leader (bigint). */
  get term() {
    return this.lock.fencingToken;
  }

  /** Aborts when leadership is lost (lease lapsed, operator abort): stop leading then. */
  get signal() {
    return this.transaction.signal;
  }

  /** Steps down: the next candidate in line takes over. */
  resign() {
    return this.transaction.commit();
  }
}

/**
 * Leader election over one key (as etcd's `concurrency.Election` or Curator's
 * `LeaderLatch`): candidates wait in line for the key's EXCLUSIVE lock; the holder leads,
 * with the lock's fencing token as its term.
 */
class Election {
  #client;

  constructor(client, namespace, key) {
    this.#client = client;
    this.namespace = namespace;
    this.key = key;
  }

  /** Resolves when `candidate` leads; `leaseMs`: how long a silent leader keeps leading. */
  async campaign(candidate, opts = {}) {
    const tx = await this.#client.beginTransaction({ name: candidate, timeoutMs: opts?.leaseMs ?? 15000 });
    try {
      for (;;) {
        try {
          return new Leadership(tx, await tx.acquireLock(this.namespace, this.key, 'EXCLUSIVE', { timeoutMs: CAMPAIGN_WAIT_MS }));
        } catch (e) {
          if (!(e instanceof LockTimeoutError)) throw e;
        }
      }
    } catch (e) {
      await abortQuietly(tx);
      throw e;
    }
  }

  /** The current leader (`transactionName` is its candidate name), or null. */
  async leader() {
    for await (const update of await this.#client.watchKey(this.namespace, this.key)) {
      return update.holders[0] ?? null;
    }
    return null;
  }

  /** The leader now, then each time it changes (null: nobody leads). */
  async *observe() {
    let last;
    for await (const update of await this.#client.watchKey(this.namespace, this.key)) {
      const leader = update.holders[0] ?? null;
      const term = leader ? leader.fencingToken : null;
      if (term !== last) {
        last = term;
        yield leader;
      }
    }
  }
}

// ---------------------------------------------------------------- events

/** An event watch: an async iterator over the cluster's event log. */
class EventWatch {
  #stream;
  #closed = false;

  constructor(streamPromise) {
    this.#stream = streamPromise;
    // Attach errors surface through next(); never as an unhandled rejection.
    streamPromise.catch(() => {});
  }

  /** Resolves once the watch is attached to the leader (events committed after are delivered). */
  async attached() {
    await call(this.#stream);
    return this;
  }

  /** The last sequence committed when the watch attached (bigint or null). */
  async backlogEnd() {
    return (await call(this.#stream)).backlogEnd;
  }

  async next() {
    if (this.#closed) return { done: true, value: undefined };
    const stream = await call(this.#stream);
    const event = await call(stream.next());
    if (event === null) {
      this.#closed = true;
      return { done: true, value: undefined };
    }
    return { done: false, value: event };
  }

  async return() {
    await this.close();
    return { done: true, value: undefined };
  }

  /** Stops the watch. */
  async close() {
    this.#closed = true;
    try {
      (await this.#stream).close();
    } catch {
      // never attached: nothing to close
    }
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

// ---------------------------------------------------------------- client

/** A connection to a Caerus DLS cluster. */
class DlsClient {
  #native;

  /**
   * @param opts.apiKey defaults to env CAERUS_API_KEY
   * @param opts.endpoints defaults to env DLS_ENDPOINTS (comma separated), then 127.0.0.1:7070
   * @param opts.caFile, opts.clientCertFile, opts.clientKeyFile default to env DLS_CA_FILE,
   *   DLS_CLIENT_CERT_FILE, DLS_CLIENT_KEY_FILE
   */
  constructor(opts = {}) {
    const o = opts ?? {};
    this.#native = sync(
      () =>
        new native.NativeClient({
          apiKey: o.apiKey || undefined,
          endpoints: o.endpoints,
          connectTimeoutMs: o.connectTimeoutMs,
          requestTimeoutMs: o.requestTimeoutMs,
          retryDeadlineMs: o.retryDeadlineMs,
          caFile: o.caFile,
          clientCertFile: o.clientCertFile,
          clientKeyFile: o.clientKeyFile,
        }),
    );
  }

  /**
   * A transaction that begins with its first call (manual control: commit or abort it
   * yourself). When that call is an acquire, the begin and the lock go in one request.
   */
  transaction(opts) {
    return new Transaction(sync(() => this.#native.transaction(txOptions(opts))));
  }

  /**
   * Takes one lock in a new transaction (one request) and resolves with a held lock:
   * `{ namespace, key, mode, fencingToken, transaction, signal, release() }`; `release()`
   * commits the transaction (frees the lock). Works with `await using` (it is
   * AsyncDisposable). Options: `mode` (EXCLUSIVE), `timeoutMs` (the wait, default
   * 10000), `signal` (an AbortSignal that gives the wait up), `leaseMs` (default 15000),
   * `priority`, `name`, `maxDurationMs`, `lostStream`. A failed acquire leaves nothing held.
   */
  async lock(namespace, key, opts = {}) {
    const o = opts ?? {};
    const tx = this.transaction({
      timeoutMs: o.leaseMs,
      priority: o.priority,
      name: o.name,
      maxDurationMs: o.maxDurationMs,
      lostStream: o.lostStream,
    });
    let lock;
    try {
      lock = await tx.acquireLock(namespace, key, o.mode ?? 'EXCLUSIVE', { timeoutMs: o.timeoutMs, signal: o.signal });
    } catch (e) {
      await abortQuietly(tx);
      throw e;
    }
    const release = () => tx.commit();
    return jsonable({
      ...lock,
      transaction: tx,
      get signal() {
        return tx.signal;
      },
      release,
      [Symbol.asyncDispose ?? Symbol.for('Symbol.asyncDispose')]: release,
    });
  }

  /**
   * Runs `fn(lock, tx, signal)` holding one lock, as `withTransaction` runs its body (commit when it
   * resolves, abort when it throws, TransactionLostError if the lease is lost); the begin and
   * the acquire go in one request. Options as `lock()`.
   */
  async withLock(namespace, key, fn, opts = {}) {
    if (typeof fn !== 'function') throw new InvalidArgumentError('withLock needs a callback');
    const o = opts ?? {};
    return this.withTransaction(
      async (tx, signal) =>
        fn(await tx.acquireLock(namespace, key, o.mode ?? 'EXCLUSIVE', { timeoutMs: o.timeoutMs }), tx, signal),
      {
        timeoutMs: o.leaseMs,
        priority: o.priority,
        name: o.name,
        maxDurationMs: o.maxDurationMs,
        lostStream: o.lostStream,
      },
    );
  }

  /** Begins a transaction now (manual control: commit or abort it yourself). */
  async beginTransaction(opts) {
    return new Transaction(await call(this.#native.beginTransaction(txOptions(opts))));
  }

  /**
   * Runs `fn(tx, signal)` in a transaction: commits when it resolves, aborts when it throws
   * (and rethrows), and resolves with its value. If the transaction is lost meanwhile,
   * `signal` (the same as `tx.signal`; hand it to fetch, timers, streams) aborts and this
   * rejects with TransactionLostError (DeadlockVictimError).
   */
  async withTransaction(fn, opts) {
    if (typeof fn !== 'function') throw new InvalidArgumentError('withTransaction needs a callback');
    // The same steps as core's with_transaction, here so that a cycle costs only the calls
    // themselves (no callback from Rust into JavaScript and back): the body races the lost
    // signal; its own outcome wins a tie.
    const tx = this.transaction(opts);
    const signal = tx.signal;
    let onLost;
    const lost = new Promise((resolve) => {
      onLost = () => resolve({ lost: signal.reason });
      signal.addEventListener('abort', onLost, { once: true });
    });
    const work = Promise.resolve()
      .then(() => fn(tx, signal))
      .then(
        (value) => ({ value }),
        (error) => ({ error }),
      );
    let outcome;
    try {
      outcome = await Promise.race([work, lost]);
    } finally {
      signal.removeEventListener('abort', onLost);
    }
    if ('lost' in outcome) {
      tx.abandon();
      throw outcome.lost;
    }
    if ('error' in outcome) {
      await abortQuietly(tx);
      throw outcome.error;
    }
    try {
      await tx.commit();
    } catch (e) {
      // The outcome may be unknown (e.g. no leader): abort so the locks are not held until
      // the lease runs out; after a commit that did happen the abort is a harmless no-op.
      await abortQuietly(tx);
      throw e;
    }
    return outcome.value;
  }

  /** Any transaction's status, by id. */
  transactionStatus(id) {
    return call(Promise.resolve().then(() => this.#native.transactionStatus(toBigInt(id, 'id'))));
  }

  /**
   * Follows who holds `namespace`/`key`: resolves (once attached) with an async iterator of
   * `{ holders, changes, initial }` updates (changes: GRANTED, RELEASED, EXPIRED, REVOKED,
   * DOWNGRADED); follows leader changes. `break` out of the loop to stop it.
   */
  async watchKey(namespace, key) {
    return new KeyWatch(await call(this.#native.watchKey(namespace, key)));
  }

  /** Leader election over `namespace`/`key`. */
  election(namespace, key) {
    return new Election(this, namespace, key);
  }

  /**
   * Whether `fencingToken` is the current grant of `namespace`/`key` (a linearizable read
   * on the leader; no transaction): resolves with `{ current, currentTokens }`.
   */
  verifyFencingToken(namespace, key, fencingToken) {
    return call(
      Promise.resolve().then(() =>
        this.#native.verifyFencingToken(namespace, key, toBigInt(fencingToken, 'fencingToken')),
      ),
    );
  }

  /** Operator call: aborts any transaction; resolves with its final state. */
  abortTransaction(id, reason = '') {
    return call(Promise.resolve().then(() => this.#native.abortTransaction(toBigInt(id, 'id'), reason)));
  }

  /**
   * Operator call: every key held, waited for or under a lock-delay in namespaces starting
   * with `namespacePrefix` ('' = all): `{ namespace, key, holders, waiters, delay }`.
   */
  listLocks(namespacePrefix = '') {
    return call(Promise.resolve().then(() => this.#native.listLocks(namespacePrefix)));
  }

  /**
   * Operator call: when a holder in a namespace starting with `namespacePrefix` is revoked
   * (lease expired, operator abort, deadlock victim, max duration), its keys grant nothing
   * for `delayMs`; a release or commit is never delayed. 0 removes the rule (at most 10
   * minutes, 256 rules). Resolves with the prefix's previous delay in ms (0: none).
   */
  setLockDelay(namespacePrefix, delayMs) {
    return call(Promise.resolve().then(() => this.#native.setLockDelay(namespacePrefix, delayMs)));
  }

  /** Operator call: the lock-delay rules `{ namespacePrefix, delayMs }`, sorted by prefix. */
  lockDelays() {
    return call(Promise.resolve().then(() => this.#native.lockDelays()));
  }

  /**
   * Operator call: creates an API key kept by the cluster (`{ namespacePrefixes, admin,
   * expiresInMs }`) and resolves with its secret, shown only here. Every node accepts it
   * once it applied the change.
   */
  createApiKey(name, options) {
    return call(Promise.resolve().then(() => this.#native.createApiKey(name, options)));
  }

  /** Operator call: the cluster's API keys this admin key may manage (never secrets). */
  listApiKeys() {
    return call(Promise.resolve().then(() => this.#native.listApiKeys()));
  }

  /** Operator call: revokes a cluster API key; its calls fail with UnauthenticatedError on every node. */
  revokeApiKey(name) {
    return call(Promise.resolve().then(() => this.#native.revokeApiKey(name)));
  }

  /** Operator call: a new secret for a cluster API key; the old one works `graceMs` longer. */
  rotateApiKey(name, graceMs) {
    return call(Promise.resolve().then(() => this.#native.rotateApiKey(name, graceMs)));
  }

  /**
   * Follows the cluster's event log from `fromSequence` (default: oldest retained); an
   * async iterator: `for await (const event of dls.watchEvents({ fromSequence: 1n }))`.
   */
  watchEvents(opts = {}) {
    const o = opts ?? {};
    const start = Promise.resolve().then(() =>
      this.#native.watchEvents({
        fromSequence: o.fromSequence == null ? undefined : toBigInt(o.fromSequence, 'fromSequence'),
        namespacePrefixes: o.namespacePrefixes,
        kinds: o.kinds,
        onlyNew: o.onlyNew,
      }),
    );
    return new EventWatch(start);
  }
}

const Dls = Object.freeze({
  DlsClient,
  jsonReplacer,
  KeyWatch,
  Election,
  Leadership,
  Transaction,
  EventWatch,
  DlsError,
  ...errorClasses,
});

module.exports = { Dls, ...Dls };
