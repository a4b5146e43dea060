//! The engine's working state: NodePools with their usable instance types, and bins (existing
//! nodes and the NodeClaims opened so far) with what they hold.

use std::collections::BTreeSet;
use std::sync::Arc;

use driftwood_api::wellknown::{LABEL_CAPACITY_TYPE, LABEL_TOPOLOGY_ZONE};

use crate::instance_type::InstanceType;
use crate::pod::HostPort;
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;
use crate::taints::Taint;

use super::dense::{Dense, max_into};
use super::zones::{ZoneMask, ZoneTable, bit};

/// An available offering with its zone numbered.
#[derive(Debug, Clone)]
pub struct PoolOffering {
    pub zone: Option<usize>,
    pub zone_name: String,
    pub capacity_type: String,
    pub price: f64,
}

/// An instance type usable by one NodePool: owned (the catalog shared, the type by its
/// position), so prepared pools outlive one simulation ([`super::PoolCache`]).
#[derive(Debug, Clone)]
pub struct PoolType {
    pub catalog: Arc<Vec<InstanceType>>,
    pub index: usize,
    /// Allocatable minus the pool's daemonset overhead.
    pub alloc: Dense,
    pub capacity: Dense,
    pub offerings: Vec<PoolOffering>,
    /// The zones of the numbered offerings, per capacity type (in the order first offered):
    /// what [`PoolType::zone_mask_of`] reads instead of comparing every offering's names.
    pub zones_by_capacity_type: Vec<(String, ZoneMask)>,
}

/// The requirements on an offering (zone, capacity type) of a requirement set, looked up once
/// for all the offerings checked against them.
#[derive(Clone, Copy)]
pub struct OfferingReqs<'r> {
    zone: Option<&'r Requirement>,
    capacity_type: Option<&'r Requirement>,
}

impl<'r> OfferingReqs<'r> {
    /// The offering requirements of `reqs`.
    pub fn of(reqs: &'r Requirements) -> Self {
        Self {
            zone: reqs.get(LABEL_TOPOLOGY_ZONE),
            capacity_type: reqs.get(LABEL_CAPACITY_TYPE),
        }
    }

    /// Whether they allow offering `o`.
    fn allow(&self, o: &PoolOffering) -> bool {
        self.zone.is_none_or(|r| r.has(&o.zone_name))
            && self.capacity_type.is_none_or(|r| r.has(&o.capacity_type))
    }
}

/// The requirements on an offering as zone bits: the zones of a [`ZoneTable`] the zone
/// requirement allows, and the capacity type requirement; for zone masks over many types.
#[derive(Clone, Copy)]
pub struct OfferingZones<'r> {
    zones: ZoneMask,
    capacity_type: Option<&'r Requirement>,
}

impl<'r> OfferingZones<'r> {
    /// The offering requirements of `reqs`, over the zones of `table`.
    pub fn of(reqs: &'r Requirements, table: &ZoneTable) -> Self {
        let zone = reqs.get(LABEL_TOPOLOGY_ZONE);
        let zones = (0..table.len())
            .filter(|z| zone.is_none_or(|r| r.has(table.name(*z))))
            .fold(0, |mask, z| mask | bit(z));
        Self {
            zones,
            capacity_type: reqs.get(LABEL_CAPACITY_TYPE),
        }
    }
}

impl PoolType {
    /// A usable type with its offerings; numbered offerings are summarised by capacity type.
    pub fn new(
        catalog: Arc<Vec<InstanceType>>,
        index: usize,
        alloc: Dense,
        capacity: Dense,
        offerings: Vec<PoolOffering>,
    ) -> Self {
        let mut zones_by_capacity_type: Vec<(String, ZoneMask)> = Vec::new();
        for o in &offerings {
            let Some(z) = o.zone else { continue };
            match zones_by_capacity_type
                .iter_mut()
                .find(|(ct, _)| *ct == o.capacity_type)
            {
                Some((_, mask)) => *mask |= bit(z),
                None => zones_by_capacity_type.push((o.capacity_type.clone(), bit(z))),
            }
        }
        Self {
            catalog,
            index,
            alloc,
            capacity,
            offerings,
            zones_by_capacity_type,
        }
    }

