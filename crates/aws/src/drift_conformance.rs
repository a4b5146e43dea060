//! Conformance tables: AWS provider drift and the EC2NodeClass static hash, checked row by row
//! against the tests of Karpenter's AWS provider v1.14.
//!
//! Each row's `source` names the Karpenter test it comes from:
//! * `CloudProvider › NodeClaim Drift › …`: `pkg/cloudprovider/suite_test.go`;
//! * `Hash › …`: `pkg/apis/v1/ec2nodeclass_hash_test.go`;
//! * `NodeClass Hash Controller › …`: `pkg/controllers/nodeclass/hash/suite_test.go`;
//! * `E2E Drift › …`: `test/suites/drift/suite_test.go`.
//!
//! Rows marked `code:` follow Karpenter code (named) that no unit test covers.
//!
//! The provider tables drive the pure [`provider_drift`] with inputs ([`DriftFacts`]) shaped like the
//! Karpenter fixture. Two things differ from Karpenter's inputs:
//! * driftwood takes the node's image from the running instance, where Karpenter reads
//!   `nodeClaim.status.imageID`;
//! * the class side is the hash computed now, where Karpenter reads the class annotation.
#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use driftwood_api::ec2nodeclass::{
    AMI_FAMILY_AL2023, AMI_FAMILY_CUSTOM, AmiSelectorTerm, BlockDevice, BlockDeviceMapping,
    CapacityReservationSelectorTerm, EC2NodeClass, EC2NodeClassSpec, KubeletConfiguration,
    MetadataOptions, SecurityGroupSelectorTerm, SubnetSelectorTerm,
};
use driftwood_api::hash::{EC2NODECLASS_HASH_VERSION, TemplateHashes, ec2nodeclass_hashes};
use driftwood_api::requirement::{NodeSelectorRequirementWithMinValues as Requirement, OP_IN};
use driftwood_api::wellknown::{
    DRIFT_AMI, DRIFT_NODECLASS, DRIFT_SECURITY_GROUP, DRIFT_SUBNET, LABEL_ARCH,
    LABEL_INSTANCE_TYPE, LABEL_NODEPOOL,
};

use crate::drift::{ClassAmi, DriftFacts, DriftUnknown, ProviderDrift, provider_drift};

// ---------------------------------------------------------------------------------------------
// Fixtures (the "NodeClaim Drift" BeforeEach and the "Static Drift Detection" NodeClass)
// ---------------------------------------------------------------------------------------------

/// The suites' `testCABundle`.
const CA_BUNDLE: &str = "test-ca-bundle";
const AMD_AMI: &str = "ami-amd64-valid";
const ARM_AMI: &str = "ami-arm64-valid";
const VALID_SG: &str = "sg-valid";
const VALID_SUBNET_1: &str = "subnet-valid-1";
const VALID_SUBNET_2: &str = "subnet-valid-2";
/// Stand-ins for the suites' `fake.ImageID()`, `fake.SubnetID()`, `fake.SecurityGroupID()`.
const RANDOM_AMI: &str = "ami-random";
const RANDOM_SUBNET: &str = "subnet-random";
const RANDOM_SG: &str = "sg-random";

fn owned(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| v.to_string()).collect()
}

