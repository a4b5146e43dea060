//! The store at one moment with the indexes the planners need: pods per node, pending pods,
//! NodeClaims per NodePool, NodeClaim and Node by providerID. Every index is updated per
//! object as watch events arrive ([`Snapshot::apply`], [`Snapshot::delete`],
//! [`Snapshot::reset`]), and all of it lives in persistent maps, so a clone is cheap.

use super::revisions::{Revisions, Tracked};
use super::{Kind, ObjectKey, Objects, Store};
use driftwood_api::condition::Conditions as _;
use driftwood_api::hash::fnv1a64;
use driftwood_api::wellknown::LABEL_NODEPOOL;
use driftwood_api::{EC2NodeClass, NodeClaim, NodePool};
use driftwood_aws::launcher::instance_id_from_provider_id;
use driftwood_disruption::cached_pod::{CachedPod, PodShape};
use driftwood_scheduling::{PodConstraints, PodConversionError, Resources, Shared, SimPod};
use imbl::{OrdMap, OrdSet};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use std::sync::Arc;

/// The store at one moment plus indexes.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub store: Store,
    /// Pod keys bound to each node name.
    pub pods_by_node: OrdMap<String, OrdSet<ObjectKey>>,
    /// Per node name with pods bound, a revision new whenever one of them is stored, replaced
    /// or removed (unique in the process, as [`super::revisions`]'): equal revisions, the same
    /// pods, with no pass over them.
    pub pod_revisions: OrdMap<String, u64>,
    /// Per node name, the pods whose coming and going is a pod event for consolidation
    /// ([`counts_as_pod_event`]) as one [`PodEventSet`]; a node without such pods has none.
    pub pod_event_sets: OrdMap<String, PodEventSet>,
    /// Pods not bound to a node, not finished and not being deleted.
    pub pending_pods: OrdSet<ObjectKey>,
    /// Pods kube-scheduler gave up on that are ours to provision for
    /// ([`crate::controllers::provisioner::is_provisionable`]).
    pub provisionable_pods: OrdSet<ObjectKey>,
    /// How many times a pod became provisionable (the provisioner's batch window restarts when
    /// this moves).
    pub provisionable_arrivals: u64,
    /// NodeClaim names per NodePool name (from the karpenter.sh/nodepool label).
    pub nodeclaims_by_nodepool: OrdMap<String, OrdSet<String>>,
    /// NodeClaim name by status.providerID.
    pub nodeclaim_by_provider_id: OrdMap<String, String>,
    /// Node name by spec.providerID.
    pub node_by_provider_id: OrdMap<String, String>,
    /// NodeClaim name by the instance ID that ends its providerID (`aws:///zone/i-…` → `i-…`),
    /// as the cloud's interruption messages name instances.
    pub nodeclaim_by_instance_id: OrdMap<String, String>,
    /// NodeClaims being deleted (a deletionTimestamp, or InstanceTerminating true).
    pub deleting_nodeclaims: OrdSet<String>,
    /// Nodes with a deletionTimestamp.
    pub deleting_nodes: OrdSet<String>,
    /// NodeClaims not being deleted that have an `expireAfter`, by when they expire (UTC
    /// seconds: creation + expireAfter): termination reads the ones due, not every NodeClaim.
    pub expiring_nodeclaims: OrdSet<(i64, String)>,
    /// NodeClaims not being deleted and not Initialized yet: the ones the lifecycle still has
    /// a step for (launch, register, initialize, or give up on).
    pub initializing_nodeclaims: OrdSet<String>,
    /// One copy of each distinct [`PodConstraints`] the cached pods' scheduling facts carry
    /// (the pods of a ReplicaSet share theirs), with how many pods hold it.
    pub pod_constraints: imbl::HashMap<Shared<PodConstraints>, usize>,
    /// One copy of each distinct [`PodShape`] the cached pods have (the pods of a ReplicaSet
    /// share theirs), with how many pods hold it.
    pub pod_shapes: imbl::HashMap<Arc<PodShape>, usize>,
    /// One copy of each distinct list of requests the cached pods' scheduling facts carry,
    /// with how many pods hold it.
    pub pod_requests: imbl::HashMap<Arc<Resources>, usize>,
    /// How many changes (an object stored, replaced or removed) each kind has seen, by
    /// [`Kind::position`]: a controller that reads only some kinds wakes when theirs move, in
    /// O(1), not on every pod event.
    pub changes: [u64; Kind::ALL.len()],
    /// Each Node's simulation view, kept between passes (shared by clones of this snapshot).
    pub built_nodes: super::built_nodes::BuiltNodes,
    /// Each NodePool's usage by its NodeClaims not being deleted, by NodePool name.
    pub nodepool_usage: OrdMap<String, super::pool_usage::PoolUsage>,
    /// Each stored object's revision, by [`Kind::position`] (Pods have none: their changes are
    /// followed through the indexes above).
    revisions: [Revisions; Kind::ALL.len()],
}

/// The pods on one node whose coming and going is a pod event: how many, and the wrapping sum
/// of their UIDs' hashes. Kept per watch event by adding and taking away one pod, it changes
/// whenever the set does (but for a 64-bit hash collision), with no pass over the node's pods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodEventSet {
    pub pods: u64,
    pub uid_hashes: u64,
}

impl PodEventSet {
    /// One number for the set, equal for equal sets.
    pub fn signature(&self) -> u64 {
        self.uid_hashes ^ self.pods.rotate_left(32)
    }
}

/// Whether `pod` coming to or leaving its node is a pod event (Karpenter's
/// `nodeclaim.podevents`): bound, with a UID, not a DaemonSet pod, not finished and not
/// terminating.
pub fn counts_as_pod_event(pod: &CachedPod) -> bool {
    pod.node_name.is_some()
        && pod.uid.is_some()
        && !pod.is_daemonset()
        && !pod.is_terminal()
        && !pod.is_terminating()
}

