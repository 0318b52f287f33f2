//! The StrimziPodSet controller: keeps the pods listed in every `StrimziPodSet` of the agent's
//! cluster (or namespace) in existence, from what the local apiserver stores, whether or not
//! central or any `Kafka` resource is there.
//!
//! # What it does
//!
//! Per podset, following Strimzi's `StrimziPodSetController` (see [`plan`] for the rules and the
//! places where it deliberately differs): creates the listed pods that do not exist (in the
//! podset's namespace, with a controller owner reference that blocks owner deletion), deletes
//! pods that match `spec.selector` but are no longer listed, deletes listed pods in phase `Failed`
//! or `Succeeded` (they are created again once gone), adds a missing owner reference to a listed
//! pod, waits for pods being deleted, and leaves a podset that is being deleted to the garbage
//! collector. It never rolls a pod: the `strimzi.io/revision` annotations only count
//! `currentPods`. The status (`observedGeneration`, `pods`, `readyPods`, `currentPods`, and an
//! `Error` condition carrying the apiserver's message while a pod cannot be created) is written
//! by server-side apply, only when it changed.
//!
//! # How it runs
//!
//! A kube-runtime [`Controller`] on podsets, also triggered by pod events mapped to their podset
//! (owner reference, else Strimzi's `strimzi.io/controller`/`controller-name` labels, else the
//! podsets whose selector matches: a stray pod must wake the podset that deletes it). The
//! controller's queue de-duplicates requests per podset, never reconciles one podset twice at a
//! time, and runs at most `--podset-concurrency` reconciliations at once. Each successful pass
//! requeues itself after `--resync-interval`; failures are retried with per-podset exponential
//! backoff (`kstretch_runtime::backoff`). Reconciliations read only the watch caches and write only
//! what the plan says; nothing is deleted before both caches have completed their first list
//! ([`error::Error::NotSynced`]). Pods are decoded without their spec and trimmed before they
//! enter the cache ([`CachedPod`]) because the agent watches every pod of its scope, and a
//! podset's pods are cached as names and revisions only ([`plan::slim_pod_entry`]): a pass that
//! creates pods reads their manifests from the apiserver then, so a pod is created from the
//! podset as it is now (a pod whose entry changed since the plan waits for that change's own
//! pass).
//!
//! # Readiness and liveness
//!
//! A podset controller with a dead watch is worse than a crashed one: it looks fine while deleted
//! Kafka pods stay deleted. So its health says whether its view of the cluster is live:
//!
//! - **Readiness** (`/readyz`): one check per watch, `podset-controller/watch:StrimziPodSet` and
//!   `podset-controller/watch:Pod` (with several namespaces in `--namespace`, one watch and one
//!   check per namespace and kind, `podset-controller/watch:Pod/<namespace>`, all of a kind
//!   feeding one cache, see `kstretch_runtime::reflect`), failing until the watch's first complete list has arrived and
//!   again whenever the watch stream reports an error, until its next good event (kube's watcher
//!   retries with backoff and re-lists after a `410 Gone`). A third check,
//!   `podset-controller/apiserver`, follows the periodic probe below.
//! - **Liveness** (`/healthz`): the heartbeat `podset-controller`, renewed by a supervisor every
//!   `--apiserver-probe-interval` only when [`health::liveness`] holds: no watch has been failing
//!   continuously for longer than `--watch-failure-allowance`, every watch synced within that
//!   allowance of start-up, and the apiserver answered the cheap probe (a `limit=1` metadata list
//!   of pods, the resource the controller depends on, bounded by a timeout) within the allowance.
//!   When the verdict fails, or the supervisor or the controller itself stops, the heartbeat is
//!   not renewed and `/healthz` fails two probe rounds later; the kubelet restarts the agent with
//!   a fresh client and fresh watches.
//! - A watch that stalls without an error (a half-open connection) is cut by kube's watcher
//!   itself: it closes a watch that has been silent past the server-side timeout (290 s) plus a
//!   margin and reconnects; if reconnecting fails, that is an error, and the rules above apply.
//!   The apiserver probe catches an unreachable apiserver long before that.
//!
//! The verdicts are pure functions of recorded state and the clock, unit-tested in [`health`].

pub mod cached_pod;
pub mod error;
pub mod health;
pub mod metrics;
pub mod plan;
pub mod reconcile;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cached_pod::CachedPod;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kstretch_api::StrimziPodSet;
use kstretch_runtime::namespaces::Namespaces;
use kstretch_runtime::reflect::{Merged, reflect_each};
use kstretch_runtime::watch::WatchMetrics;
use kstretch_runtime::{Health, Registry};
use kube::api::ListParams;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;

use health::{Allowances, KindWatch};
use metrics::Metrics;
use reconcile::Context;

