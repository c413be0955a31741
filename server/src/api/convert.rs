//! Domain ↔ wire conversions, in one place so every RPC shows the same shapes.

use caerus_proto::v1 as pb;
use caerus_proto::Wire;

use crate::engine::{KeyHolder, KeyState};

use crate::locks::{
    revoke_cause, ApiKeyChange, CycleMember, EndCause, Event, EventDetail, EventKind, Held, LockKey, LockMode,
    RunState, SlotRun, TxnId, TxnState, VictimPolicy,
};

pub fn mode(m: LockMode) -> i32 {
    m.to_wire()
}

pub fn state(s: TxnState) -> i32 {
    s.to_wire()
}

pub fn cause(c: Option<EndCause>) -> i32 {
    c.map_or(pb::EndCause::Unspecified as i32, Wire::to_wire)
}

pub fn held_lock(lock: &LockKey, held: &Held) -> pb::HeldLock {
    pb::HeldLock {
        namespace: lock.namespace.clone(),
        key: lock.key.clone(),
        mode: mode(held.mode),
        fencing_token: held.token.0,
    }
}

pub fn run_state(s: RunState) -> pb::SlotRunState {
    match s {
        RunState::Running => pb::SlotRunState::SlotRunRunning,
        RunState::Succeeded => pb::SlotRunState::SlotRunSucceeded,
        RunState::Failed => pb::SlotRunState::SlotRunFailed,
        RunState::Lost => pb::SlotRunState::SlotRunLost,
    }
}

/// A key's last run claimed per schedule slot.
pub fn slot_run(lock: &LockKey, r: &SlotRun) -> pb::SlotRun {
    pb::SlotRun {
        namespace: lock.namespace.clone(),
        key: lock.key.clone(),
        period_ms: r.period_ms,
        slot: r.slot,
        transaction_id: r.txn,
        transaction_name: r.holder.clone(),
        api_key: r.owner.clone(),
        started_at_ms: r.started_ms as i64,
        finished_at_ms: r.finished_ms as i64,
        state: run_state(r.state) as i32,
        exit_code: r.exit_code,
        reason: r.reason.clone(),
        attempt: r.attempt,
    }
}

fn released(list: &[(LockKey, Held)]) -> Vec<pb::HeldLock> {
    list.iter().map(|(l, h)| held_lock(l, h)).collect()
}

/// The domain kind of a wire kind (`None` for UNSPECIFIED or unknown values).
pub fn event_kind_from_wire(raw: i32) -> Option<EventKind> {
    EventKind::from_wire(raw)
}

/// A broken deadlock as the wire shows it (in events and in the victim's error detail).
pub fn deadlock(cycle: &[CycleMember], victim: TxnId, p: VictimPolicy) -> pb::DeadlockResolved {
    pb::DeadlockResolved {
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
        victim_transaction_id: victim,
        policy: p.to_wire(),
    }
}

fn key_change(c: ApiKeyChange) -> pb::ApiKeyChangeKind {
    match c {
        ApiKeyChange::Created => pb::ApiKeyChangeKind::ApiKeyCreated,
        ApiKeyChange::Revoked => pb::ApiKeyChangeKind::ApiKeyRevoked,
        ApiKeyChange::Rotated => pb::ApiKeyChangeKind::ApiKeyRotated,
        ApiKeyChange::Expired => pb::ApiKeyChangeKind::ApiKeyExpired,
    }
}

pub fn event(e: &Event) -> pb::Event {
    use pb::event::Detail;
    let detail = match &e.detail {
        EventDetail::DeadlockResolved { cycle, victim, policy: p } => {
            Detail::DeadlockResolved(deadlock(cycle, *victim, *p))
        }
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
            end_cause: self::cause(revoke_cause(cause)),
        }),
        EventDetail::ApiKeyChanged { change, key, by, .. } => Detail::ApiKeyChanged(pb::ApiKeyChanged {
            change: key_change(*change) as i32,
            key_name: key.clone(),
            by: by.clone(),
        }),
    };
    pb::Event {
        sequence: e.seq,
        time_ms: e.at_ms as i64,
        kind: e.kind().to_wire(),
        namespaces: e.namespaces(),
        detail: Some(detail),
    }
}

pub fn key_holder(h: &KeyHolder) -> pb::KeyHolder {
    pb::KeyHolder {
        transaction_id: h.txn,
        transaction_name: h.name.clone(),
        mode: mode(h.mode),
        fencing_token: h.token,
        since_ms: h.since_ms as i64,
    }
}

pub fn key_state(s: &KeyState) -> pb::KeyHolders {
    pb::KeyHolders {
        holders: s.holders.iter().map(key_holder).collect(),
        changes: s
            .changes
            .iter()
            .map(|c| pb::KeyChange {
                kind: c.kind.to_wire(),
                holder: Some(key_holder(&c.holder)),
                end_cause: cause(c.cause),
            })
            .collect(),
        cursor: s.cursor.clone(),
        initial: s.initial,
    }
}

/// A cluster key as listed: never its secret or hash.
pub fn api_key(k: &crate::locks::ApiKey) -> pb::ApiKeyInfo {
    let n = |v: Option<u64>| v.unwrap_or(0);
    pb::ApiKeyInfo {
        name: k.name.clone(),
        namespace_prefixes: k.namespaces.clone().unwrap_or_default(),
        admin: k.admin,
        expires_at_ms: n(k.expires_at_ms) as i64,
        created_by: k.created_by.clone(),
        created_at_ms: k.created_at_ms as i64,
        limits: Some(pb::ApiKeyLimits {
            max_transactions: n(k.limits.max_txns),
            max_watches: n(k.limits.max_watches),
            max_slot_records: n(k.limits.max_slot_records),
        }),
        rotated_at_ms: k.rotated_at_ms as i64,
        previous_valid_until_ms: k.previous.map_or(0, |(_, until)| until as i64),
    }
}
