//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`) for the built-in kinds client-go's
//! typed clients send and read that the embedded cluster serves: request bodies decoded to the
//! JSON the API server stores, responses encoded when the client prefers protobuf.
//!
//! The wire form is kube-apiserver's: the magic `k8s\0`, then a `runtime.Unknown` whose
//! `typeMeta` names the kind and whose `raw` is the object's message (proto2, field numbers of
//! the `generated.proto` of `k8s.io/api` and `k8s.io/apimachinery`). Each kind is a table of its
//! fields ([`Schema`]); one table drives both directions. A kind without a table is answered as
//! kube-apiserver answers a custom resource in protobuf: 415 for a request body, JSON (or 406
//! when the client accepts nothing else) for a response. Encoding never drops data: an object
//! with a field its table does not know is answered in JSON.

use super::error::ApiError;
use super::protobuf::{Fields, Message, WireValue};
use base64::Engine as _;
use serde_json::{Map, Value};

/// The media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The four bytes every Kubernetes protobuf body starts with.
const MAGIC: &[u8; 4] = b"k8s\0";

/// How one field is written on the wire and in JSON.
#[derive(Debug, Clone, Copy)]
enum Ty {
    Str,
    Int64,
    Int32,
    Bool,
    /// `meta.v1.Time` {seconds, nanos}: RFC 3339 to the second in JSON.
    Time,
    /// `meta.v1.MicroTime`: RFC 3339 with microseconds in JSON.
    MicroTime,
    /// `meta.v1.FieldsV1` {raw}: the raw bytes are the JSON value.
    FieldsV1,
    /// `map<string, string>`.
    StrMap,
    /// `map<string, bytes>`: base64 values in JSON.
    BytesMap,
    Msg(&'static Schema),
}

/// One field of a message.
#[derive(Debug)]
struct Field {
    number: u32,
    json: &'static str,
    ty: Ty,
    repeated: bool,
    /// A pointer in Go (`*int64`, `*bool`): a zero value is present and kept. Other scalars
    /// equal to their zero value are left out of JSON, as Go's `omitempty` does.
    keep_zero: bool,
}

/// The fields of one message.
#[derive(Debug)]
pub struct Schema {
    fields: &'static [Field],
}

const fn f(number: u32, json: &'static str, ty: Ty) -> Field {
    Field {
        number,
        json,
        ty,
        repeated: false,
        keep_zero: false,
    }
}

const fn list(number: u32, json: &'static str, ty: Ty) -> Field {
    Field {
        number,
        json,
        ty,
        repeated: true,
        keep_zero: false,
    }
}

const fn ptr(number: u32, json: &'static str, ty: Ty) -> Field {
    Field {
        number,
        json,
        ty,
        repeated: false,
        keep_zero: true,
    }
}

// --- k8s.io/apimachinery/pkg/apis/meta/v1 and pkg/runtime

static TYPE_META: Schema = Schema {
    fields: &[f(1, "apiVersion", Ty::Str), f(2, "kind", Ty::Str)],
};

static OWNER_REFERENCE: Schema = Schema {
    fields: &[
        f(1, "kind", Ty::Str),
        f(3, "name", Ty::Str),
        f(4, "uid", Ty::Str),
        f(5, "apiVersion", Ty::Str),
        ptr(6, "controller", Ty::Bool),
        ptr(7, "blockOwnerDeletion", Ty::Bool),
    ],
};

static MANAGED_FIELDS_ENTRY: Schema = Schema {
    fields: &[
        f(1, "manager", Ty::Str),
        f(2, "operation", Ty::Str),
        f(3, "apiVersion", Ty::Str),
        f(4, "time", Ty::Time),
        f(6, "fieldsType", Ty::Str),
        f(7, "fieldsV1", Ty::FieldsV1),
        f(8, "subresource", Ty::Str),
    ],
};

static OBJECT_META: Schema = Schema {
    fields: &[
        f(1, "name", Ty::Str),
        f(2, "generateName", Ty::Str),
        f(3, "namespace", Ty::Str),
        f(4, "selfLink", Ty::Str),
        f(5, "uid", Ty::Str),
        f(6, "resourceVersion", Ty::Str),
        f(7, "generation", Ty::Int64),
        f(8, "creationTimestamp", Ty::Time),
        f(9, "deletionTimestamp", Ty::Time),
        ptr(10, "deletionGracePeriodSeconds", Ty::Int64),
        f(11, "labels", Ty::StrMap),
        f(12, "annotations", Ty::StrMap),
        list(13, "ownerReferences", Ty::Msg(&OWNER_REFERENCE)),
        list(14, "finalizers", Ty::Str),
        list(17, "managedFields", Ty::Msg(&MANAGED_FIELDS_ENTRY)),
    ],
};

static LIST_META: Schema = Schema {
    fields: &[
        f(1, "selfLink", Ty::Str),
        f(2, "resourceVersion", Ty::Str),
        f(3, "continue", Ty::Str),
        ptr(4, "remainingItemCount", Ty::Int64),
    ],
};

static STATUS_CAUSE: Schema = Schema {
    fields: &[
        f(1, "reason", Ty::Str),
        f(2, "message", Ty::Str),
        f(3, "field", Ty::Str),
    ],
};

static STATUS_DETAILS: Schema = Schema {
    fields: &[
        f(1, "name", Ty::Str),
        f(2, "group", Ty::Str),
        f(3, "kind", Ty::Str),
        list(4, "causes", Ty::Msg(&STATUS_CAUSE)),
        f(5, "retryAfterSeconds", Ty::Int32),
        f(6, "uid", Ty::Str),
    ],
};

static STATUS: Schema = Schema {
    fields: &[
        f(1, "metadata", Ty::Msg(&LIST_META)),
        f(2, "status", Ty::Str),
        f(3, "message", Ty::Str),
        f(4, "reason", Ty::Str),
        f(5, "details", Ty::Msg(&STATUS_DETAILS)),
        f(6, "code", Ty::Int32),
    ],
};

static PRECONDITIONS: Schema = Schema {
    fields: &[ptr(1, "uid", Ty::Str), ptr(2, "resourceVersion", Ty::Str)],
};

static DELETE_OPTIONS: Schema = Schema {
    fields: &[
        ptr(1, "gracePeriodSeconds", Ty::Int64),
        f(2, "preconditions", Ty::Msg(&PRECONDITIONS)),
        ptr(3, "orphanDependents", Ty::Bool),
        ptr(4, "propagationPolicy", Ty::Str),
        list(5, "dryRun", Ty::Str),
        ptr(
            6,
            "ignoreStoreReadErrorWithClusterBreakingPotential",
            Ty::Bool,
        ),
    ],
};

// --- k8s.io/api/core/v1

static SECRET: Schema = Schema {
    fields: &[
        f(1, "metadata", Ty::Msg(&OBJECT_META)),
        f(2, "data", Ty::BytesMap),
        f(3, "type", Ty::Str),
        f(4, "stringData", Ty::StrMap),
        ptr(5, "immutable", Ty::Bool),
    ],
};

static CONFIG_MAP: Schema = Schema {
    fields: &[
        f(1, "metadata", Ty::Msg(&OBJECT_META)),
        f(2, "data", Ty::StrMap),
        f(3, "binaryData", Ty::BytesMap),
        ptr(4, "immutable", Ty::Bool),
    ],
};

static NAMESPACE_SPEC: Schema = Schema {
    fields: &[list(1, "finalizers", Ty::Str)],
};

static NAMESPACE_CONDITION: Schema = Schema {
    fields: &[
        f(1, "type", Ty::Str),
        f(2, "status", Ty::Str),
        f(4, "lastTransitionTime", Ty::Time),
        f(5, "reason", Ty::Str),
        f(6, "message", Ty::Str),
    ],
};

static NAMESPACE_STATUS: Schema = Schema {
    fields: &[
        f(1, "phase", Ty::Str),
        list(2, "conditions", Ty::Msg(&NAMESPACE_CONDITION)),
    ],
};

static NAMESPACE: Schema = Schema {
    fields: &[
        f(1, "metadata", Ty::Msg(&OBJECT_META)),
        f(2, "spec", Ty::Msg(&NAMESPACE_SPEC)),
        f(3, "status", Ty::Msg(&NAMESPACE_STATUS)),
    ],
};

static OBJECT_REFERENCE: Schema = Schema {
    fields: &[
        f(1, "kind", Ty::Str),
        f(2, "namespace", Ty::Str),
        f(3, "name", Ty::Str),
        f(4, "uid", Ty::Str),
        f(5, "apiVersion", Ty::Str),
        f(6, "resourceVersion", Ty::Str),
        f(7, "fieldPath", Ty::Str),
    ],
};

static BINDING: Schema = Schema {
    fields: &[
        f(1, "metadata", Ty::Msg(&OBJECT_META)),
        f(2, "target", Ty::Msg(&OBJECT_REFERENCE)),
    ],
};

// --- k8s.io/api/policy/v1, autoscaling/v1, coordination/v1

static EVICTION: Schema = Schema {
    fields: &[
        f(1, "metadata", Ty::Msg(&OBJECT_META)),
        f(2, "deleteOptions", Ty::Msg(&DELETE_OPTIONS)),
    ],
};

static SCALE_SPEC: Schema = Schema {
    fields: &[f(1, "replicas", Ty::Int32)],
};

static SCALE_STATUS: Schema = Schema {
    fields: &[ptr(1, "replicas", Ty::Int32), f(2, "selector", Ty::Str)],
};

static SCALE: Schema = Schema {
    fields: &[
        f(1, "metadata", Ty::Msg(&OBJECT_META)),
        f(2, "spec", Ty::Msg(&SCALE_SPEC)),
        f(3, "status", Ty::Msg(&SCALE_STATUS)),
    ],
};

static LEASE_SPEC: Schema = Schema {
    fields: &[
        ptr(1, "holderIdentity", Ty::Str),
        ptr(2, "leaseDurationSeconds", Ty::Int32),
        f(3, "acquireTime", Ty::MicroTime),
        f(4, "renewTime", Ty::MicroTime),
        ptr(5, "leaseTransitions", Ty::Int32),
        ptr(6, "strategy", Ty::Str),
        ptr(7, "preferredHolder", Ty::Str),
    ],
};

static LEASE: Schema = Schema {
    fields: &[
        f(1, "metadata", Ty::Msg(&OBJECT_META)),
        f(2, "spec", Ty::Msg(&LEASE_SPEC)),
    ],
};

// List kinds: `{metadata: ListMeta, items: [T]}`.
static SECRET_LIST: Schema = Schema {
    fields: &[
        f(1, "metadata", Ty::Msg(&LIST_META)),
        list(2, "items", Ty::Msg(&SECRET)),
    ],
};
static CONFIG_MAP_LIST: Schema = Schema {
    fields: &[
        f(1, "metadata", Ty::Msg(&LIST_META)),
        list(2, "items", Ty::Msg(&CONFIG_MAP)),
    ],
};
static NAMESPACE_LIST: Schema = Schema {
    fields: &[
        f(1, "metadata", Ty::Msg(&LIST_META)),
        list(2, "items", Ty::Msg(&NAMESPACE)),
    ],
};
static LEASE_LIST: Schema = Schema {
    fields: &[
        f(1, "metadata", Ty::Msg(&LIST_META)),
        list(2, "items", Ty::Msg(&LEASE)),
    ],
};

/// The kinds spoken in protobuf: (apiVersion, kind, table). `DeleteOptions` arrives with either
/// apiVersion, as client-go sends it.
static KINDS: &[(&str, &str, &Schema)] = &[
    ("v1", "Secret", &SECRET),
    ("v1", "SecretList", &SECRET_LIST),
    ("v1", "ConfigMap", &CONFIG_MAP),
    ("v1", "ConfigMapList", &CONFIG_MAP_LIST),
    ("v1", "Namespace", &NAMESPACE),
    ("v1", "NamespaceList", &NAMESPACE_LIST),
    ("v1", "Binding", &BINDING),
    ("v1", "Status", &STATUS),
    ("v1", "DeleteOptions", &DELETE_OPTIONS),
    ("meta.k8s.io/v1", "DeleteOptions", &DELETE_OPTIONS),
    ("policy/v1", "Eviction", &EVICTION),
    ("autoscaling/v1", "Scale", &SCALE),
    ("coordination.k8s.io/v1", "Lease", &LEASE),
    ("coordination.k8s.io/v1", "LeaseList", &LEASE_LIST),
];

fn schema_of(api_version: &str, kind: &str) -> Option<&'static Schema> {
    KINDS
        .iter()
        .find(|(v, k, _)| *v == api_version && *k == kind)
        .map(|(_, _, schema)| *schema)
}

