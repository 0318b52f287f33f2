//! The admin gRPC API of central (`kstretch.admin.v1`), with health and reflection services.

use std::net::SocketAddr;
use std::time::SystemTime;

use kstretch_proto::admin::v1::admin_service_server::{
    AdminService, AdminServiceServer, SERVICE_NAME,
};
use kstretch_proto::admin::v1::{
    Agent, ApplyError, BuildInfo, DesiredState, GetStatusRequest, GetStatusResponse,
    ListAgentsRequest, ListAgentsResponse, Mismatch, PodReadiness, PodSetSummary, ResourceCount,
    UnclaimedObjects,
};
use kstretch_proto::agent::v1::Outcome;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::inventory::Inventory;
use crate::link::{AgentRecord, Link};

/// Server-side deadline of every admin call (all unary); clients set their own, shorter ones.
const CALL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// Answers the CLI from central's in-memory state; it never calls the apiserver per request.
#[derive(Debug)]
pub struct AdminApi {
    inventory: Inventory,
    kubernetes_version: String,
    started_at: SystemTime,
    link: Option<(Link, SocketAddr)>,
}

impl AdminApi {
    pub fn new(inventory: Inventory, kubernetes_version: String) -> Self {
        Self {
            inventory,
            kubernetes_version,
            started_at: SystemTime::now(),
            link: None,
        }
    }

    /// Answers `ListAgents` from the agent link served on `address`.
    pub fn with_link(mut self, link: Link, address: SocketAddr) -> Self {
        self.link = Some((link, address));
        self
    }
}

/// `ListAgents` from the link's registries (or "disabled" without a link).
pub fn list_agents(link: Option<(&Link, SocketAddr)>) -> ListAgentsResponse {
    let Some((link, address)) = link else {
        return ListAgentsResponse::default();
    };
    let desired = link.desired.all();
    let generation_of = |alias: &str| {
        desired
            .iter()
            .find(|d| d.cluster_alias == alias)
            .map_or(0, |d| d.generation)
    };
    ListAgentsResponse {
        link_enabled: true,
        link_address: address.to_string(),
        agents: link
            .agents
            .list()
            .iter()
            .map(|r| agent_to_proto(r, generation_of(&r.cluster_alias)))
            .collect(),
        desired: desired
            .iter()
            .map(|d| DesiredState {
                cluster_alias: d.cluster_alias.clone(),
                generation: d.generation,
                hash: d.hash.clone(),
                objects: u32::try_from(d.objects.len()).unwrap_or(u32::MAX),
                updated_at: Some(d.updated_at.into()),
            })
            .collect(),
    }
}

