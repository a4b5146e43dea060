//! Fixtures: a simulated account on a manual clock, served over HTTP, and the production SDK
//! ports pointed at it.

use std::sync::Arc;
use std::time::Duration;

use driftwood_aws::AwsPorts;
use driftwood_cloud::ManualClock;
use driftwood_cloud_aws::{SdkOptions, load_sdk_config, sdk_ports};
use driftwood_sim_aws::wire::{WireRequest, WireResponse, handle};
use driftwood_sim_aws::{SimAws, SimConfig, default_start_time};
use jiff::SignedDuration;

use crate::server::{Server, serve};

pub const CLUSTER: &str = "demo";
pub const ROLE: &str = "KarpenterNodeRole-demo";

pub struct Env {
    pub clock: Arc<ManualClock>,
    /// The account, called directly through its ports.
    pub sim: Arc<SimAws>,
    /// The same account through the SDK adapter and the wire.
    pub wire: AwsPorts,
    pub server: Server,
}

impl Env {
    pub fn advance(&self, by: SignedDuration) {
        self.clock.advance(by);
    }

    /// How many calls of `action` the account has received so far.
    pub fn calls(&self, action: &str) -> u64 {
        self.sim.api_calls().get(action).map_or(0, |c| c.calls)
    }
}

/// An account without realism (no latency, limits or Describe lag), its clock a fraction of a
/// second past the default start (so timestamps carry nanoseconds), the SDK trying each call
/// up to three times with millisecond backoffs.
pub async fn env() -> Env {
    env_with(SimConfig::new(CLUSTER, 7).without_realism(), 3).await
}

pub async fn env_with(config: SimConfig, max_attempts: u32) -> Env {
    let clock = Arc::new(ManualClock::new(default_start_time()));
    clock.advance(SignedDuration::new(1, 234_567_891));
    let sim = Arc::new(SimAws::new(config, clock.clone()));
    let server = serve(sim.clone()).await;
    let options = SdkOptions {
        region: Some("us-west-2".to_string()),
        endpoint_url: Some(server.url.clone()),
        max_attempts,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        attempt_timeout: Duration::from_secs(60),
        static_credentials: Some(("AKIDSIMULATED".to_string(), "secret".to_string())),
        pricing_endpoint_url: None,
    };
    let wire = sdk_ports(
        &load_sdk_config(&options).await.unwrap(),
        None,
        &driftwood_cloud_aws::SdkMetrics::default(),
    );
    Env {
        clock,
        sim,
        wire,
        server,
    }
}

/// A form-encoded query protocol request straight to `handle`.
pub async fn query(sim: &SimAws, body: &str) -> WireResponse {
    handle(
        sim,
        WireRequest {
            method: "POST",
            path: "/",
            query: None,
            content_type: Some("application/x-www-form-urlencoded; charset=utf-8"),
            amz_target: None,
            body: body.as_bytes(),
        },
    )
    .await
}

/// A JSON protocol request straight to `handle`.
pub async fn json(sim: &SimAws, target: &str, body: &str) -> WireResponse {
    handle(
        sim,
        WireRequest {
            method: "POST",
            path: "/",
            query: None,
            content_type: Some("application/x-amz-json-1.1"),
            amz_target: Some(target),
            body: body.as_bytes(),
        },
    )
    .await
}

/// A response body as text.
pub fn text(response: &WireResponse) -> String {
    String::from_utf8(response.body.clone()).unwrap()
}
