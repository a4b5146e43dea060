//! Well-known label, annotation, taint and finalizer keys shared with Karpenter v1.

/// API group of NodePool and NodeClaim.
pub const KARPENTER_GROUP: &str = "karpenter.sh";
/// API group of EC2NodeClass.
pub const KARPENTER_AWS_GROUP: &str = "karpenter.k8s.aws";
/// The single served version of all three resources.
pub const API_VERSION: &str = "v1";

// ---- labels set on nodes / NodeClaims ----
pub const LABEL_NODEPOOL: &str = "karpenter.sh/nodepool";
pub const LABEL_NODE_INITIALIZED: &str = "karpenter.sh/initialized";
pub const LABEL_NODE_REGISTERED: &str = "karpenter.sh/registered";
pub const LABEL_CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
pub const LABEL_EC2NODECLASS: &str = "karpenter.k8s.aws/ec2nodeclass";

pub const LABEL_INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
pub const LABEL_INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";
pub const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
pub const LABEL_TOPOLOGY_ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
pub const LABEL_TOPOLOGY_REGION: &str = "topology.kubernetes.io/region";
pub const LABEL_TOPOLOGY_REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
pub const LABEL_ARCH: &str = "kubernetes.io/arch";
pub const LABEL_ARCH_BETA: &str = "beta.kubernetes.io/arch";
pub const LABEL_OS: &str = "kubernetes.io/os";
pub const LABEL_OS_BETA: &str = "beta.kubernetes.io/os";
pub const LABEL_WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
/// Set on a node when its drain starts, so external load balancers stop sending it traffic.
pub const LABEL_EXCLUDE_FROM_LOAD_BALANCERS: &str =
    "node.kubernetes.io/exclude-from-external-load-balancers";

pub const LABEL_INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
pub const LABEL_INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
pub const LABEL_INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
pub const LABEL_INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
pub const LABEL_INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
pub const LABEL_INSTANCE_CPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
pub const LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: &str =
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz";
pub const LABEL_INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
pub const LABEL_INSTANCE_EBS_BANDWIDTH: &str = "karpenter.k8s.aws/instance-ebs-bandwidth";
pub const LABEL_INSTANCE_NETWORK_BANDWIDTH: &str = "karpenter.k8s.aws/instance-network-bandwidth";
pub const LABEL_INSTANCE_HYPERVISOR: &str = "karpenter.k8s.aws/instance-hypervisor";
pub const LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED: &str =
    "karpenter.k8s.aws/instance-encryption-in-transit-supported";
pub const LABEL_INSTANCE_LOCAL_NVME: &str = "karpenter.k8s.aws/instance-local-nvme";
pub const LABEL_INSTANCE_GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
pub const LABEL_INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
pub const LABEL_INSTANCE_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
pub const LABEL_INSTANCE_GPU_MEMORY: &str = "karpenter.k8s.aws/instance-gpu-memory";
pub const LABEL_INSTANCE_ACCELERATOR_NAME: &str = "karpenter.k8s.aws/instance-accelerator-name";
pub const LABEL_INSTANCE_ACCELERATOR_MANUFACTURER: &str =
    "karpenter.k8s.aws/instance-accelerator-manufacturer";
pub const LABEL_INSTANCE_ACCELERATOR_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";
pub const LABEL_INSTANCE_TENANCY: &str = "karpenter.k8s.aws/instance-tenancy";
pub const LABEL_INSTANCE_CAPABILITY_FLEX: &str = "karpenter.k8s.aws/instance-capability-flex";
pub const LABEL_CAPACITY_RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";
pub const LABEL_CAPACITY_RESERVATION_TYPE: &str = "karpenter.k8s.aws/capacity-reservation-type";
pub const LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE: &str =
    "karpenter.k8s.aws/capacity-reservation-interruptible";
pub const LABEL_PLACEMENT_GROUP_ID: &str = "karpenter.k8s.aws/placement-group-id";
pub const LABEL_PLACEMENT_GROUP_PARTITION: &str = "karpenter.k8s.aws/placement-group-partition";
pub const LABEL_TOPOLOGY_ZONE_ID: &str = "topology.k8s.aws/zone-id";

