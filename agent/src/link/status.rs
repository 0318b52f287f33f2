//! What the agent tells central about its podsets: per podset the counts its controller wrote
//! into `.status`, and per listed pod whether it exists (its UID), its phase, readiness and
//! revision; and where each per-node Service is reachable (load balancer ingress, node ports).
//! The report is computed from watch caches by pure functions, and sent only when it changed.

use std::sync::Arc;

use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kstretch_api::StrimziPodSet;
use kstretch_proto::agent::v1::{
    PodSetStatus, PodStatus, ServicePort, ServiceStatus, StatusReport,
};
use kstretch_runtime::namespaces::Namespaces;
use kstretch_runtime::reflect::{Merged, reflect_each};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

use super::nodes::Nodes;
use crate::podset::Caches;
use crate::podset::cached_pod::{CachedPod, says_something};

/// The report for `podsets`, looking pods up with `pod` (by namespace and name); ordered by
/// namespace and name.
pub fn report(
    podsets: &[Arc<StrimziPodSet>],
    pod: impl Fn(&str, &str) -> Option<Arc<CachedPod>>,
) -> StatusReport {
    let mut out: Vec<PodSetStatus> = podsets
        .iter()
        .map(|ps| {
            let namespace = ps.namespace().unwrap_or_default();
            let status = ps.status.as_ref();
            let count = |f: fn(&kstretch_api::StrimziPodSetStatus) -> Option<i32>| {
                status.and_then(f).unwrap_or(-1)
            };
            PodSetStatus {
                name: ps.name_any(),
                pods: count(|s| s.pods),
                ready_pods: count(|s| s.ready_pods),
                current_pods: count(|s| s.current_pods),
                generation: ps.metadata.generation.unwrap_or_default(),
                observed_generation: status
                    .and_then(|s| s.observed_generation)
                    .unwrap_or_default(),
                pods_status: ps
                    .spec
                    .pod_names()
                    .into_iter()
                    .map(|name| match pod(&namespace, name) {
                        Some(p) => PodStatus {
                            name: name.to_owned(),
                            uid: p.uid().unwrap_or_default(),
                            ready: is_ready(&p),
                            phase: p
                                .status
                                .as_ref()
                                .and_then(|s| s.phase.clone())
                                .unwrap_or_default(),
                            revision: p
                                .annotations()
                                .get(kstretch_api::names::REVISION)
                                .cloned()
                                .unwrap_or_default(),
                            message: containers_say(&p),
                            node_name: p.node_name().unwrap_or_default().to_owned(),
                            manual_rolling_update: crate::podset::plan::asks_manual_roll(
                                p.metadata.annotations.as_ref(),
                            ),
                            delete_pod_and_pvc: crate::podset::plan::asks_new_disks(
                                p.metadata.annotations.as_ref(),
                            ),
                            terminating: p.metadata.deletion_timestamp.is_some(),
                        },
                        None => PodStatus {
                            name: name.to_owned(),
                            ..PodStatus::default()
                        },
                    })
                    .collect(),
                cluster_id: ps
                    .annotations()
                    .get(kstretch_api::names::CLUSTER_ID)
                    .cloned()
                    .unwrap_or_default(),
                controller_quorum: ps
                    .annotations()
                    .get(kstretch_api::names::CONTROLLER_QUORUM)
                    .cloned()
                    .unwrap_or_default(),
                namespace,
            }
        })
        .collect();
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    StatusReport {
        podsets: out,
        ..StatusReport::default()
    }
}

/// What `pod`'s containers report beyond running (`PodStatus.message`): init containers
/// that ended with a message or failed, and containers waiting for another reason than
/// starting; `; `-separated, empty when there is nothing to say.
pub fn containers_say(pod: &CachedPod) -> String {
    let Some(status) = &pod.status else {
        return String::new();
    };
    let mut said = Vec::new();
    let init = status.init_container_statuses.iter().flatten();
    let main = status.container_statuses.iter().flatten();
    for (kind, c) in init
        .map(|c| ("init container", c))
        .chain(main.map(|c| ("container", c)))
    {
        let Some(state) = c.state.as_ref().filter(|s| says_something(s)) else {
            continue;
        };
        if let Some(t) = &state.terminated {
            let how = t.reason.clone().unwrap_or_else(|| "Terminated".to_owned());
            let mut line = format!("{kind} {} {how} (exit code {})", c.name, t.exit_code);
            if let Some(m) = t
                .message
                .as_ref()
                .map(|m| m.trim())
                .filter(|m| !m.is_empty())
            {
                line.push_str(&format!(": {m}"));
            }
            said.push(line);
        } else if let Some(w) = &state.waiting {
            let reason = w.reason.as_deref().unwrap_or("Waiting");
            let mut line = format!("{kind} {} {reason}", c.name);
            if let Some(m) = w.message.as_ref().filter(|m| !m.trim().is_empty()) {
                line.push_str(&format!(": {}", m.trim()));
            }
            // Crash-looping: the last run's message is what says why.
            if let Some(last) = c.last_state.as_ref().and_then(|s| s.terminated.as_ref())
                && let Some(m) = last.message.as_ref().filter(|m| !m.trim().is_empty())
            {
                line.push_str(&format!("; last run: {}", m.trim()));
            }
            said.push(line);
        }
    }
    said.join("; ")
}

