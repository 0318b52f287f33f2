//! The agent link against the real environment: the real `kstretch-agent` binary (cluster
//! beta, its own namespace) connected over mTLS to central's link server, either the real
//! `kstretch-central` binary or, where the test must control the desired state, the link server
//! started in-process from the `kstretch-central` library with a `DesiredStates` the test fills.
//!
//! Certificates are made per test with rcgen (`kstretch_tests::certs`). Results are read back
//! through plain kube reads, the central's agent registry, the agent's /metrics and /readyz,
//! and the `kstretch` CLI.

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kstretch_api::StrimziPodSet;
use kstretch_central::link::{AgentRecord, DesiredStates, LinkConfig};
use kstretch_proto::agent::v1::agent_link_client::AgentLinkClient;
use kstretch_proto::agent::v1::agent_message::Body;
use kstretch_proto::agent::v1::central_message::Body as CentralBody;
use kstretch_proto::agent::v1::{
    AgentMessage, ApplyReport, CentralMessage, Heartbeat, Hello, ObjectResult, Outcome,
};
use kstretch_tests::central::InProcessCentral;
use kstretch_tests::certs::{CertFiles, Pki};
use kstretch_tests::cluster::TestNamespace;
use kstretch_tests::crds::{self, FIELD_MANAGER};
use kstretch_tests::process::{Spawned, binary, free_port};
use kstretch_tests::stretch::agent_command;
use kstretch_tests::wait::{Seen, wait_for, wait_for_deletion};
use kstretch_tests::{Cluster, TestEnv, wait_for_object};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

const TIMEOUT: Duration = Duration::from_secs(60);
/// Index of cluster "beta" in the environment: where every agent of these tests runs.
const BETA: usize = 1;
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

// ------------------------------------------------------------------------------ processes

/// A real `kstretch-agent` in cluster beta, limited to one namespace, linked to central.
struct Agent {
    process: Spawned,
    http: String,
}

impl Agent {
    /// Starts an agent that claims `--cluster-alias claimed` and presents `cert`.
    fn start(namespace: &str, claimed: &str, cert: &CertFiles, central_url: &str) -> Agent {
        let env = TestEnv::get();
        let http_port = free_port();
        let mut command = agent_command(
            &binary("kstretch-agent"),
            &env.clusters[BETA].kubeconfig,
            claimed,
            namespace,
            central_url,
            cert,
            http_port,
        );
        command.env("RUST_LOG", "info,kstretch_agent=debug");
        Agent {
            process: Spawned::start(&format!("agent-{claimed}"), command),
            http: format!("http://127.0.0.1:{http_port}"),
        }
    }

    async fn get(&self, path: &str) -> Result<(u16, String), reqwest::Error> {
        http_get(&format!("{}{path}", self.http)).await
    }

    /// The value of a metric line whose name and labels are `series`; None when absent.
    async fn metric(&self, series: &str) -> Option<f64> {
        let (_, body) = self.get("/metrics").await.ok()?;
        metric(&body, series)
    }

    fn log_tail(&self) -> String {
        tail(&self.process.log_text(), 40)
    }
}

async fn http_get(url: &str) -> Result<(u16, String), reqwest::Error> {
    let response = reqwest::get(url).await?;
    let code = response.status().as_u16();
    Ok((code, response.text().await?))
}

fn metric(body: &str, series: &str) -> Option<f64> {
    body.lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok()).flatten()
    })
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A namespace of this test in cluster beta, with the CRDs installed.
async fn setup(test: &str) -> TestNamespace {
    let cluster = Cluster::connect(&TestEnv::get().clusters[BETA]).await;
    crds::install(&cluster).await;
    cluster.namespace(test).await
}

// ------------------------------------------------------------------------------ objects

fn config_map(ns: &str, name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns}, "data": {"server.properties": value}})
}

fn service(ns: &str, name: &str, port: u32) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"selector": {"strimzi.io/cluster": "my-cluster"},
                    "ports": [{"name": "tcp", "port": port}]}})
}

fn podset(ns: &str, name: &str, pods: &[&str]) -> Value {
    let pods: Vec<Value> = pods
        .iter()
        .map(|pod| {
            json!({
                "metadata": {"name": pod,
                             "labels": {"strimzi.io/cluster": "my-cluster", "strimzi.io/pod-name": pod},
                             "annotations": {"strimzi.io/revision": "r1"}},
                "spec": {"containers": [{"name": "kafka", "image": "quay.io/strimzi/kafka:latest"}],
                         "terminationGracePeriodSeconds": 0}
            })
        })
        .collect();
    json!({"apiVersion": "core.strimzi.io/v1", "kind": "StrimziPodSet",
           "metadata": {"name": name, "namespace": ns, "labels": {"strimzi.io/cluster": "my-cluster"}},
           "spec": {"selector": {"matchLabels": {"strimzi.io/cluster": "my-cluster"}}, "pods": pods}})
}

// ------------------------------------------------------------------------------ waits

/// Waits until central's record of `alias` satisfies `condition`; shows the record (or the
/// aliases central knows) and the agent's log on timeout.
async fn wait_agent(
    central: &InProcessCentral,
    alias: &str,
    agent: &Agent,
    what: &str,
    condition: impl Fn(&AgentRecord) -> bool,
) -> AgentRecord {
    wait_for(what, TIMEOUT, || async {
        match central.link.agents.get(alias) {
            Some(record) if condition(&record) => Seen::Done(record),
            Some(record) => Seen::NotYet(format!(
                "central's record of {alias}: {record:#?}\nagent log:\n{}",
                agent.log_tail()
            )),
            None => Seen::NotYet(format!(
                "central knows no agent {alias:?} (known: {:?})\nagent log:\n{}",
                central
                    .link
                    .agents
                    .list()
                    .iter()
                    .map(|r| r.cluster_alias.clone())
                    .collect::<Vec<_>>(),
                agent.log_tail()
            )),
        }
    })
    .await
}

