//! Conformance tables: driftwood's core drift rules checked row by row against Karpenter v1.14 core.
//!
//! Each row's `source` names the Karpenter test it comes from, as `Describe › Context › It` or
//! `DescribeTable › Entry`:
//! * `Drift › …`: `pkg/controllers/nodeclaim/disruption/drift_test.go`;
//! * `Static Drift Hash › …`: `pkg/controllers/nodepool/hash/suite_test.go`;
//! * `AWS CloudProvider › …` / `AWS NodeClass Hash Controller › …`: the AWS provider's
//!   `pkg/cloudprovider/suite_test.go` / `pkg/controllers/nodeclass/hash/suite_test.go`;
//! * `AWS E2E Drift › …`: the AWS provider's `test/suites/drift/suite_test.go`.
//!
//! Rows marked `code:` cover behaviour that Karpenter has in code (named) but no unit test for.
//! The tables cover RequirementsDrifted, NodePoolDrifted and hash versions, the order of the
//! checks and the Drifted condition, and InstanceTypeNotFound.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use driftwood_api::condition::{STATUS_FALSE, STATUS_TRUE, STATUS_UNKNOWN, set_condition};
use driftwood_api::duration::NillableDuration;
use driftwood_api::hash::{
    EC2NODECLASS_HASH_VERSION, NODEPOOL_HASH_VERSION, TemplateHashes, nodepool_hashes,
};
use driftwood_api::nodeclaim::{NodeClaim, NodeClaimSpec, NodeClaimStatus, NodeClassReference};
use driftwood_api::nodepool::{Budget, NodePool, NodePoolSpec};
use driftwood_api::requirement::NodeSelectorRequirementWithMinValues;
use driftwood_api::wellknown::{
    ANNOTATION_EC2NODECLASS_HASH, ANNOTATION_EC2NODECLASS_HASH_VERSION, ANNOTATION_NODEPOOL_HASH,
    ANNOTATION_NODEPOOL_HASH_VERSION, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_RESERVED,
    CAPACITY_TYPE_SPOT, CONDITION_DRIFTED, CONDITION_LAUNCHED, DRIFT_AMI,
    DRIFT_INSTANCE_TYPE_NOT_FOUND, DRIFT_NODEPOOL, DRIFT_REQUIREMENTS, LABEL_ARCH, LABEL_ARCH_BETA,
    LABEL_CAPACITY_RESERVATION_ID, LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL,
    LABEL_OS, LABEL_OS_BETA, LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE, LABEL_TOPOLOGY_ZONE_BETA,
    LABEL_WINDOWS_BUILD,
};
use driftwood_disruption::drift::{
    DriftFinding, DriftMarking, INSTANCE_TYPE_CHECK_MIN_AGE_SECONDS,
    INSTANCE_TYPE_CHECK_TTL_SECONDS, NODECLASS_STAMP, NODEPOOL_STAMP, Verdict, core_drift,
    drift_marking, find_drift, instance_type_drift, nodepool_drift, nodepool_restamp,
    nodepool_stamp, requirements_drift, stamped_hashes,
};
use driftwood_scheduling::testkit::{fake_instance_types, instance_type};
use driftwood_scheduling::{InstanceType, Offering};
use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

// ---------------------------------------------------------------------------------------------
// Fixtures (Karpenter's drift suite BeforeEach, rebuilt)
// ---------------------------------------------------------------------------------------------

/// The instance type the fixture NodeClaim runs on.
const IT: &str = "it-fixture";
/// The zone of both fixture offerings and of the fixture NodeClaim.
const ZONE: &str = "test-zone-1a";
/// The custom numeric label of the Gt/Lt entries.
const TEST_LABEL: &str = "test-label";
/// A custom label key that is not well-known.
const CUSTOM: &str = "example.com/team";
/// Go's math.MaxInt on 64-bit platforms.
const MAX_INT: &str = "9223372036854775807";

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap())
}

fn owned(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The NodeClaim labels of the drift suite (`drift_test.go` BeforeEach).
const FIXTURE_LABELS: &[(&str, &str)] = &[
    (LABEL_NODEPOOL, "default"),
    (LABEL_INSTANCE_TYPE, IT),
    (LABEL_TOPOLOGY_ZONE, ZONE),
    (LABEL_CAPACITY_TYPE, CAPACITY_TYPE_SPOT),
    ("karpenter.test.sh/testnodeclass", "default"),
    ("testing/cluster", "unspecified"),
];

/// FIXTURE_LABELS with `set` merged over them (as `lo.Assign` does) and `remove` deleted.
fn labels_with(set: &[(&str, &str)], remove: &[&str]) -> BTreeMap<String, String> {
    let mut labels = owned(FIXTURE_LABELS);
    labels.extend(owned(set));
    for key in remove {
        labels.remove(*key);
    }
    labels
}

/// `test.NodePool()`: no requirements, template label testing/cluster, a TestNodeClass ref.
fn fixture_pool() -> NodePool {
    let mut np = NodePool::new("default", NodePoolSpec::default());
    np.spec
        .template
        .metadata
        .labels
        .insert("testing/cluster".to_string(), "unspecified".to_string());
    np.spec.template.spec.node_class_ref = NodeClassReference {
        kind: "TestNodeClass".to_string(),
        name: "default".to_string(),
        group: "karpenter.test.sh".to_string(),
    };
    np
}

fn taint(key: &str, effect: &str) -> Taint {
    Taint {
        key: key.to_string(),
        effect: effect.to_string(),
        ..Default::default()
    }
}

/// The NodePool of `Drift › NodePool Static Drift` BeforeEach.
fn static_drift_pool() -> NodePool {
    let mut np = fixture_pool();
    let template = &mut np.spec.template;
    template.metadata.annotations = owned(&[
        ("keyAnnotation", "valueAnnotation"),
        ("keyAnnotation2", "valueAnnotation2"),
    ]);
    template.metadata.labels = owned(&[("keyLabel", "valueLabel"), ("keyLabel2", "valueLabel2")]);
    template.spec.taints = vec![taint("keyvalue1", "NoExecute")];
    template.spec.startup_taints = vec![taint("startupkeyvalue1", "NoExecute")];
    template.spec.expire_after = NillableDuration("5m".to_string());
    template.spec.termination_grace_period = Some("5m".to_string());
    np
}

/// Sets a condition on the NodeClaim (message = reason, as Karpenter writes drift reasons).
fn set_status(nc: &mut NodeClaim, type_: &str, status: &str, reason: &str) {
    let st = nc.status.get_or_insert_with(NodeClaimStatus::default);
    set_condition(
        &mut st.conditions,
        type_,
        status,
        reason,
        reason,
        now(),
        None,
    );
}

/// A NodeClaim with these labels and annotations and Launched=True, no Drifted condition.
fn claim(labels: BTreeMap<String, String>, annotations: BTreeMap<String, String>) -> NodeClaim {
    let mut nc = NodeClaim::new("default-abcde", NodeClaimSpec::default());
    nc.metadata.labels = Some(labels);
    nc.metadata.annotations = Some(annotations);
    nc.status = Some(NodeClaimStatus::default());
    set_status(&mut nc, CONDITION_LAUNCHED, STATUS_TRUE, "Launched");
    nc
}

/// A launched NodeClaim made from `pool` now: stamped with its template hash.
fn claim_from(pool: &NodePool, labels: BTreeMap<String, String>) -> NodeClaim {
    claim(labels, nodepool_stamp(&nodepool_hashes(pool)))
}

// ---------------------------------------------------------------------------------------------
// (a) RequirementsDrifted
// ---------------------------------------------------------------------------------------------

/// One NodePool requirement, as written in a table.
#[derive(Debug, Clone, Copy)]
struct R {
    key: &'static str,
    op: &'static str,
    values: &'static [&'static str],
    min_values: Option<i64>,
}

impl R {
    fn build(&self) -> NodeSelectorRequirementWithMinValues {
        let mut req = NodeSelectorRequirementWithMinValues::new(self.key, self.op, self.values);
        req.min_values = self.min_values;
        req
    }
}

fn r(key: &'static str, op: &'static str, values: &'static [&'static str]) -> R {
    R {
        key,
        op,
        values,
        min_values: None,
    }
}

fn r_min(key: &'static str, op: &'static str, values: &'static [&'static str], min: i64) -> R {
    R {
        min_values: Some(min),
        ..r(key, op, values)
    }
}

fn pool_with_requirements(reqs: &[R]) -> NodePool {
    let mut np = fixture_pool();
    np.spec.template.spec.requirements = reqs.iter().map(R::build).collect();
    np
}

