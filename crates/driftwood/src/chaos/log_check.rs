//! The `error-names-object` invariant: every warning or error logged during a chaos run names
//! what it is about in a field (`nodeclaim=`, `node=`, `pod=`, `kind=`, `lease=`, ...), so an
//! operator reading the log can act on it. A tracing layer, installed for the run's thread
//! only, collects the ones that do not.

use std::cell::RefCell;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

/// Field names that say which object a log line is about.
pub const OBJECT_FIELDS: &[&str] = &[
    "nodeclaim",
    "node",
    "nodepool",
    "nodeclass",
    "pod",
    "pods",
    "object",
    "kind",
    "identity",
    "lease",
    "instance",
    "instance_id",
    "nodeclaims",
    "nodes",
    "operation",
    "region",
    "controller",
    "ec2nodeclass",
    "provider_id",
    "cluster",
    "pdb",
];

thread_local! {
    static UNNAMED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// The warnings and errors without an object, collected on this thread since the last call.
pub fn take_unnamed() -> Vec<String> {
    UNNAMED.with(|u| std::mem::take(&mut *u.borrow_mut()))
}

/// Collects warnings and errors that name no object (install it with a WARN filter).
#[derive(Debug, Default, Clone, Copy)]
pub struct ObjectNaming;

#[derive(Default)]
struct Fields {
    message: String,
    names_object: bool,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else if OBJECT_FIELDS.contains(&field.name()) {
            self.names_object = true;
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else if OBJECT_FIELDS.contains(&field.name()) {
            self.names_object = true;
        }
    }
}

impl<S: Subscriber> Layer<S> for ObjectNaming {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if *event.metadata().level() > Level::WARN {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        if !fields.names_object {
            let line = format!(
                "{} {}: {}",
                event.metadata().level(),
                event.metadata().target(),
                fields.message
            );
            UNNAMED.with(|u| u.borrow_mut().push(line));
        }
    }
}

/// A subscriber for one chaos run's thread: only the check, at WARN and above.
pub fn subscriber() -> impl Subscriber + Send + Sync {
    use tracing_subscriber::layer::SubscriberExt as _;
    tracing_subscriber::registry()
        .with(ObjectNaming.with_filter(tracing_subscriber::filter::LevelFilter::WARN))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_without_an_object_are_collected() {
        tracing::subscriber::with_default(subscriber(), || {
            tracing::warn!(nodeclaim = "a", "could not do it");
            tracing::error!("something failed");
            tracing::info!("fine, and not checked");
        });
        let unnamed = take_unnamed();
        assert_eq!(unnamed.len(), 1, "{unnamed:?}");
        assert!(unnamed[0].contains("something failed"), "{unnamed:?}");
        assert!(take_unnamed().is_empty());
    }
}
