//! The topic operator under test: the real `kstretch-central` (no agents) watching test
//! namespaces of cluster alpha, a `Kafka` resource that points it at a real Kafka, and reads of
//! what that Kafka really has through `rdkafka`.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use kstretch_api::KafkaTopic;
use kstretch_api::condition::Condition;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use rdkafka::admin::{AdminOptions, AlterConfig, NewPartitions, ResourceSpecifier};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::cluster::TestNamespace;
use crate::crds::{self, FIELD_MANAGER};
use crate::env::TestEnv;
use crate::process::{Spawned, binary, free_port};
use crate::wait::{Seen, wait_for};

/// The `Kafka` every test topic names.
pub const KAFKA: &str = "my-cluster";

/// Central as a topic operator, killed when dropped.
#[derive(Debug)]
pub struct TopicOperator {
    pub cluster: Cluster,
    pub namespaces: Vec<TestNamespace>,
    pub bootstrap: String,
    pub central: Option<Spawned>,
    pub http: String,
    /// Central's extra arguments.
    pub args: Vec<String>,
}

impl TopicOperator {
    /// Starts central for test `test` watching `namespaces` fresh namespaces (the first holds
    /// the `Kafka`, reached at `bootstrap`), with `extra` arguments.
    pub async fn start(test: &str, namespaces: usize, bootstrap: &str, extra: &[&str]) -> Self {
        let mut op = Self::prepare(test, namespaces, bootstrap, extra).await;
        op.start_central();
        op
    }

    /// Like [`start`](Self::start), without starting central yet.
    pub async fn prepare(test: &str, namespaces: usize, bootstrap: &str, extra: &[&str]) -> Self {
        let env = TestEnv::get();
        let cluster = Cluster::connect(&env.clusters[0]).await;
        crds::install(&cluster).await;
        let mut list = Vec::new();
        for _ in 0..namespaces.max(1) {
            list.push(cluster.namespace(test).await);
        }
        let op = TopicOperator {
            cluster,
            namespaces: list,
            bootstrap: bootstrap.to_owned(),
            central: None,
            http: String::new(),
            args: extra.iter().map(|s| s.to_string()).collect(),
        };
        op.apply(
            0,
            json!({
                "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
                "metadata": {"name": KAFKA, "annotations": {
                    "kstretch.io/admin-bootstrap-servers": bootstrap,
                    "kstretch.io/admin-security-protocol": "PLAINTEXT"}},
                "spec": {"kafka": {"listeners": [
                    {"name": "plain", "port": 9092, "type": "internal", "tls": false}]}}
            }),
        )
        .await;
        op
    }

    pub fn ns(&self, i: usize) -> &str {
        &self.namespaces[i].name
    }

    /// Starts (or restarts) central.
    pub fn start_central(&mut self) {
        let env = TestEnv::get();
        let http_port = free_port();
        let namespaces: Vec<&str> = self.namespaces.iter().map(|n| n.name.as_str()).collect();
        let mut command = Command::new(binary("kstretch-central"));
        command
            .arg("--kubeconfig")
            .arg(&env.clusters[0].kubeconfig)
            .args(["--namespace", &self.namespaces[0].name])
            .args(["--topic-namespaces", &namespaces.join(",")])
            .args(["--http-addr", &format!("127.0.0.1:{http_port}")])
            .args(["--grpc-addr", &format!("127.0.0.1:{}", free_port())])
            .args(&self.args)
            .env("RUST_LOG", "info,kstretch_central=debug");
        self.central = Some(Spawned::start("central", command));
        self.http = format!("http://127.0.0.1:{http_port}");
    }

    pub fn stop_central(&mut self) {
        if let Some(mut central) = self.central.take() {
            central.stop();
        }
    }

    pub fn topics(&self, i: usize) -> Api<KafkaTopic> {
        self.namespaces[i].api()
    }

