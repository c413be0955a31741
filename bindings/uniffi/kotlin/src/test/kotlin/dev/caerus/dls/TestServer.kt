package dev.caerus.dls

import java.time.Duration
import kotlinx.coroutines.delay

/** Polls [probe] until it returns non-null, which it returns; fails naming [what] after 30 s. */
internal suspend fun <T : Any> eventually(what: String, probe: suspend () -> T?): T {
    val deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos()
    while (true) {
        probe()?.let { return it }
        check(System.nanoTime() < deadline) { "timed out waiting until $what" }
        delay(50)
    }
}

/**
 * True once the transaction named [name] is listed waiting for [ns]/[key] (`listLocks`, an
 * operator call), or once [settled] says its acquire has finished: an acquire granted when
 * it should have waited then fails the caller's next assertion at once instead of timing out
 * in [eventually]. Null otherwise, for [eventually].
 */
internal suspend fun waitsInLine(client: DlsClient, ns: String, key: String, name: String, settled: () -> Boolean): Boolean? {
    if (settled()) return true
    val entry = client.listLocks(ns).firstOrNull { it.namespace == ns && it.key == key }
    return if (entry?.waiters.orEmpty().any { it.transactionName == name }) true else null
}