/// Waits for the agent's apply report of `generation`.
async fn wait_applied(
    central: &InProcessCentral,
    alias: &str,
    agent: &Agent,
    generation: u64,
) -> ApplyReport {
    let what = format!("{alias} to report generation {generation} applied");
    wait_agent(central, alias, agent, &what, |r| {
        r.connected
            && r.last_apply
                .as_ref()
                .is_some_and(|a| a.generation == generation)
    })
    .await
    .last_apply
    .expect("report")
}

fn result_for<'a>(report: &'a ApplyReport, kind: &str, name: &str) -> &'a ObjectResult {
    report
        .results
        .iter()
        .find(|r| {
            r.r#ref
                .as_ref()
                .is_some_and(|o| o.kind == kind && o.name == name)
        })
        .unwrap_or_else(|| panic!("no result for {kind} {name} in {report:#?}"))
}

fn uid<K: kube::Resource>(object: &K) -> String {
    object.meta().uid.clone().expect("uid")
}

fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

// ------------------------------------------------------------------------------ raw clients

/// A hand-driven client of the link, for what the real agent never sends.
struct RawStream {
    tx: mpsc::Sender<AgentMessage>,
    inbound: tonic::Streaming<CentralMessage>,
}

/// TLS trusting `ca_pem`, presenting `cert` if given; central's certificate is for localhost.
fn client_tls(ca_pem: &str, cert: Option<&CertFiles>) -> ClientTlsConfig {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca_pem))
        .domain_name("localhost");
    if let Some(cert) = cert {
        tls = tls.identity(Identity::from_pem(&cert.cert_pem, &cert.key_pem));
    }
    tls
}

async fn channel(url: &str, tls: ClientTlsConfig) -> Result<tonic::transport::Channel, String> {
    Endpoint::from_shared(url.to_owned())
        .map_err(|e| e.to_string())?
        .tls_config(tls)
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(10))
        .connect()
        .await
        .map_err(|e| format!("connect: {e:?}"))
}

/// Opens a `Connect` stream; the error says how it was refused.
async fn open(url: &str, tls: ClientTlsConfig) -> Result<RawStream, String> {
    let channel = channel(url, tls).await?;
    let (tx, mut rx) = mpsc::channel::<AgentMessage>(16);
    let outbound = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let response = tokio::time::timeout(
        Duration::from_secs(10),
        AgentLinkClient::new(channel).connect(outbound),
    )
    .await
    .map_err(|_| "no answer within 10s".to_owned())?
    .map_err(|s| format!("{:?}: {}", s.code(), s.message()))?;
    Ok(RawStream {
        tx,
        inbound: response.into_inner(),
    })
}

impl RawStream {
    async fn send(&self, body: Option<Body>) {
        self.tx
            .send(AgentMessage { body })
            .await
            .expect("stream open");
    }

    /// The next message that is not a heartbeat.
    async fn next(&mut self) -> Result<Option<CentralBody>, String> {
        loop {
            let next = tokio::time::timeout(Duration::from_secs(10), self.inbound.message())
                .await
                .map_err(|_| "nothing from central within 10s".to_owned())?
                .map_err(|s| format!("{:?}: {}", s.code(), s.message()))?;
            match next.map(|m| m.body) {
                Some(Some(CentralBody::Heartbeat(_))) => continue,
                Some(body) => return Ok(body),
                None => return Ok(None),
            }
        }
    }

    /// Sends `Hello` and returns central's answer.
    async fn hello(&mut self, claimed: &str) -> Result<Option<CentralBody>, String> {
        self.send(Some(Body::Hello(Hello {
            claimed_cluster_alias: claimed.to_owned(),
            ..Hello::default()
        })))
        .await;
        self.next().await
    }

    async fn expect_error(&mut self, reason: &str) -> String {
        match self.next().await {
            Ok(Some(CentralBody::Error(e))) if e.reason == reason => e.message,
            other => panic!("expected a ProtocolError {reason:?}, got {other:?}"),
        }
    }
}

/// Opens a stream with `cert` and completes the handshake; the error says what failed.
async fn handshake(url: &str, ca_pem: &str, cert: Option<&CertFiles>) -> Result<String, String> {
    let mut stream = open(url, client_tls(ca_pem, cert)).await?;
    match stream.hello("whatever").await? {
        Some(CentralBody::Welcome(w)) => Ok(w.cluster_alias),
        other => Err(format!("unexpected answer to Hello: {other:?}")),
    }
}

// ------------------------------------------------------------------------------ tests

