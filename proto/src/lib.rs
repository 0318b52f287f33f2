//! kstretch's gRPC contracts, generated from `proto/` at build time.
//!
//! Packages are versioned (`kstretch.admin.v1`, ...): a breaking change is a new package, so an
//! old CLI or agent keeps talking to a newer central.

/// The admin API of central, spoken by the `kstretch` CLI.
pub mod admin {
    pub mod v1 {
        tonic::include_proto!("kstretch.admin.v1");
    }
}

/// The link between central and the agent of each member cluster.
pub mod agent {
    pub mod v1 {
        tonic::include_proto!("kstretch.agent.v1");

        /// `Hello.capabilities`: the agent removes a whole owner's objects only when a snapshot
        /// declares the owner deleted, and confirms it in `ApplyReport.confirmed_deleted`.
        pub const EXPLICIT_DELETION: &str = "explicit-deletion";

        /// `Hello.capabilities`: the agent makes `ConnectCall`s to the Kafka Connect workers
        /// of its cluster and answers each with a `ConnectAnswer`.
        pub const CONNECT_CALLS: &str = "connect-calls";
    }
}

/// Encoded `FileDescriptorSet` of every package, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/kstretch_descriptor.bin"));
