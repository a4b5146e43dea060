//! Drift marking: whether a NodeClaim no longer matches its NodePool (template hash, then
//! requirements) or its node class (the provider's verdict), what exactly moved, and how the
//! Drifted condition must change. Also the re-stamping rule for hash-version changes.

use driftwood_api::condition::Conditions;
use driftwood_api::hash::{
    EC2NODECLASS_HASH_VERSION, HashComparison, NODEPOOL_HASH_VERSION, TemplateHashes,
    compare_stamped,
};
use driftwood_api::nodeclaim::NodeClaim;
use driftwood_api::nodepool::NodePool;
use driftwood_api::wellknown::{
    ANNOTATION_EC2NODECLASS_FIELD_HASHES, ANNOTATION_EC2NODECLASS_HASH,
    ANNOTATION_EC2NODECLASS_HASH_VERSION, ANNOTATION_NODEPOOL_FIELD_HASHES,
    ANNOTATION_NODEPOOL_HASH, ANNOTATION_NODEPOOL_HASH_VERSION, CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED, CONDITION_DRIFTED, CONDITION_LAUNCHED, DRIFT_INSTANCE_TYPE_NOT_FOUND,
    DRIFT_NODEPOOL, DRIFT_REQUIREMENTS, LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE,
    LABEL_TOPOLOGY_ZONE, normalized_label_key,
};
use driftwood_scheduling::Requirements;
use std::collections::BTreeMap;

/// One reason a NodeClaim has drifted, with a message naming what moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriftFinding {
    /// NodePoolDrifted, RequirementsDrifted, NodeClassDrift, AMIDrift, SubnetDrift, ...
    pub reason: String,
    pub message: String,
}

/// What one drift check concluded: drifted (and why), not drifted, or unknown (the check could
/// not run: a provider error, a class whose status lists are empty). An unknown verdict leaves
/// the Drifted condition as it is, never clears it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Drifted(DriftFinding),
    NotDrifted,
    Unknown(String),
}

impl Verdict {
    /// `Drifted` for `Some`, `NotDrifted` for `None`.
    pub fn from_finding(finding: Option<DriftFinding>) -> Self {
        finding.map_or(Self::NotDrifted, Self::Drifted)
    }

    /// The finding, when drifted.
    pub fn finding(&self) -> Option<&DriftFinding> {
        match self {
            Self::Drifted(f) => Some(f),
            _ => None,
        }
    }
}

/// How the Drifted condition of a NodeClaim must change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriftMarking {
    /// Set Drifted=True with this reason and message.
    Set(DriftFinding),
    /// Remove the Drifted condition.
    Clear,
    /// Leave it as it is.
    Keep,
}

fn annotation<'a>(nodeclaim: &'a NodeClaim, key: &str) -> Option<&'a str> {
    nodeclaim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// NodePoolDrifted: the template hash stamped at creation differs from the NodePool's now
/// (same hash version). The message names the changed template fields when per-field hashes
/// were stamped.
pub fn nodepool_drift(
    nodeclaim: &NodeClaim,
    nodepool: &NodePool,
    current: &TemplateHashes,
) -> Option<DriftFinding> {
    let comparison = stamp_comparison(nodeclaim, &NODEPOOL_STAMP, current);
    let HashComparison::Changed { changed } = comparison else {
        return None;
    };
    let name = nodepool.metadata.name.as_deref().unwrap_or_default();
    let message = if changed.is_empty() {
        format!(
            "NodePool {name:?} template changed (the NodeClaim has no per-field hashes, so the field is unknown)"
        )
    } else {
        let fields: Vec<String> = changed
            .iter()
            .map(|f| format!("spec.template.{}", template_path(f)))
            .collect();
        format!("NodePool {name:?} template changed: {}", fields.join(", "))
    };
    Some(DriftFinding {
        reason: DRIFT_NODEPOOL.to_string(),
        message,
    })
}

/// Where a hashed template field lives under spec.template.
fn template_path(field: &str) -> String {
    match field {
        "labels" | "annotations" => format!("metadata.{field}"),
        other => format!("spec.{other}"),
    }
}