    /// Server-side applies `object` in namespace `i`, as `kubectl apply --server-side` would.
    pub async fn apply(&self, i: usize, mut object: Value) {
        object["metadata"]["namespace"] = json!(self.ns(i));
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
            Api::namespaced_with(self.cluster.client.clone(), self.ns(i), &resource);
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("cannot apply {kind} {name}: {e}"));
    }

    /// Applies a `KafkaTopic` `name` of the test's Kafka with `spec` (and `metadata` merged).
    pub async fn apply_topic(&self, i: usize, name: &str, spec: Value, metadata: Value) {
        let mut meta = json!({"name": name, "labels": {"strimzi.io/cluster": KAFKA}});
        if let Value::Object(extra) = metadata {
            for (k, v) in extra {
                meta[k] = v;
            }
        }
        self.apply(
            i,
            json!({"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaTopic",
                   "metadata": meta, "spec": spec}),
        )
        .await;
    }

    /// Waits until `KafkaTopic` `name` in namespace `i` satisfies `check`.
    pub async fn wait_topic(
        &self,
        i: usize,
        name: &str,
        what: &str,
        check: impl Fn(&KafkaTopic) -> bool,
    ) -> KafkaTopic {
        let api = self.topics(i);
        wait_for(what, Duration::from_secs(60), || async {
            match api.get_opt(name).await {
                Ok(Some(kt)) if check(&kt) => Seen::Done(kt),
                Ok(other) => Seen::NotYet(format!("{other:#?}\n{}", self.logs())),
                Err(e) => Seen::NotYet(e.to_string()),
            }
        })
        .await
    }

    /// Waits until `name` has reconciled its current generation with `Ready=True`.
    pub async fn wait_ready(&self, i: usize, name: &str) -> KafkaTopic {
        self.wait_topic(i, name, &format!("KafkaTopic {name} Ready"), |kt| {
            reconciled(kt) && condition(kt, "Ready").is_some_and(|c| c.status == "True")
        })
        .await
    }

    /// Waits until `name` has reconciled its current generation with `Ready=False` and
    /// `reason`.
    pub async fn wait_not_ready(&self, i: usize, name: &str, reason: &str) -> KafkaTopic {
        self.wait_topic(
            i,
            name,
            &format!("KafkaTopic {name} Ready=False {reason}"),
            |kt| {
                reconciled(kt)
                    && condition(kt, "Ready")
                        .is_some_and(|c| c.status == "False" && c.reason.as_deref() == Some(reason))
            },
        )
        .await
    }

    /// Deletes `KafkaTopic` `name` and waits until it is gone (its finalizer released).
    pub async fn delete_topic(&self, i: usize, name: &str) {
        let api = self.topics(i);
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

    /// Deletes every `KafkaTopic` (so their topics leave Kafka), then stops central and deletes
    /// the namespaces. Call at the end of a passing test.
    pub async fn finish(mut self) {
        for i in 0..self.namespaces.len() {
            let api = self.topics(i);
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
                self.delete_topic(i, &name).await;
            }
        }
        self.stop_central();
        for ns in std::mem::take(&mut self.namespaces) {
            ns.delete().await;
        }
    }
}

/// Whether the status describes the current generation.
pub fn reconciled(kt: &KafkaTopic) -> bool {
    kt.status.as_ref().and_then(|s| s.observed_generation) == kt.metadata.generation
}

/// The condition of `type_`.
pub fn condition<'a>(kt: &'a KafkaTopic, type_: &str) -> Option<&'a Condition> {
    kt.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
}

/// The `Warning` condition with `reason`.
pub fn warning<'a>(kt: &'a KafkaTopic, reason: &str) -> Option<&'a Condition> {
    kt.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Warning" && c.reason.as_deref() == Some(reason))
    })
}

/// A topic as Kafka reports it through rdkafka: each partition's replicas, by partition index.
pub fn replicas(bootstrap: &str, topic: &str) -> Option<Vec<Vec<i32>>> {
    partitions(bootstrap, topic).map(|p| p.into_iter().map(|(replicas, _)| replicas).collect())
}

/// Each partition's in-sync replicas, by partition index, through rdkafka.
pub fn in_sync_replicas(bootstrap: &str, topic: &str) -> Option<Vec<Vec<i32>>> {
    partitions(bootstrap, topic).map(|p| p.into_iter().map(|(_, isr)| isr).collect())
}

/// Each partition's (replicas, in-sync replicas), by partition index; `None` when Kafka has no
/// such topic.
fn partitions(bootstrap: &str, topic: &str) -> Option<Vec<(Vec<i32>, Vec<i32>)>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("consumer");
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    let t = metadata.topics().first()?;
    if t.error().is_some() {
        return None;
    }
    let mut partitions: Vec<_> = t.partitions().iter().collect();
    partitions.sort_by_key(|p| p.id());
    Some(
        partitions
            .iter()
            .map(|p| (p.replicas().to_vec(), p.isr().to_vec()))
            .collect(),
    )
}

