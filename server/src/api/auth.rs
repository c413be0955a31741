//! API keys: which [`Principal`] a call comes from. The keys file stores only SHA-256
//! hashes, so reading it never reveals a key; a key may be limited to namespace prefixes
//! (what a principal may do is decided in `request::principal`).
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
//!
//! The file is for bootstrap; keys kept by the cluster (`dls keys create`, replicated
//! through raft, see `locks::table::api_keys`) are merged in as each node applies them. A
//! key in both (same name or same hash) is refused at start, naming it; a reload that adds
//! one is refused; a cluster key that meets a file key later (another node's file) is left
//! out on this node, with an error in its log, and the file's key stays.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tonic::metadata::MetadataMap;
use tonic::Status;

use super::errors::ApiError;
use crate::locks::ApiKey;
use crate::request::Principal;

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

/// The loaded keys, or none (open server). Reloaded from its file on SIGHUP, so keys are
/// added, revoked and rotated without a restart; a stream opened with a key ends when the
/// reload revokes it ([`KeyHold`]).
#[derive(Debug)]
pub struct KeyRing {
    source: Option<PathBuf>,
    /// The file's keys and the cluster's, as last read and applied.
    parts: Mutex<Parts>,
    /// The two merged, replaced whole by a reload or a change of the cluster's keys;
    /// streams watch it.
    by_hash: watch::Sender<Option<Arc<Keys>>>,
}

#[derive(Debug, Default)]
struct Parts {
    file: Keys,
    cluster: Arc<Vec<ApiKey>>,
}

/// A key both in the file and in the cluster.
fn conflicts(file: &Keys, cluster: &[ApiKey]) -> Vec<String> {
    cluster
        .iter()
        .filter(|c| file.contains_key(&c.sha256) || file.values().any(|f| f.name == c.name))
        .map(|c| c.name.clone())
        .collect()
}

/// The file's keys with the cluster's, minus those in both (see the module's doc); a
/// rotated key's old secret is in too while its grace lasts.
fn merge(file: &Keys, cluster: &[ApiKey]) -> Keys {
    let skip = conflicts(file, cluster);
    let mut keys = file.clone();
    for k in cluster.iter().filter(|k| !skip.contains(&k.name)) {
        let who =
            Principal { name: k.name.clone(), namespaces: k.namespaces.clone(), admin: k.admin, limits: k.limits };
        if let Some((old, _)) = k.previous {
            keys.insert(old, who.clone());
        }
        keys.insert(k.sha256, who);
    }
    keys
}

/// Principals by the SHA-256 of their key.
type Keys = HashMap<[u8; 32], Principal>;

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

fn read_keys(path: &Path) -> anyhow::Result<Keys> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read API keys file {}", path.display()))?;
    let file: KeysFile =
        toml::from_str(&text).with_context(|| format!("API keys file {} is not valid", path.display()))?;
    let mut by_hash = HashMap::new();
    for k in file.keys {
        if k.name.trim().is_empty() {
            // "" is the one caller of a server without keys (the owner of its transactions,
            // and one tenant with the whole of every node-wide bound): no key may pose as it.
            anyhow::bail!("a key in {} has an empty name; give every key a name", path.display());
        }
        let bytes = hex::decode(&k.sha256)
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .ok_or_else(|| anyhow::anyhow!("key {:?} in {}: sha256 must be 64 hex digits", k.name, path.display()))?;
        by_hash.insert(
            bytes,
            Principal { name: k.name, namespaces: k.namespaces, admin: k.admin, limits: Default::default() },
        );
    }
    Ok(by_hash)
}

