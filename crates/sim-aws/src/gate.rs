//! The way into every simulated API call: it is counted, takes its latency, fails with an
//! armed fault, then with the rate limits, in that order, before the action itself runs.

use driftwood_aws::ports::AwsError;

use crate::rate_limits::classify;
use crate::state::SimAws;

/// One call arriving at the simulated API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Call {
    action: &'static str,
    unfiltered: bool,
    resources: u32,
}

impl Call {
    /// A call of `action` (the AWS action name, e.g. `CreateFleet`).
    pub(crate) const fn new(action: &'static str) -> Self {
        Self {
            action,
            unfiltered: false,
            resources: 0,
        }
    }

    /// Marks the call as carrying no filter (the smaller bucket of the actions that have one).
    pub(crate) const fn unfiltered(mut self, unfiltered: bool) -> Self {
        self.unfiltered = unfiltered;
        self
    }

    /// The resources (instances) the call launches or terminates.
    pub(crate) fn resources(mut self, count: usize) -> Self {
        self.resources = u32::try_from(count).unwrap_or(u32::MAX);
        self
    }
}

impl SimAws {
    /// Lets `call` through or fails it: counted first, then its latency (tokio time), then an
    /// armed fault for the action, then the rate limits.
    pub(crate) async fn enter(&self, call: Call) -> Result<(), AwsError> {
        let realism = self.config.realism;
        let class = classify(call.action);
        let sequence = self.meter().count(call.action);
        if realism.latency
            && let Some(class) = class
        {
            tokio::time::sleep(class.latency(self.config.seed, sequence)).await;
        }
        if let Err(error) = self.check_fault(call.action) {
            self.meter().count_refusal(call.action, &error);
            return Err(error);
        }
        let Some(class) = class.filter(|_| realism.rate_limits) else {
            return Ok(());
        };
        let category = class.category_of(call.unfiltered);
        let bucket = category.bucket(call.action);
        let mut draws = vec![(bucket.as_str(), category.limit(), 1)];
        if let Some((key, limit)) = class.resource.filter(|_| call.resources > 0) {
            draws.push((key, limit, call.resources));
        }
        let now = self.now();
        let mut meter = self.meter();
        if meter.limiter.admit(&draws, now) {
            Ok(())
        } else {
            let error = category.throttling_error();
            meter.count_refusal(call.action, &error);
            Err(error)
        }
    }
}
