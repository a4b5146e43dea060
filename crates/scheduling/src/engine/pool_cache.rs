//! The NodePools prepared for a simulation (requirements with template labels, DaemonSet
//! overhead, usable instance types cheapest first, their offerings numbered by zone), kept
//! for the next simulations of the same pass: a disruption pass simulates hundreds of
//! candidates against the same NodePools, and preparing 400 instance types each time was most
//! of a candidate's simulation.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use driftwood_api::wellknown::LABEL_NODEPOOL;

use crate::instance_type::InstanceType;
use crate::model::{NodePoolSpec, SimulationInput};
use crate::pod::SimPod;
use crate::requirements::Requirement;
use crate::resources::{NODES, Resources};
use crate::taints::first_untolerated;

use super::dense::{ResourceTable, sub_into};
use super::pod_node_requirements;
use super::state::{Pool, PoolOffering, PoolType};
use super::zones::ZoneTable;

/// What prepared pools depend on: the numbering of resources and zones, each NodePool's
/// spec apart from its remaining limits (its catalog by identity: a catalog is shared and never
/// changed in place), and the DaemonSets.
#[derive(Debug, Clone, PartialEq)]
struct Key {
    resources: Vec<String>,
    zones: Vec<String>,
    nodepools: Vec<NodePoolKey>,
    daemonsets: Vec<SimPod>,
}

#[derive(Debug, Clone)]
struct NodePoolKey {
    name: String,
    weight: i32,
    requirements: crate::requirements::Requirements,
    labels: BTreeMap<String, String>,
    taints: Vec<crate::taints::Taint>,
    /// The catalog, compared by identity; held here, so its address cannot be taken by another
    /// catalog while the entry exists (also when none of its types is usable).
    catalog: Arc<Vec<InstanceType>>,
}

impl PartialEq for NodePoolKey {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.catalog, &other.catalog)
            && self.name == other.name
            && self.weight == other.weight
            && self.requirements == other.requirements
            && self.labels == other.labels
            && self.taints == other.taints
    }
}

impl NodePoolKey {
    fn of(np: &NodePoolSpec) -> Self {
        Self {
            name: np.name.clone(),
            weight: np.weight,
            requirements: np.requirements.clone(),
            labels: np.labels.clone(),
            taints: np.taints.clone(),
            catalog: np.instance_types.clone(),
        }
    }
}

/// The most prepared sets kept: one per distinct numbering seen in a pass (a candidate with a
/// pod asking for an extended resource numbers resources differently).
const ENTRIES: usize = 4;

/// Prepared NodePools, by what they were prepared from. Keep one per pass (the catalogs and
/// NodePools do not change within a pass); a fresh one prepares every time. A clone shares
/// what is prepared so far.
#[derive(Debug, Default, Clone)]
pub struct PoolCache {
    entries: Vec<(Key, Arc<Vec<Pool>>)>,
    /// The names each catalog numbers, by the catalog's identity (held, so its address is not
    /// reused while the entry exists). Not bounded: a pass sees one catalog per NodePool, and
    /// evicting in a pass that sees more than a bound would find every catalog again.
    catalogs: Vec<(Arc<Vec<InstanceType>>, Arc<CatalogNames>)>,
    /// How many simulations were given prepared pools, and how many prepared them.
    hits: u64,
    misses: u64,
}

/// The resource names of a catalog's capacities and the zones of its offerings (every
/// offering, available or not), each sorted and distinct: what a simulation numbers of it.
#[derive(Debug, Default, PartialEq)]
pub struct CatalogNames {
    pub resources: Vec<String>,
    pub zones: Vec<String>,
}

impl CatalogNames {
    fn of(catalog: &[InstanceType]) -> Self {
        let mut resources: BTreeSet<&str> = BTreeSet::new();
        let mut zones: BTreeSet<&str> = BTreeSet::new();
        for it in catalog {
            resources.extend(it.capacity.0.keys().map(String::as_str));
            zones.extend(it.offerings.iter().map(|o| o.zone.as_str()));
        }
        Self {
            resources: resources.into_iter().map(str::to_string).collect(),
            zones: zones.into_iter().map(str::to_string).collect(),
        }
    }
}

