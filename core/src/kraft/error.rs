//! Why no KRaft configuration can be generated for a cluster, with a stable reason each for the
//! `Ready=False` condition and metrics.

/// A cluster whose configuration cannot be generated; nothing may be rolled out until it is fixed
/// (or, for [`ConfigError::AddressPending`], until the node's service has an address).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "Kafka {kafka} has no node with the controller role: at least one is needed for the KRaft quorum"
    )]
    NoControllers { kafka: String },
    #[error("node ID {id} is used by more than one node (pools {first} and {second})")]
    DuplicateNodeId {
        id: i32,
        first: String,
        second: String,
    },
    #[error("node ID {id} of pool {pool} is negative")]
    InvalidNodeId { id: i32, pool: String },
    #[error("node {node} of pool {pool} has no roles")]
    NoRoles { node: i32, pool: String },
    #[error("node {node} of pool {pool} has no data volume")]
    NoVolumes { node: i32, pool: String },
    #[error(
        "node {node} of pool {pool} has {count} volumes marked kraftMetadata: shared; at most one may hold the KRaft metadata log"
    )]
    SeveralMetadataVolumes {
        node: i32,
        pool: String,
        count: usize,
    },
    #[error("node {node} of pool {pool} has two volumes mounted at the same path ({dir})")]
    DuplicateVolume {
        node: i32,
        pool: String,
        dir: String,
    },
    #[error("node {node} has no reachable address yet: its per-node service has not reported one")]
    AddressPending { node: i32 },
    #[error(
        "node {node} has no reachable port for listener {listener} yet: its per-node service has not reported one"
    )]
    PortPending { node: i32, listener: String },
    #[error("node {node} has no certificate yet")]
    CertificatePending { node: i32 },
    #[error(
        "node {node} runs in no named Kubernetes cluster, which multi-cluster service addressing needs"
    )]
    MissingClusterAlias { node: i32 },
    #[error("listener name {name:?} is invalid: it must match ^[a-z0-9]{{1,11}}$")]
    InvalidListenerName { name: String },
    #[error("listener name {name:?} is used by more than one listener")]
    DuplicateListenerName { name: String },
    #[error("listeners {first} and {second} both use port {port}")]
    ListenerPortClash {
        port: u16,
        first: String,
        second: String,
    },
    #[error(
        "listener {listener} uses port {port}, which is reserved (9090, 9091, 9404, 9999 and ports below 9092 are)"
    )]
    ForbiddenListenerPort { listener: String, port: u16 },
    #[error(
        "listener {listener} sets authentication type tls but tls: false; client certificates need TLS: set tls: true"
    )]
    CertificateAuthenticationWithoutTls { listener: String },
    #[error(
        "listener {listener} sets configuration.brokerCertChainAndKey but tls: false; a certificate is only presented over TLS: set tls: true or remove it"
    )]
    CertificateWithoutTls { listener: String },
    #[error("Kafka {kafka} has no listener {listener}")]
    UnknownListener { kafka: String, listener: String },
}

impl ConfigError {
    /// Stable reason for conditions and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NoControllers { .. } => "NoControllers",
            Self::DuplicateNodeId { .. } => "DuplicateNodeId",
            Self::InvalidNodeId { .. } => "InvalidNodeId",
            Self::NoRoles { .. } => "NodePoolWithoutRoles",
            Self::NoVolumes { .. }
            | Self::SeveralMetadataVolumes { .. }
            | Self::DuplicateVolume { .. } => "InvalidStorage",
            Self::AddressPending { .. } | Self::PortPending { .. } => "AddressPending",
            Self::CertificatePending { .. } => "CertificatePending",
            Self::MissingClusterAlias { .. } => "MissingClusterAlias",
            Self::InvalidListenerName { .. }
            | Self::DuplicateListenerName { .. }
            | Self::ListenerPortClash { .. }
            | Self::ForbiddenListenerPort { .. }
            | Self::CertificateAuthenticationWithoutTls { .. }
            | Self::CertificateWithoutTls { .. } => "InvalidListener",
            Self::UnknownListener { .. } => "UnknownListener",
        }
    }
}
