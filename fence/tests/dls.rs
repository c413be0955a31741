//! End to end: fencing tokens from a real `dls` node guard a SQLite table. A holder whose
//! transaction ended (here by its maximum duration, as a stalled process's lease would)
//! writes after the next holder did, and the storage refuses it.

use caerus_core::{ClientConfig, DlsClient, LockMode};
use caerus_fence::{sqlite, StaleToken};
use caerus_testkit::{opts, wait, Cluster};
use rusqlite::Connection;

fn charge(conn: &mut Connection, token: u64, who: &str) -> Result<(), caerus_fence::Error<rusqlite::Error>> {
    sqlite::fenced_write(conn, "billing/2024-05", token, |tx| {
        tx.execute("INSERT INTO charges (cycle, worker, token) VALUES ('2024-05', ?1, ?2)", (who, token as i64))
            .map(|_| ())
    })
}

#[tokio::test]
async fn a_late_write_of_an_earlier_holder_is_refused() {
    let cluster = Cluster::start(1).await;
    let client = DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut db = Connection::open(dir.path().join("billing.db")).unwrap();
    db.execute("CREATE TABLE charges (cycle TEXT, worker TEXT, token INTEGER)", []).unwrap();
    sqlite::install(&db).unwrap();

    // The first holder: a transaction the server ends after 1 s, heartbeats or not.
    let first = client.begin_transaction(opts(10_000).with_max_duration_ms(1_000)).await.unwrap();
    let a = first.acquire_lock("billing-jobs", "monthly", LockMode::Exclusive, wait(1_000)).await.unwrap();
    charge(&mut db, a.fencing_token, "a").unwrap();

    // The second holder queues behind it and gets the lock, with a higher token, when the
    // first one's time is up.
    let second = client.begin_transaction(opts(10_000)).await.unwrap();
    let b = second.acquire_lock("billing-jobs", "monthly", LockMode::Exclusive, wait(10_000)).await.unwrap();
    assert!(b.fencing_token > a.fencing_token);
    charge(&mut db, b.fencing_token, "b").unwrap();

    // The first holder, unaware, writes again with its old token: refused, nothing written.
    let err = charge(&mut db, a.fencing_token, "a (late)").unwrap_err();
    assert_eq!(
        err.stale(),
        Some(&StaleToken { resource: "billing/2024-05".into(), token: a.fencing_token, last_token: b.fencing_token })
    );
    let workers: Vec<String> = db
        .prepare("SELECT worker FROM charges ORDER BY rowid")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(workers, ["a", "b"]);
    second.commit().await.unwrap();
}