fn agent_to_proto(r: &AgentRecord, desired_generation: u64) -> Agent {
    let apply = r.last_apply.as_ref();
    let count = |outcome: Outcome| {
        apply.map_or(0, |a| {
            let n = a.results.iter().filter(|x| x.outcome() == outcome).count();
            u32::try_from(n).unwrap_or(u32::MAX)
        })
    };
    let apply_errors = apply
        .map(|a| {
            a.results
                .iter()
                .filter(|x| !matches!(x.outcome(), Outcome::Applied | Outcome::Deleted))
                .map(|x| ApplyError {
                    object: x
                        .r#ref
                        .as_ref()
                        .map(crate::link::session::describe)
                        .unwrap_or_default(),
                    reason: x.reason.clone(),
                    message: x.message.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    Agent {
        cluster_alias: r.cluster_alias.clone(),
        claimed_cluster_alias: r.claimed_cluster_alias.clone(),
        build: Some(BuildInfo {
            version: r.build.version.clone(),
            git_commit: r.build.git_commit.clone(),
        }),
        kubernetes_version: r.kubernetes_version.clone(),
        namespaces: r.namespaces.clone(),
        connected: r.connected,
        connected_since: Some(r.connected_since.into()),
        last_heartbeat: Some(r.last_heartbeat.into()),
        disconnected_at: r.disconnected_at.map(Into::into),
        disconnect_reason: r.disconnect_reason.clone(),
        remote_address: r.remote_address.map(|a| a.to_string()).unwrap_or_default(),
        mismatches: r
            .mismatches
            .iter()
            .map(|m| Mismatch {
                field: m.field.clone(),
                central: m.central.clone(),
                agent: m.agent.clone(),
            })
            .collect(),
        desired_generation,
        sent_generation: r.sent_generation,
        applied_generation: apply.map_or(0, |a| a.generation),
        applied_hash: apply.map(|a| a.hash.clone()).unwrap_or_default(),
        applied_at: r.last_apply_at.map(Into::into),
        applied_objects: count(Outcome::Applied),
        deleted_objects: count(Outcome::Deleted),
        apply_errors,
        podsets: r
            .podsets
            .iter()
            .map(|p| PodSetSummary {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                pods: p.pods,
                ready_pods: p.ready_pods,
                current_pods: p.current_pods,
                pod_readiness: p
                    .pods_status
                    .iter()
                    .map(|pod| PodReadiness {
                        name: pod.name.clone(),
                        uid: pod.uid.clone(),
                        ready: pod.ready,
                    })
                    .collect(),
            })
            .collect(),
        unclaimed: r
            .last_apply
            .iter()
            .flat_map(|a| &a.unclaimed)
            .map(|u| {
                let owner = u.owner.clone().unwrap_or_default();
                UnclaimedObjects {
                    kind: owner.kind,
                    namespace: owner.namespace,
                    name: owner.name,
                    uid: owner.uid,
                    objects: u.objects,
                    since: u.since,
                }
            })
            .collect(),
    }
}

#[tonic::async_trait]
impl AdminService for AdminApi {
    async fn get_status(
        &self,
        _request: Request<GetStatusRequest>,
    ) -> Result<Response<GetStatusResponse>, Status> {
        let resources = self
            .inventory
            .counts()
            .into_iter()
            .map(|c| ResourceCount {
                kind: c.kind,
                total: c.total,
                ready: c.ready,
                synced: c.synced,
            })
            .collect();
        Ok(Response::new(GetStatusResponse {
            central: Some(BuildInfo {
                version: env!("CARGO_PKG_VERSION").to_owned(),
                git_commit: option_env!("KSTRETCH_GIT_COMMIT").unwrap_or("").to_owned(),
            }),
            kubernetes_version: self.kubernetes_version.clone(),
            started_at: Some(prost_types::Timestamp::from(self.started_at)),
            resources,
        }))
    }

    async fn list_agents(
        &self,
        _request: Request<ListAgentsRequest>,
    ) -> Result<Response<ListAgentsResponse>, Status> {
        Ok(Response::new(list_agents(
            self.link.as_ref().map(|(l, a)| (l, *a)),
        )))
    }
}

/// Why the gRPC server stopped.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    #[error("cannot build the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("gRPC server on {addr} failed: {source}")]
    Transport {
        addr: SocketAddr,
        source: tonic::transport::Error,
    },
}

/// Serves the admin API, `grpc.health.v1` and server reflection until `shutdown`.
pub async fn serve(
    addr: SocketAddr,
    admin: AdminApi,
    shutdown: CancellationToken,
) -> Result<(), GrpcError> {
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<AdminServiceServer<AdminApi>>()
        .await;
    let reflection = crate::grpc::reflection(&[SERVICE_NAME])?;
    tracing::info!(%addr, "serving gRPC admin API");
    tonic::transport::Server::builder()
        .timeout(CALL_DEADLINE)
        .add_service(health_service)
        .add_service(reflection)
        .add_service(AdminServiceServer::new(admin))
        .serve_with_shutdown(addr, shutdown.cancelled_owned())
        .await
        .map_err(|source| GrpcError::Transport { addr, source })
}
