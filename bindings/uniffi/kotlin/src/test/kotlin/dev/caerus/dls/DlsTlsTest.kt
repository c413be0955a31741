package dev.caerus.dls

import java.io.File
import java.nio.file.Files
import java.util.UUID
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.assertThrows

/**
 * TLS through the SDK: one real `dls serve` whose client and HTTP ports serve TLS and
 * require a client certificate; the certificates are made by `dls certs` before the tests.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DlsTlsTest {
    private lateinit var bin: String
    private lateinit var dir: File
    private lateinit var cluster: KitCluster
    private lateinit var endpoint: String

    private fun certs(name: String, set: String = "certs"): String = File(dir, "$set/$name").absolutePath
    private val ca get() = certs("ca.pem")
    private val clientCert get() = certs("client-app.pem")
    private val clientKey get() = certs("client-app-key.pem")


    /** Runs `dls ARGS`; returns its exit code (output appended to cli.log). */
    private fun dls(vararg args: String): Int =
        ProcessBuilder(bin, *args).redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.appendTo(File(dir, "cli.log"))).start().waitFor()

    private fun makeCerts(set: String) {
        val d = File(dir, set).absolutePath
        for (args in listOf(listOf("init"), listOf("node", "1", "--host", "127.0.0.1"), listOf("client", "app"))) {
            check(dls("certs", *args.toTypedArray(), "--dir", d) == 0) { File(dir, "cli.log").readText() }
        }
    }

    @BeforeAll
    fun startServer() {
        bin = dlsBin()
        dir = Files.createTempDirectory("dls-kotlin-tls-").toFile()
        makeCerts("certs")
        makeCerts("other")
        cluster = KitCluster(tlsDir = File(dir, "certs"))
        endpoint = cluster.endpoint
    }

    @AfterAll
    fun stopServer() {
        if (::cluster.isInitialized) cluster.close()
        if (::dir.isInitialized) dir.deleteRecursively()
    }

    private fun quick(caFile: String?, cert: String? = null, key: String? = null) = DlsClient(
        ClientConfig(
            endpoints = listOf(endpoint), retryDeadlineMs = 2000u, requestTimeoutMs = 1000u,
            caFile = caFile, clientCertFile = cert, clientKeyFile = key,
        ),
    )

    @Test
    fun `https with the CA file and a client certificate takes a lock`() = runBlocking {
        val ns = "kt-tls-" + UUID.randomUUID().toString().take(8)
        dlsClient("https://$endpoint", caFile = ca, clientCertFile = clientCert, clientKeyFile = clientKey).use { c ->
            val first = c.withTransaction { tx -> tx.acquireLock(ns, "k", timeoutMs = 5000).fencingToken }
            // A bare host:port means https once a CA file is given.
            quick(ca, clientCert, clientKey).use { bare ->
                val second = bare.withTransaction { tx -> tx.acquireLock(ns, "k", timeoutMs = 5000).fencingToken }
                assertTrue(second > first)
            }
        }
    }

    @Test
    fun `no client certificate or another CA is Unavailable and the message names the setting`() {
        quick(ca).use { c ->
            val e = assertThrows<DlsException.Unavailable> {
                runBlocking { c.beginTransaction(TransactionOptions()) }
            }
            assertTrue(e.message!!.contains("DLS_CLIENT_CERT_FILE"), e.message)
        }
        quick(certs("ca.pem", "other"), clientCert, clientKey).use { c ->
            val e = assertThrows<DlsException.Unavailable> {
                runBlocking { c.beginTransaction(TransactionOptions()) }
            }
            assertTrue(e.message!!.contains("not signed by a CA this client trusts"), e.message)
        }
    }

    @Test
    fun `a certificate without its key or a missing CA file is a Config error`() {
        val e = assertThrows<DlsException.Config> { dlsClient(endpoint, clientCertFile = clientCert) }
        assertTrue(e.message!!.contains("without its key"), e.message)
        assertEquals("CONFIG", e.code)
        val missing = assertThrows<DlsException.Config> { dlsClient(endpoint, caFile = certs("missing-ca.pem")) }
        assertTrue(missing.message!!.contains("missing-ca.pem"), missing.message)
    }
}
