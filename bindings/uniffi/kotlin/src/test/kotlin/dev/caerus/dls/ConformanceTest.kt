package dev.caerus.dls

import java.io.File
import java.util.UUID
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Deferred
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.async
import kotlinx.coroutines.cancel
import kotlinx.coroutines.channels.ClosedReceiveChannelException
import kotlinx.coroutines.channels.ReceiveChannel
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.produceIn
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import kotlinx.coroutines.withTimeoutOrNull
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assumptions.assumeTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.DynamicTest
import org.junit.jupiter.api.TestFactory
import org.junit.jupiter.api.TestInstance

/**
 * The shared conformance scenarios (conformance/scenarios.json) through the Kotlin SDK,
 * against one real `dls serve` started by `dls-cluster`: one dynamic test per scenario,
 * raw-only ones skipped, and so are those needing a capability this runner lacks (see
 * [CAPABILITIES]).
 *
 * Each op maps onto the SDK as "Writing an SDK runner" in conformance/README.md says.
 * `expect_queued` polls listLocks for the waiting transaction's place and blockers (not the
 * acquire's onQueued callback), as the Python runner does. Mode SEMAPHORE goes to
 * tx.acquirePermit.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ConformanceTest {
    private lateinit var cluster: KitCluster
    private lateinit var endpoint: String
    private lateinit var client: DlsClient
    private val runId = UUID.randomUUID().toString().take(6)


    @BeforeAll
    fun startServer() {
        cluster = KitCluster()
        endpoint = cluster.endpoint
        client = dlsClient(endpoint)
    }

    @AfterAll
    fun stopServer() {
        if (::client.isInitialized) client.close()
        if (::cluster.isInitialized) cluster.close()
    }

    @TestFactory
    fun scenarios(): List<DynamicTest> {
        @Suppress("UNCHECKED_CAST")
        val all = (ConformanceJson.parse(scenariosFile().readText()) as Map<String, Any?>)["scenarios"] as List<Map<String, Any?>>
        return all.mapIndexed { i, spec ->
            val name = spec["name"] as String
            DynamicTest.dynamicTest(name) {
                if (spec["raw_only"] == true) {
                    val reason = "raw only: ${spec["why_raw_only"] ?: ""}"
                    println("SKIP $name ($reason)")
                    assumeTrue(false, reason)
                }
                val lacking = (spec["needs"] as List<*>? ?: emptyList<Any?>()).map { it as String }.filter { it !in CAPABILITIES }
                if (lacking.isNotEmpty()) {
                    val reason = lacking.joinToString("; ") { "needs $it: ${WHY_NOT[it] ?: "not implemented by this runner"}" }
                    println("SKIP $name ($reason)")
                    assumeTrue(false, reason)
                }
                val ns = "cf-kt-$runId-" + i.toString().padStart(2, '0')
                runBlocking { withTimeout(PATIENCE_MS * 4) { Scenario(client, ns).run(spec) } }
            }
        }
    }

    /**
     * `-Dconformance.scenarios=FILE` if given (like the runners' `--scenarios`), else
     * conformance/scenarios.json of the repository this suite runs in (Maven runs it from kotlin/).
     */
    private fun scenariosFile(): File {
        System.getProperty("conformance.scenarios")?.takeIf { it.isNotBlank() }?.let { return File(it) }
        var dir: File? = File(System.getProperty("user.dir")).absoluteFile
        while (dir != null) {
            val f = File(dir, "conformance/scenarios.json")
            if (f.isFile) return f
            dir = dir.parentFile
        }
        error("conformance/scenarios.json not found above ${System.getProperty("user.dir")}")
    }
}

/** How long a step waits for the server: a hang guard, not a timing assertion. */
private const val PATIENCE_MS = 30_000L

/**
 * What this runner can express of the scenarios' `needs` (conformance/README.md
 * "Capabilities"); a scenario needing anything else is skipped, saying why.
 */
private val CAPABILITIES: Set<String> = setOf("permits")

/** Why each capability missing from [CAPABILITIES] is missing (none is, so far). */
private val WHY_NOT = emptyMap<String, String>()

private class StepFailed(message: String, cause: Throwable? = null) : AssertionError(message, cause)

private fun checkEq(what: String, got: Any?, want: Any?) {
    if (got != want) throw StepFailed("$what: expected $want, got $got")
}

