//! Faults that change who is in the cluster while clients work:
//! - `wipe-rejoin`: a follower loses its data directory and is restarted with the same
//!   flags. It must refuse to start (a node that forgot its log and vote must not vote or
//!   be counted), and comes back only the documented way: `members remove`, a start with
//!   `--join`, `members add`.
//! - `membership-partition`: a follower is removed and added back while a minority (maybe
//!   the leader) is cut off, so the joint configuration has to commit across a partition.
//!
//! Each returns the broken promises it saw (besides what the history checkers find).

use std::time::{Duration, Instant};

use caerus_core::{AddMemberOptions, DlsClient, Error};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use caerus_testkit::Cluster;

use crate::cluster::ensure_running;
use crate::history::History;

/// How long a membership change may take to settle once the cluster is whole again.
const SETTLE: Duration = Duration::from_secs(60);
/// How long a wiped node may take to notice it must refuse (it asks its peers first).
const REFUSAL: Duration = Duration::from_secs(20);

pub async fn wipe_and_rejoin(
    c: &mut Cluster,
    admin: &DlsClient,
    leader: u64,
    rng: &mut StdRng,
    h: &History,
) -> anyhow::Result<Vec<String>> {
    let followers: Vec<u64> = c.ids().into_iter().filter(|&i| i != leader).collect();
    let f = *followers.choose(rng).expect("followers");
    let mut broken = Vec::new();
    h.log(format!("wipe-rejoin: SIGKILL node {f}, wipe its data directory, restart it with the same flags"));
    c.wipe(f)?;
    ensure_running(c, f)?;
    match c.wait_exit(f, REFUSAL).await.map(|status| status.success()) {
        Some(false) => h.log(format!("wipe-rejoin: node {f} refused to start, as it must")),
        Some(true) => broken.push(format!("wiped node {f} exited 0 instead of refusing")),
        None => {
            broken.push(format!(
                "wiped node {f} still runs {} s after its restart: it did not refuse (it could vote a second time)",
                REFUSAL.as_secs()
            ));
            c.kill(f);
        }
    }
    if !c.log_of(f).contains("its log and its vote were lost") {
        broken.push(format!("wiped node {f} did not say its log and vote were lost"));
    }
    // The documented way back: remove, start empty with --join, add.
    remove(admin, f, h).await?;
    c.wipe(f)?;
    c.node_mut(f).join = true;
    ensure_running(c, f)?;
    readd(c, admin, f, h).await?;
    broken.extend(all_voters(c, admin).await);
    Ok(broken)
}

pub async fn membership_during_partition(
    c: &mut Cluster,
    admin: &DlsClient,
    leader: u64,
    hold: Duration,
    rng: &mut StdRng,
    h: &History,
) -> anyhow::Result<Vec<String>> {
    let mut ids = c.ids();
    ids.shuffle(rng);
    let minority: Vec<u64> = ids[..(ids.len() - 1) / 2].to_vec();
    let majority: Vec<u64> = ids[(ids.len() - 1) / 2..].to_vec();
    let candidates: Vec<u64> = majority.iter().copied().filter(|&i| i != leader).collect();
    let f = *candidates.choose(rng).unwrap_or(&majority[0]);
    h.log(format!(
        "membership-partition: cut {minority:?}{} from {majority:?} for {} ms; remove node {f} meanwhile, add it back after",
        if minority.contains(&leader) { " (leader)" } else { "" },
        hold.as_millis()
    ));
    c.links().partition(&minority, &majority);
    let started = Instant::now();
    // Under the partition the change may not commit (the new configuration can need the
    // cut-off node): it answers UNAVAILABLE after a while, and is finished after the heal.
    match tokio::time::timeout(hold, admin.remove_member(f)).await {
        Ok(Ok(_)) => h.log(format!("membership-partition: node {f} removed during the partition")),
        Ok(Err(e)) => h.log(format!("membership-partition: removal during the partition answered {}", e.code())),
        Err(_) => h.log("membership-partition: removal still pending when the partition healed"),
    }
    tokio::time::sleep(hold.saturating_sub(started.elapsed())).await;
    c.links().heal();
    remove(admin, f, h).await?;
    readd(c, admin, f, h).await?;
    Ok(all_voters(c, admin).await)
}

/// Where node `f` stands in the membership: None if the leader could not be asked, else
/// Some(None) when it is no member and Some(Some(voter)) when it is one.
async fn standing(admin: &DlsClient, f: u64) -> Option<Option<bool>> {
    let m = admin.list_members().await.ok()?;
    Some(m.members.iter().find(|x| x.node_id == f).map(|x| x.voter && !m.changing))
}

/// Removes node `f` until the membership no longer lists it. Whether it is done is read
/// from the membership, not from a refusal's text, so a retry after a lost answer counts.
async fn remove(admin: &DlsClient, f: u64, h: &History) -> anyhow::Result<()> {
    settle(h, "remove", || async {
        match standing(admin, f).await {
            Some(None) => Ok(true),
            _ => admin.remove_member(f).await.map(|_| false),
        }
    })
    .await
}

/// Adds node `f` back at its addresses until it is a voter again.
async fn readd(c: &mut Cluster, admin: &DlsClient, f: u64, h: &History) -> anyhow::Result<()> {
    let (addr, peer) = (c.node(f).addr.clone(), c.node(f).peer_addr.clone());
    settle(h, "add", || async {
        let options = AddMemberOptions { stay_learner: false, catch_up_timeout: Some(Duration::from_secs(20)) };
        match standing(admin, f).await {
            Some(Some(true)) => Ok(true),
            Some(Some(false)) => admin.promote_member(f, None).await.map(|_| false),
            _ => admin.add_member(f, &addr, &peer, options).await.map(|_| false),
        }
    })
    .await?;
    h.log(format!("node {f} is a voter again"));
    Ok(())
}

/// Retries a membership call until it reports done, for at most [`SETTLE`]: leader
/// changes and half-done changes answer errors that a later attempt gets past.
async fn settle<F, Fut>(h: &History, what: &str, mut call: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, Error>>,
{
    let deadline = Instant::now() + SETTLE;
    let mut last = String::new();
    while Instant::now() < deadline {
        match call().await {
            Ok(true) => return Ok(()),
            Ok(false) => last = "not done yet".into(),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    h.log(format!("membership: {what} did not settle within {} s: {last}", SETTLE.as_secs()));
    anyhow::bail!("membership {what} did not settle within {} s: {last}", SETTLE.as_secs())
}

/// Every node of the run is a voter, or what is missing.
async fn all_voters(c: &Cluster, admin: &DlsClient) -> Vec<String> {
    let deadline = Instant::now() + SETTLE;
    loop {
        let state = admin.list_members().await;
        let missing: Vec<u64> = match &state {
            Ok(m) => c.ids().into_iter().filter(|id| !m.members.iter().any(|x| x.node_id == *id && x.voter)).collect(),
            Err(_) => c.ids(),
        };
        let settled = state.as_ref().is_ok_and(|m| !m.changing) && missing.is_empty();
        if settled {
            return vec![];
        }
        if Instant::now() > deadline {
            return vec![format!("{} s after the change, nodes {missing:?} are not voters", SETTLE.as_secs())];
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