impl PoolCache {
    /// The names `catalog` numbers, found once per catalog.
    pub(super) fn catalog_names(&mut self, catalog: &Arc<Vec<InstanceType>>) -> Arc<CatalogNames> {
        if let Some((_, names)) = self.catalogs.iter().find(|(c, _)| Arc::ptr_eq(c, catalog)) {
            return names.clone();
        }
        let names = Arc::new(CatalogNames::of(catalog));
        self.catalogs.push((catalog.clone(), names.clone()));
        names
    }

    /// The prepared NodePools of `input` under `table` and `zones` (from the cache when
    /// prepared before from the same NodePools, catalogs, DaemonSets and numbering).
    pub(super) fn pools(
        &mut self,
        input: &SimulationInput,
        table: &ResourceTable,
        zones: &ZoneTable,
    ) -> Arc<Vec<Pool>> {
        let key = Key {
            resources: table.names().to_vec(),
            zones: zones.names().to_vec(),
            nodepools: input.nodepools.iter().map(NodePoolKey::of).collect(),
            daemonsets: input.daemonsets.clone(),
        };
        if let Some((_, pools)) = self.entries.iter().find(|(k, _)| *k == key) {
            self.hits += 1;
            return pools.clone();
        }
        self.misses += 1;
        let pools = Arc::new(build_pools(input, table, zones));
        if self.entries.len() == ENTRIES {
            self.entries.remove(0);
        }
        self.entries.push((key, pools.clone()));
        pools
    }

    /// (simulations given prepared pools, simulations that prepared them).
    pub fn hits_and_misses(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }
}

