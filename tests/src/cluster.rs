//! Clients for the environment's Kubernetes clusters and per-test namespaces.

use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};

use crate::env::{ClusterEnv, TestEnv};

/// Field manager of everything the tests apply.
pub const FIELD_MANAGER: &str = "kstretch-tests";

/// Label on every namespace a test creates, so leftovers are easy to find and remove.
pub const TEST_NAMESPACE_LABEL: &str = "kstretch.io/test";

/// A connected simulated Kubernetes cluster.
#[derive(Clone)]
pub struct Cluster {
    pub name: String,
    pub client: Client,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").field("name", &self.name).finish()
    }
}

impl Cluster {
    pub async fn connect(env: &ClusterEnv) -> Cluster {
        Self::connect_with(env, true).await
    }

    /// [`Cluster::connect`] with a client that answers a 429 (an eviction a disruption budget
    /// refuses) at once, where kube's default client retries it until it passes.
    pub async fn connect_without_retries(env: &ClusterEnv) -> Cluster {
        Self::connect_with(env, false).await
    }

    async fn connect_with(env: &ClusterEnv, retries: bool) -> Cluster {
        let kubeconfig = Kubeconfig::read_from(&env.kubeconfig)
            .unwrap_or_else(|e| panic!("cannot read kubeconfig {}: {e}", env.kubeconfig.display()));
        let mut config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .unwrap_or_else(|e| panic!("bad kubeconfig {}: {e}", env.kubeconfig.display()));
        config.default_retry = retries;
        let client = Client::try_from(config)
            .unwrap_or_else(|e| panic!("cannot build a client for {}: {e}", env.name));
        Cluster {
            name: env.name.clone(),
            client,
        }
    }

    /// Every cluster of the environment, connected.
    pub async fn all() -> Vec<Cluster> {
        let env = TestEnv::get();
        let mut clusters = Vec::new();
        for c in &env.clusters {
            clusters.push(Cluster::connect(c).await);
        }
        clusters
    }

    /// A fresh namespace named after the test, unique across runs and parallel tests.
    pub async fn namespace(&self, test: &str) -> TestNamespace {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() % 1_000_000_000)
            .unwrap_or_default();
        let name = namespace_name(test, std::process::id(), stamp, n);
        self.namespace_named(&name).await
    }

    /// The namespace `name` (created, labelled as a test namespace), e.g. the other
    /// cluster's half of a stretched test.
    pub async fn namespace_named(&self, name: &str) -> TestNamespace {
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {TEST_NAMESPACE_LABEL: "true"}}
        }))
        .unwrap();
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("cannot create namespace {name} in {}: {e}", self.name));
        TestNamespace {
            name: name.to_owned(),
            cluster: self.clone(),
        }
    }
}

/// A namespace owned by one test. [`TestNamespace::delete`] removes it at the end of a
/// passing test; a failing test leaves it in place for inspection.
#[derive(Debug, Clone)]
pub struct TestNamespace {
    pub name: String,
    pub cluster: Cluster,
}

impl TestNamespace {
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.cluster.client.clone(), &self.name)
    }

    /// Deletes the namespace, after [`release_member_finalizers`]: the test's central is
    /// stopped by now, and nothing else would release them, so the namespace would stay
    /// `Terminating` (and, with it, any later removal of the CRDs).
    pub async fn delete(self) {
        release_member_finalizers(&self.cluster.client, &self.name).await;
        let _ = Api::<Namespace>::all(self.cluster.client.clone())
            .delete(&self.name, &DeleteParams::background())
            .await;
    }
}

/// Takes central's `kstretch.io/member-objects` finalizer off every `Kafka` and `KafkaConnect`,
/// and the user operator's off every `KafkaUser`, in `namespace`, for a test that has stopped
/// its central (best effort).
pub async fn release_member_finalizers(client: &kube::Client, namespace: &str) {
    release_finalizers(client, namespace, &["kafkas", "kafkaconnects"], |f| {
        f == kstretch_api::names::MEMBER_OBJECTS_FINALIZER
    })
    .await;
    release_finalizers(client, namespace, &["kafkausers"], |f| {
        f == kstretch_api::names::USER_OPERATOR_FINALIZER
    })
    .await;
}

