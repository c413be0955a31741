//! Injects one fault of the [`Fault`] enum into the running cluster: process faults
//! (kill, pause, restart), network faults through the kit's proxies (partitions, one-way
//! links, latency), clock jumps, and the client, membership and storage faults of their
//! own modules.

use std::time::{Duration, Instant};

use caerus_core::DlsClient;
use caerus_testkit::Cluster;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;

use crate::checker::Violation;
use crate::client_faults::{partition_client, pause_client, pause_queued};
use crate::cluster::{ensure_running, Clocks};
use crate::fault::Fault;
use crate::history::History;
use crate::report::Figures;
use crate::workload::Ctx;
use crate::{membership, storage_faults};

/// Injects `fault` once: the leader (or a node, a client, a link) it picks, how long it
/// holds, and what it saw. The caller heals the cluster afterwards.
pub async fn inject(
    fault: Fault,
    c: &mut Cluster,
    clocks: Option<&mut Clocks>,
    admin: &DlsClient,
    ctx: &Ctx,
    rng: &mut StdRng,
    figs: &mut Figures,
) -> anyhow::Result<()> {
    let h = &ctx.history;
    let hold = Duration::from_millis(rng.gen_range(2000..4500));
    let leader = c.wait_for_leader_by_term(admin, Duration::from_secs(10)).await;
    let others = |l: u64| c.ids().into_iter().filter(|&i| i != l).collect::<Vec<u64>>();
    match fault {
        Fault::KillLeader | Fault::CrashAfterWrite => {
            let Some(l) = leader else { return skip(h, format!("{fault}: no leader, skipped")) };
            if fault == Fault::CrashAfterWrite {
                let before = h.grants();
                let deadline = Instant::now() + Duration::from_secs(5);
                while h.grants() == before && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
            let t = h.now_us();
            c.kill(l);
            figs.leader_kills_us.push(t);
            h.log(format!("{fault}: SIGKILL leader node {l}, restart in {} ms", hold.as_millis() / 2));
            tokio::time::sleep(hold / 2).await;
            ensure_running(c, l)?;
        }
        Fault::KillFollower => {
            let Some(l) = leader else { return skip(h, "kill-follower: no leader, skipped") };
            let f = *others(l).choose(rng).expect("followers");
            h.log(format!("kill-follower: SIGKILL node {f}, restart in {} ms", hold.as_millis() / 2));
            c.kill(f);
            tokio::time::sleep(hold / 2).await;
            ensure_running(c, f)?;
        }
        Fault::PauseNode => {
            let n = match leader {
                Some(l) if rng.gen_bool(0.5) => l,
                _ => *c.ids().choose(rng).expect("nodes"),
            };
            h.log(format!(
                "pause-node: SIGSTOP node {n}{} for {} ms",
                if Some(n) == leader { " (leader)" } else { "" },
                hold.as_millis()
            ));
            c.pause(n);
            tokio::time::sleep(hold).await;
            c.resume(n);
        }
        Fault::PauseClient => pause_client(c, ctx, rng, figs).await?,
        Fault::PauseQueued => pause_queued(c, ctx, rng, figs).await?,
        Fault::PartitionClient => partition_client(c, ctx, rng, figs).await?,
        Fault::PartitionLeader => {
            let Some(l) = leader else { return skip(h, "partition-leader: no leader, skipped") };
            h.log(format!("partition-leader: isolate node {l} for {} ms", hold.as_millis()));
            c.links().partition(&[l], &others(l));
            tokio::time::sleep(hold).await;
            c.links().heal();
        }
        Fault::PartitionSplit => {
            let mut ids = c.ids();
            ids.shuffle(rng);
            let (minority, majority) = ids.split_at(ids.len() / 2);
            h.log(format!("partition-split: {minority:?} | {majority:?} for {} ms", hold.as_millis()));
            c.links().partition(minority, majority);
            tokio::time::sleep(hold).await;
            c.links().heal();
        }
        Fault::OneWay => {
            let Some(l) = leader else { return skip(h, "one-way: no leader, skipped") };
            h.log(format!("one-way: node {l} (leader) cannot send to the others for {} ms", hold.as_millis()));
            for o in others(l) {
                c.links().block(l, o);
            }
            tokio::time::sleep(hold).await;
            c.links().heal();
        }
        Fault::Latency => {
            let d = Duration::from_millis(rng.gen_range(20..150));
            h.log(format!("latency: +{} ms per chunk between nodes for {} ms", d.as_millis(), hold.as_millis()));
            c.links().set_delay(d);
            tokio::time::sleep(hold).await;
            c.links().heal();
        }
        Fault::ClockJump => {
            let Some(clocks) = clocks else {
                return skip(h, "clock-jump: nodes are not under faketime, skipped");
            };
            // Half the time a wall-clock-only node's CLOCK_REALTIME steps back (an NTP step);
            // else a fully faked node's clocks, CLOCK_MONOTONIC included, jump forward.
            let back = rng.gen_bool(0.5);
            let class: Vec<u64> = c.ids().into_iter().filter(|&id| Clocks::wall_only(id) == back).collect();
            let n = match leader {
                Some(l) if class.contains(&l) && rng.gen_bool(0.5) => l,
                _ => *class.choose(rng).expect("nodes of both classes"),
            };
            let jump = rng.gen_range(3..9i64);
            let offset = clocks.jump(n, if back { -jump } else { jump })?;
            *figs
                .faults
                .entry(if back { "clock-jump (wall back)" } else { "clock-jump (all forward)" })
                .or_default() += 1;
            h.log(format!(
                "clock-jump: node {n}{}'s {} (within 1 s; now {:+} s), watch for {} ms",
                if Some(n) == leader { " (leader)" } else { "" },
                if back {
                    format!("wall clock steps {jump} s back")
                } else {
                    format!("clocks (monotonic too) jump {jump} s forward")
                },
                offset,
                hold.as_millis()
            ));
            tokio::time::sleep(hold).await;
            return Ok(());
        }
        Fault::RestartAll => {
            h.log("restart-all: SIGKILL every node, restart all");
            if leader.is_some() {
                figs.leader_kills_us.push(h.now_us());
            }
            for id in c.ids() {
                c.kill(id);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            for id in c.ids() {
                ensure_running(c, id)?;
            }
        }
        Fault::WipeRejoin | Fault::MembershipPartition => {
            let Some(l) = leader else { return skip(h, format!("{fault}: no leader, skipped")) };
            let broken = if fault == Fault::WipeRejoin {
                membership::wipe_and_rejoin(c, admin, l, rng, h).await?
            } else {
                membership::membership_during_partition(c, admin, l, hold, rng, h).await?
            };
            for message in broken {
                h.log(format!("{fault}: VIOLATION {message}"));
                figs.extra_violations.push(Violation { checker: "membership", message });
            }
        }
        Fault::DiskFull | Fault::TornTail | Fault::DamagedRecord => {
            // Mostly the leader (the node that must stop acknowledging), sometimes a follower.
            let n = match leader {
                Some(l) if rng.gen_bool(0.7) => l,
                _ => *c.ids().choose(rng).expect("nodes"),
            };
            let broken = match fault {
                Fault::DiskFull => storage_faults::disk_full(c, n, Some(n) == leader, hold, h).await?,
                Fault::TornTail => storage_faults::torn_tail(c, n, Some(n) == leader, rng, h).await?,
                _ => storage_faults::damaged_record(c, n, Some(n) == leader, rng, h).await?,
            };
            if Some(n) == leader {
                figs.leader_kills_us.push(h.now_us());
            }
            for message in broken {
                h.log(format!("{fault}: VIOLATION {message}"));
                figs.extra_violations.push(Violation { checker: "storage", message });
            }
        }
    }
    *figs.faults.entry(fault.name()).or_default() += 1;
    Ok(())
}

fn skip(h: &History, msg: impl AsRef<str>) -> anyhow::Result<()> {
    h.log(msg);
    Ok(())
}
