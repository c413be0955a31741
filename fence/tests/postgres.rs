//! The PostgreSQL guard against a real PostgreSQL server (Debian's, started per test by
//! tests/common): accepted and refused tokens, a reconnect, and racing writers on two
//! connections under the default READ COMMITTED.

mod common;

use std::time::Duration;

use caerus_fence::{postgres, Error, StaleToken, MAX_TOKEN};
use common::Postgres;
use tokio_postgres::Client;

async fn setup(pg: &Postgres) -> Client {
    let client = pg.connect().await;
    client.execute("CREATE TABLE IF NOT EXISTS docs (id TEXT PRIMARY KEY, body TEXT NOT NULL)", &[]).await.unwrap();
    postgres::install(&client).await.unwrap();
    client
}

const UPSERT: &str = "INSERT INTO docs (id, body) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body";

async fn put(client: &mut Client, id: &str, token: u64, body: &str) -> Result<(), Error<tokio_postgres::Error>> {
    let tx = postgres::begin(client, id, token).await?;
    tx.execute(UPSERT, &[&id, &body]).await?;
    Ok(tx.commit().await?)
}

async fn body(client: &Client, id: &str) -> Option<String> {
    client.query_opt("SELECT body FROM docs WHERE id = $1", &[&id]).await.unwrap().map(|r| r.get(0))
}

#[tokio::test]
async fn accepted_refused_and_kept_across_a_reconnect() {
    let pg = Postgres::start();
    let mut c = setup(&pg).await;
    postgres::install(&c).await.unwrap(); // twice: idempotent

    put(&mut c, "a", 7, "first").await.unwrap();
    put(&mut c, "a", 7, "same holder again").await.unwrap();
    assert_eq!(body(&c, "a").await.as_deref(), Some("same holder again"));

    let err = put(&mut c, "a", 6, "stale").await.unwrap_err();
    assert_eq!(err.stale(), Some(&StaleToken { resource: "a".into(), token: 6, last_token: 7 }), "{err}");
    assert_eq!(body(&c, "a").await.as_deref(), Some("same holder again"), "a refused write changes nothing");

    // Resources are independent.
    put(&mut c, "b", 1, "other").await.unwrap();
    assert_eq!(postgres::last_token(&c, "a").await.unwrap(), Some(7));
    assert_eq!(postgres::last_token(&c, "b").await.unwrap(), Some(1));
    assert_eq!(postgres::last_token(&c, "never").await.unwrap(), None);

    for token in [0, MAX_TOKEN + 1, u64::MAX] {
        assert!(matches!(put(&mut c, "a", token, "x").await, Err(Error::TokenOutOfRange(t)) if t == token));
    }
    put(&mut c, "z", MAX_TOKEN, "the largest BIGINT").await.unwrap();
    assert_eq!(postgres::last_token(&c, "z").await.unwrap(), Some(MAX_TOKEN));

    // A write that fails takes its token back with it.
    let tx = postgres::begin(&mut c, "c", 3).await.unwrap();
    assert!(tx.execute("INSERT INTO no_such_table VALUES (1)", &[]).await.is_err());
    drop(tx);
    assert_eq!(postgres::last_token(&c, "c").await.unwrap(), None);

    // A new connection sees what the old one committed, and is held to it.
    drop(c);
    let mut c = pg.connect().await;
    assert_eq!(postgres::last_token(&c, "a").await.unwrap(), Some(7));
    assert!(put(&mut c, "a", 5, "late").await.unwrap_err().stale().is_some());
    put(&mut c, "a", 8, "next holder").await.unwrap();
    assert_eq!(body(&c, "a").await.as_deref(), Some("next holder"));
}

/// `first` checks its token on one connection and keeps the transaction open while
/// `second`, on another, starts its own check; returns both outcomes.
async fn race(
    pg: &Postgres,
    id: &'static str,
    first: u64,
    second: u64,
) -> [Result<(), Error<tokio_postgres::Error>>; 2] {
    let (mut c1, mut c2) = (pg.connect().await, pg.connect().await);
    let (checked, started) = tokio::sync::oneshot::channel();
    let a = tokio::spawn(async move {
        let tx = postgres::begin(&mut c1, id, first).await?;
        checked.send(()).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await; // the other writer waits on the row lock
        tx.execute(UPSERT, &[&id, &first.to_string()]).await?;
        Ok(tx.commit().await?)
    });
    let b = tokio::spawn(async move {
        started.await.unwrap();
        put(&mut c2, id, second, &second.to_string()).await
    });
    [a.await.unwrap(), b.await.unwrap()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writers_on_two_connections_under_read_committed() {
    let pg = Postgres::start();
    let mut c = setup(&pg).await;
    let level: String = c.query_one("SHOW transaction_isolation", &[]).await.unwrap().get(0);
    assert_eq!(level, "read committed");

    // A resource with no fence row yet: the second INSERT waits on the first's key.
    let [six, five] = race(&pg, "new", 6, 5).await;
    six.unwrap();
    assert_eq!(five.unwrap_err().stale(), Some(&StaleToken { resource: "new".into(), token: 5, last_token: 6 }));
    assert_eq!(body(&c, "new").await.as_deref(), Some("6"));

    // An existing row (token 1): the second UPDATE waits on the row lock and re-checks.
    put(&mut c, "old", 1, "1").await.unwrap();
    let [six, five] = race(&pg, "old", 6, 5).await;
    six.unwrap();
    assert_eq!(five.unwrap_err().stale().map(|s| s.last_token), Some(6));
    assert_eq!(body(&c, "old").await.as_deref(), Some("6"));

    // The other order: 5 then 6, both write, 6's data stays.
    let [five, six] = race(&pg, "rev", 5, 6).await;
    five.unwrap();
    six.unwrap();
    assert_eq!(body(&c, "rev").await.as_deref(), Some("6"));

    // Started together, whoever wins: 6's data stays, and 5 is refused if second.
    for round in 0..10 {
        let id: &'static str = Box::leak(format!("free-{round}").into_boxed_str());
        let (mut c5, mut c6) = (pg.connect().await, pg.connect().await);
        let five = tokio::spawn(async move { put(&mut c5, id, 5, "5").await });
        let six = tokio::spawn(async move { put(&mut c6, id, 6, "6").await });
        six.await.unwrap().unwrap();
        if let Err(e) = five.await.unwrap() {
            assert_eq!(e.stale().map(|s| s.last_token), Some(6), "{e:?}");
        }
        assert_eq!(body(&c, id).await.as_deref(), Some("6"));
    }
}
