//! The operator API (`AdminService`): list locks, abort a transaction, ask nodes how they
//! see the cluster, change the membership. On a server with API keys these calls need an
//! admin key (membership changes one without namespace limits).

use std::time::Duration;

use caerus_proto::v1 as pb;
use caerus_proto::Wire;
use tokio::time::Instant;

use crate::client::DlsClient;
use crate::error::Result;
use crate::router::new_request_id;
use crate::router::{CallOptions, Route};
use crate::types::{required, EndCause, LockMode, TransactionState};

/// The pieces of a backup, in order (see [`DlsClient::save_snapshot`]).
pub struct SnapshotPieces {
    stream: tonic::Streaming<pb::SaveSnapshotResponse>,
}

impl SnapshotPieces {
    /// The next bytes of the snapshot file; None once it is complete. An error means the
    /// file is incomplete and must not be kept.
    pub async fn next(&mut self) -> Result<Option<Vec<u8>>> {
        Ok(self.stream.message().await?.map(|piece| piece.chunk))
    }
}

/// A transaction holding a lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockHolder {
    /// The holding transaction.
    pub transaction_id: u64,
    /// Its label ("" if it has none).
    pub transaction_name: String,
    /// The mode held.
    pub mode: LockMode,
    /// The fencing token of the grant.
    pub fencing_token: u64,
    /// When it was granted (leader clock, ms since the Unix epoch).
    pub since_ms: i64,
}

/// A request waiting in a lock's queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockWaiter {
    /// The waiting transaction.
    pub transaction_id: u64,
    /// Its label ("" if it has none).
    pub transaction_name: String,
    /// The mode it asks for.
    pub mode: LockMode,
    /// 1 = next in line.
    pub position: u32,
    /// The transactions it waits for directly.
    pub blocking_transaction_ids: Vec<u64>,
    /// When it started waiting (leader clock, ms since the Unix epoch).
    pub since_ms: i64,
    /// True for a SHARED_READ holder waiting to become EXCLUSIVE.
    pub upgrade: bool,
}

/// One lock with its holders and queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyLocks {
    /// The lock's namespace.
    pub namespace: String,
    /// The lock's key.
    pub key: String,
    /// Current holders.
    pub holders: Vec<LockHolder>,
    /// The FIFO queue, first in line first.
    pub waiters: Vec<LockWaiter>,
    /// The lock-delay keeping the key from granting anything, if any (see
    /// [`DlsClient::set_lock_delay`]).
    pub delay: Option<KeyDelay>,
    /// A semaphore's permit count (its holders and waiters are all
    /// [`LockMode::Semaphore`]); 0 for a lock.
    pub permits: u32,
}

/// Why and until when a key grants nothing: its holder was revoked in a namespace with a
/// lock-delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyDelay {
    /// When the key may be granted again (the cluster's clock: the raft log's time, ms since
    /// the Unix epoch; it need not match this machine's clock).
    pub until_ms: i64,
    /// How long the delay still lasts, by the cluster's clock (0 from servers before v0.2).
    pub remaining_ms: i64,
    /// The revoked holder whose end started the delay.
    pub transaction_id: u64,
    /// How that holder ended (lease expired, operator abort, deadlock victim, maximum
    /// duration); None if the server sent a cause this client does not know.
    pub cause: Option<EndCause>,
}

/// A lock-delay rule (see [`DlsClient::set_lock_delay`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockDelayRule {
    /// Namespaces starting with this prefix ("" = every namespace).
    pub namespace_prefix: String,
    /// How long a revoked holder's keys grant nothing.
    pub delay: Duration,
}

