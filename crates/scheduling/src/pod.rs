//! `SimPod`: the scheduling-relevant facts of a pod, computed once from a Kubernetes Pod
//! (effective requests, node selection, tolerations, topology spread, pod (anti-)affinity,
//! host ports).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use thiserror::Error;

use crate::requirements::{Requirement, Requirements};
use crate::resources::{PODS, Resources};
use crate::shared::Shared;
use crate::taints::Toleration;

/// A pod that cannot be converted, naming the pod and the field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("pod {pod}: {field}: {message}")]
pub struct PodConversionError {
    /// `namespace/name` of the pod.
    pub pod: String,
    /// The field at fault, e.g. `spec.containers[0].resources.requests`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// A label selector over pods: `None` selects nothing (a null selector), `Some(empty)` every pod.
pub type PodSelector = Option<Requirements>;

/// Which namespaces a pod affinity term looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NamespaceSelection {
    /// Namespaces listed by name.
    pub names: BTreeSet<String>,
    /// A namespace label selector (`Some(empty)` = all namespaces).
    pub selector: Option<Requirements>,
}

/// A topology spread constraint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopologySpread {
    /// Topology key (any label key).
    pub topology_key: String,
    /// Maximum allowed skew (at least 1).
    pub max_skew: i32,
    /// `true` for DoNotSchedule, `false` for ScheduleAnyway (a preference).
    pub hard: bool,
    /// Pods counted (in the pod's namespace); `matchLabelKeys` already folded in.
    pub selector: PodSelector,
    /// minDomains, if set.
    pub min_domains: Option<i32>,
}

/// A pod affinity or anti-affinity term.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodAffinityTerm {
    /// Topology key (any label key).
    pub topology_key: String,
    /// Pods selected.
    pub selector: PodSelector,
    /// Namespaces searched.
    pub namespaces: NamespaceSelection,
}

/// A host port a container binds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostPort {
    /// Port number.
    pub port: i32,
    /// TCP, UDP or SCTP.
    pub protocol: String,
    /// Host IP; `0.0.0.0` means all.
    pub ip: String,
}

impl HostPort {
    /// Whether two bindings collide on one node.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || self.ip == "0.0.0.0" || other.ip == "0.0.0.0")
    }
}

/// Everything about a pod that decides where it may go, apart from its size. Pods with equal
/// constraints are scheduled as one class.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodConstraints {
    /// Namespace.
    pub namespace: String,
    /// Pod labels (what other pods' selectors see).
    pub labels: BTreeMap<String, String>,
    /// `spec.nodeSelector` as requirements.
    pub node_selector: Requirements,
    /// Required node affinity terms (ORed); empty when none.
    pub required_terms: Vec<Requirements>,
    /// Preferred node affinity terms with their weights, heaviest first.
    pub preferred_terms: Vec<(i32, Requirements)>,
    /// Tolerations.
    pub tolerations: Vec<Toleration>,
    /// Topology spread constraints.
    pub spreads: Vec<TopologySpread>,
    /// Required pod affinity terms.
    pub affinity: Vec<PodAffinityTerm>,
    /// Required pod anti-affinity terms.
    pub anti_affinity: Vec<PodAffinityTerm>,
    /// Preferred pod affinity terms, heaviest first.
    pub preferred_affinity: Vec<(i32, PodAffinityTerm)>,
    /// Preferred pod anti-affinity terms, heaviest first.
    pub preferred_anti_affinity: Vec<(i32, PodAffinityTerm)>,
    /// Host ports bound.
    pub host_ports: Vec<HostPort>,
}

impl PodConstraints {
    /// Whether where this pod may go depends on other pods (topology spread, pod affinity or
    /// anti-affinity, required or preferred). Pods without such constraints can be placed by
    /// looking only at the nodes they could land on.
    pub fn depends_on_other_pods(&self) -> bool {
        !(self.spreads.is_empty()
            && self.affinity.is_empty()
            && self.anti_affinity.is_empty()
            && self.preferred_affinity.is_empty()
            && self.preferred_anti_affinity.is_empty())
    }

    /// Whether the pod has a preference: a preferred node-affinity term, preferred pod
    /// affinity or anti-affinity, or a `ScheduleAnyway` spread.
    pub fn has_preferences(&self) -> bool {
        !(self.preferred_terms.is_empty()
            && self.preferred_affinity.is_empty()
            && self.preferred_anti_affinity.is_empty()
            && self.spreads.iter().all(|s| s.hard))
    }

    /// These constraints with every preference dropped: what kube-scheduler's filters judge
    /// (its preferences only score), and the last way the simulation tries a pod.
    pub fn without_preferences(&self) -> PodConstraints {
        PodConstraints {
            preferred_terms: Vec::new(),
            preferred_affinity: Vec::new(),
            preferred_anti_affinity: Vec::new(),
            spreads: self.spreads.iter().filter(|s| s.hard).cloned().collect(),
            ..self.clone()
        }
    }
}

