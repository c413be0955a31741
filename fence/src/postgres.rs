//! The guard on PostgreSQL through tokio-postgres (feature `postgres`).
//!
//! ```no_run
//! use caerus_fence::{postgres, Error};
//! # async fn demo(client: &mut tokio_postgres::Client, token: u64) -> Result<(), Error<tokio_postgres::Error>> {
//! postgres::install(client).await?;
//!
//! let tx = postgres::begin(client, "billing/2024-05", token).await?; // Err(Error::Stale(..)) if a later holder wrote
//! tx.execute("UPDATE cycles SET billed = true WHERE cycle = '2024-05'", &[]).await?;
//! tx.commit().await?;
//! # Ok(()) }
//! ```
//!
//! Race-free under the default READ COMMITTED: the check is one `INSERT ... ON CONFLICT DO
//! UPDATE ... WHERE`, which locks the resource's fence row (even when the WHERE refuses)
//! until the transaction ends. A second writer of the same resource waits on that lock and
//! then evaluates the condition against the committed token, so of two racing holders the
//! older token is refused whichever starts first. A brand-new resource is no exception:
//! the second INSERT waits on the first's uncommitted key and then takes the ON CONFLICT
//! branch. Under REPEATABLE READ or SERIALIZABLE the loser gets a serialization failure
//! (an [`Error::Storage`]) instead of [`Error::Stale`]; either way nothing is written.

use tokio_postgres::{Client, GenericClient, Transaction};

use crate::{stored, token_of, Error, StaleToken};

const CREATE: &str = "CREATE TABLE IF NOT EXISTS caerus_fence (\
    resource TEXT PRIMARY KEY, \
    last_token BIGINT NOT NULL CHECK (last_token > 0))";

// Same statement as on SQLite: insert, or raise a stored token that is not higher.
const ADVANCE: &str = "INSERT INTO caerus_fence (resource, last_token) VALUES ($1, $2) \
    ON CONFLICT (resource) DO UPDATE SET last_token = EXCLUDED.last_token \
    WHERE caerus_fence.last_token <= EXCLUDED.last_token";

const LAST: &str = "SELECT last_token FROM caerus_fence WHERE resource = $1";

/// So that `?` lifts the driver's errors in a function returning the guard's.
impl From<tokio_postgres::Error> for Error<tokio_postgres::Error> {
    fn from(e: tokio_postgres::Error) -> Self {
        Error::Storage(e)
    }
}

/// Creates the `caerus_fence` table if it is missing. Run it once (at deploy or start-up):
/// PostgreSQL's `CREATE TABLE IF NOT EXISTS` is not safe against itself in parallel.
pub async fn install(client: &impl GenericClient) -> Result<(), tokio_postgres::Error> {
    client.execute(CREATE, &[]).await.map(|_| ())
}

/// Records `token` for `resource` if no higher token was accepted, inside the caller's
/// transaction; on [`Error::Stale`] nothing changed and the transaction should be dropped
/// (rolled back). Takes a [`Transaction`] so that the check cannot commit on its own.
pub async fn check_and_advance(
    tx: &Transaction<'_>,
    resource: &str,
    token: u64,
) -> Result<(), Error<tokio_postgres::Error>> {
    let value = stored(token)?;
    if tx.execute(ADVANCE, &[&resource, &value]).await? == 1 {
        return Ok(());
    }
    // The refused upsert still locked the row: this read sees the token that beat us.
    let last = last_token(tx, resource).await?.unwrap_or(0);
    Err(Error::Stale(StaleToken { resource: resource.to_owned(), token, last_token: last }))
}

/// The highest token accepted for `resource`, `None` if it has never been written.
pub async fn last_token(client: &impl GenericClient, resource: &str) -> Result<Option<u64>, tokio_postgres::Error> {
    let row = client.query_opt(LAST, &[&resource]).await?;
    Ok(row.map(|r| token_of(r.get(0))))
}

/// Starts a transaction and runs [`check_and_advance`] in it: write, then commit.
/// Dropping it without commit rolls back the token with the write.
pub async fn begin<'c>(
    client: &'c mut Client,
    resource: &str,
    token: u64,
) -> Result<Transaction<'c>, Error<tokio_postgres::Error>> {
    stored::<tokio_postgres::Error>(token)?;
    let tx = client.transaction().await?;
    check_and_advance(&tx, resource, token).await?;
    Ok(tx)
}
