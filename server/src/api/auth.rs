//! API keys. The keys file stores only SHA-256 hashes, so reading it never reveals a
//! key; a key may be limited to namespace prefixes.
//!
//! Every authorization decision is a method of [`Principal`]; the services only call them.
//! The tenancy rules (docs/http-api.md "Keys and tenancy" says the same for users):
//! - A key limited to namespace prefixes may lock only inside them, and every answer it
//!   gets shows only those namespaces: lock listings are filtered, a transaction's status
//!   lists only its locks there, and events are cut to their parts there ([`Principal::redact`]).
//! - A transaction is used (heartbeat, status, acquire, release, end) only with the key that
//!   began it; other keys get PERMISSION_DENIED, admin keys excepted.
//! - An admin key limited to prefixes acts on other keys' transactions only when they are
//!   *inside* its prefixes: every namespace the transaction holds, waits for or has asked
//!   for is inside, and there is at least one ([`Principal::may_use`]); a transaction that
//!   made so many requests that the oldest were forgotten is not known to be inside.
//!   Unlimited admin keys act on every transaction.
//!
//! File format (TOML):
//! ```toml
//! [[keys]]
//! name = "billing-worker"          # shown in logs, owner of the transactions it begins
//! sha256 = "9f86d081884c7d65..."   # hex SHA-256 of the key
//! namespaces = ["billing-"]        # optional: allowed namespace prefixes (absent = all)
//! admin = true                     # optional: may call the operator API (AdminService)
//! ```
//! `dls keys add --file FILE --name NAME [--namespace PREFIX]...` creates a key.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tonic::metadata::MetadataMap;

use super::errors::ApiError;
use crate::locks::{Event, EventDetail, Txn};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct KeyEntry {
    name: String,
    sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespaces: Option<Vec<String>>,
    /// May call the operator API (AdminService).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    admin: bool,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct KeysFile {
    #[serde(default)]
    keys: Vec<KeyEntry>,
}

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The key's name; "" when the server runs without keys.
    pub name: String,
    /// Allowed namespace prefixes; `None` = every namespace.
    pub namespaces: Option<Vec<String>>,
    /// May call the operator API.
    pub admin: bool,
}

impl Principal {
    pub fn check_namespace(&self, namespace: &str) -> Result<(), ApiError> {
        match &self.namespaces {
            Some(prefixes) if !prefixes.iter().any(|p| namespace.starts_with(p.as_str())) => {
                Err(ApiError::PermissionDenied(format!(
                    "API key {:?} may not use namespace {namespace:?}; it is limited to prefixes {prefixes:?}",
                    self.name
                )))
            }
            _ => Ok(()),
        }
    }

    /// Whether this key may see `namespace` (for filtering listings and events).
    pub fn sees_namespace(&self, namespace: &str) -> bool {
        self.namespaces.as_ref().is_none_or(|p| p.iter().any(|p| namespace.starts_with(p.as_str())))
    }

    pub fn require_admin(&self) -> Result<(), ApiError> {
        if self.admin {
            Ok(())
        } else {
            Err(ApiError::PermissionDenied(format!(
                "API key {:?} is not an admin key; operator calls need a key added with `dls keys add --admin`",
                self.name
            )))
        }
    }

    /// Whether this key may use and see transaction `t` (see the module's rules).
    pub fn may_use(&self, t: &Txn) -> bool {
        if t.owner == self.name {
            return true;
        }
        match (&self.namespaces, self.admin) {
            (_, false) => false,
            (None, true) => true,
            (Some(_), true) => {
                // A transaction whose oldest requests were forgotten may have asked for
                // namespaces outside: it is not known to be inside.
                let touched = t.namespaces();
                t.history_complete() && !touched.is_empty() && touched.iter().all(|ns| self.sees_namespace(ns))
            }
        }
    }

    /// PERMISSION_DENIED unless this key may use transaction `t`.
    pub fn check_txn(&self, t: &Txn) -> Result<(), ApiError> {
        if self.may_use(t) {
            return Ok(());
        }
        let txn = t.id;
        Err(ApiError::PermissionDenied(match &self.namespaces {
            Some(prefixes) if self.admin => format!(
                "transaction {txn} was begun with another API key and is not inside the prefixes {prefixes:?} of admin key {:?} (it must hold, wait for or have asked for only namespaces there)",
                self.name
            ),
            _ => format!("transaction {txn} was begun with another API key"),
        }))
    }

