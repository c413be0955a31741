// Idiomatic Kotlin layer of the Caerus DLS SDK, over the uniffi-generated bindings
// (caerus_dls.kt in the same package, generated at build time).
package dev.caerus.dls

import com.sun.jna.CallbackThreadInitializer
import com.sun.jna.Native
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.distinctUntilChangedBy
import kotlinx.coroutines.flow.flow
import kotlinx.coroutines.flow.map
import kotlinx.coroutines.launch
import kotlinx.coroutines.withContext

/**
 * Every async call ends with the SDK's Rust threads calling back into the JVM (the
 * continuation of the Rust future). By default JNA attaches such a thread to the JVM for
 * the callback and detaches it afterwards, which costs more than the rest of a local call;
 * the SDK's threads live as long as the process, so they stay attached (as daemons, which
 * never keep the JVM from exiting). Runs when this file's helpers are first used.
 */
private val callbackThreadsStayAttached: Unit = Native.setCallbackThreadInitializer(
    uniffiRustFutureContinuationCallbackImpl,
    CallbackThreadInitializer(true, false, "caerus-dls-callback"),
).let { }

/** Keeps the JVM attachment of the SDK's callback threads (see [callbackThreadsStayAttached]). */
internal fun keepCallbackThreadsAttached() = callbackThreadsStayAttached

/**
 * The stable code of the error, spelled as in the Rust, Python and Node SDKs (from the
 * error table every SDK shares, see [errorClasses]).
 */
val DlsException.code: String
    get() = errorCode()

/**
 * A client for [endpoints] (`host:port` or `https://host:port`, any node of the cluster).
 * TLS: [caFile] is the cluster CA (PEM) the nodes' certificates must chain to;
 * [clientCertFile] and [clientKeyFile] a client certificate for nodes that require one.
 * Null values fall back to `DLS_CA_FILE`, `DLS_CLIENT_CERT_FILE`, `DLS_CLIENT_KEY_FILE`.
 */
fun dlsClient(
    vararg endpoints: String,
    apiKey: String? = null,
    caFile: String? = null,
    clientCertFile: String? = null,
    clientKeyFile: String? = null,
): DlsClient {
    keepCallbackThreadsAttached()
    return DlsClient(
        ClientConfig(
            endpoints = endpoints.toList(),
            apiKey = apiKey,
            caFile = caFile,
            clientCertFile = clientCertFile,
            clientKeyFile = clientKeyFile,
        ),
    )
}

/**
 * Runs [body] in a new transaction: commits when it returns, aborts when it throws (the
 * exception is rethrown), and always frees the transaction handle. The transaction begins
 * with its first call: when that is an acquire, the begin and the lock go in one request
 * (so `tx.id()` is 0 until then). The lease is
 * heartbeated in Rust meanwhile; if it is lost (expired, aborted by an operator, deadlock
 * victim), [body] is cancelled and [DlsException.TransactionLost] is thrown.
 *
 * ```
 * client.withTransaction(timeoutMs = 15000) { tx ->
 *     val lock = tx.acquireLock("billing-jobs", "monthly-billing-job", LockMode.EXCLUSIVE, timeoutMs = 10000)
 *     chargeSubscriptions(lock.fencingToken)
 * }
 * ```
 */
suspend fun <T> DlsClient.withTransaction(
    timeoutMs: Long? = null,
    priority: Int? = null,
    name: String? = null,
    maxDurationMs: Long? = null,
    lostStream: Boolean = false,
    body: suspend CoroutineScope.(Transaction) -> T,
): T {
    require(timeoutMs == null || timeoutMs >= 0) { "timeoutMs must not be negative" }
    require(maxDurationMs == null || maxDurationMs >= 0) { "maxDurationMs must not be negative" }
    keepCallbackThreadsAttached()
    val tx = transaction(TransactionOptions(timeoutMs?.toULong(), priority, name, maxDurationMs?.toULong(), lostStream))
    try {
        val result = coroutineScope {
            // Cancels the body (and ends this scope with TransactionLost) once core reports
            // the lease lost.
            val watcher = launch {
                val reason = tx.awaitLost()
                throw DlsException.TransactionLost(reason.message, null)
            }
            try {
                body(tx)
            } finally {
                watcher.cancel()
            }
        }
        tx.commit()
        return result
    } catch (e: Throwable) {
        withContext(NonCancellable) {
            try {
                tx.abort()
            } catch (abortFailure: Throwable) {
                if (abortFailure !== e) e.addSuppressed(abortFailure)
            }
        }
        throw e
    } finally {
        tx.close()
    }
}

