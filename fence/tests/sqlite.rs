//! The SQLite guard against real SQLite database files: what is accepted, what is refused
//! (and leaves the data as it was), what survives a reconnect, and racing writers on two
//! connections.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use caerus_fence::{sqlite, Error, StaleToken, MAX_TOKEN};
use rusqlite::Connection;

fn open(path: &std::path::Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.execute("CREATE TABLE IF NOT EXISTS docs (id TEXT PRIMARY KEY, body TEXT NOT NULL)", []).unwrap();
    sqlite::install(&conn).unwrap();
    conn
}

fn put(conn: &mut Connection, id: &str, token: u64, body: &str) -> Result<(), Error<rusqlite::Error>> {
    sqlite::fenced_write(conn, id, token, |tx| {
        tx.execute("INSERT OR REPLACE INTO docs (id, body) VALUES (?1, ?2)", [id, body]).map(|_| ())
    })
}

fn body(conn: &Connection, id: &str) -> Option<String> {
    conn.query_row("SELECT body FROM docs WHERE id = ?1", [id], |r| r.get(0)).ok()
}

#[test]
fn fresh_and_equal_tokens_write_a_lower_one_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("db.sqlite"));
    sqlite::install(&conn).unwrap(); // twice: idempotent

    put(&mut conn, "a", 7, "first").unwrap();
    assert_eq!(sqlite::last_token(&conn, "a").unwrap(), Some(7));
    put(&mut conn, "a", 7, "same holder again").unwrap();
    assert_eq!(body(&conn, "a").as_deref(), Some("same holder again"));

    let err = put(&mut conn, "a", 6, "stale").unwrap_err();
    assert_eq!(err.stale(), Some(&StaleToken { resource: "a".into(), token: 6, last_token: 7 }), "{err}");
    assert_eq!(body(&conn, "a").as_deref(), Some("same holder again"), "a refused write changes nothing");
    assert_eq!(sqlite::last_token(&conn, "a").unwrap(), Some(7));

    // Resources are independent: a low token is fresh for another resource.
    put(&mut conn, "b", 1, "other").unwrap();
    assert_eq!((sqlite::last_token(&conn, "a").unwrap(), sqlite::last_token(&conn, "b").unwrap()), (Some(7), Some(1)));
    put(&mut conn, "a", 8, "next holder").unwrap();
    assert_eq!(body(&conn, "a").as_deref(), Some("next holder"));
    assert_eq!(sqlite::last_token(&conn, "never").unwrap(), None);
}

#[test]
fn a_failing_write_rolls_back_the_token_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("db.sqlite"));
    let err = sqlite::fenced_write(&mut conn, "a", 3, |tx| {
        tx.execute("INSERT INTO docs (id, body) VALUES ('a', 'x')", [])?;
        tx.execute("INSERT INTO no_such_table VALUES (1)", []).map(|_| ())
    })
    .unwrap_err();
    assert!(matches!(err, Error::Storage(_)), "{err:?}");
    assert_eq!(sqlite::last_token(&conn, "a").unwrap(), None);
    assert_eq!(body(&conn, "a"), None);
}

#[test]
fn out_of_range_tokens_and_checks_outside_a_transaction_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("db.sqlite"));
    for token in [0, MAX_TOKEN + 1, u64::MAX] {
        let err = put(&mut conn, "a", token, "x").unwrap_err();
        assert!(matches!(err, Error::TokenOutOfRange(t) if t == token), "{err:?}");
    }
    put(&mut conn, "a", MAX_TOKEN, "the largest BIGINT").unwrap();
    assert_eq!(sqlite::last_token(&conn, "a").unwrap(), Some(MAX_TOKEN));

    // Autocommit: the check would commit apart from the write it protects.
    let err = sqlite::check_and_advance(&conn, "c", 1).unwrap_err();
    assert!(matches!(err, Error::NotInTransaction), "{err:?}");
    assert_eq!(sqlite::last_token(&conn, "c").unwrap(), None);
    // Inside a transaction of the caller's own: fine.
    let tx = conn.transaction().unwrap();
    sqlite::check_and_advance(&tx, "c", 1).unwrap();
    tx.commit().unwrap();
    assert_eq!(sqlite::last_token(&conn, "c").unwrap(), Some(1));
}

#[test]
fn the_last_token_survives_a_reconnect() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    put(&mut open(&path), "a", 10, "kept").unwrap();
    let mut conn = open(&path);
    assert_eq!(sqlite::last_token(&conn, "a").unwrap(), Some(10));
    assert!(put(&mut conn, "a", 9, "late").unwrap_err().stale().is_some());
    assert_eq!(body(&conn, "a").as_deref(), Some("kept"));
}

/// Holder `first` checks its token and keeps its transaction open a while; `second`, on
/// another connection, starts meanwhile and has to wait for it. Returns both outcomes.
fn race(path: &std::path::Path, id: &'static str, first: u64, second: u64) -> [Result<(), Error<rusqlite::Error>>; 2] {
    let (checked, started) = mpsc::channel();
    let (p1, p2) = (path.to_owned(), path.to_owned());
    let a = thread::spawn(move || {
        let mut conn = open(&p1);
        let tx = sqlite::begin(&mut conn, id, first)?;
        checked.send(()).unwrap();
        thread::sleep(Duration::from_millis(300)); // the other writer is waiting now
        tx.execute("INSERT OR REPLACE INTO docs (id, body) VALUES (?1, ?2)", [id, &first.to_string()])?;
        Ok(tx.commit()?)
    });
    let b = thread::spawn(move || {
        let mut conn = open(&p2);
        started.recv().unwrap();
        put(&mut conn, id, second, &second.to_string())
    });
    [a.join().unwrap(), b.join().unwrap()]
}

#[test]
fn racing_writers_on_two_connections_end_with_the_higher_token() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let conn = open(&path);

    // 6 holds the write lock, 5 waits and then sees 6: refused.
    let [six, five] = race(&path, "r1", 6, 5);
    six.unwrap();
    assert_eq!(five.unwrap_err().stale(), Some(&StaleToken { resource: "r1".into(), token: 5, last_token: 6 }));
    assert_eq!(body(&conn, "r1").as_deref(), Some("6"));

    // 5 first, then 6: both write, 6's data is what stays.
    let [five, six] = race(&path, "r2", 5, 6);
    five.unwrap();
    six.unwrap();
    assert_eq!(body(&conn, "r2").as_deref(), Some("6"));

    // Started together, whoever wins the lock: 6's data stays, and 5 is refused if second.
    for round in 0..10 {
        let id: &'static str = Box::leak(format!("free-{round}").into_boxed_str());
        let writers: Vec<_> = [5u64, 6]
            .into_iter()
            .map(|t| {
                let path = path.clone();
                thread::spawn(move || put(&mut open(&path), id, t, &t.to_string()))
            })
            .collect();
        let [five, six]: [_; 2] =
            writers.into_iter().map(|w| w.join().unwrap()).collect::<Vec<_>>().try_into().unwrap();
        six.unwrap();
        if let Err(e) = five {
            assert_eq!(e.stale().map(|s| s.last_token), Some(6), "{e:?}");
        }
        assert_eq!(body(&conn, id).as_deref(), Some("6"));
    }
}
