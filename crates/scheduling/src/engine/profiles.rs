//! Pod classes (pods with equal constraints), their relaxation profiles (strict with all
//! preferences first, then preferences dropped one by one), and the topology groups
//! (spread / affinity / anti-affinity selectors) they count in.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use driftwood_api::wellknown::{LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE};

use crate::pod::{NamespaceSelection, PodAffinityTerm, PodConstraints, TopologySpread};
use crate::requirements::Requirements;
use crate::shared::Shared;
use crate::taints::Toleration;

use super::labels::{LabelKeys, MAX_DOMAINS};
use super::zones::{ZoneMask, ZoneTable};

/// The topology keys the engine tracks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TopoKey {
    /// `topology.kubernetes.io/zone`.
    Zone,
    /// `kubernetes.io/hostname`.
    Hostname,
    /// Any other label key, by its id in [`LabelKeys`].
    Label(u32),
}

impl TopoKey {
    /// The key of `key`; `None` for a custom key whose domains cannot be tracked.
    fn parse(key: &str, labels: &LabelKeys) -> Option<Self> {
        match key {
            LABEL_TOPOLOGY_ZONE => Some(Self::Zone),
            LABEL_HOSTNAME => Some(Self::Hostname),
            _ => {
                let id = labels.id(key)?;
                match labels.get(id) {
                    Some(k) if !k.too_many => Some(Self::Label(id)),
                    _ => None,
                }
            }
        }
    }

    /// The label key.
    pub fn label(self, labels: &LabelKeys) -> &str {
        match self {
            Self::Zone => LABEL_TOPOLOGY_ZONE,
            Self::Hostname => LABEL_HOSTNAME,
            Self::Label(id) => labels.name(id),
        }
    }

    /// The number of domains counted per group of this key (zones for zone and hostname).
    fn domain_count(self, zones: usize, labels: &LabelKeys) -> usize {
        match self {
            Self::Zone | Self::Hostname => zones,
            Self::Label(id) => labels.domain_count(id),
        }
    }
}

/// What a group's counts are used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GroupKind {
    /// Topology spread.
    Spread,
    /// Pod affinity.
    Affinity,
    /// Pod anti-affinity.
    Anti,
}

/// Which namespaces a group counts pods in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum NsFilter {
    /// Only this namespace.
    Own(String),
    /// Listed names, or namespaces whose labels match the selector.
    Listed(NamespaceSelection),
}

/// Identity of a topology group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct GroupKey {
    pub kind: GroupKind,
    pub key: TopoKey,
    pub selector: Requirements,
    pub ns: NsFilter,
}

/// Counts of the pods a selector matches, per domain.
#[derive(Debug, Clone)]
pub struct Group {
    pub key: GroupKey,
    /// Matching pods per domain of the group's key (pods on nodes whose domain is known); per
    /// zone for zone and hostname groups.
    pub domain_matched: Vec<u32>,
    /// Pods owning this (required anti-affinity) term, per domain as `domain_matched`.
    pub domain_owners: Vec<u32>,
    /// Matching pods anywhere.
    pub total_matched: u64,
}

