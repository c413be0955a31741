'use strict';
// Packaging: `require` and `import` both work and share one set of classes, the types
// check, and another project can `npm install` this folder.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { promisify } = require('node:util');

const run = promisify(execFile);
const root = path.join(__dirname, '..');

test('require works', () => {
  const sdk = require('@caerus-dev/sdk');
  assert.equal(typeof sdk.Dls.DlsClient, 'function');
  assert.equal(sdk.DlsClient, sdk.Dls.DlsClient);
  const e = new sdk.Dls.LockTimeoutError('x');
  assert.ok(e instanceof sdk.DlsError && e instanceof Error);
  assert.equal(e.code, 'LOCK_TIMEOUT');
});

test('import works and yields the same classes as require', async () => {
  const esm = await import('@caerus-dev/sdk');
  const cjs = require('@caerus-dev/sdk');
  assert.equal(esm.Dls, cjs.Dls);
  assert.equal(esm.DlsClient, cjs.Dls.DlsClient);
  assert.equal(esm.default.Dls, cjs.Dls);
});

test('a bad configuration is a ConfigError/InvalidArgumentError, thrown synchronously', () => {
  const { Dls } = require('@caerus-dev/sdk');
  assert.throws(() => new Dls.DlsClient({ endpoints: ['not a valid endpoint ::'] }), Dls.DlsError);
  assert.throws(() => new Dls.DlsClient({ endpoints: ['127.0.0.1:1'], requestTimeoutMs: -5 }), Dls.InvalidArgumentError);
});

test('another project can npm install this folder and use it with require and import', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'caerus-node-consumer-'));
  try {
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
    await run('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts', root], { cwd: dir, timeout: 120000 });
    const cjs = await run(process.execPath, ['-e', "const {Dls}=require('@caerus-dev/sdk'); console.log(typeof Dls.DlsClient)"], { cwd: dir });
    assert.equal(cjs.stdout.trim(), 'function');
    const esm = await run(
      process.execPath,
      ['--input-type=module', '-e', "import {Dls} from '@caerus-dev/sdk'; console.log(typeof new Dls.DlsClient({endpoints:['127.0.0.1:1']}).withTransaction)"],
      { cwd: dir },
    );
    assert.equal(esm.stdout.trim(), 'function');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