/// The EC2NodeClass of `Context("Static Drift Detection")` BeforeEach.
fn fixture_class() -> EC2NodeClass {
    EC2NodeClass::new(
        "default",
        EC2NodeClassSpec {
            subnet_selector_terms: vec![SubnetSelectorTerm {
                tags: owned(&[("*", "*")]),
                id: None,
            }],
            security_group_selector_terms: vec![SecurityGroupSelectorTerm {
                tags: owned(&[("*", "*")]),
                ..Default::default()
            }],
            role: Some("test-role".to_string()),
            user_data: Some("Fake Userdata".to_string()),
            tags: owned(&[("fakeKey", "fakeValue")]),
            context: Some("fake-context".to_string()),
            detailed_monitoring: Some(false),
            ami_selector_terms: vec![AmiSelectorTerm {
                alias: Some("al2023@latest".to_string()),
                ..Default::default()
            }],
            associate_public_ip_address: Some(false),
            metadata_options: Some(MetadataOptions {
                http_endpoint: "disabled".to_string(),
                http_protocol_ipv6: "disabled".to_string(),
                http_put_response_hop_limit: 1,
                http_tokens: "optional".to_string(),
            }),
            block_device_mappings: vec![BlockDeviceMapping {
                device_name: Some("fakeName".to_string()),
                root_volume: false,
                ebs: Some(BlockDevice {
                    delete_on_termination: Some(false),
                    encrypted: Some(false),
                    iops: Some(0),
                    kms_key_id: Some("fakeKMSKeyID".to_string()),
                    snapshot_id: Some("fakeSnapshot".to_string()),
                    throughput: Some(0),
                    volume_size: Some("2G".to_string()),
                    volume_type: Some("standard".to_string()),
                    ..Default::default()
                }),
            }],
            ..Default::default()
        },
    )
}

fn class_ami(id: &str, arch: &str) -> ClassAmi {
    ClassAmi {
        id: id.to_string(),
        requirements: vec![Requirement::new(LABEL_ARCH, OP_IN, &[arch])],
    }
}

/// The "NodeClaim Drift" fixture:
/// * class and NodeClaim stamped with the same hash (`Hash(testCABundle)`, current version);
/// * the instance runs the amd64 AMI in subnet 1 with the one valid security group;
/// * the class status lists both AMIs (arm64 first), both subnets and the security group;
/// * the node's instance type is amd64.
fn inputs() -> DriftFacts {
    let current = ec2nodeclass_hashes(&fixture_class(), CA_BUNDLE);
    DriftFacts {
        current_version: EC2NODECLASS_HASH_VERSION.to_string(),
        stamped_hash: Some(current.hash.clone()),
        stamped_version: Some(EC2NODECLASS_HASH_VERSION.to_string()),
        stamped_fields: Some(current.fields_annotation()),
        node_image: AMD_AMI.to_string(),
        node_subnet: VALID_SUBNET_1.to_string(),
        node_security_groups: strings(&[VALID_SG]),
        node_labels: owned(&[
            (LABEL_NODEPOOL, "default"),
            (LABEL_INSTANCE_TYPE, "m5.large"),
            (LABEL_ARCH, "amd64"),
        ]),
        class_amis: vec![class_ami(ARM_AMI, "arm64"), class_ami(AMD_AMI, "amd64")],
        class_subnets: strings(&[VALID_SUBNET_1, VALID_SUBNET_2]),
        class_security_groups: strings(&[VALID_SG]),
        current,
    }
}

/// The class hashes after `spec.tags` is replaced by `{Test Key: Test Value}` (the change the
/// hash-annotation tests make so that a compared hash would drift).
fn hashes_with_test_tags() -> TemplateHashes {
    let mut class = fixture_class();
    class.spec.tags = owned(&[("Test Key", "Test Value")]);
    ec2nodeclass_hashes(&class, CA_BUNDLE)
}