/// Label central puts on per-node Services; only those are watched and reported.
pub const NODE_SERVICE_LABEL: &str = kstretch_api::names::NODE_SERVICE;

/// Where `services` are reachable, ordered by namespace and name.
pub fn service_statuses(services: &[Arc<Service>]) -> Vec<ServiceStatus> {
    let mut out: Vec<ServiceStatus> = services
        .iter()
        .map(|svc| {
            let spec = svc.spec.as_ref();
            ServiceStatus {
                namespace: svc.namespace().unwrap_or_default(),
                name: svc.name_any(),
                r#type: spec.and_then(|s| s.type_.clone()).unwrap_or_default(),
                ingress: svc
                    .status
                    .as_ref()
                    .and_then(|s| s.load_balancer.as_ref())
                    .and_then(|lb| lb.ingress.as_ref())
                    .into_iter()
                    .flatten()
                    .filter_map(|i| i.ip.clone().or_else(|| i.hostname.clone()))
                    .collect(),
                ports: spec
                    .and_then(|s| s.ports.as_ref())
                    .into_iter()
                    .flatten()
                    .map(|p| ServicePort {
                        name: p.name.clone().unwrap_or_default(),
                        port: p.port,
                        node_port: p.node_port.unwrap_or_default(),
                    })
                    .collect(),
            }
        })
        .collect();
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}

/// A watch of the per-node Services in the agent's namespaces (one per namespace, into one
/// store), or in all.
#[derive(Debug, Clone)]
pub struct NodeServices {
    store: Store<Service>,
    synced: Arc<AtomicBool>,
}

impl NodeServices {
    /// Starts the watch; it runs until the returned future ends with `shutdown`.
    pub fn start(
        client: &Client,
        namespaces: &Namespaces,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> (Self, impl std::future::Future<Output = ()> + Send + 'static) {
        let (namespaces, apis): (Vec<_>, Vec<Api<Service>>) =
            namespaces.apis(client).into_iter().unzip();
        let merged = Merged::new(reflector::store::Writer::default(), namespaces);
        let (store, synced) = (merged.store(), merged.synced());
        let config = watcher::Config::default().labels(&format!("{NODE_SERVICE_LABEL}=true"));
        let streams = apis
            .into_iter()
            .map(|api| watcher(api, config.clone()).default_backoff())
            .collect();
        let task = async move {
            // `synced` is set once every namespace has listed.
            let stream = reflect_each(streams, merged).for_each(move |(_, event)| {
                if let Err(e) = event {
                    tracing::warn!(error = %e, "per-node service watch failed; retrying")
                }
                async {}
            });
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = stream => {}
            }
        };
        (Self { store, synced }, task)
    }

    fn report(&self) -> Option<Vec<ServiceStatus>> {
        self.synced
            .load(Ordering::Acquire)
            .then(|| service_statuses(&self.store.state()))
    }
}

/// True when the pod's `Ready` condition is `True` and it is not being deleted.
pub fn is_ready(pod: &CachedPod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && pod.is_ready()
}

/// The caches a status report is computed from: the podset controller's, so that the agent
/// watches podsets and pods once.
#[derive(Debug, Clone)]
pub struct StatusSource {
    caches: Caches,
    services: NodeServices,
    nodes: Nodes,
}

impl StatusSource {
    pub fn new(caches: Caches, services: NodeServices, nodes: Nodes) -> Self {
        Self {
            caches,
            services,
            nodes,
        }
    }

