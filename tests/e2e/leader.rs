//! End-to-end tests of central's leader election: two real central processes against cluster
//! alpha with `--leader-election`; one leads, the other stands by (ready, writes nothing),
//! takes over when the leader is killed, and a leader that loses its lease exits. Each process
//! stands for a pod (real Pod objects in alpha, run by kwok): the leader labels its pod, and a
//! Service selecting that label has the leader's pod as its only endpoint.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kstretch_tests::TestEnv;
use kstretch_tests::process::Spawned;
use kstretch_tests::topics::TopicOperator;
use kstretch_tests::wait::{Seen, wait_for};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const LEASE: &str = "kstretch-central";
const DURATION_SECS: u64 = 6;
const LEADER_LABEL: &str = "kstretch.io/leader";
const SERVICE: &str = "central-link";

async fn get(url: &str) -> Option<(u16, String)> {
    let response = reqwest::get(url).await.ok()?;
    let code = response.status().as_u16();
    Some((code, response.text().await.unwrap_or_default()))
}

/// A central replica: its process and HTTP side port.
struct Replica {
    process: Option<Spawned>,
    http: String,
}

impl Replica {
    fn start(op: &mut TopicOperator, identity: &str, pod: &str) -> Replica {
        op.args = vec![
            "--leader-election-pod".into(),
            pod.into(),
            "--leader-election".into(),
            "--leader-election-namespace".into(),
            op.ns(0).to_owned(),
            "--leader-election-identity".into(),
            identity.into(),
            "--leader-election-lease-duration-secs".into(),
            DURATION_SECS.to_string(),
        ];
        op.start_central();
        Replica {
            process: op.central.take(),
            http: op.http.clone(),
        }
    }

    fn log(&self) -> String {
        self.process
            .as_ref()
            .map(|p| p.log_tail(30))
            .unwrap_or_default()
    }

    async fn readyz(&self) -> Option<(u16, String)> {
        get(&format!("{}/readyz", self.http)).await
    }

    async fn leader_metric(&self) -> Option<f64> {
        kstretch_tests::process::metric(&self.http, "kstretch_central_leader").await
    }

    /// Waits until /readyz is 200 and says `says` (e.g. `leader (replica-a)`).
    async fn wait_ready(&self, says: &str, timeout: Duration) {
        wait_for(&format!("ready: {says}"), timeout, || async {
            match self.readyz().await {
                Some((200, body)) if body.contains(says) => Seen::Done(body),
                other => Seen::NotYet(format!("{other:?}\n{}", self.log())),
            }
        })
        .await;
    }
}

/// A pod standing for a central replica (kwok runs it, so it gets an IP and turns ready).
async fn create_pod(pods: &Api<Pod>, name: &str, labels: serde_json::Value) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "central", "image": "kstretch-central"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
}

async fn leader_label(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get(name)
        .await
        .unwrap()
        .metadata
        .labels
        .and_then(|l| l.get(LEADER_LABEL).cloned())
}

/// The pods the Service's EndpointSlices list as ready endpoints.
async fn endpoints(slices: &Api<EndpointSlice>) -> Vec<String> {
    let list = slices
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={SERVICE}")))
        .await
        .unwrap();
    let mut pods: Vec<String> = list
        .items
        .iter()
        .flat_map(|s| s.endpoints.iter().flatten())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
        .filter_map(|e| e.target_ref.as_ref()?.name.clone())
        .collect();
    pods.sort();
    pods
}

async fn wait_endpoints(slices: &Api<EndpointSlice>, want: &[&str]) {
    wait_for(
        &format!("the Service's endpoints to be {want:?}"),
        Duration::from_secs(60),
        || async {
            let now = endpoints(slices).await;
            if now == want {
                Seen::Done(())
            } else {
                Seen::NotYet(format!("{now:?}"))
            }
        },
    )
    .await;
}

