//! CRD generation: the derived schemas of NodePool, NodeClaim and EC2NodeClass, with the rules a
//! schema can carry (patterns, enums, bounds, defaults, CEL rules) added from `validation::rules`.

mod common;
mod ec2nodeclass;
mod karpenter_sh;
mod schema;

use crate::ec2nodeclass::EC2NodeClass;
use crate::nodeclaim::NodeClaim;
use crate::nodepool::NodePool;
use ec2nodeclass::ec2nodeclass_rules;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_sh::{nodeclaim_rules, nodepool_rules};
use kube::CustomResourceExt;
use schema::Schema;
use serde_json::Value;

/// Why the CRDs could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    #[error("CRD {crd}: schema has no field at {path}")]
    MissingPath { crd: &'static str, path: String },
    #[error("CRD {crd}: {source}")]
    Serde {
        crd: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("rendering YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
}

/// The three CRDs, in install order.
pub fn crds() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    Ok(vec![
        finish(
            "ec2nodeclasses.karpenter.k8s.aws",
            EC2NodeClass::crd(),
            ec2nodeclass_rules,
        )?,
        finish("nodeclaims.karpenter.sh", NodeClaim::crd(), nodeclaim_rules)?,
        finish("nodepools.karpenter.sh", NodePool::crd(), nodepool_rules)?,
    ])
}

/// The three CRDs as one multi-document YAML stream.
pub fn crds_yaml() -> Result<String, CrdError> {
    let mut out = String::new();
    for crd in crds()? {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}

/// Each CRD as (file name, YAML), as checked in under deploy/crds/.
pub fn crd_files() -> Result<Vec<(String, String)>, CrdError> {
    crds()?
        .into_iter()
        .map(|crd| {
            let name = crd.metadata.name.clone().unwrap_or_default();
            Ok((format!("{name}.yaml"), serde_yaml::to_string(&crd)?))
        })
        .collect()
}

type Rules = fn(&mut Schema) -> Result<(), String>;

fn finish(
    name: &'static str,
    crd: CustomResourceDefinition,
    add_rules: Rules,
) -> Result<CustomResourceDefinition, CrdError> {
    let mut value =
        serde_json::to_value(crd).map_err(|source| CrdError::Serde { crd: name, source })?;
    if let Some(versions) = value
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
    {
        for version in versions {
            if let Some(schema) = version.pointer_mut("/schema/openAPIV3Schema") {
                schema::strip_nullable(schema);
                add_rules(&mut Schema(schema))
                    .map_err(|path| CrdError::MissingPath { crd: name, path })?;
            }
        }
    }
    serde_json::from_value(value).map_err(|source| CrdError::Serde { crd: name, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::rules;
    use serde_json::json;

    fn schema_of(crd: &CustomResourceDefinition) -> Value {
        let version = &crd.spec.versions[0];
        serde_json::to_value(
            version
                .schema
                .as_ref()
                .unwrap()
                .open_api_v3_schema
                .as_ref()
                .unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn crds_round_trip_as_k8s_openapi_types() {
        let yaml = crds_yaml().unwrap();
        let docs: Vec<CustomResourceDefinition> = serde_yaml::Deserializer::from_str(&yaml)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
        let names: Vec<_> = docs
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "ec2nodeclasses.karpenter.k8s.aws",
                "nodeclaims.karpenter.sh",
                "nodepools.karpenter.sh"
            ]
        );
        for crd in &docs {
            assert_eq!(crd.spec.scope, "Cluster");
            let version = &crd.spec.versions[0];
            assert!(version.served && version.storage);
            assert!(
                version
                    .subresources
                    .as_ref()
                    .and_then(|s| s.status.as_ref())
                    .is_some(),
                "status subresource"
            );
            assert!(
                crd.spec
                    .names
                    .categories
                    .as_ref()
                    .unwrap()
                    .contains(&"karpenter".to_string())
            );
        }
    }

    #[test]
    fn nodepool_schema_carries_budget_rules() {
        let crds = crds().unwrap();
        let schema = schema_of(&crds[2]);
        let budgets = schema
            .pointer("/properties/spec/properties/disruption/properties/budgets")
            .unwrap();
        assert_eq!(budgets["maxItems"], json!(50));
        assert_eq!(budgets["default"], json!([{"nodes": "10%"}]));
        assert_eq!(
            budgets["x-kubernetes-validations"][0]["message"],
            json!("'schedule' must be set with 'duration'")
        );
        let nodes = &budgets["items"]["properties"]["nodes"];
        assert_eq!(nodes["pattern"], json!(rules::BUDGET_NODES_PATTERN));
        let operator = schema
            .pointer("/properties/spec/properties/template/properties/spec/properties/requirements/items/properties/operator")
            .unwrap();
        assert_eq!(operator["enum"].as_array().unwrap().len(), 8);
        let expire = schema
            .pointer("/properties/spec/properties/template/properties/spec/properties/expireAfter")
            .unwrap();
        assert_eq!(expire["default"], json!("720h"));
        let weight = schema
            .pointer("/properties/spec/properties/weight")
            .unwrap();
        assert_eq!(
            (weight["minimum"].as_f64(), weight["maximum"].as_f64()),
            (Some(1.0), Some(100.0))
        );
    }

    /// Karpenter's columns, in its order, with driftwood's rollout columns (its own
    /// `status.rollout` and `RolloutComplete`) shown by default after Age.
    #[test]
    fn nodepool_printer_columns_are_karpenters_plus_the_rollout() {
        let crds = crds().unwrap();
        let columns: Vec<_> = crds[2].spec.versions[0]
            .additional_printer_columns
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(
            columns,
            [
                "NodeClass",
                "Nodes",
                "Ready",
                "Age",
                "Up-To-Date",
                "Drifted",
                "Disrupting",
                "Rollout",
                "Weight",
                "CPU",
                "Memory"
            ]
        );
        assert_eq!(
            crds[2].spec.names.short_names.as_ref().unwrap(),
            &["np", "nps"]
        );
        assert_eq!(
            crds[1].spec.names.short_names.as_ref().unwrap(),
            &["nc", "ncs"]
        );
        assert_eq!(
            crds[0].spec.names.short_names.as_ref().unwrap(),
            &["ec2nc", "ec2ncs"]
        );
    }

    #[test]
    fn ec2nodeclass_schema_carries_rules() {
        let crds = crds().unwrap();
        let schema = schema_of(&crds[0]);
        let spec = schema.pointer("/properties/spec").unwrap();
        let rules_text = spec["x-kubernetes-validations"].to_string();
        assert!(rules_text.contains("must specify exactly one of ['role', 'instanceProfile']"));
        let required: Vec<_> = spec["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for field in [
            "amiSelectorTerms",
            "subnetSelectorTerms",
            "securityGroupSelectorTerms",
        ] {
            assert!(required.contains(&field), "{field} required");
        }
        let tags_rules = spec["properties"]["tags"]["x-kubernetes-validations"].to_string();
        for key in [
            "karpenter.sh/nodepool",
            "karpenter.sh/nodeclaim",
            "eks:eks-cluster-name",
            "kubernetes.io/cluster",
        ] {
            assert!(tags_rules.contains(key), "{key}");
        }
        assert_eq!(
            spec["properties"]["metadataOptions"]["default"]["httpTokens"],
            json!("required")
        );
        assert_eq!(
            spec["properties"]["amiSelectorTerms"]["maxItems"],
            json!(30)
        );
    }

    /// Karpenter core nodepool_validation_cel_test "Replicas": the static NodePool rules
    /// (no weight, only limits.nodes, no switching between static and dynamic) and replicas
    /// at least 0 are in the NodePool schema; status.nodes defaults to 0.
    #[test]
    fn nodepool_schema_carries_static_rules() {
        let crds = crds().unwrap();
        let schema = schema_of(&crds[2]);
        let spec = schema.pointer("/properties/spec").unwrap();
        let rules_text = spec["x-kubernetes-validations"].to_string();
        for rule in [
            "has(self.replicas) == has(oldSelf.replicas)",
            "!has(self.replicas) || !has(self.weight)",
            "'nodes' in self.limits",
        ] {
            assert!(rules_text.contains(rule), "{rule}");
        }
        assert_eq!(
            spec["properties"]["replicas"]["minimum"].as_f64(),
            Some(0.0)
        );
        assert_eq!(
            schema.pointer("/properties/status/properties/nodes/default"),
            Some(&json!(0))
        );
    }

    /// Karpenter's schemas mark nothing nullable; neither do driftwood's (a null is pruned).
    #[test]
    fn no_field_is_nullable() {
        for crd in crds().unwrap() {
            let text = serde_json::to_string(&schema_of(&crd)).unwrap();
            assert!(!text.contains("\"nullable\""), "{:?}", crd.metadata.name);
        }
    }

    /// aws/karpenter-provider-aws ec2nodeclass_validation_cel_test "NetworkInterfaces": the
    /// primary-interface and no-duplicate rules, interfaceType enum and index bounds.
    #[test]
    fn ec2nodeclass_schema_carries_network_interface_rules() {
        let crds = crds().unwrap();
        let schema = schema_of(&crds[0]);
        let nics = schema
            .pointer("/properties/spec/properties/networkInterfaces")
            .unwrap();
        assert_eq!(nics["maxItems"], json!(150));
        assert_eq!(
            nics["x-kubernetes-validations"].as_array().unwrap().len(),
            2
        );
        assert_eq!(
            nics["items"]["properties"]["interfaceType"]["enum"],
            json!(["interface", "efa-only"])
        );
        assert_eq!(
            nics["items"]["properties"]["deviceIndex"]["minimum"].as_f64(),
            Some(0.0)
        );
    }
}
