//! The values of API keys kept by the cluster (see `table::api_keys` for the rules): a key
//! as the cluster keeps it, what a create carries, who manages it, what happened to it, and
//! the bounds of a key's fields.

use serde::{Deserialize, Serialize};

/// The longest key name, namespace prefix list and prefix (checked at the API too).
pub const MAX_KEY_NAME: usize = 128;
pub const MAX_KEY_PREFIXES: usize = 32;

/// Per-key overrides of the per-key shares of the node's bounds (the
/// `--max-*-per-api-key` flags); `None` keeps the node's flag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyLimits {
    /// Active transactions (`--max-txns-per-api-key`).
    pub max_txns: Option<u64>,
    /// Open event and key watches (`--max-watches-per-api-key`).
    pub max_watches: Option<u64>,
    /// Schedule-slot records (`--max-slot-records-per-api-key`).
    pub max_slot_records: Option<u64>,
}

impl KeyLimits {
    pub fn is_empty(&self) -> bool {
        *self == KeyLimits::default()
    }
}

/// A key as the cluster keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKey {
    pub name: String,
    /// SHA-256 of the secret.
    pub sha256: [u8; 32],
    /// Allowed namespace prefixes; `None` = every namespace.
    pub namespaces: Option<Vec<String>>,
    /// May call the operator API.
    pub admin: bool,
    /// When it stops working (the log's clock, ms since the epoch).
    pub expires_at_ms: Option<u64>,
    /// The name of the admin key that created it ("" on a server without keys).
    pub created_by: String,
    pub created_at_ms: u64,
    pub limits: KeyLimits,
    /// The request id of its creation: a retry of it is told apart from a second create.
    pub request_id: String,
    /// The secret before the last rotation, still accepted until the given time (the log's
    /// clock), so clients can move to the new one without downtime.
    pub previous: Option<([u8; 32], u64)>,
    /// When it was last rotated (0 = never).
    pub rotated_at_ms: u64,
}

impl ApiKey {
    /// The earliest time (the log's clock) something about it is due: its expiry or the
    /// end of its old secret's grace.
    pub(crate) fn due_at(&self) -> Option<u64> {
        [self.expires_at_ms, self.previous.map(|(_, until)| until)].into_iter().flatten().min()
    }

    /// The namespaces its events are filed under (none for an unlimited key: only watchers
    /// of every namespace see those).
    pub(crate) fn event_namespaces(&self) -> Vec<String> {
        self.namespaces.clone().unwrap_or_default()
    }
}

/// A key to create (what `Command::CreateApiKey` carries).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewApiKey {
    pub name: String,
    pub sha256: [u8; 32],
    pub namespaces: Option<Vec<String>>,
    pub admin: bool,
    pub expires_at_ms: Option<u64>,
    pub limits: KeyLimits,
}

/// The admin key a key command is made with, and the prefixes it is limited to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyActor {
    pub name: String,
    /// `None` = an admin of every namespace.
    pub prefixes: Option<Vec<String>>,
}

impl KeyActor {
    /// Whether it may manage a key limited to `namespaces`: every one of them inside its
    /// prefixes, and at least one (a key of every namespace reaches beyond any prefix).
    pub fn may_manage(&self, namespaces: Option<&[String]>) -> bool {
        match (&self.prefixes, namespaces) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(mine), Some(theirs)) => {
                !theirs.is_empty() && theirs.iter().all(|t| mine.iter().any(|m| t.starts_with(m.as_str())))
            }
        }
    }
}

/// What happened to a key (the `ApiKeyChanged` event). New variants go last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ApiKeyChange {
    Created,
    Revoked,
    Rotated,
    Expired,
}

impl ApiKeyChange {
    pub fn as_str(self) -> &'static str {
        match self {
            ApiKeyChange::Created => "CREATED",
            ApiKeyChange::Revoked => "REVOKED",
            ApiKeyChange::Rotated => "ROTATED",
            ApiKeyChange::Expired => "EXPIRED",
        }
    }
}

/// Why a key cannot be made as asked, checked here so that no entry can put a key the API
/// would refuse into the table.
pub fn invalid_new_key(key: &NewApiKey) -> Option<String> {
    if key.name.trim().is_empty() || key.name.len() > MAX_KEY_NAME || key.name.chars().any(char::is_control) {
        return Some(format!(
            "an API key's name must be 1 to {MAX_KEY_NAME} bytes without control characters, not {:?}",
            key.name
        ));
    }
    if let Some(p) = &key.namespaces {
        if p.is_empty() || p.len() > MAX_KEY_PREFIXES {
            return Some(format!("a limited key needs 1 to {MAX_KEY_PREFIXES} namespace prefixes"));
        }
        if p.iter().any(|p| p.is_empty() || p.len() > 256 || p.chars().any(char::is_control)) {
            return Some("a namespace prefix must be 1 to 256 bytes without control characters".into());
        }
    }
    let limits = [key.limits.max_txns, key.limits.max_watches, key.limits.max_slot_records];
    if limits.iter().flatten().any(|&n| n == 0) {
        return Some("a per-key limit must be at least 1 (leave it out to keep the node's flag)".into());
    }
    None
}
