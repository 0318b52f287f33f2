//! Whether the controller's view of the cluster is live: readiness per watch, a liveness heartbeat
//! renewed only while the watches are healthy and the apiserver answers. See the module
//! documentation of [`crate::podset`] for the design.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kstretch_runtime::Health;
use kstretch_runtime::namespaces::Namespaces;

/// Name of the liveness heartbeat the supervisor renews.
pub const HEARTBEAT: &str = "podset-controller";
/// Readiness check of the apiserver probe.
pub const PROBE_CHECK: &str = "podset-controller/apiserver";

/// The state of one watch stream, updated from the stream itself.
#[derive(Debug)]
pub struct WatchState {
    kind: &'static str,
    /// Its namespace when the agent watches several (each has its own watch and check).
    namespace: Option<String>,
    check: String,
    health: Health,
    inner: Mutex<WatchStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct WatchStatus {
    started: Instant,
    synced: bool,
    /// Since when every item of the stream has been an error (cleared by the next good one).
    failing_since: Option<Instant>,
    last_error: Option<String>,
}

/// A copy of a watch's state for the verdicts below.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchSnapshot {
    pub kind: &'static str,
    pub namespace: Option<String>,
    pub started: Instant,
    pub synced: bool,
    pub failing_since: Option<Instant>,
    pub last_error: Option<String>,
}

impl WatchState {
    /// Registers the readiness check `podset-controller/watch:<kind>`, failing until the first
    /// complete list has arrived.
    pub fn new(kind: &'static str, health: Health) -> Arc<WatchState> {
        Self::in_namespace(kind, None, health)
    }

    /// [`WatchState::new`] for the watch of `namespace`, one of several: its check is
    /// `podset-controller/watch:<kind>/<namespace>`.
    pub fn in_namespace(
        kind: &'static str,
        namespace: Option<String>,
        health: Health,
    ) -> Arc<WatchState> {
        let check = match &namespace {
            Some(ns) => format!("{HEARTBEAT}/watch:{kind}/{ns}"),
            None => format!("{HEARTBEAT}/watch:{kind}"),
        };
        health.set_ready(&check, false, "waiting for the first list");
        Arc::new(WatchState {
            kind,
            namespace,
            check,
            health,
            inner: Mutex::new(WatchStatus {
                started: Instant::now(),
                synced: false,
                failing_since: None,
                last_error: None,
            }),
        })
    }

    /// Records one good item of the stream; `init_done` when it completes a (re-)list.
    pub fn progress(&self, init_done: bool) {
        let snapshot = {
            let mut s = self.lock();
            let changed = s.failing_since.is_some() || (init_done && !s.synced);
            s.synced |= init_done;
            s.failing_since = None;
            s.last_error = None;
            changed.then(|| s.clone())
        };
        // Only on transitions: the readiness map is shared and events may come by the thousand.
        if let Some(s) = snapshot {
            self.publish(&s);
        }
    }

    /// Records an error of the stream (the watcher retries it with backoff).
    pub fn error(&self, error: String) {
        let snapshot = {
            let mut s = self.lock();
            s.failing_since.get_or_insert_with(Instant::now);
            s.last_error = Some(error);
            s.clone()
        };
        self.publish(&snapshot);
    }

    pub fn synced(&self) -> bool {
        self.lock().synced
    }

    pub fn snapshot(&self) -> WatchSnapshot {
        let s = self.lock();
        WatchSnapshot {
            kind: self.kind,
            namespace: self.namespace.clone(),
            started: s.started,
            synced: s.synced,
            failing_since: s.failing_since,
            last_error: s.last_error.clone(),
        }
    }

    fn publish(&self, s: &WatchStatus) {
        let snapshot = WatchSnapshot {
            kind: self.kind,
            namespace: self.namespace.clone(),
            started: s.started,
            synced: s.synced,
            failing_since: s.failing_since,
            last_error: s.last_error.clone(),
        };
        let (ok, detail) = watch_readiness(&snapshot);
        self.health.set_ready(&self.check, ok, detail);
    }

