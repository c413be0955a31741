// Latency of one cheap call through the Kotlin SDK (uniffi), for the binding-overhead table
// of bench/sdk/overhead.sh: begins a transaction, then calls transactionStatus on it
// sequentially from one coroutine (WARMUP untimed calls, then CALLS timed ones) and prints
// one JSON line.
//   mvn -q compile exec:java -Dexec.args="ENDPOINTS [CALLS [WARMUP]]"
package dev.caerus.bench

import dev.caerus.dls.TransactionOptions
import dev.caerus.dls.dlsClient
import kotlinx.coroutines.runBlocking
import kotlin.math.ceil

fun main(args: Array<String>) {
    if (args.firstOrNull() in setOf("-h", "--help")) {
        println("usage: call-overhead [ENDPOINTS [CALLS [WARMUP]]]  (default 127.0.0.1:7070 5000 1000)")
        return
    }
    val endpoints = (args.getOrNull(0) ?: "127.0.0.1:7070").split(',').filter { it.isNotBlank() }
    val calls = args.getOrNull(1)?.toInt() ?: 5000
    val warmup = args.getOrNull(2)?.toInt() ?: 1000
    val ns = LongArray(calls)
    runBlocking {
        dlsClient(*endpoints.toTypedArray()).use { client ->
            val tx = client.beginTransaction(TransactionOptions())
            val id = tx.id()
            repeat(warmup) { client.transactionStatus(id) }
            for (i in 0 until calls) {
                val t0 = System.nanoTime()
                client.transactionStatus(id)
                ns[i] = System.nanoTime() - t0
            }
            tx.abort()
            tx.close()
        }
    }
    ns.sort()
    fun pct(p: Double): Double {
        val i = (ceil(p * ns.size).toInt()).coerceIn(1, ns.size) - 1
        return Math.round(ns[i] / 100.0) / 10.0
    }
    println(
        """{"language": "kotlin", "api": "dev.caerus:caerus-dls (suspend, runBlocking)", "call": "transaction_status", """ +
            """"calls": $calls, "p50_us": ${pct(0.50)}, "p90_us": ${pct(0.90)}, "p99_us": ${pct(0.99)}}""",
    )
}
