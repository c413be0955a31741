#!/usr/bin/env node
// Latency of one cheap call through @caerus-dev/sdk, for the binding-overhead table of
// bench/sdk/overhead.sh: begins a transaction, then awaits transactionStatus on it in a
// loop (--warmup untimed calls, then --calls timed ones) and prints one JSON line.
// The SDK module is CAERUS_SDK_MODULE (a path) or '@caerus-dev/sdk' from node_modules.
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';

const { values } = parseArgs({
  options: {
    endpoints: { type: 'string', default: '127.0.0.1:7070' },
    calls: { type: 'string', default: '5000' },
    warmup: { type: 'string', default: '1000' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  console.log('usage: call-overhead.mjs [--endpoints H:P,...] [--calls N] [--warmup N]');
  process.exit(0);
}
const mod = await import(process.env.CAERUS_SDK_MODULE ? pathToFileURL(process.env.CAERUS_SDK_MODULE).href : '@caerus-dev/sdk');
const sdk = mod.default ?? mod; // a CommonJS entry imported by path has only a default export
const client = new sdk.DlsClient({ endpoints: values.endpoints.split(',').filter(Boolean) });
const tx = await client.beginTransaction();
for (let i = 0; i < Number(values.warmup); i++) await client.transactionStatus(tx.id);
const calls = Number(values.calls);
const ns = new Array(calls);
for (let i = 0; i < calls; i++) {
  const t0 = process.hrtime.bigint();
  await client.transactionStatus(tx.id);
  ns[i] = Number(process.hrtime.bigint() - t0);
}
await tx.abort();
ns.sort((a, b) => a - b);
const pct = (p) => Math.round(ns[Math.min(Math.max(Math.ceil(p * ns.length), 1), ns.length) - 1] / 100) / 10;
console.log(JSON.stringify({ language: 'node', api: '@caerus-dev/sdk (await in a loop)', call: 'transaction_status', calls, p50_us: pct(0.5), p90_us: pct(0.9), p99_us: pct(0.99) }));
process.exit(0);
