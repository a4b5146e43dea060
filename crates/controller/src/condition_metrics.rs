//! operatorpkg's status-condition and termination metrics, which Karpenter exports for its
//! NodeClaims, NodePools and Nodes and its AWS provider for EC2NodeClasses
//! (`operator_<kind>_status_condition_*`, `operator_<kind>_termination_*`, and the deprecated
//! kind-less `operator_status_condition_*` / `operator_termination_*` with `group` and `kind`).
//!
//! What an object's conditions are is read into a plain [`StatusView`] as watch events arrive;
//! [`transitions`] decides, purely, what a change counts as. Counters and histograms are fed
//! from those changes ([`ConditionMetrics::record`]); the per-object gauges (`count`,
//! `current_status_seconds`, `termination_current_time_seconds`) are written at scrape time
//! from the snapshot ([`encode_status_gauges`]), so none outlives its object.
//!
//! As in operatorpkg, a transition is a change of a condition's status (or a condition that was
//! not there before, which is also what every condition of an object seen for the first time
//! counts as, at start-up too); its histogram observes how long the previous status lasted, from
//! the previous lastTransitionTime to the new one.

use std::any::Any;
use std::collections::BTreeMap;

use driftwood_api::condition::{Condition, Conditions as _};
use driftwood_api::wellknown::{
    CONDITION_AMIS_READY, CONDITION_INITIALIZED, CONDITION_INSTANCE_PROFILE_READY,
    CONDITION_LAUNCHED, CONDITION_NODECLASS_READY, CONDITION_READY, CONDITION_REGISTERED,
    CONDITION_SECURITY_GROUPS_READY, CONDITION_SUBNETS_READY, CONDITION_VALIDATION_SUCCEEDED,
    LABEL_EC2NODECLASS, LABEL_NODE_INITIALIZED, LABEL_NODEPOOL,
};
use driftwood_api::{EC2NodeClass, NodeClaim, NodePool};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use crate::metrics::{HistogramFamily, Labels};
use crate::state::Snapshot;
use driftwood_cloud::metric_registry::DeclaredRegistry;

/// The kinds whose conditions Karpenter's operatorpkg controllers observe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum StatusKind {
    NodeClaim,
    NodePool,
    Node,
    EC2NodeClass,
}

impl StatusKind {
    pub const ALL: [StatusKind; 4] = [
        StatusKind::NodeClaim,
        StatusKind::NodePool,
        StatusKind::Node,
        StatusKind::EC2NodeClass,
    ];

