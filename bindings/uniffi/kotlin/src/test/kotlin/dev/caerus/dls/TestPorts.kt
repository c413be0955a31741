package dev.caerus.dls

import java.net.ServerSocket

/**
 * `n` distinct loopback ports that were free a moment ago. All are held open before any is
 * let go: picked one at a time, the kernel may hand out a port it just freed again, and two
 * servers (or two nodes of one cluster) told the same port are not what the test meant.
 */
internal fun freePorts(n: Int): List<Int> {
    val held = (0 until n).map { ServerSocket(0) }
    try {
        return held.map { it.localPort }
    } finally {
        held.forEach { it.close() }
    }
}