impl Group {
    /// Whether a pod in `namespace` with `labels` is counted by this group.
    pub fn selects(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        namespace_labels: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> bool {
        let ns_ok = match &self.key.ns {
            NsFilter::Own(ns) => ns == namespace,
            NsFilter::Listed(sel) => {
                sel.names.contains(namespace)
                    || sel.selector.as_ref().is_some_and(|s| {
                        s.is_empty()
                            || namespace_labels
                                .get(namespace)
                                .is_some_and(|l| s.matches_labels(l))
                    })
            }
        };
        ns_ok && self.key.selector.matches_labels(labels)
    }
}

/// A spread constraint as a profile uses it.
#[derive(Debug, Clone)]
pub struct SpreadUse {
    pub group: u32,
    pub key: TopoKey,
    pub max_skew: i64,
    pub min_domains: i64,
    pub self_match: bool,
}

/// An affinity or anti-affinity term as a profile uses it.
#[derive(Debug, Clone)]
pub struct TermUse {
    pub group: u32,
    pub key: TopoKey,
    pub self_match: bool,
}

/// One way of scheduling a pod class: a set of constraints treated as required.
#[derive(Debug, Clone)]
pub struct Profile {
    pub reqs: Requirements,
    pub tolerations: Vec<Toleration>,
    pub spreads: Vec<SpreadUse>,
    pub affinity: Vec<TermUse>,
    pub anti: Vec<TermUse>,
    /// Zones the requirements allow.
    pub zone_allowed: ZoneMask,
    /// The pod must land on a node whose zone is decided (zonal constraints or counted by a zonal group).
    pub needs_zone: bool,
    /// The pod itself has zonal constraints (its own, or another pod's zonal anti-affinity selects it).
    pub zone_constrained: bool,
    /// Custom keys the pod has constraints on: its node's domain must be decided and allowed.
    pub labels: Vec<LabelNeed>,
    /// A required constraint the engine cannot evaluate.
    pub unsupported: Option<String>,
}

/// A custom topology key a profile has constraints on (its own spread or (anti-)affinity, or
/// another pod's required anti-affinity selecting it). Unlike zones, pods that only count in a
/// group of the key do not decide their node's domain (Karpenter narrows a NodeClaim only for
/// the pod's own constraints); they count where the domain is decided.
#[derive(Debug, Clone)]
pub struct LabelNeed {
    /// The key's id.
    pub key: u32,
    /// Domains the pod's node requirements allow.
    pub allowed: ZoneMask,
}

/// Pods with equal constraints.
#[derive(Debug, Clone, Default)]
pub struct Class {
    pub constraints: PodConstraints,
    /// Groups that count pods of this class.
    pub member_of: Vec<u32>,
    /// Required anti-affinity groups pods of this class own.
    pub owner_of: Vec<u32>,
    /// Anti-affinity groups whose selector matches pods of this class.
    pub matched_by_anti: Vec<u32>,
    /// Relaxation profiles, strictest first.
    pub profiles: Vec<u32>,
}

/// Interned classes, groups and profiles.
#[derive(Debug, Default)]
pub struct Catalog {
    pub classes: Vec<Class>,
    class_index: BTreeMap<PodConstraints, u32>,
    /// Classes by the address of shared constraints, each with a clone that keeps the address
    /// from being reused while the catalog lives.
    class_by_address: HashMap<usize, (Shared<PodConstraints>, u32)>,
    pub groups: Vec<Group>,
    group_index: BTreeMap<GroupKey, u32>,
    pub profiles: Vec<Profile>,
    /// Label keys some selector looks at; other pod labels do not affect scheduling.
    selector_keys: BTreeSet<String>,
}

fn ns_filter(own: &str, sel: &NamespaceSelection) -> NsFilter {
    if sel.names.is_empty() && sel.selector.is_none() {
        NsFilter::Own(own.to_string())
    } else {
        NsFilter::Listed(sel.clone())
    }
}

impl Catalog {
    /// Records the label keys the pods' selectors look at (call before `class_of`).
    pub fn collect_selector_keys<'p>(&mut self, pods: impl Iterator<Item = &'p PodConstraints>) {
        crate::pod::collect_selector_label_keys(pods, &mut self.selector_keys);
    }

    /// The class of `c`, interning it. Labels no selector looks at are dropped first, so pods
    /// differing only in such labels (pod-template-hash, pod-name) share a class.
    pub fn class_of(&mut self, c: &PodConstraints) -> u32 {
        if c.labels.keys().any(|k| !self.selector_keys.contains(k)) {
            let mut stripped = c.clone();
            stripped
                .labels
                .retain(|k, _| self.selector_keys.contains(k));
            return self.intern_class(&stripped);
        }
        self.intern_class(c)
    }

