//! The scheduling simulation: places pods on existing nodes first, then on new NodeClaims
//! from the NodePools, first fit in a deterministic order, with per-class cursors so that bins
//! known to reject a class are not looked at again.

mod bound;
mod dense;
mod effective_zone;
mod explain;
mod fit;
mod label_fit;
mod labels;
mod pool_cache;
mod profiles;
mod progress;
mod state;
mod zones;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use driftwood_api::wellknown::{LABEL_INSTANCE_TYPE, LABEL_TOPOLOGY_ZONE};

use crate::model::{
    ExistingPlacement, NewNodeClaim, NodeSummary, SimulationError, SimulationInput,
    SimulationResult, UnschedulablePod,
};
use crate::pod::{PodConstraints, SimPod};
use crate::requirements::{Requirement, Requirements};
use crate::resources::{CPU, MEMORY, Resources};

use bound::BoundNodes;
pub use bound::Removals;
use dense::{Dense, ResourceTable, add_into, add_numbered_into, fits, sub_into};
pub use effective_zone::{FLEXIBLE_ZONE, NO_ZONE};
use labels::LabelKeys;
pub use pool_cache::PoolCache;
use profiles::{Catalog, GroupKind, TopoKey};
pub use progress::SolveProgress;
use state::{Bin, BinKind, Claim, Pool, min_values_shortfall};
use zones::{MAX_ZONES, ZoneTable, bit};

/// A pod in the placement queue.
struct QueuedPod<'a> {
    pod: &'a SimPod,
    class: u32,
    req: Dense,
    req_class: u32,
}

/// How lasting a rejection is, which decides whether cursors may skip the bin from now on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lasting {
    /// The bin will reject every later pod of this profile.
    Always,
    /// The bin will reject every later pod of this profile with the same requests.
    ForThisSize,
    /// The bin may accept a later pod.
    ForNow,
}

/// Why a bin or NodePool rejected a pod (formatted only when reporting).
#[derive(Debug, Clone, PartialEq)]
enum Why {
    Closed,
    Taint(usize),
    Requirements,
    Ports,
    HostnameSpread(u32),
    HostnameAnti(u32),
    AntiOwnerHere(u32),
    HostnameAffinity(u32),
    NoZoneLabel,
    Zone,
    /// The existing node lacks the custom topology key's label.
    NoLabel(u32),
    /// Topology constraints on the custom key rule out the node's or claim's domain(s).
    Domain(u32),
    Resources,
    NoCompatibleType,
    NoFittingType,
    Limits,
    MinValues(String, usize, usize),
    NoAffinityTarget(u32),
}

impl Why {
    fn lasting(&self) -> Lasting {
        match self {
            Why::Closed
            | Why::Taint(_)
            | Why::Requirements
            | Why::Ports
            | Why::HostnameSpread(_)
            | Why::HostnameAnti(_)
            | Why::AntiOwnerHere(_)
            | Why::NoZoneLabel
            | Why::NoLabel(_) => Lasting::Always,
            Why::Resources | Why::NoFittingType | Why::MinValues(..) => Lasting::ForThisSize,
            _ => Lasting::ForNow,
        }
    }
}

/// A NodePool's requirements narrowed by a profile and its compatible types, or why none.
type PoolStatics = Result<(Requirements, Vec<u32>), Why>;

/// What to change on a bin when a pod is committed to it.
#[derive(Debug, Default)]
struct Plan {
    zone: Option<usize>,
    new_reqs: Option<Requirements>,
}

struct Engine<'a> {
    input: &'a SimulationInput,
    table: ResourceTable,
    zones: ZoneTable,
    zone_universe: u128,
    labels: LabelKeys,
    catalog: Catalog,
    /// The NodePools prepared (shared with the pass's other simulations: [`PoolCache`]).
    pools: std::sync::Arc<Vec<Pool>>,
    /// Each pool's remaining limits, spent as claims open (unlimited resources `i64::MAX`).
    remaining: Vec<Option<Dense>>,
    /// Each pool's remaining limits as given: which resources it limits at all.
    limits: Vec<Option<&'a Resources>>,
    bins: Vec<Bin>,
    queue: Vec<QueuedPod<'a>>,
    suffix_min: Vec<Dense>,
    cursor_profile: Vec<usize>,
    cursor_size: HashMap<(u32, u32), usize>,
    pool_cache: HashMap<(u32, usize), PoolStatics>,
    placed_on: Vec<Option<usize>>,
}

