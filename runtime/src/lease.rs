//! Leader election on a `coordination.k8s.io/v1` Lease: of several replicas of one process,
//! only the holder of the lease works; the others wait as standbys and take over once the
//! holder stops renewing it.
//!
//! The protocol is client-go's (and kubert's): the holder writes `holderIdentity` and
//! `renewTime` every third of `leaseDurationSeconds`; a standby reads the lease as often and
//! takes it over once `renewTime + leaseDurationSeconds` has passed. Every write is an update
//! carrying the `resourceVersion` that was read, so of two replicas racing for an expired
//! lease exactly one wins (the other gets 409 Conflict and reads again). A holder that cannot
//! renew for two thirds of the duration gives up before anyone else may take over, so two
//! holders never act at once (assuming clocks that agree to within a third of the duration).
//!
//! Standbys are ready too: traffic is steered by the leader's pod label, not by readiness.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::Health;
use crate::leader_pod::LeaderPod;

/// Name of the readiness check of the election: ready while this replica leads with its pod
/// labelled, or stands by with its pod unlabelled (see [`crate::leader_pod`]).
pub const CHECK: &str = "leader";

/// Flags of leader election.
#[derive(clap::Args, Debug, Clone)]
pub struct LeaderElectionArgs {
    /// Run as one of several replicas: only the holder of a Lease works, the others wait (not
    /// ready) and take over when it stops renewing the lease.
    #[arg(long, env = "KSTRETCH_LEADER_ELECTION", default_value_t = false)]
    pub leader_election: bool,

    /// Namespace of the Lease; default: $POD_NAMESPACE, else the namespace the process
    /// manages, else `default`.
    #[arg(long, env = "KSTRETCH_LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,

    /// Name of the Lease.
    #[arg(
        long,
        env = "KSTRETCH_LEADER_ELECTION_LEASE_NAME",
        default_value = "kstretch-central"
    )]
    pub leader_election_lease_name: String,

    /// This replica's name in the Lease; default: $POD_NAME, else `<hostname>_<pid>`.
    #[arg(long, env = "KSTRETCH_LEADER_ELECTION_IDENTITY")]
    pub leader_election_identity: Option<String>,

    /// Seconds a lease stays valid without renewal: how long a dead leader blocks the standby.
    #[arg(
        long,
        env = "KSTRETCH_LEADER_ELECTION_LEASE_DURATION_SECS",
        default_value_t = 15,
        value_parser = clap::value_parser!(u64).range(3..)
    )]
    pub leader_election_lease_duration_secs: u64,

    /// This replica's pod (in the Lease's namespace), labelled `kstretch.io/leader=true` while
    /// it leads so that a Service selecting that label reaches the leader only; default:
    /// $POD_NAME. Without it no pod is labelled.
    #[arg(long, env = "POD_NAME")]
    pub leader_election_pod: Option<String>,
}

impl LeaderElectionArgs {
    /// The Lease's namespace: the flag, else $POD_NAMESPACE, else `fallback`, else `default`.
    pub fn namespace(&self, fallback: Option<&str>) -> String {
        self.leader_election_namespace
            .clone()
            .or_else(|| non_empty_env("POD_NAMESPACE"))
            .or_else(|| fallback.map(str::to_owned))
            .unwrap_or_else(|| "default".to_owned())
    }

    /// This replica's identity: the flag, else $POD_NAME, else `<hostname>_<pid>`.
    pub fn identity(&self) -> String {
        self.leader_election_identity
            .clone()
            .or_else(|| non_empty_env("POD_NAME"))
            .unwrap_or_else(|| {
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .ok()
                    .map(|h| h.trim().to_owned())
                    .filter(|h| !h.is_empty())
                    .or_else(|| non_empty_env("HOSTNAME"))
                    .unwrap_or_else(|| "unknown-host".to_owned());
                format!("{host}_{}", std::process::id())
            })
    }
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The lease's timings, all derived from its duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long the lease stays valid after a renewal.
    pub duration: Duration,
    /// How often the holder renews and a standby looks again.
    pub retry: Duration,
    /// How long the holder keeps working without a successful renewal: less than `duration`,
    /// so it stops before a standby may take over.
    pub renew_deadline: Duration,
}

