'use strict';
// The resource-side fencing guard (@caerus-dev/sdk/fence) on real databases: SQLite
// (sql.js) and a throwaway PostgreSQL server through node-postgres (pg), the same checks on
// both; then end to end with fencing tokens from a real dls server.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { randomUUID } = require('node:crypto');
const { promisify } = require('node:util');
const pgDriver = require('pg');
const initSqlJs = require('sql.js');
// Through the package's own name: the "./fence" entry of package.json's exports.
const fence = require('@caerus-dev/sdk/fence');
const { StaleTokenError, MAX_TOKEN } = fence;
const { startServer, startPostgres, eventually } = require('./helpers');

let postgres;
let pools = [];
let SQL;
let tmp;

before(async () => {
  postgres = await startPostgres();
  SQL = await initSqlJs();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'caerus-node-fence-'));
});

after(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await postgres?.stop();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

const DOCS = 'CREATE TABLE IF NOT EXISTS docs (id TEXT PRIMARY KEY, body TEXT NOT NULL)';
const upsert = (db) => {
  const [a, b] = db.dialect === 'postgres' ? ['$1', '$2'] : ['?', '?'];
  return `INSERT INTO docs (id, body) VALUES (${a}, ${b}) ON CONFLICT (id) DO UPDATE SET body = excluded.body`;
};

function newPool() {
  const pool = new pgDriver.Pool({ ...postgres.config, max: 4 });
  pools.push(pool);
  return pool;
}

// Each backend: a fresh database with docs and caerus_fence, and how to "reconnect" to it.
const backends = {
  async postgres() {
    const db = fence.pg(newPool());
    await db.query(DOCS, []);
    await fence.install(db);
    return { db, reopen: async () => fence.pg(newPool()) };
  },
  async sqlite() {
    const file = path.join(tmp, `${randomUUID()}.sqlite`);
    const database = new SQL.Database();
    const db = fence.sqlJs(database);
    await db.query(DOCS, []);
    await fence.install(db);
    // sql.js lives in memory: "reconnecting" is saving the file and opening it again.
    const reopen = async () => {
      fs.writeFileSync(file, database.export());
      return fence.sqlJs(new SQL.Database(fs.readFileSync(file)));
    };
    return { db, reopen };
  },
};

const rid = () => `doc-${randomUUID().slice(0, 8)}`;
const put = (db, id, token, body) => fence.fencedWrite(db, id, token, (q) => q(upsert(db), [id, body]));
async function body(db, id) {
  const { rows } = await db.query(`SELECT body FROM docs WHERE id = ${db.dialect === 'postgres' ? '$1' : '?'}`, [id]);
  return rows.length ? rows[0].body : null;
}

/**
 * Whether a second writer waits for the transaction of backend `holder` (PostgreSQL: it is
 * among the blockers of some backend); on sql.js, whether its call was made (it then waits
 * in the adapter's line for the one connection).
 */
async function waitsFor(db, holder, called) {
  if (!called) return false;
  if (db.dialect !== 'postgres') return true;
  const { rows } = await db.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [holder]);
  return rows[0].n > 0;
}

for (const [name, open] of Object.entries(backends)) {
  test(`${name}: fresh and equal tokens write, a lower one is refused and changes nothing`, async () => {
    const { db } = await open();
    await fence.install(db); // idempotent
    const [a, b] = [rid(), rid()];
    await put(db, a, 7n, 'first');
    await put(db, a, 7n, 'same holder again');
    assert.equal(await body(db, a), 'same holder again');

    const refused = await put(db, a, 6n, 'stale').then(
      () => assert.fail('a lower token was accepted'),
      (e) => e,
    );
    assert.ok(refused instanceof StaleTokenError, refused);
    assert.deepEqual([refused.code, refused.resource, refused.token, refused.lastToken], ['STALE_TOKEN', a, 6n, 7n]);
    assert.match(refused.message, /stale fencing token 6 .*token 7/);
    assert.equal(await body(db, a), 'same holder again', 'a refused write changes nothing');

    // Resources are independent; numbers that are safe integers work as tokens too.
    await put(db, b, 1, 'other');
    assert.deepEqual([await fence.lastToken(db, a), await fence.lastToken(db, b), await fence.lastToken(db, rid())], [7n, 1n, null]);
    await put(db, a, 8n, 'next holder');
    assert.equal(await body(db, a), 'next holder');
  });

  test(`${name}: the last token survives a reconnect`, async () => {
    const { db, reopen } = await open();
    const a = rid();
    await put(db, a, 10n, 'kept');
    const again = await reopen();
    assert.equal(await fence.lastToken(again, a), 10n);
    await assert.rejects(put(again, a, 9n, 'late'), StaleTokenError);
    assert.equal(await body(again, a), 'kept');
  });

  test(`${name}: a failing write rolls back its token; bad tokens never reach storage`, async () => {
    const { db } = await open();
    const a = rid();
    await assert.rejects(
      fence.fencedWrite(db, a, 3n, async (q) => {
        await q(upsert(db), [a, 'x']);
        await q('INSERT INTO no_such_table VALUES (1)', []);
      }),
      /no_such_table|no such table/,
    );
    assert.equal(await fence.lastToken(db, a), null);
    assert.equal(await body(db, a), null);

    for (const bad of [0n, -1n, MAX_TOKEN + 1n, 0]) await assert.rejects(put(db, a, bad, 'x'), RangeError);
    for (const bad of ['5', 1.5, undefined, 2 ** 53]) await assert.rejects(put(db, a, bad, 'x'), TypeError);
    await put(db, a, MAX_TOKEN, 'the largest BIGINT');
    assert.equal(await fence.lastToken(db, a), MAX_TOKEN);
  });

  // `first` checks and holds its transaction open until `second` waits for it: on another
  // pool connection for PostgreSQL, blocked on the fence row (pg_blocking_pids shows it);
  // in line behind it on the one sql.js connection, as soon as its call is made.
  async function race(db, id, first, second) {
    let checked;
    const isChecked = new Promise((r) => (checked = r));
    let secondCalled = false;
    const a = fence.fencedWrite(db, id, first, async (q) => {
      const holder = db.dialect === 'postgres' ? (await q('SELECT pg_backend_pid() AS pid', [])).rows[0].pid : null;
      checked();
      await eventually('the other writer waits for this transaction', () => waitsFor(db, holder, secondCalled));
      await q(upsert(db), [id, String(first)]);
    });
    const b = isChecked.then(() => {
      const written = put(db, id, second, String(second));
      secondCalled = true;
      return written;
    });
    return Promise.allSettled([a, b]);
  }

  test(`${name}: racing writers end with the higher token's data`, async () => {
    const { db } = await open();
    for (const existing of [false, true]) {
      const a = rid();
      if (existing) await put(db, a, 1n, '1');
      const [six, five] = await race(db, a, 6n, 5n);
      assert.equal(six.status, 'fulfilled', six.reason);
      assert.ok(five.reason instanceof StaleTokenError && five.reason.lastToken === 6n, five.reason);
      assert.equal(await body(db, a), '6');
    }
    const c = rid();
    const [five, six] = await race(db, c, 5n, 6n);
    assert.deepEqual([five.status, six.status], ['fulfilled', 'fulfilled']);
    assert.equal(await body(db, c), '6');

    // Started together: 6's data stays, and 5 is refused if it came second.
    for (let i = 0; i < 5; i++) {
      const d = rid();
      const [r5, r6] = await Promise.allSettled([put(db, d, 5n, '5'), put(db, d, 6n, '6')]);
      assert.equal(r6.status, 'fulfilled', r6.reason);
      assert.ok(r5.status === 'fulfilled' || r5.reason instanceof StaleTokenError, r5.reason);
      assert.equal(await body(db, d), '6');
    }
  });
}

