//! A simulated EC2, SSM, IAM, SQS and pricing API behind driftwood-aws's ports, deterministic for a
//! seed and driven by an injectable clock: EKS-optimized AMIs and their SSM public parameters, a
//! realistic instance-type catalog with prices, a VPC, instances that go pending → running, and
//! fault knobs (insufficient capacity, API errors, throttling). Like real AWS by default:
//! eventually consistent DescribeInstances, documented request rate limits, per-call latency
//! (see [`Realism`]), and per-action call counters ([`SimAws::api_calls`]).

pub mod calls;
pub mod ec2_api;
pub mod faults;
pub mod filter;
mod gate;
pub mod ids;
pub mod images;
pub mod import;
pub mod instance_catalog;
pub mod machines;
pub mod network;
pub mod other_apis;
pub mod rate_limits;
pub mod realism;
pub mod sqs;
pub mod state;
pub mod wire;

use std::sync::Arc;

use driftwood_aws::AwsPorts;

pub use calls::CallCount;
pub use images::{
    AMAZON_EKS_ACCOUNT, AMAZON_WINDOWS_ACCOUNT, DEFAULT_START_TIME, Family, Release,
    catalog_releases, default_start_time, kubernetes_versions,
};
pub use machines::{Machine, MachineSource};
pub use network::DISCOVERY_TAG;
pub use realism::Realism;
pub use state::{SimAws, SimConfig};

/// The provider ports all backed by one simulated account.
pub fn sim_ports(sim: &Arc<SimAws>) -> AwsPorts {
    AwsPorts {
        ec2: sim.clone(),
        ssm: sim.clone(),
        iam: sim.clone(),
        pricing: sim.clone(),
        sqs: sim.clone(),
    }
}
