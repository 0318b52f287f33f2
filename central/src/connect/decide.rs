//! What one pass over a `KafkaConnect` decides, purely, from what [`super::reconcile`] read:
//! the member cluster's objects ([`objects`]), the warnings ([`warnings`]), and the status with
//! when to look again ([`conclude`]). The next worker to roll is [`super::rollout`]'s.

use std::collections::BTreeMap;
use std::time::Duration;

use kstretch_api::condition::Condition;
use kstretch_api::{KafkaConnect, KafkaConnectStatus};
use kube::ResourceExt;
use serde_json::Value;

use super::build::{self, Built, Files};
use super::validate::Resolved;
use super::warning::{Reason, Warning};
use crate::jmx_exporter;
use crate::link::AgentRecord;
use crate::status::{self, Refusal};
use crate::unserved;

/// Requeue while workers start or roll.
pub const BUSY_REQUEUE: Duration = Duration::from_secs(5);
/// Requeue of workers that are all ready, so drift is noticed.
pub const IDLE_REQUEUE: Duration = Duration::from_secs(300);

/// What the workers are built from besides the resource: the Secrets' material their
/// security needs, the user's files (metrics rules, log4j2 configuration) and the image each
/// member cluster's agent runs (where the metrics jars come from).
#[derive(Debug, Clone, Default)]
pub struct Read {
    pub material: BTreeMap<String, Vec<u8>>,
    pub rules: Option<String>,
    pub log4j2: Option<String>,
    pub images: BTreeMap<String, String>,
}

/// What a pass publishes: the workers' objects, by member cluster, and each worker's desired
/// revision.
#[derive(Debug, Clone)]
pub struct Publish {
    pub built: Built,
    pub objects: BTreeMap<String, Vec<Value>>,
}

/// The workers' objects, with the metrics jars from the agent's image when they serve
/// metrics; or why they cannot be published.
pub fn objects(
    connect: &KafkaConnect,
    resolved: &Resolved,
    read: &Read,
) -> Result<Publish, Refusal> {
    let files = Files {
        rules: read.rules.as_deref(),
        log4j2: read.log4j2.as_deref(),
    };
    let built = build::build(connect, resolved, &read.material, files);
    let mut objects = BTreeMap::from([(built.alias.clone(), built.objects.clone())]);
    if read.rules.is_some() || resolved.metrics_reporter.is_some() {
        jmx_exporter::equip(&mut objects, &read.images, jmx_exporter::CONNECT)?;
    }
    Ok(Publish { built, objects })
}

/// The warnings of a pass: those of the resource as resolved, the fields not acted on, and
/// the objects the agent (`record`) could not apply.
pub fn warnings(
    connect: &KafkaConnect,
    resolved: &Resolved,
    record: Option<&AgentRecord>,
) -> Vec<Warning> {
    let mut warnings = resolved.warnings.clone();
    warnings.extend(
        unserved::connect(&connect.spec, build::CONNECT_TEMPLATE)
            .into_iter()
            .map(|w| Warning::new(Reason::NotActedOn, w)),
    );
    warnings.extend(rejected_objects(record, connect));
    warnings
}

/// Objects of this Connect cluster the agent could not apply, as a warning.
fn rejected_objects(record: Option<&AgentRecord>, connect: &KafkaConnect) -> Vec<Warning> {
    let Some(report) = record.and_then(|r| r.last_apply.as_ref()) else {
        return Vec::new();
    };
    let namespace = connect.namespace().unwrap_or_default();
    let prefix = build::component_name(&connect.name_any());
    let failed = crate::link::agents::rejected_in(report, &namespace, &prefix);
    if failed.is_empty() {
        return Vec::new();
    }
    vec![Warning::new(
        Reason::ApplyFailed,
        format!(
            "the agent could not apply {} object(s) of snapshot {}: {}",
            failed.len(),
            report.generation,
            failed.join("; ")
        ),
    )]
}

/// Where the workers stand once this pass's step is taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Every worker runs the desired revision and is ready.
    Ready,
    /// Waiting for the workers' cluster: its agent is away.
    Unreachable(String),
    /// Waiting for the workers to be applied or to start.
    Deploying(String),
    /// A stale worker was restarted (or why it could not be).
    Rolling(String),
}

impl Standing {
    fn condition(self) -> Condition {
        match self {
            Standing::Ready => Condition::ready(),
            Standing::Unreachable(why) => status::not_ready("ClusterUnreachable", why),
            Standing::Deploying(why) => status::not_ready("Deploying", why),
            Standing::Rolling(what) => status::not_ready("RollingUpdate", what),
        }
    }
}