/// RequirementsDrifted: the NodeClaim's labels no longer satisfy the NodePool's requirements,
/// compared as Karpenter does: strictly (a requirement on a key the NodeClaim lacks drifts it,
/// well-known or not, unless the operator is NotIn or DoesNotExist), requirements on the same key
/// intersected first, minValues ignored, beta label keys read as their current names. Widening
/// an `In` list never drifts; keys only the NodeClaim has are ignored.
pub fn requirements_drift(nodeclaim: &NodeClaim, nodepool: &NodePool) -> Option<DriftFinding> {
    let name = nodepool.metadata.name.as_deref().unwrap_or_default();
    let pool_requirements = match Requirements::from_node_selector_requirements(
        nodepool.spec.template.spec.requirements.iter().map(|r| {
            (
                normalized_label_key(&r.key),
                r.operator.as_str(),
                r.values.as_slice(),
                None,
            )
        }),
    ) {
        Ok(r) => r,
        // An unreadable NodePool is reported by validation; it drifts nothing.
        Err(_) => return None,
    };
    // Most NodeClaims are not drifted: check their labels against the requirements as they
    // are, and build the requirements to name the incompatibility only when one is found.
    let claim_labels = nodeclaim.metadata.labels.as_ref();
    if labels_meet(claim_labels, &pool_requirements) {
        return None;
    }
    let labels: BTreeMap<String, String> = claim_labels
        .iter()
        .copied()
        .flatten()
        .map(|(k, v)| (normalized_label_key(k).to_string(), v.clone()))
        .collect();
    let node_requirements = Requirements::from_labels(labels.iter());
    node_requirements
        .strictly_compatible(&pool_requirements)
        .err()
        .map(|incompatibility| DriftFinding {
            reason: DRIFT_REQUIREMENTS.to_string(),
            message: format!(
                "NodePool {name:?} requirements no longer admit this node: {incompatibility}"
            ),
        })
}

/// Whether the labels are strictly compatible with the requirements, read without building
/// requirements from them: a label `k=v` is `k In [v]`, which has a value in common with a
/// requirement exactly when `v` satisfies it, and a missing label meets only what Karpenter
/// lets be missing. `false` (look the long way) when a label has a beta key, read through its
/// current name there.
fn labels_meet(labels: Option<&BTreeMap<String, String>>, requirements: &Requirements) -> bool {
    labels.is_none_or(|l| l.keys().all(|k| normalized_label_key(k) == k))
        && requirements
            .iter()
            .all(|(key, r)| match labels.and_then(|l| l.get(key)) {
                Some(value) => r.matches(Some(value)),
                None => r.karpenter_allows_missing(),
            })
}

/// How old a NodeClaim must be before InstanceTypeNotFound is checked (Karpenter's grace:
/// a type briefly missing from a fresh catalog must not drift a node just launched).
pub const INSTANCE_TYPE_CHECK_MIN_AGE_SECONDS: i64 = 3600;
/// How long a NodeClaim whose instance type was found is not checked again.
pub const INSTANCE_TYPE_CHECK_TTL_SECONDS: i64 = 1800;

/// InstanceTypeNotFound: the NodeClaim's instance type is no longer one its NodePool may launch
/// (no `node.kubernetes.io/instance-type` label, or no such type), or none of that type's
/// offerings, available or not, matches the NodeClaim's zone and capacity type. A `reserved`
/// NodeClaim also matches on-demand offerings (a reservation may end). Offerings are compared
/// to the NodeClaim's labels where it has them; a well-known key it lacks is not held against it.
pub fn instance_type_drift(
    nodeclaim: &NodeClaim,
    instance_types: &[driftwood_scheduling::InstanceType],
) -> Option<DriftFinding> {
    let labels = nodeclaim.metadata.labels.as_ref();
    let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
    let not_found = |message: String| {
        Some(DriftFinding {
            reason: DRIFT_INSTANCE_TYPE_NOT_FOUND.to_string(),
            message,
        })
    };
    let Some(type_name) = label(LABEL_INSTANCE_TYPE) else {
        return not_found(format!("the NodeClaim has no {LABEL_INSTANCE_TYPE} label"));
    };
    let Some(instance_type) = instance_types.iter().find(|t| t.name == type_name) else {
        return not_found(format!(
            "instance type {type_name} is no longer offered to this NodePool"
        ));
    };
    let zone = label(LABEL_TOPOLOGY_ZONE);
    let capacity_type = label(LABEL_CAPACITY_TYPE);
    let capacity_ok = |offered: &str| match capacity_type {
        None => true,
        Some(CAPACITY_TYPE_RESERVED) => {
            offered == CAPACITY_TYPE_RESERVED || offered == CAPACITY_TYPE_ON_DEMAND
        }
        Some(ct) => offered == ct,
    };
    let compatible = instance_type
        .offerings
        .iter()
        .any(|o| zone.is_none_or(|z| z == o.zone) && capacity_ok(&o.capacity_type));
    if compatible {
        return None;
    }
    not_found(format!(
        "instance type {type_name} has no offering in zone {} with capacity type {}",
        zone.unwrap_or("(any)"),
        capacity_type.unwrap_or("(any)")
    ))
}

