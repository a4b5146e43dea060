//! One module per subcommand.

pub mod crds;
pub mod demo;
pub mod validate;
