//! `dls status`: every node's own view of the cluster, side by side.

use std::collections::BTreeMap;
use std::time::Duration;

use caerus_core::{ClusterStatus, DlsClient};
use clap::Args;
use serde_json::json;

use super::connect::{print_json, print_line, CliError, ClusterArgs};
use super::format::table;

/// A node that does not answer within this long is shown as unreachable (the whole
/// command waits for the slowest node, so a down node must not cost the full --timeout).
const PER_NODE_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Args, Debug)]
#[command(after_help = "Asks every node of --endpoints (and any other member they name) on its own; a node that \
does not answer is shown as unreachable. Exits non-zero only if no node answers.\n\
Needs an admin key on a server with an API keys file.\n\n\
Example:\n  dls status --endpoints 10.0.0.1:7070,10.0.0.2:7070,10.0.0.3:7070")]
pub struct StatusArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// One asked node and what it said.
struct NodeReport {
    addr: String,
    answer: Result<ClusterStatus, caerus_core::Error>,
}

pub async fn run(args: StatusArgs) -> Result<(), CliError> {
    let client = args.cluster.client_with(PER_NODE_TIMEOUT).await?;
    let mut reports = ask(&client, args.cluster.endpoint_list()).await;
    // Members the given endpoints do not list are asked too, so one address shows all.
    let bare = |addr: &str| addr.trim().trim_start_matches("http://").trim_end_matches('/').to_string();
    let asked: Vec<String> = reports.iter().map(|r| bare(&r.addr)).collect();
    let more: Vec<String> = members(&reports).into_values().filter(|addr| !asked.contains(&bare(addr))).collect();
    reports.extend(ask(&client, more).await);

    let answered = reports.iter().filter(|r| r.answer.is_ok()).count();
    if args.json {
        print_json(&to_json(&reports))?;
    } else {
        for line in render(&reports) {
            print_line(&line)?;
        }
    }
    if answered > 0 {
        return Ok(());
    }
    // Nobody answered: the first error says why (e.g. a missing admin key), which is what
    // the user needs to fix.
    match reports.into_iter().find_map(|r| r.answer.err()) {
        Some(e) => Err(e.into()),
        None => Err(CliError::usage("no endpoints to ask; give --endpoints")),
    }
}

/// Asks every address concurrently.
async fn ask(client: &DlsClient, addrs: Vec<String>) -> Vec<NodeReport> {
    let queries = addrs.into_iter().map(|addr| async move {
        let answer = client.cluster_status_of(&addr).await;
        NodeReport { addr, answer }
    });
    futures::future::join_all(queries).await
}

/// Members as the answering nodes list them (a leader's list preferred), by node id.
fn members(reports: &[NodeReport]) -> BTreeMap<u64, String> {
    let mut answers: Vec<&ClusterStatus> = reports.iter().filter_map(|r| r.answer.as_ref().ok()).collect();
    answers.sort_by_key(|s| !s.is_leader());
    answers.first().map(|s| s.members.iter().map(|m| (m.node_id, m.addr.clone())).collect()).unwrap_or_default()
}

fn render(reports: &[NodeReport]) -> Vec<String> {
    let header = [
        "NODE",
        "ADDRESS",
        "ROLE",
        "TERM",
        "LEADER",
        "COMMIT",
        "APPLIED",
        "LAST TOKEN",
        "ACTIVE TXNS",
        "VERSION",
        "LEVEL",
    ];
    let levels = member_levels(reports);
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| match &r.answer {
            Ok(s) => vec![
                s.node_id.to_string(),
                r.addr.clone(),
                s.role.clone(),
                s.term.to_string(),
                s.leader_id.map_or("-".into(), |id| id.to_string()),
                s.commit_index.to_string(),
                s.applied_index.to_string(),
                s.last_fencing_token.to_string(),
                s.active_transactions.to_string(),
                s.version.clone().unwrap_or_else(|| OLD_VERSION.into()),
                levels.get(&s.node_id).map_or("?".into(), |l| l.to_string()),
            ],
            Err(e) => vec!["-".into(), r.addr.clone(), format!("unreachable ({})", e.code())],
        })
        .collect();
    let mut lines = table(&header, &rows, "");
    lines.push(summary(reports));
    lines.push(feature_summary(reports));
    for r in reports {
        if let Err(e) = &r.answer {
            lines.push(format!("{}: {e}", r.addr));
        }
    }
    lines
}

/// `leader: node 1 (127.0.0.1:7070); members: 1=…, 2=…, 3=…; 3 of 3 nodes answered`
fn summary(reports: &[NodeReport]) -> String {
    let answers: Vec<&ClusterStatus> = reports.iter().filter_map(|r| r.answer.as_ref().ok()).collect();
    let mut leaders: Vec<(u64, String)> =
        answers.iter().filter_map(|s| s.leader_id.map(|id| (id, s.leader_addr.clone().unwrap_or_default()))).collect();
    leaders.sort();
    leaders.dedup();
    let leader = match leaders.as_slice() {
        [] => "none elected".to_string(),
        [(id, addr)] => format!("node {id} ({addr})"),
        // Views differ for a moment around an election; show them all rather than pick.
        many => format!(
            "nodes disagree: {}",
            many.iter().map(|(id, addr)| format!("node {id} ({addr})")).collect::<Vec<_>>().join(" / ")
        ),
    };
    let members = members(reports);
    let member_list = if members.is_empty() {
        "unknown".to_string()
    } else {
        members.iter().map(|(id, addr)| format!("{id}={addr}")).collect::<Vec<_>>().join(", ")
    };
    format!("leader: {leader}; members: {member_list}; {} of {} nodes answered", answers.len(), reports.len())
}

