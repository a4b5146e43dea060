//! [`Shared`]: a value shared between its clones and copied on its first write, so the pods of
//! one workload can carry one copy of their constraints however many of them a pass clones.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// A value behind an [`Arc`]: cloning shares it, reading goes through to it, and writing
/// through `DerefMut` copies it first if it is shared ([`Arc::make_mut`]), so a write never
/// shows through another clone. Equality and order are the value's, with the shortcut that
/// two clones of one value are equal without comparing.
#[derive(Debug, Default)]
pub struct Shared<T>(Arc<T>);

impl<T> Shared<T> {
    /// Wraps `value`.
    pub fn new(value: T) -> Self {
        Self(Arc::new(value))
    }

    /// Whether `a` and `b` are clones of one value (so equal without comparing).
    pub fn same(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// Where the shared value lives: equal for clones, and unique among the values alive (a
    /// memo keyed by it must keep a clone, so the address is not reused).
    pub fn address(&self) -> usize {
        Arc::as_ptr(&self.0).addr()
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T> From<T> for Shared<T> {
    fn from(value: T) -> Self {
        Self::new(value)
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Clone> DerefMut for Shared<T> {
    fn deref_mut(&mut self) -> &mut T {
        Arc::make_mut(&mut self.0)
    }
}

impl<T: PartialEq> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Self::same(self, other) || *self.0 == *other.0
    }
}

impl<T: Eq> Eq for Shared<T> {}

impl<T: Ord> PartialOrd for Shared<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T: Ord> Ord for Shared<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        if Self::same(self, other) {
            Ordering::Equal
        } else {
            self.0.cmp(&other.0)
        }
    }
}

impl<T: Hash> Hash for Shared<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_until_one_is_written_and_the_write_stays_its_own() {
        let a = Shared::new(vec![1, 2]);
        let mut b = a.clone();
        assert!(Shared::same(&a, &b));
        assert_eq!(a, b);
        b.push(3);
        assert!(!Shared::same(&a, &b));
        assert_eq!(*a, vec![1, 2]);
        assert_eq!(*b, vec![1, 2, 3]);
        assert_ne!(a, b);
        assert!(a < b);
        // Equal values that are not clones compare by value.
        let c = Shared::new(vec![1, 2]);
        assert!(!Shared::same(&a, &c));
        assert_eq!(a, c);
        assert_eq!(a.cmp(&c), Ordering::Equal);
    }

    #[test]
    fn a_value_written_while_unshared_is_not_copied() {
        let mut a = Shared::new(vec![1]);
        let before = Arc::as_ptr(&a.0);
        a.push(2);
        assert_eq!(Arc::as_ptr(&a.0), before);
    }
}
