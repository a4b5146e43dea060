//! Durations as scenario files write them (`30s`, `10m`, `1h30m`) and as kubectl prints ages
//! (`45s`, `2m10s`, `5m`, `3h`, `2d`).

use std::time::Duration;

/// A duration string that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason} (expected e.g. 30s, 10m, 1h30m)")]
pub struct DurationError {
    pub input: String,
    pub reason: String,
}

/// Parses Go-style durations made of `<integer><unit>` parts, units `ms`, `s`, `m`, `h`, `d`.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let error = |reason: &str| DurationError {
        input: input.to_string(),
        reason: reason.to_string(),
    };
    let text = input.trim();
    if text.is_empty() {
        return Err(error("empty"));
    }
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(error("each part must start with a number"));
        }
        let (number, after) = rest.split_at(digits);
        let unit_len = after.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, next) = after.split_at(unit_len);
        let value: u64 = number.parse().map_err(|_| error("number too large"))?;
        let seconds_per_unit: Option<u64> = match unit {
            "ms" => None,
            "s" => Some(1),
            "m" => Some(60),
            "h" => Some(3600),
            "d" => Some(86_400),
            "" => return Err(error("missing unit")),
            _ => return Err(error(&format!("unknown unit {unit:?}"))),
        };
        let part = match seconds_per_unit {
            Some(s) => value
                .checked_mul(s)
                .map(Duration::from_secs)
                .ok_or_else(|| error("too large"))?,
            None => Duration::from_millis(value),
        };
        total = total.checked_add(part).ok_or_else(|| error("too large"))?;
        rest = next;
    }
    Ok(total)
}

/// Formats an age the way kubectl does: seconds below 2 minutes, minutes and seconds below 10
/// minutes, minutes below 3 hours, hours and minutes below 8 hours, hours below 2 days, days
/// and hours below 8 days, then days.
pub fn kubectl_age(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    let s = seconds.max(0);
    if s < 120 {
        return format!("{s}s");
    }
    let minutes = s / 60;
    if minutes < 10 {
        return match s % 60 {
            0 => format!("{minutes}m"),
            rem => format!("{minutes}m{rem}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = s / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            rem => format!("{hours}h{rem}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{days}d"),
            rem => format!("{days}d{rem}h"),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        return match days % 365 {
            0 => format!("{years}y"),
            rem => format!("{years}y{rem}d"),
        };
    }
    format!("{years}y")
}

/// A compact human duration for summaries: `45s`, `2m10s`, `1h05m00s`.
pub fn compact(seconds: i64) -> String {
    let s = seconds.max(0);
    match (s / 3600, (s / 60) % 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, sec) => format!("{m}m{sec:02}s"),
        (h, m, sec) => format!("{h}h{m:02}m{sec:02}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_compound_durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("2d").unwrap(), Duration::from_secs(172_800));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
    }

    #[test]
    fn rejects_bad_durations_with_the_reason() {
        assert!(parse_duration("").unwrap_err().reason.contains("empty"));
        assert!(parse_duration("10").unwrap_err().reason.contains("unit"));
        assert!(parse_duration("5w").unwrap_err().reason.contains("\"w\""));
        assert!(parse_duration("m5").is_err());
    }

    #[test]
    fn ages_match_kubectl() {
        assert_eq!(kubectl_age(45), "45s");
        assert_eq!(kubectl_age(119), "119s");
        assert_eq!(kubectl_age(130), "2m10s");
        assert_eq!(kubectl_age(300), "5m");
        assert_eq!(kubectl_age(61 * 60), "61m");
        assert_eq!(kubectl_age(3 * 3600), "3h");
        assert_eq!(kubectl_age(3 * 3600 + 15 * 60), "3h15m");
        assert_eq!(kubectl_age(20 * 3600), "20h");
        assert_eq!(kubectl_age(2 * 86_400), "2d");
        assert_eq!(kubectl_age(2 * 86_400 + 3 * 3600), "2d3h");
        assert_eq!(kubectl_age(30 * 86_400), "30d");
        assert_eq!(kubectl_age(-1), "0s");
        assert_eq!(kubectl_age(-5), "<invalid>");
    }

    #[test]
    fn compact_durations() {
        assert_eq!(compact(45), "45s");
        assert_eq!(compact(130), "2m10s");
        assert_eq!(compact(3900), "1h05m00s");
    }
}
