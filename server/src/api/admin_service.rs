//! The operator API: list locks, abort a transaction, a node's view of the cluster, and
//! membership changes. Every call needs an admin key when the server has a keys file; an
//! admin key limited to namespace prefixes lists and aborts only inside them (rules in
//! `auth`) and may not change the membership (that affects every namespace).

use std::sync::Arc;
use std::time::Duration;

use caerus_proto::v1 as pb;
use caerus_proto::v1::admin_service_server::AdminService;
use tonic::{Request, Response, Status};

use super::auth::{KeyRing, Principal};
use super::errors::ApiError;
use super::{convert, validate};
use crate::locks::{Command, Outcome};
use crate::members::{self, Membership, MembershipError};
use crate::node::Node;
use crate::raft::types::Member;

pub struct AdminApi {
    pub node: Arc<Node>,
    pub keys: Arc<KeyRing>,
}

type ApiResult<T> = Result<T, ApiError>;

type SnapshotStream = std::pin::Pin<Box<dyn futures::Stream<Item = Result<pb::SaveSnapshotResponse, Status>> + Send>>;

/// A backup is streamed in pieces of this size.
const BACKUP_CHUNK: usize = 1024 * 1024;

/// Streams `file` from its start in [`BACKUP_CHUNK`] pieces; a read error ends the stream
/// with INTERNAL, so the client never takes a partial file for a whole one (the file's
/// trailer would tell it anyway).
fn stream_file(mut file: std::fs::File) -> SnapshotStream {
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    tokio::task::spawn_blocking(move || loop {
        let mut chunk = vec![0u8; BACKUP_CHUNK];
        let sent = match std::io::Read::read(&mut file, &mut chunk) {
            Ok(0) => return,
            Ok(n) => {
                chunk.truncate(n);
                tx.blocking_send(Ok(pb::SaveSnapshotResponse { chunk }))
            }
            Err(e) => tx.blocking_send(Err(Status::from(ApiError::Internal(format!("cannot read the backup: {e}"))))),
        };
        if sent.is_err() {
            return;
        }
    });
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}

impl AdminApi {
    fn admin<T>(&self, req: &Request<T>) -> ApiResult<Principal> {
        let who = self.keys.authenticate(req.metadata())?;
        who.require_admin()?;
        Ok(who)
    }

    async fn list_locks(&self, req: Request<pb::ListLocksRequest>) -> ApiResult<pb::ListLocksResponse> {
        let who = self.admin(&req)?;
        let prefix = req.into_inner().namespace_prefix;
        self.node.require_leader()?;
        self.node.linearizable_read().await?;
        let st = self.node.state.read().expect("state lock");
        let name = |txn| st.table.txn(txn).map(|t| t.name.clone()).unwrap_or_default();
        let locks = st
            .table
            .keys()
            .filter(|(lock, _)| lock.namespace.starts_with(prefix.as_str()) && who.sees_namespace(&lock.namespace))
            .map(|(lock, k)| pb::KeyLocks {
                namespace: lock.namespace.clone(),
                key: lock.key.clone(),
                holders: k
                    .holders
                    .iter()
                    .map(|(&txn, held)| pb::LockHolder {
                        transaction_id: txn,
                        transaction_name: name(txn),
                        mode: convert::mode(held.mode),
                        fencing_token: held.token.0,
                        since_ms: held.since_ms as i64,
                    })
                    .collect(),
                waiters: k
                    .queue
                    .iter()
                    .enumerate()
                    .map(|(i, (slot, w))| pb::LockWaiter {
                        transaction_id: w.txn,
                        transaction_name: name(w.txn),
                        mode: convert::mode(w.mode),
                        position: i as u32 + 1,
                        blocking_transaction_ids: k.blockers(*slot),
                        since_ms: w.since_ms as i64,
                        upgrade: k.holders.contains_key(&w.txn),
                    })
                    .collect(),
            })
            .collect();
        Ok(pb::ListLocksResponse { locks })
    }

