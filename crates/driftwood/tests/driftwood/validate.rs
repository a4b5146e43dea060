//! `driftwood validate -f`: the walkthrough manifests pass; bad ones fail naming the field.

use super::{blueprints, driftwood, fill_placeholders, stdout};

fn write_filled(dir: &std::path::Path, blueprint: &str) {
    let source = blueprints().join(blueprint);
    for entry in std::fs::read_dir(&source).unwrap_or_else(|e| panic!("{}: {e}", source.display()))
    {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(
            dir.join(path.file_name().unwrap()),
            fill_placeholders(&text),
        )
        .unwrap();
    }
}

#[test]
fn accepts_both_walkthrough_forms_once_filled() {
    for blueprint in [
        "update-nodes-with-drift",
        "update-nodes-with-drift-name-terms",
    ] {
        let dir = tempfile::tempdir().unwrap();
        write_filled(dir.path(), blueprint);
        let output = driftwood(&["validate", "-f", dir.path().to_str().unwrap()], None);
        let text = stdout(&output);
        assert!(output.status.success(), "{blueprint}: {text}");
        assert!(text.contains("NodePool \"latest-current-ami\""), "{text}");
        assert!(text.contains("2 object(s) checked, 0 invalid"), "{text}");
        assert!(
            text.contains("Deployment \"latest-current-ami\"") && text.contains("skipped"),
            "{text}"
        );
    }
}

#[test]
fn missing_ami_family_of_the_id_form_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    write_filled(dir.path(), "update-nodes-with-drift");
    let text = stdout(&driftwood(
        &["validate", "-f", dir.path().to_str().unwrap()],
        None,
    ));
    assert!(text.contains("warning: spec.amiFamily"), "{text}");
}

#[test]
fn unfilled_placeholders_are_rejected_by_the_id_rule() {
    let output = driftwood(
        &[
            "validate",
            "-f",
            blueprints()
                .join("update-nodes-with-drift")
                .to_str()
                .unwrap(),
        ],
        None,
    );
    let text = stdout(&output);
    assert!(!output.status.success());
    assert!(
        text.contains("spec.amiSelectorTerms[0].id: Invalid value: \"<<AMD64PREVAMI>>\""),
        "{text}"
    );
    assert!(
        text.contains("looks like an unfilled placeholder"),
        "{text}"
    );
}

const NODEPOOL_HEAD: &str = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: bad\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n";

fn rejects(manifest: &str, expected: &[&str]) {
    let output = driftwood(&["validate", "-f", "-"], Some(manifest));
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    for part in expected {
        assert!(text.contains(part), "{part:?} not in:\n{text}");
    }
}

/// The AWS provider's examples/v1/windows-custom-userdata.yaml writes the group with its
/// version; Karpenter's CRD refuses it, and so do the API server and `driftwood validate`.
#[test]
fn rejects_a_node_class_group_with_a_version() {
    rejects(
        &NODEPOOL_HEAD.replace("group: karpenter.k8s.aws,", "group: karpenter.k8s.aws/v1,"),
        &[
            "NodePool \"bad\"",
            "spec.template.spec.nodeClassRef.group",
            "\"karpenter.k8s.aws/v1\"",
            "API group without a version",
        ],
    );
}

#[test]
fn rejects_budget_of_150_percent() {
    rejects(
        &format!(
            "{NODEPOOL_HEAD}      requirements: []\n  disruption:\n    budgets:\n    - nodes: \"150%\"\n"
        ),
        &[
            "NodePool \"bad\"",
            "invalid",
            "spec.disruption.budgets[0].nodes",
            "\"150%\"",
            "0% to 100%",
        ],
    );
}

#[test]
fn rejects_schedule_without_duration() {
    rejects(
        &format!(
            "{NODEPOOL_HEAD}      requirements: []\n  disruption:\n    budgets:\n    - nodes: \"0\"\n      schedule: \"0 9 * * mon-fri\"\n"
        ),
        &[
            "NodePool \"bad\"",
            "spec.disruption.budgets[0]",
            "'schedule' must be set with 'duration'",
        ],
    );
}

