package dev.caerus.dls

/**
 * A minimal JSON reader for conformance/scenarios.json, so the suite needs no JSON library
 * from Maven: objects become `Map<String, Any?>`, arrays `List<Any?>`, integers `Long`,
 * other numbers `Double`. Escapes (`\n`, `\u0007`, `\u0000`) become the control characters
 * the scenarios mean to send.
 */
internal class ConformanceJson private constructor(private val s: String) {
    private var i = 0

    companion object {
        fun parse(text: String): Any? {
            val p = ConformanceJson(text)
            val v = p.value()
            p.ws()
            require(p.i == text.length) { "trailing characters at offset ${p.i}" }
            return v
        }
    }

    private fun ws() {
        while (i < s.length && s[i].isWhitespace()) i++
    }

    private fun fail(what: String): Nothing = throw IllegalArgumentException("JSON: $what at offset $i")

    private fun value(): Any? {
        ws()
        if (i >= s.length) fail("unexpected end")
        return when (s[i]) {
            '{' -> obj()
            '[' -> arr()
            '"' -> str()
            't' -> word("true", true)
            'f' -> word("false", false)
            'n' -> word("null", null)
            else -> num()
        }
    }

    private fun word(w: String, v: Any?): Any? {
        if (!s.startsWith(w, i)) fail("expected $w")
        i += w.length
        return v
    }

    private fun obj(): Map<String, Any?> {
        val out = LinkedHashMap<String, Any?>()
        i++
        ws()
        if (s[i] == '}') return out.also { i++ }
        while (true) {
            ws()
            val k = str()
            ws()
            if (s[i++] != ':') fail("expected ':'")
            out[k] = value()
            ws()
            when (s[i++]) {
                ',' -> continue
                '}' -> return out
                else -> fail("expected ',' or '}'")
            }
        }
    }

    private fun arr(): List<Any?> {
        val out = ArrayList<Any?>()
        i++
        ws()
        if (s[i] == ']') return out.also { i++ }
        while (true) {
            out.add(value())
            ws()
            when (s[i++]) {
                ',' -> continue
                ']' -> return out
                else -> fail("expected ',' or ']'")
            }
        }
    }

    private fun str(): String {
        if (s[i] != '"') fail("expected a string")
        i++
        val b = StringBuilder()
        while (true) {
            if (i >= s.length) fail("unterminated string")
            val c = s[i++]
            when (c) {
                '"' -> return b.toString()
                '\\' -> {
                    val e = s[i++]
                    when (e) {
                        'n' -> b.append('\n')
                        't' -> b.append('\t')
                        'r' -> b.append('\r')
                        'b' -> b.append('\b')
                        'f' -> b.append('\u000c')
                        'u' -> {
                            b.append(s.substring(i, i + 4).toInt(16).toChar())
                            i += 4
                        }
                        else -> b.append(e) // '"', '\\', '/'
                    }
                }
                else -> b.append(c)
            }
        }
    }

    private fun num(): Any {
        val start = i
        while (i < s.length && (s[i].isDigit() || s[i] in "+-.eE")) i++
        val t = s.substring(start, i)
        if (t.isEmpty()) fail("unexpected character")
        return t.toLongOrNull() ?: t.toDouble()
    }
}