impl Timing {
    pub fn new(duration: Duration) -> Self {
        Self {
            duration,
            retry: duration / 3,
            renew_deadline: duration * 2 / 3,
        }
    }
}

/// What to do with the lease as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nobody holds it, or the holder let it expire: take it.
    Acquire,
    /// This replica holds it: renew it.
    Renew,
    /// Another replica holds it for `expires_in` more.
    Follow {
        holder: String,
        expires_in: Duration,
    },
}

/// Decides from the lease's spec (`None`: no lease yet) what replica `me` does at `now`.
/// A lease without `leaseDurationSeconds` counts with `default_duration`; a holder without
/// `renewTime` never renewed, so its lease is expired.
pub fn decide(
    spec: Option<&LeaseSpec>,
    me: &str,
    now: Timestamp,
    default_duration: Duration,
) -> Decision {
    let Some(spec) = spec else {
        return Decision::Acquire;
    };
    let holder = match spec.holder_identity.as_deref() {
        None | Some("") => return Decision::Acquire,
        Some(h) => h,
    };
    if holder == me {
        return Decision::Renew;
    }
    let duration = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map(Duration::from_secs)
        .unwrap_or(default_duration);
    let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else {
        return Decision::Acquire;
    };
    let elapsed = now.duration_since(renewed.0);
    // A renewal in the future (clock skew) counts as just now.
    let elapsed = Duration::try_from(elapsed).unwrap_or(Duration::ZERO);
    match duration.checked_sub(elapsed) {
        Some(left) if !left.is_zero() => Decision::Follow {
            holder: holder.to_owned(),
            expires_in: left,
        },
        _ => Decision::Acquire,
    }
}

/// The spec this replica writes to acquire or renew `previous`.
pub fn next_spec(
    previous: Option<&LeaseSpec>,
    me: &str,
    now: Timestamp,
    timing: Timing,
) -> LeaseSpec {
    let previous_holder = previous.and_then(|s| s.holder_identity.as_deref());
    let renewing = previous_holder == Some(me);
    let transitions = previous.and_then(|s| s.lease_transitions).unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(me.to_owned()),
        lease_duration_seconds: Some(i32::try_from(timing.duration.as_secs()).unwrap_or(i32::MAX)),
        acquire_time: if renewing {
            previous.and_then(|s| s.acquire_time.clone())
        } else {
            Some(MicroTime(now))
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(match previous_holder {
            Some(h) if !h.is_empty() && !renewing => transitions.saturating_add(1),
            _ => transitions,
        }),
        ..LeaseSpec::default()
    }
}

/// This replica's role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Not decided yet (the lease was not read yet).
    Pending,
    /// Holds the lease: works.
    Leader,
    /// Another replica holds the lease.
    Standby { holder: String },
    /// Held the lease and lost it: must stop working at once.
    Lost { why: String },
    /// The election stopped (shutdown) without this replica leading.
    Stopped,
}

/// The `leader` gauge (1 while this replica leads).
#[derive(Debug, Clone, Default)]
pub struct LeaderMetrics {
    leader: Gauge,
}

impl LeaderMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "leader",
            "1 while this replica holds the leader lease (always 1 without --leader-election)",
            m.leader.clone(),
        );
        m
    }
}

/// A replica's view of the election.
#[derive(Debug, Clone)]
pub struct LeaderElection {
    /// `None` without leader election.
    role: Option<watch::Receiver<Role>>,
}

impl LeaderElection {
    /// Without leader election the process is the only replica: it leads from the start and
    /// never loses.
    pub fn disabled(metrics: &LeaderMetrics) -> Self {
        metrics.leader.set(1);
        Self { role: None }
    }

    /// The current role.
    pub fn role(&self) -> Role {
        match &self.role {
            Some(role) => role.borrow().clone(),
            None => Role::Leader,
        }
    }

