//! Turns rejections into reasons a user can act on, for pods left unschedulable.

use std::collections::BTreeMap;

use crate::InstanceType;
use crate::requirements::{Requirement, Requirements};
use crate::resources::format_amount;
use crate::taints::first_untolerated;
use driftwood_api::wellknown::{LABEL_CAPACITY_TYPE, LABEL_TOPOLOGY_ZONE};

use super::dense::Dense;
use super::profiles::GroupKind;
use super::state::{BinKind, Pool};
use super::{Engine, Why};

impl Engine<'_> {
    fn group_text(&self, g: u32) -> String {
        let group = &self.catalog.groups[g as usize];
        let what = match group.key.kind {
            GroupKind::Spread => "topology spread",
            GroupKind::Affinity => "pod affinity",
            GroupKind::Anti => "pod anti-affinity",
        };
        format!(
            "{what} on {} (selector {})",
            group.key.key.label(&self.labels),
            group.key.selector
        )
    }

    fn shortfall(&self, used: &[i64], req: &[i64], cap: &[i64]) -> String {
        let mut parts = Vec::new();
        for (i, need) in req.iter().enumerate() {
            let free = cap
                .get(i)
                .copied()
                .unwrap_or(0)
                .saturating_sub(used.get(i).copied().unwrap_or(0));
            if *need > free {
                let name = self.table.name(i);
                parts.push(format!(
                    "{name} needs {} has {}",
                    format_amount(name, *need),
                    format_amount(name, free.max(0))
                ));
            }
        }
        parts.join(", ")
    }

    fn describe_bin(&self, b: usize, qi: usize, pid: u32, why: &Why) -> String {
        let bin = &self.bins[b];
        let q = &self.queue[qi];
        let prof = &self.catalog.profiles[pid as usize];
        match why {
            Why::Closed | Why::Resources | Why::NoFittingType => {
                let cap: Dense = match &bin.kind {
                    BinKind::Existing(_) => bin.alloc.clone(),
                    BinKind::Claim(c) => c.max_alloc.clone(),
                };
                let short: Vec<&str> = q
                    .req
                    .iter()
                    .enumerate()
                    .filter(|(i, need)| {
                        let free = cap.get(*i).copied().unwrap_or(0);
                        **need > free.saturating_sub(bin.used.get(*i).copied().unwrap_or(0))
                    })
                    .map(|(i, _)| self.table.name(i))
                    .collect();
                format!("insufficient free {}", short.join(", "))
            }
            Why::Taint(i) => format!(
                "taint {} is not tolerated",
                bin.taints
                    .get(*i)
                    .map(|t| t.to_string())
                    .unwrap_or_default()
            ),
            Why::Requirements => match &bin.kind {
                BinKind::Existing(ni) => {
                    let labels = &self.input.existing_nodes[*ni].labels;
                    match prof.reqs.first_mismatch(labels) {
                        Some((k, r)) => format!("node label {k} does not satisfy {r}"),
                        None => "node labels do not satisfy the pod's node selection".to_string(),
                    }
                }
                BinKind::Claim(c) => match c.reqs.compatible_for_scheduling(&prof.reqs) {
                    Err(e) => format!("incompatible requirements: {e}"),
                    Ok(()) => "incompatible requirements".to_string(),
                },
            },
            other => self.describe_common(other),
        }
    }

    fn describe_common(&self, why: &Why) -> String {
        match why {
            Why::Ports => "a host port it needs is already bound".to_string(),
            Why::HostnameSpread(g) => format!("{} would exceed maxSkew", self.group_text(*g)),
            Why::HostnameAnti(g) => {
                format!("{}: a matching pod is already there", self.group_text(*g))
            }
            Why::AntiOwnerHere(g) => {
                format!(
                    "a pod there has required anti-affinity to this pod ({})",
                    self.group_text(*g)
                )
            }
            Why::HostnameAffinity(g) => {
                format!("{}: no matching pod is there", self.group_text(*g))
            }
            Why::NoZoneLabel => "the node has no topology.kubernetes.io/zone label".to_string(),
            Why::Zone => {
                "zonal topology constraints (spread, affinity, anti-affinity) rule out its zone(s)"
                    .to_string()
            }
            Why::NoLabel(k) => format!("the node has no {} label", self.labels.name(*k)),
            Why::Domain(k) if self.labels.domain_count(*k) == 0 => format!(
                "no NodePool or existing node gives topology key {} a value",
                self.labels.name(*k)
            ),
            Why::Domain(k) => format!(
                "topology constraints on {} (spread, affinity, anti-affinity) rule out its value(s)",
                self.labels.name(*k)
            ),
            Why::NoAffinityTarget(g) => {
                format!("{}: no pod matches it anywhere", self.group_text(*g))
            }
            Why::MinValues(key, have, need) => {
                format!(
                    "requirement {key} has minValues {need} but only {have} value(s) remain among instance types"
                )
            }
            Why::Limits => "limits reached".to_string(),
            Why::Closed | Why::Resources | Why::NoFittingType => "not enough resources".to_string(),
            Why::Taint(_) => "taint not tolerated".to_string(),
            Why::Requirements => "incompatible requirements".to_string(),
            Why::NoCompatibleType => "no compatible instance type".to_string(),
        }
    }

    /// Names the requirement that ruled out the last instance types: the nodepool's requirements
    /// and template labels, then the pod's, are applied in turn to every type the nodepool's
    /// class offers (with an available offering); the first one after which none is left is
    /// the one to change.
    fn no_compatible_type(&self, p: &Pool, pod_reqs: &Requirements) -> String {
        let Some(spec) = self.input.nodepools.iter().find(|np| np.name == p.name) else {
            return "no compatible instance type".to_string();
        };
        let total = spec.instance_types.len();
        if total == 0 {
            return "the nodepool has no instance types (its node class resolved none)".to_string();
        }
        let launchable = |it: &InstanceType, reqs: &Requirements| {
            reqs.first_conflict(&it.requirements).is_none()
                && it.offerings.iter().any(|o| {
                    o.available
                        && reqs.get(LABEL_TOPOLOGY_ZONE).is_none_or(|r| r.has(&o.zone))
                        && reqs
                            .get(LABEL_CAPACITY_TYPE)
                            .is_none_or(|r| r.has(&o.capacity_type))
                })
        };
        let mut left: Vec<&InstanceType> = spec
            .instance_types
            .iter()
            .filter(|it| launchable(it, &Requirements::default()))
            .collect();
        if left.is_empty() {
            return format!(
                "none of the nodepool's {total} instance types has an available offering"
            );
        }
        let template: Vec<(String, Requirement)> = spec
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), Requirement::is_in([v.clone()])))
            .collect();
        let steps = spec
            .requirements
            .iter()
            .map(|(k, r)| ("the nodepool's requirement", k.to_string(), r.clone()))
            .chain(
                template
                    .into_iter()
                    .map(|(k, r)| ("the nodepool's template label", k, r)),
            )
            .chain(
                pod_reqs
                    .iter()
                    .map(|(k, r)| ("the pod's requirement", k.to_string(), r.clone())),
            );
        let mut applied = Requirements::default();
        for (whose, key, req) in steps {
            applied.add(&key, req.clone());
            let before = left.len();
            left.retain(|it| launchable(it, &applied));
            if left.is_empty() {
                let context = if before == total {
                    format!("none of the nodepool's {total} instance types")
                } else {
                    format!("{before} of the nodepool's {total} instance types were left before it")
                };
                return format!(
                    "no instance type satisfies requirement {key} {req} ({whose}; {context})"
                );
            }
        }
        format!("no instance type satisfies requirements {pod_reqs}")
    }

    fn describe_pool(&self, pool: usize, qi: usize, pid: u32, why: &Why) -> String {
        let p = &self.pools[pool];
        let q = &self.queue[qi];
        let prof = &self.catalog.profiles[pid as usize];
        let text = match why {
            Why::Taint(i) => format!(
                "taint {} is not tolerated",
                p.taints.get(*i).map(|t| t.to_string()).unwrap_or_default()
            ),
            Why::Requirements => match p.reqs.compatible_for_scheduling(&prof.reqs) {
                Err(e @ crate::requirements::Incompatibility::Undefined { .. }) => {
                    format!(
                        "incompatible requirements: {e} (the nodepool defines it in neither requirements nor template labels)"
                    )
                }
                Err(e) => format!("incompatible requirements: {e}"),
                Ok(()) => "incompatible requirements".to_string(),
            },
            Why::NoCompatibleType => self.no_compatible_type(p, &prof.reqs),
            Why::NoFittingType => {
                let mut largest: Dense = vec![0; self.table.len()];
                for t in &p.types {
                    super::dense::max_into(&mut largest, &t.alloc);
                }
                let zeros = vec![0; self.table.len()];
                let shortfall = self.shortfall(&zeros, &q.req, &largest);
                if p.daemon.is_zero() {
                    format!("no instance type has room for its requests ({shortfall})")
                } else {
                    format!(
                        "no instance type has room for its requests after daemonset overhead {} ({shortfall})",
                        p.daemon
                    )
                }
            }
            Why::Limits => {
                // Only the resources the NodePool limits: the others stay near i64::MAX less
                // what in-flight claims reserved, which is no figure to print.
                let remaining = self.remaining[pool].as_ref().map(|r| {
                    let named = self.table.named(r);
                    let shown: Vec<String> = self.limits[pool]
                        .iter()
                        .flat_map(|l| l.0.keys())
                        .map(|name| format!("{name}={}", format_amount(name, named.get(name))))
                        .collect();
                    shown.join(", ")
                });
                format!(
                    "limits reached: remaining {}",
                    remaining.unwrap_or_default()
                )
            }
            other => self.describe_common(other),
        };
        format!("incompatible with nodepool {:?}: {text}", p.name)
    }

    /// Why queue entry `qi` could not be placed (evaluated under its most relaxed profile).
    pub(super) fn explain(&self, qi: usize) -> String {
        let q = &self.queue[qi];
        let class = &self.catalog.classes[q.class as usize];
        let Some(&pid) = class.profiles.last() else {
            return "no way to schedule the pod".to_string();
        };
        let prof = &self.catalog.profiles[pid as usize];
        if let Some(u) = &prof.unsupported {
            return u.clone();
        }
        let mut parts = Vec::new();
        let summarised: usize = self.input.summaries.iter().map(|s| s.nodes).sum::<usize>();
        if !self.bins.is_empty() || summarised > 0 {
            let mut counts: BTreeMap<String, usize> = BTreeMap::new();
            for b in 0..self.bins.len() {
                if let Err(why) = self.check_bin(b, qi, pid) {
                    *counts
                        .entry(self.describe_bin(b, qi, pid, &why))
                        .or_insert(0) += 1;
                }
            }
            // Summarised nodes take none of the pods to place (the caller summarised them so).
            for s in self.input.summaries.iter().filter(|s| s.nodes > 0) {
                let text = match first_untolerated(&s.taints, &prof.tolerations) {
                    Some(t) => format!("taint {t} is not tolerated"),
                    None => "the node cannot take the pod".to_string(),
                };
                *counts.entry(text).or_insert(0) += s.nodes;
            }
            let mut ranked: Vec<(usize, String)> =
                counts.into_iter().map(|(k, v)| (v, k)).collect();
            ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let shown: Vec<String> = ranked
                .iter()
                .take(3)
                .map(|(n, text)| format!("{n}× {text}"))
                .collect();
            let more = if ranked.len() > 3 {
                format!("; and {} other reason(s)", ranked.len() - 3)
            } else {
                String::new()
            };
            parts.push(format!(
                "no existing node or new NodeClaim fits ({} checked: {}{more})",
                self.bins.len() + summarised,
                shown.join("; ")
            ));
        }
        if self.pools.is_empty() {
            parts.push("no NodePool can create a node".to_string());
        }
        for pool in 0..self.pools.len() {
            let statics = self.pool_static(pool, pid);
            if let Err(why) = self.check_pool(pool, qi, pid, &statics) {
                parts.push(self.describe_pool(pool, qi, pid, &why));
            }
        }
        if parts.is_empty() {
            return "no placement found".to_string();
        }
        parts.join("; ")
    }
}
