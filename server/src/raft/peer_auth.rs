//! Who may speak raft to this node. Raft messages can rewrite the log and the term on
//! disk, so the peer port refuses any call that does not prove it comes from a node of
//! this cluster before the message is even decoded:
//!
//! - every call names the node it comes from (`x-dls-from-node`);
//! - with mutual TLS, the TLS layer has checked the caller's certificate against the
//!   cluster CA; here its common name must also say it is a node's (`dls certs node`), so
//!   a client certificate of the same CA is not enough, and name the very node the call
//!   claims to come from: a node's certificate speaks for that node only;
//! - with a cluster secret, every call carries it (`x-dls-peer-secret`), compared in
//!   constant time (the node a call names is then only its word);
//! - every call names its cluster (`x-dls-cluster-id`); a node of another cluster (a
//!   copied config, a reused address) is refused. Only the discovery call asked before a
//!   node takes part in raft ([`CredentialsGate`]) skips this check: a node started with
//!   `--join` learns its cluster's id from that answer;
//! - a raft call names the node it is meant for (`x-dls-to-node`); a node refuses a call
//!   meant for another one. Otherwise two members' `--peers` entries that point at one
//!   address (a reused port, a stale list on one node) would let a node answer for a peer:
//!   a candidate could count its own vote twice, a leader replicate to itself;
//! - the calling node must be a member ([`PeerRoster`]): a removed node's certificate (or
//!   its copy of the secret, for the node it names) stops working. The discovery call
//!   skips this too: a joining node asks before it is added.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

use caerus_proto::raft::peer_discovery_service_client::PeerDiscoveryServiceClient;
use caerus_proto::raft::raft_service_client::RaftServiceClient;
use sha2::{Digest, Sha256};
use tonic::metadata::{AsciiMetadataValue, MetadataMap};
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::Channel;
use tonic::{Request, Status};

use super::peer_roster::PeerRoster;
use super::types::NodeId;
use crate::certs;

/// A raft client whose every call carries this node's credentials.
pub type PeerRpc = RaftServiceClient<InterceptedService<Channel, Stamp>>;

/// A discovery client whose every call carries this node's credentials.
pub type DiscoveryRpc = PeerDiscoveryServiceClient<InterceptedService<Channel, Stamp>>;

const CLUSTER_ID: &str = "x-dls-cluster-id";
const PEER_SECRET: &str = "x-dls-peer-secret";
const FROM_NODE: &str = "x-dls-from-node";
const TO_NODE: &str = "x-dls-to-node";

/// Shortest accepted cluster secret: it is the only thing between a loopback dev cluster
/// and a forged raft message.
pub const MIN_SECRET_LEN: usize = 16;

/// How this node proves itself to its peers and checks them.
pub struct PeerAuth {
    node_id: NodeId,
    /// Replaced once, when a joining node learns its cluster's id.
    cluster_id: RwLock<AsciiMetadataValue>,
    secret: Option<(AsciiMetadataValue, [u8; 32])>,
    mutual_tls: bool,
    /// Which nodes may call (kept up to date from raft's membership by the node).
    roster: RwLock<PeerRoster>,
}

impl std::fmt::Debug for PeerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerAuth")
            .field("node_id", &self.node_id)
            .field("cluster_id", &self.cluster_id)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("mutual_tls", &self.mutual_tls)
            .finish()
    }
}

/// Checks a cluster secret's shape; the message names the flag to fix.
pub fn validate_secret(secret: &str) -> Result<(), String> {
    if secret.len() < MIN_SECRET_LEN {
        return Err(format!(
            "the cluster secret must be at least {MIN_SECRET_LEN} characters (e.g. `openssl rand -hex 32`)"
        ));
    }
    if !secret.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the cluster secret must be printable ASCII without spaces".into());
    }
    Ok(())
}

