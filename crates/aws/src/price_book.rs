//! On-demand prices as Karpenter keeps them: the built-in table is there from the start (here:
//! prices estimated from each type's vCPU, memory and GPUs, see `price_estimate`), and the
//! Pricing API's list is fetched once in the background and every 12 hours after, replacing
//! the table's figures when it arrives. No launch ever waits for the Pricing API: a private
//! cluster without its endpoint (Karpenter's `isolatedVPC`) launches at once on the table, and
//! with `isolatedVPC` set the API is not called at all.

use crate::ports::{InstanceTypeDescription, PricingApi};
use crate::price_estimate::estimate_on_demand_prices;
use driftwood_cloud::Clock;
use jiff::{SignedDuration, Timestamp};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// How often the listed prices are fetched again (Karpenter's pricing controller: 12 h).
pub const REFRESH: SignedDuration = SignedDuration::from_hours(12);
/// How soon a failed fetch is tried again.
pub const RETRY: SignedDuration = SignedDuration::from_mins(5);

/// Where the prices come from now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriceSource {
    /// The built-in table (no list fetched yet, the API unreachable, or isolatedVPC).
    BuiltIn,
    /// The Pricing API's list.
    Listed,
}

#[derive(Debug, Default)]
struct State {
    listed: Option<Arc<BTreeMap<String, f64>>>,
    /// When the next fetch may start (None: none started yet).
    next_fetch: Option<Timestamp>,
    fetching: bool,
}

/// The on-demand prices of one region. Cheap to share (`Arc`).
pub struct PriceBook {
    pricing: Arc<dyn PricingApi>,
    region: String,
    clock: Arc<dyn Clock>,
    isolated_vpc: bool,
    state: Mutex<State>,
    /// Moves each time the listed prices change (catalogs built before are rebuilt).
    version: AtomicU64,
}

impl PriceBook {
    pub fn new(
        pricing: Arc<dyn PricingApi>,
        region: &str,
        clock: Arc<dyn Clock>,
        isolated_vpc: bool,
    ) -> Self {
        Self {
            pricing,
            region: region.to_string(),
            clock,
            isolated_vpc,
            state: Mutex::new(State::default()),
            version: AtomicU64::new(0),
        }
    }