/// The real central binary (cluster alpha) with the link enabled, and a real agent (beta).
#[tokio::test]
async fn real_central_knows_the_agent_by_its_certificate_and_the_agent_outlives_it() {
    let env = TestEnv::get();
    let ns = setup("link-real-central").await;
    let alpha = Cluster::connect(&env.clusters[0]).await;
    crds::install(&alpha).await;
    let central_ns = alpha.namespace("link-real-central").await;
    let pki = Pki::new("real");
    let server = pki.server();
    let (http_port, grpc_port, link_port) = (free_port(), free_port(), free_port());
    let start_central = || {
        let mut command = Command::new(binary("kstretch-central"));
        command
            .arg("--kubeconfig")
            .arg(&env.clusters[0].kubeconfig)
            .args(["--namespace", &central_ns.name])
            .args(["--http-addr", &format!("127.0.0.1:{http_port}")])
            .args(["--grpc-addr", &format!("127.0.0.1:{grpc_port}")])
            .args(["--link-addr", &format!("127.0.0.1:{link_port}")])
            .arg("--tls-ca")
            .arg(&server.ca)
            .arg("--tls-cert")
            .arg(&server.cert)
            .arg("--tls-key")
            .arg(&server.key)
            .args(["--link-heartbeat-secs", "1"]);
        Spawned::start("central", command)
    };
    let central_http = format!("http://127.0.0.1:{http_port}");
    let admin = format!("http://127.0.0.1:{grpc_port}");
    let link_url = format!("https://localhost:{link_port}");
    let mut central = start_central();

    let agent = Agent::start(&ns.name, "beta", &pki.agent("beta"), &link_url);
    let agents_table = || async {
        let out = Command::new(binary("kstretch"))
            .args(["--central", &admin, "agents"])
            .output()
            .expect("run kstretch");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let connected = stdout.lines().any(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.first() == Some(&"beta") && cols.get(1) == Some(&"yes")
        });
        (
            connected,
            stdout,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let table = wait_for(
        "kstretch agents to show beta connected",
        TIMEOUT,
        || async {
            match agents_table().await {
                (true, stdout, _) => Seen::Done(stdout),
                (false, stdout, stderr) => Seen::NotYet(format!(
                    "{stdout}{stderr}\ncentral log:\n{}\nagent log:\n{}",
                    tail(&central.log_text(), 20),
                    agent.log_tail()
                )),
            }
        },
    )
    .await;
    assert!(table.contains(env!("CARGO_PKG_VERSION")), "{table}");
    // Central publishes a desired state (empty: no Kafka) for the member clusters it knows,
    // here only its own; beta is no member, so it gets none.
    let desired_for: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.starts_with("DESIRED FOR"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(desired_for, ["central"], "{table}");

    // grpc.health.v1 and reflection on the link server, over mTLS.
    let probe = pki.agent("probe");
    let channel = channel(&link_url, client_tls(&pki.ca_pem(), Some(&probe)))
        .await
        .expect("mTLS channel");
    let health = tonic_health::pb::health_client::HealthClient::new(channel.clone())
        .check(tonic_health::pb::HealthCheckRequest {
            service: "kstretch.agent.v1.AgentLink".into(),
        })
        .await
        .expect("health check")
        .into_inner();
    assert_eq!(
        health.status(),
        tonic_health::pb::health_check_response::ServingStatus::Serving
    );
    let services = list_services(channel).await;
    for service in [
        "kstretch.agent.v1.AgentLink",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
    ] {
        assert!(services.iter().any(|s| s == service), "{services:?}");
    }
    assert!(
        !services.iter().any(|s| s.contains("AdminService")),
        "the link server does not serve the admin API: {services:?}"
    );

    // Metrics and readiness detail on both sides.
    let (_, body) = http_get(&format!("{central_http}/metrics"))
        .await
        .expect("metrics");
    assert_eq!(
        metric(&body, "kstretch_central_link_connected_agents"),
        Some(1.0),
        "{body}"
    );
    // The agent counts itself connected once it has recorded the central's term, a moment
    // after central counts the stream.
    wait_for(
        "the agent's metric to say it is connected",
        Duration::from_secs(10),
        || async {
            match agent.metric("kstretch_agent_link_connected").await {
                Some(1.0) => Seen::Done(()),
                other => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Seen::NotYet(format!("{other:?}"))
                }
            }
        },
    )
    .await;
    let (code, readyz) = agent.get("/readyz").await.expect("readyz");
    assert_eq!(code, 200, "{readyz}");
    assert!(readyz.contains("[+] link: connected to"), "{readyz}");

    // Central killed: the agent stays live and ready, and says it is not connected.
    central.stop();
    wait_for("the agent to notice central is gone", TIMEOUT, || async {
        let connected = agent.metric("kstretch_agent_link_connected").await;
        let ready = agent.get("/readyz").await;
        match (connected, &ready) {
            (Some(v), Ok((200, body))) if v == 0.0 && body.contains("[+] link: not connected") => {
                Seen::Done(())
            }
            _ => Seen::NotYet(format!("{connected:?} {ready:?}\n{}", agent.log_tail())),
        }
    })
    .await;
    let (code, healthz) = agent.get("/healthz").await.expect("healthz");
    assert_eq!(code, 200, "{healthz}");

    // Central back: the same agent process reconnects by itself.
    central = start_central();
    wait_for("beta to be connected again", TIMEOUT, || async {
        match agents_table().await {
            (true, stdout, _) => Seen::Done(stdout),
            (false, stdout, stderr) => Seen::NotYet(format!(
                "{stdout}{stderr}\nagent log:\n{}",
                agent.log_tail()
            )),
        }
    })
    .await;
    let attempts = agent
        .metric("kstretch_agent_link_connection_attempts_total")
        .await
        .unwrap_or_default();
    assert!(attempts >= 2.0, "{attempts}");
    drop(central);
    ns.delete().await;
    central_ns.delete().await;
}

async fn list_services(channel: tonic::transport::Channel) -> Vec<String> {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = ServerReflectionClient::new(channel)
        .server_reflection_info(futures::stream::iter([request]))
        .await
        .expect("reflection")
        .into_inner();
    let response = responses
        .message()
        .await
        .expect("reflection answer")
        .expect("one answer");
    match response.message_response {
        Some(MessageResponse::ListServicesResponse(list)) => {
            list.service.into_iter().map(|s| s.name).collect()
        }
        other => panic!("unexpected reflection answer {other:?}"),
    }
}

#[tokio::test]
async fn a_certificate_for_one_cluster_cannot_pose_as_another() {
    let ns = setup("link-pose").await;
    let pki = Pki::new("pose");
    let desired = DesiredStates::new();
    desired
        .set("beta", vec![config_map(&ns.name, "for-beta", "b")])
        .expect("desired beta");
    desired
        .set("alpha", vec![config_map(&ns.name, "for-alpha", "a")])
        .expect("desired alpha");
    let central = InProcessCentral::start("127.0.0.1:0".parse().unwrap(), &pki, desired);

    // Certificate for alpha, claiming to be beta.
    let agent = Agent::start(&ns.name, "beta", &pki.agent("alpha"), &central.url());
    wait_applied(&central, "alpha", &agent, 1).await;
    let record = central.link.agents.get("alpha").expect("alpha");
    assert_eq!(record.claimed_cluster_alias, "beta");
    let mismatch = record
        .mismatches
        .iter()
        .find(|m| m.field == "cluster_alias")
        .expect("alias mismatch reported");
    assert_eq!(
        (mismatch.central.as_str(), mismatch.agent.as_str()),
        ("alpha", "beta")
    );
    assert!(
        central.link.agents.get("beta").is_none(),
        "nothing is keyed by the claim"
    );

    let config_maps: Api<ConfigMap> = ns.api();
    assert!(config_maps.get_opt("for-alpha").await.unwrap().is_some());
    assert!(
        config_maps.get_opt("for-beta").await.unwrap().is_none(),
        "beta's desired state never reaches an agent with alpha's certificate"
    );
    let (_, readyz) = agent.get("/readyz").await.expect("readyz");
    assert!(
        readyz.contains("as \"alpha\"; mismatches: cluster_alias"),
        "the agent learns who central takes it for:\n{readyz}"
    );
    let listed = kstretch_central::admin::list_agents(Some((&central.link, central.addr)));
    let aliases: Vec<_> = listed
        .agents
        .iter()
        .map(|a| a.cluster_alias.as_str())
        .collect();
    assert_eq!(aliases, ["alpha"]);
    ns.delete().await;
}

#[tokio::test]
async fn clients_without_a_valid_certificate_are_refused() {
    let pki = Pki::new("refuse");
    let other = Pki::new("other-ca");
    let central =
        InProcessCentral::start("127.0.0.1:0".parse().unwrap(), &pki, DesiredStates::new());
    let url = central.url();
    let ca = pki.ca_pem();

    let no_cert = handshake(&url, &ca, None).await;
    assert!(
        no_cert.is_err(),
        "a client without a certificate got in: {no_cert:?}"
    );
    let foreign = handshake(&url, &ca, Some(&other.agent("beta"))).await;
    assert!(
        foreign.is_err(),
        "a certificate of another CA got in: {foreign:?}"
    );
    // Signed by the right CA, but naming no valid cluster: refused by central, not TLS.
    let nameless = handshake(&url, &ca, Some(&pki.client_with_cn("Not An Alias"))).await;
    let err = nameless.expect_err("a certificate naming no cluster got in");
    assert!(
        err.contains("Unauthenticated") && err.contains("not a valid cluster alias"),
        "{err}"
    );
    assert!(central.link.agents.list().is_empty());

    // The real agent with a certificate of another CA: it keeps trying, is never let in, and
    // says why in its readiness detail (without failing readiness).
    let ns = setup("link-refused").await;
    let mut foreign_cert = other.agent("beta");
    foreign_cert.ca = pki.ca_path();
    let agent = Agent::start(&ns.name, "beta", &foreign_cert, &url);
    let detail = wait_for(
        "the agent to report that central refuses it",
        TIMEOUT,
        || async {
            match agent.get("/readyz").await {
                Ok((200, body))
                    if body.contains("[+] link: not connected")
                        && body.contains("client certificate") =>
                {
                    Seen::Done(body)
                }
                other => Seen::NotYet(format!("{other:?}\n{}", agent.log_tail())),
            }
        },
    )
    .await;
    assert!(
        agent
            .metric("kstretch_agent_link_connection_attempts_total")
            .await
            .is_some_and(|n| n >= 1.0)
    );
    assert!(
        central.link.agents.list().is_empty(),
        "refused, yet registered:\n{detail}"
    );
    drop(agent);
    ns.delete().await;

    // The server is unharmed: a valid certificate gets in, named by its URI SAN.
    let welcome = handshake(&url, &ca, Some(&pki.agent("gamma"))).await;
    assert_eq!(welcome, Ok("gamma".to_owned()));
}

#[tokio::test]
async fn a_snapshot_is_applied_and_a_later_one_deletes_what_it_no_longer_lists() {
    let ns = setup("link-apply").await;
    let pki = Pki::new("apply");
    let config_maps: Api<ConfigMap> = ns.api();
    let services: Api<Service> = ns.api();
    let podsets: Api<StrimziPodSet> = ns.api();
    let pods: Api<Pod> = ns.api();
    // Not the agent's: never deleted by it.
    config_maps
        .patch(
            "not-ours",
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Apply(config_map(&ns.name, "not-ours", "x")),
        )
        .await
        .expect("not-ours");

    let cm = config_map(&ns.name, "broker-config", "node.id=0");
    let svc = service(&ns.name, "my-cluster-kafka-bootstrap", 9092);
    let sps = podset(&ns.name, "my-cluster-broker", &["my-cluster-broker-0"]);
    let desired = DesiredStates::new();
    desired
        .set("beta", vec![cm, svc.clone(), sps.clone()])
        .expect("desired");
    let central = InProcessCentral::start("127.0.0.1:0".parse().unwrap(), &pki, desired.clone());
    let agent = Agent::start(&ns.name, "beta", &pki.agent("beta"), &central.url());

    let report = wait_applied(&central, "beta", &agent, 1).await;
    assert_eq!(report.results.len(), 3, "{report:#?}");
    assert!(
        report
            .results
            .iter()
            .all(|r| r.outcome() == Outcome::Applied),
        "{report:#?}"
    );
    let applied_cm = config_maps.get("broker-config").await.expect("ConfigMap");
    assert_eq!(
        applied_cm
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(MANAGED_BY)),
        Some(&"kstretch-agent".to_owned())
    );
    let managers: Vec<_> = applied_cm
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| (m.manager.clone(), m.operation.clone()))
        .collect();
    assert!(
        managers.contains(&(Some("kstretch-agent".into()), Some("Apply".into()))),
        "{managers:?}"
    );
    let applied_svc = services
        .get("my-cluster-kafka-bootstrap")
        .await
        .expect("Service");
    let port = applied_svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .expect("ports")[0]
        .port;
    assert_eq!(port, 9092);
    let applied_sps = podsets.get("my-cluster-broker").await.expect("podset");
    // The podset controller takes it from there.
    wait_for_object(&pods, "my-cluster-broker-0", TIMEOUT, is_ready).await;

    // Generation 2 no longer lists the ConfigMap: it is deleted, the rest untouched.
    let outcome = desired.set("beta", vec![svc, sps]).expect("desired");
    assert_eq!(outcome.generation, 2);
    let report = wait_applied(&central, "beta", &agent, 2).await;
    assert_eq!(
        result_for(&report, "ConfigMap", "broker-config").outcome(),
        Outcome::Deleted
    );
    wait_for_deletion(&config_maps, "broker-config", TIMEOUT).await;
    let svc_now = services
        .get("my-cluster-kafka-bootstrap")
        .await
        .expect("Service");
    let sps_now = podsets.get("my-cluster-broker").await.expect("podset");
    assert_eq!(uid(&svc_now), uid(&applied_svc));
    assert_eq!(uid(&sps_now), uid(&applied_sps));
    assert!(config_maps.get_opt("not-ours").await.unwrap().is_some());

    let listed = kstretch_central::admin::list_agents(Some((&central.link, central.addr)));
    let beta = &listed.agents[0];
    assert_eq!(
        (
            beta.applied_generation,
            beta.applied_objects,
            beta.deleted_objects
        ),
        (2, 2, 1)
    );
    assert!(beta.apply_errors.is_empty(), "{beta:#?}");
    ns.delete().await;
}