    /// The `<kind>` of `operator_<kind>_…`.
    pub fn metric_kind(self) -> &'static str {
        match self {
            StatusKind::NodeClaim => "nodeclaim",
            StatusKind::NodePool => "nodepool",
            StatusKind::Node => "node",
            StatusKind::EC2NodeClass => "ec2nodeclass",
        }
    }

    /// API group and kind, the deprecated metrics' `group` and `kind` labels.
    fn group_kind(self) -> (&'static str, &'static str) {
        match self {
            StatusKind::NodeClaim => ("karpenter.sh", "NodeClaim"),
            StatusKind::NodePool => ("karpenter.sh", "NodePool"),
            StatusKind::Node => ("", "Node"),
            StatusKind::EC2NodeClass => ("karpenter.k8s.aws", "EC2NodeClass"),
        }
    }

    /// The object labels Karpenter adds to this kind's metrics (`WithLabels`), as
    /// (label key, metric label name).
    fn object_labels(self) -> &'static [(&'static str, &'static str)] {
        match self {
            StatusKind::NodeClaim => &[
                (LABEL_EC2NODECLASS, "karpenter_k8s_aws_ec2nodeclass"),
                (LABEL_NODEPOOL, "karpenter_sh_nodepool"),
            ],
            StatusKind::Node => &[
                (LABEL_EC2NODECLASS, "karpenter_k8s_aws_ec2nodeclass"),
                (LABEL_NODE_INITIALIZED, "karpenter_sh_initialized"),
                (LABEL_NODEPOOL, "karpenter_sh_nodepool"),
            ],
            StatusKind::NodePool | StatusKind::EC2NodeClass => &[],
        }
    }

    /// The names of its counter and histograms: transitions (a counter, named without
    /// `_total` as the registry adds it), transition seconds, termination duration.
    fn family_names(self) -> [&'static str; 3] {
        match self {
            StatusKind::NodeClaim => [
                "operator_nodeclaim_status_condition_transitions",
                "operator_nodeclaim_status_condition_transition_seconds",
                "operator_nodeclaim_termination_duration_seconds",
            ],
            StatusKind::NodePool => [
                "operator_nodepool_status_condition_transitions",
                "operator_nodepool_status_condition_transition_seconds",
                "operator_nodepool_termination_duration_seconds",
            ],
            StatusKind::Node => [
                "operator_node_status_condition_transitions",
                "operator_node_status_condition_transition_seconds",
                "operator_node_termination_duration_seconds",
            ],
            StatusKind::EC2NodeClass => [
                "operator_ec2nodeclass_status_condition_transitions",
                "operator_ec2nodeclass_status_condition_transition_seconds",
                "operator_ec2nodeclass_termination_duration_seconds",
            ],
        }
    }

    /// The kind's dependent conditions (its root is `Ready`), as its `StatusConditions()` names
    /// them in Karpenter v1.14.1. operatorpkg reads a missing one as Unknown (reason
    /// `AwaitingReconciliation`) since the object's creation. Of the EC2NodeClass's, the
    /// placement-group and capacity-reservation conditions are left out: driftwood resolves
    /// neither, and they would read Unknown for ever. A Node's are the ones it has.
    fn dependent_conditions(self) -> &'static [&'static str] {
        match self {
            StatusKind::NodeClaim => &[
                CONDITION_LAUNCHED,
                CONDITION_REGISTERED,
                CONDITION_INITIALIZED,
            ],
            StatusKind::NodePool => &[CONDITION_VALIDATION_SUCCEEDED, CONDITION_NODECLASS_READY],
            StatusKind::EC2NodeClass => &[
                CONDITION_AMIS_READY,
                CONDITION_SUBNETS_READY,
                CONDITION_SECURITY_GROUPS_READY,
                CONDITION_INSTANCE_PROFILE_READY,
                CONDITION_VALIDATION_SUCCEEDED,
            ],
            StatusKind::Node => &[],
        }
    }

    /// Whether the kind also feeds the deprecated kind-less metrics (`EmitDeprecatedMetrics`:
    /// Karpenter's NodeClaim and NodePool controllers and the provider's EC2NodeClass one).
    fn emits_deprecated(self) -> bool {
        !matches!(self, StatusKind::Node)
    }

    /// Histograms: Karpenter gives its own kinds buckets of 0.5 s doubling to 8,192 s; the
    /// EC2NodeClass controller keeps client_golang's defaults.
    fn histogram(self) -> fn() -> Histogram {
        match self {
            StatusKind::EC2NodeClass => default_histogram,
            _ => karpenter_histogram,
        }
    }
}

/// The deprecated kind-less families' names, as [`StatusKind::family_names`].
const DEPRECATED_FAMILIES: [&str; 3] = [
    "operator_status_condition_transitions",
    "operator_status_condition_transition_seconds",
    "operator_termination_duration_seconds",
];

/// client_golang's `prometheus.DefBuckets`.
const DEFAULT_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

fn default_histogram() -> Histogram {
    Histogram::new(DEFAULT_BUCKETS)
}

fn karpenter_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.5, 2.0, 15))
}

/// One condition as the metrics read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionFact {
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub since: Option<Timestamp>,
}

/// What the metrics read of one object: who it is, its metric labels, its conditions and
/// whether it is being deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusView {
    pub kind: StatusKind,
    pub namespace: String,
    pub name: String,
    /// The kind's [`StatusKind::object_labels`], in that order, "" where the object has none.
    pub labels: Vec<(&'static str, String)>,
    pub conditions: Vec<ConditionFact>,
    pub deleting_since: Option<Timestamp>,
}