/// A kind the cache stores: what it keeps of an object, where, and which indexes it feeds.
pub trait Cached: Clone + Send + Sync + 'static {
    const KIND: Kind;
    /// Whether the cache keeps a revision per object of this kind ([`Snapshot::tracked`]).
    const REVISED: bool = true;
    /// What the cache keeps of an object of this kind: the object itself, or for a Pod the
    /// facts controllers read ([`CachedPod`]).
    type Stored: Send + Sync + 'static;
    fn objects(store: &Store) -> &Objects<Self::Stored>;
    fn objects_mut(store: &mut Store) -> &mut Objects<Self::Stored>;
    /// What the cache keeps of `object` (sharing what `snapshot` already holds an equal copy
    /// of).
    fn to_stored(object: Arc<Self>, snapshot: &Snapshot) -> Arc<Self::Stored>;
    /// Adds (`present`) or removes this object's entries in the indexes.
    fn index(_snapshot: &mut Snapshot, _key: &str, _object: &Self::Stored, _present: bool) {}
}

macro_rules! cached {
    ($kind:ty, $variant:ident, $field:ident) => {
        cached!($kind, $variant, $field, |_s, _k, _o, _p| {});
    };
    ($kind:ty, $variant:ident, $field:ident, $index:expr) => {
        impl Cached for $kind {
            const KIND: Kind = Kind::$variant;
            type Stored = Self;
            fn objects(store: &Store) -> &Objects<Self> {
                &store.$field
            }
            fn objects_mut(store: &mut Store) -> &mut Objects<Self> {
                &mut store.$field
            }
            fn to_stored(object: Arc<Self>, _snapshot: &Snapshot) -> Arc<Self> {
                object
            }
            fn index(snapshot: &mut Snapshot, key: &str, object: &Self, present: bool) {
                let index: fn(&mut Snapshot, &str, &Self, bool) = $index;
                index(snapshot, key, object, present)
            }
        }
    };
}

impl Cached for Pod {
    const KIND: Kind = Kind::Pod;
    const REVISED: bool = false;
    type Stored = CachedPod;
    fn objects(store: &Store) -> &Objects<CachedPod> {
        &store.pods
    }
    fn objects_mut(store: &mut Store) -> &mut Objects<CachedPod> {
        &mut store.pods
    }
    fn to_stored(pod: Arc<Pod>, snapshot: &Snapshot) -> Arc<CachedPod> {
        Arc::new(snapshot.cache_pod(&pod))
    }
    fn index(snapshot: &mut Snapshot, key: &str, pod: &CachedPod, present: bool) {
        index_pod(snapshot, key, pod, present)
    }
}

cached!(Node, Node, nodes, index_node);
cached!(PodDisruptionBudget, PodDisruptionBudget, pdbs);
cached!(DaemonSet, DaemonSet, daemonsets);
cached!(NodePool, NodePool, nodepools);
cached!(NodeClaim, NodeClaim, nodeclaims, index_nodeclaim);
cached!(EC2NodeClass, EC2NodeClass, nodeclasses);
cached!(VolumeAttachment, VolumeAttachment, volume_attachments);
cached!(
    PersistentVolumeClaim,
    PersistentVolumeClaim,
    persistent_volume_claims
);

/// Adds `item` to, or removes it from, the set under `key`; an emptied set is dropped.
fn set_member(map: &mut OrdMap<String, OrdSet<String>>, key: &str, item: &str, present: bool) {
    if present {
        map.entry(key.to_string())
            .or_default()
            .insert(item.to_string());
    } else if let Some(set) = map.get_mut(key) {
        set.remove(item);
        if set.is_empty() {
            map.remove(key);
        }
    }
}

/// Sets or removes `key → value`, removing only the entry that still points at `value`.
fn unique(map: &mut OrdMap<String, String>, key: &str, value: &str, present: bool) {
    if present {
        map.insert(key.to_string(), value.to_string());
    } else if map.get(key).is_some_and(|v| v == value) {
        map.remove(key);
    }
}

/// Counts `item` in (`present`) or out of `held`, forgetting it when no pod holds it.
fn hold<T: Clone + Eq + std::hash::Hash>(
    held: &mut imbl::HashMap<T, usize>,
    item: &T,
    present: bool,
) {
    if present {
        *held.entry(item.clone()).or_insert(0) += 1;
    } else if let Some(count) = held.get_mut(item) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            held.remove(item);
        }
    }
}

fn index_pod(snapshot: &mut Snapshot, key: &str, pod: &CachedPod, present: bool) {
    hold(&mut snapshot.pod_shapes, &pod.shape, present);
    if let Ok(sim) = pod.sim.as_ref() {
        hold(&mut snapshot.pod_requests, &sim.requests, present);
        hold(&mut snapshot.pod_constraints, &sim.constraints, present);
    }
    if crate::controllers::provisioner::is_provisionable(pod) {
        if present {
            snapshot.provisionable_pods.insert(key.to_string());
        } else {
            snapshot.provisionable_pods.remove(key);
        }
    }
    match pod.node_name.as_deref() {
        Some(node) => {
            set_member(&mut snapshot.pods_by_node, node, key, present);
            if snapshot.pods_by_node.contains_key(node) {
                snapshot
                    .pod_revisions
                    .insert(node.to_string(), super::revisions::next());
            } else {
                snapshot.pod_revisions.remove(node);
            }
            if counts_as_pod_event(pod) {
                let uid = fnv1a64(pod.uid.as_deref().unwrap_or_default().as_bytes());
                count_pod_event(&mut snapshot.pod_event_sets, node, uid, present);
            }
        }
        None => {
            if !pod.is_terminal() && !pod.is_terminating() {
                if present {
                    snapshot.pending_pods.insert(key.to_string());
                } else {
                    snapshot.pending_pods.remove(key);
                }
            }
        }
    }
}

/// Adds a pod's UID hash to (`present`), or takes it from, `node`'s pod-event set; an emptied
/// set is dropped.
fn count_pod_event(sets: &mut OrdMap<String, PodEventSet>, node: &str, uid: u64, present: bool) {
    if present {
        let set = sets.entry(node.to_string()).or_default();
        set.pods += 1;
        set.uid_hashes = set.uid_hashes.wrapping_add(uid);
    } else if let Some(set) = sets.get_mut(node) {
        set.pods = set.pods.saturating_sub(1);
        set.uid_hashes = set.uid_hashes.wrapping_sub(uid);
        if set.pods == 0 {
            sets.remove(node);
        }
    }
}

