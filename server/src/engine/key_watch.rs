//! WatchKey: who holds one key, streamed as it changes (the base of leader election).
//!
//! The table keeps no history of a key, so a watch compares what it sent last with the
//! holders now, each time the key's holders change. The cursor a watcher gets is that
//! last state (transaction, token and mode of each holder); resuming with it on another
//! leader reports what changed since, merged.

use std::net::SocketAddr;
use std::pin::Pin;

use futures::Stream;

use super::{Engine, EngineError, EngineResult, Principal};
use crate::locks::{EndCause, LockKey, LockMode, LockTable, TxnId};
pub use caerus_types::KeyChangeKind;

/// The longest cursor a watcher may send back: the holders of a key under heavy shared
/// use, with room to spare; anything longer was not made by this server.
pub const MAX_CURSOR_LEN: usize = 256 * 1024;

/// A transaction holding the watched key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyHolder {
    pub txn: TxnId,
    pub name: String,
    pub mode: LockMode,
    pub token: u64,
    pub since_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyChange {
    pub kind: KeyChangeKind,
    pub holder: KeyHolder,
    /// Why the holder's transaction ended, for Expired and Revoked.
    pub cause: Option<EndCause>,
}

/// One message of a key watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyState {
    pub holders: Vec<KeyHolder>,
    pub changes: Vec<KeyChange>,
    pub cursor: String,
    pub initial: bool,
}

pub type KeyStates = Pin<Box<dyn Stream<Item = EngineResult<KeyState>> + Send>>;

