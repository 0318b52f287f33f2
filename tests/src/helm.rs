//! kstretch installed as a user installs it, for end-to-end tests on the real nodes: the images
//! `scripts/build-images.sh` packs from this build, imported into every real node
//! (`tests/env/nodes.sh import`), then `helm install` of `charts/kstretch-central` in alpha and
//! of `charts/kstretch-agent` in alpha and beta. Central and the agents run as pods with the
//! charts' RBAC, probes and chart-generated link certificates; agents reach central's link
//! through its Service: alpha's at its ClusterIP, beta's at the NodePort of alpha's real node.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::Api;
use kube::api::{ListParams, LogParams};
use serde_json::Value;

use crate::charts::{chart, copy_secret, tool};
use crate::cluster::Cluster;
use crate::cluster::{DeleteOnPanic, TestNamespace};
use crate::crds;
use crate::env::TestEnv;
use crate::env::{ALPHA, BETA};

/// Release names, so the objects are named `kstretch-central`, `kstretch-agent`, ...
pub const CENTRAL_RELEASE: &str = "kstretch-central";
pub const AGENT_RELEASE: &str = "kstretch-agent";
/// The link Service of the central chart for [`CENTRAL_RELEASE`].
const LINK_SERVICE: &str = "kstretch-central-link";
/// Where the beta agent's certificate is copied to, as the central chart's NOTES tell a user.
const BETA_AGENT_SECRET: &str = "kstretch-agent-tls";
/// Pods land on a real node the way the example Kafka's do: a selector and a toleration.
const ON_REAL_NODES: &str = r#"
nodeSelector: {kstretch.test/node: real}
tolerations: [{key: kstretch.test/real-node, operator: Exists, effect: NoSchedule}]
"#;

/// kstretch running in pods of both clusters. [`HelmInstall::finish`] uninstalls it.
pub struct HelmInstall {
    pub ns: String,
    pub clusters: BTreeMap<String, Cluster>,
    dir: PathBuf,
    namespaces: Vec<TestNamespace>,
    _delete_on_panic: DeleteOnPanic,
}

impl std::fmt::Debug for HelmInstall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HelmInstall").field("ns", &self.ns).finish()
    }
}

impl HelmInstall {
    /// Packs and imports the images, installs the charts for test `test` and waits until
    /// every Deployment is available (helm's `--wait`: the readiness probes pass).
    pub async fn start(test: &str) -> HelmInstall {
        let env = TestEnv::get();
        let alpha = Cluster::connect(&env.clusters[0]).await;
        let beta = Cluster::connect(&env.clusters[1]).await;
        for c in [&alpha, &beta] {
            crds::install(c).await;
        }
        import_images();
        let ns_alpha = alpha.namespace(test).await;
        let ns = ns_alpha.name.clone();
        let ns_beta = beta.namespace_named(&ns).await;
        let delete_on_panic = DeleteOnPanic(ns.clone());
        let dir = std::env::temp_dir().join(format!("kstretch-helm-{ns}"));
        std::fs::create_dir_all(&dir).expect("test dir");
        let on_real_nodes = dir.join("real-nodes.yaml");
        std::fs::write(&on_real_nodes, ON_REAL_NODES).expect("values file");
        let node_ip = &env.clusters[0].real_node_ip;

        helm(
            ALPHA,
            &[
                "install",
                CENTRAL_RELEASE,
                &chart("kstretch-central").to_string_lossy(),
                "--namespace",
                &ns,
                "--values",
                &on_real_nodes.to_string_lossy(),
                "--set",
                "clusterAlias=alpha,memberClusters={beta},linkService.type=NodePort",
                "--set",
                &format!("tls.generate.agents={{alpha,beta}},tls.ipAddresses={{{node_ip}}}"),
                "--wait",
                "--timeout=3m",
            ],
        );
        let links: Api<Service> = Api::namespaced(alpha.client.clone(), &ns);
        let link = links.get(LINK_SERVICE).await.expect("the link Service");
        let spec = link.spec.expect("Service spec");
        let cluster_ip = spec.cluster_ip.expect("ClusterIP");
        let node_port = spec.ports.expect("ports")[0].node_port.expect("a NodePort");
        copy_secret(
            &alpha,
            &beta,
            &ns,
            "kstretch-central-agent-beta",
            BETA_AGENT_SECRET,
        )
        .await;

        // Alpha's agent has no cluster DNS to resolve the Service name with: it dials the
        // ClusterIP and checks central's certificate for the Service's name.
        let agents = [
            (
                ALPHA,
                format!(
                    "central.url=https://{cluster_ip}:9443,central.serverName={LINK_SERVICE}.{ns}.svc"
                ),
                "kstretch-central-agent-alpha",
            ),
            (
                BETA,
                format!("central.url=https://{node_ip}:{node_port}"),
                BETA_AGENT_SECRET,
            ),
        ];
        for (alias, central, secret) in agents {
            helm(
                alias,
                &[
                    "install",
                    AGENT_RELEASE,
                    &chart("kstretch-agent").to_string_lossy(),
                    "--namespace",
                    &ns,
                    "--values",
                    &on_real_nodes.to_string_lossy(),
                    "--set",
                    &format!("clusterAlias={alias},{central}"),
                    "--set",
                    &format!("tls.mode=secret,tls.secretName={secret}"),
                    "--wait",
                    "--timeout=2m",
                ],
            );
        }
        HelmInstall {
            ns,
            clusters: [(ALPHA.to_owned(), alpha), (BETA.to_owned(), beta)].into(),
            dir,
            namespaces: vec![ns_alpha, ns_beta],
            _delete_on_panic: delete_on_panic,
        }
    }

