package dev.caerus.dls

import java.util.UUID
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.assertThrows
import org.junit.jupiter.params.ParameterizedTest
import org.junit.jupiter.params.provider.ValueSource

/**
 * The lock features of issue 22 end to end through the SDK against a real three-node
 * cluster (started by `dls-cluster`, nodes authenticated with a cluster secret): a client
 * that knows every node, and one that knows only a follower (its calls are forwarded).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ThreeNodeTest {
    private lateinit var cluster: KitCluster
    private val clients = mutableMapOf<String, DlsClient>()

    private fun ns(): String = "kt3-" + UUID.randomUUID().toString().take(8)

    @BeforeAll
    fun startCluster() {
        cluster = KitCluster(nodes = 3)
        val follower = cluster.endpoints.filterIndexed { i, _ -> i + 1 != cluster.leader() }.first()
        clients["every node"] = dlsClient(*cluster.endpoints.toTypedArray())
        clients["a follower only"] = dlsClient(follower)
    }

    @AfterAll
    fun stopCluster() {
        clients.values.forEach { it.close() }
        if (::cluster.isInitialized) cluster.close()
    }

    @ParameterizedTest
    @ValueSource(strings = ["every node", "a follower only"])
    fun `locks, permits, tokens and bounds`(via: String) = runBlocking {
        val client = clients.getValue(via)
        val ns = ns()
        val (a, b, c) = (1..3).map { client.beginTransaction(TransactionOptions(timeoutMs = 30000u)) }
        try {
            val (x, y) = a.acquireLocks(listOf(LockRequest(ns, "x", LockMode.EXCLUSIVE), LockRequest(ns, "y", LockMode.SHARED_READ)), 5000)
            assertThrows<DlsException.LockTimeout> { runBlocking { b.acquireLock(ns, "x", LockMode.EXCLUSIVE, timeoutMs = 0) } }
            assertTrue(client.verifyFencingToken(ns, "x", x.fencingToken.toLong()).current)
            val down = a.downgrade(ns, "x")!!
            assertEquals(LockMode.SHARED_READ to x.fencingToken, down.mode to down.fencingToken)
            assertTrue(b.acquireLock(ns, "x", LockMode.SHARED_READ, timeoutMs = 2000).fencingToken > y.fencingToken)
            val p1 = a.acquirePermit(ns, "pool", 2, timeoutMs = 2000)
            val p2 = b.acquirePermit(ns, "pool", 2, timeoutMs = 2000)
            assertTrue(p1.mode == LockMode.SEMAPHORE && p2.fencingToken > p1.fencingToken)
            assertThrows<DlsException.LockTimeout> { runBlocking { c.acquirePermit(ns, "pool", 2, timeoutMs = 0) } }
            assertThrows<DlsException.InvalidArgument> { runBlocking { c.acquireLock(ns, "pool", LockMode.EXCLUSIVE, timeoutMs = 0) } }
            listOf(a, b, c).forEach { it.commit() }
        } finally {
            listOf(a, b, c).forEach { it.close() }
        }
        val bounded = client.beginTransaction(TransactionOptions(timeoutMs = 10000u, maxDurationMs = 800u, lostStream = true))
        val lost = CompletableDeferred<LostReason>()
        bounded.onLost { lost.complete(it) }
        bounded.acquireLock(ns, "bounded", LockMode.EXCLUSIVE, timeoutMs = 2000)
        assertEquals(LostKind.EXPIRED, withTimeout(15_000) { lost.await() }.kind)
        bounded.close()
    }

    @ParameterizedTest
    @ValueSource(strings = ["every node", "a follower only"])
    fun `watch, elect and lock-delay`(via: String) = runBlocking {
        val client = clients.getValue(via)
        val ns = ns()
        val election = client.election(ns, "leader")
        val first = election.campaign("first", leaseMs = 2000)
        val now = election.leader()!!
        assertEquals("first" to first.term, now.transactionName to now.fencingToken)
        val second = async(Dispatchers.IO) { election.campaign("second", leaseMs = 2000) }
        eventually("the second candidate waits in line behind the first") {
            waitsInLine(client, ns, "leader", "second") { second.isCompleted }
        }
        assertFalse(second.isCompleted, "the second candidate waits while the first leads")
        first.resign()
        val tookOver = withTimeout(15_000) { second.await() }
        assertTrue(tookOver.term > first.term)
        tookOver.resign()

        client.setLockDelay(ns, 1500L)
        val holder = client.beginTransaction(TransactionOptions(timeoutMs = 30000u))
        holder.acquireLock(ns, "k", LockMode.EXCLUSIVE, timeoutMs = 2000)
        client.abortTransaction(holder.id(), "drill")
        val delayed = client.listLocks(ns).first { it.key == "k" }
        assertEquals(holder.id(), delayed.delay!!.transactionId)
        val next = client.beginTransaction(TransactionOptions(timeoutMs = 30000u))
        next.acquireLock(ns, "k", LockMode.EXCLUSIVE, timeoutMs = 15_000)
        val held = client.listLocks(ns).first { it.key == "k" }
        assertNull(held.delay)
        assertTrue(held.holders.single().sinceMs >= delayed.delay!!.untilMs, "granted before the delay ended")
        next.commit()
        assertEquals(1500L, client.setLockDelay(ns, 0L))
        holder.close()
        next.close()
    }
}