    /// The version of the listed prices (0: none yet).
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }

    /// Every described type's on-demand price now, and where it came from. Starts the
    /// background fetch when one is due; never waits for it.
    pub fn prices(
        self: &Arc<Self>,
        descriptions: &[InstanceTypeDescription],
    ) -> (BTreeMap<String, f64>, PriceSource) {
        self.fetch_if_due();
        let listed = self
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .listed
            .clone();
        let mut prices: BTreeMap<String, f64> = estimate_on_demand_prices(descriptions)
            .into_iter()
            .map(|p| (p.instance_type, p.price_per_hour))
            .collect();
        match listed {
            Some(listed) => {
                // Types the list lacks keep the table's figure.
                prices.extend(listed.iter().map(|(k, v)| (k.clone(), *v)));
                (prices, PriceSource::Listed)
            }
            None => (prices, PriceSource::BuiltIn),
        }
    }

    /// Starts one background fetch if none is under way and one is due (the provider calls it
    /// at start so the list is usually there before the first launch).
    pub fn fetch_if_due(self: &Arc<Self>) {
        if self.isolated_vpc {
            return;
        }
        let now = self.clock.now();
        {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if state.fetching || state.next_fetch.is_some_and(|at| now < at) {
                return;
            }
            state.fetching = true;
        }
        let book = self.clone();
        tokio::spawn(async move { book.fetch().await });
    }

    async fn fetch(&self) {
        let result = self.pricing.on_demand_prices(&self.region).await;
        let now = self.clock.now();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.fetching = false;
        match result {
            Ok(prices) if !prices.is_empty() => {
                tracing::info!(
                    region = %self.region,
                    instance_types = prices.len(),
                    "updated on-demand prices from the Pricing API"
                );
                state.listed = Some(Arc::new(
                    prices
                        .into_iter()
                        .map(|p| (p.instance_type, p.price_per_hour))
                        .collect(),
                ));
                state.next_fetch = Some(now + REFRESH);
                self.version.fetch_add(1, Ordering::SeqCst);
            }
            Ok(_) => {
                tracing::warn!(region = %self.region, "the Pricing API listed no on-demand prices for the region; keeping the built-in prices");
                state.next_fetch = Some(now + REFRESH);
            }
            Err(error) => {
                tracing::warn!(region = %self.region, %error, retry_in = %RETRY, "the Pricing API is unavailable; keeping the built-in prices (set isolatedVPC in a private cluster)");
                state.next_fetch = Some(now + RETRY);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::{AwsError, OnDemandPrice};
    use driftwood_cloud::ManualClock;
    use std::sync::atomic::AtomicUsize;

    /// A Pricing API that answers only when told to (a private VPC's never does), counting
    /// calls.
    struct GatedPricing {
        calls: AtomicUsize,
        open: tokio::sync::Semaphore,
    }

    #[async_trait::async_trait]
    impl PricingApi for GatedPricing {
        async fn on_demand_prices(&self, _region: &str) -> Result<Vec<OnDemandPrice>, AwsError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let _permit = self
                .open
                .acquire()
                .await
                .map_err(|_| AwsError::new("Closed", "closed"))?;
            Ok(vec![OnDemandPrice {
                instance_type: "m5.large".into(),
                price_per_hour: 0.096,
            }])
        }
    }

    fn m5_large() -> Vec<InstanceTypeDescription> {
        vec![InstanceTypeDescription {
            instance_type: "m5.large".into(),
            default_vcpus: 2,
            memory_mib: 8192,
            processor_manufacturer: Some("Intel".into()),
            ..InstanceTypeDescription::default()
        }]
    }

    fn book(isolated_vpc: bool) -> (Arc<PriceBook>, Arc<GatedPricing>) {
        let pricing = Arc::new(GatedPricing {
            calls: AtomicUsize::new(0),
            open: tokio::sync::Semaphore::new(0),
        });
        let clock = Arc::new(ManualClock::new(
            "2026-01-01T00:00:00Z".parse().expect("time"),
        ));
        let book = Arc::new(PriceBook::new(
            pricing.clone(),
            "us-west-2",
            clock,
            isolated_vpc,
        ));
        (book, pricing)
    }

    /// Found by hand in a private VPC: the first launch waited 27–46 s while three callers
    /// retried the price fetch. Prices are there at once from the built-in table, one fetch
    /// runs in the background whoever asks, and its list replaces the table when it arrives.
    #[tokio::test]
    async fn prices_never_wait_for_the_pricing_api_and_one_fetch_serves_every_caller() {
        let (book, pricing) = book(false);
        for _ in 0..3 {
            let (prices, source) = book.prices(&m5_large());
            assert_eq!(source, PriceSource::BuiltIn);
            assert!(prices["m5.large"] > 0.0);
        }
        tokio::task::yield_now().await;
        assert_eq!(pricing.calls.load(Ordering::SeqCst), 1, "one fetch");
        assert_eq!(book.version(), 0);
        pricing.open.add_permits(1);
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(book.version(), 1);
        let (prices, source) = book.prices(&m5_large());
        assert_eq!(source, PriceSource::Listed);
        assert_eq!(prices["m5.large"], 0.096);
        tokio::task::yield_now().await;
        assert_eq!(pricing.calls.load(Ordering::SeqCst), 1, "not due for 12 h");
    }

    #[tokio::test]
    async fn an_isolated_vpc_never_calls_the_pricing_api() {
        let (book, pricing) = book(true);
        let (_, source) = book.prices(&m5_large());
        tokio::task::yield_now().await;
        assert_eq!(source, PriceSource::BuiltIn);
        assert_eq!(pricing.calls.load(Ordering::SeqCst), 0);
    }
}
