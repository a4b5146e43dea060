//! One module per subcommand.

pub mod controller;
pub mod crds;
pub mod demo;
pub mod explain;
pub mod logging;
pub mod signal;
pub mod sim;
pub mod validate;
