//! The operator API: list locks, abort a transaction, a node's view of the cluster, and
//! membership changes. Every call needs an admin key when the server has a keys file; an
//! admin key limited to namespace prefixes lists and aborts only inside them (rules in
//! `auth`) and may not change the membership (that affects every namespace).

use std::sync::Arc;
use std::time::Duration;

use caerus_proto::v1 as pb;
use caerus_proto::v1::admin_service_server::AdminService;
use tonic::{Request, Response, Status};

use super::auth::KeyRing;
use super::errors::ApiError;
use super::{convert, validate};
use crate::engine::{Engine, Principal};
use crate::members::{self, MemberView};
use crate::raft::types::Member;

pub struct AdminApi {
    pub engine: Arc<Engine>,
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
            Err(e) => tx.blocking_send(Err(Status::from(ApiError::internal(format!("cannot read the backup: {e}"))))),
        };
        if sent.is_err() {
            return;
        }
    });
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}

impl AdminApi {
    fn admin<T>(&self, req: &Request<T>) -> ApiResult<Principal> {
        let who = super::key_check::principal(&self.keys, req)?;
        who.require_admin()?;
        Ok(who)
    }

    async fn list_locks(&self, req: Request<pb::ListLocksRequest>) -> ApiResult<pb::ListLocksResponse> {
        let who = self.admin(&req)?;
        let prefix = req.into_inner().namespace_prefix;
        let keys = self.engine.list_locks(&who, &prefix).await?;
        let runs = self.engine.list_slot_runs(&who, &prefix).await?;
        let slot_runs = runs.iter().map(|(lock, run)| convert::slot_run(lock, run)).collect();
        let locks = keys
            .into_iter()
            .map(|k| pb::KeyLocks {
                namespace: k.lock.namespace,
                key: k.lock.key,
                holders: k
                    .holders
                    .into_iter()
                    .map(|h| pb::LockHolder {
                        transaction_id: h.txn,
                        transaction_name: h.txn_name,
                        mode: convert::mode(h.held.mode),
                        fencing_token: h.held.token.0,
                        since_ms: h.held.since_ms as i64,
                    })
                    .collect(),
                waiters: k
                    .waiters
                    .into_iter()
                    .map(|w| pb::LockWaiter {
                        transaction_id: w.txn,
                        transaction_name: w.txn_name,
                        mode: convert::mode(w.mode),
                        position: w.position,
                        blocking_transaction_ids: w.blockers,
                        since_ms: w.since_ms as i64,
                        upgrade: w.upgrade,
                    })
                    .collect(),
                delayed_until_ms: k.delay.map_or(0, |d| d.until_ms as i64),
                delayed_by_transaction_id: k.delay.map_or(0, |d| d.txn),
                delay_cause: k.delay.map_or(0, |d| convert::cause(Some(d.cause))),
                permits: k.permits,
                delay_remaining_ms: k.delay_remaining_ms as i64,
            })
            .collect();
        Ok(pb::ListLocksResponse { locks, slot_runs })
    }

    async fn set_lock_delay(&self, req: Request<pb::SetLockDelayRequest>) -> ApiResult<pb::SetLockDelayResponse> {
        let who = self.admin(&req)?;
        let r = req.into_inner();
        let delay_ms = validate::lock_delay(&r.namespace_prefix, r.delay_ms)?;
        let previous = self.engine.set_lock_delay(&who, r.namespace_prefix, delay_ms).await?;
        Ok(pb::SetLockDelayResponse { previous_delay_ms: previous as i64 })
    }

    async fn list_lock_delays(&self, req: Request<pb::ListLockDelaysRequest>) -> ApiResult<pb::ListLockDelaysResponse> {
        let who = self.admin(&req)?;
        let rules = self.engine.lock_delays(&who).await?;
        let rules = rules
            .into_iter()
            .map(|(namespace_prefix, d)| pb::LockDelayRule { namespace_prefix, delay_ms: d as i64 })
            .collect();
        Ok(pb::ListLockDelaysResponse { rules })
    }

    async fn abort(&self, req: Request<pb::AbortTransactionRequest>) -> ApiResult<pb::AbortTransactionResponse> {
        let who = self.admin(&req)?;
        let r = req.into_inner();
        let txn = validate::txn_id(r.transaction_id)?;
        validate::txn_name(&r.reason)
            .map_err(|_| ApiError::invalid_argument("reason must be at most 256 bytes".into()))?;
        let request_id = validate::request_id(&r.request_id)?;
        let reason = if r.reason.is_empty() { "no reason given".to_string() } else { r.reason };
        let ended = self.engine.abort(&who, txn, request_id, reason).await?;
        Ok(pb::AbortTransactionResponse { state: convert::state(ended.state), released_locks: ended.released })
    }