impl PeerAuth {
    pub fn new(
        node_id: NodeId,
        cluster_id: &str,
        secret: Option<&str>,
        mutual_tls: bool,
    ) -> anyhow::Result<Arc<PeerAuth>> {
        let cluster_id = RwLock::new(parse_cluster_id(cluster_id)?);
        let secret = match secret {
            Some(s) => {
                validate_secret(s).map_err(anyhow::Error::msg)?;
                Some((s.parse().expect("validated ASCII"), digest(s.as_bytes())))
            }
            None => None,
        };
        Ok(Arc::new(PeerAuth { node_id, cluster_id, secret, mutual_tls, roster: RwLock::default() }))
    }

    /// Takes the membership and the leader this node knows now (see [`PeerRoster`]).
    pub fn observe_membership(&self, members: BTreeSet<NodeId>, leader: Option<NodeId>) {
        self.roster.write().expect("roster lock").observe(members, leader);
    }

    /// Takes the cluster id a joining node learned from its peers.
    pub fn adopt_cluster_id(&self, cluster_id: &str) -> anyhow::Result<()> {
        *self.cluster_id.write().expect("cluster id lock") = parse_cluster_id(cluster_id)?;
        Ok(())
    }

    fn cluster_id(&self) -> AsciiMetadataValue {
        self.cluster_id.read().expect("cluster id lock").clone()
    }

    /// Adds this node's credentials to an outgoing peer call, and the node it is meant for
    /// when the caller knows it.
    fn stamp(&self, md: &mut MetadataMap, to: Option<NodeId>) {
        md.insert(CLUSTER_ID, self.cluster_id());
        md.insert(FROM_NODE, self.node_id.into());
        if let Some(to) = to {
            md.insert(TO_NODE, to.into());
        }
        if let Some((value, _)) = &self.secret {
            md.insert(PEER_SECRET, value.clone());
        }
    }

    /// Refuses a peer call that does not come from a member of this cluster, or that is
    /// meant for another node (a call without `x-dls-to-node`, from a node of an earlier
    /// version, is taken).
    pub fn check<T>(&self, req: &Request<T>) -> Result<(), Status> {
        let from = self.check_credentials(req)?;
        if let Some(to) = req.metadata().get(TO_NODE) {
            let to = to.to_str().unwrap_or("?");
            if to.parse::<NodeId>().ok() != Some(self.node_id) {
                return Err(Status::permission_denied(format!(
                    "this is node {}, but the call was meant for node {to}: the caller's --peers (or member list) \
                     gives node {to} this node's address; every node needs its own address",
                    self.node_id,
                )));
            }
        }
        let own = self.cluster_id();
        match req.metadata().get(CLUSTER_ID) {
            Some(id) if *id == own => {}
            Some(id) => {
                return Err(Status::permission_denied(format!(
                    "the caller belongs to cluster {:?}, this node to cluster {:?}; check --peers and the data \
                     directories",
                    id.to_str().unwrap_or("?"),
                    own.to_str().unwrap_or("?")
                )))
            }
            None => return Err(Status::permission_denied("a peer call must name its cluster (x-dls-cluster-id)")),
        }
        self.roster.read().expect("roster lock").admit(from).map_err(Status::permission_denied)
    }