impl TryFrom<pb::KeyLocks> for KeyLocks {
    type Error = crate::Error;
    fn try_from(k: pb::KeyLocks) -> Result<Self> {
        let holders = k
            .holders
            .into_iter()
            .map(|h| {
                Ok(LockHolder {
                    mode: required("lock mode", h.mode)?,
                    transaction_id: h.transaction_id,
                    transaction_name: h.transaction_name,
                    fencing_token: h.fencing_token,
                    since_ms: h.since_ms,
                })
            })
            .collect::<Result<_>>()?;
        let waiters = k
            .waiters
            .into_iter()
            .map(|w| {
                Ok(LockWaiter {
                    mode: required("lock mode", w.mode)?,
                    transaction_id: w.transaction_id,
                    transaction_name: w.transaction_name,
                    position: w.position,
                    blocking_transaction_ids: w.blocking_transaction_ids,
                    since_ms: w.since_ms,
                    upgrade: w.upgrade,
                })
            })
            .collect::<Result<_>>()?;
        let delay = (k.delayed_until_ms > 0).then(|| KeyDelay {
            until_ms: k.delayed_until_ms,
            remaining_ms: k.delay_remaining_ms,
            transaction_id: k.delayed_by_transaction_id,
            cause: EndCause::from_wire(k.delay_cause),
        });
        Ok(KeyLocks { namespace: k.namespace, key: k.key, holders, waiters, delay, permits: k.permits })
    }
}

/// The outcome of an operator abort.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortOutcome {
    /// The final state (`Aborted`).
    pub state: TransactionState,
    /// How many locks were released.
    pub released_locks: u32,
}

/// A cluster member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterMember {
    /// Its node id.
    pub node_id: u64,
    /// Its address.
    pub addr: String,
    /// Whether it votes.
    pub voter: bool,
    /// The version it runs, as the answering node last heard it (`None` = unknown: it has
    /// not answered, or the answering node predates the version handshake).
    pub version: Option<String>,
    /// The highest feature level it reads (`None` = unknown).
    pub feature_level: Option<u32>,
}

/// One node's view of the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterStatus {
    /// The node that answered.
    pub node_id: u64,
    /// The leader it knows of, if any.
    pub leader_id: Option<u64>,
    /// The leader's address, if known.
    pub leader_addr: Option<String>,
    /// Its current raft term.
    pub term: u64,
    /// The highest log index it knows is committed.
    pub commit_index: u64,
    /// The highest log index applied to its lock table.
    pub applied_index: u64,
    /// The last log index it stores.
    pub last_log_index: u64,
    /// Its raft role: "Leader", "Follower", "Candidate" or "Learner".
    pub role: String,
    /// The members of the cluster.
    pub members: Vec<ClusterMember>,
    /// The last fencing token issued (as of its applied index).
    pub last_fencing_token: u64,
    /// Active transactions (as of its applied index).
    pub active_transactions: u64,
    /// The last event sequence number (as of its applied index).
    pub last_event_sequence: u64,
    /// The cluster's feature level (`None` from a node before the version handshake).
    pub feature_level: Option<u32>,
    /// The highest feature level used by an entry so far: the level cannot go below it.
    pub feature_level_used: Option<u32>,
    /// The answering node's version (`None` from a node before the version handshake).
    pub version: Option<String>,
}

impl ClusterStatus {
    /// Whether the answering node is the leader.
    pub fn is_leader(&self) -> bool {
        self.role.eq_ignore_ascii_case("leader")
    }
}

impl From<pb::ClusterStatusResponse> for ClusterStatus {
    fn from(r: pb::ClusterStatusResponse) -> Self {
        ClusterStatus {
            node_id: r.node_id,
            leader_id: Some(r.leader_id).filter(|id| *id != 0),
            leader_addr: Some(r.leader_addr).filter(|a| !a.is_empty()),
            term: r.term,
            commit_index: r.commit_index,
            applied_index: r.applied_index,
            last_log_index: r.last_log_index,
            role: r.role,
            members: r
                .members
                .into_iter()
                .map(|m| ClusterMember {
                    node_id: m.node_id,
                    addr: m.addr,
                    voter: m.voter,
                    version: (!m.version.is_empty()).then_some(m.version),
                    feature_level: (m.feature_level > 0).then_some(m.feature_level),
                })
                .collect(),
            last_fencing_token: r.last_fencing_token,
            active_transactions: r.active_transactions,
            last_event_sequence: r.last_event_sequence,
            feature_level: (r.feature_level > 0).then_some(r.feature_level),
            feature_level_used: (r.feature_level_used > 0).then_some(r.feature_level_used),
            version: (!r.version.is_empty()).then_some(r.version),
        }
    }
}

