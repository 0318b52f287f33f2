//! Central's side of `RestartPod`: asking the agent of a cluster to delete one pod so that
//! its podset recreates it, and reading its `RestartResult` (sent and awaited through
//! [`super::calls`]).

use std::time::Duration;

use kstretch_proto::agent::v1::{RestartOutcome, RestartPod, RestartResult};

use super::calls::{CallError, Calls};

/// Restarts in flight, shared by the streams and whoever asks for restarts.
pub type Restarts = Calls<RestartPod, RestartResult>;

/// One pod to restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodToRestart {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub reason: String,
    /// Claims deleted with the pod (new, empty disks); empty for a restart.
    pub claims: Vec<String>,
}

impl Restarts {
    /// Asks the agent of `alias` to delete `pod` and waits up to `timeout` for its answer.
    pub async fn restart(
        &self,
        alias: &str,
        pod: PodToRestart,
        timeout: Duration,
    ) -> Result<RestartResult, CallError> {
        let request = RestartPod {
            request_id: String::new(),
            namespace: pod.namespace,
            name: pod.name,
            uid: pod.uid,
            reason: pod.reason,
            claims: pod.claims,
        };
        self.ask(alias, request, timeout).await
    }
}

/// True when the restart result means the pod is (being) replaced.
pub fn replaced(result: &RestartResult) -> bool {
    matches!(
        result.outcome(),
        RestartOutcome::Deleted | RestartOutcome::Gone
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn pod() -> PodToRestart {
        PodToRestart {
            namespace: "kafka".into(),
            name: "c-b-1".into(),
            uid: "u".into(),
            reason: "revision changed".into(),
            claims: Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_restart_waits_for_the_agents_answer() {
        let restarts = Restarts::default();
        let mut commands = restarts.attach("alpha", 1);
        let agent = {
            let restarts = restarts.clone();
            tokio::spawn(async move {
                let request = commands.recv().await.unwrap();
                assert_eq!(request.name, "c-b-1");
                restarts.resolve(RestartResult {
                    request_id: request.request_id,
                    outcome: RestartOutcome::Deleted.into(),
                    message: String::new(),
                });
            })
        };
        let result = restarts
            .restart("alpha", pod(), Duration::from_secs(5))
            .await
            .unwrap();
        assert!(replaced(&result));
        agent.await.unwrap();
    }
}