/// Adds to `keys` every pod label key a selector of `pods` looks at (spread, affinity and
/// anti-affinity, required or preferred). Pod labels outside them do not affect scheduling.
pub fn collect_selector_label_keys<'p>(
    pods: impl Iterator<Item = &'p PodConstraints>,
    keys: &mut BTreeSet<String>,
) {
    for c in pods {
        let selectors = c
            .spreads
            .iter()
            .map(|s| &s.selector)
            .chain(
                c.affinity
                    .iter()
                    .chain(c.anti_affinity.iter())
                    .map(|t| &t.selector),
            )
            .chain(
                c.preferred_affinity
                    .iter()
                    .chain(c.preferred_anti_affinity.iter())
                    .map(|(_, t)| &t.selector),
            );
        for sel in selectors.flatten() {
            for (k, _) in sel.iter() {
                if !keys.contains(k) {
                    keys.insert(k.to_string());
                }
            }
        }
    }
}

/// A pod as the simulation sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimPod {
    /// `namespace/name`, the identity used in results.
    pub key: String,
    /// Effective requests (containers, init containers, sidecars, overhead) plus `pods` = 1.
    pub requests: std::sync::Arc<Resources>,
    /// Priority (higher is placed first).
    pub priority: i32,
    /// Whether a DaemonSet owns it (it is never moved to another node).
    pub is_daemonset: bool,
    /// Placement constraints, shared by clones of the pod (and, in the controller's cache, by
    /// the pods of one workload whose constraints are equal).
    pub constraints: Shared<PodConstraints>,
}

impl SimPod {
    /// A pod with the given key and requests and no constraints (namespace from the key).
    pub fn new(key: &str, requests: Resources) -> Self {
        let namespace = key
            .split_once('/')
            .map_or("default", |(ns, _)| ns)
            .to_string();
        let mut requests = requests;
        if requests.get(PODS) == 0 {
            requests.set(PODS, 1000);
        }
        Self {
            key: key.to_string(),
            requests: requests.into(),
            priority: 0,
            is_daemonset: false,
            constraints: Shared::new(PodConstraints {
                namespace,
                ..PodConstraints::default()
            }),
        }
    }

