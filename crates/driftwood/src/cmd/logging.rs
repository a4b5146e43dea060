//! Log output: JSON lines shaped as Karpenter's (the default for `controller`), or compact text
//! for humans.
//!
//! A JSON line carries Karpenter's keys — `level` (INFO, DEBUG, WARN, ERROR), `time` (ISO 8601,
//! milliseconds, UTC), `logger` (`controller`), `message`, `commit`, `controller` and
//! `controllerKind` (Karpenter's controller names) — and the event's fields, object names
//! nested as controller-runtime writes them: `"NodeClaim":{"name":…}`, `"Node"`, `"NodePool"`,
//! `"EC2NodeClass"`, `"Pod":{"name":…,"namespace":…}`. So log queries written for Karpenter
//! (`NodeClaim.name`, `controller="disruption"`) read driftwood's lines unchanged.

use serde_json::{Map, Value};
use std::fmt;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

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
    // Colours only on a terminal: a log redirected to a file or read by `kubectl logs` would
    // carry the escape codes.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Json => builder.event_format(KarpenterJson).try_init(),
        LogFormat::Text => builder.compact().try_init(),
    };
    if let Err(error) = installed {
        // A subscriber is already installed (tests, embedding): its lines go where it says.
        eprintln!("driftwood: logging already initialised ({error})");
    }
}

/// The commit driftwood was built from (`DRIFTWOOD_COMMIT` at build time), as Karpenter's
/// `commit` key.
const COMMIT: &str = match option_env!("DRIFTWOOD_COMMIT") {
    Some(commit) => commit,
    None => "unknown",
};

/// Karpenter's controller name for the module an event comes from.
fn controller_of(target: &str) -> Option<&'static str> {
    let module = target.split("::controllers::").nth(1)?.split("::").next()?;
    Some(match module {
        "provisioner" => "provisioner",
        "lifecycle" => "nodeclaim.lifecycle",
        "disruption" => "disruption",
        "termination" => "node.termination",
        "drift" | "consolidatable" => "nodeclaim.disruption",
        "hash" => "nodepool.hash",
        "nodeclass" => "nodeclass",
        "tagging" => "nodeclaim.tagging",
        "interruption" if target.contains("::instance_status") => "interruption.instancestatus",
        "interruption" => "interruption",
        _ => return None,
    })
}

/// The kind of object a Karpenter controller reconciles (its `controllerKind`); none for its
/// singletons (provisioner, disruption, interruption, garbage collection), which controller-
/// runtime logs without one.
fn kind_of(controller: &str) -> Option<&'static str> {
    Some(match controller {
        "nodeclaim.lifecycle" | "nodeclaim.disruption" | "nodeclaim.tagging" => "NodeClaim",
        "node.termination" => "Node",
        "nodepool.hash" => "NodePool",
        "nodeclass" => "EC2NodeClass",
        _ => return None,
    })
}

/// The nested object a field names (`nodeclaim` → `NodeClaim`), as controller-runtime's
/// `klog.KObj` keys.
fn object_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "nodeclaim" => "NodeClaim",
        "node" => "Node",
        "nodepool" => "NodePool",
        "ec2nodeclass" | "nodeclass" => "EC2NodeClass",
        "pod" => "Pod",
        _ => return None,
    })
}

/// The event's fields as JSON values, the message apart.
#[derive(Default)]
struct Fields {
    message: String,
    fields: Map<String, Value>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        let name = field.name();
        if name == "message" {
            let text = match value {
                Value::String(s) => s,
                other => other.to_string(),
            };
            // The event's message comes first; a field that is also called `message` must not
            // overwrite it.
            if self.message.is_empty() {
                self.message = text;
            } else if !text.is_empty() {
                self.fields
                    .insert("detail".to_string(), Value::String(text));
            }
            return;
        }
        let key = name.replace('_', "-");
        match (object_key(name), &value) {
            // One object by name: nested as Karpenter writes it; a list stays as it is.
            (Some(kind), Value::String(text)) if !text.contains(',') && !text.is_empty() => {
                let object = match text.split_once('/') {
                    Some((namespace, name)) if kind == "Pod" => {
                        serde_json::json!({"name": name, "namespace": namespace})
                    }
                    _ => serde_json::json!({"name": text}),
                };
                self.fields.insert(kind.to_string(), object);
            }
            _ => {
                self.fields.insert(key, value);
            }
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_string()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::from(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(value.to_string()));
    }
}

