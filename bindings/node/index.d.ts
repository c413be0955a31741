// Type declarations of @caerus-dev/sdk (hand-written; the native layer's generated
// declarations are in native.d.ts after a build, for review).
//
// Every u64 of the protocol (fencing tokens, transaction ids, event sequences) is a
// `bigint`: JavaScript numbers are doubles and lose integer precision above 2^53.

export declare namespace Dls {
  /** `EXCLUSIVE`: one holder. `SHARED_READ`: any number of readers, no writer. */
  type LockMode = 'EXCLUSIVE' | 'SHARED_READ' | 'SEMAPHORE';

  /** Stable error codes of the SDK (core's `Error::code()`). */
  type ErrorCode =
    | 'LOCK_TIMEOUT'
    | 'DEADLOCK_VICTIM'
    | 'TRANSACTION_LOST'
    | 'TRANSACTION_NOT_FOUND'
    | 'INVALID_ARGUMENT'
    | 'UNAUTHENTICATED'
    | 'PERMISSION_DENIED'
    | 'WAIT_CANCELLED'
    | 'ALREADY_WAITING'
    | 'CURSOR_EXPIRED'
    | 'RESOURCE_EXHAUSTED'
    | 'MEMBERSHIP_REFUSED'
    | 'UNAVAILABLE'
    | 'CONFIG'
    | 'INTERNAL';

  /** Why a transaction was lost. */
  type LostKind = 'EXPIRED' | 'ABORTED' | 'DEADLOCK_VICTIM' | 'LEASE_UNCONFIRMED' | 'NOT_FOUND';

  type TransactionState = 'ACTIVE' | 'COMMITTED' | 'ABORTED' | 'EXPIRED';
  /** What ended a transaction, as the server recorded it. */
  type EndCause = 'COMMITTED' | 'CLIENT_ABORT' | 'LEASE_EXPIRED' | 'DEADLOCK_VICTIM' | 'OPERATOR_ABORT' | 'MAX_DURATION_EXCEEDED';

  type EventKind = 'DEADLOCK_RESOLVED' | 'TRANSACTION_EXPIRED' | 'TRANSACTION_ABORTED' | 'LOCK_REVOKED';

  interface ClientOptions {
    /** API key sent as `authorization: Bearer <key>`. Default: env `CAERUS_API_KEY`. */
    apiKey?: string;
    /**
     * Cluster nodes as `host:port`, or `https://host:port` for TLS (a bare `host:port` uses
     * TLS once a CA file or client certificate is given). Default: env `DLS_ENDPOINTS`
     * (comma separated), then `127.0.0.1:7070`.
     */
    endpoints?: string[];
    /** Time allowed to open a connection to a node (default 2000). */
    connectTimeoutMs?: number;
    /** Time allowed for one attempt of a call (default 5000). */
    requestTimeoutMs?: number;
    /** Total time to keep retrying across elections before UNAVAILABLE (default 15000). */
    retryDeadlineMs?: number;
    /**
     * CA bundle (PEM) the nodes' TLS certificates must chain to: the cluster's `ca.pem`
     * (`dls certs init`). Default: env `DLS_CA_FILE`; without one, the public web roots.
     */
    caFile?: string;
    /** Client certificate (PEM) for nodes started with `--tls-client-ca`. Default: env `DLS_CLIENT_CERT_FILE`. */
    clientCertFile?: string;
    /** Private key (PEM) of `clientCertFile`. Default: env `DLS_CLIENT_KEY_FILE`. */
    clientKeyFile?: string;
  }

  interface TransactionOptions {
    /** Lease length in ms (100 ms – 1 h); the Rust core heartbeats it every third of it. */
    timeoutMs?: number;
    /** Deadlock-victim priority: higher is more important (default 0). */
    priority?: number;
    /** A label shown by operator tools and events. */
    name?: string;
    /** The server ends the transaction this long after it began, heartbeats or not (100 ms – 7 days). */
    maxDurationMs?: number;
    /**
     * Keep each acquire's stream open after the grant, so `tx.signal` aborts as soon as the server
     * ends the transaction (operator abort, deadlock victim, lease expiry, max duration) instead of
     * at the next heartbeat. Costs one open stream per transaction; heartbeats still run. Default false.
     */
    lostStream?: boolean;
  }

