//! Command-line flags of `dls` (each also an environment variable).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use crate::api::victim_policies::VictimPolicies;
use crate::limits::LimitArgs;
use crate::listeners::Listeners;
use crate::locks::VictimPolicy;
use crate::node::NodeConfig;
use crate::raft::types::{Member, NodeId};
use crate::security::SecurityArgs;

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// TOML file with the same settings as these flags, one key per long flag as written
    /// here (`data-dir = "/var/lib/dls"`, `max-locks-per-txn = 100`, `insecure = true`,
    /// repeatable flags as arrays). Flags and DLS_* variables override it; an unknown key
    /// is an error.
    #[arg(long, env = "DLS_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the effective configuration as TOML (each value with its source: flag, env,
    /// config file or default; secrets redacted), check it, and exit.
    #[arg(long)]
    pub print_config: bool,
    /// This node's id in the cluster (a key of --peers).
    #[arg(long, env = "DLS_NODE_ID", default_value_t = 1)]
    pub node_id: u64,
    /// Address to listen on for clients (gRPC). Default: this node's client address in
    /// --peers, or 127.0.0.1:7070.
    #[arg(long, env = "DLS_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Address to listen on for peers (the raft transport only; never served on the client
    /// port). Default: this node's peer address in --peers. A node without --peers has no
    /// peers and opens no peer port.
    #[arg(long, env = "DLS_PEER_LISTEN")]
    pub peer_listen: Option<SocketAddr>,
    /// Directory for the raft log, vote and snapshots.
    #[arg(long, env = "DLS_DATA_DIR", default_value = "./dls-data")]
    pub data_dir: PathBuf,
    /// Cluster members as ID=HOST:PORT/PEER_PORT,... (three or five nodes): each member's
    /// client address, then after `/` its peer port on the same host (or HOST:PORT).
    /// Nodes started with the same list form the cluster by themselves. Omit for a
    /// single-node cluster.
    #[arg(long, env = "DLS_PEERS")]
    pub peers: Option<String>,
    /// Join a running cluster instead of bootstrapping one: never initializes; learns the
    /// cluster id from the members in --peers (the current members and this node) and waits
    /// to be added (`dls members add`) and caught up as a learner. For a node added to a
    /// running cluster, and for one re-added after losing its data directory.
    #[arg(long, env = "DLS_JOIN")]
    pub join: bool,
    /// API keys file (TOML with SHA-256 hashes; see `dls keys add`). Without it the server is open.
    #[arg(long, env = "DLS_API_KEYS_FILE")]
    pub api_keys_file: Option<PathBuf>,
    /// Raft heartbeat interval in milliseconds.
    #[arg(long, env = "DLS_HEARTBEAT_MS", default_value_t = 50)]
    pub heartbeat_ms: u64,
    /// Minimum raft election timeout in milliseconds (the maximum is twice this). A
    /// follower stands for election once the leader has been silent for a random
    /// timeout plus the maximum (openraft's leader lease): 450–600 ms with the default,
    /// which suits a LAN: a failover within a second, and no spurious election under full
    /// load (docs/bench.md). Raise it on slow or distant links.
    #[arg(long, env = "DLS_ELECTION_TIMEOUT_MS", default_value_t = 150)]
    pub election_timeout_ms: u64,
    /// Take a snapshot and compact the log every this many log entries. A large snapshot
    /// (over 1 KiB per entry of this) waits one entry per KiB of it, at most 16 times this.
    #[arg(long, env = "DLS_SNAPSHOT_EVERY", default_value_t = 10_000)]
    pub snapshot_every: u64,
    /// Which member of a deadlock cycle to abort: lowest-priority-then-youngest, youngest or oldest.
    #[arg(long, env = "DLS_VICTIM_POLICY", default_value = "lowest-priority-then-youngest")]
    pub victim_policy: VictimPolicy,
    /// Per-namespace victim policy as PREFIX=POLICY (repeatable, or comma-separated in the
    /// environment); the longest matching prefix of the namespace that closed the cycle wins.
    #[arg(long = "namespace-victim-policy", env = "DLS_NAMESPACE_VICTIM_POLICY", value_delimiter = ',', value_parser = parse_namespace_policy)]
    pub namespace_victim_policies: Vec<(String, VictimPolicy)>,
    /// Address of the operator HTTP port: /metrics (Prometheus), /healthz, /readyz.
    /// Give each node on one host its own.
    #[arg(long, env = "DLS_HTTP_LISTEN", default_value = "127.0.0.1:7071")]
    pub http_listen: SocketAddr,
    /// Write the addresses this node bound to FILE as JSON (`{"client": "127.0.0.1:41234",
    /// "http": "...", "peer": "..." or null}`), atomically, once its ports are bound and
    /// before they serve. With port 0 in --listen, --http-listen or --peer-listen the kernel
    /// picks a free port, and this file is how a harness or supervisor learns it (no port
    /// picked by the caller that someone else may bind first). A restart that must keep its
    /// addresses passes the ones read here.
    #[arg(long, env = "DLS_PORTS_FILE", value_name = "FILE")]
    pub ports_file: Option<PathBuf>,
    /// Webhooks file (TOML, see docs/webhooks.md): the leader POSTs matching events to
    /// each endpoint, signed, at least once. Give every node the same file.
    #[arg(long, env = "DLS_WEBHOOKS_FILE")]
    pub webhooks_file: Option<PathBuf>,
    /// The highest feature level this node reads and advertises to its peers (default: all
    /// this release reads). With a lower one the cluster's level stays there, so the
    /// cluster can still be rolled back to the release of that level while this one is
    /// tried; the node refuses to start on a data directory written at a higher level.
    #[arg(long, env = "DLS_FEATURE_LEVEL", default_value_t = crate::locks::feature_level::LEVEL, value_parser = crate::versions::parse_level)]
    pub feature_level: u32,
    #[command(flatten)]
    pub security: SecurityArgs,
    #[command(flatten)]
    pub http_access: crate::http::access::HttpAccessArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub connections: crate::conn::ConnectionArgs,
    #[command(flatten)]
    pub telemetry: crate::telemetry::TelemetryArgs,
}