/** What a call ended with: the value, or the SDK error. */
private sealed class Outcome<out T> {
    data class Ok<T>(val value: T) : Outcome<T>()
    data class Err(val error: DlsException) : Outcome<Nothing>()
}

private suspend fun <T> outcomeOf(call: suspend () -> T): Outcome<T> =
    try {
        Outcome.Ok(call())
    } catch (e: DlsException) {
        Outcome.Err(e)
    }

/**
 * An acquire ([op] "acquire": a [Lock]) or acquire_all (the locks in the order asked) started
 * with `"wait": false`, running until `await` collects its outcome; [keys] are the
 * (namespace, key) pairs it asked for.
 */
private class Background(
    val tx: Transaction,
    val op: String,
    val keys: List<Pair<String, String>>,
    val job: Deferred<Outcome<Any>>,
)

/** The ok checks made on a granted lock (acquire, await, downgrade, each acquire_all entry). */
private val GRANT_CHECKS = listOf("mode", "token_equals", "token_greater_than", "save_token")

@Suppress("UNCHECKED_CAST")
private class Scenario(private val client: DlsClient, private val ns: String) {
    private val txns = LinkedHashMap<String, Transaction>()
    private val tokens = HashMap<String, ULong>()
    private val handles = HashMap<String, Background>()
    /** Key watches: client.keyUpdates collected into a channel, read update by update. */
    private val watches = HashMap<String, ReceiveChannel<KeyUpdate>>()
    private val background = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    private fun text(value: Any?): String {
        val v = if (value is Map<*, *>) (value["repeat"] as String).repeat((value["times"] as Long).toInt()) else value
        if (v !is String) throw StepFailed("expected a string, got $value")
        return v.replace("\${ns}", ns)
    }

    private fun field(step: Map<String, Any?>, name: String, default: String): String =
        text(if (step.containsKey(name)) step[name] else default)

    private fun long(step: Map<String, Any?>, name: String, default: Long): Long = (step[name] as Long?) ?: default

    private fun txn(step: Map<String, Any?>): Transaction {
        if (step.containsKey("txn_id")) throw StepFailed("a literal txn_id cannot be expressed through the SDK (raw-only)")
        return txns[step["txn"]] ?: throw StepFailed("transaction ${step["txn"]} was not begun")
    }

    private fun token(name: Any?): ULong = tokens[name] ?: throw StepFailed("no saved token $name")

    private fun mode(step: Map<String, Any?>): LockMode = when (val m = step["mode"] ?: "EXCLUSIVE") {
        "EXCLUSIVE" -> LockMode.EXCLUSIVE
        "SHARED_READ" -> LockMode.SHARED_READ
        "SEMAPHORE" -> LockMode.SEMAPHORE
        else -> throw StepFailed("mode $m cannot be expressed through the SDK (raw-only)")
    }

    /**
     * Compares an outcome with the step's `expect`: the `ok` checks when it succeeded as
     * expected, null when the expected error happened. Only the error kind
     * (`DlsException.code`) and message are visible through an SDK; the gRPC code is a
     * raw-client check.
     */
    private fun <T> expectOutcome(step: Map<String, Any?>, outcome: Outcome<T>): Map<String, Any?>? {
        val expect = step["expect"] as Map<String, Any?>? ?: mapOf("ok" to emptyMap<String, Any?>())
        val want = expect["error"] as Map<String, Any?>?
        return when (outcome) {
            is Outcome.Err -> {
                val e = outcome.error
                if (want == null) throw StepFailed("expected ok, got ${e.code}: ${e.message}")
                if (e.code != want["kind"]) throw StepFailed("expected error ${want["kind"]}, got ${e.code}: ${e.message}")
                (want["message_contains"] as String?)?.let { words ->
                    if (!(e.message ?: "").contains(words)) {
                        throw StepFailed("expected error ${want["kind"]} saying \"$words\", got ${e.code}: ${e.message}")
                    }
                }
                null
            }
            is Outcome.Ok -> {
                if (want != null) throw StepFailed("expected error ${want["code"]}/${want["kind"]}, got ok")
                expect["ok"] as Map<String, Any?>? ?: emptyMap()
            }
        }
    }