  interface AcquireOptions {
    /** How long to wait in the key's queue before LockTimeoutError; 0 tries once without queueing. */
    timeoutMs?: number;
    /** Called each time the request's place in the queue changes (on the event loop). */
    onQueued?: (position: QueuePosition) => void;
    /**
     * Gives the wait up when it aborts: the request is withdrawn on the server (never granted
     * to nobody; a grant that won the race is given back) and the call rejects with
     * `signal.reason`. An already aborted signal rejects before anything is sent.
     */
    signal?: AbortSignal;
    /**
     * W3C trace context of the caller's span (`00-<trace id>-<span id>-<flags>`): a node
     * started with `--otlp-endpoint` exports the lock's wait, grant and release spans as its
     * children. Default: the active OpenTelemetry span's, when `@opentelemetry/api` is
     * installed (an optional import). A malformed one is ignored by the server.
     */
    traceparent?: string;
    /** The `tracestate` sent with `traceparent` (vendor data, passed along unchanged). */
    tracestate?: string;
  }

  /** Where a waiting acquire stands in its key's queue. */
  interface QueuePosition {
    /** 1 = next in line (several locks: the furthest place over the keys waited for). */
    position: number;
    /** The transactions this request waits for (holders and earlier waiters). */
    blockingTransactionIds: bigint[];
  }

  /**
   * A `JSON.stringify` replacer that writes bigints (fencing tokens, ids, sequences) as
   * decimal strings: `JSON.stringify(await tx.status(), Dls.jsonReplacer)`. Locks from
   * `acquireLock`, `acquireLocks`, `downgrade` and `lock` need none: their `toJSON` does it.
   */
  function jsonReplacer(key: string, value: unknown): unknown;

  interface Lock {
    namespace: string;
    key: string;
    mode: LockMode;
    /**
     * Cluster-wide strictly increasing token of this grant (u64). Pass it to your storage.
     * `JSON.stringify(lock)` writes it as a decimal string (the lock's `toJSON`).
     */
    fencingToken: bigint;
  }

  /** A key's run for a schedule slot, as the cluster remembers it. */
  interface SlotRun {
    namespace: string;
    key: string;
    periodMs: number;
    /** floor(startedAtMs / periodMs). */
    slot: number;
    transactionId: bigint;
    /** Who ran it (its transaction's name). */
    transactionName: string;
    apiKey: string;
    /** The cluster's clock, ms since the Unix epoch. */
    startedAtMs: number;
    /** 0 while running. */
    finishedAtMs: number;
    state: 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'LOST';
    exitCode?: number | null;
    /** Why it was lost. */
    reason: string;
    /** Runs of this slot so far, this one included. */
    attempt: number;
  }

  /** The cluster's answer to `claimSlot`: run the job only when `run` is true. */
  interface SlotClaim {
    namespace: string;
    key: string;
    slot: number;
    run: boolean;
    attempt: number;
    /** When not run: the run that has the slot. */
    lastRun?: SlotRun | null;
  }

  /** One lock of `acquireLocks`. */
  interface LockRequest {
    namespace: string;
    key: string;
    /** Default EXCLUSIVE. */
    mode?: LockMode;
  }

  /** The answer of `verifyFencingToken`. */
  interface TokenCheck {
    /** Whether the token is held on the key right now. */
    current: boolean;
    /** The tokens of the key's current holders (several for SHARED_READ, none when free). */
    currentTokens: bigint[];
  }

  interface PendingLock {
    namespace: string;
    key: string;
    mode: LockMode;
    /** 1 = next in line. */
    position: number;
  }

  interface TransactionStatus {
    id: bigint;
    state: TransactionState;
    name?: string;
    priority: number;
    leaseTimeoutMs: number;
    leaseRemainingMs: number;
    locks: Lock[];
    waiting?: PendingLock;
    /** Why a finished transaction ended, in words; empty while active. */
    endReason: string;
    /** What ended it; undefined while active. */
    endCause?: EndCause;
  }

  interface LostReason {
    kind: LostKind;
    message: string;
    /** What ended it on the server, when the server said (null for an unconfirmed lease). */
    endCause: EndCause | null;
  }

  interface WatchOptions {
    /** First sequence wanted (default: the oldest retained event). */
    fromSequence?: bigint | number;
    /** Only events touching a namespace with one of these prefixes. */
    namespacePrefixes?: string[];
    /** Only these kinds. */
    kinds?: EventKind[];
    /** Skip the retained backlog. */
    onlyNew?: boolean;
  }