fn index_nodeclaim(snapshot: &mut Snapshot, name: &str, claim: &NodeClaim, present: bool) {
    if let Some(pool) = claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_NODEPOOL))
    {
        set_member(&mut snapshot.nodeclaims_by_nodepool, pool, name, present);
        if claim.metadata.deletion_timestamp.is_none() {
            let usage = super::pool_usage::claim_usage(claim);
            let counted = snapshot.nodepool_usage.entry(pool.clone()).or_default();
            counted.count(&usage, present);
            if counted.is_empty() {
                snapshot.nodepool_usage.remove(pool);
            }
        }
    }
    if let Some(id) = claim.status.as_ref().and_then(|s| s.provider_id.as_deref()) {
        unique(&mut snapshot.nodeclaim_by_provider_id, id, name, present);
        if let Some(instance) = instance_id_from_provider_id(id) {
            unique(
                &mut snapshot.nodeclaim_by_instance_id,
                instance,
                name,
                present,
            );
        }
    }
    let deleting = claim.metadata.deletion_timestamp.is_some()
        || claim.is_true(driftwood_api::wellknown::CONDITION_INSTANCE_TERMINATING);
    if deleting && present {
        snapshot.deleting_nodeclaims.insert(name.to_string());
    } else if deleting {
        snapshot.deleting_nodeclaims.remove(name);
    }
    if claim.metadata.deletion_timestamp.is_none() {
        if let Some(at) = expires_at(claim) {
            let entry = (at, name.to_string());
            if present {
                snapshot.expiring_nodeclaims.insert(entry);
            } else {
                snapshot.expiring_nodeclaims.remove(&entry);
            }
        }
        if !claim.is_true(driftwood_api::wellknown::CONDITION_INITIALIZED) {
            if present {
                snapshot.initializing_nodeclaims.insert(name.to_string());
            } else {
                snapshot.initializing_nodeclaims.remove(name);
            }
        }
    }
}

/// When `claim` expires (UTC seconds): its creation plus `expireAfter`; None without either, or
/// with `expireAfter: Never` (or one that does not parse, which validation refuses).
pub fn expires_at(claim: &NodeClaim) -> Option<i64> {
    let expire = claim
        .spec
        .expire_after
        .as_ref()
        .and_then(|e| e.seconds().ok().flatten())?;
    let created = claim.metadata.creation_timestamp.as_ref()?.0.as_second();
    Some(created.saturating_add(i64::try_from(expire).unwrap_or(i64::MAX)))
}

fn index_node(snapshot: &mut Snapshot, name: &str, node: &Node, present: bool) {
    if let Some(id) = node.spec.as_ref().and_then(|s| s.provider_id.as_deref()) {
        unique(&mut snapshot.node_by_provider_id, id, name, present);
    }
    if node.metadata.deletion_timestamp.is_some() {
        if present {
            snapshot.deleting_nodes.insert(name.to_string());
        } else {
            snapshot.deleting_nodes.remove(name);
        }
    }
}

impl Snapshot {
    /// A snapshot of `store` with its indexes built (tests, and a store assembled by hand).
    pub fn new(store: Store) -> Self {
        let mut snapshot = Self::default();
        snapshot.restore::<Node>(store.nodes);
        snapshot.restore::<Pod>(store.pods);
        snapshot.restore::<PodDisruptionBudget>(store.pdbs);
        snapshot.restore::<DaemonSet>(store.daemonsets);
        snapshot.restore::<NodePool>(store.nodepools);
        snapshot.restore::<NodeClaim>(store.nodeclaims);
        snapshot.restore::<EC2NodeClass>(store.nodeclasses);
        snapshot.restore::<VolumeAttachment>(store.volume_attachments);
        snapshot.restore::<PersistentVolumeClaim>(store.persistent_volume_claims);
        snapshot
    }

    /// Stores what the cache keeps of `object` under `key`, replacing the index entries of the
    /// object it replaces; returns what it stored.
    pub fn apply<K: Cached>(&mut self, key: ObjectKey, object: Arc<K>) -> Arc<K::Stored> {
        let stored = K::to_stored(object, self);
        self.apply_stored::<K>(key, Arc::clone(&stored));
        stored
    }

    fn apply_stored<K: Cached>(&mut self, key: ObjectKey, object: Arc<K::Stored>) {
        self.changes[K::KIND.position()] += 1;
        if K::REVISED {
            self.revisions[K::KIND.position()].insert(key.clone(), super::revisions::next());
        }
        let was_provisionable = self.provisionable_pods.contains(&key);
        let old = K::objects_mut(&mut self.store).insert(key.clone(), object.clone());
        if let Some(old) = old {
            K::index(self, &key, &old, false);
        }
        K::index(self, &key, &object, true);
        if !was_provisionable && self.provisionable_pods.contains(&key) {
            self.provisionable_arrivals += 1;
        }
    }

    /// What the cache keeps of `pod`: its shape, scheduling constraints and requests shared
    /// with the pods already held whose are equal.
    pub fn cache_pod(&self, pod: &Pod) -> CachedPod {
        let mut cached = CachedPod::new(pod, |shape| {
            self.pod_shapes
                .get_key_value(&shape)
                .map_or_else(|| Arc::new(shape), |(held, _)| Arc::clone(held))
        });
        match Arc::get_mut(&mut cached.sim) {
            Some(Ok(sim)) => {
                if let Some((held, _)) = self.pod_constraints.get_key_value(&sim.constraints) {
                    sim.constraints = held.clone();
                }
                if let Some((held, _)) = self.pod_requests.get_key_value(&sim.requests) {
                    sim.requests = Arc::clone(held);
                }
            }
            Some(Err(error)) => tracing::debug!(%error, "pod left out of scheduling simulations"),
            None => {}
        }
        cached
    }

    /// Forgets the object under `key` and its index entries.
    pub fn delete<K: Cached>(&mut self, key: &str) {
        if let Some(old) = K::objects_mut(&mut self.store).remove(key) {
            self.changes[K::KIND.position()] += 1;
            self.revisions[K::KIND.position()].remove(key);
            K::index(self, key, &old, false);
        }
    }

    /// How many changes objects of `kind` have seen in this cache (stored, replaced, removed,
    /// relisted): equal numbers, no change.
    pub fn changes_of(&self, kind: Kind) -> u64 {
        self.changes[kind.position()]
    }

    /// [`Snapshot::changes_of`] for each of `kinds`: a wake signature for a controller that
    /// reads only those kinds.
    pub fn changes_of_kinds(&self, kinds: &[Kind]) -> Vec<u64> {
        kinds.iter().map(|&kind| self.changes_of(kind)).collect()
    }

