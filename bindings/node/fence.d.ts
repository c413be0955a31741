// Types of @caerus-dev/sdk/fence: the resource-side fencing guard (see fence.js).

/** What a query returns: the rows (objects keyed by column) and how many rows it changed. */
export interface QueryResult {
  rows: Record<string, unknown>[];
  rowCount: number | null;
}

/** Runs one statement with positional parameters, in the dialect's placeholders. */
export type Query = (sql: string, params?: unknown[]) => Promise<QueryResult>;

export type Dialect = 'postgres' | 'sqlite';

/** A database as the guard sees it; `pg()` and `sqlJs()` make one, or write your own. */
export interface FenceDb {
  /** Placeholders: `$1` (postgres) or `?` (sqlite). */
  dialect: Dialect;
  /** A statement outside any transaction of the guard's. */
  query: Query;
  /** Runs `fn` in a transaction: commit when it resolves, roll back when it throws. */
  transaction<T>(fn: (query: Query) => Promise<T>): Promise<T>;
}

/** The largest token storage keeps (BIGINT): 2^63 - 1. */
export const MAX_TOKEN: bigint;

export class FenceError extends Error {
  code: string;
}

/** Storage has already accepted a higher token for `resource`: nothing was written. */
export class StaleTokenError extends FenceError {
  code: 'STALE_TOKEN';
  resource: string;
  token: bigint;
  lastToken: bigint;
}

/** Creates the caerus_fence table if it is missing. */
export function install(db: FenceDb): Promise<void>;

/** The check inside your own transaction; throws StaleTokenError when refused. */
export function checkAndAdvance(
  query: Query,
  resource: string,
  token: bigint | number,
  options: { dialect: Dialect },
): Promise<void>;

/** The highest token accepted for `resource`, or null if it was never written. */
export function lastToken(db: FenceDb, resource: string): Promise<bigint | null>;

/** The check, `fn`'s writes and the commit as one transaction; rolls back on any error. */
export function fencedWrite<T>(
  db: FenceDb,
  resource: string,
  token: bigint | number,
  fn: (query: Query) => Promise<T> | T,
): Promise<T>;

/** node-postgres: a pg.Pool (a client per transaction) or a pg.Client (transactions take turns). */
export function pg(poolOrClient: {
  query(text: string, values?: unknown[]): Promise<QueryResult>;
}): FenceDb;

/** A sql.js Database (in-memory SQLite); transactions take turns. */
export function sqlJs(database: unknown): FenceDb;

export const adapters: { pg: typeof pg; sqlJs: typeof sqlJs };

declare const fence: {
  MAX_TOKEN: typeof MAX_TOKEN;
  FenceError: typeof FenceError;
  StaleTokenError: typeof StaleTokenError;
  install: typeof install;
  checkAndAdvance: typeof checkAndAdvance;
  lastToken: typeof lastToken;
  fencedWrite: typeof fencedWrite;
  adapters: typeof adapters;
  pg: typeof pg;
  sqlJs: typeof sqlJs;
};
export default fence;
