//! Topology constraints on custom label keys for one pod: which domains its spread, affinity
//! and anti-affinity allow, and which domain a NodeClaim whose domain is open is narrowed to
//! (the allowed domain holding the fewest of the pod's group members, as Karpenter picks).

use crate::requirements::{Requirement, Requirements};

use super::profiles::{LabelNeed, Profile, TopoKey};
use super::zones::{ZoneMask, bit};
use super::{Engine, Why};

impl Engine<'_> {
    /// Domains of `need`'s key among `candidates` the profile's constraints allow.
    fn label_filter(
        &self,
        prof: &Profile,
        class: u32,
        need: &LabelNeed,
        candidates: ZoneMask,
    ) -> ZoneMask {
        self.domain_filter(
            prof,
            class,
            TopoKey::Label(need.key),
            need.allowed,
            candidates,
        )
    }

    /// Whether an existing node's labels satisfy the profile's constraints on custom keys.
    pub(super) fn check_node_labels(
        &self,
        b: usize,
        prof: &Profile,
        class: u32,
    ) -> Result<(), Why> {
        let bin = &self.bins[b];
        for need in &prof.labels {
            let Some(d) = bin.label_domain(need.key) else {
                return Err(Why::NoLabel(need.key));
            };
            if self.label_filter(prof, class, need, bit(d)) == 0 {
                return Err(Why::Domain(need.key));
            }
        }
        Ok(())
    }

    /// Decides the custom-key domains the profile needs on a new node whose requirements are
    /// `base`: keys `decided` already knows must have an allowed domain; each other key is
    /// narrowed to the allowed domain with the fewest members for which `launchable` still
    /// holds. Returns the narrowing (`key In [domain]` per key decided here).
    pub(super) fn decide_labels(
        &self,
        prof: &Profile,
        class: u32,
        decided: impl Fn(u32) -> Option<usize>,
        base: &Requirements,
        launchable: impl Fn(&Requirements) -> bool,
    ) -> Result<Requirements, Why> {
        let mut extra = Requirements::new();
        for need in &prof.labels {
            if let Some(d) = decided(need.key) {
                if self.label_filter(prof, class, need, bit(d)) == 0 {
                    return Err(Why::Domain(need.key));
                }
                continue;
            }
            let candidates = self.labels.admitted(need.key, base, true) & need.allowed;
            let allowed = self.label_filter(prof, class, need, candidates);
            let key = self.labels.name(need.key);
            let mut chosen = None;
            for d in self.rank_domains(prof, class, TopoKey::Label(need.key), allowed) {
                let Some(value) = self.labels.get(need.key).map(|k| k.table.name(d)) else {
                    continue;
                };
                let mut trial = base.intersection(&extra);
                trial.add(key, Requirement::is_in([value.to_string()]));
                if launchable(&trial) {
                    chosen = Some(value.to_string());
                    break;
                }
            }
            match chosen {
                Some(value) => extra.add(key, Requirement::is_in([value])),
                None => return Err(Why::Domain(need.key)),
            }
        }
        Ok(extra)
    }
}