/// One condition's fields, as both Karpenter's and Kubernetes' condition types carry them.
fn fact(type_: &str, status: &str, reason: Option<&String>, time: Option<&Time>) -> ConditionFact {
    ConditionFact {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.cloned().unwrap_or_default(),
        since: time.map(|t| t.0),
    }
}

fn api_facts(conditions: &[Condition]) -> Vec<ConditionFact> {
    conditions
        .iter()
        .map(|c| {
            fact(
                &c.type_,
                &c.status,
                c.reason.as_ref(),
                c.last_transition_time.as_ref(),
            )
        })
        .collect()
}

fn node_facts(node: &Node) -> Vec<ConditionFact> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .map(|c| {
            fact(
                &c.type_,
                &c.status,
                c.reason.as_ref(),
                c.last_transition_time.as_ref(),
            )
        })
        .collect()
}

/// The reason operatorpkg gives a condition it fills in.
const AWAITING_RECONCILIATION: &str = "AwaitingReconciliation";

fn view(
    kind: StatusKind,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    mut conditions: Vec<ConditionFact>,
) -> StatusView {
    // As operatorpkg's `For`: the root and each dependent condition the object lacks reads
    // Unknown, a dependent since the object's creation (the root since the moment it is read,
    // which a view cannot know: no time).
    let created = meta.creation_timestamp.as_ref().map(|t| t.0);
    let missing: Vec<(&str, Option<Timestamp>)> = std::iter::once((CONDITION_READY, None))
        .chain(kind.dependent_conditions().iter().map(|t| (*t, created)))
        .filter(|(type_, _)| !conditions.iter().any(|c| c.type_ == *type_))
        .collect();
    conditions.extend(missing.into_iter().map(|(type_, since)| ConditionFact {
        type_: type_.to_string(),
        status: "Unknown".to_string(),
        reason: AWAITING_RECONCILIATION.to_string(),
        since,
    }));
    let labels = kind
        .object_labels()
        .iter()
        .map(|(key, name)| {
            let value = meta.labels.as_ref().and_then(|l| l.get(*key));
            (*name, value.cloned().unwrap_or_default())
        })
        .collect();
    StatusView {
        kind,
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        labels,
        conditions,
        deleting_since: meta.deletion_timestamp.as_ref().map(|t| t.0),
    }
}

/// The status view of a cached object of one of the [`StatusKind`]s, else `None`.
pub fn status_view_of<K: Any>(object: &K) -> Option<StatusView> {
    let object = object as &dyn Any;
    if let Some(claim) = object.downcast_ref::<NodeClaim>() {
        return Some(view(
            StatusKind::NodeClaim,
            &claim.metadata,
            api_facts(claim.conditions()),
        ));
    }
    if let Some(pool) = object.downcast_ref::<NodePool>() {
        return Some(view(
            StatusKind::NodePool,
            &pool.metadata,
            api_facts(pool.conditions()),
        ));
    }
    if let Some(class) = object.downcast_ref::<EC2NodeClass>() {
        return Some(view(
            StatusKind::EC2NodeClass,
            &class.metadata,
            api_facts(class.conditions()),
        ));
    }
    object
        .downcast_ref::<Node>()
        .map(|node| view(StatusKind::Node, &node.metadata, node_facts(node)))
}

/// A condition that transitioned: its new type, status and reason, and, when it was there
/// before, the status it left and for how long it had held it.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub previous: Option<(String, f64)>,
}

/// The transitions from `old` (None: an object not seen before) to `new`: every condition
/// whose status differs from what it was, or that was not there.
pub fn transitions(old: Option<&StatusView>, new: &StatusView) -> Vec<Transition> {
    new.conditions
        .iter()
        .filter_map(|condition| {
            let before = old.and_then(|o| o.conditions.iter().find(|c| c.type_ == condition.type_));
            if before.is_some_and(|b| b.status == condition.status) {
                return None;
            }
            let previous = before.map(|b| {
                let seconds = match (b.since, condition.since) {
                    (Some(from), Some(to)) => to.duration_since(from).as_secs_f64(),
                    _ => 0.0,
                };
                (b.status.clone(), seconds)
            });
            Some(Transition {
                type_: condition.type_.clone(),
                status: condition.status.clone(),
                reason: condition.reason.clone(),
                previous,
            })
        })
        .collect()
}

