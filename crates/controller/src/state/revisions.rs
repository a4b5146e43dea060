//! Which objects of a kind changed between two moments of the cache, found without comparing
//! objects: each stored object (Pods aside) carries a revision number, new on every store and
//! unique in the process (so any two moments compare, even of different caches: a revision
//! names one stored object), and two moments' revision maps are compared number by number,
//! skipping the structure they share.
//! (Comparing the object maps themselves compares every entry of each changed leaf in depth,
//! Nodes and NodeClaims being `PartialEq` only.)

use super::{ObjectKey, Objects};
use imbl::OrdMap;
use imbl::ordmap::DiffItem;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Each object's revision, by key.
pub type Revisions = OrdMap<ObjectKey, u64>;

/// A revision not given before in this process.
pub(super) fn next() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    LAST.fetch_add(1, Ordering::Relaxed) + 1
}

/// One kind's objects at one moment with their revisions (both persistent maps: holding them
/// costs nothing, and comparing them with a later moment's skips what the two share).
#[derive(Debug)]
pub struct Tracked<T> {
    pub objects: Objects<T>,
    revisions: Revisions,
}

impl<T> Clone for Tracked<T> {
    fn clone(&self) -> Self {
        Self {
            objects: self.objects.clone(),
            revisions: self.revisions.clone(),
        }
    }
}

impl<T> Default for Tracked<T> {
    fn default() -> Self {
        Self {
            objects: Objects::new(),
            revisions: Revisions::new(),
        }
    }
}

/// One object that changed between two moments.
#[derive(Debug)]
pub enum Change<'a, T> {
    Added(&'a ObjectKey, &'a Arc<T>),
    Updated {
        key: &'a ObjectKey,
        old: &'a Arc<T>,
        new: &'a Arc<T>,
    },
    Removed(&'a ObjectKey, &'a Arc<T>),
}

impl<'a, T> Change<'a, T> {
    /// The changed object's key.
    pub fn key(&self) -> &'a ObjectKey {
        match self {
            Change::Added(key, _) | Change::Removed(key, _) | Change::Updated { key, .. } => key,
        }
    }

    /// The object before the change (None: added).
    pub fn before(&self) -> Option<&'a Arc<T>> {
        match self {
            Change::Added(..) => None,
            Change::Updated { old, .. } | Change::Removed(_, old) => Some(old),
        }
    }

    /// The object after the change (None: removed).
    pub fn after(&self) -> Option<&'a Arc<T>> {
        match self {
            Change::Removed(..) => None,
            Change::Updated { new, .. } | Change::Added(_, new) => Some(new),
        }
    }
}

impl<T> Tracked<T> {
    pub(super) fn new(objects: Objects<T>, revisions: Revisions) -> Self {
        Self { objects, revisions }
    }

    /// The objects stored, replaced or removed since `before`, in key order; an object stored
    /// again unchanged counts as changed (and every object, when `before` is of another cache).
    pub fn changes_since<'a>(
        &'a self,
        before: &'a Tracked<T>,
    ) -> impl Iterator<Item = Change<'a, T>> {
        before
            .revisions
            .diff(&self.revisions)
            .filter_map(move |item| match item {
                DiffItem::Add(key, _) => self.objects.get(key).map(|new| Change::Added(key, new)),
                DiffItem::Update { new: (key, _), .. } => {
                    match (before.objects.get(key), self.objects.get(key)) {
                        (Some(old), Some(new)) => Some(Change::Updated { key, old, new }),
                        (None, Some(new)) => Some(Change::Added(key, new)),
                        (Some(old), None) => Some(Change::Removed(key, old)),
                        (None, None) => None,
                    }
                }
                DiffItem::Remove(key, _) => {
                    before.objects.get(key).map(|old| Change::Removed(key, old))
                }
            })
    }
}
