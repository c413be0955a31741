//! API keys kept by the cluster: created, revoked, rotated and expired through the log, so
//! every node authorizes the same keys as soon as it applied the same entries.
//!
//! Only a key's SHA-256 is replicated; the secret is made by the leader, shown once to the
//! admin that created it, and never enters the log. Expiry is by the log's clock (the
//! proposing leader's time carried in each entry), never a replica's own: the leader
//! proposes `ExpireApiKeys` when it sees a key's time pass, and the apply drops only what
//! really is past by the log's clock. A rotation may keep the old secret working for a
//! grace period, which ends the same way.
//!
//! Who may manage a key is checked again here, on the state the command is applied to
//! ([`KeyActor`]): an admin key limited to namespace prefixes manages only keys whose
//! namespaces all lie inside them, and the leader's check before proposing could be
//! overtaken (a key revoked and made again with the same name and wider rights).
//!
//! The keys are not part of the table's serde form: snapshot files carry them as the
//! section `api-keys`, written only when there is a key, so a cluster that never made one
//! writes snapshots an older version still reads.

use std::collections::BTreeMap;

use super::super::api_key::{invalid_new_key, ApiKey, ApiKeyChange, KeyActor, NewApiKey};
use super::super::command::{Outcome, Rejection};
use super::super::events::EventDetail;
use super::{Effect, LockTable};

/// The section name in snapshot files.
const SECTION: &str = "api-keys";

/// The replicated keys, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct ApiKeys {
    keys: BTreeMap<String, ApiKey>,
}

impl ApiKeys {
    fn section(&self) -> Option<(String, Vec<u8>)> {
        (!self.keys.is_empty())
            .then(|| (SECTION.to_string(), bincode::serialize(&self.keys).expect("a map of keys encodes")))
    }

    fn restore_section(&mut self, name: &str, bytes: &[u8]) -> Result<bool, Rejection> {
        if name != SECTION {
            return Ok(false);
        }
        self.keys = bincode::deserialize(bytes)
            .map_err(|e| Rejection::Invalid(format!("snapshot section {name:?} does not decode: {e}")))?;
        Ok(true)
    }
}

/// The refusal of a key command by an admin key whose prefixes do not reach the key.
fn refuse(by: &KeyActor, key: &str) -> Outcome {
    Outcome::Rejected(Rejection::ApiKeyOutsideScope {
        key: key.to_string(),
        by: by.name.clone(),
        prefixes: by.prefixes.clone().unwrap_or_default(),
    })
}

impl LockTable {
    pub(super) fn api_keys_section(&self) -> Option<(String, Vec<u8>)> {
        self.api_keys.section()
    }

    pub(super) fn restore_api_keys(&mut self, name: &str, bytes: &[u8]) -> Result<bool, Rejection> {
        self.api_keys.restore_section(name, bytes)
    }

    /// The cluster's keys, by name.
    pub fn api_keys(&self) -> impl Iterator<Item = &ApiKey> {
        self.api_keys.keys.values()
    }

    pub fn api_key(&self, name: &str) -> Option<&ApiKey> {
        self.api_keys.keys.get(name)
    }

    /// How many keys there are, and how many of them `creator` made.
    pub fn api_key_counts(&self, creator: &str) -> (usize, usize) {
        let keys = &self.api_keys.keys;
        (keys.len(), keys.values().filter(|k| k.created_by == creator).count())
    }

    /// The earliest time (the log's clock) a key expires or an old secret's grace ends,
    /// with the keys due then: what the leader's timer proposes `ExpireApiKeys` for.
    pub fn api_keys_due(&self, by_ms: u64) -> (Vec<String>, Option<u64>) {
        let mut due = Vec::new();
        let mut next = None::<u64>;
        for k in self.api_keys.keys.values() {
            match k.due_at() {
                Some(at) if at <= by_ms => due.push(k.name.clone()),
                Some(at) => next = Some(next.map_or(at, |n| n.min(at))),
                None => {}
            }
        }
        (due, next)
    }

    fn key_event(&mut self, change: ApiKeyChange, key: &ApiKey, by: &str) {
        let detail = EventDetail::ApiKeyChanged {
            change,
            key: key.name.clone(),
            by: by.to_string(),
            namespaces: key.event_namespaces(),
        };
        self.events.push(self.clock_ms, detail);
        self.effects.push(Effect::EventsAppended);
        self.effects.push(Effect::ApiKeysChanged);
    }

