'use strict';
// TLS through the SDK against a real dls whose ports serve TLS and require a client
// certificate; the certificates are made by `dls certs` before the tests.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { promisify } = require('node:util');
const { randomUUID } = require('node:crypto');
const { Dls } = require('@caerus-dev/sdk');
const { startServer, makeCerts } = require('./helpers');

const root = path.join(__dirname, '..');
let certs;
let other;
let server;

before(async () => {
  certs = makeCerts();
  other = makeCerts();
  server = await startServer({ certs });
});

after(async () => {
  await server?.stop();
  certs?.remove();
  other?.remove();
});

const ns = () => `node-tls-${randomUUID().slice(0, 8)}`;

async function takeALock(client) {
  return client.withTransaction(async (tx) => {
    const lock = await tx.acquireLock(ns(), 'k', 'EXCLUSIVE', { timeoutMs: 5000 });
    return lock.fencingToken;
  });
}

test('https with the CA file and a client certificate takes locks', async () => {
  const client = new Dls.DlsClient({
    endpoints: [`https://${server.endpoint}`],
    caFile: certs.ca,
    clientCertFile: certs.clientCert,
    clientKeyFile: certs.clientKey,
  });
  const first = await takeALock(client);
  // A bare host:port means https once a CA file is given.
  const bare = new Dls.DlsClient({
    endpoints: [server.endpoint],
    caFile: certs.ca,
    clientCertFile: certs.clientCert,
    clientKeyFile: certs.clientKey,
  });
  assert.ok((await takeALock(bare)) > first);
});

test('the TLS files can come from DLS_CA_FILE, DLS_CLIENT_CERT_FILE, DLS_CLIENT_KEY_FILE', async () => {
  const vars = { DLS_CA_FILE: certs.ca, DLS_CLIENT_CERT_FILE: certs.clientCert, DLS_CLIENT_KEY_FILE: certs.clientKey };
  Object.assign(process.env, vars);
  let client;
  try {
    client = new Dls.DlsClient({ endpoints: [server.endpoint] });
  } finally {
    for (const name of Object.keys(vars)) delete process.env[name];
  }
  assert.ok((await takeALock(client)) > 0n);
});

const quick = (opts) => new Dls.DlsClient({ retryDeadlineMs: 2000, requestTimeoutMs: 1000, ...opts });

test('no client certificate, another CA, or plain text: UnavailableError naming the setting', async () => {
  await assert.rejects(takeALock(quick({ endpoints: [server.endpoint], caFile: certs.ca })), (e) => {
    assert.ok(e instanceof Dls.UnavailableError, String(e));
    assert.match(e.message, /DLS_CLIENT_CERT_FILE/);
    return true;
  });
  const foreign = quick({
    endpoints: [server.endpoint],
    caFile: other.ca,
    clientCertFile: certs.clientCert,
    clientKeyFile: certs.clientKey,
  });
  await assert.rejects(takeALock(foreign), (e) => {
    assert.ok(e instanceof Dls.UnavailableError, String(e));
    assert.match(e.message, /not signed by a CA this client trusts/);
    return true;
  });
  await assert.rejects(takeALock(quick({ endpoints: [`http://${server.endpoint}`] })), Dls.UnavailableError);
});

test('a certificate without its key, or a missing CA file, is a ConfigError at construction', () => {
  assert.throws(
    () => new Dls.DlsClient({ endpoints: [server.endpoint], clientCertFile: certs.clientCert }),
    (e) => e instanceof Dls.ConfigError && /without its key/.test(e.message),
  );
  const missing = path.join(certs.dir, 'missing-ca.pem');
  assert.throws(
    () => new Dls.DlsClient({ endpoints: [server.endpoint], caFile: missing }),
    (e) => e instanceof Dls.ConfigError && e.message.includes('missing-ca.pem'),
  );
});

test('the TLS options are typed in index.d.ts', async () => {
  const dir = path.join(root, 'test', '.build');
  fs.mkdirSync(dir, { recursive: true });
  const src = path.join(dir, 'tls-options.mts');
  // One tsc run: the documented options compile, and each @ts-expect-error line must fail
  // to (tsc reports an unused directive otherwise).
  fs.writeFileSync(
    src,
    [
      "import { Dls } from '@caerus-dev/sdk';",
      "new Dls.DlsClient({ endpoints: ['https://h:1'], caFile: 'ca.pem', clientCertFile: 'c.pem', clientKeyFile: 'k.pem' });",
      '// @ts-expect-error a number is not a file name',
      'new Dls.DlsClient({ caFile: 5 });',
      '// @ts-expect-error misspelled',
      "new Dls.DlsClient({ cafile: 'ca.pem' });",
      '',
    ].join('\n'),
  );
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const args = [tsc, '--strict', '--noEmit', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--types', 'node', src];
  await promisify(execFile)(process.execPath, args, { cwd: root }).catch((e) => {
    assert.fail(`tsc failed:\n${e.stdout}${e.stderr}`);
  });
});
