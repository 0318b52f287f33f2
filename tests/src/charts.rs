//! kstretch installed from its Helm charts for end-to-end tests: `helm template` of
//! `charts/kstretch-central` (cluster alpha) and `charts/kstretch-agent` (alpha and beta) for one
//! fresh namespace, applied for real with kubectl; then the real `kstretch-central` and
//! `kstretch-agent` binaries run as local processes with kubeconfigs that hold nothing but the
//! ServiceAccount tokens the charts' RBAC grants (TokenRequest API), and with the link
//! certificates the central chart generated (the agent's copied into beta as a user would).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::api::{Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::cluster::TestNamespace;
use crate::crds::{self, FIELD_MANAGER};
use crate::env::TestEnv;
use crate::env::{ALPHA, BETA};
use crate::process::{Spawned, binary, free_port};

/// The Helm release name of every chart in these tests (objects are `ks-kstretch-central`, ...).
pub const RELEASE: &str = "ks";
/// central's ServiceAccount (and Role) as the chart names it.
pub const CENTRAL_SA: &str = "ks-kstretch-central";
/// The agent's ServiceAccount (and Role) as the chart names it.
pub const AGENT_SA: &str = "ks-kstretch-agent";
/// The leader-election Lease the central chart grants (its `leaderElection.leaseName`).
pub const LEASE: &str = "kstretch-central";
/// The Secret the agent of beta gets its certificate from (copied from alpha).
const BETA_AGENT_SECRET: &str = "ks-agent-tls";

/// A chart-installed kstretch: central and two agents running as processes on ServiceAccount
/// tokens. Killed when dropped; [`ChartInstall::finish`] also deletes the namespaces.
pub struct ChartInstall {
    pub ns: String,
    /// Admin clients of the clusters (the test's independent path).
    pub clusters: BTreeMap<String, Cluster>,
    /// Clients that use only the ServiceAccount token of central (alpha) and of each agent.
    pub central_client: Client,
    pub agent_clients: BTreeMap<String, Client>,
    pub central: Option<Spawned>,
    pub agents: BTreeMap<String, Spawned>,
    /// Whether central runs with `--leader-election` (when the binary has the flag).
    pub leader_election: bool,
    dir: PathBuf,
    namespaces: Vec<TestNamespace>,
}

impl std::fmt::Debug for ChartInstall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChartInstall")
            .field("ns", &self.ns)
            .finish()
    }
}

