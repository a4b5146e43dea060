//! Karpenter's NodePool cost, read at scrape time: `karpenter_nodepools_cost_total{nodepool}`
//! (a gauge, despite its name: the hourly price of the offerings the pool's launched
//! NodeClaims run on, each priced from the pool's newest instance-type catalog; a pool whose
//! catalog was not listed since this process started, while it has launched NodeClaims, has no
//! series until it is) and `karpenter_nodepools_cost_tracker_errors_total{nodepool}` (a
//! launched NodeClaim whose NodePool is gone from the synced cache, so it cannot be priced;
//! counted once per NodeClaim).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use driftwood_api::lookup::ObjectLookups as _;
use driftwood_api::wellknown::{
    LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL, LABEL_TOPOLOGY_ZONE,
};
use driftwood_scheduling::InstanceType;

use crate::metered_cloud::CloudMetrics;
use crate::metrics::Labels;
use crate::state::Snapshot;
use crate::state_metrics::StateGauges;

/// The cost gauge's name (a gauge, so written as it is).
pub const COST: &str = "karpenter_nodepools_cost_total";
/// The error counter's name, without the `_total` the encoder adds.
pub const ERRORS: &str = "karpenter_nodepools_cost_tracker_errors";
/// The families the collector writes.
pub const FAMILIES: [(&str, MetricType); 2] =
    [(COST, MetricType::Gauge), (ERRORS, MetricType::Counter)];

/// The collector: the cluster state the scrape observed (and whether the cache was synced
/// then), each pool's newest catalog, and the NodeClaims already counted as errors.
#[derive(Debug, Clone)]
pub struct NodePoolCost {
    pub state: StateGauges,
    pub cloud: CloudMetrics,
    pub errors: Family<Labels, Counter>,
    synced: Arc<AtomicBool>,
    unpriced: Arc<Mutex<HashSet<String>>>,
}

impl NodePoolCost {
    pub fn new(state: StateGauges, cloud: CloudMetrics) -> Self {
        Self {
            state,
            cloud,
            errors: Family::default(),
            synced: Arc::default(),
            unpriced: Arc::default(),
        }
    }

    /// Whether the cache the next scrape reads is synced (a NodePool missing before it is may
    /// just not be loaded yet).
    pub fn set_synced(&self, synced: bool) {
        self.synced.store(synced, Ordering::Relaxed);
    }

    /// Each NodePool's cost in `snapshot`; counts the NodeClaims of NodePools gone (once).
    fn costs(&self, snapshot: &Snapshot) -> BTreeMap<String, f64> {
        let synced = self.synced.load(Ordering::Relaxed);
        // Each pool's newest catalog, and its types by name (borrowed from the catalog).
        let catalogs: HashMap<&str, Arc<Vec<InstanceType>>> = snapshot
            .store
            .nodepools
            .keys()
            .filter_map(|pool| Some((pool.as_str(), self.cloud.catalog_of(pool)?)))
            .collect();
        let types: HashMap<&str, HashMap<&str, &InstanceType>> = catalogs
            .iter()
            .map(|(pool, catalog)| {
                (
                    *pool,
                    catalog.iter().map(|it| (it.name.as_str(), it)).collect(),
                )
            })
            .collect();
        let mut costs: BTreeMap<&str, f64> = BTreeMap::new();
        let mut not_listed: BTreeSet<&str> = BTreeSet::new();
        let mut unpriced = self.unpriced.lock().unwrap_or_else(PoisonError::into_inner);
        unpriced.retain(|claim| snapshot.store.nodeclaims.contains_key(claim));
        for (name, claim) in &snapshot.store.nodeclaims {
            let label = |key: &str| claim.label(key).filter(|v| !v.is_empty());
            // Not launched yet (Karpenter skips a NodeClaim missing any of these labels).
            let (Some(pool), Some(instance_type), Some(zone), Some(capacity_type)) = (
                label(LABEL_NODEPOOL),
                label(LABEL_INSTANCE_TYPE),
                label(LABEL_TOPOLOGY_ZONE),
                label(LABEL_CAPACITY_TYPE),
            ) else {
                continue;
            };
            if !snapshot.store.nodepools.contains_key(pool) {
                if synced && unpriced.insert(name.clone()) {
                    self.errors
                        .get_or_create(&vec![("nodepool".to_string(), pool.to_string())])
                        .inc();
                }
                continue;
            }
            let Some(by_name) = types.get(pool) else {
                not_listed.insert(pool);
                continue;
            };
            // An offering the catalog no longer lists counts at 0, as Karpenter's tracker
            // undercounts it (and logs it) until the catalog has it again.
            let price = by_name
                .get(instance_type)
                .and_then(|it| {
                    it.offerings
                        .iter()
                        .rfind(|o| o.zone == zone && o.capacity_type == capacity_type)
                })
                .map_or(0.0, |o| o.price);
            *costs.entry(pool).or_default() += price;
        }
        snapshot
            .store
            .nodepools
            .keys()
            .filter(|pool| !not_listed.contains(pool.as_str()))
            .map(|pool| {
                (
                    pool.clone(),
                    costs.get(pool.as_str()).copied().unwrap_or(0.0),
                )
            })
            .collect()
    }
}