/// zap's CapitalLevelEncoder.
fn level_text(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "ERROR",
        Level::WARN => "WARN",
        Level::INFO => "INFO",
        Level::DEBUG | Level::TRACE => "DEBUG",
    }
}

/// One line of Karpenter-shaped JSON for `event` at `time`.
fn json_line(event: &Event<'_>, time: jiff::Timestamp) -> String {
    let metadata = event.metadata();
    let mut fields = Fields::default();
    event.record(&mut fields);
    // Karpenter's keys first, in zap's order; then the event's fields by name.
    let mut line: Vec<(String, Value)> = vec![
        ("level".into(), level_text(metadata.level()).into()),
        (
            "time".into(),
            time.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string().into(),
        ),
        ("logger".into(), "controller".into()),
        ("message".into(), fields.message.into()),
        ("commit".into(), COMMIT.into()),
    ];
    // A `controller` field the line carries names it (the loop driver's lines, a controller
    // whose module does the work of another); otherwise its module does.
    let named = fields
        .fields
        .get("controller")
        .and_then(Value::as_str)
        .map(str::to_string);
    match named.or_else(|| controller_of(metadata.target()).map(str::to_string)) {
        Some(controller) => {
            let kind = kind_of(&controller);
            line.push(("controller".into(), controller.into()));
            if let Some(kind) = kind {
                line.push(("controllerKind".into(), kind.into()));
            }
        }
        None => {
            // Not a controller (the process, the cloud adapter, the client): the module says
            // where the line comes from.
            line.push(("source".into(), metadata.target().into()));
        }
    }
    for (key, value) in fields.fields {
        if !line.iter().any(|(k, _)| *k == key) {
            line.push((key, value));
        }
    }
    let members: Vec<String> = line
        .iter()
        .map(|(key, value)| format!("{}:{value}", Value::String(key.clone())))
        .collect();
    format!("{{{}}}", members.join(","))
}

/// The JSON event formatter.
struct KarpenterJson;

