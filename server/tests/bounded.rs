//! Bounded transactions (`max_duration_ms` at begin): the server ends them when the time is
//! up although heartbeats continue, on one node, across a leader change (the deadline is
//! not restarted) and across a restart from a snapshot file (the deadline is in it).

use crate::common;

use std::time::{Duration, Instant};

use caerus_core::{ClientConfig, DlsClient, EndCause, Error, LockMode, LostKind, TransactionState};
use common::{eventually_async, opts, patient_client, take, wait, Cluster, PATIENCE};

/// Waits until transaction `id` ended by its maximum duration.
async fn ended_by_max_duration(c: &DlsClient, id: u64) {
    eventually_async(PATIENCE, "the transaction ended by its maximum duration", || async move {
        let st = c.transaction_status(id).await.ok()?;
        (st.state == TransactionState::Expired && st.end_cause == Some(EndCause::MaxDurationExceeded)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_bounded_transaction_ends_on_time_although_it_heartbeats() {
    let cluster = Cluster::start(1).await;
    let c = DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key()).await.unwrap();
    let started = Instant::now();
    let tx = c.begin_transaction(opts(10_000).with_max_duration_ms(1_500)).await.unwrap();
    let held = take(&tx, "k").await;
    // The client heartbeats every ~3 s of a 10 s lease; the bound ends it first.
    let reason = tokio::time::timeout(PATIENCE, tx.lost()).await.expect("lost within the patience");
    let after = started.elapsed();
    assert_eq!(reason.kind, LostKind::Expired, "{reason}");
    assert_eq!(reason.end_cause, Some(EndCause::MaxDurationExceeded), "{reason}");
    assert!(reason.message.contains("max duration"), "{reason}");
    assert!(after >= Duration::from_millis(1_500), "ended after {after:?}, before its bound");
    ended_by_max_duration(&c, tx.id()).await;
    // A later call names the same cause, not a lapsed lease (Expired covers both).
    let err = tx.commit().await.unwrap_err();
    assert_eq!(err.end_cause(), Some(EndCause::MaxDurationExceeded), "{err}");
    // Its lock passed on, with a higher token.
    let next = c.begin_transaction(opts(10_000)).await.unwrap();
    assert!(take(&next, "k").await.fencing_token > held.fencing_token);
    // An unbounded transaction begun at the same time is still active.
    let other = c.begin_transaction(opts(10_000)).await.unwrap();
    assert_eq!(other.status().await.unwrap().state, TransactionState::Active);
}

#[tokio::test]
async fn a_new_leader_keeps_the_deadline_instead_of_restarting_it() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let c = patient_client(cluster.endpoints()).await;
    let tx = c.begin_transaction(opts(30_000).with_max_duration_ms(4_000)).await.unwrap();
    tx.acquire_lock("ns", "k", LockMode::Exclusive, wait(5_000)).await.unwrap();
    cluster.kill(leader);
    // A restarted 30 s lease would keep it alive far longer; the 4 s bound holds.
    let reason = tokio::time::timeout(Duration::from_secs(20), tx.lost()).await.expect("ended by its bound");
    assert!(reason.message.contains("max duration"), "{reason}");
    ended_by_max_duration(&c, tx.id()).await;
}

#[tokio::test]
async fn the_deadline_survives_a_restart_from_a_snapshot_file() {
    let mut cluster = Cluster::start_with(1, &["--snapshot-every", "10"]).await;
    let c = patient_client(cluster.endpoints()).await;
    let tx = c.begin_transaction(opts(30_000).with_max_duration_ms(5_000)).await.unwrap();
    take(&tx, "bounded").await;
    // Enough entries after the begin that a snapshot holds it and the log before it goes.
    common::grant_many(&c, "k", 25, 0).await;
    cluster.restart(1);
    cluster.wait_for_leader(Duration::from_secs(20)).await;
    ended_by_max_duration(&c, tx.id()).await;
}

#[tokio::test]
async fn a_bound_out_of_range_is_invalid_argument() {
    let cluster = Cluster::start(1).await;
    let c = DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key()).await.unwrap();
    for ms in [50, 7 * 24 * 3_600_000 + 1] {
        let err = c.begin_transaction(opts(10_000).with_max_duration_ms(ms)).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        assert!(err.message().contains("max_duration_ms"), "{err}");
    }
}
