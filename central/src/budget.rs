//! The PodDisruptionBudget of an owning resource's pods in one member cluster (Strimzi's
//! `<name>-kafka` and `<name>-connect`, with its `template.podDisruptionBudget`), and how a
//! stretched Kafka keeps one budget across member clusters that no apiserver sees whole: while
//! a node of it is not ready in any cluster, or its controller quorum is not whole, every
//! cluster's budget allows no eviction. The cluster where the node is down is closed too: its
//! own apiserver would allow an eviction as soon as the pod is ready again, before central has
//! seen the node rejoin the quorum. kstretch's own rolls delete pods; budgets hold only
//! evictions (`kubectl drain`).
//!
//! As Strimzi does for pods of a StrimziPodSet (a controller without a scale subresource, whose
//! pods the disruption controller cannot count for `maxUnavailable`), a budget states
//! `minAvailable`: the pods there less the evictions allowed. Pure.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kstretch_api::common::OpaqueObject;
use kstretch_proto::agent::v1::PodSetStatus;
use serde_json::Value;

/// Strimzi's default `template.podDisruptionBudget.maxUnavailable`.
pub const DEFAULT_MAX_UNAVAILABLE: i32 = 1;

/// One budget to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget<'a> {
    pub name: String,
    pub namespace: &'a str,
    /// The labels of everything built for the resource.
    pub labels: BTreeMap<String, String>,
    /// What selects the pods it protects.
    pub selector: BTreeMap<String, String>,
    /// How many pods it protects.
    pub pods: usize,
    /// The resource's `template`, whose `podDisruptionBudget` part applies.
    pub template: Option<&'a OpaqueObject>,
    /// Whether the budget allows no eviction now, whatever the template says.
    pub closed: bool,
}

/// `template.podDisruptionBudget.maxUnavailable`, else [`DEFAULT_MAX_UNAVAILABLE`].
pub fn max_unavailable(template: Option<&OpaqueObject>) -> i32 {
    part(template)
        .and_then(|p| p.get("maxUnavailable"))
        .and_then(Value::as_i64)
        .and_then(|n| i32::try_from(n).ok())
        .filter(|n| *n >= 0)
        .unwrap_or(DEFAULT_MAX_UNAVAILABLE)
}

fn part(template: Option<&OpaqueObject>) -> Option<&OpaqueObject> {
    template?.get("podDisruptionBudget")?.as_object()
}