    // A poisoned lock only means a panic between two plain assignments; the state is still
    // usable, and health reporting must not add a second panic.
    fn lock(&self) -> std::sync::MutexGuard<'_, WatchStatus> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One kind's watches: one per watched namespace, or one (of one namespace or all).
#[derive(Debug)]
pub struct KindWatch {
    parts: Vec<Arc<WatchState>>,
}

impl KindWatch {
    /// The watch states of `kind` in `namespaces`; each has its own readiness check when there
    /// are several.
    pub fn new(kind: &'static str, namespaces: &Namespaces, health: &Health) -> Arc<KindWatch> {
        let parts = match namespaces.list().filter(|_| namespaces.several()) {
            Some(list) => list
                .iter()
                .map(|ns| WatchState::in_namespace(kind, Some(ns.clone()), health.clone()))
                .collect(),
            None => vec![WatchState::new(kind, health.clone())],
        };
        Arc::new(KindWatch { parts })
    }

    /// The state of watch `part` (in the order of the namespaces).
    pub fn part(&self, part: usize) -> Option<&Arc<WatchState>> {
        self.parts.get(part)
    }

    /// True once every watch of the kind holds a complete first list.
    pub fn synced(&self) -> bool {
        self.parts.iter().all(|w| w.synced())
    }

    pub fn snapshots(&self) -> impl Iterator<Item = WatchSnapshot> + '_ {
        self.parts.iter().map(|w| w.snapshot())
    }
}

/// Ready once synced and while the stream is not failing.
pub fn watch_readiness(w: &WatchSnapshot) -> (bool, String) {
    match (&w.failing_since, w.synced) {
        (Some(_), _) => (
            false,
            format!(
                "watch failing: {}",
                w.last_error.as_deref().unwrap_or("unknown error")
            ),
        ),
        (None, false) => (false, "waiting for the first list".to_owned()),
        (None, true) => (true, "watching".to_owned()),
    }
}

/// The limits of the liveness verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowances {
    /// How long a watch may fail continuously, or stay unsynced after start, and how long the
    /// apiserver probe may fail, before the process is declared dead.
    pub failure: Duration,
}

/// Whether the process should be kept alive: `Err` says why not.
///
/// Dead when a watch has failed continuously for longer than the allowance (the watcher retries
/// with backoff, so this means it cannot recover on its own), when a watch has not delivered its
/// first list within the allowance, or when the apiserver has not answered a probe within the
/// allowance. A restart gives a fresh client (connections, DNS, credentials) and fresh watches.
pub fn liveness(
    now: Instant,
    started: Instant,
    watches: &[WatchSnapshot],
    last_probe_ok: Option<Instant>,
    allowances: Allowances,
) -> Result<(), String> {
    let limit = allowances.failure;
    for w in watches {
        let kind = match &w.namespace {
            Some(ns) => format!("{} (namespace {ns})", w.kind),
            None => w.kind.to_owned(),
        };
        if let Some(since) = w.failing_since {
            let failing = now.saturating_duration_since(since);
            if failing > limit {
                return Err(format!(
                    "the {} watch has failed for {}s: {}",
                    kind,
                    failing.as_secs(),
                    w.last_error.as_deref().unwrap_or("unknown error")
                ));
            }
        }
        if !w.synced && now.saturating_duration_since(w.started) > limit {
            return Err(format!(
                "the {} watch has not synced in {}s",
                kind,
                now.saturating_duration_since(w.started).as_secs()
            ));
        }
    }
    let since_probe = now.saturating_duration_since(last_probe_ok.unwrap_or(started));
    if since_probe > limit {
        return Err(format!(
            "the apiserver has not answered a probe for {}s",
            since_probe.as_secs()
        ));
    }
    Ok(())
}

