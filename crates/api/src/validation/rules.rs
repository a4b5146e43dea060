//! The validation rules that the CRD schema can also carry (patterns, enums, bounds), defined
//! once so the generated CRDs and `driftwood validate` agree.

/// Budget `nodes`: a count or a percentage from 0% to 100%.
pub const BUDGET_NODES_PATTERN: &str = r"^((100|[0-9]{1,2})%|[0-9]+)$";
/// Budget `schedule`: an @-macro or five space-separated fields (parsed fully by `cron`).
pub const BUDGET_SCHEDULE_PATTERN: &str =
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$";
/// Budget `duration`: hours and/or minutes ("8h", "30m", "1h30m").
pub const BUDGET_DURATION_PATTERN: &str = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$";
/// expireAfter / consolidateAfter: a duration or "Never".
pub const NILLABLE_DURATION_PATTERN: &str = r"^(([0-9]+(s|m|h))+|Never)$";
/// terminationGracePeriod: a duration.
pub const DURATION_PATTERN: &str = r"^([0-9]+(s|m|h))+$";
/// A Kubernetes resource quantity.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";
/// A kubelet eviction threshold: a percentage (up to 100%) or a quantity.
pub const EVICTION_THRESHOLD_PATTERN: &str = r"^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$";
/// AMI, subnet and security group ids.
pub const AMI_ID_PATTERN: &str = r"^ami-[0-9a-z]+$";
pub const SUBNET_ID_PATTERN: &str = r"^subnet-[0-9a-z]+$";
pub const SECURITY_GROUP_ID_PATTERN: &str = r"^sg-[0-9a-z]+$";
/// Capacity reservation and placement group ids, and AWS account ids.
pub const CAPACITY_RESERVATION_ID_PATTERN: &str = r"^cr-[0-9a-z]+$";
pub const PLACEMENT_GROUP_ID_PATTERN: &str = r"^pg-[0-9a-z]+$";
pub const ACCOUNT_ID_PATTERN: &str = r"^[0-9]{12}$";
/// An alias term: family@version.
pub const ALIAS_PATTERN: &str = r"^[a-zA-Z0-9]+@.+$";
/// A label (or taint) key: optional DNS-subdomain prefix and a name (Karpenter's form).
pub const LABEL_KEY_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";
/// A label value: empty, or alphanumerics with `-`, `_`, `.` inside (at most 63 characters).
pub const LABEL_VALUE_PATTERN: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;
/// A node class reference's group: no `/`.
pub const GROUP_PATTERN: &str = r"^[^/]*$";
/// A condition type: an optional DNS-subdomain prefix and a name (at most 316 characters).
pub const CONDITION_TYPE_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";

/// Karpenter v1.14 added `Balanced`.
pub const CONSOLIDATION_POLICIES: &[&str] = &["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"];
pub const DISRUPTION_REASONS: &[&str] = &["Underutilized", "Empty", "Drifted", "Unhealthy"];
/// Requirement operators in the order Karpenter's schema lists them.
pub const OPERATORS_SCHEMA_ORDER: &[&str] = &[
    "Gte",
    "Lte",
    "In",
    "NotIn",
    "Exists",
    "DoesNotExist",
    "Gt",
    "Lt",
];
pub const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];
pub const VOLUME_TYPES: &[&str] = &["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"];
pub const INSTANCE_STORE_POLICIES: &[&str] = &["RAID0"];
pub const HTTP_ENDPOINT_VALUES: &[&str] = &["enabled", "disabled"];
pub const HTTP_TOKENS_VALUES: &[&str] = &["required", "optional"];
pub const INSTANCE_MATCH_CRITERIA: &[&str] = &["open", "targeted"];
pub const RESERVATION_TYPES: &[&str] = &["default", "capacity-block"];
pub const RESERVATION_STATES: &[&str] = &["active", "expiring"];