/// The holders of `lock` now, oldest grant first.
fn holders(table: &LockTable, lock: &LockKey) -> Vec<KeyHolder> {
    let mut out: Vec<KeyHolder> = table
        .key(lock)
        .map(|k| {
            k.holders
                .iter()
                .map(|(&txn, h)| KeyHolder {
                    txn,
                    name: table.txn(txn).map(|t| t.name.clone()).unwrap_or_default(),
                    mode: h.mode,
                    token: h.token.0,
                    since_ms: h.since_ms,
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort_by_key(|h| h.token);
    out
}

/// How `before` became `now`. A holder that left is told apart by how its transaction
/// ended (still active, or forgotten: it let go of the key).
fn changes(table: &LockTable, before: &[KeyHolder], now: &[KeyHolder]) -> Vec<KeyChange> {
    let mut out = Vec::new();
    for b in before {
        match now.iter().find(|n| n.txn == b.txn) {
            Some(n) if n.token != b.token => {
                out.push(KeyChange { kind: KeyChangeKind::Granted, holder: n.clone(), cause: None })
            }
            Some(n) if n.mode != b.mode && n.mode == LockMode::SharedRead => {
                out.push(KeyChange { kind: KeyChangeKind::Downgraded, holder: n.clone(), cause: None })
            }
            Some(_) => {}
            None => {
                let cause = table.txn(b.txn).and_then(|t| t.end_cause);
                let kind = match cause {
                    Some(EndCause::LeaseExpired | EndCause::MaxDurationExceeded) => KeyChangeKind::Expired,
                    Some(EndCause::DeadlockVictim | EndCause::OperatorAbort) => KeyChangeKind::Revoked,
                    _ => KeyChangeKind::Released,
                };
                let cause = cause.filter(|c| c.revokes());
                let mut holder = b.clone();
                if holder.name.is_empty() {
                    holder.name = table.txn(b.txn).map(|t| t.name.clone()).unwrap_or_default();
                }
                out.push(KeyChange { kind, holder, cause });
            }
        }
    }
    for n in now.iter().filter(|n| !before.iter().any(|b| b.txn == n.txn)) {
        out.push(KeyChange { kind: KeyChangeKind::Granted, holder: n.clone(), cause: None });
    }
    out
}

/// The cursor of a state: `txn:token:mode` per holder (mode `X` or `S`), comma-separated.
fn cursor_of(holders: &[KeyHolder]) -> String {
    let one =
        |h: &KeyHolder| format!("{}:{}:{}", h.txn, h.token, if h.mode == LockMode::Exclusive { 'X' } else { 'S' });
    holders.iter().map(one).collect::<Vec<_>>().join(",")
}

/// The holders a cursor names (names and times are not in it; a change reports the
/// table's if the transaction is still known).
pub fn parse_cursor(cursor: &str) -> Result<Vec<KeyHolder>, EngineError> {
    let bad = || {
        EngineError::InvalidArgument(
            "cursor is not one this service gave: pass the last KeyHolders.cursor back as it was".into(),
        )
    };
    if cursor.len() > MAX_CURSOR_LEN {
        return Err(bad());
    }
    if cursor.is_empty() {
        return Ok(Vec::new());
    }
    cursor
        .split(',')
        .map(|part| {
            let mut f = part.split(':');
            let (Some(txn), Some(token), Some(mode), None) = (f.next(), f.next(), f.next(), f.next()) else {
                return Err(bad());
            };
            let mode = match mode {
                "X" => LockMode::Exclusive,
                "S" => LockMode::SharedRead,
                _ => return Err(bad()),
            };
            Ok(KeyHolder {
                txn: txn.parse().map_err(|_| bad())?,
                token: token.parse().map_err(|_| bad())?,
                mode,
                name: String::new(),
                since_ms: 0,
            })
        })
        .collect()
}

impl Engine {
    /// Watches who holds `lock`: the holders now (compared with `resume_from`, the holders
    /// a previous watch last reported, if any), then every change. Leader only; it ends
    /// with NOT_LEADER when this node stops leading, and holds a place under the watch
    /// limits until dropped.
    pub async fn watch_key(
        &self,
        who: Principal,
        remote: Option<SocketAddr>,
        lock: LockKey,
        resume_from: Option<Vec<KeyHolder>>,
    ) -> EngineResult<KeyStates> {
        who.check_namespace(&lock.namespace)?;
        let node = self.node.clone();
        node.require_leader()?;
        let slot = node.limits().admit_watch(&who, remote)?;
        node.linearizable_read().await?;
        let states = async_stream::try_stream! {
            let _slot = slot;
            let mut sub = node.key_watchers().subscribe(&lock);
            let mut leadership = node.leadership();
            let mut last = resume_from;
            let mut initial = true;
            loop {
                // Marked seen before the read: a change right after it wakes the loop.
                sub.changed.borrow_and_update();
                let state = {
                    let st = node.state().read().expect("state lock");
                    let now = holders(&st.table, &lock);
                    let changes = last.as_deref().map(|before| changes(&st.table, before, &now)).unwrap_or_default();
                    (initial || !changes.is_empty()).then(|| KeyState { cursor: cursor_of(&now), holders: now, changes, initial })
                };
                if let Some(state) = state {
                    last = Some(state.holders.clone());
                    initial = false;
                    yield state;
                }
                let deposed = tokio::select! {
                    changed = sub.changed.changed() => if changed.is_err() { break } else { false },
                    _ = leadership.wait_for(|leading| !leading) => true,
                };
                if deposed {
                    Err(node.deposed().await)?;
                }
            }
        };
        Ok(Box::pin(states))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(txn: TxnId, token: u64, mode: LockMode) -> KeyHolder {
        KeyHolder { txn, name: String::new(), mode, token, since_ms: 0 }
    }

    #[test]
    fn cursors_round_trip_and_foreign_ones_are_refused() {
        let hs = vec![holder(3, 10, LockMode::SharedRead), holder(4, 12, LockMode::Exclusive)];
        assert_eq!(cursor_of(&hs), "3:10:S,4:12:X");
        assert_eq!(parse_cursor(&cursor_of(&hs)).unwrap(), hs);
        assert_eq!(parse_cursor("").unwrap(), vec![]);
        for bad in ["3:10", "3:10:Q", "x:1:X", "1:2:X:4", "1:2:X,"] {
            assert!(parse_cursor(bad).is_err(), "{bad}");
        }
        assert!(parse_cursor(&"1:1:X,".repeat(MAX_CURSOR_LEN / 6 + 1)).is_err());
    }

    #[test]
    fn a_changed_token_is_a_new_grant_and_a_mode_drop_a_downgrade() {
        let table = LockTable::default();
        let before = vec![holder(1, 5, LockMode::Exclusive), holder(2, 6, LockMode::SharedRead)];
        let now = vec![
            holder(1, 5, LockMode::SharedRead),
            holder(2, 9, LockMode::Exclusive),
            holder(3, 10, LockMode::SharedRead),
        ];
        let kinds: Vec<_> = changes(&table, &before, &now).into_iter().map(|c| (c.kind, c.holder.txn)).collect();
        assert_eq!(
            kinds,
            vec![(KeyChangeKind::Downgraded, 1), (KeyChangeKind::Granted, 2), (KeyChangeKind::Granted, 3)]
        );
        // A holder the table no longer knows let go of the key.
        let gone = changes(&table, &before, &[]);
        assert!(gone.iter().all(|c| c.kind == KeyChangeKind::Released && c.cause.is_none()));
    }
}