/// A member of the cluster as the leader sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberInfo {
    /// Its node id.
    pub node_id: u64,
    /// Where clients reach it (host:port).
    pub addr: String,
    /// Where its peers reach it (host:port).
    pub peer_addr: String,
    /// A voter (true) or a learner (false: replicated to, not voting or counted).
    pub voter: bool,
    /// The last log index the leader knows it holds (0 = none yet).
    pub matched_index: u64,
    /// The version it runs, as the leader last heard it (`None` = unknown).
    pub version: Option<String>,
    /// The highest feature level it reads (`None` = unknown).
    pub feature_level: Option<u32>,
}

/// The leader after a hand-off ([`DlsClient::transfer_leader`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewLeader {
    /// Its node id.
    pub node_id: u64,
    /// Where clients reach it (host:port).
    pub addr: String,
}

/// The cluster's membership as the leader sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Membership {
    /// Every member, sorted by node id.
    pub members: Vec<MemberInfo>,
    /// The leader that answered (0 when the answer came from a removed leader).
    pub leader_id: u64,
    /// The leader's last log index.
    pub last_log_index: u64,
    /// A change is half done (joint configuration).
    pub changing: bool,
}

/// How to add a member.
#[derive(Clone, Debug, Default)]
pub struct AddMemberOptions {
    /// Keep it a learner; promote it later with [`DlsClient::promote_member`].
    pub stay_learner: bool,
    /// How long the leader waits for it to catch up before promoting it (None = 60 s).
    pub catch_up_timeout: Option<Duration>,
}

fn member_infos(members: Vec<pb::MemberInfo>) -> Vec<MemberInfo> {
    members
        .into_iter()
        .map(|m| MemberInfo {
            node_id: m.node_id,
            addr: m.addr,
            peer_addr: m.peer_addr,
            voter: m.voter,
            matched_index: m.matched_index,
            version: (!m.version.is_empty()).then_some(m.version),
            feature_level: (m.feature_level > 0).then_some(m.feature_level),
        })
        .collect()
}

/// The server's default wait for a new member to catch up.
const DEFAULT_CATCH_UP: Duration = Duration::from_secs(60);
/// How long the leader waits for a membership change to commit before answering
/// UNAVAILABLE (the server's commit timeout).
const MEMBERSHIP_COMMIT_WAIT: Duration = Duration::from_secs(10);

impl DlsClient {
    /// Options of a call that may wait `catch_up` on the leader: every attempt gets that
    /// long on top of the usual request timeout, and may run that long past the retry
    /// deadline; no attempt starts after it, so a cluster that does not answer is given up
    /// at the retry deadline like any call.
    fn catch_up_options(&self, catch_up: Option<Duration>) -> (CallOptions, u32) {
        let router = self.router();
        let wait = catch_up.unwrap_or(DEFAULT_CATCH_UP) + MEMBERSHIP_COMMIT_WAIT;
        let mut options = router.default_options();
        options.attempt_timeout += wait;
        options.overrun = wait;
        (options, catch_up.map_or(0, |d| d.as_millis().min(u128::from(u32::MAX)) as u32))
    }

    /// A backup: the leader's replicated state as of everything committed before the call,
    /// as the bytes of a snapshot file (which `dls snapshot restore` checks and reads),
    /// piece by piece. Needs an admin key without namespace limits.
    pub async fn save_snapshot(&self) -> Result<SnapshotPieces> {
        let router = self.router();
        let routed = router
            .admin_unary(
                "SaveSnapshot",
                Route::Leader,
                pb::SaveSnapshotRequest {},
                router.default_options(),
                |mut c, r| async move { c.save_snapshot(r).await },
            )
            .await?;
        Ok(SnapshotPieces { stream: routed.value })
    }

    /// The members (voters and learners) with their replication progress, from the leader.
    pub async fn list_members(&self) -> Result<Membership> {
        let router = self.router();
        let routed = router
            .admin_unary(
                "ListMembers",
                Route::Leader,
                pb::ListMembersRequest {},
                router.default_options(),
                |mut c, r| async move { c.list_members(r).await },
            )
            .await?;
        let r = routed.value;
        Ok(Membership {
            members: member_infos(r.members),
            leader_id: r.leader_id,
            last_log_index: r.last_log_index,
            changing: r.changing,
        })
    }

