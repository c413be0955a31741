//! One cluster node: raft, storage, the lock table and the leader-side timers, wired
//! together. Clients' requests reach it through `engine`, which alone reads the table and
//! proposes commands; the peer services in `api/` talk to its raft.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use openraft::error::RaftError as OpenRaftError;
use openraft::{ServerState, SnapshotPolicy};
use tokio::sync::{watch, Mutex};

use crate::key_wakeups::KeyWatchers;
use crate::lease::Leases;
use crate::limits::{Admission, LimitArgs, Limits, Tenant};
use crate::locks::{ApiKey, Command, Effect, LockTable, Outcome};
use crate::members::Members;
use crate::metrics::Metrics;
use crate::raft::bootstrap;
use crate::raft::identity::{self, Identity};
use crate::raft::log_clock::LogClock;
use crate::raft::log_store::{LogIoStats, LogStore, OnDamage};
use crate::raft::network::{PeerNetwork, PeerTransport};
use crate::raft::peer_auth::PeerAuth;
use crate::raft::peer_tls::PeerTlsFiles;
use crate::raft::proposer::{Hold, Origin, Proposer, Timing, WriteError};
use crate::raft::quorum_clock::QuorumClock;
use crate::raft::replicated::SharedState;
use crate::raft::snapshot_schedule::SnapshotSchedule;
use crate::raft::snapshot_store::SnapshotStore;
use crate::raft::state_machine::{ApplyObserver, StateMachine};
use crate::raft::store_error::chain;
use crate::raft::types::{CheckIsLeaderError, Member, NodeId, Raft, RaftMetrics, SnapshotMeta};
use crate::request::EngineError;
use crate::request::Principal;
use crate::telemetry::spans::Tracer;
use crate::txn_wakeups::TxnWakeups;
use crate::versions::{DataLevel, Versions};

/// How long one confirmation of leadership (a quorum round) vouches for heartbeats.
/// Far below any lease (>= 100 ms), so a deposed leader stops acknowledging heartbeats
/// well within one lease period.
const LEADERSHIP_CONFIRM_WINDOW: Duration = Duration::from_millis(50);
/// A proposal that cannot commit in this time answers UNAVAILABLE (retry-safe).
const PROPOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the leader looks for lapsed leases and acquire timeouts.
const TIMER_TICK: Duration = Duration::from_millis(10);

#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub id: NodeId,
    pub data_dir: PathBuf,
    /// Every member of the cluster, this node included (`--peers`).
    pub members: BTreeMap<NodeId, Member>,
    /// Join an existing cluster (`--join`): never bootstrap one.
    pub join: bool,
    pub heartbeat_ms: u64,
    pub election_timeout_ms: u64,
    pub snapshot_every: u64,
    /// Bounds on what clients can make this node hold (see `limits`).
    pub limits: LimitArgs,
    /// Namespaces labelled in the per-namespace metrics (`--metrics-namespaces`).
    pub metrics_namespaces: usize,
    /// Where spans of traced lock calls go (`--otlp-endpoint`, with the traces path).
    pub otlp_traces: Option<http::Uri>,
    /// The highest feature level this node reads and advertises (`--feature-level`).
    pub feature_level: u32,
}

/// How this node authenticates to its peers and checks them.
#[derive(Clone, Debug, Default)]
pub struct PeerSettings {
    pub secret: Option<String>,
    pub tls: Option<PeerTlsFiles>,
    /// `--insecure`: the cluster secret may be sent beyond loopback.
    pub insecure: bool,
}

pub struct Node {
    id: NodeId,
    raft: Raft,
    state: SharedState,
    /// The snapshot files (backups are written through it).
    snapshots: Arc<SnapshotStore>,
    leases: Arc<Leases>,
    /// The log's time on this node: what new entries are stamped with.
    log_clock: Arc<LogClock>,
    txn_wakeups: Arc<TxnWakeups>,
    key_watchers: Arc<KeyWatchers>,
    metrics: Arc<Metrics>,
    /// Follows traced acquires and exports their spans (`--otlp-endpoint`).
    tracer: Option<Arc<Tracer>>,
    /// Appends and flushes of this node's raft log.
    log_io: Arc<LogIoStats>,
    proposer: Proposer,
    /// The limits checked before proposing a client's request, with what counts against them.
    limits: Arc<Limits>,
    committed: Arc<std::sync::atomic::AtomicU64>,
    /// Bumped whenever events are appended (or the table is replaced): event watchers
    /// and webhook senders wait on it.
    events: watch::Receiver<u64>,
    /// The cluster's API keys as of the last apply (the key ring follows them).
    api_keys: watch::Receiver<Arc<Vec<ApiKey>>>,
    /// The raft log and metadata (the commit index is stored at shutdown).
    log_store: LogStore,
    /// Protocol-aware recovery: the highest index this node acknowledged and then lost to
    /// damage on its disk, until it has applied it again from a leader. Meanwhile it
    /// neither votes nor stands for election (docs/storage.md, "Protocol-aware recovery").
    owed: watch::Sender<Option<u64>>,
    /// When leadership was last confirmed by a quorum; the lock also makes concurrent
    /// heartbeats share one confirmation round.
    confirmed: Mutex<Option<Instant>>,
    /// When peers last acknowledged this leader's replication (kept by the peer network):
    /// while writes flow a quorum's acknowledgement is always recent, so heartbeats need no
    /// confirmation round of their own, which under load would queue behind the writes.
    quorum_clock: Arc<QuorumClock>,
    /// The term this node serves as leader in (caught up with everything committed before
    /// it), 0 while it does not serve.
    serving_term: AtomicU64,
    /// How old that acknowledgement may be and still vouch for heartbeats: the minimum
    /// election timeout. No other leader can be elected sooner than that after the
    /// followers last heard from this one (openraft's leader lease is the timeout plus its
    /// maximum), and a new leader restarts every lease at full length anyway.
    quorum_ack_window: Duration,
    is_leader: watch::Receiver<bool>,
    /// The cluster this node's data directory belongs to (learned from the peers when it
    /// joins).
    identity: std::sync::RwLock<Identity>,
    /// Whether raft traffic may reach this node: false while a node with an empty log
    /// decides whether to bootstrap, join or refuse (see `raft::bootstrap`).
    admitted: AtomicBool,
    /// Peers this node, still pristine, told that it is new (see `bootstrap::Asker`).
    asked_by: std::sync::Mutex<BTreeSet<NodeId>>,
    /// What the node still has to do before it takes part in raft.
    pending: std::sync::Mutex<Option<Pending>>,
    /// Checks incoming peer calls (the gate in front of the raft service).
    peer_auth: Arc<PeerAuth>,
    /// Outgoing peer connections; reloads their certificates on SIGHUP.
    peer_transport: Arc<PeerTransport>,
    /// The members' versions and feature levels, and the gate on new features.
    versions: Arc<Versions>,
    /// True while this leader hands leadership over (`handoff`): new proposals, lease
    /// renewals and linearizable reads wait at the gate until it is over.
    handing_off: watch::Sender<bool>,
    /// One hand-off at a time (a SIGTERM during `transfer-leader` waits for it).
    handoff_turn: Mutex<()>,
    /// When this node last started serving as leader: its own vote was refreshed then, and
    /// it grants another candidate's vote only a leader lease later.
    led_since: std::sync::Mutex<Option<Instant>>,
    /// The leader lease of openraft (its maximum election timeout).
    leader_lease: Duration,
}

