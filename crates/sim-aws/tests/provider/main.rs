//! The AWS provider over the simulated EC2/SSM/IAM: selector resolution, class status, launch
//! and provider drift, plus the simulation's own behaviour.

// Test helpers outside #[test] functions unwrap too; a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod aliases;
mod ami_selection;
mod common;
mod drift;
mod launch;
mod published_catalog;
mod realism;
mod simulation;
mod status_conditions;
