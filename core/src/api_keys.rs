//! API keys kept by the cluster (`AdminService.CreateApiKey` and friends): an admin key
//! creates, lists, revokes and rotates them against any node; the leader answers.

use std::time::Duration;

use caerus_proto::v1 as pb;

use crate::client::DlsClient;
use crate::error::Result;
use crate::router::{new_request_id, Route};

/// Per-key overrides of the node's per-key limits; `None` keeps the node's flag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApiKeyLimits {
    /// Active transactions (`--max-txns-per-api-key`).
    pub max_transactions: Option<u64>,
    /// Open event and key watches (`--max-watches-per-api-key`).
    pub max_watches: Option<u64>,
    /// Schedule-slot records (`--max-slot-records-per-api-key`).
    pub max_slot_records: Option<u64>,
}

/// What a new key may do (see [`DlsClient::create_api_key`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewApiKey {
    /// Allowed namespace prefixes (empty = every namespace).
    pub namespace_prefixes: Vec<String>,
    /// May call the operator API.
    pub admin: bool,
    /// How long it works (None = until revoked), by the cluster's clock.
    pub expires_in: Option<Duration>,
    /// Overrides of the per-key limits.
    pub limits: ApiKeyLimits,
}

/// A cluster key as listed: never its secret or hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiKeyInfo {
    /// Its name (the owner of the transactions it begins).
    pub name: String,
    /// Allowed namespace prefixes (empty = every namespace).
    pub namespace_prefixes: Vec<String>,
    /// May call the operator API.
    pub admin: bool,
    /// When it stops working (the cluster's clock, ms since the Unix epoch).
    pub expires_at_ms: Option<i64>,
    /// The admin key that created it.
    pub created_by: String,
    /// When it was created (the cluster's clock, ms since the Unix epoch).
    pub created_at_ms: i64,
    /// Its overrides of the per-key limits.
    pub limits: ApiKeyLimits,
    /// When it was last rotated.
    pub rotated_at_ms: Option<i64>,
    /// Until when the secret before the last rotation still works.
    pub previous_valid_until_ms: Option<i64>,
}

/// A secret and the key it belongs to: the secret is shown only once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiKeySecret {
    /// Send it as `authorization: Bearer <secret>` ([`crate::DlsConfig`]'s API key).
    pub secret: String,
    /// The key as the cluster keeps it.
    pub info: ApiKeyInfo,
}

fn positive(n: i64) -> Option<i64> {
    (n > 0).then_some(n)
}

impl From<pb::ApiKeyLimits> for ApiKeyLimits {
    fn from(l: pb::ApiKeyLimits) -> Self {
        let some = |n: u64| (n > 0).then_some(n);
        ApiKeyLimits {
            max_transactions: some(l.max_transactions),
            max_watches: some(l.max_watches),
            max_slot_records: some(l.max_slot_records),
        }
    }
}

impl From<ApiKeyLimits> for pb::ApiKeyLimits {
    fn from(l: ApiKeyLimits) -> Self {
        pb::ApiKeyLimits {
            max_transactions: l.max_transactions.unwrap_or(0),
            max_watches: l.max_watches.unwrap_or(0),
            max_slot_records: l.max_slot_records.unwrap_or(0),
        }
    }
}

impl From<pb::ApiKeyInfo> for ApiKeyInfo {
    fn from(k: pb::ApiKeyInfo) -> Self {
        ApiKeyInfo {
            name: k.name,
            namespace_prefixes: k.namespace_prefixes,
            admin: k.admin,
            expires_at_ms: positive(k.expires_at_ms),
            created_by: k.created_by,
            created_at_ms: k.created_at_ms,
            limits: k.limits.unwrap_or_default().into(),
            rotated_at_ms: positive(k.rotated_at_ms),
            previous_valid_until_ms: positive(k.previous_valid_until_ms),
        }
    }
}

fn secret(key: String, info: Option<pb::ApiKeyInfo>) -> ApiKeySecret {
    ApiKeySecret { secret: key, info: info.unwrap_or_default().into() }
}

impl DlsClient {
    /// Creates an API key kept by the cluster (needs an admin key) and returns its secret,
    /// shown only here. Every node accepts it once it applied the change. A retry after a
    /// lost answer (same request id, made here) gets a new secret for the same key.
    pub async fn create_api_key(&self, name: &str, key: NewApiKey) -> Result<ApiKeySecret> {
        let request = pb::CreateApiKeyRequest {
            name: name.to_string(),
            namespace_prefixes: key.namespace_prefixes,
            admin: key.admin,
            expires_in_ms: key.expires_in.map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
            request_id: new_request_id(),
            limits: Some(key.limits.into()),
        };
        let router = self.router();
        let routed = router
            .admin_unary("CreateApiKey", Route::Leader, request, router.default_options(), |mut c, r| async move {
                c.create_api_key(r).await
            })
            .await?;
        Ok(secret(routed.value.key, routed.value.info))
    }

    /// The cluster's API keys this admin key may manage, sorted by name (no secrets).
    pub async fn list_api_keys(&self) -> Result<Vec<ApiKeyInfo>> {
        let router = self.router();
        let routed = router
            .admin_unary(
                "ListApiKeys",
                Route::Leader,
                pb::ListApiKeysRequest {},
                router.default_options(),
                |mut c, r| async move { c.list_api_keys(r).await },
            )
            .await?;
        Ok(routed.value.keys.into_iter().map(ApiKeyInfo::from).collect())
    }

    /// Revokes a cluster API key: refused everywhere once applied, its open streams end.
    pub async fn revoke_api_key(&self, name: &str) -> Result<()> {
        let request = pb::RevokeApiKeyRequest { name: name.to_string() };
        let router = self.router();
        router
            .admin_unary("RevokeApiKey", Route::Leader, request, router.default_options(), |mut c, r| async move {
                c.revoke_api_key(r).await
            })
            .await?;
        Ok(())
    }

    /// Gives a cluster API key a new secret; the old one keeps working for `grace`
    /// (`Duration::ZERO`: it stops at once).
    pub async fn rotate_api_key(&self, name: &str, grace: Duration) -> Result<ApiKeySecret> {
        let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
        let request = pb::RotateApiKeyRequest { name: name.to_string(), grace_ms };
        let router = self.router();
        let routed = router
            .admin_unary("RotateApiKey", Route::Leader, request, router.default_options(), |mut c, r| async move {
                c.rotate_api_key(r).await
            })
            .await?;
        Ok(secret(routed.value.key, routed.value.info))
    }
}
