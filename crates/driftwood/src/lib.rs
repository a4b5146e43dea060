//! The driftwood program's library half: wiring the embedded cluster to the real controllers
//! (used by `driftwood demo`, `driftwood sim serve` and the end-to-end tests) and the demo's
//! scenarios, observation and reports. All of it is the `embedded` feature's (on by default).

#[cfg(feature = "embedded")]
pub mod api_faults;
#[cfg(feature = "embedded")]
pub mod aws_endpoint;
#[cfg(feature = "embedded")]
pub mod chaos;
#[cfg(feature = "embedded")]
pub mod demo;
#[cfg(feature = "embedded")]
pub mod embedded;
#[cfg(feature = "embedded")]
pub mod preview;
pub mod rollout;