/// The hand-off gate while it is closed (see [`Node::close_gate`]); open again on drop.
pub struct ClosedGate<'a> {
    gate: &'a watch::Sender<bool>,
    _turn: tokio::sync::MutexGuard<'a, ()>,
}

impl Drop for ClosedGate<'_> {
    fn drop(&mut self) {
        self.gate.send_replace(false);
    }
}

/// A node with an empty log: it asks its peers before it bootstraps or joins.
struct Pending {
    cfg: NodeConfig,
}

/// Feeds applied effects to the timers, the waiting streams, the metrics and the event
/// watchers.
struct Observer {
    clock: Arc<LogClock>,
    leases: Arc<Leases>,
    txn_wakeups: Arc<TxnWakeups>,
    key_watchers: Arc<KeyWatchers>,
    metrics: Arc<Metrics>,
    tracer: Option<Arc<Tracer>>,
    events: watch::Sender<u64>,
    api_keys: watch::Sender<Arc<Vec<ApiKey>>>,
}

impl ApplyObserver for Observer {
    fn api_keys_changed(&self, table: &LockTable) {
        self.api_keys.send_replace(Arc::new(table.api_keys().cloned().collect()));
    }

    fn tracked(&self, effects: &[Effect], clock_ms: u64) {
        let now = Instant::now();
        // Before the timers read it: a delay written with this batch ends by its time.
        self.clock.observe(clock_ms, now);
        // Under the state lock: a heartbeat that finds its transaction active in the table
        // finds its lease tracked too, and one that ends is untracked in the same instant.
        self.leases.observe(effects, now);
    }

    fn applied(&self, effects: Vec<Effect>) {
        self.metrics.observe(&effects);
        if let Some(tracer) = &self.tracer {
            tracer.observe(&effects);
        }
        if effects.contains(&Effect::EventsAppended) {
            self.events.send_modify(|v| *v += 1);
        }
        let mut changed = BTreeSet::new();
        let mut moved = BTreeSet::new();
        for e in &effects {
            match e {
                Effect::TxnChanged { txn } | Effect::TxnFinished { txn, .. } => changed.insert(*txn),
                Effect::QueueMoved { txn } => moved.insert(*txn),
                Effect::KeyChanged { key } => {
                    self.key_watchers.notify(key);
                    false
                }
                _ => false,
            };
        }
        self.txn_wakeups.changed(changed.iter().copied(), moved.difference(&changed).copied());
    }

    fn reset(&self, table: &LockTable) {
        let now = Instant::now();
        self.clock.observe(table.clock_ms(), now);
        self.leases.reset(table, now);
        self.txn_wakeups.notify_all();
        self.key_watchers.notify_all();
        self.events.send_modify(|v| *v += 1);
        self.api_keys_changed(table);
    }
}

