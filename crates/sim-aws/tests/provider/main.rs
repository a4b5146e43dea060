//! The AWS provider over the simulated EC2/SSM/IAM: selector resolution, class status, launch
//! and provider drift, plus the simulation's own behaviour.

mod ami_selection;
mod common;
mod drift;
mod launch;
mod simulation;
mod status_conditions;