/// A bound on every liveness probe request.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Flags of the podset controller.
#[derive(clap::Args, Debug, Clone)]
pub struct PodSetArgs {
    /// How many podsets are reconciled at the same time.
    #[arg(
        long = "podset-concurrency",
        env = "KSTRETCH_PODSET_CONCURRENCY",
        default_value_t = 8,
        value_parser = clap::value_parser!(u16).range(1..)
    )]
    pub concurrency: u16,

    /// Every podset is reconciled at least this often, events or not (`300s`, `5m`, `1h`).
    #[arg(long, env = "KSTRETCH_RESYNC_INTERVAL", default_value = "300s", value_parser = parse_duration)]
    pub resync_interval: Duration,

    /// How often the apiserver is probed for the liveness verdict.
    #[arg(long, env = "KSTRETCH_APISERVER_PROBE_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    pub apiserver_probe_interval: Duration,

    /// How long a watch may keep failing (or stay unsynced, or the apiserver unanswering) before
    /// `/healthz` fails so that the agent is restarted.
    #[arg(long, env = "KSTRETCH_WATCH_FAILURE_ALLOWANCE", default_value = "120s", value_parser = parse_duration)]
    pub watch_failure_allowance: Duration,
}

/// Parses `500ms`, `30s`, `5m`, `1h`, or plain seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 30s, 5m or 500ms"))?;
    let duration = match unit {
        "" | "s" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        other => return Err(format!("unknown unit {other:?} in {text:?} (ms, s, m, h)")),
    };
    if duration.is_zero() {
        return Err(format!("{text:?} must be longer than zero"));
    }
    Ok(duration)
}

/// The podset controller, ready to run.
pub struct PodSetController {
    client: Client,
    namespaces: Namespaces,
    args: PodSetArgs,
    health: Health,
    metrics: Metrics,
    watch_metrics: WatchMetrics,
    caches: Caches,
    podset_writer: reflector::store::Writer<StrimziPodSet>,
    pod_writer: reflector::store::Writer<CachedPod>,
}

/// The controller's watch caches, shared read-only with the rest of the agent (the link reports
/// podset status from them) so that the agent watches podsets and pods once.
#[derive(Debug, Clone)]
pub struct Caches {
    pub podsets: Store<StrimziPodSet>,
    /// Trimmed pods ([`CachedPod::trim`]): metadata, phase, the `Ready` condition and
    /// containers with something to say.
    pub pods: Store<CachedPod>,
    podset_watch: Arc<KindWatch>,
    pod_watch: Arc<KindWatch>,
}

impl Caches {
    /// True once both caches hold a complete first list.
    pub fn synced(&self) -> bool {
        self.podset_watch.synced() && self.pod_watch.synced()
    }
}

impl std::fmt::Debug for PodSetController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodSetController")
            .field("namespaces", &self.namespaces)
            .field("args", &self.args)
            .finish_non_exhaustive()
    }
}

impl PodSetController {
    /// Registers the controller's metrics; call before the metrics registry is served.
    pub fn new(
        client: Client,
        namespaces: Namespaces,
        args: PodSetArgs,
        health: Health,
        registry: &mut Registry,
        watch_metrics: WatchMetrics,
    ) -> PodSetController {
        let (podsets, podset_writer) = reflector::store::<StrimziPodSet>();
        let (pods, pod_writer) = reflector::store::<CachedPod>();
        let caches = Caches {
            podsets,
            pods,
            podset_watch: KindWatch::new("StrimziPodSet", &namespaces, &health),
            pod_watch: KindWatch::new("Pod", &namespaces, &health),
        };
        PodSetController {
            client,
            namespaces,
            args,
            health,
            metrics: Metrics::register(registry),
            watch_metrics,
            caches,
            podset_writer,
            pod_writer,
        }
    }

    /// The caches the controller fills while it runs.
    pub fn caches(&self) -> Caches {
        self.caches.clone()
    }