/// Runs the simulation. Same input, same output.
///
/// Pods are placed highest priority first, then largest (cpu, then memory) first, then by key.
/// Each pod goes to the first existing node (in input order) or already-opened NodeClaim (in
/// opening order) that can take it, else opens a NodeClaim from the first NodePool (weight
/// descending, then name) that can host it.
///
/// Rules, as kube-scheduler and Karpenter apply them:
/// * resources: the pod's effective requests must fit the node's free allocatable; a new
///   NodeClaim keeps the instance types that can still hold all its pods plus the daemonsets
///   that would run there;
/// * node selection: `nodeSelector` and required node affinity (terms ORed, tried in order);
///   against existing nodes by their labels, against NodeClaims by requirement compatibility
///   (well-known labels may be undefined on the NodePool);
/// * taints: NoSchedule and NoExecute must be tolerated (PreferNoSchedule never blocks;
///   NodePool startup taints and, on uninitialized nodes, startup and ephemeral taints need not);
/// * host ports may not collide;
/// * topology (any key): spread with DoNotSchedule is strict and ScheduleAnyway a preference;
///   for hostname the global minimum is 0 because a new node can always be made (Karpenter's
///   rule); zone domains are the zones of existing nodes and of the NodePools' offerings, and
///   the domains of any other key the values NodePools allow for it (finite requirements and
///   template labels, or instance types' values) and existing nodes carry, filtered by the pod's
///   node requirements; pod affinity and anti-affinity are required terms, anti-affinity of
///   bound pods is honoured symmetrically. A NodeClaim's zone (or value of another key) is
///   decided (narrowed to one value, the allowed one with the fewest matching pods) by the first
///   pod whose constraints on the key, or membership in a group of the key, need it; pods on
///   claims whose domain is not decided do not count for the key's groups. Existing nodes
///   without the key's label cannot take a pod constrained on it. A custom key with more than
///   128 values makes a pod with required constraints on it unschedulable with a reason
///   (preferred ones are ignored).
/// * preferences (preferred pod affinity, then preferred anti-affinity, then preferred node
///   affinity heaviest first, then ScheduleAnyway spreads) are treated as required first and
///   dropped one at a time when the pod cannot be placed.
///
/// Pods that fit nowhere come back in [`SimulationResult::unschedulable`] with a reason naming
/// what blocked them on existing capacity and on each NodePool.
pub fn schedule(input: &SimulationInput) -> Result<SimulationResult, SimulationError> {
    schedule_cached(input, &mut PoolCache::default())
}

/// [`schedule`], with the NodePools prepared once for the simulations of one pass: `cache`
/// keeps what was prepared from the NodePools, their instance types and the DaemonSets, and
/// gives it back while those (and the resource and zone numbering) are the same. Same result
/// as [`schedule`]. An input's observer (`options.observer`) watches it run
/// ([`schedule_observed`]).
pub fn schedule_cached(
    input: &SimulationInput,
    cache: &mut PoolCache,
) -> Result<SimulationResult, SimulationError> {
    if let Some(observer) = input.options.observer.0.as_deref() {
        let watch = observer.started();
        return schedule_observed(input, cache, watch.progress());
    }
    let gone: Vec<bool> = input.existing_nodes.iter().map(|n| n.going_away).collect();
    bound::solve(input, cache, &BoundNodes::of(input), &gone, None)
}

/// [`schedule_cached`], telling `progress` how many pods it has still to try as it goes (all
/// of them once prepared, 0 when done) and, when done, its pending pods by effective zone.
/// Same result.
pub fn schedule_observed(
    input: &SimulationInput,
    cache: &mut PoolCache,
    progress: &SolveProgress,
) -> Result<SimulationResult, SimulationError> {
    let gone: Vec<bool> = input.existing_nodes.iter().map(|n| n.going_away).collect();
    bound::solve(input, cache, &BoundNodes::of(input), &gone, Some(progress))
}