    /// The instance type.
    pub fn it(&self) -> &InstanceType {
        &self.catalog[self.index]
    }

    /// Whether the type can be launched under `reqs` (labels intersect, an offering is allowed),
    /// optionally in zone `zone` only.
    pub fn compatible(&self, reqs: &Requirements, zone: Option<usize>) -> bool {
        let allowed = OfferingReqs::of(reqs);
        reqs.first_conflict(&self.it().requirements).is_none()
            && self
                .offerings
                .iter()
                .any(|o| zone.is_none_or(|z| o.zone == Some(z)) && allowed.allow(o))
    }

    /// Zones with an offering allowed by `reqs` (zones numbered by `table`).
    pub fn zone_mask(&self, reqs: &Requirements, table: &ZoneTable) -> ZoneMask {
        self.zone_mask_of(OfferingZones::of(reqs, table))
    }

    /// Zones with an offering allowed by `reqs`, looked up already: the numbered offerings'
    /// zones of each allowed capacity type, within the allowed zones.
    pub fn zone_mask_of(&self, reqs: OfferingZones<'_>) -> ZoneMask {
        self.zones_by_capacity_type
            .iter()
            .filter(|(ct, _)| reqs.capacity_type.is_none_or(|r| r.has(ct)))
            .fold(0, |m, (_, zones)| m | zones)
            & reqs.zones
    }

    /// The cheapest allowed offering's price.
    pub fn cheapest(&self, reqs: &Requirements) -> f64 {
        let allowed = OfferingReqs::of(reqs);
        self.offerings
            .iter()
            .filter(|o| allowed.allow(o))
            .map(|o| o.price)
            .fold(f64::INFINITY, f64::min)
    }

    /// The values of `key` this type can take under requirement set `reqs`.
    pub fn values_of<'s>(&'s self, key: &str, reqs: &Requirements) -> Vec<&'s str> {
        let allowed = |v: &str| reqs.get(key).is_none_or(|r| r.has(v));
        let offerings_allowed = OfferingReqs::of(reqs);
        if key == LABEL_TOPOLOGY_ZONE {
            return self
                .offerings
                .iter()
                .filter(|o| offerings_allowed.allow(o))
                .map(|o| o.zone_name.as_str())
                .collect();
        }
        if key == LABEL_CAPACITY_TYPE {
            return self
                .offerings
                .iter()
                .filter(|o| offerings_allowed.allow(o))
                .map(|o| o.capacity_type.as_str())
                .collect();
        }
        match self
            .it()
            .requirements
            .get(key)
            .and_then(|r| r.finite_values())
        {
            Some(vals) => vals
                .iter()
                .map(String::as_str)
                .filter(|v| allowed(v))
                .collect(),
            None => Vec::new(),
        }
    }
}

/// A NodePool prepared for the simulation.
#[derive(Debug, Clone)]
pub struct Pool {
    /// The NodePool's position in the simulation's `nodepools` (the same on every simulation
    /// the prepared pools serve: the cache compares them in order).
    pub spec: usize,
    pub name: String,
    /// Requirements, template labels and the nodepool label.
    pub reqs: Requirements,
    pub taints: Vec<Taint>,
    /// Usable types, cheapest first.
    pub types: Vec<PoolType>,
    pub daemon: Resources,
    pub daemon_ports: Vec<HostPort>,
    /// Zones with an offering the pool's requirements allow, over its types.
    pub zone_mask: ZoneMask,
}

/// The first requirement with minValues that `types` do not span, as (key, have, need).
pub fn min_values_shortfall<'t>(
    types: impl Iterator<Item = &'t PoolType> + Clone,
    reqs: &Requirements,
) -> Option<(String, usize, usize)> {
    for (key, r) in reqs.iter() {
        let Some(need) = r.min_values() else { continue };
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for t in types.clone() {
            seen.extend(t.values_of(key, reqs));
            if seen.len() >= need {
                break;
            }
        }
        if seen.len() < need {
            return Some((key.to_string(), seen.len(), need));
        }
    }
    None
}