    /// Waits until this replica leads (`true`), or the election stopped without it (`false`).
    pub async fn acquired(&mut self) -> bool {
        let Some(role) = self.role.as_mut() else {
            return true;
        };
        let result = role
            .wait_for(|r| !matches!(r, Role::Pending | Role::Standby { .. }))
            .await;
        matches!(result.as_deref(), Ok(Role::Leader))
    }

    /// Resolves (with the reason) once this replica lost the lease; pends forever otherwise.
    pub async fn lost(&mut self) -> String {
        let Some(role) = self.role.as_mut() else {
            return std::future::pending().await;
        };
        match role.wait_for(|r| matches!(r, Role::Lost { .. })).await {
            Ok(role) => match &*role {
                Role::Lost { why } => why.clone(),
                _ => String::new(),
            },
            Err(_) => std::future::pending().await,
        }
    }
}

/// Starts the election, or [`LeaderElection::disabled`] without `--leader-election`. The
/// returned future runs the election until `shutdown` (releasing the lease if held) or until
/// the lease is lost; spawn it.
pub fn start(
    args: &LeaderElectionArgs,
    client: kube::Client,
    fallback_namespace: Option<&str>,
    health: Health,
    metrics: LeaderMetrics,
    shutdown: CancellationToken,
) -> (
    LeaderElection,
    Option<impl Future<Output = ()> + Send + 'static>,
) {
    if !args.leader_election {
        return (LeaderElection::disabled(&metrics), None);
    }
    let namespace = args.namespace(fallback_namespace);
    let pod = args
        .leader_election_pod
        .as_deref()
        .filter(|p| !p.is_empty())
        .map(|p| LeaderPod::new(client.clone(), &namespace, p));
    let elector = Elector {
        api: Api::namespaced(client, &namespace),
        pod,
        name: args.leader_election_lease_name.clone(),
        me: args.identity(),
        timing: Timing::new(Duration::from_secs(
            args.leader_election_lease_duration_secs,
        )),
        labelled: None,
        health,
        metrics,
    };
    tracing::info!(
        lease = %format!("{namespace}/{}", elector.name),
        identity = %elector.me,
        "leader election: waiting for the lease"
    );
    elector
        .health
        .set_ready(CHECK, false, "standby: waiting for the lease");
    let (tx, role) = watch::channel(Role::Pending);
    (
        LeaderElection { role: Some(role) },
        Some(elector.run(tx, shutdown)),
    )
}

struct Elector {
    api: Api<Lease>,
    /// This replica's pod, labelled while it leads.
    pod: Option<LeaderPod>,
    /// What the pod's label was last set to.
    labelled: Option<bool>,
    name: String,
    me: String,
    timing: Timing,
    health: Health,
    metrics: LeaderMetrics,
}

/// Why one round of the election failed.
#[derive(Debug, thiserror::Error)]
enum LeaseError {
    #[error("cannot read the lease: {0}")]
    Read(kube::Error),
    #[error("another replica wrote the lease first")]
    Conflict,
    #[error("cannot write the lease: {0}")]
    Write(kube::Error),
}

/// The pod's leader label could not be written.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot {} the label {} of pod {pod}: {source}",
    if *leads { "set" } else { "remove" },
    crate::leader_pod::LABEL
)]
struct LabelError {
    pod: String,
    leads: bool,
    source: kube::Error,
}