pub const MAX_REQUIREMENTS: usize = 100;
pub const MIN_VALUES_RANGE: (i64, i64) = (1, 50);
pub const WEIGHT_RANGE: (i64, i64) = (1, 100);
pub const MAX_BUDGETS: usize = 50;
pub const MAX_SELECTOR_TERMS: usize = 30;
/// At most this many tags in one selector term.
pub const MAX_SELECTOR_TAGS: usize = 20;
pub const MAX_BLOCK_DEVICE_MAPPINGS: usize = 50;
pub const HOP_LIMIT_RANGE: (i64, i64) = (1, 64);
/// EBS volume initialization rate, MiB/s.
pub const VOLUME_INITIALIZATION_RATE_RANGE: (i64, i64) = (100, 300);
/// The kubelet eviction signals evictionHard / evictionSoft may name.
pub const EVICTION_SIGNALS: &[&str] = &[
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
];
/// The resources kubeReserved / systemReserved may name.
pub const RESERVED_RESOURCES: &[&str] = &["cpu", "memory", "ephemeral-storage", "pid"];

/// Tag keys an EC2NodeClass may not set (driftwood / Karpenter own them).
pub const RESTRICTED_TAG_KEYS: &[&str] = &[
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    "eks:eks-cluster-name",
    "karpenter.k8s.aws/ec2nodeclass",
];
/// Tag key prefixes an EC2NodeClass may not set.
pub const RESTRICTED_TAG_PREFIXES: &[&str] = &["kubernetes.io/cluster"];

/// Whether `text` matches `pattern` (patterns here are constants known to compile).
pub fn matches(pattern: &str, text: &str) -> bool {
    regex::Regex::new(pattern).is_ok_and(|re| re.is_match(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        for p in [
            BUDGET_NODES_PATTERN,
            BUDGET_SCHEDULE_PATTERN,
            BUDGET_DURATION_PATTERN,
            NILLABLE_DURATION_PATTERN,
            DURATION_PATTERN,
            QUANTITY_PATTERN,
            ALIAS_PATTERN,
            LABEL_KEY_PATTERN,
            LABEL_VALUE_PATTERN,
            GROUP_PATTERN,
            CONDITION_TYPE_PATTERN,
            AMI_ID_PATTERN,
            SUBNET_ID_PATTERN,
            SECURITY_GROUP_ID_PATTERN,
            CAPACITY_RESERVATION_ID_PATTERN,
            PLACEMENT_GROUP_ID_PATTERN,
            ACCOUNT_ID_PATTERN,
            EVICTION_THRESHOLD_PATTERN,
        ] {
            assert!(regex::Regex::new(p).is_ok(), "{p}");
        }
    }

    #[test]
    fn budget_nodes() {
        for ok in ["0", "10", "10%", "100%", "0%", "99%"] {
            assert!(matches(BUDGET_NODES_PATTERN, ok), "{ok}");
        }
        for bad in ["150%", "101%", "-1", "10.5%", "ten", "", "%"] {
            assert!(!matches(BUDGET_NODES_PATTERN, bad), "{bad}");
        }
    }

    #[test]
    fn quantities_and_durations() {
        for ok in ["100", "100k", "5000Gi", "0.5", "500m", "1e3", "2Ti"] {
            assert!(matches(QUANTITY_PATTERN, ok), "{ok}");
        }
        for bad in ["", "1GB", "abc", "1 Gi"] {
            assert!(!matches(QUANTITY_PATTERN, bad), "{bad}");
        }
        assert!(matches(NILLABLE_DURATION_PATTERN, "168h0m0s"));
        assert!(matches(NILLABLE_DURATION_PATTERN, "Never"));
        assert!(!matches(NILLABLE_DURATION_PATTERN, "never"));
        assert!(matches(BUDGET_DURATION_PATTERN, "1h30m"));
        assert!(!matches(BUDGET_DURATION_PATTERN, "30s"));
    }
}