  interface CycleMember {
    transactionId: bigint;
    transactionName: string;
    priority: number;
    namespace: string;
    key: string;
    mode: LockMode;
  }

  /** One event of the replicated log. Fields after `namespaces` are present per `kind`. */
  interface Event {
    sequence: bigint;
    /** Leader's wall clock, ms since the Unix epoch. */
    timeMs: number;
    kind: EventKind;
    namespaces: string[];
    /** TRANSACTION_EXPIRED, TRANSACTION_ABORTED, LOCK_REVOKED */
    transactionId?: bigint;
    /** TRANSACTION_EXPIRED, TRANSACTION_ABORTED */
    transactionName?: string;
    /** TRANSACTION_EXPIRED, TRANSACTION_ABORTED */
    releasedLocks?: Lock[];
    /** TRANSACTION_ABORTED */
    reason?: string;
    /** TRANSACTION_ABORTED */
    operator?: string;
    /** DEADLOCK_RESOLVED */
    cycle?: CycleMember[];
    /** DEADLOCK_RESOLVED */
    victimTransactionId?: bigint;
    /** DEADLOCK_RESOLVED */
    policy?: string;
    /** LOCK_REVOKED */
    namespace?: string;
    /** LOCK_REVOKED */
    key?: string;
    /** LOCK_REVOKED */
    mode?: LockMode;
    /** LOCK_REVOKED: the revoked grant's token */
    fencingToken?: bigint;
    /** LOCK_REVOKED: what ended the holder (LEASE_EXPIRED, DEADLOCK_VICTIM or OPERATOR_ABORT) */
    cause?: EndCause;
  }

  /** A transaction holding a listed key (`listLocks`). */
  interface LockHolder {
    transactionId: bigint;
    /** Its label ("" if none). */
    transactionName: string;
    mode: LockMode;
    fencingToken: bigint;
    /** When it was granted (leader clock, ms since the Unix epoch). */
    sinceMs: number;
  }

  /** A request waiting in a listed key's queue (`listLocks`). */
  interface LockWaiter {
    transactionId: bigint;
    transactionName: string;
    mode: LockMode;
    /** 1 = next in line. */
    position: number;
    /** The transactions it waits for directly. */
    blockingTransactionIds: bigint[];
    /** When it started waiting (leader clock, ms since the Unix epoch). */
    sinceMs: number;
    /** A SHARED_READ holder waiting to become EXCLUSIVE. */
    upgrade: boolean;
  }

  /** Why and until when a listed key grants nothing: its holder was revoked under a lock-delay. */
  interface KeyDelay {
    /** When the key may be granted again (leader clock, ms since the Unix epoch). */
    untilMs: number;
    /** The revoked holder whose end started the delay. */
    transactionId: bigint;
    /** How it ended (LEASE_EXPIRED, OPERATOR_ABORT, DEADLOCK_VICTIM, MAX_DURATION_EXCEEDED); undefined if unknown. */
    cause?: EndCause;
  }

  /** One key of `listLocks`: held, waited for, or under a lock-delay. */
  interface KeyLocks {
    namespace: string;
    key: string;
    holders: LockHolder[];
    /** The FIFO queue, first in line first. */
    waiters: LockWaiter[];
    /** The lock-delay keeping the key from granting anything; undefined if none. */
    delay?: KeyDelay;
    /** A semaphore's permit count (holders and waiters are all SEMAPHORE); 0 for a lock. */
    permits: number;
  }

  /** A lock-delay rule (`lockDelays`). */
  interface LockDelayRule {
    /** Namespaces starting with this prefix ("" = every namespace). */
    namespacePrefix: string;
    /** How long a revoked holder's keys grant nothing, in ms. */
    delayMs: number;
  }

  /** An API key kept by the cluster (`listApiKeys`; never its secret). */
  interface ApiKeyInfo {
    name: string;
    /** Allowed namespace prefixes (empty = every namespace). */
    namespacePrefixes: string[];
    admin: boolean;
    /** When it stops working (the cluster's clock, ms since the epoch). */
    expiresAtMs?: number;
    /** The admin key that created it. */
    createdBy: string;
    createdAtMs: number;
  }

  /** What a new cluster API key may do (`createApiKey`). */
  interface ApiKeyOptions {
    /** Allowed namespace prefixes (default: every namespace). */
    namespacePrefixes?: string[];
    /** May call the operator API. */
    admin?: boolean;
    /** How long it works, by the cluster's clock (default: until revoked). */
    expiresInMs?: number;
  }