/// What provider drift should conclude.
#[derive(Debug, Clone, Copy)]
enum Expect {
    NotDrifted,
    /// Drifted with this reason.
    Drift(&'static str),
    /// Cannot be judged: an error naming this check (`AMI`, `security group`, `subnet`).
    Unknown(&'static str),
}

fn check(source: &str, expect: Expect, got: &Result<Option<ProviderDrift>, DriftUnknown>) {
    let ok = match (expect, got) {
        (Expect::NotDrifted, Ok(None)) => true,
        (Expect::Drift(reason), Ok(Some(drift))) => drift.reason() == reason,
        (Expect::Unknown(check), Err(e)) => e.check == check,
        _ => false,
    };
    assert!(ok, "{source}: expected {expect:?}, got {got:?}");
}

// ---------------------------------------------------------------------------------------------
// Provider drift (cases 3–19, 44–47)
// ---------------------------------------------------------------------------------------------

struct ProviderRow {
    source: &'static str,
    change: fn(&mut DriftFacts),
    expect: Expect,
}

// Not expressible against the pure function, so no row:
// * 1 "should not fail if NodeClass does not exist", 2 "… if NodePool does not exist": looking up
//   the class and pool happens before `provider_drift` (AwsProvider::drift_inputs and the drift
//   controller).
// * 12 "should dynamically drift nodeclaims for capacity reservations" and 13 "should not drift
//   when capacity reservation falls back to on-demand": there is no CapacityReservationDrift.
// * 15 "should error if the NodeClaim doesn't have the instance-type label": the AMI check reads
//   the NodeClaim's labels (arch) and never looks the instance type up. A missing label is
//   core's InstanceTypeNotFound.
// * 17 "should error drift if NodeClaim doesn't have provider id" and 18 "should error if the
//   underlying NodeClaim doesn't exist": the instance is described in drift_inputs, before
//   `provider_drift`.
// * 46 "…hash-version annotation is not present on the NodeClass": the class side is not read
//   from annotations here. See `stamped_object_hash_table` in
//   crates/disruption/tests/conformance.rs.
fn provider_rows() -> Vec<ProviderRow> {
    vec![
        ProviderRow {
            source: "CloudProvider › NodeClaim Drift › It \"should return drifted if the AMI is not valid\"",
            change: |i: &mut DriftFacts| {
                i.node_image = RANDOM_AMI.to_string();
            },
            expect: Expect::Drift(DRIFT_AMI),
        },
        ProviderRow {
            source: "CloudProvider › NodeClaim Drift › It \"should return drifted if there are multiple drift reasons\"",
            change: |i: &mut DriftFacts| {
                i.node_image = RANDOM_AMI.to_string();
                i.node_subnet = RANDOM_SUBNET.to_string();
                i.node_security_groups = strings(&[RANDOM_SG]);
                i.current.hash = "abcdefghijkl".to_string();
            },
            expect: Expect::Drift(DRIFT_NODECLASS),
        },
        ProviderRow {
            source: "CloudProvider › NodeClaim Drift › It \"should return drifted if the subnet is not valid\"",
            change: |i: &mut DriftFacts| {
                i.node_subnet = RANDOM_SUBNET.to_string();
            },
            expect: Expect::Drift(DRIFT_SUBNET),
        },
        ProviderRow {
            source: "CloudProvider › NodeClaim Drift › It \"should return an error if subnets are empty\"",
            change: |i: &mut DriftFacts| {
                i.class_subnets.clear();
            },
            expect: Expect::Unknown("subnet"),
        },
        ProviderRow {
            source: "CloudProvider › NodeClaim Drift › It \"should not return drifted if the NodeClaim is valid\"",
            change: |_: &mut DriftFacts| {},
            expect: Expect::NotDrifted,
        },
        ProviderRow {
            source: "CloudProvider › NodeClaim Drift › It \"should return an error if the security groups are empty\"",
            change: |i: &mut DriftFacts| {
                i.class_security_groups.clear();
                i.node_security_groups = strings(&[RANDOM_SG]);
            },
            expect: Expect::Unknown("security group"),
        },
        ProviderRow {
            source: "CloudProvider › NodeClaim Drift › It \"should return drifted if the instance security groups doesn't match the discovered values\"",
            change: |i: &mut DriftFacts| {
                i.node_security_groups = strings(&[RANDOM_SG]);
            },
            expect: Expect::Drift(DRIFT_SECURITY_GROUP),
        },
        ProviderRow {
            source: "CloudProvider › NodeClaim Drift › It \"should return drifted if there are more instance security groups present than in the discovered values\"",
            change: |i: &mut DriftFacts| {
                i.node_security_groups = strings(&[RANDOM_SG, VALID_SG]);
            },
            expect: Expect::Drift(DRIFT_SECURITY_GROUP),
        },
        ProviderRow {
            source: "CloudProvider › NodeClaim Drift › It \"should return drifted if more security groups are present than instance security groups then discovered from nodeclass\"",
            change: |i: &mut DriftFacts| {
                i.class_security_groups = strings(&[VALID_SG, RANDOM_SG]);
            },
            expect: Expect::Drift(DRIFT_SECURITY_GROUP),
        },
        ProviderRow {
            source: "CloudProvider › NodeClaim Drift › It \"should not return drifted if the security groups match\"",
            change: |_: &mut DriftFacts| {},
            expect: Expect::NotDrifted,
        },
        ProviderRow {
            source: "CloudProvider › NodeClaim Drift › It \"should error if the NodeClaim doesn't have ImageID\" (driftwood: the instance reports no image)",
            change: |i: &mut DriftFacts| {
                i.node_image = String::new();
            },
            expect: Expect::Unknown("AMI"),
        },
        ProviderRow {
            source: "CloudProvider › NodeClaim Drift › It \"should return drifted if the AMI no longer matches the existing NodeClaims instance type\"",
            change: |i: &mut DriftFacts| {
                // amiFamily Custom, amiSelectorTerms [{id: amd}]: the status lists only the
                // amd64 AMI. The class hash annotation is not recomputed in that test, so the
                // static check stays quiet; `current` is left as stamped here too.
                i.class_amis = vec![class_ami(AMD_AMI, "amd64")];
                i.node_image = ARM_AMI.to_string();
            },
            expect: Expect::Drift(DRIFT_AMI),
        },
        // --- Order and set semantics (code: pkg/cloudprovider/drift.go) ---
        ProviderRow {
            source: "code: drift.go isAMIDrifted / amifamily.MapToInstanceTypes — only the first compatible status AMI is current",
            change: |i: &mut DriftFacts| {
                i.class_amis
                    .insert(0, class_ami("ami-amd64-newer", "amd64"));
            },
            expect: Expect::Drift(DRIFT_AMI),
        },
        ProviderRow {
            source: "code: drift.go areSecurityGroupsDrifted — set comparison: order and repeats do not matter",
            change: |i: &mut DriftFacts| {
                i.class_security_groups = strings(&["sg-b", "sg-a"]);
                i.node_security_groups = strings(&["sg-a", "sg-b", "sg-a"]);
            },
            expect: Expect::NotDrifted,
        },
        ProviderRow {
            source: "code: drift.go isNodeClassDrifted — SecurityGroupDrift is reported before SubnetDrift",
            change: |i: &mut DriftFacts| {
                i.node_subnet = RANDOM_SUBNET.to_string();
                i.node_security_groups = strings(&[RANDOM_SG]);
            },
            expect: Expect::Drift(DRIFT_SECURITY_GROUP),
        },
        ProviderRow {
            source: "code: drift.go isNodeClassDrifted — a subnet error aborts even when the security groups drifted",
            change: |i: &mut DriftFacts| {
                i.class_subnets.clear();
                i.node_security_groups = strings(&[RANDOM_SG]);
            },
            expect: Expect::Unknown("subnet"),
        },
        ProviderRow {
            source: "code: drift.go isNodeClassDrifted — an AMI error comes before the security-group check",
            change: |i: &mut DriftFacts| {
                i.class_amis.clear();
                i.node_security_groups = strings(&[RANDOM_SG]);
            },
            expect: Expect::Unknown("AMI"),
        },
        ProviderRow {
            source: "code: drift.go isNodeClassDrifted — static drift needs no status (empty AMIs, hash changed)",
            change: |i: &mut DriftFacts| {
                i.class_amis.clear();
                i.current = hashes_with_test_tags();
            },
            expect: Expect::Drift(DRIFT_NODECLASS),
        },
        // --- Hash annotations (Static Drift Detection, 44–47) ---
        ProviderRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › It \"should not return drifted if karpenter.k8s.aws/ec2nodeclass-hash annotation is not present on the NodeClaim\"",
            change: |i: &mut DriftFacts| {
                i.stamped_hash = None;
                i.stamped_fields = None;
                i.current = hashes_with_test_tags();
            },
            expect: Expect::NotDrifted,
        },
        ProviderRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › It \"should not return drifted if the NodeClaim's karpenter.k8s.aws/ec2nodeclass-hash-version annotation does not match the EC2NodeClass's\"",
            change: |i: &mut DriftFacts| {
                i.current.hash = "test-hash-111111".to_string();
                i.current_version = "test-hash-version-1".to_string();
                i.stamped_hash = Some("test-hash-222222".to_string());
                i.stamped_version = Some("test-hash-version-2".to_string());
                i.stamped_fields = None;
            },
            expect: Expect::NotDrifted,
        },
        ProviderRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › It \"should not return drifted if karpenter.k8s.aws/ec2nodeclass-hash-version annotation is not present on the NodeClaim\"",
            change: |i: &mut DriftFacts| {
                i.stamped_hash = Some("test-hash-222222".to_string());
                i.stamped_version = None;
                i.stamped_fields = None;
                i.current = hashes_with_test_tags();
            },
            expect: Expect::NotDrifted,
        },
        ProviderRow {
            source: "NodeClass Hash Controller › It \"should update ec2nodeclass-hash-versions on all NodeClaims when the ec2nodeclass-hash-version does not match with the controller hash version\" (a NodeClaim stamped by Karpenter's v5 is re-stamped, not drifted)",
            change: |i: &mut DriftFacts| {
                i.stamped_hash = Some("2608468723537941485".to_string());
                i.stamped_version = Some("v5".to_string());
                i.stamped_fields = None;
            },
            expect: Expect::NotDrifted,
        },
    ]
}

