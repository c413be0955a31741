'use strict';
// The README example, as written (TypeScript, compiled with tsc against index.d.ts), run
// as its own process against a real server on the example's endpoint 127.0.0.1:7070.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { promisify } = require('node:util');
const { startServer } = require('./helpers');

const run = promisify(execFile);
const root = path.join(__dirname, '..');
const EXAMPLE_ENDPOINT = '127.0.0.1:7070';

let server;
let workDir;

before(async () => {
  // The example names 127.0.0.1:7070; that string is rewritten to the test server's endpoint.
  server = await startServer();
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'caerus-node-example-'));
});

after(async () => {
  await server?.stop();
  if (workDir) fs.rmSync(workDir, { recursive: true, force: true });
});

test('the README example compiles with tsc and runs as written', async () => {
  const buildDir = path.join(root, 'test', '.build');
  fs.mkdirSync(buildDir, { recursive: true });
  const source = fs
    .readFileSync(path.join(__dirname, 'fixtures', 'example.mts'), 'utf8')
    .replace(EXAMPLE_ENDPOINT, server.endpoint);
  const src = path.join(buildDir, 'example.mts');
  fs.writeFileSync(src, source);
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const outDir = path.join(buildDir, 'out');
  const args = [
    tsc, '--strict', '--noEmitOnError', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext',
    '--types', 'node', '--rootDir', root, '--outDir', outDir, src,
  ];
  await run(process.execPath, args, { cwd: root }).catch((e) => {
    assert.fail(`tsc failed:\n${e.stdout}${e.stderr}`);
  });
  const compiled = path.join(outDir, path.relative(root, src)).replace(/\.mts$/, '.mjs');
  const record = path.join(workDir, 'billing.txt');
  const { stdout } = await run(process.execPath, [compiled], {
    cwd: root,
    env: { ...process.env, CAERUS_API_KEY: 'unused-on-an-open-server', BILLING_RECORD: record },
    timeout: 60000,
  });
  const m = /^Lock acquired\. Fencing token: (\d+)n$/m.exec(stdout);
  assert.ok(m, `unexpected output: ${stdout}`);
  // processBilling got the same token, as a bigint.
  assert.equal(fs.readFileSync(record, 'utf8'), `bigint ${m[1]}\n`);
  // The process exited by itself: nothing (heartbeat, promises) keeps the event loop alive.
});