fn parse_namespace_policy(raw: &str) -> Result<(String, VictimPolicy), String> {
    let (prefix, policy) =
        raw.split_once('=').ok_or_else(|| format!("{raw:?} must look like PREFIX=POLICY, e.g. billing-=oldest"))?;
    Ok((prefix.trim().to_string(), policy.parse().map_err(|e: caerus_types::ParseError| e.0)?))
}

/// Parses `1=10.0.0.1:7070/7080,2=10.0.0.2:7070/7080`: per member, the client address and
/// the peer address (a bare port after `/` means the client address's host).
pub fn parse_peers(raw: &str) -> anyhow::Result<BTreeMap<NodeId, Member>> {
    let mut out: BTreeMap<NodeId, Member> = BTreeMap::new();
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (id, addrs) = part
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--peers entry {part:?} must look like ID=HOST:PORT/PEER_PORT"))?;
        let id: u64 =
            id.trim().parse().map_err(|_| anyhow::anyhow!("--peers entry {part:?}: {id:?} is not a node id"))?;
        if id == 0 {
            anyhow::bail!("--peers entry {part:?}: node ids start at 1");
        }
        let (addr, peer) = addrs.trim().split_once('/').ok_or_else(|| {
            anyhow::anyhow!(
                "--peers entry {part:?} names no peer port: write ID=HOST:CLIENT_PORT/PEER_PORT, e.g. {id}={}/7080 \
                 (the peer port carries raft traffic only)",
                addrs.trim()
            )
        })?;
        let (host, _) = addr
            .rsplit_once(':')
            .ok_or_else(|| anyhow::anyhow!("--peers entry {part:?}: {addr:?} is not HOST:PORT"))?;
        let peer_addr = if peer.parse::<u16>().is_ok() { format!("{host}:{peer}") } else { peer.to_string() };
        if !peer_addr.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok()) {
            anyhow::bail!("--peers entry {part:?}: the peer address {peer:?} is neither PORT nor HOST:PORT");
        }
        if peer_addr == addr {
            anyhow::bail!("--peers entry {part:?}: the peer port must differ from the client port");
        }
        // Two members told the same address would answer for each other: a node could
        // count its own vote twice, or replicate to itself as if to a peer.
        for (other, m) in &out {
            for (mine, theirs) in
                [(addr, &m.addr), (addr, &m.peer_addr), (&peer_addr, &m.addr), (&peer_addr, &m.peer_addr)]
            {
                if mine == theirs.as_str() && *other != id {
                    anyhow::bail!(
                        "--peers gives {mine} to node {other} and to node {id}: every node needs its own client and peer port"
                    );
                }
            }
        }
        if out.insert(id, Member { addr: addr.to_string(), peer_addr }).is_some() {
            anyhow::bail!("--peers names node {id} twice");
        }
    }
    if out.is_empty() {
        anyhow::bail!("--peers is empty; give ID=HOST:PORT/PEER_PORT for every member");
    }
    Ok(out)
}

fn socket_addr(flag: &str, node: u64, addr: &str) -> anyhow::Result<SocketAddr> {
    addr.parse().map_err(|e| {
        anyhow::anyhow!("node {node}'s {flag} address {addr:?} in --peers: {e} (use an IP, or pass --{flag}-listen)")
    })
}

impl ServeArgs {
    pub fn victim_policies(&self) -> VictimPolicies {
        VictimPolicies { default: self.victim_policy, by_prefix: self.namespace_victim_policies.clone() }
    }

