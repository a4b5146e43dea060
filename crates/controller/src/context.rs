//! What every controller shares: the client, the cluster state, the clock, the cloud, events,
//! metrics, settings and the name generator.

use crate::events::Events;
use crate::liveness::Liveness;
use crate::metrics::Metrics;
use crate::retry::ObjectRetries;
use crate::settings::Settings;
use crate::state::ClusterState;
use driftwood_api::EC2NodeClass;
use driftwood_api::ec2nodeclass::EC2NodeClassStatus;
use driftwood_api::hash::fnv1a64;
use driftwood_aws::{AwsProvider, NodeClassSource};
use driftwood_cloud::{Clock, CloudProvider};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Resolves an EC2NodeClass's selectors into the status to write.
#[async_trait::async_trait]
pub trait NodeClassResolver: Send + Sync {
    async fn resolve(&self, class: &EC2NodeClass) -> Result<EC2NodeClassStatus, String>;
    /// Deletes the cloud resources of a deleted class.
    async fn cleanup(&self, class: &EC2NodeClass) -> Result<(), String>;
}

#[async_trait::async_trait]
impl NodeClassResolver for AwsProvider {
    async fn resolve(&self, class: &EC2NodeClass) -> Result<EC2NodeClassStatus, String> {
        self.resolve_node_class(class)
            .await
            .map(|r| r.status)
            .map_err(|e| e.to_string())
    }

    async fn cleanup(&self, class: &EC2NodeClass) -> Result<(), String> {
        self.cleanup_node_class(class)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// The cloud provider reads node classes from the controller's watch cache.
impl NodeClassSource for ClusterState {
    fn node_class(&self, name: &str) -> Option<Arc<EC2NodeClass>> {
        self.read(|s| s.store.nodeclasses.get(name).cloned())
    }
}

/// Generates NodeClaim names like Karpenter's (`<nodepool>-<5 characters>`), deterministic for
/// a seed so a simulation repeats exactly, and never the same name twice: five characters give
/// 14 million suffixes, so among 5,000 NodeClaims two would share one more often than not.
pub struct NameGenerator {
    seed: u64,
    counter: AtomicU64,
    issued: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl NameGenerator {
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            counter: AtomicU64::new(0),
            issued: std::sync::Mutex::default(),
        }
    }

    /// A name not issued before and for which `taken` (e.g. a lookup in the cache) is false.
    pub fn nodeclaim_name(&self, nodepool: &str, taken: impl Fn(&str) -> bool) -> String {
        loop {
            let name = self.candidate(nodepool);
            let fresh = self
                .issued
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(name.clone());
            if fresh && !taken(&name) {
                return name;
            }
        }
    }

    fn candidate(&self, nodepool: &str) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut x =
            self.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ fnv1a64(nodepool.as_bytes());
        let mut suffix = String::with_capacity(5);
        for _ in 0..5 {
            x ^= x >> 33;
            x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
            x ^= x >> 33;
            suffix.push(char::from(ALPHABET[(x % ALPHABET.len() as u64) as usize]));
        }
        format!("{nodepool}-{suffix}")
    }
}

/// Shared by every controller.
#[derive(Clone)]
pub struct Context {
    pub client: Client,
    pub state: ClusterState,
    pub clock: Arc<dyn Clock>,
    pub cloud: Arc<dyn CloudProvider>,
    pub nodeclasses: Arc<dyn NodeClassResolver>,
    pub events: Events,
    pub metrics: Metrics,
    pub settings: Arc<Settings>,
    pub names: Arc<NameGenerator>,
    /// Objects whose last step failed, backing off one by one.
    pub retries: ObjectRetries,
    /// When each running loop last completed a pass (/healthz).
    pub liveness: Liveness,
    /// The interruption queue (`--interruption-queue`); none: interruption handling is off.
    pub interruption: Option<Arc<driftwood_aws::interruption::InterruptionQueue>>,
    /// What reads the instances EC2 reports unhealthy (DescribeInstanceStatus), polled with or
    /// without a queue.
    pub instance_status:
        Option<Arc<driftwood_aws::interruption::instance_status::InstanceStatusReader>>,
}

impl Context {
    /// Now, as a Kubernetes timestamp.
    pub fn now(&self) -> Time {
        Time(self.clock.now())
    }

    /// Now, as UTC seconds.
    pub fn now_seconds(&self) -> i64 {
        self.clock.now().as_second()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_karpenter_shaped_unique_and_repeatable() {
        let a = NameGenerator::new(7);
        let b = NameGenerator::new(7);
        let names: Vec<String> = (0..100)
            .map(|_| a.nodeclaim_name("default", |_| false))
            .collect();
        let again: Vec<String> = (0..100)
            .map(|_| b.nodeclaim_name("default", |_| false))
            .collect();
        assert_eq!(names, again);
        assert!(
            names
                .iter()
                .all(|n| n.len() == "default-".len() + 5 && n.starts_with("default-"))
        );
        let unique: std::collections::BTreeSet<_> = names.iter().collect();
        assert_eq!(unique.len(), 100);
    }

    /// 20,000 names from one generator are all different (five characters alone would repeat
    /// some), and a name the cache already holds is never given out.
    #[test]
    fn names_never_repeat_and_skip_names_in_use() {
        let names = NameGenerator::new(1);
        let issued: std::collections::HashSet<String> = (0..20_000)
            .map(|_| names.nodeclaim_name("fleet", |_| false))
            .collect();
        assert_eq!(issued.len(), 20_000);
        let first = NameGenerator::new(9).nodeclaim_name("fleet", |_| false);
        let skipped = NameGenerator::new(9).nodeclaim_name("fleet", |n| n == first);
        assert_ne!(skipped, first);
    }
}
