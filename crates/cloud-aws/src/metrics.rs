//! The AWS SDK's request metrics as Karpenter exports them (aws-sdk-go-prometheus):
//! `aws_sdk_go_request_total`, `_request_duration_seconds` and `_request_retry_count` per
//! operation call, `aws_sdk_go_request_attempt_total` and `_request_attempt_duration_seconds`
//! per attempt, each by `service` (EC2, SSM, IAM, SQS, Pricing), `action` (the operation) and
//! `code` (the HTTP status; -1 when no answer came, as aws-sdk-go-prometheus labels it). Kept by an interceptor on every client
//! [`crate::sdk_ports`] builds, so throttling and retry storms show per operation.

use aws_sdk_ec2::config::interceptors::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
    FinalizerInterceptorContextRef,
};
use aws_sdk_ec2::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use driftwood_cloud::metric_registry::DeclaredRegistry;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use std::time::Instant;

/// Label pairs of one series.
type Labels = Vec<(String, String)>;

/// aws-sdk-go-prometheus's latency buckets: 10 ms growing by half, twenty of them.
fn latency_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 1.5, 20))
}

/// Its retry-count buckets: 0 to 10 retries.
fn retry_buckets() -> Histogram {
    Histogram::new((0..=10).map(f64::from))
}

/// The five families; cheap to clone (every client's interceptor and the registry share them).
#[derive(Clone, Debug)]
pub struct SdkMetrics {
    pub requests: Family<Labels, Counter>,
    pub attempts: Family<Labels, Counter>,
    pub duration: Family<Labels, Histogram, fn() -> Histogram>,
    pub attempt_duration: Family<Labels, Histogram, fn() -> Histogram>,
    pub retries: Family<Labels, Histogram, fn() -> Histogram>,
}

impl Default for SdkMetrics {
    fn default() -> Self {
        Self {
            requests: Family::default(),
            attempts: Family::default(),
            duration: Family::new_with_constructor(latency_buckets),
            attempt_duration: Family::new_with_constructor(latency_buckets),
            retries: Family::new_with_constructor(retry_buckets),
        }
    }
}

impl SdkMetrics {
    /// Registers the families in `registry`.
    pub fn register(&self, registry: &mut DeclaredRegistry) {
        registry.metric(
            "aws_sdk_go_request",
            "AWS API operation calls (retries included in one call), by service, action and \
             the final HTTP status code",
            self.requests.clone(),
        );
        registry.metric(
            "aws_sdk_go_request_attempt",
            "AWS API attempts (each retry is one), by service, action and the attempt's HTTP \
             status code",
            self.attempts.clone(),
        );
        registry.metric(
            "aws_sdk_go_request_duration_seconds",
            "Latency of AWS API operation calls, retries and their backoff included",
            self.duration.clone(),
        );
        registry.metric(
            "aws_sdk_go_request_attempt_duration_seconds",
            "Latency of AWS API attempts, by the call's final status code",
            self.attempt_duration.clone(),
        );
        registry.metric(
            "aws_sdk_go_request_retry_count",
            "Retries per AWS API operation call",
            self.retries.clone(),
        );
    }

    /// One operation call of `action` on `service` is over: its attempts' status codes and
    /// durations, the call's final code (its last attempt's) and duration.
    pub fn record(
        &self,
        service: &str,
        action: &str,
        attempts: &[(i32, f64)],
        code: i32,
        seconds: f64,
    ) {
        let labels = |code: i32| -> Labels {
            vec![
                ("service".into(), service.into()),
                ("action".into(), action.into()),
                ("code".into(), code.to_string()),
            ]
        };
        let call = labels(code);
        self.requests.get_or_create(&call).inc();
        self.duration.get_or_create(&call).observe(seconds);
        let retries = attempts.len().saturating_sub(1);
        self.retries.get_or_create(&call).observe(retries as f64);
        for (attempt_code, attempt_seconds) in attempts {
            self.attempts.get_or_create(&labels(*attempt_code)).inc();
            // As aws-sdk-go-prometheus: an attempt's latency under the call's final code.
            self.attempt_duration
                .get_or_create(&call)
                .observe(*attempt_seconds);
        }
    }
}

