//! Requests central hands to the live stream of one cluster and whose answer it waits for, by
//! request id: `RestartPod` → `RestartResult` ([`super::restart`]) and `ConnectCall` →
//! `ConnectAnswer` ([`super::connect`]). A request is never queued for a cluster whose agent
//! is not connected: it must be a current instruction, not one delivered whenever the agent
//! comes back.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kstretch_proto::agent::v1::{ConnectAnswer, ConnectCall, RestartPod, RestartResult};
use tokio::sync::{mpsc, oneshot};

/// Why a request has no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("the agent of cluster {0:?} is not connected")]
    NotConnected(String),
    #[error("the stream of cluster {0:?} ended before the agent answered")]
    StreamEnded(String),
    #[error("the agent of cluster {alias:?} did not answer within {timeout:?}")]
    Timeout { alias: String, timeout: Duration },
}

impl CallError {
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotConnected(_) => "AgentNotConnected",
            Self::StreamEnded(_) => "AgentStreamEnded",
            Self::Timeout { .. } => "AgentTimeout",
        }
    }
}

/// A request sent by id.
pub trait Request: Send + 'static {
    /// The prefix of its ids, for the logs (`restart-3`).
    const KIND: &'static str;
    fn set_id(&mut self, id: String);
}

/// The answer to a [`Request`], carrying its id.
pub trait Answer: Send + 'static {
    fn id(&self) -> &str;
}

impl Request for RestartPod {
    const KIND: &'static str = "restart";
    fn set_id(&mut self, id: String) {
        self.request_id = id;
    }
}

impl Answer for RestartResult {
    fn id(&self) -> &str {
        &self.request_id
    }
}

impl Request for ConnectCall {
    const KIND: &'static str = "connect";
    fn set_id(&mut self, id: String) {
        self.request_id = id;
    }
}

impl Answer for ConnectAnswer {
    fn id(&self) -> &str {
        &self.request_id
    }
}

struct State<Q, A> {
    next_id: u64,
    /// Who waits for which id, and the cluster it was sent to.
    pending: HashMap<String, (String, oneshot::Sender<A>)>,
    /// The live stream of each alias and its request queue.
    outboxes: BTreeMap<String, (u64, mpsc::Sender<Q>)>,
}

/// Requests of one kind in flight, shared by the streams and whoever sends them.
pub struct Calls<Q, A> {
    inner: Arc<Mutex<State<Q, A>>>,
}

impl<Q, A> Clone for Calls<Q, A> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<Q, A> Default for Calls<Q, A> {
    fn default() -> Self {
        Self {
            inner: Arc::new(Mutex::new(State {
                next_id: 0,
                pending: HashMap::new(),
                outboxes: BTreeMap::new(),
            })),
        }
    }
}

impl<Q, A> fmt::Debug for Calls<Q, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("Calls")
            .field("pending", &state.pending.len())
            .field("streams", &state.outboxes.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl<Q: Request, A: Answer> Calls<Q, A> {
    /// Makes `stream` the receiver of requests for `alias`, replacing an older stream.
    pub(crate) fn attach(&self, alias: &str, stream: u64) -> mpsc::Receiver<Q> {
        let (tx, rx) = mpsc::channel(16);
        self.lock().outboxes.insert(alias.to_owned(), (stream, tx));
        rx
    }

    /// Forgets `stream` if it is still the one of `alias`; requests waiting on it fail.
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
    pub(crate) fn resolve(&self, answer: A) {
        if let Some((_, waiter)) = self.lock().pending.remove(answer.id()) {
            let _ = waiter.send(answer);
        }
    }

    /// Sends `request` to the agent of `alias` and waits up to `timeout` for its answer.
    pub async fn ask(
        &self,
        alias: &str,
        mut request: Q,
        timeout: Duration,
    ) -> Result<A, CallError> {
        let (id, outbox, answer) = {
            let mut state = self.lock();
            let outbox = state
                .outboxes
                .get(alias)
                .map(|(_, tx)| tx.clone())
                .ok_or_else(|| CallError::NotConnected(alias.to_owned()))?;
            state.next_id += 1;
            let id = format!("{}-{}", Q::KIND, state.next_id);
            let (tx, rx) = oneshot::channel();
            state.pending.insert(id.clone(), (alias.to_owned(), tx));
            (id, outbox, rx)
        };
        request.set_id(id.clone());
        if outbox.send(request).await.is_err() {
            self.lock().pending.remove(&id);
            return Err(CallError::StreamEnded(alias.to_owned()));
        }
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(_)) => Err(CallError::StreamEnded(alias.to_owned())),
            Err(_) => {
                self.lock().pending.remove(&id);
                Err(CallError::Timeout {
                    alias: alias.to_owned(),
                    timeout,
                })
            }
        }
    }
}

impl<Q, A> Calls<Q, A> {
    // A poisoned lock only means a writer panicked mid-update of plain maps; keep serving.
    fn lock(&self) -> MutexGuard<'_, State<Q, A>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    type Connects = Calls<ConnectCall, ConnectAnswer>;

    fn call() -> ConnectCall {
        ConnectCall {
            namespace: "kafka".into(),
            connect: "c".into(),
            method: "GET".into(),
            path: "/connectors".into(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_request_waits_for_the_answer_with_its_id() {
        let calls = Connects::default();
        let mut requests = calls.attach("alpha", 1);
        let agent = {
            let calls = calls.clone();
            tokio::spawn(async move {
                let request = requests.recv().await.unwrap();
                assert_eq!(request.request_id, "connect-1");
                // A late answer to another request is dropped.
                calls.resolve(ConnectAnswer {
                    request_id: "connect-0".into(),
                    status: 500,
                    ..Default::default()
                });
                calls.resolve(ConnectAnswer {
                    request_id: request.request_id,
                    status: 200,
                    body: b"[]".to_vec(),
                    ..Default::default()
                });
            })
        };
        let answer = calls
            .ask("alpha", call(), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!((answer.status, answer.body.as_slice()), (200, &b"[]"[..]));
        agent.await.unwrap();
    }

    #[tokio::test]
    async fn no_stream_no_answer_and_a_dropped_stream_are_errors() {
        let calls = Connects::default();
        let err = calls
            .ask("beta", call(), Duration::from_secs(1))
            .await
            .unwrap_err();
        assert_eq!(err.reason(), "AgentNotConnected");

        let _requests = calls.attach("beta", 1);
        let err = calls
            .ask("beta", call(), Duration::from_millis(50))
            .await
            .unwrap_err();
        assert_eq!(err.reason(), "AgentTimeout");

        let mut requests = calls.attach("beta", 2);
        let detacher = {
            let calls = calls.clone();
            tokio::spawn(async move {
                requests.recv().await.unwrap();
                calls.detach("beta", 1); // an older stream: no effect
                calls.detach("beta", 2);
            })
        };
        let err = calls
            .ask("beta", call(), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(err.reason(), "AgentStreamEnded");
        detacher.await.unwrap();
    }
}
