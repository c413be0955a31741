package dev.caerus.dls.shedlock

import dev.caerus.dls.DlsClient
import dev.caerus.dls.dlsClient
import dev.caerus.dls.KitCluster
import java.time.Duration
import java.time.Instant
import java.util.UUID
import java.util.concurrent.CountDownLatch
import java.util.concurrent.CyclicBarrier
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger
import kotlin.concurrent.thread
import net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor
import net.javacrumbs.shedlock.core.LockConfiguration
import net.javacrumbs.shedlock.core.LockingTaskExecutor
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance

/** [DlsLockProvider] under ShedLock's own executor, several "instances" (each its own client) against one real `dls serve`. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DlsLockProviderTest {
    private lateinit var cluster: KitCluster
    private lateinit var endpoint: String
    private val clients = mutableListOf<DlsClient>()

    private fun ns(): String = "kt-shedlock-" + UUID.randomUUID().toString().take(8)

    /** An instance of the application: its own client, provider and ShedLock executor. */
    private fun instance(ns: String, oncePer: Duration? = null): DefaultLockingTaskExecutor {
        val client = dlsClient(endpoint).also { synchronized(clients) { clients += it } }
        return DefaultLockingTaskExecutor(DlsLockProvider(client, ns, oncePer = oncePer))
    }

    private fun config(name: String, atMost: Duration = Duration.ofMinutes(1), atLeast: Duration = Duration.ZERO) =
        LockConfiguration(Instant.now(), name, atMost, atLeast)

    /** Runs [task] under the lock on [executor]; whether it ran. */
    private fun runs(executor: DefaultLockingTaskExecutor, config: LockConfiguration, task: () -> Unit = {}): Boolean =
        executor.executeWithLock(LockingTaskExecutor.TaskWithResult { task() }, config).wasExecuted()

    private fun eventually(what: String, within: Duration = Duration.ofSeconds(15), fact: () -> Boolean) {
        val deadline = System.nanoTime() + within.toNanos()
        while (!fact()) {
            check(System.nanoTime() < deadline) { "not within $within: $what" }
            Thread.sleep(50)
        }
    }

    @BeforeAll
    fun startServer() {
        cluster = KitCluster()
        endpoint = cluster.endpoint
    }

    @AfterAll
    fun stopServer() {
        clients.forEach { it.close() }
        if (::cluster.isInitialized) cluster.close()
    }

    @Test
    fun `six instances firing at once run the task once`() {
        val ns = ns()
        val executors = List(6) { instance(ns) }
        val runs = AtomicInteger()
        val release = CountDownLatch(1)
        val barrier = CyclicBarrier(executors.size)
        val ran = Array(executors.size) { false }
        val threads = executors.mapIndexed { i, executor ->
            thread {
                barrier.await()
                // The task holds the lock until every instance has tried.
                ran[i] = runs(executor, config("report")) { runs.incrementAndGet(); release.await(30, TimeUnit.SECONDS) }
            }
        }
        eventually("five instances skipped") { runs.get() == 1 && threads.count { !it.isAlive } == executors.size - 1 }
        release.countDown()
        threads.forEach { it.join() }
        assertEquals(1, runs.get())
        assertEquals(1, ran.count { it })
        assertTrue(runs(executors[0], config("report")), "the lock is free again after the run")
    }

    @Test
    fun `lockAtLeastFor keeps the lock after the task, lockAtMostFor frees it while the task runs`() {
        val ns = ns()
        val (a, b) = List(2) { instance(ns) }
        val atLeast = config("nightly", atLeast = Duration.ofSeconds(5))
        assertTrue(runs(a, atLeast))
        if (Instant.now().isBefore(atLeast.lockAtLeastUntil)) assertFalse(runs(b, config("nightly")), "held until lockAtLeastUntil")
        eventually("the lock is freed at lockAtLeastUntil") { runs(b, config("nightly")) }
        assertFalse(Instant.now().isBefore(atLeast.lockAtLeastUntil))

        // A task that outruns lockAtMostFor loses the lock (the cluster ends its transaction), as in ShedLock.
        val started = CountDownLatch(1)
        val done = CountDownLatch(1)
        var stuckRan: Result<Boolean>? = null
        val stuck = thread {
            stuckRan = runCatching {
                runs(a, config("stuck", atMost = Duration.ofMillis(800))) { started.countDown(); done.await(30, TimeUnit.SECONDS) }
            }
        }
        assertTrue(started.await(15, TimeUnit.SECONDS), "the first task started")
        eventually("another instance gets the lock of a task past its lockAtMostFor") { runs(b, config("stuck")) }
        assertTrue(stuck.isAlive, "the first task still runs")
        done.countDown()
        stuck.join()
        assertEquals(true, stuckRan?.getOrThrow(), "the task's lock lapsing is no error of the task")
    }

    @Test
    fun `oncePer skips a slot that already ran, on any instance`() {
        val ns = ns()
        val slot = Duration.ofDays(1)
        val (a, b) = List(2) { instance(ns, oncePer = slot) }
        val plain = instance(ns)
        var claimed: Long? = null
        assertTrue(runs(a, config("daily")) { claimed = DlsLockProvider.currentClaim()?.slot?.toLong() })
        assertTrue(claimed != null && DlsLockProvider.currentClaim() == null, "the claim is seen in the task only")
        assertFalse(runs(b, config("daily")), "the lock is free, but the slot ran")
        assertFalse(runs(a, config("daily")))
        assertTrue(runs(plain, config("daily")), "without oncePer, only the lock counts")
    }
}