impl Node {
    /// `version`: this build's, as peers and clients are told it (`Versions::own_version`).
    pub async fn start(cfg: NodeConfig, peers: PeerSettings, version: &'static str) -> anyhow::Result<Arc<Node>> {
        std::fs::create_dir_all(&cfg.data_dir)
            .with_context(|| format!("cannot create data directory {}", cfg.data_dir.display()))?;
        let stored = identity::load(&cfg.data_dir, cfg.id)?;
        let derived = Identity { cluster_id: identity::derive_cluster_id(&cfg.members), node_id: cfg.id };
        let provisional = stored.clone().unwrap_or_else(|| derived.clone());
        let peer_auth = PeerAuth::new(cfg.id, &provisional.cluster_id, peers.secret.as_deref(), peers.tls.is_some())?;
        let peer_transport = PeerTransport::new(peer_auth.clone(), peers.tls.clone(), peers.insecure)?;
        let log_clock = Arc::new(LogClock::default());
        let leases = Arc::new(Leases::new(log_clock.clone()));
        let txn_wakeups = Arc::new(TxnWakeups::default());
        let key_watchers = Arc::new(KeyWatchers::default());
        let metrics = Arc::new(Metrics::new(cfg.metrics_namespaces));
        let tracer = cfg.otlp_traces.clone().map(|uri| Arc::new(Tracer::start(uri, cfg.id)));
        let (events_tx, events) = watch::channel(0);
        let (api_keys_tx, api_keys) = watch::channel(Arc::new(Vec::new()));
        let observer = Arc::new(Observer {
            clock: log_clock.clone(),
            leases: leases.clone(),
            txn_wakeups: txn_wakeups.clone(),
            key_watchers: key_watchers.clone(),
            metrics: metrics.clone(),
            tracer: tracer.clone(),
            events: events_tx,
            api_keys: api_keys_tx,
        });

        // With peers, acknowledged entries found damaged can be fetched again from a leader
        // (protocol-aware recovery, see `spawn_owed_recovery`); a single node has nobody to
        // fetch them from.
        let on_damage = if cfg.members.len() > 1 || cfg.join { OnDamage::Fetch } else { OnDamage::Refuse };
        // Before anything of the log is read: a directory this node could not read refuses.
        let data_level = Arc::new(DataLevel::open(&cfg.data_dir, cfg.feature_level)?);
        let log_store = LogStore::open(&cfg.data_dir, cfg.id, on_damage)?.with_data_level(data_level.clone());
        let owed = log_store.owed();
        let durable = log_store.durable();
        let committed = log_store.committed_index();
        let log_io = log_store.io_stats();
        let pristine = log_store.is_pristine();
        let state_machine =
            StateMachine::open(&cfg.data_dir, observer, durable.clone(), log_store.first_index(), cfg.snapshot_every)
                .await?
                .with_data_level(data_level.clone());
        let state = state_machine.shared();
        data_level.restored(state.read().expect("state lock").table.feature_levels().used)?;
        let snapshots = state_machine.snapshot_store();
        let schedule = state_machine.schedule();

        let raft_config = openraft::Config {
            cluster_name: "caerus-dls".into(),
            heartbeat_interval: cfg.heartbeat_ms,
            election_timeout_min: cfg.election_timeout_ms,
            election_timeout_max: cfg.election_timeout_ms * 2,
            // Asked for by the node instead: openraft's policy only counts entries, ours also
            // weighs the last snapshot's size (raft::snapshot_schedule).
            snapshot_policy: SnapshotPolicy::Never,
            max_in_snapshot_log_to_keep: cfg.snapshot_every / 2,
            // A node owing entries it lost must not stand for election (see `spawn_owed_recovery`).
            enable_elect: owed.is_none(),
            ..Default::default()
        }
        .validate()?;
        let quorum_clock = Arc::new(QuorumClock::default());
        let raft = Raft::new(
            cfg.id,
            Arc::new(raft_config),
            PeerNetwork::new(peer_transport.clone(), durable, quorum_clock.clone()),
            log_store.clone(),
            state_machine,
        )
        .await?;

        let single = cfg.members.len() == 1 && !cfg.join;
        let pending = match (pristine, &stored) {
            (false, Some(_)) => {
                tracing::info!(data_dir = %cfg.data_dir.display(), "restarting from existing data");
                None
            }
            (false, None) if single => {
                // Nobody else checks a single node's cluster id: derive it again.
                tracing::warn!("{} was missing: written again for this single node", identity::FILE);
                identity::store(&cfg.data_dir, &derived)?;
                None
            }
            (false, None) => anyhow::bail!(
                "{} is missing from {}, but the node has raft state: the file was lost (every version since v0.1.0 \
                 writes it before the first vote). Copy it from another member (the same cluster_id, node_id = {}), \
                 or restore the data directory from a backup",
                identity::FILE,
                cfg.data_dir.display(),
                cfg.id
            ),
            (true, Some(id)) if !cfg.join => anyhow::bail!(lost_log_refusal(&cfg, &id.cluster_id)),
            (true, None) if single => {
                identity::store(&cfg.data_dir, &derived)?;
                raft.initialize(cfg.members.clone()).await?;
                tracing::info!(members = ?cfg.members, "initialized a new single-node cluster");
                None
            }
            // Decided with the peers once the peer port serves (`bootstrap`).
            (true, _) => Some(Pending { cfg: cfg.clone() }),
        };
        let admitted = AtomicBool::new(pending.is_none());

        let proposer = Proposer::start(
            raft.clone(),
            PROPOSE_TIMEOUT,
            cfg.limits.max_queued_proposals as usize,
            cfg.limits.queued_proposals_per_api_key() as usize,
            log_clock.clone(),
        );
        let (leader_tx, is_leader) = watch::channel(false);
        let node = Arc::new(Node {
            id: cfg.id,
            raft,
            state,
            snapshots,
            leases,
            log_clock,
            txn_wakeups,
            key_watchers,
            metrics,
            tracer,
            log_io,
            proposer,
            limits: Limits::new(cfg.limits.clone()),
            committed,
            events,
            api_keys,
            log_store,
            owed: watch::channel(owed).0,
            confirmed: Mutex::new(None),
            quorum_clock,
            serving_term: AtomicU64::new(0),
            quorum_ack_window: Duration::from_millis(cfg.election_timeout_ms),
            is_leader,
            identity: std::sync::RwLock::new(provisional),
            admitted,
            asked_by: Default::default(),
            pending: std::sync::Mutex::new(pending),
            peer_auth,
            peer_transport,
            versions: Versions::new(version, cfg.feature_level),
            handing_off: watch::channel(false).0,
            handoff_turn: Mutex::new(()),
            led_since: std::sync::Mutex::new(None),
            leader_lease: Duration::from_millis(cfg.election_timeout_ms * 2),
        });
        node.spawn_roster_watch();
        node.spawn_leadership_watch(leader_tx);
        node.spawn_timers();
        node.spawn_joint_finisher();
        node.spawn_snapshot_trigger(schedule);
        node.spawn_owed_recovery();
        Ok(node)
    }

