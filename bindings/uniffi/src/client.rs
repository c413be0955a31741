//! The connection to a cluster: begins transactions, reads statuses, watches events.

use std::sync::Arc;

use caerus_core as core;

use crate::errors::DlsError;
use crate::events::{EventStream, WatchOptions};
use crate::key_watch::KeyWatch;
use crate::options::{ClientConfig, TransactionOptions};
use crate::runtime::{block_on, on_runtime};
use crate::transaction::Transaction;
use crate::types::{millis, ApiKeyInfo, KeyLocks, LockDelayRule, TokenCheck, TransactionState, TransactionStatus};

/// Connection to a cluster.
#[derive(uniffi::Object)]
pub struct DlsClient {
    client: core::DlsClient,
}

#[uniffi::export]
impl DlsClient {
    /// Validates the configuration and prepares lazy connections (no I/O yet).
    #[uniffi::constructor]
    pub fn new(config: ClientConfig) -> Result<Arc<Self>, DlsError> {
        let config = core::ClientConfig::try_from(config)?;
        let client = block_on(core::DlsClient::connect(config))?;
        Ok(Arc::new(DlsClient { client }))
    }

    /// A client configured from `DLS_ENDPOINTS`, `CAERUS_API_KEY` and the TLS variables.
    #[uniffi::constructor]
    pub fn from_env() -> Result<Arc<Self>, DlsError> {
        let client = block_on(core::DlsClient::connect(core::ClientConfig::from_env()))?;
        Ok(Arc::new(DlsClient { client }))
    }

    /// A transaction that begins with its first call (nothing is sent here): when that
    /// call is an acquire, the begin and the lock go in one request. Its id is 0 until then.
    pub fn transaction(&self, options: TransactionOptions) -> Result<Arc<Transaction>, DlsError> {
        Ok(Arc::new(Transaction::new(self.client.transaction(options.into())?)))
    }

    /// Begins a transaction now; core heartbeats it until it commits, aborts or is lost.
    pub async fn begin_transaction(&self, options: TransactionOptions) -> Result<Arc<Transaction>, DlsError> {
        let client = self.client.clone();
        let tx = on_runtime(async move { Ok(client.begin_transaction(options.into()).await?) }).await?;
        Ok(Arc::new(Transaction::new(tx)))
    }

    /// Any transaction's status, by id.
    pub async fn transaction_status(&self, id: u64) -> Result<TransactionStatus, DlsError> {
        let client = self.client.clone();
        on_runtime(async move { Ok(client.transaction_status(id).await?.into()) }).await
    }

    /// Whether `fencing_token` is the current grant of `namespace`/`key` (a linearizable
    /// read on the leader; no transaction needed). For storage that can ask before it writes.
    pub async fn verify_fencing_token(
        &self,
        namespace: String,
        key: String,
        fencing_token: u64,
    ) -> Result<TokenCheck, DlsError> {
        let client = self.client.clone();
        on_runtime(async move { Ok(client.verify_fencing_token(&namespace, &key, fencing_token).await?) }).await
    }

    /// Operator call (admin key on a server with keys): aborts any transaction and
    /// returns its final state.
    pub async fn abort_transaction(&self, id: u64, reason: String) -> Result<TransactionState, DlsError> {
        let client = self.client.clone();
        on_runtime(async move { Ok(client.abort_transaction(id, &reason).await?) }).await
    }

    /// Operator call: every key held, waited for or under a lock-delay in namespaces
    /// starting with `namespace_prefix` ("" = all), sorted by namespace then key.
    pub async fn list_locks(&self, namespace_prefix: String) -> Result<Vec<KeyLocks>, DlsError> {
        let client = self.client.clone();
        on_runtime(
            async move { Ok(client.list_locks(&namespace_prefix).await?.into_iter().map(KeyLocks::from).collect()) },
        )
        .await
    }

