//! Cluster membership: DescribeCluster (with fenced brokers) and UnregisterBroker.

use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, UnregisterBrokerRequest};

use crate::client::{AdminClient, Retry, Target};
use crate::error::Error;

/// What DescribeCluster reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDescription {
    pub cluster_id: String,
    /// The broker Kafka names as controller. In KRaft, brokers cannot reach controllers
    /// directly, so Kafka reports some live *broker* here (requests to it are forwarded); use
    /// [`AdminClient::describe_quorum`] for the real metadata quorum leader.
    pub controller_id: Option<i32>,
    pub brokers: Vec<Broker>,
}

/// One registered broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    pub id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
    /// Registered but fenced (not heartbeating). Only ever true with `include_fenced`.
    pub fenced: bool,
}

impl AdminClient {
    /// Lists the registered brokers. With `include_fenced`, fenced brokers are listed too; that
    /// needs DescribeCluster v2 (Kafka 4.0+), and older brokers give [`Error::Unsupported`] so
    /// the caller can fall back to `include_fenced = false`.
    ///
    /// Retry: a read, retried on every transient failure.
    pub async fn describe_cluster(
        &self,
        include_fenced: bool,
    ) -> Result<ClusterDescription, Error> {
        let request = DescribeClusterRequest::default()
            .with_endpoint_type(1)
            .with_include_fenced_brokers(include_fenced);
        let min_version = if include_fenced { 2 } else { 0 };
        let response = self
            .call(Target::Any, Retry::Always, min_version, &request)
            .await?;
        let mut brokers: Vec<Broker> = response
            .brokers
            .into_iter()
            .map(|b| Broker {
                id: b.broker_id.0,
                host: b.host.to_string(),
                port: b.port,
                rack: b.rack.map(|r| r.to_string()),
                fenced: b.is_fenced,
            })
            .collect();
        brokers.sort_by_key(|b| b.id);
        Ok(ClusterDescription {
            cluster_id: response.cluster_id.to_string(),
            controller_id: Some(response.controller_id.0).filter(|id| *id >= 0),
            brokers,
        })
    }

    /// Removes a broker's registration from the KRaft metadata (after the broker is gone for
    /// good). [`Error::BrokerNotRegistered`] means there is nothing to remove: treat it as done.
    ///
    /// Retry: every transient failure, including a timeout after sending; repeating it cannot
    /// do harm, and if an earlier attempt already removed the broker the caller sees
    /// `BrokerNotRegistered`, which it treats as done anyway.
    pub async fn unregister_broker(&self, id: i32) -> Result<(), Error> {
        let request = UnregisterBrokerRequest::default().with_broker_id(BrokerId(id));
        self.call(Target::Any, Retry::Always, 0, &request).await?;
        Ok(())
    }
}
