//! The AWS provider's node repair policies, as Karpenter v1.15's AWS provider states them: the
//! kubelet's Ready condition, and the conditions the EKS node monitoring agent sets (accelerated
//! hardware, storage, networking, kernel, container runtime). Each replaces the node after its
//! toleration with a 10-minute drain bound (5 minutes for GPU hardware faults). The GPU XID
//! errors v1.15 answers with a reboot (behind the AWS gate `RebootForRepair`, off by default)
//! fall to the accelerated-hardware fallback here: driftwood does not reboot nodes.

use driftwood_api::repair::RepairPolicy;

const MINUTE: i64 = 60;

/// The policies, most specific first.
pub const REPAIR_POLICIES: &[RepairPolicy] = &[
    RepairPolicy {
        condition_type: "Ready",
        condition_status: "False",
        reason_contains: &[],
        toleration_seconds: 30 * MINUTE,
        termination_grace_seconds: Some(10 * MINUTE),
    },
    RepairPolicy {
        condition_type: "Ready",
        condition_status: "Unknown",
        reason_contains: &[],
        toleration_seconds: 30 * MINUTE,
        termination_grace_seconds: Some(10 * MINUTE),
    },
    // GPU faults a reboot does not clear: replace after 10 minutes.
    RepairPolicy {
        condition_type: "AcceleratedHardwareReady",
        condition_status: "False",
        reason_contains: &["XID64", "XID74", "XID79", "XID119", "XID120"],
        toleration_seconds: 10 * MINUTE,
        termination_grace_seconds: Some(5 * MINUTE),
    },
    RepairPolicy {
        condition_type: "AcceleratedHardwareReady",
        condition_status: "False",
        reason_contains: &[],
        toleration_seconds: 30 * MINUTE,
        termination_grace_seconds: Some(10 * MINUTE),
    },
    RepairPolicy {
        condition_type: "StorageReady",
        condition_status: "False",
        reason_contains: &[],
        toleration_seconds: 30 * MINUTE,
        termination_grace_seconds: Some(10 * MINUTE),
    },
    RepairPolicy {
        condition_type: "NetworkingReady",
        condition_status: "False",
        reason_contains: &[],
        toleration_seconds: 30 * MINUTE,
        termination_grace_seconds: Some(10 * MINUTE),
    },
    RepairPolicy {
        condition_type: "KernelReady",
        condition_status: "False",
        reason_contains: &[],
        toleration_seconds: 30 * MINUTE,
        termination_grace_seconds: Some(10 * MINUTE),
    },
    RepairPolicy {
        condition_type: "ContainerRuntimeReady",
        condition_status: "False",
        reason_contains: &[],
        toleration_seconds: 30 * MINUTE,
        termination_grace_seconds: Some(10 * MINUTE),
    },
];
