//! Karpenter's histogram bucket boundaries that both the controllers and the AWS provider use,
//! kept once.

/// Karpenter's `metrics.DurationBuckets`: controller-runtime's reconcile-time buckets with the
/// longer ones Karpenter adds for its singleton controllers, also its pod and batcher duration
/// histograms'. Seconds.
pub const DURATION_BUCKETS: [f64; 45] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0, 120.0, 150.0, 300.0, 450.0, 600.0,
];
