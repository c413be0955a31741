'use strict';
// Trace context through the SDK against a real dls exporting spans to a collector the test
// runs: an explicit `traceparent`, and the active OpenTelemetry span's context
// (`@opentelemetry/api`, an optional import of the SDK).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { randomUUID } = require('node:crypto');
const otel = require('@opentelemetry/api');
const { Dls } = require('@caerus-dev/sdk');
const { startServer, sleep } = require('./helpers');

const exports_ = [];
let collector;
let server;
let dls;

before(async () => {
  collector = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      exports_.push(JSON.parse(Buffer.concat(chunks).toString()));
      res.end('{}');
    });
  });
  await new Promise((r) => collector.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${collector.address().port}`;
  server = await startServer({ args: ['--otlp-endpoint', url] });
  dls = new Dls.DlsClient({ endpoints: [server.endpoint] });
});

after(async () => {
  await server?.stop();
  collector?.close();
});

function spanNames(traceId) {
  const names = new Set();
  for (const e of exports_) {
    for (const rs of e.resourceSpans) for (const ss of rs.scopeSpans) for (const s of ss.spans) {
      if (s.traceId === traceId) names.add(s.name);
    }
  }
  return names;
}

async function waitForSpans(traceId) {
  const wanted = ['dls.lock.wait', 'dls.lock.grant', 'dls.lock.release'];
  const deadline = Date.now() + 30_000;
  while (!wanted.every((n) => spanNames(traceId).has(n))) {
    if (Date.now() > deadline) throw new Error(`spans of ${traceId}: ${[...spanNames(traceId)]}`);
    await sleep(50);
  }
}

const newTrace = () => randomUUID().replaceAll('-', '');

test('an explicit traceparent puts the lock in that trace', async () => {
  const trace = newTrace();
  await dls.withTransaction(async (tx) => {
    await tx.acquireLock('node-traced', trace, 'EXCLUSIVE', { traceparent: `00-${trace}-00f067aa0ba902b7-01`, tracestate: 'n=1' });
  }, { timeoutMs: 10_000 });
  await waitForSpans(trace);
});

test('a malformed traceparent is ignored', async () => {
  await dls.withTransaction(async (tx) => {
    const lock = await tx.acquireLock('node-traced', newTrace(), 'EXCLUSIVE', { traceparent: '00-nonsense-01' });
    assert.ok(lock.fencingToken > 0n);
  }, { timeoutMs: 10_000 });
});

test('the active OpenTelemetry span is sent when @opentelemetry/api is installed', async () => {
  // A minimal context manager: the API's default one has no active context at all.
  let active = otel.ROOT_CONTEXT;
  otel.context.setGlobalContextManager({
    active: () => active,
    with(ctx, fn, thisArg, ...args) {
      const before = active;
      active = ctx;
      try {
        return fn.call(thisArg, ...args);
      } finally {
        active = before;
      }
    },
    bind: (_ctx, target) => target,
    enable() { return this; },
    disable() { return this; },
  });
  try {
    const trace = newTrace();
    const span = otel.trace.wrapSpanContext({ traceId: trace, spanId: 'b7ad6b7169203331', traceFlags: otel.TraceFlags.SAMPLED });
    const tx = await dls.beginTransaction({ timeoutMs: 10_000 });
    // acquireLock reads the context when it is called, before its first await.
    const acquired = otel.context.with(otel.trace.setSpan(otel.ROOT_CONTEXT, span), () =>
      tx.acquireLock('node-traced', trace, 'EXCLUSIVE'),
    );
    await acquired;
    await tx.commit();
    await waitForSpans(trace);
  } finally {
    otel.context.disable();
  }
});