impl KeyRing {
    /// A server without keys: every call is allowed.
    pub fn open() -> Self {
        KeyRing { source: None, parts: Mutex::default(), by_hash: watch::Sender::new(None) }
    }

    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let keys = read_keys(path)?;
        Ok(KeyRing {
            source: Some(path.to_path_buf()),
            by_hash: watch::Sender::new(Some(Arc::new(keys.clone()))),
            parts: Mutex::new(Parts { file: keys, cluster: Arc::default() }),
        })
    }

    fn parts(&self) -> std::sync::MutexGuard<'_, Parts> {
        self.parts.lock().expect("key ring lock")
    }

    /// Reads the keys file again and returns how many keys it holds. A file that cannot be
    /// read or parsed, or that has a key the cluster has too, leaves the keys as they were:
    /// a half-written file must not lock every client out (or let everyone in).
    // On SIGHUP, which Windows lacks (the node restarts there to read new keys).
    #[cfg(unix)]
    pub fn reload(&self) -> anyhow::Result<usize> {
        let Some(path) = &self.source else { return Ok(0) };
        let keys = read_keys(path)?;
        let count = keys.len();
        let mut parts = self.parts();
        let both = conflicts(&keys, &parts.cluster);
        if !both.is_empty() {
            anyhow::bail!(
                "{} has keys the cluster keeps too: {both:?}; a key lives in one place (remove it from the file, or \
                 revoke the cluster's with `dls keys revoke`)",
                path.display()
            );
        }
        self.by_hash.send_replace(Some(Arc::new(merge(&keys, &parts.cluster))));
        parts.file = keys;
        Ok(count)
    }

    /// Takes the cluster's keys over (as this node applied them). Without a keys file the
    /// server is open and stays so: cluster keys are enforced by nodes that require keys.
    /// Answers the names left out because the file has them too.
    pub fn set_cluster(&self, cluster: Arc<Vec<ApiKey>>) -> Vec<String> {
        if self.source.is_none() {
            return Vec::new();
        }
        let mut parts = self.parts();
        let both = conflicts(&parts.file, &cluster);
        self.by_hash.send_replace(Some(Arc::new(merge(&parts.file, &cluster))));
        parts.cluster = cluster;
        both
    }

    /// Follows the cluster's keys as this node applies them: the first set (restored from
    /// the data directory) must not meet the file, later ones are merged as they come.
    pub fn follow_cluster(self: &Arc<Self>, mut keys: watch::Receiver<Arc<Vec<ApiKey>>>) -> anyhow::Result<()> {
        let first = keys.borrow_and_update().clone();
        let both = self.set_cluster(first);
        if let Some(path) = self.source.as_ref().filter(|_| !both.is_empty()) {
            anyhow::bail!(
                "API keys {both:?} are both in {} and kept by the cluster; a key lives in one place: remove it \
                 from the file (or revoke the cluster's with `dls keys revoke`) and start again",
                path.display()
            );
        }
        let ring = Arc::downgrade(self);
        tokio::spawn(async move {
            while keys.changed().await.is_ok() {
                let Some(ring) = ring.upgrade() else { return };
                let cluster = keys.borrow_and_update().clone();
                let both = ring.set_cluster(cluster);
                if !both.is_empty() {
                    tracing::error!(
                        keys = ?both,
                        "cluster API keys with the name or secret of a key in this node's keys file are not accepted \
                         here (the file's key is); remove them from the file"
                    );
                }
            }
        });
        Ok(())
    }

    /// Whether the keys file has a key of this name (a cluster key may not take it).
    pub fn file_has(&self, name: &str) -> bool {
        self.parts().file.values().any(|k| k.name == name)
    }

    /// Whether the server requires keys.
    pub fn has_keys(&self) -> bool {
        self.source.is_some()
    }

    /// How many keys are in force, the file's and the cluster's (0 for an open server).
    pub fn key_count(&self) -> usize {
        self.by_hash.borrow().as_ref().map_or(0, |k| k.len())
    }

    /// Checks `authorization: Bearer <key>`.
    pub fn authenticate(&self, md: &MetadataMap) -> Result<Principal, ApiError> {
        let keys = self.by_hash.borrow().clone();
        Ok(find(keys.as_deref(), md)?.0)
    }

    /// Checks the key of a call that opens a stream, and returns the hold that ends the
    /// stream when a reload revokes the key ([`KeyHold::guard`]).
    pub fn authenticate_stream(&self, md: &MetadataMap) -> Result<(Principal, KeyHold), ApiError> {
        // Watched from the keys it is checked against: a reload between the check and the
        // watch is not missed.
        let mut keys = self.by_hash.subscribe();
        let current = keys.borrow_and_update().clone();
        let (who, hash) = find(current.as_deref(), md)?;
        let hold = KeyHold { watched: hash.map(|hash| (keys, hash, who.clone())) };
        Ok((who, hold))
    }
}

