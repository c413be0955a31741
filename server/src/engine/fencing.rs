//! Token verification: is this fencing token the current grant of that key? For storage
//! that cannot keep the last token it accepted itself, or wants a second opinion before an
//! irreversible step.

use super::{Engine, EngineResult, Principal};
use crate::locks::LockKey;

/// The answer of [`Engine::verify_token`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenCheck {
    /// Whether the token is held on the key right now.
    pub current: bool,
    /// The tokens of the key's current holders (several for SHARED_READ, none when free).
    pub current_tokens: Vec<u64>,
}

impl Engine {
    /// Whether `token` is a current grant of `lock`, as of everything committed before the
    /// call (a linearizable read: a release or an expiry the caller could have seen is
    /// never answered "current"). Any key allowed `lock`'s namespace may ask; no
    /// transaction is needed.
    pub async fn verify_token(&self, who: &Principal, lock: &LockKey, token: u64) -> EngineResult<TokenCheck> {
        who.check_namespace(&lock.namespace)?;
        self.node.require_leader()?;
        self.node.linearizable_read().await?;
        let st = self.node.state().read().expect("state lock");
        let current_tokens: Vec<u64> =
            st.table.key(lock).map(|k| k.holders.iter().map(|(_, h)| h.token.0).collect()).unwrap_or_default();
        Ok(TokenCheck { current: current_tokens.contains(&token), current_tokens })
    }
}