/**
 * Runs [body] holding one lock, as [withTransaction] runs its body; the begin and the
 * acquire go in one request. [timeoutMs] is the wait for the lock, [leaseMs] the lease.
 *
 * ```
 * client.withLock("billing-jobs", "monthly-billing-job") { lock, _ ->
 *     chargeSubscriptions(lock.fencingToken)
 * }
 * ```
 */
suspend fun <T> DlsClient.withLock(
    namespace: String,
    key: String,
    mode: LockMode = LockMode.EXCLUSIVE,
    timeoutMs: Long? = null,
    leaseMs: Long? = null,
    priority: Int? = null,
    name: String? = null,
    maxDurationMs: Long? = null,
    lostStream: Boolean = false,
    body: suspend CoroutineScope.(Lock, Transaction) -> T,
): T {
    require(timeoutMs == null || timeoutMs >= 0) { "timeoutMs must not be negative" }
    return withTransaction(leaseMs, priority, name, maxDurationMs, lostStream) { tx ->
        val lock = tx.acquireLock(namespace, key, mode, timeoutMs?.toULong())
        body(lock, tx)
    }
}

/** A Kotlin function as the SDK's [QueueListener]. */
private fun ((QueuePosition) -> Unit).asQueueListener(): QueueListener = object : QueueListener {
    override fun onQueued(position: QueuePosition) = this@asQueueListener(position)
}

/**
 * [Transaction.acquireLock] with the timeout as a plain `Long` of milliseconds (0: a
 * try-lock). [onQueued] is called (on an SDK thread: keep it short) each time the request's
 * place in the queue changes, with the transactions it waits for.
 */
suspend fun Transaction.acquireLock(
    namespace: String,
    key: String,
    mode: LockMode = LockMode.EXCLUSIVE,
    timeoutMs: Long,
    onQueued: ((QueuePosition) -> Unit)? = null,
): Lock {
    require(timeoutMs >= 0) { "timeoutMs must not be negative" }
    return acquireLock(namespace, key, mode, timeoutMs.toULong(), onQueued?.asQueueListener())
}

/**
 * [Transaction.acquirePermit] with the count as an `Int` and the timeout as a plain `Long` of
 * milliseconds (0: try once): one permit of a counted semaphore of [permits] permits.
 */
suspend fun Transaction.acquirePermit(
    namespace: String,
    key: String,
    permits: Int,
    timeoutMs: Long,
    onQueued: ((QueuePosition) -> Unit)? = null,
): Lock {
    require(permits >= 1) { "permits must be at least 1" }
    require(timeoutMs >= 0) { "timeoutMs must not be negative" }
    return acquirePermit(namespace, key, permits.toUInt(), timeoutMs.toULong(), onQueued?.asQueueListener())
}

/** [Transaction.acquireLocks] with the timeout as a plain `Long` of milliseconds (0: try-lock). */
suspend fun Transaction.acquireLocks(
    locks: List<LockRequest>,
    timeoutMs: Long,
    onQueued: ((QueuePosition) -> Unit)? = null,
): List<Lock> {
    require(timeoutMs >= 0) { "timeoutMs must not be negative" }
    return acquireLocks(locks, timeoutMs.toULong(), onQueued?.asQueueListener())
}

/** [DlsClient.verifyFencingToken] with the token as a plain `Long`. */
suspend fun DlsClient.verifyFencingToken(namespace: String, key: String, fencingToken: Long): TokenCheck {
    require(fencingToken >= 0) { "fencingToken must not be negative" }
    return verifyFencingToken(namespace, key, fencingToken.toULong())
}

/**
 * [DlsClient.setLockDelay] with the delay as a plain `Long` of milliseconds (0 removes the
 * rule; at most 10 minutes): returns the prefix's previous delay in ms.
 */