    /// For a node with an empty log: asks the peers and bootstraps, joins, or fails with
    /// the reason (see `raft::bootstrap`). Call once the peer port serves (peers ask this
    /// node the same question). Does nothing for a node that has a log.
    pub async fn bootstrap(&self) -> anyhow::Result<()> {
        let Some(Pending { cfg }) = self.pending.lock().expect("pending lock").take() else { return Ok(()) };
        let derived_id = identity::derive_cluster_id(&cfg.members);
        let asker = bootstrap::Asker {
            id: cfg.id,
            own: &cfg.members[&cfg.id],
            listed: &cfg.members,
            derived_id: &derived_id,
            join: cfg.join,
            data_dir: &cfg.data_dir,
            asked_by: &self.asked_by,
        };
        tracing::info!(
            node = cfg.id,
            join = cfg.join,
            "empty raft log: asking the members in --peers about the cluster"
        );
        match bootstrap::decide(&self.peer_transport, &asker).await {
            bootstrap::Decision::Initialize => {
                identity::store(&cfg.data_dir, &Identity { cluster_id: derived_id, node_id: cfg.id })?;
                self.admit();
                // Every node started with the same member list proposes the same initial
                // membership; openraft makes that safe.
                match self.raft.initialize(cfg.members.clone()).await {
                    Ok(()) => tracing::info!(members = ?cfg.members, "initialized a new cluster"),
                    Err(e) => tracing::info!("cluster already initialized: {e}"),
                }
            }
            bootstrap::Decision::Join { cluster_id } => {
                let id = Identity { cluster_id: cluster_id.clone(), node_id: cfg.id };
                identity::store(&cfg.data_dir, &id)?;
                self.peer_auth.adopt_cluster_id(&cluster_id)?;
                *self.identity.write().expect("identity lock") = id;
                self.admit();
                tracing::info!(%cluster_id, "joining: waiting to be added (`dls members add`) and replicated to as a learner");
            }
            bootstrap::Decision::Refuse(why) => anyhow::bail!(why),
            bootstrap::Decision::Wait(_) => unreachable!("bootstrap::decide waits itself"),
        }
        Ok(())
    }

    fn admit(&self) {
        self.admitted.store(true, Ordering::SeqCst);
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The raft handle, for the peer services (`api::raft_service`) and membership changes.
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// Raft's latest view of this node: role, term, indexes, membership.
    pub fn raft_metrics(&self) -> RaftMetrics {
        self.raft.metrics().borrow().clone()
    }

    /// Membership changes through this node's raft (made on the leader).
    pub(crate) fn members(&self) -> Members<'_> {
        Members::new(&self.raft, self.id, &self.peer_transport)
    }

    /// The replicated state (the lock table). Read by `engine` only: the services go
    /// through it.
    pub(crate) fn state(&self) -> &SharedState {
        &self.state
    }

    /// The log's time on this node (see `raft::log_clock`).
    pub(crate) fn log_clock(&self) -> &LogClock {
        &self.log_clock
    }

    pub(crate) fn leases(&self) -> &Leases {
        &self.leases
    }

    pub(crate) fn txn_wakeups(&self) -> &Arc<TxnWakeups> {
        &self.txn_wakeups
    }

    pub(crate) fn key_watchers(&self) -> &Arc<KeyWatchers> {
        &self.key_watchers
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn tracer(&self) -> Option<&Arc<Tracer>> {
        self.tracer.as_ref()
    }

    pub fn limits(&self) -> &Arc<Limits> {
        &self.limits
    }

    pub(crate) fn log_io(&self) -> &LogIoStats {
        &self.log_io
    }

    pub(crate) fn proposer(&self) -> &Proposer {
        &self.proposer
    }

    /// The cluster's API keys, as this node applied them.
    pub fn api_keys(&self) -> watch::Receiver<Arc<Vec<ApiKey>>> {
        self.api_keys.clone()
    }

    /// Bumped whenever events are appended (or the table is replaced).
    pub(crate) fn events_appended(&self) -> watch::Receiver<u64> {
        self.events.clone()
    }

    /// Checks incoming peer calls (the gate in front of the peer services).
    pub fn peer_auth(&self) -> &Arc<PeerAuth> {
        &self.peer_auth
    }

    /// Outgoing peer connections.
    pub fn peer_transport(&self) -> &Arc<PeerTransport> {
        &self.peer_transport
    }

    /// Remembers that peer `id`, forming a new cluster, asked this still pristine node
    /// (see `bootstrap::Asker::asked_by`); bounded even against a peer with valid
    /// credentials sending made-up ids.
    pub fn note_asker(&self, id: NodeId) {
        let mut asked_by = self.asked_by.lock().expect("asked_by lock");
        if asked_by.len() < bootstrap::MAX_ASKERS {
            asked_by.insert(id);
        }
    }

    /// Whether raft traffic may reach this node yet.
    pub fn admitted(&self) -> bool {
        self.admitted.load(Ordering::SeqCst)
    }

    /// The cluster id this node belongs to.
    pub fn cluster_id(&self) -> String {
        self.identity.read().expect("identity lock").cluster_id.clone()
    }

    /// The cluster id told to a peer's discovery call: none while a joining node has not
    /// learned it (its own would only be derived from its --peers).
    pub fn cluster_id_for_peers(&self) -> String {
        if !self.admitted() && self.pending.lock().expect("pending lock").as_ref().is_some_and(|p| p.cfg.join) {
            return String::new();
        }
        self.cluster_id()
    }

    /// The current leader's id and address, as this node knows it.
    pub fn leader(&self) -> Option<(NodeId, String)> {
        let m = self.raft.metrics().borrow().clone();
        let id = m.current_leader?;
        let addr = m.membership_config.membership().get_node(&id)?.addr.clone();
        Some((id, addr))
    }

    /// Member `id`'s client address, as this node's membership has it.
    pub fn member_addr(&self, id: NodeId) -> Option<String> {
        let m = self.raft.metrics();
        let m = m.borrow();
        Some(m.membership_config.membership().get_node(&id)?.addr.clone())
    }

    /// The current leader's id and member record (both its addresses), as this node knows it.
    pub fn leader_member(&self) -> Option<(NodeId, Member)> {
        let m = self.raft.metrics();
        let m = m.borrow();
        let id = m.current_leader?;
        Some((id, m.membership_config.membership().get_node(&id)?.clone()))
    }

    /// Resolves once this node no longer takes `leader` for the leader: it stood for
    /// election, voted for another node or heard from a new leader. Raft's own verdict that
    /// `leader` went silent (or was replaced), about an election timeout after it did.
    pub async fn leader_gone(&self, leader: NodeId) {
        let mut server = self.raft.server_metrics();
        while server.borrow_and_update().current_leader == Some(leader) {
            if server.changed().await.is_err() {
                // Raft stopped here: this node takes nobody for the leader any more.
                return;
            }
        }
    }

    /// The leader, once this node knows one other than `gone`, waiting for it at most the
    /// longest election timeout (and not past `until`): a client told where the new leader
    /// is goes there at once instead of asking around while the election ends. `None` when
    /// none is known by then.
    pub async fn next_leader(&self, gone: NodeId, until: Option<Instant>) -> Option<(NodeId, String)> {
        let mut server = self.raft.server_metrics();
        let known = async {
            while server.borrow_and_update().current_leader.is_none_or(|id| id == gone) {
                if server.changed().await.is_err() {
                    return;
                }
            }
        };
        let longest = Instant::now() + self.quorum_ack_window * 2;
        let until = until.map_or(longest, |until| until.min(longest));
        let _ = tokio::time::timeout_at(until.into(), known).await;
        self.leader().filter(|(id, _)| *id != gone)
    }

    pub fn not_leader(&self) -> EngineError {
        EngineError::NotLeader { leader: self.leader() }
    }

    /// NOT_LEADER for a call or stream this node served as leader until it lost leadership:
    /// naming the next leader once known (a hand-off names it within milliseconds), so the
    /// client goes there at once instead of asking around.
    pub async fn deposed(&self) -> EngineError {
        EngineError::NotLeader { leader: self.next_leader(self.id, None).await }
    }

    /// Closes the hand-off gate until the returned guard is dropped (see `handoff`), once
    /// any other hand-off is over.
    pub(crate) async fn close_gate(&self) -> ClosedGate<'_> {
        let turn = self.handoff_turn.lock().await;
        self.handing_off.send_replace(true);
        ClosedGate { gate: &self.handing_off, _turn: turn }
    }

