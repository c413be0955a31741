// Takes the lock samples/kotlin-lock exclusively, prints its fencing token, commits.
//   mvn -q compile exec:java -Dexec.args="ENDPOINTS [NAMESPACE KEY]"
// ENDPOINTS is any nodes of the cluster, comma-separated (host:port, or https://host:port);
// without it the SDK reads DLS_ENDPOINTS (and CAERUS_API_KEY) as every SDK and the CLI do.
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
        println("usage: kotlin-lock [ENDPOINTS [NAMESPACE KEY]]  (default: \$DLS_ENDPOINTS, comma-separated, or 127.0.0.1:7070; samples kotlin-lock)")
        return
    }
    // An empty list makes the SDK read DLS_ENDPOINTS. The singular DLS_ENDPOINT, which this
    // sample once read, is refused rather than ignored: ignored, it meant a silent 127.0.0.1:7070.
    val endpoints = args.getOrNull(0)?.split(',')?.map { it.trim() }?.filter { it.isNotEmpty() } ?: emptyList()
    if (endpoints.isEmpty() && System.getenv("DLS_ENDPOINT") != null && System.getenv("DLS_ENDPOINTS") == null) {
        System.err.println("kotlin-lock: DLS_ENDPOINT is not read: set DLS_ENDPOINTS (comma-separated), as for every SDK and the CLI")
        exitProcess(2)
    }
    val namespace = args.getOrNull(1) ?: "samples"
    val key = args.getOrNull(2) ?: "kotlin-lock"
    try {
        runBlocking {
            dlsClient(*endpoints.toTypedArray()).use { client ->
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
