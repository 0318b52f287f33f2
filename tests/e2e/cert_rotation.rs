//! End-to-end test of certificate rotation on the agent link without restarts: the real
//! central (cluster alpha) and a real agent (cluster beta), their certificates mounted like
//! Kubernetes Secrets and renewed by a `..data` symlink swap.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use kstretch_tests::process::{Spawned, binary, free_port, metric};
use kstretch_tests::rotation::{MountedPki, presented_certificate};
use kstretch_tests::stretch::agent_command;
use kstretch_tests::wait::{Seen, wait_for};
use kstretch_tests::{Cluster, TestEnv, crds};

const TIMEOUT: Duration = Duration::from_secs(30);

async fn readyz(http: &str) -> String {
    match reqwest::get(format!("{http}/readyz")).await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(e) => e.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewed_certificates_are_used_by_new_handshakes_and_bad_ones_are_ignored() {
    let env = TestEnv::get();
    let alpha = Cluster::connect(&env.clusters[0]).await;
    let beta = Cluster::connect(&env.clusters[1]).await;
    crds::install(&alpha).await;
    crds::install(&beta).await;
    let central_ns = alpha.namespace("rotation").await;
    let agent_ns = beta.namespace("rotation").await;
    let pki = MountedPki::new("rotation");
    let first = pki.server();
    let central_files = pki.mount("central", &first);
    let agent_files = pki.mount("agent", &pki.agent("rot-one"));
    let probe = pki.agent("probe");

    let (http_port, link_port) = (free_port(), free_port());
    let link: SocketAddr = format!("127.0.0.1:{link_port}").parse().unwrap();
    let central_http = format!("http://127.0.0.1:{http_port}");
    let start_central = || {
        let mut command = Command::new(binary("kstretch-central"));
        command
            .arg("--kubeconfig")
            .arg(&env.clusters[0].kubeconfig)
            .args(["--namespace", &central_ns.name])
            .args(["--http-addr", &format!("127.0.0.1:{http_port}")])
            .args(["--grpc-addr", &format!("127.0.0.1:{}", free_port())])
            .args(["--link-addr", &link.to_string()])
            .arg("--tls-ca")
            .arg(&central_files.ca)
            .arg("--tls-cert")
            .arg(&central_files.cert)
            .arg("--tls-key")
            .arg(&central_files.key)
            .args(["--tls-reload-secs", "1", "--link-heartbeat-secs", "1"]);
        Spawned::start("central", command)
    };
    let mut central = start_central();
    let agent_http_port = free_port();
    let agent_http = format!("http://127.0.0.1:{agent_http_port}");
    let mut command = agent_command(
        &binary("kstretch-agent"),
        &env.clusters[1].kubeconfig,
        "beta",
        &agent_ns.name,
        &format!("https://localhost:{link_port}"),
        &agent_files,
        agent_http_port,
    );
    command.args(["--tls-reload-secs", "1"]);
    let agent = Spawned::start("agent", command);

    let connected = |alias: &'static str| {
        let central_http = central_http.clone();
        async move {
            let body = readyz(&central_http).await;
            if body.contains(&format!("agents connected: {alias}")) {
                Seen::Done(())
            } else {
                Seen::NotYet(body)
            }
        }
    };
    wait_for("the agent to connect as rot-one", TIMEOUT, || {
        connected("rot-one")
    })
    .await;
    let served = presented_certificate(link, &pki.ca_pem(), &probe).await;
    assert_eq!(served.as_deref(), Ok(first.der.as_slice()));

    // Central's certificate renewed: new handshakes get it, the agent's stream goes on.
    let attempts = metric(&agent_http, "kstretch_agent_link_connection_attempts_total").await;
    assert!(attempts.is_some());
    let second = pki.server();
    pki.swap("central", &pki.ca_pem(), &second.cert_pem, &second.key_pem);
    wait_for(
        "central to present the renewed certificate",
        TIMEOUT,
        || async {
            match presented_certificate(link, &pki.ca_pem(), &probe).await {
                Ok(der) if der == second.der => Seen::Done(()),
                other => Seen::NotYet(format!(
                    "{:?}\n{}",
                    other.map(|d| d.len()),
                    central.log_tail(10)
                )),
            }
        },
    )
    .await;
    assert_eq!(
        metric(&agent_http, "kstretch_agent_link_connection_attempts_total").await,
        attempts,
        "the agent's stream was not cut:\n{}",
        agent.log_tail(20)
    );
    assert!(
        readyz(&central_http)
            .await
            .contains("agents connected: rot-one")
    );

    // A renewal whose key belongs to another certificate: refused, flagged, old one served.
    let third = pki.server();
    pki.swap("central", &pki.ca_pem(), &third.cert_pem, &second.key_pem);
    wait_for("central to refuse the mismatched key", TIMEOUT, || async {
        let failing = metric(&central_http, "kstretch_central_tls_reload_failing").await;
        let body = readyz(&central_http).await;
        if failing == Some(1.0)
            && body.contains("[+] tls: files rejected, previous material in use")
        {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("{failing:?}\n{body}"))
        }
    })
    .await;
    assert!(
        central.log_text().contains("tls-key-mismatch"),
        "{}",
        central.log_tail(10)
    );
    // Garbage too.
    pki.swap("central", "garbage", "garbage", "garbage");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let served = presented_certificate(link, &pki.ca_pem(), &probe).await;
    assert_eq!(
        served.as_deref(),
        Ok(second.der.as_slice()),
        "the previous certificate is still served"
    );
    pki.swap("central", &pki.ca_pem(), &third.cert_pem, &third.key_pem);
    wait_for("central to take the fixed renewal", TIMEOUT, || async {
        let failing = metric(&central_http, "kstretch_central_tls_reload_failing").await;
        match presented_certificate(link, &pki.ca_pem(), &probe).await {
            Ok(der) if der == third.der && failing == Some(0.0) => Seen::Done(()),
            other => Seen::NotYet(format!("{failing:?} {:?}", other.map(|d| d.len()))),
        }
    })
    .await;

    // The agent: bad files are refused and flagged; valid ones are used by the next connection.
    pki.swap("agent", &pki.ca_pem(), "garbage", "garbage");
    wait_for("the agent to refuse garbage", TIMEOUT, || async {
        match metric(&agent_http, "kstretch_agent_tls_reload_failing").await {
            Some(1.0) => Seen::Done(()),
            other => Seen::NotYet(format!("{other:?}\n{}", agent.log_tail(10))),
        }
    })
    .await;
    let renewed = pki.agent("rot-two");
    pki.swap("agent", &pki.ca_pem(), &renewed.cert_pem, &renewed.key_pem);
    wait_for(
        "the agent to load the renewed certificate",
        TIMEOUT,
        || async {
            match metric(&agent_http, "kstretch_agent_tls_reload_failing").await {
                Some(0.0) => Seen::Done(()),
                other => Seen::NotYet(format!("{other:?}\n{}", agent.log_tail(10))),
            }
        },
    )
    .await;
    // The stream opened with the old certificate goes on until it ends; the agent reconnects
    // (same process) with the new one, which names another cluster.
    assert!(
        readyz(&central_http)
            .await
            .contains("agents connected: rot-one")
    );
    central.stop();
    central = start_central();
    wait_for("the agent to reconnect as rot-two", TIMEOUT, || {
        connected("rot-two")
    })
    .await;
    let served = presented_certificate(link, &pki.ca_pem(), &probe).await;
    assert_eq!(served.as_deref(), Ok(third.der.as_slice()));

    drop(agent);
    drop(central);
    agent_ns.delete().await;
    central_ns.delete().await;
}