    /// Waits while a hand-off is under way; then NOT_LEADER naming the new leader if it
    /// took over, or nothing if this node still leads. Every write, lease renewal and
    /// linearizable read passes here: none may happen on this leader once its successor
    /// may have been elected (see `handoff`).
    async fn past_handoff(&self) -> Result<(), EngineError> {
        let mut gate = self.handing_off.subscribe();
        if !*gate.borrow_and_update() {
            return Ok(());
        }
        let _ = gate.wait_for(|closed| !closed).await;
        if *self.is_leader.borrow() && self.raft.metrics().borrow().state == ServerState::Leader {
            Ok(())
        } else {
            Err(self.deposed().await)
        }
    }

    /// When the leader lease of this node's own election is over (see `handoff`); `None`
    /// when it does not serve as leader.
    pub(crate) fn own_lease_over(&self) -> Option<Instant> {
        let since = (*self.led_since.lock().expect("led_since lock"))?;
        Some(since + self.leader_lease + TIMER_TICK)
    }

    pub(crate) fn quorum_clock(&self) -> &QuorumClock {
        &self.quorum_clock
    }

    /// The highest log index known committed.
    pub fn committed_index(&self) -> u64 {
        self.committed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Fails fast with the leader's address when this node cannot serve.
    pub fn require_leader(&self) -> Result<(), EngineError> {
        if *self.is_leader.borrow() {
            Ok(())
        } else {
            Err(self.not_leader())
        }
    }

    /// A receiver that turns false when this node stops being the leader.
    pub fn leadership(&self) -> watch::Receiver<bool> {
        self.is_leader.clone()
    }

    /// Proposes one of the leader's own commands through raft (batched with concurrent
    /// proposals, see `raft::proposer`) and returns its outcome once applied here.
    pub(crate) async fn propose(&self, cmd: Command) -> Result<Outcome, EngineError> {
        self.propose_holding(cmd, None, Timing::Now, &Tenant::Open).await
    }

    /// [`Node::propose`] for a client's command: shed at once while the proposal queue, or
    /// `who`'s share of it, is full.
    pub(crate) async fn propose_for(&self, who: &Principal, cmd: Command) -> Result<Outcome, EngineError> {
        self.propose_holding(cmd, None, Timing::Now, &Tenant::of(who)).await
    }

    /// [`Node::propose_for`] of a command the leader also proposes on its own (a wait's
    /// cancel) when a client asks for it: shed like a release, so no client skips the queue
    /// bound or its share.
    pub(crate) async fn propose_for_client(&self, who: &Principal, cmd: Command) -> Result<Outcome, EngineError> {
        self.check_feature_level(&cmd).await?;
        self.past_handoff().await?;
        let outcome = self.proposer.propose_as(Origin::Release, cmd, None, Timing::Now, &Tenant::of(who)).await;
        outcome.map_err(|e| self.write_error(e))
    }

    /// [`Node::propose_for`] a request the limits admitted: its admission counts until
    /// the command is applied (or failed), even if the caller stops waiting. `timing` may
    /// park an acquire that will queue anyway (see `raft::proposer`).
    pub(crate) async fn propose_admitted(
        &self,
        who: &Principal,
        cmd: Command,
        admission: Admission,
        timing: Timing,
    ) -> Result<Outcome, EngineError> {
        self.propose_holding(cmd, Some(Box::new(admission)), timing, &Tenant::of(who)).await
    }

    async fn propose_holding(
        &self,
        cmd: Command,
        hold: Option<Hold>,
        timing: Timing,
        tenant: &Tenant,
    ) -> Result<Outcome, EngineError> {
        self.check_feature_level(&cmd).await?;
        self.past_handoff().await?;
        self.proposer.propose(cmd, hold, timing, tenant).await.map_err(|e| self.write_error(e))
    }

    /// Refuses a command that some member could not apply (see `Versions::gate`). When
    /// every member already said it reads the command's level and only the raise has not
    /// committed yet (a new cluster's first seconds), waits for it a moment instead.
    async fn check_feature_level(&self, cmd: &Command) -> Result<(), EngineError> {
        if cmd.feature_level() <= crate::locks::feature_level::BASE_LEVEL {
            // Every member reads it: no lock taken on the hot path.
            return Ok(());
        }
        let deadline = Instant::now() + crate::versions::RAISE_WAIT;
        loop {
            let cluster = self.state.read().expect("state lock").table.feature_levels();
            let members: Vec<NodeId> = {
                let m = self.raft.metrics();
                let m = m.borrow();
                m.membership_config.membership().nodes().map(|(id, _)| *id).collect()
            };
            match self.versions.gate(cmd, cluster, &members) {
                Ok(()) => return Ok(()),
                Err(_)
                    if Instant::now() < deadline && self.versions.raising(&members, cluster, cmd.feature_level()) =>
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(why) => return Err(EngineError::BelowFeatureLevel(why)),
            }
        }
    }

    /// The members' versions and feature levels as this node last heard them.
    pub fn versions(&self) -> &Arc<Versions> {
        &self.versions
    }

    fn write_error(&self, e: WriteError) -> EngineError {
        match e {
            WriteError::NotLeader => self.not_leader(),
            WriteError::Overloaded { queued, limit, retry_after } => EngineError::Overloaded {
                message: format!(
                    "the leader is overloaded: {queued} proposals are queued (limit --max-queued-proposals {limit}); \
                     retry after {} ms with the same request_id",
                    retry_after.as_millis()
                ),
                retry_after,
            },
            WriteError::OverShare { key, queued, share, limit, retry_after } => EngineError::Overloaded {
                message: format!(
                    "API key {key:?} has {queued} proposals queued on the leader (limit \
                     --max-queued-proposals-per-api-key {share}, its share of --max-queued-proposals {limit}); \
                     retry after {} ms with the same request_id",
                    retry_after.as_millis()
                ),
                retry_after,
            },
            WriteError::TimedOut(after) => EngineError::Unavailable(format!(
                "the cluster did not commit the request within {after:?}; retry with the same request_id"
            )),
            WriteError::Failed(why) => EngineError::Unavailable(format!("raft could not commit the request: {why}")),
        }
    }

    /// When a quorum last acknowledged this node as the leader it serves as (its current
    /// committed vote, in every configuration of the membership); `None` when it does not
    /// serve as leader.
    fn quorum_acked(&self) -> Option<Instant> {
        let m = self.raft.metrics();
        let m = m.borrow();
        let serving = self.serving_term.load(Ordering::Acquire);
        if m.state != ServerState::Leader || serving == 0 || m.vote.leader_id().get_term() != serving {
            return None;
        }
        let configs = m.membership_config.membership().get_joint_config();
        self.quorum_clock.quorum_acked(self.id, &m.vote, configs, Instant::now())
    }

    /// Confirms with a quorum that this node still leads, at most once per window;
    /// concurrent callers share one round. Heartbeats are acknowledged only after this,
    /// so a partitioned old leader cannot keep leases alive.
    pub(crate) async fn confirm_leadership(&self) -> Result<(), EngineError> {
        self.past_handoff().await?;
        if self.quorum_acked().is_some_and(|t| t.elapsed() < self.quorum_ack_window) {
            return Ok(());
        }
        let mut confirmed = self.confirmed.lock().await;
        if confirmed.is_some_and(|t| t.elapsed() < LEADERSHIP_CONFIRM_WINDOW) {
            return Ok(());
        }
        let started = Instant::now();
        self.linearizable_read().await?;
        *confirmed = Some(started);
        Ok(())
    }

    /// Waits until this node's table reflects every write committed before the call
    /// (raft read-index), so reads are never stale.
    pub(crate) async fn linearizable_read(&self) -> Result<(), EngineError> {
        self.past_handoff().await?;
        let check = tokio::time::timeout(Duration::from_secs(2), self.raft.ensure_linearizable()).await;
        match check {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(OpenRaftError::APIError(CheckIsLeaderError::ForwardToLeader(_)))) => Err(self.not_leader()),
            Ok(Err(e)) => Err(EngineError::Unavailable(format!("leadership could not be confirmed: {e}"))),
            Err(_) => Err(EngineError::Unavailable("leadership could not be confirmed in time (no quorum?)".into())),
        }
    }

