//! Lock-delay (`SetLockDelay`): a revoked holder's keys grant nothing for the delay of their
//! namespace, a normal release is never delayed; the delay holds across a leader change and
//! a restart from a snapshot file; bad rules are refused with the right status.

use crate::common;

use std::time::Duration;

use caerus_core::{AcquireOptions, ClientConfig, DlsClient, EndCause, Error, KeyLocks, LockMode};
use common::{add_key, eventually_async, opts, patient_client, queued, take, Cluster, PATIENCE};

/// The listing of `ns/key`, if the key is held, waited for or delayed.
async fn listed(c: &DlsClient, key: &str) -> Option<KeyLocks> {
    c.list_locks("ns").await.unwrap().into_iter().find(|k| k.namespace == "ns" && k.key == key)
}

/// The delay end of `ns/key` once it is delayed by `txn`'s end with `cause`.
async fn delayed_until(c: &DlsClient, key: &str, txn: u64, cause: EndCause) -> i64 {
    eventually_async(PATIENCE, "the key is under a lock-delay", || async move {
        let d = listed(c, key).await?.delay?;
        assert_eq!((d.transaction_id, d.cause), (txn, Some(cause)), "{d:?}");
        Some(d.until_ms)
    })
    .await
}

/// When `txn`'s hold of `ns/key` was granted (leader clock).
async fn granted_at(c: &DlsClient, key: &str, txn: u64) -> i64 {
    let k = listed(c, key).await.expect("the key is listed");
    k.holders.iter().find(|h| h.transaction_id == txn).expect("txn holds the key").since_ms
}