    /// Adds node `node_id` (client address `addr`, peer address `peer_addr`): as a learner
    /// first, which the leader catches up, then (unless `stay_learner`) as a voter. Start
    /// the node with `dls serve --join` and an empty data directory. Returns the membership
    /// after the change. Asking again for a learner with the same addresses resumes the
    /// wait, so retries are safe.
    pub async fn add_member(
        &self,
        node_id: u64,
        addr: &str,
        peer_addr: &str,
        options: AddMemberOptions,
    ) -> Result<Vec<MemberInfo>> {
        let (call, catch_up_timeout_ms) = self.catch_up_options(options.catch_up_timeout);
        let request = pb::AddMemberRequest {
            node_id,
            addr: addr.to_string(),
            peer_addr: peer_addr.to_string(),
            stay_learner: options.stay_learner,
            catch_up_timeout_ms,
        };
        let router = self.router();
        let routed = router
            .admin_unary("AddMember", Route::Leader, request, call, |mut c, r| async move { c.add_member(r).await })
            .await?;
        Ok(member_infos(routed.value.members))
    }

    /// Removes node `node_id` (voter or learner). Removing the leader commits the change,
    /// then the leader steps down and the others elect a new one.
    pub async fn remove_member(&self, node_id: u64) -> Result<Vec<MemberInfo>> {
        let router = self.router();
        // The leader waits up to its commit timeout for the change: an attempt cut off
        // sooner would come back to find the change half done and be refused.
        let mut options = router.default_options();
        options.attempt_timeout += MEMBERSHIP_COMMIT_WAIT;
        options.overrun = MEMBERSHIP_COMMIT_WAIT;
        let routed = router
            .admin_unary(
                "RemoveMember",
                Route::Leader,
                pb::RemoveMemberRequest { node_id },
                options,
                |mut c, r| async move { c.remove_member(r).await },
            )
            .await?;
        Ok(member_infos(routed.value.members))
    }

    /// Hands leadership to voter `node_id` (None: the most caught-up voter), as a leader
    /// does when it is stopped: the leader lets it catch up and makes it stand for election.
    /// Asking for the node that already leads changes nothing. Refused (FAILED_PRECONDITION)
    /// for a learner or a node that is no member; UNAVAILABLE when the node cannot take over
    /// now (the old leader then still leads).
    pub async fn transfer_leader(&self, node_id: Option<u64>) -> Result<NewLeader> {
        let request = pb::TransferLeaderRequest { node_id: node_id.unwrap_or(0) };
        let router = self.router();
        let routed = router
            .admin_unary("TransferLeader", Route::Leader, request, router.default_options(), |mut c, r| async move {
                c.transfer_leader(r).await
            })
            .await?;
        Ok(NewLeader { node_id: routed.value.leader_id, addr: routed.value.leader_addr })
    }

    /// Makes learner `node_id` a voter once it has caught up (waiting up to
    /// `catch_up_timeout`, None = 60 s).
    pub async fn promote_member(&self, node_id: u64, catch_up_timeout: Option<Duration>) -> Result<Vec<MemberInfo>> {
        let (call, catch_up_timeout_ms) = self.catch_up_options(catch_up_timeout);
        let request = pb::PromoteMemberRequest { node_id, catch_up_timeout_ms };
        let router = self.router();
        let routed =
            router
                .admin_unary("PromoteMember", Route::Leader, request, call, |mut c, r| async move {
                    c.promote_member(r).await
                })
                .await?;
        Ok(member_infos(routed.value.members))
    }

    /// Lists held and waited-for locks in namespaces starting with `namespace_prefix`
    /// ("" = all), sorted by namespace then key. Read from the leader, linearizably.
    pub async fn list_locks(&self, namespace_prefix: &str) -> Result<Vec<KeyLocks>> {
        let request = pb::ListLocksRequest { namespace_prefix: namespace_prefix.to_string() };
        let router = self.router();
        let routed = router
            .admin_unary("ListLocks", Route::Leader, request, router.default_options(), |mut c, r| async move {
                c.list_locks(r).await
            })
            .await?;
        routed.value.locks.into_iter().map(KeyLocks::try_from).collect()
    }

