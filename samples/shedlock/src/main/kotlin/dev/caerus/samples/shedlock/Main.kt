// Three "instances" of an application, each with its own DLS client, ShedLock executor and
// scheduler, fire the task `report` every 2 s; DlsLockProvider (oncePer 6 s) runs it once per
// 6-second slot of the cluster's clock. Prints each run and checks no slot ran twice.
// With `spring`, each instance is a Spring context with @Scheduled + @SchedulerLock (Spring.kt).
//   mvn -q compile exec:java -Dexec.args="ENDPOINTS [SECONDS [spring]]"
// ENDPOINTS: comma-separated; without it the SDK reads DLS_ENDPOINTS as every SDK and the CLI do.
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

private val runs = ConcurrentHashMap<Long, MutableList<String>>()

/** Records a run of the task (called by the task on either kind of instance). */
fun ranInSlot(name: String, slot: Long) {
    runs.computeIfAbsent(slot) { CopyOnWriteArrayList() }.add(name)
    println("[$name] RAN the report for slot $slot")
}

fun main(args: Array<String>) {
    // An empty list makes the SDK read DLS_ENDPOINTS. The singular DLS_ENDPOINT, which this
    // sample once read, is refused rather than ignored: ignored, it meant a silent 127.0.0.1:7070.
    val endpoints = args.getOrNull(0)?.split(',')?.map { it.trim() }?.filter { it.isNotEmpty() } ?: emptyList()
    if (endpoints.isEmpty() && System.getenv("DLS_ENDPOINT") != null && System.getenv("DLS_ENDPOINTS") == null) {
        System.err.println("shedlock: DLS_ENDPOINT is not read: set DLS_ENDPOINTS (comma-separated), as for every SDK and the CLI")
        exitProcess(2)
    }
    val seconds = args.getOrNull(1)?.toLong() ?: 20
    val spring = args.getOrNull(2) == "spring"
    val names = listOf("instance-a", "instance-b", "instance-c")
    val stops: List<() -> Unit> = if (spring) {
        names.map { name -> startSpringInstance(name, endpoints).let { ctx -> { ctx.close() } } }
    } else {
        names.map { name ->
            val client = dlsClient(*endpoints.toTypedArray())
            // What a Spring app declares as a @Bean LockProvider (the `spring` mode does).
            val executor = DefaultLockingTaskExecutor(DlsLockProvider(client, "samples", oncePer = Duration.ofSeconds(6)))
            val scheduler = Executors.newSingleThreadScheduledExecutor()
            scheduler.scheduleAtFixedRate({
                val config = LockConfiguration(Instant.now(), "report", Duration.ofMinutes(1), Duration.ZERO)
                executor.executeWithLock(Runnable { ranInSlot(name, DlsLockProvider.currentClaim()!!.slot.toLong()) }, config)
            }, 0, 2, TimeUnit.SECONDS)
            val stop: () -> Unit = { scheduler.shutdown(); scheduler.awaitTermination(10, TimeUnit.SECONDS) }
            stop
        }
    }
    val how = if (spring) "Spring @Scheduled + @SchedulerLock" else "ShedLock"
    println("[sample] 3 instances, $how every 2 s, DlsLockProvider once per 6 s slot; running $seconds s")
    Thread.sleep(seconds * 1000)
    stops.forEach { it() }
    val twice = runs.filterValues { it.size > 1 }
    val ok = runs.size >= 2 && twice.isEmpty()
    println("[sample] ${runs.values.sumOf { it.size }} runs in ${runs.size} slots, slots run more than once: ${twice.ifEmpty { "none" }} -> ${if (ok) "PASS" else "FAIL"}")
    exitProcess(if (ok) 0 else 1)
}