  /** Options of `lock` and `withLock`: the lock's and its transaction's. */
  interface LockOptions {
    /** Default EXCLUSIVE. */
    mode?: LockMode;
    /** How long to wait in the key's queue, in ms (default 10000). */
    timeoutMs?: number;
    /** `lock` only: gives the wait up when it aborts (see AcquireOptions.signal). */
    signal?: AbortSignal;
    /** The transaction's lease, in ms (default 15000). */
    leaseMs?: number;
    /** Deadlock-victim preference: higher is less likely to be aborted. */
    priority?: number;
    /** Label shown in status and events. */
    name?: string;
    /** The server ends the transaction this long after it began, heartbeats or not. */
    maxDurationMs?: number;
    /** As in TransactionOptions: hear at once that the server ended the transaction. */
    lostStream?: boolean;
  }

  /** A lock held by its own transaction (from `lock`): `await using held = await dls.lock(ns, key)`. */
  interface HeldLock extends Lock {
    /** The transaction holding the lock (more locks, status). */
    readonly transaction: Transaction;
    /** Aborts when the lock is lost (see Transaction.signal). */
    readonly signal: AbortSignal;
    /** Commits the transaction, which frees the lock; rejects with TransactionLostError if it was lost. */
    release(): Promise<void>;
    /** `await using` calls this: the same as `release()`. */
    [Symbol.asyncDispose](): Promise<void>;
  }

  /** A transaction holding a watched key. */
  interface KeyHolder {
    transactionId: bigint;
    /** Its label: in an election, the candidate's name. */
    transactionName: string;
    mode: LockMode;
    fencingToken: bigint;
    sinceMs: number;
  }

  /** One change of a watched key's holders. */
  interface KeyChange {
    kind: 'GRANTED' | 'RELEASED' | 'EXPIRED' | 'REVOKED' | 'DOWNGRADED';
    holder: KeyHolder;
    /** Why the holder's transaction ended (EXPIRED, REVOKED). */
    endCause?: EndCause;
  }

  /** The holders of a watched key and what changed since the previous update. */
  interface KeyUpdate {
    holders: KeyHolder[];
    /** Empty in the first update. */
    changes: KeyChange[];
    /** True for the first update: the state the watch starts from. */
    initial: boolean;
  }

  /** Who holds one key: `for await (const update of await dls.watchKey(ns, key))`. */
  class KeyWatch implements AsyncIterableIterator<KeyUpdate> {
    private constructor();
    next(): Promise<IteratorResult<KeyUpdate>>;
    return(): Promise<IteratorResult<KeyUpdate>>;
    [Symbol.asyncIterator](): this;
  }

  /** Held while this candidate leads. */
  class Leadership {
    private constructor();
    readonly transaction: Transaction;
    readonly lock: Lock;
    /** The lock's fencing token: higher for every later leader. */
    readonly term: bigint;
    /** Aborts when leadership is lost. */
    readonly signal: AbortSignal;
    /** Steps down: the next candidate takes over. */
    resign(): Promise<void>;
  }

  /** Leader election over one key (`dls.election(ns, key)`). */
  class Election {
    private constructor();
    readonly namespace: string;
    readonly key: string;
    /** Resolves when `candidate` leads; `leaseMs` (default 15000): how long a silent leader keeps leading. */
    campaign(candidate: string, options?: { leaseMs?: number }): Promise<Leadership>;
    /** The current leader, or null. */
    leader(): Promise<KeyHolder | null>;
    /** The leader now, then each time it changes (null: nobody leads). */
    observe(): AsyncGenerator<KeyHolder | null>;
  }

