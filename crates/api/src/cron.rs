//! Five-field cron schedules (minute hour day-of-month month day-of-week) and the @-macros, as
//! used by NodePool disruption budgets. Times are UTC seconds since the Unix epoch.

use std::fmt;

/// Why a cron expression was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cron schedule {input:?}: {reason}")]
pub struct CronError {
    pub input: String,
    pub reason: String,
}

/// A schedule's window at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowAt {
    Open { closes_at: i64 },
    Closed { opens_at: Option<i64> },
}

/// A parsed schedule: one bit per allowed value of each field.
#[derive(Clone, PartialEq, Eq)]
pub struct CronSchedule {
    source: String,
    minutes: u64,
    hours: u32,
    days_of_month: u32,
    months: u16,
    days_of_week: u8,
    /// Day-of-month was `*` or `?` (then only day-of-week restricts the day, and vice versa).
    dom_star: bool,
    dow_star: bool,
}

impl fmt::Debug for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CronSchedule({:?})", self.source)
    }
}

impl fmt::Display for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

const MONTH_NAMES: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTE: FieldSpec = FieldSpec {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: FieldSpec = FieldSpec {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
};
const DOM: FieldSpec = FieldSpec {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: FieldSpec = FieldSpec {
    name: "month",
    min: 1,
    max: 12,
    names: &MONTH_NAMES,
};
// 7 is accepted as Sunday and folded onto 0.
const DOW: FieldSpec = FieldSpec {
    name: "day-of-week",
    min: 0,
    max: 7,
    names: &DAY_NAMES,
};

impl CronSchedule {
    /// Parses a 5-field expression or one of @yearly, @annually, @monthly, @weekly, @daily,
    /// @midnight, @hourly. Fields accept `*`, `?` (day fields), values, names (JAN, MON),
    /// ranges `a-b`, steps `*/n`, `a-b/n`, `a/n`, and comma lists.
    pub fn parse(input: &str) -> Result<Self, CronError> {
        let err = |reason: String| CronError {
            input: input.to_string(),
            reason,
        };
        let trimmed = input.trim();
        let expanded = match trimmed {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other if other.starts_with('@') => {
                return Err(err(format!(
                    "unknown macro {other:?} (use @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)"
                )));
            }
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(err(format!(
                "expected 5 fields (minute hour day-of-month month day-of-week), found {}",
                fields.len()
            )));
        }
        let (minutes, _) = parse_field(fields[0], &MINUTE).map_err(err)?;
        let (hours, _) = parse_field(fields[1], &HOUR).map_err(err)?;
        let (dom, dom_star) = parse_field(fields[2], &DOM).map_err(err)?;
        let (months, _) = parse_field(fields[3], &MONTH).map_err(err)?;
        let (mut dow, dow_star) = parse_field(fields[4], &DOW).map_err(err)?;
        if dow & (1 << 7) != 0 {
            dow = (dow & !(1 << 7)) | 1;
        }
        Ok(Self {
            source: trimmed.to_string(),
            minutes,
            hours: hours as u32,
            days_of_month: dom as u32,
            months: months as u16,
            days_of_week: dow as u8,
            dom_star,
            dow_star,
        })
    }

    /// Whether the window that opens at each firing and stays open `duration` seconds is open
    /// at `t`: open until when, or closed until when (None: it never opens again).
    pub fn window_at(&self, duration: i64, t: i64) -> WindowAt {
        match self.previous_at_or_before(t) {
            Some(start) if t < start.saturating_add(duration) => WindowAt::Open {
                closes_at: start.saturating_add(duration),
            },
            _ => WindowAt::Closed {
                opens_at: self.next_after(t),
            },
        }
    }

    /// The most recent time at or before `t` (UTC seconds) when the schedule fires, if any within
    /// the last 30 years.
    pub fn previous_at_or_before(&self, t: i64) -> Option<i64> {
        let t_min = t.div_euclid(60);
        let first_day = t_min.div_euclid(1440);
        let first_limit = t_min.rem_euclid(1440) as u32;
        (0..366 * 30).find_map(|back| {
            let day = first_day - back;
            let limit = if back == 0 { first_limit } else { 1439 };
            let minute_of_day = self
                .day_matches(day)
                .then(|| self.latest_minute_at_or_before(limit))
                .flatten()?;
            Some((day * 1440 + i64::from(minute_of_day)) * 60)
        })
    }

    /// The first time strictly after `t` (UTC seconds) when the schedule fires, if any within
    /// the next 30 years.
    pub fn next_after(&self, t: i64) -> Option<i64> {
        let t_min = t.div_euclid(60) + 1;
        let first_day = t_min.div_euclid(1440);
        let first_from = t_min.rem_euclid(1440) as u32;
        (0..366 * 30).find_map(|ahead| {
            let day = first_day + ahead;
            let from = if ahead == 0 { first_from } else { 0 };
            let minute_of_day = self
                .day_matches(day)
                .then(|| self.earliest_minute_at_or_after(from))
                .flatten()?;
            Some((day * 1440 + i64::from(minute_of_day)) * 60)
        })
    }

    fn day_matches(&self, day: i64) -> bool {
        let (_, month, dom) = civil_from_days(day);
        if self.months & (1 << month) == 0 {
            return false;
        }
        // 1970-01-01 was a Thursday (4).
        let dow = (day + 4).rem_euclid(7) as u32;
        let dom_ok = self.days_of_month & (1 << dom) != 0;
        let dow_ok = self.days_of_week & (1 << dow) != 0;
        if self.dom_star || self.dow_star {
            dom_ok && dow_ok
        } else {
            dom_ok || dow_ok
        }
    }

    fn latest_minute_at_or_before(&self, limit: u32) -> Option<u32> {
        (0..=limit / 60)
            .rev()
            .filter(|h| self.hours & (1 << h) != 0)
            .find_map(|h| {
                let max_minute = if h == limit / 60 { limit % 60 } else { 59 };
                (0..=max_minute)
                    .rev()
                    .find(|m| self.minutes & (1 << m) != 0)
                    .map(|m| h * 60 + m)
            })
    }

    fn earliest_minute_at_or_after(&self, from: u32) -> Option<u32> {
        (from / 60..24)
            .filter(|h| self.hours & (1 << h) != 0)
            .find_map(|h| {
                let min_minute = if h == from / 60 { from % 60 } else { 0 };
                (min_minute..60)
                    .find(|m| self.minutes & (1 << m) != 0)
                    .map(|m| h * 60 + m)
            })
    }
}

/// Returns the bitset of allowed values and whether the field was a bare `*` / `?`.
fn parse_field(field: &str, spec: &FieldSpec) -> Result<(u64, bool), String> {
    if field == "*" || field == "?" {
        if field == "?" && spec.name != DOM.name && spec.name != DOW.name {
            return Err(format!(
                "{}: '?' is only allowed in the day fields",
                spec.name
            ));
        }
        return Ok((range_bits(spec.min, spec.max, 1), true));
    }
    let mut bits = 0u64;
    for part in field.split(',') {
        bits |= parse_part(part, spec)?;
    }
    Ok((bits, false))
}

fn parse_part(part: &str, spec: &FieldSpec) -> Result<u64, String> {
    let (range, step) = match part.split_once('/') {
        Some((range, step)) => {
            let step: u32 = step
                .parse()
                .map_err(|_| format!("{}: step {step:?} is not a number", spec.name))?;
            if step == 0 {
                return Err(format!("{}: step must be at least 1", spec.name));
            }
            (range, Some(step))
        }
        None => (part, None),
    };
    let (low, high) = if range == "*" || range == "?" {
        (spec.min, spec.max)
    } else if let Some((a, b)) = range.split_once('-') {
        (parse_value(a, spec)?, parse_value(b, spec)?)
    } else {
        let value = parse_value(range, spec)?;
        // `a/n` means from a to the end of the range, stepping by n.
        (value, if step.is_some() { spec.max } else { value })
    };
    if low > high {
        return Err(format!("{}: range {low}-{high} is backwards", spec.name));
    }
    Ok(range_bits(low, high, step.unwrap_or(1)))
}

fn parse_value(text: &str, spec: &FieldSpec) -> Result<u32, String> {
    let upper = text.to_ascii_uppercase();
    if let Some(index) = spec.names.iter().position(|n| *n == upper) {
        // Month names are 1-based, day names 0-based.
        return Ok(index as u32 + spec.min);
    }
    let value: u32 = text
        .parse()
        .map_err(|_| format!("{}: {text:?} is not a number or a name", spec.name))?;
    if value < spec.min || value > spec.max {
        return Err(format!(
            "{}: {value} is outside {}-{}",
            spec.name, spec.min, spec.max
        ));
    }
    Ok(value)
}

fn range_bits(low: u32, high: u32, step: u32) -> u64 {
    (low..=high)
        .step_by(step as usize)
        .fold(0u64, |bits, v| bits | (1u64 << v))
}

/// Converts days since 1970-01-01 to (year, month 1-12, day 1-31) in the proleptic Gregorian
/// calendar.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Converts (year, month 1-12, day 1-31) to days since 1970-01-01.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(y: i64, mo: u32, d: u32, h: i64, mi: i64) -> i64 {
        days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60
    }

    #[test]
    fn civil_round_trip_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(civil_from_days(days_from_civil(2024, 2, 29)), (2024, 2, 29));
    }

    #[test]
    fn macros_expand() {
        let t = at(2026, 11, 21, 15, 30);
        let daily = CronSchedule::parse("@daily").unwrap();
        assert_eq!(daily.previous_at_or_before(t), Some(at(2026, 11, 21, 0, 0)));
        let hourly = CronSchedule::parse("@hourly").unwrap();
        assert_eq!(
            hourly.previous_at_or_before(t),
            Some(at(2026, 11, 21, 15, 0))
        );
        let yearly = CronSchedule::parse("@annually").unwrap();
        assert_eq!(yearly.previous_at_or_before(t), Some(at(2026, 1, 1, 0, 0)));
        // 2026-11-21 is a Saturday; @weekly fires Sunday midnight.
        let weekly = CronSchedule::parse("@weekly").unwrap();
        assert_eq!(
            weekly.previous_at_or_before(t),
            Some(at(2026, 11, 15, 0, 0))
        );
        assert_eq!(weekly.next_after(t), Some(at(2026, 11, 22, 0, 0)));
    }

    #[test]
    fn business_hours_window() {
        // "0 9 * * mon-fri": 09:00 on weekdays.
        let s = CronSchedule::parse("0 9 * * mon-fri").unwrap();
        // Saturday 15:30 → previous is Friday 09:00.
        assert_eq!(
            s.previous_at_or_before(at(2026, 11, 21, 15, 30)),
            Some(at(2026, 11, 20, 9, 0))
        );
        // Exactly on a firing time counts.
        assert_eq!(
            s.previous_at_or_before(at(2026, 11, 20, 9, 0)),
            Some(at(2026, 11, 20, 9, 0))
        );
        assert_eq!(
            s.next_after(at(2026, 11, 21, 15, 30)),
            Some(at(2026, 11, 23, 9, 0))
        );
    }

    #[test]
    fn steps_lists_and_sunday_seven() {
        let s = CronSchedule::parse("*/15 0,12 * * 7").unwrap();
        // Sunday 2026-11-22 12:50 → 12:45.
        assert_eq!(
            s.previous_at_or_before(at(2026, 11, 22, 12, 50)),
            Some(at(2026, 11, 22, 12, 45))
        );
        let s = CronSchedule::parse("5/20 * * * *").unwrap();
        assert_eq!(
            s.previous_at_or_before(at(2026, 1, 1, 0, 4)),
            Some(at(2025, 12, 31, 23, 45))
        );
    }

    #[test]
    fn dom_and_dow_both_restricted_is_or() {
        // 1st of the month OR Mondays.
        let s = CronSchedule::parse("0 0 1 * 1").unwrap();
        // 2026-11-17 (Tue) → Monday 16th.
        assert_eq!(
            s.previous_at_or_before(at(2026, 11, 17, 1, 0)),
            Some(at(2026, 11, 16, 0, 0))
        );
        // 2026-11-02 (Mon) 00:00 and 2026-11-01 (Sun, 1st) both fire.
        assert_eq!(
            s.previous_at_or_before(at(2026, 11, 1, 5, 0)),
            Some(at(2026, 11, 1, 0, 0))
        );
    }

    #[test]
    fn leap_day_schedule() {
        let s = CronSchedule::parse("0 0 29 2 *").unwrap();
        assert_eq!(
            s.previous_at_or_before(at(2026, 11, 21, 0, 0)),
            Some(at(2024, 2, 29, 0, 0))
        );
    }

    #[test]
    fn rejects_bad_expressions() {
        for bad in [
            "",
            "* * * *",
            "* * * * * *",
            "60 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * * 13 *",
            "* * * * 8",
            "*/0 * * * *",
            "5-1 * * * *",
            "@sometimes",
            "x * * * *",
            "? * * * *",
        ] {
            assert!(
                CronSchedule::parse(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
        let e = CronSchedule::parse("61 * * * *").unwrap_err();
        assert!(e.to_string().contains("minute"), "{e}");
    }

    proptest! {
        #[test]
        fn civil_conversion_round_trips(days in -1_000_000i64..1_000_000) {
            let (y, m, d) = civil_from_days(days);
            prop_assert_eq!(days_from_civil(y, m, d), days);
        }

        #[test]
        fn previous_is_a_firing_time_not_after_t(t in 0i64..4_000_000_000, minute in 0u32..60, hour in 0u32..24) {
            let s = CronSchedule::parse(&format!("{minute} {hour} * * *")).unwrap();
            let p = s.previous_at_or_before(t).unwrap();
            prop_assert!(p <= t);
            prop_assert!(t - p < 86_400);
            prop_assert_eq!(p.rem_euclid(86_400), i64::from(hour * 3600 + minute * 60));
            let n = s.next_after(p).unwrap();
            prop_assert_eq!(n - p, 86_400);
        }
    }
}