/// The drift of a NodeClaim in Karpenter's order, the first hit winning: NodePoolDrifted,
/// RequirementsDrifted, then InstanceTypeNotFound, then the provider's verdict (NodeClassDrift,
/// AMIDrift, SecurityGroupDrift, SubnetDrift). A check that could not run (`Unknown`) stops the
/// search there, as Karpenter returns the error: what comes after it is not looked at.
pub fn find_drift(
    nodeclaim: &NodeClaim,
    nodepool: &NodePool,
    nodepool_hashes: &TemplateHashes,
    instance_type: Verdict,
    provider: Verdict,
) -> Verdict {
    match core_drift(nodeclaim, nodepool, nodepool_hashes, instance_type) {
        Verdict::NotDrifted => provider,
        decided => decided,
    }
}

/// The checks before the provider's (NodePoolDrifted, RequirementsDrifted, then the given
/// InstanceTypeNotFound verdict). `NotDrifted` means the provider decides: only then need it
/// be asked.
pub fn core_drift(
    nodeclaim: &NodeClaim,
    nodepool: &NodePool,
    nodepool_hashes: &TemplateHashes,
    instance_type: Verdict,
) -> Verdict {
    match nodepool_drift(nodeclaim, nodepool, nodepool_hashes)
        .or_else(|| requirements_drift(nodeclaim, nodepool))
    {
        Some(finding) => Verdict::Drifted(finding),
        None => instance_type,
    }
}

/// Decides the Drifted condition. Only launched NodeClaims can be drifted (Drifted is removed
/// from one that is not Launched); an unknown verdict changes nothing; with the Drift feature
/// gate off, any Drifted condition is removed.
pub fn drift_marking(
    nodeclaim: &NodeClaim,
    verdict: &Verdict,
    drift_enabled: bool,
) -> DriftMarking {
    let current = nodeclaim.condition(CONDITION_DRIFTED);
    let launched = nodeclaim.is_true(CONDITION_LAUNCHED);
    if drift_enabled && launched && matches!(verdict, Verdict::Unknown(_)) {
        return DriftMarking::Keep;
    }
    match verdict.finding() {
        Some(finding) if drift_enabled && launched => {
            let same = current.is_some_and(|c| {
                c.is_true()
                    && c.reason.as_deref() == Some(&finding.reason)
                    && c.message.as_deref() == Some(&finding.message)
            });
            if same {
                DriftMarking::Keep
            } else {
                DriftMarking::Set(finding.clone())
            }
        }
        _ if current.is_some() => DriftMarking::Clear,
        _ => DriftMarking::Keep,
    }
}

/// The annotations one kind of template hash is stamped under, and its current version.
pub struct StampKeys {
    pub hash: &'static str,
    pub version: &'static str,
    pub fields: &'static str,
    pub current_version: &'static str,
}

/// The NodePool template hash stamp.
pub const NODEPOOL_STAMP: StampKeys = StampKeys {
    hash: ANNOTATION_NODEPOOL_HASH,
    version: ANNOTATION_NODEPOOL_HASH_VERSION,
    fields: ANNOTATION_NODEPOOL_FIELD_HASHES,
    current_version: NODEPOOL_HASH_VERSION,
};

/// The EC2NodeClass static hash stamp.
pub const NODECLASS_STAMP: StampKeys = StampKeys {
    hash: ANNOTATION_EC2NODECLASS_HASH,
    version: ANNOTATION_EC2NODECLASS_HASH_VERSION,
    fields: ANNOTATION_EC2NODECLASS_FIELD_HASHES,
    current_version: EC2NODECLASS_HASH_VERSION,
};

