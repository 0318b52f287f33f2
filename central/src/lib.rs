//! kstretch central as a library: the admin API, the watched inventory and the agent link, so
//! the binary wires them and tests drive the link in-process with a [`link::DesiredStates`]
//! they fill themselves.

pub mod admin;
pub mod connect;
pub mod connector;
pub mod controller;
pub mod finalizer;
pub mod grpc;
pub mod inventory;
pub mod kafka;
pub mod link;
pub mod metrics;
pub mod operation;
pub mod owned;
pub mod pki;
pub mod pod_template;
pub mod status;
pub mod topic;
pub mod user;
