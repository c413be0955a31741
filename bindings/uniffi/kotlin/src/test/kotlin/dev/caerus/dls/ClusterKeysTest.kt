package dev.caerus.dls

import java.io.File
import java.nio.file.Files
import java.time.Duration
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance

/**
 * API keys kept by the cluster through the SDK (`createApiKey`, `listApiKeys`,
 * `revokeApiKey`) against a real `dls serve` with a keys file holding one admin key: a
 * created key is usable, and once revoked its calls fail with UNAUTHENTICATED.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ClusterKeysTest {
    private lateinit var cluster: KitCluster
    private lateinit var dir: File
    private lateinit var endpoint: String
    private lateinit var adminKey: String

    @BeforeAll
    fun startServer() {
        dir = Files.createTempDirectory("dls-kotlin-keys-").toFile()
        val keys = File(dir, "keys.toml")
        val add = ProcessBuilder(dlsBin(), "keys", "add", "--file", keys.absolutePath, "--name", "admin", "--admin").start()
        adminKey = add.inputStream.bufferedReader().readText().trim()
        check(add.waitFor() == 0 && adminKey.startsWith("dls_")) { "dls keys add failed" }
        cluster = KitCluster(serveFlags = listOf("--api-keys-file", keys.absolutePath), probeKey = adminKey)
        endpoint = cluster.endpoint
    }

    @AfterAll
    fun stopServer() {
        if (::cluster.isInitialized) cluster.close()
        if (::dir.isInitialized) dir.deleteRecursively()
    }

    @Test
    fun `a created key works until it is revoked`() = runBlocking {
        val admin = dlsClient(endpoint, apiKey = adminKey)
        val secret = admin.createApiKey("kt-worker", listOf("kt-"), false, 0uL)
        assertTrue(secret.startsWith("dls_"))
        val listed = admin.listApiKeys().filter { it.name == "kt-worker" }
        assertEquals(listOf(listOf("kt-")), listed.map { it.namespacePrefixes })
        assertEquals("admin", listed.single().createdBy)

        val user = dlsClient(endpoint, apiKey = secret)
        user.withTransaction(timeoutMs = 10000) { tx -> tx.acquireLock("kt-ns", "k", LockMode.EXCLUSIVE, timeoutMs = 5000) }

        admin.revokeApiKey("kt-worker")
        val deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos()
        while (true) {
            val outcome = runCatching {
                user.withTransaction(timeoutMs = 10000) { tx -> tx.acquireLock("kt-ns", "k", LockMode.EXCLUSIVE, timeoutMs = 5000) }
            }.exceptionOrNull()
            if (outcome is DlsException.Unauthenticated) break
            check(System.nanoTime() < deadline) { "the revoked key was still accepted after 30 s: $outcome" }
            delay(50)
        }
        user.close()
        admin.close()
    }
}
