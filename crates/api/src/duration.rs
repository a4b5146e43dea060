//! Go-style durations as Karpenter's CRDs write them ("720h", "168h0m0s", "1m30s") and the
//! "Never" form of NillableDuration.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason}")]
pub struct DurationError {
    pub input: String,
    pub reason: &'static str,
}

/// Parses a Go duration with units h, m, s, ms, us/µs, ns (e.g. "720h", "1h30m", "0s", "1.5h")
/// into whole seconds rounded towards zero. Negative durations are rejected.
pub fn parse_go_duration(input: &str) -> Result<u64, DurationError> {
    let err = |reason| DurationError {
        input: input.to_string(),
        reason,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    if s == "0" {
        return Ok(0);
    }
    if s.starts_with('-') {
        return Err(err("must not be negative"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    // Accumulate nanoseconds as u128 to stay exact.
    let mut total_ns: u128 = 0;
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
        let number = &s[start..i];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(err("expected a number before each unit"));
        }
        let unit_start = i;
        while i < bytes.len() && !(bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
        let unit = &s[unit_start..i];
        let unit_ns: u128 = match unit {
            "h" => 3_600_000_000_000,
            "m" => 60_000_000_000,
            "s" => 1_000_000_000,
            "ms" => 1_000_000,
            "us" | "µs" | "μs" => 1_000,
            "ns" => 1,
            "" => return Err(err("missing unit (use h, m or s)")),
            _ => return Err(err("unknown unit (use h, m or s)")),
        };
        let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| err("number too large"))?
        };
        let mut value = whole
            .checked_mul(unit_ns)
            .ok_or_else(|| err("number too large"))?;
        let mut scale = unit_ns;
        for digit in frac.bytes().take(18) {
            scale /= 10;
            value += u128::from(digit - b'0') * scale;
        }
        total_ns = total_ns
            .checked_add(value)
            .ok_or_else(|| err("number too large"))?;
    }
    u64::try_from(total_ns / 1_000_000_000).map_err(|_| err("number too large"))
}

/// Formats whole seconds the way Go's `time.Duration.String()` does ("720h0m0s", "1m30s", "0s").
pub fn format_go_duration(seconds: u64) -> String {
    if seconds == 0 {
        return "0s".to_string();
    }
    let h = seconds / 3600;
    let m = (seconds % 3600) / 60;
    let s = seconds % 60;
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

/// A duration that may be "Never" (Karpenter's NillableDuration: expireAfter, consolidateAfter).
/// Kept as the user's text so round-trips are lossless; `seconds()` interprets it.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NillableDuration(pub String);

impl NillableDuration {
    pub const NEVER: &'static str = "Never";

    pub fn never() -> Self {
        Self(Self::NEVER.to_string())
    }

    pub fn from_seconds(seconds: u64) -> Self {
        Self(format_go_duration(seconds))
    }

    /// `Ok(None)` for "Never", `Ok(Some(seconds))` for a duration.
    pub fn seconds(&self) -> Result<Option<u64>, DurationError> {
        if self.0 == Self::NEVER {
            Ok(None)
        } else {
            parse_go_duration(&self.0).map(Some)
        }
    }

    pub fn is_never(&self) -> bool {
        self.0 == Self::NEVER
    }
}

impl fmt::Debug for NillableDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl fmt::Display for NillableDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for NillableDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for NillableDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Accept strings; numbers are kept as text so validation can name the field.
        let value = serde_json::Value::deserialize(deserializer)?;
        Ok(match value {
            serde_json::Value::String(s) => Self(s),
            other => Self(other.to_string()),
        })
    }
}

impl schemars::JsonSchema for NillableDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NillableDuration".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string" })
    }
    fn inline_schema() -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_go_duration("720h"), Ok(720 * 3600));
        assert_eq!(parse_go_duration("168h0m0s"), Ok(168 * 3600));
        assert_eq!(parse_go_duration("1m30s"), Ok(90));
        assert_eq!(parse_go_duration("1.5h"), Ok(5400));
        assert_eq!(parse_go_duration("0s"), Ok(0));
        assert_eq!(parse_go_duration("1500ms"), Ok(1));
    }

    #[test]
    fn rejects_bad_durations() {
        for bad in ["", "10", "h", "5d", "-1h", "1..5h", "abc"] {
            assert!(parse_go_duration(bad).is_err(), "{bad} should fail");
        }
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format_go_duration(720 * 3600), "720h0m0s");
        assert_eq!(format_go_duration(90), "1m30s");
        assert_eq!(format_go_duration(0), "0s");
        assert_eq!(parse_go_duration(&format_go_duration(12345)), Ok(12345));
    }

    #[test]
    fn nillable_never() {
        assert_eq!(NillableDuration::never().seconds(), Ok(None));
        assert_eq!(NillableDuration("2m".into()).seconds(), Ok(Some(120)));
        let parsed: NillableDuration = serde_json::from_str("\"Never\"").unwrap();
        assert!(parsed.is_never());
    }
}
