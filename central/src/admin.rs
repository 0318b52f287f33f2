//! The admin gRPC API of central (`kstretch.admin.v1`), with health and reflection services.

use std::net::SocketAddr;
use std::time::SystemTime;

use kstretch_proto::admin::v1::admin_service_server::{AdminService, AdminServiceServer};
use kstretch_proto::admin::v1::{BuildInfo, GetStatusRequest, GetStatusResponse, ResourceCount};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::inventory::Inventory;

/// Answers the CLI from central's in-memory state; it never calls the apiserver per request.
#[derive(Debug)]
pub struct AdminApi {
    inventory: Inventory,
    kubernetes_version: String,
    started_at: SystemTime,
}

impl AdminApi {
    pub fn new(inventory: Inventory, kubernetes_version: String) -> Self {
        Self {
            inventory,
            kubernetes_version,
            started_at: SystemTime::now(),
        }
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
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(kstretch_proto::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    tracing::info!(%addr, "serving gRPC admin API");
    tonic::transport::Server::builder()
        .add_service(health_service)
        .add_service(reflection)
        .add_service(AdminServiceServer::new(admin))
        .serve_with_shutdown(addr, shutdown.cancelled_owned())
        .await
        .map_err(|source| GrpcError::Transport { addr, source })
}
