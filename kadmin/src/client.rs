//! The client: its configuration, the per-broker connections learned from Metadata, routing
//! each request to a broker, and the bounded retry policy.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
use tracing::Instrument;

use crate::connection::{AdminRequest, Connection, Failure, dial};
use crate::error::{Error, KafkaError};
use crate::tls::Tls;

/// How to reach Kafka. Built with [`AdminConfig::new`]; fields may be set afterwards. It is
/// `non_exhaustive` so that TLS and SASL settings can be added without breaking callers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AdminConfig {
    /// "host:port" addresses to learn the cluster from.
    pub bootstrap: Vec<String>,
    /// Sent in every request header; shows up in broker logs and quotas.
    pub client_id: String,
    /// How long one request may wait for its response. Kafka-side operation timeouts
    /// (CreateTopics, ...) are set a little shorter so the broker answers first.
    pub request_timeout: Duration,
    /// How long opening a connection (TCP + ApiVersions) may take.
    pub connect_timeout: Duration,
    /// Further attempts after a transient failure, where the request's retry policy allows.
    pub retries: u32,
    /// Wait before the first retry; doubles for each further one.
    pub retry_backoff: Duration,
    /// TLS to every broker, or plaintext when `None`.
    pub tls: Option<Tls>,
}

impl AdminConfig {
    pub fn new<I, S>(bootstrap: I) -> AdminConfig
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        AdminConfig {
            bootstrap: bootstrap
                .into_iter()
                .map(Into::into)
                .map(|a| a.trim().to_owned())
                .filter(|a| !a.is_empty())
                .collect(),
            client_id: "kstretch".to_owned(),
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            retries: 3,
            retry_backoff: Duration::from_millis(200),
            tls: None,
        }
    }

    pub fn with_client_id(mut self, client_id: impl Into<String>) -> AdminConfig {
        self.client_id = client_id.into();
        self
    }

    pub fn with_request_timeout(mut self, timeout: Duration) -> AdminConfig {
        self.request_timeout = timeout;
        self
    }

    pub fn with_connect_timeout(mut self, timeout: Duration) -> AdminConfig {
        self.connect_timeout = timeout;
        self
    }

    pub fn with_tls(mut self, tls: Tls) -> AdminConfig {
        self.tls = Some(tls);
        self
    }

    pub fn with_retries(mut self, retries: u32, backoff: Duration) -> AdminConfig {
        self.retries = retries;
        self.retry_backoff = backoff;
        self
    }

    fn validate(&self) -> Result<(), Error> {
        if self.bootstrap.is_empty() {
            return Err(Error::Config("no bootstrap address".to_owned()));
        }
        for address in &self.bootstrap {
            let port = address
                .rsplit_once(':')
                .map(|(_, port)| port.parse::<u16>());
            if !matches!(port, Some(Ok(_))) {
                return Err(Error::Config(format!(
                    "bootstrap address {address:?} is not host:port"
                )));
            }
        }
        if self.request_timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(Error::Config("timeouts must be positive".to_owned()));
        }
        Ok(())
    }
}

/// An async Kafka admin client. Cheap to clone: clones share connections.
#[derive(Debug, Clone)]
pub struct AdminClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: AdminConfig,
    bootstrap: Vec<Arc<Node>>,
    /// Live brokers from the last Metadata response, by node id.
    brokers: Mutex<BTreeMap<i32, Arc<Node>>>,
    /// Spreads requests for "any broker" over the brokers.
    rotation: AtomicUsize,
}

/// One broker address and its lazily opened connection. The async mutex serializes the
/// exchanges on the connection; `None` means closed (never opened, or dropped after a failure)
/// and is reopened by the next request.
#[derive(Debug)]
struct Node {
    id: Option<i32>,
    address: String,
    conn: tokio::sync::Mutex<Option<Connection>>,
}

impl Node {
    fn new(id: Option<i32>, address: String) -> Arc<Node> {
        Arc::new(Node {
            id,
            address,
            conn: tokio::sync::Mutex::new(None),
        })
    }
}

/// Where a request must go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// Any live broker. KRaft brokers forward controller requests (CreateTopics,
    /// UnregisterBroker, IncrementalAlterConfigs, DescribeQuorum, ...) to the active controller.
    Any,
    /// That broker (its own broker configs).
    Broker(i32),
}