impl<S, N> FormatEvent<S, N> for KarpenterJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        // Log lines carry the host's wall time (as zap's), not a simulation's clock.
        writeln!(writer, "{}", json_line(event, jiff::Timestamp::now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt as _;

    /// Captures the lines of the events logged in `f`, formatted at a fixed time.
    fn lines(f: impl FnOnce()) -> Vec<Value> {
        #[derive(Clone, Default)]
        struct Capture(Arc<Mutex<Vec<String>>>);
        impl<S: Subscriber> tracing_subscriber::Layer<S> for Capture {
            fn on_event(&self, event: &Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
                let at = "2026-11-26T08:00:01.234Z".parse().expect("time");
                self.0.lock().expect("lines").push(json_line(event, at));
            }
        }
        let capture = Capture::default();
        let subscriber = tracing_subscriber::registry().with(capture.clone());
        tracing::subscriber::with_default(subscriber, f);
        let lines = capture.0.lock().expect("lines").clone();
        lines
            .iter()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// Karpenter's "created nodeclaim" and "disrupting node(s)" lines, as its docs show them
    /// (`{"level":"INFO","time":…,"logger":"controller","message":"created nodeclaim",
    /// "commit":…,"controller":"provisioner",…,"NodePool":{"name":"default"},
    /// "NodeClaim":{"name":"default-…"},"requests":…,"instance-types":…}`), key by key.
    #[test]
    fn lines_have_karpenters_keys_and_nested_objects() {
        let got = lines(|| {
            tracing::info!(
                target: "driftwood_controller::controllers::provisioner",
                nodeclaim = "default-x2kzt",
                nodepool = "default",
                requests = "cpu: 1500m, pods: 3",
                instance_types = "c6a.large and 55 other(s)",
                "created nodeclaim"
            );
            tracing::warn!(
                target: "driftwood_controller::controllers::termination::drain",
                node = "ip-10-0-0-4.us-west-2.compute.internal",
                pod = "default/web-1",
                error = "too many requests",
                "could not evict pod"
            );
            tracing::info!(
                target: "driftwood_controller::controllers::disruption::start",
                disrupted_nodes = "a,b",
                "disrupting node(s)"
            );
            tracing::debug!(target: "driftwood_cloud_aws::ec2", "called CreateFleet");
            tracing::info!(
                target: "driftwood_controller::controllers::nodeclass",
                message = "AMIsReady",
                "updated ec2nodeclass status"
            );
        });
        assert_eq!(
            got[0],
            serde_json::json!({
                "level": "INFO", "time": "2026-11-26T08:00:01.234Z", "logger": "controller",
                "message": "created nodeclaim", "commit": COMMIT, "controller": "provisioner",
                "NodeClaim": {"name": "default-x2kzt"}, "NodePool": {"name": "default"},
                "requests": "cpu: 1500m, pods: 3", "instance-types": "c6a.large and 55 other(s)"
            })
        );
        assert_eq!(got[1]["level"], "WARN");
        assert_eq!(got[1]["controller"], "node.termination");
        assert_eq!(got[1]["controllerKind"], "Node");
        assert_eq!(
            got[1]["Node"],
            serde_json::json!({"name": "ip-10-0-0-4.us-west-2.compute.internal"})
        );
        assert_eq!(
            got[1]["Pod"],
            serde_json::json!({"name": "web-1", "namespace": "default"})
        );
        assert_eq!(got[2]["controller"], "disruption");
        assert_eq!(got[2]["disrupted-nodes"], "a,b");
        assert_eq!(got[3]["level"], "DEBUG");
        assert_eq!(got[3]["source"], "driftwood_cloud_aws::ec2");
        assert!(got[3].get("controller").is_none());
        // A field named like the message does not replace it.
        assert_eq!(got[4]["message"], "updated ec2nodeclass status");
        assert_eq!(got[4]["detail"], "AMIsReady");
    }

    /// The controller a line names wins over its module's guess (the loop driver logs for
    /// every controller), and the interruption controllers are named as Karpenter's:
    /// singletons, with no controllerKind.
    #[test]
    fn a_named_controller_and_the_interruption_controllers() {
        let got = lines(|| {
            tracing::debug!(
                target: "driftwood_controller::controllers::driver",
                controller = "node.termination",
                worker = "termination",
                "starting"
            );
            tracing::info!(
                target: "driftwood_controller::controllers::interruption::instance_status",
                instance_id = "i-0abc",
                "detected unhealthy instance owned by cluster"
            );
            tracing::info!(
                target: "driftwood_controller::controllers::interruption",
                "initiating delete from interruption message"
            );
        });
        assert_eq!(got[0]["controller"], "node.termination");
        assert_eq!(got[0]["controllerKind"], "Node");
        assert!(got[0].get("source").is_none(), "{}", got[0]);
        assert_eq!(got[1]["controller"], "interruption.instancestatus");
        assert!(got[1].get("controllerKind").is_none());
        assert_eq!(got[2]["controller"], "interruption");
    }

    /// The keys come in zap's order, as a Karpenter line reads: level, time, logger, message,
    /// commit, controller, then the fields.
    #[test]
    fn karpenters_keys_come_first_in_zaps_order() {
        let captured = std::sync::Arc::new(Mutex::new(String::new()));
        {
            struct One(Arc<Mutex<String>>);
            impl<S: Subscriber> tracing_subscriber::Layer<S> for One {
                fn on_event(
                    &self,
                    event: &Event<'_>,
                    _: tracing_subscriber::layer::Context<'_, S>,
                ) {
                    let at = "2026-11-26T08:00:01.234Z".parse().expect("time");
                    *self.0.lock().expect("line") = json_line(event, at);
                }
            }
            let subscriber = tracing_subscriber::registry().with(One(captured.clone()));
            tracing::subscriber::with_default(subscriber, || {
                tracing::info!(
                    target: "driftwood_controller::controllers::lifecycle",
                    nodeclaim = "a",
                    "launched nodeclaim"
                );
            });
        }
        let line = captured.lock().expect("line").clone();
        assert_eq!(
            line,
            format!(
                "{{\"level\":\"INFO\",\"time\":\"2026-11-26T08:00:01.234Z\",\"logger\":\"controller\",\
                 \"message\":\"launched nodeclaim\",\"commit\":\"{COMMIT}\",\
                 \"controller\":\"nodeclaim.lifecycle\",\"controllerKind\":\"NodeClaim\",\
                 \"NodeClaim\":{{\"name\":\"a\"}}}}"
            )
        );
    }
}
