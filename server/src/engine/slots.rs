//! At most once per schedule slot: a job's claim of the slot the log's clock is in, its
//! finish, and the remembered last runs (see `locks::table::slots` for the rule).

use super::{touch, unexpected, Engine, EngineResult, Principal};
use crate::locks::{Command, LockKey, Outcome, RunResult, SlotClaim, SlotRun, TxnId};
use crate::raft::proposer::Timing;

/// What a client asks when it claims a slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotRequest {
    pub txn: TxnId,
    pub lock: LockKey,
    pub period_ms: u64,
    pub retry_failed: bool,
    pub request_id: String,
}

impl Engine {
    /// Claims the slot of `req.lock` that the log's clock is in, for a job the transaction
    /// runs while holding the lock EXCLUSIVE. A claim that adds a record is admitted against
    /// `--max-slot-records` and its API key's share first.
    pub async fn claim_slot(&self, who: &Principal, req: SlotRequest) -> EngineResult<SlotClaim> {
        let node = &self.node;
        node.require_leader()?;
        touch(node, who, req.txn)?;
        let admitted = node.limits().admit_slot_claim(node.state(), req.txn, &req.lock, &req.request_id)?;
        let SlotRequest { txn, lock, period_ms, retry_failed, request_id } = req;
        let cmd = Command::ClaimSlot { txn, request_id, lock, period_ms, retry_failed };
        match node.propose_admitted(who, cmd, admitted, Timing::Now).await? {
            Outcome::SlotClaimed(claim) => Ok(claim),
            Outcome::Rejected(r) => Err(r.into()),
            o => Err(unexpected(o)),
        }
    }

    /// Records how the transaction's run of `slot` of `lock` ended; answers the record.
    pub async fn finish_slot(
        &self,
        who: &Principal,
        txn: TxnId,
        lock: LockKey,
        slot: u64,
        result: RunResult,
        request_id: String,
    ) -> EngineResult<SlotRun> {
        self.node.require_leader()?;
        touch(&self.node, who, txn)?;
        let cmd = Command::FinishSlot { txn, request_id, lock, slot, result };
        match self.node.propose_for(who, cmd).await? {
            Outcome::SlotFinished(run) => Ok(run),
            Outcome::Rejected(r) => Err(r.into()),
            o => Err(unexpected(o)),
        }
    }

    /// The last runs of keys in namespaces starting with `prefix` that `who` may see, as
    /// of everything committed before the call.
    pub async fn list_slot_runs(&self, who: &Principal, prefix: &str) -> EngineResult<Vec<(LockKey, SlotRun)>> {
        self.node.require_leader()?;
        self.node.linearizable_read().await?;
        let st = self.node.state().read().expect("state lock");
        let shown = |lock: &LockKey| lock.namespace.starts_with(prefix) && who.sees_namespace(&lock.namespace);
        Ok(st.table.slot_runs().filter(|(lock, _)| shown(lock)).map(|(l, r)| (l.clone(), r.clone())).collect())
    }
}
