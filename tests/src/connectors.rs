//! The connector operator under test: the real `kstretch-central` watching a test namespace of
//! cluster alpha, a `KafkaConnect` whose `kstretch.io/connect-rest-url` annotation points at the
//! environment's real Connect worker, and reads of what Connect really has over its REST API.

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kstretch_api::KafkaConnector;
use kstretch_api::condition::Condition;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::cluster::TestNamespace;
use crate::crds::{self, FIELD_MANAGER};
use crate::env::TestEnv;
use crate::process::{Spawned, binary, free_port};
use crate::wait::{Seen, wait_for};

/// The `KafkaConnect` every test connector names.
pub const CONNECT: &str = "my-connect";

/// Central as a connector operator, killed when dropped.
#[derive(Debug)]
pub struct ConnectorOperator {
    pub cluster: Cluster,
    pub namespace: TestNamespace,
    pub connect_url: String,
    pub central: Option<Spawned>,
    pub http: String,
    /// Connector names the test created, deleted from Connect at the end.
    names: std::sync::Mutex<Vec<String>>,
}

/// A name unique across tests and runs (connectors share one Connect worker).
pub fn unique(prefix: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() % 1_000_000_000)
        .unwrap_or_default();
    format!("{prefix}-{:x}{stamp:x}{n}", std::process::id())
}

impl ConnectorOperator {
    /// Starts central for test `test` in a fresh namespace holding a `KafkaConnect` that
    /// manages its connectors with resources and is reached at the environment's worker.
    pub async fn start(test: &str) -> Self {
        let env = TestEnv::get();
        let cluster = Cluster::connect(&env.clusters[0]).await;
        crds::install(&cluster).await;
        let namespace = cluster.namespace(test).await;
        let mut op = ConnectorOperator {
            cluster,
            namespace,
            connect_url: env.connect_url.trim_end_matches('/').to_owned(),
            central: None,
            http: String::new(),
            names: std::sync::Mutex::default(),
        };
        op.apply_connect(CONNECT, true).await;
        op.start_central();
        op
    }

    pub fn ns(&self) -> &str {
        &self.namespace.name
    }

    /// Starts (or restarts) central, reconciling unchanged connectors every 3 s.
    pub fn start_central(&mut self) {
        let env = TestEnv::get();
        let http_port = free_port();
        let mut command = Command::new(binary("kstretch-central"));
        command
            .arg("--kubeconfig")
            .arg(&env.clusters[0].kubeconfig)
            .args(["--namespace", self.ns()])
            .args(["--topic-namespaces", self.ns()])
            .args(["--connector-resync-secs", "3"])
            .args(["--http-addr", &format!("127.0.0.1:{http_port}")])
            .args(["--grpc-addr", &format!("127.0.0.1:{}", free_port())])
            .env("RUST_LOG", "info,kstretch_central=debug");
        self.central = Some(Spawned::start("central", command));
        self.http = format!("http://127.0.0.1:{http_port}");
    }

    pub fn stop_central(&mut self) {
        if let Some(mut central) = self.central.take() {
            central.stop();
        }
    }

    pub fn connectors(&self) -> Api<KafkaConnector> {
        self.namespace.api()
    }

    pub fn config_maps(&self) -> Api<ConfigMap> {
        self.namespace.api()
    }