/// The kinds spoken in protobuf, `apiVersion/Kind` (for docs and errors).
pub fn supported_kinds() -> impl Iterator<Item = String> {
    KINDS.iter().map(|(v, k, _)| format!("{v}/{k}"))
}

// ---------------------------------------------------------------------------------------------
// Decoding: request bodies

fn unsupported(message: String) -> ApiError {
    ApiError::unsupported_media_type(message)
}

fn malformed(message: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!(
        "the request body is not a valid {MEDIA_TYPE} object: {message}"
    ))
}

/// Decode a protobuf request body to the object's JSON (with `apiVersion` and `kind`).
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let envelope = body
        .strip_prefix(MAGIC.as_slice())
        .ok_or_else(|| malformed("it does not start with the k8s\\0 prefix"))?;
    let mut type_meta = None;
    let mut raw: &[u8] = &[];
    for field in Fields::new(envelope) {
        match field.map_err(malformed)? {
            (1, WireValue::Bytes(bytes)) => type_meta = Some(decode_message(bytes, &TYPE_META)?),
            (2, WireValue::Bytes(bytes)) => raw = bytes,
            (3, WireValue::Bytes(encoding)) if !encoding.is_empty() => {
                return Err(unsupported(format!(
                    "content encoding {:?} is not supported",
                    String::from_utf8_lossy(encoding)
                )));
            }
            _ => {}
        }
    }
    let type_meta = type_meta.unwrap_or_default();
    let text = |key: &str| {
        type_meta
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let schema = schema_of(&api_version, &kind).ok_or_else(|| {
        unsupported(format!(
            "the body of the request was in an unknown format - {kind} {api_version} is not \
             served in {MEDIA_TYPE} here; accepted media types include: application/json, \
             application/yaml"
        ))
    })?;
    let mut object = decode_message(raw, schema)?;
    object.insert("apiVersion".into(), Value::String(api_version));
    object.insert("kind".into(), Value::String(kind));
    Ok(Value::Object(object))
}

