//! What every stream of the agent link shares ([`Link`]) and the link's timings.

use std::time::Duration;

use kstretch_runtime::Health;
use tokio_util::sync::CancellationToken;

use super::agents::Agents;
use super::connect;
use super::desired::DesiredStates;
use super::metrics::LinkMetrics;
use super::restart;

/// Largest message either side accepts: a snapshot of a big cluster (hundreds of podsets with
/// full pod specs, their ConfigMaps) is far beyond gRPC's 4 MiB default.
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// Timings of the link.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// How often each side sends a heartbeat; three silent intervals end a stream.
    pub heartbeat: Duration,
    /// How long a new stream may take to send `Hello`.
    pub hello_timeout: Duration,
    /// How often the current snapshot is sent again although it did not change.
    pub resync: Duration,
    /// This central's term: agents obey the highest they have seen and refuse a lower one,
    /// so a central replaced after its cluster was lost cannot drive them when it returns.
    pub term: u64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            heartbeat: Duration::from_secs(10),
            hello_timeout: Duration::from_secs(10),
            resync: Duration::from_secs(300),
            term: 1,
        }
    }
}

/// Everything the link's streams share. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Link {
    pub agents: Agents,
    pub desired: DesiredStates,
    pub restarts: restart::Restarts,
    pub connect_calls: connect::ConnectCalls,
    pub metrics: LinkMetrics,
    pub config: LinkConfig,
    pub(super) health: Option<Health>,
    pub(super) shutdown: CancellationToken,
}

impl Link {
    /// A link serving `desired`; streams end when `shutdown` is cancelled.
    pub fn new(
        desired: DesiredStates,
        metrics: LinkMetrics,
        config: LinkConfig,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            agents: Agents::new(),
            desired,
            restarts: restart::Restarts::default(),
            connect_calls: connect::ConnectCalls::default(),
            metrics,
            config,
            health: None,
            shutdown,
        }
    }

    /// Reports the connected agents in the readiness check `link` (always passing: central
    /// must serve whether or not agents are connected).
    pub fn with_health(mut self, health: Health) -> Self {
        health.set_ready("link", true, "no agent connected");
        self.health = Some(health);
        self
    }

    /// Updates the connected-agents gauge and readiness detail after a stream came or went.
    pub(super) fn refresh(&self) {
        let connected = self.agents.connected();
        self.metrics
            .connected_agents
            .set(i64::try_from(connected.len()).unwrap_or(i64::MAX));
        if let Some(health) = &self.health {
            let detail = if connected.is_empty() {
                "no agent connected".to_owned()
            } else {
                format!("agents connected: {}", connected.join(", "))
            };
            health.set_ready("link", true, detail);
        }
    }
}