    fn cluster_status(&self, req: Request<pb::ClusterStatusRequest>) -> ApiResult<pb::ClusterStatusResponse> {
        let who = self.admin(&req)?;
        let c = self.engine.cluster_status(&who);
        let (leader_id, leader_addr) = c.leader.unwrap_or((0, String::new()));
        Ok(pb::ClusterStatusResponse {
            node_id: c.node_id,
            leader_id,
            leader_addr,
            term: c.term,
            commit_index: c.commit_index,
            applied_index: c.applied_index,
            last_log_index: c.last_log_index,
            role: format!("{:?}", c.role),
            members: c
                .members
                .into_iter()
                .map(|m| pb::ClusterMember {
                    node_id: m.id,
                    addr: m.addr,
                    voter: m.voter,
                    version: m.version.version,
                    feature_level: m.version.feature_level,
                })
                .collect(),
            last_fencing_token: c.last_fencing_token,
            active_transactions: c.active_transactions,
            last_event_sequence: c.last_event_sequence,
            feature_level: c.feature_level,
            feature_level_used: c.feature_level_used,
            version: c.version,
        })
    }
}

/// Cluster API keys (rules in `engine::api_keys`).
impl AdminApi {
    async fn create_api_key(&self, req: Request<pb::CreateApiKeyRequest>) -> ApiResult<pb::CreateApiKeyResponse> {
        let who = self.admin(&req)?;
        if !self.keys.has_keys() {
            return Err(ApiError::FailedPrecondition(
                "this node runs without --api-keys-file, so it enforces no keys; start the nodes with a keys file \
                 (it may hold just the admin key that bootstraps the others) before creating cluster keys"
                    .into(),
            ));
        }
        let r = req.into_inner();
        let key = validate::new_api_key(r)?;
        if self.keys.file_has(&key.name) {
            return Err(ApiError::AlreadyExists(format!(
                "the leader's keys file has a key named {:?}; a key lives in one place",
                key.name
            )));
        }
        let (secret, key) = self.engine.create_api_key(&who, key).await?;
        Ok(pb::CreateApiKeyResponse { key: secret, info: Some(convert::api_key(&key)) })
    }

    async fn list_api_keys(&self, req: Request<pb::ListApiKeysRequest>) -> ApiResult<pb::ListApiKeysResponse> {
        let who = self.admin(&req)?;
        let keys = self.engine.list_api_keys(&who).await?;
        Ok(pb::ListApiKeysResponse { keys: keys.iter().map(convert::api_key).collect() })
    }

    async fn revoke_api_key(&self, req: Request<pb::RevokeApiKeyRequest>) -> ApiResult<pb::RevokeApiKeyResponse> {
        let who = self.admin(&req)?;
        let name = validate::api_key_name(req.into_inner().name)?;
        self.engine.revoke_api_key(&who, name).await?;
        Ok(pb::RevokeApiKeyResponse {})
    }

    async fn rotate_api_key(&self, req: Request<pb::RotateApiKeyRequest>) -> ApiResult<pb::RotateApiKeyResponse> {
        let who = self.admin(&req)?;
        let r = req.into_inner();
        let name = validate::api_key_name(r.name)?;
        let grace_ms = validate::key_grace(r.grace_ms)?;
        let (secret, key) = self.engine.rotate_api_key(&who, name, grace_ms).await?;
        Ok(pb::RotateApiKeyResponse { key: secret, info: Some(convert::api_key(&key)) })
    }
}

impl AdminApi {
    /// Membership changes act on the whole cluster: only an admin key without namespace
    /// limits may make them.
    fn cluster_admin<T>(&self, req: &Request<T>) -> ApiResult<Principal> {
        let who = self.admin(req)?;
        if who.namespaces.is_some() {
            return Err(ApiError::permission_denied(format!(
                "admin key {:?} is limited to namespace prefixes; membership changes and backups need an admin key without --namespace",
                who.name
            )));
        }
        Ok(who)
    }

    fn list_members(&self, req: Request<pb::ListMembersRequest>) -> ApiResult<pb::ListMembersResponse> {
        self.cluster_admin(&req)?;
        let m = self.engine.list_members()?;
        Ok(pb::ListMembersResponse {
            members: self.member_infos(&m.members),
            leader_id: m.leader,
            last_log_index: m.last_log_index,
            changing: m.changing,
        })
    }

    async fn add_member(&self, req: Request<pb::AddMemberRequest>) -> ApiResult<pb::AddMemberResponse> {
        self.cluster_admin(&req)?;
        let r = req.into_inner();
        let catch_up = catch_up_timeout(r.catch_up_timeout_ms)?;
        let member = Member { addr: r.addr, peer_addr: r.peer_addr };
        let m = self.engine.add_member(r.node_id, member, r.stay_learner, catch_up).await?;
        Ok(pb::AddMemberResponse { members: self.member_infos(&m.members) })
    }

