//! driftwood-disruption: pure planners for drift and disruption — budgets, drift marking,
//! candidate eligibility and ordering, drain waves. No I/O, no async.

pub mod backoff;
pub mod budget;
pub mod cached_pod;
pub mod candidate;
pub mod command;
pub mod consolidatable;
pub mod consolidation;
pub mod drain;
pub mod drift;
pub mod explain;
pub mod plan;
pub mod policy;
pub mod repair;
pub mod rollout;
mod summary;
pub mod views;
pub mod world;
