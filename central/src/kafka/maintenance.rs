//! `spec.maintenanceTimeWindows`, as Strimzi serves them: certificate renewals that are only
//! due (a CA certificate forced by `strimzi.io/force-renew` or within `renewalDays` of expiry, a
//! node's certificate within `renewalDays` of expiry) run inside a window; whether one is open
//! now, when the next opens, and the warnings that say so. Pure.

use kstretch_api::condition;
use kstretch_core::cron::{Cron, CronError};

use super::warning::{Reason, Warning};

/// How far ahead the next window is looked for.
const HORIZON_SECS: i64 = 366 * 86_400;

/// Where the windows stand at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Windows {
    /// No windows are set: renewals run when due.
    Unset,
    /// A window is open now.
    Open,
    /// No window is open; when the next opens (Unix seconds), if one does within a year and
    /// every expression could be read.
    Closed { next: Option<i64> },
}

impl Windows {
    /// Whether renewals that are only due may run now.
    pub fn open(&self) -> bool {
        !matches!(self, Windows::Closed { .. })
    }
}

/// The windows of a `Kafka` at one instant, and its expressions that are not Quartz cron
/// expressions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Maintenance {
    pub windows: Windows,
    /// With any of these no window is ever open (as in Strimzi) until they are fixed.
    pub invalid: Vec<CronError>,
}

/// The windows `expressions` (UTC) at `now` (Unix seconds).
pub fn at(expressions: &[String], now: i64) -> Maintenance {
    if expressions.is_empty() {
        return Maintenance {
            windows: Windows::Unset,
            invalid: Vec::new(),
        };
    }
    let mut crons = Vec::new();
    let mut invalid = Vec::new();
    for expression in expressions {
        match Cron::parse(expression) {
            Ok(cron) => crons.push(cron),
            Err(e) => invalid.push(e),
        }
    }
    let windows = if !invalid.is_empty() {
        Windows::Closed { next: None }
    } else if crons.iter().any(|c| c.matches(now)) {
        Windows::Open
    } else {
        Windows::Closed {
            next: crons.iter().filter_map(|c| c.next(now, HORIZON_SECS)).min(),
        }
    };
    Maintenance { windows, invalid }
}

/// The warnings of `maintenance` while `waiting` (what each renewal that waits renews) waits
/// for a window.
pub fn warnings(maintenance: &Maintenance, waiting: &[String]) -> Vec<Warning> {
    let mut out: Vec<Warning> = maintenance
        .invalid
        .iter()
        .map(|e| {
            Warning::new(
                Reason::InvalidMaintenanceTimeWindows,
                format!(
                    ".spec.maintenanceTimeWindows: {e}; no window opens until it is fixed, so certificate renewals wait"
                ),
            )
        })
        .collect();
    if waiting.is_empty() || maintenance.windows.open() {
        return out;
    }
    let when = match maintenance.windows {
        Windows::Closed { next: Some(next) } => format!(
            "the next opens at {}",
            k8s_openapi::jiff::Timestamp::from_second(next)
                .map(condition::format_timestamp)
                .unwrap_or_else(|_| next.to_string())
        ),
        _ => "none opens within a year".to_owned(),
    };
    out.push(Warning::new(
        Reason::CertificateRenewalPostponed,
        format!(
            "renewing {} waits for a maintenance window (.spec.maintenanceTimeWindows, UTC): {when}",
            waiting.join(", ")
        ),
    ));
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// 2026-11-28T14:00:00Z.
    const NOW: i64 = 1_795_874_400;

    fn windows(expressions: &[&str]) -> Maintenance {
        let owned: Vec<String> = expressions.iter().map(|e| (*e).to_owned()).collect();
        at(&owned, NOW)
    }

    #[test]
    fn renewals_run_without_windows_or_inside_one() {
        assert_eq!(windows(&[]).windows, Windows::Unset);
        assert!(windows(&[]).windows.open());
        let open = windows(&["* * 0-1 ? * *", "* * 14 ? * SAT"]);
        assert_eq!(open.windows, Windows::Open, "2026-11-28 is a Saturday");
        assert!(warnings(&open, &["the cluster CA certificate".into()]).is_empty());
    }

    #[test]
    fn outside_every_window_renewals_wait_and_say_until_when() {
        let closed = windows(&["* * 0-1 ? * *", "* 30 15 ? * *"]);
        assert_eq!(
            closed.windows,
            Windows::Closed {
                next: Some(NOW + 90 * 60)
            }
        );
        assert!(!closed.windows.open());
        let said = warnings(
            &closed,
            &["the cluster CA certificate (strimzi.io/force-renew)".into()],
        );
        assert_eq!(said.len(), 1);
        assert_eq!(said[0].reason, Reason::CertificateRenewalPostponed);
        assert!(
            said[0].message.contains(
                "renewing the cluster CA certificate (strimzi.io/force-renew) waits for a maintenance window"
            ) && said[0].message.contains("the next opens at 2026-11-28T15:30:00Z"),
            "{}",
            said[0].message
        );
        assert!(
            warnings(&closed, &[]).is_empty(),
            "nothing waits, nothing said"
        );
    }

    #[test]
    fn an_invalid_expression_opens_no_window_and_is_named() {
        let bad = windows(&["* * 14 ? * SAT", "* * 25 ? * *"]);
        assert_eq!(bad.windows, Windows::Closed { next: None });
        let said = warnings(&bad, &["the certificate of pod k-b-3".into()]);
        assert_eq!(said[0].reason, Reason::InvalidMaintenanceTimeWindows);
        assert!(
            said[0].message.contains("`* * 25 ? * *`"),
            "{}",
            said[0].message
        );
        assert!(said[1].message.contains("none opens within a year"));
    }
}