  /** A connection to a Caerus DLS cluster. Connections open lazily; the leader is found by itself. */
  class DlsClient {
    constructor(options?: ClientOptions);
    /**
     * A transaction that begins with its first call (commit or abort it yourself); when
     * that call is an acquire, the begin and the lock go in one request.
     */
    transaction(options?: TransactionOptions): Transaction;
    /** Takes one lock in a new transaction, in one request; `release()` (or `await using`) frees it. */
    lock(namespace: string, key: string, options?: LockOptions): Promise<HeldLock>;
    /** Runs `fn(lock, tx)` holding one lock, as `withTransaction` runs its body. */
    withLock<T>(
      namespace: string,
      key: string,
      fn: (lock: Lock, tx: Transaction, signal: AbortSignal) => Promise<T> | T,
      options?: LockOptions,
    ): Promise<T>;
    /** Begins a transaction now; commit or abort it yourself. */
    beginTransaction(options?: TransactionOptions): Promise<Transaction>;
    /**
     * Runs `fn` in a transaction: commits when it resolves, aborts when it throws (the
     * error is rethrown), always ends the transaction, and resolves with `fn`'s value.
     * If the transaction is lost meanwhile, `tx.signal` aborts and this rejects with
     * TransactionLostError (DeadlockVictimError for a deadlock victim).
     */
    withTransaction<T>(fn: (tx: Transaction, signal: AbortSignal) => Promise<T> | T, options?: TransactionOptions): Promise<T>;
    /** Any transaction's status, by id. */
    transactionStatus(id: bigint | number): Promise<TransactionStatus>;
    /** Follows who holds a key: the holders now, then one update per change; survives leader changes. */
    watchKey(namespace: string, key: string): Promise<KeyWatch>;
    /** Leader election over a key. */
    election(namespace: string, key: string): Election;
    /** Whether a fencing token is the current grant of a key (linearizable; no transaction needed). */
    verifyFencingToken(namespace: string, key: string, fencingToken: bigint | number): Promise<TokenCheck>;
    /** Operator call (admin key on a server with keys): aborts a transaction; resolves with its final state. */
    abortTransaction(id: bigint | number, reason?: string): Promise<TransactionState>;
    /** Operator call: every key held, waited for or under a lock-delay in namespaces starting with the prefix ("" = all). */
    listLocks(namespacePrefix?: string): Promise<KeyLocks[]>;
    /**
     * Operator call: a revoked holder's keys (lease expired, operator abort, deadlock victim,
     * max duration) in namespaces starting with the prefix grant nothing for `delayMs`; a
     * release never waits. 0 removes the rule; at most 10 minutes and 256 rules (else
     * InvalidArgumentError / ResourceExhaustedError). Resolves with the previous delay in ms.
     */
    setLockDelay(namespacePrefix: string, delayMs: number): Promise<number>;
    /** Operator call: the lock-delay rules, sorted by prefix. */
    lockDelays(): Promise<LockDelayRule[]>;
    /** Operator call: creates an API key kept by the cluster; resolves with its secret (shown only here). */
    createApiKey(name: string, options?: ApiKeyOptions): Promise<string>;
    /** Operator call: the cluster's API keys this admin key may manage (never secrets). */
    listApiKeys(): Promise<ApiKeyInfo[]>;
    /** Operator call: revokes a cluster API key; its calls then fail with UnauthenticatedError on every node. */
    revokeApiKey(name: string): Promise<void>;
    /** Operator call: a new secret for a cluster API key (resolved); the old one works `graceMs` longer. */
    rotateApiKey(name: string, graceMs?: number): Promise<string>;
    /** Follows the event log from a cursor, across leader changes: `for await (const e of dls.watchEvents())`. */
    watchEvents(options?: WatchOptions): EventWatch;
  }

