//! Lock-delay rules, as an operator sets and lists them (the semantics are in the lock
//! table's `lock_delay` module).

use super::{Engine, EngineError, EngineResult, Principal};
use crate::locks::{invalid_lock_delay, Command, Outcome, Rejection, MAX_LOCK_DELAY_MS, MAX_LOCK_DELAY_RULES};

impl Engine {
    /// Sets the lock-delay of namespaces starting with `prefix` (0 removes it); answers the
    /// previous delay. An admin key limited to namespace prefixes may set rules only inside
    /// them (a rule for a shorter prefix would delay other teams' keys).
    pub async fn set_lock_delay(&self, who: &Principal, prefix: String, delay_ms: u64) -> EngineResult<u64> {
        self.node.require_leader()?;
        if let Some(limits) = who.namespaces.as_ref().filter(|_| !who.sees_namespace(&prefix)) {
            return Err(EngineError::PermissionDenied(format!(
                "API key {:?} is limited to namespace prefixes {limits:?}; a lock-delay rule for prefix {prefix:?} \
                 would reach namespaces outside them",
                who.name
            )));
        }
        {
            let st = self.node.state().read().expect("state lock");
            let rules = st.table.lock_delay_rules().count();
            let known = st.table.lock_delay_rules().any(|(p, _)| p == prefix);
            if let Some(why) = invalid_lock_delay(&prefix, delay_ms, rules, known) {
                return Err(if delay_ms > MAX_LOCK_DELAY_MS {
                    EngineError::InvalidArgument(why)
                } else {
                    EngineError::ResourceExhausted(format!("{why} (limit: {MAX_LOCK_DELAY_RULES} rules)"))
                });
            }
        }
        match self.node.propose_for(who, Command::SetLockDelay { prefix, delay_ms }).await? {
            Outcome::LockDelaySet { previous_ms } => Ok(previous_ms),
            // Another operator filled the last free rule between the check and the apply.
            Outcome::Rejected(Rejection::Invalid(why)) => Err(EngineError::ResourceExhausted(why)),
            Outcome::Rejected(r) => Err(EngineError::Rejected(r)),
            other => Err(EngineError::Internal(format!("unexpected outcome of a lock-delay rule: {other:?}"))),
        }
    }

    /// The lock-delay rules `who` may see (prefix, delay), as of everything committed
    /// before the call.
    pub async fn lock_delays(&self, who: &Principal) -> EngineResult<Vec<(String, u64)>> {
        self.node.require_leader()?;
        self.node.linearizable_read().await?;
        let st = self.node.state().read().expect("state lock");
        let visible = |p: &str| who.namespaces.is_none() || (!p.is_empty() && who.sees_namespace(p));
        Ok(st.table.lock_delay_rules().filter(|(p, _)| visible(p)).map(|(p, d)| (p.to_string(), d)).collect())
    }
}
