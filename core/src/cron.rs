//! Quartz cron expressions, as Strimzi reads `spec.maintenanceTimeWindows`: six or seven fields
//! (seconds, minutes, hours, day of month, month, day of week, optionally year), in UTC, to
//! the second; whether an instant is in a window, and when the next window opens.
//!
//! Quartz's syntax: `*`, lists, ranges (wrapping, `FRI-MON`), increments (`0/15`, `*/5`,
//! `10-40/10`), month and day names, `?` in exactly one of the two day fields, and the day
//! forms `L`, `L-3`, `LW`, `15W` (day of month) and `L`, `6L`, `6#3` (day of week, 1 = Sunday).

/// Why an expression is not a Quartz cron expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{expression}` is not a Quartz cron expression: {why}")]
pub struct CronError {
    pub expression: String,
    pub why: String,
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    seconds: u64,
    minutes: u64,
    hours: u64,
    day_of_month: DayOfMonth,
    months: u64,
    day_of_week: DayOfWeek,
    /// `None`: every year.
    years: Option<Vec<bool>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum DayOfMonth {
    /// `?`: the day of week decides.
    Unset,
    Days(u64),
    /// `L` or `L-n`: `n` days before the month's last.
    Last(u32),
    /// `LW`: the month's last weekday.
    LastWeekday,
    /// `nW`: the weekday nearest day `n`, within the month.
    NearestWeekday(u32),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum DayOfWeek {
    /// `?`: the day of month decides.
    Unset,
    /// Bits 1 (Sunday) to 7 (Saturday).
    Days(u64),
    /// `nL`: the month's last day `n`.
    Last(u32),
    /// `n#k`: the month's `k`-th day `n`.
    Nth(u32, u32),
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
const FIRST_YEAR: u32 = 1970;
const LAST_YEAR: u32 = 2199;

/// A calendar instant in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    /// 1 = Sunday … 7 = Saturday, as Quartz numbers them.
    weekday: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

impl Civil {
    fn of(unix: i64) -> Civil {
        let days = unix.div_euclid(86_400);
        let of_day = unix.rem_euclid(86_400);
        // Howard Hinnant's days-to-civil.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        Civil {
            year,
            month: small(month),
            day: small(day),
            // 1970-01-01 was a Thursday (5 in Quartz's numbering).
            weekday: small((days + 4).rem_euclid(7) + 1),
            hour: small(of_day / 3600),
            minute: small(of_day / 60 % 60),
            second: small(of_day % 60),
        }
    }

    fn days_in_month(&self) -> u32 {
        match self.month {
            2 if self.year % 4 == 0 && (self.year % 100 != 0 || self.year % 400 == 0) => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        }
    }

    /// The weekday of day `day` of this month.
    fn weekday_of(&self, day: u32) -> u32 {
        let back = (self.day + 7 * 5 - day) % 7;
        (self.weekday + 7 - back - 1) % 7 + 1
    }

    fn is_weekday(weekday: u32) -> bool {
        (2..=6).contains(&weekday)
    }
}

/// A value known to fit (calendar fields).
fn small(n: i64) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

impl Cron {
    /// Parses `expression`.
    pub fn parse(expression: &str) -> Result<Cron, CronError> {
        let fail = |why: String| CronError {
            expression: expression.to_owned(),
            why,
        };
        let fields: Vec<&str> = expression.split_whitespace().collect();
        if !(6..=7).contains(&fields.len()) {
            return Err(fail(format!(
                "it has {} fields; Quartz needs seconds, minutes, hours, day of month, month, day of week and optionally year",
                fields.len()
            )));
        }
        let field = |i: usize, name: &str, min: u32, max: u32, names: &[&str]| {
            bits(fields[i], min, max, names).map_err(|why| fail(format!("{name}: {why}")))
        };
        let day_of_month =
            day_of_month(fields[3]).map_err(|w| fail(format!("day of month: {w}")))?;
        let day_of_week = day_of_week(fields[5]).map_err(|w| fail(format!("day of week: {w}")))?;
        match (&day_of_month, &day_of_week) {
            (DayOfMonth::Unset, DayOfWeek::Unset) => {
                return Err(fail(
                    "`?` may stand in only one of the two day fields".into(),
                ));
            }
            (DayOfMonth::Unset, _) | (_, DayOfWeek::Unset) => {}
            _ => {
                return Err(fail(
                    "give a day of month or a day of week, and `?` in the other".into(),
                ));
            }
        }
        let years = match fields.get(6) {
            None => None,
            Some(&"*") => None,
            Some(y) => {
                let mask =
                    bits_wide(y, FIRST_YEAR, LAST_YEAR).map_err(|w| fail(format!("year: {w}")))?;
                Some(mask)
            }
        };
        Ok(Cron {
            seconds: field(0, "seconds", 0, 59, &[])?,
            minutes: field(1, "minutes", 0, 59, &[])?,
            hours: field(2, "hours", 0, 23, &[])?,
            day_of_month,
            months: field(4, "month", 1, 12, &MONTHS)?,
            day_of_week,
            years,
        })
    }

    /// Whether the instant `unix` (seconds since the epoch, UTC) is in the expression.
    pub fn matches(&self, unix: i64) -> bool {
        let t = Civil::of(unix);
        has(self.seconds, t.second) && self.matches_minute(&t)
    }

    /// The first instant at or after `unix` that is in the expression, looking at most
    /// `horizon` seconds ahead.
    pub fn next(&self, unix: i64, horizon: i64) -> Option<i64> {
        if self.matches(unix) {
            return Some(unix);
        }
        let first_second = (0..60).find(|s| has(self.seconds, *s))?;
        // Minute by minute: the rest of this one, then each whole minute.
        let start = unix - unix.rem_euclid(60);
        let mut minute = start;
        while minute <= unix + horizon {
            let t = Civil::of(minute);
            if self.matches_minute(&t) {
                let from = if minute == start {
                    unix.rem_euclid(60)
                } else {
                    0
                };
                let second = if minute == start {
                    (small(from)..60).find(|s| has(self.seconds, *s))
                } else {
                    Some(first_second)
                };
                if let Some(second) = second {
                    return Some(minute + i64::from(second));
                }
            }
            minute += 60;
        }
        None
    }

    fn matches_minute(&self, t: &Civil) -> bool {
        has(self.minutes, t.minute)
            && has(self.hours, t.hour)
            && has(self.months, t.month)
            && self.matches_day(t)
            && self.years.as_ref().is_none_or(|years| {
                usize::try_from(t.year - i64::from(FIRST_YEAR))
                    .ok()
                    .and_then(|i| years.get(i).copied())
                    .unwrap_or(false)
            })
    }

    fn matches_day(&self, t: &Civil) -> bool {
        let last = t.days_in_month();
        let by_month = match self.day_of_month {
            DayOfMonth::Unset => true,
            DayOfMonth::Days(mask) => has(mask, t.day),
            DayOfMonth::Last(before) => last.checked_sub(before) == Some(t.day),
            DayOfMonth::LastWeekday => {
                let day = (1..=last)
                    .rev()
                    .find(|d| Civil::is_weekday(t.weekday_of(*d)));
                day == Some(t.day)
            }
            DayOfMonth::NearestWeekday(n) => nearest_weekday(t, n.min(last)) == t.day,
        };
        let by_week = match self.day_of_week {
            DayOfWeek::Unset => true,
            DayOfWeek::Days(mask) => has(mask, t.weekday),
            DayOfWeek::Last(weekday) => t.weekday == weekday && t.day + 7 > last,
            DayOfWeek::Nth(weekday, k) => t.weekday == weekday && (t.day - 1) / 7 + 1 == k,
        };
        by_month && by_week
    }
}

/// The weekday nearest day `n` of `t`'s month, without leaving the month (Quartz's `nW`).
fn nearest_weekday(t: &Civil, n: u32) -> u32 {
    let last = t.days_in_month();
    match t.weekday_of(n) {
        // Saturday: the Friday before, or the Monday after on the 1st.
        7 if n == 1 => 3,
        7 => n - 1,
        // Sunday: the Monday after, or the Friday before on the last day.
        1 if n == last => n - 2,
        1 => n + 1,
        _ => n,
    }
}

fn has(mask: u64, value: u32) -> bool {
    value < 64 && mask & (1 << value) != 0
}

/// The values of a field of `min..=max` (at most 63) as a bit mask.
fn bits(field: &str, min: u32, max: u32, names: &[&str]) -> Result<u64, String> {
    let values = values(field, min, max, names)?;
    Ok(values.into_iter().fold(0, |mask, v| mask | (1 << v)))
}

/// The values of the year field, as flags from `min`.
fn bits_wide(field: &str, min: u32, max: u32) -> Result<Vec<bool>, String> {
    let mut flags = vec![false; (max - min + 1) as usize];
    for v in values(field, min, max, &[])? {
        flags[(v - min) as usize] = true;
    }
    Ok(flags)
}

/// The values a field lists: `*`, `a`, `a-b` (wrapping), each optionally `/step`, comma
/// separated; `names` are the values' names from `min` on (case-insensitive).
fn values(field: &str, min: u32, max: u32, names: &[&str]) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => {
                let step: u32 =
                    step.parse().ok().filter(|s| *s > 0).ok_or_else(|| {
                        format!("`{step}` in `{item}` is not a positive increment")
                    })?;
                (range, step)
            }
            None => (item, 1),
        };
        let (from, to) = match range {
            "*" => (min, max),
            _ => match range.split_once('-') {
                Some((a, b)) => (value(a, min, max, names)?, value(b, min, max, names)?),
                // `a/step` runs to the end of the field; `a` alone is that value.
                None => {
                    let a = value(range, min, max, names)?;
                    (a, if item.contains('/') { max } else { a })
                }
            },
        };
        let span = if to >= from {
            to - from
        } else {
            max - min + 1 - (from - to)
        };
        let mut offset = 0;
        while offset <= span {
            let v = from + offset;
            out.push(if v > max { v - (max - min + 1) } else { v });
            offset += step;
        }
    }
    Ok(out)
}