/// Capacity type values.
pub const CAPACITY_TYPE_SPOT: &str = "spot";
pub const CAPACITY_TYPE_ON_DEMAND: &str = "on-demand";
pub const CAPACITY_TYPE_RESERVED: &str = "reserved";

// ---- annotations ----
pub const ANNOTATION_DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
/// Node repair's veto (Karpenter v1.15), on a Node or NodeClaim: `"true"` keeps it from being
/// repaired.
pub const ANNOTATION_DO_NOT_REPAIR: &str = "karpenter.sh/do-not-repair";
/// Kubernetes' pod deletion cost: Karpenter weighs a pod's eviction cost by it.
pub const ANNOTATION_POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";
pub const ANNOTATION_NODEPOOL_HASH: &str = "karpenter.sh/nodepool-hash";
pub const ANNOTATION_NODEPOOL_HASH_VERSION: &str = "karpenter.sh/nodepool-hash-version";
pub const ANNOTATION_EC2NODECLASS_HASH: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
pub const ANNOTATION_EC2NODECLASS_HASH_VERSION: &str =
    "karpenter.k8s.aws/ec2nodeclass-hash-version";
/// On a NodeClaim whose instance carries its registration tags (Node name, NodeClaim name).
pub const ANNOTATION_INSTANCE_TAGGED: &str = "karpenter.k8s.aws/tagged";
/// On a NodeClaim whose instance carries the `eks:eks-cluster-name` tag (Karpenter's
/// compatibility annotation, set with [`ANNOTATION_INSTANCE_TAGGED`]).
pub const ANNOTATION_CLUSTER_NAME_TAGGED: &str =
    "compatibility.karpenter.k8s.aws/cluster-name-tagged";
pub const ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP: &str =
    "karpenter.sh/nodeclaim-termination-timestamp";
pub const ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED: &str =
    "karpenter.sh/nodeclaim-min-values-relaxed";
/// driftwood's per-field hashes of the NodePool template (JSON object field → hash), so a drift
/// message can name the field(s) that changed.
pub const ANNOTATION_NODEPOOL_FIELD_HASHES: &str = "driftwood.sh/nodepool-field-hashes";
/// driftwood's per-field hashes of the EC2NodeClass static spec.
pub const ANNOTATION_EC2NODECLASS_FIELD_HASHES: &str = "driftwood.sh/ec2nodeclass-field-hashes";

/// driftwood's record of a disruption command in flight, on the candidate NodeClaim: the
/// replacement NodeClaim names (comma-separated) and when the command started (RFC 3339).
pub const ANNOTATION_DISRUPTION_REPLACEMENTS: &str = "driftwood.sh/disruption-replacements";
pub const ANNOTATION_DISRUPTION_STARTED: &str = "driftwood.sh/disruption-started";
/// On a replacement NodeClaim: the candidate whose disruption command launched it.
pub const ANNOTATION_DISRUPTION_REPLACEMENT_FOR: &str = "driftwood.sh/disruption-replacement-for";
/// On a NodePool: `"true"` pauses its rollout — no new disruption starts in the pool, commands
/// in flight finish, drift marking goes on (`driftwood rollout pause|resume`, or kubectl and
/// GitOps tools setting it). Any other value, or none, is not paused.
pub const ANNOTATION_ROLLOUT_PAUSED: &str = "driftwood.sh/rollout-paused";

// ---- taints ----
/// Taint put on a node chosen for disruption (effect NoSchedule).
pub const TAINT_DISRUPTED_KEY: &str = "karpenter.sh/disrupted";
/// Taint put on a node until its NodeClaim registers it (effect NoExecute).
pub const TAINT_UNREGISTERED_KEY: &str = "karpenter.sh/unregistered";
pub const TAINT_EFFECT_NO_SCHEDULE: &str = "NoSchedule";
pub const TAINT_EFFECT_NO_EXECUTE: &str = "NoExecute";
pub const TAINT_EFFECT_PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";
pub const TAINT_NODE_NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const TAINT_NODE_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

// ---- finalizers ----
pub const FINALIZER_TERMINATION: &str = "karpenter.sh/termination";

