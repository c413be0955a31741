//! Who is calling, and every authorization decision about it. The tenancy rules:
//! - A key limited to namespace prefixes may lock only inside them, and every answer it
//!   gets shows only those namespaces: lock listings are filtered, a transaction's status
//!   lists only its locks there, and events are cut to their parts there ([`Principal::redact`]).
//! - A transaction is used (heartbeat, status, acquire, release, end) only with the key that
//!   began it; other keys get PERMISSION_DENIED, admin keys excepted.
//! - Only the owner's calls keep a transaction alive: an admin's calls on another key's
//!   transaction never renew its lease, and its Heartbeat on one is refused
//!   ([`Principal::check_renewal`]), so an operator looking at a stuck transaction cannot
//!   keep it from expiring, and a heartbeat that answers "renewed" always means it.
//! - An admin key limited to prefixes acts on other keys' transactions only when they are
//!   *inside* its prefixes: every namespace the transaction holds, waits for or has asked
//!   for is inside, and there is at least one ([`Principal::may_use`]); a transaction that
//!   made so many requests that the oldest were forgotten is not known to be inside. Its
//!   end or abort is proposed `Scoped` ([`Principal::scoped`]): the state machine checks
//!   the rule again on the state it applies it to.
//!   Unlimited admin keys act on every transaction.
//!
//! - Begin request ids are scoped to the key ([`Principal::begin_request_id`]): another key
//!   sending the same id begins its own transaction and learns nothing about the first.
//!
//! docs/http-api.md "Keys and tenancy" says the same for users. `api::auth` finds the
//! principal of a call from its API key.

use std::borrow::Cow;

use super::error::EngineError;
use crate::locks::{Command, Event, EventDetail, KeyLimits, Rejection, Txn};

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The key's name; "" when the server runs without keys.
    pub name: String,
    /// Allowed namespace prefixes; `None` = every namespace.
    pub namespaces: Option<Vec<String>>,
    /// May call the operator API.
    pub admin: bool,
    /// Its overrides of the per-key limits (a cluster key's; a file key has none).
    pub limits: KeyLimits,
}

/// Marks a begin request id scoped to a key (see [`Principal::begin_request_id`]).
const SCOPED_ID_PREFIX: &str = "k1:";

impl Principal {
    /// The request id a begin with the client's `id` is proposed and remembered under.
    /// Transactions are one table for every key, so a client's own id would be one
    /// namespace for all of them: another key's retry would find (and reveal) this key's
    /// transaction, or claim the id first. Scoped, the same key gets the same id through
    /// any node and after a leader change (a retry finds its transaction), another key a
    /// different one: the name's length comes first, so no two (name, id) pairs give the
    /// same text. The entry grows by the name, which it carries as the owner already; a
    /// cheap concatenation rather than a digest, since every begin pays for it. Without
    /// keys every caller is one principal: the id is kept as the client sent it.
    pub fn begin_request_id(&self, id: &str) -> String {
        if self.name.is_empty() {
            return id.to_string();
        }
        format!("{SCOPED_ID_PREFIX}{}:{}:{id}", self.name.len(), self.name)
    }

    pub fn check_namespace(&self, namespace: &str) -> Result<(), EngineError> {
        match &self.namespaces {
            Some(prefixes) if !prefixes.iter().any(|p| namespace.starts_with(p.as_str())) => {
                Err(EngineError::OutsideNamespaces {
                    message: format!(
                        "API key {:?} may not use namespace {namespace:?}; it is limited to prefixes {prefixes:?}",
                        self.name
                    ),
                    prefixes: prefixes.clone(),
                })
            }
            _ => Ok(()),
        }
    }