test('postgres: a single pg.Client takes transactions in turn', async () => {
  const client = new pgDriver.Client(postgres.config);
  await client.connect();
  try {
    const db = fence.pg(client);
    await db.query(DOCS, []);
    await fence.install(db);
    const a = rid();
    const [r5, r6] = await Promise.allSettled([put(db, a, 5n, '5'), put(db, a, 6n, '6'), put(db, a, 6n, '6 again')]);
    assert.deepEqual([r5.status, r6.status], ['fulfilled', 'fulfilled']);
    assert.equal(await body(db, a), '6 again');
    await assert.rejects(put(db, a, 5n, 'late'), StaleTokenError);
  } finally {
    await client.end();
  }
});

test('the ES module entry has the same objects', async () => {
  const esm = await import('@caerus-dev/sdk/fence');
  assert.equal(esm.StaleTokenError, StaleTokenError);
  assert.equal(esm.default.fencedWrite, fence.fencedWrite);
});

test('the TypeScript declarations type-check a typical use (tsc --strict)', async () => {
  const root = path.join(__dirname, '..');
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const args = ['--strict', '--noEmit', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext'];
  const src = path.join(__dirname, 'fixtures', 'fence-types.mts');
  await promisify(execFile)(process.execPath, [tsc, ...args, '--types', 'node', src], { cwd: root }).catch((e) =>
    assert.fail(`tsc failed:\n${e.stdout}${e.stderr}`),
  );
});

test('end to end: a late write of an earlier lock holder is refused', async () => {
  const { Dls } = require('..');
  const server = await startServer();
  try {
    const dls = new Dls.DlsClient({ endpoints: [server.endpoint] });
    const db = fence.pg(newPool());
    await db.query('CREATE TABLE IF NOT EXISTS charges (cycle TEXT, worker TEXT, token BIGINT, at SERIAL)', []);
    await fence.install(db);
    const ns = `node-fence-${randomUUID().slice(0, 8)}`;
    const charge = (worker, token) =>
      fence.fencedWrite(db, `${ns}/2024-05`, token, (q) =>
        q("INSERT INTO charges (cycle, worker, token) VALUES ('2024-05', $1, $2)", [worker, token.toString()]),
      );

    // The first holder: the server ends its transaction after 1 s, heartbeats or not (as a
    // stalled process's lease would end).
    const first = await dls.beginTransaction({ timeoutMs: 10_000, maxDurationMs: 1_000 });
    const a = await first.acquireLock(ns, 'monthly', 'EXCLUSIVE', { timeoutMs: 1_000 });
    await charge('a', a.fencingToken);

    const late = await dls.withLock(
      ns,
      'monthly',
      async (b) => {
        assert.ok(b.fencingToken > a.fencingToken);
        await charge('b', b.fencingToken);
        // The first holder, unaware its lock is gone, writes again with its old token.
        return charge('a (late)', a.fencingToken).catch((e) => e);
      },
      { timeoutMs: 10_000 },
    );
    assert.ok(late instanceof StaleTokenError, late);
    assert.equal(late.token, a.fencingToken);
    const { rows } = await db.query('SELECT worker FROM charges ORDER BY at', []);
    assert.deepEqual(
      rows.map((r) => r.worker),
      ['a', 'b'],
    );
  } finally {
    await server.stop();
  }
});