struct RequirementsRow {
    source: &'static str,
    /// The requirements the NodeClaim was launched under; they must not drift it (None: the
    /// row has no "before" step).
    old: Option<Vec<R>>,
    /// The NodePool's requirements now.
    new: Vec<R>,
    /// Labels merged over FIXTURE_LABELS.
    labels: &'static [(&'static str, &'static str)],
    /// FIXTURE_LABELS keys removed.
    remove: &'static [&'static str],
    drifted: bool,
}

/// A Karpenter table entry: old requirements, new requirements, labels, drifted.
fn entry(
    source: &'static str,
    old: Vec<R>,
    new: Vec<R>,
    labels: &'static [(&'static str, &'static str)],
    drifted: bool,
) -> RequirementsRow {
    RequirementsRow {
        source,
        old: Some(old),
        new,
        labels,
        remove: &[],
        drifted,
    }
}

/// A row of the per-operator rule: requirements now, labels set and removed, drifted.
fn rule(
    source: &'static str,
    new: Vec<R>,
    labels: &'static [(&'static str, &'static str)],
    remove: &'static [&'static str],
    drifted: bool,
) -> RequirementsRow {
    RequirementsRow {
        source,
        old: None,
        new,
        labels,
        remove,
        drifted,
    }
}

fn requirement_rows() -> Vec<RequirementsRow> {
    const OD: &str = CAPACITY_TYPE_ON_DEMAND;
    const CT_OD: &[(&str, &str)] = &[(LABEL_CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND)];
    const LINUX_OD: &[(&str, &str)] = &[
        (LABEL_CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND),
        (LABEL_OS, "linux"),
    ];
    vec![
        // --- Drift › NodeRequirement Drift (cases 13–21) ---
        entry(
            "Drift › NodeRequirement Drift › Entry \"should return drifted if the nodePool node requirement is updated\"",
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(LABEL_ARCH, "In", &["amd64"]),
                r(LABEL_OS, "In", &["linux"]),
            ],
            vec![r(LABEL_CAPACITY_TYPE, "In", &[CAPACITY_TYPE_SPOT])],
            &[
                (LABEL_CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND),
                (LABEL_ARCH, "amd64"),
                (LABEL_OS, "linux"),
            ],
            true,
        ),
        entry(
            "Drift › NodeRequirement Drift › Entry \"should return drifted if a new node requirement is added\"",
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(LABEL_OS, "In", &["linux"]),
            ],
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(LABEL_OS, "In", &["linux"]),
                r(LABEL_ARCH, "In", &["amd64"]),
            ],
            LINUX_OD,
            true,
        ),
        entry(
            "Drift › NodeRequirement Drift › Entry \"should return drifted if a node requirement is reduced\"",
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(LABEL_OS, "In", &["linux", "windows"]),
            ],
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(LABEL_OS, "In", &["windows"]),
            ],
            LINUX_OD,
            true,
        ),
        entry(
            "Drift › NodeRequirement Drift › Entry \"should not return drifted if a node requirement is expanded\"",
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(LABEL_OS, "In", &["linux"]),
            ],
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(LABEL_OS, "In", &["linux", "windows"]),
            ],
            LINUX_OD,
            false,
        ),
        entry(
            "Drift › NodeRequirement Drift › Entry \"should not return drifted if a node requirement set to Exists\"",
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(LABEL_OS, "In", &["linux"]),
            ],
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(LABEL_OS, "Exists", &[]),
            ],
            LINUX_OD,
            false,
        ),
        entry(
            "Drift › NodeRequirement Drift › Entry \"should return drifted if a node requirement set to DoesNotExists\"",
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(LABEL_OS, "In", &["linux"]),
            ],
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(LABEL_OS, "DoesNotExist", &[]),
            ],
            LINUX_OD,
            true,
        ),
        entry(
            "Drift › NodeRequirement Drift › Entry \"should not return drifted if a nodeClaim is greater then node requirement\"",
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(TEST_LABEL, "Gt", &["2"]),
            ],
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(TEST_LABEL, "Gt", &["10"]),
            ],
            &[
                (LABEL_CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND),
                (TEST_LABEL, "5"),
            ],
            true,
        ),
        entry(
            "Drift › NodeRequirement Drift › Entry \"should not return drifted if a nodeClaim is less then node requirement\"",
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(TEST_LABEL, "Lt", &["5"]),
            ],
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(TEST_LABEL, "Lt", &["1"]),
            ],
            &[
                (LABEL_CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND),
                (TEST_LABEL, "2"),
            ],
            true,
        ),
        entry(
            "Drift › NodeRequirement Drift › It \"should return drifted only on NodeClaims that are drifted from an updated nodePool\" (first NodeClaim, os=linux)",
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(LABEL_OS, "In", &["linux", "windows"]),
            ],
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(LABEL_OS, "In", &["linux"]),
            ],
            LINUX_OD,
            false,
        ),
        entry(
            "Drift › NodeRequirement Drift › It \"should return drifted only on NodeClaims that are drifted from an updated nodePool\" (second NodeClaim, os=windows)",
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(LABEL_OS, "In", &["linux", "windows"]),
            ],
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[OD]),
                r(LABEL_OS, "In", &["linux"]),
            ],
            &[
                (LABEL_CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND),
                (LABEL_OS, "windows"),
            ],
            true,
        ),
        entry(
            "Drift › It \"should detect node requirement drift before cloud provider drift\" (requirement part)",
            vec![],
            vec![r(LABEL_INSTANCE_TYPE, "DoesNotExist", &[])],
            &[],
            true,
        ),
        // --- Per-operator rule: Karpenter areRequirementsDrifted = NodeClaim label requirements
        // Compatible (strict, no AllowUndefinedWellKnownLabels) with the NodePool requirements.
        // In, several values.
        rule(
            "code: drift.go areRequirementsDrifted / requirements.go Compatible — In [a b], label absent",
            vec![r(CUSTOM, "In", &["a", "b"])],
            &[],
            &[],
            true,
        ),
        rule(
            "code: requirements.go Compatible — In [a b], label a",
            vec![r(CUSTOM, "In", &["a", "b"])],
            &[(CUSTOM, "a")],
            &[],
            false,
        ),
        rule(
            "code: requirements.go Compatible — In [a b], label c",
            vec![r(CUSTOM, "In", &["a", "b"])],
            &[(CUSTOM, "c")],
            &[],
            true,
        ),
        // NotIn.
        rule(
            "code: requirements.go Compatible — NotIn [a], label absent (negative operators may be undefined)",
            vec![r(CUSTOM, "NotIn", &["a"])],
            &[],
            &[],
            false,
        ),
        rule(
            "code: requirements.go Compatible — NotIn [a], label b",
            vec![r(CUSTOM, "NotIn", &["a"])],
            &[(CUSTOM, "b")],
            &[],
            false,
        ),
        rule(
            "code: requirements.go Compatible — NotIn [a], label a",
            vec![r(CUSTOM, "NotIn", &["a"])],
            &[(CUSTOM, "a")],
            &[],
            true,
        ),
        rule(
            "code: requirements.go Compatible — NotIn [10.0.17763] on the well-known windows-build key, label absent",
            vec![r(LABEL_WINDOWS_BUILD, "NotIn", &["10.0.17763"])],
            &[],
            &[],
            false,
        ),
        // NotIn [] reads as Exists (requirement.go Operator: complement, no values).
        rule(
            "code: requirement.go Operator — NotIn [] is Exists, label absent",
            vec![r(CUSTOM, "NotIn", &[])],
            &[],
            &[],
            true,
        ),
        rule(
            "code: requirement.go Operator — NotIn [] is Exists, label present",
            vec![r(CUSTOM, "NotIn", &[])],
            &[(CUSTOM, "x")],
            &[],
            false,
        ),
        // Exists / DoesNotExist.
        rule(
            "code: requirements.go Compatible — Exists, label absent",
            vec![r(CUSTOM, "Exists", &[])],
            &[],
            &[],
            true,
        ),
        rule(
            "code: requirements.go Compatible — Exists, label present",
            vec![r(CUSTOM, "Exists", &[])],
            &[(CUSTOM, "anything")],
            &[],
            false,
        ),
        rule(
            "code: requirements.go Compatible — DoesNotExist, label absent",
            vec![r(CUSTOM, "DoesNotExist", &[])],
            &[],
            &[],
            false,
        ),
        rule(
            "code: requirements.go Compatible — DoesNotExist, label present",
            vec![r(CUSTOM, "DoesNotExist", &[])],
            &[(CUSTOM, "x")],
            &[],
            true,
        ),
        // Gt / Lt / Gte / Lte (Gt N is stored as >= N+1, Lt N as <= N-1; labels parsed as ints).
        rule(
            "code: requirement.go Gt→Gte N+1 — Gt 5, label 6",
            vec![r(TEST_LABEL, "Gt", &["5"])],
            &[(TEST_LABEL, "6")],
            &[],
            false,
        ),
        rule(
            "code: requirement.go Gt→Gte N+1 — Gt 5, label 5",
            vec![r(TEST_LABEL, "Gt", &["5"])],
            &[(TEST_LABEL, "5")],
            &[],
            true,
        ),
        rule(
            "code: requirement.go Operator — Gt 5 reads as Exists, label absent",
            vec![r(TEST_LABEL, "Gt", &["5"])],
            &[],
            &[],
            true,
        ),
        rule(
            "code: requirement.go withinBounds (strconv.Atoi) — Gt 5, non-integer label",
            vec![r(TEST_LABEL, "Gt", &["5"])],
            &[(TEST_LABEL, "abc")],
            &[],
            true,
        ),
        rule(
            "code: requirement.go Lt→Lte N-1 — Lt 5, label 4",
            vec![r(TEST_LABEL, "Lt", &["5"])],
            &[(TEST_LABEL, "4")],
            &[],
            false,
        ),
        rule(
            "code: requirement.go Lt→Lte N-1 — Lt 5, label 5",
            vec![r(TEST_LABEL, "Lt", &["5"])],
            &[(TEST_LABEL, "5")],
            &[],
            true,
        ),
        rule(
            "code: requirement.go withinBounds — Lt 5, label -1 (negative integers parse)",
            vec![r(TEST_LABEL, "Lt", &["5"])],
            &[(TEST_LABEL, "-1")],
            &[],
            false,
        ),
        rule(
            "code: requirement.go withinBounds — Lt 5, non-integer label",
            vec![r(TEST_LABEL, "Lt", &["5"])],
            &[(TEST_LABEL, "x")],
            &[],
            true,
        ),
        rule(
            "code: requirement.go Operator — Lt 5, label absent",
            vec![r(TEST_LABEL, "Lt", &["5"])],
            &[],
            &[],
            true,
        ),
        rule(
            "code: requirement.go Gte — Gte 5, label 5",
            vec![r(TEST_LABEL, "Gte", &["5"])],
            &[(TEST_LABEL, "5")],
            &[],
            false,
        ),
        rule(
            "code: requirement.go Gte — Gte 5, label 4",
            vec![r(TEST_LABEL, "Gte", &["5"])],
            &[(TEST_LABEL, "4")],
            &[],
            true,
        ),
        rule(
            "code: requirement.go Gte — Gte 5, label absent",
            vec![r(TEST_LABEL, "Gte", &["5"])],
            &[],
            &[],
            true,
        ),
        rule(
            "code: requirement.go Lte — Lte 5, label 5",
            vec![r(TEST_LABEL, "Lte", &["5"])],
            &[(TEST_LABEL, "5")],
            &[],
            false,
        ),
        rule(
            "code: requirement.go Lte — Lte 5, label 6",
            vec![r(TEST_LABEL, "Lte", &["5"])],
            &[(TEST_LABEL, "6")],
            &[],
            true,
        ),
        rule(
            "code: requirement.go Lte — Lte 5, label absent",
            vec![r(TEST_LABEL, "Lte", &["5"])],
            &[],
            &[],
            true,
        ),
        // Gt MaxInt matches nothing: Karpenter builds DoesNotExist, so an absent label is fine.
        rule(
            "code: requirement.go NewRequirementWithFlexibility — Gt MaxInt is DoesNotExist, label absent",
            vec![r(TEST_LABEL, "Gt", &[MAX_INT])],
            &[],
            &[],
            false,
        ),
        rule(
            "code: requirement.go NewRequirementWithFlexibility — Gt MaxInt is DoesNotExist, label present",
            vec![r(TEST_LABEL, "Gt", &[MAX_INT])],
            &[(TEST_LABEL, "1")],
            &[],
            true,
        ),
        // Requirements on one key are intersected first (Requirements.Add).
        rule(
            "code: requirements.go Add (intersect) — In [a b] + In [b c], label b",
            vec![r(CUSTOM, "In", &["a", "b"]), r(CUSTOM, "In", &["b", "c"])],
            &[(CUSTOM, "b")],
            &[],
            false,
        ),
        rule(
            "code: requirements.go Add (intersect) — In [a b] + In [b c], label a",
            vec![r(CUSTOM, "In", &["a", "b"]), r(CUSTOM, "In", &["b", "c"])],
            &[(CUSTOM, "a")],
            &[],
            true,
        ),
        rule(
            "code: requirement.go Intersection — Gte 2 + Lte 4, label 3",
            vec![r(TEST_LABEL, "Gte", &["2"]), r(TEST_LABEL, "Lte", &["4"])],
            &[(TEST_LABEL, "3")],
            &[],
            false,
        ),
        rule(
            "code: requirement.go Intersection — Gte 2 + Lte 4, label 5",
            vec![r(TEST_LABEL, "Gte", &["2"]), r(TEST_LABEL, "Lte", &["4"])],
            &[(TEST_LABEL, "5")],
            &[],
            true,
        ),
        // A contradictory intersection is an empty, non-complement set: Operator() reads it as
        // DoesNotExist, so Karpenter lets an absent label through and drifts a present one.
        rule(
            "code: requirement.go Intersection/Operator — In [a] + In [b] is DoesNotExist, label absent",
            vec![r(CUSTOM, "In", &["a"]), r(CUSTOM, "In", &["b"])],
            &[],
            &[],
            false,
        ),
        rule(
            "code: requirement.go Intersection/Operator — In [a] + In [b] is DoesNotExist, label a",
            vec![r(CUSTOM, "In", &["a"]), r(CUSTOM, "In", &["b"])],
            &[(CUSTOM, "a")],
            &[],
            true,
        ),
        rule(
            "code: requirement.go Intersection — Gt 5 + Lt 3 is DoesNotExist, label absent",
            vec![r(TEST_LABEL, "Gt", &["5"]), r(TEST_LABEL, "Lt", &["3"])],
            &[],
            &[],
            false,
        ),
        rule(
            "code: requirement.go Intersection — Gt 5 + Lt 3 is DoesNotExist, label 4",
            vec![r(TEST_LABEL, "Gt", &["5"]), r(TEST_LABEL, "Lt", &["3"])],
            &[(TEST_LABEL, "4")],
            &[],
            true,
        ),
        // NotIn [a] ∩ Exists keeps the complement with values [a]: Operator() reads NotIn, so
        // the key may be undefined on the NodeClaim.
        rule(
            "code: requirement.go Intersection/Operator — NotIn [a] + Exists reads as NotIn, label absent",
            vec![r(CUSTOM, "NotIn", &["a"]), r(CUSTOM, "Exists", &[])],
            &[],
            &[],
            false,
        ),
        rule(
            "code: requirement.go Intersection — NotIn [a] + Exists, label a",
            vec![r(CUSTOM, "NotIn", &["a"]), r(CUSTOM, "Exists", &[])],
            &[(CUSTOM, "a")],
            &[],
            true,
        ),
        rule(
            "code: requirement.go Intersection — NotIn [a] + Exists, label b",
            vec![r(CUSTOM, "NotIn", &["a"]), r(CUSTOM, "Exists", &[])],
            &[(CUSTOM, "b")],
            &[],
            false,
        ),
        // minValues never affects Compatible.
        rule(
            "code: requirements.go Compatible ignores MinValues — In [a b] minValues 2, label a",
            vec![r_min(CUSTOM, "In", &["a", "b"], 2)],
            &[(CUSTOM, "a")],
            &[],
            false,
        ),
        rule(
            "code: requirements.go Compatible ignores MinValues — instance-type In [it, other] minValues 2",
            vec![r_min(LABEL_INSTANCE_TYPE, "In", &[IT, "other"], 2)],
            &[],
            &[],
            false,
        ),
        rule(
            "code: requirements.go Compatible ignores MinValues — In [b c] minValues 1, label a still drifts",
            vec![r_min(CUSTOM, "In", &["b", "c"], 1)],
            &[(CUSTOM, "a")],
            &[],
            true,
        ),
        // Missing keys: strict for custom and well-known keys alike.
        rule(
            "code: drift.go areRequirementsDrifted (strict) — custom key In, label missing",
            vec![r(CUSTOM, "In", &["x"])],
            &[],
            &[],
            true,
        ),
        rule(
            "code: drift.go areRequirementsDrifted (strict) — well-known zone In, zone label missing",
            vec![r(LABEL_TOPOLOGY_ZONE, "In", &[ZONE])],
            &[],
            &[LABEL_TOPOLOGY_ZONE],
            true,
        ),
        rule(
            "code: drift.go areRequirementsDrifted (strict) — well-known region In, never labelled",
            vec![r(LABEL_TOPOLOGY_REGION, "In", &["us-west-2"])],
            &[],
            &[],
            true,
        ),
        // Keys only on the NodeClaim are ignored: removing a requirement never drifts.
        entry(
            "code: requirements.go Intersects — a requirement removed from the NodePool never drifts",
            vec![
                r(LABEL_CAPACITY_TYPE, "In", &[CAPACITY_TYPE_SPOT]),
                r(LABEL_OS, "In", &["linux"]),
            ],
            vec![r(LABEL_CAPACITY_TYPE, "In", &[CAPACITY_TYPE_SPOT])],
            &[(LABEL_OS, "linux")],
            false,
        ),
        // Beta keys are normalized (v1.NormalizedLabels) on both sides.
        rule(
            "code: requirement.go NormalizedLabels — NodePool failure-domain.beta zone, NodeClaim topology zone",
            vec![r(LABEL_TOPOLOGY_ZONE_BETA, "In", &[ZONE])],
            &[],
            &[],
            false,
        ),
        rule(
            "code: requirement.go NormalizedLabels — NodePool failure-domain.beta zone excludes the zone",
            vec![r(LABEL_TOPOLOGY_ZONE_BETA, "In", &["test-zone-1b"])],
            &[],
            &[],
            true,
        ),
        rule(
            "code: requirement.go NormalizedLabels — NodePool beta arch, NodeClaim kubernetes.io/arch",
            vec![r(LABEL_ARCH_BETA, "In", &["amd64"])],
            &[(LABEL_ARCH, "amd64")],
            &[],
            false,
        ),
        rule(
            "code: scheduling.NewLabelRequirements normalizes — NodeClaim has only beta os label",
            vec![r(LABEL_OS, "In", &["linux"])],
            &[(LABEL_OS_BETA, "linux")],
            &[],
            false,
        ),
        rule(
            "code: AWS operator.go NormalizedLabels — topology.ebs.csi.aws.com/zone is the zone",
            vec![r("topology.ebs.csi.aws.com/zone", "In", &[ZONE])],
            &[],
            &[],
            false,
        ),
        // The reserved → on-demand relaxation belongs to InstanceTypeNotFound only.
        rule(
            "code: drift.go areRequirementsDrifted has no reserved relaxation — reserved NodeClaim, NodePool ct In [on-demand]",
            vec![r(LABEL_CAPACITY_TYPE, "In", &[OD])],
            &[(LABEL_CAPACITY_TYPE, CAPACITY_TYPE_RESERVED)],
            &[],
            true,
        ),
        rule(
            "AWS E2E Drift › Capacity Reservations › It \"should drift nodeclaim when the nodeclaim is demoted to on-demand\" (NodePool allows only reserved)",
            vec![r(LABEL_CAPACITY_TYPE, "In", &[CAPACITY_TYPE_RESERVED])],
            CT_OD,
            &[],
            true,
        ),
    ]
}