/// How a pod that stays where it is counts in the groups that select it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counted {
    /// By every group.
    Running,
    /// Being deleted: by no topology spread, and by pod affinity and anti-affinity when
    /// `affinity` (the pods' own required anti-affinity still holds either way).
    Terminating { affinity: bool },
}

impl Counted {
    /// How the input's pods being deleted count.
    fn terminating(options: &crate::SimulationOptions) -> Self {
        Self::Terminating {
            affinity: options.terminating_pods_count_for_pod_affinity,
        }
    }

    /// Whether a group of `kind` counts the pod.
    fn by(self, kind: GroupKind) -> bool {
        match self {
            Self::Running => true,
            Self::Terminating { affinity } => affinity && kind != GroupKind::Spread,
        }
    }
}

fn pod_node_requirements(p: &SimPod) -> Requirements {
    let mut r = p.constraints.node_selector.clone();
    if let Some(first) = p.constraints.required_terms.first() {
        r = r.intersection(first);
    }
    r
}

impl<'a> Engine<'a> {
    /// The engine for `input` with the existing nodes `gone` says (by position) leaving, the
    /// staying nodes' bound pods read from `bound` (folded from `input`).
    fn new(
        input: &'a SimulationInput,
        cache: &mut PoolCache,
        bound: &BoundNodes<'_>,
        gone: &[bool],
    ) -> Result<Self, SimulationError> {
        let staying = || {
            input
                .existing_nodes
                .iter()
                .zip(bound.nodes.iter())
                .zip(gone)
                .filter(|(_, gone)| !**gone)
                .map(|(pair, _)| pair)
        };
        let leaving = || {
            input
                .existing_nodes
                .iter()
                .zip(gone)
                .filter(|(_, gone)| **gone)
                .map(|(n, _)| n)
        };
        // Resource names (a catalog's found once per pass: `cache`).
        let catalogs: Vec<_> = input
            .nodepools
            .iter()
            .map(|np| cache.catalog_names(&np.instance_types))
            .collect();
        // The names that can decide a fit: what the pods to place and the daemonsets request,
        // what nodes and instance types offer, what limits cap. A name only pods that stay
        // where they are request, and nothing offers, constrains nothing: it is left out, so
        // the table is built without reading every bound pod.
        let mut lists: Vec<&Resources> = Vec::new();
        lists.extend(input.pods.iter().map(|p| p.requests.as_ref()));
        lists.extend(input.daemonsets.iter().map(|p| p.requests.as_ref()));
        for n in leaving() {
            lists.extend(n.pods.iter().map(|p| p.requests.as_ref()));
        }
        for np in &input.nodepools {
            lists.extend(np.remaining_limits.iter());
        }
        let table = ResourceTable::of_names(
            lists
                .iter()
                .flat_map(|list| list.0.keys().map(String::as_str))
                .chain(bound.allocatable_names.iter().copied())
                .chain(
                    catalogs
                        .iter()
                        .flat_map(|c| c.resources.iter().map(String::as_str)),
                ),
        );

        // Zones.
        let summaries: Vec<&NodeSummary> = input.summaries.iter().filter(|s| s.nodes > 0).collect();
        let mut zone_names: BTreeSet<&str> = bound.zones.iter().copied().collect();
        zone_names.extend(
            summaries
                .iter()
                .filter_map(|s| s.labels.get(LABEL_TOPOLOGY_ZONE).map(String::as_str)),
        );
        for names in &catalogs {
            zone_names.extend(names.zones.iter().map(String::as_str));
        }
        let zones = ZoneTable::new(zone_names.into_iter().map(str::to_string).collect());
        if zones.len() > MAX_ZONES {
            return Err(SimulationError::TooManyZones {
                count: zones.len(),
                max: MAX_ZONES,
            });
        }

        // Pods to place: the given ones plus the movable pods of nodes going away.
        let mut to_place: Vec<&SimPod> = input.pods.iter().collect();
        for n in leaving() {
            to_place.extend(n.pods.iter().filter(|p| !p.is_daemonset));
        }

        let pools = cache.pools(input, &table, &zones);
        let limits: Vec<Option<&Resources>> = pools
            .iter()
            .map(|p| {
                input
                    .nodepools
                    .get(p.spec)
                    .and_then(|np| np.remaining_limits.as_ref())
            })
            .collect();
        let remaining = limits
            .iter()
            .map(|l| l.map(|l| table.dense_limits(l)))
            .collect();
        // The distinct constraints of the pods to place and of every pod that stays where it
        // is (bound to a staying node, or summarised; being deleted or not): pods sharing one
        // copy (a workload's) are looked at once. And the labels of the staying nodes (existing
        // ones first, then the summaries).
        let mut distinct: Vec<&PodConstraints> = Vec::new();
        let mut seen: HashSet<usize> = HashSet::new();
        for p in &to_place {
            if seen.insert(p.constraints.address()) {
                distinct.push(&p.constraints);
            }
        }
        // The staying nodes' shared copies by their number: each looked up once.
        let mut seen_bound = vec![false; bound.distinct];
        for (_, folded) in staying() {
            for f in &folded.constraints {
                let Some(first) = seen_bound.get_mut(f.id as usize) else {
                    continue;
                };
                if !*first {
                    *first = true;
                    if seen.insert(f.constraints.address()) {
                        distinct.push(f.constraints);
                    }
                }
            }
        }
        distinct.extend(summaries.iter().flat_map(|s| {
            s.pods
                .iter()
                .chain(&s.terminating)
                .filter(|(_, n)| *n > 0)
                .map(|(c, _)| c)
        }));
        let staying_labels: Vec<&BTreeMap<String, String>> = staying()
            .map(|(n, _)| &n.labels)
            .chain(summaries.iter().map(|s| &s.labels))
            .collect();
        let labels = LabelKeys::new(
            labels::topology_keys(distinct.iter().copied()),
            &pools,
            &staying_labels,
        );

        let mut catalog = Catalog::default();
        catalog.collect_selector_keys(distinct.iter().copied());
        let mut queue = Vec::with_capacity(to_place.len());
        let mut size_index: BTreeMap<Dense, u32> = BTreeMap::new();
        for p in to_place {
            let class = catalog.class_of_shared(&p.constraints);
            catalog.build_profiles(class, &zones, &labels);
            let req = table.dense(&p.requests);
            let next = size_index.len() as u32;
            let req_class = *size_index.entry(req.clone()).or_insert(next);
            queue.push(QueuedPod {
                pod: p,
                class,
                req,
                req_class,
            });
        }
        // Each staying node's pods' classes, with how many of its pods run and how many are
        // being deleted (the same for each summary, with their counts).
        let mut bound_classes = Vec::new();
        let mut class_of_id = vec![u32::MAX; bound.distinct];
        for (_, folded) in staying() {
            for f in &folded.constraints {
                let class = match class_of_id.get_mut(f.id as usize) {
                    Some(known) if *known != u32::MAX => *known,
                    Some(unknown) => {
                        *unknown = catalog.class_of_shared(f.constraints);
                        *unknown
                    }
                    None => catalog.class_of_shared(f.constraints),
                };
                bound_classes.push((class, f.running, f.terminating));
            }
        }
        let mut summary_classes = Vec::new();
        for s in &summaries {
            for (c, count) in s.pods.iter().chain(&s.terminating).filter(|(_, n)| *n > 0) {
                summary_classes.push((catalog.class_of(c), *count));
            }
        }
        for c in 0..catalog.classes.len() as u32 {
            catalog.register_owned_anti(c, zones.len(), &labels);
        }
        catalog.link(&input.namespace_labels, &labels, &staying_labels);

        // Largest first, deterministic.
        let cpu = 0;
        let mem = 1;
        queue.sort_by(|a, b| {
            b.pod
                .priority
                .cmp(&a.pod.priority)
                .then(b.req[cpu].cmp(&a.req[cpu]))
                .then(b.req[mem].cmp(&a.req[mem]))
                .then(a.pod.key.cmp(&b.pod.key))
        });
        let dims = table.len();
        let mut suffix_min = vec![vec![i64::MAX; dims]; queue.len() + 1];
        for i in (0..queue.len()).rev() {
            let next = suffix_min[i + 1].clone();
            suffix_min[i] = next
                .iter()
                .zip(&queue[i].req)
                .map(|(a, b)| (*a).min(*b))
                .collect();
        }

        // The existing nodes' zones by their place in `bound.zones`.
        let node_zones: Vec<Option<usize>> = bound.zones.iter().map(|z| zones.get(z)).collect();
        let mut zone_universe = 0;
        let staying_zones = staying()
            .filter_map(|(_, folded)| node_zones.get(folded.zone?).copied().flatten())
            .chain(
                summaries
                    .iter()
                    .filter_map(|s| s.labels.get(LABEL_TOPOLOGY_ZONE).and_then(|z| zones.get(z))),
            );
        for z in staying_zones {
            zone_universe |= bit(z);
        }
        for pool in pools.iter() {
            zone_universe |= pool.zone_mask;
        }

        let profile_count = catalog.profiles.len();
        let mut engine = Self {
            input,
            table,
            zones,
            zone_universe,
            labels,
            catalog,
            pools,
            remaining,
            limits,
            bins: Vec::new(),
            queue,
            suffix_min,
            cursor_profile: vec![0; profile_count],
            cursor_size: HashMap::new(),
            pool_cache: HashMap::new(),
            placed_on: Vec::new(),
        };
        engine.placed_on = vec![None; engine.queue.len()];
        engine.add_existing_bins(bound, gone, &bound_classes, &node_zones);
        engine.count_summaries(&summaries, &summary_classes);
        Ok(engine)
    }

