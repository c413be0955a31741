//! `dls members list|add|remove|promote|transfer-leader`: see and change who is in the cluster,
//! and who leads it, online.

use std::time::Duration;

use caerus_core::{AddMemberOptions, MemberInfo};
use clap::{Args, Subcommand};
use serde_json::json;

use super::connect::{print_json, print_line, CliError, ClusterArgs};
use super::format::table;
use super::lock::parse_duration;
use caerus_server::parse_peers;

#[derive(Subcommand, Debug)]
pub enum MembersCommand {
    /// List voters and learners with their addresses and how far each has replicated.
    List(ListArgs),
    /// Add a node: as a learner first, caught up by the leader (snapshot, then log), then as a voter.
    #[command(after_help = "Start the new node with `dls serve --join --node-id N --peers ...` and an empty \
data directory (its --peers lists the current members and itself). The command waits until the node has caught up \
(--catch-up-timeout); if it has not by then, it stays a learner: start it and run `dls members promote N`.\n\
Needs an admin key without namespace limits on a server with an API keys file.\n\n\
Example:\n  dls members add 4 10.0.0.4:7070/7080")]
    Add(AddArgs),
    /// Remove a node (voter or learner) through joint consensus. Removing the leader makes it step down.
    #[command(after_help = "Refused for the last voter. To replace a failed node: `dls members remove N`, then \
`dls members add M HOST:PORT/PEER_PORT` for its successor.\n\n\
Example:\n  dls members remove 3")]
    Remove(RemoveArgs),
    /// Make a learner a voter once it has caught up.
    Promote(PromoteArgs),
    /// Hand leadership to another voter (the most caught-up one, or N), as a leader does on SIGTERM.
    #[command(after_help = "The leader holds new work for the moment of the hand-off (a few milliseconds), waits \
until the successor holds its whole log, and makes it stand for election; clients are told where the new leader is. \
Refused for a learner or a node that is no member; if the successor cannot take over now, the old leader goes on \
leading. Needs an admin key without namespace limits on a server with an API keys file.\n\n\
Examples:\n  dls members transfer-leader      # the most caught-up voter\n  dls members transfer-leader 2")]
    TransferLeader(TransferArgs),
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Args, Debug)]
pub struct AddArgs {
    /// The new node's id (its --node-id), not 0 and not a current member.
    pub id: u64,
    /// Its client address and peer port, as in --peers: HOST:PORT/PEER_PORT (or HOST:PORT/HOST:PEER_PORT).
    pub address: String,
    /// Keep it a learner (replicated, not voting); promote it later with `dls members promote`.
    #[arg(long)]
    pub learner: bool,
    /// How long to wait for it to catch up before promoting it (e.g. 60s, 5m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "60s")]
    pub catch_up_timeout: Duration,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Args, Debug)]
pub struct RemoveArgs {
    /// The node id to remove.
    pub id: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Args, Debug)]
pub struct PromoteArgs {
    /// The learner's node id.
    pub id: u64,
    /// How long to wait for it to catch up first (e.g. 60s, 5m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "60s")]
    pub catch_up_timeout: Duration,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(Args, Debug)]
pub struct TransferArgs {
    /// The voter to hand leadership to (default: the most caught-up voter).
    pub id: Option<u64>,
    /// Print JSON instead of a line.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

pub async fn run(command: MembersCommand) -> Result<(), CliError> {
    let (members, json) = match command {
        MembersCommand::List(a) => {
            let m = a.cluster.client().await?.list_members().await?;
            if a.json {
                return print_json(&json!({
                    "leader_id": m.leader_id,
                    "last_log_index": m.last_log_index,
                    "changing": m.changing,
                    "members": to_json(&m.members),
                }));
            }
            let mut lines = render(&m.members);
            lines.push(format!(
                "leader: node {}; last log index {}{}",
                m.leader_id,
                m.last_log_index,
                if m.changing { "; a change is in progress" } else { "" }
            ));
            for l in lines {
                print_line(&l)?;
            }
            return Ok(());
        }
        MembersCommand::Add(a) => {
            // The same syntax as one --peers entry, checked by the same parser.
            let parsed = parse_peers(&format!("{}={}", a.id, a.address)).map_err(|e| {
                CliError::usage(e.to_string().replace("--peers entry", "address").replace("--peers", "the address"))
            })?;
            let member = parsed.into_values().next().expect("one entry parsed");
            let options = AddMemberOptions { stay_learner: a.learner, catch_up_timeout: Some(a.catch_up_timeout) };
            let client = a.cluster.client().await?;
            (client.add_member(a.id, &member.addr, &member.peer_addr, options).await?, a.json)
        }
        MembersCommand::Remove(a) => (a.cluster.client().await?.remove_member(a.id).await?, a.json),
        MembersCommand::TransferLeader(a) => {
            let leader = a.cluster.client().await?.transfer_leader(a.id).await?;
            if a.json {
                return print_json(&json!({ "leader_id": leader.node_id, "leader_addr": leader.addr }));
            }
            return print_line(&format!("node {} at {} leads now", leader.node_id, leader.addr));
        }
        MembersCommand::Promote(a) => {
            (a.cluster.client().await?.promote_member(a.id, Some(a.catch_up_timeout)).await?, a.json)
        }
    };
    if json {
        return print_json(&json!({ "members": to_json(&members) }));
    }
    for l in render(&members) {
        print_line(&l)?;
    }
    Ok(())
}

fn render(members: &[MemberInfo]) -> Vec<String> {
    let rows: Vec<Vec<String>> = members
        .iter()
        .map(|m| {
            vec![
                m.node_id.to_string(),
                m.addr.clone(),
                m.peer_addr.clone(),
                if m.voter { "voter" } else { "learner" }.to_string(),
                m.matched_index.to_string(),
                m.version.clone().unwrap_or_else(|| "?".into()),
                m.feature_level.map_or("?".into(), |l| l.to_string()),
            ]
        })
        .collect();
    table(&["NODE", "ADDRESS", "PEER ADDRESS", "ROLE", "MATCHED", "VERSION", "LEVEL"], &rows, "")
}

fn to_json(members: &[MemberInfo]) -> serde_json::Value {
    members
        .iter()
        .map(|m| {
            json!({
                "node_id": m.node_id,
                "addr": m.addr,
                "peer_addr": m.peer_addr,
                "voter": m.voter,
                "matched_index": m.matched_index,
                "version": m.version,
                "feature_level": m.feature_level,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_name_the_role() {
        let m = |id, voter| MemberInfo {
            node_id: id,
            addr: format!("h:{id}"),
            peer_addr: format!("h:{}", id + 10),
            voter,
            matched_index: 7,
            version: Some("0.2.0".into()),
            feature_level: Some(2),
        };
        let text = render(&[m(1, true), m(4, false)]).join("\n");
        assert!(text.contains("NODE  ADDRESS  PEER ADDRESS  ROLE"), "{text}");
        assert!(text.contains("4     h:4      h:14          learner  7        0.2.0    2"), "{text}");
    }
}