    /// Whether this key (as a reload left it) may still do everything `earlier` could: the
    /// same name (transactions belong to it), admin if it was, and every namespace it could
    /// use. A stream opened as `earlier` goes on only then (`api::auth::KeyHold`).
    pub fn covers(&self, earlier: &Principal) -> bool {
        let namespaces = match (&self.namespaces, &earlier.namespaces) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(now), Some(before)) => before.iter().all(|b| now.iter().any(|n| b.starts_with(n.as_str()))),
        };
        self.name == earlier.name && (self.admin || !earlier.admin) && namespaces
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

    /// PERMISSION_DENIED unless this key began transaction `t`, the only key whose
    /// heartbeats renew it. An answer with the lease left but no renewal would read as a
    /// success to a client that keeps a lease; an admin reads a transaction with
    /// GetTransactionStatus, which does not renew it either.
    pub fn check_renewal(&self, t: &Txn) -> Result<(), EngineError> {
        if t.owner == self.name {
            return Ok(());
        }
        Err(EngineError::PermissionDenied(format!(
            "transaction {} was begun with another API key: only heartbeats of the key that began a transaction \
             renew its lease (an operator reads it with GetTransactionStatus and ends it with AbortTransaction)",
            t.id
        )))
    }

    /// The part of event `e` this key may see: other namespaces' parts removed, `None` when
    /// none is left. A deadlock keeps the cycle members waiting in visible namespaces (the
    /// victim id becomes 0 when the victim's member is removed); an expiry or abort keeps
    /// the visible released locks (and is dropped when none is visible, or it released
    /// none); a revoked lock is shown or dropped whole.
    pub fn redact<'e>(&self, e: &'e Event) -> Option<Cow<'e, Event>> {
        // Key changes are for the operators who manage keys.
        if matches!(e.detail, EventDetail::ApiKeyChanged { .. }) && !self.admin {
            return None;
        }
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
            EventDetail::LockRevoked { .. } | EventDetail::ApiKeyChanged { .. } => return None,
        }
        Some(Cow::Owned(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, prefixes: Option<&[&str]>, admin: bool) -> Principal {
        Principal {
            name: name.into(),
            namespaces: prefixes.map(|p| p.iter().map(|s| s.to_string()).collect()),
            admin,
            limits: KeyLimits::default(),
        }
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
    fn begin_request_ids_are_scoped_to_the_key_deterministically() {
        let billing = key("billing", None, false);
        let again = key("billing", Some(&["billing-"]), true);
        let reports = key("reports", None, false);
        let id = "b".repeat(128);
        let scoped = billing.begin_request_id(&id);
        assert_eq!(scoped, again.begin_request_id(&id), "the key's name decides, not its rights");
        assert_ne!(scoped, reports.begin_request_id(&id), "another key gets another id");
        assert_ne!(scoped, billing.begin_request_id("c"));
        assert_eq!(billing.begin_request_id("r-1"), "k1:7:billing:r-1");
        // The name's length comes first: ("a:1", "x") and ("a", "1:x") differ.
        assert_ne!(key("a:1", None, false).begin_request_id("x"), key("a", None, false).begin_request_id("1:x"));
        assert_ne!(key("ab", None, false).begin_request_id("c"), key("a", None, false).begin_request_id("bc"));
        // Without keys the client's id is used as it is.
        assert_eq!(key("", None, true).begin_request_id("r-1"), "r-1");
    }

    #[test]
    fn a_reloaded_key_covers_its_earlier_self_only_with_every_right_it_had() {
        let billing = key("billing", Some(&["billing-", "reports-"]), true);
        assert!(billing.covers(&billing));
        assert!(key("billing", None, true).covers(&billing), "widened to every namespace");
        assert!(key("billing", Some(&["billing", "reports-"]), true).covers(&billing), "a shorter prefix covers");
        assert!(!key("billing", Some(&["billing-"]), true).covers(&billing), "a prefix taken away");
        assert!(!key("billing", Some(&["billing-eu", "reports-"]), true).covers(&billing), "narrowed");
        assert!(!key("billing", Some(&["billing-", "reports-"]), false).covers(&billing), "admin taken away");
        assert!(key("billing", Some(&["billing-", "reports-"]), true).covers(&key(
            "billing",
            Some(&["billing-"]),
            false
        )));
        assert!(!key("billing", Some(&["billing-"]), false).covers(&key("billing", None, false)), "limited now");
        assert!(!key("billing2", Some(&["billing-", "reports-"]), true).covers(&billing), "renamed");
    }

    #[test]
    fn only_the_owner_renews_a_lease() {
        let t = table(&[("billing", &["billing-a"])]);
        let own = t.txn(1).unwrap();
        assert!(key("billing", Some(&["billing-"]), false).check_renewal(own).is_ok());
        for admin in [key("admin", None, true), key("badmin", Some(&["billing-"]), true)] {
            assert!(admin.may_use(own), "{admin:?} may act on it");
            let err = admin.check_renewal(own).unwrap_err();
            assert!(
                matches!(&err, EngineError::PermissionDenied(m) if m.contains("only heartbeats of the key")),
                "{err}"
            );
        }
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
