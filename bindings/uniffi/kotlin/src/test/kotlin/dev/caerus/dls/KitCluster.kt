package dev.caerus.dls

import java.io.BufferedReader
import java.io.File
import java.util.concurrent.TimeUnit

/** A binary the Makefile passes as -D[property] (or the environment as [env]). */
private fun binary(property: String, env: String): String =
    System.getProperty(property)?.takeIf { it.isNotBlank() } ?: System.getenv(env)?.takeIf { it.isNotBlank() }
        ?: error("pass -D$property=... or $env (make test-kotlin does)")

/** The `dls` binary under test. */
internal fun dlsBin(): String = binary("dls.bin", "DLS_BIN")

/**
 * Nodes run by the test kit's `dls-cluster --control` (-Dkit.bin or KIT_BIN), the one harness
 * of every suite: it starts [nodes] nodes on ports they bind themselves (fast elections, a
 * cluster secret), waits until every node serves and prints their addresses. [serveFlags]
 * go to every `dls serve`; [tlsDir] (made by `dls certs`) makes the client ports serve TLS
 * and require client certificates; [probeKey] is a valid API key when the flags require keys.
 * Its nodes die with it, and it exits when its stdin closes ([close], or this JVM ending).
 */
internal class KitCluster(
    nodes: Int = 1,
    serveFlags: List<String> = emptyList(),
    tlsDir: File? = null,
    probeKey: String? = null,
) : AutoCloseable {
    private val process: Process
    private val out: BufferedReader
    val endpoints: List<String>
    val http: List<String>

    init {
        val args = mutableListOf(binary("kit.bin", "KIT_BIN"), "--dls", dlsBin(), "--nodes", "$nodes", "--fast-elections", "--control")
        tlsDir?.let { args += listOf("--tls", it.absolutePath) }
        probeKey?.let { args += listOf("--probe-key", it) }
        process = ProcessBuilder(args + "--" + serveFlags).redirectError(ProcessBuilder.Redirect.INHERIT).start()
        out = process.inputStream.bufferedReader()
        val env = mutableMapOf<String, String>()
        while ("DLS_DIR" !in env) {
            val line = out.readLine() ?: error("dls-cluster exited (${process.waitFor()}) before its cluster served; see its stderr")
            env[line.substringBefore('=')] = line.substringAfter('=')
        }
        endpoints = env.getValue("DLS_ENDPOINTS").split(",")
        http = env.getValue("DLS_HTTP").split(",")
    }

    /** Node 1's client address (a single node's). */
    val endpoint: String get() = endpoints.first()

    /** Node 1's HTTP address. */
    val httpAddr: String get() = http.first()

    /** Sends one command (`leader`, `kill ID`, `start ID`, ...); returns the value of its `ok` answer. */
    @Synchronized
    fun command(line: String): String {
        process.outputStream.write("$line\n".toByteArray())
        process.outputStream.flush()
        val answer = out.readLine() ?: error("dls-cluster exited during $line")
        check(answer.startsWith("ok")) { "dls-cluster $line: $answer" }
        return answer.removePrefix("ok").trim()
    }

    /** The id of the node that leads now. */
    fun leader(): Int = command("leader").toInt()

    override fun close() {
        if (!process.isAlive) return
        process.outputStream.close()
        if (!process.waitFor(30, TimeUnit.SECONDS)) process.destroyForcibly().waitFor()
    }
}