    /// Keeps the peer gate's view of the membership current (`raft::peer_roster`), from the
    /// membership in the log as of now: before this returns, so the peer port never serves
    /// with an empty view on a node that has a membership.
    fn spawn_roster_watch(&self) {
        let auth = self.peer_auth.clone();
        let observe = move |m: &openraft::metrics::RaftServerMetrics<NodeId, Member>| {
            let members = m.membership_config.membership().nodes().map(|(id, _)| *id).collect();
            auth.observe_membership(members, m.current_leader);
        };
        let mut metrics = self.raft.server_metrics();
        observe(&metrics.borrow_and_update());
        tokio::spawn(async move {
            while metrics.changed().await.is_ok() {
                observe(&metrics.borrow_and_update());
            }
        });
    }

    /// Tracks leadership. A node serves as leader only once its table has caught up with
    /// everything committed before its term (a read-index round): until then a client
    /// could be told its transaction does not exist. On every new term in which it leads
    /// it also restarts all leases and waits at full length (a failover never expires a
    /// healthy client).
    fn spawn_leadership_watch(self: &Arc<Self>, leader_tx: watch::Sender<bool>) {
        let node = Arc::downgrade(self);
        // Only role and term matter here: the server metrics change with them alone, where
        // `metrics()` is published several times per raft entry.
        let mut metrics = self.raft.server_metrics();
        tokio::spawn(async move {
            let mut led_term = None;
            loop {
                let (leading, term) = {
                    let m = metrics.borrow_and_update();
                    (m.state == ServerState::Leader, m.vote.leader_id().get_term())
                };
                let Some(node) = node.upgrade() else { return };
                if leading && led_term != Some(term) {
                    // A new term (possibly right after an earlier one of this node's, the
                    // changes in between coalesced): not serving until caught up again.
                    if led_term.take().is_some() {
                        leader_tx.send_replace(false);
                    }
                    node.serving_term.store(0, Ordering::Release);
                    if node.catch_up_as_leader().await {
                        node.leases.restart_all(Instant::now());
                        *node.confirmed.lock().await = None;
                        tracing::info!(term, node = node.id, "became leader; leases restarted at full length");
                        led_term = Some(term);
                        *node.led_since.lock().expect("led_since lock") = Some(Instant::now());
                        node.serving_term.store(term, Ordering::Release);
                        leader_tx.send_replace(true);
                    }
                } else if !leading {
                    if led_term.take().is_some() {
                        tracing::info!(term, node = node.id, "no longer leader");
                    }
                    node.serving_term.store(0, Ordering::Release);
                    leader_tx.send_if_modified(|v| std::mem::replace(v, false));
                }
                drop(node);
                if led_term.is_none() && leading {
                    // Catching up failed while still leading: try again shortly.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                if metrics.changed().await.is_err() {
                    return;
                }
            }
        });
    }