    /// Refuses a peer call without a node's credentials (cluster secret or node
    /// certificate), whatever cluster it names; the node it comes from.
    pub fn check_credentials<T>(&self, req: &Request<T>) -> Result<NodeId, Status> {
        if !self.mutual_tls && self.secret.is_none() {
            // A node started without peer credentials (a lone node) trusts no caller.
            return Err(Status::unauthenticated(
                "this node has no peer credentials configured; it accepts no peer calls",
            ));
        }
        // The credentials first: a caller without them learns nothing more.
        let holder = if self.mutual_tls {
            let certs = req.peer_certs().ok_or_else(|| {
                Status::unauthenticated("the peer port requires a node certificate signed by the cluster CA")
            })?;
            let holder = certs.first().and_then(|c| certs::node_id_of(c)).ok_or_else(|| {
                Status::unauthenticated(
                    "the peer port accepts node certificates only (made by `dls certs node`), not client certificates",
                )
            })?;
            Some(holder)
        } else {
            None
        };
        if let Some((_, expected)) = &self.secret {
            let given = req.metadata().get(PEER_SECRET).map(|v| digest(v.as_bytes()));
            // Digests of equal length, compared without an early exit: the time taken
            // tells nothing about how much of a guess was right.
            let matches = given.is_some_and(|g| g.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0);
            if !matches {
                return Err(Status::unauthenticated("missing or wrong cluster secret on a peer call"));
            }
        }
        let from =
            req.metadata().get(FROM_NODE).and_then(|v| v.to_str().ok()?.parse::<NodeId>().ok()).ok_or_else(|| {
                Status::unauthenticated("a peer call must name the node it comes from (x-dls-from-node)")
            })?;
        match holder {
            Some(holder) if holder != from => Err(Status::unauthenticated(format!(
                "the caller presents node {holder}'s certificate but claims to be node {from}: a node certificate \
                 speaks for its own node only"
            ))),
            _ => Ok(from),
        }
    }
}

fn parse_cluster_id(id: &str) -> anyhow::Result<AsciiMetadataValue> {
    id.parse().map_err(|_| anyhow::anyhow!("cluster id {id:?} is not ASCII"))
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Outgoing side: stamps every peer call with this node's credentials and, on raft
/// calls, the node they are meant for.
#[derive(Clone)]
pub struct Stamp {
    auth: Arc<PeerAuth>,
    to: Option<NodeId>,
}

impl Stamp {
    /// For calls to node `to`.
    pub fn to(auth: Arc<PeerAuth>, to: NodeId) -> Stamp {
        Stamp { auth, to: Some(to) }
    }

    /// For calls that name no receiving node (discovery, forwarded client calls).
    pub fn any(auth: Arc<PeerAuth>) -> Stamp {
        Stamp { auth, to: None }
    }
}

impl Interceptor for Stamp {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        self.auth.stamp(req.metadata_mut(), self.to);
        Ok(req)
    }
}

/// Incoming side: the gate in front of the raft service.
#[derive(Clone)]
pub struct Gate(pub Arc<PeerAuth>);

impl Interceptor for Gate {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        let checked = self.0.check(&req);
        admit_or_log(req, checked)
    }
}

/// Incoming side of the discovery call: a node's credentials, any cluster id.
#[derive(Clone)]
pub struct CredentialsGate(pub Arc<PeerAuth>);

impl Interceptor for CredentialsGate {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        let checked = self.0.check_credentials(&req).map(|_| ());
        admit_or_log(req, checked)
    }
}

