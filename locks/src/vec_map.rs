//! A small ordered map kept in one sorted `Vec`.
//!
//! Most of the table's per-transaction and per-key maps hold one or two entries (the
//! locks a transaction holds, its recorded requests, a key's holders). A `BTreeMap`
//! allocates a whole node (hundreds of bytes) even for one entry, which with many
//! transactions and locks is most of a node's memory (docs/bench.md). A sorted `Vec`
//! costs a few dozen bytes per entry, finds by binary
//! search and iterates in key order like the `BTreeMap` it replaces. It serializes as a
//! map, exactly as a `BTreeMap` does, so snapshots stay compatible.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone, PartialEq, Eq)]
pub struct VecMap<K, V> {
    /// Sorted by key, keys unique.
    entries: Vec<(K, V)>,
}

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        VecMap { entries: Vec::new() }
    }
}

impl<K: Ord, V> VecMap<K, V> {
    pub fn new() -> Self {
        Self::default()
    }

    fn find<Q>(&self, key: &Q) -> Result<usize, usize>
    where
        K: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.entries.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }

    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.find(key).ok().map(|i| &mut self.entries[i].1)
    }

    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.find(key).is_ok()
    }

    /// Inserts or replaces; returns the replaced value.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                // Grow one at a time: these maps are small and long-lived.
                self.entries.reserve_exact(1);
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let i = self.find(key).ok()?;
        let (_, v) = self.entries.remove(i);
        if self.entries.is_empty() {
            self.entries = Vec::new();
        }
        Some(v)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + ExactSizeIterator {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + ExactSizeIterator {
        self.entries.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator {
        self.entries.iter().map(|(_, v)| v)
    }
}

impl<K, V> IntoIterator for VecMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl<'a, K, V> IntoIterator for &'a VecMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for VecMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut map = VecMap::new();
        for (k, v) in iter {
            map.insert(k, v);
        }
        map
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for VecMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.entries.iter().map(|(k, v)| (k, v))).finish()
    }
}

impl<K: Serialize, V: Serialize> Serialize for VecMap<K, V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.entries.len()))?;
        for (k, v) in &self.entries {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de, K: Deserialize<'de> + Ord, V: Deserialize<'de>> Deserialize<'de> for VecMap<K, V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor<K, V>(PhantomData<(K, V)>);
        impl<'de, K: Deserialize<'de> + Ord, V: Deserialize<'de>> Visitor<'de> for MapVisitor<K, V> {
            type Value = VecMap<K, V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(access.size_hint().unwrap_or(0).min(1024));
                while let Some((k, v)) = access.next_entry()? {
                    entries.push((k, v));
                }
                // Written in key order; sort anyway so a hand-made input cannot break the
                // binary search (a stable sort keeps the last of duplicate keys last).
                entries.sort_by(|a: &(K, V), b: &(K, V)| a.0.cmp(&b.0));
                entries.dedup_by(|later, earlier| {
                    if later.0 == earlier.0 {
                        std::mem::swap(later, earlier);
                        true
                    } else {
                        false
                    }
                });
                entries.shrink_to_fit();
                Ok(VecMap { entries })
            }
        }
        deserializer.deserialize_map(MapVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn behaves_like_a_btree_map() {
        let mut v = VecMap::new();
        let mut b = BTreeMap::new();
        // A deterministic mix of inserts, replacements and removals.
        for i in 0u64..500 {
            let k = (i * 7919) % 61;
            if i % 3 == 0 {
                assert_eq!(v.remove(&k), b.remove(&k));
            } else {
                assert_eq!(v.insert(k, i), b.insert(k, i));
            }
            assert_eq!(v.len(), b.len());
            assert_eq!(v.get(&k), b.get(&k));
        }
        assert!(v.iter().eq(b.iter()));
        assert!(v.keys().eq(b.keys()));
        assert!(v.values().eq(b.values()));
    }

    #[test]
    fn serializes_exactly_like_a_btree_map() {
        let b: BTreeMap<String, u32> = [("b".to_string(), 2), ("a".to_string(), 1), ("c".to_string(), 3)].into();
        let v: VecMap<String, u32> = b.clone().into_iter().collect();
        let (vb, bb) = (bincode::serialize(&v).unwrap(), bincode::serialize(&b).unwrap());
        assert_eq!(vb, bb, "snapshots written with BTreeMap must keep decoding");
        let back: VecMap<String, u32> = bincode::deserialize(&bb).unwrap();
        assert_eq!(back, v);
        assert_eq!(back.get("b"), Some(&2));
    }
}