/// The principal of `authorization: Bearer <key>` among `keys` (`None`: an open server),
/// and the key's hash.
fn find(keys: Option<&Keys>, md: &MetadataMap) -> Result<(Principal, Option<[u8; 32]>), ApiError> {
    let Some(keys) = keys else {
        // An open server has no operators to tell apart: everyone may do everything.
        return Ok((
            Principal { name: String::new(), namespaces: None, admin: true, limits: Default::default() },
            None,
        ));
    };
    let header = md.get(caerus_proto::metadata::AUTHORIZATION).ok_or_else(|| {
        ApiError::Unauthenticated("missing API key: send metadata `authorization: Bearer <key>`".into())
    })?;
    let key = header
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| ApiError::Unauthenticated("authorization metadata must be `Bearer <key>`".into()))?;
    let hash = digest(key.trim());
    let who = keys.get(&hash).cloned().ok_or_else(|| ApiError::Unauthenticated("unknown API key".into()))?;
    Ok((who, Some(hash)))
}

/// The key a stream was opened with, watched for revocation: a reload that removes the key
/// ends the stream with UNAUTHENTICATED, one that leaves it fewer rights than the stream
/// was opened with (namespaces narrowed, admin taken away, renamed) with PERMISSION_DENIED.
/// Streams forwarded by a follower are opened on the leader, so the leader's keys decide.
pub struct KeyHold {
    /// `None` on an open server: nothing to revoke.
    watched: Option<Watched>,
}

/// The keys as reloads replace them, the hash of the stream's key, and what it was then.
type Watched = (watch::Receiver<Option<Arc<Keys>>>, [u8; 32], Principal);

type GuardedStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

impl KeyHold {
    /// Resolves, with the error that ends the stream, once a reload revoked the key (see
    /// [`KeyHold`]); never on an open server.
    pub async fn revoked(self) -> ApiError {
        let Some((mut keys, hash, opened_as)) = self.watched else { return std::future::pending().await };
        loop {
            if keys.changed().await.is_err() {
                // The key ring is gone with the server.
                return std::future::pending().await;
            }
            let current = keys.borrow_and_update().clone();
            if let Err(e) = standing(current.as_deref(), &hash, &opened_as) {
                tracing::info!(key = %opened_as.name, "a reload revoked an open stream's key: {e}");
                return e;
            }
        }
    }

    /// `stream`, ended with the revocation's error as soon as the key is revoked.
    pub fn guard<T: Send + 'static>(self, stream: GuardedStream<T>) -> GuardedStream<T> {
        if self.watched.is_none() {
            return stream;
        }
        let revoked = Box::pin(self.revoked());
        Box::pin(futures::stream::unfold(Some((stream, revoked)), |open| async move {
            let (mut stream, mut revoked) = open?;
            tokio::select! {
                item = stream.next() => item.map(|item| (item, Some((stream, revoked)))),
                e = &mut revoked => Some((Err(Status::from(e)), None)),
            }
        }))
    }
}

/// Whether a stream opened as `opened_as` with the key of `hash` may go on under `keys`.
fn standing(keys: Option<&Keys>, hash: &[u8; 32], opened_as: &Principal) -> Result<(), ApiError> {
    let Some(keys) = keys else { return Ok(()) };
    match keys.get(hash) {
        None => Err(ApiError::Unauthenticated(format!(
            "API key {:?} was removed from the keys file (or revoked, expired or rotated in the cluster); its \
             open streams are closed",
            opened_as.name
        ))),
        Some(now) if !now.covers(opened_as) => Err(ApiError::permission_denied(format!(
            "the rights of API key {:?} changed (now: namespaces {}, admin {}); streams opened before are closed, \
             open them again",
            now.name,
            now.namespaces.as_ref().map_or("all".to_string(), |p| format!("{p:?}")),
            now.admin
        ))),
        Some(_) => Ok(()),
    }
}