    /// Operator call: when a holder in a namespace starting with `namespace_prefix` ("" =
    /// all) is revoked (lease expired, operator abort, deadlock victim, maximum duration),
    /// its keys grant nothing for `delay_ms`; a release or commit is never delayed. 0
    /// removes the rule; at most 10 minutes and 256 rules. Returns the prefix's previous
    /// delay in ms (0: none).
    pub async fn set_lock_delay(&self, namespace_prefix: String, delay_ms: u64) -> Result<u64, DlsError> {
        let client = self.client.clone();
        on_runtime(async move {
            let delay = std::time::Duration::from_millis(delay_ms);
            Ok(millis(client.set_lock_delay(&namespace_prefix, delay).await?))
        })
        .await
    }

    /// Operator call: creates an API key kept by the cluster and returns its secret, shown
    /// only here. `expires_in_ms` 0: until revoked.
    pub async fn create_api_key(
        &self,
        name: String,
        namespace_prefixes: Vec<String>,
        admin: bool,
        expires_in_ms: u64,
    ) -> Result<String, DlsError> {
        let client = self.client.clone();
        let expires_in = (expires_in_ms > 0).then(|| std::time::Duration::from_millis(expires_in_ms));
        let key = core::NewApiKey { namespace_prefixes, admin, expires_in, ..Default::default() };
        on_runtime(async move { Ok(client.create_api_key(&name, key).await?.secret) }).await
    }

    /// Operator call: the cluster's API keys this admin key may manage (never secrets).
    pub async fn list_api_keys(&self) -> Result<Vec<ApiKeyInfo>, DlsError> {
        let client = self.client.clone();
        on_runtime(async move { Ok(client.list_api_keys().await?.into_iter().map(ApiKeyInfo::from).collect()) }).await
    }

    /// Operator call: revokes a cluster API key; every node refuses it once applied.
    pub async fn revoke_api_key(&self, name: String) -> Result<(), DlsError> {
        let client = self.client.clone();
        on_runtime(async move { Ok(client.revoke_api_key(&name).await?) }).await
    }

    /// Operator call: a new secret for a cluster API key (returned); the old one works
    /// `grace_ms` longer.
    pub async fn rotate_api_key(&self, name: String, grace_ms: u64) -> Result<String, DlsError> {
        let client = self.client.clone();
        let grace = std::time::Duration::from_millis(grace_ms);
        on_runtime(async move { Ok(client.rotate_api_key(&name, grace).await?.secret) }).await
    }

    /// Operator call: the lock-delay rules, sorted by prefix.
    pub async fn lock_delays(&self) -> Result<Vec<LockDelayRule>, DlsError> {
        let client = self.client.clone();
        on_runtime(async move { Ok(client.lock_delays().await?.into_iter().map(LockDelayRule::from).collect()) }).await
    }

    /// Follows who holds `namespace`/`key`: the holders now, then one update per change;
    /// survives leader changes. Returns once attached.
    pub async fn watch_key(&self, namespace: String, key: String) -> Result<Arc<KeyWatch>, DlsError> {
        let client = self.client.clone();
        let watch = on_runtime(async move { Ok(client.watch_key(&namespace, &key).await?) }).await?;
        Ok(Arc::new(KeyWatch::new(watch)))
    }

    /// Follows the event log from `options.from_sequence`, across leader changes.
    pub async fn watch_events(&self, options: WatchOptions) -> Result<Arc<EventStream>, DlsError> {
        let client = self.client.clone();
        let stream = on_runtime(async move { Ok(client.watch_events(options.into()).await?) }).await?;
        Ok(Arc::new(EventStream::new(stream)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::RUNTIME;

    #[test]
    fn client_can_be_built_inside_a_runtime_thread() {
        let built = RUNTIME.block_on(async {
            tokio::spawn(async {
                DlsClient::new(ClientConfig {
                    endpoints: vec!["127.0.0.1:1".into()],
                    api_key: None,
                    connect_timeout_ms: None,
                    request_timeout_ms: None,
                    retry_deadline_ms: None,
                    ca_file: None,
                    client_cert_file: None,
                    client_key_file: None,
                })
                .is_ok()
            })
            .await
            .unwrap()
        });
        assert!(built);
    }
}