/// What the interceptor keeps in an operation's config bag between its hooks.
#[derive(Debug, Clone)]
struct CallTimes {
    started: Instant,
    attempt_started: Option<Instant>,
    /// Each finished attempt's status code (-1: no answer) and seconds.
    attempts: Vec<(i32, f64)>,
}

impl Storable for CallTimes {
    type Storer = StoreReplace<Self>;
}

/// The interceptor that feeds [`SdkMetrics`].
#[derive(Debug, Clone)]
pub struct MetricsInterceptor {
    metrics: SdkMetrics,
}

impl MetricsInterceptor {
    pub fn new(metrics: SdkMetrics) -> Self {
        Self { metrics }
    }
}

/// The HTTP status of the answer, -1 when none came (a connection failure, a timeout).
fn status(context: &FinalizerInterceptorContextRef<'_>) -> i32 {
    context
        .response()
        .map_or(-1, |r| i32::from(r.status().as_u16()))
}

impl Intercept for MetricsInterceptor {
    fn name(&self) -> &'static str {
        "driftwood-sdk-metrics"
    }

    fn read_before_execution(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        cfg.interceptor_state().store_put(CallTimes {
            started: Instant::now(),
            attempt_started: None,
            attempts: Vec::new(),
        });
        Ok(())
    }

    fn read_before_attempt(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(times) = cfg.load::<CallTimes>() {
            let mut times = times.clone();
            times.attempt_started = Some(Instant::now());
            cfg.interceptor_state().store_put(times);
        }
        Ok(())
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(times) = cfg.load::<CallTimes>() {
            let mut times = times.clone();
            let seconds = times
                .attempt_started
                .take()
                .map_or(0.0, |at| at.elapsed().as_secs_f64());
            times.attempts.push((status(context), seconds));
            cfg.interceptor_state().store_put(times);
        }
        Ok(())
    }

    fn read_after_execution(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let (Some(times), Some(metadata)) = (cfg.load::<CallTimes>(), cfg.load::<Metadata>())
        else {
            return Ok(());
        };
        // The call's code is its last attempt's (an operation timeout during a backoff keeps
        // the throttled attempt's code).
        let code = times
            .attempts
            .last()
            .map_or_else(|| status(context), |(code, _)| *code);
        self.metrics.record(
            metadata.service(),
            metadata.name(),
            &times.attempts,
            code,
            times.started.elapsed().as_secs_f64(),
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_counts_once_and_each_attempt_once_by_its_own_code() {
        let metrics = SdkMetrics::default();
        let mut registry = DeclaredRegistry::new();
        metrics.register(&mut registry);
        assert_eq!(registry.declared().len(), 5);
        let (registry, _) = registry.into_parts();
        // Throttled twice, then answered.
        metrics.record(
            "EC2",
            "CreateFleet",
            &[(503, 0.02), (503, 0.03), (200, 0.1)],
            200,
            1.5,
        );
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "aws_sdk_go_request_total{service=\"EC2\",action=\"CreateFleet\",code=\"200\"} 1",
            "aws_sdk_go_request_attempt_total{service=\"EC2\",action=\"CreateFleet\",code=\"503\"} 2",
            "aws_sdk_go_request_attempt_total{service=\"EC2\",action=\"CreateFleet\",code=\"200\"} 1",
            "aws_sdk_go_request_retry_count_sum{service=\"EC2\",action=\"CreateFleet\",code=\"200\"} 2.0",
            "aws_sdk_go_request_attempt_duration_seconds_count{service=\"EC2\",action=\"CreateFleet\",code=\"200\"} 3",
            "aws_sdk_go_request_duration_seconds_sum{service=\"EC2\",action=\"CreateFleet\",code=\"200\"} 1.5",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
    }
}