    /// The part of event `e` this key may see: other namespaces' parts removed, `None` when
    /// none is left. A deadlock keeps the cycle members waiting in visible namespaces (the
    /// victim id becomes 0 when the victim's member is removed); an expiry or abort keeps
    /// the visible released locks (and is dropped when none is visible, or it released
    /// none); a revoked lock is shown or dropped whole.
    pub fn redact<'e>(&self, e: &'e Event) -> Option<Cow<'e, Event>> {
        let touched = e.namespaces();
        if self.namespaces.is_none() || (!touched.is_empty() && touched.iter().all(|ns| self.sees_namespace(ns))) {
            return Some(Cow::Borrowed(e));
        }
        let mut e = e.clone();
        match &mut e.detail {
            EventDetail::DeadlockResolved { cycle, victim, .. } => {
                cycle.retain(|m| self.sees_namespace(&m.lock.namespace));
                if !cycle.iter().any(|m| m.txn == *victim) {
                    *victim = 0;
                }
                (!cycle.is_empty()).then_some(())?;
            }
            EventDetail::TransactionExpired { released, .. } | EventDetail::TransactionAborted { released, .. } => {
                released.retain(|(lock, _)| self.sees_namespace(&lock.namespace));
                (!released.is_empty()).then_some(())?;
            }
            EventDetail::LockRevoked { .. } => return None,
        }
        Some(Cow::Owned(e))
    }
}

/// The loaded keys, or none (open server). Reloaded from its file on SIGHUP, so keys are
/// added, revoked and rotated without a restart.
#[derive(Debug, Default)]
pub struct KeyRing {
    source: Option<PathBuf>,
    by_hash: RwLock<Option<Arc<Keys>>>,
}

/// Principals by the SHA-256 of their key.
type Keys = HashMap<[u8; 32], Principal>;

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

fn read_keys(path: &Path) -> anyhow::Result<Keys> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read API keys file {}: {e}", path.display()))?;
    let file: KeysFile =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("API keys file {} is not valid: {e}", path.display()))?;
    let mut by_hash = HashMap::new();
    for k in file.keys {
        let bytes = hex::decode(&k.sha256)
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .ok_or_else(|| anyhow::anyhow!("key {:?} in {}: sha256 must be 64 hex digits", k.name, path.display()))?;
        by_hash.insert(bytes, Principal { name: k.name, namespaces: k.namespaces, admin: k.admin });
    }
    Ok(by_hash)
}

impl KeyRing {
    /// A server without keys: every call is allowed.
    pub fn open() -> Self {
        KeyRing::default()
    }

    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let keys = read_keys(path)?;
        Ok(KeyRing { source: Some(path.to_path_buf()), by_hash: RwLock::new(Some(Arc::new(keys))) })
    }

    /// Reads the keys file again and returns how many keys it holds. A file that cannot be
    /// read or parsed leaves the keys as they were: a half-written file must not lock every
    /// client out (or let everyone in).
    pub fn reload(&self) -> anyhow::Result<usize> {
        let Some(path) = &self.source else { return Ok(0) };
        let keys = read_keys(path)?;
        let count = keys.len();
        *self.by_hash.write().expect("keys lock") = Some(Arc::new(keys));
        Ok(count)
    }

    /// Whether the server requires keys.
    pub fn has_keys(&self) -> bool {
        self.source.is_some()
    }

    /// How many keys are loaded (0 for an open server).
    pub fn key_count(&self) -> usize {
        self.by_hash.read().expect("keys lock").as_ref().map_or(0, |k| k.len())
    }

    /// Checks `authorization: Bearer <key>`.
    pub fn authenticate(&self, md: &MetadataMap) -> Result<Principal, ApiError> {
        let keys = self.by_hash.read().expect("keys lock").clone();
        let Some(keys) = keys else {
            // An open server has no operators to tell apart: everyone may do everything.
            return Ok(Principal { name: String::new(), namespaces: None, admin: true });
        };
        let header = md.get(caerus_proto::metadata::AUTHORIZATION).ok_or_else(|| {
            ApiError::Unauthenticated("missing API key: send metadata `authorization: Bearer <key>`".into())
        })?;
        let key = header
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| ApiError::Unauthenticated("authorization metadata must be `Bearer <key>`".into()))?;
        keys.get(&digest(key.trim())).cloned().ok_or_else(|| ApiError::Unauthenticated("unknown API key".into()))
    }
}

