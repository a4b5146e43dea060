//! The driftwood program's library half: wiring the embedded cluster to the real controllers
//! (used by `driftwood demo`, `driftwood sim serve` and the end-to-end tests) and the demo's
//! scenarios, observation and reports.

pub mod demo;
pub mod embedded;
