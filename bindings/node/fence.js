'use strict';
// @caerus-dev/sdk/fence: the resource-side fencing guard. Storage keeps, per protected
// resource, the last fencing token it accepted (table caerus_fence) and a write commits
// only if its token is not older, in the same database transaction:
//
//   INSERT INTO caerus_fence (resource, last_token) VALUES (r, t)
//   ON CONFLICT (resource) DO UPDATE SET last_token = excluded.last_token
//   WHERE caerus_fence.last_token <= excluded.last_token
//
// One row changed: a new or equal token (the same holder again), go on. None: a later
// holder wrote first; StaleTokenError, roll back. Pure JavaScript, no native addon: a
// storage service can use it without the DLS client. Drivers plug in as small adapters
// ({ dialect, query, transaction }); pg (node-postgres) and sql.js come with it.

const MAX_TOKEN = 2n ** 63n - 1n; // BIGINT: a larger token is refused, never wrapped

const CREATE =
  'CREATE TABLE IF NOT EXISTS caerus_fence (resource TEXT PRIMARY KEY, last_token BIGINT NOT NULL CHECK (last_token > 0))';
// Tokens travel as decimal strings and are cast in SQL: every driver binds a string, and
// no JavaScript number ever holds a token (they lose precision above 2^53).
const ADVANCE = (p) =>
  `INSERT INTO caerus_fence (resource, last_token) VALUES (${p(1)}, CAST(${p(2)} AS BIGINT)) ` +
  'ON CONFLICT (resource) DO UPDATE SET last_token = excluded.last_token ' +
  'WHERE caerus_fence.last_token <= excluded.last_token';
const LAST = (p) => `SELECT CAST(last_token AS TEXT) AS last_token FROM caerus_fence WHERE resource = ${p(1)}`;

const PLACEHOLDERS = { postgres: (i) => `$${i}`, sqlite: () => '?' };

class FenceError extends Error {
  constructor(message, code) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}

/** Storage has already accepted a higher token for `resource`: nothing was written. */
class StaleTokenError extends FenceError {
  constructor(resource, token, lastToken) {
    super(
      `stale fencing token ${token} for ${JSON.stringify(resource)}: storage has already accepted ` +
        `token ${lastToken} (a later lock holder wrote)`,
      'STALE_TOKEN',
    );
    this.resource = resource;
    this.token = token;
    this.lastToken = lastToken;
  }
}

/** A fencing token as a bigint in 1..=MAX_TOKEN (a bigint, or a safe integer number). */
function toToken(token) {
  if (typeof token === 'number' && Number.isSafeInteger(token)) token = BigInt(token);
  if (typeof token !== 'bigint') {
    throw new TypeError(`fencing token must be a bigint (lock.fencingToken), got ${typeof token}`);
  }
  if (token < 1n || token > MAX_TOKEN) {
    throw new RangeError(`fencing token ${token} is out of range: tokens are 1..=${MAX_TOKEN} (stored as BIGINT)`);
  }
  return token;
}

function placeholders(dialect) {
  const p = PLACEHOLDERS[dialect];
  if (!p) throw new TypeError(`unknown dialect ${JSON.stringify(dialect)}: 'postgres' or 'sqlite'`);
  return p;
}

/**
 * Records `token` for `resource` unless a higher one was accepted, through `query` (the
 * caller's transaction: pass the `query` a `fencedWrite` callback or adapter transaction
 * gets). Throws StaleTokenError when refused; then roll back rather than commit.
 */
async function checkAndAdvance(query, resource, token, { dialect }) {
  const value = toToken(token);
  const p = placeholders(dialect);
  const { rowCount } = await query(ADVANCE(p), [resource, value.toString()]);
  if (rowCount === 1) return;
  // Refused: the upsert locked the row (PostgreSQL) or the transaction holds SQLite's write
  // lock, so this read sees the token that beat ours.
  const { rows } = await query(LAST(p), [resource]);
  throw new StaleTokenError(resource, value, rows.length ? BigInt(rows[0].last_token) : 0n);
}

