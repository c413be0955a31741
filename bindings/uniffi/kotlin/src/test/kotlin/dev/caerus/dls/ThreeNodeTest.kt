package dev.caerus.dls

import java.io.File
import java.net.URI
import java.net.http.HttpClient
import java.net.http.HttpRequest
import java.net.http.HttpResponse
import java.nio.file.Files
import java.time.Duration
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
 * cluster (started from `-Ddls.bin`, nodes authenticated with a cluster secret): a client
 * that knows every node, and one that knows only a follower (its calls are forwarded).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ThreeNodeTest {
    private class Node(val endpoint: String, val httpAddr: String, val process: Process, val dir: File)

    private val nodes = mutableListOf<Node>()
    private val clients = mutableMapOf<String, DlsClient>()
    private val http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(1)).build()


    private fun ns(): String = "kt3-" + UUID.randomUUID().toString().take(8)

    /** The node that leads now, by asking each node's /api/v1/cluster. */
    private fun leader(): Node {
        val deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos()
        while (System.nanoTime() < deadline) {
            for (n in nodes) {
                val body = runCatching {
                    http.send(
                        HttpRequest.newBuilder(URI("http://${n.httpAddr}/api/v1/cluster")).timeout(Duration.ofSeconds(1)).build(),
                        HttpResponse.BodyHandlers.ofString(),
                    ).body()
                }.getOrNull() ?: continue
                // This node's own role (the members list names other nodes' ids too).
                if (body.contains("\"role\":\"Leader\"")) return n
            }
            Thread.sleep(100)
        }
        error("no leader within 30 s")
    }

    @BeforeAll
    fun startCluster() {
        val bin = System.getProperty("dls.bin")?.takeIf { it.isNotBlank() } ?: System.getenv("DLS_BIN")
        require(!bin.isNullOrBlank()) { "pass -Ddls.bin=/path/to/dls (make test-kotlin does)" }
        val ports = freePorts(9)
        val peers = (0 until 3).joinToString(",") { "${it + 1}=127.0.0.1:${ports[3 * it]}/127.0.0.1:${ports[3 * it + 1]}" }
        val secret = "kt-secret-" + UUID.randomUUID()
        for (i in 0 until 3) {
            val dir = Files.createTempDirectory("dls-kotlin3-${i + 1}-").toFile()
            val pb = ProcessBuilder(
                bin, "serve", "--node-id", "${i + 1}", "--peers", peers,
                "--http-listen", "127.0.0.1:${ports[3 * i + 2]}",
                "--data-dir", File(dir, "data").absolutePath,
                "--heartbeat-ms", "50", "--election-timeout-ms", "300", "--log", "warn",
            ).redirectErrorStream(true).redirectOutput(File(dir, "server.log"))
            pb.environment()["DLS_CLUSTER_SECRET"] = secret
            nodes += Node("127.0.0.1:${ports[3 * i]}", "127.0.0.1:${ports[3 * i + 2]}", pb.start(), dir)
        }
        val follower = nodes.first { it !== leader() }
        clients["every node"] = dlsClient(*nodes.map { it.endpoint }.toTypedArray())
        clients["a follower only"] = dlsClient(follower.endpoint)
    }

    @AfterAll
    fun stopCluster() {
        clients.values.forEach { it.close() }
        for (n in nodes) {
            n.process.destroyForcibly().waitFor()
            n.dir.deleteRecursively()
        }
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
