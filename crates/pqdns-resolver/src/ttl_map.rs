//! A bounded map whose entries expire: the storage behind the delegations learned from
//! referrals and the trust remembered per zone. When full, expired entries go
//! first, then the entry that expires soonest.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// Longest time anything is kept, seconds (RFC 8767 §4 suggests capping TTLs at one week; we
/// use one day).
pub const MAX_TTL: u32 = 86_400;

/// At most `capacity` entries, each live until its expiry.
#[derive(Debug)]
pub(crate) struct TtlMap<K, V> {
    capacity: usize,
    entries: HashMap<K, (V, Instant)>,
}

impl<K: Eq + Hash + Clone, V> TtlMap<K, V> {
    pub(crate) fn new(capacity: usize) -> TtlMap<K, V> {
        TtlMap {
            capacity,
            entries: HashMap::new(),
        }
    }

    /// The live value for `key`.
    pub(crate) fn get(&self, key: &K, now: Instant) -> Option<&V> {
        self.entries
            .get(key)
            .filter(|(_, expires)| *expires > now)
            .map(|(v, _)| v)
    }

    /// Keeps `value` for `ttl` seconds (at most [`MAX_TTL`]); a TTL of 0 is not stored.
    pub(crate) fn insert(&mut self, key: K, value: V, ttl: u32, now: Instant) {
        if ttl == 0 || self.capacity == 0 {
            return;
        }
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (_, e)| *e > now);
            if self.entries.len() >= self.capacity {
                if let Some(k) = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, e))| *e)
                    .map(|(k, _)| k.clone())
                {
                    self.entries.remove(&k);
                }
            }
        }
        let expires = now + Duration::from_secs(u64::from(ttl.min(MAX_TTL)));
        self.entries.insert(key, (value, expires));
    }

    /// Forgets `key`.
    pub(crate) fn remove(&mut self, key: &K) {
        self.entries.remove(key);
    }

    /// Number of entries (live or expired).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expires_caps_and_evicts_the_soonest_first() {
        let now = Instant::now();
        let mut m = TtlMap::new(2);
        m.insert("a", 1, 10, now);
        assert_eq!(m.get(&"a", now), Some(&1));
        assert_eq!(m.get(&"a", now + Duration::from_secs(11)), None);
        m.insert("b", 2, 100, now);
        m.insert("c", 3, 100, now);
        assert_eq!(m.len(), 2);
        assert_eq!(m.get(&"a", now), None, "expires first, evicted first");
        // Zero TTL is not stored; TTLs are capped at a day.
        m.insert("d", 4, 0, now);
        assert_eq!(m.get(&"d", now), None);
        m.insert("b", 5, u32::MAX, now);
        assert_eq!(m.get(&"b", now + Duration::from_secs(86_399)), Some(&5));
        assert_eq!(m.get(&"b", now + Duration::from_secs(86_401)), None);
    }
}