/// How the hash stamped on a NodeClaim under `keys` compares with `current`.
pub fn stamp_comparison(
    nodeclaim: &NodeClaim,
    keys: &StampKeys,
    current: &TemplateHashes,
) -> HashComparison {
    compare_stamped(
        annotation(nodeclaim, keys.hash),
        annotation(nodeclaim, keys.version),
        annotation(nodeclaim, keys.fields),
        current,
        keys.current_version,
    )
}

/// The hashes an object (a NodePool or EC2NodeClass the hash controller stamped) carries under
/// `keys`, when stamped under the current version. Lets a reader without the controller's
/// settings (the cluster CA bundle) compare against what the controller computed.
pub fn stamped_hashes(
    annotations: Option<&BTreeMap<String, String>>,
    keys: &StampKeys,
) -> Option<TemplateHashes> {
    let annotations = annotations?;
    if annotations.get(keys.version).map(String::as_str) != Some(keys.current_version) {
        return None;
    }
    Some(TemplateHashes {
        hash: annotations.get(keys.hash)?.clone(),
        fields: annotations
            .get(keys.fields)
            .and_then(|f| driftwood_api::hash::parse_fields_annotation(f))
            .unwrap_or_default(),
    })
}

/// The annotations that stamp `current` under `keys`.
pub fn stamp(keys: &StampKeys, current: &TemplateHashes) -> BTreeMap<String, String> {
    BTreeMap::from([
        (keys.hash.to_string(), current.hash.clone()),
        (keys.version.to_string(), keys.current_version.to_string()),
        (keys.fields.to_string(), current.fields_annotation()),
    ])
}

/// When a NodeClaim was stamped under another hash version (a driftwood upgrade, or adoption
/// of a NodeClaim Karpenter made) or not at all, the annotations to write so it is compared
/// under the current version from now on; None when nothing is to be done. As Karpenter's hash
/// controllers do, a NodeClaim with a Drifted condition gets only the new version: it keeps its
/// old hash and so stays drifted (a version change never un-drifts a node); any other gets the
/// current hash, so a new hash algorithm never drifts a node either.
pub fn restamp(
    nodeclaim: &NodeClaim,
    keys: &StampKeys,
    current: &TemplateHashes,
) -> Option<BTreeMap<String, String>> {
    // Not stamped at all: the cloud provider stamps the class hash when it launches, so only a
    // launched NodeClaim without a stamp (adopted from elsewhere) is stamped here.
    let needs = match stamp_comparison(nodeclaim, keys, current) {
        HashComparison::VersionMismatch => true,
        HashComparison::NotStamped => nodeclaim.is_true(CONDITION_LAUNCHED),
        _ => false,
    };
    if !needs {
        return None;
    }
    if nodeclaim.condition(CONDITION_DRIFTED).is_some() {
        if annotation(nodeclaim, keys.version) == Some(keys.current_version) {
            return None; // already moved to this version; the hash stays as it was
        }
        return Some(BTreeMap::from([(
            keys.version.to_string(),
            keys.current_version.to_string(),
        )]));
    }
    Some(stamp(keys, current))
}

/// [`restamp`] for the NodePool template hash.
pub fn nodepool_restamp(
    nodeclaim: &NodeClaim,
    current: &TemplateHashes,
) -> Option<BTreeMap<String, String>> {
    restamp(nodeclaim, &NODEPOOL_STAMP, current)
}

/// [`restamp`] for the EC2NodeClass static hash.
pub fn nodeclass_restamp(
    nodeclaim: &NodeClaim,
    current: &TemplateHashes,
) -> Option<BTreeMap<String, String>> {
    restamp(nodeclaim, &NODECLASS_STAMP, current)
}

/// The EC2NodeClass annotations a new NodeClaim is stamped with.
pub fn nodeclass_stamp(current: &TemplateHashes) -> BTreeMap<String, String> {
    stamp(&NODECLASS_STAMP, current)
}