fn decode_message(bytes: &[u8], schema: &Schema) -> Result<Map<String, Value>, ApiError> {
    let mut object = Map::new();
    for field in Fields::new(bytes) {
        let (number, value) = field.map_err(malformed)?;
        // Fields this table does not know are skipped, as protobuf readers do.
        let Some(spec) = schema.fields.iter().find(|f| f.number == number) else {
            continue;
        };
        if let (Ty::StrMap | Ty::BytesMap, WireValue::Bytes(entry)) = (spec.ty, value) {
            let (key, value) = decode_map_entry(entry, spec)?;
            let map = object
                .entry(spec.json)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(map) = map {
                map.insert(key, value);
            }
            continue;
        }
        let decoded = decode_value(value, spec)?;
        if spec.repeated {
            let items = object
                .entry(spec.json)
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(items) = items {
                items.push(decoded);
            }
        } else if spec.keep_zero || !is_zero(&decoded) {
            object.insert(spec.json.to_string(), decoded);
        } else {
            object.remove(spec.json);
        }
    }
    Ok(object)
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        _ => false,
    }
}

fn decode_map_entry(entry: &[u8], spec: &Field) -> Result<(String, Value), ApiError> {
    let mut key = String::new();
    let mut value = Value::String(String::new());
    for field in Fields::new(entry) {
        match field.map_err(malformed)? {
            (1, WireValue::Bytes(bytes)) => key = utf8(bytes, spec)?,
            (2, WireValue::Bytes(bytes)) => {
                value = Value::String(match spec.ty {
                    Ty::BytesMap => base64::engine::general_purpose::STANDARD.encode(bytes),
                    _ => utf8(bytes, spec)?,
                });
            }
            _ => {}
        }
    }
    Ok((key, value))
}