/// What may be retried after a transient failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Reads, and writes whose repetition lands in the same state (set a config, reassign to a
    /// replica list): retry every transient failure, including timeouts after sending.
    Always,
    /// Writes whose repetition would not be clean (a second CreateTopics answers
    /// TOPIC_ALREADY_EXISTS for the topic the first created): retry only when the request
    /// provably did not run: the connection failed before it was written, or Kafka answered
    /// NOT_CONTROLLER. A timeout or lost connection after sending is returned to the caller,
    /// who re-reads the state.
    UnlessSent,
}

impl AdminClient {
    /// Validates the configuration and learns the brokers from a bootstrap broker. Fails with
    /// [`Error::Unreachable`] when no bootstrap address answers.
    pub async fn connect(config: AdminConfig) -> Result<AdminClient, Error> {
        config.validate()?;
        let bootstrap = config
            .bootstrap
            .iter()
            .map(|a| Node::new(None, a.clone()))
            .collect();
        let client = AdminClient {
            inner: Arc::new(Inner {
                config,
                bootstrap,
                brokers: Mutex::new(BTreeMap::new()),
                rotation: AtomicUsize::new(0),
            }),
        };
        client.refresh_brokers().await?;
        Ok(client)
    }

    pub fn config(&self) -> &AdminConfig {
        &self.inner.config
    }

    /// The brokers (id, "host:port") from the last Metadata response.
    pub fn known_brokers(&self) -> Vec<(i32, String)> {
        self.brokers()
            .iter()
            .map(|(id, node)| (*id, node.address.clone()))
            .collect()
    }

    /// Operation timeout to put in request bodies: shorter than the client's own, so the
    /// broker's answer (with per-item results) arrives before the client gives up.
    pub(crate) fn operation_timeout_ms(&self) -> i32 {
        let ms = self.inner.config.request_timeout.as_millis() * 4 / 5;
        i32::try_from(ms).unwrap_or(i32::MAX)
    }

    /// Re-reads the broker list.
    pub async fn refresh_brokers(&self) -> Result<(), Error> {
        let request = MetadataRequest::default().with_topics(Some(Vec::new()));
        self.metadata(&request, 1).await.map(|_| ())
    }