/// The configs Kafka set on the topic itself (not inherited), through rdkafka.
pub async fn topic_configs(bootstrap: &str, topic: &str) -> BTreeMap<String, String> {
    let admin = crate::kafka::admin(bootstrap);
    let results = admin
        .describe_configs(
            [&ResourceSpecifier::Topic(topic)],
            &AdminOptions::new().request_timeout(Some(Duration::from_secs(10))),
        )
        .await
        .expect("DescribeConfigs");
    let resource = results
        .into_iter()
        .next()
        .expect("one result")
        .expect("described");
    resource
        .entries
        .into_iter()
        .filter(|e| e.source == rdkafka::admin::ConfigSource::DynamicTopic)
        .filter_map(|e| Some((e.name, e.value?)))
        .collect()
}

/// Replaces the topic's own configs with `configs`, out of band (AlterConfigs through rdkafka).
pub async fn set_topic_configs(bootstrap: &str, topic: &str, configs: &BTreeMap<String, String>) {
    let admin = crate::kafka::admin(bootstrap);
    let mut alter = AlterConfig::new(ResourceSpecifier::Topic(topic));
    for (k, v) in configs {
        alter = alter.set(k, v);
    }
    let results = admin
        .alter_configs([&alter], &AdminOptions::new())
        .await
        .expect("AlterConfigs");
    for r in results {
        r.unwrap_or_else(|(_, code)| panic!("Kafka refused AlterConfigs on {topic}: {code}"));
    }
}

/// Adds partitions out of band, through rdkafka.
pub async fn add_partitions(bootstrap: &str, topic: &str, total: usize) {
    let admin = crate::kafka::admin(bootstrap);
    let results = admin
        .create_partitions([&NewPartitions::new(topic, total)], &AdminOptions::new())
        .await
        .expect("CreatePartitions");
    for r in results {
        r.unwrap_or_else(|(_, code)| panic!("Kafka refused CreatePartitions on {topic}: {code}"));
    }
}

/// The broker configs that cap the bandwidth of throttled replication.
const THROTTLE_RATES: [&str; 2] = [
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
];

/// Replication throttled on every broker of a Kafka cluster (the `*.replication.throttled.rate`
/// broker configs; only the replicas a topic lists in its `*.replication.throttled.replicas`
/// configs are slowed). The cluster is shared: [`remove`](Self::remove) takes the throttle off,
/// and so does dropping it, when a test fails before that.
#[derive(Debug)]
pub struct BrokerThrottle {
    bootstrap: String,
    brokers: Vec<i32>,
    active: bool,
}

impl BrokerThrottle {
    /// Caps throttled replication at `bytes_per_sec` on every broker.
    pub async fn start(bootstrap: &str, bytes_per_sec: u64) -> Self {
        let brokers: Vec<i32> = crate::kafka::broker_ids(bootstrap)
            .expect("broker IDs")
            .into_iter()
            .collect();
        let throttle = BrokerThrottle {
            bootstrap: bootstrap.to_owned(),
            brokers,
            active: true,
        };
        set_throttle_rates(&throttle.bootstrap, &throttle.brokers, Some(bytes_per_sec)).await;
        throttle
    }

    /// Takes the throttle off every broker.
    pub async fn remove(mut self) {
        set_throttle_rates(&self.bootstrap, &self.brokers, None).await;
        self.active = false;
    }
}

impl Drop for BrokerThrottle {
    fn drop(&mut self) {
        if !self.active {
            return;
        }
        let bootstrap = self.bootstrap.clone();
        let brokers = self.brokers.clone();
        // Drop cannot await, and may run on the test's runtime: a thread of its own.
        let removed = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(set_throttle_rates(&bootstrap, &brokers, None));
        })
        .join();
        if removed.is_err() {
            eprintln!(
                "could not remove the replication throttle from brokers {:?} of {}: remove \
                 {THROTTLE_RATES:?} by hand",
                self.brokers, self.bootstrap
            );
        }
    }
}