fn value(text: &str, min: u32, max: u32, names: &[&str]) -> Result<u32, String> {
    let upper = text.to_ascii_uppercase();
    let named = names
        .iter()
        .position(|n| *n == upper)
        .and_then(|i| u32::try_from(i).ok())
        .map(|i| i + min);
    match named.or_else(|| text.parse().ok()) {
        Some(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(format!("`{text}` is not a value from {min} to {max}")),
    }
}

fn day_of_month(field: &str) -> Result<DayOfMonth, String> {
    let upper = field.to_ascii_uppercase();
    Ok(match upper.as_str() {
        "?" => DayOfMonth::Unset,
        "L" => DayOfMonth::Last(0),
        "LW" => DayOfMonth::LastWeekday,
        _ if upper.starts_with("L-") => {
            let before = upper[2..]
                .parse()
                .ok()
                .filter(|b| *b < 31)
                .ok_or_else(|| format!("`{field}`: L-n needs n from 0 to 30"))?;
            DayOfMonth::Last(before)
        }
        _ if upper.ends_with('W') => {
            DayOfMonth::NearestWeekday(value(&upper[..upper.len() - 1], 1, 31, &[])?)
        }
        _ => DayOfMonth::Days(bits(field, 1, 31, &[])?),
    })
}

fn day_of_week(field: &str) -> Result<DayOfWeek, String> {
    let upper = field.to_ascii_uppercase();
    if upper == "?" {
        return Ok(DayOfWeek::Unset);
    }
    if upper == "L" {
        return Ok(DayOfWeek::Days(1 << 7));
    }
    if let Some(day) = upper.strip_suffix('L') {
        return Ok(DayOfWeek::Last(value(day, 1, 7, &WEEKDAYS)?));
    }
    if let Some((day, k)) = upper.split_once('#') {
        let k = k
            .parse()
            .ok()
            .filter(|k| (1..=5).contains(k))
            .ok_or_else(|| format!("`{field}`: n#k needs k from 1 to 5"))?;
        return Ok(DayOfWeek::Nth(value(day, 1, 7, &WEEKDAYS)?, k));
    }
    Ok(DayOfWeek::Days(bits(field, 1, 7, &WEEKDAYS)?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Unix seconds of a UTC date and time.
    fn at(year: i64, month: u32, day: u32, hour: u32, minute: u32, second: u32) -> i64 {
        // Days from civil (Howard Hinnant's), the inverse of `Civil::of`.
        let y = if month <= 2 { year - 1 } else { year };
        let era = y.div_euclid(400);
        let yoe = y.rem_euclid(400);
        let m = i64::from(month);
        let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        days * 86_400 + i64::from(hour * 3600 + minute * 60 + second)
    }

    #[test]
    fn civil_dates_and_weekdays() {
        let t = Civil::of(at(2026, 11, 28, 14, 37, 5));
        assert_eq!((t.year, t.month, t.day), (2026, 11, 28));
        assert_eq!((t.hour, t.minute, t.second), (14, 37, 5));
        assert_eq!(t.weekday, 7, "2026-11-28 is a Saturday");
        assert_eq!(t.weekday_of(1), 1, "2026-11-01 was a Sunday");
        assert_eq!(Civil::of(at(2024, 2, 10, 0, 0, 0)).days_in_month(), 29);
        assert_eq!(Civil::of(at(2100, 2, 10, 0, 0, 0)).days_in_month(), 28);
    }

    #[test]
    fn strimzis_example_window_is_the_first_two_hours_of_every_day() {
        let cron = Cron::parse("* * 0-1 ? * SUN,MON,TUE,WED,THU,FRI,SAT").unwrap();
        assert!(cron.matches(at(2026, 11, 28, 0, 0, 0)));
        assert!(cron.matches(at(2026, 11, 28, 1, 59, 59)));
        assert!(!cron.matches(at(2026, 11, 28, 2, 0, 0)));
        assert_eq!(
            cron.next(at(2026, 11, 28, 14, 37, 5), 86_400),
            Some(at(2026, 11, 29, 0, 0, 0))
        );
        assert_eq!(
            cron.next(at(2026, 11, 28, 1, 0, 7), 60),
            Some(at(2026, 11, 28, 1, 0, 7)),
            "inside a window, it is open now"
        );
    }

    #[test]
    fn increments_ranges_and_names() {
        let cron = Cron::parse("0 0/15 10-12 ? JAN-MAR MON-FRI").unwrap();
        assert!(cron.matches(at(2027, 2, 3, 11, 45, 0)), "a Wednesday");
        assert!(!cron.matches(at(2027, 2, 3, 11, 40, 0)));
        assert!(!cron.matches(at(2027, 2, 6, 11, 45, 0)), "a Saturday");
        assert!(!cron.matches(at(2027, 4, 7, 11, 45, 0)), "April");
        assert_eq!(
            cron.next(at(2027, 2, 3, 11, 45, 1), 3600),
            Some(at(2027, 2, 3, 12, 0, 0))
        );
        let wrapping = Cron::parse("0 0 22-2 ? * FRI-MON").unwrap();
        assert!(
            wrapping.matches(at(2026, 11, 29, 1, 0, 0)),
            "a Sunday, 1 a.m."
        );
        assert!(!wrapping.matches(at(2026, 11, 25, 1, 0, 0)), "a Wednesday");
        let year = Cron::parse("0 0 12 1 * ? 2027").unwrap();
        assert!(year.matches(at(2027, 3, 1, 12, 0, 0)));
        assert!(!year.matches(at(2026, 3, 1, 12, 0, 0)));
        assert_eq!(
            year.next(at(2026, 12, 31, 0, 0, 0), 86_400),
            None,
            "beyond the horizon"
        );
    }

    #[test]
    fn quartzs_day_forms() {
        let last = Cron::parse("0 0 0 L * ?").unwrap();
        assert!(last.matches(at(2026, 2, 28, 0, 0, 0)));
        assert!(!last.matches(at(2026, 2, 27, 0, 0, 0)));
        let last_weekday = Cron::parse("0 0 0 LW * ?").unwrap();
        assert!(
            last_weekday.matches(at(2026, 1, 30, 0, 0, 0)),
            "Jan 31, 2026 is a Saturday"
        );
        let nearest = Cron::parse("0 0 0 15W * ?").unwrap();
        assert!(
            nearest.matches(at(2026, 11, 16, 0, 0, 0)),
            "Nov 15, 2026 is a Sunday"
        );
        let first = Cron::parse("0 0 0 1W * ?").unwrap();
        assert!(
            first.matches(at(2026, 8, 3, 0, 0, 0)),
            "Aug 1, 2026 is a Saturday"
        );
        let last_friday = Cron::parse("0 0 0 ? * 6L").unwrap();
        assert!(last_friday.matches(at(2026, 11, 27, 0, 0, 0)));
        assert!(!last_friday.matches(at(2026, 11, 20, 0, 0, 0)));
        let third_friday = Cron::parse("0 0 0 ? * FRI#3").unwrap();
        assert!(third_friday.matches(at(2026, 11, 20, 0, 0, 0)));
        assert!(!third_friday.matches(at(2026, 11, 27, 0, 0, 0)));
    }

    #[test]
    fn what_is_not_an_expression_is_refused_with_why() {
        for (expression, why) in [
            ("* * 0-1 * *", "5 fields"),
            ("60 * * ? * *", "seconds: `60`"),
            ("* * * * * MON", "`?` in the other"),
            ("* * * ? * ?", "only one"),
            ("* * * ? * MON#6", "k from 1 to 5"),
            ("* */0 * ? * *", "positive increment"),
            ("* * * ? FOO *", "month: `FOO`"),
        ] {
            let err = Cron::parse(expression).unwrap_err();
            assert!(err.to_string().contains(why), "{expression}: {err}");
        }
    }
}
