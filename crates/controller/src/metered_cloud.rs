//! Karpenter's cloud provider metrics decorator: every call the controllers make to the cloud is
//! timed (`karpenter_cloudprovider_duration_seconds`) and every error counted by its kind
//! (`karpenter_cloudprovider_errors_total`), labelled with the controller that made it; and the
//! instance types the cloud offers are exported as `karpenter_cloudprovider_instance_type_*`
//! gauges from the newest catalog of each NodePool, read at scrape time.

use async_trait::async_trait;
use driftwood_api::{NodeClaim, NodePool};
use driftwood_cloud::metric_registry::DeclaredRegistry;
use driftwood_cloud::{CloudDrift, CloudError, CloudProvider, OfferingKey};
use driftwood_scheduling::InstanceType;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::metrics::Labels;

tokio::task_local! {
    /// The controller whose pass is running (set by the loop driver around each pass), as
    /// Karpenter injects the controller's name into the context its calls carry.
    pub static CONTROLLER: &'static str;
}

/// The controller of the pass running on this task ("" outside any pass).
pub fn current_controller() -> &'static str {
    CONTROLLER.try_with(|name| *name).unwrap_or("")
}

/// client_golang's default histogram buckets, which Karpenter's method-duration histogram uses.
fn default_buckets() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

/// The `error` label of `karpenter_cloudprovider_errors_total`: the kinds Karpenter names,
/// empty for every other error.
pub fn error_kind(error: &CloudError) -> &'static str {
    match error {
        CloudError::InsufficientCapacity { .. } => "InsufficientCapacityError",
        CloudError::NotFound { .. } => "NodeClaimNotFoundError",
        CloudError::NodeClassNotReady { .. } => "NodeClassNotReadyError",
        CloudError::Invalid(_)
        | CloudError::Unresolved(_)
        | CloudError::Api { .. }
        | CloudError::Throttled { .. } => "",
    }
}

/// The newest instance-type catalog of each NodePool, for the instance-type gauges.
#[derive(Clone, Default, Debug)]
struct Catalogs(Arc<Mutex<BTreeMap<String, Arc<Vec<InstanceType>>>>>);

impl Catalogs {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Arc<Vec<InstanceType>>>> {
        // Every write is one insert: a panic elsewhere while it was held leaves it usable.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The cloud provider families.
#[derive(Clone, Debug)]
pub struct CloudMetrics {
    pub duration: Family<Labels, Histogram, fn() -> Histogram>,
    pub errors: Family<Labels, Counter>,
    catalogs: Catalogs,
}

/// The instance-type gauges [`InstanceTypeGauges`] writes at scrape time.
const INSTANCE_TYPE_GAUGES: [(&str, MetricType); 4] = [
    (
        "karpenter_cloudprovider_instance_type_cpu_cores",
        MetricType::Gauge,
    ),
    (
        "karpenter_cloudprovider_instance_type_memory_bytes",
        MetricType::Gauge,
    ),
    (
        "karpenter_cloudprovider_instance_type_offering_available",
        MetricType::Gauge,
    ),
    (
        "karpenter_cloudprovider_instance_type_offering_price_estimate",
        MetricType::Gauge,
    ),
];

impl CloudMetrics {
    /// The families, registered in `registry`.
    pub fn register(registry: &mut DeclaredRegistry) -> Self {
        let metrics = Self {
            duration: Family::new_with_constructor(default_buckets),
            errors: Family::default(),
            catalogs: Catalogs::default(),
        };
        registry.metric(
            "karpenter_cloudprovider_duration_seconds",
            "Duration of cloud provider calls, by controller, method and provider",
            metrics.duration.clone(),
        );
        registry.metric(
            "karpenter_cloudprovider_errors",
            "Errors returned by cloud provider calls, by controller, method, provider and \
             error kind",
            metrics.errors.clone(),
        );
        registry.collector(
            &INSTANCE_TYPE_GAUGES,
            Box::new(InstanceTypeGauges(metrics.catalogs.clone())),
        );
        metrics
    }

    /// Records one call of `method` to `provider` that took `seconds` and ended in `error`.
    fn record(&self, provider: &str, method: &str, seconds: f64, error: Option<&CloudError>) {
        let controller = current_controller();
        let mut labels: Labels = vec![
            ("controller".into(), controller.into()),
            ("method".into(), method.into()),
            ("provider".into(), provider.into()),
        ];
        self.duration.get_or_create(&labels).observe(seconds);
        if let Some(error) = error {
            labels.push(("error".into(), error_kind(error).into()));
            self.errors.get_or_create(&labels).inc();
        }
    }

