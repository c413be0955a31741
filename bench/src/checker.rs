//! Safety checks made while the benchmark runs.
//!
//! Clients record a grant after they receive it and a release before they send it, so
//! the recorded holding intervals lie inside the real ones: an overlap seen here is a real
//! overlap. For fencing tokens: an exclusive grant must carry a token above every token
//! seen on its key so far (all earlier holders were released before it was granted); a
//! shared grant must carry a token above the last exclusive one. Shared grants among
//! themselves may be observed in any order.
//!
//! One legitimate overlap: the server may take a waiting transaction's locks away (a
//! deadlock victim, an expired lease) before that client hears of it. So when a grant
//! collides with a holder that is blocked in a later acquire, the collision is held
//! pending: it is fine if that acquire then fails with DEADLOCK_VICTIM / TRANSACTION_LOST,
//! and a violation if it succeeds or fails otherwise (the holder still believed it held
//! the lock and would go on working under it).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use crate::target::Mode;

#[derive(Default)]
struct KeyState {
    exclusive: Option<usize>,
    exclusive_token: Option<u64>,
    shared: u32,
    max_token: u64,
    last_exclusive_token: u64,
}

/// Holders per key, and violations found.
#[derive(Default)]
pub struct Checker {
    keys: Mutex<HashMap<String, KeyState>>,
    violations: Mutex<(u64, Vec<String>)>,
    /// Clients blocked in an acquire, and collisions waiting on that acquire's outcome.
    waiting: Mutex<Waiting>,
}

/// Clients blocked in an acquire, and the collisions pending on each.
type Waiting = (HashSet<usize>, HashMap<usize, Vec<String>>);

/// Error kinds meaning the server ended the transaction, taking its locks.
pub const REVOKING_KINDS: [&str; 3] = ["DEADLOCK_VICTIM", "TRANSACTION_LOST", "LEASE_LOST"];

const KEPT_SAMPLES: usize = 10;

impl Checker {
    fn violation(&self, msg: String) {
        let mut v = self.violations.lock().unwrap();
        v.0 += 1;
        if v.1.len() < KEPT_SAMPLES {
            eprintln!("VIOLATION: {msg}");
            v.1.push(msg);
        }
    }

    /// `client` starts an acquire.
    pub fn acquiring(&self, client: usize) {
        self.waiting.lock().unwrap().0.insert(client);
    }

    /// `client`'s acquire ended, with the error kind if it failed. `held` are the locks
    /// the client held before it: a revoking error means they are gone, released here
    /// before the client stops counting as waiting.
    pub fn acquire_ended(&self, client: usize, error: Option<&str>, held: &[(String, Mode)]) {
        if error.is_some_and(|k| REVOKING_KINDS.contains(&k)) {
            for (key, mode) in held {
                self.releasing(key, *mode, client);
            }
        }
        let pending = {
            let mut w = self.waiting.lock().unwrap();
            w.0.remove(&client);
            w.1.remove(&client).unwrap_or_default()
        };
        if error.is_some_and(|k| REVOKING_KINDS.contains(&k)) {
            return;
        }
        for msg in pending {
            self.violation(format!("{msg}, and that holder's next acquire ended with {error:?}, not a revocation"));
        }
    }

    /// A collision with `other`: pending if `other` is blocked in an acquire.
    fn collision(&self, other: usize, msg: String, found: &mut Vec<String>) {
        let mut w = self.waiting.lock().unwrap();
        if w.0.contains(&other) {
            w.1.entry(other).or_default().push(msg);
        } else {
            found.push(msg);
        }
    }