    /// Converts a Kubernetes Pod, computing everything the scheduler needs once.
    pub fn from_pod(pod: &Pod) -> Result<Self, PodConversionError> {
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let key = format!("{namespace}/{name}");
        let err = |field: &str, message: String| PodConversionError {
            pod: key.clone(),
            field: field.to_string(),
            message,
        };
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let is_daemonset = pod
            .metadata
            .owner_references
            .as_ref()
            .is_some_and(|refs| refs.iter().any(|r| r.kind == "DaemonSet"));
        let Some(spec) = pod.spec.as_ref() else {
            return Err(err("spec", "missing".to_string()));
        };

        let requests = pod_resources(spec, ResourceField::Requests)
            .map_err(|(field, message)| err(&field, message))?;

        let node_selector = spec
            .node_selector
            .as_ref()
            .map(Requirements::from_labels)
            .unwrap_or_default();
        let mut required_terms = Vec::new();
        let mut preferred_terms = Vec::new();
        let mut affinity = Vec::new();
        let mut anti_affinity = Vec::new();
        let mut preferred_affinity = Vec::new();
        let mut preferred_anti_affinity = Vec::new();
        if let Some(aff) = &spec.affinity {
            if let Some(na) = &aff.node_affinity {
                if let Some(req) = &na.required_during_scheduling_ignored_during_execution {
                    for (i, term) in req.node_selector_terms.iter().enumerate() {
                        let field =
                            format!("spec.affinity.nodeAffinity.required.nodeSelectorTerms[{i}]");
                        let r = Requirements::from_k8s(
                            term.match_expressions.as_deref().unwrap_or(&[]),
                        )
                        .map_err(|e| err(&field, e.to_string()))?;
                        required_terms.push(r);
                    }
                }
                for (i, p) in na
                    .preferred_during_scheduling_ignored_during_execution
                    .iter()
                    .flatten()
                    .enumerate()
                {
                    let field = format!("spec.affinity.nodeAffinity.preferred[{i}]");
                    let r = Requirements::from_k8s(
                        p.preference.match_expressions.as_deref().unwrap_or(&[]),
                    )
                    .map_err(|e| err(&field, e.to_string()))?;
                    preferred_terms.push((p.weight, r));
                }
            }
            if let Some(pa) = &aff.pod_affinity {
                for (i, t) in pa
                    .required_during_scheduling_ignored_during_execution
                    .iter()
                    .flatten()
                    .enumerate()
                {
                    affinity.push(affinity_term(t, &labels).map_err(|m| {
                        err(&format!("spec.affinity.podAffinity.required[{i}]"), m)
                    })?);
                }
                for (i, t) in pa
                    .preferred_during_scheduling_ignored_during_execution
                    .iter()
                    .flatten()
                    .enumerate()
                {
                    let term = affinity_term(&t.pod_affinity_term, &labels).map_err(|m| {
                        err(&format!("spec.affinity.podAffinity.preferred[{i}]"), m)
                    })?;
                    preferred_affinity.push((t.weight, term));
                }
            }
            if let Some(pa) = &aff.pod_anti_affinity {
                for (i, t) in pa
                    .required_during_scheduling_ignored_during_execution
                    .iter()
                    .flatten()
                    .enumerate()
                {
                    anti_affinity.push(affinity_term(t, &labels).map_err(|m| {
                        err(&format!("spec.affinity.podAntiAffinity.required[{i}]"), m)
                    })?);
                }
                for (i, t) in pa
                    .preferred_during_scheduling_ignored_during_execution
                    .iter()
                    .flatten()
                    .enumerate()
                {
                    let term = affinity_term(&t.pod_affinity_term, &labels).map_err(|m| {
                        err(&format!("spec.affinity.podAntiAffinity.preferred[{i}]"), m)
                    })?;
                    preferred_anti_affinity.push((t.weight, term));
                }
            }
        }
        // Heaviest first; stable so equal weights keep their written order.
        preferred_terms.sort_by_key(|t| std::cmp::Reverse(t.0));
        preferred_affinity.sort_by_key(|t| std::cmp::Reverse(t.0));
        preferred_anti_affinity.sort_by_key(|t| std::cmp::Reverse(t.0));

        let mut tolerations = Vec::new();
        for (i, t) in spec.tolerations.iter().flatten().enumerate() {
            tolerations.push(
                Toleration::from_k8s(t)
                    .map_err(|e| err(&format!("spec.tolerations[{i}]"), e.to_string()))?,
            );
        }

        let mut spreads = Vec::new();
        for (i, c) in spec
            .topology_spread_constraints
            .iter()
            .flatten()
            .enumerate()
        {
            let field = format!("spec.topologySpreadConstraints[{i}]");
            if c.max_skew < 1 {
                return Err(err(
                    &field,
                    format!("maxSkew must be at least 1, got {}", c.max_skew),
                ));
            }
            let hard = match c.when_unsatisfiable.as_str() {
                "DoNotSchedule" => true,
                "ScheduleAnyway" => false,
                other => {
                    return Err(err(
                        &field,
                        format!(
                            "whenUnsatisfiable {other:?} is not DoNotSchedule or ScheduleAnyway"
                        ),
                    ));
                }
            };
            let mut selector =
                label_selector(c.label_selector.as_ref()).map_err(|m| err(&field, m))?;
            fold_match_label_keys(&mut selector, c.match_label_keys.as_deref(), &labels);
            spreads.push(TopologySpread {
                topology_key: c.topology_key.clone(),
                max_skew: c.max_skew,
                hard,
                selector,
                min_domains: c.min_domains,
            });
        }

        let mut host_ports = Vec::new();
        for c in spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
        {
            for p in c.ports.iter().flatten() {
                if let Some(port) = p.host_port.filter(|p| *p > 0) {
                    host_ports.push(HostPort {
                        port,
                        protocol: p.protocol.clone().unwrap_or_else(|| "TCP".to_string()),
                        ip: p
                            .host_ip
                            .clone()
                            .filter(|ip| !ip.is_empty())
                            .unwrap_or_else(|| "0.0.0.0".to_string()),
                    });
                }
            }
        }
        host_ports.sort();
        host_ports.dedup();

        Ok(Self {
            key,
            requests: requests.into(),
            priority: spec.priority.unwrap_or(0),
            is_daemonset,
            constraints: Shared::new(PodConstraints {
                namespace,
                labels,
                node_selector,
                required_terms,
                preferred_terms,
                tolerations,
                spreads,
                affinity,
                anti_affinity,
                preferred_affinity,
                preferred_anti_affinity,
                host_ports,
            }),
        })
    }
}

/// Which of a container's resource lists a pod total is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceField {
    /// `requests`, falling back to `limits` per resource (what the scheduler reserves).
    Requests,
    /// `limits` alone.
    Limits,
}

