//! One module per subcommand.

#[cfg(feature = "embedded")]
pub mod chaos;
pub mod controller;
pub mod crds;
#[cfg(feature = "embedded")]
pub mod demo;
pub mod explain;
pub mod logging;
#[cfg(feature = "embedded")]
pub mod preview;
pub mod rollout;
pub mod signal;
#[cfg(feature = "embedded")]
pub mod sim;
pub mod validate;
