//! Who is calling, and every authorization decision about it. The tenancy rules:
//! - A key limited to namespace prefixes may lock only inside them, and every answer it
//!   gets shows only those namespaces: lock listings are filtered, a transaction's status
//!   lists only its locks there, and events are cut to their parts there ([`Principal::redact`]).
//! - A transaction is used (heartbeat, status, acquire, release, end) only with the key that
//!   began it; other keys get PERMISSION_DENIED, admin keys excepted.
//! - An admin key limited to prefixes acts on other keys' transactions only when they are
//!   *inside* its prefixes: every namespace the transaction holds, waits for or has asked
//!   for is inside, and there is at least one ([`Principal::may_use`]); a transaction that
//!   made so many requests that the oldest were forgotten is not known to be inside. Its
//!   end or abort is proposed `Scoped` ([`Principal::scoped`]): the state machine checks
//!   the rule again on the state it applies it to.
//!   Unlimited admin keys act on every transaction.
//!
//! docs/http-api.md "Keys and tenancy" says the same for users. `api::auth` finds the
//! principal of a call from its API key.

use std::borrow::Cow;

use super::error::EngineError;
use crate::locks::{Command, Event, EventDetail, Rejection, Txn};

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The key's name; "" when the server runs without keys.
    pub name: String,
    /// Allowed namespace prefixes; `None` = every namespace.
    pub namespaces: Option<Vec<String>>,
    /// May call the operator API.
    pub admin: bool,
}

impl Principal {
    pub fn check_namespace(&self, namespace: &str) -> Result<(), EngineError> {
        match &self.namespaces {
            Some(prefixes) if !prefixes.iter().any(|p| namespace.starts_with(p.as_str())) => {
                Err(EngineError::PermissionDenied(format!(
                    "API key {:?} may not use namespace {namespace:?}; it is limited to prefixes {prefixes:?}",
                    self.name
                )))
            }
            _ => Ok(()),
        }
    }

    /// Whether this key may see `namespace` (for filtering listings and events).
    pub fn sees_namespace(&self, namespace: &str) -> bool {
        self.namespaces.as_ref().is_none_or(|p| p.iter().any(|p| namespace.starts_with(p.as_str())))
    }

    pub fn require_admin(&self) -> Result<(), EngineError> {
        if self.admin {
            Ok(())
        } else {
            Err(EngineError::PermissionDenied(format!(
                "API key {:?} is not an admin key; operator calls need a key added with `dls keys add --admin`",
                self.name
            )))
        }
    }

    /// Whether this key may use and see transaction `t` (see the module's rules).
    pub fn may_use(&self, t: &Txn) -> bool {
        if t.owner == self.name {
            return true;
        }
        match (&self.namespaces, self.admin) {
            (_, false) => false,
            (None, true) => true,
            (Some(prefixes), true) => t.inside(prefixes),
        }
    }

    /// `cmd` (an `End` or `Abort` of transaction `t`) as this key may propose it: a limited
    /// admin ending another key's transaction proposes it `Scoped`, so the rule is checked
    /// again on the state it is applied to (the owner may take a lock outside the prefixes
    /// between this check and the commit).
    pub fn scoped(&self, t: &Txn, cmd: Command) -> Command {
        match &self.namespaces {
            Some(prefixes) if self.admin && t.owner != self.name => {
                Command::Scoped { key: self.name.clone(), prefixes: prefixes.clone(), cmd: Box::new(cmd) }
            }
            _ => cmd,
        }
    }

    /// PERMISSION_DENIED unless this key may use transaction `t`.
    pub fn check_txn(&self, t: &Txn) -> Result<(), EngineError> {
        if self.may_use(t) {
            return Ok(());
        }
        let txn = t.id;
        Err(EngineError::PermissionDenied(match &self.namespaces {
            // The words the state machine refuses a `Scoped` end with.
            Some(prefixes) if self.admin => {
                Rejection::OutsideScope { txn, key: self.name.clone(), prefixes: prefixes.clone() }.to_string()
            }
            _ => format!("transaction {txn} was begun with another API key"),
        }))
    }