impl Collector for NodePoolCost {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let costs = self
            .state
            .latest()
            .map(|snapshot| self.costs(&snapshot))
            .unwrap_or_default();
        let mut family = encoder.encode_descriptor(
            COST,
            "Total cost of the nodepool from Karpenter's perspective. Units are determined by \
             the cloud provider. Not an authoritative source for billing.",
            None,
            MetricType::Gauge,
        )?;
        for (pool, cost) in &costs {
            ConstGauge::new(*cost).encode(family.encode_family(&[("nodepool", pool.as_str())])?)?;
        }
        let family = encoder.encode_descriptor(
            ERRORS,
            "Number of errors encountered during cost tracking operations. Labeled by nodepool.",
            None,
            MetricType::Counter,
        )?;
        self.errors.encode(family)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Store;
    use driftwood_scheduling::{InstanceType, Offering};
    use prometheus_client::registry::Registry;
    use serde_json::json;

    fn claim(name: &str, pool: &str, it: &str, zone: &str, ct: &str) -> driftwood_api::NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {
                "karpenter.sh/nodepool": pool, "node.kubernetes.io/instance-type": it,
                "topology.kubernetes.io/zone": zone, "karpenter.sh/capacity-type": ct}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "c"},
                     "requirements": []}
        }))
        .unwrap()
    }

    fn pool(name: &str) -> driftwood_api::NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws",
                "kind": "EC2NodeClass", "name": "c"}, "requirements": []}}}
        }))
        .unwrap()
    }

    fn offering(zone: &str, ct: &str, price: f64) -> Offering {
        Offering {
            zone: zone.into(),
            capacity_type: ct.into(),
            price,
            available: true,
        }
    }

    /// Karpenter's cluster cost suite ("should track the cost of nodeclaims per nodepool",
    /// "should not count nodeclaims missing labels"): each pool sums its launched claims'
    /// offering prices from its own catalog; a pool with none costs 0; a claim not launched yet
    /// is not counted; a pool whose catalog was never listed has no series yet; a claim of a
    /// NodePool gone is an error, counted once, and only once the cache is synced.
    #[test]
    fn each_pool_costs_what_its_launched_claims_run_on() {
        let cloud =
            CloudMetrics::register(&mut driftwood_cloud::metric_registry::DeclaredRegistry::new());
        let mut m5 = driftwood_scheduling::testkit::fake_instance_types(1)
            .into_iter()
            .next()
            .unwrap();
        m5.name = "m5.large".into();
        m5.offerings = vec![
            offering("us-west-2a", "on-demand", 0.25),
            offering("us-west-2a", "spot", 0.125),
        ];
        let catalog: Arc<Vec<InstanceType>> = Arc::new(vec![m5]);
        cloud.keep_catalog("general", &catalog);
        let mut snapshot = Snapshot::new(Store::default());
        for p in ["general", "idle", "unlisted"] {
            snapshot.apply(p.to_string(), Arc::new(pool(p)));
        }
        for (name, pool, ct) in [
            ("a", "general", "on-demand"),
            ("b", "general", "on-demand"),
            ("c", "general", "spot"),
            ("d", "unlisted", "spot"),
            ("e", "gone", "spot"),
        ] {
            snapshot.apply(
                name.to_string(),
                Arc::new(claim(name, pool, "m5.large", "us-west-2a", ct)),
            );
        }
        let mut pending = claim("f", "general", "", "", "");
        pending
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .retain(|k, _| k == "karpenter.sh/nodepool");
        snapshot.apply("f".to_string(), Arc::new(pending));

        let state = StateGauges::default();
        state.observe(snapshot, jiff::Timestamp::UNIX_EPOCH);
        let cost = NodePoolCost::new(state, cloud);
        let mut registry = Registry::default();
        registry.register_collector(Box::new(cost.clone()));
        let scrape = || {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
            text.lines()
                .filter(|l| l.starts_with("karpenter_nodepools_cost"))
                .map(String::from)
                .collect::<Vec<_>>()
        };
        let costs = [
            "karpenter_nodepools_cost_total{nodepool=\"general\"} 0.625",
            "karpenter_nodepools_cost_total{nodepool=\"idle\"} 0.0",
        ];
        // Not synced: the claim of a pool not in the cache is not an error yet.
        assert_eq!(scrape(), costs);
        cost.set_synced(true);
        for _ in 0..2 {
            let mut expected = costs.map(String::from).to_vec();
            expected
                .push("karpenter_nodepools_cost_tracker_errors_total{nodepool=\"gone\"} 1".into());
            assert_eq!(scrape(), expected);
        }
    }
}