#[tokio::test]
async fn an_object_the_apiserver_rejects_is_reported_with_its_message_and_the_rest_applied() {
    let ns = setup("link-reject").await;
    let pki = Pki::new("reject");
    let desired = DesiredStates::new();
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": "not-for-the-agent", "namespace": ns.name},
                     "spec": {"containers": [{"name": "c", "image": "i"}]}});
    desired
        .set(
            "beta",
            vec![
                config_map(&ns.name, "good", "ok"),
                service(&ns.name, "bad", 70000),
                service(&ns.name, "also-good", 9093),
                pod,
            ],
        )
        .expect("desired");
    let central = InProcessCentral::start("127.0.0.1:0".parse().unwrap(), &pki, desired);
    let agent = Agent::start(&ns.name, "beta", &pki.agent("beta"), &central.url());

    let report = wait_applied(&central, "beta", &agent, 1).await;
    let bad = result_for(&report, "Service", "bad");
    assert_eq!(bad.outcome(), Outcome::Rejected, "{bad:#?}");
    assert_eq!(
        (bad.code, bad.reason.as_str()),
        (422, "Invalid"),
        "{bad:#?}"
    );
    assert!(
        bad.message.contains("70000") && bad.message.contains("spec.ports[0].port"),
        "the apiserver's own message: {}",
        bad.message
    );
    let pod = result_for(&report, "Pod", "not-for-the-agent");
    assert_eq!(
        (pod.outcome(), pod.reason.as_str()),
        (Outcome::Rejected, "kind-not-managed")
    );
    assert_eq!(
        result_for(&report, "ConfigMap", "good").outcome(),
        Outcome::Applied
    );
    assert_eq!(
        result_for(&report, "Service", "also-good").outcome(),
        Outcome::Applied
    );
    let config_maps: Api<ConfigMap> = ns.api();
    let services: Api<Service> = ns.api();
    let pods: Api<Pod> = ns.api();
    assert!(config_maps.get_opt("good").await.unwrap().is_some());
    assert!(services.get_opt("also-good").await.unwrap().is_some());
    assert!(services.get_opt("bad").await.unwrap().is_none());
    assert!(pods.get_opt("not-for-the-agent").await.unwrap().is_none());

    // What `kstretch agents` shows.
    let listed = kstretch_central::admin::list_agents(Some((&central.link, central.addr)));
    let errors = &listed.agents[0].apply_errors;
    assert_eq!(errors.len(), 2, "{errors:#?}");
    let service_error = errors
        .iter()
        .find(|e| e.object == format!("v1/Service {}/bad", ns.name))
        .expect("service error listed");
    assert!(
        service_error.message.contains("70000"),
        "{service_error:#?}"
    );
    assert_eq!(
        agent.metric("kstretch_agent_link_apply_errors_total").await,
        Some(2.0)
    );
    ns.delete().await;
}