#[test]
fn rejects_role_and_instance_profile_together() {
    rejects(
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: both}\nspec:\n  amiSelectorTerms: [{alias: al2023@latest}]\n  role: KarpenterNodeRole\n  instanceProfile: KarpenterNodeInstanceProfile\n  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]\n  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]\n",
        &[
            "EC2NodeClass \"both\"",
            "error: spec:",
            "exactly one of ['role', 'instanceProfile']",
        ],
    );
}

#[test]
fn rejects_gt_with_two_values() {
    rejects(
        &format!(
            "{NODEPOOL_HEAD}      requirements:\n      - key: karpenter.k8s.aws/instance-cpu\n        operator: Gt\n        values: [\"4\", \"8\"]\n"
        ),
        &[
            "NodePool \"bad\"",
            "spec.template.spec.requirements[0].values",
            "'Gt' must have a single non-negative integer value",
        ],
    );
}

/// A static NodePool (Karpenter v1.14 `spec.replicas`) is refused by name: driftwood does not
/// manage static capacity.
#[test]
fn rejects_static_nodepool_naming_the_field_and_the_reason() {
    rejects(
        &format!(
            "{NODEPOOL_HEAD}      requirements: []\n  replicas: 3\n  limits:\n    nodes: \"5\"\n"
        ),
        &[
            "NodePool \"bad\"",
            "invalid",
            "spec.replicas: Invalid value: \"3\"",
            "static capacity (spec.replicas) is not supported by driftwood",
        ],
    );
}

/// Karpenter's static NodePool rules ("should fail for incompatible fields": weight, limits
/// other than nodes) are reported too, each on its field.
#[test]
fn rejects_static_nodepool_with_weight_or_resource_limits() {
    rejects(
        &format!(
            "{NODEPOOL_HEAD}      requirements: []\n  replicas: 2\n  weight: 25\n  limits:\n    cpu: \"1000\"\n"
        ),
        &[
            "spec.weight: Invalid value: \"25\": 'weight' is not supported on a static NodePool",
            "spec.limits[cpu]: Invalid value: \"cpu\": only 'limits.nodes' is supported on a static NodePool",
        ],
    );
}

/// The EC2NodeClass fields Karpenter v1.14 added are accepted (not "unknown field").
#[test]
fn accepts_karpenter_v1_14_ec2nodeclass_fields() {
    let manifest = "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: efa}\nspec:\n  amiSelectorTerms: [{alias: al2023@latest}]\n  role: KarpenterNodeRole\n  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]\n  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]\n  networkInterfaces:\n  - {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}\n  - {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}\n  placementGroupSelector: {name: training}\n  cpuOptions: {nestedVirtualization: enabled}\n  connectionTracking: {tcpEstablishedTimeout: 3600}\n  ipPrefixCount: 1\n  capacityReservationSelectorTerms: [{instanceMatchCriteria: open}]\n";
    let output = driftwood(&["validate", "-f", "-"], Some(manifest));
    let text = stdout(&output);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("1 object(s) checked, 0 invalid"), "{text}");
    assert!(!text.contains("unknown field"), "{text}");
}

/// Karpenter "should fail with no primary network interface".
#[test]
fn rejects_network_interfaces_without_the_primary_interface() {
    rejects(
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: nics}\nspec:\n  amiSelectorTerms: [{alias: al2023@latest}]\n  role: KarpenterNodeRole\n  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]\n  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]\n  networkInterfaces:\n  - {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}\n",
        &[
            "EC2NodeClass \"nics\"",
            "spec.networkInterfaces: must include the primary interface",
        ],
    );
}

#[test]
fn garbage_input_fails_cleanly() {
    for input in [
        "{",
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nspec: 7\n",
        "- 1\n- 2\n",
        "kind: NodePool\n",
    ] {
        let output = driftwood(&["validate", "-f", "-"], Some(input));
        assert_eq!(output.status.code(), Some(1), "{input:?}");
        assert!(
            stdout(&output).contains("error:"),
            "{input:?}: {}",
            stdout(&output)
        );
    }
}

#[test]
fn missing_file_is_an_error_naming_it() {
    let output = driftwood(&["validate", "-f", "/nonexistent/np.yaml"], None);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("/nonexistent/np.yaml"));
}
