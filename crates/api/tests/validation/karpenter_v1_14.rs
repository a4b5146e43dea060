//! The fields Karpenter v1.14 added to its CRDs — static NodePools (`replicas`), network
//! interfaces, placement group, connection tracking, CPU options, capacity reservation match
//! criteria — validated as Karpenter's schema rules do. Each test names the Karpenter test it
//! follows (kubernetes-sigs/karpenter pkg/apis/v1/nodepool_validation_cel_test.go,
//! aws/karpenter-provider-aws pkg/apis/v1/ec2nodeclass_validation_cel_test.go, v1.14.1).

use super::{NODECLASS, NODEPOOL, expect_error, validate_patched};
use driftwood_api::nodepool::STATIC_UNSUPPORTED_MESSAGE;

/// Errors other than driftwood's refusal of static capacity.
fn karpenter_errors(report: &driftwood_api::validation::ValidationReport) -> Vec<String> {
    report
        .errors
        .iter()
        .filter(|e| e.rule != STATIC_UNSUPPORTED_MESSAGE)
        .map(ToString::to_string)
        .collect()
}

/// NodePool "Replicas": "should succeed when replicas is set to a positive value / to zero"
/// and "should succeed for compatible fields" (limits.nodes) pass Karpenter's rules; driftwood
/// then refuses static capacity itself, naming the field and why.
#[test]
fn static_nodepool_passes_karpenters_rules_and_is_refused_by_driftwood() {
    for patch in [
        "{spec: {replicas: 3}}",
        "{spec: {replicas: 0}}",
        r#"{spec: {replicas: 10, limits: {nodes: "20"}}}"#,
    ] {
        let report = validate_patched(NODEPOOL, patch);
        assert!(karpenter_errors(&report).is_empty(), "{patch}: {report:#?}");
        let message = expect_error(&report, "spec.replicas", "static capacity (spec.replicas)");
        assert!(message.starts_with("NodePool \"np\""), "{message}");
        assert!(message.contains("leaves this NodePool alone"), "{message}");
    }
}

/// NodePool "Replicas": "should fail when replicas is set to a negative value".
#[test]
fn static_nodepool_negative_replicas() {
    let report = validate_patched(NODEPOOL, "{spec: {replicas: -100}}");
    assert!(
        karpenter_errors(&report)
            .iter()
            .any(|e| e.contains("spec.replicas") && e.contains("must not be negative")),
        "{report:#?}"
    );
}

