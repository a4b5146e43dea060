//! Events are one kind with two views, as in kube-apiserver: an Event written through
//! `events.k8s.io/v1` is served by core `v1` too (so `kubectl get events` and `kubectl describe`
//! show it), and the other way round. Each write is stored under both views, converted field by
//! field as Kubernetes converts them (`note` is `message`, `regarding` is `involvedObject`, …).

use serde_json::{Map, Value, json};

use super::resources::ResourceKey;

/// (events.k8s.io/v1 field, core/v1 field) pairs that only change name.
const RENAMED: &[(&str, &str)] = &[
    ("note", "message"),
    ("regarding", "involvedObject"),
    ("related", "related"),
    ("reason", "reason"),
    ("type", "type"),
    ("action", "action"),
    ("eventTime", "eventTime"),
    ("series", "series"),
    ("reportingController", "reportingComponent"),
    ("reportingInstance", "reportingInstance"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn core_key() -> ResourceKey {
    ResourceKey::new("", "events")
}

fn events_key() -> ResourceKey {
    ResourceKey::new("events.k8s.io", "events")
}

/// The other view of `key`, if it is one of the two Event resources.
pub fn other_view(key: &ResourceKey) -> Option<ResourceKey> {
    if *key == core_key() {
        Some(events_key())
    } else if *key == events_key() {
        Some(core_key())
    } else {
        None
    }
}

/// `event` (stored under `key`) as the other view stores it.
pub fn convert(key: &ResourceKey, event: &Value) -> Value {
    let to_core = *key == events_key();
    let mut out = Map::new();
    if let Some(metadata) = event.get("metadata") {
        let mut metadata = metadata.clone();
        if let Some(map) = metadata.as_object_mut() {
            map.remove("resourceVersion");
        }
        out.insert("metadata".into(), metadata);
    }
    for (events_field, core_field) in RENAMED {
        let (from, to) = if to_core {
            (events_field, core_field)
        } else {
            (core_field, events_field)
        };
        if let Some(value) = event.get(*from) {
            out.insert((*to).to_string(), value.clone());
        }
    }
    let (api_version, kind) = if to_core {
        ("v1", "Event")
    } else {
        ("events.k8s.io/v1", "Event")
    };
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!(kind));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Value {
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
               "metadata": {"name": "nc.1", "namespace": "default", "resourceVersion": "7", "uid": "u"},
               "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "karpenter", "reportingInstance": "driftwood-0",
               "action": "Disrupting", "reason": "DisruptionBlocked", "note": "pdb web prevents eviction", "type": "Normal",
               "regarding": {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": "nc", "uid": "nc-uid"},
               "deprecatedCount": 2})
    }

    #[test]
    fn an_events_v1_event_reads_as_a_core_event() {
        let core = convert(&events_key(), &event());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["message"], "pdb web prevents eviction");
        assert_eq!(core["involvedObject"]["kind"], "NodeClaim");
        assert_eq!(core["reportingComponent"], "karpenter");
        assert_eq!(core["count"], 2);
        assert!(core["metadata"].get("resourceVersion").is_none());
        assert_eq!(core["metadata"]["uid"], "u");
    }

    #[test]
    fn the_two_conversions_are_inverse() {
        let mut original = event();
        original["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        let back = convert(&core_key(), &convert(&events_key(), &original));
        assert_eq!(back, original);
        assert_eq!(other_view(&core_key()), Some(events_key()));
        assert_eq!(other_view(&ResourceKey::new("", "pods")), None);
    }
}