fn admit_or_log(req: Request<()>, checked: Result<(), Status>) -> Result<Request<()>, Status> {
    if let Err(status) = checked {
        let from = req.metadata().get(FROM_NODE).and_then(|v| v.to_str().ok()).unwrap_or("?").to_string();
        tracing::warn!(remote = ?req.remote_addr(), claimed_node = %from, "peer call refused: {}", status.message());
        return Err(status);
    }
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamped(auth: &PeerAuth) -> Request<()> {
        stamped_to(auth, None)
    }

    fn stamped_to(auth: &PeerAuth, to: Option<NodeId>) -> Request<()> {
        let mut req = Request::new(());
        auth.stamp(req.metadata_mut(), to);
        req
    }

    #[test]
    fn a_call_meant_for_another_node_is_refused() {
        let one = PeerAuth::new(1, "c-1", Some("0123456789abcdef-secret"), false).unwrap();
        let two = PeerAuth::new(2, "c-1", Some("0123456789abcdef-secret"), false).unwrap();
        assert!(one.check(&stamped_to(&two, Some(1))).is_ok());
        let err = one.check(&stamped_to(&two, Some(3))).unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied);
        assert!(err.message().contains("this is node 1, but the call was meant for node 3"), "{err}");
        // A node sending to itself through an address listed for a peer.
        assert!(one.check(&stamped_to(&one, Some(2))).is_err());
        // A call that names no node (an earlier version's) is judged by its credentials.
        assert!(one.check(&stamped(&two)).is_ok());
    }

    #[test]
    fn the_secret_and_the_cluster_id_must_both_match() {
        let a = PeerAuth::new(1, "c-1", Some("0123456789abcdef-secret"), false).unwrap();
        let b = PeerAuth::new(2, "c-1", Some("0123456789abcdef-secret"), false).unwrap();
        assert!(a.check(&stamped(&b)).is_ok());

        let wrong_secret = PeerAuth::new(2, "c-1", Some("another-secret-of-16+"), false).unwrap();
        assert_eq!(a.check(&stamped(&wrong_secret)).unwrap_err().code(), tonic::Code::Unauthenticated);
        assert_eq!(a.check(&Request::new(())).unwrap_err().code(), tonic::Code::Unauthenticated);

        let other_cluster = PeerAuth::new(2, "c-2", Some("0123456789abcdef-secret"), false).unwrap();
        let err = a.check(&stamped(&other_cluster)).unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied);
        assert!(err.message().contains("c-2"), "{err}");
        // The discovery gate checks the credentials only, so a joining node can learn the id.
        assert!(a.check_credentials(&stamped(&other_cluster)).is_ok());
        assert!(a.check_credentials(&stamped(&wrong_secret)).is_err());
        // Once it adopts the id, its calls pass the full gate.
        other_cluster.adopt_cluster_id("c-1").unwrap();
        assert!(a.check(&stamped(&other_cluster)).is_ok());
    }

    #[test]
    fn a_call_must_name_a_member_as_its_node() {
        let one = PeerAuth::new(1, "c-1", Some("0123456789abcdef-secret"), false).unwrap();
        let four = PeerAuth::new(4, "c-1", Some("0123456789abcdef-secret"), false).unwrap();
        let mut anonymous = stamped(&four);
        anonymous.metadata_mut().remove(FROM_NODE);
        let err = one.check_credentials(&anonymous).unwrap_err();
        assert!(err.code() == tonic::Code::Unauthenticated && err.message().contains("x-dls-from-node"), "{err}");
        assert_eq!(one.check_credentials(&stamped(&four)).unwrap(), 4);

        one.observe_membership([1, 2, 3].into(), Some(1));
        let err = one.check(&stamped(&four)).unwrap_err();
        assert!(err.code() == tonic::Code::PermissionDenied && err.message().contains("not a member"), "{err}");
        // The discovery gate still answers it: a joining node asks before it is added.
        assert!(one.check_credentials(&stamped(&four)).is_ok());
        one.observe_membership([1, 2, 3, 4].into(), Some(1));
        assert!(one.check(&stamped(&four)).is_ok());
        one.observe_membership([1, 2, 3].into(), Some(1));
        assert!(one.check(&stamped(&four)).unwrap_err().message().contains("was removed"));
    }

    #[test]
    fn weak_or_missing_credentials_let_nobody_in() {
        assert!(PeerAuth::new(1, "c", Some("short"), false).is_err());
        assert!(PeerAuth::new(1, "c", Some("has a space in it!!"), false).is_err());
        let none = PeerAuth::new(1, "c", None, false).unwrap();
        assert_eq!(none.check(&stamped(&none)).unwrap_err().code(), tonic::Code::Unauthenticated);
        // Mutual TLS alone is enough; without a client certificate the call is refused.
        let tls = PeerAuth::new(1, "c", None, true).unwrap();
        assert_eq!(tls.check(&stamped(&tls)).unwrap_err().code(), tonic::Code::Unauthenticated);
    }
}