/// Creates a random key, appends its hash to `path` (creating the file) and returns the key.
pub fn add_key(path: &Path, name: &str, namespaces: Vec<String>, admin: bool) -> anyhow::Result<String> {
    let mut file: KeysFile = match std::fs::read_to_string(path) {
        Ok(text) => {
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{} is not a valid keys file: {e}", path.display()))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => KeysFile::default(),
        Err(e) => return Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
    };
    if file.keys.iter().any(|k| k.name == name) {
        anyhow::bail!("a key named {name:?} already exists in {}", path.display());
    }
    let mut raw = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut raw);
    let key = format!("dls_{}", hex::encode(raw));
    file.keys.push(KeyEntry {
        name: name.to_string(),
        sha256: hex::encode(digest(&key)),
        namespaces: if namespaces.is_empty() { None } else { Some(namespaces) },
        admin,
    });
    let header = "# Caerus DLS API keys. Only SHA-256 hashes are stored here; the keys themselves\n# were shown once by `dls keys add`.\n";
    std::fs::write(path, format!("{header}{}", toml::to_string(&file)?))?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_keys_authenticate_and_respect_prefixes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.toml");
        let billing = add_key(&path, "billing", vec!["billing-".into()], false).unwrap();
        let admin = add_key(&path, "admin", vec![], true).unwrap();
        assert!(add_key(&path, "admin", vec![], false).is_err());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&billing), "the file must not contain the key itself");

        let ring = KeyRing::load(&path).unwrap();
        let mut md = MetadataMap::new();
        assert!(matches!(ring.authenticate(&md), Err(ApiError::Unauthenticated(_))));
        md.insert("authorization", format!("Bearer {billing}").parse().unwrap());
        let p = ring.authenticate(&md).unwrap();
        assert!(!p.admin && p.require_admin().is_err());
        assert!(p.check_namespace("billing-jobs").is_ok());
        assert!(matches!(p.check_namespace("reports"), Err(ApiError::PermissionDenied(_))));
        md.insert("authorization", format!("Bearer {admin}").parse().unwrap());
        assert!(ring.authenticate(&md).unwrap().check_namespace("reports").is_ok());
        assert!(ring.authenticate(&md).unwrap().require_admin().is_ok());
        md.insert("authorization", "Bearer dls_wrong".parse().unwrap());
        assert!(matches!(ring.authenticate(&md), Err(ApiError::Unauthenticated(_))));
    }

    fn key(name: &str, prefixes: Option<&[&str]>, admin: bool) -> Principal {
        Principal { name: name.into(), namespaces: prefixes.map(|p| p.iter().map(|s| s.to_string()).collect()), admin }
    }

    /// A table with one transaction of `owner` per entry, holding the given locks.
    fn table(txns: &[(&str, &[&str])]) -> crate::locks::LockTable {
        use crate::locks::{Command, LockKey, LockMode, LogCommand, VictimPolicy};
        let mut t = crate::locks::LockTable::new();
        for (i, (owner, namespaces)) in txns.iter().enumerate() {
            let begin = Command::Begin {
                request_id: None,
                lease_ms: 1000,
                priority: 0,
                name: String::new(),
                owner: owner.to_string(),
            };
            t.apply(&LogCommand { now_ms: 1, cmd: begin });
            for (j, ns) in namespaces.iter().enumerate() {
                let cmd = Command::Acquire {
                    txn: i as u64 + 1,
                    request_id: format!("r{j}"),
                    lock: LockKey::new(*ns, "k"),
                    mode: LockMode::Exclusive,
                    wait_ms: 1000,
                    victim_policy: VictimPolicy::default(),
                };
                t.apply(&LogCommand { now_ms: 1, cmd });
            }
        }
        t
    }

    #[test]
    fn transactions_are_used_by_their_key_and_by_admins_inside_their_prefixes() {
        let t = table(&[("billing", &["billing-a"]), ("ops", &["billing-b", "reports"]), ("ops", &[])]);
        let (own, straddling, empty) = (t.txn(1).unwrap(), t.txn(2).unwrap(), t.txn(3).unwrap());
        let billing = key("billing", Some(&["billing-"]), false);
        let reports = key("reports", Some(&["reports"]), false);
        let billing_admin = key("badmin", Some(&["billing-"]), true);
        let admin = key("admin", None, true);
        assert!(billing.may_use(own) && !billing.may_use(straddling));
        assert!(!reports.may_use(own), "another key's transaction");
        assert!(matches!(reports.check_txn(own), Err(ApiError::PermissionDenied(m)) if m.contains("another API key")));
        assert!(billing_admin.may_use(own), "inside its prefixes");
        assert!(!billing_admin.may_use(straddling), "holds a lock outside its prefixes");
        assert!(!billing_admin.may_use(empty), "touched no namespace: not inside");
        assert!(
            matches!(billing_admin.check_txn(straddling), Err(ApiError::PermissionDenied(m)) if m.contains("not inside the prefixes"))
        );
        assert!(admin.may_use(own) && admin.may_use(straddling) && admin.may_use(empty));
    }

    #[test]
    fn a_transaction_whose_oldest_requests_were_forgotten_is_not_inside_a_limited_admins_prefixes() {
        use crate::locks::requests::MAX_REQUEST_RECORDS;
        use crate::locks::{Command, LockKey, LogCommand};
        // It asked for "reports" once, then only for billing-a, until "reports" was forgotten.
        let mut t = table(&[("ops", &["reports", "billing-a"])]);
        let release =
            |ns: &str, id: String| Command::Release { txn: 1, request_id: Some(id), lock: LockKey::new(ns, "k") };
        t.apply(&LogCommand { now_ms: 1, cmd: release("reports", "free".into()) });
        for i in 0..MAX_REQUEST_RECORDS {
            t.apply(&LogCommand { now_ms: 1, cmd: release("billing-a", format!("x{i}")) });
        }
        let txn = t.txn(1).unwrap();
        assert!(!txn.namespaces().contains("reports") && !txn.history_complete());
        assert!(!key("badmin", Some(&["billing-"]), true).may_use(txn));
        assert!(key("admin", None, true).may_use(txn));
    }

    #[test]
    fn events_are_cut_to_the_parts_a_limited_key_may_see() {
        use crate::locks::{CycleMember, FencingToken, Held, LockKey, LockMode, VictimPolicy};
        let member = |txn, ns: &str| CycleMember {
            txn,
            name: String::new(),
            priority: 0,
            lock: LockKey::new(ns, "k"),
            mode: LockMode::Exclusive,
        };
        let held = Held { mode: LockMode::Exclusive, token: FencingToken(1), since_ms: 0 };
        let event = |detail| Event { seq: 1, at_ms: 0, detail };
        let billing = key("billing", Some(&["billing-"]), false);
        let admin = key("admin", None, true);

        let deadlock = event(EventDetail::DeadlockResolved {
            cycle: vec![member(1, "billing-a"), member(2, "reports"), member(3, "billing-b")],
            victim: 2,
            policy: VictimPolicy::default(),
        });
        assert!(matches!(admin.redact(&deadlock), Some(Cow::Borrowed(_))));
        let cut = billing.redact(&deadlock).unwrap();
        let EventDetail::DeadlockResolved { cycle, victim, .. } = &cut.detail else { panic!() };
        assert_eq!(cycle.iter().map(|m| m.txn).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(*victim, 0, "the victim's part was another tenant's");
        assert_eq!(cut.namespaces(), vec!["billing-a", "billing-b"]);

        let aborted = event(EventDetail::TransactionAborted {
            txn: 4,
            name: String::new(),
            reason: String::new(),
            operator: "admin".into(),
            released: vec![(LockKey::new("reports", "k"), held), (LockKey::new("billing-a", "k"), held)],
        });
        let cut = billing.redact(&aborted).unwrap();
        assert_eq!(cut.namespaces(), vec!["billing-a"]);
        let revoked =
            |ns| event(EventDetail::LockRevoked { txn: 4, lock: LockKey::new(ns, "k"), held, cause: String::new() });
        assert!(billing.redact(&revoked("reports")).is_none());
        assert!(matches!(billing.redact(&revoked("billing-a")), Some(Cow::Borrowed(_))));
        let nothing_held = event(EventDetail::TransactionExpired { txn: 5, name: String::new(), released: vec![] });
        assert!(billing.redact(&nothing_held).is_none(), "touches no namespace of the key");
        assert!(admin.redact(&nothing_held).is_some());
    }
}
