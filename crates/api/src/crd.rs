//! CRD generation: the derived schemas of NodePool, NodeClaim and EC2NodeClass, with the rules a
//! schema can carry (patterns, enums, bounds, defaults, CEL rules) added from `validation::rules`.

use crate::ec2nodeclass::{AMI_FAMILIES, EC2NodeClass};
use crate::nodeclaim::NodeClaim;
use crate::nodepool::NodePool;
use crate::requirement::OPERATORS;
use crate::validation::rules;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Value, json};

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
                add_rules(&mut Schema(schema))
                    .map_err(|path| CrdError::MissingPath { crd: name, path })?;
            }
        }
    }
    serde_json::from_value(value).map_err(|source| CrdError::Serde { crd: name, source })
}

/// A JSON-schema node with navigation by field path ("spec.template.metadata"; "[]" enters
/// array items, "{}" enters additionalProperties).
struct Schema<'a>(&'a mut Value);

impl Schema<'_> {
    fn at(&mut self, path: &str) -> Result<&mut serde_json::Map<String, Value>, String> {
        let mut node: &mut Value = self.0;
        for part in path.split('.').filter(|p| !p.is_empty()) {
            node = match part {
                "[]" => node.get_mut("items"),
                "{}" => node.get_mut("additionalProperties"),
                field => node.get_mut("properties").and_then(|p| p.get_mut(field)),
            }
            .ok_or_else(|| path.to_string())?;
        }
        node.as_object_mut().ok_or_else(|| path.to_string())
    }

    fn set(&mut self, path: &str, key: &str, value: Value) -> Result<(), String> {
        self.at(path)?.insert(key.to_string(), value);
        Ok(())
    }

    /// Makes `field` of the object at `parent` required (and drops any serde-derived default).
    fn require(&mut self, parent: &str, field: &str) -> Result<(), String> {
        self.at(&format!("{parent}.{field}"))?.remove("default");
        let node = self.at(parent)?;
        let required = node.entry("required").or_insert_with(|| json!([]));
        if let Some(list) = required.as_array_mut()
            && !list.iter().any(|v| v == field)
        {
            list.push(json!(field));
        }
        Ok(())
    }

    fn pattern(&mut self, path: &str, pattern: &str) -> Result<(), String> {
        self.set(path, "pattern", json!(pattern))
    }

    fn enumeration(&mut self, path: &str, values: &[&str]) -> Result<(), String> {
        self.set(path, "enum", json!(values))
    }

    fn cel(&mut self, path: &str, rule: &str, message: &str) -> Result<(), String> {
        let node = self.at(path)?;
        let list = node
            .entry("x-kubernetes-validations")
            .or_insert_with(|| json!([]));
        if let Some(list) = list.as_array_mut() {
            list.push(json!({ "rule": rule, "message": message }));
        }
        Ok(())
    }
}

/// The rules of a requirement list. A NodeClaim carries its NodePool's name as a requirement, so
/// only a NodePool's requirements may not name `karpenter.sh/nodepool` (as in Karpenter's CRDs).
fn requirement_rules(s: &mut Schema, path: &str, nodepool_key_allowed: bool) -> Result<(), String> {
    s.set(path, "maxItems", json!(rules::MAX_REQUIREMENTS))?;
    let item = format!("{path}.[]");
    s.pattern(&format!("{item}.key"), rules::LABEL_KEY_PATTERN)?;
    s.set(&format!("{item}.key"), "maxLength", json!(316))?;
    s.enumeration(&format!("{item}.operator"), OPERATORS)?;
    s.set(
        &format!("{item}.minValues"),
        "minimum",
        json!(rules::MIN_VALUES_RANGE.0),
    )?;
    s.set(
        &format!("{item}.minValues"),
        "maximum",
        json!(rules::MIN_VALUES_RANGE.1),
    )?;
    s.cel(
        path,
        "self.all(x, x.operator == 'In' ? has(x.values) && x.values.size() != 0 : true)",
        "requirements with operator 'In' must have a value defined",
    )?;
    s.cel(
        path,
        "self.all(x, (x.operator in ['Gt', 'Lt', 'Gte', 'Lte']) ? (has(x.values) && x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
        "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single non-negative integer value",
    )?;
    s.cel(
        path,
        "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
        "requirements with 'minValues' must have at least that many values specified in the 'values' field",
    )?;
    if nodepool_key_allowed {
        s.cel(
            path,
            "self.all(x, x.key != 'kubernetes.io/hostname')",
            "requirement key 'kubernetes.io/hostname' is restricted",
        )
    } else {
        s.cel(
            path,
            "self.all(x, x.key != 'karpenter.sh/nodepool' && x.key != 'kubernetes.io/hostname')",
            "requirement keys 'karpenter.sh/nodepool' and 'kubernetes.io/hostname' are restricted",
        )
    }
}