/// The NodePool annotations a new NodeClaim is stamped with.
pub fn nodepool_stamp(current: &TemplateHashes) -> BTreeMap<String, String> {
    stamp(&NODEPOOL_STAMP, current)
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftwood_api::condition::{STATUS_TRUE, set_condition};
    use driftwood_api::hash::nodepool_hashes;
    use driftwood_api::nodeclaim::{NodeClaimSpec, NodeClaimStatus};
    use driftwood_api::nodepool::{Budget, NodePoolSpec};
    use driftwood_api::requirement::NodeSelectorRequirementWithMinValues as Req;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    /// Generated requirements (every operator, on keys the labels have or lack) and labels:
    /// reading the labels as they are agrees with building requirements from them and asking
    /// Karpenter's strict compatibility.
    #[test]
    fn labels_meet_requirements_as_built_requirements_do() {
        let mut next = driftwood_scheduling::testkit::seeded(0x2545_F491_4F6C_DD1D);
        let (mut met, mut unmet) = (0, 0);
        for case in 0..2000 {
            let keys = ["a", "b", "cpu"];
            let values = ["1", "2", "8", "x"];
            let mut labels = BTreeMap::new();
            for key in keys {
                if next(3) != 0 {
                    labels.insert(key.to_string(), values[next(4) as usize].to_string());
                }
            }
            let requirements: Vec<(String, String, Vec<String>)> = (0..1 + next(3))
                .map(|_| {
                    let op =
                        ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"][next(6) as usize];
                    let vals: Vec<String> = match op {
                        "Exists" | "DoesNotExist" => Vec::new(),
                        "Gt" | "Lt" => vec![["0", "2", "8"][next(3) as usize].to_string()],
                        _ => (0..next(3))
                            .map(|_| values[next(4) as usize].to_string())
                            .collect(),
                    };
                    (keys[next(3) as usize].to_string(), op.to_string(), vals)
                })
                .collect();
            let Ok(requirements) = Requirements::from_node_selector_requirements(
                requirements
                    .iter()
                    .map(|(k, op, v)| (k.as_str(), op.as_str(), v.as_slice(), None)),
            ) else {
                continue;
            };
            let built = Requirements::from_labels(labels.iter())
                .strictly_compatible(&requirements)
                .is_ok();
            assert_eq!(
                labels_meet(Some(&labels), &requirements),
                built,
                "case {case}: {labels:?} against {requirements}"
            );
            if built { met += 1 } else { unmet += 1 }
        }
        assert!(met > 200 && unmet > 200, "{met} met, {unmet} not");
    }
    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap())
    }

    fn pool() -> NodePool {
        let mut np = NodePool::new("default", NodePoolSpec::default());
        np.spec
            .template
            .metadata
            .labels
            .insert("intent".into(), "apps".into());
        np.spec.template.spec.node_class_ref.name = "default".into();
        np.spec.template.spec.requirements = vec![
            Req::new("kubernetes.io/arch", "In", &["amd64", "arm64"]),
            Req::new("karpenter.sh/capacity-type", "In", &["spot", "on-demand"]),
        ];
        np
    }

    /// A launched NodeClaim made from `np` now, on an amd64 on-demand node.
    fn claim_from(np: &NodePool) -> NodeClaim {
        let mut nc = NodeClaim::new("default-abcde", NodeClaimSpec::default());
        nc.metadata.annotations = Some(nodepool_stamp(&nodepool_hashes(np)));
        nc.metadata.labels = Some(BTreeMap::from([
            ("kubernetes.io/arch".into(), "amd64".into()),
            ("karpenter.sh/capacity-type".into(), "on-demand".into()),
            ("intent".into(), "apps".into()),
            ("karpenter.sh/nodepool".into(), "default".into()),
        ]));
        let mut status = NodeClaimStatus::default();
        set_condition(
            &mut status.conditions,
            CONDITION_LAUNCHED,
            STATUS_TRUE,
            "Launched",
            "",
            now(),
            None,
        );
        nc.status = Some(status);
        nc
    }

    fn drift_of(nc: &NodeClaim, np: &NodePool) -> Option<DriftFinding> {
        find_drift(
            nc,
            np,
            &nodepool_hashes(np),
            Verdict::NotDrifted,
            Verdict::NotDrifted,
        )
        .finding()
        .cloned()
    }

    #[test]
    fn fresh_nodeclaim_is_not_drifted() {
        let np = pool();
        assert_eq!(drift_of(&claim_from(&np), &np), None);
    }

    #[test]
    fn label_change_drifts_naming_the_field() {
        let np = pool();
        let nc = claim_from(&np);
        let mut changed = np.clone();
        changed
            .spec
            .template
            .metadata
            .labels
            .insert("team".into(), "x".into());
        let finding = drift_of(&nc, &changed).unwrap();
        assert_eq!(finding.reason, "NodePoolDrifted");
        assert_eq!(
            finding.message,
            "NodePool \"default\" template changed: spec.template.metadata.labels"
        );
    }

    #[test]
    fn taint_and_expiry_changes_name_both_fields() {
        let np = pool();
        let nc = claim_from(&np);
        let mut changed = np.clone();
        changed.spec.template.spec.expire_after.0 = "24h".into();
        changed
            .spec
            .template
            .spec
            .taints
            .push(k8s_openapi::api::core::v1::Taint {
                key: "dedicated".into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            });
        let finding = drift_of(&nc, &changed).unwrap();
        assert!(
            finding
                .message
                .ends_with("spec.template.spec.expireAfter, spec.template.spec.taints"),
            "{}",
            finding.message
        );
    }

    #[test]
    fn limits_weight_and_budgets_drift_nothing() {
        let np = pool();
        let nc = claim_from(&np);
        let mut changed = np.clone();
        changed.spec.weight = Some(50);
        changed.spec.limits.insert(
            "cpu".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("1000".into()),
        );
        changed.spec.disruption.budgets = vec![Budget {
            nodes: "0".into(),
            ..Default::default()
        }];
        assert_eq!(drift_of(&nc, &changed), None);
    }

    #[test]
    fn widening_requirements_does_not_drift_narrowing_past_the_node_does() {
        let np = pool();
        let nc = claim_from(&np);
        let mut wider = np.clone();
        wider.spec.template.spec.requirements[0] =
            Req::new("kubernetes.io/arch", "In", &["amd64", "arm64", "riscv"]);
        assert_eq!(drift_of(&nc, &wider), None);
        let mut narrower_keeping_node = np.clone();
        narrower_keeping_node.spec.template.spec.requirements[0] =
            Req::new("kubernetes.io/arch", "In", &["amd64"]);
        assert_eq!(drift_of(&nc, &narrower_keeping_node), None);
        let mut narrower = np.clone();
        narrower.spec.template.spec.requirements[0] =
            Req::new("kubernetes.io/arch", "In", &["arm64"]);
        let finding = drift_of(&nc, &narrower).unwrap();
        assert_eq!(finding.reason, "RequirementsDrifted");
        assert!(
            finding.message.contains("kubernetes.io/arch"),
            "{}",
            finding.message
        );
    }

    #[test]
    fn new_requirement_on_a_missing_key_drifts_unless_negative() {
        let np = pool();
        let nc = claim_from(&np);
        let mut exists = np.clone();
        exists
            .spec
            .template
            .spec
            .requirements
            .push(Req::new("example.com/gpu", "Exists", &[]));
        assert_eq!(
            drift_of(&nc, &exists).map(|f| f.reason),
            Some("RequirementsDrifted".into())
        );
        let mut not_in = np.clone();
        not_in.spec.template.spec.requirements.push(Req::new(
            "example.com/gpu",
            "NotIn",
            &["a100"],
        ));
        assert_eq!(drift_of(&nc, &not_in), None);
        let mut absent = np.clone();
        absent.spec.template.spec.requirements.push(Req::new(
            "example.com/gpu",
            "DoesNotExist",
            &[],
        ));
        assert_eq!(drift_of(&nc, &absent), None);
    }

    #[test]
    fn nodepool_drift_comes_before_requirements_and_provider() {
        let np = pool();
        let nc = claim_from(&np);
        let mut both = np.clone();
        both.spec
            .template
            .metadata
            .labels
            .insert("team".into(), "x".into());
        both.spec.template.spec.requirements[0] = Req::new("kubernetes.io/arch", "In", &["arm64"]);
        let provider = Verdict::Drifted(DriftFinding {
            reason: "AMIDrift".into(),
            message: "ami".into(),
        });
        assert_eq!(
            find_drift(
                &nc,
                &both,
                &nodepool_hashes(&both),
                Verdict::NotDrifted,
                provider.clone()
            )
            .finding()
            .unwrap()
            .reason,
            "NodePoolDrifted"
        );
        assert_eq!(
            find_drift(
                &nc,
                &np,
                &nodepool_hashes(&np),
                Verdict::NotDrifted,
                provider.clone()
            ),
            provider
        );
    }

    #[test]
    fn another_hash_version_is_restamped_not_drifted() {
        let np = pool();
        let mut nc = claim_from(&np);
        let annotations = nc.metadata.annotations.as_mut().unwrap();
        annotations.insert(ANNOTATION_NODEPOOL_HASH.into(), "12345".into());
        annotations.insert(ANNOTATION_NODEPOOL_HASH_VERSION.into(), "v3".into());
        annotations.remove(ANNOTATION_NODEPOOL_FIELD_HASHES);
        assert_eq!(drift_of(&nc, &np), None);
        let restamp = nodepool_restamp(&nc, &nodepool_hashes(&np)).unwrap();
        assert_eq!(
            restamp[ANNOTATION_NODEPOOL_HASH_VERSION],
            NODEPOOL_HASH_VERSION
        );
        nc.metadata.annotations.as_mut().unwrap().extend(restamp);
        assert_eq!(nodepool_restamp(&nc, &nodepool_hashes(&np)), None);
        assert_eq!(drift_of(&nc, &np), None);
    }

    #[test]
    fn nodeclass_restamp_on_version_change_only() {
        let mut class = driftwood_api::EC2NodeClass::new("c", Default::default());
        class.spec.role = Some("r".into());
        let hashes = driftwood_api::hash::ec2nodeclass_hashes(&class, "");
        let mut nc = claim_from(&pool());
        assert!(nodeclass_restamp(&nc, &hashes).is_some(), "never stamped");
        nc.metadata
            .annotations
            .as_mut()
            .unwrap()
            .extend(nodeclass_stamp(&hashes));
        assert_eq!(nodeclass_restamp(&nc, &hashes), None);
        nc.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(ANNOTATION_EC2NODECLASS_HASH_VERSION.into(), "v4".into());
        assert!(nodeclass_restamp(&nc, &hashes).is_some());
    }

    /// Karpenter nodepool hash suite: "should not update nodepool hash on the nodeclaim if it's
    /// drifted" — the version moves, the hash stays, so the NodeClaim stays drifted.
    #[test]
    fn drifted_nodeclaims_get_only_the_new_version() {
        let np = pool();
        let mut nc = claim_from(&np);
        nc.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(ANNOTATION_NODEPOOL_HASH_VERSION.into(), "v3".into());
        let status = nc.status.as_mut().unwrap();
        set_condition(
            &mut status.conditions,
            CONDITION_DRIFTED,
            STATUS_TRUE,
            "NodePoolDrifted",
            "x",
            now(),
            None,
        );
        let restamp = nodepool_restamp(&nc, &nodepool_hashes(&np)).unwrap();
        assert_eq!(
            restamp,
            BTreeMap::from([(
                ANNOTATION_NODEPOOL_HASH_VERSION.to_string(),
                NODEPOOL_HASH_VERSION.to_string()
            )])
        );
    }

    #[test]
    fn marking_transitions() {
        let np = pool();
        let mut nc = claim_from(&np);
        let finding = DriftFinding {
            reason: "AMIDrift".into(),
            message: "m".into(),
        };
        assert_eq!(
            drift_marking(&nc, &Verdict::Drifted(finding.clone()), true),
            DriftMarking::Set(finding.clone())
        );
        assert_eq!(
            drift_marking(&nc, &Verdict::Drifted(finding.clone()), false),
            DriftMarking::Keep
        );
        let status = nc.status.as_mut().unwrap();
        set_condition(
            &mut status.conditions,
            CONDITION_DRIFTED,
            STATUS_TRUE,
            "AMIDrift",
            "m",
            now(),
            None,
        );
        assert_eq!(
            drift_marking(&nc, &Verdict::Drifted(finding.clone()), true),
            DriftMarking::Keep
        );
        assert_eq!(
            drift_marking(&nc, &Verdict::NotDrifted, true),
            DriftMarking::Clear
        );
        assert_eq!(
            drift_marking(&nc, &Verdict::Drifted(finding.clone()), false),
            DriftMarking::Clear
        );
        // A check that could not run leaves the condition as it is.
        assert_eq!(
            drift_marking(&nc, &Verdict::Unknown("no subnets".into()), true),
            DriftMarking::Keep
        );
        // Not launched: never drifted.
        let mut unlaunched = claim_from(&np);
        unlaunched.status = None;
        assert_eq!(
            drift_marking(&unlaunched, &Verdict::Drifted(finding), true),
            DriftMarking::Keep
        );
    }
}
