//! API keys kept by the cluster, as an admin creates, lists, revokes and rotates them (the
//! replicated rules are in the lock table's `api_keys` module; the key ring that enforces
//! them on each node is `api::auth`).
//!
//! The leader makes every secret here and proposes only its SHA-256, so a secret is never
//! in the log, a snapshot or another node's memory; it is answered once.

use rand::RngCore;
use sha2::{Digest, Sha256};

use super::{Engine, EngineError, EngineResult, Principal};
use crate::locks::{ApiKey, Command, KeyActor, KeyLimits, NewApiKey, Outcome};

/// The longest grace of a rotation and the longest life of a key.
pub const MAX_GRACE_MS: u64 = 30 * 24 * 3600 * 1000;
pub const MAX_EXPIRY_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

/// A new random secret (`dls_` and 64 hex digits) and its SHA-256.
pub fn new_secret() -> (String, [u8; 32]) {
    let mut raw = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut raw);
    let key = format!("dls_{}", hex::encode(raw));
    let hash = Sha256::digest(key.as_bytes()).into();
    (key, hash)
}

/// What an admin asks for in `CreateApiKey`.
pub struct KeyRequest {
    pub name: String,
    pub namespaces: Option<Vec<String>>,
    pub admin: bool,
    pub expires_in_ms: u64,
    pub limits: KeyLimits,
    pub request_id: String,
}

fn actor(who: &Principal) -> KeyActor {
    KeyActor { name: who.name.clone(), prefixes: who.namespaces.clone() }
}

fn outside(who: &Principal, key: &str) -> EngineError {
    EngineError::PermissionDenied(format!(
        "admin key {:?} is limited to namespace prefixes {:?}; API key {key:?} would reach beyond them (a key of \
         every namespace, or one with a namespace outside them)",
        who.name,
        who.namespaces.clone().unwrap_or_default()
    ))
}

impl Engine {
    /// Creates a cluster key for admin `who` and answers its secret with the key as
    /// applied. Creates are serialized on the leader so the bound is counted exactly.
    pub async fn create_api_key(&self, who: &Principal, req: KeyRequest) -> EngineResult<(String, ApiKey)> {
        self.node.require_leader()?;
        let by = actor(who);
        if !by.may_manage(req.namespaces.as_deref()) {
            return Err(outside(who, &req.name));
        }
        if who.namespaces.is_some() && !req.limits.is_empty() {
            // Overrides can raise a key above the node's shares, which every namespace pays for.
            return Err(EngineError::PermissionDenied(format!(
                "admin key {:?} is limited to namespace prefixes; per-key limit overrides need an admin key \
                 without --namespace",
                who.name
            )));
        }
        let _one_at_a_time = self.key_creates.lock().await;
        let retry = {
            let st = self.node.state().read().expect("state lock");
            let retry = st.table.api_key(&req.name).is_some_and(|k| k.request_id == req.request_id);
            if !retry {
                self.node.limits().admit_api_key(&st.table, &who.name)?;
            }
            retry
        };
        let expires_at_ms =
            (req.expires_in_ms > 0).then(|| self.node.log_clock().now_ms().saturating_add(req.expires_in_ms));
        let (secret, sha256) = new_secret();
        let key = NewApiKey {
            name: req.name.clone(),
            sha256,
            namespaces: req.namespaces,
            admin: req.admin,
            expires_at_ms,
            limits: req.limits,
        };
        let cmd = Command::CreateApiKey { by, request_id: req.request_id, key };
        match self.node.propose_for(who, cmd).await? {
            Outcome::ApiKeyCreated { retried } => {
                if retried || retry {
                    tracing::info!(key = %req.name, by = %who.name, "a retried create gave the key a new secret");
                }
                Ok((secret, self.api_key_as_applied(&req.name)?))
            }
            Outcome::Rejected(r) => Err(EngineError::Rejected(r)),
            other => Err(super::unexpected(other)),
        }
    }

    /// The keys `who` may manage, by name, as of everything committed before the call.
    pub async fn list_api_keys(&self, who: &Principal) -> EngineResult<Vec<ApiKey>> {
        self.node.require_leader()?;
        self.node.linearizable_read().await?;
        let by = actor(who);
        let st = self.node.state().read().expect("state lock");
        Ok(st.table.api_keys().filter(|k| by.may_manage(k.namespaces.as_deref())).cloned().collect())
    }

    pub async fn revoke_api_key(&self, who: &Principal, name: String) -> EngineResult<()> {
        self.node.require_leader()?;
        match self.node.propose_for(who, Command::RevokeApiKey { by: actor(who), name }).await? {
            Outcome::ApiKeyRevoked => Ok(()),
            Outcome::Rejected(r) => Err(EngineError::Rejected(r)),
            other => Err(super::unexpected(other)),
        }
    }

    /// Gives key `name` a new secret; the old one works `grace_ms` longer (by the log's clock).
    pub async fn rotate_api_key(&self, who: &Principal, name: String, grace_ms: u64) -> EngineResult<(String, ApiKey)> {
        self.node.require_leader()?;
        let (secret, sha256) = new_secret();
        let cmd = Command::RotateApiKey { by: actor(who), name: name.clone(), sha256, grace_ms };
        match self.node.propose_for(who, cmd).await? {
            Outcome::ApiKeyRotated { .. } => Ok((secret, self.api_key_as_applied(&name)?)),
            Outcome::Rejected(r) => Err(EngineError::Rejected(r)),
            other => Err(super::unexpected(other)),
        }
    }

    fn api_key_as_applied(&self, name: &str) -> EngineResult<ApiKey> {
        let st = self.node.state().read().expect("state lock");
        // Revoked again between the apply and this read: what the caller made is gone.
        st.table.api_key(name).cloned().ok_or_else(|| {
            EngineError::Unavailable(format!("API key {name:?} was revoked or expired right after this change"))
        })
    }
}
