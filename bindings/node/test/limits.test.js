'use strict';
// A server limit refuses with ResourceExhaustedError (code RESOURCE_EXHAUSTED), naming the
// limit and its flag, against a real dls started with a deliberately small limit.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Dls } = require('@caerus-dev/sdk');
const { startServer } = require('./helpers');

let server;
let dls;

before(async () => {
  server = await startServer({ args: ['--max-txns-per-api-key', '1'] });
  dls = new Dls.DlsClient({ endpoints: [server.endpoint] });
});

after(async () => {
  await server?.stop();
});

test('a begin over --max-txns-per-api-key is ResourceExhaustedError and changes nothing', async () => {
  const first = await dls.beginTransaction({ timeoutMs: 10000 });
  await assert.rejects(dls.beginTransaction({ timeoutMs: 10000 }), (e) => {
    assert.ok(e instanceof Dls.ResourceExhaustedError, `${e}`);
    assert.ok(e instanceof Dls.DlsError);
    assert.equal(e.code, 'RESOURCE_EXHAUSTED');
    assert.match(e.message, /--max-txns-per-api-key 1/);
    return true;
  });
  // The refused begin took nothing: once the first ends, the next one is accepted.
  await first.commit();
  const second = await dls.beginTransaction({ timeoutMs: 10000 });
  assert.equal(second.id, first.id + 1n);
  await second.commit();
});