    /// The newest catalog seen for `pool`, if its instance types were listed since this process
    /// started.
    pub fn catalog_of(&self, pool: &str) -> Option<Arc<Vec<InstanceType>>> {
        self.catalogs.lock().get(pool).cloned()
    }

    /// Keeps `catalog` as `pool`'s newest (an `Arc` clone; the gauges are read from it at
    /// scrape time).
    pub(crate) fn keep_catalog(&self, pool: &str, catalog: &Arc<Vec<InstanceType>>) {
        let mut catalogs = self.catalogs.lock();
        match catalogs.get(pool) {
            Some(kept) if Arc::ptr_eq(kept, catalog) => {}
            _ => {
                catalogs.insert(pool.to_string(), catalog.clone());
            }
        }
    }

    /// Forgets the catalogs of NodePools `exists` no longer knows (a deleted pool's types
    /// leave the gauges; a pool that asks for its types again is kept again).
    pub(crate) fn forget_catalogs_of_gone_pools(&self, exists: impl Fn(&str) -> bool) {
        self.catalogs.lock().retain(|pool, _| exists(pool));
    }
}

/// A gauge family written at scrape time: its name, help, and how a series' value is read
/// from `T`.
type ScrapedGauge<T> = (&'static str, &'static str, fn(&T) -> f64);

/// An offering's figures: available, price.
type OfferingFigures = (bool, f64);

/// The instance-type gauges over the newest catalog of every NodePool (a type or offering
/// two pools share is exported once).
#[derive(Debug)]
struct InstanceTypeGauges(Catalogs);

impl Collector for InstanceTypeGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let catalogs: Vec<Arc<Vec<InstanceType>>> = self.0.lock().values().cloned().collect();
        let mut types: BTreeMap<&str, &InstanceType> = BTreeMap::new();
        for catalog in &catalogs {
            for instance_type in catalog.iter() {
                types.entry(&instance_type.name).or_insert(instance_type);
            }
        }
        let gauge = |value: f64| {
            let gauge = Gauge::<f64, AtomicU64>::default();
            gauge.set(value);
            gauge
        };
        // As EC2 describes the type (Karpenter's figures): the instance-cpu and
        // instance-memory labels (MiB), before any VM overhead; the capacity when a type has
        // no such label.
        let per_type: [ScrapedGauge<InstanceType>; 2] = [
            (
                INSTANCE_TYPE_GAUGES[0].0,
                "vCPUs of an instance type, as EC2 describes it",
                |t| {
                    described(t, "karpenter.k8s.aws/instance-cpu", 1.0).unwrap_or_else(|| {
                        t.capacity.get(driftwood_scheduling::resources::CPU) as f64 / 1000.0
                    })
                },
            ),
            (
                INSTANCE_TYPE_GAUGES[1].0,
                "Memory of an instance type in bytes, as EC2 describes it (before the VM \
                 overhead)",
                |t| {
                    described(t, "karpenter.k8s.aws/instance-memory", 1024.0 * 1024.0)
                        .unwrap_or_else(|| {
                            t.capacity.get(driftwood_scheduling::resources::MEMORY) as f64 / 1000.0
                        })
                },
            ),
        ];
        for (name, help, value) in per_type {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (type_name, instance_type) in &types {
                let labels = [("instance_type", *type_name)];
                gauge(value(instance_type)).encode(family.encode_family(&labels)?)?;
            }
        }
        // Each offering over every catalog (pools may see different offerings of one type):
        // available when any catalog has it available, the price the last one gives (as
        // Karpenter's metrics controller writes them pool after pool).
        let mut offerings: BTreeMap<(&str, &str, &str), OfferingFigures> = BTreeMap::new();
        for instance_type in catalogs.iter().flat_map(|c| c.iter()) {
            for offering in &instance_type.offerings {
                let figures = offerings
                    .entry((
                        instance_type.name.as_str(),
                        offering.zone.as_str(),
                        offering.capacity_type.as_str(),
                    ))
                    .or_insert((false, offering.price));
                figures.0 |= offering.available;
                figures.1 = offering.price;
            }
        }
        let per_offering: [ScrapedGauge<OfferingFigures>; 2] = [
            (
                INSTANCE_TYPE_GAUGES[2].0,
                "1 when an offering (instance type, zone, capacity type) can be launched now, \
                 else 0",
                |(available, _)| f64::from(u8::from(*available)),
            ),
            (
                INSTANCE_TYPE_GAUGES[3].0,
                "The estimated hourly price of an offering",
                |(_, price)| *price,
            ),
        ];
        for (name, help, value) in per_offering {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for ((type_name, zone, capacity_type), figures) in &offerings {
                let labels = [
                    ("capacity_type", *capacity_type),
                    ("instance_type", *type_name),
                    ("zone", *zone),
                ];
                gauge(value(figures)).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// The number the single value of label `key` of `instance_type` says, times `unit`.
fn described(instance_type: &InstanceType, key: &str, unit: f64) -> Option<f64> {
    let value: f64 = instance_type
        .requirements
        .get(key)?
        .single_value()?
        .parse()
        .ok()?;
    Some(value * unit)
}

/// The cloud provider with every call measured.
pub struct MeteredCloud {
    inner: Arc<dyn CloudProvider>,
    metrics: CloudMetrics,
}

impl MeteredCloud {
    pub fn new(inner: Arc<dyn CloudProvider>, metrics: CloudMetrics) -> Self {
        Self { inner, metrics }
    }

    /// Runs `call` as `method`, recording its duration and error.
    async fn measure<T>(
        &self,
        method: &str,
        call: impl std::future::Future<Output = Result<T, CloudError>>,
    ) -> Result<T, CloudError> {
        let started = Instant::now();
        let result = call.await;
        self.metrics.record(
            self.inner.name(),
            method,
            started.elapsed().as_secs_f64(),
            result.as_ref().err(),
        );
        result
    }
}

#[async_trait]
impl CloudProvider for MeteredCloud {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn create(&self, claim: &NodeClaim) -> Result<NodeClaim, CloudError> {
        self.measure("Create", self.inner.create(claim)).await
    }

    async fn delete(&self, claim: &NodeClaim) -> Result<(), CloudError> {
        self.measure("Delete", self.inner.delete(claim)).await
    }

    /// Not one of Karpenter's cloud provider methods (its tagging controller calls EC2 itself),
    /// so not in `karpenter_cloudprovider_*`: the EC2 calls are in the AWS SDK's metrics.
    async fn tag_instance(&self, claim: &NodeClaim) -> Result<bool, CloudError> {
        self.inner.tag_instance(claim).await
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudError> {
        self.measure("Get", self.inner.get(provider_id)).await
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudError> {
        self.measure("List", self.inner.list()).await
    }

    /// Karpenter's termination asks `Get` for each instance (its provider batches them into
    /// one DescribeInstances); this is that batch.
    async fn live_among(
        &self,
        provider_ids: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>, CloudError> {
        self.measure("Get", self.inner.live_among(provider_ids))
            .await
    }

    async fn instance_types(&self, pool: &NodePool) -> Result<Arc<Vec<InstanceType>>, CloudError> {
        let catalog = self
            .measure("GetInstanceTypes", self.inner.instance_types(pool))
            .await?;
        self.metrics
            .keep_catalog(pool.metadata.name.as_deref().unwrap_or_default(), &catalog);
        Ok(catalog)
    }

    async fn is_drifted(&self, claim: &NodeClaim) -> Result<Option<CloudDrift>, CloudError> {
        self.measure("IsDrifted", self.inner.is_drifted(claim))
            .await
    }

    fn mark_unavailable(&self, offering: &OfferingKey, reason: &str) {
        self.inner.mark_unavailable(offering, reason);
    }

    fn repair_policies(&self) -> &'static [driftwood_api::repair::RepairPolicy] {
        self.inner.repair_policies()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_kinds_are_karpenters() {
        let ice = CloudError::InsufficientCapacity {
            offerings: vec![],
            message: "none".into(),
        };
        assert_eq!(error_kind(&ice), "InsufficientCapacityError");
        let gone = CloudError::NotFound {
            what: "instance".into(),
            message: "i-1".into(),
        };
        assert_eq!(error_kind(&gone), "NodeClaimNotFoundError");
        let class = CloudError::NodeClassNotReady {
            name: "default".into(),
            message: "no subnets".into(),
        };
        assert_eq!(error_kind(&class), "NodeClassNotReadyError");
        let api = CloudError::Api {
            provider: "aws".into(),
            message: "RequestLimitExceeded".into(),
        };
        assert_eq!(error_kind(&api), "");
    }

    #[tokio::test]
    async fn a_call_is_labelled_with_the_controller_whose_pass_made_it() {
        let mut registry = DeclaredRegistry::new();
        let metrics = CloudMetrics::register(&mut registry);
        assert_eq!(current_controller(), "");
        CONTROLLER
            .scope("drift", async {
                metrics.record("aws", "IsDrifted", 0.02, None);
                metrics.record(
                    "aws",
                    "IsDrifted",
                    0.5,
                    Some(&CloudError::Invalid("bad id".into())),
                );
            })
            .await;
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry.registry()).unwrap();
        assert!(text.contains(
            "karpenter_cloudprovider_duration_seconds_count{controller=\"drift\",method=\"IsDrifted\",provider=\"aws\"} 2"
        ), "{text}");
        assert!(text.contains(
            "karpenter_cloudprovider_errors_total{controller=\"drift\",method=\"IsDrifted\",provider=\"aws\",error=\"\"} 1"
        ), "{text}");
    }

    fn instance_type(
        name: &str,
        cpu: i64,
        memory_gib: i64,
        offerings: &[(&str, &str, f64, bool)],
    ) -> InstanceType {
        let mut requirements = driftwood_scheduling::Requirements::default();
        if name == "m5.large" {
            // EC2's 8 GiB, where the capacity is less (after the VM overhead).
            requirements.add(
                "karpenter.k8s.aws/instance-memory",
                driftwood_scheduling::Requirement::is_in(["8192"]),
            );
        }
        InstanceType {
            name: name.into(),
            requirements,
            capacity: driftwood_scheduling::Resources::from_milli([
                ("cpu", cpu * 1000),
                ("memory", memory_gib * 1024 * 1024 * 1024 * 1000),
                ("pods", 110_000),
            ]),
            overhead: Default::default(),
            offerings: offerings
                .iter()
                .map(
                    |(zone, capacity_type, price, available)| driftwood_scheduling::Offering {
                        zone: (*zone).into(),
                        capacity_type: (*capacity_type).into(),
                        price: *price,
                        available: *available,
                    },
                )
                .collect(),
        }
    }

    #[test]
    fn instance_types_are_exported_from_each_pools_newest_catalog() {
        let mut registry = DeclaredRegistry::new();
        let metrics = CloudMetrics::register(&mut registry);
        let general = Arc::new(vec![instance_type(
            "m5.large",
            2,
            7,
            &[
                ("us-west-2a", "on-demand", 0.096, true),
                ("us-west-2a", "spot", 0.035, false),
            ],
        )]);
        let batch = Arc::new(vec![
            instance_type(
                "m5.large",
                2,
                7,
                &[("us-west-2a", "on-demand", 0.096, true)],
            ),
            instance_type(
                "c5.xlarge",
                4,
                8,
                &[("us-west-2b", "on-demand", 0.17, true)],
            ),
        ]);
        metrics.keep_catalog("general", &general);
        metrics.keep_catalog("batch", &batch);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry.registry()).unwrap();
        for line in [
            "karpenter_cloudprovider_instance_type_cpu_cores{instance_type=\"c5.xlarge\"} 4.0",
            "karpenter_cloudprovider_instance_type_memory_bytes{instance_type=\"c5.xlarge\"} 8589934592.0",
            "karpenter_cloudprovider_instance_type_memory_bytes{instance_type=\"m5.large\"} 8589934592.0",
            "karpenter_cloudprovider_instance_type_offering_available{capacity_type=\"spot\",instance_type=\"m5.large\",zone=\"us-west-2a\"} 0.0",
            "karpenter_cloudprovider_instance_type_offering_available{capacity_type=\"on-demand\",instance_type=\"c5.xlarge\",zone=\"us-west-2b\"} 1.0",
            "karpenter_cloudprovider_instance_type_offering_price_estimate{capacity_type=\"on-demand\",instance_type=\"c5.xlarge\",zone=\"us-west-2b\"} 0.17",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
        // A type two pools share is one series.
        let m5 = text
            .lines()
            .filter(|l| {
                l.starts_with(
                    "karpenter_cloudprovider_instance_type_cpu_cores{instance_type=\"m5.large\"}",
                )
            })
            .count();
        assert_eq!(m5, 1);
        // A newer catalog replaces the pool's old one: the spot offering is gone.
        metrics.keep_catalog("general", &Arc::new(vec![]));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry.registry()).unwrap();
        assert!(!text.contains("capacity_type=\"spot\""), "{text}");
        // A deleted pool's catalog leaves: c5.xlarge was only batch's.
        metrics.forget_catalogs_of_gone_pools(|pool| pool == "general");
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry.registry()).unwrap();
        assert!(!text.contains("c5.xlarge"), "{text}");
        assert!(metrics.catalog_of("batch").is_none());
        assert!(metrics.catalog_of("general").is_some());
    }
}