    /// Replaces every object of kind `K` (after a relist).
    pub fn reset<K: Cached>(&mut self, objects: Objects<K>) {
        self.clear::<K>();
        for (key, object) in objects {
            self.apply(key, object);
        }
    }

    /// Replaces every object of kind `K` with objects as the cache keeps them.
    fn restore<K: Cached>(&mut self, objects: Objects<K::Stored>) {
        self.clear::<K>();
        for (key, object) in objects {
            self.apply_stored::<K>(key, object);
        }
    }

    fn clear<K: Cached>(&mut self) {
        self.changes[K::KIND.position()] += 1;
        self.revisions[K::KIND.position()] = Revisions::new();
        let old = std::mem::take(K::objects_mut(&mut self.store));
        for (key, object) in &old {
            K::index(self, key, object, false);
        }
    }

    /// The objects of kind `K` now with their revisions, to find later which changed
    /// ([`Tracked::changes_since`]). Not for Pods, which have no revisions.
    pub fn tracked<K: Cached>(&self) -> Tracked<K::Stored> {
        debug_assert!(K::REVISED, "{:?} objects carry no revisions", K::KIND);
        Tracked::new(
            K::objects(&self.store).clone(),
            self.revisions[K::KIND.position()].clone(),
        )
    }

    pub fn nodepool(&self, name: &str) -> Option<&Arc<NodePool>> {
        self.store.nodepools.get(name)
    }

    pub fn nodeclass(&self, name: &str) -> Option<&Arc<EC2NodeClass>> {
        self.store.nodeclasses.get(name)
    }

    /// The Node of a NodeClaim: by providerID, else by status.nodeName (a Node of another
    /// providerID is not its Node).
    pub fn node_of(&self, claim: &NodeClaim) -> Option<&Arc<Node>> {
        let status = claim.status.as_ref()?;
        if let Some(node) = status
            .provider_id
            .as_ref()
            .and_then(|id| self.node_by_provider_id.get(id))
            .and_then(|name| self.store.nodes.get(name))
        {
            return Some(node);
        }
        // By name only while that Node names no other machine: EC2 gives a terminated
        // instance's address, and so its `ip-…` name, to a later launch, and the Node of that
        // name is then another NodeClaim's (terminating this claim must not delete it).
        let node = self.store.nodes.get(status.node_name.as_ref()?)?;
        let other_machine = node
            .spec
            .as_ref()
            .and_then(|spec| spec.provider_id.as_ref())
            .is_some_and(|id| status.provider_id.as_ref() != Some(id));
        (!other_machine).then_some(node)
    }

    /// The NodeClaim of a Node, by providerID.
    pub fn nodeclaim_of(&self, node: &Node) -> Option<&Arc<NodeClaim>> {
        let id = node.spec.as_ref()?.provider_id.as_ref()?;
        self.nodeclaim_by_provider_id
            .get(id)
            .and_then(|name| self.store.nodeclaims.get(name))
    }

    /// Every PodDisruptionBudget, as the disruption planners take them.
    pub fn pdb_list(&self) -> Vec<k8s_openapi::api::policy::v1::PodDisruptionBudget> {
        self.store.pdbs.values().map(|p| (**p).clone()).collect()
    }

    /// The NodeClaim whose instance is `instance_id` (`i-…`).
    pub fn nodeclaim_by_instance(&self, instance_id: &str) -> Option<&Arc<NodeClaim>> {
        self.nodeclaim_by_instance_id
            .get(instance_id)
            .and_then(|name| self.store.nodeclaims.get(name))
    }