    suspend fun run(spec: Map<String, Any?>) {
        try {
            for ((i, step) in (spec["steps"] as List<Map<String, Any?>>).withIndex()) {
                try {
                    step(step)
                } catch (e: Throwable) {
                    throw StepFailed("step ${i + 1} (${step["op"]}): ${e.message}", e)
                }
            }
        } finally {
            // Leave nothing behind for later scenarios, whatever happened.
            background.cancel()
            for (tx in txns.values) {
                runCatching { tx.abort() }
                tx.close()
            }
        }
    }

    private suspend fun step(step: Map<String, Any?>) {
        when (val op = step["op"]) {
            "begin" -> {
                val name = field(step, "name", "")
                val options = TransactionOptions(
                    long(step, "timeout_ms", 15000).toULong(),
                    long(step, "priority", 0).toInt(),
                    name.ifEmpty { null },
                    (step["max_duration_ms"] as Long?)?.toULong(),
                    step["lost_stream"] == true,
                )
                val outcome = outcomeOf { client.beginTransaction(options) }
                val checks = expectOutcome(step, outcome) ?: return
                val tx = (outcome as Outcome.Ok).value
                txns[step["txn"] as String] = tx
                checks["lease_timeout_ms"]?.let { checkEq("lease_timeout_ms", tx.leaseMs(), (it as Long).toULong()) }
                checks["same_txn_as"]?.let { checkEq("transaction id", tx.id(), txns[it]?.id()) }
            }
            "acquire" -> {
                val tx = txn(step)
                val namespace = field(step, "namespace", "\${ns}")
                val key = field(step, "key", "")
                val mode = mode(step)
                val timeoutMs = long(step, "timeout_ms", 10000).toULong()
                val permits = long(step, "permits", 0)
                if (mode != LockMode.SEMAPHORE && permits != 0L) {
                    throw StepFailed("permits with a lock mode cannot be expressed through the SDK (raw-only)")
                }
                // A permit, of any count (the server judges it): the generated acquirePermit
                // with the UInt count (the Int wrapper refuses a count below 1 itself).
                val acquire: suspend () -> Lock = if (mode == LockMode.SEMAPHORE) {
                    { tx.acquirePermit(namespace, key, permits.toUInt(), timeoutMs, null) }
                } else {
                    { tx.acquireLock(namespace, key, mode, timeoutMs) }
                }
                if (step["wait"] == false) {
                    val job = background.async { outcomeOf { acquire() } }
                    handles[step["handle"] as String] = Background(tx, "acquire", listOf(namespace to key), job)
                    return
                }
                checkGrant(step, outcomeOf { acquire() })
            }
            "acquire_all" -> {
                val tx = txn(step)
                val wanted = (step["locks"] as List<Map<String, Any?>>).map {
                    LockRequest(field(it, "namespace", "\${ns}"), field(it, "key", ""), mode(it))
                }
                val timeoutMs = long(step, "timeout_ms", 10000).toULong()
                if (step["wait"] == false) {
                    val job = background.async { outcomeOf { tx.acquireLocks(wanted, timeoutMs) } }
                    handles[step["handle"] as String] = Background(tx, "acquire_all", wanted.map { it.namespace to it.key }, job)
                    return
                }
                checkGrants(step, outcomeOf { tx.acquireLocks(wanted, timeoutMs) })
            }
            "expect_queued" -> expectQueued(step)
            "await" -> {
                val h = handle(step)
                when (h.op) {
                    "acquire_all" -> checkGrants(step, h.job.await() as Outcome<List<Lock>>)
                    else -> checkGrant(step, h.job.await() as Outcome<Lock>)
                }
            }
            "downgrade" -> {
                val tx = txn(step)
                val outcome = outcomeOf { tx.downgrade(field(step, "namespace", "\${ns}"), field(step, "key", "")) }
                val checks = expectOutcome(step, outcome) ?: return
                val lock = (outcome as Outcome.Ok).value
                checks["held"]?.let { checkEq("held", lock != null, it) }
                when {
                    lock != null -> grantChecks(checks, lock)
                    GRANT_CHECKS.any { it in checks } -> throw StepFailed("grant checks on a lock that is not held (held=false)")
                }
            }
            "verify_token" -> {
                // A saved token's name, or a literal.
                val fencingToken = when (val t = step["token"]) {
                    is String -> token(t)
                    else -> (t as Long).toULong()
                }
                val outcome = outcomeOf {
                    client.verifyFencingToken(field(step, "namespace", "\${ns}"), field(step, "key", ""), fencingToken)
                }
                val checks = expectOutcome(step, outcome) ?: return
                val answer = (outcome as Outcome.Ok).value
                checks["current"]?.let { checkEq("current", answer.current, it) }
                (checks["current_tokens"] as List<Any?>?)?.let { names ->
                    // Sorted, so the holders compare as a set.
                    checkEq("current_tokens", answer.currentTokens.sorted(), names.map(::token).sorted())
                }
            }
            "release" -> {
                val tx = txn(step)
                val outcome = outcomeOf { tx.release(field(step, "namespace", "\${ns}"), field(step, "key", "")) }
                val checks = expectOutcome(step, outcome) ?: return
                checks["released"]?.let { checkEq("released", (outcome as Outcome.Ok).value, it) }
            }
            "status" -> {
                val outcome = if (step.containsKey("txn_id")) {
                    outcomeOf { client.transactionStatus((step["txn_id"] as Long).toULong()) }
                } else {
                    val tx = txn(step)
                    outcomeOf { tx.status() }
                }
                val checks = expectOutcome(step, outcome) ?: return
                checkStatus(checks, (outcome as Outcome.Ok).value)
            }
            "heartbeat" -> {
                // The SDK heartbeats by itself; the scenario's later status shows the lease
                // was kept. Heartbeat errors are only expected in raw-only scenarios.
                txn(step)
                if ((step["expect"] as Map<String, Any?>?)?.containsKey("error") == true) {
                    throw StepFailed("an explicit heartbeat error cannot be expressed through the SDK (raw-only)")
                }
            }
            "end" -> {
                val tx = txn(step)
                val commit = step["commit"] != false
                val checks = expectOutcome(step, outcomeOf { if (commit) tx.commit() else tx.abort() }) ?: return
                // The state is implied by the call succeeding; released_locks is not exposed.
                checks["state"]?.let { checkEq("state", if (commit) "COMMITTED" else "ABORTED", it) }
            }
            // The SDK heartbeats by itself: `heartbeat` needs nothing more here.
            "await_status" -> awaitStatus(step)
            "sleep_ms" -> delay(step["ms"] as Long)
            "watch" -> {
                if (step.containsKey("resume")) throw StepFailed("a watch cursor cannot be expressed through the SDK (raw-only)")
                val updates = client.keyUpdates(field(step, "namespace", "\${ns}"), field(step, "key", "")).produceIn(background)
                watches[step["handle"] as String] = updates
                // The flow is cold: the watch is made (or refused) when the first update is read.
                val outcome = outcomeOf { nextUpdate(updates) }
                val checks = expectOutcome(step, outcome) ?: return
                val first = (outcome as Outcome.Ok).value
                checks["initial"]?.let { checkEq("initial", first.initial, it) }
                checkWatch(checks, first.holders, first.changes)
            }
            "expect_watch" -> {
                val updates = watches[step["handle"]] ?: throw StepFailed("no watch ${step["handle"]}")
                val checks = (step["expect"] as Map<String, Any?>?)?.get("ok") as Map<String, Any?>? ?: emptyMap()
                val want = (checks["changes"] as List<Any?>?)?.size ?: 0
                val changes = ArrayList<KeyChange>()
                var update: KeyUpdate
                do {
                    update = nextUpdate(updates)
                    changes += update.changes
                } while (changes.size < want)
                checkWatch(checks, update.holders, changes)
            }
            "unwatch" -> {
                val updates = watches.remove(step["handle"]) ?: throw StepFailed("no watch ${step["handle"]}")
                updates.cancel()
            }
            "expect_lost" -> {
                val tx = txn(step)
                val within = long(step, "within_ms", PATIENCE_MS)
                val reason = withTimeoutOrNull(within) { tx.awaitLost() }
                    ?: throw StepFailed("the transaction was not reported lost within $within ms")
                // end_cause (the server's LockStreamLost) is not visible through the SDK: its kind is.
                val checks = (step["expect"] as Map<String, Any?>?)?.get("ok") as Map<String, Any?>? ?: emptyMap()
                checks["lost_kind"]?.let { checkEq("lost kind", reason.kind.name, it) }
            }
            "set_lock_delay" -> {
                val prefix = field(step, "namespace_prefix", "\${ns}")
                val outcome = outcomeOf { client.setLockDelay(prefix, long(step, "delay_ms", 0)) }
                val checks = expectOutcome(step, outcome) ?: return
                checks["previous_delay_ms"]?.let { checkEq("previous_delay_ms", (outcome as Outcome.Ok).value, it) }
            }
            "lock_delays" -> {
                val outcome = outcomeOf { client.lockDelays() }
                val checks = expectOutcome(step, outcome) ?: return
                (checks["rules"] as List<Map<String, Any?>>?)?.let { want ->
                    // Only this scenario's rules: other runs may share the server.
                    val got = (outcome as Outcome.Ok).value.filter { it.namespacePrefix.startsWith(ns) }
                        .map { it.namespacePrefix to it.delayMs.toLong() }
                    checkEq("rules", got, want.map { field(it, "namespace_prefix", "") to long(it, "delay_ms", 0) })
                }
            }
            "operator_abort" -> {
                val id = txn(step).id()
                val outcome = outcomeOf { client.abortTransaction(id, field(step, "reason", "")) }
                val checks = expectOutcome(step, outcome) ?: return
                checks["state"]?.let { checkEq("state", (outcome as Outcome.Ok).value.name, it) }
            }
            "list_key" -> {
                val namespace = field(step, "namespace", "\${ns}")
                val key = field(step, "key", "")
                val outcome = outcomeOf { client.listLocks(namespace) }
                val checks = expectOutcome(step, outcome) ?: return
                checkListed(checks, (outcome as Outcome.Ok).value.find { it.namespace == namespace && it.key == key })
            }
            "expect_streams_closed" -> {
                // The SDK shows no stream; it must not have reported the transaction lost.
                txn(step).lostReason()?.let { throw StepFailed("the transaction was reported lost: ${it.kind}: ${it.message}") }
            }
            else -> throw StepFailed("unknown op $op")
        }
    }