    /// Runs until `shutdown`; in-flight reconciliations finish first.
    pub async fn run(self, shutdown: CancellationToken) {
        let Caches {
            podsets: podset_store,
            pods: pod_store,
            podset_watch,
            pod_watch,
        } = self.caches.clone();
        // The probe lists pods where the agent watches them: one namespace of the list is enough
        // to tell whether the apiserver answers.
        let probe_api: Api<Pod> = match self.namespaces.first() {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        let podsets = watch_each(
            self.namespaces.apis::<StrimziPodSet>(&self.client),
            // Managed fields are never read and can be as large as the spec; of the pods'
            // manifests only names and revisions are kept (see `plan::slim_pod_entry`).
            |podset: &mut StrimziPodSet| {
                podset.metadata.managed_fields = None;
                for entry in &mut podset.spec.pods {
                    *entry = plan::slim_pod_entry(entry);
                }
            },
            self.podset_writer,
            podset_watch.clone(),
            self.watch_metrics.clone(),
            "StrimziPodSet",
        )
        // Every change triggers, status-only ones included: the status is written only when it
        // differs from the cached one, so the echo of the controller's own status write is what
        // corrects a pass that compared against a cache not yet showing that write. (Filtering
        // status changes out once left a podset's status stale until the resync.)
        .applied_objects()
        // Errors were recorded above and the watcher retries them with its own backoff;
        // passing them on would also pause the controller's other trigger streams.
        .filter_map(|item| std::future::ready(item.ok().map(Ok)));
        let pods = watch_each(
            self.namespaces.apis::<CachedPod>(&self.client),
            CachedPod::trim,
            self.pod_writer,
            pod_watch.clone(),
            self.watch_metrics.clone(),
            "Pod",
        )
        // Deletions too: a deleted pod must wake its podset to be created again.
        .touched_objects()
        .filter_map(|item| std::future::ready(item.ok().map(Ok)));

        let ctx = Arc::new(Context::new(
            self.client.clone(),
            pod_store,
            podset_store.clone(),
            pod_watch.clone(),
            podset_watch.clone(),
            self.metrics.clone(),
            self.args.resync_interval,
        ));
        let mapper_podsets = podset_store.clone();
        let stop_token = shutdown.clone();
        let controller = Controller::for_stream(podsets, podset_store)
            .watches_stream(pods, move |pod: CachedPod| {
                podsets_of(&pod, &mapper_podsets)
            })
            .with_config(controller::Config::default().concurrency(self.args.concurrency))
            .graceful_shutdown_on(async move { stop_token.cancelled().await })
            .run(reconcile::reconcile, reconcile::error_policy, ctx)
            .for_each(|result| {
                log_result(result);
                std::future::ready(())
            });

        // The supervisor renews the liveness heartbeat; it stops with the controller, so a
        // controller that ends on its own is noticed by the kubelet.
        let supervisor_stop = shutdown.child_token();
        let supervisor = supervise(
            probe_api,
            self.health.clone(),
            [pod_watch, podset_watch],
            self.args.apiserver_probe_interval,
            Allowances {
                failure: self.args.watch_failure_allowance,
            },
            supervisor_stop.clone(),
        );
        let health = self.health.clone();
        let controller = async move {
            controller.await;
            if !shutdown.is_cancelled() {
                tracing::error!("the podset controller stopped; /healthz will fail");
                health.set_ready(health::HEARTBEAT, false, "controller stopped");
            }
            supervisor_stop.cancel();
        };
        tracing::info!(
            namespaces = %self.namespaces,
            concurrency = self.args.concurrency,
            resync = ?self.args.resync_interval,
            "podset controller started"
        );
        tokio::join!(controller, supervisor);
        tracing::info!("podset controller stopped");
    }
}

/// The podsets a pod event concerns (see [`plan::podsets_named_by_pod`] and
/// [`plan::podsets_selecting`]).
fn podsets_of(pod: &CachedPod, podsets: &Store<StrimziPodSet>) -> Vec<ObjectRef<StrimziPodSet>> {
    let Some(namespace) = pod.namespace() else {
        return Vec::new();
    };
    let mut names = plan::podsets_named_by_pod(&pod.metadata);
    if names.is_empty() {
        let candidates: Vec<Arc<StrimziPodSet>> = podsets
            .state()
            .into_iter()
            .filter(|ps| ps.metadata.namespace.as_deref() == Some(namespace.as_str()))
            .collect();
        names = plan::podsets_selecting(
            pod.metadata.labels.as_ref(),
            candidates
                .iter()
                .map(|ps| (ps.metadata.name.as_deref().unwrap_or(""), &ps.spec.selector)),
        );
    }
    names
        .into_iter()
        .map(|name| ObjectRef::new(&name).within(&namespace))
        .collect()
}

/// The watches of `apis` (one per namespace, or one of all), each object changed by `modify`
/// and each watch retried with the default backoff, applied to `writer`'s one store (see
/// [`kstretch_runtime::reflect`]) and each item recorded in its part of `state` and in the
/// metrics, as one stream.
fn watch_each<K, M>(
    apis: Vec<(Option<String>, Api<K>)>,
    modify: M,
    writer: reflector::store::Writer<K>,
    state: Arc<KindWatch>,
    metrics: WatchMetrics,
    kind: &'static str,
) -> impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send
where
    M: Fn(&mut K) + Clone + Send + 'static,
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + k8s_openapi::serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (namespaces, streams): (Vec<_>, Vec<_>) = apis
        .into_iter()
        .map(|(ns, api)| {
            let stream = watcher(api, watcher::Config::default())
                .modify(modify.clone())
                .default_backoff();
            (ns, stream)
        })
        .unzip();
    let merged = Merged::new(writer, namespaces);
    let observe = observe(state, metrics, merged.store(), kind);
    reflect_each(streams, merged).map(move |(part, item)| {
        observe(part, &item);
        item
    })
}