    /// The Nodes being deleted, as Karpenter's cluster state marks them: the Node of a
    /// NodeClaim being deleted, and a Node without a NodeClaim that has a deletionTimestamp.
    pub fn deleting_node_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .deleting_nodeclaims
            .iter()
            .filter_map(|claim| self.store.nodeclaims.get(claim))
            .filter_map(|claim| self.node_of(claim))
            .filter_map(|node| node.metadata.name.clone())
            .collect();
        names.extend(
            self.deleting_nodes
                .iter()
                .filter(|name| {
                    self.store
                        .nodes
                        .get(*name)
                        .is_some_and(|node| self.nodeclaim_of(node).is_none())
                })
                .cloned(),
        );
        names.sort();
        names.dedup();
        names
    }

    /// The scheduling facts of the pod under `key`, converted when the pod was last seen.
    pub fn sim_pod(&self, key: &str) -> Option<&Result<SimPod, PodConversionError>> {
        self.store.pods.get(key).map(|pod| pod.sim.as_ref())
    }

    /// The pods bound to `node`.
    pub fn pods_on(&self, node: &str) -> Vec<&Arc<CachedPod>> {
        self.pods_by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|key| self.store.pods.get(key))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, node: Option<&str>, phase: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [{"name": "c"}], "nodeName": node},
                "status": {"phase": phase}
            }))
            .unwrap(),
        )
    }

    fn set(items: &[&str]) -> OrdSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn node(name: &str, provider_id: &str) -> Arc<Node> {
        Arc::new(
            serde_json::from_value(
                json!({"metadata": {"name": name}, "spec": {"providerID": provider_id}}),
            )
            .unwrap(),
        )
    }

    fn claim(name: &str, pool: &str, provider_id: Option<&str>) -> Arc<NodeClaim> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool}},
                "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []},
                "status": {"providerID": provider_id}
            }))
            .unwrap(),
        )
    }

    /// A NodeClaim whose instance is gone is not the NodeClaim of a later instance that got its
    /// address and so its node name; one whose Node has no providerID yet is found by name.
    #[test]
    fn a_nodeclaim_is_not_the_owner_of_a_namesake_node() {
        let mut store = Store::default();
        let with_name = |claim: Arc<NodeClaim>, node: &str| {
            let mut claim = (*claim).clone();
            claim.status.as_mut().unwrap().node_name = Some(node.into());
            Arc::new(claim)
        };
        let old = with_name(claim("old", "p", Some("aws:///z/i-old")), "ip-a");
        let new = with_name(claim("new", "p", Some("aws:///z/i-new")), "ip-a");
        store
            .nodes
            .insert("ip-a".into(), node("ip-a", "aws:///z/i-new"));
        store.nodeclaims.insert("old".into(), old.clone());
        store.nodeclaims.insert("new".into(), new.clone());
        let snapshot = Snapshot::new(store.clone());
        assert!(snapshot.node_of(&old).is_none(), "ip-a is i-new's now");
        assert_eq!(
            snapshot
                .node_of(&new)
                .and_then(|n| n.metadata.name.as_deref()),
            Some("ip-a")
        );
        // A Node not carrying a providerID yet is still found by name.
        let bare: Arc<Node> =
            Arc::new(serde_json::from_value(json!({"metadata": {"name": "ip-a"}})).unwrap());
        store.nodes.insert("ip-a".into(), bare);
        let snapshot = Snapshot::new(store);
        assert!(snapshot.node_of(&old).is_some());
    }

    /// The indexes a full rebuild gives for the same objects.
    fn rebuilt(snapshot: &Snapshot) -> Snapshot {
        Snapshot::new(snapshot.store.clone())
    }

    fn assert_indexes_match_rebuild(snapshot: &Snapshot) {
        let fresh = rebuilt(snapshot);
        assert_eq!(snapshot.pods_by_node, fresh.pods_by_node);
        assert!(snapshot.pod_revisions.keys().eq(fresh.pods_by_node.keys()));
        assert_eq!(snapshot.pod_event_sets, fresh.pod_event_sets);
        assert_eq!(snapshot.pending_pods, fresh.pending_pods);
        assert_eq!(snapshot.provisionable_pods, fresh.provisionable_pods);
        assert_eq!(
            snapshot.nodeclaims_by_nodepool,
            fresh.nodeclaims_by_nodepool
        );
        assert_eq!(
            snapshot.nodeclaim_by_provider_id,
            fresh.nodeclaim_by_provider_id
        );
        assert_eq!(snapshot.node_by_provider_id, fresh.node_by_provider_id);
        assert_eq!(
            snapshot.nodeclaim_by_instance_id,
            fresh.nodeclaim_by_instance_id
        );
        assert_eq!(snapshot.deleting_nodeclaims, fresh.deleting_nodeclaims);
        assert_eq!(snapshot.deleting_nodes, fresh.deleting_nodes);
        assert_eq!(snapshot.expiring_nodeclaims, fresh.expiring_nodeclaims);
        assert_eq!(
            snapshot.initializing_nodeclaims,
            fresh.initializing_nodeclaims
        );
        assert_eq!(snapshot.pod_shapes, fresh.pod_shapes);
        assert_eq!(snapshot.pod_requests, fresh.pod_requests);
        assert_eq!(snapshot.pod_constraints, fresh.pod_constraints);
    }

    fn deleted<K: Clone + serde::Serialize + serde::de::DeserializeOwned>(object: &K) -> Arc<K> {
        let mut value = serde_json::to_value(object).unwrap();
        value["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        Arc::new(serde_json::from_value(value).unwrap())
    }

    fn web_pod(name: &str, hash: &str, cpu: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default",
                             "labels": {"app": "web", "pod-template-hash": hash}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
                         "nodeName": "n1",
                         "topologySpreadConstraints": [{"maxSkew": 1,
                             "topologyKey": "topology.kubernetes.io/zone",
                             "whenUnsatisfiable": "DoNotSchedule",
                             "labelSelector": {"matchLabels": {"app": "web"}}}]}
            }))
            .unwrap(),
        )
    }

    /// Each pod is converted for the simulation when it is applied, not on every pass: the
    /// conversion is the one `SimPod::from_pod` gives; pods of one ReplicaSet share one copy
    /// of their constraints, held as long as a pod carries it; a pod that does not convert
    /// keeps its error naming the field; the index matches a rebuild after every change.
    #[test]
    fn pods_are_converted_per_event_and_a_workloads_pods_share_their_constraints() {
        let mut s = Snapshot::default();
        s.apply("default/web-1".into(), web_pod("web-1", "abc", "100m"));
        s.apply("default/web-2".into(), web_pod("web-2", "abc", "200m"));
        s.apply("default/web-3".into(), web_pod("web-3", "def", "100m"));
        let sim = |s: &Snapshot, key: &str| s.sim_pod(key).unwrap().clone().unwrap();
        assert_eq!(
            sim(&s, "default/web-1"),
            SimPod::from_pod(&web_pod("web-1", "abc", "100m")).unwrap()
        );
        let (one, two, three) = (
            sim(&s, "default/web-1"),
            sim(&s, "default/web-2"),
            sim(&s, "default/web-3"),
        );
        assert!(Shared::same(&one.constraints, &two.constraints));
        assert!(!Shared::same(&one.constraints, &three.constraints));
        assert_eq!(s.pod_constraints.len(), 2);
        assert_eq!(s.pod_constraints.get(&one.constraints), Some(&2));
        assert_indexes_match_rebuild(&s);

        // What the pods of one workload share is held once: the shape (labels, owners,
        // requests…) of two equal pods, and the scheduling requests of pods of equal size.
        s.apply("default/web-4".into(), web_pod("web-4", "abc", "100m"));
        let shape = |s: &Snapshot, key: &str| Arc::clone(&s.store.pods.get(key).unwrap().shape);
        assert!(Arc::ptr_eq(
            &shape(&s, "default/web-1"),
            &shape(&s, "default/web-4")
        ));
        assert!(!Arc::ptr_eq(
            &shape(&s, "default/web-1"),
            &shape(&s, "default/web-2")
        ));
        assert_eq!(s.pod_shapes.get(&shape(&s, "default/web-1")), Some(&2));
        assert_eq!(s.pod_shapes.len(), 3);
        assert!(Arc::ptr_eq(&one.requests, &three.requests));
        assert!(Arc::ptr_eq(
            &one.requests,
            &sim(&s, "default/web-4").requests
        ));
        assert!(!Arc::ptr_eq(&one.requests, &two.requests));
        assert_eq!(s.pod_requests.get(&one.requests), Some(&3));
        assert_indexes_match_rebuild(&s);
        s.delete::<Pod>("default/web-4");
        assert_eq!(s.pod_shapes.get(&shape(&s, "default/web-1")), Some(&1));
        assert_eq!(s.pod_requests.get(&one.requests), Some(&2));

        // A new version of a pod is converted again; its old constraints are let go.
        s.apply("default/web-3".into(), web_pod("web-3", "abc", "300m"));
        assert!(Shared::same(
            &sim(&s, "default/web-3").constraints,
            &one.constraints
        ));
        assert_eq!(s.pod_constraints.len(), 1);
        assert_eq!(s.pod_constraints.get(&one.constraints), Some(&3));
        s.delete::<Pod>("default/web-1");
        s.delete::<Pod>("default/web-2");
        assert!(s.sim_pod("default/web-1").is_none());
        assert_eq!(s.pod_constraints.get(&one.constraints), Some(&1));
        assert_indexes_match_rebuild(&s);

        let mut bad = (*pod("bad", Some("n1"), "Running")).clone();
        bad.spec.as_mut().unwrap().containers[0].resources =
            Some(serde_json::from_value(json!({"requests": {"cpu": "lots"}})).unwrap());
        s.apply("default/bad".into(), Arc::new(bad));
        let error = s.sim_pod("default/bad").unwrap().clone().unwrap_err();
        assert_eq!(error.pod, "default/bad");
        assert!(error.field.contains("resources"), "{error}");
        assert_indexes_match_rebuild(&s);
        s.delete::<Pod>("default/web-3");
        s.delete::<Pod>("default/bad");
        assert!(s.store.pods.is_empty());
        assert!(s.pod_constraints.is_empty() && s.pod_shapes.is_empty());
        assert!(s.pod_requests.is_empty());
    }

    /// Each kind counts its own changes: storing, replacing and removing an object moves its
    /// kind's count and no other's; removing what is not there, or a relist, is counted as the
    /// cache saw it.
    #[test]
    fn each_kind_counts_only_its_own_changes() {
        assert!(
            Kind::ALL
                .iter()
                .enumerate()
                .all(|(at, kind)| kind.position() == at)
        );
        let mut s = Snapshot::default();
        s.apply("default/p".into(), pod("p", Some("n1"), "Running"));
        s.apply("default/p".into(), pod("p", Some("n1"), "Succeeded"));
        assert_eq!(s.changes_of(Kind::Pod), 2);
        assert_eq!(s.changes_of(Kind::NodeClaim), 0);
        s.apply("c1".into(), claim("c1", "default", Some("aws:///z/i-1")));
        assert_eq!(
            (s.changes_of(Kind::Pod), s.changes_of(Kind::NodeClaim)),
            (2, 1)
        );
        s.delete::<NodeClaim>("c1");
        s.delete::<NodeClaim>("c1");
        assert_eq!(s.changes_of(Kind::NodeClaim), 2);
        s.delete::<Pod>("default/p");
        assert_eq!(s.changes_of(Kind::Pod), 3);
        s.reset::<NodeClaim>(Objects::default());
        assert_eq!(s.changes_of(Kind::NodeClaim), 3);
        assert_eq!(s.changes_of(Kind::Node), 0);
    }

    /// Instances are found by the ID an interruption message names; a NodeClaim being deleted
    /// marks its Node deleting, and a Node being deleted without a NodeClaim is deleting too;
    /// each index follows the object's updates and removal.
    #[test]
    fn instances_and_deleting_nodes_are_indexed_per_event() {
        let mut s = Snapshot::default();
        s.apply(
            "nc1".into(),
            claim("nc1", "a", Some("aws:///us-west-2a/i-0abc")),
        );
        s.apply("n1".into(), node("n1", "aws:///us-west-2a/i-0abc"));
        s.apply("n2".into(), node("n2", "aws:///us-west-2b/i-0def"));
        assert_eq!(
            s.nodeclaim_by_instance("i-0abc")
                .and_then(|c| c.metadata.name.clone()),
            Some("nc1".to_string())
        );
        assert!(s.deleting_node_names().is_empty());
        let claim_now = s.store.nodeclaims["nc1"].clone();
        s.apply("nc1".into(), deleted(&*claim_now));
        let node_now = s.store.nodes["n2"].clone();
        s.apply("n2".into(), deleted(&*node_now));
        assert_eq!(s.deleting_node_names(), vec!["n1", "n2"]);
        assert_indexes_match_rebuild(&s);
        s.delete::<NodeClaim>("nc1");
        assert!(s.nodeclaim_by_instance("i-0abc").is_none());
        assert_eq!(s.deleting_node_names(), vec!["n2"]);
        s.delete::<Node>("n2");
        assert!(s.deleting_node_names().is_empty());
        assert_indexes_match_rebuild(&s);
        assert_eq!(
            instance_id_from_provider_id("aws:///us-west-2a/i-0abc"),
            Some("i-0abc")
        );
        assert_eq!(
            instance_id_from_provider_id("kind://docker/kind/node"),
            None
        );
        assert_eq!(instance_id_from_provider_id("aws:///us-west-2a/"), None);
    }

    #[test]
    fn a_pod_moves_from_pending_to_its_node_and_leaves_with_its_deletion() {
        let mut s = Snapshot::default();
        s.apply("default/a".into(), pod("a", None, "Pending"));
        assert_eq!(s.pending_pods, set(&["default/a"]));
        s.apply("default/a".into(), pod("a", Some("n1"), "Running"));
        assert!(s.pending_pods.is_empty());
        assert_eq!(s.pods_by_node["n1"], set(&["default/a"]));
        s.delete::<Pod>("default/a");
        // An emptied entry is dropped, not left behind as an empty set.
        assert!(s.pods_by_node.is_empty());
        assert!(s.store.pods.is_empty());
        // Deleting what is not there changes nothing.
        s.delete::<Pod>("default/a");
        assert_indexes_match_rebuild(&s);
    }

    fn unschedulable(name: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [{"name": "c"}]},
                "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
            }))
            .unwrap(),
        )
    }

    #[test]
    fn provisionable_pods_are_indexed_and_each_arrival_counted_once() {
        let mut s = Snapshot::default();
        s.apply("default/a".into(), pod("a", None, "Pending"));
        assert!(s.provisionable_pods.is_empty());
        s.apply("default/a".into(), unschedulable("a"));
        assert_eq!(s.provisionable_pods, set(&["default/a"]));
        assert_eq!(s.provisionable_arrivals, 1);
        // Rewritten while still waiting: not a new arrival.
        s.apply("default/a".into(), unschedulable("a"));
        assert_eq!(s.provisionable_arrivals, 1);
        s.apply("default/a".into(), pod("a", Some("n1"), "Running"));
        assert!(s.provisionable_pods.is_empty());
        s.apply("default/b".into(), unschedulable("b"));
        assert_eq!(s.provisionable_arrivals, 2);
        assert_indexes_match_rebuild(&s);
    }

    #[test]
    fn finished_pods_are_not_pending() {
        let mut s = Snapshot::default();
        s.apply("default/a".into(), pod("a", None, "Pending"));
        s.apply("default/a".into(), pod("a", None, "Succeeded"));
        assert!(s.pending_pods.is_empty());
        assert_eq!(s.store.pods.len(), 1);
    }

    #[test]
    fn a_relabelled_nodeclaim_moves_between_nodepools() {
        let mut s = Snapshot::default();
        s.apply("nc1".into(), claim("nc1", "a", None));
        s.apply("nc2".into(), claim("nc2", "a", None));
        s.apply("nc1".into(), claim("nc1", "b", Some("aws:///z/i-1")));
        assert_eq!(s.nodeclaims_by_nodepool["a"], set(&["nc2"]));
        assert_eq!(s.nodeclaims_by_nodepool["b"], set(&["nc1"]));
        assert_eq!(s.nodeclaim_by_provider_id["aws:///z/i-1"], "nc1");
        assert_indexes_match_rebuild(&s);
    }

    #[test]
    fn deleting_a_stale_holder_of_a_provider_id_keeps_the_current_one() {
        let mut s = Snapshot::default();
        s.apply("old".into(), node("old", "aws:///z/i-1"));
        s.apply("new".into(), node("new", "aws:///z/i-1"));
        s.delete::<Node>("old");
        assert_eq!(s.node_by_provider_id["aws:///z/i-1"], "new");
    }

    #[test]
    fn reset_replaces_a_kind_and_its_index_entries() {
        let mut s = Snapshot::default();
        s.apply("default/a".into(), pod("a", Some("n1"), "Running"));
        s.apply("default/b".into(), pod("b", None, "Pending"));
        s.apply("nc1".into(), claim("nc1", "a", None));
        let fresh: Objects<Pod> = [("default/c".to_string(), pod("c", Some("n2"), "Running"))]
            .into_iter()
            .collect();
        s.reset(fresh);
        assert_eq!(s.pods_by_node.keys().collect::<Vec<_>>(), vec!["n2"]);
        assert!(s.pending_pods.is_empty());
        // Other kinds are untouched.
        assert_eq!(s.nodeclaims_by_nodepool["a"], set(&["nc1"]));
        assert_indexes_match_rebuild(&s);
    }

    #[test]
    fn a_snapshot_does_not_see_later_events() {
        let mut s = Snapshot::default();
        s.apply("default/a".into(), pod("a", Some("n1"), "Running"));
        let before = s.clone();
        s.apply("default/b".into(), pod("b", Some("n1"), "Running"));
        s.delete::<Pod>("default/a");
        assert_eq!(before.pods_by_node["n1"], set(&["default/a"]));
        assert_eq!(before.store.pods.len(), 1);
        assert_eq!(s.pods_by_node["n1"], set(&["default/b"]));
    }

    #[test]
    fn generated_event_sequences_keep_the_indexes_equal_to_a_rebuild() {
        // A small xorshift generator: 2,000 events over few keys, so objects are added,
        // changed (moved between nodes, pools and provider ids) and deleted many times.
        let mut next = driftwood_scheduling::testkit::seeded(0x9E37_79B9_7F4A_7C15);
        let mut s = Snapshot::default();
        let mut before_claims = s.tracked::<NodeClaim>();
        let mut before_nodes = s.tracked::<Node>();
        for step in 0..2_000 {
            let i = next(12);
            match next(7) {
                0 => s.delete::<Pod>(&format!("default/p{i}")),
                1 => s.delete::<NodeClaim>(&format!("nc{i}")),
                2 => s.delete::<Node>(&format!("n{i}")),
                3 => {
                    let phase = ["Pending", "Running", "Succeeded"][next(3) as usize];
                    let node = format!("n{}", next(4));
                    let bound = (next(2) == 0).then_some(node.as_str());
                    let mut p = Pod::clone(&pod(&format!("p{i}"), bound, phase));
                    // A new UID now and then (the pod recreated under its name), a DaemonSet
                    // pod, a terminating one: the pod-event sets count only some of them.
                    p.metadata.uid = Some(format!("u{i}-{}", next(2)));
                    if next(4) == 0 {
                        p.metadata.owner_references = Some(vec![
                            serde_json::from_value(json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds", "controller": true})).unwrap(),
                        ]);
                    }
                    if next(4) == 0 {
                        p.metadata.deletion_timestamp =
                            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                                jiff::Timestamp::UNIX_EPOCH,
                            ));
                    }
                    s.apply(format!("default/p{i}"), Arc::new(p));
                }
                // Provider ids are unique per object here (duplicates have their own test).
                4 | 5 => {
                    let id = format!("aws:///z/i-{i}");
                    let pool = format!("pool{}", next(3));
                    let id = (next(3) > 0).then_some(id.as_str());
                    let mut c = NodeClaim::clone(&claim(&format!("nc{i}"), &pool, id));
                    // Created at one of a few times, with or without expireAfter (Never
                    // too), Initialized or not, being deleted or not: the expiry and
                    // lifecycle indexes hold some of them.
                    c.metadata.creation_timestamp = (next(4) > 0).then(|| {
                        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                            jiff::Timestamp::from_second(1_700_000_000 + 60 * next(5) as i64)
                                .unwrap(),
                        )
                    });
                    c.spec.expire_after = match next(4) {
                        0 => None,
                        1 => Some(driftwood_api::duration::NillableDuration("Never".into())),
                        n => Some(driftwood_api::duration::NillableDuration(format!(
                            "{}h",
                            n * 12
                        ))),
                    };
                    if next(2) == 0 {
                        c.status.get_or_insert_with(Default::default).conditions = vec![
                            serde_json::from_value(json!({"type": "Initialized", "status": "True", "reason": "Initialized", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"})).unwrap(),
                        ];
                    }
                    if next(5) == 0 {
                        c.metadata.deletion_timestamp =
                            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                                jiff::Timestamp::UNIX_EPOCH,
                            ));
                    }
                    s.apply(format!("nc{i}"), Arc::new(c));
                }
                _ => {
                    let id = format!("aws:///z/i-{i}");
                    s.apply(format!("n{i}"), node(&format!("n{i}"), &id));
                }
            }
            if step % 50 == 0 {
                assert_indexes_match_rebuild(&s);
                assert_pod_event_sets_match_the_pods(&s);
                assert_changes_are_what_was_stored_since(&before_claims, &s.tracked::<NodeClaim>());
                assert_changes_are_what_was_stored_since(&before_nodes, &s.tracked::<Node>());
                before_claims = s.tracked::<NodeClaim>();
                before_nodes = s.tracked::<Node>();
            }
        }
        assert_indexes_match_rebuild(&s);
        assert_pod_event_sets_match_the_pods(&s);
    }

    /// The changes between two moments are exactly the objects added, removed or stored anew
    /// (a different allocation) between them, each with its old and new object.
    fn assert_changes_are_what_was_stored_since<T: std::fmt::Debug>(
        before: &Tracked<T>,
        after: &Tracked<T>,
    ) {
        let keys: std::collections::BTreeSet<&String> =
            before.objects.keys().chain(after.objects.keys()).collect();
        let mut expected = Vec::new();
        for key in keys {
            let (old, new) = (before.objects.get(key), after.objects.get(key));
            let same = matches!((old, new), (Some(a), Some(b)) if Arc::ptr_eq(a, b));
            if !same {
                expected.push((key.clone(), old.map(Arc::as_ptr), new.map(Arc::as_ptr)));
            }
        }
        let found: Vec<_> = after
            .changes_since(before)
            .map(|c| {
                (
                    c.key().clone(),
                    c.before().map(Arc::as_ptr),
                    c.after().map(Arc::as_ptr),
                )
            })
            .collect();
        assert_eq!(found, expected);
    }

    /// Each node's pod-event set worked out afresh from the pods bound to it.
    fn assert_pod_event_sets_match_the_pods(s: &Snapshot) {
        let mut fresh = OrdMap::new();
        for node in s.pods_by_node.keys() {
            let mut set = PodEventSet::default();
            for pod in s.pods_on(node) {
                if !pod.is_daemonset() && !pod.is_terminating() && !pod.is_terminal() {
                    set.pods += 1;
                    set.uid_hashes = set
                        .uid_hashes
                        .wrapping_add(fnv1a64(pod.uid.as_deref().unwrap().as_bytes()));
                }
            }
            if set.pods > 0 {
                fresh.insert(node.clone(), set);
            }
        }
        assert_eq!(s.pod_event_sets, fresh);
    }

    /// Karpenter's pod events controller: a pod bound to a node, or leaving it, is an event; a
    /// DaemonSet pod, a finished or terminating pod is not. The signature moves with the set
    /// and comes back to what it was when the set does.
    #[test]
    fn a_nodes_pod_event_signature_moves_with_its_pods() {
        let mut s = Snapshot::default();
        let signature = |s: &Snapshot| s.pod_event_sets.get("n1").map_or(0, |e| e.signature());
        let with_uid = |name: &str, phase: &str| {
            let mut p = Pod::clone(&pod(name, Some("n1"), phase));
            p.metadata.uid = Some(format!("uid-{name}"));
            Arc::new(p)
        };
        assert_eq!(signature(&s), 0);
        s.apply("default/a".into(), with_uid("a", "Running"));
        let one = signature(&s);
        assert_ne!(one, 0);
        s.apply("default/b".into(), with_uid("b", "Running"));
        let two = signature(&s);
        assert_ne!(two, one);
        // A status change of a pod already there is no event.
        s.apply("default/b".into(), with_uid("b", "Pending"));
        assert_eq!(signature(&s), two);
        // A DaemonSet pod is no event.
        let mut ds = Pod::clone(&with_uid("ds", "Running"));
        ds.metadata.owner_references = Some(vec![
            serde_json::from_value(json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds", "controller": true})).unwrap(),
        ]);
        s.apply("default/ds".into(), Arc::new(ds));
        assert_eq!(signature(&s), two);
        // b finishing is b leaving.
        s.apply("default/b".into(), with_uid("b", "Succeeded"));
        assert_eq!(signature(&s), one);
        s.delete::<Pod>("default/a");
        assert_eq!(signature(&s), 0);
        assert!(!s.pod_event_sets.contains_key("n1"));
    }

    #[test]
    fn indexes() {
        let mut store = Store::default();
        store.pods.insert(
            "default/a".into(),
            Arc::new(CachedPod::from(pod("a", Some("n1"), "Running").as_ref())),
        );
        store.pods.insert(
            "default/b".into(),
            Arc::new(CachedPod::from(pod("b", None, "Pending").as_ref())),
        );
        store.pods.insert(
            "default/c".into(),
            Arc::new(CachedPod::from(pod("c", None, "Succeeded").as_ref())),
        );
        let node: Node = serde_json::from_value(
            json!({"metadata": {"name": "n1"}, "spec": {"providerID": "aws:///z/i-1"}}),
        )
        .unwrap();
        store.nodes.insert("n1".into(), Arc::new(node));
        let claim: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "nc1", "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []},
            "status": {"providerID": "aws:///z/i-1"}
        }))
        .unwrap();
        store.nodeclaims.insert("nc1".into(), Arc::new(claim));
        let snapshot = Snapshot::new(store);
        assert_eq!(snapshot.pods_by_node["n1"], set(&["default/a"]));
        assert_eq!(snapshot.pending_pods, set(&["default/b"]));
        assert_eq!(snapshot.nodeclaims_by_nodepool["default"], set(&["nc1"]));
        let claim = snapshot.store.nodeclaims["nc1"].clone();
        assert_eq!(
            snapshot
                .node_of(&claim)
                .and_then(|n| n.metadata.name.clone())
                .as_deref(),
            Some("n1")
        );
        let node = snapshot.store.nodes["n1"].clone();
        assert_eq!(
            snapshot
                .nodeclaim_of(&node)
                .and_then(|c| c.metadata.name.clone())
                .as_deref(),
            Some("nc1")
        );
        assert_eq!(snapshot.pods_on("n1").len(), 1);
    }
}