/// A message whose field 1 is a number where `AgentMessage` has a message (`hello`): valid
/// protobuf bytes that do not decode as an `AgentMessage`.
#[derive(Clone, PartialEq, prost::Message)]
struct Undecodable {
    #[prost(uint64, tag = "1")]
    hello_as_a_number: u64,
}

#[tokio::test]
async fn malformed_and_unknown_messages_are_answered_with_errors_and_the_server_survives() {
    let ns = setup("link-malformed").await;
    let pki = Pki::new("malformed");
    let desired = DesiredStates::new();
    desired
        .set("beta", vec![config_map(&ns.name, "still-served", "x")])
        .expect("desired");
    let central = InProcessCentral::start("127.0.0.1:0".parse().unwrap(), &pki, desired);
    let agent = Agent::start(&ns.name, "beta", &pki.agent("beta"), &central.url());
    let before = wait_applied(&central, "beta", &agent, 1).await;
    let connected_since = central
        .link
        .agents
        .get("beta")
        .expect("beta")
        .connected_since;

    // Unknown and out-of-order messages: an error each, and the stream goes on.
    let tls = client_tls(&pki.ca_pem(), Some(&pki.agent("prober")));
    let mut stream = open(&central.url(), tls.clone()).await.expect("stream");
    stream.send(None).await;
    let message = stream.expect_error("unknown-message").await;
    assert!(message.contains("newer"), "{message}");
    stream
        .send(Some(Body::Heartbeat(Heartbeat::default())))
        .await;
    stream.expect_error("hello-expected").await;
    match stream.hello("prober").await {
        Ok(Some(CentralBody::Welcome(w))) => assert_eq!(w.cluster_alias, "prober"),
        other => panic!("expected Welcome, got {other:?}"),
    }
    stream
        .send(Some(Body::ApplyReport(ApplyReport {
            generation: 7,
            ..ApplyReport::default()
        })))
        .await;
    stream.expect_error("unknown-generation").await;
    stream.send(Some(Body::Hello(Hello::default()))).await;
    stream.expect_error("duplicate-hello").await;
    // Still alive: central keeps sending heartbeats and takes ours.
    let beat = tokio::time::timeout(Duration::from_secs(10), stream.inbound.message())
        .await
        .expect("a heartbeat within 10s")
        .expect("stream alive");
    assert!(matches!(
        beat.and_then(|m| m.body),
        Some(CentralBody::Heartbeat(_))
    ));
    assert!(
        central
            .link
            .agents
            .get("prober")
            .is_some_and(|r| r.connected)
    );

    // Bytes that are not an AgentMessage: an error reply, then the stream ends.
    let raw = channel(&central.url(), tls.clone()).await.expect("channel");
    let mut grpc = tonic::client::Grpc::new(raw);
    grpc.ready().await.expect("ready");
    let codec = tonic_prost::ProstCodec::<Undecodable, CentralMessage>::default();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/kstretch.agent.v1.AgentLink/Connect",
    );
    let (bad_tx, mut bad_rx) = mpsc::channel::<Undecodable>(1);
    bad_tx
        .send(Undecodable {
            hello_as_a_number: 42,
        })
        .await
        .unwrap();
    let outbound = futures::stream::poll_fn(move |cx| bad_rx.poll_recv(cx));
    let mut replies = grpc
        .streaming(tonic::Request::new(outbound), path, codec)
        .await
        .expect("stream opened")
        .into_inner();
    let reply = tokio::time::timeout(Duration::from_secs(10), replies.message())
        .await
        .expect("a reply within 10s");
    match reply {
        Ok(Some(CentralMessage {
            body: Some(CentralBody::Error(e)),
        })) => {
            assert_eq!(e.reason, "malformed-message", "{e:?}");
            assert!(e.message.contains("decode"), "{e:?}");
        }
        other => panic!("expected a malformed-message error, got {other:?}"),
    }
    let end = tokio::time::timeout(Duration::from_secs(10), replies.message())
        .await
        .expect("the stream ends");
    assert!(
        matches!(&end, Err(s) if s.code() == tonic::Code::InvalidArgument),
        "{end:?}"
    );
    drop(bad_tx);

    // The server survived: the real agent never lost its stream, and new streams work.
    let record = central.link.agents.get("beta").expect("beta");
    assert!(record.connected);
    assert_eq!(
        record.connected_since, connected_since,
        "the agent did not reconnect"
    );
    assert_eq!(record.last_apply.map(|a| a.hash), Some(before.hash));
    let again = handshake(&central.url(), &pki.ca_pem(), Some(&pki.agent("prober-2"))).await;
    assert_eq!(again, Ok("prober-2".to_owned()));
    ns.delete().await;
}

