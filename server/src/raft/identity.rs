//! The cluster id and node id a data directory belongs to (`cluster-id.toml`).
//!
//! Written when the node bootstraps a new cluster or joins one (see `bootstrap`); checked at
//! every later start and on every peer call. Every node started with the same member list derives the same id (as etcd derives
//! its cluster id from the initial member list), so the nodes of a new cluster agree on it
//! without talking first; a node configured for another cluster, or a data directory
//! copied to the wrong node, is refused instead of joining raft under a false name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::types::{Member, NodeId};
use crate::platform::file_io;

pub const FILE: &str = "cluster-id.toml";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub cluster_id: String,
    pub node_id: NodeId,
}

/// The id a cluster of these initial members gets.
pub fn derive_cluster_id(members: &BTreeMap<NodeId, Member>) -> String {
    let mut h = Sha256::new();
    h.update(b"caerus-dls cluster v1\n");
    for (id, m) in members {
        h.update(format!("{id}={}/{}\n", m.addr, m.peer_addr).as_bytes());
    }
    hex::encode(&h.finalize()[..16])
}

fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

/// Why the stored identity cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The file exists but does not hold an identity.
    #[error(
        "{} is damaged. Restore its data directory from a backup, or copy the file from another member (the same \
         cluster_id, node_id = {node_id})",
        file.display()
    )]
    Damaged {
        file: PathBuf,
        node_id: NodeId,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The data directory is another node's.
    #[error(
        "data directory {} belongs to node {} of cluster {}, but this is --node-id {node_id}; start it with \
         --node-id {} or give this node its own --data-dir",
        data_dir.display(),
        stored.node_id,
        stored.cluster_id,
        stored.node_id
    )]
    OtherNode { data_dir: PathBuf, stored: Identity, node_id: NodeId },
    /// Reading the file failed.
    #[error("cannot read {}", file.display())]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The identity cannot be encoded.
    #[error("cannot encode the cluster identity")]
    Encode(#[source] toml::ser::Error),
    /// Writing the file failed.
    #[error("cannot write {}", file.display())]
    Write {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Reads the stored identity, if the directory has one. A stored identity of another node
/// id is refused.
pub fn load(data_dir: &Path, node_id: NodeId) -> Result<Option<Identity>, IdentityError> {
    let file = path(data_dir);
    match std::fs::read_to_string(&file) {
        Ok(text) => {
            let stored: Identity = toml::from_str(&text).map_err(|e| IdentityError::Damaged {
                file: file.clone(),
                node_id,
                source: e.into(),
            })?;
            if stored.node_id != node_id {
                return Err(IdentityError::OtherNode { data_dir: data_dir.to_path_buf(), stored, node_id });
            }
            Ok(Some(stored))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            Err(IdentityError::Damaged { file, node_id, source: e.into() })
        }
        Err(source) => Err(IdentityError::Read { file, source }),
    }
}

/// Stores the identity, durably, before the node casts a vote or accepts an entry under it.
pub fn store(data_dir: &Path, identity: &Identity) -> Result<(), IdentityError> {
    let file = path(data_dir);
    let text = format!(
        "# Written by dls when the node bootstrapped or joined its cluster. Do not edit: peers of another\n\
         # cluster id are refused, and a node with this file but no raft log refuses to start (its log was lost).\n{}",
        toml::to_string(identity).map_err(IdentityError::Encode)?
    );
    let tmp = file.with_extension("toml.tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| file_io::sync_file(&tmp))
        .and_then(|()| std::fs::rename(&tmp, &file))
        .and_then(|()| file_io::sync_dir(data_dir))
        .map_err(|source| IdentityError::Write { file: file.clone(), source })?;
    tracing::info!(cluster_id = %identity.cluster_id, node = identity.node_id, "cluster identity stored in {}", file.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(peer_port: u16) -> BTreeMap<NodeId, Member> {
        (1..=3)
            .map(|id| (id, Member { addr: format!("10.0.0.{id}:7070"), peer_addr: format!("10.0.0.{id}:{peer_port}") }))
            .collect()
    }

    #[test]
    fn every_node_derives_the_same_id_and_another_member_list_another() {
        assert_eq!(derive_cluster_id(&members(7080)), derive_cluster_id(&members(7080)));
        assert_ne!(derive_cluster_id(&members(7080)), derive_cluster_id(&members(7081)));
    }

    #[test]
    fn the_stored_identity_is_read_back_and_another_node_id_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path(), 2).unwrap(), None);
        let first = Identity { cluster_id: "abc".into(), node_id: 2 };
        store(dir.path(), &first).unwrap();
        assert_eq!(load(dir.path(), 2).unwrap(), Some(first));
        let err = load(dir.path(), 3).unwrap_err();
        assert!(err.to_string().contains("--node-id 2"), "{err}");
    }
}
