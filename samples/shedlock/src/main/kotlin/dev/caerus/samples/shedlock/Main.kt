// Three "instances" of an application, each with its own DLS client, ShedLock executor and
// scheduler, fire the task `report` every 2 s; DlsLockProvider (oncePer 6 s) runs it once per
// 6-second slot of the cluster's clock. Prints each run and checks no slot ran twice.
//   mvn -q compile exec:java -Dexec.args="ENDPOINT [SECONDS]"
package dev.caerus.samples.shedlock

import dev.caerus.dls.dlsClient
import dev.caerus.dls.shedlock.DlsLockProvider
import java.time.Duration
import java.time.Instant
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.CopyOnWriteArrayList
import java.util.concurrent.Executors
import java.util.concurrent.TimeUnit
import kotlin.system.exitProcess
import net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor
import net.javacrumbs.shedlock.core.LockConfiguration

fun main(args: Array<String>) {
    val endpoint = args.getOrNull(0) ?: System.getenv("DLS_ENDPOINT") ?: "127.0.0.1:7070"
    val seconds = args.getOrNull(1)?.toLong() ?: 20
    val runs = ConcurrentHashMap<Long, MutableList<String>>()
    val schedulers = listOf("instance-a", "instance-b", "instance-c").map { name ->
        val client = dlsClient(endpoint)
        // What a Spring app declares as a @Bean LockProvider; @SchedulerLock(name = "report", ...) then uses it.
        val executor = DefaultLockingTaskExecutor(DlsLockProvider(client, "samples", oncePer = Duration.ofSeconds(6)))
        val scheduler = Executors.newSingleThreadScheduledExecutor()
        scheduler.scheduleAtFixedRate({
            val config = LockConfiguration(Instant.now(), "report", Duration.ofMinutes(1), Duration.ZERO)
            executor.executeWithLock(Runnable {
                // The job: whatever must not happen twice in a slot.
                val slot = DlsLockProvider.currentClaim()!!.slot.toLong()
                runs.computeIfAbsent(slot) { CopyOnWriteArrayList() }.add(name)
                println("[$name] RAN the report for slot $slot")
            }, config)
        }, 0, 2, TimeUnit.SECONDS)
        scheduler
    }
    println("[sample] 3 instances, ShedLock every 2 s, DlsLockProvider once per 6 s slot; running $seconds s")
    Thread.sleep(seconds * 1000)
    schedulers.forEach { it.shutdown(); it.awaitTermination(10, TimeUnit.SECONDS) }
    val twice = runs.filterValues { it.size > 1 }
    val ok = runs.size >= 2 && twice.isEmpty()
    println("[sample] ${runs.values.sumOf { it.size }} runs in ${runs.size} slots, slots run more than once: ${twice.ifEmpty { "none" }} -> ${if (ok) "PASS" else "FAIL"}")
    exitProcess(if (ok) 0 else 1)
}