    async fn abort(&self, req: Request<pb::AbortTransactionRequest>) -> ApiResult<pb::AbortTransactionResponse> {
        let who = self.admin(&req)?;
        let r = req.into_inner();
        let txn = validate::txn_id(r.transaction_id)?;
        validate::txn_name(&r.reason)
            .map_err(|_| ApiError::InvalidArgument("reason must be at most 256 bytes".into()))?;
        let request_id = validate::request_id(&r.request_id)?;
        self.node.require_leader()?;
        {
            let st = self.node.state.read().expect("state lock");
            let t = st.table.txn(txn).ok_or(ApiError::NotFound(txn))?;
            who.check_txn(t)?;
        }
        let reason = if r.reason.is_empty() { "no reason given".to_string() } else { r.reason };
        match self.node.propose(Command::Abort { txn, request_id, operator: who.name, reason }).await? {
            Outcome::Ended { state, released } => {
                Ok(pb::AbortTransactionResponse { state: convert::state(state), released_locks: released })
            }
            Outcome::Rejected(r) => Err(r.into()),
            o => Err(ApiError::Internal(format!("unexpected outcome {o:?}"))),
        }
    }

    fn cluster_status(&self, req: Request<pb::ClusterStatusRequest>) -> ApiResult<pb::ClusterStatusResponse> {
        let who = self.admin(&req)?;
        let m = self.node.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        let voters: Vec<u64> = membership.voter_ids().collect();
        let members = membership
            .nodes()
            .map(|(&id, n)| pb::ClusterMember { node_id: id, addr: n.addr.clone(), voter: voters.contains(&id) })
            .collect();
        let (leader_id, leader_addr) = self.node.leader().unwrap_or((0, String::new()));
        let st = self.node.state.read().expect("state lock");
        Ok(pb::ClusterStatusResponse {
            node_id: self.node.id,
            leader_id,
            leader_addr,
            term: m.current_term,
            commit_index: self.node.committed_index().max(m.last_applied.map_or(0, |l| l.index)),
            applied_index: m.last_applied.map_or(0, |l| l.index),
            last_log_index: m.last_log_index.unwrap_or(0),
            role: format!("{:?}", m.state),
            members,
            last_fencing_token: st.table.last_token(),
            // A limited admin key counts only the transactions it may act on.
            active_transactions: st.table.active_txns().filter(|t| who.may_use(t)).count() as u64,
            last_event_sequence: st.table.events().last_seq(),
        })
    }
}

impl AdminApi {
    /// Membership changes act on the whole cluster: only an admin key without namespace
    /// limits may make them.
    fn cluster_admin<T>(&self, req: &Request<T>) -> ApiResult<Principal> {
        let who = self.admin(req)?;
        if who.namespaces.is_some() {
            return Err(ApiError::PermissionDenied(format!(
                "admin key {:?} is limited to namespace prefixes; membership changes and backups need an admin key without --namespace",
                who.name
            )));
        }
        Ok(who)
    }

    fn membership_error(&self, e: MembershipError) -> ApiError {
        match e {
            MembershipError::Invalid(m) => ApiError::InvalidArgument(m),
            MembershipError::Refused(m) => ApiError::MembershipRefused(m),
            MembershipError::NotLeader => self.node.not_leader(),
            MembershipError::Unavailable(m) => ApiError::Unavailable(m),
        }
    }

    fn members(&self) -> ApiResult<Membership> {
        self.node.membership().map_err(|e| self.membership_error(e))
    }

    fn list_members(&self, req: Request<pb::ListMembersRequest>) -> ApiResult<pb::ListMembersResponse> {
        self.cluster_admin(&req)?;
        self.node.require_leader()?;
        let m = self.members()?;
        Ok(pb::ListMembersResponse {
            members: member_infos(&m),
            leader_id: m.leader,
            last_log_index: m.last_log_index,
            changing: m.changing,
        })
    }

    async fn add_member(&self, req: Request<pb::AddMemberRequest>) -> ApiResult<pb::AddMemberResponse> {
        self.cluster_admin(&req)?;
        let r = req.into_inner();
        let catch_up = catch_up_timeout(r.catch_up_timeout_ms)?;
        self.node.require_leader()?;
        let member = Member { addr: r.addr, peer_addr: r.peer_addr };
        self.node
            .add_member(r.node_id, member, r.stay_learner, catch_up)
            .await
            .map_err(|e| self.membership_error(e))?;
        Ok(pb::AddMemberResponse { members: member_infos(&self.members()?) })
    }

    async fn remove_member(&self, req: Request<pb::RemoveMemberRequest>) -> ApiResult<pb::RemoveMemberResponse> {
        self.cluster_admin(&req)?;
        self.node.require_leader()?;
        let id = req.into_inner().node_id;
        self.node.remove_member(id).await.map_err(|e| self.membership_error(e))?;
        // A removed leader may have stepped down already: answer with what it committed.
        let members = match self.node.membership() {
            Ok(m) => member_infos(&m),
            Err(_) => committed_members(&self.node),
        };
        Ok(pb::RemoveMemberResponse { members })
    }