    /// [`Catalog::class_of`] for a pod's shared constraints: pods sharing one copy (a
    /// workload's, as the controller's cache shares them) are classed once, without comparing
    /// or copying their constraints again.
    pub fn class_of_shared(&mut self, c: &Shared<PodConstraints>) -> u32 {
        if let Some((_, id)) = self.class_by_address.get(&c.address()) {
            return *id;
        }
        let id = self.class_of(c);
        self.class_by_address.insert(c.address(), (c.clone(), id));
        id
    }

    fn intern_class(&mut self, c: &PodConstraints) -> u32 {
        if let Some(id) = self.class_index.get(c) {
            return *id;
        }
        let id = self.classes.len() as u32;
        self.classes.push(Class {
            constraints: c.clone(),
            ..Class::default()
        });
        self.class_index.insert(c.clone(), id);
        id
    }

    fn group(&mut self, key: GroupKey, domains: usize) -> u32 {
        if let Some(id) = self.group_index.get(&key) {
            return *id;
        }
        let id = self.groups.len() as u32;
        self.groups.push(Group {
            key: key.clone(),
            domain_matched: vec![0; domains],
            domain_owners: vec![0; domains],
            total_matched: 0,
        });
        self.group_index.insert(key, id);
        id
    }

    fn term_group(
        &mut self,
        kind: GroupKind,
        own_ns: &str,
        t: &PodAffinityTerm,
        zones: usize,
        labels: &LabelKeys,
    ) -> Option<(u32, TopoKey)> {
        let key = TopoKey::parse(&t.topology_key, labels)?;
        // A null selector selects nothing: represent it by an unsatisfiable requirement.
        let selector = t.selector.clone().unwrap_or_else(nothing_selector);
        Some((
            self.group(
                GroupKey {
                    kind,
                    key,
                    selector,
                    ns: ns_filter(own_ns, &t.namespaces),
                },
                key.domain_count(zones, labels),
            ),
            key,
        ))
    }

    fn spread_group(
        &mut self,
        own_ns: &str,
        s: &TopologySpread,
        zones: usize,
        labels: &LabelKeys,
    ) -> Option<(u32, TopoKey)> {
        let key = TopoKey::parse(&s.topology_key, labels)?;
        let selector = s.selector.clone().unwrap_or_else(nothing_selector);
        Some((
            self.group(
                GroupKey {
                    kind: GroupKind::Spread,
                    key,
                    selector,
                    ns: NsFilter::Own(own_ns.to_string()),
                },
                key.domain_count(zones, labels),
            ),
            key,
        ))
    }

    /// Registers the required anti-affinity terms of a class (bound pods need only these).
    pub fn register_owned_anti(&mut self, class: u32, zones: usize, labels: &LabelKeys) {
        let c = self.classes[class as usize].constraints.clone();
        let mut owned = Vec::new();
        for t in &c.anti_affinity {
            if let Some((g, _)) = self.term_group(GroupKind::Anti, &c.namespace, t, zones, labels) {
                owned.push(g);
            }
        }
        owned.sort_unstable();
        owned.dedup();
        self.classes[class as usize].owner_of = owned;
    }