fn utf8(bytes: &[u8], spec: &Field) -> Result<String, ApiError> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| malformed(format!("field {} is not UTF-8", spec.json)))
}

fn wrong_wire(spec: &Field) -> ApiError {
    malformed(format!("field {} has the wrong wire type", spec.json))
}

fn decode_value(value: WireValue<'_>, spec: &Field) -> Result<Value, ApiError> {
    Ok(match (spec.ty, value) {
        (Ty::Str, WireValue::Bytes(bytes)) => Value::String(utf8(bytes, spec)?),
        // int64 and int32 are two's complement in a varint: reinterpreting the bits is the
        // decoding.
        (Ty::Int64, WireValue::Varint(v)) => Value::from(v as i64),
        (Ty::Int32, WireValue::Varint(v)) => Value::from(v as i64 as i32),
        (Ty::Bool, WireValue::Varint(v)) => Value::Bool(v != 0),
        (Ty::Time | Ty::MicroTime, WireValue::Bytes(bytes)) => decode_time(bytes, spec)?,
        (Ty::FieldsV1, WireValue::Bytes(bytes)) => {
            let mut raw: &[u8] = &[];
            for field in Fields::new(bytes) {
                if let (1, WireValue::Bytes(r)) = field.map_err(malformed)? {
                    raw = r;
                }
            }
            if raw.is_empty() {
                Value::Object(Map::new())
            } else {
                serde_json::from_slice(raw).map_err(|e| {
                    malformed(format!("field {} does not hold JSON: {e}", spec.json))
                })?
            }
        }
        (Ty::Msg(schema), WireValue::Bytes(bytes)) => Value::Object(decode_message(bytes, schema)?),
        _ => return Err(wrong_wire(spec)),
    })
}

