//! `kstretch agents`: the agents central knows and the desired state it holds per cluster,
//! rendered as tables.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use kstretch_proto::admin::v1::admin_service_client::AdminServiceClient;
use kstretch_proto::admin::v1::{Agent, ListAgentsRequest, ListAgentsResponse};

use crate::error::CliError;

pub async fn run(address: &str, timeout: Duration) -> Result<String, CliError> {
    let channel = crate::central::connect(address, timeout).await?;
    let response = AdminServiceClient::new(channel)
        .list_agents(ListAgentsRequest {})
        .await?
        .into_inner();
    Ok(render(&response, SystemTime::now()))
}

/// Pure rendering at time `now`, so the layout is unit-tested without a server.
pub fn render(list: &ListAgentsResponse, now: SystemTime) -> String {
    let mut out = String::new();
    if !list.link_enabled {
        out.push_str(
            "the agent link is disabled: central runs without --tls-ca, --tls-cert and --tls-key\n",
        );
        return out;
    }
    let _ = writeln!(out, "agent link  {}", list.link_address);
    out.push('\n');
    if list.agents.is_empty() {
        out.push_str("no agent has connected since central started\n");
    } else {
        let _ = writeln!(
            out,
            "{:<16} {:<9} {:<8} {:<9} {:<9} {:>7} {:>5} {:>7} {:>6} {:>7} {:>6}",
            "CLUSTER",
            "CONNECTED",
            "SINCE",
            "HEARTBEAT",
            "VERSION",
            "DESIRED",
            "SENT",
            "APPLIED",
            "ERRORS",
            "PODSETS",
            "READY"
        );
        for a in &list.agents {
            let ready: i64 = a
                .podsets
                .iter()
                .flat_map(|p| &p.pod_readiness)
                .filter(|p| p.ready)
                .count() as i64;
            let listed: i64 = a.podsets.iter().map(|p| p.pod_readiness.len() as i64).sum();
            let _ = writeln!(
                out,
                "{:<16} {:<9} {:<8} {:<9} {:<9} {:>7} {:>5} {:>7} {:>6} {:>7} {:>6}",
                a.cluster_alias,
                if a.connected { "yes" } else { "no" },
                age(a.connected_since.as_ref(), now),
                format!("{} ago", age(a.last_heartbeat.as_ref(), now)),
                a.build.as_ref().map_or("?", |b| b.version.as_str()),
                generation(a.desired_generation),
                generation(a.sent_generation),
                generation(a.applied_generation),
                a.apply_errors.len(),
                a.podsets.len(),
                format!("{ready}/{listed}"),
            );
        }
        details(&mut out, &list.agents, now);
        unclaimed(&mut out, &list.agents, now);
    }
    out.push('\n');
    if list.desired.is_empty() {
        out.push_str(
            "desired state: none. Central has computed nothing for any cluster, so agents are \
             sent no snapshot and apply or delete nothing.\n",
        );
    } else {
        let _ = writeln!(
            out,
            "{:<16} {:>10} {:>7}  {:<16} UPDATED",
            "DESIRED FOR", "GENERATION", "OBJECTS", "HASH"
        );
        for d in &list.desired {
            let short: String = d.hash.chars().take(16).collect();
            let _ = writeln!(
                out,
                "{:<16} {:>10} {:>7}  {:<16} {} ago",
                d.cluster_alias,
                d.generation,
                d.objects,
                short,
                age(d.updated_at.as_ref(), now)
            );
        }
    }
    out
}