    /// An admin API for `K` in the test namespace of cluster `alias`.
    pub fn api<K>(&self, alias: &str) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.clusters[alias].client.clone(), &self.ns)
    }

    /// Server-side applies `object` in the test namespace of alpha, as a user would.
    pub async fn apply(&self, object: Value) {
        crate::cluster::apply(&self.clusters[ALPHA].client, &self.ns, object).await;
    }

    /// The pods of release `release` in `alias`.
    pub async fn pods(&self, alias: &str, release: &str) -> Vec<Pod> {
        let selector = format!("app.kubernetes.io/instance={release}");
        self.api::<Pod>(alias)
            .list(&ListParams::default().labels(&selector))
            .await
            .expect("list pods")
            .items
    }

    /// The last log lines of central's and the agents' pods, for failure messages.
    pub async fn logs(&self) -> String {
        let mut out = String::new();
        for (alias, release) in [
            (ALPHA, CENTRAL_RELEASE),
            (ALPHA, AGENT_RELEASE),
            (BETA, AGENT_RELEASE),
        ] {
            for pod in self.pods(alias, release).await {
                let name = pod.metadata.name.unwrap_or_default();
                let params = LogParams {
                    tail_lines: Some(20),
                    ..LogParams::default()
                };
                let log = self.api::<Pod>(alias).logs(&name, &params).await;
                out.push_str(&format!(
                    "--- {alias} {name} ---\n{}\n",
                    match log {
                        Ok(text) => text,
                        Err(e) => format!("(no log: {e})"),
                    }
                ));
            }
        }
        out
    }

    /// Uninstalls the releases (agents first) and deletes the namespaces.
    pub async fn finish(mut self) {
        for (alias, release) in [
            (BETA, AGENT_RELEASE),
            (ALPHA, AGENT_RELEASE),
            (ALPHA, CENTRAL_RELEASE),
        ] {
            helm(
                alias,
                &["uninstall", release, "--namespace", &self.ns, "--wait"],
            );
        }
        for ns in std::mem::take(&mut self.namespaces) {
            ns.delete().await;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `command`, failing the test with its output unless it succeeds.
fn run(what: &str, command: &mut Command) {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{what} does not run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `helm` with cluster `alias`'s kubeconfig.
fn helm(alias: &str, args: &[&str]) {
    let cluster = TestEnv::get()
        .clusters
        .iter()
        .find(|c| c.name == alias)
        .expect("cluster");
    run(
        &format!("helm {} ({alias})", args.join(" ")),
        Command::new(tool("helm"))
            .arg("--kubeconfig")
            .arg(&cluster.kubeconfig)
            .args(args),
    );
}

/// The agent's image as [`import_images`] names it (the agent chart's default).
pub fn agent_image() -> String {
    format!(
        "ghcr.io/kstretch/kstretch-agent:{}",
        env!("CARGO_PKG_VERSION")
    )
}

/// [`import_images`], once per test process.
pub fn import_images_once() {
    static IMPORTED: std::sync::Once = std::sync::Once::new();
    IMPORTED.call_once(import_images);
}

/// Packs this build's binaries as the charts' images and imports them into every real node,
/// so the pods run exactly what was built (with the images' tag, the chart's appVersion).
pub fn import_images() {
    run(
        "scripts/build-images.sh --profile debug",
        Command::new("bash")
            .arg(repo().join("scripts/build-images.sh"))
            .args(["--profile", "debug"])
            .current_dir(repo()),
    );
    let version = env!("CARGO_PKG_VERSION");
    let archives: Vec<PathBuf> = ["central", "agent"]
        .iter()
        .map(|c| repo().join(format!("target/images/kstretch-{c}-{version}.oci.tar")))
        .collect();
    run(
        "tests/env/nodes.sh import",
        Command::new(repo().join("tests/env/nodes.sh"))
            .arg("import")
            .args(&archives),
    );
}

/// [`crate::wait::wait_for`] that, on timeout, also shows the pods' logs.
pub async fn wait_with_logs<T, F, Fut>(
    install: &HelmInstall,
    what: &str,
    timeout: Duration,
    probe: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = crate::wait::Seen<T>>,
{
    match crate::wait::try_wait_for(timeout, probe).await {
        Ok(value) => value,
        Err(last) => panic!(
            "timed out after {timeout:?} waiting for {what}; last seen:\n{last}\n{}",
            install.logs().await
        ),
    }
}
