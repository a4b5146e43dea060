//! Each NodePool's usage — what its NodeClaims not being deleted hold (their capacity, else
//! their requests, and one node each) — kept as running totals updated per NodeClaim event, so
//! reading it is a lookup instead of parsing every NodeClaim's quantities.

use driftwood_api::NodeClaim;
use driftwood_scheduling::{NODES, Resources};
use std::collections::BTreeMap;

/// One NodePool's usage.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolUsage {
    total: Resources,
    /// How many NodeClaims hold each resource name (a name none holds is not listed, as a sum
    /// over the NodeClaims would not list it).
    holders: BTreeMap<String, u32>,
    claims: u32,
}

impl PoolUsage {
    /// Counts a NodeClaim's `usage` in (`present`) or out.
    pub fn count(&mut self, usage: &Resources, present: bool) {
        let total = if present {
            self.claims += 1;
            self.total.add(usage)
        } else {
            self.claims = self.claims.saturating_sub(1);
            self.total.sub(usage)
        };
        self.total = total;
        for name in usage.0.keys() {
            let holders = self.holders.entry(name.clone()).or_insert(0);
            if present {
                *holders += 1;
            } else {
                *holders = holders.saturating_sub(1);
            }
            if *holders == 0 {
                self.holders.remove(name);
                self.total.0.remove(name);
            }
        }
    }

    /// The sum of the NodeClaims' usage.
    pub fn usage(&self) -> &Resources {
        &self.total
    }

    /// How many NodeClaims are counted.
    pub fn claims(&self) -> u32 {
        self.claims
    }

    /// Nothing counted.
    pub fn is_empty(&self) -> bool {
        self.claims == 0
    }
}

/// What one NodeClaim holds of its NodePool: its capacity once known, else its requests, and
/// one node (against `limits.nodes`).
pub fn claim_usage(claim: &NodeClaim) -> Resources {
    let capacity = claim
        .status
        .as_ref()
        .filter(|s| !s.capacity.is_empty())
        .map(|s| &s.capacity);
    let requests = claim.spec.resources.as_ref().map(|r| &r.requests);
    let mut usage = capacity
        .or(requests)
        .and_then(|q| Resources::from_quantities(q).ok())
        .unwrap_or_default();
    usage.add_one(NODES, 1000);
    usage
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Snapshot, Store};
    use serde_json::json;
    use std::sync::Arc;

    fn claim(
        name: &str,
        pool: &str,
        capacity: serde_json::Value,
        deleting: bool,
    ) -> Arc<NodeClaim> {
        let mut meta = json!({"name": name, "labels": {"karpenter.sh/nodepool": pool}});
        if deleting {
            meta["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        }
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": meta,
                "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": [],
                         "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                "status": {"capacity": capacity}
            }))
            .expect("nodeclaim"),
        )
    }

    /// The usage as a sum over the pool's NodeClaims not being deleted, worked out afresh.
    fn summed(snapshot: &Snapshot, pool: &str) -> (Resources, u32) {
        let mut total = Resources::new();
        let mut claims = 0;
        for claim in snapshot.store.nodeclaims.values() {
            let in_pool = claim
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("karpenter.sh/nodepool"))
                .is_some_and(|p| p == pool);
            if in_pool && claim.metadata.deletion_timestamp.is_none() {
                total = total.add(&claim_usage(claim));
                claims += 1;
            }
        }
        (total, claims)
    }

    /// Generated sequences of NodeClaims created, given capacity (with GPUs, or an explicit
    /// zero), moved between pools, deleted and removed: after each event the running totals
    /// equal the sum worked out afresh, names no NodeClaim holds included.
    #[test]
    fn running_totals_match_summing_every_nodeclaim() {
        let capacities = [
            json!({}),
            json!({"cpu": "8", "memory": "32Gi", "pods": "58"}),
            json!({"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}),
            json!({"cpu": "2", "memory": "8Gi", "hugepages-2Mi": "0"}),
        ];
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut snapshot = Snapshot::new(Store::default());
        for step in 0..2_000 {
            let name = format!("c{}", next(20));
            if next(5) == 0 {
                snapshot.delete::<NodeClaim>(&name);
            } else {
                let pool = if next(2) == 0 { "a" } else { "b" };
                let capacity = capacities[next(4) as usize].clone();
                snapshot.apply(name.clone(), claim(&name, pool, capacity, next(6) == 0));
            }
            for pool in ["a", "b"] {
                let kept = snapshot
                    .nodepool_usage
                    .get(pool)
                    .map(|u| (u.usage().clone(), u.claims()))
                    .unwrap_or_default();
                assert_eq!(kept, summed(&snapshot, pool), "step {step}, pool {pool}");
            }
        }
    }
}