impl ChartInstall {
    /// Renders and applies the charts for test `test`, then starts central and the agents.
    pub async fn start(test: &str) -> ChartInstall {
        let env = TestEnv::get();
        let alpha = Cluster::connect(&env.clusters[0]).await;
        let beta = Cluster::connect(&env.clusters[1]).await;
        for c in [&alpha, &beta] {
            crds::install(c).await;
            crds::install_service_export(c).await;
        }
        let ns_alpha = alpha.namespace(test).await;
        let ns = ns_alpha.name.clone();
        let ns_beta = beta.namespace_named(&ns).await;
        let dir = std::env::temp_dir().join(format!("kstretch-charts-{ns}"));
        std::fs::create_dir_all(&dir).expect("test dir");
        let link_port = free_port();

        // Central's chart: generated CA, central's certificate for 127.0.0.1 (the processes
        // run locally) and an agent certificate per member cluster.
        let central = render(
            "kstretch-central",
            &ns,
            &[
                "clusterAlias=alpha",
                "memberClusters={alpha,beta}",
                "tls.generate.agents={alpha,beta}",
                "tls.dnsNames={localhost}",
                "tls.ipAddresses={127.0.0.1}",
            ],
        );
        kubectl_apply(&env.clusters[0].kubeconfig, &central);
        let secrets: Api<Secret> = Api::namespaced(alpha.client.clone(), &ns);
        let central_tls = secrets
            .get("ks-kstretch-central-tls")
            .await
            .expect("central TLS");
        let alpha_tls = secrets
            .get("ks-kstretch-central-agent-alpha")
            .await
            .expect("agent alpha TLS");
        // The beta agent's certificate goes to beta, as the chart's NOTES tell a user to do.
        copy_secret(
            &alpha,
            &beta,
            &ns,
            "ks-kstretch-central-agent-beta",
            BETA_AGENT_SECRET,
        )
        .await;

        let central_url = format!("https://127.0.0.1:{link_port}");
        for (alias, kubeconfig, secret) in [
            (
                ALPHA,
                &env.clusters[0].kubeconfig,
                "ks-kstretch-central-agent-alpha",
            ),
            (BETA, &env.clusters[1].kubeconfig, BETA_AGENT_SECRET),
        ] {
            let agent = render(
                "kstretch-agent",
                &ns,
                &[
                    &format!("clusterAlias={alias}"),
                    &format!("central.url={central_url}"),
                    "tls.mode=secret",
                    &format!("tls.secretName={secret}"),
                ],
            );
            kubectl_apply(kubeconfig, &agent);
        }
        let beta_tls = Api::<Secret>::namespaced(beta.client.clone(), &ns)
            .get(BETA_AGENT_SECRET)
            .await
            .expect("agent beta TLS in beta");

        // Kubeconfigs with nothing but the charts' ServiceAccount tokens.
        let central_kc = dir.join("central.kubeconfig");
        write_token_kubeconfig(
            &env.clusters[0].kubeconfig,
            &token(&alpha, &ns, CENTRAL_SA).await,
            &central_kc,
        );
        let mut agent_kcs = BTreeMap::new();
        for (i, (alias, cluster)) in [(ALPHA, &alpha), (BETA, &beta)].into_iter().enumerate() {
            let path = dir.join(format!("agent-{alias}.kubeconfig"));
            write_token_kubeconfig(
                &env.clusters[i].kubeconfig,
                &token(cluster, &ns, AGENT_SA).await,
                &path,
            );
            agent_kcs.insert(alias.to_owned(), path);
        }
        let central_client = client_of(&central_kc).await;
        let mut agent_clients = BTreeMap::new();
        for (alias, path) in &agent_kcs {
            agent_clients.insert(alias.clone(), client_of(path).await);
        }

        // Central, as the chart's Deployment runs it (flags from the rendered manifest's
        // values), with local addresses.
        let central_files = write_tls(&dir, "central", &central_tls);
        let help = Command::new(binary("kstretch-central"))
            .arg("--help")
            .output()
            .expect("kstretch-central --help");
        // Leader election is run when this build of central has it (the chart always grants
        // the Lease).
        let leader_election = String::from_utf8_lossy(&help.stdout).contains("--leader-election");
        let mut command = Command::new(binary("kstretch-central"));
        command
            .arg("--kubeconfig")
            .arg(&central_kc)
            .args(["--namespace", &ns])
            .args(["--cluster-alias", ALPHA])
            .args(["--member-clusters", &format!("{ALPHA},{BETA}")])
            .args(["--http-addr", &format!("127.0.0.1:{}", free_port())])
            .args(["--grpc-addr", &format!("127.0.0.1:{}", free_port())])
            .args(["--link-addr", &format!("127.0.0.1:{link_port}")])
            .args(["--link-heartbeat-secs", "1"])
            .arg("--tls-ca")
            .arg(&central_files.0)
            .arg("--tls-cert")
            .arg(&central_files.1)
            .arg("--tls-key")
            .arg(&central_files.2)
            .env("RUST_LOG", "info,kstretch_central=debug");
        if leader_election {
            command.args([
                "--leader-election",
                "--leader-election-namespace",
                &ns,
                "--leader-election-lease-name",
                LEASE,
            ]);
        }
        let central = Spawned::start("central", command);

        let mut agents = BTreeMap::new();
        for (alias, secret) in [(ALPHA, &alpha_tls), (BETA, &beta_tls)] {
            let files = write_tls(&dir, &format!("agent-{alias}"), secret);
            let mut command = Command::new(binary("kstretch-agent"));
            command
                .arg("--kubeconfig")
                .arg(&agent_kcs[alias])
                .args(["--cluster-alias", alias])
                .args(["--namespace", &ns])
                .args(["--http-addr", &format!("127.0.0.1:{}", free_port())])
                .args(["--central", &central_url])
                .arg("--tls-ca")
                .arg(&files.0)
                .arg("--tls-cert")
                .arg(&files.1)
                .arg("--tls-key")
                .arg(&files.2)
                .args(["--reconnect-max-delay", "1s"])
                .env("RUST_LOG", "info,kstretch_agent=debug");
            agents.insert(
                alias.to_owned(),
                Spawned::start(&format!("agent-{alias}"), command),
            );
        }

        ChartInstall {
            ns,
            clusters: [(ALPHA.to_owned(), alpha), (BETA.to_owned(), beta)].into(),
            central_client,
            agent_clients,
            central: Some(central),
            agents,
            leader_election,
            dir,
            namespaces: vec![ns_alpha, ns_beta],
        }
    }