#[test]
fn requirements_drifted_table() {
    for row in requirement_rows() {
        let labels = labels_with(row.labels, row.remove);
        let old_pool = pool_with_requirements(row.old.as_deref().unwrap_or(&[]));
        let nc = claim_from(&old_pool, labels);
        if row.old.is_some() {
            assert_eq!(
                requirements_drift(&nc, &old_pool),
                None,
                "{}: the old requirements must not drift the NodeClaim",
                row.source
            );
        }
        let pool = pool_with_requirements(&row.new);
        let got = requirements_drift(&nc, &pool);
        assert_eq!(
            got.as_ref().map(|f| f.reason.as_str()),
            row.drifted.then_some(DRIFT_REQUIREMENTS),
            "{}: got {got:?}",
            row.source
        );
        // Requirements are not hashed, so the whole core check says the same.
        let core = core_drift(&nc, &pool, &nodepool_hashes(&pool), Verdict::NotDrifted);
        assert_eq!(
            core.finding().map(|f| f.reason.as_str()),
            row.drifted.then_some(DRIFT_REQUIREMENTS),
            "{}: core_drift gave {core:?}",
            row.source
        );
    }
}

// ---------------------------------------------------------------------------------------------
// (b) NodePoolDrifted: which template fields the static hash covers
// ---------------------------------------------------------------------------------------------