// ---- NodeClaim condition types ----
pub const CONDITION_LAUNCHED: &str = "Launched";
pub const CONDITION_REGISTERED: &str = "Registered";
pub const CONDITION_INITIALIZED: &str = "Initialized";
pub const CONDITION_READY: &str = "Ready";
pub const CONDITION_DRIFTED: &str = "Drifted";
pub const CONDITION_CONSOLIDATABLE: &str = "Consolidatable";
pub const CONDITION_DISRUPTION_REASON: &str = "DisruptionReason";
pub const CONDITION_INSTANCE_TERMINATING: &str = "InstanceTerminating";
pub const CONDITION_EMPTY: &str = "Empty";
pub const CONDITION_EXPIRED: &str = "Expired";
/// Set by termination once the node's pods are drained (Karpenter v1).
pub const CONDITION_DRAINED: &str = "Drained";
/// Set by termination: whether the node's volumes detached before its instance was terminated
/// (Karpenter v1).
pub const CONDITION_VOLUMES_DETACHED: &str = "VolumesDetached";

// ---- EC2NodeClass condition types ----
pub const CONDITION_AMIS_READY: &str = "AMIsReady";
pub const CONDITION_SUBNETS_READY: &str = "SubnetsReady";
pub const CONDITION_SECURITY_GROUPS_READY: &str = "SecurityGroupsReady";
pub const CONDITION_INSTANCE_PROFILE_READY: &str = "InstanceProfileReady";
pub const CONDITION_VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";

// ---- NodePool condition types ----
pub const CONDITION_NODECLASS_READY: &str = "NodeClassReady";
pub const CONDITION_VALIDATION: &str = "ValidationSucceeded";
/// driftwood's own NodePool condition: True when every node is up to date and nothing is
/// disrupting; False with reason `Progressing`, `Paused` or `Blocked` and a message naming what
/// holds the rollout.
pub const CONDITION_ROLLOUT_COMPLETE: &str = "RolloutComplete";

// ---- Drift reasons (the Drifted condition's reason) ----
pub const DRIFT_NODEPOOL: &str = "NodePoolDrifted";
pub const DRIFT_REQUIREMENTS: &str = "RequirementsDrifted";
pub const DRIFT_NODECLASS: &str = "NodeClassDrift";
pub const DRIFT_AMI: &str = "AMIDrift";
pub const DRIFT_SUBNET: &str = "SubnetDrift";
pub const DRIFT_SECURITY_GROUP: &str = "SecurityGroupDrift";
pub const DRIFT_INSTANCE_TYPE_NOT_FOUND: &str = "InstanceTypeNotFound";

// ---- Disruption reasons (budget `reasons`, DisruptionReason condition) ----
pub const REASON_DRIFTED: &str = "Drifted";
pub const REASON_EMPTY: &str = "Empty";
pub const REASON_UNDERUTILIZED: &str = "Underutilized";
/// Node repair's disruption reason (budgets, DisruptionReason).
pub const REASON_UNHEALTHY: &str = "Unhealthy";

/// Well-known labels: a NodePool requirement may constrain these even though a node lacks the
/// label before launch; scheduling treats them as possibly-undefined.
pub const WELL_KNOWN_LABELS: &[&str] = &[
    LABEL_NODEPOOL,
    LABEL_TOPOLOGY_ZONE,
    LABEL_TOPOLOGY_REGION,
    LABEL_INSTANCE_TYPE,
    LABEL_ARCH,
    LABEL_OS,
    LABEL_CAPACITY_TYPE,
    LABEL_WINDOWS_BUILD,
    LABEL_INSTANCE_CATEGORY,
    LABEL_INSTANCE_FAMILY,
    LABEL_INSTANCE_GENERATION,
    LABEL_INSTANCE_SIZE,
    LABEL_INSTANCE_CPU,
    LABEL_INSTANCE_CPU_MANUFACTURER,
    LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
    LABEL_INSTANCE_MEMORY,
    LABEL_INSTANCE_EBS_BANDWIDTH,
    LABEL_INSTANCE_NETWORK_BANDWIDTH,
    LABEL_INSTANCE_HYPERVISOR,
    LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
    LABEL_INSTANCE_LOCAL_NVME,
    LABEL_INSTANCE_GPU_NAME,
    LABEL_INSTANCE_GPU_MANUFACTURER,
    LABEL_INSTANCE_GPU_COUNT,
    LABEL_INSTANCE_GPU_MEMORY,
    LABEL_INSTANCE_ACCELERATOR_NAME,
    LABEL_INSTANCE_ACCELERATOR_MANUFACTURER,
    LABEL_INSTANCE_ACCELERATOR_COUNT,
    LABEL_INSTANCE_TENANCY,
    LABEL_INSTANCE_CAPABILITY_FLEX,
    LABEL_CAPACITY_RESERVATION_ID,
    LABEL_CAPACITY_RESERVATION_TYPE,
    LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE,
    LABEL_PLACEMENT_GROUP_ID,
    LABEL_PLACEMENT_GROUP_PARTITION,
    LABEL_TOPOLOGY_ZONE_ID,
];

