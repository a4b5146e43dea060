//! Prices for consolidation: what a running node costs (its instance type's offering in its
//! zone and capacity type), what a replacement would cost (its cheapest allowed offering), and
//! narrowing a replacement to the instance types cheaper than a bound while its requirements'
//! minValues still hold.

use driftwood_api::wellknown::{LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_TOPOLOGY_ZONE};
use driftwood_scheduling::{ExistingNode, InstanceType, NewNodeClaim, NodePoolSpec, Requirements};
use std::collections::BTreeSet;

/// A running node's price and the labels it was read from.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePrice {
    pub instance_type: String,
    pub capacity_type: String,
    pub zone: String,
    /// Hourly price of its offering; 0 when the offering is not listed (Karpenter's fallback).
    pub price: f64,
}

/// The price of `node` of NodePool `pool`, or why it cannot be priced (the Unconsolidatable
/// message Karpenter gives).
pub fn node_price(pool: Option<&NodePoolSpec>, node: &ExistingNode) -> Result<NodePrice, String> {
    let instance_type = node
        .labels
        .get(LABEL_INSTANCE_TYPE)
        .cloned()
        .unwrap_or_default();
    let Some(it) = pool.and_then(|p| p.instance_types.iter().find(|t| t.name == instance_type))
    else {
        return Err(format!("Instance Type {instance_type:?} not found"));
    };
    let Some(capacity_type) = node.labels.get(LABEL_CAPACITY_TYPE) else {
        return Err(format!("Node does not have label {LABEL_CAPACITY_TYPE:?}"));
    };
    let Some(zone) = node.labels.get(LABEL_TOPOLOGY_ZONE) else {
        return Err(format!("Node does not have label {LABEL_TOPOLOGY_ZONE:?}"));
    };
    let price = it
        .offerings
        .iter()
        .find(|o| &o.zone == zone && &o.capacity_type == capacity_type)
        .map_or(0.0, |o| o.price);
    Ok(NodePrice {
        instance_type,
        capacity_type: capacity_type.clone(),
        zone: zone.clone(),
        price: if price.is_nan() { 0.0 } else { price },
    })
}

/// The cheapest price among the offerings of `it` compatible with `labels`-like requirements,
/// available or not (what the node's own type costs where it runs).
pub fn cheapest_compatible(it: &InstanceType, requirements: &Requirements) -> Option<f64> {
    it.offerings
        .iter()
        .filter(|o| InstanceType::offering_allowed(o, requirements))
        .map(|o| o.price)
        .min_by(f64::total_cmp)
}

/// The instance types of `claim`, resolved in its NodePool, with the price of each (its cheapest
/// available offering the claim's requirements allow), cheapest first. Types without such an
/// offering are left out.
pub fn priced_options<'a>(
    claim: &NewNodeClaim,
    pool: &'a NodePoolSpec,
) -> Vec<(&'a InstanceType, f64)> {
    let mut options: Vec<(&InstanceType, f64)> = claim
        .instance_types
        .iter()
        .filter_map(|name| pool.instance_types.iter().find(|t| &t.name == name))
        .filter_map(|t| {
            t.cheapest_offering(&claim.requirements)
                .map(|o| (t, o.price))
        })
        .collect();
    options.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.name.cmp(&b.0.name)));
    options
}

/// The cheapest price `claim` could launch at, if any of its types can launch.
pub fn launch_price(claim: &NewNodeClaim, pool: &NodePoolSpec) -> Option<f64> {
    priced_options(claim, pool).first().map(|(_, p)| *p)
}

/// Keeps, cheapest first, only the instance types of `claim` whose price is below `max_price`;
/// an error when what is left no longer spans a requirement's minValues.
pub fn keep_cheaper_than(
    claim: &mut NewNodeClaim,
    pool: &NodePoolSpec,
    max_price: f64,
) -> Result<(), String> {
    let kept: Vec<&InstanceType> = priced_options(claim, pool)
        .into_iter()
        .filter(|(_, price)| *price < max_price)
        .map(|(t, _)| t)
        .collect();
    if let Some((key, have, need)) = min_values_shortfall(&kept, &claim.requirements) {
        return Err(format!(
            "minValues requirement is not met for label {key:?}: {have} value(s) after filtering by price, {need} required"
        ));
    }
    claim.instance_types = kept.iter().map(|t| t.name.clone()).collect();
    Ok(())
}

/// The first requirement with minValues that `types` do not span, as (key, have, need).
pub fn min_values_shortfall(
    types: &[&InstanceType],
    requirements: &Requirements,
) -> Option<(String, usize, usize)> {
    requirements.iter().find_map(|(key, r)| {
        let need = r.min_values()?;
        let have: BTreeSet<&str> = types
            .iter()
            .filter_map(|t| {
                if key == LABEL_INSTANCE_TYPE {
                    Some(t.name.as_str())
                } else {
                    t.requirements.get(key).and_then(|v| v.single_value())
                }
            })
            .filter(|v| r.has(v))
            .collect();
        (have.len() < need).then(|| (key.to_string(), have.len(), need))
    })
}

/// How many instance types a requirement's minValues need at least, taking `types` in order
/// (cheapest first): the shortest prefix that spans every minValues.
pub fn min_types_for_min_values(types: &[&InstanceType], requirements: &Requirements) -> usize {
    (0..=types.len())
        .find(|&n| min_values_shortfall(&types[..n], requirements).is_none())
        .unwrap_or(types.len())
}