/// Per agent, what does not fit the table: why it is disconnected, mismatches, apply errors,
/// podsets whose pods are not all ready.
fn details(out: &mut String, agents: &[Agent], now: SystemTime) {
    let mut lines = Vec::new();
    for a in agents {
        let who = &a.cluster_alias;
        if !a.connected {
            lines.push(format!(
                "{who}: disconnected {} ago: {}",
                age(a.disconnected_at.as_ref(), now),
                a.disconnect_reason
            ));
        }
        for m in &a.mismatches {
            let line = if m.field == "cluster_alias" {
                format!(
                    "{who}: mismatch: the certificate names cluster {:?}, the agent claims {:?}",
                    m.central, m.agent
                )
            } else {
                format!(
                    "{who}: mismatch: {} central {:?}, agent {:?}",
                    m.field, m.central, m.agent
                )
            };
            lines.push(line);
        }
        for e in &a.apply_errors {
            lines.push(format!("{who}: {}: {}: {}", e.object, e.reason, e.message));
        }
        for p in &a.podsets {
            let not_ready: Vec<&str> = p
                .pod_readiness
                .iter()
                .filter(|r| !r.ready)
                .map(|r| r.name.as_str())
                .collect();
            if !not_ready.is_empty() {
                lines.push(format!(
                    "{who}: podset {}/{}: not ready: {}",
                    p.namespace,
                    p.name,
                    not_ready.join(", ")
                ));
            }
        }
    }
    if !lines.is_empty() {
        out.push('\n');
        for line in lines {
            out.push_str(&line);
            out.push('\n');
        }
    }
}

/// What agents keep for owners central neither reconciles nor declared deleted.
fn unclaimed(out: &mut String, agents: &[Agent], now: SystemTime) {
    let rows: Vec<_> = agents
        .iter()
        .flat_map(|a| a.unclaimed.iter().map(move |u| (a, u)))
        .collect();
    if rows.is_empty() {
        return;
    }
    out.push_str(
        "\nkept for an owner central does not know (neither reconciled nor deleted by it; \
         `kstretch remove-unclaimed` removes them on purpose):\n",
    );
    let _ = writeln!(
        out,
        "{:<16} {:<13} {:<40} {:<36} {:>7} {:>6}",
        "CLUSTER", "KIND", "OWNER", "UID", "OBJECTS", "SINCE"
    );
    for (a, u) in rows {
        let _ = writeln!(
            out,
            "{:<16} {:<13} {:<40} {:<36} {:>7} {:>6}",
            a.cluster_alias,
            u.kind,
            format!("{}/{}", u.namespace, u.name),
            if u.uid.is_empty() { "-" } else { &u.uid },
            u.objects,
            age(u.since.as_ref(), now)
        );
    }
}

fn generation(g: u64) -> String {
    if g == 0 { "-".into() } else { g.to_string() }
}

