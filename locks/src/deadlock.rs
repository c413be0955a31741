//! Deadlock detection over the wait-for graph, run inside `apply` when a request starts
//! waiting.
//!
//! Nodes are transactions; a waiting transaction has an edge to each transaction its
//! queued request waits for directly ([`KeyLock::blockers`](super::queue::KeyLock::blockers)).
//! Edges appear only when a request is queued (grants and removals only take edges away
//! or move them between the same transactions), and the graph is kept acyclic by breaking
//! every cycle at once, so any new cycle runs through the new waiter: one search from it
//! finds it. Everything here is deterministic (ordered maps, no clock), so every replica
//! finds the same cycle and aborts the same victim.

use std::collections::HashSet;

use super::types::{TxnId, VictimPolicy};

/// Finds a cycle through `start`: the transactions in wait-for order, `start` first (each
/// waits for the next, the last for `start`). `waits_for` gives a node's direct edges.
pub fn find_cycle(start: TxnId, waits_for: impl Fn(TxnId) -> Vec<TxnId>) -> Option<Vec<TxnId>> {
    // Iterative depth-first search; a node explored without reaching `start` cannot reach
    // it later either, so it is never expanded twice (linear in the reachable graph).
    let mut explored: HashSet<TxnId> = HashSet::new();
    let mut on_path: HashSet<TxnId> = HashSet::from([start]);
    let mut stack: Vec<(TxnId, Vec<TxnId>, usize)> = vec![(start, waits_for(start), 0)];
    while let Some((node, edges, next)) = stack.last_mut() {
        if *next >= edges.len() {
            let done = *node;
            stack.pop();
            on_path.remove(&done);
            explored.insert(done);
            continue;
        }
        let target = edges[*next];
        *next += 1;
        if target == start {
            return Some(stack.iter().map(|(n, _, _)| *n).collect());
        }
        if !explored.contains(&target) && on_path.insert(target) {
            let e = waits_for(target);
            stack.push((target, e, 0));
        }
    }
    None
}

/// What the victim policy needs to know of a cycle member.
#[derive(Clone, Copy, Debug)]
pub struct Candidate {
    pub txn: TxnId,
    pub priority: i32,
}

/// Picks the victim. Transaction ids grow with begin order, so "youngest" is the highest
/// id; ties cannot happen since ids are unique.
pub fn choose_victim(policy: VictimPolicy, members: &[Candidate]) -> TxnId {
    let pick = match policy {
        VictimPolicy::LowestPriorityThenYoungest => {
            members.iter().min_by_key(|c| (c.priority, std::cmp::Reverse(c.txn)))
        }
        VictimPolicy::Youngest => members.iter().max_by_key(|c| c.txn),
        VictimPolicy::Oldest => members.iter().min_by_key(|c| c.txn),
    };
    pick.expect("a cycle has members").txn
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn graph(edges: &[(TxnId, TxnId)]) -> impl Fn(TxnId) -> Vec<TxnId> {
        let mut m: HashMap<TxnId, Vec<TxnId>> = HashMap::new();
        for (a, b) in edges {
            m.entry(*a).or_default().push(*b);
        }
        move |n| m.get(&n).cloned().unwrap_or_default()
    }

    #[test]
    fn finds_the_cycle_through_the_start_in_wait_for_order() {
        assert_eq!(find_cycle(1, graph(&[(1, 2), (2, 3), (3, 1)])), Some(vec![1, 2, 3]));
        assert_eq!(find_cycle(1, graph(&[(1, 2), (2, 1)])), Some(vec![1, 2]));
    }

    #[test]
    fn no_false_positive_on_chains_and_diamonds() {
        let chain: Vec<(TxnId, TxnId)> = (1..1000).map(|i| (i, i + 1)).collect();
        assert_eq!(find_cycle(1, graph(&chain)), None);
        assert_eq!(find_cycle(1, graph(&[(1, 2), (1, 3), (2, 4), (3, 4)])), None);
    }

    #[test]
    fn a_cycle_behind_a_branch_is_found() {
        assert_eq!(find_cycle(1, graph(&[(1, 2), (1, 3), (2, 4), (3, 5), (5, 1)])), Some(vec![1, 3, 5]));
    }

    #[test]
    fn victim_policies() {
        let m =
            [Candidate { txn: 3, priority: 5 }, Candidate { txn: 7, priority: 5 }, Candidate { txn: 9, priority: 8 }];
        assert_eq!(choose_victim(VictimPolicy::LowestPriorityThenYoungest, &m), 7);
        assert_eq!(choose_victim(VictimPolicy::Youngest, &m), 9);
        assert_eq!(choose_victim(VictimPolicy::Oldest, &m), 3);
        let m = [Candidate { txn: 3, priority: -1 }, Candidate { txn: 7, priority: 5 }];
        assert_eq!(choose_victim(VictimPolicy::LowestPriorityThenYoungest, &m), 3, "priority overrides age");
    }
}
