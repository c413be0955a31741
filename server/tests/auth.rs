//! API keys: `dls keys add` writes hashes only; calls without or with a wrong key are
//! UNAUTHENTICATED; prefixes and transaction ownership give PERMISSION_DENIED.

use crate::common;

use caerus_core::{AcquireOptions, ClientConfig, DlsClient, Error, LockMode, TransactionOptions};
use common::{add_key, Cluster};

async fn client(cluster: &Cluster, key: Option<&str>) -> DlsClient {
    let cfg = ClientConfig::new(cluster.endpoints()).without_api_key();
    let cfg = match key {
        Some(k) => cfg.with_api_key(k),
        None => cfg,
    };
    DlsClient::connect(cfg).await.unwrap()
}

#[tokio::test]
async fn keys_are_required_scoped_to_prefixes_and_own_their_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    let billing = add_key(&file, "billing", &["billing-"], false);
    let reports = add_key(&file, "reports", &[], false);
    let admin = add_key(&file, "admin", &[], true);
    let stored = std::fs::read_to_string(&file).unwrap();
    assert!(!stored.contains(&billing) && !stored.contains(&admin), "keys must not be stored in clear");

    let cluster = Cluster::start_full(1, &["--api-keys-file", file.to_str().unwrap()], Some(admin.clone())).await;
    let opts = TransactionOptions::default().with_timeout_ms(5_000);
    let wait = AcquireOptions::default().with_timeout_ms(1000);

    for bad in [None, Some("dls_not_a_key")] {
        let err = client(&cluster, bad).await.begin_transaction(opts.clone()).await.unwrap_err();
        assert!(matches!(err, Error::Unauthenticated { .. }), "{bad:?}: {err:?}");
    }

    let b = client(&cluster, Some(&billing)).await;
    let t = b.begin_transaction(opts.clone()).await.unwrap();
    t.acquire_lock("billing-jobs", "monthly", LockMode::Exclusive, wait.clone()).await.unwrap();
    let err = t.acquire_lock("reports", "daily", LockMode::Exclusive, wait.clone()).await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err:?}");

    // Another key cannot read billing's transaction; an admin key can.
    let r = client(&cluster, Some(&reports)).await;
    let err = r.transaction_status(t.id()).await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err:?}");
    let tr = r.begin_transaction(opts).await.unwrap();
    tr.acquire_lock("reports", "daily", LockMode::Exclusive, wait).await.unwrap();
    tr.commit().await.unwrap();
    let a = client(&cluster, Some(&admin)).await;
    assert_eq!(a.transaction_status(t.id()).await.unwrap().locks.len(), 1);
    t.commit().await.unwrap();
}