    /// `refresh_brokers` for use inside `call`: routing to a broker may need a refresh, which is
    /// itself a call, and async recursion needs a boxed future.
    fn refresh_brokers_boxed(
        &self,
    ) -> Pin<Box<dyn Future<Output = Result<(), Error>> + Send + '_>> {
        Box::pin(self.refresh_brokers())
    }

    /// Sends a Metadata request and remembers the brokers it lists.
    pub(crate) async fn metadata(
        &self,
        request: &MetadataRequest,
        min_version: i16,
    ) -> Result<MetadataResponse, Error> {
        let response = self
            .call(Target::Any, Retry::Always, min_version, request)
            .await?;
        self.learn_brokers(&response);
        Ok(response)
    }

    /// Metadata for named topics (or all with `None`), never creating any.
    pub(crate) fn metadata_request(names: Option<&[String]>) -> MetadataRequest {
        let topics = names.map(|names| {
            names
                .iter()
                .map(|n| {
                    MetadataRequestTopic::default().with_name(Some(n.clone().into_topic_name()))
                })
                .collect()
        });
        MetadataRequest::default()
            .with_topics(topics)
            .with_allow_auto_topic_creation(false)
    }

    fn learn_brokers(&self, response: &MetadataResponse) {
        let mut brokers = self.lock_brokers();
        let mut next = BTreeMap::new();
        for b in &response.brokers {
            let id = b.node_id.0;
            let address = if b.host.contains(':') {
                format!("[{}]:{}", b.host, b.port)
            } else {
                format!("{}:{}", b.host, b.port)
            };
            // Keep the open connection when the broker did not move.
            let node = match brokers.get(&id) {
                Some(node) if node.address == address => node.clone(),
                _ => Node::new(Some(id), address),
            };
            next.insert(id, node);
        }
        *brokers = next;
    }

    fn lock_brokers(&self) -> std::sync::MutexGuard<'_, BTreeMap<i32, Arc<Node>>> {
        // A panic elsewhere cannot leave the map half-written (one assignment), so a poisoned
        // lock is still usable.
        self.inner
            .brokers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn brokers(&self) -> BTreeMap<i32, Arc<Node>> {
        self.lock_brokers().clone()
    }

    async fn broker(&self, id: i32) -> Result<Arc<Node>, Error> {
        if let Some(node) = self.lock_brokers().get(&id) {
            return Ok(node.clone());
        }
        self.refresh_brokers_boxed().await?;
        self.lock_brokers()
            .get(&id)
            .cloned()
            .ok_or(Error::UnknownBroker(id))
    }

    /// Sends `request` to `target` at the highest common version (at least `min_version`),
    /// retrying transient failures as `retry` allows, and turns a whole-response error code
    /// into an error.
    pub(crate) async fn call<R: AdminRequest>(
        &self,
        target: Target,
        retry: Retry,
        min_version: i16,
        request: &R,
    ) -> Result<R::Response, Error> {
        let config = &self.inner.config;
        let mut backoff = config.retry_backoff;
        let mut attempt = 0;
        loop {
            let result = match target {
                Target::Any => self.attempt_any(request, min_version).await,
                Target::Broker(id) => match self.broker(id).await {
                    Ok(node) => self.attempt(&node, request, min_version).await,
                    Err(error) => Err(Failure { error, sent: false }),
                },
            };
            let failure = match result {
                Ok(response) => {
                    let (code, message) = R::top_error(&response);
                    let Some(kafka) = KafkaError::from_code(code, message) else {
                        return Ok(response);
                    };
                    // Kafka answered, so the request was delivered.
                    Failure {
                        error: Error::from_kafka(R::KEY, kafka),
                        sent: true,
                    }
                }
                Err(failure) => failure,
            };
            let retriable = may_retry(retry, &failure);
            let error = failure.error;
            if !retriable || attempt >= config.retries {
                return Err(error);
            }
            attempt += 1;
            tracing::debug!(api = ?R::KEY, attempt, %error, ?backoff, "retrying Kafka request");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
            // Connection failures may mean the broker set changed.
            if matches!(
                error,
                Error::Unreachable { .. } | Error::Disconnected { .. }
            ) && target != Target::Any
            {
                let _ = self.refresh_brokers_boxed().await;
            }
        }
    }

    /// One attempt on "any broker": the known brokers in rotation, then the bootstrap
    /// addresses, moving on while connections fail before anything was sent.
    async fn attempt_any<R: AdminRequest>(
        &self,
        request: &R,
        min_version: i16,
    ) -> Result<R::Response, Failure> {
        let brokers: Vec<Arc<Node>> = self.brokers().into_values().collect();
        let start = self.inner.rotation.fetch_add(1, Ordering::Relaxed);
        let rotated = (0..brokers.len()).map(|i| &brokers[(start + i) % brokers.len()]);
        let mut failures = Vec::new();
        for node in rotated.chain(self.inner.bootstrap.iter()) {
            match self.attempt(node, request, min_version).await {
                Err(Failure {
                    error: Error::Unreachable { message, .. },
                    sent: false,
                }) => failures.push(format!("{}: {message}", node.address)),
                other => return other,
            }
        }
        Err(Failure {
            error: Error::Unreachable {
                address: self.inner.config.bootstrap.join(","),
                message: failures.join("; "),
            },
            sent: false,
        })
    }

    /// One exchange with one broker, opening its connection first when needed.
    async fn attempt<R: AdminRequest>(
        &self,
        node: &Node,
        request: &R,
        min_version: i16,
    ) -> Result<R::Response, Failure> {
        let span = tracing::debug_span!(
            "kafka_request",
            api = ?R::KEY,
            broker = node.id,
            address = %node.address,
            version = tracing::field::Empty,
        );
        async {
            let config = &self.inner.config;
            let mut slot = node.conn.lock().await;
            let conn = match &mut *slot {
                Some(conn) => conn,
                empty => empty.insert(self.open(node).await?),
            };
            let version = conn
                .version_for::<R>(min_version)
                .map_err(|error| Failure { error, sent: false })?;
            tracing::Span::current().record("version", version);
            match tokio::time::timeout(config.request_timeout, conn.request(request, version)).await
            {
                Ok(Ok(response)) => {
                    tracing::debug!("answered");
                    Ok(response)
                }
                Ok(Err(failure)) => {
                    tracing::debug!(error = %failure.error, "failed");
                    if failure.sent {
                        // The stream position is unknown; never reuse it.
                        *slot = None;
                    }
                    Err(failure)
                }
                Err(_) => {
                    tracing::debug!("timed out");
                    // A late response would be read as the answer to the next request.
                    *slot = None;
                    Err(Failure {
                        error: Error::Timeout {
                            api: R::KEY,
                            address: node.address.clone(),
                            after: config.request_timeout,
                        },
                        sent: true,
                    })
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Dials and negotiates versions; nothing the caller asked for has been sent yet.
    async fn open(&self, node: &Node) -> Result<Connection, Failure> {
        let config = &self.inner.config;
        let unsent = |error| Failure { error, sent: false };
        let stream = dial(&node.address, config.connect_timeout, config.tls.as_ref())
            .await
            .map_err(unsent)?;
        let handshake = Connection::handshake(&node.address, stream, &config.client_id);
        match tokio::time::timeout(config.connect_timeout, handshake).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(Error::Disconnected { message, .. })) => Err(unsent(Error::Unreachable {
                address: node.address.clone(),
                message: format!("connection closed during ApiVersions: {message}"),
            })),
            Ok(Err(error)) => Err(unsent(error)),
            Err(_) => Err(unsent(Error::Unreachable {
                address: node.address.clone(),
                message: format!("no ApiVersions answer within {:?}", config.connect_timeout),
            })),
        }
    }
}

/// Whether a failed attempt may be repeated under `retry`.
fn may_retry(retry: Retry, failure: &Failure) -> bool {
    let error = &failure.error;
    error.is_transient()
        && match retry {
            Retry::Always => true,
            Retry::UnlessSent => !failure.sent || error.is_not_applied(),
        }
}

/// `String` to the protocol's topic name type.
pub(crate) trait IntoTopicName {
    fn into_topic_name(self) -> kafka_protocol::messages::TopicName;
}

impl IntoTopicName for String {
    fn into_topic_name(self) -> kafka_protocol::messages::TopicName {
        kafka_protocol::messages::TopicName(self.into())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn config_defaults_and_trimming() {
        let c = AdminConfig::new("a:1, b:2,,".split(','));
        assert_eq!(c.bootstrap, ["a:1", "b:2"]);
        assert_eq!(c.client_id, "kstretch");
        c.validate().unwrap();
    }

    #[test]
    fn bad_configs_are_rejected() {
        let none = AdminConfig::new(Vec::<String>::new());
        assert!(
            none.validate()
                .unwrap_err()
                .to_string()
                .contains("no bootstrap")
        );
        let no_port = AdminConfig::new(["kafka"]);
        assert!(matches!(no_port.validate(), Err(Error::Config(_))));
        let bad_port = AdminConfig::new(["kafka:x"]);
        assert_eq!(
            bad_port.validate().unwrap_err().reason(),
            "KafkaConfigInvalid"
        );
        let zero = AdminConfig::new(["kafka:9092"]).with_request_timeout(Duration::ZERO);
        assert!(zero.validate().is_err());
    }

    #[tokio::test]
    async fn connect_rejects_a_bad_config_without_network() {
        let e = AdminClient::connect(AdminConfig::new(["nohost"]))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e}");
    }

    #[test]
    fn retry_policy_per_failure() {
        let failure = |error: Error, sent: bool| Failure { error, sent };
        let unreachable = || Error::Unreachable {
            address: "a:1".into(),
            message: "refused".into(),
        };
        let timeout = || Error::Timeout {
            api: ApiKey::CreateTopics,
            address: "a:1".into(),
            after: Duration::from_secs(1),
        };
        let kafka = |code| {
            Error::from_kafka(
                ApiKey::CreateTopics,
                KafkaError::from_code(code, None).unwrap(),
            )
        };
        // Not sent: always safe to repeat.
        assert!(may_retry(Retry::UnlessSent, &failure(unreachable(), false)));
        assert!(may_retry(Retry::Always, &failure(unreachable(), false)));
        // A timeout after sending: only idempotent requests repeat.
        assert!(may_retry(Retry::Always, &failure(timeout(), true)));
        assert!(!may_retry(Retry::UnlessSent, &failure(timeout(), true)));
        // NOT_CONTROLLER: refused before it ran, so even non-idempotent ones repeat.
        assert!(may_retry(Retry::UnlessSent, &failure(kafka(41), true)));
        // NOT_LEADER_OR_FOLLOWER: a voter change forwarded to a controller that does not lead.
        assert!(may_retry(Retry::UnlessSent, &failure(kafka(6), true)));
        // REQUEST_TIMED_OUT from Kafka: may have run.
        assert!(may_retry(Retry::Always, &failure(kafka(7), true)));
        assert!(!may_retry(Retry::UnlessSent, &failure(kafka(7), true)));
        // Permanent errors never repeat.
        assert!(!may_retry(Retry::Always, &failure(kafka(36), true)));
        assert!(!may_retry(
            Retry::Always,
            &failure(Error::UnknownBroker(9), false)
        ));
    }

    use bytes::{Buf, BufMut, BytesMut};
    use kafka_protocol::messages::ApiKey;
    use std::sync::atomic::AtomicU32;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// A broker that negotiates versions (old-broker ApiVersions fallback, so every answer has
    /// the simple v0-v2 layout), answers Metadata v1 with no brokers, and never answers anything
    /// else. Counts the requests it swallowed.
    struct SilentBroker {
        address: String,
        swallowed: Arc<AtomicU32>,
    }

    impl SilentBroker {
        async fn start() -> SilentBroker {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap().to_string();
            let swallowed = Arc::new(AtomicU32::new(0));
            let counter = swallowed.clone();
            tokio::spawn(async move {
                loop {
                    let (s, _) = listener.accept().await.unwrap();
                    tokio::spawn(Self::serve(s, counter.clone()));
                }
            });
            SilentBroker { address, swallowed }
        }

        async fn serve(mut s: TcpStream, swallowed: Arc<AtomicU32>) {
            loop {
                let Ok(size) = s.read_i32().await else { return };
                let mut frame = vec![0; size as usize];
                if s.read_exact(&mut frame).await.is_err() {
                    return;
                }
                let mut b = &frame[..];
                let (key, version, id) = (b.get_i16(), b.get_i16(), b.get_i32());
                let mut body = BytesMut::new();
                match (key, version) {
                    (18, 2) => {
                        let keys: [(i16, i16, i16); 4] =
                            [(18, 0, 2), (3, 1, 1), (19, 5, 5), (60, 0, 0)];
                        body.put_i16(0);
                        body.put_i32(keys.len() as i32);
                        for (k, min, max) in keys {
                            body.put_i16(k);
                            body.put_i16(min);
                            body.put_i16(max);
                        }
                        body.put_i32(0);
                    }
                    (18, _) => {
                        body.put_i16(35);
                        body.put_i32(1);
                        body.put_i16(18);
                        body.put_i16(0);
                        body.put_i16(2);
                    }
                    (3, 1) => {
                        body.put_i32(0); // brokers
                        body.put_i32(-1); // controller
                        body.put_i32(0); // topics
                    }
                    _ => {
                        swallowed.fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                }
                let mut out = BytesMut::new();
                out.put_i32(4 + body.len() as i32);
                out.put_i32(id);
                out.put_slice(&body);
                if s.write_all(&out).await.is_err() {
                    return;
                }
            }
        }
    }

    fn quick(address: &str) -> AdminConfig {
        AdminConfig::new([address])
            .with_request_timeout(Duration::from_millis(200))
            .with_retries(2, Duration::from_millis(10))
    }

    #[tokio::test]
    async fn idempotent_requests_are_retried_after_a_timeout() {
        let broker = SilentBroker::start().await;
        let admin = AdminClient::connect(quick(&broker.address)).await.unwrap();
        let e = admin.describe_cluster(false).await.unwrap_err();
        assert!(
            matches!(
                e,
                Error::Timeout {
                    api: ApiKey::DescribeCluster,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(e.reason(), "KafkaTimeout");
        assert_eq!(broker.swallowed.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn non_idempotent_requests_are_not_repeated_after_a_timeout() {
        let broker = SilentBroker::start().await;
        let admin = AdminClient::connect(quick(&broker.address)).await.unwrap();
        let topics = [crate::NewTopic::new("t", 1, 1)];
        let e = admin.create_topics(&topics, false).await.unwrap_err();
        assert!(
            matches!(
                e,
                Error::Timeout {
                    api: ApiKey::CreateTopics,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(broker.swallowed.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_broker_without_an_api_is_unsupported_without_sending() {
        let broker = SilentBroker::start().await;
        let admin = AdminClient::connect(quick(&broker.address)).await.unwrap();
        // DescribeCluster v0 only: fenced brokers need v2.
        let e = admin.describe_cluster(true).await.unwrap_err();
        assert!(
            matches!(
                e,
                Error::Unsupported {
                    api: ApiKey::DescribeCluster,
                    ..
                }
            ),
            "{e}"
        );
        // No UnregisterBroker at all.
        let e = admin.unregister_broker(1).await.unwrap_err();
        assert_eq!(e.reason(), "KafkaUnsupported");
        // Topic IDs need Metadata v10.
        let e = admin.describe_topics(None).await.unwrap_err();
        assert!(
            matches!(
                e,
                Error::Unsupported {
                    api: ApiKey::Metadata,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(broker.swallowed.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn operation_timeout_is_shorter_than_the_request_timeout() {
        let client = AdminClient {
            inner: Arc::new(Inner {
                config: AdminConfig::new(["a:1"]).with_request_timeout(Duration::from_secs(10)),
                bootstrap: Vec::new(),
                brokers: Mutex::new(BTreeMap::new()),
                rotation: AtomicUsize::new(0),
            }),
        };
        assert_eq!(client.operation_timeout_ms(), 8000);
    }
}