fn decode_time(bytes: &[u8], spec: &Field) -> Result<Value, ApiError> {
    let (mut seconds, mut nanos) = (0i64, 0i32);
    for field in Fields::new(bytes) {
        match field.map_err(malformed)? {
            (1, WireValue::Varint(v)) => seconds = v as i64,
            (2, WireValue::Varint(v)) => nanos = v as i64 as i32,
            _ => {}
        }
    }
    if seconds == 0 && nanos == 0 {
        return Ok(Value::Null);
    }
    let time = jiff::Timestamp::new(seconds, nanos)
        .map_err(|e| malformed(format!("field {} is out of range: {e}", spec.json)))?;
    Ok(Value::String(match spec.ty {
        Ty::MicroTime => format!("{time:.6}"),
        _ => jiff::Timestamp::from_second(time.as_second())
            .unwrap_or(time)
            .to_string(),
    }))
}

// ---------------------------------------------------------------------------------------------
// Encoding: responses

/// Encode an object (with `apiVersion` and `kind`) as kube-apiserver writes it, or None when its
/// kind has no table or it holds a field its table does not know.
pub fn encode(object: &Value) -> Option<Vec<u8>> {
    let api_version = object.get("apiVersion")?.as_str()?;
    let kind = object.get("kind")?.as_str()?;
    let schema = schema_of(api_version, kind)?;
    let raw = encode_message(object, schema)?;
    let type_meta = Message::new()
        .string(1, api_version)
        .string(2, kind)
        .into_bytes();
    let envelope = Message::new()
        .bytes(1, &type_meta)
        .bytes(2, &raw.into_bytes())
        .bytes(3, b"")
        .bytes(4, b"");
    let mut body = MAGIC.to_vec();
    body.extend(envelope.into_bytes());
    Some(body)
}

fn encode_message(value: &Value, schema: &Schema) -> Option<Message> {
    let object = value.as_object()?;
    // Every field must be known: an unknown one would be lost. An object's own `apiVersion` and
    // `kind` (also on list items) are the envelope's, not the message's.
    let known = |key: &str| schema.fields.iter().any(|f| f.json == key);
    if object
        .keys()
        .any(|key| !known(key) && key != "apiVersion" && key != "kind")
    {
        return None;
    }
    let mut message = Message::new();
    for spec in schema.fields {
        let Some(value) = object.get(spec.json).filter(|v| !v.is_null()) else {
            continue;
        };
        message = match spec.ty {
            Ty::StrMap | Ty::BytesMap => {
                // Sorted keys, as Go's generated marshalers write maps.
                for (key, entry) in value.as_object()? {
                    let bytes = match spec.ty {
                        Ty::BytesMap => base64::engine::general_purpose::STANDARD
                            .decode(entry.as_str()?)
                            .ok()?,
                        _ => entry.as_str()?.as_bytes().to_vec(),
                    };
                    let entry = Message::new().bytes(1, key.as_bytes()).bytes(2, &bytes);
                    message = message.message(spec.number, entry);
                }
                message
            }
            _ if spec.repeated => {
                for item in value.as_array()? {
                    message = encode_value(message, item, spec)?;
                }
                message
            }
            _ => encode_value(message, value, spec)?,
        };
    }
    Some(message)
}

