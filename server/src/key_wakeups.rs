//! Wake-ups for streams watching a key's holders (WatchKey).
//!
//! Apply effects bump the key's channel; a watcher subscribes before it reads the table,
//! so a change between its read and its wait is never missed. The last subscription of a
//! key takes its channel with it, so keys nobody watches cost nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::locks::LockKey;

#[derive(Default)]
pub struct KeyWatchers {
    senders: Mutex<HashMap<LockKey, watch::Sender<()>>>,
}

/// One watcher's view of a key's changes.
pub struct KeySubscription {
    pub changed: watch::Receiver<()>,
    key: LockKey,
    watchers: Arc<KeyWatchers>,
}

impl Drop for KeySubscription {
    fn drop(&mut self) {
        let mut s = self.watchers.senders.lock().expect("key watchers lock");
        // Under the map's lock no one can subscribe meanwhile; 1 = this subscription.
        if s.get(&self.key).is_some_and(|tx| tx.receiver_count() <= 1) {
            s.remove(&self.key);
        }
    }
}

impl KeyWatchers {
    pub fn subscribe(self: &Arc<Self>, key: &LockKey) -> KeySubscription {
        let mut s = self.senders.lock().expect("key watchers lock");
        let tx = s.entry(key.clone()).or_insert_with(|| watch::channel(()).0);
        KeySubscription { changed: tx.subscribe(), key: key.clone(), watchers: self.clone() }
    }

    /// The holders of `key` changed.
    pub fn notify(&self, key: &LockKey) {
        if let Some(tx) = self.senders.lock().expect("key watchers lock").get(key) {
            tx.send_replace(());
        }
    }

    /// Everything may have changed (the table was replaced by a snapshot).
    pub fn notify_all(&self) {
        for tx in self.senders.lock().expect("key watchers lock").values() {
            tx.send_replace(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> LockKey {
        LockKey { namespace: "ns".into(), key: k.into() }
    }

    #[test]
    fn only_the_changed_key_wakes_and_unwatched_keys_keep_nothing() {
        let watchers = Arc::new(KeyWatchers::default());
        watchers.notify(&key("a"));
        assert!(watchers.senders.lock().unwrap().is_empty());
        let mut a = watchers.subscribe(&key("a"));
        let b = watchers.subscribe(&key("b"));
        watchers.notify(&key("a"));
        assert!(a.changed.has_changed().unwrap());
        assert!(!b.changed.has_changed().unwrap());
        a.changed.borrow_and_update();
        watchers.notify_all();
        assert!(a.changed.has_changed().unwrap() && b.changed.has_changed().unwrap());
        drop(a);
        drop(b);
        assert!(watchers.senders.lock().unwrap().is_empty(), "the last subscription takes the channel");
    }
}