    async fn promote_member(&self, req: Request<pb::PromoteMemberRequest>) -> ApiResult<pb::PromoteMemberResponse> {
        self.cluster_admin(&req)?;
        let r = req.into_inner();
        let catch_up = catch_up_timeout(r.catch_up_timeout_ms)?;
        self.node.require_leader()?;
        self.node.promote_member(r.node_id, catch_up).await.map_err(|e| self.membership_error(e))?;
        Ok(pb::PromoteMemberResponse { members: member_infos(&self.members()?) })
    }
}

fn catch_up_timeout(ms: u32) -> ApiResult<Duration> {
    let d = if ms == 0 { members::DEFAULT_CATCH_UP } else { Duration::from_millis(ms.into()) };
    if d > members::MAX_CATCH_UP {
        return Err(ApiError::InvalidArgument(format!(
            "catch_up_timeout_ms must be at most {}",
            members::MAX_CATCH_UP.as_millis()
        )));
    }
    Ok(d)
}

fn member_infos(m: &Membership) -> Vec<pb::MemberInfo> {
    m.members
        .iter()
        .map(|v| pb::MemberInfo {
            node_id: v.id,
            addr: v.member.addr.clone(),
            peer_addr: v.member.peer_addr.clone(),
            voter: v.voter,
            matched_index: v.matched,
        })
        .collect()
}

/// The membership this node holds, without replication progress (it no longer leads).
fn committed_members(node: &Node) -> Vec<pb::MemberInfo> {
    let m = node.raft.metrics().borrow().clone();
    let config = m.membership_config.membership();
    let voters: Vec<u64> = config.voter_ids().collect();
    config
        .nodes()
        .map(|(&id, n)| pb::MemberInfo {
            node_id: id,
            addr: n.addr.clone(),
            peer_addr: n.peer_addr.clone(),
            voter: voters.contains(&id),
            matched_index: 0,
        })
        .collect()
}

#[tonic::async_trait]
impl AdminService for AdminApi {
    async fn list_locks(&self, req: Request<pb::ListLocksRequest>) -> Result<Response<pb::ListLocksResponse>, Status> {
        Ok(Response::new(AdminApi::list_locks(self, req).await?))
    }

    async fn abort_transaction(
        &self,
        req: Request<pb::AbortTransactionRequest>,
    ) -> Result<Response<pb::AbortTransactionResponse>, Status> {
        Ok(Response::new(self.abort(req).await?))
    }

    async fn cluster_status(
        &self,
        req: Request<pb::ClusterStatusRequest>,
    ) -> Result<Response<pb::ClusterStatusResponse>, Status> {
        Ok(Response::new(AdminApi::cluster_status(self, req)?))
    }

    async fn list_members(
        &self,
        req: Request<pb::ListMembersRequest>,
    ) -> Result<Response<pb::ListMembersResponse>, Status> {
        Ok(Response::new(AdminApi::list_members(self, req)?))
    }

    async fn add_member(&self, req: Request<pb::AddMemberRequest>) -> Result<Response<pb::AddMemberResponse>, Status> {
        Ok(Response::new(AdminApi::add_member(self, req).await?))
    }

    async fn remove_member(
        &self,
        req: Request<pb::RemoveMemberRequest>,
    ) -> Result<Response<pb::RemoveMemberResponse>, Status> {
        Ok(Response::new(AdminApi::remove_member(self, req).await?))
    }

    async fn promote_member(
        &self,
        req: Request<pb::PromoteMemberRequest>,
    ) -> Result<Response<pb::PromoteMemberResponse>, Status> {
        Ok(Response::new(AdminApi::promote_member(self, req).await?))
    }

    type SaveSnapshotStream = SnapshotStream;

    /// A backup holds every namespace: only an admin key without namespace limits may take one.
    async fn save_snapshot(
        &self,
        req: Request<pb::SaveSnapshotRequest>,
    ) -> Result<Response<Self::SaveSnapshotStream>, Status> {
        let who = self.cluster_admin(&req)?;
        let (meta, file) = self.node.backup().await?;
        tracing::info!(key = %who.name, snapshot = %meta, "streaming a backup");
        Ok(Response::new(stream_file(file)))
    }
}