suspend fun DlsClient.setLockDelay(namespacePrefix: String, delayMs: Long): Long {
    require(delayMs >= 0) { "delayMs must not be negative" }
    return setLockDelay(namespacePrefix, delayMs.toULong()).toLong()
}

/** Calls [listener] once if the transaction is lost (never after commit or abort). */
fun Transaction.onLost(listener: (LostReason) -> Unit) {
    setLostListener(object : LostListener {
        override fun onLost(reason: LostReason) = listener(reason)
    })
}

/** The event log from [fromSequence] as a cold [Flow]; collecting it opens a watch. */
fun DlsClient.events(
    fromSequence: Long = 0,
    namespacePrefixes: List<String> = emptyList(),
    kinds: List<EventKind> = emptyList(),
    onlyNew: Boolean = false,
): Flow<Event> = flow {
    val stream = watchEvents(WatchOptions(fromSequence.toULong(), namespacePrefixes, kinds, onlyNew))
    try {
        while (true) {
            val event = stream.next() ?: break
            emit(event)
        }
    } finally {
        stream.cancel()
        stream.close()
    }
}

/** Who holds [namespace]/[key] as a cold [Flow]: the holders now, then one update per change. */
fun DlsClient.keyUpdates(namespace: String, key: String): Flow<KeyUpdate> = flow {
    val watch = watchKey(namespace, key)
    try {
        while (true) {
            val update = watch.next() ?: break
            emit(update)
        }
    } finally {
        watch.close()
    }
}

/** Held while this candidate leads (from [Election.campaign]). */
class Leadership internal constructor(val transaction: Transaction, val lock: Lock) {
    /** The lock's fencing token: higher for every later leader. */
    val term: ULong get() = lock.fencingToken

    /** Suspends until leadership is lost (lease lapsed, operator abort): stop leading then. */
    suspend fun awaitLost(): LostReason = transaction.awaitLost()

    /** Steps down: the next candidate in line takes over. */
    suspend fun resign() {
        try {
            transaction.commit()
        } finally {
            transaction.close()
        }
    }
}

/**
 * Leader election over one key, as etcd's `concurrency.Election` or Curator's `LeaderLatch`:
 * candidates wait in line for the key's EXCLUSIVE lock; the holder leads, with the lock's
 * fencing token as its term.
 */
class Election(private val client: DlsClient, val namespace: String, val key: String) {
    private companion object {
        // The longest single wait the server takes; a candidate waits again, keeping its
        // turn except for the moment between two waits.
        const val CAMPAIGN_WAIT_MS = 3_600_000L
    }

    /** Suspends until [candidate] leads; [leaseMs]: how long a silent leader keeps leading. */
    suspend fun campaign(candidate: String, leaseMs: Long = 15000): Leadership {
        require(leaseMs > 0) { "leaseMs must be positive" }
        keepCallbackThreadsAttached()
        val tx = client.beginTransaction(TransactionOptions(timeoutMs = leaseMs.toULong(), name = candidate))
        try {
            while (true) {
                try {
                    return Leadership(tx, tx.acquireLock(namespace, key, LockMode.EXCLUSIVE, CAMPAIGN_WAIT_MS))
                } catch (e: DlsException.LockTimeout) {
                    // still in line: wait again
                }
            }
        } catch (e: Throwable) {
            withContext(NonCancellable) {
                try {
                    tx.abort()
                } catch (abortFailure: Throwable) {
                    if (abortFailure !== e) e.addSuppressed(abortFailure)
                }
            }
            tx.close()
            throw e
        }
    }

    /** The current leader (its `transactionName` is the candidate's name), or null. */
    suspend fun leader(): KeyHolder? {
        val watch = client.watchKey(namespace, key)
        try {
            return watch.next()?.holders?.firstOrNull()
        } finally {
            watch.close()
        }
    }

    /** The leader now, then each time it changes (null: nobody leads). */
    fun observe(): Flow<KeyHolder?> =
        client.keyUpdates(namespace, key).map { it.holders.firstOrNull() }.distinctUntilChangedBy { it?.fencingToken }
}

/** Leader election over [namespace]/[key]. */
fun DlsClient.election(namespace: String, key: String): Election = Election(this, namespace, key)
