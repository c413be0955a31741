"""Trace context through the SDK against a real dls exporting spans to a collector the test
runs: an explicit ``traceparent``, and the current OpenTelemetry span's context when the
``opentelemetry`` API package is installed."""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import List

import pytest

from caerus import DlsClient, sync
from conftest import start_server


class Collector:
    """Records every OTLP/HTTP JSON export POSTed to it."""

    def __init__(self) -> None:
        self.exports: List[dict] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                collector.exports.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def span_names(self, trace_id: str) -> set:
        return {
            span["name"]
            for export in list(self.exports)
            for rs in export["resourceSpans"]
            for ss in rs["scopeSpans"]
            for span in ss["spans"]
            if span["traceId"] == trace_id
        }

    def wait_for(self, trace_id: str, timeout_s: float = 30.0) -> set:
        wanted = {"dls.lock.wait", "dls.lock.grant", "dls.lock.release"}
        deadline = time.monotonic() + timeout_s
        while not wanted <= self.span_names(trace_id):
            if time.monotonic() > deadline:
                raise AssertionError(f"spans of trace {trace_id}: {self.span_names(trace_id)}")
            time.sleep(0.05)
        return self.span_names(trace_id)


@pytest.fixture(scope="module")
def collector():
    c = Collector()
    yield c
    c.httpd.shutdown()


@pytest.fixture(scope="module")
def traced_server(collector):
    s = start_server(["--otlp-endpoint", collector.url])
    yield s
    s.stop()


def new_trace() -> str:
    return uuid.uuid4().hex


async def test_an_explicit_traceparent_puts_the_lock_in_that_trace(traced_server, collector):
    trace = new_trace()
    client = DlsClient(endpoints=[traced_server.endpoint])
    async with client.transaction(timeout_ms=10000) as tx:
        await tx.acquire_lock("py-traced", trace, traceparent=f"00-{trace}-00f067aa0ba902b7-01", tracestate="py=1")
    collector.wait_for(trace)


def test_the_blocking_api_passes_the_traceparent_too(traced_server, collector):
    trace = new_trace()
    client = sync.DlsClient(endpoints=[traced_server.endpoint])
    with client.transaction(timeout_ms=10000) as tx:
        tx.acquire_lock("py-traced", trace, traceparent=f"00-{trace}-00f067aa0ba902b7-01")
    collector.wait_for(trace)


async def test_a_malformed_traceparent_is_ignored(traced_server):
    client = DlsClient(endpoints=[traced_server.endpoint])
    async with client.transaction(timeout_ms=10000) as tx:
        lock = await tx.acquire_lock("py-traced", new_trace(), traceparent="00-nonsense-01")
        assert lock.fencing_token > 0


async def test_the_current_opentelemetry_span_is_sent_when_the_package_is_installed(traced_server, collector):
    trace_api = pytest.importorskip("opentelemetry.trace")
    context_api = pytest.importorskip("opentelemetry.context")
    trace = new_trace()
    span = trace_api.NonRecordingSpan(
        trace_api.SpanContext(
            trace_id=int(trace, 16),
            span_id=0x00F067AA0BA902B7,
            is_remote=False,
            trace_flags=trace_api.TraceFlags(trace_api.TraceFlags.SAMPLED),
        )
    )
    token = context_api.attach(trace_api.set_span_in_context(span))
    try:
        client = DlsClient(endpoints=[traced_server.endpoint])
        async with client.transaction(timeout_ms=10000) as tx:
            await tx.acquire_lock("py-traced", trace)
    finally:
        context_api.detach(token)
    collector.wait_for(trace)