#[tokio::test]
async fn without_central_pods_are_kept_alive_and_a_resync_restarts_nothing() {
    let ns = setup("link-resync").await;
    let pki = Pki::new("resync");
    let config_maps: Api<ConfigMap> = ns.api();
    let podsets: Api<StrimziPodSet> = ns.api();
    let pods: Api<Pod> = ns.api();
    let names = ["my-cluster-broker-0", "my-cluster-broker-1"];
    let objects = vec![
        config_map(&ns.name, "my-cluster-broker-config", "process.roles=broker"),
        podset(&ns.name, "my-cluster-broker", &names),
    ];
    let desired = DesiredStates::new();
    desired.set("beta", objects.clone()).expect("desired");
    let central = InProcessCentral::start("127.0.0.1:0".parse().unwrap(), &pki, desired);
    let addr: SocketAddr = central.addr;
    let agent = Agent::start(&ns.name, "beta", &pki.agent("beta"), &central.url());
    let first = wait_applied(&central, "beta", &agent, 1).await;
    for name in names {
        wait_for_object(&pods, name, TIMEOUT, is_ready).await;
    }
    // The agent reports podset status and pod readiness to central.
    let uids_of = |p: &Vec<Pod>| p.iter().map(uid).collect::<Vec<_>>();
    let mut before = Vec::new();
    for name in names {
        before.push(pods.get(name).await.expect("pod"));
    }
    let want = uids_of(&before);
    wait_agent(
        &central,
        "beta",
        &agent,
        "podset status with both pods ready",
        |r| {
            r.podsets.iter().any(|p| {
                p.name == "my-cluster-broker"
                    && p.ready_pods == 2
                    && p.pods_status.iter().all(|s| s.ready)
                    && p.pods_status
                        .iter()
                        .map(|s| s.uid.clone())
                        .collect::<Vec<_>>()
                        == want
            })
        },
    )
    .await;

    // Central is killed: the agent keeps running, and deletes nothing.
    central.kill();
    wait_for("the agent to notice central is gone", TIMEOUT, || async {
        match agent.metric("kstretch_agent_link_connected").await {
            Some(0.0) => Seen::Done(()),
            other => Seen::NotYet(format!("{other:?}\n{}", agent.log_tail())),
        }
    })
    .await;
    for path in ["/healthz", "/readyz"] {
        let (code, body) = agent.get(path).await.expect(path);
        assert_eq!(code, 200, "{path} without central:\n{body}");
    }

    // A pod deleted meanwhile comes back Ready, through the agent's podset controller.
    pods.delete(names[0], &DeleteParams::default())
        .await
        .expect("delete pod");
    let replaced = wait_for_object(&pods, names[0], TIMEOUT, |p| {
        is_ready(p) && uid(p) != uid(&before[0])
    })
    .await;
    let cm_before = config_maps
        .get("my-cluster-broker-config")
        .await
        .expect("the ConfigMap survives central's absence");
    let sps_before = podsets
        .get("my-cluster-broker")
        .await
        .expect("the podset survives central's absence");
    let settled = vec![replaced, pods.get(names[1]).await.expect("pod 1")];
    assert_eq!(
        uid(&settled[1]),
        uid(&before[1]),
        "the other pod was left alone"
    );

    // Central is back (same address, a desired state recomputed from scratch with the same
    // content): the agent reconnects and re-applies everything, and nothing restarts.
    let desired = DesiredStates::new();
    desired.set("beta", objects).expect("desired");
    let central = InProcessCentral::start(addr, &pki, desired);
    let resync = wait_applied(&central, "beta", &agent, 1).await;
    assert_eq!(resync.hash, first.hash);
    assert!(
        resync
            .results
            .iter()
            .all(|r| r.outcome() == Outcome::Applied),
        "{resync:#?}"
    );
    let want = uids_of(&settled);
    wait_agent(
        &central,
        "beta",
        &agent,
        "the new central to see both pods ready",
        |r| {
            r.podsets.iter().any(|p| {
                p.pods_status.iter().all(|s| s.ready)
                    && p.pods_status
                        .iter()
                        .map(|s| s.uid.clone())
                        .collect::<Vec<_>>()
                        == want
            })
        },
    )
    .await;
    let mut after = Vec::new();
    for name in names {
        after.push(pods.get(name).await.expect("pod"));
    }
    assert_eq!(uids_of(&after), want, "no pod was restarted by the resync");
    let cm_after = config_maps
        .get("my-cluster-broker-config")
        .await
        .expect("cm");
    let sps_after = podsets.get("my-cluster-broker").await.expect("podset");
    assert_eq!(
        cm_after.metadata.resource_version, cm_before.metadata.resource_version,
        "re-applying an unchanged object is a no-op"
    );
    assert_eq!(
        sps_after.metadata.generation,
        sps_before.metadata.generation
    );
    assert_eq!(uid(&sps_after), uid(&sps_before));
    assert!(
        !agent.process.log_text().contains("no longer desired"),
        "nothing was deleted:\n{}",
        agent.log_tail()
    );
    ns.delete().await;
}