struct HashRow {
    source: &'static str,
    /// Applied to the static-drift NodePool before the NodeClaim is stamped.
    before: fn(&mut NodePool),
    /// Applied to the NodePool afterwards.
    after: fn(&mut NodePool),
    /// None: no NodePoolDrifted. Some(path): NodePoolDrifted whose message names that path.
    drifted: Option<&'static str>,
}

fn keep(_: &mut NodePool) {}

fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirementWithMinValues {
    NodeSelectorRequirementWithMinValues::new(key, op, values)
}

fn hash_rows() -> Vec<HashRow> {
    vec![
        // --- Drift › NodePool Static Drift › DescribeTable (cases 22–28) ---
        HashRow {
            source: "Drift › NodePool Static Drift › DescribeTable \"should detect drift on changes to the static fields\" › Entry \"Annoations\"",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec
                    .template
                    .metadata
                    .annotations
                    .insert("keyAnnotationTest".into(), "valueAnnotationTest".into());
            },
            drifted: Some("spec.template.metadata.annotations"),
        },
        HashRow {
            source: "Drift › NodePool Static Drift › DescribeTable \"should detect drift on changes to the static fields\" › Entry \"Labels\"",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec
                    .template
                    .metadata
                    .labels
                    .insert("keyLabelTest".into(), "valueLabelTest".into());
            },
            drifted: Some("spec.template.metadata.labels"),
        },
        HashRow {
            source: "Drift › NodePool Static Drift › DescribeTable \"should detect drift on changes to the static fields\" › Entry \"Taints\"",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec.template.spec.taints = vec![taint("keytest2taint", "NoExecute")];
            },
            drifted: Some("spec.template.spec.taints"),
        },
        HashRow {
            source: "Drift › NodePool Static Drift › DescribeTable \"should detect drift on changes to the static fields\" › Entry \"StartupTaints\"",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec.template.spec.startup_taints = vec![taint("keytest2taint", "NoExecute")];
            },
            drifted: Some("spec.template.spec.startupTaints"),
        },
        HashRow {
            source: "Drift › NodePool Static Drift › DescribeTable \"should detect drift on changes to the static fields\" › Entry \"NodeClassRef Name\"",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec.template.spec.node_class_ref.name = "testName".into();
            },
            drifted: Some("spec.template.spec.nodeClassRef"),
        },
        HashRow {
            source: "Drift › NodePool Static Drift › DescribeTable \"should detect drift on changes to the static fields\" › Entry \"ExpireAfter\"",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec.template.spec.expire_after = NillableDuration("100m".into());
            },
            drifted: Some("spec.template.spec.expireAfter"),
        },
        HashRow {
            source: "Drift › NodePool Static Drift › DescribeTable \"should detect drift on changes to the static fields\" › Entry \"TerminationGracePeriod\"",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec.template.spec.termination_grace_period = Some("100m".into());
            },
            drifted: Some("spec.template.spec.terminationGracePeriod"),
        },
        // --- Static Drift Hash (H2, H3) ---
        HashRow {
            source: "Static Drift Hash › It \"should update the drift hash when NodePool static field is updated\"",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec.template.metadata.labels = owned(&[("keyLabeltest", "valueLabeltest")]);
            },
            drifted: Some("spec.template.metadata.labels"),
        },
        HashRow {
            source: "Static Drift Hash › It \"should not update the drift hash when NodePool behavior field is updated\" (limits cpu 16)",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec.limits.insert("cpu".into(), Quantity("16".into()));
            },
            drifted: None,
        },
        HashRow {
            source: "Static Drift Hash › It \"should not update the drift hash when NodePool behavior field is updated\" (consolidationPolicy WhenEmpty)",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec.disruption.consolidation_policy = "WhenEmpty".into();
            },
            drifted: None,
        },
        HashRow {
            source: "Static Drift Hash › It \"should not update the drift hash when NodePool behavior field is updated\" (consolidateAfter 30s)",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec.disruption.consolidate_after = NillableDuration("30s".into());
            },
            drifted: None,
        },
        HashRow {
            source: "Static Drift Hash › It \"should not update the drift hash when NodePool behavior field is updated\" (weight 80)",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec.weight = Some(80);
            },
            drifted: None,
        },
        HashRow {
            source: "Static Drift Hash › It \"should not update the drift hash when NodePool behavior field is updated\" (requirements zone In [test], Gt 1, Lt 1)",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec.template.spec.requirements = vec![
                    req(LABEL_TOPOLOGY_ZONE, "In", &["test"]),
                    req(LABEL_TOPOLOGY_ZONE, "Gt", &["1"]),
                    req(LABEL_TOPOLOGY_ZONE, "Lt", &["1"]),
                ];
            },
            drifted: None,
        },
        HashRow {
            source: "code: nodepool.go Hash covers spec.template only — disruption budgets",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec.disruption.budgets = vec![Budget {
                    nodes: "0".into(),
                    ..Default::default()
                }];
            },
            drifted: None,
        },
        // --- Hash semantics (hashstructure v2: IgnoreZeroValue, SlicesAsSets; durations by value) ---
        HashRow {
            source: "code: hashstructure IgnoreZeroValue — taint value \"\" equals an absent value",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec.template.spec.taints[0].value = Some(String::new());
            },
            drifted: None,
        },
        HashRow {
            source: "code: hashstructure SlicesAsSets — taint order does not matter",
            before: |np: &mut NodePool| {
                np.spec.template.spec.taints =
                    vec![taint("a", "NoSchedule"), taint("b", "NoExecute")];
            },
            after: |np: &mut NodePool| {
                np.spec.template.spec.taints.reverse();
            },
            drifted: None,
        },
        HashRow {
            source: "code: NillableDuration hashed as *time.Duration — \"720h\" equals \"720h0m0s\"",
            before: |np: &mut NodePool| {
                np.spec.template.spec.expire_after = NillableDuration("720h".into());
            },
            after: |np: &mut NodePool| {
                np.spec.template.spec.expire_after = NillableDuration("720h0m0s".into());
            },
            drifted: None,
        },
        HashRow {
            source: "code: metav1.Duration hashed by value — terminationGracePeriod \"5m\" equals \"300s\"",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec.template.spec.termination_grace_period = Some("300s".into());
            },
            drifted: None,
        },
        HashRow {
            source: "code: NillableDuration nil (Never) is a zero value, unlike 5m — expireAfter 5m → Never",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec.template.spec.expire_after = NillableDuration("Never".into());
            },
            drifted: Some("spec.template.spec.expireAfter"),
        },
        HashRow {
            source: "code: nodepool.go NodeClassReference{Kind,Name,Group} hashed — nodeClassRef kind",
            before: keep,
            after: |np: &mut NodePool| {
                np.spec.template.spec.node_class_ref.kind = "OtherNodeClass".into();
            },
            drifted: Some("spec.template.spec.nodeClassRef"),
        },
    ]
}