    private suspend fun nextUpdate(updates: ReceiveChannel<KeyUpdate>): KeyUpdate =
        try {
            withTimeoutOrNull(PATIENCE_MS) { updates.receive() }
                ?: throw StepFailed("no key watch update within $PATIENCE_MS ms")
        } catch (e: ClosedReceiveChannelException) {
            throw StepFailed("the key watch ended", e)
        }

    private fun showHolder(h: KeyHolder) = "txn ${h.transactionId} \"${h.transactionName}\" ${h.mode.name}#${h.fencingToken}"

    private fun checkHolder(what: String, w: Map<String, Any?>, h: KeyHolder) {
        w["txn"]?.let { checkEq("$what transaction (want $it)", h.transactionId, txn(w).id()) }
        if (w.containsKey("name")) checkEq("$what transaction_name", h.transactionName, text(w["name"]))
        w["mode"]?.let { checkEq("$what mode", h.mode.name, it) }
        w["token"]?.let { checkEq("$what fencing token (want $it)", h.fencingToken, token(it)) }
    }

    /** `holders` in order, exactly; `changes` in order, exactly. */
    private fun checkWatch(checks: Map<String, Any?>, holders: List<KeyHolder>, changes: List<KeyChange>) {
        if (checks.containsKey("save_cursor")) throw StepFailed("a watch cursor cannot be expressed through the SDK (raw-only)")
        try {
            (checks["holders"] as List<Map<String, Any?>>?)?.let { want ->
                checkEq("number of holders", holders.size, want.size)
                for ((i, w) in want.withIndex()) checkHolder("holders[$i]", w, holders[i])
            }
            (checks["changes"] as List<Map<String, Any?>>?)?.let { want ->
                checkEq("number of changes", changes.size, want.size)
                for ((i, w) in want.withIndex()) {
                    val c = changes[i]
                    w["kind"]?.let { checkEq("changes[$i] kind", c.kind.name, it) }
                    w["end_cause"]?.let { checkEq("changes[$i] end_cause", c.endCause?.name ?: "none", it) }
                    checkHolder("changes[$i]", w, c.holder)
                }
            }
        } catch (e: StepFailed) {
            val shown = changes.map { "${it.kind.name} ${showHolder(it.holder)} (${it.endCause?.name})" }
            throw StepFailed("${e.message}; holders ${holders.map(::showHolder)}, changes $shown", e)
        }
    }