    /// Adds a bin for each staying node, with its bound pods' requests, host ports and
    /// topology counts (`bound_classes`: each staying node's distinct constraints' classes
    /// with their running and terminating counts, in order; `node_zones`: the zone of each
    /// place in `bound.zones`).
    fn add_existing_bins(
        &mut self,
        bound: &BoundNodes<'_>,
        gone: &[bool],
        bound_classes: &[(u32, u32, u32)],
        node_zones: &[Option<usize>],
    ) {
        let positions = bound.names.positions(&self.table);
        let mut at = 0;
        let terminating = Counted::terminating(&self.input.options);
        let dims = self.table.len();
        self.bins.reserve(bound.nodes.len());
        let nodes = self.input.existing_nodes.iter().zip(&bound.nodes).zip(gone);
        for (ni, ((node, folded), gone)) in nodes.enumerate() {
            if *gone {
                continue;
            }
            let end = (at + folded.constraints.len()).min(bound_classes.len());
            let classes = &bound_classes[at..end];
            at = end;
            // At most one entry per group a class counts in or owns.
            let room: usize = classes
                .iter()
                .map(|(class, _, _)| {
                    let c = &self.catalog.classes[*class as usize];
                    c.member_of.len() + c.owner_of.len()
                })
                .sum();
            let mut bin = Bin {
                kind: BinKind::Existing(ni),
                zone: folded
                    .zone
                    .and_then(|z| node_zones.get(z).copied().flatten()),
                labels: self.labels.decided_by_labels(&node.labels),
                taints: folded.taints.clone(),
                alloc: vec![0; dims],
                used: vec![0; dims],
                ports: folded.ports.clone(),
                topo: Vec::with_capacity(room),
                pods: Vec::new(),
                closed: false,
            };
            add_numbered_into(&mut bin.alloc, &folded.allocatable, &positions);
            add_numbered_into(&mut bin.used, &folded.requests, &positions);
            for &(class, running, terminating_count) in classes {
                for (count, counted) in [
                    (running, Counted::Running),
                    (terminating_count, terminating),
                ] {
                    if count > 0 {
                        Self::record_topology(&mut self.catalog, &mut bin, class, count, counted);
                    }
                }
            }
            bin.closed = !bin.has_room_for(&self.suffix_min[0]);
            self.bins.push(bin);
        }
    }

