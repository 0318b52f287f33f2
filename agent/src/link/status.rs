//! What the agent tells central about its podsets: per podset the counts its controller wrote
//! into `.status`, and per listed pod whether it exists (its UID), its phase and readiness.
//! The report is computed from watch caches by a pure function, and sent only when it changed.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kstretch_api::StrimziPodSet;
use kstretch_proto::agent::v1::{PodSetStatus, PodStatus, StatusReport};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::podset::Caches;

/// The report for `podsets`, looking pods up with `pod` (by namespace and name); ordered by
/// namespace and name.
pub fn report(
    podsets: &[Arc<StrimziPodSet>],
    pod: impl Fn(&str, &str) -> Option<Arc<Pod>>,
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
                        },
                        None => PodStatus {
                            name: name.to_owned(),
                            ..PodStatus::default()
                        },
                    })
                    .collect(),
                namespace,
            }
        })
        .collect();
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    StatusReport { podsets: out }
}

/// True when the pod's `Ready` condition is `True` and it is not being deleted.
pub fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The caches a status report is computed from: the podset controller's, so that the agent
/// watches podsets and pods once.
#[derive(Debug, Clone)]
pub struct StatusSource {
    caches: Caches,
}

impl StatusSource {
    pub fn new(caches: Caches) -> Self {
        Self { caches }
    }

    /// The current report, or `None` until both caches hold a complete list (a report of
    /// "no pods" that only means "not listed yet" would mislead central).
    pub fn report(&self) -> Option<StatusReport> {
        if !self.caches.synced() {
            return None;
        }
        let pods = &self.caches.pods;
        Some(report(&self.caches.podsets.state(), |ns, name| {
            pods.get(&ObjectRef::new(name).within(ns))
        }))
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

    fn pod(name: &str, uid: &str, ready: &str) -> Arc<Pod> {
        let mut p: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": uid,
                         "annotations": {"big": "x"}, "managedFields": [{"manager": "m"}]},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "conditions": [
                {"type": "Ready", "status": ready},
                {"type": "ContainersReady", "status": ready}]}
        }))
        .unwrap();
        crate::podset::plan::trim_pod(&mut p);
        Arc::new(p)
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
        assert!(p.spec.is_none());
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
        assert!(p.status.as_ref().unwrap().pod_ip.is_none());
    }
}
