//! The controllers on the embedded cluster, on virtual time, with the safety invariants checked
//! at every step.

mod dashboards;
mod drift;
pub mod harness;
mod interruption;
mod policy;
mod preview;
mod provisioning;
mod repair;
mod rollout;
mod safety;
pub mod support;
pub mod walkthrough;