/// Takes every finalizer off every resource of kstretch's `kafka.strimzi.io` kinds in
/// `namespace`: for a test that removes the CRDs while other tests left resources whose
/// central is gone (best effort).
pub async fn release_all_finalizers(client: &kube::Client, namespace: &str) {
    release_finalizers(
        client,
        namespace,
        &[
            "kafkas",
            "kafkaconnects",
            "kafkaconnectors",
            "kafkatopics",
            "kafkausers",
            "kafkanodepools",
        ],
        |_| true,
    )
    .await;
}

async fn release_finalizers(
    client: &kube::Client,
    namespace: &str,
    plurals: &[&str],
    release: impl Fn(&str) -> bool,
) {
    for plural in plurals {
        let resource = kube::core::ApiResource {
            group: kstretch_api::names::KAFKA_GROUP.into(),
            version: "v1".into(),
            api_version: format!("{}/v1", kstretch_api::names::KAFKA_GROUP),
            kind: String::new(),
            plural: (*plural).into(),
        };
        let api: Api<kube::core::DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &resource);
        let Ok(list) = api.list_metadata(&Default::default()).await else {
            continue;
        };
        for o in list.items {
            let all = o.metadata.finalizers.clone().unwrap_or_default();
            let kept: Vec<&String> = all.iter().filter(|f| !release(f)).collect();
            if kept.len() == all.len() {
                continue;
            }
            let patch = serde_json::json!({"metadata": {"finalizers": kept}});
            let _ = api
                .patch(
                    &o.metadata.name.unwrap_or_default(),
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await;
        }
    }
}

/// `<test>-<suffix>` cut to the 63 characters a namespace name may have, in DNS-label form.
fn namespace_name(test: &str, pid: u32, stamp: u128, n: u32) -> String {
    let suffix = format!("{:x}{:x}{n}", pid, stamp);
    let clean: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let max_prefix = 62 - suffix.len();
    let prefix = clean
        .chars()
        .take(max_prefix)
        .collect::<String>()
        .trim_matches('-')
        .to_owned();
    format!("{prefix}-{suffix}")
}

/// Deletes the namespace in every cluster if the test panics. For tests on the real nodes: a
/// failed test's pods would otherwise keep their JVMs running and starve every later test of
/// the two cores. (Its central is gone by then, so the `Kafka` may stay `Terminating`; the pods
/// go.)
#[derive(Debug)]
pub struct DeleteOnPanic(pub String);

impl Drop for DeleteOnPanic {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        // To look at what a failed test left (its pods keep running; `tests/env/sweep.sh`
        // removes them later).
        if std::env::var_os("KSTRETCH_KEEP_FAILED").is_some() {
            eprintln!("keeping namespace {} (KSTRETCH_KEEP_FAILED)", self.0);
            return;
        }
        let env = TestEnv::get();
        let Some(bin) = env.bin_dir.clone() else {
            return;
        };
        keep_what_failed(&self.0, &bin, &env.clusters);
        for cluster in &env.clusters {
            eprintln!(
                "deleting namespace {} in {} (the test failed)",
                self.0, cluster.name
            );
            let _ = std::process::Command::new(bin.join("kubectl"))
                .arg("--kubeconfig")
                .arg(&cluster.kubeconfig)
                .args([
                    "delete",
                    "namespace",
                    &self.0,
                    "--wait=false",
                    "--ignore-not-found",
                ])
                .status();
        }
    }
}

/// Server-side applies `object` (with its apiVersion and kind) in `namespace`, as a user would
/// with `kubectl apply --server-side`.
pub async fn apply(client: &Client, namespace: &str, object: serde_json::Value) {
    if let Err(e) = try_apply(client, namespace, object).await {
        panic!("{e}");
    }
}