/// Central's `RestartPod` deletes exactly the pod (by UID) of a podset, which its podset
/// controller recreates; a stale UID, a foreign namespace and a pod that no podset owns are
/// not deleted, and each answer says why. The report carries each pod's revision.
#[tokio::test]
async fn restart_deletes_the_named_pod_once_and_refuses_what_it_must_not_touch() {
    use kstretch_central::link::restart::{PodToRestart, replaced};
    use kstretch_proto::agent::v1::RestartOutcome;

    let ns = setup("link-restart").await;
    let pki = Pki::new("restart");
    let pods: Api<Pod> = ns.api();
    let names = ["my-cluster-broker-0", "my-cluster-broker-1"];
    let desired = DesiredStates::new();
    desired
        .set("beta", vec![podset(&ns.name, "my-cluster-broker", &names)])
        .expect("desired");
    let central = InProcessCentral::start("127.0.0.1:0".parse().unwrap(), &pki, desired);
    let agent = Agent::start(&ns.name, "beta", &pki.agent("beta"), &central.url());
    wait_applied(&central, "beta", &agent, 1).await;
    let mut before = Vec::new();
    for name in names {
        before.push(wait_for_object(&pods, name, TIMEOUT, is_ready).await);
    }
    let record = wait_agent(&central, "beta", &agent, "both pods reported ready", |r| {
        r.podsets
            .iter()
            .any(|p| p.pods_status.len() == 2 && p.pods_status.iter().all(|s| s.ready))
    })
    .await;
    let reported = &record.podsets[0].pods_status;
    assert!(
        reported.iter().all(|p| p.revision == "r1"),
        "revision reported: {reported:#?}"
    );

    let restart_with = |name: &str, uid: String, namespace: String, claims: Vec<String>| {
        let link = central.link.clone();
        let pod = PodToRestart {
            namespace,
            name: name.to_owned(),
            uid,
            reason: "e2e".into(),
            claims,
        };
        async move {
            link.restarts
                .restart("beta", pod, Duration::from_secs(30))
                .await
                .expect("an answer from the agent")
        }
    };
    let restart =
        |name: &str, uid: String, namespace: String| restart_with(name, uid, namespace, Vec::new());

    let result = restart(names[0], uid(&before[0]), ns.name.clone()).await;
    assert_eq!(result.outcome(), RestartOutcome::Deleted, "{result:?}");
    assert!(replaced(&result));
    let recreated = wait_for_object(&pods, names[0], TIMEOUT, |p| {
        is_ready(p) && uid(p) != uid(&before[0])
    })
    .await;

    // Once the agent's cache has the new pod (its report shows it), the same request again
    // names the old UID: nothing is deleted.
    let new_uid = uid(&recreated);
    wait_agent(
        &central,
        "beta",
        &agent,
        "the recreated pod reported",
        |r| {
            r.podsets
                .iter()
                .flat_map(|p| &p.pods_status)
                .any(|s| s.name == names[0] && s.uid == new_uid)
        },
    )
    .await;
    let again = restart(names[0], uid(&before[0]), ns.name.clone()).await;
    assert_eq!(again.outcome(), RestartOutcome::Gone, "{again:?}");
    assert!(again.message.contains("already replaced"), "{again:?}");
    assert_eq!(
        uid(&pods.get(names[0]).await.expect("pod")),
        uid(&recreated)
    );

    let foreign_ns = restart(names[1], uid(&before[1]), "kube-system".into()).await;
    assert_eq!(
        foreign_ns.outcome(),
        RestartOutcome::Refused,
        "{foreign_ns:?}"
    );
    assert!(foreign_ns.message.contains("kube-system"), "{foreign_ns:?}");

    // Claims go only with a pod its own cluster marked for new disks.
    let unmarked = restart_with(
        names[1],
        uid(&before[1]),
        ns.name.clone(),
        vec![format!("data-{}", names[1])],
    )
    .await;
    assert_eq!(unmarked.outcome(), RestartOutcome::Refused, "{unmarked:?}");
    assert!(
        unmarked.message.contains("strimzi.io/delete-pod-and-pvc"),
        "{unmarked:?}"
    );

    // A pod no podset owns is never deleted on central's behalf.
    let stray: Pod = serde_json::from_value(json!({
        "metadata": {"name": "not-a-kafka-pod", "namespace": ns.name},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "terminationGracePeriodSeconds": 0}
    }))
    .unwrap();
    let stray = pods
        .create(&Default::default(), &stray)
        .await
        .expect("stray pod");
    let stray_uid = uid(&stray);
    wait_for("the agent's cache to hold the stray pod", TIMEOUT, || {
        let restart = restart("not-a-kafka-pod", stray_uid.clone(), ns.name.clone());
        async move {
            let result = restart.await;
            match result.outcome() {
                RestartOutcome::Refused => Seen::Done(result),
                _ => Seen::NotYet(format!("{result:?}")),
            }
        }
    })
    .await;
    assert_eq!(
        uid(&pods.get("not-a-kafka-pod").await.expect("stray kept")),
        stray_uid
    );
    assert_eq!(
        uid(&pods.get(names[1]).await.expect("pod 1")),
        uid(&before[1]),
        "the other podset pod was left alone"
    );
}