/// The budget as the JSON the link carries.
pub fn pod_disruption_budget(budget: &Budget<'_>) -> Value {
    let metadata = part(budget.template).and_then(|p| p.get("metadata"));
    let extra = |key: &str| {
        metadata
            .and_then(|m| m.get(key))
            .map(crate::objects::strings)
            .unwrap_or_default()
    };
    // The template adds labels; ours win.
    let mut labels = extra("labels");
    labels.extend(budget.labels.clone());
    let annotations = extra("annotations");
    let evictable = if budget.closed {
        0
    } else {
        max_unavailable(budget.template)
    };
    let pods = i32::try_from(budget.pods).unwrap_or(i32::MAX);
    let min_available = pods.saturating_sub(evictable).max(0);
    let pdb = PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(budget.name.clone()),
            namespace: Some(budget.namespace.to_owned()),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(min_available)),
            selector: Some(LabelSelector {
                match_labels: Some(budget.selector.clone()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    };
    crate::objects::to_json(&pdb)
}

/// Why no node of a Kafka may be evicted now, in any member cluster (`None`: the budgets
/// allow what their template says): a node may be down in the clusters `disrupted` names
/// (see [`disrupted`]), or the controller quorum is not whole (`quorum_unsettled`, as the
/// last pass found it).
pub fn closed(disrupted: &BTreeSet<String>, quorum_unsettled: Option<&str>) -> Option<String> {
    if !disrupted.is_empty() {
        let clusters: Vec<&str> = disrupted.iter().map(String::as_str).collect();
        return Some(format!("a node may be down in {}", clusters.join(", ")));
    }
    quorum_unsettled.map(|why| format!("the controller quorum is not whole: {why}"))
}

/// Of the member clusters `podsets` names (the podsets of one resource, by cluster alias), those
/// where a node may be down as far as central knows: one of its podsets' pods is missing or not
/// ready, a podset is not reported, or the cluster's agent has not reported at all (`reports`
/// holds the podsets each connected agent reported). A podset without pods (its pool left the
/// cluster, or was scaled to none) has nothing down.
pub fn disrupted(
    namespace: &str,
    podsets: &BTreeMap<String, BTreeSet<String>>,
    reports: &BTreeMap<String, Vec<PodSetStatus>>,
) -> BTreeSet<String> {
    podsets
        .iter()
        .filter(|(alias, names)| {
            let Some(reported) = reports.get(*alias) else {
                return true;
            };
            names.iter().any(|name| {
                let found = reported
                    .iter()
                    .find(|p| p.namespace == namespace && p.name == *name);
                found.is_none_or(|p| p.pods_status.iter().any(|pod| !pod.ready))
            })
        })
        .map(|(alias, _)| alias.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use kstretch_proto::agent::v1::PodStatus;
    use serde_json::json;

    use super::*;

    fn budget(template: Option<&OpaqueObject>, closed: bool) -> Value {
        pod_disruption_budget(&Budget {
            name: "k-kafka".into(),
            namespace: "ns",
            labels: BTreeMap::from([("strimzi.io/cluster".into(), "k".into())]),
            selector: BTreeMap::from([("strimzi.io/name".into(), "k-kafka".into())]),
            pods: 3,
            template,
            closed,
        })
    }

    #[test]
    fn a_budget_is_strimzis_with_its_template() {
        let b = budget(None, false);
        assert_eq!(b["apiVersion"], "policy/v1");
        assert_eq!(b["kind"], "PodDisruptionBudget");
        assert_eq!(b["metadata"]["name"], "k-kafka");
        assert_eq!(b["spec"]["minAvailable"], 2, "three pods, one may go");
        assert_eq!(
            b["spec"]["selector"]["matchLabels"],
            json!({"strimzi.io/name": "k-kafka"})
        );
        let template = json!({"podDisruptionBudget": {"maxUnavailable": 2,
            "metadata": {"labels": {"team": "a", "strimzi.io/cluster": "other"},
                         "annotations": {"note": "x"}}}});
        let b = budget(template.as_object(), false);
        assert_eq!(b["spec"]["minAvailable"], 1);
        assert_eq!(
            b["metadata"]["labels"],
            json!({"team": "a", "strimzi.io/cluster": "k"}),
            "the template's labels are added, ours win"
        );
        assert_eq!(b["metadata"]["annotations"], json!({"note": "x"}));
        // Closed: no eviction, whatever the template allows.
        assert_eq!(
            budget(template.as_object(), true)["spec"]["minAvailable"],
            3
        );
        let zero = json!({"podDisruptionBudget": {"maxUnavailable": 0}});
        assert_eq!(max_unavailable(zero.as_object()), 0);
        let bad = json!({"podDisruptionBudget": {"maxUnavailable": -1}});
        assert_eq!(max_unavailable(bad.as_object()), DEFAULT_MAX_UNAVAILABLE);
    }

    fn podset(name: &str, ready: &[bool]) -> PodSetStatus {
        PodSetStatus {
            namespace: "ns".into(),
            name: name.into(),
            pods_status: ready
                .iter()
                .enumerate()
                .map(|(i, r)| PodStatus {
                    name: format!("{name}-{i}"),
                    uid: "u".into(),
                    ready: *r,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn budgets_close_while_a_node_is_down_or_the_quorum_is_not_whole() {
        assert_eq!(closed(&BTreeSet::new(), None), None);
        let down = BTreeSet::from(["alpha".to_owned(), "beta".to_owned()]);
        assert_eq!(
            closed(&down, Some("voter 0 is removed")).as_deref(),
            Some("a node may be down in alpha, beta")
        );
        assert_eq!(
            closed(&BTreeSet::new(), Some("voters [0] do not fetch")).as_deref(),
            Some("the controller quorum is not whole: voters [0] do not fetch")
        );
    }

    #[test]
    fn a_cluster_is_disrupted_while_a_node_of_it_is_not_known_to_be_ready() {
        let podsets = BTreeMap::from([
            ("alpha".to_owned(), BTreeSet::from(["k-a".to_owned()])),
            ("beta".to_owned(), BTreeSet::from(["k-b".to_owned()])),
            ("gamma".to_owned(), BTreeSet::from(["k-c".to_owned()])),
        ]);
        let reports = BTreeMap::from([
            ("alpha".to_owned(), vec![podset("k-a", &[true, true])]),
            ("beta".to_owned(), vec![podset("k-b", &[true, false])]),
        ]);
        // Beta has a pod not ready; gamma's agent has not reported.
        assert_eq!(
            disrupted("ns", &podsets, &reports),
            BTreeSet::from(["beta".to_owned(), "gamma".to_owned()])
        );
        // A podset not reported yet, or reported in another namespace, counts as disrupted.
        let elsewhere = BTreeMap::from([(
            "alpha".to_owned(),
            vec![PodSetStatus {
                namespace: "other".into(),
                ..podset("k-a", &[true])
            }],
        )]);
        let only_alpha = BTreeMap::from([("alpha".to_owned(), BTreeSet::from(["k-a".to_owned()]))]);
        assert_eq!(disrupted("ns", &only_alpha, &elsewhere).len(), 1);
        let ready = BTreeMap::from([("alpha".to_owned(), vec![podset("k-a", &[true])])]);
        assert!(disrupted("ns", &only_alpha, &ready).is_empty());
        let emptied = BTreeMap::from([("alpha".to_owned(), vec![podset("k-a", &[])])]);
        assert!(disrupted("ns", &only_alpha, &emptied).is_empty());
    }
}