    /**
     * list_key's checks on the key's listLocks entry (null: the key is not listed, so it has
     * no holders, waiters or delay).
     */
    private fun checkListed(checks: Map<String, Any?>, k: KeyLocks?) {
        checks["listed"]?.let { checkEq("listed", k != null, it) }
        // (transaction id, mode, fencing token: null for a waiter) of each holder and waiter.
        val entries = mapOf(
            "holders" to (k?.holders ?: emptyList()).map { Triple(it.transactionId, it.mode.name, it.fencingToken) },
            "waiters" to (k?.waiters ?: emptyList()).map { Triple(it.transactionId, it.mode.name, null as ULong?) },
        )
        for ((name, got) in entries) {
            val want = checks[name] as List<Map<String, Any?>>? ?: continue
            val shown = got.map { "txn ${it.first} ${it.second}" }
            if (got.size != want.size) throw StepFailed("number of $name: expected ${want.size}, got $shown")
            for ((i, w) in want.withIndex()) {
                val (id, mode, held) = got[i]
                w["txn"]?.let { checkEq("$name[$i] transaction (want $it)", id, txn(w).id()) }
                w["mode"]?.let { checkEq("$name[$i] mode", mode, it) }
                w["token"]?.let { checkEq("$name[$i] fencing token (want $it)", held, token(it)) }
            }
        }
        if (checks.containsKey("delay")) {
            val d = k?.delay
            val w = checks["delay"] as Map<String, Any?>?
            when {
                w == null && d != null ->
                    throw StepFailed("expected no delay, got until ${d.untilMs} ms by txn ${d.transactionId} (${d.cause})")
                w == null -> {}
                d == null -> throw StepFailed("expected a delay, got none")
                else -> {
                    w["txn"]?.let { checkEq("delay transaction (want $it)", d.transactionId, txn(w).id()) }
                    w["cause"]?.let { checkEq("delay cause", d.cause?.name ?: "none", it) }
                }
            }
        }
    }