/// How a node before the version handshake (v0.1.0) is shown: it answers no version.
const OLD_VERSION: &str = "0.1.0 or earlier";

/// Each member's feature level as the leader (else any answering node) heard it.
fn member_levels(reports: &[NodeReport]) -> BTreeMap<u64, u32> {
    let mut answers: Vec<&ClusterStatus> = reports.iter().filter_map(|r| r.answer.as_ref().ok()).collect();
    answers.sort_by_key(|s| !s.is_leader());
    let mut levels = BTreeMap::new();
    for s in answers.iter().rev() {
        for m in &s.members {
            if let Some(level) = m.feature_level {
                levels.insert(m.node_id, level);
            }
        }
    }
    levels
}

/// `feature level: 2 (highest used 1; members read 1=2, 2=2, 3=1)`
fn feature_summary(reports: &[NodeReport]) -> String {
    let leader = reports.iter().filter_map(|r| r.answer.as_ref().ok()).max_by_key(|s| s.is_leader());
    let Some(s) = leader else { return "feature level: unknown".into() };
    let Some(level) = s.feature_level else {
        return format!("feature level: 1 (node {} runs {OLD_VERSION}, before the version handshake)", s.node_id);
    };
    let members = s
        .members
        .iter()
        .map(|m| format!("{}={}", m.node_id, m.feature_level.map_or("?".into(), |l| l.to_string())))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "feature level: {level} (highest used {}; members read {members})",
        s.feature_level_used.map_or("?".into(), |u| u.to_string())
    )
}

fn to_json(reports: &[NodeReport]) -> serde_json::Value {
    let nodes: Vec<serde_json::Value> = reports
        .iter()
        .map(|r| match &r.answer {
            Ok(s) => json!({
                "address": r.addr,
                "reachable": true,
                "node_id": s.node_id,
                "role": s.role,
                "term": s.term,
                "leader_id": s.leader_id,
                "leader_addr": s.leader_addr,
                "commit_index": s.commit_index,
                "applied_index": s.applied_index,
                "last_log_index": s.last_log_index,
                "last_fencing_token": s.last_fencing_token,
                "active_transactions": s.active_transactions,
                "last_event_sequence": s.last_event_sequence,
                "version": s.version,
                "feature_level": s.feature_level,
                "feature_level_used": s.feature_level_used,
                "members": s.members.iter().map(|m| json!({
                    "node_id": m.node_id, "version": m.version, "feature_level": m.feature_level,
                })).collect::<Vec<_>>(),
            }),
            Err(e) => json!({
                "address": r.addr,
                "reachable": false,
                "error": { "code": e.code(), "message": e.message() },
            }),
        })
        .collect();
    let members: Vec<serde_json::Value> =
        members(reports).into_iter().map(|(id, addr)| json!({ "node_id": id, "addr": addr })).collect();
    json!({ "nodes": nodes, "members": members, "summary": summary(reports) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use caerus_core::{ClusterMember, Error};

    fn status(id: u64, role: &str, leader: u64) -> ClusterStatus {
        ClusterStatus {
            node_id: id,
            leader_id: Some(leader),
            leader_addr: Some(format!("h:{leader}")),
            term: 3,
            commit_index: 10,
            applied_index: 10,
            last_log_index: 10,
            role: role.into(),
            members: (1..=3)
                .map(|n| ClusterMember {
                    node_id: n,
                    addr: format!("h:{n}"),
                    voter: true,
                    version: Some("0.2.0".into()),
                    feature_level: Some(if n == 3 { 1 } else { 2 }),
                })
                .collect(),
            last_fencing_token: 4,
            active_transactions: 1,
            last_event_sequence: 0,
            feature_level: Some(1),
            feature_level_used: Some(1),
            version: Some("0.2.0".into()),
        }
    }

    #[test]
    fn rows_and_summary() {
        let reports = vec![
            NodeReport { addr: "h:1".into(), answer: Ok(status(1, "Leader", 1)) },
            NodeReport { addr: "h:2".into(), answer: Ok(status(2, "Follower", 1)) },
            NodeReport { addr: "h:3".into(), answer: Err(Error::Unavailable { message: "refused".into() }) },
        ];
        let text = render(&reports).join("\n");
        assert!(text.contains("NODE  ADDRESS  ROLE"), "{text}");
        assert!(text.contains("-     h:3      unreachable (UNAVAILABLE)"), "{text}");
        assert!(text.contains("leader: node 1 (h:1); members: 1=h:1, 2=h:2, 3=h:3; 2 of 3 nodes answered"), "{text}");
        assert!(text.contains("feature level: 1 (highest used 1; members read 1=2, 2=2, 3=1)"), "{text}");
        let j = to_json(&reports);
        assert_eq!(j["nodes"][2]["reachable"], false);
        assert_eq!(j["members"].as_array().unwrap().len(), 3);
    }
}
