package dev.caerus.dls

import java.net.InetAddress
import java.net.ServerSocket
import kotlin.random.Random

/**
 * Test ports come from below Linux's ephemeral range (32768-60999), where outgoing
 * connections take their local ports and could take a picked port before the server binds
 * it; a port is handed out at most once per test JVM (as the Rust test kit does).
 */
private val PORT_RANGE = 20000 until 32768
private val handedOut = mutableSetOf<Int>()

/**
 * `n` distinct loopback ports that were free a moment ago. All are held open before any is
 * let go, and none is handed out twice: two servers (or two nodes of one cluster) told the
 * same port are not what the test meant.
 */
@Synchronized
internal fun freePorts(n: Int): List<Int> {
    val held = mutableListOf<ServerSocket>()
    try {
        var tries = 0
        while (held.size < n && tries++ < 50_000) {
            val port = Random.nextInt(PORT_RANGE.first, PORT_RANGE.last + 1)
            if (port in handedOut) continue
            val socket = runCatching { ServerSocket(port, 1, InetAddress.getLoopbackAddress()) }.getOrNull() ?: continue
            handedOut += port
            held += socket
        }
        check(held.size == n) { "no $n free loopback ports left in $PORT_RANGE" }
        return held.map { it.localPort }
    } finally {
        held.forEach { it.close() }
    }
}
