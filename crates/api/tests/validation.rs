//! Feeds bad manifests through parsing and validation and checks each message names the
//! object, the field and the rule.

#![allow(clippy::unwrap_used)] // test helpers may unwrap

#[path = "parity/crd_parity.rs"]
mod crd_parity;
#[path = "validation/fuzz.rs"]
mod fuzz;
#[path = "validation/karpenter_v1_14.rs"]
mod karpenter_v1_14;

use driftwood_api::manifest::{Document, KarpenterObject, ParsedObject, parse_documents};
use driftwood_api::validation::{INFERRED_FAMILY_WARNING, ValidationReport};

const NODEPOOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: np
spec:
  template:
    metadata:
      labels:
        intent: apps
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - key: kubernetes.io/arch
        operator: In
        values: ["amd64"]
"#;

const NODECLASS: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: nc
spec:
  amiFamily: AL2023
  amiSelectorTerms:
  - alias: al2023@latest
  role: KarpenterNodeRole-demo
  subnetSelectorTerms:
  - tags: {karpenter.sh/discovery: demo}
  securityGroupSelectorTerms:
  - tags: {karpenter.sh/discovery: demo}
"#;

/// Applies a YAML merge (as `kubectl patch --type merge` would) to a base manifest and validates.
fn validate_patched(base: &str, patch: &str) -> ValidationReport {
    let mut value: serde_json::Value = serde_yaml::from_str(base).unwrap();
    let patch: serde_json::Value = serde_yaml::from_str(patch).unwrap();
    json_merge(&mut value, patch);
    let text = serde_yaml::to_string(&value).unwrap();
    match parse_documents(&text).remove(0).unwrap() {
        Document::Karpenter(object) => object.validate(),
        other => panic!("not ours: {other:?}"),
    }
}

