//! `driftwood demo`: scenarios (the public drift walkthrough and others) replayed on the
//! embedded cluster with the real controllers on a virtual clock, with kubectl-style tables,
//! a timeline derived from the API objects, availability checks and a JSON/SVG report.

pub mod aws_calls;
pub mod bundle;
pub mod check;
pub mod duration;
pub mod html;
pub mod logs;
pub mod report;
pub mod run;
pub mod scenario;
pub mod tables;
pub mod template;
pub mod track;

pub use bundle::{DEFAULT_SCENARIO, Files, SCENARIOS};
pub use report::Summary;
pub use run::{Outcome, Pace, RunConfig, StepFailure, run};
pub use scenario::{Scenario, ScenarioError, parse_scenario};