    /// The last run of every key claimed per schedule slot ([`crate::Transaction::claim_slot`],
    /// `dls lock --once-per`) in namespaces starting with `namespace_prefix`, while the
    /// cluster remembers it: who ran it, when, and how it ended. Sorted by namespace and key.
    pub async fn list_slot_runs(&self, namespace_prefix: &str) -> Result<Vec<crate::SlotRun>> {
        let request = pb::ListLocksRequest { namespace_prefix: namespace_prefix.to_string() };
        let router = self.router();
        let routed = router
            .admin_unary("ListLocks", Route::Leader, request, router.default_options(), |mut c, r| async move {
                c.list_locks(r).await
            })
            .await?;
        routed.value.slot_runs.into_iter().map(crate::SlotRun::try_from).collect()
    }

    /// Sets the lock-delay of every namespace starting with `namespace_prefix` ("" = all;
    /// `Duration::ZERO` removes the rule), as in Chubby and Consul: when a holder of a key
    /// there is revoked (lease expired, operator abort, deadlock victim, maximum duration),
    /// the key grants nothing for `delay`, so a process that still believes it holds it
    /// has time to stop. A release or commit is never delayed. Returns the prefix's
    /// previous delay. At most 10 minutes and 256 rules.
    pub async fn set_lock_delay(&self, namespace_prefix: &str, delay: Duration) -> Result<Duration> {
        let delay_ms = i64::try_from(delay.as_millis()).unwrap_or(i64::MAX);
        let request = pb::SetLockDelayRequest { namespace_prefix: namespace_prefix.to_string(), delay_ms };
        let router = self.router();
        // Setting the same rule twice is harmless, so a retry needs no request id.
        let routed = router
            .admin_unary("SetLockDelay", Route::Leader, request, router.default_options(), |mut c, r| async move {
                c.set_lock_delay(r).await
            })
            .await?;
        Ok(Duration::from_millis(routed.value.previous_delay_ms.max(0) as u64))
    }

    /// The lock-delay rules, sorted by prefix (empty when lock-delay is off everywhere).
    pub async fn lock_delays(&self) -> Result<Vec<LockDelayRule>> {
        let router = self.router();
        let routed = router
            .admin_unary(
                "ListLockDelays",
                Route::Leader,
                pb::ListLockDelaysRequest {},
                router.default_options(),
                |mut c, r| async move { c.list_lock_delays(r).await },
            )
            .await?;
        Ok(routed
            .value
            .rules
            .into_iter()
            .map(|r| LockDelayRule {
                namespace_prefix: r.namespace_prefix,
                delay: Duration::from_millis(r.delay_ms.max(0) as u64),
            })
            .collect())
    }

    /// Aborts any transaction as an operator: releases its locks, ends its wait, and
    /// records `reason` in its end reason and in a `TRANSACTION_ABORTED` event. Returns
    /// the final state. Fails with [`Error::TransactionLost`](crate::Error::TransactionLost)
    /// if it had already ended.
    pub async fn abort_transaction(&self, id: u64, reason: &str) -> Result<TransactionState> {
        Ok(self.abort_transaction_outcome(id, reason).await?.state)
    }

    /// Like [`abort_transaction`](Self::abort_transaction), also saying how many locks
    /// were released.
    pub async fn abort_transaction_outcome(&self, id: u64, reason: &str) -> Result<AbortOutcome> {
        // One id for every attempt: a retry after a lost answer gets the first outcome
        // instead of "already ended".
        let request = pb::AbortTransactionRequest {
            transaction_id: id,
            reason: reason.to_string(),
            request_id: new_request_id(),
        };
        let router = self.router();
        let routed = router
            .admin_unary("AbortTransaction", Route::Leader, request, router.default_options(), |mut c, r| async move {
                c.abort_transaction(r).await
            })
            .await?;
        Ok(AbortOutcome {
            state: required("transaction state", routed.value.state)?,
            released_locks: routed.value.released_locks,
        })
    }

    /// The cluster as seen by whichever node answers first (the known leader, else the
    /// configured endpoints in turn).
    pub async fn cluster_status(&self) -> Result<ClusterStatus> {
        let router = self.router();
        let routed = router
            .admin_unary(
                "ClusterStatus",
                Route::AnyNode,
                pb::ClusterStatusRequest {},
                router.default_options(),
                |mut c, r| async move { c.cluster_status(r).await },
            )
            .await?;
        Ok(routed.value.into())
    }

