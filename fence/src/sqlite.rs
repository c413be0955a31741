//! The guard on SQLite through rusqlite (feature `sqlite`).
//!
//! ```no_run
//! use caerus_fence::sqlite;
//! # fn demo(token: u64) -> Result<(), caerus_fence::Error<rusqlite::Error>> {
//! let mut conn = rusqlite::Connection::open("billing.db")?;
//! sqlite::install(&conn)?;
//!
//! // The check and the write in one transaction, committed only if the token is current:
//! sqlite::fenced_write(&mut conn, "billing/2024-05", token, |tx| {
//!     tx.execute("UPDATE cycles SET billed = 1 WHERE cycle = '2024-05'", [])
//! })?;
//!
//! // Or step by step, inside a transaction of your own:
//! let tx = sqlite::begin(&mut conn, "billing/2024-05", token)?;
//! tx.execute("UPDATE cycles SET billed = 1 WHERE cycle = '2024-05'", [])?;
//! tx.commit()?;
//! # Ok(()) }
//! ```
//!
//! SQLite has one writer at a time: a second writer waits for the first to commit (up to
//! the connection's busy timeout, 5 s by default in rusqlite) and then sees its token.
//! [`begin`] and [`fenced_write`] start the transaction IMMEDIATE, so the write lock is
//! taken before the check and a waiting writer never has to upgrade a read snapshot.

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use crate::{stored, token_of, Error, StaleToken};

const CREATE: &str = "CREATE TABLE IF NOT EXISTS caerus_fence (\
    resource TEXT PRIMARY KEY NOT NULL, \
    last_token BIGINT NOT NULL CHECK (last_token > 0))";

// One statement: insert the resource's first token, or raise the stored one if it is not
// higher than ours. A stale token matches neither branch and changes no row.
const ADVANCE: &str = "INSERT INTO caerus_fence (resource, last_token) VALUES (?1, ?2) \
    ON CONFLICT (resource) DO UPDATE SET last_token = excluded.last_token \
    WHERE caerus_fence.last_token <= excluded.last_token";

const LAST: &str = "SELECT last_token FROM caerus_fence WHERE resource = ?1";

/// So that `?` lifts the driver's errors in a function returning the guard's.
impl From<rusqlite::Error> for Error<rusqlite::Error> {
    fn from(e: rusqlite::Error) -> Self {
        Error::Storage(e)
    }
}

/// Creates the `caerus_fence` table if it is missing (idempotent).
pub fn install(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute(CREATE, []).map(|_| ())
}

/// Records `token` for `resource` if no higher token was accepted, inside the caller's
/// transaction (a [`Transaction`] or [`rusqlite::Savepoint`] derefs to the connection).
/// On [`Error::Stale`] nothing was changed; the caller must not commit its write.
pub fn check_and_advance(tx: &Connection, resource: &str, token: u64) -> Result<(), Error<rusqlite::Error>> {
    let value = stored(token)?;
    // In autocommit mode the check would commit on its own, apart from the write.
    if tx.is_autocommit() {
        return Err(Error::NotInTransaction);
    }
    if tx.execute(ADVANCE, params![resource, value])? == 1 {
        return Ok(());
    }
    // Refused: read what beat us (same transaction, so the row cannot change meanwhile).
    let last = last_token(tx, resource)?.unwrap_or(0);
    Err(Error::Stale(StaleToken { resource: resource.to_owned(), token, last_token: last }))
}

/// The highest token accepted for `resource`, `None` if it has never been written.
pub fn last_token(conn: &Connection, resource: &str) -> rusqlite::Result<Option<u64>> {
    conn.query_row(LAST, [resource], |row| row.get::<_, i64>(0)).optional().map(|t| t.map(token_of))
}

/// Starts an IMMEDIATE transaction and runs [`check_and_advance`] in it: write, then
/// commit. Dropping it without commit rolls back the token with the write.
pub fn begin<'c>(
    conn: &'c mut Connection,
    resource: &str,
    token: u64,
) -> Result<Transaction<'c>, Error<rusqlite::Error>> {
    stored::<rusqlite::Error>(token)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    check_and_advance(&tx, resource, token)?;
    Ok(tx)
}

/// The check, `write`, and the commit, as one transaction. Nothing is committed when the
/// token is stale or `write` fails; `write`'s error comes back as [`Error::Storage`].
pub fn fenced_write<T, E>(
    conn: &mut Connection,
    resource: &str,
    token: u64,
    write: impl FnOnce(&Transaction<'_>) -> Result<T, E>,
) -> Result<T, Error<E>>
where
    E: From<rusqlite::Error>,
{
    let tx = begin(conn, resource, token).map_err(|e| e.map_storage(E::from))?;
    let out = write(&tx).map_err(Error::Storage)?;
    tx.commit().map_err(|e| Error::Storage(e.into()))?;
    Ok(out)
}
