//! The native client behind `caerus.DlsClient` and `caerus.sync.DlsClient`.

use std::path::PathBuf;
use std::time::Duration;

use caerus_core as core;
use pyo3::prelude::*;

use crate::errors::to_py_err;
use crate::events::{watch_options, NativeEventStream};
use crate::key_watch::NativeKeyWatch;
use crate::runtime::blocking;
use crate::transaction::NativeTransaction;
use crate::twins::pymethods_with_twins;
use crate::types::{duration_ms, millis, ApiKeyInfo, KeyLocksOut, LockDelayRule, TokenCheck, TransactionStatus};

/// A native client. Use `caerus.DlsClient` / `caerus.sync.DlsClient`.
#[pyclass(frozen, module = "caerus._native")]
pub struct NativeClient {
    client: core::DlsClient,
}

fn tx_options(
    timeout_ms: Option<u64>,
    priority: i32,
    name: Option<String>,
    max_duration_ms: Option<u64>,
    lost_stream: bool,
) -> core::TransactionOptions {
    let mut opts = core::TransactionOptions::default().with_priority(priority).with_lost_stream(lost_stream);
    opts.max_duration_ms = max_duration_ms;
    if let Some(ms) = timeout_ms {
        opts = opts.with_timeout_ms(ms);
    }
    if let Some(name) = name {
        opts = opts.with_name(name);
    }
    opts
}