fn taint_rules(s: &mut Schema, path: &str) -> Result<(), String> {
    s.enumeration(&format!("{path}.[].effect"), rules::TAINT_EFFECTS)?;
    s.pattern(&format!("{path}.[].key"), rules::LABEL_KEY_PATTERN)
}

fn node_class_ref_rules(s: &mut Schema, path: &str) -> Result<(), String> {
    for field in ["group", "kind", "name"] {
        s.set(&format!("{path}.{field}"), "minLength", json!(1))?;
    }
    Ok(())
}

fn nodepool_rules(s: &mut Schema) -> Result<(), String> {
    let template = "spec.template";
    let spec = "spec.template.spec";
    requirement_rules(s, &format!("{spec}.requirements"), false)?;
    s.require(spec, "requirements")?;
    taint_rules(s, &format!("{spec}.taints"))?;
    taint_rules(s, &format!("{spec}.startupTaints"))?;
    node_class_ref_rules(s, &format!("{spec}.nodeClassRef"))?;
    s.pattern(
        &format!("{spec}.expireAfter"),
        rules::NILLABLE_DURATION_PATTERN,
    )?;
    s.set(
        &format!("{spec}.expireAfter"),
        "default",
        json!(crate::nodepool::DEFAULT_EXPIRE_AFTER),
    )?;
    s.pattern(
        &format!("{spec}.terminationGracePeriod"),
        rules::DURATION_PATTERN,
    )?;
    s.cel(
        &format!("{template}.metadata.labels"),
        "self.all(x, x != 'karpenter.sh/nodepool' && x != 'kubernetes.io/hostname')",
        "labels 'karpenter.sh/nodepool' and 'kubernetes.io/hostname' are restricted",
    )?;
    s.cel(
        &format!("{template}.metadata.labels"),
        "self.all(x, x in ['karpenter.sh/capacity-type'] || !x.find('^([^/]+)').endsWith('karpenter.sh'))",
        "label domain \"karpenter.sh\" is restricted",
    )?;
    s.cel(
        &format!("{template}.metadata.labels"),
        "self.all(x, x.startsWith('karpenter.k8s.aws/instance-') || !x.find('^([^/]+)').endsWith('karpenter.k8s.aws'))",
        "label domain \"karpenter.k8s.aws\" is restricted",
    )?;
    s.cel(
        &format!("{template}.metadata.labels"),
        "self.all(x, x in ['kubernetes.io/arch', 'kubernetes.io/os', 'topology.kubernetes.io/zone', 'topology.kubernetes.io/region', 'beta.kubernetes.io/instance-type', 'beta.kubernetes.io/arch', 'beta.kubernetes.io/os', 'failure-domain.beta.kubernetes.io/zone', 'failure-domain.beta.kubernetes.io/region', 'node.kubernetes.io/windows-build'] || x.find('^([^/]+)').endsWith('node.kubernetes.io') || x.find('^([^/]+)').endsWith('node-restriction.kubernetes.io') || !x.find('^([^/]+)').endsWith('kubernetes.io'))",
        "label domain \"kubernetes.io\" is restricted",
    )?;
    s.cel(
        &format!("{template}.metadata.labels"),
        "self.all(x, x.find('^([^/]+)').endsWith('kops.k8s.io') || !x.find('^([^/]+)').endsWith('k8s.io'))",
        "label domain \"k8s.io\" is restricted",
    )?;

    let disruption = "spec.disruption";
    s.set(
        disruption,
        "default",
        json!({"consolidateAfter": "0s", "consolidationPolicy": "WhenEmptyOrUnderutilized", "budgets": [{"nodes": "10%"}]}),
    )?;
    s.pattern(
        &format!("{disruption}.consolidateAfter"),
        rules::NILLABLE_DURATION_PATTERN,
    )?;
    s.enumeration(
        &format!("{disruption}.consolidationPolicy"),
        rules::CONSOLIDATION_POLICIES,
    )?;
    let budgets = format!("{disruption}.budgets");
    s.set(&budgets, "maxItems", json!(rules::MAX_BUDGETS))?;
    s.set(&budgets, "default", json!([{"nodes": "10%"}]))?;
    s.cel(
        &budgets,
        "self.all(x, has(x.schedule) == has(x.duration))",
        "'schedule' must be set with 'duration'",
    )?;
    s.pattern(&format!("{budgets}.[].nodes"), rules::BUDGET_NODES_PATTERN)?;
    s.set(
        &format!("{budgets}.[].nodes"),
        "default",
        json!(crate::nodepool::DEFAULT_BUDGET_NODES),
    )?;
    s.pattern(
        &format!("{budgets}.[].schedule"),
        rules::BUDGET_SCHEDULE_PATTERN,
    )?;
    s.pattern(
        &format!("{budgets}.[].duration"),
        rules::BUDGET_DURATION_PATTERN,
    )?;
    s.enumeration(
        &format!("{budgets}.[].reasons.[]"),
        rules::DISRUPTION_REASONS,
    )?;
    s.set(&format!("{budgets}.[].reasons"), "maxItems", json!(50))?;
    s.set(
        &format!("{template}.metadata.labels"),
        "maxProperties",
        json!(100),
    )?;
    s.pattern("spec.limits.{}", rules::QUANTITY_PATTERN)?;
    s.set("spec.weight", "minimum", json!(rules::WEIGHT_RANGE.0))?;
    s.set("spec.weight", "maximum", json!(rules::WEIGHT_RANGE.1))
}

