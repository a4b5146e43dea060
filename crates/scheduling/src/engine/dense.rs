//! Dense resource vectors indexed by a per-simulation table of resource names, for the hot path.

use std::collections::BTreeMap;

use crate::resources::{CPU, MEMORY, PODS, Resources};

/// Resource names → positions in dense vectors. cpu, memory and pods always come first.
#[derive(Debug, Clone)]
pub struct ResourceTable {
    names: Vec<String>,
    index: BTreeMap<String, usize>,
}

/// The names every table numbers first, in this order.
const FIRST: [&str; 3] = [CPU, MEMORY, PODS];

/// Amounts in milli-units, one per resource of the table.
pub type Dense = Vec<i64>;

impl ResourceTable {
    /// A table holding cpu, memory, pods and every name given (first, then the others in name
    /// order).
    pub fn of_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut table = Self {
            names: Vec::new(),
            index: BTreeMap::new(),
        };
        for name in FIRST {
            table.insert(name);
        }
        // Nearly every name given is one of the three (each pod's requests name them); the
        // others are few, so a list finds them without collecting and sorting every name.
        let mut extra: Vec<&str> = Vec::new();
        for name in names {
            if !FIRST.contains(&name) && !extra.contains(&name) {
                extra.push(name);
            }
        }
        extra.sort_unstable();
        for name in extra {
            table.insert(name);
        }
        table
    }

    fn insert(&mut self, name: &str) {
        if !self.index.contains_key(name) {
            self.index.insert(name.to_string(), self.names.len());
            self.names.push(name.to_string());
        }
    }

    /// Number of resources.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// The names, in their numbering.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Dense form of `r` (names missing from the table are dropped; the table is built to hold all).
    pub fn dense(&self, r: &Resources) -> Dense {
        let mut out = vec![0; self.names.len()];
        for (name, value) in &r.0 {
            if let Some(i) = self.position(name) {
                out[i] = *value;
            }
        }
        out
    }

    /// Dense form of a limit list: names absent from `r` are unlimited.
    pub fn dense_limits(&self, r: &Resources) -> Dense {
        let mut out = vec![i64::MAX; self.names.len()];
        for (name, value) in &r.0 {
            if let Some(i) = self.position(name) {
                out[i] = *value;
            }
        }
        out
    }

    /// Back to a named list (zero entries dropped).
    pub fn named(&self, d: &[i64]) -> Resources {
        let mut out = Resources::new();
        for (name, value) in self.names.iter().zip(d) {
            if *value != 0 {
                out.set(name, *value);
            }
        }
        out
    }

    /// Position of resource `name`, when the table holds it (cpu, memory and pods, the names
    /// nearly every list has, without a lookup).
    pub fn position(&self, name: &str) -> Option<usize> {
        match FIRST.iter().position(|first| *first == name) {
            Some(i) => Some(i),
            None => self.index.get(name).copied(),
        }
    }

    /// Resource name at position `i`.
    pub fn name(&self, i: usize) -> &str {
        self.names.get(i).map_or("", String::as_str)
    }
}

/// Resource names numbered once for the tables of many simulations: cpu, memory and pods 0, 1
/// and 2 (as every table numbers them), the others from 3 in the order met.
#[derive(Debug, Default)]
pub struct ResourceNames<'a> {
    others: Vec<&'a str>,
}

impl<'a> ResourceNames<'a> {
    /// The number of `name`, numbering it if new.
    pub fn id(&mut self, name: &'a str) -> u32 {
        if let Some(i) = FIRST.iter().position(|first| *first == name) {
            return i as u32;
        }
        let at = match self.others.iter().position(|n| *n == name) {
            Some(at) => at,
            None => {
                self.others.push(name);
                self.others.len() - 1
            }
        };
        (FIRST.len() + at) as u32
    }

    /// Each numbered name's position in `table`, by number (None where the table lacks it).
    pub fn positions(&self, table: &ResourceTable) -> Vec<Option<usize>> {
        (0..FIRST.len())
            .map(Some)
            .chain(self.others.iter().map(|n| table.position(n)))
            .collect()
    }
}

/// A resource list by name number ([`ResourceNames`]), each number once.
pub type NumberedResources = Vec<(u32, i64)>;

/// Adds `value` of name number `id` to `list` (saturating, as dense sums are).
pub fn add_numbered(list: &mut NumberedResources, id: u32, value: i64) {
    match list.iter_mut().find(|(n, _)| *n == id) {
        Some((_, sum)) => *sum = sum.saturating_add(value),
        None => list.push((id, value)),
    }
}

/// Adds `r` to the dense `sum`, `positions` giving each name number's position (names the
/// table lacks are dropped).
pub fn add_numbered_into(sum: &mut [i64], r: &[(u32, i64)], positions: &[Option<usize>]) {
    for (id, value) in r {
        if let Some(slot) = positions
            .get(*id as usize)
            .copied()
            .flatten()
            .and_then(|i| sum.get_mut(i))
        {
            *slot = slot.saturating_add(*value);
        }
    }
}

/// Whether `need[i] <= have[i]` for every `i`.
pub fn fits(need: &[i64], have: &[i64]) -> bool {
    need.iter().zip(have).all(|(n, h)| n <= h)
}

/// Whether `used[i] + need[i] <= cap[i]` for every `i`.
pub fn fits_on(used: &[i64], need: &[i64], cap: &[i64]) -> bool {
    used.iter()
        .zip(need)
        .zip(cap)
        .all(|((u, n), c)| u.saturating_add(*n) <= *c)
}

/// `a += b`.
pub fn add_into(a: &mut [i64], b: &[i64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.saturating_add(*y);
    }
}

/// `a -= b`.
pub fn sub_into(a: &mut [i64], b: &[i64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = x.saturating_sub(*y);
    }
}

/// `a = max(a, b)`.
pub fn max_into(a: &mut [i64], b: &[i64]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = (*x).max(*y);
    }
}