/// A NodeClaim being filled.
#[derive(Debug, Clone)]
pub struct Claim {
    pub pool: usize,
    pub reqs: Requirements,
    /// Indices into the pool's types that can still host everything, cheapest first.
    pub types: Vec<u32>,
    /// Per-resource maximum of the types' `alloc`.
    pub max_alloc: Dense,
    /// Capacity held against the pool's limits.
    pub reserved: Option<Dense>,
    /// Zones the claim can still launch in.
    pub zone_mask: ZoneMask,
}

impl Claim {
    /// Recomputes `max_alloc`, `zone_mask` and the limit reservation from `types`; returns the
    /// reservation released.
    pub fn refresh(&mut self, pool: &Pool, dims: usize, table: &ZoneTable) -> Option<Dense> {
        let mut max_alloc = vec![i64::MIN; dims];
        let mut max_cap = vec![0; dims];
        let mut zones = 0;
        let offering_reqs = OfferingZones::of(&self.reqs, table);
        for t in &self.types {
            let pt = &pool.types[*t as usize];
            max_into(&mut max_alloc, &pt.alloc);
            max_into(&mut max_cap, &pt.capacity);
            zones |= pt.zone_mask_of(offering_reqs);
        }
        self.max_alloc = max_alloc;
        self.zone_mask = zones;
        let old = self.reserved.take()?;
        let released: Dense = old.iter().zip(&max_cap).map(|(o, n)| o - n).collect();
        self.reserved = Some(max_cap);
        Some(released)
    }
}

/// What a bin is.
#[derive(Debug, Clone)]
pub enum BinKind {
    /// `input.existing_nodes[i]`.
    Existing(usize),
    /// A NodeClaim opened by the simulation.
    Claim(Box<Claim>),
}

/// An existing node or a new NodeClaim, as pods are added to it.
#[derive(Debug, Clone)]
pub struct Bin {
    pub kind: BinKind,
    /// Decided zone, if any.
    pub zone: Option<usize>,
    /// Decided domains of custom topology keys, as (key id, domain).
    pub labels: Vec<(u32, usize)>,
    /// Taints pods must tolerate.
    pub taints: Vec<Taint>,
    /// Allocatable for existing nodes (unused for claims).
    pub alloc: Dense,
    /// Requests of the pods placed (and, for existing nodes, already bound).
    pub used: Dense,
    pub ports: Vec<HostPort>,
    /// (group, matching pods, owners of the group's anti-affinity term).
    pub topo: Vec<(u32, u32, u32)>,
    /// Queue indices of the pods placed by the simulation.
    pub pods: Vec<usize>,
    /// No remaining pod can fit.
    pub closed: bool,
}

impl Bin {
    /// (matching pods, owners) for a group.
    pub fn topo_counts(&self, group: u32) -> (u32, u32) {
        self.topo
            .iter()
            .find(|(g, _, _)| *g == group)
            .map_or((0, 0), |(_, m, o)| (*m, *o))
    }

    /// The decided domain of custom key `key`, if any.
    pub fn label_domain(&self, key: u32) -> Option<usize> {
        self.labels.iter().find(|(k, _)| *k == key).map(|(_, d)| *d)
    }

    /// Adds to a group's counts.
    pub fn topo_add(&mut self, group: u32, matched: u32, owners: u32) {
        match self.topo.iter_mut().find(|(g, _, _)| *g == group) {
            Some(entry) => {
                entry.1 += matched;
                entry.2 += owners;
            }
            None => self.topo.push((group, matched, owners)),
        }
    }

    /// Whether `need` fits in the bin's headroom, per resource: what the largest remaining type
    /// (claims) or the node has left.
    pub fn has_room_for(&self, need: &[i64]) -> bool {
        let cap = match &self.kind {
            BinKind::Existing(_) => &self.alloc,
            BinKind::Claim(c) => &c.max_alloc,
        };
        need.iter()
            .zip(cap.iter().zip(&self.used))
            .all(|(n, (c, u))| *n <= c.saturating_sub(*u))
    }
}
