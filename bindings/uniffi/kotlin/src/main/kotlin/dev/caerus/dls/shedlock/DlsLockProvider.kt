package dev.caerus.dls.shedlock

import dev.caerus.dls.DlsClient
import dev.caerus.dls.DlsException
import dev.caerus.dls.LockMode
import dev.caerus.dls.SlotClaim
import dev.caerus.dls.SlotOutcome
import dev.caerus.dls.Transaction
import dev.caerus.dls.TransactionOptions
import dev.caerus.dls.acquireLock
import java.time.Duration
import java.time.Instant
import java.util.Optional
import java.util.concurrent.Executors
import java.util.concurrent.ScheduledExecutorService
import java.util.concurrent.TimeUnit
import kotlinx.coroutines.runBlocking
import net.javacrumbs.shedlock.core.LockConfiguration
import net.javacrumbs.shedlock.core.LockProvider
import net.javacrumbs.shedlock.core.SimpleLock

/**
 * A ShedLock [LockProvider] on Caerus DLS: `@SchedulerLock(name = "report", lockAtMostFor = "10m",
 * lockAtLeastFor = "1m")` on a Spring `@Scheduled` method (or a [net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor])
 * runs the task on one instance at a time. Needs `net.javacrumbs.shedlock:shedlock-core` (6.x)
 * on the classpath; this artifact declares it optional.
 *
 * How ShedLock's configuration maps to DLS:
 * - `name` is the key in [namespace] (one lock per task name).
 * - The lock is tried once, without waiting: an instance that finds it held skips the run,
 *   as with ShedLock's table-based providers.
 * - `lockAtMostFor` is the transaction's max duration: the cluster frees the lock then even
 *   if the task still runs (ShedLock's rule). A crashed instance's lock is freed sooner, when
 *   its lease ([leaseMs], heartbeated while the instance lives) expires.
 * - `lockAtLeastFor`: a task that ends sooner keeps the lock (still heartbeated) until
 *   `lockAtLeastUntil`, so instances whose schedules fire a little later skip.
 * - [oncePer]: also claim the schedule slot of this period (decided by the cluster's clock,
 *   see docs/slots.md), so an instance whose clock is off or fires late skips a slot that
 *   already ran, however long ago. ShedLock does not tell a provider whether the task threw,
 *   so every run is recorded SUCCEEDED, and a failed slot is not rerun.
 */
class DlsLockProvider @JvmOverloads constructor(
    private val client: DlsClient,
    private val namespace: String = "shedlock",
    private val leaseMs: Long = 15_000,
    private val oncePer: Duration? = null,
) : LockProvider {
    init {
        require(leaseMs >= 100) { "leaseMs must be at least 100" }
        require(oncePer == null || oncePer.toMillis() > 0) { "oncePer must be positive" }
    }

    override fun lock(lockConfiguration: LockConfiguration): Optional<SimpleLock> {
        val lock = take(lockConfiguration)
        // ShedLock runs the task on the thread that took the lock, and unlocks there.
        lock.ifPresent { current.set((it as DlsLock).claim) }
        return lock
    }

    private fun take(lockConfiguration: LockConfiguration): Optional<SimpleLock> = runBlocking {
        val key = lockConfiguration.name
        val atMostMs = lockConfiguration.lockAtMostFor.toMillis()
        val tx = client.beginTransaction(
            TransactionOptions(
                timeoutMs = minOf(leaseMs, atMostMs).coerceAtLeast(100).toULong(),
                name = "shedlock:$key",
                maxDurationMs = atMostMs.toULong(),
            ),
        )
        var ended = false
        try {
            try {
                tx.acquireLock(namespace, key, LockMode.EXCLUSIVE, timeoutMs = 0)
            } catch (held: DlsException.LockTimeout) {
                ended = true
                end(tx, commit = false)
                return@runBlocking Optional.empty()
            }
            val claim = oncePer?.let { tx.claimSlot(namespace, key, it.toMillis().toULong(), false) }
            if (claim != null && !claim.run) {
                ended = true
                end(tx, commit = true)
                return@runBlocking Optional.empty()
            }
            Optional.of<SimpleLock>(DlsLock(tx, claim, lockConfiguration.lockAtLeastUntil))
        } catch (e: Throwable) {
            if (!ended) runCatching { end(tx, commit = false) }.exceptionOrNull()?.let { e.addSuppressed(it) }
            throw e
        }
    }

    private class DlsLock(
        private val tx: Transaction,
        val claim: SlotClaim?,
        private val lockAtLeastUntil: Instant,
    ) : SimpleLock {
        override fun unlock() {
            current.remove()
            try {
                runBlocking { claim?.let { tx.finishSlot(it, SlotOutcome.Succeeded) } }
            } catch (lost: DlsException.TransactionLost) {
                // The cluster freed the lock first (lockAtMostFor passed, or the lease lapsed)
                // and recorded the slot LOST; as in ShedLock, that is no error of the task.
                runBlocking { end(tx, commit = false) }
                return
            }
            val holdMs = Duration.between(Instant.now(), lockAtLeastUntil).toMillis()
            if (holdMs <= 0) {
                runBlocking { commitQuietly(tx) }
            } else {
                // lockAtLeastFor: the lease stays heartbeated until then; the task's thread goes on.
                releaser.schedule({ runBlocking { commitQuietly(tx) } }, holdMs, TimeUnit.MILLISECONDS)
            }
        }

        /** Commits; a transaction the cluster already ended (lockAtMostFor) has freed the lock already. */
        private suspend fun commitQuietly(tx: Transaction) {
            try {
                end(tx, commit = true)
            } catch (lost: DlsException.TransactionLost) {
                // Freed by the cluster: nothing left to release.
            }
        }
    }

    companion object {
        private val current = ThreadLocal<SlotClaim?>()

        /**
         * In a task run under a provider with `oncePer`: the slot's claim (`slot`, e.g. for an
         * idempotency key; `attempt`); null elsewhere.
         */
        @JvmStatic
        fun currentClaim(): SlotClaim? = current.get()

        /** Ends transactions whose lockAtLeastFor outlives the task; daemon, so it never keeps a JVM up. */
        private val releaser: ScheduledExecutorService = Executors.newSingleThreadScheduledExecutor { r ->
            Thread(r, "caerus-shedlock-release").apply { isDaemon = true }
        }

        /** Commits (frees the lock) or aborts, and frees the handle; a lost transaction has nothing to free. */
        private suspend fun end(tx: Transaction, commit: Boolean) {
            try {
                if (commit && !tx.isLost()) tx.commit() else tx.abort()
            } finally {
                tx.close()
            }
        }
    }
}
