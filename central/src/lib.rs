//! kstretch central as a library: the controllers, the admin API, the inventory and the agent
//! link, and [`wiring`], which starts one watch per kind and, on the leader, the controllers over
//! them, so the binary only parses flags, connects and serves, and tests drive the wiring against
//! an in-process apiserver or the link with a [`link::DesiredStates`] they fill themselves.

pub mod admin;
pub mod budget;
pub mod config_map;
pub mod connect;
pub mod connector;
pub mod controller;
pub mod error;
pub mod finalizer;
pub mod grpc;
pub mod inventory;
pub mod jmx_exporter;
pub mod kafka;
pub mod link;
pub mod logging;
pub mod metrics;
pub mod objects;
pub mod operation;
pub mod owned;
pub mod pki;
pub mod pod_template;
pub mod probes;
pub mod status;
#[cfg(test)]
mod testing;
pub mod topic;
pub mod unserved;
pub mod user;
pub mod wiring;
