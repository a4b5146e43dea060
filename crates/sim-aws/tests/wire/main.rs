//! The simulated account over AWS's wire protocols: `wire::handle` served over loopback HTTP,
//! driven by the production SDK adapter (`driftwood-cloud-aws`), must answer every port call
//! as the simulated port answers it directly; and requests the SDK never sends (unknown
//! actions, malformed bodies) get AWS's error shapes.

// Test helpers outside #[test] functions unwrap too; a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;
mod ec2_describe;
mod ec2_launch;
mod edges;
mod iam;
mod server;
mod ssm_pricing;
mod throttling;
