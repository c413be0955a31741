package dev.caerus.dls

import java.net.URI
import java.net.http.HttpClient
import java.net.http.HttpRequest
import java.net.http.HttpResponse
import java.time.Duration
import java.util.UUID
import java.util.concurrent.atomic.AtomicInteger
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.cancelAndJoin
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.flow.onEach
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Assertions.fail
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.assertThrows

/**
 * One real `dls serve` (single node) for the whole class, started by `dls-cluster`, with a
 * small `--max-locks-per-txn` (no other test holds that many) to see a limit's refusal.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DlsClientTest {
    private companion object {
        const val MAX_LOCKS = 3
    }

    private lateinit var cluster: KitCluster
    private lateinit var endpoint: String
    private lateinit var client: DlsClient

    private lateinit var httpAddr: String

    /** Commands the node proposed (each one replicated write), from its /metrics. */
    private fun proposedCommands(): Long {
        val http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(1)).build()
        val body = http.send(
            HttpRequest.newBuilder(URI("http://$httpAddr/metrics")).timeout(Duration.ofSeconds(5)).build(),
            HttpResponse.BodyHandlers.ofString(),
        ).body()
        val line = body.lines().first { it.startsWith("dls_proposed_commands_total ") }
        return line.substringAfter(' ').trim().toDouble().toLong()
    }


    /** A namespace of its own per test, so tests never share keys. */
    private fun ns(): String = "kt-" + UUID.randomUUID().toString().take(8)

    @BeforeAll
    fun startServer() {
        cluster = KitCluster(serveFlags = listOf("--max-locks-per-txn", "$MAX_LOCKS"))
        endpoint = cluster.endpoint
        httpAddr = cluster.httpAddr
        client = dlsClient(endpoint)
    }

    @AfterAll
    fun stopServer() {
        if (::client.isInitialized) client.close()
        if (::cluster.isInitialized) cluster.close()
    }

    @Test
    fun `withTransaction commits and releases the lock`() = runBlocking {
        val ns = ns()
        val token = client.withTransaction(timeoutMs = 15000) { tx ->
            val lock = tx.acquireLock(ns, "monthly-billing-job", LockMode.EXCLUSIVE, timeoutMs = 10000)
            assertEquals(ns, lock.namespace)
            assertEquals(LockMode.EXCLUSIVE, lock.mode)
            assertTrue(lock.fencingToken > 0u)
            val status = tx.status()
            assertEquals(TransactionState.ACTIVE, status.state)
            assertEquals(listOf(lock), status.locks)
            lock.fencingToken
        }
        assertTrue(token > 0u)
        // Released by the commit: another transaction gets it at once.
        client.withTransaction { tx -> tx.acquireLock(ns, "monthly-billing-job", timeoutMs = 1000) }
        Unit
    }

    @Test
    fun `withTransaction and withLock begin in their first acquire`() = runBlocking {
        val ns = ns()
        val before = proposedCommands()
        val first = client.withTransaction { tx ->
            assertEquals(0uL, tx.id(), "nothing is sent before the first call")
            val lock = tx.acquireLock(ns, "k", timeoutMs = 5000)
            assertTrue(tx.id() > 0uL)
            lock.fencingToken
        }
        val second = client.withLock(ns, "k", timeoutMs = 5000, leaseMs = 5000) { lock, tx ->
            assertEquals(lock.fencingToken, tx.status().locks.single().fencingToken)
            lock.fencingToken
        }
        assertTrue(second > first)
        // Begin + acquire in one replicated write, commit in another: two per cycle.
        assertEquals(4L, proposedCommands() - before)
    }

    @Test
    fun `the SDK's callback threads stay attached to the JVM as daemons`() = runBlocking {
        client.withTransaction { tx -> repeat(5) { tx.status() } }
        val attached = Thread.getAllStackTraces().keys.filter { it.name.startsWith("caerus-dls-callback") }
        assertTrue(attached.isNotEmpty(), "no callback thread stayed attached: ${Thread.getAllStackTraces().keys.map { it.name }}")
        assertTrue(attached.all { it.isDaemon }, "callback threads must not keep the JVM alive")
    }

    @Test
    fun `withTransaction aborts when the body throws`() = runBlocking {
        val ns = ns()
        var txId = 0uL
        val thrown = assertThrows<IllegalStateException> {
            runBlocking {
                client.withTransaction { tx ->
                    tx.acquireLock(ns, "k", LockMode.EXCLUSIVE, timeoutMs = 5000)
                    txId = tx.id() // known once the first call (the acquire) began it
                    error("boom")
                }
            }
        }
        assertEquals("boom", thrown.message)
        assertEquals(TransactionState.ABORTED, client.transactionStatus(txId).state)
        client.withTransaction { tx -> tx.acquireLock(ns, "k", timeoutMs = 1000) }
        Unit
    }

    @Test
    fun `manual transaction commit and release`() = runBlocking {
        val ns = ns()
        val tx = client.beginTransaction(TransactionOptions(timeoutMs = 10000u, name = "manual"))
        assertTrue(tx.id() > 0u)
        assertTrue(tx.leaseMs() > 0u)
        tx.acquireLock(ns, "a", LockMode.EXCLUSIVE)
        assertTrue(tx.release(ns, "a"))
        assertFalse(tx.release(ns, "a"))
        tx.commit()
        assertEquals(TransactionState.COMMITTED, client.transactionStatus(tx.id()).state)
        tx.close()
    }

    @Test
    fun `shared locks coexist and exclude an exclusive one`() = runBlocking {
        val ns = ns()
        val r1 = client.beginTransaction(TransactionOptions())
        val r2 = client.beginTransaction(TransactionOptions())
        val w = client.beginTransaction(TransactionOptions())
        try {
            val l1 = r1.acquireLock(ns, "doc", LockMode.SHARED_READ, timeoutMs = 2000)
            val l2 = r2.acquireLock(ns, "doc", LockMode.SHARED_READ, timeoutMs = 2000)
            assertEquals(LockMode.SHARED_READ, l1.mode)
            assertTrue(l2.fencingToken > l1.fencingToken)
            val e = assertThrows<DlsException.LockTimeout> {
                runBlocking { w.acquireLock(ns, "doc", LockMode.EXCLUSIVE, timeoutMs = 300) }
            }
            assertEquals("LOCK_TIMEOUT", e.code)
            r1.commit()
            r2.commit()
            w.acquireLock(ns, "doc", LockMode.EXCLUSIVE, timeoutMs = 2000)
            w.commit()
        } finally {
            listOf(r1, r2, w).forEach { it.close() }
        }
    }

    @Test
    fun `acquire timeout leaves the transaction active`() = runBlocking {
        val ns = ns()
        val holder = client.beginTransaction(TransactionOptions())
        val waiter = client.beginTransaction(TransactionOptions())
        try {
            holder.acquireLock(ns, "k", LockMode.EXCLUSIVE, timeoutMs = 2000)
            waiter.acquireLock(ns, "other", LockMode.EXCLUSIVE, timeoutMs = 2000)
            val started = System.nanoTime()
            val e = assertThrows<DlsException.LockTimeout> {
                runBlocking { waiter.acquireLock(ns, "k", LockMode.EXCLUSIVE, timeoutMs = 400) }
            }
            val waitedMs = (System.nanoTime() - started) / 1_000_000
            assertTrue(waitedMs >= 300, "waited only $waitedMs ms")
            assertTrue(e.message!!.isNotBlank())
            val status = waiter.status()
            assertEquals(TransactionState.ACTIVE, status.state)
            assertEquals(listOf("other"), status.locks.map { it.key })
            assertNull(status.waiting)
        } finally {
            holder.abort(); waiter.abort()
            holder.close(); waiter.close()
        }
    }

    @Test
    fun `timeoutMs 0 is a try-lock that never queues`() = runBlocking {
        val ns = ns()
        val holder = client.beginTransaction(TransactionOptions())
        val other = client.beginTransaction(TransactionOptions())
        try {
            val held = holder.acquireLock(ns, "k", LockMode.EXCLUSIVE, timeoutMs = 2000)
            assertThrows<DlsException.LockTimeout> {
                runBlocking { other.acquireLock(ns, "k", LockMode.SHARED_READ, timeoutMs = 0) }
            }
            val status = other.status()
            assertEquals(TransactionState.ACTIVE, status.state)
            assertNull(status.waiting)
            holder.commit()
            val lock = other.acquireLock(ns, "k", LockMode.SHARED_READ, timeoutMs = 0)
            assertTrue(lock.fencingToken > held.fencingToken)
        } finally {
            other.abort()
            holder.close(); other.close()
        }
    }

    @Test
    fun `fencing tokens increase grant after grant`() = runBlocking {
        val ns = ns()
        val tokens = (1..5).map {
            client.withTransaction { tx -> tx.acquireLock(ns, "storage", timeoutMs = 5000).fencingToken }
        }
        assertEquals(tokens.sorted(), tokens)
        assertEquals(tokens.size, tokens.toSet().size)
    }

    @Test
    fun `deadlock victim gets DeadlockVictim and the other goes on`() = runBlocking {
        val ns = ns()
        val older = client.beginTransaction(TransactionOptions(name = "older"))
        val younger = client.beginTransaction(TransactionOptions(name = "younger"))
        try {
            older.acquireLock(ns, "a", LockMode.EXCLUSIVE, timeoutMs = 2000)
            younger.acquireLock(ns, "b", LockMode.EXCLUSIVE, timeoutMs = 2000)
            val olderWait = async(Dispatchers.Default) { older.acquireLock(ns, "b", LockMode.EXCLUSIVE, timeoutMs = 10000) }
            withTimeout(5000) { while (older.status().waiting == null) delay(20) }
            // Equal priorities: the default policy aborts the youngest.
            val e = assertThrows<DlsException.DeadlockVictim> {
                runBlocking { younger.acquireLock(ns, "a", LockMode.EXCLUSIVE, timeoutMs = 10000) }
            }
            assertEquals("DEADLOCK_VICTIM", e.code)
            // The cause and the broken cycle are fields of the error, not words of its message.
            assertEquals(EndCause.DEADLOCK_VICTIM, e.endCause)
            val deadlock = e.deadlock
            assertNotNull(deadlock, "the victim's error carries the cycle")
            deadlock!!
            assertEquals(younger.id(), deadlock.victimTransactionId)
            assertEquals("LOWEST_PRIORITY_THEN_YOUNGEST", deadlock.policy)
            assertEquals(
                listOf(Triple("a", younger.id(), "younger"), Triple("b", older.id(), "older")),
                deadlock.cycle.map { Triple(it.key, it.transactionId, it.transactionName) }.sortedBy { it.first },
            )
            val granted = olderWait.await()
            assertEquals("b", granted.key)
            older.commit()
            assertEquals(TransactionState.ABORTED, client.transactionStatus(younger.id()).state)
        } finally {
            older.close(); younger.close()
        }
    }

    @Test
    fun `every class of the shared error table is a DlsException subclass`() {
        val nested = DlsException::class.java.declaredClasses
            .filter { DlsException::class.java.isAssignableFrom(it) }
            .associateBy { it.simpleName }
        val table = errorClasses()
        assertTrue(table.any { it.code == "MEMBERSHIP_REFUSED" })
        assertEquals(table.map { it.stem }.toSet(), nested.keys, "one DlsException subclass per class of the table")
    }

    @Test
    fun `a transaction the server ended says why in endCause`() = runBlocking {
        val ns = ns()
        for (cause in listOf(EndCause.MAX_DURATION_EXCEEDED, EndCause.OPERATOR_ABORT)) {
            // A long lease: no heartbeat (every third of it) hears of the end before the
            // next call, so the refusal is the server's and carries its cause.
            val bound = if (cause == EndCause.MAX_DURATION_EXCEEDED) 800uL else null
            val tx = client.beginTransaction(TransactionOptions(timeoutMs = 60_000u, maxDurationMs = bound))
            try {
                tx.acquireLock(ns, "k-$cause", LockMode.EXCLUSIVE, timeoutMs = 5000)
                if (cause == EndCause.OPERATOR_ABORT) client.abortTransaction(tx.id(), "kotlin test")
                withTimeout(30_000) {
                    while (client.transactionStatus(tx.id()).endCause != cause) delay(50)
                }
                val e = assertThrows<DlsException.TransactionLost> {
                    runBlocking { tx.acquireLock(ns, "other", LockMode.EXCLUSIVE, timeoutMs = 1000) }
                }
                assertEquals("TRANSACTION_LOST", e.code)
                assertEquals(cause, e.endCause)
                // Now marked lost, the transaction keeps the cause: its lost reason and a
                // later call say the same (a maximum duration is not a lapsed lease).
                assertEquals(cause, tx.lostReason()?.endCause)
                val again = assertThrows<DlsException.TransactionLost> {
                    runBlocking { tx.acquireLock(ns, "other2", LockMode.EXCLUSIVE, timeoutMs = 1000) }
                }
                assertEquals(cause, again.endCause)
            } finally {
                tx.close()
            }
        }
    }

    @Test
    fun `lost listener fires when an operator aborts the transaction`() = runBlocking {
        val ns = ns()
        // A short lease: core heartbeats every lease/3, so it notices the abort within ~1 s.
        val tx = client.beginTransaction(TransactionOptions(timeoutMs = 3000u, name = "to-be-lost"))
        val lost = CompletableDeferred<LostReason>()
        tx.onLost { lost.complete(it) }
        tx.acquireLock(ns, "k", LockMode.EXCLUSIVE, timeoutMs = 2000)
        assertFalse(tx.isLost())
        assertEquals(TransactionState.ABORTED, client.abortTransaction(tx.id(), "kotlin test"))
        val reason = withTimeout(15000) { lost.await() }
        assertEquals(LostKind.ABORTED, reason.kind)
        assertTrue(tx.isLost())
        assertNotNull(tx.lostReason())
        val e = assertThrows<DlsException.TransactionLost> {
            runBlocking { tx.acquireLock(ns, "k2", LockMode.EXCLUSIVE, timeoutMs = 1000) }
        }
        assertEquals("TRANSACTION_LOST", e.code)

        // The abort is in the event log.
        val event = withTimeout(10000) {
            client.events(namespacePrefixes = listOf(ns), kinds = listOf(EventKind.TRANSACTION_ABORTED)).first()
        }
        val detail = event.detail as EventDetail.TransactionAborted
        assertEquals(tx.id(), detail.transactionId)
        assertEquals("kotlin test", detail.reason)
        assertEquals(listOf("k"), detail.releasedLocks.map { it.key })
        tx.close()
    }

    @Test
    fun `with lostStream the lost listener fires at once, not at the next heartbeat`() = runBlocking {
        val ns = ns()
        // A 30 s lease heartbeats every 10 s: within 5 s only the open acquire stream can tell.
        val streamed = client.beginTransaction(TransactionOptions(timeoutMs = 30000u, lostStream = true))
        val plain = client.beginTransaction(TransactionOptions(timeoutMs = 30000u))
        val lost = CompletableDeferred<LostReason>()
        streamed.onLost { lost.complete(it) }
        streamed.acquireLock(ns, "streamed", LockMode.EXCLUSIVE, timeoutMs = 2000)
        plain.acquireLock(ns, "plain", LockMode.EXCLUSIVE, timeoutMs = 2000)
        client.abortTransaction(streamed.id(), "revoked")
        client.abortTransaction(plain.id(), "revoked")
        val reason = withTimeout(5000) { lost.await() }
        assertEquals(LostKind.ABORTED, reason.kind)
        assertFalse(plain.isLost(), "the same abort without the stream is heard at the heartbeat")
        streamed.close()
        plain.close()
    }

    @Test
    fun `lost listener is silent after commit`() = runBlocking {
        val tx = client.beginTransaction(TransactionOptions())
        val calls = AtomicInteger()
        tx.onLost { calls.incrementAndGet() }
        tx.commit()
        delay(300)
        assertEquals(0, calls.get())
        tx.close()
    }

    @Test
    fun `withTransaction cancels the body and throws TransactionLost when the lease is lost`() = runBlocking {
        val ns = ns()
        val entered = CompletableDeferred<ULong>()
        val body = async(Dispatchers.Default) {
            runCatching {
                client.withTransaction(timeoutMs = 3000) { tx ->
                    tx.acquireLock(ns, "k", timeoutMs = 2000)
                    entered.complete(tx.id())
                    delay(60_000)
                    "finished"
                }
            }
        }
        val id = withTimeout(5000) { entered.await() }
        client.abortTransaction(id, "cancel the body")
        val result = withTimeout(15000) { body.await() }
        val e = result.exceptionOrNull()
        assertTrue(e is DlsException.TransactionLost, "got $result")
    }

    @Test
    fun `event stream next returns null after cancel`() = runBlocking {
        val stream = client.watchEvents(WatchOptions(onlyNew = true))
        val pending = async(Dispatchers.Default) { stream.next() }
        delay(200)
        stream.cancel()
        assertNull(withTimeout(5000) { pending.await() })
        assertNull(stream.next())
        stream.close()
    }

    @Test
    fun `100 coroutines contend without overlap`() = runBlocking {
        val ns = ns()
        val inside = AtomicInteger()
        val maxInside = AtomicInteger()
        val tokens = java.util.Collections.synchronizedList(mutableListOf<ULong>())
        (1..100).map {
            async(Dispatchers.Default) {
                client.withTransaction(timeoutMs = 15000) { tx ->
                    val lock = tx.acquireLock(ns, "counter", LockMode.EXCLUSIVE, timeoutMs = 60000)
                    val now = inside.incrementAndGet()
                    maxInside.accumulateAndGet(now) { a, b -> maxOf(a, b) }
                    tokens.add(lock.fencingToken)
                    delay(2)
                    inside.decrementAndGet()
                }
            }
        }.awaitAll()
        assertEquals(1, maxInside.get(), "two holders of one EXCLUSIVE lock at once")
        assertEquals(100, tokens.size)
        assertEquals(tokens.sorted(), tokens.toList(), "grants out of fencing order")
        assertEquals(100, tokens.toSet().size)
    }

    @Test
    fun `errors carry codes and the server's message`() = runBlocking {
        val e = assertThrows<DlsException.InvalidArgument> {
            runBlocking { client.withTransaction { tx -> tx.acquireLock("", "k", timeoutMs = 100) } }
        }
        assertEquals("INVALID_ARGUMENT", e.code)
        assertTrue(e.message!!.isNotBlank())
        val unreachable = DlsClient(ClientConfig(endpoints = listOf("127.0.0.1:1"), retryDeadlineMs = 500u,
            connectTimeoutMs = 200u))
        val u = assertThrows<DlsException.Unavailable> {
            runBlocking { unreachable.beginTransaction(TransactionOptions()) }
        }
        assertEquals("UNAVAILABLE", u.code)
        unreachable.close()
        val bad = assertThrows<DlsException> { DlsClient(ClientConfig(endpoints = listOf("not an address"))) }
        assertTrue(bad is DlsException.Config || bad is DlsException.InvalidArgument, "got $bad")
        Unit
    }

    @Test
    fun `a server limit is ResourceExhausted naming its flag and changes nothing`() = runBlocking {
        val ns = ns()
        val tx = client.beginTransaction(TransactionOptions())
        try {
            val held = (1..MAX_LOCKS).map { tx.acquireLock(ns, "k$it", timeoutMs = 1000) }
            val e = assertThrows<DlsException.ResourceExhausted> {
                runBlocking { tx.acquireLock(ns, "one-too-many", timeoutMs = 1000) }
            }
            assertEquals("RESOURCE_EXHAUSTED", e.code)
            assertTrue(e.message!!.contains("--max-locks-per-txn $MAX_LOCKS"), e.message)
            assertEquals(held, tx.status().locks)
        } finally {
            tx.abort()
            tx.close()
        }
        Unit
    }

    @Test
    fun `acquireLocks takes every lock together or none`() = runBlocking {
        val ns = ns()
        val holder = client.beginTransaction(TransactionOptions())
        val multi = client.beginTransaction(TransactionOptions())
        try {
            val held = holder.acquireLock(ns, "q", timeoutMs = 1000)
            val wanted = listOf(LockRequest(ns, "p", LockMode.EXCLUSIVE), LockRequest(ns, "q", LockMode.SHARED_READ))
            assertThrows<DlsException.LockTimeout> { runBlocking { multi.acquireLocks(wanted, timeoutMs = 0) } }
            assertEquals(emptyList<Lock>(), multi.status().locks)
            holder.commit()
            val locks = multi.acquireLocks(wanted, timeoutMs = 5000)
            assertEquals(listOf("p" to LockMode.EXCLUSIVE, "q" to LockMode.SHARED_READ), locks.map { it.key to it.mode })
            assertTrue(locks.all { it.fencingToken > held.fencingToken })
            assertTrue(locks[0].fencingToken < locks[1].fencingToken)
            val tooMany = (1..MAX_LOCKS + 1).map { LockRequest(ns, "many-$it", LockMode.EXCLUSIVE) }
            assertThrows<DlsException.ResourceExhausted> { runBlocking { multi.acquireLocks(tooMany, timeoutMs = 0) } }
            assertThrows<DlsException.InvalidArgument> { runBlocking { multi.acquireLocks(emptyList(), timeoutMs = 0) } }
            assertEquals(locks, multi.status().locks)
        } finally {
            multi.abort()
            holder.close(); multi.close()
        }
        Unit
    }

    @Test
    fun `downgrade keeps the token and verifyFencingToken follows the grant`() = runBlocking {
        val ns = ns()
        val tx = client.beginTransaction(TransactionOptions())
        try {
            val lock = tx.acquireLock(ns, "doc", timeoutMs = 1000)
            assertTrue(client.verifyFencingToken(ns, "doc", lock.fencingToken.toLong()).current)
            assertFalse(client.verifyFencingToken(ns, "doc", lock.fencingToken.toLong() + 1).current)
            val down = tx.downgrade(ns, "doc")
            assertEquals(LockMode.SHARED_READ, down?.mode)
            assertEquals(lock.fencingToken, down?.fencingToken)
            assertNull(tx.downgrade(ns, "not-held"))
            tx.commit()
            val after = client.verifyFencingToken(ns, "doc", lock.fencingToken)
            assertFalse(after.current)
            assertEquals(emptyList<ULong>(), after.currentTokens)
        } finally {
            tx.close()
        }
        Unit
    }

    @Test
    fun `a schedule slot runs once and a failed one again only with retryFailed`() = runBlocking {
        val ns = ns()
        val hour = 3_600_000UL
        suspend fun host(outcome: SlotOutcome, retryFailed: Boolean = false): SlotClaim {
            val tx = client.beginTransaction(TransactionOptions())
            try {
                tx.acquireLock(ns, "job", timeoutMs = 1000)
                val claim = tx.claimSlot(ns, "job", hour, retryFailed)
                if (claim.run) {
                    val run = tx.finishSlot(claim, outcome)
                    assertEquals(claim.slot, run.slot)
                }
                tx.commit()
                return claim
            } finally {
                tx.close()
            }
        }
        val first = host(SlotOutcome.Failed(exitCode = 4))
        assertTrue(first.run)
        val skipped = host(SlotOutcome.Succeeded)
        if (skipped.slot == first.slot) {
            assertFalse(skipped.run)
            assertEquals(SlotRunState.FAILED, skipped.lastRun?.state)
            assertEquals(4, skipped.lastRun?.exitCode)
            val retried = host(SlotOutcome.Succeeded, retryFailed = true)
            assertTrue(retried.run)
            assertEquals(2u, retried.attempt)
            assertFalse(host(SlotOutcome.Succeeded, retryFailed = true).run)
        }
        val notHeld = client.beginTransaction(TransactionOptions())
        try {
            notHeld.acquireLock(ns, "other", timeoutMs = 1000)
            assertThrows<DlsException.InvalidArgument> { runBlocking { notHeld.claimSlot(ns, "job", hour, false) } }
        } finally {
            notHeld.close()
        }
        Unit
    }

    @Test
    fun `maxDurationMs ends a heartbeating transaction and cancels the body`() = runBlocking {
        val ns = ns()
        val started = System.nanoTime()
        val e = assertThrows<DlsException.TransactionLost> {
            runBlocking {
                client.withTransaction(timeoutMs = 10000, maxDurationMs = 800) { tx ->
                    tx.acquireLock(ns, "k", timeoutMs = 1000)
                    delay(60_000)
                }
            }
        }
        assertTrue((System.nanoTime() - started) / 1_000_000 >= 800)
        assertTrue(e.message!!.contains("max duration"), e.message)
        val bad = assertThrows<DlsException.InvalidArgument> {
            runBlocking { client.beginTransaction(TransactionOptions(maxDurationMs = 10u)) }
        }
        assertTrue(bad.message!!.contains("max_duration_ms"), bad.message)
        Unit
    }

    @Test
    fun `onQueued hears the place in line and the blockers`() = runBlocking {
        val ns = ns()
        val holder = client.beginTransaction(TransactionOptions())
        val waiter = client.beginTransaction(TransactionOptions())
        try {
            holder.acquireLock(ns, "k", timeoutMs = 1000)
            val heard = CompletableDeferred<QueuePosition>()
            val waiting = async(Dispatchers.IO) {
                waiter.acquireLock(ns, "k", timeoutMs = 30_000, onQueued = { heard.complete(it) })
            }
            val position = withTimeout(30_000) { heard.await() }
            assertEquals(1u, position.position)
            assertEquals(listOf(holder.id()), position.blockingTransactionIds)
            holder.commit()
            assertEquals("k", withTimeout(30_000) { waiting.await() }.key)
        } finally {
            waiter.abort()
            holder.close(); waiter.close()
        }
        Unit
    }

    @Test
    fun `a key watch and an election hand leadership over in turn`() = runBlocking {
        val ns = ns()
        val updates = client.keyUpdates(ns, "k")
        val election = client.election(ns, "leader")
        assertNull(election.leader())
        val first = election.campaign("a", leaseMs = 5000)
        assertEquals("a", election.leader()?.transactionName)
        val second = async(Dispatchers.IO) { election.campaign("b", leaseMs = 5000) }
        eventually("b waits in line for the leader key (or was wrongly granted it)") {
            waitsInLine(client, ns, "leader", "b") { second.isCompleted }
        }
        assertFalse(second.isCompleted, "b waits while a leads")
        val firstTerm = first.term
        first.resign()
        val leadership = withTimeout(30_000) { second.await() }
        assertTrue(leadership.term > firstTerm)
        assertEquals("b", election.observe().first()?.transactionName)
        leadership.resign()

        val tx = client.beginTransaction(TransactionOptions(name = "watched"))
        try {
            // The flow is cold: the watch exists once its first (initial) update arrived, and
            // only a grant after that is a change rather than part of the first snapshot.
            val watching = CompletableDeferred<Unit>()
            val seen = async(Dispatchers.IO) {
                withTimeout(30_000) { updates.onEach { watching.complete(Unit) }.first { it.changes.isNotEmpty() } }
            }
            withTimeout(30_000) { watching.await() }
            val lock = tx.acquireLock(ns, "k", timeoutMs = 1000)
            val change = seen.await().changes.single()
            assertEquals(KeyChangeKind.GRANTED, change.kind)
            assertEquals("watched" to lock.fencingToken, change.holder.transactionName to change.holder.fencingToken)
        } finally {
            tx.abort()
            tx.close()
        }
        Unit
    }

    /** The listing of [ns]/[key], if the key is held, waited for or under a lock-delay. */
    private suspend fun listed(ns: String, key: String): KeyLocks? =
        client.listLocks(ns).firstOrNull { it.key == key }

    @Test
    fun `cancelling a waiting acquire's coroutine withdraws it and nobody gets the lock`() = runBlocking {
        val ns = ns()
        val holder = client.beginTransaction(TransactionOptions(timeoutMs = 30000u))
        val waiter = client.beginTransaction(TransactionOptions(timeoutMs = 30000u))
        try {
            holder.acquireLock(ns, "k", timeoutMs = 2000)
            val waiting = async(Dispatchers.IO) { waiter.acquireLock(ns, "k", timeoutMs = 3_600_000) }
            val queued = eventually("the waiter is queued") { listed(ns, "k")?.takeIf { it.waiters.isNotEmpty() } }
            assertEquals(listOf(waiter.id() to false), queued.waiters.map { it.transactionId to it.upgrade })
            waiting.cancelAndJoin()
            eventually("the cancelled wait leaves the queue") { listed(ns, "k")?.takeIf { it.waiters.isEmpty() } }

            holder.commit()
            val status = waiter.status()
            assertEquals(TransactionState.ACTIVE, status.state)
            assertTrue(status.locks.isEmpty() && status.waiting == null, "$status")
            assertNull(listed(ns, "k"), "nobody holds the key")
        } finally {
            holder.abort()
            waiter.abort()
            holder.close()
            waiter.close()
        }
        Unit
    }

    @Test
    fun `cancelling a waiting upgrade withdraws it and the shared hold stays`() = runBlocking {
        val ns = ns()
        val a = client.beginTransaction(TransactionOptions(timeoutMs = 30000u))
        val b = client.beginTransaction(TransactionOptions(timeoutMs = 30000u))
        try {
            val shared = a.acquireLock(ns, "up", LockMode.SHARED_READ, timeoutMs = 2000)
            b.acquireLock(ns, "up", LockMode.SHARED_READ, timeoutMs = 2000)
            val upgrade = async(Dispatchers.IO) { a.acquireLock(ns, "up", LockMode.EXCLUSIVE, timeoutMs = 3_600_000) }
            val queued = eventually("the upgrade is queued") { listed(ns, "up")?.takeIf { it.waiters.isNotEmpty() } }
            assertEquals(listOf(a.id() to true), queued.waiters.map { it.transactionId to it.upgrade })
            upgrade.cancelAndJoin()
            eventually("the cancelled upgrade leaves the queue") { listed(ns, "up")?.takeIf { it.waiters.isEmpty() } }
            b.commit()
            assertEquals(
                listOf(LockMode.SHARED_READ to shared.fencingToken),
                a.status().locks.map { it.mode to it.fencingToken },
            )
        } finally {
            a.abort()
            b.abort()
            a.close()
            b.close()
        }
        Unit
    }

    @Test
    fun `lock-delay keeps an aborted holder's key from the queued waiter until it ends`() = runBlocking {
        val ns = ns()
        assertTrue(client.lockDelays().none { it.namespacePrefix == ns })
        assertEquals(0L, client.setLockDelay(ns, 3000L))
        assertEquals(listOf(LockDelayRule(ns, 3000uL)), client.lockDelays().filter { it.namespacePrefix == ns })
        val holder = client.beginTransaction(TransactionOptions(timeoutMs = 30000u))
        val next = client.beginTransaction(TransactionOptions(timeoutMs = 30000u))
        try {
            holder.acquireLock(ns, "k", timeoutMs = 2000)
            val waiting = async(Dispatchers.IO) { next.acquireLock(ns, "k", timeoutMs = 30_000) }
            eventually("the waiter is queued") { listed(ns, "k")?.takeIf { it.waiters.isNotEmpty() } }
            assertNull(listed(ns, "k")?.delay, "no delay while held")

            assertEquals(TransactionState.ABORTED, client.abortTransaction(holder.id(), "maintenance"))
            val k = eventually("the key is under a lock-delay") { listed(ns, "k")?.takeIf { it.delay != null } }
            val d = k.delay!!
            assertEquals(holder.id() to EndCause.OPERATOR_ABORT, d.transactionId to d.cause)
            assertTrue(k.holders.isEmpty())
            assertEquals(listOf(next.id()), k.waiters.map { it.transactionId })
            // The node runs on this machine: its clock is ours.
            if (System.currentTimeMillis() < d.untilMs - 500) {
                client.beginTransaction(TransactionOptions(timeoutMs = 30000u)).use { other ->
                    assertThrows<DlsException.LockTimeout> { runBlocking { other.acquireLock(ns, "k", timeoutMs = 0) } }
                    other.abort()
                }
                assertFalse(waiting.isCompleted, "granted during the delay")
            }

            val lock = withTimeout(30_000) { waiting.await() }
            assertTrue(lock.fencingToken > 0u)
            val now = listed(ns, "k")!!
            assertNull(now.delay)
            assertEquals(next.id(), now.holders.single().transactionId)
            assertTrue(now.holders.single().sinceMs >= d.untilMs, "granted before the delay ended")
            next.commit()
        } finally {
            holder.close()
            next.close()
            client.setLockDelay(ns, 0L)
        }
        assertTrue(client.lockDelays().none { it.namespacePrefix == ns }, "removed")
    }

    @Test
    fun `a semaphore admits its permit count, queues the rest and refuses a lock mode`() = runBlocking {
        val ns = ns()
        val txs = (1..4).map { client.beginTransaction(TransactionOptions(timeoutMs = 30000u)) }
        try {
            val a = txs[0].acquirePermit(ns, "pool", 2, timeoutMs = 2000)
            val b = txs[1].acquirePermit(ns, "pool", 2, timeoutMs = 2000)
            assertEquals(LockMode.SEMAPHORE, a.mode)
            assertTrue(b.fencingToken > a.fencingToken)
            val waiting = async(Dispatchers.IO) { txs[2].acquirePermit(ns, "pool", 2, timeoutMs = 30_000) }
            val k = eventually("the third is queued") { listed(ns, "pool")?.takeIf { it.waiters.isNotEmpty() } }
            assertEquals(2u, k.permits)
            assertThrows<DlsException.LockTimeout> { runBlocking { txs[3].acquirePermit(ns, "pool", 2, timeoutMs = 0) } }
            val e = assertThrows<DlsException.InvalidArgument> {
                runBlocking { txs[3].acquireLock(ns, "pool", LockMode.EXCLUSIVE, timeoutMs = 0) }
            }
            assertTrue("${e.message}".contains("semaphore with 2 permits"), "${e.message}")
            assertTrue(txs[0].release(ns, "pool"))
            val got = withTimeout(30_000) { waiting.await() }
            assertTrue(got.fencingToken > b.fencingToken)
        } finally {
            txs.forEach { it.close() }
        }
    }

    @Test
    fun `a lock-delay above 10 minutes is refused as InvalidArgument`() = runBlocking {
        val ns = ns()
        val e = assertThrows<DlsException.InvalidArgument> { runBlocking { client.setLockDelay(ns, 600_001L) } }
        assertEquals("INVALID_ARGUMENT", e.code)
        assertTrue("${e.message}".contains("delay_ms"), "${e.message}")
        assertTrue(client.lockDelays().none { it.namespacePrefix == ns }, "a refused rule is not stored")
        assertEquals(0uL, client.setLockDelay(ns, 600_000uL))
        assertEquals(600_000L, client.setLockDelay(ns, 0L))
        assertTrue(client.lockDelays().none { it.namespacePrefix == ns })
    }
}