#[test]
fn provider_drift_table() {
    assert_eq!(
        inputs().check(provider_drift),
        Ok(None),
        "the fixture itself must not drift"
    );
    for row in provider_rows() {
        let mut i = inputs();
        (row.change)(&mut i);
        check(row.source, row.expect, &i.check(provider_drift));
    }
}

// ---------------------------------------------------------------------------------------------
// EC2NodeClass static hash (cases 20–43)
// ---------------------------------------------------------------------------------------------
//
// Karpenter tests on spec fields that `EC2NodeClassSpec` does not model, so no row:
// * `connectionTracking` {tcpEstablishedTimeout, udpStreamTimeout, udpTimeout}: Hash ›
//   "should match static hash on field value change" / "should change hash when static fields
//   are updated" entries "ConnectionTracking …";
// * `cpuOptions.nestedVirtualization`: the same tables' "CPUOptions NestedVirtualization", and
//   NodeClass Hash Controller › "CPUOptions Drift";
// * `networkInterfaces`: E2E Drift › DescribeTable "EC2NodeClass" › Entry "NetworkInterfaces";
// * `placementGroupSelector`: hashed in Karpenter (and so, with PlacementGroupDrift, a source
//   of NodeClassDrift); there is no such field here.
// The exact hash values of `Hash › "should match static hash on field value change"` are not
// checked either. driftwood hashes canonical JSON with FNV-1a under its own version (dw-*), not
// hashstructure v2 under "v5", so only "changes / does not change" carries over.

