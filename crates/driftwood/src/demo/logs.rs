//! The controllers' log lines, printed compactly for the demo: `09:00:12 disrupting node(s)
//! reason=drifted decision=replace ...` with the embedded cluster's virtual time, info and
//! above from driftwood's crates only, consecutive repeats dropped.

use driftwood_sim::SharedClock;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// Fields left out of the compact lines (long and not telling in a demo).
const DROPPED_FIELDS: [&str; 4] = ["allocatable", "provider_id", "synced", "instance_types"];

/// Where the log layer reads the time from; set once the cluster's clock exists.
#[derive(Clone, Default)]
pub struct LogClock(Arc<Mutex<Option<SharedClock>>>);

impl LogClock {
    pub fn set(&self, clock: SharedClock) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(clock);
        }
    }

    fn now(&self) -> Option<i64> {
        self.0
            .lock()
            .ok()
            .and_then(|slot| slot.as_ref().map(|c| c.now().as_second()))
    }
}

/// The compact demo log layer.
pub struct DemoLogLayer {
    clock: LogClock,
    /// Clear the progress line before each log line.
    progress: bool,
    last: Mutex<String>,
}

impl DemoLogLayer {
    pub fn new(clock: LogClock, progress: bool) -> Self {
        Self {
            clock,
            progress,
            last: Mutex::new(String::new()),
        }
    }
}

/// Collects an event's message and fields.
#[derive(Default)]
struct Fields {
    message: String,
    rest: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record(field.name(), value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record(field.name(), format!("{value:?}"));
    }
}

impl Fields {
    fn record(&mut self, name: &str, value: String) {
        if name == "message" && self.message.is_empty() {
            self.message = value;
            return;
        }
        let value = value.trim_matches('"');
        if !value.is_empty() && !DROPPED_FIELDS.contains(&name) {
            let _ = write!(self.rest, " {name}={value}");
        }
    }
}

/// Formats one compact line (pure, for tests).
pub fn format_line(time: &str, level: &Level, message: &str, fields: &str) -> String {
    let level = if *level == Level::WARN {
        "WARN "
    } else if *level == Level::ERROR {
        "ERROR "
    } else {
        ""
    };
    format!("{time} {level}{message}{fields}")
}

impl<S: Subscriber> Layer<S> for DemoLogLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() > Level::INFO || !meta.target().starts_with("driftwood") {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let body = format!("{}{}", fields.message, fields.rest);
        if let Ok(mut last) = self.last.lock() {
            if *last == body {
                return;
            }
            last.clone_from(&body);
        }
        let time = self
            .clock
            .now()
            .map(super::report::clock_time)
            .unwrap_or_else(|| "--:--:--".to_string());
        let line = format_line(&time, meta.level(), &fields.message, &fields.rest);
        let mut stdout = std::io::stdout().lock();
        if self.progress {
            let _ = write!(stdout, "\r\x1b[K");
        }
        let _ = writeln!(stdout, "{line}");
    }
}

/// Installs the demo's log layer as the global subscriber (once; later calls do nothing).
pub fn install(clock: LogClock, progress: bool) {
    use tracing_subscriber::layer::SubscriberExt as _;
    let subscriber = tracing_subscriber::registry().with(DemoLogLayer::new(clock, progress));
    let _ = tracing::subscriber::set_global_default(subscriber);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_compact() {
        assert_eq!(
            format_line(
                "09:00:12",
                &Level::INFO,
                "disrupting node(s)",
                " reason=drifted decision=replace"
            ),
            "09:00:12 disrupting node(s) reason=drifted decision=replace"
        );
        assert_eq!(
            format_line("09:00:13", &Level::WARN, "could not schedule pod", ""),
            "09:00:13 WARN could not schedule pod"
        );
    }

    #[test]
    fn fields_drop_the_noisy_ones_and_quotes() {
        let mut f = Fields::default();
        f.record("message", "initialized nodeclaim".into());
        f.record("nodeclaim", "a".into());
        f.record("allocatable", "cpu: 3".into());
        f.record("reason", "\"drifted\"".into());
        f.record("message", "AMI changed".into());
        f.record("message", String::new());
        assert_eq!(f.message, "initialized nodeclaim");
        assert_eq!(f.rest, " nodeclaim=a reason=drifted message=AMI changed");
    }
}
