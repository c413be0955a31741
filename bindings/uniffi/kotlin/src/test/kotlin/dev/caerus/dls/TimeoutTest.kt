package dev.caerus.dls

import java.net.InetAddress
import java.net.ServerSocket
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows

/** A wait ends at the caller's timeout when the cluster does not answer. */
class TimeoutTest {
    @Test
    fun `a lock with a 2 s timeout gives up in time on a down endpoint`() {
        // A port nothing listens on (bound, then let go): every connection is refused, as to
        // a killed node.
        val port = ServerSocket(0, 1, InetAddress.getLoopbackAddress()).use { it.localPort }
        DlsClient(ClientConfig(endpoints = listOf("127.0.0.1:$port"))).use { client ->
            val started = System.nanoTime()
            val e = assertThrows<DlsException.Unavailable> {
                runBlocking { client.withLock("jobs", "nightly", timeoutMs = 2000) { _, _ -> } }
            }
            val took = (System.nanoTime() - started) / 1e9
            println("withLock(timeoutMs = 2000) against a down endpoint gave up after %.2f s".format(took))
            assertEquals("UNAVAILABLE", e.code)
            assertTrue(e.message!!.contains("got no answer"), e.message)
            // The requirement is the timeout + 1 s; the slack is for a loaded machine.
            assertTrue(took < 2.0 + 3.0, "took $took s")
        }
    }
}
