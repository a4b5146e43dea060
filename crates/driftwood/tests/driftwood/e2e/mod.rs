//! The controllers on the embedded cluster, on virtual time, with the safety invariants checked
//! at every step.

mod harness;
mod walkthrough;