/// [`apply`], or what the apiserver said when it refused.
pub async fn try_apply(
    client: &Client,
    namespace: &str,
    mut object: serde_json::Value,
) -> Result<(), String> {
    object["metadata"]["namespace"] = serde_json::json!(namespace);
    let name = object["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_owned();
    let api_version = object["apiVersion"]
        .as_str()
        .expect("apiVersion")
        .to_owned();
    let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
    let kind = object["kind"].as_str().expect("kind").to_owned();
    let gvk = kube::core::GroupVersionKind::gvk(group, version, &kind);
    let plural = format!("{}s", kind.to_lowercase());
    let resource = kube::core::ApiResource::from_gvk_with_plural(&gvk, &plural);
    let api: Api<kube::core::DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resource);
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&object),
    )
    .await
    .map(drop)
    .map_err(|e| format!("cannot apply {kind} {name}: {e}"))
}

/// Saves, before a failed test's namespace goes, what explains the failure: every pod's log
/// (and its previous container's, after a restart), the pods and the events, per cluster, in
/// a directory under the system's temporary directory that is named on stderr.
fn keep_what_failed(ns: &str, bin: &std::path::Path, clusters: &[ClusterEnv]) {
    let dir = std::env::temp_dir().join(format!("kstretch-failed-{ns}"));
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let kubectl = |cluster: &ClusterEnv, args: &[&str]| -> Option<Vec<u8>> {
        std::process::Command::new(bin.join("kubectl"))
            .arg("--kubeconfig")
            .arg(&cluster.kubeconfig)
            .args(["--namespace", ns, "--request-timeout", "20s"])
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| o.stdout)
    };
    for cluster in clusters {
        let save = |name: String, body: Option<Vec<u8>>| {
            if let Some(body) = body.filter(|b| !b.is_empty()) {
                let _ = std::fs::write(dir.join(name), body);
            }
        };
        let c = &cluster.name;
        save(
            format!("{c}-pods.txt"),
            kubectl(cluster, &["get", "pods", "-o", "wide"]),
        );
        save(
            format!("{c}-events.txt"),
            kubectl(cluster, &["get", "events", "--sort-by", ".lastTimestamp"]),
        );
        let names = kubectl(cluster, &["get", "pods", "-o", "name"]).unwrap_or_default();
        for pod in String::from_utf8_lossy(&names).lines() {
            let short = pod.trim_start_matches("pod/");
            save(
                format!("{c}-{short}.log"),
                kubectl(cluster, &["logs", pod, "--all-containers"]),
            );
            save(
                format!("{c}-{short}.previous.log"),
                kubectl(cluster, &["logs", pod, "--all-containers", "--previous"]),
            );
        }
    }
    eprintln!(
        "the failed test's pods' logs, pods and events: {}",
        dir.display()
    );
}

/// Runs `command` in the first container of pod `pod` of namespace `ns` in cluster `alias`, as
/// `kubectl exec` does (through the apiserver to the kubelet): its output, or what it wrote
/// when it failed.
pub fn exec(alias: &str, ns: &str, pod: &str, command: &[&str]) -> Result<String, String> {
    let env = TestEnv::get();
    let kubectl = env
        .bin_dir
        .clone()
        .expect("the environment has kubectl")
        .join("kubectl");
    let cluster = env
        .clusters
        .iter()
        .find(|c| c.name == alias)
        .unwrap_or_else(|| panic!("no cluster {alias}"));
    let output = std::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["-n", ns, "exec", pod, "--"])
        .args(command)
        .output()
        .map_err(|e| format!("kubectl: {e}"))?;
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        Ok(out)
    } else {
        Err(format!("{out}{}", String::from_utf8_lossy(&output.stderr)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names_are_dns_labels() {
        let name = namespace_name(
            "Very_Long::test_name_that_goes_on_and_on_and_on_and_on_and_on_forever",
            4_294_967_295,
            999_999_999,
            12,
        );
        assert!(name.len() <= 63, "{name} has {} chars", name.len());
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
        assert!(name.starts_with("very-long--test"));
        assert!(!name.starts_with('-') && !name.ends_with('-'));
    }
}
