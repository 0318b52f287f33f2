//! Central's side of `RestartPod`: handing a restart to the live stream of a cluster and
//! waiting for the agent's `RestartResult`. A restart is never queued for a cluster whose agent
//! is not connected: a roll step must be a current instruction, not one delivered whenever
//! the agent comes back.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kstretch_proto::agent::v1::{RestartOutcome, RestartPod, RestartResult};
use tokio::sync::{mpsc, oneshot};

/// Why a restart has no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestartError {
    #[error("the agent of cluster {0:?} is not connected")]
    NotConnected(String),
    #[error("the stream of cluster {0:?} ended before the agent answered")]
    StreamEnded(String),
    #[error("the agent of cluster {alias:?} did not answer within {timeout:?}")]
    Timeout { alias: String, timeout: Duration },
}

impl RestartError {
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotConnected(_) => "AgentNotConnected",
            Self::StreamEnded(_) => "AgentStreamEnded",
            Self::Timeout { .. } => "AgentTimeout",
        }
    }
}

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

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    pending: HashMap<String, (String, oneshot::Sender<RestartResult>)>,
    /// The live stream of each alias and its command queue.
    outboxes: BTreeMap<String, (u64, mpsc::Sender<RestartPod>)>,
}

/// Restarts in flight, shared by the streams and whoever asks for restarts.
#[derive(Debug, Clone, Default)]
pub struct Restarts {
    inner: Arc<Mutex<State>>,
}

impl Restarts {
    /// Makes `stream` the receiver of restarts for `alias`, replacing an older stream.
    pub(crate) fn attach(&self, alias: &str, stream: u64) -> mpsc::Receiver<RestartPod> {
        let (tx, rx) = mpsc::channel(16);
        self.lock().outboxes.insert(alias.to_owned(), (stream, tx));
        rx
    }

    /// Forgets `stream` if it is still the one of `alias`; restarts waiting on it fail.
    pub(crate) fn detach(&self, alias: &str, stream: u64) {
        let mut state = self.lock();
        if state.outboxes.get(alias).map(|(s, _)| *s) == Some(stream) {
            state.outboxes.remove(alias);
            // Dropping the senders wakes the waiters with `StreamEnded`.
            state.pending.retain(|_, (a, _)| a != alias);
        }
    }

    /// Hands the agent's answer to whoever waits for it; unknown ids (a late answer after a
    /// timeout) are dropped.
    pub(crate) fn resolve(&self, result: RestartResult) {
        if let Some((_, waiter)) = self.lock().pending.remove(&result.request_id) {
            let _ = waiter.send(result);
        }
    }

    /// Asks the agent of `alias` to delete `pod` and waits up to `timeout` for its answer.
    pub async fn restart(
        &self,
        alias: &str,
        pod: PodToRestart,
        timeout: Duration,
    ) -> Result<RestartResult, RestartError> {
        let (id, outbox, answer) = {
            let mut state = self.lock();
            let outbox = state
                .outboxes
                .get(alias)
                .map(|(_, tx)| tx.clone())
                .ok_or_else(|| RestartError::NotConnected(alias.to_owned()))?;
            state.next_id += 1;
            let id = format!("restart-{}", state.next_id);
            let (tx, rx) = oneshot::channel();
            state.pending.insert(id.clone(), (alias.to_owned(), tx));
            (id, outbox, rx)
        };
        let request = RestartPod {
            request_id: id.clone(),
            namespace: pod.namespace,
            name: pod.name,
            uid: pod.uid,
            reason: pod.reason,
            claims: pod.claims,
        };
        if outbox.send(request).await.is_err() {
            self.lock().pending.remove(&id);
            return Err(RestartError::StreamEnded(alias.to_owned()));
        }
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(_)) => Err(RestartError::StreamEnded(alias.to_owned())),
            Err(_) => {
                self.lock().pending.remove(&id);
                Err(RestartError::Timeout {
                    alias: alias.to_owned(),
                    timeout,
                })
            }
        }
    }

    // A poisoned lock only means a writer panicked mid-update of plain maps; keep serving.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
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

    #[tokio::test]
    async fn no_stream_no_answer_and_a_dropped_stream_are_errors() {
        let restarts = Restarts::default();
        assert_eq!(
            restarts
                .restart("beta", pod(), Duration::from_secs(1))
                .await
                .unwrap_err()
                .reason(),
            "AgentNotConnected"
        );

        let _commands = restarts.attach("beta", 1);
        let err = restarts
            .restart("beta", pod(), Duration::from_millis(50))
            .await
            .unwrap_err();
        assert_eq!(err.reason(), "AgentTimeout");

        let mut commands = restarts.attach("beta", 2);
        let detacher = {
            let restarts = restarts.clone();
            tokio::spawn(async move {
                commands.recv().await.unwrap();
                restarts.detach("beta", 1); // an older stream: no effect
                restarts.detach("beta", 2);
            })
        };
        let err = restarts
            .restart("beta", pod(), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(err.reason(), "AgentStreamEnded");
        detacher.await.unwrap();
    }
}
