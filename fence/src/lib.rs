//! Resource-side fencing guards for Caerus DLS.
//!
//! A lock alone cannot protect storage: a holder can stall past its lease and write after
//! the lock went to someone else. Every grant carries a fencing token, higher than every
//! earlier one; the storage keeps, per protected resource, the last token it accepted and
//! refuses a write with a lower one. This crate is that check, done by the storage itself:
//!
//! - a table `caerus_fence (resource TEXT PRIMARY KEY, last_token BIGINT NOT NULL)`,
//!   created by `install`;
//! - one conditional statement in the caller's transaction, before its own writes:
//!   `INSERT ... ON CONFLICT (resource) DO UPDATE SET last_token = excluded.last_token
//!   WHERE caerus_fence.last_token <= excluded.last_token`. It changes one row when the
//!   token is new or equal (the same holder writing twice), and none when it is stale;
//!   the guard then reports [`Error::Stale`] and the transaction must not commit.
//!
//! The token check and the data write commit together or not at all, so a stale holder
//! never changes the data, and two holders racing each other are ordered by the
//! database's row lock on the fence row (PostgreSQL under READ COMMITTED re-checks the
//! condition against the committed row; SQLite has one writer at a time).
//!
//! Drivers, one feature each: [`sqlite`] (rusqlite, blocking) and [`postgres`]
//! (tokio-postgres, async).
//!
//! ```no_run
//! # #[cfg(feature = "sqlite")]
//! # fn demo(conn: &mut rusqlite::Connection, token: u64) -> Result<(), caerus_fence::Error<rusqlite::Error>> {
//! caerus_fence::sqlite::install(conn)?;
//! caerus_fence::sqlite::fenced_write(conn, "billing/2024-05", token, |tx| {
//!     tx.execute("INSERT INTO charges (cycle, amount) VALUES ('2024-05', 42)", [])
//! })?;
//! # Ok(()) }
//! ```

use std::fmt;

#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub mod sqlite;

/// The table every guard uses. In PostgreSQL it resolves through `search_path`, so
/// a schema of its own is a `SET search_path` away.
pub const TABLE: &str = "caerus_fence";

/// The largest token storage can keep: the column is a signed 64-bit BIGINT. DLS tokens
/// start at 1 and grow by one per grant, so this is far away; a larger value is refused
/// rather than wrapped into a negative number that every later token would beat.
pub const MAX_TOKEN: u64 = i64::MAX as u64;

/// A write refused because storage has already accepted a higher token for the resource:
/// the lock was granted to someone else after this token was issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleToken {
    pub resource: String,
    /// The token the refused write carried.
    pub token: u64,
    /// The highest token the storage has accepted for `resource`.
    pub last_token: u64,
}

impl fmt::Display for StaleToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stale fencing token {} for {:?}: storage has already accepted token {} (a later lock holder wrote)",
            self.token, self.resource, self.last_token
        )
    }
}

impl std::error::Error for StaleToken {}

/// What a guarded write can fail with. `E` is the storage's error type (the driver's, or
/// the caller's own in `fenced_write`).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error<E> {
    /// The token is older than one the storage accepted: nothing was written.
    Stale(StaleToken),
    /// 0 (never granted) or above [`MAX_TOKEN`] (does not fit BIGINT): nothing was written.
    TokenOutOfRange(u64),
    /// The check ran outside a transaction, so it could not commit together with the write
    /// it protects; open one first (`begin`, `fenced_write`, or the driver's own).
    NotInTransaction,
    /// The storage itself failed, or the caller's write did.
    Storage(E),
}

impl<E> Error<E> {
    /// The refusal, if this is one.
    pub fn stale(&self) -> Option<&StaleToken> {
        match self {
            Error::Stale(s) => Some(s),
            _ => None,
        }
    }

    /// The same error with the storage error mapped, e.g. into the caller's error type.
    pub fn map_storage<F>(self, f: impl FnOnce(E) -> F) -> Error<F> {
        match self {
            Error::Stale(s) => Error::Stale(s),
            Error::TokenOutOfRange(t) => Error::TokenOutOfRange(t),
            Error::NotInTransaction => Error::NotInTransaction,
            Error::Storage(e) => Error::Storage(f(e)),
        }
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Stale(s) => s.fmt(f),
            Error::TokenOutOfRange(t) => {
                write!(
                    f,
                    "fencing token {t} is out of range: tokens are 1..={MAX_TOKEN} (storage keeps them as BIGINT)"
                )
            }
            Error::NotInTransaction => {
                f.write_str("the fencing check must run inside the transaction of the write it protects")
            }
            Error::Storage(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Storage(e) => Some(e),
            _ => None,
        }
    }
}

/// The token as the BIGINT it is stored as, or the refusal of one that cannot be.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))] // used by the drivers
fn stored<E>(token: u64) -> Result<i64, Error<E>> {
    match i64::try_from(token) {
        Ok(t) if t > 0 => Ok(t),
        _ => Err(Error::TokenOutOfRange(token)),
    }
}

/// A stored BIGINT back as a token; the table's CHECK keeps it positive.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
fn token_of(stored: i64) -> u64 {
    u64::try_from(stored).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_outside_bigint_are_refused_not_wrapped() {
        assert_eq!(stored::<()>(1).unwrap(), 1);
        assert_eq!(stored::<()>(MAX_TOKEN).unwrap(), i64::MAX);
        for bad in [0, MAX_TOKEN + 1, u64::MAX] {
            assert!(matches!(stored::<()>(bad), Err(Error::TokenOutOfRange(t)) if t == bad));
        }
    }

    #[test]
    fn a_refusal_names_resource_and_both_tokens() {
        let e: Error<std::io::Error> = Error::Stale(StaleToken { resource: "r/1".into(), token: 5, last_token: 6 });
        let text = e.to_string();
        assert!(text.contains("\"r/1\"") && text.contains("token 5") && text.contains("token 6"), "{text}");
        assert_eq!(e.stale().map(|s| s.last_token), Some(6));
    }
}
