//! Karpenter's AWS provider families, kept by the provider: its failure counters, read at
//! scrape time from its counts —
//! `karpenter_cloudprovider_instance_launch_failures_total{zone,zone_id,capacity_type,reason}`
//! (each offering CreateFleet refused) and
//! `karpenter_cloudprovider_instance_termination_failures_total{zone,zone_id}` — and its
//! batchers' `karpenter_cloudprovider_batcher_batch_time_seconds{batcher}` and
//! `_batch_size{batcher}`.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use std::sync::Arc;

use driftwood_aws::failure_counts::FailureCounts;

/// The failure counters [`FailureCounters`] writes at scrape time.
const FAILURES: [(&str, MetricType); 2] = [
    (
        "karpenter_cloudprovider_instance_launch_failures",
        MetricType::Counter,
    ),
    (
        "karpenter_cloudprovider_instance_termination_failures",
        MetricType::Counter,
    ),
];

/// The collector over one provider's counts.
#[derive(Debug)]
pub struct FailureCounters(pub Arc<FailureCounts>);

impl Collector for FailureCounters {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let mut family = encoder.encode_descriptor(
            FAILURES[0].0,
            "Number of instance launch (CreateFleet offering) failures, dimensioned by \
             availability zone, zone ID, capacity type, and launch failure reason.",
            None,
            MetricType::Counter,
        )?;
        for (failure, count) in self.0.launches() {
            let labels = [
                ("zone", failure.zone.as_str()),
                ("zone_id", failure.zone_id.as_str()),
                ("capacity_type", failure.capacity_type.as_str()),
                ("reason", failure.reason),
            ];
            ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            FAILURES[1].0,
            "Number of instance termination (TerminateInstances) failures, dimensioned by \
             availability zone and zone ID.",
            None,
            MetricType::Counter,
        )?;
        for (failure, count) in self.0.terminations() {
            let labels = [
                ("zone", failure.zone.as_str()),
                ("zone_id", failure.zone_id.as_str()),
            ];
            ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// `karpenter_ec2nodeclasses_userdata_bytes{nodeclass}` (Karpenter's provider after v1.14.1):
/// each class's user data size as rendered into the last launch template created for it.
const USER_DATA: [(&str, MetricType); 1] =
    [("karpenter_ec2nodeclasses_userdata_bytes", MetricType::Gauge)];

/// The collector over one provider's user data sizes.
#[derive(Debug)]
pub struct UserDataGauge(pub driftwood_aws::launcher::UserDataSizes);

impl Collector for UserDataGauge {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let mut family = encoder.encode_descriptor(
            USER_DATA[0].0,
            "Size in bytes of the rendered user data (raw, pre-base64) for the EC2NodeClass",
            None,
            MetricType::Gauge,
        )?;
        for (class, bytes) in self.0.sizes() {
            ConstGauge::new(i64::try_from(bytes).unwrap_or(i64::MAX))
                .encode(family.encode_family(&[("nodeclass", class.as_str())])?)?;
        }
        Ok(())
    }
}

/// The families as a metric source of a process whose provider keeps `counts`, `batchers`
/// and `user_data`.
pub fn source(
    counts: Arc<FailureCounts>,
    batchers: driftwood_aws::batcher::BatcherMetrics,
    user_data: driftwood_aws::launcher::UserDataSizes,
) -> crate::metrics::ExternalFamilies {
    Arc::new(move |registry| {
        registry.collector(&USER_DATA, Box::new(UserDataGauge(user_data.clone())));
        registry.metric(
            "karpenter_cloudprovider_batcher_batch_time_seconds",
            "Duration of the batching window per batcher",
            batchers.window.clone(),
        );
        registry.metric(
            "karpenter_cloudprovider_batcher_batch_size",
            "Size of the request batch per batcher",
            batchers.size.clone(),
        );
        registry.collector(&FAILURES, Box::new(FailureCounters(counts.clone())));
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftwood_aws::failure_counts::{LaunchFailure, TerminationFailure};
    use driftwood_cloud::metric_registry::DeclaredRegistry;

    #[test]
    fn counts_are_exported_with_karpenters_labels() {
        let counts = Arc::new(FailureCounts::default());
        let mut registry = DeclaredRegistry::new();
        source(counts.clone(), Default::default(), Default::default())(&mut registry);
        assert_eq!(registry.declared().len(), 5);
        counts.launch_failed(LaunchFailure {
            zone: "us-west-2a".into(),
            zone_id: "usw2-az1".into(),
            capacity_type: "on-demand".into(),
            reason: "RequestLimitExceeded",
        });
        counts.termination_failed(TerminationFailure {
            zone: "us-west-2b".into(),
            zone_id: "usw2-az2".into(),
        });
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry.registry()).unwrap();
        assert!(
            text.contains(
                "karpenter_cloudprovider_instance_launch_failures_total{zone=\"us-west-2a\",zone_id=\"usw2-az1\",capacity_type=\"on-demand\",reason=\"RequestLimitExceeded\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "karpenter_cloudprovider_instance_termination_failures_total{zone=\"us-west-2b\",zone_id=\"usw2-az2\"} 1\n"
            ),
            "{text}"
        );
    }
}