    /// Counts the pods of summarised nodes in the groups that select them, in the domains of
    /// the summaries' labels (`classes`: each summary's pod classes with their counts, in order).
    fn count_summaries(&mut self, summaries: &[&NodeSummary], classes: &[(u32, u32)]) {
        let mut classes = classes.iter();
        let terminating = Counted::terminating(&self.input.options);
        for s in summaries {
            let zone = s
                .labels
                .get(LABEL_TOPOLOGY_ZONE)
                .and_then(|z| self.zones.get(z));
            let decided = self.labels.decided_by_labels(&s.labels);
            let domain = |key: TopoKey| match key {
                TopoKey::Label(id) => decided.iter().find(|(k, _)| *k == id).map(|(_, d)| *d),
                TopoKey::Zone | TopoKey::Hostname => zone,
            };
            let pods = s.pods.iter().map(|p| (p, Counted::Running));
            let all = pods.chain(s.terminating.iter().map(|p| (p, terminating)));
            for (_, counted) in all.filter(|((_, n), _)| *n > 0) {
                let Some(&(class, count)) = classes.next() else {
                    return;
                };
                Self::count_in_groups(&mut self.catalog, class, domain, count, counted);
            }
        }
    }

    /// Adds `count` pods of `class` to the groups that select (as `counted` allows) or are
    /// owned by it, in the domain `domain` gives for each group's key.
    fn count_in_groups(
        catalog: &mut Catalog,
        class: u32,
        domain: impl Fn(TopoKey) -> Option<usize>,
        count: u32,
        counted: Counted,
    ) {
        let c = &catalog.classes[class as usize];
        for g in &c.member_of {
            let group = &mut catalog.groups[*g as usize];
            if !counted.by(group.key.kind) {
                continue;
            }
            group.total_matched += u64::from(count);
            if let Some(d) = domain(group.key.key)
                && let Some(slot) = group.domain_matched.get_mut(d)
            {
                *slot += count;
            }
        }
        for g in &c.owner_of {
            let group = &mut catalog.groups[*g as usize];
            if let Some(d) = domain(group.key.key)
                && let Some(slot) = group.domain_owners.get_mut(d)
            {
                *slot += count;
            }
        }
    }