/// The well-known labels an AWS instance type decides, as Karpenter's instance types carry them:
/// a type without the feature carries `DoesNotExist` for the label, so `Exists`, `Gt` or `In` on
/// it rules the type out instead of launching a type that lacks it. (Zone, zone id, capacity
/// type and the reservation and placement labels come from offerings and the class instead.)
pub const INSTANCE_TYPE_LABELS: &[&str] = &[
    LABEL_INSTANCE_TYPE,
    LABEL_ARCH,
    LABEL_OS,
    LABEL_WINDOWS_BUILD,
    LABEL_INSTANCE_CATEGORY,
    LABEL_INSTANCE_FAMILY,
    LABEL_INSTANCE_GENERATION,
    LABEL_INSTANCE_SIZE,
    LABEL_INSTANCE_CPU,
    LABEL_INSTANCE_CPU_MANUFACTURER,
    LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
    LABEL_INSTANCE_MEMORY,
    LABEL_INSTANCE_EBS_BANDWIDTH,
    LABEL_INSTANCE_NETWORK_BANDWIDTH,
    LABEL_INSTANCE_HYPERVISOR,
    LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
    LABEL_INSTANCE_LOCAL_NVME,
    LABEL_INSTANCE_GPU_NAME,
    LABEL_INSTANCE_GPU_MANUFACTURER,
    LABEL_INSTANCE_GPU_COUNT,
    LABEL_INSTANCE_GPU_MEMORY,
    LABEL_INSTANCE_ACCELERATOR_NAME,
    LABEL_INSTANCE_ACCELERATOR_MANUFACTURER,
    LABEL_INSTANCE_ACCELERATOR_COUNT,
    LABEL_INSTANCE_TENANCY,
    LABEL_INSTANCE_CAPABILITY_FLEX,
];

/// Labels a NodeClaim never gets from its requirements: the node's own hostname and the
/// lifecycle labels Karpenter sets itself.
pub const NEVER_LAUNCH_LABELS: &[&str] = &[
    LABEL_HOSTNAME,
    LABEL_NODE_REGISTERED,
    LABEL_NODE_INITIALIZED,
];

/// Label domains a NodePool may not set in template labels or requirements (except the
/// well-known keys and the allowed sub-domains below).
pub const RESTRICTED_LABEL_DOMAINS: &[&str] = &[
    "kubernetes.io",
    "k8s.io",
    "karpenter.sh",
    "karpenter.k8s.aws",
];
/// Sub-domains of restricted domains that users may still use.
pub const ALLOWED_LABEL_DOMAINS: &[&str] = &[
    "kops.k8s.io",
    "node.kubernetes.io",
    "node-restriction.kubernetes.io",
];

/// The label key Karpenter compares under: the deprecated beta aliases of the well-known keys
/// (and the EBS CSI driver's zone key) map to their current names; others are unchanged.
pub fn normalized_label_key(key: &str) -> &str {
    match key {
        LABEL_TOPOLOGY_ZONE_BETA | "topology.ebs.csi.aws.com/zone" => LABEL_TOPOLOGY_ZONE,
        LABEL_TOPOLOGY_REGION_BETA => LABEL_TOPOLOGY_REGION,
        LABEL_ARCH_BETA => LABEL_ARCH,
        LABEL_OS_BETA => LABEL_OS,
        LABEL_INSTANCE_TYPE_BETA => LABEL_INSTANCE_TYPE,
        other => other,
    }
}

/// Whether `key` is a well-known label.
pub fn is_well_known_label(key: &str) -> bool {
    WELL_KNOWN_LABELS.contains(&key)
}

/// The fields of ObjectMeta (`metadata`): any other key there is an unknown field.
pub const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];