    /// Builds the relaxation profiles of a class of pods to place.
    pub fn build_profiles(&mut self, class: u32, zone_table: &ZoneTable, labels: &LabelKeys) {
        if !self.classes[class as usize].profiles.is_empty() {
            return;
        }
        let zones = zone_table.len();
        let c = self.classes[class as usize].constraints.clone();
        let ns = c.namespace.as_str();
        // Preference levels, strictest first.
        struct Level<'a> {
            aff: Vec<&'a PodAffinityTerm>,
            anti: Vec<&'a PodAffinityTerm>,
            node: Option<&'a Requirements>,
            soft: Vec<&'a TopologySpread>,
        }
        let mut level = Level {
            aff: c.preferred_affinity.iter().map(|(_, t)| t).collect(),
            anti: c.preferred_anti_affinity.iter().map(|(_, t)| t).collect(),
            node: c.preferred_terms.first().map(|(_, r)| r),
            soft: c.spreads.iter().filter(|s| !s.hard).collect(),
        };
        let mut levels = Vec::new();
        let mut pref_node_next = 1;
        loop {
            levels.push(Level {
                aff: level.aff.clone(),
                anti: level.anti.clone(),
                node: level.node,
                soft: level.soft.clone(),
            });
            if !level.aff.is_empty() {
                level.aff.remove(0);
            } else if !level.anti.is_empty() {
                level.anti.remove(0);
            } else if level.node.is_some() {
                level.node = c.preferred_terms.get(pref_node_next).map(|(_, r)| r);
                pref_node_next += 1;
            } else if !level.soft.is_empty() {
                level.soft.remove(0);
            } else {
                break;
            }
        }
        let required: Vec<Option<&Requirements>> = if c.required_terms.is_empty() {
            vec![None]
        } else {
            c.required_terms.iter().map(Some).collect()
        };

        let mut ids = Vec::new();
        for lv in &levels {
            for term in &required {
                let mut reqs = c.node_selector.clone();
                if let Some(t) = term {
                    reqs = reqs.intersection(t);
                }
                if let Some(p) = lv.node {
                    reqs = reqs.intersection(p);
                }
                let mut unsupported = None;
                let mut spreads = Vec::new();
                for s in c
                    .spreads
                    .iter()
                    .filter(|s| s.hard)
                    .chain(lv.soft.iter().copied())
                {
                    match self.spread_group(ns, s, zones, labels) {
                        Some((group, key)) => spreads.push(SpreadUse {
                            group,
                            key,
                            max_skew: i64::from(s.max_skew),
                            min_domains: i64::from(s.min_domains.unwrap_or(1)),
                            self_match: false,
                        }),
                        None if s.hard => {
                            unsupported = Some(format!(
                                "topology spread on key {:?} is not supported (it has more than {MAX_DOMAINS} values)",
                                s.topology_key
                            ));
                        }
                        None => {}
                    }
                }
                let mut affinity = Vec::new();
                for (i, t) in c.affinity.iter().chain(lv.aff.iter().copied()).enumerate() {
                    match self.term_group(GroupKind::Affinity, ns, t, zones, labels) {
                        Some((group, key)) => affinity.push(TermUse {
                            group,
                            key,
                            self_match: false,
                        }),
                        None if i < c.affinity.len() => {
                            unsupported = Some(format!(
                                "pod affinity on topology key {:?} is not supported (it has more than {MAX_DOMAINS} values)",
                                t.topology_key
                            ));
                        }
                        None => {}
                    }
                }
                let mut anti = Vec::new();
                for (i, t) in c
                    .anti_affinity
                    .iter()
                    .chain(lv.anti.iter().copied())
                    .enumerate()
                {
                    match self.term_group(GroupKind::Anti, ns, t, zones, labels) {
                        Some((group, key)) => anti.push(TermUse {
                            group,
                            key,
                            self_match: false,
                        }),
                        None if i < c.anti_affinity.len() => {
                            unsupported = Some(format!(
                                "pod anti-affinity on topology key {:?} is not supported (it has more than {MAX_DOMAINS} values)",
                                t.topology_key
                            ));
                        }
                        None => {}
                    }
                }
                let zone_allowed = match reqs.get(LABEL_TOPOLOGY_ZONE) {
                    Some(r) => zone_table.mask_where(|z| r.has(z)),
                    None => zone_table.all(),
                };
                let id = self.profiles.len() as u32;
                self.profiles.push(Profile {
                    reqs,
                    tolerations: c.tolerations.clone(),
                    spreads,
                    affinity,
                    anti,
                    zone_allowed,
                    needs_zone: false,
                    zone_constrained: false,
                    labels: Vec::new(),
                    unsupported,
                });
                ids.push(id);
            }
        }
        self.classes[class as usize].profiles = ids;
    }

    /// Computes which groups count each class, self-matches and zone needs. Call once all
    /// classes and groups exist.
    pub fn link(
        &mut self,
        namespace_labels: &BTreeMap<String, BTreeMap<String, String>>,
        labels: &LabelKeys,
        staying: &[&BTreeMap<String, String>],
    ) {
        for ci in 0..self.classes.len() {
            let (member_of, matched_by_anti) = {
                let c = &self.classes[ci].constraints;
                let mut member_of = Vec::new();
                let mut matched_by_anti = Vec::new();
                for (gi, g) in self.groups.iter().enumerate() {
                    if g.selects(&c.namespace, &c.labels, namespace_labels) {
                        member_of.push(gi as u32);
                        if g.key.kind == GroupKind::Anti {
                            matched_by_anti.push(gi as u32);
                        }
                    }
                }
                (member_of, matched_by_anti)
            };
            let zonal_member = member_of
                .iter()
                .any(|g| self.groups[*g as usize].key.key == TopoKey::Zone);
            let zonal_owner = self.classes[ci]
                .owner_of
                .iter()
                .any(|g| self.groups[*g as usize].key.key == TopoKey::Zone);
            let members: BTreeSet<u32> = member_of.iter().copied().collect();
            for pid in self.classes[ci].profiles.clone() {
                let p = &mut self.profiles[pid as usize];
                for s in &mut p.spreads {
                    s.self_match = members.contains(&s.group);
                }
                for t in p.affinity.iter_mut().chain(p.anti.iter_mut()) {
                    t.self_match = members.contains(&t.group);
                }
                p.zone_constrained = p.spreads.iter().any(|s| s.key == TopoKey::Zone)
                    || p.affinity
                        .iter()
                        .chain(p.anti.iter())
                        .any(|t| t.key == TopoKey::Zone)
                    || matched_by_anti
                        .iter()
                        .any(|g| self.groups[*g as usize].key.key == TopoKey::Zone);
                p.needs_zone = p.zone_constrained || zonal_member || zonal_owner;
            }
            self.classes[ci].member_of = member_of;
            self.classes[ci].matched_by_anti = matched_by_anti;
            if !labels.is_empty() {
                self.link_labels(ci, labels, staying);
            }
        }
    }
}