    /// Server-side applies `object` (a `kafka.strimzi.io/v1` kind) in the test namespace.
    pub async fn apply(&self, mut object: Value) {
        object["metadata"]["namespace"] = json!(self.ns());
        let name = object["metadata"]["name"]
            .as_str()
            .expect("name")
            .to_owned();
        let kind = object["kind"].as_str().expect("kind").to_owned();
        let gvk = kube::core::GroupVersionKind::gvk("kafka.strimzi.io", "v1", &kind);
        let resource = kube::core::ApiResource::from_gvk_with_plural(
            &gvk,
            &format!("{}s", kind.to_lowercase()),
        );
        let api: Api<kube::core::DynamicObject> =
            Api::namespaced_with(self.cluster.client.clone(), self.ns(), &resource);
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("cannot apply {kind} {name}: {e}"));
    }

    /// Applies `KafkaConnect` `name` reached at the real worker; `use_resources` sets
    /// `strimzi.io/use-connector-resources`.
    pub async fn apply_connect(&self, name: &str, use_resources: bool) {
        self.apply(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnect",
            "metadata": {"name": name, "annotations": {
                "strimzi.io/use-connector-resources": use_resources.to_string(),
                "kstretch.io/connect-rest-url": self.connect_url}},
            "spec": {"bootstrapServers": TestEnv::get().kafka_bootstrap, "replicas": 1}
        }))
        .await;
    }

    /// Applies `KafkaConnector` `name` of [`CONNECT`] with `spec` (and `metadata` merged).
    pub async fn apply_connector(&self, name: &str, spec: Value, metadata: Value) {
        {
            let mut names = self.names.lock().unwrap();
            if !names.iter().any(|n| n == name) {
                names.push(name.to_owned());
            }
        }
        let mut meta = json!({"name": name, "labels": {"strimzi.io/cluster": CONNECT}});
        if let Value::Object(extra) = metadata {
            for (k, v) in extra {
                meta[k] = v;
            }
        }
        self.apply(
            json!({"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnector",
                          "metadata": meta, "spec": spec}),
        )
        .await;
    }

    /// Sets (or with `None` removes) annotation `key` of connector `name` (merge patch, as
    /// `kubectl annotate` does).
    pub async fn annotate(&self, name: &str, key: &str, value: Option<&str>) {
        let patch = json!({"metadata": {"annotations": {key: value}}});
        self.connectors()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("cannot annotate {name}: {e}"));
    }

    /// Waits until `KafkaConnector` `name` satisfies `check`.
    pub async fn wait_connector(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&KafkaConnector) -> bool,
    ) -> KafkaConnector {
        let api = self.connectors();
        wait_for(what, Duration::from_secs(90), || async {
            match api.get_opt(name).await {
                Ok(Some(kc)) if check(&kc) => Seen::Done(kc),
                Ok(other) => Seen::NotYet(format!("{other:#?}\n{}", self.logs())),
                Err(e) => Seen::NotYet(e.to_string()),
            }
        })
        .await
    }

    /// Waits until `name` has reconciled its current generation with `Ready=True`.
    pub async fn wait_ready(&self, name: &str) -> KafkaConnector {
        self.wait_connector(name, &format!("KafkaConnector {name} Ready"), |kc| {
            reconciled(kc) && condition(kc, "Ready").is_some_and(|c| c.status == "True")
        })
        .await
    }

    /// Waits until `name` has reconciled its current generation with `Ready=False` and
    /// `reason`.
    pub async fn wait_not_ready(&self, name: &str, reason: &str) -> KafkaConnector {
        self.wait_connector(
            name,
            &format!("KafkaConnector {name} Ready=False {reason}"),
            |kc| {
                reconciled(kc)
                    && condition(kc, "Ready")
                        .is_some_and(|c| c.status == "False" && c.reason.as_deref() == Some(reason))
            },
        )
        .await
    }

    /// Waits until `name` carries a `Warning` with `reason` whose message contains `text`.
    pub async fn wait_warning(&self, name: &str, reason: &str, text: &str) -> KafkaConnector {
        self.wait_connector(
            name,
            &format!("KafkaConnector {name} Warning {reason} containing {text:?}"),
            |kc| {
                warning(kc, reason)
                    .is_some_and(|c| c.message.as_deref().unwrap_or("").contains(text))
            },
        )
        .await
    }

    /// Waits until Connect reports connector `name` in `state`.
    pub async fn wait_connect_state(&self, name: &str, state: &str) {
        wait_for(
            &format!("connector {name} {state} in Kafka Connect"),
            Duration::from_secs(60),
            || async {
                match crate::connect::connector_state(&self.connect_url, name).await {
                    Some(s) if s == state => Seen::Done(()),
                    other => Seen::NotYet(format!("{other:?}\n{}", self.logs())),
                }
            },
        )
        .await
    }

    /// Annotates `name` with `strimzi.io/connector-offsets=op` and waits until the operator
    /// removed the annotation (the operation succeeded).
    pub async fn offsets_op(&self, name: &str, op: &str) -> KafkaConnector {
        self.annotate(name, "strimzi.io/connector-offsets", Some(op))
            .await;
        self.wait_connector(name, &format!("{op} of {name}'s offsets done"), |kc| {
            !kc.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key("strimzi.io/connector-offsets"))
        })
        .await
    }

    /// `offsets.json` of ConfigMap `cm`, parsed.
    pub async fn offsets_json(&self, cm: &str) -> Value {
        let cm = self.config_maps().get(cm).await.expect("the ConfigMap");
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get("offsets.json"))
            .expect("offsets.json");
        serde_json::from_str(text).expect("offsets.json is JSON")
    }

    /// Writes `offsets.json` of ConfigMap `cm` (creating it when missing), as a user would.
    pub async fn write_offsets_json(&self, cm: &str, offsets: &Value) {
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": cm, "namespace": self.ns()},
            "data": {"offsets.json": serde_json::to_string_pretty(offsets).unwrap()}
        });
        self.config_maps()
            .patch(
                cm,
                &PatchParams::apply("kstretch-tests-user").force(),
                &Patch::Apply(&object),
            )
            .await
            .unwrap_or_else(|e| panic!("cannot write ConfigMap {cm}: {e}"));
    }

    /// Deletes `KafkaConnector` `name` and waits until it is gone (its finalizer released).
    pub async fn delete_connector(&self, name: &str) {
        let api = self.connectors();
        let _ = api.delete(name, &DeleteParams::default()).await;
        crate::wait::wait_for_deletion(&api, name, Duration::from_secs(60)).await;
    }

    pub fn logs(&self) -> String {
        self.central
            .as_ref()
            .map(|c| format!("--- central ---\n{}", c.log_tail(30)))
            .unwrap_or_default()
    }

    /// A series of central's /metrics (the first line starting with `series`).
    pub async fn metric(&self, series: &str) -> Option<f64> {
        crate::process::metric(&self.http, series).await
    }

    /// Deletes every `KafkaConnector` (their connectors leave Connect), stops central, deletes
    /// the namespace and any connector the test left in Connect. Call at the end of a passing
    /// test.
    pub async fn finish(mut self) {
        let api = self.connectors();
        let names: Vec<String> = api
            .list(&Default::default())
            .await
            .map(|l| {
                l.items
                    .into_iter()
                    .filter_map(|t| t.metadata.name)
                    .collect()
            })
            .unwrap_or_default();
        for name in names {
            self.delete_connector(&name).await;
        }
        self.stop_central();
        let names = std::mem::take(&mut *self.names.lock().unwrap());
        for name in names {
            crate::connect::delete_connector(&self.connect_url, &name).await;
        }
        self.namespace.clone().delete().await;
    }
}

/// Whether the status describes the current generation.
pub fn reconciled(kc: &KafkaConnector) -> bool {
    kc.status.as_ref().and_then(|s| s.observed_generation) == kc.metadata.generation
}

pub fn condition<'a>(kc: &'a KafkaConnector, type_: &str) -> Option<&'a Condition> {
    kc.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
}

pub fn warning<'a>(kc: &'a KafkaConnector, reason: &str) -> Option<&'a Condition> {
    kc.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Warning" && c.reason.as_deref() == Some(reason))
    })
}

/// `status.connectorStatus.connector.state`.
pub fn reported_state(kc: &KafkaConnector) -> Option<String> {
    kc.status
        .as_ref()?
        .connector_status
        .as_ref()?
        .get("connector")?
        .get("state")?
        .as_str()
        .map(str::to_owned)
}