struct HashRow {
    source: &'static str,
    change: fn(&mut EC2NodeClass),
    /// Whether `ec2nodeclass_hashes(..).hash` changes (and so NodeClassDrift follows).
    changes_hash: bool,
}

fn bdm(c: &mut EC2NodeClass) -> &mut BlockDeviceMapping {
    &mut c.spec.block_device_mappings[0]
}

fn ebs(c: &mut EC2NodeClass) -> &mut BlockDevice {
    bdm(c).ebs.get_or_insert_with(BlockDevice::default)
}

fn md(c: &mut EC2NodeClass) -> &mut MetadataOptions {
    c.spec
        .metadata_options
        .get_or_insert_with(MetadataOptions::default)
}

fn hash_rows() -> Vec<HashRow> {
    vec![
        // --- DescribeTable "should return drifted if a statically drifted EC2NodeClass.Spec
        // field is updated" (mergo WithOverride + WithSliceDeepCopy: maps gain keys, a one-item
        // BDM list is merged into item 0) ---
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"UserData\"",
            change: |c: &mut EC2NodeClass| {
                c.spec.user_data = Some("userdata-test-2".to_string());
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"Tags\"",
            change: |c: &mut EC2NodeClass| {
                c.spec
                    .tags
                    .insert("keyTag-test-3".to_string(), "valueTag-test-3".to_string());
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"Context\"",
            change: |c: &mut EC2NodeClass| {
                c.spec.context = Some("context-2".to_string());
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"DetailedMonitoring\"",
            change: |c: &mut EC2NodeClass| {
                c.spec.detailed_monitoring = Some(true);
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"InstanceStorePolicy\"",
            change: |c: &mut EC2NodeClass| {
                c.spec.instance_store_policy = Some("RAID0".to_string());
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"AssociatePublicIPAddress\"",
            change: |c: &mut EC2NodeClass| {
                c.spec.associate_public_ip_address = Some(true);
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"MetadataOptions HTTPEndpoint\"",
            change: |c: &mut EC2NodeClass| {
                md(c).http_endpoint = "enabled".to_string();
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"MetadataOptions HTTPProtocolIPv6\"",
            change: |c: &mut EC2NodeClass| {
                md(c).http_protocol_ipv6 = "enabled".to_string();
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"MetadataOptions HTTPPutResponseHopLimit\"",
            change: |c: &mut EC2NodeClass| {
                md(c).http_put_response_hop_limit = 10;
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"MetadataOptions HTTPTokens\"",
            change: |c: &mut EC2NodeClass| {
                md(c).http_tokens = "required".to_string();
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"BlockDeviceMapping DeviceName\"",
            change: |c: &mut EC2NodeClass| {
                bdm(c).device_name = Some("map-device-test-3".to_string());
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"BlockDeviceMapping RootVolume\"",
            change: |c: &mut EC2NodeClass| {
                bdm(c).root_volume = true;
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"BlockDeviceMapping DeleteOnTermination\"",
            change: |c: &mut EC2NodeClass| {
                ebs(c).delete_on_termination = Some(true);
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"BlockDeviceMapping Encrypted\"",
            change: |c: &mut EC2NodeClass| {
                ebs(c).encrypted = Some(true);
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"BlockDeviceMapping IOPS\"",
            change: |c: &mut EC2NodeClass| {
                ebs(c).iops = Some(10);
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"BlockDeviceMapping KMSKeyID\"",
            change: |c: &mut EC2NodeClass| {
                ebs(c).kms_key_id = Some("test".to_string());
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"BlockDeviceMapping SnapshotID\"",
            change: |c: &mut EC2NodeClass| {
                ebs(c).snapshot_id = Some("test".to_string());
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"BlockDeviceMapping Throughput\"",
            change: |c: &mut EC2NodeClass| {
                ebs(c).throughput = Some(10);
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › Entry \"BlockDeviceMapping VolumeType\"",
            change: |c: &mut EC2NodeClass| {
                ebs(c).volume_type = Some("io1".to_string());
            },
            changes_hash: true,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › It \"should return drifted when updating blockDeviceMapping volumeSize\"",
            change: |c: &mut EC2NodeClass| {
                ebs(c).volume_size = Some("10G".to_string());
            },
            changes_hash: true,
        },
        // --- DescribeTable "should not return drifted if dynamic fields are updated" (41–43) ---
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › DescribeTable \"should not return drifted if dynamic fields are updated\" › Entry \"AMI Drift\"",
            change: |c: &mut EC2NodeClass| {
                c.spec.ami_family = Some(AMI_FAMILY_AL2023.to_string());
                c.spec.ami_selector_terms = vec![AmiSelectorTerm {
                    tags: owned(&[("ami-key-1", "ami-value-1")]),
                    ..Default::default()
                }];
            },
            changes_hash: false,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › DescribeTable \"should not return drifted if dynamic fields are updated\" › Entry \"Subnet Drift\"",
            change: |c: &mut EC2NodeClass| {
                c.spec.subnet_selector_terms = vec![SubnetSelectorTerm {
                    tags: owned(&[("sn-key-1", "sn-value-1")]),
                    id: None,
                }];
            },
            changes_hash: false,
        },
        HashRow {
            source: "CloudProvider › NodeClaim Drift › Static Drift Detection › DescribeTable \"should not return drifted if dynamic fields are updated\" › Entry \"SecurityGroup Drift\"",
            change: |c: &mut EC2NodeClass| {
                c.spec.security_group_selector_terms = vec![SecurityGroupSelectorTerm {
                    tags: owned(&[("sg-key", "sg-value")]),
                    ..Default::default()
                }];
            },
            changes_hash: false,
        },
        // --- amiFamily: the effective family is hashed, the literal and the terms are not ---
        HashRow {
            source: "code: ec2nodeclass.go Hash hashes AMIFamily() — amiFamily AL2023 added next to an al2023 alias",
            change: |c: &mut EC2NodeClass| {
                c.spec.ami_family = Some(AMI_FAMILY_AL2023.to_string());
            },
            changes_hash: false,
        },
        HashRow {
            source: "code: ec2nodeclass.go Hash hashes AMIFamily() — alias version al2023@latest → al2023@v20240625",
            change: |c: &mut EC2NodeClass| {
                c.spec.ami_selector_terms[0].alias = Some("al2023@v20240625".to_string());
            },
            changes_hash: false,
        },
        HashRow {
            source: "E2E Drift › DescribeTable \"EC2NodeClass\" › Entry \"AMIFamily\" (alias al2023@latest → bottlerocket@latest)",
            change: |c: &mut EC2NodeClass| {
                c.spec.ami_selector_terms = vec![AmiSelectorTerm {
                    alias: Some("bottlerocket@latest".to_string()),
                    ..Default::default()
                }];
            },
            changes_hash: true,
        },
        HashRow {
            source: "code: ec2nodeclass.go Hash hashes AMIFamily() — amiFamily Custom next to an al2023 alias",
            change: |c: &mut EC2NodeClass| {
                c.spec.ami_family = Some(AMI_FAMILY_CUSTOM.to_string());
            },
            changes_hash: true,
        },
        // --- Other hashed and excluded fields ---
        HashRow {
            source: "Hash › It \"should not change hash when behavior/dynamic fields are updated\" (capacityReservationSelectorTerms)",
            change: |c: &mut EC2NodeClass| {
                c.spec.capacity_reservation_selector_terms =
                    vec![CapacityReservationSelectorTerm {
                        id: Some("cr-0123456789".to_string()),
                        ..Default::default()
                    }];
            },
            changes_hash: false,
        },
        HashRow {
            source: "E2E Drift › It \"should drift nodeclaims when spec.role changes\"",
            change: |c: &mut EC2NodeClass| {
                c.spec.role = Some("test-role-2".to_string());
            },
            changes_hash: true,
        },
        HashRow {
            source: "E2E Drift › It \"should drift the EC2NodeClass on InstanceProfile\" / Hash › It \"should change hash when instanceProfile is updated\"",
            change: |c: &mut EC2NodeClass| {
                c.spec.role = None;
                c.spec.instance_profile = Some("test-instance-profile".to_string());
            },
            changes_hash: true,
        },
        HashRow {
            source: "E2E Drift › DescribeTable \"EC2NodeClass\" › Entry \"KubeletConfiguration\"",
            change: |c: &mut EC2NodeClass| {
                c.spec.kubelet = Some(KubeletConfiguration {
                    eviction_soft: owned(&[("memory.available", "5%")]),
                    eviction_soft_grace_period: owned(&[("memory.available", "1m0s")]),
                    ..Default::default()
                });
            },
            changes_hash: true,
        },
        HashRow {
            source: "E2E Drift › DescribeTable \"EC2NodeClass\" › Entry \"BlockDeviceMappings\" (list replaced)",
            change: |c: &mut EC2NodeClass| {
                c.spec.block_device_mappings = vec![BlockDeviceMapping {
                    device_name: Some("/dev/xvda".to_string()),
                    ebs: Some(BlockDevice {
                        volume_size: Some("20Gi".to_string()),
                        volume_type: Some("gp3".to_string()),
                        encrypted: Some(true),
                        ..Default::default()
                    }),
                    root_volume: false,
                }];
            },
            changes_hash: true,
        },
        HashRow {
            source: "code: ec2nodeclass.go BlockDevice fields are hashed — ebs.volumeInitializationRate",
            change: |c: &mut EC2NodeClass| {
                ebs(c).volume_initialization_rate = Some(100);
            },
            changes_hash: true,
        },
    ]
}

#[test]
fn static_field_hash_table() {
    let base = fixture_class();
    let base_hashes = ec2nodeclass_hashes(&base, CA_BUNDLE);
    for row in hash_rows() {
        let mut class = base.clone();
        (row.change)(&mut class);
        let hashes = ec2nodeclass_hashes(&class, CA_BUNDLE);
        assert_eq!(
            hashes.hash != base_hashes.hash,
            row.changes_hash,
            "{}: hash {} → {}",
            row.source,
            base_hashes.hash,
            hashes.hash
        );
        // As the Karpenter test does: recompute the class hash, then ask for drift.
        let mut i = inputs();
        i.current = hashes;
        let expect = if row.changes_hash {
            Expect::Drift(DRIFT_NODECLASS)
        } else {
            Expect::NotDrifted
        };
        check(row.source, expect, &i.check(provider_drift));
    }
}

/// Hash › It "should not change hash when blockDeviceMappings are re-ordered" (and "should match
/// static hash when reordering blockDeviceMappings").
#[test]
fn reordered_block_device_mappings_keep_the_hash() {
    let mut a = fixture_class();
    a.spec.block_device_mappings.push(BlockDeviceMapping {
        device_name: Some("map-device-2".to_string()),
        ..Default::default()
    });
    let mut b = a.clone();
    b.spec.block_device_mappings.reverse();
    assert_eq!(
        ec2nodeclass_hashes(&a, CA_BUNDLE).hash,
        ec2nodeclass_hashes(&b, CA_BUNDLE).hash
    );
}

/// Hash › It "should expect two EC2NodeClasses with the same spec to have the same hash".
#[test]
fn metadata_is_not_hashed() {
    let a = fixture_class();
    let mut b = EC2NodeClass::new("other-name", a.spec.clone());
    b.metadata.annotations = Some(owned(&[("some-annotation", "some-value")]));
    assert_eq!(
        ec2nodeclass_hashes(&a, CA_BUNDLE).hash,
        ec2nodeclass_hashes(&b, CA_BUNDLE).hash
    );
}

/// NodeClass Hash Controller › It "should update the drift hash when the CA bundle changes": a
/// new cluster CA moves the hash, so NodeClaims stamped under the old one drift.
#[test]
fn cluster_ca_bundle_change_drifts() {
    let class = fixture_class();
    let old = ec2nodeclass_hashes(&class, CA_BUNDLE);
    let new = ec2nodeclass_hashes(&class, "new-ca-bundle");
    assert_ne!(old.hash, new.hash);
    let mut i = inputs();
    i.current = new;
    check(
        "NodeClass Hash Controller › It \"should update the drift hash when the CA bundle changes\"",
        Expect::Drift(DRIFT_NODECLASS),
        &i.check(provider_drift),
    );
}
