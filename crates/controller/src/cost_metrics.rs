//! Karpenter's NodePool cost, read at scrape time: `karpenter_nodepools_cost_total{nodepool}`
//! (a gauge, despite its name: the hourly price of the offerings the pool's launched
//! NodeClaims run on, each priced from the pool's newest instance-type catalog) and
//! `karpenter_nodepools_cost_tracker_errors_total{nodepool}` (a NodeClaim that could not be
//! priced because its NodePool is gone or its instance types were never listed; counted once
//! per NodeClaim).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use driftwood_api::lookup::ObjectLookups as _;
use driftwood_api::wellknown::{
    LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL, LABEL_TOPOLOGY_ZONE,
};

use crate::metered_cloud::CloudMetrics;
use crate::metrics::Labels;
use crate::state::Snapshot;
use crate::state_metrics::StateGauges;

/// The cost gauge's name (a gauge, so written as it is).
pub const COST: &str = "karpenter_nodepools_cost_total";
/// The error counter's name, without the `_total` the encoder adds.
pub const ERRORS: &str = "karpenter_nodepools_cost_tracker_errors";

/// The collector: the cluster state the scrape observed, each pool's newest catalog, and the
/// NodeClaims already counted as errors.
#[derive(Debug, Clone)]
pub struct NodePoolCost {
    pub state: StateGauges,
    pub cloud: CloudMetrics,
    pub errors: Family<Labels, Counter>,
    unpriced: Arc<Mutex<HashSet<String>>>,
}

impl NodePoolCost {
    pub fn new(state: StateGauges, cloud: CloudMetrics) -> Self {
        Self {
            state,
            cloud,
            errors: Family::default(),
            unpriced: Arc::default(),
        }
    }

    /// Each NodePool's cost in `snapshot`; counts the NodeClaims that cannot be priced (once).
    fn costs(&self, snapshot: &Snapshot) -> BTreeMap<String, f64> {
        let mut costs: BTreeMap<String, f64> = snapshot
            .store
            .nodepools
            .keys()
            .map(|pool| (pool.clone(), 0.0))
            .collect();
        // (instance type, zone, capacity type) -> price, per pool, built on first use.
        type PriceIndex = HashMap<(String, String, String), f64>;
        let mut indexes: HashMap<String, Option<PriceIndex>> = HashMap::new();
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
            let index = indexes.entry(pool.to_string()).or_insert_with(|| {
                let catalog = self
                    .cloud
                    .catalog_of(pool)
                    .filter(|_| snapshot.store.nodepools.contains_key(pool))?;
                Some(
                    catalog
                        .iter()
                        .flat_map(|it| {
                            it.offerings.iter().map(|o| {
                                (
                                    (it.name.clone(), o.zone.clone(), o.capacity_type.clone()),
                                    o.price,
                                )
                            })
                        })
                        .collect(),
                )
            });
            let Some(index) = index else {
                if unpriced.insert(name.clone()) {
                    self.errors
                        .get_or_create(&vec![("nodepool".to_string(), pool.to_string())])
                        .inc();
                }
                continue;
            };
            // An offering the catalog no longer lists counts at 0, as Karpenter's tracker
            // undercounts it (and logs it) until the catalog has it again.
            let key = (
                instance_type.to_string(),
                zone.to_string(),
                capacity_type.to_string(),
            );
            if let (Some(price), Some(cost)) = (index.get(&key), costs.get_mut(pool)) {
                *cost += price;
            }
        }
        costs
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
    /// "should not count nodeclaims missing labels", errors when the nodepool's instance types
    /// cannot be read): each pool sums its launched claims' offering prices from its own
    /// catalog; a pool with none costs 0; a claim not launched yet is not counted; a claim of a
    /// pool with no catalog is an error, counted once.
    #[test]
    fn each_pool_costs_what_its_launched_claims_run_on() {
        let cloud = CloudMetrics::register(&mut Registry::default(), |_, _| {});
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
        ] {
            snapshot.apply(
                name.to_string(),
                Arc::new(claim(name, pool, "m5.large", "us-west-2a", ct)),
            );
        }
        let mut pending = claim("e", "general", "", "", "");
        pending
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .retain(|k, _| k == "karpenter.sh/nodepool");
        snapshot.apply("e".to_string(), Arc::new(pending));

        let state = StateGauges::default();
        state.observe(snapshot, jiff::Timestamp::UNIX_EPOCH);
        let cost = NodePoolCost::new(state, cloud);
        let mut registry = Registry::default();
        registry.register_collector(Box::new(cost.clone()));
        for _ in 0..2 {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with("karpenter_nodepools_cost"))
                .collect();
            assert_eq!(
                lines,
                [
                    "karpenter_nodepools_cost_total{nodepool=\"general\"} 0.625",
                    "karpenter_nodepools_cost_total{nodepool=\"idle\"} 0.0",
                    "karpenter_nodepools_cost_total{nodepool=\"unlisted\"} 0.0",
                    "karpenter_nodepools_cost_tracker_errors_total{nodepool=\"unlisted\"} 1",
                ]
            );
        }
    }
}