/// NodePool "Replicas": "should fail for incompatible fields" — limits.cpu, limits.memory,
/// limits.pods, limits.ephemeral-storage and weight.
#[test]
fn static_nodepool_incompatible_fields() {
    for (limit, value) in [
        ("cpu", "1000"),
        ("memory", "2000Gi"),
        ("pods", "10"),
        ("ephemeral-storage", "10Gi"),
    ] {
        let report = validate_patched(
            NODEPOOL,
            &format!(r#"{{spec: {{replicas: 10, limits: {{{limit}: "{value}"}}}}}}"#),
        );
        expect_error(
            &report,
            &format!("spec.limits[{limit}]"),
            "only 'limits.nodes' is supported on a static NodePool",
        );
    }
    let report = validate_patched(NODEPOOL, "{spec: {replicas: 10, weight: 25}}");
    expect_error(
        &report,
        "spec.weight",
        "'weight' is not supported on a static NodePool",
    );
}

/// A dynamic NodePool may set limits.nodes: Karpenter counts nodes against it and so does
/// driftwood, so it is valid without a warning.
#[test]
fn dynamic_nodepool_node_limit_is_valid() {
    let report = validate_patched(NODEPOOL, r#"{spec: {limits: {nodes: "10"}}}"#);
    assert!(report.is_valid(), "{report:#?}");
    assert!(report.warnings.is_empty(), "{report:#?}");
}

/// EC2NodeClass "NetworkInterfaces": "should succeed with valid multiple network interfaces"
/// and "should succeed when network interfaces is empty".
#[test]
fn network_interfaces_valid() {
    for patch in [
        "{spec: {networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}, {networkCardIndex: 0, deviceIndex: 1, interfaceType: efa-only}, {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}]}}",
        "{spec: {networkInterfaces: []}}",
    ] {
        let report = validate_patched(NODECLASS, patch);
        assert!(report.is_valid(), "{patch}: {report:#?}");
    }
}

/// EC2NodeClass "NetworkInterfaces": "should fail with an invalid interface type", "… a
/// negative NetworkCardIndex", "… a negative DeviceIndex".
#[test]
fn network_interface_fields() {
    let primary = "{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}";
    let report = validate_patched(
        NODECLASS,
        &format!(
            "{{spec: {{networkInterfaces: [{primary}, {{networkCardIndex: 1, deviceIndex: 0, interfaceType: ena}}]}}}}"
        ),
    );
    expect_error(
        &report,
        "spec.networkInterfaces[1].interfaceType",
        "must be one of \"interface\", \"efa-only\"",
    );
    let report = validate_patched(
        NODECLASS,
        &format!(
            "{{spec: {{networkInterfaces: [{primary}, {{networkCardIndex: -1, deviceIndex: -2, interfaceType: interface}}]}}}}"
        ),
    );
    expect_error(
        &report,
        "spec.networkInterfaces[1].networkCardIndex",
        "must not be negative",
    );
    expect_error(
        &report,
        "spec.networkInterfaces[1].deviceIndex",
        "must not be negative",
    );
}

/// EC2NodeClass "NetworkInterfaces": "should fail with duplicate Network Interface and Device
/// Index fields", "should fail with no primary network interface", "should fail when primary
/// network interface is not ENA", "should fail when multiple EFA devices on one network card".
#[test]
fn network_interface_list_rules() {
    let report = validate_patched(
        NODECLASS,
        "{spec: {networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}, {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}]}}",
    );
    assert!(
        report
            .errors
            .iter()
            .any(|e| e.rule.contains("used by more than one interface")),
        "{report:#?}"
    );
    for patch in [
        "{spec: {networkInterfaces: [{networkCardIndex: 1, deviceIndex: 0, interfaceType: interface}]}}",
        "{spec: {networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: efa-only}]}}",
    ] {
        let report = validate_patched(NODECLASS, patch);
        expect_error(
            &report,
            "spec.networkInterfaces",
            "must include the primary interface",
        );
    }
    let report = validate_patched(
        NODECLASS,
        "{spec: {networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}, {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}, {networkCardIndex: 1, deviceIndex: 1, interfaceType: efa-only}]}}",
    );
    expect_error(
        &report,
        "spec.networkInterfaces[1]",
        "more than one 'efa-only' interface",
    );
}

/// EC2NodeClass "ConnectionTracking": "should fail when connectionTracking is specified with no
/// fields set", "should succeed with all valid connection tracking settings", and the bounds
/// (tcpEstablishedTimeout 60-432000, udpStreamTimeout 60-180, udpTimeout 30-60).
#[test]
fn connection_tracking() {
    let report = validate_patched(NODECLASS, "{spec: {connectionTracking: {}}}");
    expect_error(
        &report,
        "spec.connectionTracking",
        "at least one of tcpEstablishedTimeout, udpStreamTimeout or udpTimeout",
    );
    let report = validate_patched(
        NODECLASS,
        "{spec: {connectionTracking: {tcpEstablishedTimeout: 3600, udpStreamTimeout: 120, udpTimeout: 30}}}",
    );
    assert!(report.is_valid(), "{report:#?}");
    for (field, value) in [
        ("tcpEstablishedTimeout", 59),
        ("tcpEstablishedTimeout", 432_001),
        ("udpStreamTimeout", 181),
        ("udpTimeout", 29),
        ("udpTimeout", 61),
    ] {
        let report = validate_patched(
            NODECLASS,
            &format!("{{spec: {{connectionTracking: {{{field}: {value}}}}}}}"),
        );
        expect_error(
            &report,
            &format!("spec.connectionTracking.{field}"),
            "must be between",
        );
    }
}

/// EC2NodeClass "CPUOptions": "should succeed with nestedVirtualization enabled / disabled",
/// "should fail with invalid nestedVirtualization value", "should succeed with empty
/// CPUOptions".
#[test]
fn cpu_options() {
    for patch in [
        "{spec: {cpuOptions: {nestedVirtualization: enabled}}}",
        "{spec: {cpuOptions: {nestedVirtualization: disabled}}}",
        "{spec: {cpuOptions: {}}}",
    ] {
        assert!(validate_patched(NODECLASS, patch).is_valid(), "{patch}");
    }
    let report = validate_patched(
        NODECLASS,
        "{spec: {cpuOptions: {nestedVirtualization: maybe}}}",
    );
    expect_error(
        &report,
        "spec.cpuOptions.nestedVirtualization",
        "must be one of \"enabled\", \"disabled\"",
    );
}

/// EC2NodeClass placementGroupSelector: one of name or id, not both; id as pg-…; name not
/// empty (Karpenter's CRD rules and bounds for the field).
#[test]
fn placement_group_selector() {
    for patch in [
        "{spec: {placementGroupSelector: {name: training}}}",
        "{spec: {placementGroupSelector: {id: pg-0123456789abcdef0}}}",
    ] {
        assert!(validate_patched(NODECLASS, patch).is_valid(), "{patch}");
    }
    let report = validate_patched(NODECLASS, "{spec: {placementGroupSelector: {}}}");
    expect_error(
        &report,
        "spec.placementGroupSelector",
        "expected at least one, got none, ['name', 'id']",
    );
    let report = validate_patched(
        NODECLASS,
        "{spec: {placementGroupSelector: {name: a, id: pg-1}}}",
    );
    expect_error(
        &report,
        "spec.placementGroupSelector",
        "'name' and 'id' are mutually exclusive",
    );
    let report = validate_patched(
        NODECLASS,
        "{spec: {placementGroupSelector: {id: placement-1}}}",
    );
    expect_error(
        &report,
        "spec.placementGroupSelector.id",
        "must be a placement group id",
    );
}

/// EC2NodeClass capacityReservationSelectorTerms: instanceMatchCriteria alone selects; 'id'
/// excludes every other field; ids and owner ids have their patterns.
#[test]
fn capacity_reservation_terms() {
    let report = validate_patched(
        NODECLASS,
        "{spec: {capacityReservationSelectorTerms: [{instanceMatchCriteria: open}, {tags: {team: a}, ownerID: '012345678901'}]}}",
    );
    assert!(report.is_valid(), "{report:#?}");
    let report = validate_patched(
        NODECLASS,
        "{spec: {capacityReservationSelectorTerms: [{id: cr-1, instanceMatchCriteria: targeted}]}}",
    );
    expect_error(
        &report,
        "spec.capacityReservationSelectorTerms[0]",
        "'id' is mutually exclusive",
    );
    let report = validate_patched(
        NODECLASS,
        "{spec: {capacityReservationSelectorTerms: [{instanceMatchCriteria: closed}, {tags: {a: b}, ownerID: '123'}, {id: reservation-1}]}}",
    );
    expect_error(
        &report,
        "spec.capacityReservationSelectorTerms[0].instanceMatchCriteria",
        "must be one of \"open\", \"targeted\"",
    );
    expect_error(
        &report,
        "spec.capacityReservationSelectorTerms[1].ownerID",
        "12-digit AWS account id",
    );
    expect_error(
        &report,
        "spec.capacityReservationSelectorTerms[2].id",
        "capacity reservation id",
    );
}

/// EC2NodeClass "should succeed when the amiFamily is custom with amiSelectorTerms[].alias";
/// another family than the alias's still fails.
#[test]
fn custom_family_with_an_alias() {
    let report = validate_patched(NODECLASS, "{spec: {amiFamily: Custom}}");
    assert!(report.is_valid(), "{report:#?}");
    let report = validate_patched(NODECLASS, "{spec: {amiFamily: Bottlerocket}}");
    expect_error(
        &report,
        "spec.amiFamily",
        "must match the family of the alias term (AL2023), be Custom",
    );
}

/// EC2NodeClass kubelet and EBS rules of Karpenter's schema: kubeReserved names and
/// non-negative values, eviction thresholds as percentages or quantities, and an EBS
/// initialization rate of 100-300 with a snapshot.
#[test]
fn kubelet_reserved_and_ebs_initialization_rate() {
    let report = validate_patched(
        NODECLASS,
        "{spec: {kubelet: {kubeReserved: {gpu: '1', memory: '-1Gi'}, evictionHard: {memory.available: lots}}}}",
    );
    expect_error(&report, "spec.kubelet.kubeReserved[gpu]", "must be one of");
    expect_error(
        &report,
        "spec.kubelet.kubeReserved[memory]",
        "may not be a negative resource quantity",
    );
    expect_error(
        &report,
        "spec.kubelet.evictionHard[memory.available]",
        "a percentage (e.g. 10%) or a quantity",
    );
    let report = validate_patched(
        NODECLASS,
        "{spec: {blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 20Gi, volumeInitializationRate: 400}}]}}",
    );
    let errors: Vec<String> = report.errors.iter().map(ToString::to_string).collect();
    assert!(
        errors.iter().any(|e| e.contains("between 100 and 300")),
        "{errors:#?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("snapshotID must be set when volumeInitializationRate is set")),
        "{errors:#?}"
    );
}
