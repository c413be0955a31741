// Takes the lock samples/kotlin-lock exclusively, prints its fencing token, commits.
//   mvn -q compile exec:java -Dexec.args="ENDPOINT [NAMESPACE KEY]"
// ENDPOINT is any node of the cluster (host:port, or https://host:port); DLS_ENDPOINT works too.
package dev.caerus.samples.lock

import dev.caerus.dls.DlsException
import dev.caerus.dls.acquireLock
import dev.caerus.dls.LockMode
import dev.caerus.dls.code
import dev.caerus.dls.dlsClient
import dev.caerus.dls.withTransaction
import kotlinx.coroutines.runBlocking
import kotlin.system.exitProcess

fun main(args: Array<String>) {
    if (args.firstOrNull() in setOf("-h", "--help")) {
        println("usage: kotlin-lock [ENDPOINT [NAMESPACE KEY]]  (default: \$DLS_ENDPOINT or 127.0.0.1:7070, samples kotlin-lock)")
        return
    }
    val endpoint = args.getOrNull(0) ?: System.getenv("DLS_ENDPOINT") ?: "127.0.0.1:7070"
    val namespace = args.getOrNull(1) ?: "samples"
    val key = args.getOrNull(2) ?: "kotlin-lock"
    try {
        runBlocking {
            dlsClient(endpoint).use { client ->
                client.withTransaction(timeoutMs = 15000) { tx ->
                    val lock = tx.acquireLock(namespace, key, LockMode.EXCLUSIVE, timeoutMs = 10000)
                    // Pass the token to the storage you write under the lock, which keeps the highest seen.
                    println("locked $namespace/$key with fencing token ${lock.fencingToken}")
                }
            }
        }
        println("committed: $namespace/$key released")
    } catch (e: DlsException) {
        System.err.println("kotlin-lock: ${e.code}: ${e.message}")
        exitProcess(1)
    }
}