/// A selector nothing matches.
fn nothing_selector() -> Requirements {
    let mut r = Requirements::new();
    r.add(
        "driftwood.sh/null-selector",
        crate::requirements::Requirement::unsatisfiable(),
    );
    r
}

impl Catalog {
    /// The custom keys each profile of class `ci` has constraints on: those of its own
    /// constraints, then those of anti-affinity groups selecting it.
    fn link_labels(
        &mut self,
        ci: usize,
        labels: &LabelKeys,
        staying: &[&BTreeMap<String, String>],
    ) {
        let class = &self.classes[ci];
        let key_of = |g: &u32| match self.groups[*g as usize].key.key {
            TopoKey::Label(id) => Some(id),
            _ => None,
        };
        let inverse: Vec<u32> = class.matched_by_anti.iter().filter_map(key_of).collect();
        for pid in class.profiles.clone() {
            let p = &self.profiles[pid as usize];
            let own = p
                .spreads
                .iter()
                .map(|s| s.key)
                .chain(p.affinity.iter().chain(&p.anti).map(|t| t.key))
                .filter_map(|k| match k {
                    TopoKey::Label(id) => Some(id),
                    _ => None,
                });
            let mut needs: Vec<LabelNeed> = Vec::new();
            for key in own.chain(inverse.iter().copied()) {
                if needs.iter().any(|n| n.key == key) {
                    continue;
                }
                needs.push(LabelNeed {
                    key,
                    allowed: labels.eligible(key, &p.reqs, staying),
                });
            }
            self.profiles[pid as usize].labels = needs;
        }
    }
}