/// The term the agent recorded in its namespace (`agent/src/link/term.rs`).
async fn recorded_term(config_maps: &Api<ConfigMap>, term: &str) {
    wait_for(
        &format!("the agent to record term {term}"),
        TIMEOUT,
        || async {
            let found = config_maps.get_opt("kstretch-agent-central").await;
            let value = found
                .ok()
                .flatten()
                .and_then(|c| c.data)
                .and_then(|d| d.get("term").cloned());
            if value.as_deref() == Some(term) {
                Seen::Done(())
            } else {
                Seen::NotYet(format!("recorded: {value:?}"))
            }
        },
    )
    .await
}

/// An agent obeys one central at a time: once it has obeyed a central of a newer term (started
/// to replace one whose cluster was lost), it keeps that term in its cluster, and the old
/// central, back with a change and the agent pointed at it again (a restarted agent, so the
/// term comes from the cluster), changes nothing: both sides refuse the stream.
#[tokio::test]
async fn a_replaced_central_cannot_drive_an_agent_that_obeys_its_successor() {
    let ns = setup("link-term").await;
    let pki = Pki::new("term");
    let config_maps: Api<ConfigMap> = ns.api();
    let old_desired = DesiredStates::new();
    old_desired
        .set("beta", vec![config_map(&ns.name, "from-old", "1")])
        .expect("desired");
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let old = InProcessCentral::start(any, &pki, old_desired.clone());
    let agent = Agent::start(&ns.name, "beta", &pki.agent("beta"), &old.url());
    wait_applied(&old, "beta", &agent, 1).await;
    recorded_term(&config_maps, "1").await;
    drop(agent);

    let new_desired = DesiredStates::new();
    new_desired
        .set(
            "beta",
            vec![
                config_map(&ns.name, "from-old", "1"),
                config_map(&ns.name, "from-new", "2"),
            ],
        )
        .expect("desired");
    let config = LinkConfig {
        term: 2,
        ..kstretch_tests::central::test_config()
    };
    let new = InProcessCentral::start_with(any, &pki, new_desired, config);
    let agent = Agent::start(&ns.name, "beta", &pki.agent("beta"), &new.url());
    wait_applied(&new, "beta", &agent, 1).await;
    recorded_term(&config_maps, "2").await;
    drop(agent);

    // The old central is back and wants from-old changed and from-new gone.
    old_desired
        .set("beta", vec![config_map(&ns.name, "from-old", "changed")])
        .expect("desired");
    let agent = Agent::start(&ns.name, "beta", &pki.agent("beta"), &old.url());
    let record = wait_agent(&old, "beta", &agent, "the old central refused", |r| {
        !r.connected && r.disconnect_reason.contains("older than the term 2")
    })
    .await;
    assert!(record.disconnect_reason.contains("term 1"), "{record:#?}");
    wait_for("the agent to refuse the old central", TIMEOUT, || async {
        let log = agent.log_tail();
        if log.contains("stale-central") || log.contains("older than the term 2") {
            Seen::Done(())
        } else {
            Seen::NotYet(log)
        }
    })
    .await;
    // Time for an apply, had one been allowed.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let from_old = config_maps.get("from-old").await.expect("from-old");
    assert_eq!(
        from_old
            .data
            .and_then(|d| d.get("server.properties").cloned())
            .as_deref(),
        Some("1"),
        "the old central changed nothing"
    );
    assert!(config_maps.get_opt("from-new").await.unwrap().is_some());
    drop(agent);
    drop(old);
    drop(new);
    ns.delete().await;
}
