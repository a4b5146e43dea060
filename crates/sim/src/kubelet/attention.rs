//! What a kubelet pass looks at: the keys that changed since the last pass and those whose
//! time has come, each once; the rest are left alone until an event or their time.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;

use jiff::{SignedDuration, Timestamp};

/// Keys to look at now, and keys to look at later (one time per key, the earliest: a look
/// works out the key's next time afresh).
#[derive(Debug, Clone)]
pub struct Attention<K: Ord + Hash + Clone> {
    /// To look at in the next pass.
    now: BTreeSet<K>,
    /// To look at when their time comes.
    later: BTreeMap<Timestamp, BTreeSet<K>>,
    /// Each key's time in `later`.
    time_of: HashMap<K, Timestamp>,
}

impl<K: Ord + Hash + Clone> Default for Attention<K> {
    fn default() -> Self {
        Self {
            now: BTreeSet::new(),
            later: BTreeMap::new(),
            time_of: HashMap::new(),
        }
    }
}

impl<K: Ord + Hash + Clone> Attention<K> {
    /// Look at `key` in the next pass.
    pub fn mark(&mut self, key: K) {
        self.now.insert(key);
    }

    /// Do not look at `key` in the next pass (it is gone); a time set for it stays.
    pub fn unmark(&mut self, key: &K) {
        self.now.remove(key);
    }

    /// Look at `key` again at `at`, unless it is to be looked at earlier already.
    pub fn at(&mut self, key: K, at: Timestamp) {
        if let Some(&earlier) = self.time_of.get(&key) {
            if earlier <= at {
                return;
            }
            if let Some(keys) = self.later.get_mut(&earlier) {
                keys.remove(&key);
                if keys.is_empty() {
                    self.later.remove(&earlier);
                }
            }
        }
        self.time_of.insert(key.clone(), at);
        self.later.entry(at).or_default().insert(key);
    }

    /// The keys to look at by `now` (marked, or due), in order; they are forgotten until
    /// marked or due again.
    pub fn take(&mut self, now: Timestamp) -> Vec<K> {
        let after = now
            .checked_add(SignedDuration::from_nanos(1))
            .unwrap_or(Timestamp::MAX);
        let later = self.later.split_off(&after);
        for (_, keys) in std::mem::replace(&mut self.later, later) {
            for key in keys {
                self.time_of.remove(&key);
                self.now.insert(key);
            }
        }
        std::mem::take(&mut self.now).into_iter().collect()
    }

    /// When a key next comes due.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.later.keys().next().copied()
    }

    /// Drop what is to be looked at now, keeping the times set (a relist marks everything).
    pub fn clear_marked(&mut self) {
        self.now.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_724_112_000 + seconds).unwrap()
    }

    #[test]
    fn a_key_is_taken_once_when_marked_and_once_when_due() {
        let mut attention = Attention::default();
        attention.mark("a");
        attention.mark("a");
        attention.at("b", at(2));
        attention.at("b", at(2));
        attention.at("b", at(4));
        assert_eq!(attention.take(at(0)), vec!["a"]);
        assert_eq!(attention.take(at(1)), Vec::<&str>::new());
        assert_eq!(attention.next_due(), Some(at(2)));
        assert_eq!(attention.take(at(2)), vec!["b"]);
        assert_eq!(attention.next_due(), None, "one time per key, the earliest");
        attention.at("c", at(9));
        attention.at("c", at(7));
        assert_eq!(attention.next_due(), Some(at(7)));
        assert_eq!(attention.take(at(8)), vec!["c"]);
        assert_eq!(attention.next_due(), None);
        attention.mark("c");
        attention.unmark(&"c");
        assert_eq!(attention.take(at(3)), Vec::<&str>::new());
    }
}