    /// The part of event `e` this key may see: other namespaces' parts removed, `None` when
    /// none is left. A deadlock keeps the cycle members waiting in visible namespaces (the
    /// victim id becomes 0 when the victim's member is removed); an expiry or abort keeps
    /// the visible released locks (and is dropped when none is visible, or it released
    /// none); a revoked lock is shown or dropped whole.
    pub fn redact<'e>(&self, e: &'e Event) -> Option<Cow<'e, Event>> {
        let touched = e.namespaces();
        if self.namespaces.is_none() || (!touched.is_empty() && touched.iter().all(|ns| self.sees_namespace(ns))) {
            return Some(Cow::Borrowed(e));
        }
        let mut e = e.clone();
        match &mut e.detail {
            EventDetail::DeadlockResolved { cycle, victim, .. } => {
                cycle.retain(|m| self.sees_namespace(&m.lock.namespace));
                if !cycle.iter().any(|m| m.txn == *victim) {
                    *victim = 0;
                }
                (!cycle.is_empty()).then_some(())?;
            }
            EventDetail::TransactionExpired { released, .. } | EventDetail::TransactionAborted { released, .. } => {
                released.retain(|(lock, _)| self.sees_namespace(&lock.namespace));
                (!released.is_empty()).then_some(())?;
            }
            EventDetail::LockRevoked { .. } => return None,
        }
        Some(Cow::Owned(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, prefixes: Option<&[&str]>, admin: bool) -> Principal {
        Principal { name: name.into(), namespaces: prefixes.map(|p| p.iter().map(|s| s.to_string()).collect()), admin }
    }

    /// A table with one transaction of `owner` per entry, holding the given locks.
    fn table(txns: &[(&str, &[&str])]) -> crate::locks::LockTable {
        use crate::locks::{Command, LockKey, LockMode, LogCommand, VictimPolicy};
        let mut t = crate::locks::LockTable::new();
        for (i, (owner, namespaces)) in txns.iter().enumerate() {
            let begin = Command::Begin {
                request_id: None,
                lease_ms: 1000,
                priority: 0,
                name: String::new(),
                owner: owner.to_string(),
            };
            t.apply(&LogCommand { now_ms: 1, cmd: begin });
            for (j, ns) in namespaces.iter().enumerate() {
                let cmd = Command::Acquire {
                    txn: i as u64 + 1,
                    request_id: format!("r{j}"),
                    lock: LockKey::new(*ns, "k"),
                    mode: LockMode::Exclusive,
                    wait_ms: 1000,
                    victim_policy: VictimPolicy::default(),
                };
                t.apply(&LogCommand { now_ms: 1, cmd });
            }
        }
        t
    }

    #[test]
    fn transactions_are_used_by_their_key_and_by_admins_inside_their_prefixes() {
        let t = table(&[("billing", &["billing-a"]), ("ops", &["billing-b", "reports"]), ("ops", &[])]);
        let (own, straddling, empty) = (t.txn(1).unwrap(), t.txn(2).unwrap(), t.txn(3).unwrap());
        let billing = key("billing", Some(&["billing-"]), false);
        let reports = key("reports", Some(&["reports"]), false);
        let billing_admin = key("badmin", Some(&["billing-"]), true);
        let admin = key("admin", None, true);
        assert!(billing.may_use(own) && !billing.may_use(straddling));
        assert!(!reports.may_use(own), "another key's transaction");
        assert!(
            matches!(reports.check_txn(own), Err(EngineError::PermissionDenied(m)) if m.contains("another API key"))
        );
        assert!(billing_admin.may_use(own), "inside its prefixes");
        assert!(!billing_admin.may_use(straddling), "holds a lock outside its prefixes");
        assert!(!billing_admin.may_use(empty), "touched no namespace: not inside");
        assert!(
            matches!(billing_admin.check_txn(straddling), Err(EngineError::PermissionDenied(m)) if m.contains("not inside the prefixes"))
        );
        assert!(admin.may_use(own) && admin.may_use(straddling) && admin.may_use(empty));
    }

    #[test]
    fn only_a_limited_admin_ending_another_keys_transaction_proposes_it_scoped() {
        use crate::locks::Command;
        let t = table(&[("billing", &["billing-a"])]);
        let own = t.txn(1).unwrap();
        let end = || Command::End { txn: 1, request_id: None, commit: false };
        let billing_admin = key("badmin", Some(&["billing-"]), true);
        match billing_admin.scoped(own, end()) {
            Command::Scoped { key, prefixes, cmd } => {
                assert_eq!((key.as_str(), prefixes, *cmd), ("badmin", vec!["billing-".to_string()], end()))
            }
            c => panic!("not scoped: {c:?}"),
        }
        for who in [key("billing", Some(&["billing-"]), false), key("admin", None, true), key("billing", None, true)] {
            assert_eq!(who.scoped(own, end()), end(), "{who:?}");
        }
    }

    #[test]
    fn a_transaction_whose_oldest_requests_were_forgotten_is_not_inside_a_limited_admins_prefixes() {
        use crate::locks::requests::MAX_REQUEST_RECORDS;
        use crate::locks::{Command, LockKey, LogCommand};
        // It asked for "reports" once, then only for billing-a, until "reports" was forgotten.
        let mut t = table(&[("ops", &["reports", "billing-a"])]);
        let release =
            |ns: &str, id: String| Command::Release { txn: 1, request_id: Some(id), lock: LockKey::new(ns, "k") };
        t.apply(&LogCommand { now_ms: 1, cmd: release("reports", "free".into()) });
        for i in 0..MAX_REQUEST_RECORDS {
            t.apply(&LogCommand { now_ms: 1, cmd: release("billing-a", format!("x{i}")) });
        }
        let txn = t.txn(1).unwrap();
        assert!(!txn.namespaces().contains("reports") && !txn.history_complete());
        assert!(!key("badmin", Some(&["billing-"]), true).may_use(txn));
        assert!(key("admin", None, true).may_use(txn));
    }

    #[test]
    fn events_are_cut_to_the_parts_a_limited_key_may_see() {
        use crate::locks::{CycleMember, FencingToken, Held, LockKey, LockMode, VictimPolicy};
        let member = |txn, ns: &str| CycleMember {
            txn,
            name: String::new(),
            priority: 0,
            lock: LockKey::new(ns, "k"),
            mode: LockMode::Exclusive,
        };
        let held = Held { mode: LockMode::Exclusive, token: FencingToken(1), since_ms: 0 };
        let event = |detail| Event { seq: 1, at_ms: 0, detail };
        let billing = key("billing", Some(&["billing-"]), false);
        let admin = key("admin", None, true);

        let deadlock = event(EventDetail::DeadlockResolved {
            cycle: vec![member(1, "billing-a"), member(2, "reports"), member(3, "billing-b")],
            victim: 2,
            policy: VictimPolicy::default(),
        });
        assert!(matches!(admin.redact(&deadlock), Some(Cow::Borrowed(_))));
        let cut = billing.redact(&deadlock).unwrap();
        let EventDetail::DeadlockResolved { cycle, victim, .. } = &cut.detail else { panic!() };
        assert_eq!(cycle.iter().map(|m| m.txn).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(*victim, 0, "the victim's part was another tenant's");
        assert_eq!(cut.namespaces(), vec!["billing-a", "billing-b"]);

        let aborted = event(EventDetail::TransactionAborted {
            txn: 4,
            name: String::new(),
            reason: String::new(),
            operator: "admin".into(),
            released: vec![(LockKey::new("reports", "k"), held), (LockKey::new("billing-a", "k"), held)],
        });
        let cut = billing.redact(&aborted).unwrap();
        assert_eq!(cut.namespaces(), vec!["billing-a"]);
        let revoked =
            |ns| event(EventDetail::LockRevoked { txn: 4, lock: LockKey::new(ns, "k"), held, cause: String::new() });
        assert!(billing.redact(&revoked("reports")).is_none());
        assert!(matches!(billing.redact(&revoked("billing-a")), Some(Cow::Borrowed(_))));
        let nothing_held = event(EventDetail::TransactionExpired { txn: 5, name: String::new(), released: vec![] });
        assert!(billing.redact(&nothing_held).is_none(), "touches no namespace of the key");
        assert!(admin.redact(&nothing_held).is_some());
    }
}