#[tokio::test]
async fn a_revoked_holders_key_waits_out_the_delay_and_a_release_is_never_delayed() {
    let cluster = Cluster::start(1).await;
    let c = DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key()).await.unwrap();
    assert!(c.lock_delays().await.unwrap().is_empty(), "off by default");
    assert_eq!(c.set_lock_delay("n", Duration::from_millis(1_500)).await.unwrap(), Duration::ZERO);
    let rules = c.lock_delays().await.unwrap();
    assert_eq!((rules[0].namespace_prefix.as_str(), rules[0].delay), ("n", Duration::from_millis(1_500)));

    // A holder whose heartbeats stop: its lease lapses, the key waits out the delay.
    let silent = c.begin_transaction(opts(300)).await.unwrap();
    take(&silent, "k").await;
    let next = c.begin_transaction(opts(30_000)).await.unwrap();
    let waiting = queued(&next, "k").await;
    silent.abandon();
    let until = delayed_until(&c, "k", silent.id(), EndCause::LeaseExpired).await;
    let other = c.begin_transaction(opts(30_000)).await.unwrap();
    let refused =
        other.acquire_lock("ns", "k", LockMode::Exclusive, AcquireOptions::default().with_timeout_ms(0)).await;
    assert!(matches!(refused, Err(Error::LockTimeout { .. })), "a try-lock is refused during the delay: {refused:?}");
    let lock = tokio::time::timeout(PATIENCE, waiting).await.expect("granted after the delay").unwrap().unwrap();
    assert!(granted_at(&c, "k", next.id()).await >= until, "granted before the delay ended");
    assert!(listed(&c, "k").await.unwrap().delay.is_none());

    // A normal release passes the key on at once, with the rule still in force.
    let after = c.begin_transaction(opts(30_000)).await.unwrap();
    let behind = queued(&after, "k").await;
    assert!(next.release(&lock.namespace, &lock.key).await.unwrap());
    behind.await.unwrap().unwrap();
    assert!(listed(&c, "k").await.unwrap().delay.is_none(), "a release is not delayed");
    after.commit().await.unwrap();

    // An operator abort delays; removing the rule stops delaying the next revocation.
    let held = c.begin_transaction(opts(30_000)).await.unwrap();
    take(&held, "k2").await;
    c.abort_transaction(held.id(), "maintenance").await.unwrap();
    delayed_until(&c, "k2", held.id(), EndCause::OperatorAbort).await;
    assert_eq!(c.set_lock_delay("n", Duration::ZERO).await.unwrap(), Duration::from_millis(1_500));
    let again = c.begin_transaction(opts(30_000)).await.unwrap();
    take(&again, "k3").await;
    c.abort_transaction(again.id(), "maintenance").await.unwrap();
    assert!(listed(&c, "k3").await.is_none(), "no rule, no delay");
    assert!(c.lock_delays().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_new_leader_ends_the_delay_on_time_not_before() {
    let mut cluster = Cluster::start(3).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let c = patient_client(cluster.endpoints()).await;
    c.set_lock_delay("", Duration::from_secs(4)).await.unwrap();
    let holder = c.begin_transaction(opts(30_000)).await.unwrap();
    take(&holder, "k").await;
    let next = c.begin_transaction(opts(30_000)).await.unwrap();
    let waiting = queued(&next, "k").await;
    c.abort_transaction(holder.id(), "failover drill").await.unwrap();
    let until = delayed_until(&c, "k", holder.id(), EndCause::OperatorAbort).await;
    cluster.kill(leader);
    cluster.wait_for_new_leader(leader, Duration::from_secs(20)).await;
    // The followers applied the delay: the new leader still enforces it, then ends it.
    tokio::time::timeout(Duration::from_secs(30), waiting).await.expect("granted after the delay").unwrap().unwrap();
    assert!(granted_at(&c, "k", next.id()).await >= until, "granted before the delay ended");
    assert_eq!(c.lock_delays().await.unwrap().len(), 1, "the rule is replicated");
}

#[tokio::test]
async fn rules_and_delayed_keys_survive_a_restart_from_a_snapshot_file() {
    let mut cluster = Cluster::start_with(1, &["--snapshot-every", "10"]).await;
    let c = patient_client(cluster.endpoints()).await;
    c.set_lock_delay("ns", Duration::from_secs(8)).await.unwrap();
    let holder = c.begin_transaction(opts(30_000)).await.unwrap();
    take(&holder, "delayed").await;
    c.abort_transaction(holder.id(), "drill").await.unwrap();
    let until = delayed_until(&c, "delayed", holder.id(), EndCause::OperatorAbort).await;
    // Enough entries after the abort that a snapshot holds it and the log before it goes.
    common::grant_many(&c, "k", 25, 0).await;
    cluster.restart(1);
    cluster.wait_for_leader(Duration::from_secs(20)).await;
    assert_eq!(c.lock_delays().await.unwrap()[0].delay, Duration::from_secs(8));
    let next = c.begin_transaction(opts(30_000)).await.unwrap();
    let lock = next
        .acquire_lock("ns", "delayed", LockMode::Exclusive, AcquireOptions::default().with_timeout_ms(30_000))
        .await
        .unwrap();
    assert!(granted_at(&c, "delayed", next.id()).await >= until, "the restarted node forgot the delay");
    assert!(lock.fencing_token > 0);
}

#[tokio::test]
async fn bad_rules_are_refused_with_the_right_status() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    let admin = add_key(&file, "admin", &[], true);
    let team_admin = add_key(&file, "billing-admin", &["billing-"], true);
    let user = add_key(&file, "user", &[], false);
    let cluster = Cluster::start_full(1, &["--api-keys-file", file.to_str().unwrap()], Some(admin.clone())).await;
    let client = |key: String| {
        let endpoints = cluster.endpoints();
        async move { DlsClient::connect(ClientConfig::new(endpoints).with_api_key(key)).await.unwrap() }
    };
    let (a, team, u) = (client(admin).await, client(team_admin).await, client(user).await);

    let err = a.set_lock_delay("ns", Duration::from_secs(601)).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }) && err.message().contains("delay_ms"), "{err:?}");
    let err = a.set_lock_delay("bad\nprefix", Duration::from_secs(1)).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }) && err.message().contains("namespace_prefix"), "{err:?}");
    let err = u.set_lock_delay("ns", Duration::from_secs(1)).await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }) && err.message().contains("admin"), "{err:?}");
    let err = team.set_lock_delay("", Duration::from_secs(1)).await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }) && err.message().contains("outside"), "{err:?}");
    team.set_lock_delay("billing-jobs", Duration::from_secs(1)).await.unwrap();
    a.set_lock_delay("reports-", Duration::from_secs(1)).await.unwrap();
    let seen: Vec<String> = team.lock_delays().await.unwrap().into_iter().map(|r| r.namespace_prefix).collect();
    assert_eq!(seen, vec!["billing-jobs".to_string()], "a limited admin sees only rules inside its prefixes");

    for i in 2..256 {
        a.set_lock_delay(&format!("p{i:03}"), Duration::from_millis(10)).await.unwrap();
    }
    let err = a.set_lock_delay("one-too-many", Duration::from_millis(10)).await.unwrap_err();
    assert!(matches!(err, Error::ResourceExhausted { .. }) && err.message().contains("256"), "{err:?}");
    // Changing or removing a rule is always possible.
    a.set_lock_delay("p002", Duration::from_millis(20)).await.unwrap();
    a.set_lock_delay("p002", Duration::ZERO).await.unwrap();
    a.set_lock_delay("one-too-many", Duration::from_millis(10)).await.unwrap();
}
