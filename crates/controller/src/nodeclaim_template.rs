//! Builds the NodeClaim object for a NodeClaim the scheduling simulation opened: template
//! labels, annotations, taints; requirements narrowed by the pods; the instance types offered;
//! resource requests; hash stamps; owner and finalizer.

use driftwood_api::hash::{fnv1a64, nodepool_hashes};
use driftwood_api::nodeclaim::{NodeClaimSpec, ResourceRequirements};
use driftwood_api::requirement::{NodeSelectorRequirementWithMinValues, OP_DOES_NOT_EXIST, OP_IN};
use driftwood_api::wellknown::{
    FINALIZER_TERMINATION, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL, NEVER_LAUNCH_LABELS,
    is_well_known_label,
};
use driftwood_api::{NodeClaim, NodePool};
use driftwood_disruption::drift::nodepool_stamp;
use driftwood_scheduling::resources::format_amount;
use driftwood_scheduling::{NewNodeClaim, Requirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use std::collections::BTreeMap;

/// The custom labels a NodeClaim named `name` gets from its requirements, as Karpenter resolves
/// them when it creates the NodeClaim: every key that is not well-known (those come from the
/// instance type and offering the cloud launches) nor the hostname or a lifecycle label gets one
/// value its requirement admits: the value of a single `In`, one of several, or a generated
/// integer for `Exists`, `NotIn`, `Gt`, `Lt`, `Gte`, `Lte`; `DoesNotExist` gets none. The
/// generated values are stable for a name (a hash of name and key), so a NodeClaim built twice
/// is built the same.
pub fn launch_labels(name: &str, requirements: &Requirements) -> BTreeMap<String, String> {
    requirements
        .iter()
        .filter(|(key, _)| !is_well_known_label(key) && !NEVER_LAUNCH_LABELS.contains(key))
        .filter_map(|(key, requirement)| {
            let seed = fnv1a64(format!("{name}/{key}").as_bytes());
            requirement
                .any_value(seed)
                .map(|value| (key.to_string(), value))
        })
        .collect()
}

/// The NodeClaim named `name` for `planned`, made from `pool`. (The EC2NodeClass hash is
/// stamped by the cloud provider when it launches, as Karpenter's provider does.)
pub fn build_nodeclaim(name: &str, pool: &NodePool, planned: &NewNodeClaim) -> NodeClaim {
    let template = &pool.spec.template;
    let pool_name = pool.metadata.name.clone().unwrap_or_default();

    let mut requirements: Vec<NodeSelectorRequirementWithMinValues> = Vec::new();
    let mut narrowed_keys = Vec::new();
    for (key, requirement) in planned.requirements.iter() {
        if key == LABEL_INSTANCE_TYPE {
            continue;
        }
        if let Some(values) = requirement.finite_values() {
            let min_values = template
                .spec
                .requirements
                .iter()
                .find(|r| r.key == key)
                .and_then(|r| r.min_values);
            // A finite set with no value is DoesNotExist when absence is allowed (an `In []`
            // would admit nothing at all).
            let operator = if values.is_empty() && requirement.allows_absent() {
                OP_DOES_NOT_EXIST
            } else {
                OP_IN
            };
            requirements.push(NodeSelectorRequirementWithMinValues {
                key: key.to_string(),
                operator: operator.to_string(),
                values: values.iter().cloned().collect(),
                min_values,
            });
            narrowed_keys.push(key.to_string());
        }
    }
    for requirement in &template.spec.requirements {
        if requirement.key != LABEL_INSTANCE_TYPE && !narrowed_keys.contains(&requirement.key) {
            requirements.push(requirement.clone());
        }
    }
    requirements.push(NodeSelectorRequirementWithMinValues {
        key: LABEL_INSTANCE_TYPE.to_string(),
        operator: OP_IN.to_string(),
        values: planned.instance_types.clone(),
        min_values: template
            .spec
            .requirements
            .iter()
            .find(|r| r.key == LABEL_INSTANCE_TYPE)
            .and_then(|r| r.min_values),
    });
    requirements.sort_by(|a, b| a.key.cmp(&b.key));

    let mut labels = template.metadata.labels.clone();
    labels.extend(launch_labels(name, &planned.requirements));
    labels.insert(LABEL_NODEPOOL.to_string(), pool_name.clone());

    let mut annotations = template.metadata.annotations.clone();
    annotations.extend(nodepool_stamp(&nodepool_hashes(pool)));

    let requests: BTreeMap<String, Quantity> = planned
        .requests
        .names()
        .map(|resource| {
            (
                resource.to_string(),
                Quantity(format_amount(resource, planned.requests.get(resource))),
            )
        })
        .collect();

    NodeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(labels),
            annotations: Some(annotations),
            finalizers: Some(vec![FINALIZER_TERMINATION.to_string()]),
            owner_references: Some(vec![OwnerReference {
                api_version: "karpenter.sh/v1".into(),
                kind: "NodePool".into(),
                name: pool_name,
                uid: pool.metadata.uid.clone().unwrap_or_default(),
                block_owner_deletion: Some(true),
                controller: None,
            }]),
            ..Default::default()
        },
        spec: NodeClaimSpec {
            taints: template.spec.taints.clone(),
            startup_taints: template.spec.startup_taints.clone(),
            requirements,
            resources: Some(ResourceRequirements { requests }),
            node_class_ref: template.spec.node_class_ref.clone(),
            termination_grace_period: template.spec.termination_grace_period.clone(),
            expire_after: Some(template.spec.expire_after.clone()),
        },
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftwood_api::nodepool::NodePoolSpec;
    use driftwood_scheduling::resources::{CPU, MEMORY, PODS};
    use driftwood_scheduling::{Requirement, Requirements, Resources};

    #[test]
    fn builds_from_template_and_simulation() {
        let mut pool = NodePool::new("latest-current-ami", NodePoolSpec::default());
        pool.metadata.uid = Some("uid-1".into());
        pool.spec
            .template
            .metadata
            .labels
            .insert("intent".into(), "latest-current-ami".into());
        pool.spec.template.spec.node_class_ref.name = "latest-current-ami".into();
        pool.spec.template.spec.requirements = vec![
            NodeSelectorRequirementWithMinValues::new(
                "karpenter.sh/capacity-type",
                "In",
                &["spot", "on-demand"],
            ),
            NodeSelectorRequirementWithMinValues::new(
                "karpenter.k8s.aws/instance-category",
                "In",
                &["c", "m"],
            ),
        ];
        let mut narrowed = Requirements::new();
        narrowed.add(
            "karpenter.sh/capacity-type",
            Requirement::is_in(["on-demand"]),
        );
        narrowed.add(
            "node.kubernetes.io/instance-type",
            Requirement::is_in(["m5.xlarge", "c5.xlarge"]),
        );
        let planned = NewNodeClaim {
            nodepool: "latest-current-ami".into(),
            requirements: narrowed,
            instance_types: vec!["c5.xlarge".into(), "m5.xlarge".into()],
            pods: vec!["default/a".into()],
            requests: Resources::from_milli([
                (CPU, 1536),
                (MEMORY, 1536 * 1024 * 1024 * 1000),
                (PODS, 3000),
            ]),
            daemonset_requests: Resources::new(),
        };
        let claim = build_nodeclaim("latest-current-ami-abcde", &pool, &planned);
        let labels = claim.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["karpenter.sh/nodepool"], "latest-current-ami");
        assert_eq!(labels["intent"], "latest-current-ami");
        // Well-known labels come from the instance the cloud launches, not the requirements.
        assert!(!labels.contains_key("karpenter.sh/capacity-type"));
        let keys: Vec<&str> = claim
            .spec
            .requirements
            .iter()
            .map(|r| r.key.as_str())
            .collect();
        assert_eq!(
            keys,
            [
                "karpenter.k8s.aws/instance-category",
                "karpenter.sh/capacity-type",
                "node.kubernetes.io/instance-type"
            ]
        );
        assert_eq!(
            claim.spec.requirements[2].values,
            ["c5.xlarge", "m5.xlarge"]
        );
        let requests = &claim.spec.resources.as_ref().unwrap().requests;
        assert_eq!(requests["cpu"].0, "1536m");
        assert_eq!(
            claim.metadata.finalizers.as_deref(),
            Some(&["karpenter.sh/termination".to_string()][..])
        );
        assert_eq!(
            claim.metadata.owner_references.as_ref().unwrap()[0].uid,
            "uid-1"
        );
        let annotations = claim.metadata.annotations.as_ref().unwrap();
        assert_eq!(
            annotations["karpenter.sh/nodepool-hash"],
            nodepool_hashes(&pool).hash
        );
        assert_eq!(claim.spec.expire_after.as_ref().unwrap().0, "720h");
    }

    fn requirements(items: &[(&str, &str, &[&str])]) -> Requirements {
        let owned: Vec<(String, String, Vec<String>)> = items
            .iter()
            .map(|(k, o, v)| {
                (
                    k.to_string(),
                    o.to_string(),
                    v.iter().map(|s| s.to_string()).collect(),
                )
            })
            .collect();
        Requirements::from_node_selector_requirements(
            owned
                .iter()
                .map(|(k, o, v)| (k.as_str(), o.as_str(), v.as_slice(), None)),
        )
        .unwrap()
    }

    /// Karpenter provisioning suite "should label nodes": every custom requirement key gets a
    /// label its requirement admits (In one value, NotIn/Lt/Gt/Exists a generated one),
    /// DoesNotExist none; well-known keys and the hostname none (they come from the instance).
    #[test]
    fn every_custom_requirement_key_gets_a_label_that_satisfies_it() {
        let reqs = requirements(&[
            ("test-key-2", "In", &["test-value-2"]),
            ("team", "In", &["a", "b"]),
            ("test-key-3", "NotIn", &["test-value-3"]),
            ("test-key-4", "Lt", &["4"]),
            ("test-key-5", "Gt", &["5"]),
            ("test-key-6", "Exists", &[]),
            ("test-key-7", "DoesNotExist", &[]),
            ("node.kubernetes.io/windows-build", "NotIn", &["test-value"]),
            ("karpenter.k8s.aws/instance-local-nvme", "Exists", &[]),
            ("kubernetes.io/hostname", "Exists", &[]),
        ]);
        let labels = launch_labels("default-abcde", &reqs);
        assert_eq!(labels["test-key-2"], "test-value-2");
        assert_eq!(labels["team"], "a", "the first of several values");
        assert_ne!(labels["test-key-3"], "test-value-3");
        assert!(labels["test-key-4"].parse::<i64>().unwrap() < 4);
        assert!(labels["test-key-5"].parse::<i64>().unwrap() > 5);
        assert!(labels.contains_key("test-key-6"));
        for absent in [
            "test-key-7",
            "node.kubernetes.io/windows-build",
            "karpenter.k8s.aws/instance-local-nvme",
            "kubernetes.io/hostname",
        ] {
            assert!(!labels.contains_key(absent), "{absent}: {labels:?}");
        }
        // Every generated label satisfies its requirement, and the same name gives the same
        // labels.
        for (key, value) in &labels {
            assert!(reqs.get(key).unwrap().has(value), "{key}={value}");
        }
        assert_eq!(labels, launch_labels("default-abcde", &reqs));
    }
}