#[test]
fn static_hash_table() {
    for row in hash_rows() {
        let mut pool = static_drift_pool();
        (row.before)(&mut pool);
        let nc = claim_from(&pool, owned(FIXTURE_LABELS));
        assert_eq!(
            nodepool_drift(&nc, &pool, &nodepool_hashes(&pool)),
            None,
            "{}: a NodeClaim stamped from this NodePool must not drift",
            row.source
        );
        (row.after)(&mut pool);
        let got = nodepool_drift(&nc, &pool, &nodepool_hashes(&pool));
        match (row.drifted, &got) {
            (None, None) => {}
            (Some(path), Some(finding)) => {
                assert_eq!(finding.reason, DRIFT_NODEPOOL, "{}", row.source);
                assert!(
                    finding.message.contains(path),
                    "{}: message {:?} should name {path}",
                    row.source,
                    finding.message
                );
            }
            _ => panic!("{}: expected {:?}, got {got:?}", row.source, row.drifted),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (c) Hash versions: missing or other-version stamps, reading stamps, re-stamping
// ---------------------------------------------------------------------------------------------

/// Placeholder for the NodePool's current template hash in annotation tables.
const CURRENT_HASH: &str = "<current hash>";
/// Placeholder for the current hash version of the stamp in question.
const CURRENT_VERSION: &str = "<current version>";

fn resolve(
    pairs: &[(&str, &str)],
    current: &TemplateHashes,
    version: &str,
) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| {
            let value = match *v {
                CURRENT_HASH => current.hash.clone(),
                CURRENT_VERSION => version.to_string(),
                other => other.to_string(),
            };
            (k.to_string(), value)
        })
        .collect()
}

struct StampRow {
    source: &'static str,
    /// The NodeClaim's annotations (placeholders resolved against the NodePool's hash).
    annotations: &'static [(&'static str, &'static str)],
    drifted: bool,
}

fn stamp_rows() -> Vec<StampRow> {
    const H: &str = ANNOTATION_NODEPOOL_HASH;
    const V: &str = ANNOTATION_NODEPOOL_HASH_VERSION;
    vec![
        StampRow {
            source: "Drift › NodePool Static Drift › It \"should not return drifted if karpenter.sh/nodepool-hash annotation is not present on the NodeClaim\"",
            annotations: &[(V, CURRENT_VERSION)],
            drifted: false,
        },
        StampRow {
            source: "Drift › NodePool Static Drift › It \"should not return drifted if the NodeClaim's karpenter.sh/nodepool-hash-version annotation does not match the NodePool's\"",
            annotations: &[(H, "test-hash-2"), (V, "test-version-2")],
            drifted: false,
        },
        StampRow {
            source: "Drift › NodePool Static Drift › It \"should not return drifted if karpenter.sh/nodepool-hash-version annotation is not present on the NodeClaim\"",
            annotations: &[(H, "test-hash-111111111")],
            drifted: false,
        },
        StampRow {
            source: "Drift suite BeforeEach (NodeClaim with only karpenter.sh/nodepool-hash): static drift cannot fire",
            annotations: &[(H, "test-hash-1")],
            drifted: false,
        },
        StampRow {
            source: "code: drift.go areStaticFieldsDrifted — a Karpenter v3 stamp is another version (driftwood's differs)",
            annotations: &[(H, "test-hash-1"), (V, "v3")],
            drifted: false,
        },
        StampRow {
            source: "Drift › It \"should detect static drift before cloud provider drift\" (same version, other hash)",
            annotations: &[(H, "test-123"), (V, CURRENT_VERSION)],
            drifted: true,
        },
        StampRow {
            source: "Drift › NodePool Static Drift › DescribeTable \"should detect drift on changes to the static fields\" (first step: stamped with the current hash)",
            annotations: &[(H, CURRENT_HASH), (V, CURRENT_VERSION)],
            drifted: false,
        },
    ]
}

#[test]
fn hash_version_stamp_table() {
    let pool = static_drift_pool();
    let current = nodepool_hashes(&pool);
    for row in stamp_rows() {
        let nc = claim(
            owned(FIXTURE_LABELS),
            resolve(row.annotations, &current, NODEPOOL_HASH_VERSION),
        );
        let got = nodepool_drift(&nc, &pool, &current);
        assert_eq!(
            got.as_ref().map(|f| f.reason.as_str()),
            row.drifted.then_some(DRIFT_NODEPOOL),
            "{}: got {got:?}",
            row.source
        );
        // Without static drift the provider decides (Karpenter falls through to IsDrifted).
        let provider = Verdict::Drifted(DriftFinding {
            reason: DRIFT_AMI.to_string(),
            message: DRIFT_AMI.to_string(),
        });
        let full = find_drift(&nc, &pool, &current, Verdict::NotDrifted, provider);
        let expected = if row.drifted {
            DRIFT_NODEPOOL
        } else {
            DRIFT_AMI
        };
        assert_eq!(
            full.finding().map(|f| f.reason.as_str()),
            Some(expected),
            "{}: find_drift gave {full:?}",
            row.source
        );
    }
}

struct StampedRow {
    source: &'static str,
    /// Whether the annotations are an EC2NodeClass's (else a NodePool's).
    nodeclass: bool,
    /// The object's annotations (CURRENT_VERSION resolved to the stamp's current version).
    annotations: &'static [(&'static str, &'static str)],
    /// Whether a hash can be read back from them.
    readable: bool,
}

fn stamped_rows() -> Vec<StampedRow> {
    vec![
        StampedRow {
            source: "Drift › NodePool Static Drift › It \"should not return drifted if karpenter.sh/nodepool-hash annotation is not present on the NodePool\"",
            nodeclass: false,
            annotations: &[],
            readable: false,
        },
        StampedRow {
            source: "Static Drift Hash › It \"should update nodepool hash version when the nodepool hash version is out of sync with the controller hash version\" (before the update)",
            nodeclass: false,
            annotations: &[
                (ANNOTATION_NODEPOOL_HASH, "abceduefed"),
                (ANNOTATION_NODEPOOL_HASH_VERSION, "test"),
            ],
            readable: false,
        },
        StampedRow {
            source: "Static Drift Hash › It \"should update nodepool hash version when the nodepool hash version is out of sync with the controller hash version\" (after the update)",
            nodeclass: false,
            annotations: &[
                (ANNOTATION_NODEPOOL_HASH, "abceduefed"),
                (ANNOTATION_NODEPOOL_HASH_VERSION, CURRENT_VERSION),
            ],
            readable: true,
        },
        StampedRow {
            source: "AWS CloudProvider › NodeClaim Drift › Static Drift Detection › It \"should not return drifted if karpenter.k8s.aws/ec2nodeclass-hash-version annotation is not present on the NodeClass\"",
            nodeclass: true,
            annotations: &[(ANNOTATION_EC2NODECLASS_HASH, "test-hash-111111")],
            readable: false,
        },
        StampedRow {
            source: "AWS CloudProvider › NodeClaim Drift › Static Drift Detection › It \"should not return drifted if the NodeClaim's karpenter.k8s.aws/ec2nodeclass-hash-version annotation does not match the EC2NodeClass's\" (class side)",
            nodeclass: true,
            annotations: &[
                (ANNOTATION_EC2NODECLASS_HASH, "test-hash-111111"),
                (ANNOTATION_EC2NODECLASS_HASH_VERSION, "test-hash-version-1"),
            ],
            readable: false,
        },
        StampedRow {
            source: "AWS NodeClass Hash Controller › It \"should update ec2nodeclass-hash-version annotation when the ec2nodeclass-hash-version on the NodeClass does not match with the controller hash version\" (after the update)",
            nodeclass: true,
            annotations: &[
                (ANNOTATION_EC2NODECLASS_HASH, "abceduefed"),
                (ANNOTATION_EC2NODECLASS_HASH_VERSION, CURRENT_VERSION),
            ],
            readable: true,
        },
    ]
}

#[test]
fn stamped_object_hash_table() {
    assert_eq!(stamped_hashes(None, &NODEPOOL_STAMP), None);
    let no_hash = TemplateHashes {
        hash: String::new(),
        fields: BTreeMap::new(),
    };
    for row in stamped_rows() {
        let (keys, version) = if row.nodeclass {
            (&NODECLASS_STAMP, EC2NODECLASS_HASH_VERSION)
        } else {
            (&NODEPOOL_STAMP, NODEPOOL_HASH_VERSION)
        };
        let annotations = resolve(row.annotations, &no_hash, version);
        let got = stamped_hashes(Some(&annotations), keys);
        assert_eq!(got.is_some(), row.readable, "{}: got {got:?}", row.source);
        if let Some(hashes) = got {
            assert_eq!(
                Some(&hashes.hash),
                annotations.get(keys.hash),
                "{}",
                row.source
            );
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Restamp {
    /// Nothing to write.
    Nothing,
    /// The current hash and version (and per-field hashes).
    Full,
    /// Only the current version: the old hash is kept.
    VersionOnly,
}

struct RestampRow {
    source: &'static str,
    /// The NodeClaim's annotations (placeholders resolved against the NodePool).
    annotations: &'static [(&'static str, &'static str)],
    /// Status of a Drifted condition on the NodeClaim, if any.
    drifted_condition: Option<&'static str>,
    expect: Restamp,
    /// Whether the NodeClaim has NodePoolDrifted once the re-stamp is written.
    drifted_after: bool,
}

fn restamp_rows() -> Vec<RestampRow> {
    const H: &str = ANNOTATION_NODEPOOL_HASH;
    const V: &str = ANNOTATION_NODEPOOL_HASH_VERSION;
    vec![
        RestampRow {
            source: "Static Drift Hash › It \"should update nodepool hash versions on all nodeclaims when the hash versions don't match the controller hash version\"",
            annotations: &[(H, "123456"), (V, "test")],
            drifted_condition: None,
            expect: Restamp::Full,
            drifted_after: false,
        },
        RestampRow {
            source: "Static Drift Hash › It \"should not update nodepool hash on all nodeclaims when the hash versions match the controller hash version\"",
            annotations: &[(H, "1234564654"), (V, CURRENT_VERSION)],
            drifted_condition: None,
            expect: Restamp::Nothing,
            drifted_after: true,
        },
        RestampRow {
            source: "Static Drift Hash › It \"should not update nodepool hash on the nodeclaim if it's drifted\"",
            annotations: &[(H, "123456"), (V, "test")],
            drifted_condition: Some(STATUS_TRUE),
            expect: Restamp::VersionOnly,
            drifted_after: true,
        },
        RestampRow {
            source: "Static Drift Hash › It \"should not update nodepool hash on the nodeclaim if it's drifted\" (hash/controller.go: any Drifted condition, here Unknown)",
            annotations: &[(H, "123456"), (V, "test")],
            drifted_condition: Some(STATUS_UNKNOWN),
            expect: Restamp::VersionOnly,
            drifted_after: true,
        },
        RestampRow {
            source: "Static Drift Hash › It \"should not update nodepool hash on the nodeclaim if it's drifted\" (hash/controller.go: any Drifted condition, here False)",
            annotations: &[(H, "123456"), (V, "test")],
            drifted_condition: Some(STATUS_FALSE),
            expect: Restamp::VersionOnly,
            drifted_after: true,
        },
        RestampRow {
            source: "Static Drift Hash › It \"should update nodepool hash versions on all nodeclaims …\" (rule applied to a Karpenter v3 stamp: driftwood's version differs)",
            annotations: &[(H, "98765"), (V, "v3")],
            drifted_condition: None,
            expect: Restamp::Full,
            drifted_after: false,
        },
        RestampRow {
            source: "Static Drift Hash › It \"should update nodepool hash versions on all nodeclaims …\" (rule applied to a NodeClaim with no stamp: a missing version ≠ current)",
            annotations: &[],
            drifted_condition: None,
            expect: Restamp::Full,
            drifted_after: false,
        },
        RestampRow {
            source: "Static Drift Hash › It \"should not update nodepool hash on the nodeclaim if it's drifted\" (rule applied to a drifted NodeClaim with no stamp)",
            annotations: &[],
            drifted_condition: Some(STATUS_TRUE),
            expect: Restamp::VersionOnly,
            drifted_after: false,
        },
    ]
}

#[test]
fn restamp_table() {
    let pool = static_drift_pool();
    let current = nodepool_hashes(&pool);
    for row in restamp_rows() {
        let mut nc = claim(
            owned(FIXTURE_LABELS),
            resolve(row.annotations, &current, NODEPOOL_HASH_VERSION),
        );
        if let Some(status) = row.drifted_condition {
            set_status(&mut nc, CONDITION_DRIFTED, status, DRIFT_NODEPOOL);
        }
        let got = nodepool_restamp(&nc, &current);
        match row.expect {
            Restamp::Nothing => assert_eq!(got, None, "{}", row.source),
            Restamp::VersionOnly => assert_eq!(
                got,
                Some(owned(&[(
                    ANNOTATION_NODEPOOL_HASH_VERSION,
                    NODEPOOL_HASH_VERSION
                )])),
                "{}",
                row.source
            ),
            Restamp::Full => {
                let written = got
                    .clone()
                    .unwrap_or_else(|| panic!("{}: expected a full re-stamp", row.source));
                assert_eq!(
                    written.get(ANNOTATION_NODEPOOL_HASH),
                    Some(&current.hash),
                    "{}",
                    row.source
                );
                assert_eq!(
                    written
                        .get(ANNOTATION_NODEPOOL_HASH_VERSION)
                        .map(String::as_str),
                    Some(NODEPOOL_HASH_VERSION),
                    "{}",
                    row.source
                );
            }
        }
        if let Some(written) = got {
            nc.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .extend(written);
        }
        let after = nodepool_drift(&nc, &pool, &current);
        assert_eq!(
            after.is_some(),
            row.drifted_after,
            "{}: after the re-stamp, got {after:?}",
            row.source
        );
        // Karpenter re-stamps only NodeClaims whose version differs, so once written nothing
        // more is to be done.
        assert_eq!(
            nodepool_restamp(&nc, &current),
            None,
            "{}: a second re-stamp must write nothing",
            row.source
        );
    }
}

// ---------------------------------------------------------------------------------------------
// (d) Order of the checks, and the Drifted condition
// ---------------------------------------------------------------------------------------------

/// A verdict as written in a table.
#[derive(Debug, Clone, Copy)]
enum V {
    No,
    Drift(&'static str),
    Unknown,
}

impl V {
    fn verdict(self) -> Verdict {
        match self {
            V::No => Verdict::NotDrifted,
            V::Drift(reason) => Verdict::Drifted(DriftFinding {
                reason: reason.to_string(),
                message: reason.to_string(),
            }),
            V::Unknown => Verdict::Unknown("the check could not run".to_string()),
        }
    }

    fn matches(self, verdict: &Verdict) -> bool {
        match (self, verdict) {
            (V::No, Verdict::NotDrifted) => true,
            (V::Drift(reason), Verdict::Drifted(finding)) => finding.reason == reason,
            (V::Unknown, Verdict::Unknown(_)) => true,
            _ => false,
        }
    }
}

/// The fake cloud provider's drift reason in Karpenter's suite (`cp.Drifted = "drifted"`).
const PROVIDER_DRIFTED: &str = "drifted";

struct OrderRow {
    source: &'static str,
    /// A template annotation is added (NodePoolDrifted).
    static_changed: bool,
    /// `node.kubernetes.io/instance-type DoesNotExist` is required (RequirementsDrifted).
    requirements_changed: bool,
    instance_type: V,
    provider: V,
    expect: V,
}

fn order_rows() -> Vec<OrderRow> {
    vec![
        OrderRow {
            source: "Drift › DescribeTable \"Drift\" › Entry \"should detect drift\"",
            static_changed: false,
            requirements_changed: false,
            instance_type: V::No,
            provider: V::Drift(PROVIDER_DRIFTED),
            expect: V::Drift(PROVIDER_DRIFTED),
        },
        OrderRow {
            source: "Drift › It \"should detect static drift before cloud provider drift\"",
            static_changed: true,
            requirements_changed: false,
            instance_type: V::No,
            provider: V::Drift(PROVIDER_DRIFTED),
            expect: V::Drift(DRIFT_NODEPOOL),
        },
        OrderRow {
            source: "Drift › It \"should detect node requirement drift before cloud provider drift\"",
            static_changed: false,
            requirements_changed: true,
            instance_type: V::No,
            provider: V::Drift(PROVIDER_DRIFTED),
            expect: V::Drift(DRIFT_REQUIREMENTS),
        },
        OrderRow {
            source: "code: drift.go isDrifted — NodePoolDrifted has priority over RequirementsDrifted",
            static_changed: true,
            requirements_changed: true,
            instance_type: V::Drift(DRIFT_INSTANCE_TYPE_NOT_FOUND),
            provider: V::Drift(PROVIDER_DRIFTED),
            expect: V::Drift(DRIFT_NODEPOOL),
        },
        OrderRow {
            source: "code: drift.go isDrifted — RequirementsDrifted before InstanceTypeNotFound",
            static_changed: false,
            requirements_changed: true,
            instance_type: V::Drift(DRIFT_INSTANCE_TYPE_NOT_FOUND),
            provider: V::No,
            expect: V::Drift(DRIFT_REQUIREMENTS),
        },
        OrderRow {
            source: "code: drift.go isDrifted — InstanceTypeNotFound before cloudProvider.IsDrifted",
            static_changed: false,
            requirements_changed: false,
            instance_type: V::Drift(DRIFT_INSTANCE_TYPE_NOT_FOUND),
            provider: V::Drift(PROVIDER_DRIFTED),
            expect: V::Drift(DRIFT_INSTANCE_TYPE_NOT_FOUND),
        },
        OrderRow {
            source: "Drift › It \"should remove the status condition from the nodeClaim if the nodeClaim is no longer drifted\" (no check finds drift)",
            static_changed: false,
            requirements_changed: false,
            instance_type: V::No,
            provider: V::No,
            expect: V::No,
        },
        OrderRow {
            source: "code: drift.go isDrifted — a GetInstanceTypes error is returned before IsDrifted is asked",
            static_changed: false,
            requirements_changed: false,
            instance_type: V::Unknown,
            provider: V::Drift(PROVIDER_DRIFTED),
            expect: V::Unknown,
        },
        OrderRow {
            source: "code: drift.go isDrifted — static drift is decided before an IsDrifted error",
            static_changed: true,
            requirements_changed: false,
            instance_type: V::No,
            provider: V::Unknown,
            expect: V::Drift(DRIFT_NODEPOOL),
        },
        OrderRow {
            source: "code: drift.go Reconcile — an IsDrifted error leaves the condition (Unknown verdict)",
            static_changed: false,
            requirements_changed: false,
            instance_type: V::No,
            provider: V::Unknown,
            expect: V::Unknown,
        },
    ]
}

#[test]
fn check_order_table() {
    let pool = fixture_pool();
    let nc = claim_from(&pool, owned(FIXTURE_LABELS));
    for row in order_rows() {
        let mut changed = pool.clone();
        if row.static_changed {
            changed
                .spec
                .template
                .metadata
                .annotations
                .insert("keyAnnotationTest".into(), "valueAnnotationTest".into());
        }
        if row.requirements_changed {
            changed.spec.template.spec.requirements.push(req(
                LABEL_INSTANCE_TYPE,
                "DoesNotExist",
                &[],
            ));
        }
        let hashes = nodepool_hashes(&changed);
        let got = find_drift(
            &nc,
            &changed,
            &hashes,
            row.instance_type.verdict(),
            row.provider.verdict(),
        );
        assert!(
            row.expect.matches(&got),
            "{}: expected {:?}, got {got:?}",
            row.source,
            row.expect
        );
        // core_drift is find_drift before the provider is asked.
        if matches!(row.provider, V::No) {
            let core = core_drift(&nc, &changed, &hashes, row.instance_type.verdict());
            assert_eq!(core, got, "{}: core_drift", row.source);
        }
    }
}

/// How the Drifted condition must change, as written in a table.
#[derive(Debug, Clone, Copy)]
enum M {
    Set(&'static str),
    Clear,
    Keep,
}

struct MarkRow {
    source: &'static str,
    /// Status of the Launched condition (None: absent).
    launched: Option<&'static str>,
    /// Reason (= message) of a Drifted=True condition already there (None: absent).
    drifted: Option<&'static str>,
    verdict: V,
    expect: M,
}

fn marking_rows() -> Vec<MarkRow> {
    vec![
        MarkRow {
            source: "Drift › DescribeTable \"Drift\" › Entry \"should detect drift\" (Drifted=True, reason drifted)",
            launched: Some(STATUS_TRUE),
            drifted: None,
            verdict: V::Drift(PROVIDER_DRIFTED),
            expect: M::Set(PROVIDER_DRIFTED),
        },
        MarkRow {
            source: "Drift › It \"should remove the status condition from the nodeClaim when the nodeClaim launch condition is unknown\"",
            launched: Some(STATUS_UNKNOWN),
            drifted: Some(PROVIDER_DRIFTED),
            verdict: V::Drift(PROVIDER_DRIFTED),
            expect: M::Clear,
        },
        MarkRow {
            source: "Drift › It \"should remove the status condition from the nodeClaim when the nodeClaim launch condition is false\"",
            launched: Some(STATUS_FALSE),
            drifted: Some(PROVIDER_DRIFTED),
            verdict: V::Drift(PROVIDER_DRIFTED),
            expect: M::Clear,
        },
        MarkRow {
            source: "code: drift.go — Launched missing counts as not launched: Drifted removed",
            launched: None,
            drifted: Some(PROVIDER_DRIFTED),
            verdict: V::Drift(PROVIDER_DRIFTED),
            expect: M::Clear,
        },
        MarkRow {
            source: "code: drift.go — not launched and no Drifted condition: nothing to remove",
            launched: Some(STATUS_UNKNOWN),
            drifted: None,
            verdict: V::Drift(PROVIDER_DRIFTED),
            expect: M::Keep,
        },
        MarkRow {
            source: "code: drift.go — the Launched check comes before any drift check (a failing check is never reached)",
            launched: Some(STATUS_FALSE),
            drifted: Some(PROVIDER_DRIFTED),
            verdict: V::Unknown,
            expect: M::Clear,
        },
        MarkRow {
            source: "Drift › It \"should remove the status condition from the nodeClaim if the nodeClaim is no longer drifted\"",
            launched: Some(STATUS_TRUE),
            drifted: Some(PROVIDER_DRIFTED),
            verdict: V::No,
            expect: M::Clear,
        },
        MarkRow {
            source: "code: drift.go — not drifted and no condition: Drifted is never written False",
            launched: Some(STATUS_TRUE),
            drifted: None,
            verdict: V::No,
            expect: M::Keep,
        },
        MarkRow {
            source: "code: drift.go Reconcile — a check error leaves an existing Drifted condition",
            launched: Some(STATUS_TRUE),
            drifted: Some(PROVIDER_DRIFTED),
            verdict: V::Unknown,
            expect: M::Keep,
        },
        MarkRow {
            source: "code: drift.go Reconcile — a check error writes no condition",
            launched: Some(STATUS_TRUE),
            drifted: None,
            verdict: V::Unknown,
            expect: M::Keep,
        },
        MarkRow {
            source: "code: operatorpkg ConditionSet.Set — same reason and message: no change",
            launched: Some(STATUS_TRUE),
            drifted: Some(DRIFT_NODEPOOL),
            verdict: V::Drift(DRIFT_NODEPOOL),
            expect: M::Keep,
        },
        MarkRow {
            source: "code: operatorpkg ConditionSet.Set — Drifted=True with another reason is updated",
            launched: Some(STATUS_TRUE),
            drifted: Some(DRIFT_AMI),
            verdict: V::Drift(DRIFT_NODEPOOL),
            expect: M::Set(DRIFT_NODEPOOL),
        },
    ]
}

#[test]
fn drift_marking_table() {
    for row in marking_rows() {
        let mut nc = NodeClaim::new("default-abcde", NodeClaimSpec::default());
        nc.metadata.labels = Some(owned(FIXTURE_LABELS));
        nc.status = Some(NodeClaimStatus::default());
        if let Some(status) = row.launched {
            set_status(&mut nc, CONDITION_LAUNCHED, status, "Launched");
        }
        if let Some(reason) = row.drifted {
            set_status(&mut nc, CONDITION_DRIFTED, STATUS_TRUE, reason);
        }
        // Karpenter v1 has no Drift feature gate: drift is always enabled.
        let got = drift_marking(&nc, &row.verdict.verdict(), true);
        let ok = match (row.expect, &got) {
            (M::Set(reason), DriftMarking::Set(finding)) => finding.reason == reason,
            (M::Clear, DriftMarking::Clear) | (M::Keep, DriftMarking::Keep) => true,
            _ => false,
        };
        assert!(ok, "{}: expected {:?}, got {got:?}", row.source, row.expect);
    }
}

// ---------------------------------------------------------------------------------------------
// (e) InstanceTypeNotFound
// ---------------------------------------------------------------------------------------------

fn offering(zone: &str, capacity_type: &str, available: bool) -> Offering {
    Offering {
        zone: zone.to_string(),
        capacity_type: capacity_type.to_string(),
        price: 0.1,
        available,
    }
}

/// The suite's instance type `it`: spot and on-demand offerings, both in test-zone-1a.
fn fixture_types() -> Vec<InstanceType> {
    vec![instance_type(IT, 100, 100, 110, &[ZONE])]
}

/// `cp.InstanceTypes = nil`: the fake's default list, which lacks `it`.
fn types_without_fixture() -> Vec<InstanceType> {
    fake_instance_types(3)
}

fn types_without_offerings() -> Vec<InstanceType> {
    let mut types = fixture_types();
    for t in &mut types {
        t.offerings.clear();
    }
    types
}

fn types_in_another_zone() -> Vec<InstanceType> {
    let mut types = fixture_types();
    for o in &mut types[0].offerings {
        o.zone = "test-zone-random".to_string();
    }
    types
}

/// The Reserved Capacity fixture (a reserved offering in test-zone-1a added to `it`), then the
/// offerings filtered down to `capacity_types`.
fn offered(capacity_types: &[&str]) -> Vec<InstanceType> {
    let mut types = fixture_types();
    types[0]
        .offerings
        .push(offering(ZONE, CAPACITY_TYPE_RESERVED, true));
    types[0]
        .offerings
        .retain(|o| capacity_types.contains(&o.capacity_type.as_str()));
    types
}

fn reserved_and_on_demand() -> Vec<InstanceType> {
    offered(&[CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_ON_DEMAND])
}

fn reserved_only() -> Vec<InstanceType> {
    offered(&[CAPACITY_TYPE_RESERVED])
}

fn on_demand_only() -> Vec<InstanceType> {
    offered(&[CAPACITY_TYPE_ON_DEMAND])
}

fn spot_only() -> Vec<InstanceType> {
    offered(&[CAPACITY_TYPE_SPOT])
}

fn no_capacity_type() -> Vec<InstanceType> {
    offered(&[])
}

fn spot_unavailable() -> Vec<InstanceType> {
    let mut types = spot_only();
    for o in &mut types[0].offerings {
        o.available = false;
    }
    types
}

struct InstanceTypeRow {
    source: &'static str,
    /// Labels merged over FIXTURE_LABELS.
    labels: &'static [(&'static str, &'static str)],
    /// FIXTURE_LABELS keys removed.
    remove: &'static [&'static str],
    /// What GetInstanceTypes returns for the NodePool.
    types: fn() -> Vec<InstanceType>,
    drifted: bool,
}

/// The NodeClaim labels of the Reserved Capacity context.
const RESERVED: &[(&str, &str)] = &[
    (LABEL_CAPACITY_TYPE, CAPACITY_TYPE_RESERVED),
    (LABEL_CAPACITY_RESERVATION_ID, "cr-0123456789"),
];

fn instance_type_rows() -> Vec<InstanceTypeRow> {
    vec![
        InstanceTypeRow {
            source: "Drift suite BeforeEach (it: spot and on-demand in test-zone-1a; NodeClaim spot in test-zone-1a)",
            labels: &[],
            remove: &[],
            types: fixture_types,
            drifted: false,
        },
        InstanceTypeRow {
            source: "Drift › It \"should detect stale instance type drift if the instance type label doesn't exist\"",
            labels: &[],
            remove: &[LABEL_INSTANCE_TYPE],
            types: fixture_types,
            drifted: true,
        },
        InstanceTypeRow {
            source: "Drift › It \"should detect stale instance type drift if the instance type doesn't exist\"",
            labels: &[],
            remove: &[],
            types: types_without_fixture,
            drifted: true,
        },
        InstanceTypeRow {
            source: "Drift › It \"should detect stale instance type drift if the instance type offerings doesn't exist\"",
            labels: &[],
            remove: &[],
            types: types_without_offerings,
            drifted: true,
        },
        InstanceTypeRow {
            source: "Drift › It \"should detect stale instance type drift if the instance type offerings aren't compatible with the nodeclaim\"",
            labels: &[],
            remove: &[],
            types: types_in_another_zone,
            drifted: true,
        },
        InstanceTypeRow {
            source: "Drift › Reserved Capacity › DescribeTable \"InstanceTypeNotFound\" › Entry \"shouldn't drift when a matching instance type exists with reserved and on-demand offerings\"",
            labels: RESERVED,
            remove: &[],
            types: reserved_and_on_demand,
            drifted: false,
        },
        InstanceTypeRow {
            source: "Drift › Reserved Capacity › DescribeTable \"InstanceTypeNotFound\" › Entry \"shouldn't drift when a matching instance type exists with reserved offerings\"",
            labels: RESERVED,
            remove: &[],
            types: reserved_only,
            drifted: false,
        },
        InstanceTypeRow {
            source: "Drift › Reserved Capacity › DescribeTable \"InstanceTypeNotFound\" › Entry \"shouldn't drift when a matching instance type exists with on-demand offerings\"",
            labels: RESERVED,
            remove: &[],
            types: on_demand_only,
            drifted: false,
        },
        InstanceTypeRow {
            source: "Drift › Reserved Capacity › DescribeTable \"InstanceTypeNotFound\" › Entry \"should drift when a matching instance type exists but the only offering is spot\"",
            labels: RESERVED,
            remove: &[],
            types: spot_only,
            drifted: true,
        },
        InstanceTypeRow {
            source: "Drift › Reserved Capacity › DescribeTable \"InstanceTypeNotFound\" › Entry \"should drift when a matching instance type exists but there are no compatible offerings\"",
            labels: RESERVED,
            remove: &[],
            types: no_capacity_type,
            drifted: true,
        },
        InstanceTypeRow {
            source: "code: drift.go instanceTypeNotFound — every offering counts, available or not",
            labels: &[],
            remove: &[],
            types: spot_unavailable,
            drifted: false,
        },
        InstanceTypeRow {
            source: "code: drift.go instanceTypeNotFound — only a reserved NodeClaim is widened to on-demand (on-demand NodeClaim, reserved offering)",
            labels: &[(LABEL_CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND)],
            remove: &[],
            types: reserved_only,
            drifted: true,
        },
        InstanceTypeRow {
            source: "code: drift.go instanceTypeNotFound — Offerings.HasCompatible allows undefined well-known labels (no zone label)",
            labels: &[],
            remove: &[LABEL_TOPOLOGY_ZONE],
            types: types_in_another_zone,
            drifted: false,
        },
    ]
}

#[test]
fn instance_type_not_found_table() {
    for row in instance_type_rows() {
        let nc = claim(labels_with(row.labels, row.remove), BTreeMap::new());
        let types = (row.types)();
        let got = instance_type_drift(&nc, &types);
        assert_eq!(
            got.as_ref().map(|f| f.reason.as_str()),
            row.drifted.then_some(DRIFT_INSTANCE_TYPE_NOT_FOUND),
            "{}: got {got:?}",
            row.source
        );
    }
}

/// Drift suite: the InstanceTypeNotFound tests step the clock 2h past creation (the check waits
/// 1h after launch) and the controller caches a pass for 30 minutes.
#[test]
fn instance_type_check_timing() {
    assert_eq!(INSTANCE_TYPE_CHECK_MIN_AGE_SECONDS, 3600);
    assert_eq!(INSTANCE_TYPE_CHECK_TTL_SECONDS, 1800);
}