/// Sets (or, with `None`, removes) the throttle rates on `brokers`. AlterConfigs replaces a
/// broker's whole dynamic config, so every other dynamic broker config is sent back as it was.
/// One broker per request: librdkafka sends a broker's configs to that broker.
async fn set_throttle_rates(bootstrap: &str, brokers: &[i32], rate: Option<u64>) {
    let admin = crate::kafka::admin(bootstrap);
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(20)));
    let rate = rate.map(|r| r.to_string());
    for broker in brokers {
        let resource = ResourceSpecifier::Broker(*broker);
        let described = admin
            .describe_configs([&resource], &options)
            .await
            .unwrap_or_else(|e| panic!("DescribeConfigs of broker {broker} failed: {e}"))
            .into_iter()
            .next()
            .expect("one result")
            .unwrap_or_else(|e| panic!("cannot describe broker {broker}: {e}"));
        let kept: Vec<(String, String)> = described
            .entries
            .into_iter()
            .filter(|e| e.source == rdkafka::admin::ConfigSource::DynamicBroker)
            .filter(|e| !THROTTLE_RATES.contains(&e.name.as_str()))
            .filter_map(|e| Some((e.name, e.value?)))
            .collect();
        let mut alter = AlterConfig::new(resource);
        for (k, v) in &kept {
            alter = alter.set(k, v);
        }
        if let Some(rate) = &rate {
            for k in THROTTLE_RATES {
                alter = alter.set(k, rate);
            }
        }
        let results = admin
            .alter_configs([&alter], &options)
            .await
            .unwrap_or_else(|e| panic!("AlterConfigs of broker {broker} failed: {e}"));
        for r in results {
            r.unwrap_or_else(|(_, code)| {
                panic!("Kafka refused AlterConfigs on broker {broker}: {code}")
            });
        }
    }
}

/// Renders the crds chart's topic finalizer policy (a MutatingAdmissionPolicy and its binding)
/// for `namespaces` under the name `name`, as `helm install` would against a 1.36 apiserver, and
/// applies it to cluster alpha.
pub fn install_finalizer_policy(name: &str, namespaces: &[&str]) {
    let env = TestEnv::get();
    let bin = env.bin_dir.clone().expect("KSTRETCH_BIN_DIR");
    let chart = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/kstretch-crds");
    let rendered = std::process::Command::new(bin.join("helm"))
        .args(["template", "kstretch-crds"])
        .arg(&chart)
        .args([
            "--api-versions",
            "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
            "--show-only",
            "templates/topic-finalizer-policy.yaml",
            "--set",
            &format!("topicFinalizerPolicy.name={name}"),
            "--set",
            &format!(
                "topicFinalizerPolicy.namespaces={{{}}}",
                namespaces.join(",")
            ),
        ])
        .output()
        .expect("helm runs");
    assert!(
        rendered.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let mut apply = std::process::Command::new(bin.join("kubectl"))
        .arg("--kubeconfig")
        .arg(&env.clusters[0].kubeconfig)
        .args(["apply", "--server-side", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    use std::io::Write as _;
    apply
        .stdin
        .take()
        .expect("stdin")
        .write_all(&rendered.stdout)
        .expect("manifest written");
    let out = apply.wait_with_output().expect("kubectl ends");
    assert!(
        out.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Deletes what [`install_finalizer_policy`] applied (nothing if it is gone).
pub fn delete_finalizer_policy(name: &str) {
    let env = TestEnv::get();
    let bin = env.bin_dir.clone().expect("KSTRETCH_BIN_DIR");
    let _ = std::process::Command::new(bin.join("kubectl"))
        .arg("--kubeconfig")
        .arg(&env.clusters[0].kubeconfig)
        .args([
            "delete",
            "--ignore-not-found",
            &format!("mutatingadmissionpolicybinding/{name}"),
            &format!("mutatingadmissionpolicy/{name}"),
        ])
        .output();
}

/// Waits until new `KafkaTopic`s of `api`'s namespace get the finalizer at admission (a policy
/// takes effect a moment after it is applied), probing with dry-run creates.
pub async fn wait_finalizer_policy(api: &Api<KafkaTopic>) {
    let probe: KafkaTopic = serde_json::from_value(json!({
        "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaTopic",
        "metadata": {"name": "finalizer-policy-probe", "labels": {"strimzi.io/cluster": KAFKA}},
        "spec": {"partitions": 1, "replicas": 1}
    }))
    .expect("a KafkaTopic");
    let dry_run = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    wait_for(
        "the topic finalizer policy in effect",
        Duration::from_secs(30),
        || async {
            match api.create(&dry_run, &probe).await {
                Ok(kt)
                    if kt
                        .metadata
                        .finalizers
                        .as_ref()
                        .is_some_and(|f| !f.is_empty()) =>
                {
                    Seen::Done(())
                }
                other => Seen::NotYet(format!("{other:?}")),
            }
        },
    )
    .await
}