    /// Resolves the listen addresses and the member list.
    pub fn node_config(&self) -> anyhow::Result<(Listeners, NodeConfig)> {
        let (client, peer, members) = match &self.peers {
            Some(raw) => {
                let members = parse_peers(raw)?;
                let own = members.get(&self.node_id).ok_or_else(|| {
                    anyhow::anyhow!("--node-id {} is not in --peers {raw}; add it or fix the id", self.node_id)
                })?;
                let client = match self.listen {
                    Some(l) => l,
                    None => socket_addr("client", self.node_id, &own.addr)?,
                };
                let peer = match self.peer_listen {
                    Some(l) => l,
                    None => socket_addr("peer", self.node_id, &own.peer_addr)?,
                };
                (client, Some(peer), members)
            }
            None => {
                let client = self.listen.unwrap_or_else(|| "127.0.0.1:7070".parse().expect("valid default"));
                // A lone node still has a peer address in its membership; it is only
                // listened on when asked (a single node has nobody to talk raft with).
                let peer_addr = self.peer_listen.map(|p| p.to_string()).unwrap_or_default();
                let members = BTreeMap::from([(self.node_id, Member { addr: client.to_string(), peer_addr })]);
                (client, self.peer_listen, members)
            }
        };
        if self.join && self.peers.is_none() {
            anyhow::bail!("--join needs --peers: the members to ask for the cluster (and this node's own entry)");
        }
        if self.election_timeout_ms < self.heartbeat_ms * 2 {
            anyhow::bail!("--election-timeout-ms must be at least twice --heartbeat-ms");
        }
        if self.snapshot_every < 10 {
            anyhow::bail!("--snapshot-every must be at least 10");
        }
        let listeners = Listeners { client, peer, http: self.http_listen };
        // Port 0 asks the kernel for a free port, a different one for each listener.
        let distinct = [Some(client), peer, Some(self.http_listen)].map(|a| a.filter(|a| a.port() != 0));
        for (i, a) in distinct.iter().enumerate() {
            if a.is_some() && distinct[..i].contains(a) {
                anyhow::bail!(
                    "the client, peer and HTTP ports must differ (client {client}, peer {}, HTTP {}); \
                     fix --listen, --peer-listen/--peers or --http-listen",
                    peer.map_or("none".into(), |p| p.to_string()),
                    self.http_listen
                );
            }
        }
        let cfg = NodeConfig {
            id: self.node_id,
            data_dir: self.data_dir.clone(),
            members,
            join: self.join,
            heartbeat_ms: self.heartbeat_ms,
            election_timeout_ms: self.election_timeout_ms,
            snapshot_every: self.snapshot_every,
            limits: self.limits.clone(),
            metrics_namespaces: self.telemetry.metrics_namespaces,
            otlp_traces: self.telemetry.otlp_endpoint.clone(),
            feature_level: self.feature_level,
        };
        Ok((listeners, cfg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_parse_and_reject_mistakes() {
        let p = parse_peers("1=127.0.0.1:7070/7080, 2=db2.internal:7071/10.1.0.2:7081").unwrap();
        assert_eq!(p[&1], Member { addr: "127.0.0.1:7070".into(), peer_addr: "127.0.0.1:7080".into() });
        assert_eq!(p[&2], Member { addr: "db2.internal:7071".into(), peer_addr: "10.1.0.2:7081".into() });
        let no_peer_port = parse_peers("1=127.0.0.1:7070").unwrap_err().to_string();
        assert!(no_peer_port.contains("1=127.0.0.1:7070/7080"), "{no_peer_port}");
        assert!(parse_peers("1=a:1/2,1=b:1/2").is_err());
        assert!(parse_peers("x=a:1/2").is_err());
        assert!(parse_peers("0=a:1/2").is_err());
        assert!(parse_peers("1=a:1/a:1").is_err(), "peer and client port must differ");
        for shared in ["1=a:1/2,2=a:1/3", "1=a:1/2,2=a:3/2", "1=a:1/2,2=a:2/3", "1=a:1/2,2=a:3/1"] {
            let err = parse_peers(shared).unwrap_err().to_string();
            assert!(err.contains("to node 1 and to node 2") && err.contains("its own"), "{shared}: {err}");
        }
        assert!(parse_peers("1=a:1/2,2=b:1/2").is_ok(), "the same ports on other hosts");
        assert!(parse_peers("1=a:1/x").is_err());
        assert!(parse_peers("127.0.0.1:7070").is_err());
    }

    #[test]
    fn a_namespace_policy_is_prefix_equals_policy() {
        assert_eq!(parse_namespace_policy("billing-=oldest"), Ok(("billing-".into(), VictimPolicy::Oldest)));
        assert!(parse_namespace_policy("x=sideways").is_err());
        assert!(parse_namespace_policy("nope").is_err());
    }
}