    /// Counts `count` pods of `class` on `bin`, in the groups that select them (as `counted`
    /// allows) or are owned by them.
    fn record_topology(
        catalog: &mut Catalog,
        bin: &mut Bin,
        class: u32,
        count: u32,
        counted: Counted,
    ) {
        // The bin's domain for a group's key: its zone, except for custom keys.
        let domain = |key: TopoKey| match key {
            TopoKey::Label(id) => bin.label_domain(id),
            TopoKey::Zone | TopoKey::Hostname => bin.zone,
        };
        Self::count_in_groups(catalog, class, domain, count, counted);
        let c = &catalog.classes[class as usize];
        for g in &c.member_of {
            if counted.by(catalog.groups[*g as usize].key.kind) {
                bin.topo_add(*g, count, 0);
            }
        }
        for g in &c.owner_of {
            bin.topo_add(*g, 0, count);
        }
    }

    fn run(&mut self, progress: &SolveProgress) {
        let pods = self.queue.len();
        for qi in 0..pods {
            progress.set_queue_depth(pods - qi);
            let class = self.queue[qi].class;
            let profiles = self.catalog.classes[class as usize].profiles.clone();
            for pid in profiles {
                if self.place(qi, pid) {
                    break;
                }
            }
        }
        progress.set_queue_depth(0);
    }