/// `12s`, `5m`, `3h`, `2d` since `ts`; `-` when unknown.
pub fn age(ts: Option<&prost_types::Timestamp>, now: SystemTime) -> String {
    let Some(then) = ts.and_then(|t| SystemTime::try_from(*t).ok()) else {
        return "-".into();
    };
    let secs = now.duration_since(then).unwrap_or_default().as_secs();
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstretch_proto::admin::v1::{
        ApplyError, BuildInfo, DesiredState, Mismatch, PodReadiness, PodSetSummary,
        UnclaimedObjects,
    };

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn ts(secs: u64) -> Option<prost_types::Timestamp> {
        Some(at(secs).into())
    }

    #[test]
    fn a_disabled_link_says_so() {
        let text = render(&ListAgentsResponse::default(), at(0));
        assert!(text.starts_with("the agent link is disabled"), "{text}");
    }

    #[test]
    fn no_desired_state_is_said_plainly() {
        let list = ListAgentsResponse {
            link_enabled: true,
            link_address: "0.0.0.0:9443".into(),
            ..ListAgentsResponse::default()
        };
        assert_eq!(
            render(&list, at(0)),
            "agent link  0.0.0.0:9443\n\
             \n\
             no agent has connected since central started\n\
             \n\
             desired state: none. Central has computed nothing for any cluster, so agents are \
             sent no snapshot and apply or delete nothing.\n"
        );
    }

    #[test]
    fn renders_agents_details_and_desired_state() {
        let now = 10_000;
        let list = ListAgentsResponse {
            link_enabled: true,
            link_address: "127.0.0.1:9443".into(),
            agents: vec![
                Agent {
                    cluster_alias: "alpha".into(),
                    claimed_cluster_alias: "beta".into(),
                    build: Some(BuildInfo {
                        version: "0.1.0".into(),
                        git_commit: String::new(),
                    }),
                    connected: false,
                    connected_since: ts(now - 7200),
                    last_heartbeat: ts(now - 300),
                    disconnected_at: ts(now - 290),
                    disconnect_reason: "agent closed the stream".into(),
                    mismatches: vec![Mismatch {
                        field: "cluster_alias".into(),
                        central: "alpha".into(),
                        agent: "beta".into(),
                    }],
                    ..Agent::default()
                },
                Agent {
                    cluster_alias: "beta".into(),
                    claimed_cluster_alias: "beta".into(),
                    build: Some(BuildInfo {
                        version: "0.1.0".into(),
                        git_commit: String::new(),
                    }),
                    connected: true,
                    connected_since: ts(now - 65),
                    last_heartbeat: ts(now - 2),
                    desired_generation: 3,
                    sent_generation: 3,
                    applied_generation: 2,
                    apply_errors: vec![ApplyError {
                        object: "v1/Service ns/bad".into(),
                        reason: "Invalid".into(),
                        message: "port out of range".into(),
                    }],
                    podsets: vec![PodSetSummary {
                        namespace: "ns".into(),
                        name: "kafka-broker".into(),
                        pods: 2,
                        ready_pods: 1,
                        current_pods: 2,
                        pod_readiness: vec![
                            PodReadiness {
                                name: "kafka-broker-0".into(),
                                uid: "u0".into(),
                                ready: true,
                            },
                            PodReadiness {
                                name: "kafka-broker-1".into(),
                                uid: "u1".into(),
                                ready: false,
                            },
                        ],
                    }],
                    unclaimed: vec![UnclaimedObjects {
                        kind: "Kafka".into(),
                        namespace: "kafka".into(),
                        name: "old".into(),
                        uid: String::new(),
                        objects: 9,
                        since: ts(now - 60),
                    }],
                    ..Agent::default()
                },
            ],
            desired: vec![DesiredState {
                cluster_alias: "beta".into(),
                generation: 3,
                hash: "sha256:0123456789abcdef0123".into(),
                objects: 12,
                updated_at: ts(now - 30),
            }],
        };
        let text = render(&list, at(now));
        assert_eq!(
            text,
            "agent link  127.0.0.1:9443\n\
             \n\
             CLUSTER          CONNECTED SINCE    HEARTBEAT VERSION   DESIRED  SENT APPLIED ERRORS PODSETS  READY\n\
             alpha            no        2h       5m ago    0.1.0           -     -       -      0       0    0/0\n\
             beta             yes       65s      2s ago    0.1.0           3     3       2      1       1    1/2\n\
             \n\
             alpha: disconnected 4m ago: agent closed the stream\n\
             alpha: mismatch: the certificate names cluster \"alpha\", the agent claims \"beta\"\n\
             beta: v1/Service ns/bad: Invalid: port out of range\n\
             beta: podset ns/kafka-broker: not ready: kafka-broker-1\n\
             \n\
             kept for an owner central does not know (neither reconciled nor deleted by it; `kstretch remove-unclaimed` removes them on purpose):\n\
             CLUSTER          KIND          OWNER                                    UID                                  OBJECTS  SINCE\n\
             beta             Kafka         kafka/old                                -                                          9    60s\n\
             \n\
             DESIRED FOR      GENERATION OBJECTS  HASH             UPDATED\n\
             beta                      3      12  sha256:012345678 30s ago\n"
        );
    }

    #[test]
    fn ages_are_short() {
        let now = at(1_000_000);
        let ago = |s: u64| age(ts(1_000_000 - s).as_ref(), now);
        assert_eq!(ago(5), "5s");
        assert_eq!(ago(119), "119s");
        assert_eq!(ago(600), "10m");
        assert_eq!(ago(3 * 3600), "3h");
        assert_eq!(ago(3 * 86400), "3d");
        assert_eq!(age(None, now), "-");
    }
}
