//! Whether a pod (under one profile) fits a bin or a fresh NodeClaim of a NodePool: taints,
//! node requirements, host ports, topology (spread, affinity, anti-affinity) and resources.

use driftwood_api::wellknown::LABEL_TOPOLOGY_ZONE;

use crate::requirements::{Requirement, Requirements};
use crate::taints::first_untolerated;

use super::dense::{fits, fits_on};
use super::profiles::{Profile, SpreadUse, TermUse, TopoKey};
use super::state::{BinKind, Claim, PoolType, min_values_shortfall};
use super::zones::{ZoneMask, bit, indices};
use super::{Engine, Plan, Why};

impl Engine<'_> {
    /// Checks bin `b` for queue entry `qi` under profile `pid`.
    pub(super) fn check_bin(&self, b: usize, qi: usize, pid: u32) -> Result<Plan, Why> {
        let bin = &self.bins[b];
        if bin.closed {
            return Err(Why::Closed);
        }
        let q = &self.queue[qi];
        let prof = &self.catalog.profiles[pid as usize];
        let class = &self.catalog.classes[q.class as usize];
        if let Some(t) = first_untolerated(&bin.taints, &prof.tolerations) {
            let idx = bin.taints.iter().position(|x| x == t).unwrap_or(0);
            return Err(Why::Taint(idx));
        }
        if q.pod
            .constraints
            .host_ports
            .iter()
            .any(|p| bin.ports.iter().any(|o| o.conflicts(p)))
        {
            return Err(Why::Ports);
        }
        // Hostname topology: the bin is its own domain; new nodes are always possible, so the
        // minimum count is zero.
        for s in prof.spreads.iter().filter(|s| s.key == TopoKey::Hostname) {
            let (matched, _) = bin.topo_counts(s.group);
            if i64::from(matched) + i64::from(s.self_match) > s.max_skew {
                return Err(Why::HostnameSpread(s.group));
            }
        }
        for t in prof.anti.iter().filter(|t| t.key == TopoKey::Hostname) {
            if bin.topo_counts(t.group).0 > 0 {
                return Err(Why::HostnameAnti(t.group));
            }
        }
        for g in &class.matched_by_anti {
            if self.catalog.groups[*g as usize].key.key == TopoKey::Hostname
                && bin.topo_counts(*g).1 > 0
            {
                return Err(Why::AntiOwnerHere(*g));
            }
        }
        for t in prof.affinity.iter().filter(|t| t.key == TopoKey::Hostname) {
            if bin.topo_counts(t.group).0 == 0 {
                let anywhere = self.catalog.groups[t.group as usize].total_matched > 0;
                if anywhere || !t.self_match {
                    return Err(Why::HostnameAffinity(t.group));
                }
            }
        }
        match &bin.kind {
            BinKind::Existing(ni) => {
                let node = &self.input.existing_nodes[*ni];
                if !prof.reqs.matches_labels(&node.labels) {
                    return Err(Why::Requirements);
                }
                let mut plan = Plan::default();
                if prof.zone_constrained {
                    let Some(z) = bin.zone else {
                        return Err(Why::NoZoneLabel);
                    };
                    if self.zone_filter(prof, q.class, bit(z)) == 0 {
                        return Err(Why::Zone);
                    }
                }
                if !prof.labels.is_empty() {
                    self.check_node_labels(b, prof, q.class)?;
                }
                if !fits_on(&bin.used, &q.req, &bin.alloc) {
                    return Err(Why::Resources);
                }
                plan.zone = None;
                Ok(plan)
            }
            BinKind::Claim(claim) => {
                if claim.reqs.compatible_for_scheduling(&prof.reqs).is_err() {
                    return Err(Why::Requirements);
                }
                if !fits_on(&bin.used, &q.req, &claim.max_alloc) {
                    return Err(Why::Resources);
                }
                let narrows = !prof.reqs.is_empty() && !prof.reqs.is_implied_by(&claim.reqs);
                let mut new_reqs = if narrows {
                    Some(claim.reqs.intersection(&prof.reqs))
                } else {
                    None
                };
                if !prof.labels.is_empty() {
                    let base = new_reqs.as_ref().unwrap_or(&claim.reqs);
                    let extra = self.decide_labels(
                        prof,
                        q.class,
                        |k| bin.label_domain(k),
                        base,
                        |r| {
                            self.claim_types_fit(claim, Some(r), None, &bin.used, &q.req)
                                .is_ok()
                        },
                    )?;
                    if !extra.is_empty() {
                        new_reqs = Some(base.intersection(&extra));
                    }
                }
                let zone_choices: Vec<Option<usize>> = if prof.needs_zone && bin.zone.is_none() {
                    let allowed =
                        self.zone_filter(prof, q.class, claim.zone_mask & prof.zone_allowed);
                    if allowed == 0 {
                        return Err(Why::Zone);
                    }
                    self.rank_zones(prof, q.class, allowed)
                        .into_iter()
                        .map(Some)
                        .collect()
                } else {
                    if prof.needs_zone
                        && let Some(z) = bin.zone
                        && self.zone_filter(prof, q.class, bit(z)) == 0
                    {
                        return Err(Why::Zone);
                    }
                    vec![None]
                };
                let mut last = Why::NoFittingType;
                for zone in zone_choices {
                    match self.claim_types_fit(claim, new_reqs.as_ref(), zone, &bin.used, &q.req) {
                        Ok(()) => {
                            return Ok(Plan {
                                zone,
                                new_reqs: new_reqs.clone(),
                            });
                        }
                        Err(why) => last = if zone.is_some() { Why::Zone } else { why },
                    }
                }
                Err(last)
            }
        }
    }

    /// Whether some type of the claim still fits everything plus `req` under the narrowed
    /// requirements and zone.
    fn claim_types_fit(
        &self,
        claim: &Claim,
        new_reqs: Option<&Requirements>,
        zone: Option<usize>,
        used: &[i64],
        req: &[i64],
    ) -> Result<(), Why> {
        let pool = &self.pools[claim.pool];
        let zone_reqs;
        let reqs: Option<&Requirements> = match zone {
            Some(z) => {
                let mut r = new_reqs.unwrap_or(&claim.reqs).clone();
                r.add(
                    LABEL_TOPOLOGY_ZONE,
                    Requirement::is_in([self.zones.name(z).to_string()]),
                );
                zone_reqs = r;
                Some(&zone_reqs)
            }
            None => new_reqs,
        };
        let ok = |t: &&u32| {
            let pt = &pool.types[**t as usize];
            fits_on(used, req, &pt.alloc) && reqs.is_none_or(|r| pt.compatible(r, zone))
        };
        let check_min_values =
            reqs.is_some_and(|r| r.iter().any(|(_, x)| x.min_values().is_some()));
        if check_min_values {
            let r = reqs.unwrap_or(&claim.reqs);
            let kept: Vec<&PoolType> = claim
                .types
                .iter()
                .filter(ok)
                .map(|t| &pool.types[*t as usize])
                .collect();
            if kept.is_empty() {
                return Err(Why::NoFittingType);
            }
            if let Some((key, have, need)) = min_values_shortfall(kept.iter().copied(), r) {
                return Err(Why::MinValues(key, have, need));
            }
            return Ok(());
        }
        if claim.types.iter().any(|t| ok(&t)) {
            Ok(())
        } else {
            Err(Why::NoFittingType)
        }
    }

    /// Zones of `candidates` where the profile's zonal topology constraints allow the pod.
    pub(super) fn zone_filter(&self, prof: &Profile, class: u32, candidates: ZoneMask) -> ZoneMask {
        let eligible = prof.zone_allowed & self.zone_universe;
        self.domain_filter(prof, class, TopoKey::Zone, eligible, candidates)
    }

    /// Domains of `key` among `candidates` where the profile's topology constraints on `key`
    /// allow the pod; `eligible` are the domains the pod's node requirements admit (those a
    /// spread's minimum is taken over).
    pub(super) fn domain_filter(
        &self,
        prof: &Profile,
        class: u32,
        key: TopoKey,
        eligible: ZoneMask,
        candidates: ZoneMask,
    ) -> ZoneMask {
        let mut allowed = candidates;
        for s in prof.spreads.iter().filter(|s| s.key == key) {
            allowed = self.spread_allows(s, eligible, allowed);
        }
        for t in prof.affinity.iter().filter(|t| t.key == key) {
            allowed = self.affinity_allows(t, allowed);
        }
        for t in prof.anti.iter().filter(|t| t.key == key) {
            allowed = self.anti_allows(t, allowed);
        }
        for gid in &self.catalog.classes[class as usize].matched_by_anti {
            let g = &self.catalog.groups[*gid as usize];
            if g.key.key != key {
                continue;
            }
            for z in indices(allowed) {
                if g.domain_owners.get(z).copied().unwrap_or(0) > 0 {
                    allowed &= !bit(z);
                }
            }
        }
        allowed
    }

    /// The domains of `candidates` a spread leaves the pod: those where its group's count (with
    /// the pod, when it matches its own selector) stays within the skew of the least count over
    /// `eligible` (0 when fewer than its minimum domains are eligible).
    pub(super) fn spread_allows(
        &self,
        s: &SpreadUse,
        eligible: ZoneMask,
        candidates: ZoneMask,
    ) -> ZoneMask {
        let g = &self.catalog.groups[s.group as usize];
        let count = |z: usize| i64::from(g.domain_matched.get(z).copied().unwrap_or(0));
        let mut min = i64::MAX;
        let mut domains = 0;
        for z in indices(eligible) {
            domains += 1;
            min = min.min(count(z));
        }
        if domains == 0 || domains < s.min_domains {
            min = 0;
        }
        let add = i64::from(s.self_match);
        let mut allowed = candidates;
        for z in indices(candidates) {
            if count(z) + add - min > s.max_skew {
                allowed &= !bit(z);
            }
        }
        allowed
    }

    /// The domains of `candidates` a required pod affinity term leaves the pod: those holding a
    /// matching pod; when no pod with a known domain matches, every one if the pod is the first
    /// of a group selecting itself (no matching pod anywhere), else none. This is
    /// kube-scheduler's rule, which binds the pods: Karpenter's simulation also lets a pod start
    /// its group again where every matching pod is in a domain the pod cannot use, which
    /// kube-scheduler refuses (the node launched for it would stay empty).
    pub(super) fn affinity_allows(&self, t: &TermUse, candidates: ZoneMask) -> ZoneMask {
        let g = &self.catalog.groups[t.group as usize];
        let zonal_total: u64 = g.domain_matched.iter().map(|c| u64::from(*c)).sum();
        if zonal_total > 0 {
            let mut allowed = candidates;
            for z in indices(candidates) {
                if g.domain_matched.get(z).copied().unwrap_or(0) == 0 {
                    allowed &= !bit(z);
                }
            }
            allowed
        } else if g.total_matched > 0 || !t.self_match {
            0
        } else {
            candidates
        }
    }

    /// The domains of `candidates` a required anti-affinity term leaves the pod: those holding
    /// no matching pod.
    pub(super) fn anti_allows(&self, t: &TermUse, candidates: ZoneMask) -> ZoneMask {
        let g = &self.catalog.groups[t.group as usize];
        let mut allowed = candidates;
        for z in indices(candidates) {
            if g.domain_matched.get(z).copied().unwrap_or(0) > 0 {
                allowed &= !bit(z);
            }
        }
        allowed
    }

    /// Allowed zones ordered by how few pods of the pod's zonal spread groups they hold.
    fn rank_zones(&self, prof: &Profile, class: u32, allowed: ZoneMask) -> Vec<usize> {
        self.rank_domains(prof, class, TopoKey::Zone, allowed)
    }

    /// Allowed domains of `key` ordered by how few pods of the pod's spread groups on `key`,
    /// and of the groups of `key` it counts in, they hold (then by index).
    pub(super) fn rank_domains(
        &self,
        prof: &Profile,
        class: u32,
        key: TopoKey,
        allowed: ZoneMask,
    ) -> Vec<usize> {
        let groups: Vec<u32> = prof
            .spreads
            .iter()
            .filter(|s| s.key == key)
            .map(|s| s.group)
            .chain(
                self.catalog.classes[class as usize]
                    .member_of
                    .iter()
                    .copied()
                    .filter(|g| self.catalog.groups[*g as usize].key.key == key),
            )
            .collect();
        let mut zones: Vec<(u64, usize)> = indices(allowed)
            .map(|z| {
                let score = groups
                    .iter()
                    .map(|g| {
                        u64::from(
                            self.catalog.groups[*g as usize]
                                .domain_matched
                                .get(z)
                                .copied()
                                .unwrap_or(0),
                        )
                    })
                    .sum();
                (score, z)
            })
            .collect();
        zones.sort_unstable();
        zones.into_iter().map(|(_, z)| z).collect()
    }

    /// The static part of opening a claim in `pool` for profile `pid`: the requirements and the
    /// compatible types.
    pub(super) fn pool_static(
        &self,
        pool: usize,
        pid: u32,
    ) -> Result<(Requirements, Vec<u32>), Why> {
        let p = &self.pools[pool];
        let prof = &self.catalog.profiles[pid as usize];
        if let Some(t) = first_untolerated(&p.taints, &prof.tolerations) {
            return Err(Why::Taint(
                p.taints.iter().position(|x| x == t).unwrap_or(0),
            ));
        }
        if p.reqs.compatible_for_scheduling(&prof.reqs).is_err() {
            return Err(Why::Requirements);
        }
        let reqs = p.reqs.intersection(&prof.reqs);
        let types: Vec<u32> = p
            .types
            .iter()
            .enumerate()
            .filter(|(_, t)| t.compatible(&reqs, None))
            .map(|(i, _)| i as u32)
            .collect();
        if types.is_empty() {
            return Err(Why::NoCompatibleType);
        }
        Ok((reqs, types))
    }

    /// Whether a fresh NodeClaim of `pool` can host queue entry `qi` under profile `pid`.
    pub(super) fn check_pool(
        &self,
        pool: usize,
        qi: usize,
        pid: u32,
        statics: &super::PoolStatics,
    ) -> Result<(Claim, Option<usize>), Why> {
        let (reqs, types) = statics.as_ref().map_err(Clone::clone)?;
        let p = &self.pools[pool];
        let q = &self.queue[qi];
        let prof = &self.catalog.profiles[pid as usize];
        if q.pod
            .constraints
            .host_ports
            .iter()
            .any(|hp| p.daemon_ports.iter().any(|o| o.conflicts(hp)))
        {
            return Err(Why::Ports);
        }
        for t in prof.affinity.iter().filter(|t| t.key == TopoKey::Hostname) {
            if self.catalog.groups[t.group as usize].total_matched > 0 || !t.self_match {
                return Err(Why::NoAffinityTarget(t.group));
            }
        }
        let narrowed;
        let (reqs, types): (&Requirements, &[u32]) = if prof.labels.is_empty() {
            (reqs, types)
        } else {
            let extra = self.decide_labels(
                prof,
                q.class,
                |_| None,
                reqs,
                |r| {
                    types.iter().any(|t| {
                        let pt = &p.types[*t as usize];
                        fits(&q.req, &pt.alloc) && pt.compatible(r, None)
                    })
                },
            )?;
            if extra.is_empty() {
                (reqs, types)
            } else {
                let r = reqs.intersection(&extra);
                let kept: Vec<u32> = types
                    .iter()
                    .copied()
                    .filter(|t| p.types[*t as usize].compatible(&r, None))
                    .collect();
                narrowed = (r, kept);
                (&narrowed.0, &narrowed.1)
            }
        };
        let zone_choices: Vec<Option<usize>> = if prof.needs_zone {
            let mut offered = 0;
            let offering_reqs = super::state::OfferingZones::of(reqs, &self.zones);
            for t in types {
                offered |= p.types[*t as usize].zone_mask_of(offering_reqs);
            }
            let allowed = self.zone_filter(prof, q.class, offered & prof.zone_allowed);
            if allowed == 0 {
                let zonal_affinity = prof.affinity.iter().find(|t| t.key == TopoKey::Zone);
                return Err(match zonal_affinity {
                    Some(t) if offered != 0 => Why::NoAffinityTarget(t.group),
                    _ => Why::Zone,
                });
            }
            self.rank_zones(prof, q.class, allowed)
                .into_iter()
                .map(Some)
                .collect()
        } else {
            vec![None]
        };
        let mut last = Why::NoFittingType;
        for zone in zone_choices {
            let mut zreqs = (*reqs).clone();
            if let Some(z) = zone {
                zreqs.add(
                    LABEL_TOPOLOGY_ZONE,
                    Requirement::is_in([self.zones.name(z).to_string()]),
                );
            }
            let fitting: Vec<u32> = types
                .iter()
                .copied()
                .filter(|t| {
                    let pt = &p.types[*t as usize];
                    fits(&q.req, &pt.alloc) && (zone.is_none() || pt.compatible(&zreqs, zone))
                })
                .collect();
            if fitting.is_empty() {
                last = Why::NoFittingType;
                continue;
            }
            let within_limits: Vec<u32> = match &self.remaining[pool] {
                Some(rem) => fitting
                    .into_iter()
                    .filter(|t| fits(&p.types[*t as usize].capacity, rem))
                    .collect(),
                None => fitting,
            };
            if within_limits.is_empty() {
                last = Why::Limits;
                continue;
            }
            if let Some((key, have, need)) =
                min_values_shortfall(within_limits.iter().map(|t| &p.types[*t as usize]), &zreqs)
            {
                last = Why::MinValues(key, have, need);
                continue;
            }
            let dims = self.table.len();
            let reserved = self.remaining[pool].as_ref().map(|_| {
                let mut m = vec![0; dims];
                for t in &within_limits {
                    super::dense::max_into(&mut m, &p.types[*t as usize].capacity);
                }
                m
            });
            let claim = Claim {
                pool,
                reqs: zreqs,
                types: within_limits,
                max_alloc: Vec::new(),
                reserved,
                zone_mask: 0,
            };
            return Ok((claim, zone));
        }
        Err(last)
    }
}