async fn holder(leases: &Api<Lease>) -> Option<(String, i32)> {
    let spec = leases.get_opt(LEASE).await.ok()??.spec?;
    Some((spec.holder_identity?, spec.lease_transitions.unwrap_or(0)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_leads_the_standby_takes_over_when_it_is_killed_and_a_usurped_leader_exits() {
    let mut op =
        TopicOperator::prepare("leader", 1, &TestEnv::get().kafka_bootstrap.clone(), &[]).await;
    let leases: Api<Lease> = op.namespaces[0].api();
    let pods: Api<Pod> = op.namespaces[0].api();
    let slices: Api<EndpointSlice> = op.namespaces[0].api();
    let services: Api<Service> = op.namespaces[0].api();

    // Two pods for the two replicas, and a Service like the chart's link Service. Pod b still
    // carries the leader label, as a pod whose leader process died keeps it.
    create_pod(&pods, "central-a", json!({"app": "central"})).await;
    create_pod(
        &pods,
        "central-b",
        json!({"app": "central", LEADER_LABEL: "true"}),
    )
    .await;
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": SERVICE},
        "spec": {
            "selector": {"app": "central", LEADER_LABEL: "true"},
            "ports": [{"name": "link", "port": 9443}],
        },
    }))
    .unwrap();
    services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    wait_endpoints(&slices, &["central-b"]).await;

    // Replica a starts first, leads and labels its pod.
    let mut a = Replica::start(&mut op, "replica-a", "central-a");
    a.wait_ready("leader (replica-a)", Duration::from_secs(60))
        .await;
    assert_eq!(a.leader_metric().await, Some(1.0));
    assert_eq!(
        holder(&leases).await.map(|h| h.0).as_deref(),
        Some("replica-a")
    );
    assert_eq!(
        leader_label(&pods, "central-a").await.as_deref(),
        Some("true")
    );

    // Replica b stands by: live, ready (so a PodDisruptionBudget can let a drain evict the
    // leader), says who leads, starts nothing that writes, and took the stale label off its
    // pod: the Service reaches the leader only.
    let mut b = Replica::start(&mut op, "replica-b", "central-b");
    let standby = wait_for("replica-b to stand by", Duration::from_secs(60), || async {
        match (b.readyz().await, b.leader_metric().await) {
            (Some((200, body)), Some(m))
                if m == 0.0 && body.contains("standby: leader is replica-a") =>
            {
                Seen::Done(body)
            }
            other => Seen::NotYet(format!("{other:?}\n{}", b.log())),
        }
    })
    .await;
    assert!(
        standby.contains("[+] leader: standby: leader is replica-a"),
        "{standby}"
    );
    assert_eq!(leader_label(&pods, "central-b").await, None);
    wait_endpoints(&slices, &["central-a"]).await;
    let (code, healthz) = get(&format!("{}/healthz", b.http)).await.expect("healthz");
    assert_eq!(code, 200, "{healthz}");

    // The leader reconciles.
    op.apply_topic(
        0,
        "before",
        json!({"partitions": 1, "replicas": 1}),
        json!({}),
    )
    .await;
    op.central = a.process.take();
    op.http = a.http.clone();
    op.wait_ready(0, "before").await;
    a.process = op.central.take();
    let b_log = b.process.as_ref().unwrap().log_text();
    for started in ["serving gRPC admin API", "KafkaTopic"] {
        assert!(
            !b_log.contains(started),
            "the standby started work ({started:?}):\n{b_log}"
        );
    }

    // kill -9 the leader: the standby takes over once the lease expires, and reconciles.
    a.process.as_mut().unwrap().stop();
    let killed = Instant::now();
    b.wait_ready(
        "leader (replica-b)",
        Duration::from_secs(DURATION_SECS + 15),
    )
    .await;
    let took = killed.elapsed();
    assert!(
        took <= Duration::from_secs(DURATION_SECS + 5),
        "took over after {took:?}"
    );
    assert_eq!(b.leader_metric().await, Some(1.0));
    let (who, transitions) = holder(&leases).await.expect("lease");
    assert_eq!(who, "replica-b");
    assert!(transitions >= 1, "{transitions}");
    assert_eq!(
        leader_label(&pods, "central-b").await.as_deref(),
        Some("true")
    );
    // Pod a's process comes back (its container restarted): a standby that clears the label
    // the killed leader left, so the Service's only endpoint is the new leader.
    let mut a2 = Replica::start(&mut op, "replica-a", "central-a");
    a2.wait_ready("standby: leader is replica-b", Duration::from_secs(60))
        .await;
    assert_eq!(leader_label(&pods, "central-a").await, None);
    wait_endpoints(&slices, &["central-b"]).await;
    op.apply_topic(
        0,
        "after",
        json!({"partitions": 1, "replicas": 1}),
        json!({}),
    )
    .await;
    op.central = b.process.take();
    op.http = b.http.clone();
    op.wait_ready(0, "after").await;

    // Another holder appears in the lease (e.g. after a network partition): b stops working
    // and exits instead of writing next to it.
    leases
        .patch(
            LEASE,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {
                "holderIdentity": "intruder",
                "leaseDurationSeconds": 3600,
                "renewTime": MicroTime(Timestamp::now()),
            }})),
        )
        .await
        .expect("steal the lease");
    let central = op.central.as_ref().unwrap();
    wait_for("replica-b to exit", Duration::from_secs(30), || async {
        let log = central.log_text();
        let alive = get(&format!("{}/healthz", op.http)).await.is_some();
        if !alive && log.contains("lost the leader lease: the lease is held by intruder") {
            Seen::Done(())
        } else {
            Seen::NotYet(format!("alive {alive}\n{}", central.log_tail(20)))
        }
    })
    .await;

    // Let finish() clean up with a leader that can write: the intruder gives the lease back.
    leases
        .patch(
            LEASE,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"holderIdentity": null}})),
        )
        .await
        .expect("release the lease");
    // The standby on pod a takes over and labels its pod again.
    a2.wait_ready("leader (replica-a)", Duration::from_secs(30))
        .await;
    assert_eq!(
        leader_label(&pods, "central-a").await.as_deref(),
        Some("true")
    );
    op.central = a2.process.take();
    op.http = a2.http.clone();
    op.finish().await;
}