    /// `client` was granted `key` in `mode`, with `token` if the system gives one.
    pub fn granted(&self, key: &str, mode: Mode, client: usize, token: Option<u64>) {
        let mut found = Vec::new();
        {
            let mut keys = self.keys.lock().unwrap();
            let st = keys.entry(key.to_string()).or_default();
            match mode {
                Mode::Exclusive => {
                    if let Some(other) = st.exclusive {
                        let msg = format!(
                            "{key}: client {client} granted EXCLUSIVE (token {token:?}) while client {other} holds it (token {:?})",
                            st.exclusive_token
                        );
                        self.collision(other, msg, &mut found);
                    }
                    if st.shared > 0 {
                        found.push(format!(
                            "{key}: client {client} granted EXCLUSIVE while {} reader(s) hold it",
                            st.shared
                        ));
                    }
                    st.exclusive = Some(client);
                    st.exclusive_token = token;
                    if let Some(t) = token {
                        if t <= st.max_token {
                            found.push(format!(
                                "{key}: exclusive token {t} to client {client} not above earlier token {}",
                                st.max_token
                            ));
                        }
                        st.max_token = st.max_token.max(t);
                        st.last_exclusive_token = t;
                    }
                }
                Mode::Shared => {
                    if let Some(other) = st.exclusive {
                        found.push(format!(
                            "{key}: client {client} granted SHARED while client {other} holds it EXCLUSIVE"
                        ));
                    }
                    st.shared += 1;
                    if let Some(t) = token {
                        if t <= st.last_exclusive_token {
                            found.push(format!(
                                "{key}: shared token {t} to client {client} not above last exclusive token {}",
                                st.last_exclusive_token
                            ));
                        }
                        st.max_token = st.max_token.max(t);
                    }
                }
            }
        }
        for msg in found {
            self.violation(msg);
        }
    }

    /// `client` is about to release `key` (held in `mode`).
    pub fn releasing(&self, key: &str, mode: Mode, client: usize) {
        let mut keys = self.keys.lock().unwrap();
        if let Some(st) = keys.get_mut(key) {
            match mode {
                Mode::Exclusive => {
                    if st.exclusive == Some(client) {
                        st.exclusive = None;
                    }
                }
                Mode::Shared => st.shared = st.shared.saturating_sub(1),
            }
        }
    }

    /// Violations so far, and the first few descriptions.
    pub fn violations(&self) -> (u64, Vec<String>) {
        self.violations.lock().unwrap().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_exclusive_grants_with_rising_tokens_are_fine() {
        let c = Checker::default();
        c.granted("k", Mode::Exclusive, 1, Some(5));
        c.releasing("k", Mode::Exclusive, 1);
        c.granted("k", Mode::Exclusive, 2, Some(9));
        c.releasing("k", Mode::Exclusive, 2);
        assert_eq!(c.violations().0, 0);
    }

    #[test]
    fn overlap_and_stale_tokens_are_caught() {
        let c = Checker::default();
        c.granted("k", Mode::Exclusive, 1, Some(5));
        c.granted("k", Mode::Exclusive, 2, Some(6));
        assert_eq!(c.violations().0, 1);
        c.releasing("k", Mode::Exclusive, 2);
        c.releasing("k", Mode::Exclusive, 1);
        c.granted("k", Mode::Exclusive, 3, Some(6));
        assert_eq!(c.violations().0, 2);
        c.releasing("k", Mode::Exclusive, 3);
        c.granted("k", Mode::Shared, 4, Some(4));
        assert_eq!(c.violations().0, 3);
    }

    #[test]
    fn readers_share_and_may_be_seen_out_of_order() {
        let c = Checker::default();
        c.granted("k", Mode::Exclusive, 1, Some(3));
        c.releasing("k", Mode::Exclusive, 1);
        c.granted("k", Mode::Shared, 2, Some(8));
        c.granted("k", Mode::Shared, 3, Some(7));
        assert_eq!(c.violations().0, 0);
        c.granted("k", Mode::Exclusive, 4, Some(9));
        assert_eq!(c.violations().0, 1);
    }

    #[test]
    fn a_waiting_holder_may_lose_its_lock_only_to_a_revocation() {
        let c = Checker::default();
        c.granted("a", Mode::Exclusive, 1, Some(1));
        c.acquiring(1);
        c.granted("a", Mode::Exclusive, 2, Some(2));
        assert_eq!(c.violations().0, 0);
        c.acquire_ended(1, Some("DEADLOCK_VICTIM"), &[("a".into(), Mode::Exclusive)]);
        assert_eq!(c.violations().0, 0);

        c.releasing("a", Mode::Exclusive, 2);
        c.granted("a", Mode::Exclusive, 3, Some(3));
        c.acquiring(3);
        c.granted("a", Mode::Exclusive, 4, Some(4));
        c.acquire_ended(3, None, &[]);
        assert_eq!(c.violations().0, 1);
    }
}
