//! VerifyFencingToken against real nodes: a linearizable "is this token the current grant
//! of that key?", through a follower of three and on one node, limited by API key tenancy.

use crate::common;

use std::time::Duration;

use caerus_core::{ClientConfig, DlsClient, Error, LockMode};
use common::{add_key, opts, take, wait, Cluster};

async fn verify_on(nodes: usize) {
    let cluster = Cluster::start(nodes).await;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await;
    let entry = cluster.ids().into_iter().find(|id| *id != leader).unwrap_or(leader);
    let c = DlsClient::connect(ClientConfig::new(vec![cluster.addr(entry)]).without_api_key()).await.unwrap();

    // A free key has no current token.
    let free = c.verify_fencing_token("ns", "k", 1).await.unwrap();
    assert!(!free.current && free.current_tokens.is_empty());

    let first = c.begin_transaction(opts(10_000)).await.unwrap();
    let held = take(&first, "k").await;
    let check = c.verify_fencing_token("ns", "k", held.fencing_token).await.unwrap();
    assert!(check.current);
    assert_eq!(check.current_tokens, vec![held.fencing_token]);
    // The same token on another key, or another token on this key, is not current.
    assert!(!c.verify_fencing_token("ns", "other", held.fencing_token).await.unwrap().current);
    assert!(!c.verify_fencing_token("ns", "k", held.fencing_token + 1).await.unwrap().current);

    // Once the holder commits (a write the caller saw), its token is no longer current;
    // the next holder's is.
    first.commit().await.unwrap();
    assert!(!c.verify_fencing_token("ns", "k", held.fencing_token).await.unwrap().current);
    let second = c.begin_transaction(opts(10_000)).await.unwrap();
    let next = take(&second, "k").await;
    let check = c.verify_fencing_token("ns", "k", held.fencing_token).await.unwrap();
    assert!(!check.current);
    assert_eq!(check.current_tokens, vec![next.fencing_token], "names the current grant");
    second.commit().await.unwrap();

    // Readers: every reader's token is current.
    let (r1, r2) = (c.begin_transaction(opts(10_000)).await.unwrap(), c.begin_transaction(opts(10_000)).await.unwrap());
    let a = r1.acquire_lock("ns", "s", LockMode::SharedRead, wait(1_000)).await.unwrap();
    let b = r2.acquire_lock("ns", "s", LockMode::SharedRead, wait(1_000)).await.unwrap();
    for token in [a.fencing_token, b.fencing_token] {
        assert!(c.verify_fencing_token("ns", "s", token).await.unwrap().current);
    }
    let mut tokens = c.verify_fencing_token("ns", "s", a.fencing_token).await.unwrap().current_tokens;
    tokens.sort();
    assert_eq!(tokens, vec![a.fencing_token, b.fencing_token]);

    // Bad input: INVALID_ARGUMENT naming the problem.
    for (ns, key, token, says) in
        [("", "k", 1, "namespace must not be empty"), ("ns", "k", 0, "fencing_token must be above 0")]
    {
        let err = c.verify_fencing_token(ns, key, token).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
        assert!(err.message().contains(says), "{err}");
    }
}

#[tokio::test]
async fn verify_on_one_node() {
    verify_on(1).await;
}

#[tokio::test]
async fn verify_through_a_follower_of_three() {
    verify_on(3).await;
}

#[tokio::test]
async fn a_key_limited_to_other_namespaces_may_not_ask() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    let billing = add_key(&file, "billing", &["billing-"], false);
    let admin = add_key(&file, "admin", &[], true);
    let cluster = Cluster::start_full(1, &["--api-keys-file", file.to_str().unwrap()], Some(admin)).await;
    let c = DlsClient::connect(ClientConfig::new(cluster.endpoints()).with_api_key(&billing)).await.unwrap();
    let tx = c.begin_transaction(opts(10_000)).await.unwrap();
    let held = tx.acquire_lock("billing-jobs", "k", LockMode::Exclusive, wait(1_000)).await.unwrap();
    assert!(c.verify_fencing_token("billing-jobs", "k", held.fencing_token).await.unwrap().current);
    let err = c.verify_fencing_token("reports-daily", "k", 1).await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err:?}");
    let anonymous = DlsClient::connect(ClientConfig::new(cluster.endpoints()).without_api_key()).await.unwrap();
    let err = anonymous.verify_fencing_token("billing-jobs", "k", held.fencing_token).await.unwrap_err();
    assert!(matches!(err, Error::Unauthenticated { .. }), "{err:?}");
    tx.commit().await.unwrap();
}