/// How long the heartbeat stays valid after a renewal: two missed probe rounds (each bounded by
/// the probe timeout) and it is overdue.
pub fn heartbeat_allowance(probe_interval: Duration, probe_timeout: Duration) -> Duration {
    (probe_interval + probe_timeout) * 2
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALLOW: Allowances = Allowances {
        failure: Duration::from_secs(60),
    };

    fn snapshot(start: Instant) -> WatchSnapshot {
        WatchSnapshot {
            kind: "Pod",
            namespace: None,
            started: start,
            synced: true,
            failing_since: None,
            last_error: None,
        }
    }

    #[test]
    fn readiness_waits_for_sync_and_fails_while_erroring() {
        let health = Health::new();
        let w = WatchState::new("Pod", health.clone());
        assert!(!health.readiness().0);
        w.progress(false);
        assert!(!health.readiness().0, "events before the list completes");
        w.progress(true);
        assert!(health.readiness().0);
        w.error("410 Gone".into());
        let (ok, reports) = health.readiness();
        assert!(!ok);
        assert_eq!(reports[0].detail, "watch failing: 410 Gone");
        w.progress(false);
        assert!(health.readiness().0, "a good event after an error recovers");
        assert!(w.synced());
    }

    #[test]
    fn a_kind_in_several_namespaces_has_a_check_per_namespace_and_syncs_with_the_last() {
        let health = Health::new();
        let namespaces = Namespaces::List(vec!["a".into(), "b".into()]);
        let pods = KindWatch::new("Pod", &namespaces, &health);
        let (_, checks) = health.readiness();
        let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "podset-controller/watch:Pod/a",
                "podset-controller/watch:Pod/b"
            ]
        );
        pods.part(0).unwrap().progress(true);
        assert!(!pods.synced(), "b has not listed");
        pods.part(1).unwrap().progress(true);
        assert!(pods.synced() && health.readiness().0);
        pods.part(1).unwrap().error("forbidden".into());
        let t0 = Instant::now();
        let snapshots: Vec<WatchSnapshot> = pods.snapshots().collect();
        let err = liveness(
            t0 + Duration::from_secs(3600),
            t0,
            &snapshots,
            Some(t0 + Duration::from_secs(3600)),
            ALLOW,
        )
        .unwrap_err();
        assert!(
            err.starts_with("the Pod (namespace b) watch has failed"),
            "{err}"
        );
        // One namespace (or all): the one check of before.
        let health = Health::new();
        let _ = KindWatch::new("Pod", &Namespaces::one("a"), &health);
        assert_eq!(health.readiness().1[0].name, "podset-controller/watch:Pod");
    }

    #[test]
    fn alive_when_everything_is_fine() {
        let t0 = Instant::now();
        let now = t0 + Duration::from_secs(600);
        let watches = [snapshot(t0)];
        assert!(liveness(now, t0, &watches, Some(now), ALLOW).is_ok());
    }

    #[test]
    fn a_watch_failing_longer_than_the_allowance_is_fatal() {
        let t0 = Instant::now();
        let mut w = snapshot(t0);
        w.failing_since = Some(t0 + Duration::from_secs(100));
        w.last_error = Some("connection refused".into());
        let probe = Some(t0 + Duration::from_secs(200));
        assert!(
            liveness(
                t0 + Duration::from_secs(160),
                t0,
                &[w.clone()],
                probe,
                ALLOW
            )
            .is_ok()
        );
        let err = liveness(t0 + Duration::from_secs(161), t0, &[w], probe, ALLOW).unwrap_err();
        assert_eq!(err, "the Pod watch has failed for 61s: connection refused");
    }

    #[test]
    fn a_watch_that_never_syncs_is_fatal() {
        let t0 = Instant::now();
        let mut w = snapshot(t0);
        w.synced = false;
        let now = t0 + Duration::from_secs(30);
        assert!(liveness(now, t0, &[w.clone()], Some(now), ALLOW).is_ok());
        let now = t0 + Duration::from_secs(61);
        let err = liveness(now, t0, &[w], Some(now), ALLOW).unwrap_err();
        assert!(err.contains("not synced"), "{err}");
    }

    #[test]
    fn an_apiserver_that_stops_answering_is_fatal() {
        let t0 = Instant::now();
        let watches = [snapshot(t0)];
        // No probe yet: the start-up counts as the last answer.
        assert!(liveness(t0 + Duration::from_secs(60), t0, &watches, None, ALLOW).is_ok());
        assert!(liveness(t0 + Duration::from_secs(61), t0, &watches, None, ALLOW).is_err());
        let probe = Some(t0 + Duration::from_secs(100));
        assert!(liveness(t0 + Duration::from_secs(160), t0, &watches, probe, ALLOW).is_ok());
        let err = liveness(t0 + Duration::from_secs(170), t0, &watches, probe, ALLOW).unwrap_err();
        assert!(err.contains("70s"), "{err}");
    }

    #[test]
    fn heartbeat_outlives_one_missed_round() {
        let a = heartbeat_allowance(Duration::from_secs(10), Duration::from_secs(5));
        assert_eq!(a, Duration::from_secs(30));
    }
}
