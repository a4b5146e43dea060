//! Cluster-wide settings of the AWS provider (what Karpenter reads from its flags/env).

/// Cluster-wide provider settings.
#[derive(Debug, Clone, PartialEq)]
pub struct AwsSettings {
    /// The EKS cluster name (tags, discovery, user data).
    pub cluster_name: String,
    /// The API server endpoint nodes join.
    pub cluster_endpoint: String,
    /// Base64 cluster CA bundle written into user data.
    pub cluster_ca_bundle: String,
    /// The cluster service CIDR's DNS IP, e.g. `10.100.0.10`.
    pub cluster_dns_ip: String,
    /// The cluster service CIDR, e.g. `10.100.0.0/16`.
    pub cluster_cidr: String,
    /// The region, e.g. `us-west-2`.
    pub region: String,
    /// The cluster's Kubernetes minor version, e.g. `1.29` (AMI alias resolution).
    pub kubernetes_version: String,
    /// Fraction of instance memory the hypervisor/OS keeps (Karpenter's
    /// VM_MEMORY_OVERHEAD_PERCENT, default 0.075).
    pub vm_memory_overhead_percent: f64,
    /// ENIs kept out of the max-pods calculation (Karpenter's RESERVED_ENIS, default 0).
    pub reserved_enis: i64,
    /// A cluster without a route to the Pricing API (Karpenter's ISOLATED_VPC): the built-in
    /// prices are used and the API is never called.
    pub isolated_vpc: bool,
    /// The SQS queue (its name) EventBridge sends interruption events to (Karpenter's
    /// INTERRUPTION_QUEUE / `--interruption-queue`); none: interruption handling is off.
    pub interruption_queue: Option<String>,
}

impl AwsSettings {
    /// Settings for `cluster_name` in `region` running `kubernetes_version`, with EKS defaults
    /// for the rest.
    pub fn new(cluster_name: &str, region: &str, kubernetes_version: &str) -> Self {
        Self {
            cluster_name: cluster_name.to_string(),
            cluster_endpoint: format!("https://{cluster_name}.{region}.eks.amazonaws.com"),
            cluster_ca_bundle: String::new(),
            cluster_dns_ip: "10.100.0.10".to_string(),
            cluster_cidr: "10.100.0.0/16".to_string(),
            region: region.to_string(),
            kubernetes_version: kubernetes_version.to_string(),
            vm_memory_overhead_percent: 0.075,
            reserved_enis: 0,
            isolated_vpc: false,
            interruption_queue: None,
        }
    }
}
