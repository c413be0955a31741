package dev.caerus.dls

import java.io.File
import java.net.URI
import java.net.http.HttpClient
import java.net.http.HttpRequest
import java.net.http.HttpResponse
import java.time.Duration

/**
 * Waits until the `dls` [server] answers 200 on `/readyz` of its HTTP port [httpPort]; fails
 * with its [log] when it exits first, and after 30 s.
 */
internal fun awaitReady(server: Process, httpPort: Int, log: File) {
    val http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(1)).build()
    val ready = URI("http://127.0.0.1:$httpPort/readyz")
    val deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos()
    while (true) {
        check(server.isAlive) { "dls exited early:\n" + log.readText() }
        val ok = runCatching {
            http.send(HttpRequest.newBuilder(ready).timeout(Duration.ofSeconds(1)).build(),
                HttpResponse.BodyHandlers.discarding()).statusCode() == 200
        }.getOrDefault(false)
        if (ok) return
        check(System.nanoTime() < deadline) { "dls not ready after 30 s" }
        Thread.sleep(100)
    }
}