    pub(super) fn create_api_key(&mut self, by: &KeyActor, request_id: &str, new: &NewApiKey) -> Outcome {
        if let Some(existing) = self.api_keys.keys.get_mut(&new.name) {
            if existing.request_id == request_id && existing.created_by == by.name && !request_id.is_empty() {
                // A retry whose first answer (and secret) was lost: the caller gets a
                // working secret for the one key, and the lost one stops working.
                existing.sha256 = new.sha256;
                existing.previous = None;
                existing.rotated_at_ms = self.clock_ms;
                let key = existing.clone();
                self.key_event(ApiKeyChange::Rotated, &key, &by.name);
                return Outcome::ApiKeyCreated { retried: true };
            }
            return Outcome::Rejected(Rejection::ApiKeyExists(new.name.clone()));
        }
        if let Some(why) = invalid_new_key(new) {
            return Outcome::Rejected(Rejection::Invalid(why));
        }
        if !by.may_manage(new.namespaces.as_deref()) {
            return refuse(by, &new.name);
        }
        if new.expires_at_ms.is_some_and(|at| at <= self.clock_ms) {
            return Outcome::Rejected(Rejection::Invalid(format!(
                "API key {:?} would expire before it exists",
                new.name
            )));
        }
        let key = ApiKey {
            name: new.name.clone(),
            sha256: new.sha256,
            namespaces: new.namespaces.clone(),
            admin: new.admin,
            expires_at_ms: new.expires_at_ms,
            created_by: by.name.clone(),
            created_at_ms: self.clock_ms,
            limits: new.limits,
            request_id: request_id.to_string(),
            previous: None,
            rotated_at_ms: 0,
        };
        self.key_event(ApiKeyChange::Created, &key, &by.name);
        self.api_keys.keys.insert(key.name.clone(), key);
        Outcome::ApiKeyCreated { retried: false }
    }

    pub(super) fn revoke_api_key(&mut self, by: &KeyActor, name: &str) -> Outcome {
        let Some(key) = self.api_keys.keys.get(name) else {
            return Outcome::Rejected(Rejection::ApiKeyNotFound(name.to_string()));
        };
        if !by.may_manage(key.namespaces.as_deref()) {
            return refuse(by, name);
        }
        let key = self.api_keys.keys.remove(name).expect("found above");
        self.key_event(ApiKeyChange::Revoked, &key, &by.name);
        Outcome::ApiKeyRevoked
    }

    pub(super) fn rotate_api_key(&mut self, by: &KeyActor, name: &str, sha256: [u8; 32], grace_ms: u64) -> Outcome {
        let now = self.clock_ms;
        let Some(key) = self.api_keys.keys.get_mut(name) else {
            return Outcome::Rejected(Rejection::ApiKeyNotFound(name.to_string()));
        };
        if !by.may_manage(key.namespaces.as_deref()) {
            return refuse(by, name);
        }
        let old = std::mem::replace(&mut key.sha256, sha256);
        // The grace never outlives the key itself.
        let until = now.saturating_add(grace_ms).min(key.expires_at_ms.unwrap_or(u64::MAX));
        key.previous = (grace_ms > 0).then_some((old, until));
        key.rotated_at_ms = now;
        let key = key.clone();
        self.key_event(ApiKeyChange::Rotated, &key, &by.name);
        Outcome::ApiKeyRotated { previous_until_ms: key.previous.map_or(0, |(_, until)| until) }
    }

