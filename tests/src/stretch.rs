//! A whole kstretch installation for end-to-end tests: the real `kstretch-central` watching
//! cluster alpha and a real `kstretch-agent` in each of alpha and beta, linked with mutual TLS,
//! all limited to one namespace that has the same name in both clusters.

use std::collections::BTreeMap;
use std::process::Command;

use kube::{Api, Resource};
use serde_json::Value;

use crate::certs::{CertFiles, Pki};
use crate::cluster::Cluster;
use crate::cluster::{DeleteOnPanic, TestNamespace};
use crate::crds;
use crate::env::TestEnv;
use crate::process::{Spawned, binary, free_port};

pub use crate::env::{ALPHA, BETA};

/// Central and its agents, killed when dropped.
#[derive(Debug)]
pub struct Stretch {
    pub ns: String,
    pub clusters: BTreeMap<String, Cluster>,
    pub central: Option<Spawned>,
    pub central_http: String,
    /// The admin gRPC API of the running central, as `kstretch --central` takes it.
    pub central_grpc: String,
    central_args: Vec<String>,
    pub agents: BTreeMap<String, Spawned>,
    link_port: u16,
    pki: Pki,
    namespaces: Vec<TestNamespace>,
    delete_on_panic: Option<DeleteOnPanic>,
}

impl Stretch {
    /// Starts everything for test `test`, with `extra` arguments for central.
    pub async fn start(test: &str, extra: &[&str]) -> Stretch {
        let env = TestEnv::get();
        let alpha = Cluster::connect(&env.clusters[0]).await;
        let beta = Cluster::connect(&env.clusters[1]).await;
        for c in [&alpha, &beta] {
            crds::install(c).await;
            crds::install_service_export(c).await;
        }
        let ns_alpha = alpha.namespace(test).await;
        let ns_beta = beta.namespace_named(&ns_alpha.name).await;
        let pki = Pki::new(test);
        let mut stretch = Stretch {
            ns: ns_alpha.name.clone(),
            clusters: [(ALPHA.to_owned(), alpha), (BETA.to_owned(), beta)].into(),
            central: None,
            central_http: String::new(),
            central_grpc: String::new(),
            central_args: extra.iter().map(|s| s.to_string()).collect(),
            agents: BTreeMap::new(),
            link_port: free_port(),
            pki,
            namespaces: vec![ns_alpha, ns_beta],
            delete_on_panic: None,
        };
        stretch.start_central();
        for alias in [ALPHA, BETA] {
            stretch.start_agent(alias);
        }
        stretch
    }

    /// From now on, a panic deletes the test's namespaces (see [`DeleteOnPanic`]): for tests
    /// whose pods really run.
    pub fn delete_namespaces_on_panic(&mut self) {
        self.delete_on_panic = Some(DeleteOnPanic(self.ns.clone()));
    }

    /// Starts (or restarts) central.
    pub fn start_central(&mut self) {
        let ns = self.ns.clone();
        self.start_central_watching(&ns);
    }

    /// Starts (or restarts) central watching `namespace` instead of the test's namespace.
    pub fn start_central_watching(&mut self, namespace: &str) {
        let link_port = self.link_port;
        self.start_central_with(ALPHA, namespace, 1, link_port);
    }

    /// Starts central as the one of cluster `own` (its kubeconfig; its resources in the test's
    /// namespace there) with `term`, linking on a port of its own: a central that replaces one
    /// whose cluster was lost. Agents started from now on connect to it; the central that ran
    /// is left running (stop it first to lose it).
    pub fn start_central_in(&mut self, own: &str, term: u64) {
        let ns = self.ns.clone();
        self.link_port = free_port();
        let link_port = self.link_port;
        self.start_central_with(own, &ns, term, link_port);
    }

    fn start_central_with(&mut self, own: &str, namespace: &str, term: u64, link_port: u16) {
        let (http_port, grpc_port) = (free_port(), free_port());
        let command = self.central_command(own, namespace, term, link_port, http_port, grpc_port);
        self.central = Some(Spawned::start(&format!("central-{own}-{term}"), command));
        self.central_http = format!("http://127.0.0.1:{http_port}");
        self.central_grpc = format!("http://127.0.0.1:{grpc_port}");
    }

    /// Another central beside the current one (the test owns it): the one of cluster `own`
    /// with `term`, linking on `link_port` (a replaced central coming back).
    pub fn spawn_central(&self, own: &str, term: u64, link_port: u16) -> Spawned {
        let command =
            self.central_command(own, &self.ns, term, link_port, free_port(), free_port());
        Spawned::start(&format!("central-{own}-{term}"), command)
    }