pymethods_with_twins! {
    impl NativeClient {
        /// `endpoints`: `host:port` list (None: `$DLS_ENDPOINTS`, default 127.0.0.1:7070).
        /// `api_key`: None reads `$CAERUS_API_KEY`; `use_env_key=False` sends none.
        /// TLS files: None reads `$DLS_CA_FILE`, `$DLS_CLIENT_CERT_FILE`, `$DLS_CLIENT_KEY_FILE`.
        #[new]
        #[pyo3(signature = (endpoints=None, api_key=None, use_env_key=true, connect_timeout_ms=None, request_timeout_ms=None, retry_deadline_ms=None, ca_file=None, client_cert_file=None, client_key_file=None))]
        #[allow(clippy::too_many_arguments)]
        fn new(
            py: Python<'_>,
            endpoints: Option<Vec<String>>,
            api_key: Option<String>,
            use_env_key: bool,
            connect_timeout_ms: Option<f64>,
            request_timeout_ms: Option<f64>,
            retry_deadline_ms: Option<f64>,
            ca_file: Option<PathBuf>,
            client_cert_file: Option<PathBuf>,
            client_key_file: Option<PathBuf>,
        ) -> PyResult<Self> {
            let mut config = match endpoints {
                Some(endpoints) => core::ClientConfig::new(endpoints),
                None => core::ClientConfig::from_env(),
            };
            if let Some(key) = api_key {
                config = config.with_api_key(key);
            } else if !use_env_key {
                config = config.without_api_key();
            }
            config = config
                .with_connect_timeout(millis(
                    "connect_timeout_ms",
                    connect_timeout_ms,
                    core::ClientConfig::DEFAULT_CONNECT_TIMEOUT,
                )?)
                .with_request_timeout(millis(
                    "request_timeout_ms",
                    request_timeout_ms,
                    core::ClientConfig::DEFAULT_REQUEST_TIMEOUT,
                )?)
                .with_retry_deadline(millis(
                    "retry_deadline_ms",
                    retry_deadline_ms,
                    core::ClientConfig::DEFAULT_RETRY_DEADLINE,
                )?)
                .with_tls_files(ca_file, client_cert_file, client_key_file)
                .map_err(to_py_err)?;
            let client = blocking(py, core::DlsClient::connect(config))?;
            Ok(NativeClient { client })
        }

        /// A transaction that begins with its first call (nothing is sent here): when that
        /// call is an acquire, the begin and the lock go in one request.
        #[pyo3(signature = (timeout_ms=None, priority=0, name=None, max_duration_ms=None, lost_stream=false))]
        fn transaction(
            &self,
            timeout_ms: Option<u64>,
            priority: i32,
            name: Option<String>,
            max_duration_ms: Option<u64>,
            lost_stream: bool,
        ) -> PyResult<NativeTransaction> {
            let opts = tx_options(timeout_ms, priority, name, max_duration_ms, lost_stream);
            self.client.transaction(opts).map(NativeTransaction::new).map_err(to_py_err)
        }
    }
    twins {
        #[pyo3(signature = (timeout_ms=None, priority=0, name=None, max_duration_ms=None, lost_stream=false))]
        fn begin_transaction / begin_transaction_blocking(
            &self,
            timeout_ms: Option<u64>,
            priority: i32,
            name: Option<String>,
            max_duration_ms: Option<u64>,
            lost_stream: bool,
        ) -> NativeTransaction {
            let client = self.client.clone();
            let opts = tx_options(timeout_ms, priority, name, max_duration_ms, lost_stream);
            async move { client.begin_transaction(opts).await.map(NativeTransaction::new) }
        }

        fn transaction_status / transaction_status_blocking(&self, id: u64) -> TransactionStatus {
            let client = self.client.clone();
            async move { client.transaction_status(id).await.map(TransactionStatus::from) }
        }

        fn watch_key / watch_key_blocking(&self, namespace: String, key: String) -> NativeKeyWatch {
            NativeKeyWatch::open(self.client.clone(), namespace, key)
        }

        fn verify_fencing_token / verify_fencing_token_blocking(
            &self,
            namespace: String,
            key: String,
            fencing_token: u64,
        ) -> TokenCheck {
            let client = self.client.clone();
            async move { client.verify_fencing_token(&namespace, &key, fencing_token).await }
        }

        #[pyo3(signature = (from_sequence=0, namespace_prefixes=Vec::new(), kinds=Vec::new(), only_new=false))]
        fn watch_events / watch_events_blocking(
            &self,
            from_sequence: u64,
            namespace_prefixes: Vec<String>,
            kinds: Vec<String>,
            only_new: bool,
        ) -> NativeEventStream {
            let opts = watch_options(from_sequence, namespace_prefixes, kinds, only_new)?;
            NativeEventStream::open(self.client.clone(), opts)
        }

        #[pyo3(signature = (namespace_prefix=String::new()))]
        fn list_locks / list_locks_blocking(&self, namespace_prefix: String) -> Vec<KeyLocksOut> {
            let client = self.client.clone();
            async move {
                let list = client.list_locks(&namespace_prefix).await?;
                Ok(list.into_iter().map(KeyLocksOut).collect::<Vec<_>>())
            }
        }

        /// Operator abort of any transaction; resolves to its final state name.
        #[pyo3(signature = (id, reason=String::new()))]
        fn abort_transaction / abort_transaction_blocking(&self, id: u64, reason: String) -> &'static str {
            let client = self.client.clone();
            async move { client.abort_transaction(id, &reason).await.map(|s| s.as_str()) }
        }

        /// Operator call: sets the lock-delay of namespaces starting with `namespace_prefix`
        /// (`delay_ms=0` removes the rule); resolves to the prefix's previous delay in ms.
        fn set_lock_delay / set_lock_delay_blocking(&self, namespace_prefix: String, delay_ms: u64) -> u64 {
            let client = self.client.clone();
            async move { client.set_lock_delay(&namespace_prefix, Duration::from_millis(delay_ms)).await.map(duration_ms) }
        }

        /// Operator call: creates an API key kept by the cluster; resolves to its secret,
        /// shown only here. `expires_in_ms=0`: it never expires.
        #[pyo3(signature = (name, namespace_prefixes=Vec::new(), admin=false, expires_in_ms=0))]
        fn create_api_key / create_api_key_blocking(
            &self,
            name: String,
            namespace_prefixes: Vec<String>,
            admin: bool,
            expires_in_ms: u64,
        ) -> String {
            let client = self.client.clone();
            let expires_in = (expires_in_ms > 0).then(|| Duration::from_millis(expires_in_ms));
            let key = core::NewApiKey { namespace_prefixes, admin, expires_in, ..Default::default() };
            async move { Ok(client.create_api_key(&name, key).await?.secret) }
        }

        /// Operator call: the cluster's API keys this admin key may manage (no secrets).
        fn list_api_keys / list_api_keys_blocking(&self) -> Vec<ApiKeyInfo> {
            let client = self.client.clone();
            async move { Ok(client.list_api_keys().await?.into_iter().map(ApiKeyInfo::from).collect::<Vec<_>>()) }
        }

        /// Operator call: revokes a cluster API key; every node refuses it once applied.
        fn revoke_api_key / revoke_api_key_blocking(&self, name: String) -> () {
            let client = self.client.clone();
            async move { client.revoke_api_key(&name).await }
        }

        /// Operator call: a new secret for a cluster API key (resolves to it); the old one
        /// works `grace_ms` longer.
        #[pyo3(signature = (name, grace_ms=0))]
        fn rotate_api_key / rotate_api_key_blocking(&self, name: String, grace_ms: u64) -> String {
            let client = self.client.clone();
            async move { Ok(client.rotate_api_key(&name, Duration::from_millis(grace_ms)).await?.secret) }
        }

        /// Operator call: the lock-delay rules, sorted by prefix.
        fn lock_delays / lock_delays_blocking(&self) -> Vec<LockDelayRule> {
            let client = self.client.clone();
            async move { Ok(client.lock_delays().await?.into_iter().map(LockDelayRule::from).collect::<Vec<_>>()) }
        }
    }
}