    /// Drops the keys of `names` that expired by the log's clock, and old secrets whose
    /// grace ended; anything not due yet is left alone (the leader's clock ran ahead).
    pub(super) fn expire_api_keys(&mut self, names: &[String]) -> Outcome {
        let now = self.clock_ms;
        let mut expired = 0;
        for name in names {
            let Some(key) = self.api_keys.keys.get_mut(name) else { continue };
            if key.expires_at_ms.is_some_and(|at| at <= now) {
                let key = self.api_keys.keys.remove(name).expect("found above");
                self.key_event(ApiKeyChange::Expired, &key, "");
                expired += 1;
            } else if key.previous.is_some_and(|(_, until)| until <= now) {
                key.previous = None;
                self.effects.push(Effect::ApiKeysChanged);
            }
        }
        Outcome::ApiKeysExpired { expired }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::api_key::KeyLimits;
    use super::super::super::command::{Command, LogCommand};
    use super::*;

    fn admin(prefixes: Option<&[&str]>) -> KeyActor {
        KeyActor { name: "ops".into(), prefixes: prefixes.map(|p| p.iter().map(|s| s.to_string()).collect()) }
    }

    fn new_key(name: &str, namespaces: Option<&[&str]>, expires_at_ms: Option<u64>) -> NewApiKey {
        NewApiKey {
            name: name.into(),
            sha256: [name.len() as u8; 32],
            namespaces: namespaces.map(|p| p.iter().map(|s| s.to_string()).collect()),
            admin: false,
            expires_at_ms,
            limits: KeyLimits::default(),
        }
    }

    fn apply(t: &mut LockTable, now_ms: u64, cmd: Command) -> Outcome {
        t.apply(&LogCommand { now_ms, cmd })
    }

    fn create(by: KeyActor, id: &str, key: NewApiKey) -> Command {
        Command::CreateApiKey { by, request_id: id.into(), key }
    }

    #[test]
    fn keys_are_created_once_rotated_revoked_and_survive_a_snapshot() {
        let mut t = LockTable::new();
        let k = new_key("billing", Some(&["billing-"]), None);
        assert_eq!(apply(&mut t, 10, create(admin(None), "r1", k.clone())), Outcome::ApiKeyCreated { retried: false });
        assert_eq!(
            apply(&mut t, 11, create(admin(None), "r2", k.clone())),
            Outcome::Rejected(Rejection::ApiKeyExists("billing".into()))
        );
        // The same request again: the one key, with the retry's secret.
        let retry = NewApiKey { sha256: [9; 32], ..k };
        assert_eq!(apply(&mut t, 12, create(admin(None), "r1", retry)), Outcome::ApiKeyCreated { retried: true });
        assert_eq!(t.api_key("billing").unwrap().sha256, [9; 32]);

        let rotate = Command::RotateApiKey { by: admin(None), name: "billing".into(), sha256: [7; 32], grace_ms: 100 };
        assert_eq!(apply(&mut t, 20, rotate), Outcome::ApiKeyRotated { previous_until_ms: 120 });
        assert_eq!(t.api_key("billing").unwrap().previous, Some(([9; 32], 120)));
        assert_eq!(t.api_keys_due(119), (vec![], Some(120)));

        let mut copy = LockTable::new();
        copy.restore_sections(t.sections()).unwrap();
        assert_eq!(copy.api_key("billing"), t.api_key("billing"));

        // The leader's clock ran ahead: nothing ends before its time by the log's clock.
        let expire = Command::ExpireApiKeys { names: vec!["billing".into()] };
        apply(&mut t, 119, expire.clone());
        assert!(t.api_key("billing").unwrap().previous.is_some());
        apply(&mut t, 120, expire);
        assert_eq!(t.api_key("billing").unwrap().previous, None, "the grace ended");

        assert_eq!(
            apply(&mut t, 130, Command::RevokeApiKey { by: admin(None), name: "billing".into() }),
            Outcome::ApiKeyRevoked
        );
        assert!(t.api_key("billing").is_none());
        let kinds: Vec<_> = t
            .events()
            .since(0, 10)
            .unwrap()
            .into_iter()
            .map(|e| match e.detail {
                EventDetail::ApiKeyChanged { change, .. } => change,
                other => panic!("{other:?}"),
            })
            .collect();
        use ApiKeyChange::*;
        assert_eq!(kinds, vec![Created, Rotated, Rotated, Revoked]);
        assert!(t.sections().iter().all(|(name, _)| name != SECTION), "no section without keys");
    }

    #[test]
    fn a_limited_admin_manages_only_keys_inside_its_prefixes() {
        let mut t = LockTable::new();
        let limited = admin(Some(&["billing-"]));
        let refused = |o: Outcome| matches!(o, Outcome::Rejected(Rejection::ApiKeyOutsideScope { .. }));
        assert!(refused(apply(&mut t, 1, create(limited.clone(), "a", new_key("all", None, None)))));
        assert!(refused(apply(&mut t, 1, create(limited.clone(), "b", new_key("r", Some(&["reports"]), None)))));
        assert!(refused(apply(&mut t, 1, create(limited.clone(), "c", new_key("wide", Some(&["billing"]), None)))));
        let inside = new_key("in", Some(&["billing-a", "billing-b"]), None);
        assert_eq!(apply(&mut t, 1, create(limited.clone(), "d", inside)), Outcome::ApiKeyCreated { retried: false });
        apply(&mut t, 1, create(admin(None), "e", new_key("other", None, None)));
        assert!(refused(apply(&mut t, 2, Command::RevokeApiKey { by: limited.clone(), name: "other".into() })));
        assert_eq!(apply(&mut t, 2, Command::RevokeApiKey { by: limited, name: "in".into() }), Outcome::ApiKeyRevoked);
    }

    #[test]
    fn keys_expire_by_the_log_clock_only() {
        let mut t = LockTable::new();
        assert!(matches!(
            apply(&mut t, 100, create(admin(None), "a", new_key("late", None, Some(100)))),
            Outcome::Rejected(Rejection::Invalid(_))
        ));
        apply(&mut t, 100, create(admin(None), "b", new_key("temp", None, Some(200))));
        assert_eq!(t.api_keys_due(150), (vec![], Some(200)));
        let expire = Command::ExpireApiKeys { names: vec!["temp".into()] };
        assert_eq!(apply(&mut t, 199, expire.clone()), Outcome::ApiKeysExpired { expired: 0 });
        assert_eq!(apply(&mut t, 200, expire), Outcome::ApiKeysExpired { expired: 1 });
        assert!(t.api_key("temp").is_none());
    }
}