/// Creates a random key, appends its hash to `path` (creating the file) and returns the key.
/// The file is written readable by its owner only (`secret_files`), also over a wider one.
pub fn add_key(path: &Path, name: &str, namespaces: Vec<String>, admin: bool) -> anyhow::Result<String> {
    let mut file: KeysFile = match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text).with_context(|| format!("{} is not a valid keys file", path.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => KeysFile::default(),
        Err(e) => return Err(anyhow::Error::new(e).context(format!("cannot read {}", path.display()))),
    };
    if file.keys.iter().any(|k| k.name == name) {
        anyhow::bail!("a key named {name:?} already exists in {}", path.display());
    }
    let (key, hash) = crate::engine::api_keys::new_secret();
    file.keys.push(KeyEntry {
        name: name.to_string(),
        sha256: hex::encode(hash),
        namespaces: if namespaces.is_empty() { None } else { Some(namespaces) },
        admin,
    });
    let header = "# Caerus DLS API keys. Only SHA-256 hashes are stored here; the keys themselves\n# were shown once by `dls keys add`.\n";
    crate::secret_files::write_private(path, &format!("{header}{}", toml::to_string(&file)?))?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineError;

    #[test]
    fn added_keys_authenticate_and_respect_prefixes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.toml");
        let billing = add_key(&path, "billing", vec!["billing-".into()], false).unwrap();
        let admin = add_key(&path, "admin", vec![], true).unwrap();
        assert!(add_key(&path, "admin", vec![], false).is_err());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&billing), "the file must not contain the key itself");
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600, "the keys file is its owner's only");

        let ring = KeyRing::load(&path).unwrap();
        let mut md = MetadataMap::new();
        assert!(matches!(ring.authenticate(&md), Err(ApiError::Unauthenticated(_))));
        md.insert("authorization", format!("Bearer {billing}").parse().unwrap());
        let p = ring.authenticate(&md).unwrap();
        assert!(!p.admin && p.require_admin().is_err());
        assert!(p.check_namespace("billing-jobs").is_ok());
        assert!(matches!(
            p.check_namespace("reports"),
            Err(EngineError::OutsideNamespaces { prefixes, .. }) if prefixes == ["billing-"]
        ));
        md.insert("authorization", format!("Bearer {admin}").parse().unwrap());
        assert!(ring.authenticate(&md).unwrap().check_namespace("reports").is_ok());
        assert!(ring.authenticate(&md).unwrap().require_admin().is_ok());
        md.insert("authorization", "Bearer dls_wrong".parse().unwrap());
        assert!(matches!(ring.authenticate(&md), Err(ApiError::Unauthenticated(_))));
    }

    #[tokio::test]
    async fn a_reload_ends_the_streams_of_a_removed_or_narrowed_key_only() {
        use futures::FutureExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.toml");
        let billing = add_key(&path, "billing", vec!["billing-".into()], false).unwrap();
        let ops = add_key(&path, "ops", vec![], true).unwrap();
        let ring = KeyRing::load(&path).unwrap();
        let hold = |key: &str| {
            let mut md = MetadataMap::new();
            md.insert("authorization", format!("Bearer {key}").parse().unwrap());
            ring.authenticate_stream(&md).unwrap().1.revoked().boxed()
        };
        let (mut billing_hold, mut ops_hold) = (hold(&billing), hold(&ops));
        // A key added, or rights widened: nothing ends.
        let text = std::fs::read_to_string(&path).unwrap();
        add_key(&path, "other", vec![], false).unwrap();
        std::fs::write(&path, std::fs::read_to_string(&path).unwrap().replace("\"billing-\"", "\"billing\"")).unwrap();
        ring.reload().unwrap();
        assert!((&mut billing_hold).now_or_never().is_none() && (&mut ops_hold).now_or_never().is_none());
        // ops loses admin: its stream ends with PERMISSION_DENIED; billing's goes on.
        std::fs::write(&path, text.replace("admin = true\n", "")).unwrap();
        ring.reload().unwrap();
        assert!(matches!(ops_hold.await, ApiError::Engine(EngineError::PermissionDenied(m)) if m.contains("\"ops\"")));
        assert!((&mut billing_hold).now_or_never().is_none());
        // billing removed: UNAUTHENTICATED.
        let without_billing = KeysFile {
            keys: toml::from_str::<KeysFile>(&text).unwrap().keys.into_iter().filter(|k| k.name != "billing").collect(),
        };
        std::fs::write(&path, toml::to_string(&without_billing).unwrap()).unwrap();
        ring.reload().unwrap();
        assert!(matches!(billing_hold.await, ApiError::Unauthenticated(m) if m.contains("removed")));
        // An open server has nothing to revoke.
        let open = KeyRing::open().authenticate_stream(&MetadataMap::new()).unwrap().1;
        assert!(open.revoked().now_or_never().is_none());
    }

    #[test]
    fn cluster_keys_merge_with_the_file_and_a_key_in_both_is_refused() {
        use crate::locks::KeyLimits;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.toml");
        let ops = add_key(&path, "ops", vec![], true).unwrap();
        let ring = KeyRing::load(&path).unwrap();
        let (secret, hash) = crate::engine::api_keys::new_secret();
        let cluster_key = |name: &str, previous| ApiKey {
            name: name.into(),
            sha256: hash,
            namespaces: Some(vec!["w-".into()]),
            admin: false,
            expires_at_ms: None,
            created_by: "ops".into(),
            created_at_ms: 1,
            limits: KeyLimits { max_txns: Some(3), ..KeyLimits::default() },
            request_id: "r".into(),
            previous,
            rotated_at_ms: 0,
        };
        let bearer = |key: &str| {
            let mut md = MetadataMap::new();
            md.insert("authorization", format!("Bearer {key}").parse().unwrap());
            md
        };
        assert!(ring.set_cluster(Arc::new(vec![cluster_key("worker", None)])).is_empty());
        let worker = ring.authenticate(&bearer(&secret)).unwrap();
        assert_eq!((worker.name.as_str(), worker.limits.max_txns), ("worker", Some(3)));
        assert!(ring.authenticate(&bearer(&ops)).unwrap().admin, "the file's keys stay");

        // A rotated key's old secret works while its grace lasts.
        let (old, old_hash) = crate::engine::api_keys::new_secret();
        ring.set_cluster(Arc::new(vec![cluster_key("worker", Some((old_hash, 99)))]));
        assert_eq!(ring.authenticate(&bearer(&old)).unwrap().name, "worker");

        // A reload that brings a key of the cluster's name is refused, naming it.
        add_key(&path, "worker", vec![], false).unwrap();
        let err = ring.reload().unwrap_err().to_string();
        assert!(err.contains("[\"worker\"]"), "{err}");
        assert!(ring.authenticate(&bearer(&secret)).is_ok(), "the keys in force stay");

        // A cluster key with the file's name is left out on this node.
        let mut fresh = KeyRing::load(&path).unwrap();
        assert_eq!(fresh.set_cluster(Arc::new(vec![cluster_key("worker", None)])), vec!["worker".to_string()]);
        assert!(matches!(fresh.authenticate(&bearer(&secret)), Err(ApiError::Unauthenticated(_))));
        // An open server stays open.
        fresh = KeyRing::open();
        assert!(fresh.set_cluster(Arc::new(vec![cluster_key("x", None)])).is_empty());
        assert!(fresh.authenticate(&MetadataMap::new()).is_ok());
    }

    #[test]
    fn a_key_without_a_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.toml");
        std::fs::write(&path, format!("[[keys]]\nname = \" \"\nsha256 = \"{}\"\n", "ab".repeat(32))).unwrap();
        let err = KeyRing::load(&path).unwrap_err().to_string();
        assert!(err.contains("empty name"), "{err}");
    }
}