    private fun handle(step: Map<String, Any?>): Background =
        handles[step["handle"]] ?: throw StepFailed("no background acquire ${step["handle"]}")

    private suspend fun expectQueued(step: Map<String, Any?>) {
        val h = handle(step)
        val position = (step["position"] as Long).toUInt()
        @Suppress("UNCHECKED_CAST")
        val blockers = ((step["blocked_by"] as List<String>?) ?: emptyList()).map { name ->
            (txns[name] ?: throw StepFailed("blocked_by names $name, which was never begun")).id()
        }
        val deadline = System.nanoTime() + PATIENCE_MS * 1_000_000
        while (true) {
            // The transaction's entries in the queues of the keys it asked for (listLocks):
            // like its queued messages, an acquire_all takes the furthest position and every
            // blocker. Queues first, then whether the acquire ended: a wait seen there was
            // real even if the grant came right after.
            val waiters = h.keys.map { it.first }.toSet().flatMap { namespace ->
                client.listLocks(namespace).filter { (it.namespace to it.key) in h.keys }
                    .flatMap { k -> k.waiters.filter { it.transactionId == h.tx.id() } }
            }
            val seen = if (waiters.isEmpty()) "no wait" else {
                val at = waiters.maxOf { it.position }
                val blocking = waiters.flatMap { it.blockingTransactionIds }.toSet()
                if (at == position) {
                    val missing = blockers.filter { it !in blocking }
                    if (missing.isNotEmpty()) throw StepFailed("queued at $position but not blocked by $missing; blockers $blocking")
                    return
                }
                "position $at, blocked by $blocking"
            }
            if (h.job.isCompleted) {
                val how = when (val o = h.job.await()) {
                    is Outcome.Ok -> "granted"
                    is Outcome.Err -> "error ${o.error.code}: ${o.error.message}"
                }
                throw StepFailed("acquire ended ($how) before queued position $position; last seen $seen")
            }
            if (System.nanoTime() > deadline) throw StepFailed("no queued position $position within $PATIENCE_MS ms; last seen $seen")
            delay(10)
        }
    }

    private fun checkGrant(step: Map<String, Any?>, outcome: Outcome<Lock>) {
        val checks = expectOutcome(step, outcome) ?: return
        grantChecks(checks, (outcome as Outcome.Ok).value)
    }

