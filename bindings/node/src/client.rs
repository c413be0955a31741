//! The connection to a cluster and its calls outside a transaction.

use std::sync::Arc;

use caerus_core::{ClientConfig, DlsClient, EventKind, WatchOptions};
use napi::bindgen_prelude::{block_on, BigInt, Unknown};
use napi::{Env, Result};
use napi_derive::napi;
use tokio::sync::{watch, Mutex};

use crate::errors::to_js;
use crate::events::NativeEventStream;
use crate::key_watch::NativeKeyWatch;
use crate::options::{tx_options, ApiKeyOptions, ClientOptions, EventWatchOptions, TxOptions};
use crate::promise_bridge::promise;
use crate::transaction::NativeTransaction;
use crate::types::{ms_of, u64_of, JsApiKeyInfo, JsKeyLocks, JsLockDelayRule, JsTokenCheck, JsTransactionStatus};

/// Connection to a cluster (`Dls.DlsClient` wraps it).
#[napi]
pub struct NativeClient {
    client: DlsClient,
}

#[napi]
impl NativeClient {
    #[napi(constructor)]
    pub fn new(opts: Option<ClientOptions>) -> Result<Self> {
        let mut config = ClientConfig::from_env();
        if let Some(o) = opts {
            if let Some(endpoints) = o.endpoints.filter(|e| !e.is_empty()) {
                config.endpoints = endpoints;
            }
            if let Some(key) = o.api_key.filter(|k| !k.is_empty()) {
                config = config.with_api_key(key);
            }
            if let Some(ms) = ms_of(o.connect_timeout_ms, "connectTimeoutMs")? {
                config = config.with_connect_timeout(std::time::Duration::from_millis(ms));
            }
            if let Some(ms) = ms_of(o.request_timeout_ms, "requestTimeoutMs")? {
                config = config.with_request_timeout(std::time::Duration::from_millis(ms));
            }
            if let Some(ms) = ms_of(o.retry_deadline_ms, "retryDeadlineMs")? {
                config = config.with_retry_deadline(std::time::Duration::from_millis(ms));
            }
            let path = |p: Option<String>| p.filter(|p| !p.is_empty()).map(std::path::PathBuf::from);
            config = config
                .with_tls_files(path(o.ca_file), path(o.client_cert_file), path(o.client_key_file))
                .map_err(to_js)?;
        }
        // `connect` only validates and prepares lazy connections (no I/O), but needs to
        // run inside the tokio runtime that will carry them.
        let client = block_on(DlsClient::connect(config)).map_err(to_js)?;
        Ok(NativeClient { client })
    }

    /// A transaction that begins with its first call (nothing is sent here): when that
    /// call is an acquire, the begin and the lock go in one request.
    #[napi]
    pub fn transaction(&self, opts: Option<TxOptions>) -> Result<NativeTransaction> {
        let tx = self.client.transaction(tx_options(opts)?).map_err(to_js)?;
        Ok(NativeTransaction::new(tx))
    }