    /// Tries to place queue entry `qi` under profile `pid`; true when placed.
    fn place(&mut self, qi: usize, pid: u32) -> bool {
        if self.catalog.profiles[pid as usize].unsupported.is_some() {
            return false;
        }
        let size_key = (pid, self.queue[qi].req_class);
        let exhaustive = self.input.options.exhaustive;
        let cp = if exhaustive {
            0
        } else {
            self.cursor_profile[pid as usize]
        };
        let cs = if exhaustive {
            0
        } else {
            self.cursor_size
                .get(&size_key)
                .copied()
                .unwrap_or(cp)
                .max(cp)
        };
        let mut advance_profile = cs == cp;
        let mut advance_size = true;
        let (mut new_cp, mut new_cs) = (cp, cs);
        let mut found = None;
        for b in cs..self.bins.len() {
            match self.check_bin(b, qi, pid) {
                Ok(plan) => {
                    found = Some((b, plan));
                    break;
                }
                Err(why) => {
                    let lasting = why.lasting();
                    if advance_profile && lasting == Lasting::Always {
                        new_cp = b + 1;
                    } else {
                        advance_profile = false;
                    }
                    if advance_size && lasting != Lasting::ForNow {
                        new_cs = b + 1;
                    } else {
                        advance_size = false;
                    }
                }
            }
        }
        self.cursor_profile[pid as usize] = new_cp;
        self.cursor_size.insert(size_key, new_cs);
        if let Some((b, plan)) = found {
            self.commit(b, qi, plan);
            return true;
        }
        for pool in 0..self.pools.len() {
            let statics = match self.pool_cache.remove(&(pid, pool)) {
                Some(hit) => hit,
                None => self.pool_static(pool, pid),
            };
            let outcome = self.check_pool(pool, qi, pid, &statics);
            self.pool_cache.insert((pid, pool), statics);
            if let Ok((claim, zone)) = outcome {
                self.open_claim(pool, claim, zone);
                let b = self.bins.len() - 1;
                self.commit(b, qi, Plan::default());
                return true;
            }
        }
        false
    }

    fn open_claim(&mut self, pool: usize, mut claim: Claim, zone: Option<usize>) {
        let dims = self.table.len();
        if let (Some(remaining), Some(reserved)) =
            (self.remaining[pool].as_mut(), claim.reserved.as_ref())
        {
            sub_into(remaining, reserved);
        }
        claim.refresh(&self.pools[pool], dims, &self.zones);
        let zone = zone.or_else(|| {
            claim
                .reqs
                .get(LABEL_TOPOLOGY_ZONE)
                .and_then(|r| r.single_value())
                .and_then(|z| self.zones.get(z))
        });
        let labels = self.labels.decided_by_requirements(&claim.reqs);
        let p = &self.pools[pool];
        // The pool types' `alloc` already excludes daemonsets: track only pod usage.
        let used = vec![0; dims];
        self.bins.push(Bin {
            kind: BinKind::Claim(Box::new(claim)),
            zone,
            labels,
            taints: p.taints.clone(),
            alloc: Vec::new(),
            used,
            ports: p.daemon_ports.clone(),
            topo: Vec::new(),
            pods: Vec::new(),
            closed: false,
        });
    }

    fn commit(&mut self, b: usize, qi: usize, plan: Plan) {
        let q = &self.queue[qi];
        let class = q.class;
        let dims = self.table.len();
        let bin = &mut self.bins[b];
        add_into(&mut bin.used, &q.req);
        bin.ports
            .extend(q.pod.constraints.host_ports.iter().cloned());
        bin.pods.push(qi);
        if bin.zone.is_none() {
            bin.zone = plan.zone;
        }
        if let BinKind::Claim(claim) = &mut bin.kind {
            let pool = &self.pools[claim.pool];
            let used = &bin.used;
            if let Some(z) = plan.zone {
                claim.reqs.add(
                    LABEL_TOPOLOGY_ZONE,
                    Requirement::is_in([self.zones.name(z).to_string()]),
                );
            }
            let reqs_changed = plan.new_reqs.is_some() || plan.zone.is_some();
            if let Some(nr) = plan.new_reqs {
                claim.reqs = claim.reqs.intersection(&nr);
            }
            if bin.zone.is_none() {
                bin.zone = claim
                    .reqs
                    .get(LABEL_TOPOLOGY_ZONE)
                    .and_then(|r| r.single_value())
                    .and_then(|z| self.zones.get(z));
            }
            if reqs_changed && !self.labels.is_empty() {
                bin.labels = self.labels.decided_by_requirements(&claim.reqs);
            }
            let reqs = &claim.reqs;
            let before = claim.types.len();
            claim.types.retain(|t| {
                let pt = &pool.types[*t as usize];
                fits(used, &pt.alloc) && (!reqs_changed || pt.compatible(reqs, None))
            });
            // The claim's zones, largest allocatable and reservation follow from its types and
            // requirements: unchanged when neither changed.
            if (reqs_changed || claim.types.len() != before)
                && let Some(released) = claim.refresh(pool, dims, &self.zones)
                && let Some(remaining) = self.remaining[claim.pool].as_mut()
            {
                add_into(remaining, &released);
            }
        }
        Self::record_topology(
            &mut self.catalog,
            &mut self.bins[b],
            class,
            1,
            Counted::Running,
        );
        let bin = &mut self.bins[b];
        bin.closed = !bin.has_room_for(&self.suffix_min[qi + 1]);
        self.placed_on[qi] = Some(b);
    }