fn json_merge(target: &mut serde_json::Value, patch: serde_json::Value) {
    match (target, patch) {
        (serde_json::Value::Object(t), serde_json::Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(&k);
                } else {
                    json_merge(t.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
        }
        (t, p) => *t = p,
    }
}

/// Asserts exactly one error, on `field`, whose text contains `rule`; returns the full message.
fn expect_error(report: &ValidationReport, field: &str, rule: &str) -> String {
    let matching: Vec<_> = report.errors.iter().filter(|e| e.field == field).collect();
    assert_eq!(
        matching.len(),
        1,
        "expected one error on {field}, got {:#?}",
        report.errors
    );
    let message = format!("{}: {}", report.object, matching[0]);
    assert!(
        message.contains(rule),
        "{message:?} should contain {rule:?}"
    );
    message
}

#[test]
fn base_manifests_are_valid() {
    let report = validate_patched(NODEPOOL, "{}");
    assert!(report.is_valid(), "{report:#?}");
    assert!(report.warnings.is_empty());
    let report = validate_patched(NODECLASS, "{}");
    assert!(report.is_valid(), "{report:#?}");
}

#[test]
fn budget_nodes_over_100_percent() {
    let report = validate_patched(
        NODEPOOL,
        r#"{spec: {disruption: {budgets: [{nodes: "150%"}]}}}"#,
    );
    let message = expect_error(
        &report,
        "spec.disruption.budgets[0].nodes",
        "percentage from 0% to 100%",
    );
    assert!(message.starts_with("NodePool \"np\""), "{message}");
    assert!(message.contains("\"150%\""), "{message}");
}

#[test]
fn budget_schedule_without_duration() {
    let report = validate_patched(
        NODEPOOL,
        r#"{spec: {disruption: {budgets: [{nodes: "0", schedule: "0 9 * * *"}]}}}"#,
    );
    expect_error(
        &report,
        "spec.disruption.budgets[0]",
        "'schedule' must be set with 'duration'",
    );
    let report = validate_patched(
        NODEPOOL,
        r#"{spec: {disruption: {budgets: [{nodes: "0", duration: "1h"}]}}}"#,
    );
    expect_error(
        &report,
        "spec.disruption.budgets[0]",
        "'schedule' must be set with 'duration'",
    );
}

#[test]
fn budget_cron_and_duration_syntax() {
    let report = validate_patched(
        NODEPOOL,
        r#"{spec: {disruption: {budgets: [{nodes: "1", schedule: "0 25 * * *", duration: "1h"}]}}}"#,
    );
    expect_error(&report, "spec.disruption.budgets[0].schedule", "hour");
    let report = validate_patched(
        NODEPOOL,
        r#"{spec: {disruption: {budgets: [{nodes: "1", schedule: "@daily", duration: "10s"}]}}}"#,
    );
    expect_error(
        &report,
        "spec.disruption.budgets[0].duration",
        "hours and/or minutes",
    );
    let report = validate_patched(
        NODEPOOL,
        r#"{spec: {disruption: {budgets: [{nodes: "1", schedule: "@weekly", duration: "1h30m", reasons: [Drifted, Expired]}]}}}"#,
    );
    expect_error(
        &report,
        "spec.disruption.budgets[0].reasons[1]",
        "must be one of",
    );
}

#[test]
fn requirement_operators_and_values() {
    let cases = [
        (
            r#"{key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["4", "8"]}"#,
            "single non-negative integer",
        ),
        (
            r#"{key: karpenter.k8s.aws/instance-cpu, operator: Lt, values: ["many"]}"#,
            "single non-negative integer",
        ),
        (
            r#"{key: karpenter.k8s.aws/instance-cpu, operator: Gte, values: []}"#,
            "single non-negative integer",
        ),
        (
            r#"{key: kubernetes.io/arch, operator: In, values: []}"#,
            "must have a value defined",
        ),
    ];
    for (requirement, rule) in cases {
        let report = validate_patched(
            NODEPOOL,
            &format!("{{spec: {{template: {{spec: {{requirements: [{requirement}]}}}}}}}}"),
        );
        expect_error(&report, "spec.template.spec.requirements[0].values", rule);
    }
    // Karpenter's schema accepts values with Exists (they are ignored): a warning, not an error.
    let report = validate_patched(
        NODEPOOL,
        "{spec: {template: {spec: {requirements: [{key: kubernetes.io/arch, operator: Exists, values: [amd64]}]}}}}",
    );
    assert!(report.is_valid(), "{:#?}", report.errors);
    assert_eq!(report.warnings.len(), 1);
    assert_eq!(
        report.warnings[0].field,
        "spec.template.spec.requirements[0].values"
    );
    let report = validate_patched(
        NODEPOOL,
        r#"{spec: {template: {spec: {requirements: [{key: kubernetes.io/arch, operator: Near, values: [x]}]}}}}"#,
    );
    expect_error(
        &report,
        "spec.template.spec.requirements[0].operator",
        "must be one of",
    );
}

#[test]
fn min_values_bounds() {
    let report = validate_patched(
        NODEPOOL,
        r#"{spec: {template: {spec: {requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [a, b], minValues: 3}]}}}}"#,
    );
    expect_error(
        &report,
        "spec.template.spec.requirements[0].minValues",
        "at least that many values",
    );
    let report = validate_patched(
        NODEPOOL,
        r#"{spec: {template: {spec: {requirements: [{key: node.kubernetes.io/instance-type, operator: Exists, minValues: 51}]}}}}"#,
    );
    expect_error(
        &report,
        "spec.template.spec.requirements[0].minValues",
        "between 1 and 50",
    );
}

#[test]
fn at_most_100_requirements() {
    let many: Vec<String> = (0..101)
        .map(|i| format!("{{key: example.com/k{i}, operator: Exists}}"))
        .collect();
    let report = validate_patched(
        NODEPOOL,
        &format!(
            "{{spec: {{template: {{spec: {{requirements: [{}]}}}}}}}}",
            many.join(",")
        ),
    );
    expect_error(&report, "spec.template.spec.requirements", "at most 100");
}

#[test]
fn restricted_label_domains() {
    for (key, rule) in [
        ("karpenter.sh/nodepool", "restricted"),
        ("kubernetes.io/hostname", "restricted"),
        (
            "karpenter.sh/custom",
            "label domain \"karpenter.sh\" is restricted",
        ),
        (
            "team.kubernetes.io/x",
            "label domain \"kubernetes.io\" is restricted",
        ),
        (
            "karpenter.k8s.aws/custom",
            "label domain \"karpenter.k8s.aws\" is restricted",
        ),
    ] {
        let report = validate_patched(
            NODEPOOL,
            &format!("{{spec: {{template: {{metadata: {{labels: {{{key}: v}}}}}}}}}}"),
        );
        expect_error(
            &report,
            &format!("spec.template.metadata.labels[{key}]"),
            rule,
        );
        let report = validate_patched(
            NODEPOOL,
            &format!(
                "{{spec: {{template: {{spec: {{requirements: [{{key: {key}, operator: Exists}}]}}}}}}}}"
            ),
        );
        expect_error(&report, "spec.template.spec.requirements[0].key", rule);
    }
    let report = validate_patched(
        NODEPOOL,
        r#"{spec: {template: {metadata: {labels: {node.kubernetes.io/role: web}}}}}"#,
    );
    assert!(report.is_valid(), "{report:#?}");
}

#[test]
fn durations_weight_limits_taints_and_node_class_ref() {
    let report = validate_patched(
        NODEPOOL,
        r#"{spec: {template: {spec: {expireAfter: "30d"}}}}"#,
    );
    expect_error(&report, "spec.template.spec.expireAfter", "\"Never\"");
    let report = validate_patched(
        NODEPOOL,
        r#"{spec: {template: {spec: {terminationGracePeriod: "Never"}}}}"#,
    );
    expect_error(
        &report,
        "spec.template.spec.terminationGracePeriod",
        "duration",
    );
    let report = validate_patched(NODEPOOL, r#"{spec: {weight: 0}}"#);
    expect_error(&report, "spec.weight", "between 1 and 100");
    let report = validate_patched(NODEPOOL, r#"{spec: {limits: {cpu: "lots"}}}"#);
    expect_error(&report, "spec.limits[cpu]", "resource quantity");
    let report = validate_patched(
        NODEPOOL,
        r#"{spec: {template: {spec: {taints: [{key: dedicated, effect: Sometimes}]}}}}"#,
    );
    expect_error(&report, "spec.template.spec.taints[0].effect", "NoSchedule");
    let report = validate_patched(
        NODEPOOL,
        r#"{spec: {template: {spec: {nodeClassRef: {name: ""}}}}}"#,
    );
    expect_error(
        &report,
        "spec.template.spec.nodeClassRef.name",
        "may not be empty",
    );
    let report = validate_patched(
        NODEPOOL,
        r#"{spec: {disruption: {consolidationPolicy: Always}}}"#,
    );
    expect_error(
        &report,
        "spec.disruption.consolidationPolicy",
        "WhenEmptyOrUnderutilized",
    );
}

#[test]
fn role_xor_instance_profile() {
    let report = validate_patched(
        NODECLASS,
        r#"{spec: {instanceProfile: KarpenterNodeInstanceProfile}}"#,
    );
    let message = expect_error(
        &report,
        "spec",
        "exactly one of ['role', 'instanceProfile']",
    );
    assert!(message.starts_with("EC2NodeClass \"nc\""), "{message}");
    let report = validate_patched(NODECLASS, r#"{spec: {role: null}}"#);
    expect_error(
        &report,
        "spec",
        "exactly one of ['role', 'instanceProfile']",
    );
}

#[test]
fn ami_selector_term_rules() {
    let report = validate_patched(
        NODECLASS,
        r#"{spec: {amiFamily: null, amiSelectorTerms: [{id: ami-123, name: foo}]}}"#,
    );
    expect_error(
        &report,
        "spec.amiSelectorTerms[0]",
        "'id' is mutually exclusive",
    );
    let report = validate_patched(
        NODECLASS,
        r#"{spec: {amiSelectorTerms: [{alias: al2023@latest}, {id: ami-123}]}}"#,
    );
    expect_error(
        &report,
        "spec.amiSelectorTerms",
        "cannot be set with a combination of other amiSelectorTerms",
    );
    let report = validate_patched(
        NODECLASS,
        r#"{spec: {amiSelectorTerms: [{alias: al2023@latest, owner: amazon}]}}"#,
    );
    let alias_errors: Vec<_> = report
        .errors
        .iter()
        .filter(|e| e.rule.contains("'alias' is mutually exclusive"))
        .collect();
    assert_eq!(alias_errors.len(), 1, "{report:#?}");
    let report = validate_patched(
        NODECLASS,
        r#"{spec: {amiFamily: null, amiSelectorTerms: [{alias: ubuntu@latest}]}}"#,
    );
    expect_error(
        &report,
        "spec.amiSelectorTerms[0].alias",
        "family is not supported",
    );
    let report = validate_patched(NODECLASS, r#"{spec: {amiSelectorTerms: [{}]}}"#);
    expect_error(
        &report,
        "spec.amiSelectorTerms[0]",
        "expected at least one, got none",
    );
    let report = validate_patched(NODECLASS, r#"{spec: {amiSelectorTerms: []}}"#);
    expect_error(&report, "spec.amiSelectorTerms", "at least 1 item");
    let report = validate_patched(
        NODECLASS,
        r#"{spec: {amiFamily: AL2, amiSelectorTerms: [{alias: al2023@latest}]}}"#,
    );
    expect_error(
        &report,
        "spec.amiFamily",
        "must match the family of the alias",
    );
    let report = validate_patched(NODECLASS, r#"{spec: {amiFamily: Ubuntu}}"#);
    expect_error(&report, "spec.amiFamily", "must be one of");
}

#[test]
fn missing_ami_family_is_a_warning_not_an_error() {
    let report = validate_patched(
        NODECLASS,
        r#"{spec: {amiFamily: null, amiSelectorTerms: [{id: ami-0123456789abcdef0}, {id: ami-0fedcba9876543210}]}}"#,
    );
    assert!(report.is_valid(), "{report:#?}");
    assert_eq!(report.warnings.len(), 1);
    assert_eq!(report.warnings[0].field, "spec.amiFamily");
    assert_eq!(report.warnings[0].message, INFERRED_FAMILY_WARNING);
}

#[test]
fn subnet_and_security_group_terms() {
    let report = validate_patched(
        NODECLASS,
        r#"{spec: {subnetSelectorTerms: [{id: subnet-1, tags: {a: b}}]}}"#,
    );
    expect_error(
        &report,
        "spec.subnetSelectorTerms[0]",
        "'id' is mutually exclusive",
    );
    let report = validate_patched(NODECLASS, r#"{spec: {securityGroupSelectorTerms: [{}]}}"#);
    expect_error(
        &report,
        "spec.securityGroupSelectorTerms[0]",
        "['tags', 'id', 'name']",
    );
    let report = validate_patched(
        NODECLASS,
        r#"{spec: {subnetSelectorTerms: [{tags: {karpenter.sh/discovery: ""}}]}}"#,
    );
    expect_error(
        &report,
        "spec.subnetSelectorTerms[0].tags[karpenter.sh/discovery]",
        "empty tag values",
    );
    let report = validate_patched(NODECLASS, r#"{spec: {subnetSelectorTerms: []}}"#);
    expect_error(&report, "spec.subnetSelectorTerms", "at least 1 item");
}

#[test]
fn restricted_tags() {
    for key in [
        "karpenter.sh/nodepool",
        "karpenter.sh/nodeclaim",
        "kubernetes.io/cluster/demo",
        "eks:eks-cluster-name",
        "karpenter.k8s.aws/ec2nodeclass",
    ] {
        let report = validate_patched(NODECLASS, &format!("{{spec: {{tags: {{\"{key}\": x}}}}}}"));
        expect_error(&report, &format!("spec.tags[{key}]"), "restricted tag");
    }
    let report = validate_patched(
        NODECLASS,
        r#"{spec: {tags: {team: x, KubernetesVersion: "1.30"}}}"#,
    );
    assert!(report.is_valid(), "{report:#?}");
}

#[test]
fn block_devices_metadata_and_kubelet() {
    let report = validate_patched(
        NODECLASS,
        r#"{spec: {blockDeviceMappings: [{deviceName: /dev/xvda, rootVolume: true, ebs: {volumeSize: 20Gi, volumeType: gp9}}, {deviceName: /dev/xvdb, rootVolume: true, ebs: {volumeSize: 100Gi}}]}}"#,
    );
    expect_error(
        &report,
        "spec.blockDeviceMappings[0].ebs.volumeType",
        "must be one of",
    );
    expect_error(
        &report,
        "spec.blockDeviceMappings",
        "only one blockDeviceMappings with rootVolume",
    );
    let report = validate_patched(
        NODECLASS,
        r#"{spec: {metadataOptions: {httpPutResponseHopLimit: 65}}}"#,
    );
    expect_error(
        &report,
        "spec.metadataOptions.httpPutResponseHopLimit",
        "between 1 and 64",
    );
    let report = validate_patched(
        NODECLASS,
        r#"{spec: {kubelet: {imageGCHighThresholdPercent: 50, imageGCLowThresholdPercent: 60}}}"#,
    );
    expect_error(
        &report,
        "spec.kubelet.imageGCHighThresholdPercent",
        "greater than",
    );
    let report = validate_patched(
        NODECLASS,
        r#"{spec: {kubelet: {evictionHard: {memory.free: 5%}}}}"#,
    );
    expect_error(
        &report,
        "spec.kubelet.evictionHard[memory.free]",
        "memory.available",
    );
}

#[test]
fn metadata_options_default_as_karpenter() {
    let text = NODECLASS;
    let Document::Karpenter(ParsedObject {
        object: KarpenterObject::EC2NodeClass(class),
        ..
    }) = parse_documents(text).remove(0).unwrap()
    else {
        panic!("expected EC2NodeClass");
    };
    let options = class.spec.metadata_options.unwrap();
    assert_eq!(options.http_endpoint, "enabled");
    assert_eq!(options.http_protocol_ipv6, "disabled");
    assert_eq!(options.http_put_response_hop_limit, 1);
    assert_eq!(options.http_tokens, "required");
}

#[test]
fn nodepool_defaults_as_karpenter() {
    let Document::Karpenter(ParsedObject {
        object: KarpenterObject::NodePool(np),
        ..
    }) = parse_documents(NODEPOOL).remove(0).unwrap()
    else {
        panic!("expected NodePool");
    };
    assert_eq!(np.spec.template.spec.expire_after.0, "720h");
    assert_eq!(np.spec.disruption.budgets.len(), 1);
    assert_eq!(np.spec.disruption.budgets[0].nodes, "10%");
    assert_eq!(
        np.spec.disruption.consolidation_policy,
        "WhenEmptyOrUnderutilized"
    );
    assert_eq!(np.spec.disruption.consolidate_after.0, "0s");
}