fn encode_value(message: Message, value: &Value, spec: &Field) -> Option<Message> {
    Some(match spec.ty {
        Ty::Str => message.bytes(spec.number, value.as_str()?.as_bytes()),
        Ty::Int64 => message.varint(spec.number, value.as_i64()? as u64),
        Ty::Int32 => message.varint(
            spec.number,
            i64::from(i32::try_from(value.as_i64()?).ok()?) as u64,
        ),
        Ty::Bool => message.varint(spec.number, u64::from(value.as_bool()?)),
        Ty::Time | Ty::MicroTime => {
            let time: jiff::Timestamp = value.as_str()?.parse().ok()?;
            let mut inner = Message::new().varint(1, time.as_second() as u64);
            if matches!(spec.ty, Ty::MicroTime) || time.subsec_nanosecond() != 0 {
                inner = inner.varint(2, i64::from(time.subsec_nanosecond()) as u64);
            }
            message.message(spec.number, inner)
        }
        Ty::FieldsV1 => {
            let raw = serde_json::to_vec(value).ok()?;
            message.message(spec.number, Message::new().bytes(1, &raw))
        }
        Ty::Msg(schema) => message.message(spec.number, encode_message(value, schema)?),
        Ty::StrMap | Ty::BytesMap => return None,
    })
}

// ---------------------------------------------------------------------------------------------
// Content negotiation

/// What to answer in, from the request's Accept header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// JSON (also when the header is empty or names anything JSON can serve).
    Json,
    /// Protobuf first, JSON acceptable if the object cannot be encoded.
    ProtobufOrJson,
    /// Protobuf only: 406 if the object cannot be encoded.
    ProtobufOnly,
}

/// Read an Accept header as kube-apiserver's negotiation does: media ranges by descending
/// quality (ties in the order given); a range with parameters such as `as=Table` asks for a
/// different shape and is left to the handlers.
pub fn negotiate(accept: &str) -> Answer {
    let mut ranges: Vec<(f32, usize, &str, bool)> = Vec::new();
    for (index, range) in accept.split(',').enumerate() {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        let mut quality = 1.0f32;
        let mut shaped = false;
        for parameter in parts {
            match parameter.split_once('=') {
                Some(("q", q)) => quality = q.trim().parse().unwrap_or(0.0),
                Some(_) => shaped = true,
                None => {}
            }
        }
        if !media.is_empty() && quality > 0.0 {
            ranges.push((quality, index, media, shaped));
        }
    }
    ranges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let Some(first) = ranges.first() else {
        return Answer::Json;
    };
    if first.2 != MEDIA_TYPE || first.3 {
        return Answer::Json;
    }
    let json_too = ranges.iter().any(|(_, _, media, _)| {
        matches!(
            *media,
            "application/json" | "application/*" | "*/*" | "application/yaml"
        )
    });
    if json_too {
        Answer::ProtobufOrJson
    } else {
        Answer::ProtobufOnly
    }
}

/// 406, as kube-apiserver answers a client that accepts only what it cannot write.
pub fn not_acceptable(object: &Value) -> ApiError {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("object");
    ApiError::not_acceptable(format!(
        "only the following media types are accepted: application/json, application/yaml \
             ({kind} is not served in {MEDIA_TYPE} here)"
    ))
}

