//! A pending pod's effective zone as Karpenter's scheduler computes it at the start of a
//! simulation (`computeEffectiveZoneFromPod`), what
//! `karpenter_scheduler_pending_pods_by_effective_zone_count` counts: the one zone left by the
//! pod's strict zone requirement (node selector and first required node affinity term, no
//! preferences) and by its own zonal topology constraints (spread, pod affinity and
//! anti-affinity, each as it stands with the pods already counted); `flexible` when several
//! are left or nothing narrows the zone; `none` when no zone is left. Volume zones are not
//! part of it: the engine does not model volume topology.

use std::collections::{BTreeMap, HashMap};

use driftwood_api::wellknown::LABEL_TOPOLOGY_ZONE;

use crate::pod::SimPod;

use super::profiles::TopoKey;
use super::zones::{ZoneMask, indices};
use super::{Engine, pod_node_requirements};

/// The effective zone of a pod whose zone is not narrowed to one.
pub const FLEXIBLE_ZONE: &str = "flexible";
/// The effective zone of a pod no zone is left for.
pub const NO_ZONE: &str = "none";

impl Engine<'_> {
    /// The pending pods given to place (not the moving ones, nor those of nodes going away:
    /// Karpenter counts pods in phase Pending only), counted by effective zone, with the
    /// topology as it stands before any pod is placed.
    pub(super) fn pending_by_effective_zone(&self) -> BTreeMap<String, u32> {
        let pods = &self.input.pods;
        let pending = pods[self.input.moving_pods.min(pods.len())..].as_ptr_range();
        let mut of_class: HashMap<u32, String> = HashMap::new();
        let mut counts: BTreeMap<String, u32> = BTreeMap::new();
        for queued in &self.queue {
            if !pending.contains(&std::ptr::from_ref(queued.pod)) {
                continue;
            }
            let zone = of_class
                .entry(queued.class)
                .or_insert_with(|| self.effective_zone(queued.class, queued.pod));
            *counts.entry(zone.clone()).or_default() += 1;
        }
        counts
    }

    /// The effective zone of a pod of `class` (`pod` one of them).
    fn effective_zone(&self, class: u32, pod: &SimPod) -> String {
        let strict = pod_node_requirements(pod);
        let zone_req = strict.get(LABEL_TOPOLOGY_ZONE);
        // The pod's own zonal terms under its strictest profile, each term's valid zones
        // intersected (Karpenter's GetTopologyZoneConstraints); a term that leaves none leaves
        // the pod no zone. A spread is checked in every zone, its minimum taken over the zones
        // the pod's requirements allow; affinity and anti-affinity within those zones.
        let mut valid: Option<ZoneMask> = None;
        if let Some(pid) = self.catalog.classes[class as usize].profiles.first() {
            let prof = &self.catalog.profiles[*pid as usize];
            let eligible = prof.zone_allowed & self.zone_universe;
            let zonal = |key: &TopoKey| *key == TopoKey::Zone;
            let terms = prof
                .spreads
                .iter()
                .filter(|s| zonal(&s.key))
                .map(|s| self.spread_allows(s, eligible, self.zone_universe))
                .chain(
                    prof.affinity
                        .iter()
                        .filter(|t| zonal(&t.key))
                        .map(|t| self.affinity_allows(t, eligible)),
                )
                .chain(
                    prof.anti
                        .iter()
                        .filter(|t| zonal(&t.key))
                        .map(|t| self.anti_allows(t, eligible)),
                );
            for zones in terms {
                if zones == 0 {
                    return NO_ZONE.to_string();
                }
                valid = Some(valid.map_or(zones, |v| v & zones));
            }
        }
        let valid: Vec<&str> = valid
            .map(|mask| indices(mask).map(|z| self.zones.name(z)).collect())
            .unwrap_or_default();
        // The zones to choose from: the requirement's when it lists them (an `In`), else the
        // topology's, else the pod may go to any zone.
        let required: Vec<&str>;
        let listed: &[&str] = match zone_req
            .and_then(|r| r.finite_values())
            .filter(|values| !values.is_empty())
        {
            Some(values) => {
                required = values.iter().map(String::as_str).collect();
                &required
            }
            None if !valid.is_empty() => &valid,
            None => return FLEXIBLE_ZONE.to_string(),
        };
        let mut left = listed.iter().filter(|zone| {
            zone_req.is_none_or(|r| r.has(zone)) && (valid.is_empty() || valid.contains(zone))
        });
        match (left.next(), left.next()) {
            (Some(zone), None) => zone.to_string(),
            (Some(_), Some(_)) => FLEXIBLE_ZONE.to_string(),
            (None, _) => NO_ZONE.to_string(),
        }
    }
}
