'use strict';
// API keys kept by the cluster through the SDK (createApiKey, listApiKeys, revokeApiKey)
// against a real dls with a keys file: a created key is usable, and once revoked its calls
// fail with UnauthenticatedError.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Dls } = require('@caerus-dev/sdk');
const { startServer, eventually, requireBin } = require('./helpers');

let server;
let admin;

before(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'caerus-node-keys-'));
  const file = path.join(dir, 'keys.toml');
  const out = execFileSync(requireBin(), ['keys', 'add', '--file', file, '--name', 'admin', '--admin']).toString();
  server = await startServer({ args: ['--api-keys-file', file], probeKey: out.trim() });
  admin = new Dls.DlsClient({ endpoints: [server.endpoint], apiKey: out.trim() });
});

after(async () => {
  await server?.stop();
});

test('a created key works until it is revoked', async () => {
  const secret = await admin.createApiKey('node-worker', { namespacePrefixes: ['node-'] });
  assert.match(secret, /^dls_/);
  const listed = (await admin.listApiKeys()).filter((k) => k.name === 'node-worker');
  assert.equal(listed.length, 1);
  assert.deepEqual([listed[0].namespacePrefixes, listed[0].createdBy], [['node-'], 'admin']);

  const user = new Dls.DlsClient({ endpoints: [server.endpoint], apiKey: secret });
  const txn = await user.beginTransaction({ timeoutMs: 10_000 });
  await txn.acquireLock('node-ns', 'k');
  await txn.commit();

  await admin.revokeApiKey('node-worker');
  await eventually('the revoked key is refused', async () => {
    try {
      await user.beginTransaction({ timeoutMs: 10_000 });
      return false;
    } catch (e) {
      return e instanceof Dls.UnauthenticatedError;
    }
  });
});
