//! Log output: Karpenter-style structured JSON (the default for `controller`) or compact text.

use tracing_subscriber::EnvFilter;

/// The log line format.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Text,
}

/// Installs the global subscriber. `level` is LOG_LEVEL (error, warn, info, debug) or a full
/// tracing filter; the kube client's own chatter is kept at warn.
pub fn init(format: LogFormat, level: &str) {
    let filter = if level.contains('=') {
        level.to_string()
    } else {
        format!("{level},kube=warn,hyper=warn,tower=warn")
    };
    let filter = EnvFilter::try_new(&filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
        LogFormat::Text => builder.compact().try_init(),
    };
}