    fn result(&self) -> SimulationResult {
        let mut out = SimulationResult::default();
        // Pods of one class and size get the same explanation from the final state.
        let mut explained: HashMap<(u32, u32), String> = HashMap::new();
        for (qi, q) in self.queue.iter().enumerate() {
            match self.placed_on[qi] {
                Some(b) => {
                    if let BinKind::Existing(ni) = self.bins[b].kind
                        && let Some(node) = self.input.existing_nodes.get(ni)
                    {
                        out.existing_placements.push(ExistingPlacement {
                            pod: q.pod.key.clone(),
                            node: node.name.clone(),
                        });
                    }
                }
                None => {
                    let key = (q.class, q.req_class);
                    let reason = explained
                        .entry(key)
                        .or_insert_with(|| self.explain(qi))
                        .clone();
                    out.unschedulable.push(UnschedulablePod {
                        pod: q.pod.key.clone(),
                        reason,
                    });
                }
            }
        }
        for bin in &self.bins {
            let BinKind::Claim(claim) = &bin.kind else {
                continue;
            };
            let pool = &self.pools[claim.pool];
            let mut ranked: Vec<(f64, &str, u32)> = claim
                .types
                .iter()
                .map(|t| {
                    let pt = &pool.types[*t as usize];
                    (pt.cheapest(&claim.reqs), pt.it().name.as_str(), *t)
                })
                .collect();
            ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(b.1)));
            let max = self.input.options.max_instance_types.max(1);
            let mut keep = ranked.len().min(max);
            while keep < ranked.len()
                && min_values_shortfall(
                    ranked[..keep].iter().map(|r| &pool.types[r.2 as usize]),
                    &claim.reqs,
                )
                .is_some()
            {
                keep += 1;
            }
            let pods_req: Dense = {
                let mut d = vec![0; self.table.len()];
                for qi in &bin.pods {
                    add_into(&mut d, &self.queue[*qi].req);
                }
                d
            };
            let pods_named = self.table.named(&pods_req);
            let mut requirements = claim.reqs.clone();
            requirements.add(
                LABEL_INSTANCE_TYPE,
                Requirement::is_in(ranked[..keep].iter().map(|r| r.1.to_string())),
            );
            out.new_nodeclaims.push(NewNodeClaim {
                nodepool: pool.name.to_string(),
                requirements,
                instance_types: ranked[..keep].iter().map(|r| r.1.to_string()).collect(),
                pods: bin
                    .pods
                    .iter()
                    .map(|qi| self.queue[*qi].pod.key.clone())
                    .collect(),
                requests: pods_named.add(&pool.daemon),
                daemonset_requests: pool.daemon.clone(),
            });
        }
        out
    }
}

/// Total requested cpu and memory of the pods on new NodeClaims divided by the allocatable of
/// each claim's cheapest instance type: `(cpu ratio, memory ratio)`. For benchmarks and reports.
pub fn packing_efficiency(input: &SimulationInput, result: &SimulationResult) -> (f64, f64) {
    let mut requested = Resources::new();
    let mut allocatable = Resources::new();
    for claim in &result.new_nodeclaims {
        requested = requested.add(&claim.requests);
        let Some(first) = claim.instance_types.first() else {
            continue;
        };
        if let Some(it) = input
            .nodepools
            .iter()
            .filter(|p| p.name == claim.nodepool)
            .flat_map(|p| p.instance_types.iter())
            .find(|it| &it.name == first)
        {
            allocatable = allocatable.add(&it.allocatable());
        }
    }
    let ratio = |name: &str| {
        let a = allocatable.get(name);
        if a == 0 {
            0.0
        } else {
            requested.get(name) as f64 / a as f64
        }
    };
    (ratio(CPU), ratio(MEMORY))
}