    async fn remove_member(&self, req: Request<pb::RemoveMemberRequest>) -> ApiResult<pb::RemoveMemberResponse> {
        self.cluster_admin(&req)?;
        let members = self.engine.remove_member(req.into_inner().node_id).await?;
        Ok(pb::RemoveMemberResponse { members: self.member_infos(&members) })
    }

    async fn transfer_leader(&self, req: Request<pb::TransferLeaderRequest>) -> ApiResult<pb::TransferLeaderResponse> {
        self.cluster_admin(&req)?;
        let to = match req.into_inner().node_id {
            0 => None,
            id => Some(id),
        };
        let (leader_id, leader_addr) = self.engine.transfer_leader(to).await?;
        Ok(pb::TransferLeaderResponse { leader_id, leader_addr })
    }

    async fn promote_member(&self, req: Request<pb::PromoteMemberRequest>) -> ApiResult<pb::PromoteMemberResponse> {
        self.cluster_admin(&req)?;
        let r = req.into_inner();
        let catch_up = catch_up_timeout(r.catch_up_timeout_ms)?;
        let m = self.engine.promote_member(r.node_id, catch_up).await?;
        Ok(pb::PromoteMemberResponse { members: self.member_infos(&m.members) })
    }
}

fn catch_up_timeout(ms: u32) -> ApiResult<Duration> {
    let d = if ms == 0 { members::DEFAULT_CATCH_UP } else { Duration::from_millis(ms.into()) };
    if d > members::MAX_CATCH_UP {
        return Err(ApiError::invalid_argument(format!(
            "catch_up_timeout_ms must be at most {}",
            members::MAX_CATCH_UP.as_millis()
        )));
    }
    Ok(d)
}

impl AdminApi {
    fn member_infos(&self, members: &[MemberView]) -> Vec<pb::MemberInfo> {
        members
            .iter()
            .map(|v| {
                let version = self.engine.member_version(v.id);
                pb::MemberInfo {
                    node_id: v.id,
                    addr: v.member.addr.clone(),
                    peer_addr: v.member.peer_addr.clone(),
                    voter: v.voter,
                    matched_index: v.matched,
                    version: version.version,
                    feature_level: version.feature_level,
                }
            })
            .collect()
    }
}

#[tonic::async_trait]
impl AdminService for AdminApi {
    async fn create_api_key(
        &self,
        req: Request<pb::CreateApiKeyRequest>,
    ) -> Result<Response<pb::CreateApiKeyResponse>, Status> {
        Ok(Response::new(AdminApi::create_api_key(self, req).await?))
    }

    async fn list_api_keys(
        &self,
        req: Request<pb::ListApiKeysRequest>,
    ) -> Result<Response<pb::ListApiKeysResponse>, Status> {
        Ok(Response::new(AdminApi::list_api_keys(self, req).await?))
    }

    async fn revoke_api_key(
        &self,
        req: Request<pb::RevokeApiKeyRequest>,
    ) -> Result<Response<pb::RevokeApiKeyResponse>, Status> {
        Ok(Response::new(AdminApi::revoke_api_key(self, req).await?))
    }

    async fn rotate_api_key(
        &self,
        req: Request<pb::RotateApiKeyRequest>,
    ) -> Result<Response<pb::RotateApiKeyResponse>, Status> {
        Ok(Response::new(AdminApi::rotate_api_key(self, req).await?))
    }

    async fn set_lock_delay(
        &self,
        req: Request<pb::SetLockDelayRequest>,
    ) -> Result<Response<pb::SetLockDelayResponse>, Status> {
        Ok(Response::new(AdminApi::set_lock_delay(self, req).await?))
    }

    async fn list_lock_delays(
        &self,
        req: Request<pb::ListLockDelaysRequest>,
    ) -> Result<Response<pb::ListLockDelaysResponse>, Status> {
        Ok(Response::new(AdminApi::list_lock_delays(self, req).await?))
    }

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

    async fn transfer_leader(
        &self,
        req: Request<pb::TransferLeaderRequest>,
    ) -> Result<Response<pb::TransferLeaderResponse>, Status> {
        Ok(Response::new(AdminApi::transfer_leader(self, req).await?))
    }

    type SaveSnapshotStream = SnapshotStream;

    /// A backup holds every namespace: only an admin key without namespace limits may take one.
    async fn save_snapshot(
        &self,
        req: Request<pb::SaveSnapshotRequest>,
    ) -> Result<Response<Self::SaveSnapshotStream>, Status> {
        let who = self.cluster_admin(&req)?;
        let (meta, file) = self.engine.backup().await?;
        tracing::info!(key = %who.name, snapshot = %meta, "streaming a backup");
        Ok(Response::new(stream_file(file)))
    }
}