    /// The cluster as seen by one node (`host:port`), whether or not it leads and whether
    /// or not it is among the configured endpoints.
    ///
    /// A node that does not answer is given up on after the client's `request_timeout`
    /// (not its longer `retry_deadline`): a down node stays down for a status query.
    pub async fn cluster_status_of(&self, endpoint: &str) -> Result<ClusterStatus> {
        let router = self.router();
        let uri = router.normalize(endpoint)?;
        let budget: Duration = router.request_timeout;
        let options = CallOptions {
            deadline: Instant::now() + budget,
            attempt_timeout: budget,
            max_backoff: Duration::from_millis(250),
            overrun: Duration::ZERO,
        };
        let routed = router
            .admin_unary(
                "ClusterStatus",
                Route::Node(uri),
                pb::ClusterStatusRequest {},
                options,
                |mut c, r| async move { c.cluster_status(r).await },
            )
            .await?;
        Ok(routed.value.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_locks_conversion() {
        let wire = pb::KeyLocks {
            namespace: "ns".into(),
            key: "k".into(),
            holders: vec![pb::LockHolder {
                transaction_id: 1,
                transaction_name: "a".into(),
                mode: pb::LockMode::SharedRead as i32,
                fencing_token: 9,
                since_ms: 100,
            }],
            waiters: vec![pb::LockWaiter {
                transaction_id: 2,
                transaction_name: String::new(),
                mode: pb::LockMode::Exclusive as i32,
                position: 1,
                blocking_transaction_ids: vec![1],
                since_ms: 200,
                upgrade: false,
            }],
            delayed_until_ms: 5_000,
            delayed_by_transaction_id: 3,
            delay_cause: pb::EndCause::LeaseExpired as i32,
            permits: 0,
            delay_remaining_ms: 1_500,
        };
        let k = KeyLocks::try_from(wire).unwrap();
        let delay =
            KeyDelay { until_ms: 5_000, remaining_ms: 1_500, transaction_id: 3, cause: Some(EndCause::LeaseExpired) };
        assert_eq!(k.delay, Some(delay));
        assert_eq!(k.holders[0].mode, LockMode::SharedRead);
        assert_eq!(k.holders[0].fencing_token, 9);
        assert_eq!(k.waiters[0].blocking_transaction_ids, vec![1]);
        assert_eq!(k.waiters[0].mode, LockMode::Exclusive);
        let bad =
            pb::KeyLocks { holders: vec![pb::LockHolder { mode: 0, ..Default::default() }], ..Default::default() };
        assert!(KeyLocks::try_from(bad).is_err());
        let plain = KeyLocks::try_from(pb::KeyLocks::default()).unwrap();
        assert_eq!(plain.delay, None, "not delayed");
    }

    #[test]
    fn cluster_status_without_a_leader() {
        let s = ClusterStatus::from(pb::ClusterStatusResponse {
            node_id: 2,
            role: "Candidate".into(),
            ..Default::default()
        });
        assert_eq!((s.leader_id, s.leader_addr.as_deref(), s.is_leader()), (None, None, false));
        let s = ClusterStatus::from(pb::ClusterStatusResponse {
            node_id: 1,
            leader_id: 1,
            leader_addr: "a:1".into(),
            role: "Leader".into(),
            ..Default::default()
        });
        assert_eq!((s.leader_id, s.leader_addr.as_deref(), s.is_leader()), (Some(1), Some("a:1"), true));
    }

    /// A pinned query to a node that is down ends after the request timeout, naming it.
    #[tokio::test]
    async fn status_of_a_down_node_is_unavailable_promptly() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let config = crate::ClientConfig::new(["127.0.0.1:1"])
            .without_api_key()
            .with_connect_timeout(Duration::from_millis(100))
            .with_request_timeout(Duration::from_millis(300))
            .with_retry_deadline(Duration::from_secs(30));
        let client = DlsClient::connect(config).await.unwrap();
        let started = Instant::now();
        let err = client.cluster_status_of(&addr.to_string()).await.unwrap_err();
        assert_eq!(err.code(), "UNAVAILABLE", "{err}");
        assert!(err.message().contains(&addr.to_string()), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(client.cluster_status_of("no-port").await.unwrap_err().code(), "CONFIG");
    }
}