    fn central_command(
        &self,
        own: &str,
        namespace: &str,
        term: u64,
        link_port: u16,
        http_port: u16,
        grpc_port: u16,
    ) -> Command {
        let env = TestEnv::get();
        let kubeconfig = &env
            .clusters
            .iter()
            .find(|c| c.name == own)
            .unwrap_or_else(|| panic!("no cluster {own}"))
            .kubeconfig;
        let server = self.pki.server();
        let mut command = Command::new(binary("kstretch-central"));
        command
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--namespace", namespace])
            .args(["--cluster-alias", own])
            .args(["--member-clusters", &format!("{ALPHA},{BETA}")])
            .args(["--term", &term.to_string()])
            .args(["--http-addr", &format!("127.0.0.1:{http_port}")])
            .args(["--grpc-addr", &format!("127.0.0.1:{grpc_port}")])
            .args(["--link-addr", &format!("127.0.0.1:{link_port}")])
            .args(["--link-heartbeat-secs", "1"])
            .arg("--tls-ca")
            .arg(&server.ca)
            .arg("--tls-cert")
            .arg(&server.cert)
            .arg("--tls-key")
            .arg(&server.key)
            .args(&self.central_args)
            .env("RUST_LOG", "info,kstretch_central=debug");
        command
    }

    /// The link port of the central agents connect to now.
    pub fn link_port(&self) -> u16 {
        self.link_port
    }

    /// Points the agents started from now on at the central linking on `port`.
    pub fn use_link_port(&mut self, port: u16) {
        self.link_port = port;
    }