/// Prepares `input`'s NodePools: weight descending then name; each with its requirements and
/// template labels, the DaemonSets it runs, and its usable types cheapest first.
fn build_pools(input: &SimulationInput, table: &ResourceTable, zones: &ZoneTable) -> Vec<Pool> {
    let mut specs: Vec<_> = input.nodepools.iter().enumerate().collect();
    specs.sort_by(|(_, a), (_, b)| b.weight.cmp(&a.weight).then(a.name.cmp(&b.name)));
    let mut pools = Vec::new();
    for (spec, np) in specs {
        let mut reqs = np.requirements.clone();
        for (k, v) in &np.labels {
            reqs.add(k, Requirement::is_in([v.clone()]));
        }
        reqs.add(LABEL_NODEPOOL, Requirement::is_in([np.name.clone()]));
        let mut daemon = Resources::new();
        let mut daemon_ports = Vec::new();
        for ds in &input.daemonsets {
            let tolerated = first_untolerated(&np.taints, &ds.constraints.tolerations).is_none();
            if tolerated
                && reqs
                    .compatible_for_scheduling(&pod_node_requirements(ds))
                    .is_ok()
            {
                daemon = daemon.add(&ds.requests);
                daemon_ports.extend(ds.constraints.host_ports.iter().cloned());
            }
        }
        let daemon_dense = table.dense(&daemon);
        let mut types: Vec<(f64, PoolType)> = Vec::new();
        for (index, it) in np.instance_types.iter().enumerate() {
            let offerings: Vec<PoolOffering> = it
                .offerings
                .iter()
                .filter(|o| o.available)
                .map(|o| PoolOffering {
                    zone: zones.get(&o.zone),
                    zone_name: o.zone.clone(),
                    capacity_type: o.capacity_type.clone(),
                    price: o.price,
                })
                .collect();
            let mut alloc = table.dense(&it.allocatable());
            sub_into(&mut alloc, &daemon_dense);
            let mut capacity = table.dense(&it.capacity);
            // A node of any type counts as one against a `nodes` limit.
            if let Some(nodes) = table.position(NODES) {
                capacity[nodes] = 1000;
            }
            let pt = PoolType::new(np.instance_types.clone(), index, alloc, capacity, offerings);
            if pt.compatible(&reqs, None) {
                types.push((pt.cheapest(&reqs), pt));
            }
        }
        types.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then_with(|| a.1.it().name.cmp(&b.1.it().name))
        });
        let zone_mask = types
            .iter()
            .fold(0, |mask, (_, t)| mask | t.zone_mask(&reqs, zones));
        pools.push(Pool {
            spec,
            name: np.name.clone(),
            reqs,
            taints: np.taints.clone(),
            types: types.into_iter().map(|(_, t)| t).collect(),
            daemon,
            daemon_ports,
            zone_mask,
        });
    }
    pools
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{GIB, fake_instance_types, nodepool, pod};
    use crate::{schedule, schedule_cached};

    fn world() -> SimulationInput {
        SimulationInput {
            pods: (0..6)
                .map(|i| pod(&format!("default/p-{i}"), 700 + 300 * i, 2 * GIB))
                .collect(),
            nodepools: vec![nodepool("default", fake_instance_types(40))],
            ..Default::default()
        }
    }

    /// The cache gives the same answer as preparing afresh, prepares once while nothing it
    /// depends on changes, and prepares again when a DaemonSet, a catalog or a NodePool does.
    #[test]
    fn prepared_pools_are_reused_only_while_what_they_depend_on_is_the_same() {
        let mut cache = PoolCache::default();
        let mut input = world();
        let fresh = schedule(&input).unwrap();
        assert_eq!(schedule_cached(&input, &mut cache).unwrap(), fresh);
        assert_eq!(schedule_cached(&input, &mut cache).unwrap(), fresh);
        // Other pods, same NodePools: still prepared.
        input.pods.truncate(3);
        assert_eq!(
            schedule_cached(&input, &mut cache).unwrap(),
            schedule(&input).unwrap()
        );
        assert_eq!(cache.hits_and_misses(), (2, 1));

        // A DaemonSet takes room on every new node.
        input.daemonsets.push(pod("kube-system/agent", 500, GIB));
        assert_eq!(
            schedule_cached(&input, &mut cache).unwrap(),
            schedule(&input).unwrap()
        );
        // A new catalog (same contents, another copy) and a NodePool's weight.
        input.nodepools[0].instance_types = Arc::new(fake_instance_types(10));
        assert_eq!(
            schedule_cached(&input, &mut cache).unwrap(),
            schedule(&input).unwrap()
        );
        input.nodepools[0].weight = 10;
        assert_eq!(
            schedule_cached(&input, &mut cache).unwrap(),
            schedule(&input).unwrap()
        );
        assert_eq!(cache.hits_and_misses(), (2, 4));
        // Only the newest few are kept.
        assert!(cache.entries.len() <= ENTRIES);
    }

    /// A pod asking for a resource no type has numbers resources differently: prepared again,
    /// and the answer is that it fits nowhere, as without the cache.
    #[test]
    fn another_resource_numbering_prepares_again() {
        let mut cache = PoolCache::default();
        let mut input = world();
        schedule_cached(&input, &mut cache).unwrap();
        let mut gpu = pod("default/gpu", 500, GIB);
        std::sync::Arc::make_mut(&mut gpu.requests).set("nvidia.com/gpu", 1000);
        input.pods.push(gpu);
        let cached = schedule_cached(&input, &mut cache).unwrap();
        assert_eq!(cached, schedule(&input).unwrap());
        assert_eq!(cached.unschedulable.len(), 1);
        assert_eq!(cache.hits_and_misses(), (0, 2));
    }

    /// The entry holds each catalog it was keyed by, also one none of whose types is usable
    /// (so no prepared type holds it): the catalog's address cannot be taken by another
    /// catalog and answer for it while the entry exists.
    #[test]
    fn an_entry_keeps_its_catalogs_alive_even_with_no_usable_type() {
        let mut cache = PoolCache::default();
        let mut input = world();
        input.nodepools[0].requirements.add(
            driftwood_api::wellknown::LABEL_INSTANCE_TYPE,
            Requirement::is_in(["no-such-type"]),
        );
        let result = schedule_cached(&input, &mut cache).unwrap();
        assert_eq!(result.unschedulable.len(), input.pods.len());
        // The input, the entry's key and the catalog's names.
        assert_eq!(Arc::strong_count(&input.nodepools[0].instance_types), 3);
    }

    /// A catalog's names are found once and given back while the catalog is the same one; a
    /// copy of it is another catalog.
    #[test]
    fn a_catalogs_names_are_found_once_per_catalog() {
        let mut cache = PoolCache::default();
        let mut types = fake_instance_types(3);
        types[2].capacity.set("nvidia.com/gpu", 1000);
        types[1].offerings[0].available = false;
        let catalog = Arc::new(types);
        let names = cache.catalog_names(&catalog);
        assert_eq!(names.resources, ["cpu", "memory", "nvidia.com/gpu", "pods"]);
        // Every offering's zone, available or not.
        assert_eq!(names.zones, ["test-zone-1", "test-zone-2", "test-zone-3"]);
        assert!(Arc::ptr_eq(&names, &cache.catalog_names(&catalog)));
        let copy = Arc::new((*catalog).clone());
        let other = cache.catalog_names(&copy);
        assert!(!Arc::ptr_eq(&names, &other));
        assert_eq!(names, other);
    }

    /// A prepared type's zones under requirements, read from its zones per capacity type, are
    /// the zones of its numbered offerings the requirements allow one by one.
    #[test]
    fn zone_masks_are_the_zones_of_the_allowed_offerings() {
        use crate::engine::state::OfferingZones;
        use driftwood_api::wellknown::{LABEL_CAPACITY_TYPE, LABEL_TOPOLOGY_ZONE};
        let mut types = fake_instance_types(6);
        for (i, it) in types.iter_mut().enumerate() {
            let mut spot = it.offerings.clone();
            for o in &mut spot {
                o.capacity_type = "spot".into();
                o.price /= 2.0;
            }
            // Some types offer spot in fewer zones; one offers a zone no table numbers.
            spot.truncate(1 + i % 3);
            it.offerings.extend(spot);
            if i == 4 {
                it.offerings[0].zone = "elsewhere-1".into();
            }
        }
        let input = SimulationInput {
            nodepools: vec![nodepool("default", types)],
            ..Default::default()
        };
        let table = ResourceTable::of_names([]);
        let zones = ZoneTable::new(
            ["test-zone-1", "test-zone-2", "test-zone-3"]
                .map(String::from)
                .to_vec(),
        );
        let pools = build_pools(&input, &table, &zones);
        let zone = |r: Requirement| (LABEL_TOPOLOGY_ZONE, r);
        let ct = |r: Requirement| (LABEL_CAPACITY_TYPE, r);
        let cases: Vec<Vec<(&str, Requirement)>> = vec![
            vec![],
            vec![zone(Requirement::is_in(["test-zone-2"]))],
            vec![zone(Requirement::not_in(["test-zone-1"]))],
            vec![ct(Requirement::is_in(["spot"]))],
            vec![
                ct(Requirement::is_in(["spot"])),
                zone(Requirement::is_in(["test-zone-2", "test-zone-3"])),
            ],
            vec![ct(Requirement::is_in(["reserved"]))],
            vec![zone(Requirement::is_in(["elsewhere-1"]))],
        ];
        for case in cases {
            let mut reqs = crate::requirements::Requirements::default();
            for (key, r) in case.clone() {
                reqs.add(key, r);
            }
            for t in &pools[0].types {
                let one_by_one = t
                    .offerings
                    .iter()
                    .filter(|o| {
                        reqs.get(LABEL_TOPOLOGY_ZONE)
                            .is_none_or(|r| r.has(&o.zone_name))
                            && reqs
                                .get(LABEL_CAPACITY_TYPE)
                                .is_none_or(|r| r.has(&o.capacity_type))
                    })
                    .filter_map(|o| o.zone)
                    .fold(0, |m, z| m | super::super::zones::bit(z));
                assert_eq!(
                    t.zone_mask_of(OfferingZones::of(&reqs, &zones)),
                    one_by_one,
                    "{} under {case:?}",
                    t.it().name
                );
                assert_eq!(t.zone_mask(&reqs, &zones), one_by_one);
            }
        }
    }
}