/// The status this pass writes over `before`, and when to look again.
pub fn conclude(
    connect: &KafkaConnect,
    resolved: &Resolved,
    before: KafkaConnectStatus,
    standing: Standing,
    warnings: &[Warning],
    now: &str,
) -> (KafkaConnectStatus, Duration) {
    let (name, namespace) = (connect.name_any(), connect.namespace().unwrap_or_default());
    let ready = standing == Standing::Ready;
    let mut st = before;
    st.conditions = status::conditions(&st.conditions, standing.condition(), warnings, now);
    st.url = Some(build::rest_url(&name, &namespace));
    st.replicas = Some(resolved.replicas as i32);
    st.label_selector = Some(build::label_selector(&name));
    (st, if ready { IDLE_REQUEUE } else { BUSY_REQUEUE })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;
    use crate::kafka::resolve::tests::members;

    const NOW: &str = "2026-11-29T08:00:00Z";

    fn connect(spec: Value) -> KafkaConnect {
        let mut all = json!({"replicas": 2, "bootstrapServers": "my-cluster-kafka-bootstrap:9092",
                             "groupId": "g", "configStorageTopic": "g-configs",
                             "statusStorageTopic": "g-status", "offsetStorageTopic": "g-offsets"});
        for (k, v) in spec.as_object().unwrap() {
            all[k] = v.clone();
        }
        serde_json::from_value(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnect",
            "metadata": {"name": "my-connect", "namespace": "ns", "generation": 1,
                         "annotations": {"strimzi.io/stretch-cluster-alias": "beta"}},
            "spec": all
        }))
        .unwrap()
    }

    fn resolved(c: &KafkaConnect) -> Resolved {
        super::super::validate::resolve(c, &members()).unwrap()
    }

    #[test]
    fn workers_serving_metrics_need_the_image_of_their_clusters_agent() {
        let c = connect(json!({"metricsConfig": {"type": "strimziMetricsReporter"}}));
        let r = resolved(&c);
        let refused = objects(&c, &r, &Read::default()).unwrap_err();
        assert_eq!(refused.reason, "InvalidMetricsConfig");
        let read = Read {
            images: [("beta".to_owned(), "kstretch-agent:test".to_owned())].into(),
            ..Read::default()
        };
        let publish = objects(&c, &r, &read).unwrap();
        assert_eq!(publish.objects.keys().collect::<Vec<_>>(), ["beta"]);
        assert_eq!(publish.built.revisions.len(), 2);
        let plain = connect(json!({}));
        let publish = objects(&plain, &resolved(&plain), &Read::default()).unwrap();
        assert_eq!(publish.objects["beta"], publish.built.objects);
    }

    #[test]
    fn the_status_says_where_the_workers_stand_and_when_to_look_again() {
        let c = connect(json!({}));
        let r = resolved(&c);
        let cases = [
            (Standing::Ready, "True", None, IDLE_REQUEUE),
            (
                Standing::Unreachable("away".into()),
                "False",
                Some("ClusterUnreachable"),
                BUSY_REQUEUE,
            ),
            (
                Standing::Deploying("starting".into()),
                "False",
                Some("Deploying"),
                BUSY_REQUEUE,
            ),
            (
                Standing::Rolling("rolling my-connect-connect-0".into()),
                "False",
                Some("RollingUpdate"),
                BUSY_REQUEUE,
            ),
        ];
        for (standing, ready, reason, requeue) in cases {
            let (st, after) = conclude(&c, &r, KafkaConnectStatus::default(), standing, &[], NOW);
            let condition = st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
            assert_eq!(condition.status, ready);
            assert_eq!(condition.reason.as_deref(), reason);
            assert_eq!(after, requeue);
            assert_eq!(
                st.url.as_deref(),
                Some("http://my-connect-connect-api.ns.svc:8083")
            );
            assert_eq!(st.replicas, Some(2));
        }
        let warned = [Warning::new(
            Reason::NotActedOn,
            "x is not acted on".to_owned(),
        )];
        let (st, _) = conclude(
            &c,
            &r,
            KafkaConnectStatus::default(),
            Standing::Ready,
            &warned,
            NOW,
        );
        assert!(
            st.conditions
                .iter()
                .any(|c| c.type_ == "Warning" && c.reason.as_deref() == Some("NotActedOn"))
        );
    }
}
