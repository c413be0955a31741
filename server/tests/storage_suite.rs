//! openraft's storage conformance suite (`openraft::testing::Suite`) against the real log
//! store (segment files + raft-meta) and state machine (snapshot files), each case on a fresh
//! data directory. It checks what raft relies on and our own tests might miss: log ids and
//! membership read back after purges and truncations, the vote kept, snapshots
//! transferred and installed.

use std::sync::Arc;

use caerus_server::locks::{Effect, LockTable};
use caerus_server::raft::durable::Durable;
use caerus_server::raft::log_store::{LogStore, OnDamage};
use caerus_server::raft::state_machine::{ApplyObserver, StateMachine};
use caerus_server::raft::types::{NodeId, StorageError, TypeConfig};
use openraft::testing::{StoreBuilder, Suite};

struct Builder;

/// Nothing listens: the suite checks storage, not the node's timers and watchers.
struct Unobserved;

impl ApplyObserver for Unobserved {
    fn applied(&self, _effects: Vec<Effect>) {}
    fn reset(&self, _table: &LockTable) {}
}

fn build_err(what: &str, e: impl std::fmt::Display) -> StorageError {
    let e = std::io::Error::other(format!("{what}: {e}"));
    openraft::StorageIOError::<NodeId>::read(&e).into()
}

/// The temporary directory lives as long as the suite's case (the guard).
struct Dir {
    _dir: tempfile::TempDir,
}

impl StoreBuilder<TypeConfig, LogStore, StateMachine, Dir> for Builder {
    async fn build(&self) -> Result<(Dir, LogStore, StateMachine), StorageError> {
        let dir = tempfile::tempdir().map_err(|e| build_err("temp dir", e))?;
        let log = LogStore::open(dir.path(), 0, OnDamage::Refuse).map_err(|e| build_err("log store", e))?;
        // The suite applies entries it never appended to this log: in a node the state
        // machine waits until the log has them on disk; here every index counts as durable.
        let durable = Arc::new(Durable::new(u64::MAX));
        let sm = StateMachine::open(dir.path(), Arc::new(Unobserved), durable, log.first_index(), 10_000)
            .await
            .map_err(|e| build_err("state machine", e))?;
        Ok((Dir { _dir: dir }, log, sm))
    }
}

#[test]
fn log_store_and_state_machine_pass_openraft_suite() {
    Suite::test_all(Builder).unwrap();
}