fn nodeclaim_rules(s: &mut Schema) -> Result<(), String> {
    requirement_rules(s, "spec.requirements", true)?;
    // A NodeClaim's spec never changes once created (Karpenter: "spec is immutable").
    s.cel("spec", "self == oldSelf", "spec is immutable")?;
    s.require("spec", "requirements")?;
    taint_rules(s, "spec.taints")?;
    taint_rules(s, "spec.startupTaints")?;
    node_class_ref_rules(s, "spec.nodeClassRef")?;
    s.pattern("spec.expireAfter", rules::NILLABLE_DURATION_PATTERN)?;
    s.pattern("spec.terminationGracePeriod", rules::DURATION_PATTERN)
}

fn ec2nodeclass_rules(s: &mut Schema) -> Result<(), String> {
    s.cel(
        "spec",
        "has(self.role) != has(self.instanceProfile)",
        "must specify exactly one of ['role', 'instanceProfile']",
    )?;
    for field in [
        "amiSelectorTerms",
        "subnetSelectorTerms",
        "securityGroupSelectorTerms",
    ] {
        s.require("spec", field)?;
    }
    let ami = "spec.amiSelectorTerms";
    s.set(ami, "minItems", json!(1))?;
    s.set(ami, "maxItems", json!(rules::MAX_SELECTOR_TERMS))?;
    s.cel(
        ami,
        "!(self.exists(x, has(x.alias)) && self.size() != 1)",
        "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
    )?;
    s.cel(
        &format!("{ami}.[]"),
        "has(self.tags) || has(self.id) || has(self.name) || has(self.alias) || has(self.ssmParameter)",
        "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
    )?;
    s.cel(
        &format!("{ami}.[]"),
        "!has(self.id) || !(has(self.tags) || has(self.name) || has(self.alias) || has(self.owner) || has(self.ssmParameter))",
        "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
    )?;
    s.cel(
        &format!("{ami}.[]"),
        "!has(self.alias) || !(has(self.tags) || has(self.name) || has(self.id) || has(self.owner) || has(self.ssmParameter))",
        "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
    )?;
    s.pattern(&format!("{ami}.[].alias"), rules::ALIAS_PATTERN)?;
    s.pattern(&format!("{ami}.[].id"), rules::AMI_ID_PATTERN)?;
    s.pattern("spec.subnetSelectorTerms.[].id", rules::SUBNET_ID_PATTERN)?;
    s.pattern(
        "spec.securityGroupSelectorTerms.[].id",
        rules::SECURITY_GROUP_ID_PATTERN,
    )?;
    s.set(&format!("{ami}.[].alias"), "maxLength", json!(30))?;
    s.cel(
        &format!("{ami}.[].alias"),
        "self.find('^[^@]+') in ['al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025']",
        "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'",
    )?;
    s.enumeration("spec.amiFamily", AMI_FAMILIES)?;
    for (path, fields, what) in [
        (
            "spec.subnetSelectorTerms",
            "['tags', 'id']",
            "a subnet selector term",
        ),
        (
            "spec.securityGroupSelectorTerms",
            "['tags', 'id', 'name']",
            "a security group selector term",
        ),
    ] {
        s.set(path, "minItems", json!(1))?;
        s.set(path, "maxItems", json!(rules::MAX_SELECTOR_TERMS))?;
        let has_any = if fields.contains("name") {
            "has(self.tags) || has(self.id) || has(self.name)"
        } else {
            "has(self.tags) || has(self.id)"
        };
        s.cel(
            &format!("{path}.[]"),
            has_any,
            &format!("expected at least one, got none, {fields}"),
        )?;
        let exclusive = if fields.contains("name") {
            "!has(self.id) || !(has(self.tags) || has(self.name))"
        } else {
            "!has(self.id) || !has(self.tags)"
        };
        s.cel(
            &format!("{path}.[]"),
            exclusive,
            &format!("'id' is mutually exclusive, cannot be set with a combination of other fields in {what}"),
        )?;
        s.cel(
            &format!("{path}.[].tags"),
            "self.all(k, k != '' && self[k] != '')",
            "empty tag keys or values aren't supported",
        )?;
    }
    s.cel(
        "spec.tags",
        "self.all(k, k != '')",
        "empty tag keys aren't supported",
    )?;
    for key in rules::RESTRICTED_TAG_KEYS {
        s.cel(
            "spec.tags",
            &format!("self.all(k, k != '{key}')"),
            &format!("tag contains a restricted tag matching {key}"),
        )?;
    }
    for prefix in rules::RESTRICTED_TAG_PREFIXES {
        s.cel(
            "spec.tags",
            &format!("self.all(k, !k.startsWith('{prefix}'))"),
            &format!("tag contains a restricted tag matching {prefix}"),
        )?;
    }
    let bdm = "spec.blockDeviceMappings";
    s.set(bdm, "maxItems", json!(rules::MAX_BLOCK_DEVICE_MAPPINGS))?;
    s.cel(
        bdm,
        "self.filter(x, has(x.rootVolume) && x.rootVolume).size() <= 1",
        "must have only one blockDeviceMappings with rootVolume",
    )?;
    s.enumeration(&format!("{bdm}.[].ebs.volumeType"), rules::VOLUME_TYPES)?;
    s.pattern(&format!("{bdm}.[].ebs.volumeSize"), rules::QUANTITY_PATTERN)?;
    s.enumeration("spec.instanceStorePolicy", rules::INSTANCE_STORE_POLICIES)?;
    let md = "spec.metadataOptions";
    s.set(
        md,
        "default",
        json!({"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"}),
    )?;
    s.enumeration(&format!("{md}.httpEndpoint"), rules::HTTP_ENDPOINT_VALUES)?;
    s.enumeration(
        &format!("{md}.httpProtocolIPv6"),
        rules::HTTP_ENDPOINT_VALUES,
    )?;
    s.enumeration(&format!("{md}.httpTokens"), rules::HTTP_TOKENS_VALUES)?;
    s.set(
        &format!("{md}.httpPutResponseHopLimit"),
        "minimum",
        json!(rules::HOP_LIMIT_RANGE.0),
    )?;
    s.set(
        &format!("{md}.httpPutResponseHopLimit"),
        "maximum",
        json!(rules::HOP_LIMIT_RANGE.1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn nodepool_printer_columns_match_karpenter() {
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
            "kubernetes.io/cluster/",
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
}