  /** A running transaction; its lease is kept alive by a heartbeat in the Rust core. */
  class Transaction {
    private constructor();
    /** Server-assigned id (u64); 0n until the transaction's first call reached the server. */
    readonly id: bigint;
    /** The lease length the server applied, in ms (the requested one until it began). */
    readonly leaseMs: number;
    /**
     * Aborts when the transaction is lost (lease expired, deadlock victim, aborted by an
     * operator); `signal.reason` is a TransactionLostError or DeadlockVictimError with
     * `lostKind`. Never aborts after a normal commit or abort.
     */
    readonly signal: AbortSignal;
    /** True once the transaction is lost. */
    readonly isLost: boolean;
    /** Why it was lost, or null. */
    readonly lostReason: LostReason | null;
    /** Takes a lock, waiting in the key's FIFO queue up to `options.timeoutMs` (0: a try-lock, answered at once). */
    acquireLock(namespace: string, key: string, mode?: LockMode, options?: AcquireOptions): Promise<Lock>;
    /**
     * Takes one permit of the counted semaphore of `permits` permits (mode 'SEMAPHORE'): up to
     * that many holders at once, a token each, the others in arrival order.
     */
    acquirePermit(namespace: string, key: string, permits: number, options?: AcquireOptions): Promise<Lock>;
    /** Takes every lock together or none (one request, one token per lock), in the order given. */
    acquireLocks(locks: LockRequest[], options?: AcquireOptions): Promise<Lock[]>;
    /**
     * Claims the schedule slot of a lock this transaction holds EXCLUSIVE: at most once per slot
     * of `periodMs` (aligned to the Unix epoch), decided by the cluster's clock, so a host whose
     * clock is off or whose cron fired late finds the slot already ran. Run the job only when
     * `run` is true, then `finishSlot`. `retryFailed`: a failed or lost slot may run again.
     */
    claimSlot(namespace: string, key: string, periodMs: number, options?: { retryFailed?: boolean }): Promise<SlotClaim>;
    /** Records how a claimed run ended (before the lock is released: a run whose lock goes first is LOST). */
    finishSlot(claim: SlotClaim, outcome: 'SUCCEEDED' | 'FAILED' | 'LOST', exitCode?: number | null): Promise<SlotRun>;
    /** EXCLUSIVE -> SHARED_READ in place, keeping the fencing token; null if the lock was not held. */
    downgrade(namespace: string, key: string): Promise<Lock | null>;
    /** Releases one lock early; resolves with whether it was held (or waited for). */
    release(namespace: string, key: string): Promise<boolean>;
    /** The transaction as the leader sees it. */
    status(): Promise<TransactionStatus>;
    /** Ends the transaction and releases its locks; rejects with TransactionLostError if it was lost. */
    commit(): Promise<void>;
    /** Ends the transaction and releases its locks; fine if it already ended. */
    abort(): Promise<void>;
    /** Stops the heartbeat without telling the server (after a failed abort); the lease then runs out. */
    abandon(): void;
  }

  /** An event watch: an async iterator of events in sequence order. */
  class EventWatch implements AsyncIterableIterator<Event> {
    private constructor();
    /** Resolves once attached to the leader (with onlyNew, later events are all delivered). */
    attached(): Promise<this>;
    /** The last sequence committed when the watch attached, or null. */
    backlogEnd(): Promise<bigint | null>;
    next(): Promise<IteratorResult<Event, undefined>>;
    return(): Promise<IteratorResult<Event, undefined>>;
    /** Stops the watch; a pending `next()` resolves done. */
    close(): Promise<void>;
    [Symbol.asyncIterator](): this;
  }

  /** A deadlock the server broke, as the victim's error reports it (a DEADLOCK_RESOLVED event's detail). */
  interface Deadlock {
    /** The cycle in wait-for order: each member waits for the next, the last for the first. */
    cycle: CycleMember[];
    victimTransactionId: bigint;
    policy: 'LOWEST_PRIORITY_THEN_YOUNGEST' | 'YOUNGEST' | 'OLDEST';
  }

  interface DlsErrorOptions extends ErrorOptions {
    endCause?: EndCause | null;
    deadlock?: Deadlock | null;
  }