    /// The current report, or `None` until both caches hold a complete list (a report of
    /// "no pods" that only means "not listed yet" would mislead central).
    pub fn report(&self) -> Option<StatusReport> {
        if !self.caches.synced() {
            return None;
        }
        let pods = &self.caches.pods;
        let services = self.services.report()?;
        let mut report = report(&self.caches.podsets.state(), |ns, name| {
            pods.get(&ObjectRef::new(name).within(ns))
        });
        report.services = services;
        // Nodes are reported once listed; an agent that may not list them still reports the
        // rest (only `nodeport` listeners need them).
        if let Some(nodes) = self.nodes.report() {
            report.nodes = nodes;
            report.nodes_listed = true;
        }
        Some(report)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    fn podset(name: &str, pods: &[&str], status: Option<serde_json::Value>) -> Arc<StrimziPodSet> {
        let pods: Vec<_> = pods
            .iter()
            .map(|p| json!({"metadata": {"name": p}}))
            .collect();
        let mut value = json!({
            "apiVersion": "core.strimzi.io/v1", "kind": "StrimziPodSet",
            "metadata": {"name": name, "namespace": "ns", "generation": 3},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "pods": pods}
        });
        if let Some(status) = status {
            value["status"] = status;
        }
        Arc::new(serde_json::from_value(value).unwrap())
    }

    fn pod(name: &str, uid: &str, ready: &str) -> Arc<CachedPod> {
        let mut p: CachedPod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": uid,
                         "annotations": {"big": "x"}, "managedFields": [{"manager": "m"}]},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "conditions": [
                {"type": "Ready", "status": ready},
                {"type": "ContainersReady", "status": ready}]}
        }))
        .unwrap();
        p.trim();
        Arc::new(p)
    }

    #[test]
    fn containers_say_what_failed_or_ended_with_a_message_and_a_healthy_pod_says_nothing() {
        let mut p: CachedPod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "status": {"phase": "Running",
                "initContainerStatuses": [
                    {"name": "recover-quorum", "image": "i", "imageID": "x", "ready": true,
                     "restartCount": 0, "state": {"terminated": {"exitCode": 0,
                        "reason": "Completed", "message": "{\"epoch\":7}\n"}}},
                    {"name": "quiet", "image": "i", "imageID": "x", "ready": true,
                     "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}],
                "containerStatuses": [
                    {"name": "kafka", "image": "i", "imageID": "x", "ready": false,
                     "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff",
                        "message": "back-off 40s"}},
                     "lastState": {"terminated": {"exitCode": 1, "message": "no quorum"}}},
                    {"name": "starting", "image": "i", "imageID": "x", "ready": false,
                     "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}]}
        }))
        .unwrap();
        p.trim();
        assert_eq!(
            containers_say(&p),
            "init container recover-quorum Completed (exit code 0): {\"epoch\":7}; \
             container kafka CrashLoopBackOff: back-off 40s; last run: no quorum"
        );
        let kept = p.status.as_ref().unwrap();
        assert_eq!(kept.init_container_statuses.as_ref().unwrap().len(), 1);
        assert!(
            kept.container_statuses.as_ref().unwrap()[0]
                .image
                .is_empty()
        );
        assert_eq!(containers_say(&pod("q", "u", "True")), "");
    }

    #[test]
    fn reports_counts_from_status_and_readiness_per_listed_pod() {
        let podsets = vec![
            podset(
                "kafka-b",
                &["b-0", "b-1", "b-2"],
                Some(json!({"pods": 3, "readyPods": 1, "currentPods": 3, "observedGeneration": 3})),
            ),
            podset("kafka-a", &[], None),
        ];
        let pods = [pod("b-0", "u0", "True"), pod("b-1", "u1", "False")];
        let report = report(&podsets, |ns, name| {
            assert_eq!(ns, "ns");
            pods.iter().find(|p| p.name_any() == name).cloned()
        });
        let names: Vec<_> = report.podsets.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["kafka-a", "kafka-b"]);
        let a = &report.podsets[0];
        assert_eq!((a.pods, a.ready_pods, a.current_pods), (-1, -1, -1));
        let b = &report.podsets[1];
        assert_eq!((b.pods, b.ready_pods, b.current_pods), (3, 1, 3));
        assert_eq!((b.generation, b.observed_generation), (3, 3));
        let pods: Vec<_> = b
            .pods_status
            .iter()
            .map(|p| (p.name.as_str(), p.uid.as_str(), p.ready, p.phase.as_str()))
            .collect();
        assert_eq!(
            pods,
            [
                ("b-0", "u0", true, "Running"),
                ("b-1", "u1", false, "Running"),
                ("b-2", "", false, "")
            ]
        );
    }

    #[test]
    fn trimming_keeps_what_the_report_reads() {
        let p = pod("p", "u", "True");
        assert!(p.metadata.annotations.is_none());
        assert!(p.metadata.managed_fields.is_none());
        assert!(is_ready(&p));
        assert_eq!(
            p.status
                .as_ref()
                .unwrap()
                .conditions
                .as_ref()
                .unwrap()
                .len(),
            1
        );
    }
}