/// One container's resources of `kind`.
/// `list` unless an amount in it is negative, which kube-apiserver refuses (a negative request
/// would make room out of nothing in a simulation): the error names `field[resource]`.
fn non_negative(list: Resources, field: &str) -> Result<Resources, (String, String)> {
    match list.0.iter().find(|(_, amount)| **amount < 0) {
        Some((name, _)) => Err((
            format!("{field}[{name}]"),
            "must be greater than or equal to 0".to_string(),
        )),
        None => Ok(list),
    }
}

fn container_resources(
    c: &Container,
    field: &str,
    kind: ResourceField,
) -> Result<Resources, (String, String)> {
    let mut out = Resources::new();
    let Some(res) = &c.resources else {
        return Ok(out);
    };
    let parse =
        |list: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
         sub: &str| {
            let parsed = Resources::from_quantities(list)
                .map_err(|e| (format!("{field}.resources.{sub}"), e.to_string()))?;
            non_negative(parsed, &format!("{field}.resources.{sub}"))
        };
    if let Some(limits) = &res.limits {
        out = parse(limits, "limits")?;
    }
    if kind == ResourceField::Limits {
        return Ok(out);
    }
    if let Some(requests) = &res.requests {
        for (name, value) in parse(requests, "requests")?.0 {
            out.set(&name, value);
        }
    }
    Ok(out)
}

/// The pod's effective requests (or limits) as kube-scheduler computes requests: the larger of
/// (containers + restartable init containers) and the peak of the init sequence, plus pod
/// overhead and one pod. Errors name the field that does not parse.
pub fn pod_resources(
    spec: &k8s_openapi::api::core::v1::PodSpec,
    kind: ResourceField,
) -> Result<Resources, (String, String)> {
    let mut containers = Resources::new();
    for (i, c) in spec.containers.iter().enumerate() {
        containers = containers.add(&container_resources(
            c,
            &format!("spec.containers[{i}]"),
            kind,
        )?);
    }
    let mut sidecars = Resources::new();
    let mut init_peak = Resources::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let req = container_resources(c, &format!("spec.initContainers[{i}]"), kind)?;
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars = sidecars.add(&req);
            init_peak = init_peak.max(&sidecars);
        } else {
            init_peak = init_peak.max(&req.add(&sidecars));
        }
    }
    let mut total = containers.add(&sidecars).max(&init_peak);
    if let Some(overhead) = &spec.overhead {
        total = total.add(&non_negative(
            Resources::from_quantities(overhead)
                .map_err(|e| ("spec.overhead".to_string(), e.to_string()))?,
            "spec.overhead",
        )?);
    }
    total.set(PODS, 1000);
    Ok(total)
}

/// Converts a metav1 label selector; `None` selects nothing.
pub fn label_selector(selector: Option<&LabelSelector>) -> Result<PodSelector, String> {
    let Some(sel) = selector else { return Ok(None) };
    let mut out = sel
        .match_labels
        .as_ref()
        .map(Requirements::from_labels)
        .unwrap_or_default();
    let empty: Vec<String> = Vec::new();
    let exprs = Requirements::from_node_selector_requirements(
        sel.match_expressions.iter().flatten().map(|e| {
            (
                e.key.as_str(),
                e.operator.as_str(),
                e.values.as_deref().unwrap_or(&empty),
                None,
            )
        }),
    )
    .map_err(|e| format!("labelSelector: {e}"))?;
    out = out.intersection(&exprs);
    Ok(Some(out))
}

fn fold_match_label_keys(
    selector: &mut PodSelector,
    keys: Option<&[String]>,
    labels: &BTreeMap<String, String>,
) {
    if let Some(sel) = selector.as_mut() {
        for key in keys.unwrap_or(&[]) {
            if let Some(value) = labels.get(key) {
                sel.add(key, Requirement::is_in([value.clone()]));
            }
        }
    }
}

fn affinity_term(
    t: &k8s_openapi::api::core::v1::PodAffinityTerm,
    labels: &BTreeMap<String, String>,
) -> Result<PodAffinityTerm, String> {
    let mut selector = label_selector(t.label_selector.as_ref())?;
    fold_match_label_keys(&mut selector, t.match_label_keys.as_deref(), labels);
    if let Some(sel) = selector.as_mut() {
        for key in t.mismatch_label_keys.iter().flatten() {
            if let Some(value) = labels.get(key) {
                sel.add(key, Requirement::not_in([value.clone()]));
            }
        }
    }
    let namespace_selector = match &t.namespace_selector {
        None => None,
        Some(s) => label_selector(Some(s)).map_err(|m| format!("namespaceSelector: {m}"))?,
    };
    Ok(PodAffinityTerm {
        topology_key: t.topology_key.clone(),
        selector,
        namespaces: NamespaceSelection {
            names: t.namespaces.iter().flatten().cloned().collect(),
            selector: namespace_selector,
        },
    })
}
