//! Topology domains of label keys other than zone and hostname (custom keys such as
//! `capacity-spread`): the values NodePools allow and existing nodes carry, numbered per key so
//! that sets of domains are bit masks, as zones are.

use std::collections::{BTreeMap, BTreeSet};

use driftwood_api::wellknown::{LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE, is_well_known_label};

use crate::pod::PodConstraints;
use crate::requirements::Requirements;

use super::state::Pool;
use super::zones::{MAX_ZONES, ZoneMask, ZoneTable, bit};

/// The domains of one custom topology key.
#[derive(Debug, Clone)]
pub struct KeyDomains {
    /// The label key.
    pub key: String,
    /// Domain values ↔ indices, in value order (at most [`MAX_DOMAINS`]).
    pub table: ZoneTable,
    /// More values than a mask holds: constraints on the key cannot be evaluated.
    pub too_many: bool,
    /// Domains some NodePool allows.
    pub from_pools: ZoneMask,
    /// (index in the simulation's staying nodes, domain) of the staying nodes with the label.
    pub nodes: Vec<(usize, usize)>,
}

/// The most domains a custom key may have.
pub const MAX_DOMAINS: usize = MAX_ZONES;

/// The custom topology keys of a simulation, numbered.
#[derive(Debug, Clone, Default)]
pub struct LabelKeys {
    keys: Vec<KeyDomains>,
    index: BTreeMap<String, u32>,
}

/// Whether `key` is handled by the zone or hostname machinery rather than as a custom key.
fn is_builtin(key: &str) -> bool {
    key == LABEL_TOPOLOGY_ZONE || key == LABEL_HOSTNAME
}

/// The custom topology keys the pods' spread constraints and (anti-)affinity terms name.
pub fn topology_keys<'p>(pods: impl Iterator<Item = &'p PodConstraints>) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for c in pods {
        let named = c
            .spreads
            .iter()
            .map(|s| &s.topology_key)
            .chain(
                c.affinity
                    .iter()
                    .chain(&c.anti_affinity)
                    .map(|t| &t.topology_key),
            )
            .chain(
                c.preferred_affinity
                    .iter()
                    .chain(&c.preferred_anti_affinity)
                    .map(|(_, t)| &t.topology_key),
            );
        for k in named {
            if !is_builtin(k) && !keys.contains(k) {
                keys.insert(k.clone());
            }
        }
    }
    keys
}

/// The domains of `key` (Karpenter's rule): the values NodePools allow for it (finite
/// requirements and template labels, or the usable instance types' own values where the
/// NodePool leaves the key open).
pub fn pool_domains_of(key: &str, pools: &[Pool]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for pool in pools {
        let Some(r) = pool.reqs.get(key) else {
            // Values only instance types and their offerings define (well-known keys such as
            // the capacity type or the architecture that the pool leaves open).
            for t in &pool.types {
                for v in t.values_of(key, &pool.reqs) {
                    if !out.contains(v) {
                        out.insert(v.to_string());
                    }
                }
            }
            continue;
        };
        let Some(values) = r.finite_values() else {
            continue;
        };
        for v in values {
            if !out.contains(v) {
                out.insert(v.clone());
            }
        }
    }
    out
}

impl LabelKeys {
    /// The domains of each key, from the NodePools and the labels of the staying nodes (existing
    /// nodes not going away, and summaries of nodes).
    pub fn new(
        keys: BTreeSet<String>,
        pools: &[Pool],
        staying: &[&BTreeMap<String, String>],
    ) -> Self {
        let mut out = Self::default();
        for key in keys {
            let from_pools = pool_domains_of(&key, pools);
            let mut values = from_pools.clone();
            for labels in staying {
                if let Some(v) = labels.get(&key)
                    && !values.contains(v)
                {
                    values.insert(v.clone());
                }
            }
            let too_many = values.len() > MAX_DOMAINS;
            let table = if too_many {
                ZoneTable::default()
            } else {
                ZoneTable::new(values.into_iter().collect())
            };
            let nodes = staying
                .iter()
                .enumerate()
                .filter_map(|(i, labels)| Some((i, table.get(labels.get(&key)?)?)))
                .collect();
            out.index.insert(key.clone(), out.keys.len() as u32);
            out.keys.push(KeyDomains {
                from_pools: table.mask_where(|v| from_pools.contains(v)),
                nodes,
                key,
                table,
                too_many,
            });
        }
        out
    }

    /// The domains of key `id` a pod with node requirements `reqs` spreads over (Karpenter's
    /// and kube-scheduler's default `nodeAffinityPolicy: Honor`): the values its requirements
    /// admit among those NodePools allow and those of existing nodes it could run on.
    pub fn eligible(
        &self,
        id: u32,
        reqs: &Requirements,
        staying: &[&BTreeMap<String, String>],
    ) -> ZoneMask {
        let Some(k) = self.get(id) else { return 0 };
        let mut mask = k.from_pools;
        for (ni, d) in &k.nodes {
            if mask & bit(*d) == 0
                && staying
                    .get(*ni)
                    .is_some_and(|labels| reqs.matches_labels(labels))
            {
                mask |= bit(*d);
            }
        }
        mask & self.admitted(id, reqs, false)
    }

    /// Whether there is no custom key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The id of `key`.
    pub fn id(&self, key: &str) -> Option<u32> {
        self.index.get(key).copied()
    }

    /// The domains of key `id`.
    pub fn get(&self, id: u32) -> Option<&KeyDomains> {
        self.keys.get(id as usize)
    }

    /// The label key of `id`.
    pub fn name(&self, id: u32) -> &str {
        self.get(id).map_or("", |k| k.key.as_str())
    }

    /// Number of domains of key `id`.
    pub fn domain_count(&self, id: u32) -> usize {
        self.get(id).map_or(0, |k| k.table.len())
    }

    /// Every (key, domain) that `labels` (a node's) decide.
    pub fn decided_by_labels(&self, labels: &BTreeMap<String, String>) -> Vec<(u32, usize)> {
        self.keys
            .iter()
            .enumerate()
            .filter_map(|(i, k)| {
                let d = labels.get(&k.key).and_then(|v| k.table.get(v))?;
                Some((i as u32, d))
            })
            .collect()
    }

    /// Every (key, domain) that requirements narrowed to one value decide.
    pub fn decided_by_requirements(&self, reqs: &Requirements) -> Vec<(u32, usize)> {
        if self.keys.is_empty() {
            return Vec::new();
        }
        self.keys
            .iter()
            .enumerate()
            .filter_map(|(i, k)| {
                let v = reqs.get(&k.key)?.single_value()?;
                Some((i as u32, k.table.get(v)?))
            })
            .collect()
    }

    /// The domains of key `id` that requirements (a NodeClaim's, or a pod's) admit. A key the
    /// requirements leave undefined admits every domain for a pod (`node_side` false); on the
    /// node side only well-known keys may be undefined (Karpenter refuses to add a custom
    /// label a NodePool does not define).
    pub fn admitted(&self, id: u32, reqs: &Requirements, node_side: bool) -> ZoneMask {
        let Some(k) = self.get(id) else { return 0 };
        match reqs.get(&k.key) {
            Some(r) => k.table.mask_where(|v| r.has(v)),
            None if node_side && !is_well_known_label(&k.key) => 0,
            None => k.table.all(),
        }
    }
}