    /// A backup: the replicated state as of everything committed before the call, encoded
    /// as a snapshot file (open at its start, unnamed). Leader only, after a linearizable
    /// read, so a backup never misses a grant that was acknowledged before it was asked for.
    pub(crate) async fn backup(&self) -> Result<(SnapshotMeta, std::fs::File), EngineError> {
        self.require_leader()?;
        self.linearizable_read().await?;
        let (store, state) = (self.snapshots.clone(), self.state.clone());
        let written = tokio::task::spawn_blocking(move || store.backup(&state))
            .await
            .map_err(|e| EngineError::Internal(format!("backup task failed: {e}")))?;
        written.map_err(|e| EngineError::Internal(format!("cannot write the backup: {e}")))
    }

    /// Resolves when raft stops on this node by itself, with why: a storage error (a full
    /// disk, a failed write or fsync) ends raft here, and the node must not go on (see
    /// `docs/storage.md`, "Disk faults").
    pub async fn raft_failed(&self) -> String {
        // Raft publishes `metrics()` on every turn of its loop (several times per entry);
        // waking on each would cost a thread switch per publish. The server metrics change
        // only with the role, term or membership, and their channel closes when raft's core
        // stops, with the reason left in `metrics()`.
        let mut server = self.raft.server_metrics();
        loop {
            if let Err(fatal) = &self.raft.metrics().borrow().running_state {
                return fatal.to_string();
            }
            if server.changed().await.is_err() {
                return match &self.raft.metrics().borrow().running_state {
                    Err(fatal) => fatal.to_string(),
                    Ok(()) => "raft stopped".into(),
                };
            }
        }
    }

    /// Waits until this new leader has applied everything committed before its term.
    async fn catch_up_as_leader(&self) -> bool {
        match tokio::time::timeout(Duration::from_secs(2), self.raft.ensure_linearizable()).await {
            Ok(Ok(_)) => true,
            Ok(Err(e)) => {
                tracing::debug!("not serving as leader yet: {e}");
                false
            }
            Err(_) => false,
        }
    }