    /// Runs the `kstretch` CLI against this central; its exit status and its output.
    pub fn cli(&self, args: &[&str]) -> (bool, String) {
        let output = Command::new(binary("kstretch"))
            .args(["--central", &self.central_grpc])
            .args(args)
            .output()
            .expect("kstretch runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    }

    /// The `kstretch` CLI acting with the central cluster's kubeconfig in the test's namespace
    /// (the commands that read and write resources there, such as `drain` or `move-pool`).
    pub fn kstretch_command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(binary("kstretch"));
        command
            .args(["--central", &self.central_grpc])
            .args(args)
            .arg("--kubeconfig")
            .arg(self.kubeconfig(ALPHA))
            .args(["-n", &self.ns]);
        command
    }

    /// The agent link's address, as agents are given it.
    pub fn link_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.link_port)
    }

    /// The link certificate of the agent of `alias`.
    pub fn agent_cert(&self, alias: &str) -> CertFiles {
        self.pki.agent(alias)
    }

    /// Runs `command` in pod `pod` of cluster `alias` ([`crate::cluster::exec`]).
    pub fn exec(&self, alias: &str, pod: &str, command: &[&str]) -> Result<String, String> {
        crate::cluster::exec(alias, &self.ns, pod, command)
    }

    /// The kubeconfig of cluster `alias`.
    pub fn kubeconfig(&self, alias: &str) -> std::path::PathBuf {
        TestEnv::get()
            .clusters
            .iter()
            .find(|c| c.name == alias)
            .unwrap_or_else(|| panic!("no cluster {alias}"))
            .kubeconfig
            .clone()
    }

    pub fn stop_central(&mut self) {
        if let Some(mut central) = self.central.take() {
            central.stop();
        }
    }

    /// Starts (or restarts) the agent of `alias`.
    pub fn start_agent(&mut self, alias: &str) {
        let ns = self.ns.clone();
        self.start_agent_watching(alias, &ns);
    }

    /// Starts (or restarts) the agent of `alias` watching `namespaces` (its `--namespace`, e.g.
    /// `a,b`) instead of the test's namespace.
    pub fn start_agent_watching(&mut self, alias: &str, namespaces: &str) {
        let env = TestEnv::get();
        let cluster = env
            .clusters
            .iter()
            .find(|c| c.name == alias)
            .unwrap_or_else(|| panic!("no cluster {alias}"));
        let mut command = agent_command(
            &binary("kstretch-agent"),
            &cluster.kubeconfig,
            alias,
            namespaces,
            &format!("https://127.0.0.1:{}", self.link_port),
            &self.pki.agent(alias),
            free_port(),
        );
        command.env("RUST_LOG", "info,kstretch_agent=debug");
        // What the agent chart sets: the image central runs the agent's tools in (imported
        // into the real nodes by the tests that need it).
        command.env("KSTRETCH_AGENT_IMAGE", crate::helm::agent_image());
        self.agents.insert(
            alias.to_owned(),
            Spawned::start(&format!("agent-{alias}"), command),
        );
    }

    /// Kills the agent of `alias` (its cluster keeps running, unreachable for central).
    pub fn stop_agent(&mut self, alias: &str) {
        if let Some(mut agent) = self.agents.remove(alias) {
            agent.stop();
        }
    }

    /// Creates the namespace `<test namespace>-<suffix>` in both clusters (deleted by
    /// [`Stretch::finish`], as the test's own) and returns its name.
    pub async fn namespace_in_both(&mut self, suffix: &str) -> String {
        let name = format!("{}-{suffix}", self.ns);
        for alias in [ALPHA, BETA] {
            let ns = self.clusters[alias].namespace_named(&name).await;
            self.namespaces.push(ns);
        }
        name
    }

    /// An API for `K` in the test namespace of cluster `alias`.
    pub fn api<K>(&self, alias: &str) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.clusters[alias].client.clone(), &self.ns)
    }

    /// Server-side applies `object` (with its apiVersion and kind) in the test namespace of
    /// alpha, as a user would with `kubectl apply --server-side`.
    pub async fn apply(&self, object: Value) {
        self.apply_in(ALPHA, object).await;
    }

    /// [`Stretch::apply`], or what the apiserver said when it refused.
    pub async fn try_apply(&self, object: Value) -> Result<(), String> {
        crate::cluster::try_apply(&self.clusters[ALPHA].client, &self.ns, object).await
    }

    /// [`Stretch::apply`] in cluster `alias`.
    pub async fn apply_in(&self, alias: &str, object: Value) {
        crate::cluster::apply(&self.clusters[alias].client, &self.ns, object).await;
    }

    /// Waits until the `K` `name` in alpha satisfies `check`; on timeout shows it and the
    /// logs.
    pub async fn wait_in_alpha<K>(
        &self,
        name: &str,
        what: &str,
        timeout: std::time::Duration,
        check: impl Fn(&K) -> bool,
    ) -> K
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        self.wait_in(ALPHA, name, what, timeout, check).await
    }

    /// [`Stretch::wait_in_alpha`] in cluster `alias`.
    pub async fn wait_in<K>(
        &self,
        alias: &str,
        name: &str,
        what: &str,
        timeout: std::time::Duration,
        check: impl Fn(&K) -> bool,
    ) -> K
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        let api: Api<K> = self.api(alias);
        crate::wait::wait_for(what, timeout, || async {
            match api.get_opt(name).await {
                Ok(Some(k)) if check(&k) => crate::wait::Seen::Done(k),
                Ok(Some(k)) => crate::wait::Seen::NotYet(format!(
                    "{}\n{}",
                    crate::wait::shown(&k),
                    self.logs()
                )),
                Ok(None) => {
                    crate::wait::Seen::NotYet(format!("{name} does not exist\n{}", self.logs()))
                }
                Err(e) => crate::wait::Seen::NotYet(e.to_string()),
            }
        })
        .await
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

    /// A series of central's /metrics (the first line starting with `series`).
    pub async fn central_metric(&self, series: &str) -> Option<f64> {
        crate::process::metric(&self.central_http, series).await
    }

    /// Stops everything and deletes the namespaces (call at the end of a passing test).
    pub async fn finish(mut self) {
        self.stop_central();
        for alias in [ALPHA, BETA] {
            self.stop_agent(alias);
        }
        for ns in std::mem::take(&mut self.namespaces) {
            ns.delete().await;
        }
    }
}

/// The command of a `kstretch-agent` (at `binary`) that claims cluster `alias`, works in
/// `namespace` of the cluster of `kubeconfig`, links to `central_url` with `cert`, serves HTTP
/// on `http_port` and reconnects fast; callers add the log level.
pub fn agent_command(
    binary: &std::path::Path,
    kubeconfig: &std::path::Path,
    alias: &str,
    namespace: &str,
    central_url: &str,
    cert: &CertFiles,
    http_port: u16,
) -> Command {
    let mut command = Command::new(binary);
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--cluster-alias", alias])
        .args(["--namespace", namespace])
        .args(["--http-addr", &format!("127.0.0.1:{http_port}")])
        .args(["--central", central_url])
        .arg("--tls-ca")
        .arg(&cert.ca)
        .arg("--tls-cert")
        .arg(&cert.cert)
        .arg("--tls-key")
        .arg(&cert.key)
        .args(["--reconnect-max-delay", "1s"]);
    command
}
