//! When a quorum last acknowledged this leader, kept by the peer network as answers
//! arrive.
//!
//! Heartbeats renew leases without a read-index round while a quorum acknowledged this
//! leader recently (see `Node::confirm_leadership`). openraft reports that age in its
//! metrics, but it publishes them on every turn of its loop (several times per raft
//! entry), and a task that follows them is woken, often on another thread, on every
//! publish: under load that cost the leader more CPU than the lock table itself. This
//! clock is updated where the answer arrives and read only when a heartbeat asks.
//!
//! The instant recorded for an answer is when its AppendEntries was sent, as openraft
//! does: the follower heard from this leader at or after it, so it will not vote for
//! another candidate within its election timeout from then.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Instant;

use super::types::{NodeId, Vote};

#[derive(Default)]
pub struct QuorumClock {
    /// Per peer: the leader vote its latest acknowledged AppendEntries carried, and when
    /// that request was sent.
    acks: Mutex<HashMap<NodeId, (Vote, Instant)>>,
}

impl QuorumClock {
    /// `target` answered an AppendEntries sent at `sent` under `vote` without refusing the
    /// vote. Only a committed vote (an elected leader's) counts.
    pub fn acknowledged(&self, target: NodeId, vote: &Vote, sent: Instant) {
        if !vote.is_committed() {
            return;
        }
        let mut acks = self.acks.lock().expect("quorum clock lock");
        match acks.get(&target) {
            // A late answer to an older request says nothing newer.
            Some((v, at)) if v == vote && *at >= sent => {}
            _ => {
                acks.insert(target, (*vote, sent));
            }
        }
    }

    /// When `target` last acknowledged an AppendEntries of leader `vote` (sent at that
    /// instant); `None` if it never did in this term.
    pub fn acked(&self, target: NodeId, vote: &Vote) -> Option<Instant> {
        let acks = self.acks.lock().expect("quorum clock lock");
        acks.get(&target).filter(|(v, _)| v == vote).map(|(_, at)| *at)
    }

    /// The latest instant at or after which a majority of every configuration in `configs`
    /// (two while the membership changes) acknowledged `vote`; `me` counts as
    /// acknowledging at `now`. `None` while some configuration has no such majority.
    pub fn quorum_acked(&self, me: NodeId, vote: &Vote, configs: &[BTreeSet<NodeId>], now: Instant) -> Option<Instant> {
        let acks = self.acks.lock().expect("quorum clock lock");
        let mut oldest: Option<Instant> = None;
        for config in configs {
            let mut times: Vec<Instant> = config
                .iter()
                .filter_map(|id| match acks.get(id) {
                    _ if *id == me => Some(now),
                    Some((v, at)) if v == vote => Some(*at),
                    _ => None,
                })
                .collect();
            let majority = config.len() / 2 + 1;
            if times.len() < majority {
                return None;
            }
            times.sort_unstable_by(|a, b| b.cmp(a));
            let at = times[majority - 1];
            oldest = Some(oldest.map_or(at, |o| o.min(at)));
        }
        oldest
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn leader(term: u64, id: NodeId) -> Vote {
        Vote::new_committed(term, id)
    }

    fn config(ids: &[NodeId]) -> BTreeSet<NodeId> {
        ids.iter().copied().collect()
    }

    #[test]
    fn a_majority_counts_the_leader_itself_and_the_freshest_followers() {
        let clock = QuorumClock::default();
        let t0 = Instant::now();
        let now = t0 + Duration::from_secs(10);
        let vote = leader(3, 1);
        let five = [config(&[1, 2, 3, 4, 5])];
        assert_eq!(clock.quorum_acked(1, &vote, &five, now), None, "nobody answered yet");
        clock.acknowledged(2, &vote, t0 + Duration::from_secs(1));
        assert_eq!(clock.quorum_acked(1, &vote, &five, now), None, "two of five are no majority");
        clock.acknowledged(3, &vote, t0 + Duration::from_secs(5));
        clock.acknowledged(4, &vote, t0 + Duration::from_secs(3));
        // Leader (now), 3 (t0+5) and 4 (t0+3) are the freshest three.
        assert_eq!(clock.quorum_acked(1, &vote, &five, now), Some(t0 + Duration::from_secs(3)));
        // A late answer to an older request does not move a peer back in time.
        clock.acknowledged(3, &vote, t0 + Duration::from_secs(2));
        assert_eq!(clock.quorum_acked(1, &vote, &five, now), Some(t0 + Duration::from_secs(3)));
        // A single-node cluster is its own quorum.
        assert_eq!(clock.quorum_acked(1, &vote, &[config(&[1])], now), Some(now));
    }

    #[test]
    fn answers_to_another_term_or_an_uncommitted_vote_do_not_count() {
        let clock = QuorumClock::default();
        let t0 = Instant::now();
        let three = [config(&[1, 2, 3])];
        clock.acknowledged(2, &leader(3, 1), t0);
        assert_eq!(clock.quorum_acked(1, &leader(4, 1), &three, t0), None, "acknowledged an older term");
        let candidate = Vote::new(5, 1);
        clock.acknowledged(3, &candidate, t0);
        assert_eq!(clock.quorum_acked(1, &candidate, &three, t0), None, "a candidate is no leader");
        // The new term's first answer replaces the older term's.
        clock.acknowledged(2, &leader(4, 1), t0);
        assert_eq!(clock.quorum_acked(1, &leader(4, 1), &three, t0), Some(t0));
    }

    #[test]
    fn during_a_membership_change_both_configurations_need_their_majority() {
        let clock = QuorumClock::default();
        let t0 = Instant::now();
        let now = t0 + Duration::from_secs(10);
        let vote = leader(2, 1);
        let joint = [config(&[1, 2, 3]), config(&[1, 4, 5])];
        clock.acknowledged(2, &vote, t0 + Duration::from_secs(7));
        assert_eq!(clock.quorum_acked(1, &vote, &joint, now), None, "the new configuration has no majority yet");
        clock.acknowledged(5, &vote, t0 + Duration::from_secs(4));
        // The old configuration is acknowledged at t0+7, the new one only at t0+4.
        assert_eq!(clock.quorum_acked(1, &vote, &joint, now), Some(t0 + Duration::from_secs(4)));
    }
}
