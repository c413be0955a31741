//! The fenced register (the ledger pattern): per key, a write is accepted only if its
//! token is strictly greater than the last accepted one.

use std::collections::HashMap;
use std::sync::Mutex;

/// Per-key last accepted token and value.
#[derive(Default)]
pub struct FencedRegister {
    inner: Mutex<HashMap<String, (u64, u64)>>,
}

impl FencedRegister {
    /// An empty register.
    pub fn new() -> FencedRegister {
        FencedRegister::default()
    }

    /// Writes `value` with `token`: `Ok(previous token)` when accepted, `Err(last accepted
    /// token)` when rejected as stale.
    pub fn write(&self, key: &str, token: u64, value: u64) -> Result<u64, u64> {
        let mut m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let slot = m.entry(key.to_string()).or_insert((0, 0));
        if token > slot.0 {
            let prev = slot.0;
            *slot = (token, value);
            Ok(prev)
        } else {
            Err(slot.0)
        }
    }

    /// The last accepted token and value of `key` ((0, 0) when never written).
    pub fn read(&self, key: &str) -> (u64, u64) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).get(key).copied().unwrap_or((0, 0))
    }

    /// Every key's last accepted token.
    pub fn tokens(&self) -> HashMap<String, u64> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(k, v)| (k.clone(), v.0)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_strictly_greater_tokens() {
        let r = FencedRegister::new();
        assert_eq!(r.write("k", 5, 1), Ok(0));
        assert_eq!(r.write("k", 5, 2), Err(5));
        assert_eq!(r.write("k", 3, 2), Err(5));
        assert_eq!(r.write("k", 7, 3), Ok(5));
        assert_eq!(r.read("k"), (7, 3));
        assert_eq!(r.write("other", 1, 1), Ok(0));
        assert_eq!(r.tokens().get("k"), Some(&7));
    }
}
