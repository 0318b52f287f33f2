//! What every gRPC server of central shares: server reflection that advertises exactly the
//! services that server serves (plus `grpc.health.v1` and reflection itself).

use tonic_reflection::server::v1::{ServerReflection, ServerReflectionServer};

/// Name of the health service every server exposes.
pub const HEALTH: &str = "grpc.health.v1.Health";
/// Name of the reflection service every server exposes.
pub const REFLECTION: &str = "grpc.reflection.v1.ServerReflection";

/// Reflection over kstretch's and the health service's descriptors, listing `services`,
/// health and reflection.
pub fn reflection(
    services: &[&str],
) -> Result<ServerReflectionServer<impl ServerReflection>, tonic_reflection::server::Error> {
    let mut builder = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(kstretch_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET);
    for name in services.iter().chain(&[HEALTH, REFLECTION]) {
        builder = builder.with_service_name(*name);
    }
    builder.build_v1()
}