impl Elector {
    async fn run(mut self, role: watch::Sender<Role>, shutdown: CancellationToken) {
        // When this replica last renewed successfully, while it leads.
        let mut renewed: Option<tokio::time::Instant> = None;
        loop {
            let wait = match self.round().await {
                Ok(Decision::Acquire | Decision::Renew) => {
                    if renewed.is_none() {
                        tracing::info!(identity = %self.me, "leader election: acquired the lease");
                        self.metrics.leader.set(1);
                        role.send_replace(Role::Leader);
                    }
                    renewed = Some(tokio::time::Instant::now());
                    // Ready once the Service can route to this pod; retried every round.
                    match self.label(true).await {
                        Ok(()) => {
                            self.health
                                .set_ready(CHECK, true, format!("leader ({})", self.me))
                        }
                        Err(e) => self
                            .health
                            .set_ready(CHECK, false, format!("leader, but {e}")),
                    }
                    self.timing.retry
                }
                Ok(Decision::Follow { holder, expires_in }) => {
                    if renewed.is_some() {
                        return self.lose(&role, format!("the lease is held by {holder}"));
                    }
                    // A standby is ready (it is healthy and can take over at once), but only
                    // once its pod no longer carries the leader label a previous run of this
                    // pod may have left: the Service must never route to it.
                    match self.label(false).await {
                        Ok(()) => self.health.set_ready(
                            CHECK,
                            true,
                            format!("standby: leader is {holder}"),
                        ),
                        Err(e) => self.health.set_ready(CHECK, false, format!("standby: {e}")),
                    }
                    if role.borrow().clone()
                        != (Role::Standby {
                            holder: holder.clone(),
                        })
                    {
                        tracing::info!(%holder, "leader election: standing by");
                        role.send_replace(Role::Standby { holder });
                    }
                    // Look again when it would expire, at least every retry period.
                    expires_in.min(self.timing.retry)
                }
                Err(LeaseError::Conflict) => {
                    tracing::debug!("leader election: lost a race for the lease; reading again");
                    Duration::from_millis(100 + fastrand::u64(0..200))
                }
                Err(err) => {
                    tracing::warn!("leader election: {err}");
                    if let Some(at) = renewed
                        && at.elapsed() >= self.timing.renew_deadline
                    {
                        return self.lose(
                            &role,
                            format!(
                                "could not renew the lease for {}s: {err}",
                                at.elapsed().as_secs()
                            ),
                        );
                    }
                    if renewed.is_none() {
                        self.health
                            .set_ready(CHECK, false, format!("standby: {err}"));
                    }
                    self.timing.retry
                }
            };
            // The renew deadline also bounds the sleep, so that a holder whose writes hang is
            // checked in time.
            tokio::select! {
                _ = shutdown.cancelled() => {
                    if renewed.is_some() {
                        self.release().await;
                    }
                    role.send_replace(Role::Stopped);
                    return;
                }
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    fn lose(&self, role: &watch::Sender<Role>, why: String) {
        tracing::error!("leader election: lost the lease: {why}");
        self.metrics.leader.set(0);
        self.health
            .set_ready(CHECK, false, format!("lost the lease: {why}"));
        role.send_replace(Role::Lost { why });
    }

    /// Reads the lease and acquires or renews it if it may.
    async fn round(&self) -> Result<Decision, LeaseError> {
        let current = tokio::time::timeout(self.timing.retry, self.api.get_opt(&self.name))
            .await
            .map_err(|_| LeaseError::Read(timeout_error()))?
            .map_err(LeaseError::Read)?;
        let now = Timestamp::now();
        let decision = decide(
            current.as_ref().and_then(|l| l.spec.as_ref()),
            &self.me,
            now,
            self.timing.duration,
        );
        if let Decision::Follow { .. } = decision {
            return Ok(decision);
        }
        let spec = next_spec(
            current.as_ref().and_then(|l| l.spec.as_ref()),
            &self.me,
            now,
            self.timing,
        );
        let write = async {
            match current {
                Some(mut lease) => {
                    // Replace carries the resourceVersion read above: optimistic locking.
                    lease.spec = Some(spec);
                    self.api
                        .replace(&self.name, &PostParams::default(), &lease)
                        .await
                }
                None => {
                    let lease = Lease {
                        metadata: ObjectMeta {
                            name: Some(self.name.clone()),
                            ..ObjectMeta::default()
                        },
                        spec: Some(spec),
                    };
                    self.api.create(&PostParams::default(), &lease).await
                }
            }
        };
        match tokio::time::timeout(self.timing.retry, write).await {
            Err(_) => Err(LeaseError::Write(timeout_error())),
            Ok(Ok(_)) => Ok(decision),
            Ok(Err(kube::Error::Api(status))) if status.code == 409 => Err(LeaseError::Conflict),
            Ok(Err(e)) => Err(LeaseError::Write(e)),
        }
    }

    /// Makes this replica's pod carry the leader label (`leads`) or not; writes only when it
    /// differs from what was last written. Without a pod there is nothing to do.
    async fn label(&mut self, leads: bool) -> Result<(), LabelError> {
        let Some(pod) = &self.pod else {
            return Ok(());
        };
        if self.labelled == Some(leads) {
            return Ok(());
        }
        tokio::time::timeout(self.timing.retry, pod.mark(leads))
            .await
            .unwrap_or_else(|_| Err(timeout_error()))
            .map_err(|source| LabelError {
                pod: pod.name().to_owned(),
                leads,
                source,
            })?;
        tracing::info!(pod = %pod.name(), leads, "leader election: pod label set");
        self.labelled = Some(leads);
        Ok(())
    }

    /// Gives the lease up on shutdown so that a standby takes over at once instead of after
    /// the lease duration.
    async fn release(&mut self) {
        // Off the Service first, so no new connection reaches a replica that is stopping.
        if let Err(e) = self.label(false).await {
            tracing::warn!("leader election: {e}");
        }
        let released = async {
            let mut lease = self.api.get(&self.name).await?;
            let Some(spec) = lease.spec.as_mut() else {
                return Ok(());
            };
            if spec.holder_identity.as_deref() != Some(self.me.as_str()) {
                return Ok(());
            }
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(MicroTime(Timestamp::now()));
            self.api
                .replace(&self.name, &PostParams::default(), &lease)
                .await
                .map(|_| ())
        };
        match tokio::time::timeout(Duration::from_secs(5), released).await {
            Ok(Ok(())) => tracing::info!("leader election: released the lease"),
            Ok(Err(e)) => tracing::warn!("leader election: cannot release the lease: {e}"),
            Err(_) => tracing::warn!("leader election: releasing the lease timed out"),
        }
        self.metrics.leader.set(0);
    }
}

fn timeout_error() -> kube::Error {
    kube::Error::Service(Box::new(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "the apiserver did not answer in time",
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: Duration = Duration::from_secs(15);

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn held(holder: &str, renewed: i64, duration: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(duration),
            renew_time: Some(MicroTime(at(renewed))),
            acquire_time: Some(MicroTime(at(0))),
            lease_transitions: Some(2),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn timing_renews_every_third_and_gives_up_before_expiry() {
        let t = Timing::new(D);
        assert_eq!(t.retry, Duration::from_secs(5));
        assert_eq!(t.renew_deadline, Duration::from_secs(10));
        assert!(t.renew_deadline < t.duration);
    }

    #[test]
    fn no_lease_or_no_holder_is_acquired() {
        assert_eq!(decide(None, "a", at(0), D), Decision::Acquire);
        let mut spec = held("", 0, 15);
        assert_eq!(decide(Some(&spec), "a", at(1), D), Decision::Acquire);
        spec.holder_identity = None;
        assert_eq!(decide(Some(&spec), "a", at(1), D), Decision::Acquire);
    }

    #[test]
    fn own_lease_is_renewed_even_if_expired() {
        assert_eq!(
            decide(Some(&held("a", 0, 15)), "a", at(100), D),
            Decision::Renew
        );
    }

    #[test]
    fn a_live_lease_of_another_is_followed_until_it_expires() {
        let spec = held("b", 10, 15);
        assert_eq!(
            decide(Some(&spec), "a", at(20), D),
            Decision::Follow {
                holder: "b".into(),
                expires_in: Duration::from_secs(5)
            }
        );
        assert_eq!(decide(Some(&spec), "a", at(25), D), Decision::Acquire);
        assert_eq!(decide(Some(&spec), "a", at(40), D), Decision::Acquire);
    }

    #[test]
    fn the_lease_own_duration_counts_and_skew_into_the_future_is_now() {
        let spec = held("b", 10, 60);
        assert!(matches!(
            decide(Some(&spec), "a", at(40), D),
            Decision::Follow { .. }
        ));
        let mut spec = held("b", 10, 15);
        spec.lease_duration_seconds = None;
        assert_eq!(decide(Some(&spec), "a", at(25), D), Decision::Acquire);
        // renewTime ahead of our clock: the full duration is left.
        assert_eq!(
            decide(Some(&held("b", 30, 15)), "a", at(20), D),
            Decision::Follow {
                holder: "b".into(),
                expires_in: D
            }
        );
    }

    #[test]
    fn a_holder_that_never_renewed_is_expired() {
        let mut spec = held("b", 0, 15);
        spec.renew_time = None;
        spec.acquire_time = None;
        assert_eq!(decide(Some(&spec), "a", at(1), D), Decision::Acquire);
    }

    #[test]
    fn next_spec_counts_transitions_and_keeps_acquire_time_on_renewal() {
        let t = Timing::new(D);
        let renewed = next_spec(Some(&held("a", 0, 15)), "a", at(5), t);
        assert_eq!(renewed.lease_transitions, Some(2));
        assert_eq!(renewed.acquire_time, Some(MicroTime(at(0))));
        assert_eq!(renewed.renew_time, Some(MicroTime(at(5))));
        assert_eq!(renewed.lease_duration_seconds, Some(15));

        let taken = next_spec(Some(&held("b", 0, 15)), "a", at(30), t);
        assert_eq!(taken.holder_identity.as_deref(), Some("a"));
        assert_eq!(taken.lease_transitions, Some(3));
        assert_eq!(taken.acquire_time, Some(MicroTime(at(30))));

        let first = next_spec(None, "a", at(1), t);
        assert_eq!(first.lease_transitions, Some(0));
    }

    #[test]
    fn identity_and_namespace_defaults() {
        let args = LeaderElectionArgs {
            leader_election: true,
            leader_election_namespace: None,
            leader_election_lease_name: "x".into(),
            leader_election_identity: Some("me".into()),
            leader_election_lease_duration_secs: 15,
            leader_election_pod: None,
        };
        assert_eq!(args.identity(), "me");
        if std::env::var_os("POD_NAMESPACE").is_none() {
            assert_eq!(args.namespace(Some("ns")), "ns");
            assert_eq!(args.namespace(None), "default");
        }
        let anonymous = LeaderElectionArgs {
            leader_election_identity: None,
            ..args
        };
        if std::env::var_os("POD_NAME").is_none() {
            assert!(
                anonymous
                    .identity()
                    .ends_with(&format!("_{}", std::process::id()))
            );
        }
    }

    #[tokio::test]
    async fn disabled_leads_at_once_and_never_loses() {
        let metrics = LeaderMetrics::default();
        let mut election = LeaderElection::disabled(&metrics);
        assert!(election.acquired().await);
        assert_eq!(metrics.leader.get(), 1);
        let lost = tokio::time::timeout(Duration::from_millis(50), election.lost()).await;
        assert!(lost.is_err());
    }

    #[tokio::test]
    async fn roles_resolve_acquired_and_lost() {
        let (tx, role) = watch::channel(Role::Pending);
        let mut election = LeaderElection { role: Some(role) };
        let waiter = tokio::spawn({
            let mut e = election.clone();
            async move { e.acquired().await }
        });
        tx.send_replace(Role::Standby { holder: "b".into() });
        tx.send_replace(Role::Leader);
        assert!(waiter.await.unwrap());
        tx.send_replace(Role::Lost { why: "gone".into() });
        assert_eq!(election.lost().await, "gone");
        let (tx, role) = watch::channel(Role::Pending);
        let mut stopped = LeaderElection { role: Some(role) };
        tx.send_replace(Role::Stopped);
        assert!(!stopped.acquired().await);
    }
}