/// The kinds with a table, for tests.
#[cfg(test)]
fn all_kinds() -> impl Iterator<Item = (&'static str, &'static str)> {
    KINDS.iter().map(|(v, k, _)| (*v, *k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(object: Value) -> Value {
        let bytes = encode(&object).unwrap_or_else(|| panic!("encodes: {object}"));
        decode(&bytes).unwrap()
    }

    #[test]
    fn a_secret_survives_the_round_trip() {
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {
                "name": "sh.helm.release.v1.tiny.v1", "namespace": "default",
                "uid": "0d0c", "resourceVersion": "12", "generation": 2,
                "creationTimestamp": "2026-11-26T16:00:00Z",
                "labels": {"owner": "helm", "name": "tiny"},
                "annotations": {"a": ""},
                "finalizers": ["x/y"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "controller": false}],
                "managedFields": [{"manager": "helm", "operation": "Update", "apiVersion": "v1",
                    "time": "2026-11-26T16:00:00Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {".": {}}}}]
            },
            "type": "helm.sh/release.v1",
            "data": {"release": "aGVsbG8=", "empty": ""},
            "immutable": false
        });
        assert_eq!(round_trip(secret.clone()), secret);
    }

    #[test]
    fn a_lease_keeps_microsecond_times_and_pointer_zeros() {
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "l", "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": "n", "leaseDurationSeconds": 40,
                "renewTime": "2026-11-26T16:00:00.123456Z", "leaseTransitions": 0}
        });
        assert_eq!(round_trip(lease.clone()), lease);
    }

    #[test]
    fn lists_and_statuses_round_trip() {
        let mut list = json!({
            "apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "7", "continue": "abc", "remainingItemCount": 0},
            "items": [{"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "namespace": "n"}, "data": {"k": "v"},
                "binaryData": {"b": "AAE="}}]
        });
        let decoded = round_trip(list.clone());
        // Items carry no TypeMeta in protobuf, as in kube-apiserver's lists.
        for key in ["apiVersion", "kind"] {
            list["items"][0].as_object_mut().unwrap().remove(key);
        }
        assert_eq!(decoded, list);
        let status = json!({
            "apiVersion": "v1", "kind": "Status", "metadata": {},
            "status": "Failure", "message": "nope", "reason": "Invalid", "code": 422,
            "details": {"name": "a", "kind": "secrets", "causes": [{"reason": "FieldValueInvalid", "field": "data"}]}
        });
        assert_eq!(round_trip(status.clone()), status);
    }

    #[test]
    fn delete_options_keep_a_zero_grace_period() {
        let options = json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions",
            "gracePeriodSeconds": 0, "propagationPolicy": "Background", "dryRun": ["All"],
            "preconditions": {"uid": "u"}
        });
        assert_eq!(round_trip(options.clone()), options);
    }

    /// client-go writes every non-pointer string of ObjectMeta, empty or not, and a zero Time
    /// as an empty message: JSON has none of them (Go's `omitempty`, `null` times).
    #[test]
    fn empty_proto2_fields_are_absent_in_json() {
        let meta = Message::new()
            .bytes(1, b"cm")
            .bytes(2, b"")
            .bytes(3, b"")
            .varint(7, 0)
            .message(8, Message::new());
        let cm = Message::new().message(1, meta);
        let type_meta = Message::new().string(1, "v1").string(2, "ConfigMap");
        let mut body = MAGIC.to_vec();
        body.extend(
            Message::new()
                .message(1, type_meta)
                .bytes(2, &cm.into_bytes())
                .into_bytes(),
        );
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})
        );
    }

    #[test]
    fn a_kind_without_a_table_is_415_and_garbage_is_400() {
        let type_meta = Message::new().string(1, "v1").string(2, "Pod");
        let mut pod = MAGIC.to_vec();
        pod.extend(Message::new().message(1, type_meta).into_bytes());
        let error = decode(&pod).unwrap_err();
        assert_eq!(error.code, 415, "{error:?}");
        assert!(error.message.contains("Pod v1"), "{}", error.message);

        for garbage in [&b"{\"kind\":\"Secret\"}"[..], b"k8s\0\x0a\x05ab", b""] {
            let error = decode(garbage).unwrap_err();
            assert_eq!(error.code, 400, "{garbage:?}: {error:?}");
        }
    }

    #[test]
    fn an_object_with_an_unknown_field_is_not_encoded() {
        let secret =
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "newField": 1});
        assert_eq!(encode(&secret), None);
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        assert_eq!(encode(&pod), None);
    }

    #[test]
    fn every_kind_encodes_its_empty_object() {
        for (api_version, kind) in all_kinds() {
            let object = json!({"apiVersion": api_version, "kind": kind});
            assert_eq!(round_trip(object.clone()), object, "{kind}");
        }
    }

    #[test]
    fn negotiation_follows_order_and_quality() {
        assert_eq!(negotiate(""), Answer::Json);
        assert_eq!(negotiate("application/json, */*"), Answer::Json);
        assert_eq!(
            negotiate("application/vnd.kubernetes.protobuf,application/json"),
            Answer::ProtobufOrJson
        );
        assert_eq!(
            negotiate("application/vnd.kubernetes.protobuf"),
            Answer::ProtobufOnly
        );
        assert_eq!(
            negotiate("application/vnd.kubernetes.protobuf;q=0.5, application/json"),
            Answer::Json
        );
        assert_eq!(
            negotiate(
                "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json"
            ),
            Answer::Json
        );
    }
}