/// One kind's (or the deprecated kind-less) counter and histograms.
#[derive(Clone)]
struct KindFamilies {
    transitions: Family<Labels, Counter>,
    transition_seconds: HistogramFamily,
    termination_seconds: HistogramFamily,
}

impl KindFamilies {
    fn new(histogram: fn() -> Histogram) -> Self {
        Self {
            transitions: Family::default(),
            transition_seconds: Family::new_with_constructor(histogram),
            termination_seconds: Family::new_with_constructor(histogram),
        }
    }
}

/// The counters and histograms of every [`StatusKind`], plus the deprecated kind-less ones.
#[derive(Clone)]
pub struct ConditionMetrics {
    by_kind: BTreeMap<StatusKind, KindFamilies>,
    deprecated: KindFamilies,
}

impl std::fmt::Debug for ConditionMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConditionMetrics").finish_non_exhaustive()
    }
}

fn pairs(list: &[(&str, &str)]) -> Labels {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl ConditionMetrics {
    /// The families, registered in `registry`.
    pub fn register(registry: &mut DeclaredRegistry) -> Self {
        let metrics = Self {
            by_kind: StatusKind::ALL
                .into_iter()
                .map(|kind| (kind, KindFamilies::new(kind.histogram())))
                .collect(),
            deprecated: KindFamilies::new(default_histogram),
        };
        let families = metrics
            .by_kind
            .iter()
            .map(|(kind, f)| (kind.family_names(), f))
            .chain(std::iter::once((DEPRECATED_FAMILIES, &metrics.deprecated)));
        for ([transitions, transition_seconds, termination], f) in families {
            registry.metric(
                transitions,
                "The count of transitions of a given object, type and status.",
                f.transitions.clone(),
            );
            registry.metric(
                transition_seconds,
                "The amount of time a condition was in a given state before transitioning.",
                f.transition_seconds.clone(),
            );
            registry.metric(
                termination,
                "The amount of time taken by an object to terminate completely.",
                f.termination_seconds.clone(),
            );
        }
        metrics
    }

    /// Records a watched change of one object: `old` None for an object not seen before, `new`
    /// None for one that is gone (its termination is observed at `now` when it was being
    /// deleted).
    pub fn record(&self, old: Option<&StatusView>, new: Option<&StatusView>, now: Timestamp) {
        let Some(kind) = new.or(old).map(|v| v.kind) else {
            return;
        };
        let Some(families) = self.by_kind.get(&kind) else {
            return;
        };
        let (group, kind_name) = kind.group_kind();
        let deprecated = kind.emits_deprecated().then_some(&self.deprecated);
        let extra = |view: &StatusView| -> Vec<(&str, String)> {
            view.labels.iter().map(|(k, v)| (*k, v.clone())).collect()
        };
        match new {
            Some(new) => {
                for t in transitions(old, new) {
                    let mut labels = vec![
                        ("type", t.type_.clone()),
                        ("status", t.status.clone()),
                        ("reason", t.reason.clone()),
                    ];
                    let base = labels.clone();
                    labels.extend(extra(new));
                    families.transitions.get_or_create(&owned(&labels)).inc();
                    if let Some(d) = deprecated {
                        let mut labels = base;
                        labels.extend([
                            ("group", group.to_string()),
                            ("kind", kind_name.to_string()),
                        ]);
                        d.transitions.get_or_create(&owned(&labels)).inc();
                    }
                    let Some((status, seconds)) = t.previous else {
                        continue;
                    };
                    let mut labels = vec![("type", t.type_.clone()), ("status", status)];
                    let base = labels.clone();
                    labels.extend(extra(new));
                    families
                        .transition_seconds
                        .get_or_create(&owned(&labels))
                        .observe(seconds);
                    if let Some(d) = deprecated {
                        let mut labels = base;
                        labels.extend([
                            ("group", group.to_string()),
                            ("kind", kind_name.to_string()),
                        ]);
                        d.transition_seconds
                            .get_or_create(&owned(&labels))
                            .observe(seconds);
                    }
                }
            }
            None => {
                let Some(old) = old else { return };
                let Some(since) = old.deleting_since else {
                    return;
                };
                let seconds = now.duration_since(since).as_secs_f64().max(0.0);
                families
                    .termination_seconds
                    .get_or_create(&owned(&extra(old)))
                    .observe(seconds);
                if let Some(d) = deprecated {
                    d.termination_seconds
                        .get_or_create(&pairs(&[("group", group), ("kind", kind_name)]))
                        .observe(seconds);
                }
            }
        }
    }
}

fn owned(labels: &[(&str, String)]) -> Labels {
    labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// Every object of the [`StatusKind`]s in `snapshot`, as status views.
fn views(snapshot: &Snapshot) -> Vec<StatusView> {
    let store = &snapshot.store;
    let mut out = Vec::new();
    out.extend(
        store
            .nodeclaims
            .values()
            .filter_map(|o| status_view_of(o.as_ref())),
    );
    out.extend(
        store
            .nodepools
            .values()
            .filter_map(|o| status_view_of(o.as_ref())),
    );
    out.extend(
        store
            .nodes
            .values()
            .filter_map(|o| status_view_of(o.as_ref())),
    );
    out.extend(
        store
            .nodeclasses
            .values()
            .filter_map(|o| status_view_of(o.as_ref())),
    );
    out
}

/// One gauge series: its labels and value.
type Series = (Vec<(&'static str, String)>, f64);

/// The series of gauge family `suffix` (`status_condition_count`, …) that `view` writes at
/// `now`: its own kind's (with the object labels) or, with `deprecated`, the kind-less family's
/// (with `group` and `kind`, without the object labels; none for a kind that does not emit them).
fn gauge_series(view: &StatusView, now: Timestamp, suffix: &str, deprecated: bool) -> Vec<Series> {
    if deprecated && !view.kind.emits_deprecated() {
        return Vec::new();
    }
    let (group, kind_name) = view.kind.group_kind();
    let finish = |mut labels: Vec<(&'static str, String)>, value: f64| -> Series {
        if deprecated {
            labels.extend([
                ("group", group.to_string()),
                ("kind", kind_name.to_string()),
            ]);
        } else {
            labels.extend(view.labels.iter().cloned());
        }
        (labels, value)
    };
    let who = || {
        vec![
            ("namespace", view.namespace.clone()),
            ("name", view.name.clone()),
        ]
    };
    let seconds_since = |since: Timestamp| now.duration_since(since).as_secs_f64().max(0.0);
    match suffix {
        "status_condition_count" | "status_condition_current_status_seconds" => view
            .conditions
            .iter()
            .map(|c| {
                let mut labels = who();
                labels.extend([
                    ("type", c.type_.clone()),
                    ("status", c.status.clone()),
                    ("reason", c.reason.clone()),
                ]);
                let value = if suffix == "status_condition_count" {
                    1.0
                } else {
                    c.since.map_or(0.0, seconds_since)
                };
                finish(labels, value)
            })
            .collect(),
        "termination_current_time_seconds" => view
            .deleting_since
            .map(|since| finish(who(), seconds_since(since)))
            .into_iter()
            .collect(),
        _ => Vec::new(),
    }
}

const GAUGES: [(&str, &str); 3] = [
    (
        "status_condition_count",
        "The number of a condition for a given object, type and status.",
    ),
    (
        "status_condition_current_status_seconds",
        "The current amount of time in seconds that a status condition has been in a specific state.",
    ),
    (
        "termination_current_time_seconds",
        "The current amount of time in seconds that an object has been in terminating state.",
    ),
];

/// Writes the per-object gauges of every status kind (and the deprecated kind-less ones) from
/// `snapshot` at `now`. Every family is written, with or without series. Labels are written
/// even when empty (`namespace=""` on cluster-scoped objects), as client_golang does.
pub fn encode_status_gauges(
    encoder: &mut DescriptorEncoder,
    snapshot: &Snapshot,
    now: Timestamp,
) -> std::fmt::Result {
    // The views once; each family's series written as they are made (at 5,000 nodes a scrape
    // holds no more than one object's series at a time beside the text).
    let views = views(snapshot);
    let families = StatusKind::ALL
        .into_iter()
        .map(|k| (Some(k), format!("operator_{}_", k.metric_kind())))
        .chain(std::iter::once((None, "operator_".to_string())));
    for (kind, prefix) in families {
        for (suffix, help) in GAUGES {
            let name = format!("{prefix}{suffix}");
            let mut family = encoder.encode_descriptor(&name, help, None, MetricType::Gauge)?;
            let of_family = views
                .iter()
                .filter(|v| kind.is_none_or(|kind| v.kind == kind));
            for view in of_family {
                for (labels, value) in gauge_series(view, now, suffix, kind.is_none()) {
                    let labels: Vec<(&str, &str)> =
                        labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    family.encode_family(&labels)?.encode_gauge(&value)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn fact(type_: &str, status: &str, reason: &str, since: i64) -> ConditionFact {
        ConditionFact {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            since: Some(at(since)),
        }
    }

    fn claim(conditions: Vec<ConditionFact>, deleting: Option<i64>) -> StatusView {
        StatusView {
            kind: StatusKind::NodeClaim,
            namespace: String::new(),
            name: "default-abc".to_string(),
            labels: vec![
                ("karpenter_k8s_aws_ec2nodeclass", "default".to_string()),
                ("karpenter_sh_nodepool", "default".to_string()),
            ],
            conditions,
            deleting_since: deleting.map(at),
        }
    }

    /// operatorpkg's status controller: a status change is a transition, timed from the old
    /// lastTransitionTime; a new condition is a transition with nothing to time; a reason that
    /// changes under the same status is none.
    #[test]
    fn a_status_change_is_a_transition_timed_from_the_last_one() {
        let old = claim(
            vec![
                fact("Launched", "Unknown", "AwaitingLaunch", 0),
                fact("Ready", "False", "NotReady", 0),
            ],
            None,
        );
        let new = claim(
            vec![
                fact("Launched", "True", "Launched", 12),
                fact("Ready", "False", "StillNotReady", 12),
                fact("Registered", "Unknown", "AwaitingRegistration", 12),
            ],
            None,
        );
        let got = transitions(Some(&old), &new);
        assert_eq!(
            got,
            vec![
                Transition {
                    type_: "Launched".to_string(),
                    status: "True".to_string(),
                    reason: "Launched".to_string(),
                    previous: Some(("Unknown".to_string(), 12.0)),
                },
                Transition {
                    type_: "Registered".to_string(),
                    status: "Unknown".to_string(),
                    reason: "AwaitingRegistration".to_string(),
                    previous: None,
                },
            ]
        );
        // An object seen for the first time: each of its conditions counts once.
        assert_eq!(transitions(None, &old).len(), 2);
        assert!(transitions(Some(&new), &new).is_empty());
    }

    #[test]
    fn transitions_and_terminations_feed_the_kind_and_the_deprecated_families() {
        let mut registry = DeclaredRegistry::new();
        let metrics = ConditionMetrics::register(&mut registry);
        assert_eq!(
            registry.declared().len(),
            15,
            "3 families for 4 kinds and the deprecated ones"
        );
        let old = claim(vec![fact("Ready", "Unknown", "", 0)], None);
        let new = claim(vec![fact("Ready", "True", "Ready", 30)], Some(40));
        metrics.record(None, Some(&old), at(0));
        metrics.record(Some(&old), Some(&new), at(30));
        metrics.record(Some(&new), None, at(100));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry.registry()).unwrap();
        for line in [
            r#"operator_nodeclaim_status_condition_transitions_total{type="Ready",status="True",reason="Ready",karpenter_k8s_aws_ec2nodeclass="default",karpenter_sh_nodepool="default"} 1"#,
            r#"operator_status_condition_transitions_total{type="Ready",status="Unknown",reason="",group="karpenter.sh",kind="NodeClaim"} 1"#,
            r#"operator_nodeclaim_status_condition_transition_seconds_sum{type="Ready",status="Unknown",karpenter_k8s_aws_ec2nodeclass="default",karpenter_sh_nodepool="default"} 30.0"#,
            r#"operator_nodeclaim_termination_duration_seconds_sum{karpenter_k8s_aws_ec2nodeclass="default",karpenter_sh_nodepool="default"} 60.0"#,
            r#"operator_termination_duration_seconds_count{group="karpenter.sh",kind="NodeClaim"} 1"#,
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        // Deleted without having been seen deleting: no termination to time.
        metrics.record(Some(&old), None, at(200));
        let mut again = String::new();
        prometheus_client::encoding::text::encode(&mut again, registry.registry()).unwrap();
        assert!(again.contains(r#"operator_termination_duration_seconds_count{group="karpenter.sh",kind="NodeClaim"} 1"#));
    }

    /// operatorpkg's `For`: a NodeClaim written without its root and dependent conditions reads
    /// them Unknown, AwaitingReconciliation, the dependents since its creation — so the launch's
    /// `Launched` Unknown → True is a timed transition, as in Karpenter.
    #[test]
    fn missing_root_and_dependent_conditions_read_unknown_since_creation() {
        let mut claim = NodeClaim::new("default-abc", Default::default());
        claim.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(0)));
        let fresh = status_view_of(&claim).unwrap();
        let types: Vec<(&str, &str, &str, Option<Timestamp>)> = fresh
            .conditions
            .iter()
            .map(|c| {
                (
                    c.type_.as_str(),
                    c.status.as_str(),
                    c.reason.as_str(),
                    c.since,
                )
            })
            .collect();
        assert_eq!(
            types,
            [
                ("Ready", "Unknown", AWAITING_RECONCILIATION, None),
                ("Launched", "Unknown", AWAITING_RECONCILIATION, Some(at(0))),
                (
                    "Registered",
                    "Unknown",
                    AWAITING_RECONCILIATION,
                    Some(at(0))
                ),
                (
                    "Initialized",
                    "Unknown",
                    AWAITING_RECONCILIATION,
                    Some(at(0))
                ),
            ]
        );
        let launched_at = at(20);
        claim.status = Some(
            serde_json::from_value(serde_json::json!({
                "conditions": [{"type": "Launched", "status": "True", "reason": "Launched",
                                "lastTransitionTime": launched_at.to_string(), "message": ""}]
            }))
            .unwrap(),
        );
        let launched = status_view_of(&claim).unwrap();
        let got = transitions(Some(&fresh), &launched);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].type_, "Launched");
        assert_eq!(got[0].previous, Some(("Unknown".to_string(), 20.0)));
    }

    #[test]
    fn gauges_carry_the_object_and_its_labels_and_nodes_have_no_deprecated_series() {
        let view = claim(vec![fact("Ready", "True", "Ready", 10)], Some(20));
        for (suffix, _) in GAUGES {
            assert_eq!(
                gauge_series(&view, at(25), suffix, false).len(),
                1,
                "{suffix}"
            );
            assert_eq!(
                gauge_series(&view, at(25), suffix, true).len(),
                1,
                "{suffix}"
            );
        }
        let own = gauge_series(
            &view,
            at(25),
            "status_condition_current_status_seconds",
            false,
        );
        let (labels, value) = &own[0];
        assert_eq!(*value, 15.0);
        assert!(labels.contains(&("karpenter_sh_nodepool", "default".to_string())));
        assert!(labels.contains(&("namespace", String::new())));
        let deprecated = gauge_series(&view, at(25), "status_condition_count", true);
        assert!(deprecated[0].0.contains(&("kind", "NodeClaim".to_string())));
        assert!(
            !deprecated[0]
                .0
                .iter()
                .any(|(k, _)| *k == "karpenter_sh_nodepool")
        );
        let terminating = gauge_series(&view, at(25), "termination_current_time_seconds", false);
        assert_eq!(terminating[0].1, 5.0);
        let node = StatusView {
            kind: StatusKind::Node,
            ..view
        };
        for (suffix, _) in GAUGES {
            assert!(gauge_series(&node, at(25), suffix, true).is_empty());
        }
    }
}