    /**
     * acquire_all's `locks` check against the grants in the order asked; each entry's saved
     * token is stored before the next entry is checked.
     */
    private fun checkGrants(step: Map<String, Any?>, outcome: Outcome<List<Lock>>) {
        val checks = expectOutcome(step, outcome) ?: return
        val want = checks["locks"] as List<Map<String, Any?>>? ?: return
        val locks = (outcome as Outcome.Ok).value
        val got = locks.map { "${it.key}:${it.mode.name}#${it.fencingToken}" }
        if (want.size != locks.size) throw StepFailed("locks: expected ${want.size} grants, got $got")
        for ((i, w) in want.withIndex()) {
            val lock = locks[i]
            checkEq("locks[$i] lock", lock.namespace to lock.key, field(w, "namespace", "\${ns}") to field(w, "key", ""))
            try {
                grantChecks(w, lock)
            } catch (e: StepFailed) {
                throw StepFailed("locks[$i]: ${e.message}", e)
            }
        }
    }

    /** The grant checks (mode, tokens) on one granted lock. */
    private fun grantChecks(checks: Map<String, Any?>, lock: Lock) {
        checks["mode"]?.let { checkEq("mode", lock.mode.name, it) }
        checks["token_equals"]?.let { checkEq("fencing token", lock.fencingToken, token(it)) }
        checks["token_greater_than"]?.let {
            val t = token(it)
            if (lock.fencingToken <= t) throw StepFailed("fencing token ${lock.fencingToken} is not greater than $t")
        }
        checks["save_token"]?.let { tokens[it as String] = lock.fencingToken }
    }

    /**
     * Polls the transaction's status until the step's ok checks hold; an ended transaction
     * no longer changes, so a mismatch then fails.
     */
    private suspend fun awaitStatus(step: Map<String, Any?>) {
        @Suppress("UNCHECKED_CAST")
        val checks = ((step["expect"] as Map<String, Any?>?)?.get("ok") as Map<String, Any?>?) ?: emptyMap()
        val deadline = System.nanoTime() + long(step, "within_ms", PATIENCE_MS) * 1_000_000
        while (true) {
            val status = txn(step).status()
            try {
                checkStatus(checks, status)
                return
            } catch (e: StepFailed) {
                if (status.state != TransactionState.ACTIVE || System.nanoTime() > deadline) {
                    throw StepFailed("${e.message} (state ${status.state})")
                }
            }
            delay(50)
        }
    }

    private fun checkStatus(checks: Map<String, Any?>, s: TransactionStatus) {
        checks["state"]?.let { checkEq("state", s.state.name, it) }
        if (checks.containsKey("name")) checkEq("name", s.name ?: "", text(checks["name"]))
        checks["priority"]?.let { checkEq("priority", s.priority.toLong(), it) }
        checks["lease_timeout_ms"]?.let { checkEq("lease_timeout_ms", s.leaseTimeoutMs, (it as Long).toULong()) }
        checks["end_cause"]?.let { checkEq("end_cause", s.endCause?.name ?: "none", it) }
        (checks["locks"] as List<Map<String, Any?>>?)?.let { want ->
            fun show(l: Lock) = "${l.key}:${l.mode.name}#${l.fencingToken}"
            val got = s.locks.map(::show)
            val unmatched = s.locks.toMutableList()
            for (w in want) {
                val namespace = field(w, "namespace", "\${ns}")
                val key = field(w, "key", "")
                val token = w["token"]?.let(::token)
                val hit = unmatched.indexOfFirst {
                    it.namespace == namespace && it.key == key && it.mode.name == w["mode"] &&
                        (token == null || it.fencingToken == token)
                }
                if (hit < 0) throw StepFailed("locks: no $key:${w["mode"]}${token?.let { "#$it" } ?: ""} in $got")
                unmatched.removeAt(hit)
            }
            if (unmatched.isNotEmpty()) throw StepFailed("locks: unexpected ${unmatched.map(::show)} in $got")
        }
        if (checks.containsKey("waiting")) {
            val w = checks["waiting"] as Map<String, Any?>?
            val p = s.waiting
            when {
                w == null && p != null -> throw StepFailed("expected no pending wait, got ${p.key}:${p.mode} at ${p.position}")
                w == null -> {}
                p == null -> throw StepFailed("expected a pending wait, got none")
                else -> {
                    checkEq("waiting.namespace", p.namespace, field(w, "namespace", "\${ns}"))
                    checkEq("waiting.key", p.key, field(w, "key", ""))
                    w["mode"]?.let { checkEq("waiting.mode", p.mode.name, it) }
                    w["position"]?.let { checkEq("waiting.position", p.position.toLong(), it) }
                }
            }
        }
    }
}