    /// An admin API for `K` in the test namespace of cluster `alias`.
    pub fn api<K>(&self, alias: &str) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.clusters[alias].client.clone(), &self.ns)
    }

    /// Server-side applies a Strimzi `object` (apiVersion `kafka.strimzi.io/v1`) in the test
    /// namespace of alpha as the admin, as a user would.
    pub async fn apply(&self, object: Value) {
        crate::cluster::apply(&self.clusters[ALPHA].client, &self.ns, object).await;
    }

    /// The last lines of central's and the agents' logs, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        if let Some(central) = &self.central {
            out.push_str(&format!("--- central ---\n{}\n", central.log_tail(25)));
        }
        for (alias, agent) in &self.agents {
            out.push_str(&format!("--- agent {alias} ---\n{}\n", agent.log_tail(25)));
        }
        out
    }

    /// The full logs of every process (to look for RBAC denials).
    pub fn all_logs(&self) -> String {
        let mut out = self
            .central
            .as_ref()
            .map(|c| c.log_text())
            .unwrap_or_default();
        for agent in self.agents.values() {
            out.push_str(&agent.log_text());
        }
        out
    }

    /// Stops everything and deletes the namespaces (call at the end of a passing test).
    pub async fn finish(mut self) {
        if let Some(mut central) = self.central.take() {
            central.stop();
        }
        for agent in self.agents.values_mut() {
            agent.stop();
        }
        for ns in std::mem::take(&mut self.namespaces) {
            ns.delete().await;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The path of one of the repository's charts.
pub fn chart(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../charts")
        .join(name)
}

/// A binary of the environment (`helm`, `kubectl`).
pub fn tool(name: &str) -> PathBuf {
    TestEnv::get()
        .bin_dir
        .clone()
        .expect("KSTRETCH_BIN_DIR (helm, kubectl) in the environment file")
        .join(name)
}

/// `helm template` of chart `name` as release [`RELEASE`] in `namespace` with `--set` values.
pub fn render(name: &str, namespace: &str, sets: &[&str]) -> String {
    let mut command = Command::new(tool("helm"));
    command
        .args(["template", RELEASE])
        .arg(chart(name))
        .args(["--namespace", namespace]);
    for set in sets {
        command.args(["--set", set]);
    }
    let out = command.output().expect("helm runs");
    assert!(
        out.status.success(),
        "helm template {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 manifest")
}

/// `kubectl apply --server-side` of `manifest` to the cluster of `kubeconfig`, for real.
pub fn kubectl_apply(kubeconfig: &Path, manifest: &str) {
    let mut apply = Command::new(tool("kubectl"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["apply", "--server-side", "--field-manager", FIELD_MANAGER])
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    use std::io::Write as _;
    apply
        .stdin
        .take()
        .expect("stdin")
        .write_all(manifest.as_bytes())
        .expect("manifest written");
    let out = apply.wait_with_output().expect("kubectl ends");
    assert!(
        out.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A token of ServiceAccount `sa` in `namespace` from the TokenRequest API (one hour).
pub async fn token(cluster: &Cluster, namespace: &str, sa: &str) -> String {
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    Api::<ServiceAccount>::namespaced(cluster.client.clone(), namespace)
        .create_token_request(sa, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("cannot get a token of {namespace}/{sa}: {e}"))
        .status
        .and_then(|s| s.token)
        .expect("a token in the TokenRequest's status")
}

/// Writes a kubeconfig with the server and CA of `admin` and `token` as its only credential.
pub fn write_token_kubeconfig(admin: &Path, token: &str, out: &Path) {
    let text = std::fs::read_to_string(admin).expect("environment kubeconfig");
    let mut kc: serde_yaml::Value = serde_yaml::from_str(&text).expect("kubeconfig YAML");
    let cluster = kc["clusters"][0].clone();
    let cluster_name = cluster["name"].as_str().expect("cluster name").to_owned();
    kc = serde_yaml::to_value(json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [serde_json::to_value(&cluster).expect("cluster")],
        "users": [{"name": "serviceaccount", "user": {"token": token}}],
        "contexts": [{"name": "serviceaccount",
                      "context": {"cluster": cluster_name, "user": "serviceaccount"}}],
        "current-context": "serviceaccount",
    }))
    .expect("kubeconfig");
    std::fs::write(out, serde_yaml::to_string(&kc).expect("kubeconfig text")).expect("write");
}

/// A client from the kubeconfig at `path`.
pub async fn client_of(path: &Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(path).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("client config");
    Client::try_from(config).expect("client")
}

/// Copies the TLS Secret `from` in `namespace` of `source` to `to` in the same namespace of
/// `target`: a chart-generated agent certificate taken to its member cluster, as the central
/// chart's NOTES tell a user to do.
pub async fn copy_secret(
    source: &Cluster,
    target: &Cluster,
    namespace: &str,
    from: &str,
    to: &str,
) {
    let generated = Api::<Secret>::namespaced(source.client.clone(), namespace)
        .get(from)
        .await
        .unwrap_or_else(|e| panic!("the chart's Secret {from}: {e}"));
    let copy: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": to, "namespace": namespace},
        "type": "kubernetes.io/tls", "data": generated.data,
    }))
    .expect("secret");
    Api::<Secret>::namespaced(target.client.clone(), namespace)
        .patch(
            to,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&copy),
        )
        .await
        .unwrap_or_else(|e| panic!("cannot copy {from} to {} as {to}: {e}", target.name));
}

/// Writes `ca.crt`, `tls.crt` and `tls.key` of `secret` as `<prefix>-{ca,cert,key}.pem`.
fn write_tls(dir: &Path, prefix: &str, secret: &Secret) -> (PathBuf, PathBuf, PathBuf) {
    let data = secret.data.clone().expect("secret data");
    let mut paths = Vec::new();
    for (key, file) in [("ca.crt", "ca"), ("tls.crt", "cert"), ("tls.key", "key")] {
        let path = dir.join(format!("{prefix}-{file}.pem"));
        let bytes = &data.get(key).unwrap_or_else(|| panic!("{key} missing")).0;
        std::fs::write(&path, bytes).expect("write PEM");
        paths.push(path);
    }
    let key = paths.pop().expect("key");
    let cert = paths.pop().expect("cert");
    let ca = paths.pop().expect("ca");
    (ca, cert, key)
}
