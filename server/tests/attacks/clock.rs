//! Clock steps (issue 38): lock-delay ends and bounded-transaction deadlines are the raft
//! log's own time. A node run on a clock an hour ahead wrote its entries' times an hour
//! ahead; restarted on the right clock it took the wall clock to convert them and showed a
//! 10 s lock-delay as ending "in 59m23s", and its proposals, behind the log's time, never
//! moved it. Now the node runs the log's time on from its last entry by its own monotonic
//! clock: a delay ends when it is due, and so does a maximum duration.
//!
//! Needs libfaketime (Debian `faketime`, installed by `make deps`); skipped with a message
//! without it.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use caerus_core::{AcquireOptions, EndCause, LockMode, TransactionState};

use crate::common::{eventually_async, opts, patient_client, queued, take, Cluster, PATIENCE};

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// A node's environment for a clock `offset` ahead ("+1h"); the monotonic clock is left
/// alone (timers run on it).
fn clock_ahead(offset: &str) -> Vec<(String, OsString)> {
    vec![
        ("LD_PRELOAD".into(), LIBFAKETIME.into()),
        ("FAKETIME".into(), offset.into()),
        ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
        ("FAKETIME_NO_CACHE".into(), "1".into()),
    ]
}

#[tokio::test]
async fn a_node_run_an_hour_ahead_then_on_the_right_clock_ends_delays_and_deadlines_on_time() {
    if !Path::new(LIBFAKETIME).exists() {
        eprintln!("SKIPPED: no {LIBFAKETIME} (apt-get install faketime, or make deps)");
        return;
    }
    let mut cluster = Cluster::new(Default::default()).unwrap();
    cluster.node_mut(1).env = clock_ahead("+1h");
    cluster.start_all().unwrap();
    cluster.wait_for_leader(PATIENCE).await;
    let c = patient_client(cluster.endpoints()).await;
    c.set_lock_delay("ns", Duration::from_secs(3)).await.unwrap();

    // Written an hour ahead: a revoked holder's key (its lease lapses) and a bounded
    // transaction.
    let silent = c.begin_transaction(opts(300)).await.unwrap();
    take(&silent, "k").await;
    silent.abandon();
    let delayed = eventually_async(PATIENCE, "ns/k under its lock-delay", || async {
        let listed = c.list_locks("ns").await.ok()?;
        listed.into_iter().find(|k| k.key == "k")?.delay.filter(|d| d.cause == Some(EndCause::LeaseExpired))
    })
    .await;
    let wall_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    assert!(delayed.until_ms > wall_ms + 3_000_000, "the node's clock was not an hour ahead: {delayed:?}");
    let bounded = c.begin_transaction(opts(60_000).with_max_duration_ms(3_000)).await.unwrap();

    // The right clock from now on.
    cluster.kill(1);
    cluster.node_mut(1).env.clear();
    cluster.start_again(1);
    cluster.wait_for_leader(PATIENCE).await;
    let c = patient_client(cluster.endpoints()).await;
    let shown = c.list_locks("ns").await.unwrap().into_iter().find(|k| k.key == "k").and_then(|k| k.delay);
    if let Some(d) = shown.filter(|d| d.until_ms == delayed.until_ms) {
        assert!(d.remaining_ms <= 3_000, "a 3 s delay shown as lasting {} ms more", d.remaining_ms);
    }
    // Both end after their 3 s (the waits allow 15 s), not in an hour.
    let next = c.begin_transaction(opts(60_000)).await.unwrap();
    let waiting = queued(&next, "k").await;
    let granted = tokio::time::timeout(Duration::from_secs(15), waiting).await;
    assert!(matches!(granted, Ok(Ok(Ok(_)))), "ns/k still under its 3 s delay after 15 s: {granted:?}");
    let ended = eventually_async(Duration::from_secs(15), "the 3 s bounded transaction to end", || async {
        let st = bounded.status().await.ok()?;
        (st.state != TransactionState::Active).then_some(st)
    })
    .await;
    assert!(ended.end_reason.contains("max duration of 3000 ms exceeded"), "{ended:?}");
    let other = c.begin_transaction(opts(10_000)).await.unwrap();
    let try_lock = AcquireOptions::default().with_timeout_ms(0);
    other.acquire_lock("ns", "free", LockMode::Exclusive, try_lock).await.unwrap();
}
