//! Domain ↔ wire conversions, in one place so every RPC shows the same shapes.

use caerus_proto::v1 as pb;

use crate::locks::{Event, EventDetail, EventKind, Held, LockKey, LockMode, TxnState, VictimPolicy};

pub fn mode_wire(m: LockMode) -> pb::LockMode {
    match m {
        LockMode::Exclusive => pb::LockMode::Exclusive,
        LockMode::SharedRead => pb::LockMode::SharedRead,
    }
}

pub fn mode(m: LockMode) -> i32 {
    mode_wire(m) as i32
}

pub fn state(s: TxnState) -> i32 {
    (match s {
        TxnState::Active => pb::TransactionState::Active,
        TxnState::Committed => pb::TransactionState::Committed,
        TxnState::Aborted => pb::TransactionState::Aborted,
        TxnState::Expired => pb::TransactionState::Expired,
    }) as i32
}

pub fn policy_wire(p: VictimPolicy) -> pb::VictimPolicy {
    match p {
        VictimPolicy::LowestPriorityThenYoungest => pb::VictimPolicy::LowestPriorityThenYoungest,
        VictimPolicy::Youngest => pb::VictimPolicy::Youngest,
        VictimPolicy::Oldest => pb::VictimPolicy::Oldest,
    }
}

pub fn policy(p: VictimPolicy) -> i32 {
    policy_wire(p) as i32
}

pub fn held_lock(lock: &LockKey, held: &Held) -> pb::HeldLock {
    pb::HeldLock {
        namespace: lock.namespace.clone(),
        key: lock.key.clone(),
        mode: mode(held.mode),
        fencing_token: held.token.0,
    }
}

fn released(list: &[(LockKey, Held)]) -> Vec<pb::HeldLock> {
    list.iter().map(|(l, h)| held_lock(l, h)).collect()
}

pub fn event_kind(k: EventKind) -> pb::EventKind {
    match k {
        EventKind::DeadlockResolved => pb::EventKind::DeadlockResolved,
        EventKind::TransactionExpired => pb::EventKind::TransactionExpired,
        EventKind::TransactionAborted => pb::EventKind::TransactionAborted,
        EventKind::LockRevoked => pb::EventKind::LockRevoked,
    }
}

/// The domain kind of a wire kind (`None` for UNSPECIFIED or unknown values).
pub fn event_kind_from_wire(raw: i32) -> Option<EventKind> {
    match pb::EventKind::try_from(raw).ok()? {
        pb::EventKind::DeadlockResolved => Some(EventKind::DeadlockResolved),
        pb::EventKind::TransactionExpired => Some(EventKind::TransactionExpired),
        pb::EventKind::TransactionAborted => Some(EventKind::TransactionAborted),
        pb::EventKind::LockRevoked => Some(EventKind::LockRevoked),
        pb::EventKind::Unspecified => None,
    }
}

pub fn event(e: &Event) -> pb::Event {
    use pb::event::Detail;
    let detail = match &e.detail {
        EventDetail::DeadlockResolved { cycle, victim, policy: p } => Detail::DeadlockResolved(pb::DeadlockResolved {
            cycle: cycle
                .iter()
                .map(|m| pb::CycleMember {
                    transaction_id: m.txn,
                    transaction_name: m.name.clone(),
                    priority: m.priority,
                    namespace: m.lock.namespace.clone(),
                    key: m.lock.key.clone(),
                    mode: mode(m.mode),
                })
                .collect(),
            victim_transaction_id: *victim,
            policy: policy(*p),
        }),
        EventDetail::TransactionExpired { txn, name, released: r } => {
            Detail::TransactionExpired(pb::TransactionExpired {
                transaction_id: *txn,
                transaction_name: name.clone(),
                released_locks: released(r),
            })
        }
        EventDetail::TransactionAborted { txn, name, reason, operator, released: r } => {
            Detail::TransactionAborted(pb::TransactionAborted {
                transaction_id: *txn,
                transaction_name: name.clone(),
                reason: reason.clone(),
                operator: operator.clone(),
                released_locks: released(r),
            })
        }
        EventDetail::LockRevoked { txn, lock, held, cause } => Detail::LockRevoked(pb::LockRevoked {
            transaction_id: *txn,
            namespace: lock.namespace.clone(),
            key: lock.key.clone(),
            mode: mode(held.mode),
            fencing_token: held.token.0,
            cause: cause.clone(),
        }),
    };
    pb::Event {
        sequence: e.seq,
        time_ms: e.at_ms as i64,
        kind: event_kind(e.kind()) as i32,
        namespaces: e.namespaces(),
        detail: Some(detail),
    }
}
