//! One consolidation option, as Karpenter computes it: remove the candidates in a simulation;
//! every pod must land; no new node means delete; exactly one new node means replace, if one
//! of its instance types is cheaper than the candidates together (spot to spot only behind its
//! gate, with at least 15 cheaper types for a single node, launched from the 15 cheapest).

use super::candidates::Candidate;
use super::price::{keep_cheaper_than, launch_price, min_types_for_min_values, priced_options};
use crate::world::Simulations;
use driftwood_api::wellknown::{CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, LABEL_CAPACITY_TYPE};
use driftwood_scheduling::{NewNodeClaim, Requirement};

/// Karpenter's minimum of cheaper instance types for a single-node spot-to-spot replacement,
/// and how many of the cheapest it launches from.
pub const MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT: usize = 15;

/// A consolidation that works: delete the candidates, or replace them with one cheaper node.
#[derive(Debug, Clone, PartialEq)]
pub struct Computed {
    pub replacement: Option<NewNodeClaim>,
    /// The candidates' price together.
    pub source_price: f64,
    /// The cheapest price the replacement could launch at (0 for a delete).
    pub replacement_price: f64,
}

impl Computed {
    pub fn savings(&self) -> f64 {
        self.source_price - self.replacement_price
    }
}

/// Consolidates `candidates` together, or says why not (the Unconsolidatable message).
pub fn compute(
    sims: &mut Simulations<'_>,
    candidates: &[&Candidate<'_>],
    spot_to_spot: bool,
) -> Result<Computed, String> {
    let positions: Vec<usize> = candidates.iter().map(|c| c.position).collect();
    let result = sims
        .simulate_removal(&positions)
        .map_err(|b| b.to_string())?;
    if !result.unschedulable.is_empty() {
        let pods: Vec<String> = result
            .unschedulable
            .iter()
            .map(|u| format!("{} => {}", u.pod, u.reason))
            .collect();
        return Err(format!("not all pods would schedule, {}", pods.join("; ")));
    }
    let source_price: f64 = candidates.iter().map(|c| c.price.price).sum();
    let mut claims = result.new_nodeclaims;
    if claims.is_empty() {
        return Ok(Computed {
            replacement: None,
            source_price,
            replacement_price: 0.0,
        });
    }
    if claims.len() != 1 {
        return Err(format!(
            "Can't remove without creating {} candidates",
            claims.len()
        ));
    }
    let mut claim = claims.remove(0);
    let Some(pool) = sims
        .world()
        .nodepools
        .iter()
        .find(|p| p.name == claim.nodepool)
    else {
        return Err(format!("NodePool {:?} not found", claim.nodepool));
    };
    let allows = |claim: &NewNodeClaim, ct: &str| {
        claim
            .requirements
            .get(LABEL_CAPACITY_TYPE)
            .is_none_or(|r| r.has(ct))
    };
    let all_spot = candidates
        .iter()
        .all(|c| c.price.capacity_type == CAPACITY_TYPE_SPOT);
    if all_spot && allows(&claim, CAPACITY_TYPE_SPOT) {
        if !spot_to_spot {
            return Err(
                "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
                    .into(),
            );
        }
        narrow_to_spot(&mut claim);
        keep_cheaper_than(&mut claim, pool, source_price)
            .map_err(|e| format!("Filtering by price: {e}"))?;
        if claim.instance_types.is_empty() {
            return Err("Can't replace with a cheaper node".into());
        }
        if candidates.len() == 1 {
            let options = priced_options(&claim, pool);
            if options.len() < MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT {
                return Err(format!(
                    "SpotToSpotConsolidation requires {MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT} cheaper instance type options than the current candidate to consolidate, got {}",
                    options.len()
                ));
            }
            // Launch from the cheapest few only, so the instance launched is always among
            // them and is not itself consolidated again at once.
            let types: Vec<_> = options.iter().map(|(t, _)| *t).collect();
            let keep = MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT
                .max(min_types_for_min_values(&types, &claim.requirements));
            claim.instance_types = types.iter().take(keep).map(|t| t.name.clone()).collect();
        }
    } else {
        keep_cheaper_than(&mut claim, pool, source_price)
            .map_err(|e| format!("Filtering by price: {e}"))?;
        if claim.instance_types.is_empty() {
            return Err("Can't replace with a cheaper node".into());
        }
        // Filtered on the assumption the cheaper spot offering launches: if spot is short,
        // the launch must fail rather than bring up a dearer on-demand node.
        if allows(&claim, CAPACITY_TYPE_SPOT) && allows(&claim, CAPACITY_TYPE_ON_DEMAND) {
            narrow_to_spot(&mut claim);
        }
    }
    let replacement_price = launch_price(&claim, pool).unwrap_or(0.0);
    Ok(Computed {
        replacement: Some(claim),
        source_price,
        replacement_price,
    })
}

/// Requires spot capacity of `claim` (added to what it already requires).
fn narrow_to_spot(claim: &mut NewNodeClaim) {
    claim.requirements.add(
        LABEL_CAPACITY_TYPE,
        Requirement::is_in([CAPACITY_TYPE_SPOT]),
    );
}
