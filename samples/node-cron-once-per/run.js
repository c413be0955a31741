'use strict';
// Three "hosts", each a Node process with node-cron firing the same job every 2 s;
// oncePerSlot (@caerus-dev/sdk/scheduling) runs it once per 6-second slot, decided by the
// cluster's clock. Checks at the end that no slot ran twice and that several slots ran.
//
//   node run.js --dls /path/to/dls            starts its own single-node server
//   node run.js --endpoints 127.0.0.1:7070    against a running cluster
//   node run.js --host NAME                   one host (what the runner starts three of)

const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { parseArgs } = require('node:util');

const HOSTS = ['host-a', 'host-b', 'host-c'];
const { values: args } = parseArgs({
  options: {
    dls: { type: 'string' },
    endpoints: { type: 'string', default: process.env.DLS_ENDPOINTS ?? '127.0.0.1:7070' },
    host: { type: 'string' },
    seconds: { type: 'string', default: '20' },
  },
});

function host(name) {
  const cron = require('node-cron');
  const { oncePerSlot, currentClaim } = require('@caerus-dev/sdk/scheduling');
  const report = () => {
    // The job: whatever must not happen twice in a slot (an email, a payment run, a report).
    const { slot } = currentClaim();
    fs.appendFileSync(process.env.RUNS_FILE, `${slot} ${name}\n`);
    console.log(`[${name}] RAN the report for slot ${slot}`);
  };
  const task = cron.schedule(
    '*/2 * * * * *',
    oncePerSlot(args.endpoints.split(','), 'samples', 'node-cron-report', '6s', report, { name }),
  );
  process.on('SIGTERM', async () => {
    await task.stop();
    process.exit(0);
  });
}

function freePort() {
  return new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

const exited = (p) => new Promise((resolve) => (p.exitCode !== null ? resolve() : p.once('exit', resolve)));

async function runner() {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'caerus-node-cron-'));
  const runsFile = path.join(work, 'runs.log');
  const procs = [];
  try {
    if (args.dls) {
      args.endpoints = `127.0.0.1:${await freePort()}`;
      procs.push(spawn(args.dls, ['serve', '--listen', args.endpoints, '--data-dir', path.join(work, 'dls')], { stdio: 'ignore' }));
      execFileSync(args.dls, ['lock', '--wait-timeout', '5s', '--endpoints', args.endpoints, 'samples', 'ready', '--', 'true'], { timeout: 30_000 });
    }
    for (const name of HOSTS) {
      procs.push(spawn(process.execPath, [__filename, '--host', name, '--endpoints', args.endpoints], {
        env: { ...process.env, RUNS_FILE: runsFile },
        stdio: process.env.VERBOSE ? 'inherit' : 'ignore',
      }));
    }
    console.log(`[sample] ${HOSTS.length} hosts with node-cron, every 2 s, once per 6 s slot; running ${args.seconds} s`);
    await new Promise((resolve) => setTimeout(resolve, Number(args.seconds) * 1000));
  } finally {
    // The hosts first, the server last.
    for (const p of procs.reverse()) {
      p.kill('SIGTERM');
      await exited(p);
    }
  }
  const runs = fs.existsSync(runsFile) ? fs.readFileSync(runsFile, 'utf8').trim().split('\n').filter(Boolean) : [];
  fs.rmSync(work, { recursive: true, force: true });
  const bySlot = new Map();
  for (const [slot, name] of runs.map((l) => l.split(' '))) bySlot.set(slot, [...(bySlot.get(slot) ?? []), name]);
  for (const [slot, names] of [...bySlot].sort()) console.log(`slot ${slot}: ran on ${names.join(', ')}`);
  const twice = [...bySlot].filter(([, names]) => names.length > 1);
  const ok = bySlot.size >= 2 && twice.length === 0;
  console.log(`[sample] ${runs.length} runs in ${bySlot.size} slots, slots run more than once: ${twice.length ? JSON.stringify(twice) : 'none'} -> ${ok ? 'PASS' : 'FAIL'}`);
  process.exitCode = ok ? 0 : 1;
}

if (args.host) host(args.host);
else runner();