    /// The leader's clock: proposes expiries of lapsed leases and cancels timed-out waits.
    fn spawn_timers(self: &Arc<Self>) {
        let node = Arc::downgrade(self);
        // One expiry of API keys in flight at a time: the next tick would find the same keys due.
        let expiring_keys = Arc::new(AtomicBool::new(false));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(TIMER_TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                let Some(node) = node.upgrade() else { return };
                if !*node.is_leader.borrow() {
                    continue;
                }
                let due = node.leases.due(Instant::now());
                for txn in due.expire {
                    let n = node.clone();
                    tokio::spawn(async move {
                        tracing::info!(txn, "lease lapsed; proposing expiry");
                        if let Err(e) = n.propose(Command::Expire { txn }).await {
                            tracing::warn!(txn, "expiry not committed, will retry: {e}");
                            n.leases.retry_expire(txn, Duration::from_millis(200), Instant::now());
                        }
                    });
                }
                for txn in due.overdue {
                    let n = node.clone();
                    tokio::spawn(async move {
                        tracing::info!(txn, "maximum duration passed; ending the transaction");
                        let ended = matches!(n.propose(Command::EndOverdue { txn }).await, Ok(Outcome::Ended { .. }));
                        if !ended {
                            let st = n.state().read().expect("state lock");
                            n.leases.retry_overdue(&st.table, txn, Duration::from_millis(200), Instant::now());
                        }
                    });
                }
                if !due.delays_ended.is_empty() {
                    let n = node.clone();
                    tokio::spawn(async move {
                        let keys = due.delays_ended;
                        tracing::info!(keys = keys.len(), "lock-delay passed; releasing the keys to their queues");
                        if let Err(e) = n.propose(Command::EndLockDelay { keys: keys.clone() }).await {
                            tracing::warn!("lock-delay end not committed, will retry: {e}");
                        }
                        // Not committed, or not due yet by the log's clock: ask again.
                        let st = n.state().read().expect("state lock");
                        n.leases.retry_delays(&st.table, keys, Duration::from_millis(200), Instant::now());
                    });
                }
                node.expire_api_keys(&expiring_keys);
                for (txn, request_id) in due.cancel_waits {
                    let n = node.clone();
                    tokio::spawn(async move {
                        tracing::debug!(txn, %request_id, "acquire timeout; withdrawing the wait");
                        let cmd = Command::CancelWait { txn, request_id: request_id.clone() };
                        if let Err(e) = n.propose(cmd).await {
                            tracing::warn!(txn, "wait cancel not committed, will retry: {e}");
                            n.leases.retry_wait(txn, request_id, Duration::from_millis(200), Instant::now());
                        }
                    });
                }
            }
        });
    }

    /// Proposes the end of the API keys (or old secrets) whose time passed by the log's
    /// clock; the apply checks again by the entry's own time.
    fn expire_api_keys(self: &Arc<Self>, in_flight: &Arc<AtomicBool>) {
        if in_flight.load(Ordering::Acquire) {
            return;
        }
        let names = {
            let st = self.state().read().expect("state lock");
            st.table.api_keys_due(self.log_clock().now_ms()).0
        };
        if names.is_empty() {
            return;
        }
        in_flight.store(true, Ordering::Release);
        let (n, in_flight) = (self.clone(), in_flight.clone());
        tokio::spawn(async move {
            tracing::info!(keys = ?names, "API keys expired or their old secret's grace ended; proposing their end");
            if let Err(e) = n.propose(Command::ExpireApiKeys { names }).await {
                tracing::warn!("API key expiry not committed, will retry: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            in_flight.store(false, Ordering::Release);
        });
    }

    /// Protocol-aware recovery (Alagappan et al., FAST'18). This node cut its log at damage
    /// and owes the entries up to `owed`: it acknowledged them, and a commit may have
    /// counted on its copy. Voting, or leading, with the shortened log could help elect a
    /// leader without them and hand their fencing tokens out again. So until it has applied
    /// them from a leader (one whose commit covers them, which has every committed entry)
    /// it casts no vote (the raft service refuses vote requests) and stands for no election;
    /// it still accepts the leader's entries and snapshots, which is how it gets them back.
    /// The others elect among themselves: every entry committed with this node's copy is
    /// also on one of them. If no such leader ever comes, it says so and what to do.
    fn spawn_owed_recovery(self: &Arc<Self>) {
        const REPORT_EVERY: Duration = Duration::from_secs(10);
        let Some(owed) = *self.owed.borrow() else { return };
        let node = Arc::downgrade(self);
        let mut metrics = self.raft.metrics();
        let (id, addr) = (self.id, self.member_addresses(self.id));
        tokio::spawn(async move {
            let mut reported: Option<Instant> = None;
            loop {
                let applied = metrics.borrow_and_update().last_applied.map(|l| l.index);
                if applied.is_some_and(|a| a >= owed) {
                    break;
                }
                if reported.is_none_or(|t| t.elapsed() >= REPORT_EVERY) {
                    tracing::warn!(
                        owed,
                        applied = ?applied,
                        "not voting or standing for election: this node acknowledged raft log entries up to index \
                         {owed} and lost some to damage on its disk; waiting for a leader whose commit covers them. \
                         If none comes back (the nodes holding them are gone), re-add this node empty: on a running \
                         member `dls members remove {id}` and `dls members add {id} {addr}`, then start it with an \
                         empty --data-dir and --join"
                    );
                    reported = Some(Instant::now());
                }
                tokio::select! {
                    changed = metrics.changed() => if changed.is_err() { return },
                    _ = tokio::time::sleep(REPORT_EVERY) => {}
                }
            }
            let Some(node) = node.upgrade() else { return };
            if let Err(e) = node.log_store.settle_owed().await {
                // Still owing on disk: it stays out of elections until the next start retries.
                tracing::error!("cannot record that the lost entries were fetched again: {}", chain(&e));
                return;
            }
            node.owed.send_replace(None);
            node.raft.runtime_config().elect(true);
            tracing::info!(
                owed,
                "fetched again every entry this node had lost; it votes and stands for election again"
            );
        });
    }

    /// Node `id`'s addresses as `dls members add` takes them, if the membership knows it.
    fn member_addresses(&self, id: NodeId) -> String {
        let m = self.raft.metrics();
        let m = m.borrow();
        m.membership_config
            .membership()
            .get_node(&id)
            .map_or_else(|| "HOST:PORT/PEER_PORT".into(), |n| format!("{}/{}", n.addr, n.peer_addr))
    }

    /// The highest index this node lost to damage and has not applied again (see
    /// `spawn_owed_recovery`): it does not vote meanwhile.
    pub fn owed(&self) -> Option<u64> {
        *self.owed.borrow()
    }

    /// Finishes a joint configuration that nobody is finishing (see
    /// `Members::finish_stuck_joint`), while this node lives.
    fn spawn_joint_finisher(self: &Arc<Self>) {
        const TICK: Duration = Duration::from_millis(500);
        let node = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut seen = None;
            loop {
                tokio::time::sleep(TICK).await;
                let Some(node) = node.upgrade() else { return };
                node.members().finish_stuck_joint(&mut seen).await;
            }
        });
    }

    /// Builds a snapshot whenever the state machine finds one due (see
    /// `raft::snapshot_schedule`), while this node lives.
    fn spawn_snapshot_trigger(self: &Arc<Self>, schedule: Arc<SnapshotSchedule>) {
        let node = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                schedule.asked().await;
                let Some(node) = node.upgrade() else { return };
                if let Err(e) = node.raft.trigger().snapshot().await {
                    tracing::debug!("snapshot not triggered, raft has stopped: {e}");
                    return;
                }
            }
        });
    }

    /// Stops raft and flushes storage.
    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!("raft shutdown: {e}");
        }
        if let Err(e) = self.log_store.save_commit_now().await {
            tracing::warn!("cannot store the commit index at shutdown: {}", chain(&e));
        }
    }
}

/// The refusal of a node whose data directory kept its identity but lost its raft log.
fn lost_log_refusal(cfg: &NodeConfig, cluster_id: &str) -> String {
    let own = &cfg.members[&cfg.id];
    if cfg.members.len() == 1 {
        return format!(
            "{} holds cluster-id.toml (cluster {cluster_id}) but no raft log: the log was lost. Restore the data \
             directory from a backup; starting a new cluster here instead (remove cluster-id.toml) restarts the \
             fencing tokens at 1, so the storage they protect must be reset too.",
            cfg.data_dir.display()
        );
    }
    bootstrap::lost_log(
        cfg.id,
        &cfg.data_dir,
        own,
        &format!("its cluster-id.toml says it belonged to cluster {cluster_id}"),
    )
}