/// Records every item of a watch stream into its part's [`health::WatchState`] and the metrics (the
/// kind's objects are the one store's).
fn observe<K>(
    state: Arc<KindWatch>,
    metrics: WatchMetrics,
    store: Store<K>,
    kind: &'static str,
) -> impl Fn(usize, &Result<watcher::Event<K>, watcher::Error>)
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    move |part, item| {
        let Some(state) = state.part(part) else {
            return;
        };
        match item {
            Ok(event) => {
                state.progress(matches!(event, watcher::Event::InitDone));
                metrics.set_objects(kind, store.len());
            }
            Err(err) => {
                metrics.error(kind);
                tracing::warn!(kind, %err, "watch failed; retrying");
                state.error(err.to_string());
            }
        }
    }
}

fn log_result<E: std::fmt::Debug>(
    result: Result<
        (ObjectRef<StrimziPodSet>, kube::runtime::controller::Action),
        controller::Error<error::Error, E>,
    >,
) {
    match result {
        Ok(_) => {}
        // Logged with its span by the reconciler.
        Err(controller::Error::ReconcilerFailed(..)) => {}
        // A pod event for a podset that is gone (garbage collection after a podset deletion).
        Err(controller::Error::ObjectNotFound(obj)) => {
            tracing::debug!(podset = %obj, "event for a podset that no longer exists");
        }
        Err(err) => tracing::warn!(?err, "podset controller queue error"),
    }
}

/// Probes the apiserver every `interval` and renews the liveness heartbeat while the verdict of
/// [`health::liveness`] holds. Ends when `stop` is cancelled.
async fn supervise(
    probe: Api<Pod>,
    health: Health,
    watches: [Arc<KindWatch>; 2],
    interval: Duration,
    allowances: Allowances,
    stop: CancellationToken,
) {
    let started = Instant::now();
    let beat_allowance = health::heartbeat_allowance(interval, PROBE_TIMEOUT);
    // Start-up grace: the first lists of a large cluster may take a while, and the verdict only
    // turns on them after the failure allowance.
    health.beat(health::HEARTBEAT, allowances.failure + beat_allowance);
    health.set_ready(health::PROBE_CHECK, false, "not probed yet");
    let mut last_probe_ok: Option<Instant> = None;
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut unhealthy = false;
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = ticker.tick() => {}
        }
        let params = ListParams::default().limit(1);
        match tokio::time::timeout(PROBE_TIMEOUT, probe.list_metadata(&params)).await {
            Ok(Ok(_)) => {
                last_probe_ok = Some(Instant::now());
                health.set_ready(health::PROBE_CHECK, true, "answering");
            }
            Ok(Err(err)) => {
                tracing::warn!(%err, "apiserver probe failed");
                health.set_ready(health::PROBE_CHECK, false, err.to_string());
            }
            Err(_) => {
                tracing::warn!(timeout = ?PROBE_TIMEOUT, "apiserver probe timed out");
                health.set_ready(health::PROBE_CHECK, false, "probe timed out");
            }
        }
        let snapshots: Vec<_> = watches.iter().flat_map(|w| w.snapshots()).collect();
        match health::liveness(
            Instant::now(),
            started,
            &snapshots,
            last_probe_ok,
            allowances,
        ) {
            Ok(()) => {
                if unhealthy {
                    tracing::info!("podset controller healthy again");
                    unhealthy = false;
                }
                health.beat(health::HEARTBEAT, beat_allowance);
            }
            Err(why) => {
                if !unhealthy {
                    tracing::error!(%why, "podset controller unhealthy; /healthz will fail");
                    unhealthy = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("300s"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5 minutes").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn flags_have_sane_defaults() {
        use clap::Parser;
        #[derive(Parser, Debug)]
        struct Cli {
            #[command(flatten)]
            podsets: PodSetArgs,
        }
        let cli = Cli::try_parse_from(["agent"]).expect("defaults parse");
        assert_eq!(cli.podsets.resync_interval, Duration::from_secs(300));
        assert_eq!(cli.podsets.concurrency, 8);
        assert!(Cli::try_parse_from(["agent", "--podset-concurrency", "0"]).is_err());
        let cli = Cli::try_parse_from(["agent", "--resync-interval", "30s"]).expect("parses");
        assert_eq!(cli.podsets.resync_interval, Duration::from_secs(30));
    }
}
