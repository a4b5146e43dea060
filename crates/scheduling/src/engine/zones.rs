//! The zones known to a simulation, numbered so that sets of zones are bit masks.

use std::collections::BTreeMap;

/// A set of zones as bits (zone `i` is bit `i`).
pub type ZoneMask = u128;

/// The most zones a simulation tracks.
pub const MAX_ZONES: usize = 128;

/// Zone names ↔ indices, in name order.
#[derive(Debug, Clone, Default)]
pub struct ZoneTable {
    names: Vec<String>,
    index: BTreeMap<String, usize>,
}

impl ZoneTable {
    /// A table of the given zone names (deduplicated, sorted).
    pub fn new(mut names: Vec<String>) -> Self {
        names.sort();
        names.dedup();
        let index = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        Self { names, index }
    }

    /// Number of zones.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// The names, in their numbering.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Index of a zone name.
    pub fn get(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Name of zone `i`.
    pub fn name(&self, i: usize) -> &str {
        self.names.get(i).map_or("", String::as_str)
    }

    /// Every zone.
    pub fn all(&self) -> ZoneMask {
        if self.names.len() >= MAX_ZONES {
            ZoneMask::MAX
        } else {
            (1u128 << self.names.len()) - 1
        }
    }

    /// Zones whose name satisfies `keep`.
    pub fn mask_where(&self, keep: impl Fn(&str) -> bool) -> ZoneMask {
        let mut m = 0;
        for (i, n) in self.names.iter().enumerate() {
            if keep(n) {
                m |= bit(i);
            }
        }
        m
    }
}

/// The mask of zone `i`.
pub fn bit(i: usize) -> ZoneMask {
    if i < MAX_ZONES { 1u128 << i } else { 0 }
}

/// Indices set in a mask, ascending.
pub fn indices(mask: ZoneMask) -> impl Iterator<Item = usize> {
    let mut rest = mask;
    std::iter::from_fn(move || {
        if rest == 0 {
            return None;
        }
        let i = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        Some(i)
    })
}
