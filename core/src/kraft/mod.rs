//! Per-node KRaft configuration: from a Kafka cluster resolved by central (listeners, user
//! options, node pools' nodes, how nodes reach each other) to each node's properties file, the
//! addresses and object names central needs, and the revision hash that decides rolls.

mod addressing;
mod config;
mod error;
mod forbidden;
pub mod metadata_log;
mod model;
pub mod properties;
pub mod recovery;
mod revision;
mod security;
mod tls;
mod uuid;
mod voters;

#[cfg(test)]
mod tests;

pub use addressing::{
    Endpoint, bootstrap_servers, bootstrap_service_name, headless_service_name, node_endpoint,
    per_node_service_name, pod_name, resolve_listener,
};
pub use config::{
    KAFKA_METRICS_REPORTER, NodeConfig, Rendered, YAMMER_METRICS_REPORTER, formatted_dirs,
    metadata_dir, render,
};
pub use error::ConfigError;
pub use forbidden::{
    ALLOWED_PER_LISTENER_CONFIGS, FORBIDDEN_PREFIX_EXCEPTIONS, FORBIDDEN_PREFIXES, is_allowed,
};
pub use model::{
    Addressing, Advertised, AdvertisedHost, Authentication, Authorization, CONTROLPLANE_LISTENER,
    CONTROLPLANE_PORT, DEFAULT_CLUSTERSET_DOMAIN, KafkaCluster, Listener, ListenerKind,
    METRICS_PORT, MetricsReporter, NODE_ADDRESS_DIR, NODE_ADDRESS_PROVIDER, Node, NodeAddress,
    QuorumMode, REPLICATION_LISTENER, REPLICATION_PORT, STANDARD_AUTHORIZER, Volume,
};
pub use revision::revision;
pub use tls::{
    CA_FILE, CERT_FILE, CERTS_DIR, CLIENTS_CA_FILE, CONFIG_PROVIDER, KEY_FILE, listener_cert_files,
    node_hostnames,
};
pub use uuid::{base64url, kafka_uuid, parse_uuid_text, uuid_text};
pub use voters::format_arguments;