  /** Base class of the SDK's errors (one subclass per code of the error table every SDK shares). */
  class DlsError extends Error {
    constructor(code: string, message: string, options?: DlsErrorOptions);
    readonly code: ErrorCode | string;
    /** What ended the transaction (TransactionLostError, DeadlockVictimError); null when the server did not say. */
    readonly endCause: EndCause | null;
    /** The broken deadlock (DeadlockVictimError); null when the server no longer had it. */
    readonly deadlock: Deadlock | null;
    /** On errors that report a lost transaction (e.g. `tx.signal.reason`): how it was lost. */
    lostKind?: LostKind;
  }
  /** The acquire timeout passed; the transaction is still active. */
  class LockTimeoutError extends DlsError { constructor(message: string, options?: DlsErrorOptions); readonly code: 'LOCK_TIMEOUT'; }
  /** The server aborted the transaction to break a deadlock; its locks are gone. */
  class DeadlockVictimError extends DlsError { constructor(message: string, options?: DlsErrorOptions); readonly code: 'DEADLOCK_VICTIM'; }
  /** The transaction is no longer active (expired, aborted, ended); stop the guarded work. */
  class TransactionLostError extends DlsError { constructor(message: string, options?: DlsErrorOptions); readonly code: 'TRANSACTION_LOST'; }
  class TransactionNotFoundError extends DlsError { constructor(message: string, options?: DlsErrorOptions); readonly code: 'TRANSACTION_NOT_FOUND'; }
  class InvalidArgumentError extends DlsError { constructor(message: string, options?: DlsErrorOptions); readonly code: 'INVALID_ARGUMENT'; }
  class UnauthenticatedError extends DlsError { constructor(message: string, options?: DlsErrorOptions); readonly code: 'UNAUTHENTICATED'; }
  class PermissionDeniedError extends DlsError { constructor(message: string, options?: DlsErrorOptions); readonly code: 'PERMISSION_DENIED'; }
  /** The wait was withdrawn by a `release` of the same key. */
  class WaitCancelledError extends DlsError { constructor(message: string, options?: DlsErrorOptions); readonly code: 'WAIT_CANCELLED'; }
  /** The transaction already waits for another lock. */
  class AlreadyWaitingError extends DlsError { constructor(message: string, options?: DlsErrorOptions); readonly code: 'ALREADY_WAITING'; }
  /** The event cursor fell out of the retained log. */
  class CursorExpiredError extends DlsError { constructor(message: string, options?: DlsErrorOptions); readonly code: 'CURSOR_EXPIRED'; }
  /** A server limit (named in the message, with its flag) refused the request; nothing changed. Not retried. */
  class ResourceExhaustedError extends DlsError { constructor(message: string, options?: DlsErrorOptions); readonly code: 'RESOURCE_EXHAUSTED'; }
  /** A membership change does not fit the current membership; nothing changed. */
  class MembershipRefusedError extends DlsError { constructor(message: string, options?: DlsErrorOptions); readonly code: 'MEMBERSHIP_REFUSED'; }
  /** No leader reachable before the retry deadline; safe to retry later. */
  class UnavailableError extends DlsError { constructor(message: string, options?: DlsErrorOptions); readonly code: 'UNAVAILABLE'; }
  /** Invalid client configuration. */
  class ConfigError extends DlsError { constructor(message: string, options?: DlsErrorOptions); readonly code: 'CONFIG'; }
  class InternalError extends DlsError { constructor(message: string, options?: DlsErrorOptions); readonly code: 'INTERNAL'; }
}

export import DlsClient = Dls.DlsClient;
export import Transaction = Dls.Transaction;
export import EventWatch = Dls.EventWatch;
export import jsonReplacer = Dls.jsonReplacer;
export import KeyWatch = Dls.KeyWatch;
export import Election = Dls.Election;
export import Leadership = Dls.Leadership;
export import DlsError = Dls.DlsError;
export import LockTimeoutError = Dls.LockTimeoutError;
export import DeadlockVictimError = Dls.DeadlockVictimError;
export import TransactionLostError = Dls.TransactionLostError;
export import TransactionNotFoundError = Dls.TransactionNotFoundError;
export import InvalidArgumentError = Dls.InvalidArgumentError;
export import UnauthenticatedError = Dls.UnauthenticatedError;
export import PermissionDeniedError = Dls.PermissionDeniedError;
export import WaitCancelledError = Dls.WaitCancelledError;
export import AlreadyWaitingError = Dls.AlreadyWaitingError;
export import CursorExpiredError = Dls.CursorExpiredError;
export import ResourceExhaustedError = Dls.ResourceExhaustedError;
export import MembershipRefusedError = Dls.MembershipRefusedError;
export import UnavailableError = Dls.UnavailableError;
export import ConfigError = Dls.ConfigError;
export import InternalError = Dls.InternalError;
export type LockMode = Dls.LockMode;
export type Lock = Dls.Lock;
export type LockRequest = Dls.LockRequest;
export type TokenCheck = Dls.TokenCheck;
export type QueuePosition = Dls.QueuePosition;
export type KeyHolder = Dls.KeyHolder;
export type KeyChange = Dls.KeyChange;
export type KeyUpdate = Dls.KeyUpdate;
export type HeldLock = Dls.HeldLock;
export type LockOptions = Dls.LockOptions;
export type ErrorCode = Dls.ErrorCode;
export type EndCause = Dls.EndCause;
export type Deadlock = Dls.Deadlock;
export type Event = Dls.Event;
export type TransactionStatus = Dls.TransactionStatus;
export type KeyLocks = Dls.KeyLocks;
export type LockHolder = Dls.LockHolder;
export type LockWaiter = Dls.LockWaiter;
export type KeyDelay = Dls.KeyDelay;
export type LockDelayRule = Dls.LockDelayRule;