    #[napi(ts_return_type = "Promise<NativeTransaction>")]
    pub fn begin_transaction<'env>(&self, env: &'env Env, opts: Option<TxOptions>) -> Result<Unknown<'env>> {
        let (client, opts) = (self.client.clone(), tx_options(opts));
        promise(env, async move {
            let tx = client.begin_transaction(opts?).await.map_err(to_js)?;
            Ok(NativeTransaction::new(tx))
        })
    }

    #[napi(ts_return_type = "Promise<JsTransactionStatus>")]
    pub fn transaction_status<'env>(&self, env: &'env Env, id: BigInt) -> Result<Unknown<'env>> {
        let (client, id) = (self.client.clone(), u64_of(&id, "transaction id"));
        promise(env, async move { client.transaction_status(id?).await.map(JsTransactionStatus::from).map_err(to_js) })
    }

    /// Follows who holds `namespace`/`key`; resolves once attached.
    #[napi]
    pub async fn watch_key(&self, namespace: String, key: String) -> Result<NativeKeyWatch> {
        let watch = self.client.watch_key(&namespace, &key).await.map_err(to_js)?;
        Ok(NativeKeyWatch { watch: Arc::new(Mutex::new(Some(watch))) })
    }

    /// Whether `fencing_token` is the current grant of the key (linearizable, no transaction).
    #[napi(ts_return_type = "Promise<JsTokenCheck>")]
    pub fn verify_fencing_token<'env>(
        &self,
        env: &'env Env,
        namespace: String,
        key: String,
        fencing_token: BigInt,
    ) -> Result<Unknown<'env>> {
        let (client, token) = (self.client.clone(), u64_of(&fencing_token, "fencingToken"));
        promise(env, async move {
            client.verify_fencing_token(&namespace, &key, token?).await.map(JsTokenCheck::from).map_err(to_js)
        })
    }

    /// Operator call: aborts any transaction; returns its final state.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn abort_transaction<'env>(&self, env: &'env Env, id: BigInt, reason: String) -> Result<Unknown<'env>> {
        let (client, id) = (self.client.clone(), u64_of(&id, "transaction id"));
        promise(env, async move {
            let state = client.abort_transaction(id?, &reason).await.map_err(to_js)?;
            Ok(state.as_str().to_string())
        })
    }

    /// Operator call: holders, waiters and lock-delays of every key under the prefix.
    #[napi(ts_return_type = "Promise<JsKeyLocks[]>")]
    pub fn list_locks<'env>(&self, env: &'env Env, namespace_prefix: Option<String>) -> Result<Unknown<'env>> {
        let client = self.client.clone();
        promise(env, async move {
            let locks = client.list_locks(namespace_prefix.as_deref().unwrap_or("")).await.map_err(to_js)?;
            Ok(locks.into_iter().map(JsKeyLocks::from).collect::<Vec<_>>())
        })
    }

    /// Operator call: sets the lock-delay of namespaces starting with the prefix (0 removes
    /// the rule); resolves with the prefix's previous delay in ms.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn set_lock_delay<'env>(
        &self,
        env: &'env Env,
        namespace_prefix: String,
        delay_ms: f64,
    ) -> Result<Unknown<'env>> {
        let (client, delay_ms) = (self.client.clone(), ms_of(Some(delay_ms), "delayMs"));
        promise(env, async move {
            let delay = std::time::Duration::from_millis(delay_ms?.unwrap_or(0));
            let previous = client.set_lock_delay(&namespace_prefix, delay).await.map_err(to_js)?;
            Ok(previous.as_millis() as f64)
        })
    }

    /// Operator call: creates an API key kept by the cluster; resolves with its secret,
    /// shown only here.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn create_api_key<'env>(
        &self,
        env: &'env Env,
        name: String,
        opts: Option<ApiKeyOptions>,
    ) -> Result<Unknown<'env>> {
        let client = self.client.clone();
        let o = opts.unwrap_or(ApiKeyOptions { namespace_prefixes: None, admin: None, expires_in_ms: None });
        let expires_in = ms_of(o.expires_in_ms, "expiresInMs").map(|ms| ms.map(std::time::Duration::from_millis));
        promise(env, async move {
            let key = caerus_core::NewApiKey {
                namespace_prefixes: o.namespace_prefixes.unwrap_or_default(),
                admin: o.admin.unwrap_or(false),
                expires_in: expires_in?,
                ..Default::default()
            };
            Ok(client.create_api_key(&name, key).await.map_err(to_js)?.secret)
        })
    }

    /// Operator call: the cluster's API keys this admin key may manage (no secrets).
    #[napi(ts_return_type = "Promise<JsApiKeyInfo[]>")]
    pub fn list_api_keys<'env>(&self, env: &'env Env) -> Result<Unknown<'env>> {
        let client = self.client.clone();
        promise(env, async move {
            let keys = client.list_api_keys().await.map_err(to_js)?;
            Ok(keys
                .into_iter()
                .map(|k| JsApiKeyInfo {
                    name: k.name,
                    namespace_prefixes: k.namespace_prefixes,
                    admin: k.admin,
                    expires_at_ms: k.expires_at_ms.map(|ms| ms as f64),
                    created_by: k.created_by,
                    created_at_ms: k.created_at_ms as f64,
                })
                .collect::<Vec<_>>())
        })
    }

    /// Operator call: revokes a cluster API key; every node refuses it once applied.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn revoke_api_key<'env>(&self, env: &'env Env, name: String) -> Result<Unknown<'env>> {
        let client = self.client.clone();
        promise(env, async move { client.revoke_api_key(&name).await.map_err(to_js) })
    }

    /// Operator call: a new secret for a cluster API key (resolves with it); the old one
    /// works `graceMs` longer.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn rotate_api_key<'env>(&self, env: &'env Env, name: String, grace_ms: Option<f64>) -> Result<Unknown<'env>> {
        let (client, grace) = (self.client.clone(), ms_of(grace_ms, "graceMs"));
        promise(env, async move {
            let grace = std::time::Duration::from_millis(grace?.unwrap_or(0));
            Ok(client.rotate_api_key(&name, grace).await.map_err(to_js)?.secret)
        })
    }

    /// Operator call: the lock-delay rules, sorted by prefix.
    #[napi(ts_return_type = "Promise<JsLockDelayRule[]>")]
    pub fn lock_delays<'env>(&self, env: &'env Env) -> Result<Unknown<'env>> {
        let client = self.client.clone();
        promise(env, async move {
            let rules = client.lock_delays().await.map_err(to_js)?;
            Ok(rules
                .into_iter()
                .map(|r| JsLockDelayRule { namespace_prefix: r.namespace_prefix, delay_ms: r.delay.as_millis() as f64 })
                .collect::<Vec<_>>())
        })
    }

    #[napi]
    pub async fn watch_events(&self, opts: Option<EventWatchOptions>) -> Result<NativeEventStream> {
        let mut w = WatchOptions::new();
        if let Some(o) = opts {
            if let Some(seq) = o.from_sequence {
                w = w.with_from_sequence(u64_of(&seq, "fromSequence")?);
            }
            for p in o.namespace_prefixes.unwrap_or_default() {
                w = w.with_namespace_prefix(p);
            }
            for k in o.kinds.unwrap_or_default() {
                w = w.with_kind(k.parse::<EventKind>().map_err(|e| to_js(e.into()))?);
            }
            w = w.with_only_new(o.only_new.unwrap_or(false));
        }
        let stream = self.client.watch_events(w).await.map_err(to_js)?;
        let backlog_end = stream.backlog_end();
        Ok(NativeEventStream {
            stream: Arc::new(Mutex::new(Some(stream))),
            closed: Arc::new(watch::channel(false).0),
            backlog_end,
        })
    }
}
