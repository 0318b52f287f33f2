//! Liveness and readiness state: named checks that tasks flip as their work succeeds or stalls.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// Shared health state of one process.
///
/// *Readiness* is the conjunction of named checks (e.g. "kubernetes", "watch:pods"): the
/// process serves traffic only when every registered check passes. *Liveness* fails when a
/// registered heartbeat has not been renewed within its allowance, so that a stalled task gets
/// the container restarted rather than silently doing nothing.
#[derive(Debug, Clone, Default)]
pub struct Health {
    inner: Arc<RwLock<State>>,
}

#[derive(Debug, Default)]
struct State {
    ready: BTreeMap<String, Check>,
    heartbeats: BTreeMap<String, Heartbeat>,
}

#[derive(Debug, Clone)]
struct Check {
    ok: bool,
    detail: String,
}

#[derive(Debug, Clone, Copy)]
struct Heartbeat {
    last: Instant,
    allowance: Duration,
}

/// One line of a health report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

impl Health {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers (or updates) a readiness check.
    pub fn set_ready(&self, name: &str, ok: bool, detail: impl Into<String>) {
        let mut state = self.write();
        state.ready.insert(
            name.to_owned(),
            Check {
                ok,
                detail: detail.into(),
            },
        );
    }

    /// Renews a liveness heartbeat; the process is unhealthy once `allowance` passes without
    /// another call.
    pub fn beat(&self, name: &str, allowance: Duration) {
        self.beat_at(name, allowance, Instant::now());
    }

    fn beat_at(&self, name: &str, allowance: Duration, now: Instant) {
        let mut state = self.write();
        state.heartbeats.insert(
            name.to_owned(),
            Heartbeat {
                last: now,
                allowance,
            },
        );
    }

    /// Every readiness check; ready when none failed (and at least one is registered, so a
    /// process that has not started its work yet is not reported ready).
    pub fn readiness(&self) -> (bool, Vec<CheckReport>) {
        let state = self.read();
        let reports: Vec<CheckReport> = state
            .ready
            .iter()
            .map(|(name, check)| CheckReport {
                name: name.clone(),
                ok: check.ok,
                detail: check.detail.clone(),
            })
            .collect();
        let ok = !reports.is_empty() && reports.iter().all(|r| r.ok);
        (ok, reports)
    }

    /// Every liveness heartbeat; live when none is overdue.
    pub fn liveness(&self) -> (bool, Vec<CheckReport>) {
        self.liveness_at(Instant::now())
    }

    fn liveness_at(&self, now: Instant) -> (bool, Vec<CheckReport>) {
        let state = self.read();
        let reports: Vec<CheckReport> = state
            .heartbeats
            .iter()
            .map(|(name, beat)| {
                let age = now.saturating_duration_since(beat.last);
                CheckReport {
                    name: name.clone(),
                    ok: age <= beat.allowance,
                    detail: format!("last beat {}s ago", age.as_secs()),
                }
            })
            .collect();
        (reports.iter().all(|r| r.ok), reports)
    }

    // A poisoned lock only means a writer panicked mid-insert of a plain value; the map is
    // still consistent, so keep serving health rather than crash the process.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_ready_until_a_check_is_registered() {
        let health = Health::new();
        assert!(!health.readiness().0);
        health.set_ready("kubernetes", true, "v1.36.3");
        assert!(health.readiness().0);
    }

    #[test]
    fn one_failing_check_makes_the_process_unready() {
        let health = Health::new();
        health.set_ready("kubernetes", true, "ok");
        health.set_ready("watch:pods", false, "watch error: 410 Gone");
        let (ok, reports) = health.readiness();
        assert!(!ok);
        let failing: Vec<_> = reports.iter().filter(|r| !r.ok).collect();
        assert_eq!(failing.len(), 1);
        assert_eq!(failing[0].name, "watch:pods");
        assert_eq!(failing[0].detail, "watch error: 410 Gone");
    }

    #[test]
    fn overdue_heartbeat_fails_liveness() {
        let health = Health::new();
        let start = Instant::now();
        health.beat_at("resync", Duration::from_secs(30), start);
        assert!(health.liveness_at(start + Duration::from_secs(30)).0);
        let (live, reports) = health.liveness_at(start + Duration::from_secs(31));
        assert!(!live);
        assert_eq!(reports[0].detail, "last beat 31s ago");
    }

    #[test]
    fn live_without_heartbeats() {
        assert!(Health::new().liveness().0);
    }
}