/** Creates the caerus_fence table if it is missing. Run it once, at deploy or start-up. */
async function install(db) {
  await db.query(CREATE, []);
}

/** The highest token accepted for `resource` (bigint), or null if it was never written. */
async function lastToken(db, resource) {
  const { rows } = await db.query(LAST(placeholders(db.dialect)), [resource]);
  return rows.length ? BigInt(rows[0].last_token) : null;
}

/**
 * One transaction: the check, then `fn(query)` with your writes, then commit. Rolls back
 * and rethrows on any error, StaleTokenError included; resolves to what `fn` returned.
 */
async function fencedWrite(db, resource, token, fn) {
  const value = toToken(token); // before a transaction opens
  return db.transaction(async (query) => {
    await checkAndAdvance(query, resource, value, { dialect: db.dialect });
    return fn(query);
  });
}

/** Runs async functions one at a time: a single connection has one transaction at once. */
function serial() {
  let tail = Promise.resolve();
  return (fn) => {
    const run = tail.then(fn);
    tail = run.catch(() => {});
    return run;
  };
}

/**
 * An adapter for node-postgres. With a pg.Pool, every transaction runs on a client of its
 * own (concurrent writers really race, and PostgreSQL orders them by the fence row's lock);
 * with a single pg.Client, transactions take turns.
 */
function pg(db) {
  const isPool = typeof db.totalCount === 'number';
  const query = (client) => (text, values) => client.query(text, values);
  // `broken` hears of a connection that could not even roll back: the pool must drop it.
  const inTransaction = async (client, fn, broken = () => {}) => {
    await client.query('BEGIN');
    try {
      const out = await fn(query(client));
      await client.query('COMMIT');
      return out;
    } catch (e) {
      await client.query('ROLLBACK').catch(broken);
      throw e;
    }
  };
  if (isPool) {
    return {
      dialect: 'postgres',
      query: query(db),
      async transaction(fn) {
        const client = await db.connect();
        let broken;
        try {
          return await inTransaction(client, fn, (e) => (broken = e));
        } finally {
          client.release(broken);
        }
      },
    };
  }
  const turn = serial();
  return {
    dialect: 'postgres',
    query: (text, values) => turn(() => db.query(text, values)),
    transaction: (fn) => turn(() => inTransaction(db, fn)),
  };
}

/**
 * An adapter for a sql.js Database (SQLite compiled to WebAssembly, in memory: persist it
 * with db.export()). Transactions take turns and start IMMEDIATE; inside one, use the
 * `query` it passes, not the adapter's own (which would wait for the transaction to end).
 */
function sqlJs(db) {
  const turn = serial();
  const run = (sql, params) => {
    const stmt = db.prepare(sql);
    try {
      stmt.bind(params);
      const rows = [];
      while (stmt.step()) rows.push(stmt.getAsObject());
      return { rows, rowCount: db.getRowsModified() };
    } finally {
      stmt.free();
    }
  };
  const query = async (sql, params = []) => run(sql, params);
  return {
    dialect: 'sqlite',
    query: (sql, params) => turn(() => query(sql, params)),
    transaction: (fn) =>
      turn(async () => {
        db.run('BEGIN IMMEDIATE');
        try {
          const out = await fn(query);
          db.run('COMMIT');
          return out;
        } catch (e) {
          // SQLite may have rolled back already (some errors end the transaction).
          try {
            db.run('ROLLBACK');
          } catch {
            // no transaction left to roll back
          }
          throw e;
        }
      }),
  };
}

module.exports = {
  MAX_TOKEN,
  FenceError,
  StaleTokenError,
  install,
  checkAndAdvance,
  lastToken,
  fencedWrite,
  adapters: { pg, sqlJs },
  pg,
  sqlJs,
};
